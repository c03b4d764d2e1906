#!/usr/bin/env bash
# shellcheck disable=SC2015  # "cond && ok || fail": ok never fails
# braid_nccl_ranks (perf/device/nccl_ranks.cc) without a GPU:
#  - its argument handling (exit 2) and, on a machine with no GPU, its clean failure with the real CUDA runtime
#    (exit 3, CUDA's reason in the message);
#  - end to end on fake_cuda_nccl.so (LD_PRELOAD: CUDA and NCCL stand-ins whose collectives compute what NCCL's do):
#    the launcher execs the ranks with an NCCL_HOSTID each, every size of every collective is reported, #wrong is 0,
#    algbw and busbw follow from size and time with nccl-tests' factors, counts are rounded to the rank count; a
#    planted wrong element is counted and fails the run; a failing ncclCommInitRank is named and fails the run.
# usage: nccl_ranks_test.sh BRAID_NCCL_RANKS FAKE_CUDA_NCCL_SO
set -uo pipefail
bin=$1
fake_so=$2
# shellcheck source=tests/device/lib.sh
source "$(dirname "$0")/lib.sh" nccl-ranks-test
fake_run=(env LD_PRELOAD="$fake_so" FAKE_NCCL_DIR="$tmp/x")

# --- Arguments.
expect_rc 2 "-n 1" -- "$bin" -n 1
grep -q "bad value for -n: '1'" "$tmp/err" && ok || fail "-n 1 message: $(cat "$tmp/err")"
expect_rc 2 "unknown flag" -- "$bin" --bogus 1
grep -q "unknown flag --bogus" "$tmp/err" && ok || fail "unknown flag message: $(cat "$tmp/err")"
expect_rc 2 "-c foo" -- "$bin" -c all_reduce,foo
expect_rc 2 "-b > -e" -- "$bin" -b 2K -e 1K
grep -q -- "-b (2048) is larger than -e (1024)" "$tmp/err" && ok || fail "-b/-e message: $(cat "$tmp/err")"
expect_rc 2 "-e 5Q" -- "$bin" -e 5Q
expect_rc 2 "-f 1" -- "$bin" -f 1
expect_rc 2 "missing value" -- "$bin" -i
expect_rc 2 "--rank without --id" -- "$bin" --rank 0 --report-fd 5
expect_rc 0 "--help" -- "$bin" --help
grep -q "3 no usable GPU" "$tmp/out" && ok || fail "--help does not document exit 3"

# --- The real CUDA runtime on a machine without a GPU: exit 3 with CUDA's reason.
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "note: this machine has a GPU; the no-GPU exit is not checked"
else
  expect_rc 3 "no GPU" -- "$bin" -b 1K -e 1K
  grep -q "braid_nccl_ranks: no usable GPU: cudaGetDeviceCount: " "$tmp/err" && ok ||
    fail "no-GPU message: $(cat "$tmp/err")"
fi

# --- End to end on the stand-ins.
mkdir -p "$tmp/x"
expect_rc 0 "fake 4 ranks" -- "${fake_run[@]}" "$bin" -n 4 -b 1K -e 64K -f 4 -w 1 -i 2 --label fake
cp "$tmp/out" "$tmp/four"
grep -q "^# braid_nccl_ranks: 4 ranks on GPU 0 (fake GPU).*, fake$" "$tmp/four" && ok || fail "header: $(head -1 "$tmp/four")"
for coll in all_reduce all_gather alltoall; do
  grep -q "^# result $coll bytes=65536 busbw=[0-9.]* avg_busbw=[0-9.]* wrong=0$" "$tmp/four" && ok ||
    fail "$coll result line: $(grep "result $coll" "$tmp/four")"
done
grep -q "^# all results checked: 0 wrong$" "$tmp/four" && ok || fail "closing line"
# 4 sizes (1K 4K 16K 64K) x 3 collectives, each: count = bytes / 4, #wrong 0, algbw = count*4/time, busbw = algbw x
# 1.5 (all_reduce) or 0.75 (others) within the printed precision.
awk '/^# all_reduce/ {f = 1.5} /^# all_gather/ || /^# alltoall/ {f = 0.75}
     $1 ~ /^[0-9]+$/ && NF == 8 {
       rows++
       if ($2 != $1 / 4 || $8 != 0) bad++
       algbw = $2 * 4 / ($5 * 1e3)
       if (($6 - algbw) > 0.01 + 0.01 * algbw || (algbw - $6) > 0.01 + 0.01 * algbw) bad++
       if (($7 - $6 * f) > 0.002 + 0.001 * $7 || ($6 * f - $7) > 0.002 + 0.001 * $7) bad++
     }
     END { exit !(rows == 12 && bad == 0) }' "$tmp/four" && ok || fail "table rows: $(cat "$tmp/four")"
# Every rank had its own NCCL_HOSTID (the stand-in's ncclCommInitRank refuses otherwise; checked below).

# 3 ranks: all_gather and alltoall counts round down to a multiple of 3 (1 KiB = 256 floats -> 255).
expect_rc 0 "fake 3 ranks" -- "${fake_run[@]}" "$bin" -n 3 -b 1K -e 1K -w 0 -i 1
awk '/^# all_reduce/ {c = "r"} /^# all_gather/ || /^# alltoall/ {c = "g"}
     $1 == 1024 && NF == 8 { if ((c == "r" && $2 == 256) || (c == "g" && $2 == 255)) good++ }
     END { exit !(good == 3) }' "$tmp/out" && ok || fail "3-rank counts: $(cat "$tmp/out")"

# A wrong element: counted per size, the rank names it, exit 1.
expect_rc 1 "planted wrong element" -- "${fake_run[@]}" FAKE_NCCL_CORRUPT=1 "$bin" -n 4 -b 1K -e 4K -f 4 -w 0 -i 1 \
  -c all_reduce
grep -q "^# result all_reduce bytes=4096 .* wrong=2$" "$tmp/out" && ok || fail "wrong count: $(cat "$tmp/out")"
grep -q "^# FAILED: 2 wrong element(s)$" "$tmp/out" && ok || fail "FAILED line: $(tail -2 "$tmp/out")"
grep -q "rank 1: all_reduce 1024 B: element 128 is .*, expected " "$tmp/err" && ok || fail "element message: $(cat "$tmp/err")"

# A failing NCCL call: named with the rank, the others stopped, exit 1 (NCCL_HOSTID "h0" does not end in "-0").
expect_rc 1 "ncclCommInitRank fails" -- "${fake_run[@]}" "$bin" -n 2 -b 1K -e 1K --hostid-prefix h
grep -q "rank [01]: ncclCommInitRank(&comm, n, id, o.rank): fake NCCL error" "$tmp/err" && ok ||
  fail "init failure message: $(cat "$tmp/err")"
grep -q "^# FAILED: a rank failed" "$tmp/out" && ok || fail "init failure: $(tail -2 "$tmp/out")"

# A rank that never joins: --timeout stops every rank and fails the run, in about the time asked for.
start=$SECONDS
expect_rc 1 "a hanging rank" -- "${fake_run[@]}" FAKE_NCCL_HANG_RANK=2 "$bin" -n 3 -b 1K -e 1K --timeout 2
[ $((SECONDS - start)) -lt 10 ] && ok || fail "--timeout 2 took $((SECONDS - start)) s"
grep -q "the run passed --timeout 2 s; stopping the ranks" "$tmp/err" && ok || fail "timeout message: $(cat "$tmp/err")"
grep -q "^# FAILED: the run timed out$" "$tmp/out" && ok || fail "timeout: $(tail -2 "$tmp/out")"
pgrep -f "$bin .*--rank" >/dev/null && fail "rank processes left running after --timeout" || ok

# CUDA sees no device / not the one asked for.
expect_rc 3 "0 devices" -- "${fake_run[@]}" FAKE_GPU_COUNT=0 "$bin"
grep -q "no usable GPU: cudaGetDeviceCount found 0 devices" "$tmp/err" && ok || fail "0 devices: $(cat "$tmp/err")"
expect_rc 2 "-d 1 of 1" -- "${fake_run[@]}" "$bin" -d 1
grep -q -- "-d 1, but CUDA sees 1 device(s)" "$tmp/err" && ok || fail "-d message: $(cat "$tmp/err")"

finish
