# Shared prologue of the CLI test scripts (tests/cli/*_test.sh): arguments, a temporary folder removed on
# exit, pass/fail counting and exit-code checks. Each script starts with
#   source "$(dirname "$0")/lib.sh" "$@"
# and ends with `finish`. Arguments: BRAID_BINARY SOURCE_DIR SHARED_DIR.
set -uo pipefail
braid=$1
src=$2
shared=${3:-}
rc_dir=$shared/realcases
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
passed=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { passed=$((passed + 1)); }
# expect_rc WANT DESCRIPTION -- command...: runs the command with stdout in $tmp/out and stderr in $tmp/err.
expect_rc() {
  local want=$1 what=$2
  shift 3
  "$@" >"$tmp/out" 2>"$tmp/err"
  local got=$?
  if [ "$got" -ne "$want" ]; then
    fail "$what: exit $got, want $want"
    sed 's/^/    | /' "$tmp/err" | head -5
  else
    ok
  fi
}
# finish: prints the tally; the script's exit status is 0 only when nothing failed.
finish() {
  echo "$passed passed, $failures failed"
  [ "$failures" -eq 0 ]
}
