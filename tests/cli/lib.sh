# Shared prologue of the CLI test scripts (tests/cli/*_test.sh): arguments, a temporary folder removed on
# exit, pass/fail counting and exit-code checks. Each script starts with
#   source "$(dirname "$0")/lib.sh" "$@"
# and ends with `finish`. Arguments: BRAID_BINARY SOURCE_DIR SHARED_DIR. Exit status: 0 when every check passed,
# 1 when one failed, 77 when none failed but a group of checks was skipped (ctest reports 77 as "Skipped":
# SKIP_RETURN_CODE on the cli.* tests in tests/CMakeLists.txt).
set -uo pipefail
braid=$1
src=$2
shared=${3:-}
rc_dir=$shared/realcases
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
passed=0
skipped=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { passed=$((passed + 1)); }
# skip REASON: a group of checks cannot run here because an input or a tool is absent (never because an input
# that exists fails to load: that is a failure).
skip() { echo "SKIP: $*"; skipped=$((skipped + 1)); }
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
# finish: prints the tally and exits 1 when a check failed, else 77 when a group was skipped, else 0.
finish() {
  echo "$passed passed, $failures failed, $skipped skipped"
  [ "$failures" -eq 0 ] || exit 1
  [ "$skipped" -eq 0 ] || exit 77
  exit 0
}
