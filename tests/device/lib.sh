# shellcheck shell=bash
# Shared prologue of the device-script tests (tests/device/*_test.sh): a temporary folder removed on exit (kept when
# KEEP is set), pass/fail counting, exit-code checks and the closing tally. Each script sets EXPECT_TIMEOUT (seconds
# a checked command may run) if it needs other than 60, then
#   source "$(dirname "$0")/lib.sh" NAME
# and ends with `finish`. Exit status of finish: 0 when every check passed, 1 otherwise.
tmp=$(mktemp -d "/tmp/braid-$1.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); }
fail() {
  echo "FAIL: $*"
  failed=$((failed + 1))
}
# expect_rc CODE LABEL -- CMD...: CMD's exit status is CODE; stdout in $tmp/out, stderr in $tmp/err.
expect_rc() {
  local want=$1 label=$2
  shift 3
  local rc=0
  timeout "${EXPECT_TIMEOUT:-60}" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  if [ "$rc" = "$want" ]; then ok; else fail "$label: exit $rc, expected $want; $(tail -n 5 "$tmp/err" "$tmp/out")"; fi
}
finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" = 0 ]
}
