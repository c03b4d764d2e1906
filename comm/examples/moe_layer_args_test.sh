# Argument checks of moe_layer_example (comm/examples/moe_layer.c): each bad command line exits 2 with the usage
# on stderr and nothing on stdout, before any rank starts; the extremes of the accepted ranges run and pass.
# Argument: the moe_layer_example binary.
set -uo pipefail
example=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

# expect ARGS...: the example run with ARGS exits 2, prints "usage:" on stderr and nothing on stdout.
expect_usage() {
  "$example" "$@" >"$tmp/out" 2>"$tmp/err"
  local got=$?
  if [ "$got" -ne 2 ] || ! grep -q '^usage:' "$tmp/err" || [ -s "$tmp/out" ]; then
    echo "FAIL: moe_layer_example $*: exit $got (want 2), stderr:"
    sed 's/^/    | /' "$tmp/err" | head -5
    failures=$((failures + 1))
  fi
}

expect_usage -5                          # strtoull would wrap this to 2^64 - 5
expect_usage 1000000000 1000000000       # past both ranges (and their product past size_t)
expect_usage abc                         # no digits: strtoull gives 0
expect_usage 12abc                       # trailing garbage
expect_usage 0                           # no tokens
expect_usage 16 0                        # no hidden
expect_usage ''                          # empty
expect_usage ' 16'                       # leading space
expect_usage +16                         # sign
expect_usage 65537                       # one past the token limit
expect_usage 16 4097                     # one past the hidden limit
expect_usage 65536 128                   # product 2^23, past 2^22
expect_usage 99999999999999999999999 16  # past unsigned long long (ERANGE)
expect_usage 16 16 16                    # too many arguments

# The smallest layer runs and its distributed result equals the local one.
if ! "$example" 1 1 >"$tmp/out" 2>"$tmp/err" || ! grep -q 'equals the local one' "$tmp/out"; then
  echo "FAIL: moe_layer_example 1 1 did not pass"
  sed 's/^/    | /' "$tmp/err" | head -5
  failures=$((failures + 1))
fi
# Capacity = ceil(1.25 x tokens x top-2 / 8 experts), computed here with awk: 1 token -> 1 (floor gave 0 and
# dropped every slot), 13 -> 5 (floor 4), 64 -> 20. Every rank prints it.
for tokens in 1 13 64; do
  want=$(awk -v t="$tokens" 'BEGIN { c = 1.25 * t * 2 / 8; print (c == int(c)) ? c : int(c) + 1 }')
  "$example" "$tokens" 2 >"$tmp/out" 2>"$tmp/err"
  got=$(grep -c "dropped by capacity $want," "$tmp/out")
  if [ "$got" -ne 4 ] || ! grep -q 'equals the local one' "$tmp/out"; then
    echo "FAIL: moe_layer_example $tokens 2: $got of 4 ranks report capacity $want: $(head -2 "$tmp/out")"
    failures=$((failures + 1))
  fi
done
[ "$failures" -eq 0 ] && echo "all argument checks passed"
[ "$failures" -eq 0 ]
