#!/usr/bin/env bash
# nccl_net_benchmark's command line: --help prints the usage and exits 0 at once; sizes take nccl-tests syntax
# (--size 2G is 2 GiB, above the 1 GiB limit, not 2 bytes); a malformed value, a flag without its value and an
# unknown flag exit 2 without running the benchmark. Every call is bounded by `timeout` (a benchmark run takes
# seconds: a regression shows as a timeout or a wrong status).
# Usage: nccl_net_benchmark_args_test.sh NCCL_NET_BENCHMARK
bench=$1
failures=0
check() {  # check WANT_RC WHAT GREP_PATTERN ARGS...
  local want=$1 what=$2 pattern=$3
  shift 3
  timeout 10 "$bench" "$@" >/tmp/nnb_out.$$ 2>/tmp/nnb_err.$$
  local rc=$?
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL: $what: exit $rc, want $want: $(head -2 /tmp/nnb_err.$$)"
    failures=$((failures + 1))
  elif ! cat /tmp/nnb_out.$$ /tmp/nnb_err.$$ | grep -qF -- "$pattern"; then
    echo "FAIL: $what: no '$pattern' in: $(head -2 /tmp/nnb_out.$$ /tmp/nnb_err.$$)"
    failures=$((failures + 1))
  else
    echo "ok: $what"
  fi
}
check 0 "--help" "usage: " --help
check 0 "-h after a flag" "usage: " --window 2 -h
check 2 "--size without a value" "--size needs a value" --size
check 2 "--repeat without a value" "--repeat needs a value" --size 1M --repeat
check 2 "--size 2G (nccl-tests syntax: above 1 GiB)" "need 0 < size <= 1 GiB" --size 2G
check 2 "--total 1M below --size 2M" "total >= size" --size 2M --total 1M
check 2 "--size 4X" "--size 4X: not a size" --size 4X
check 2 "--size -1" "--size -1: not a size" --size -1
check 2 "--window x" "--window x: not a whole number" --window x
check 2 "--window 2.5" "--window 2.5: not a whole number" --window 2.5
check 2 "unknown flag" "unknown argument '--bogus'" --bogus 1
rm -f /tmp/nnb_out.$$ /tmp/nnb_err.$$
[ "$failures" -eq 0 ] && echo "PASS" || exit 1
