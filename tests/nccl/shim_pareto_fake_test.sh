#!/usr/bin/env bash
# shellcheck disable=SC2015,SC2154  # "cond && ok || fail": ok never fails; lib.sh sets tmp
# The NCCL-API shim's BRAID_TOPOLOGY path on a machine without a GPU: braid_nccl_ranks (perf/device: 4 rank
# processes, every result checked) with libbraid_nccl.so preloaded in front of fake_cuda_nccl.so (CUDA and NCCL
# stand-ins, tests/device). The shim's setup runs for real up to the GPU executor: the unique id over the (fake)
# ncclBroadcast, Braid's bootstrap, rank 0's call into libbraid_nccl_pareto.so and the set's exchange; the executor
# then fails (no GPU), so every call goes to the stand-in NCCL, whose results must stay right. Checked:
#  - rank 0 alone synthesizes, once; all 4 ranks log the same set (algorithm count and text digest);
#  - a missing companion is one warning on rank 0, and every rank names it as the reason its calls go to NCCL;
#  - a topology with another GPU count never loads the companion, and each rank says why.
# usage: shim_pareto_fake_test.sh BRAID_NCCL_RANKS FAKE_CUDA_NCCL_SO LIBBRAID_NCCL_SO TOPOLOGY_YAML
set -uo pipefail
bin=$1
fake_so=$2
shim_so=$3
topology=$4
# shellcheck source=tests/nccl/require_built.sh
source "$(dirname "$0")/require_built.sh"
require_built braid_nccl_ranks "$bin" braid_fake_cuda_nccl "$fake_so" braid_nccl "$shim_so"
# shellcheck source=tests/device/lib.sh
source "$(dirname "$0")/../device/lib.sh" shim-pareto-fake
mkdir -p "$tmp/x"
run=(env LD_PRELOAD="$shim_so $fake_so" FAKE_NCCL_DIR="$tmp/x" BRAID_DEBUG=INFO "BRAID_NCCL_PARETO_COLLS=allreduce,allgather"
  BRAID_NCCL_PARETO_TIME_LIMIT=30)
ranks=(-n 4 -b 1K -e 4K -f 4 -w 0 -i 1 -c "all_reduce,all_gather")

# --- The set: synthesized on rank 0, the same on every rank.
expect_rc 0 "4 ranks, BRAID_TOPOLOGY=nvlink-4g" -- "${run[@]}" BRAID_TOPOLOGY="$topology" "$bin" "${ranks[@]}"
cp "$tmp/err" "$tmp/set.err"
grep -q "^# all results checked: 0 wrong$" "$tmp/out" && ok || fail "results: $(tail -n 3 "$tmp/out")"
n=$(grep -c "shim: BRAID_TOPOLOGY=$topology: Pareto set for 4 ranks synthesized in" "$tmp/set.err")
[ "$n" = 1 ] && ok || fail "the set was synthesized $n times, not once: $(grep -i pareto "$tmp/set.err" | head)"
grep -q "shim: BRAID_TOPOLOGY=$topology: Pareto set of [1-9][0-9]* algorithms: BRAID_TOPOLOGY allreduce 4 ranks" \
  "$tmp/set.err" && ok || fail "rank 0's summary of the set: $(grep -i 'Pareto set of' "$tmp/set.err" | head -c 600)"
comm_re="shim: communicator of ncclCommInitRank, rank [0-3] of 4 device 0: .*; Pareto set from rank 0: [1-9][0-9]* algorithms (digest [0-9a-f]\{16\})$"
[ "$(grep -c "$comm_re" "$tmp/set.err")" = 4 ] && ok ||
  fail "communicator lines with the set: $(grep 'communicator of' "$tmp/set.err")"
[ "$(grep "$comm_re" "$tmp/set.err" | sed 's/.*Pareto set from rank 0: //' | sort -u | wc -l)" = 1 ] && ok ||
  fail "the ranks hold different sets: $(grep "$comm_re" "$tmp/set.err")"
for r in 0 1 2 3; do
  grep -q "communicator of ncclCommInitRank, rank $r of 4 " "$tmp/set.err" && ok || fail "no line for rank $r"
done

# --- No companion: one warning on rank 0; every rank's calls go to NCCL, saying why.
expect_rc 0 "missing companion" -- "${run[@]}" BRAID_TOPOLOGY="$topology" BRAID_NCCL_PARETO_LIB="$tmp/none.so" \
  "$bin" "${ranks[@]}"
grep -q "^# all results checked: 0 wrong$" "$tmp/out" && ok || fail "results without companion"
[ "$(grep -c "WARN.*shim: BRAID_TOPOLOGY=$topology: no Pareto set (.*dlopen($tmp/none.so) failed" "$tmp/err")" = 1 ] &&
  ok || fail "warnings: $(grep WARN "$tmp/err")"
[ "$(grep -c "rank [0-3] of 4 device 0: calls go to NCCL (no Braid algorithm for 4 ranks (BRAID_TOPOLOGY=$topology: rank 0 has no Pareto set: .*dlopen" "$tmp/err")" = 4 ] &&
  ok || fail "communicator lines without companion: $(grep 'communicator of' "$tmp/err")"

# --- A topology of 8 GPUs for 4 ranks: no exchange, no companion (the missing one is never looked for).
expect_rc 0 "8-GPU topology, 4 ranks" -- "${run[@]}" BRAID_TOPOLOGY=dgx-a100-x1 BRAID_NCCL_PARETO_LIB="$tmp/none.so" \
  "$bin" "${ranks[@]}"
grep -q "^# all results checked: 0 wrong$" "$tmp/out" && ok || fail "results with dgx-a100-x1"
grep -q "dlopen\|synthesized in" "$tmp/err" && fail "the companion was used: $(grep 'dlopen\|synthesized' "$tmp/err")" || ok
[ "$(grep -c "rank [0-3] of 4 device 0: calls go to NCCL (no Braid algorithm for 4 ranks (BRAID_TOPOLOGY=dgx-a100-x1 has 8 GPUs: its Pareto set is for 8-rank communicators))$" "$tmp/err")" = 4 ] &&
  ok || fail "communicator lines for 8 GPUs: $(grep 'communicator of' "$tmp/err")"

finish
