#!/usr/bin/env bash
# shellcheck disable=SC2015,SC2154  # "cond && ok || fail": ok never fails; lib.sh sets tmp
# The NCCL-API shim and communicators created inside ncclGroupStart/ncclGroupEnd, on a machine without a GPU:
# shim_group_app with libbraid_nccl.so preloaded in front of fake_cuda_nccl.so (whose communicators, as NCCL 2.28's,
# answer no query until their group ends) and BRAID_ALGO_DIR's 2-rank algorithms. (nccl-tests' way, one
# communicator per process in a group, is braid_nccl_ranks' in shim_pareto_fake_test.sh and
# shim_across_hosts_fake_test.sh.) Checked:
#  - one thread creating both ranks in one group: each recorded at the group's end with its rank, its calls going to
#    NCCL (one thread drives several ranks), and one warning that Braid serves them but cannot run there;
#  - two communicators of different unique ids in one group: each recorded on its own (the count is per communicator);
#  - a communicator destroyed inside the group that created it: forgotten, never recorded at the group's end.
# usage: shim_group_fake_test.sh SHIM_GROUP_APP FAKE_CUDA_NCCL_SO LIBBRAID_NCCL_SO ALGO_DIR
set -uo pipefail
app=$1
fake_so=$2
shim_so=$3
algos=$4
# shellcheck source=tests/nccl/require_built.sh
source "$(dirname "$0")/require_built.sh"
require_built nccl_shim_group_app "$app" braid_fake_cuda_nccl "$fake_so" braid_nccl "$shim_so"
# shellcheck source=tests/device/lib.sh
source "$(dirname "$0")/../device/lib.sh" shim-group
mkdir -p "$tmp/x"
run=(env LD_PRELOAD="$shim_so $fake_so" FAKE_NCCL_DIR="$tmp/x" FAKE_NCCL_ANY_HOST=1 BRAID_DEBUG=INFO
  BRAID_ALGO_DIR="$algos" BRAID_TIMEOUT=20)

expect_rc 0 "two ranks on one thread in one group" -- "${run[@]}" "$app" two
for r in 0 1; do
  grep -q "shim: communicator of ncclCommInitRank, rank $r of 2 device 0: calls go to NCCL (2 of its ranks created by one thread in one ncclGroupStart/ncclGroupEnd: one thread drives several ranks)$" \
    "$tmp/err" && ok || fail "rank $r's communicator line: $(grep 'communicator of' "$tmp/err")"
done
[ "$(grep -c "WARN.*Braid serves 2-rank communicators, but 2 of its ranks created by one thread" "$tmp/err")" = 1 ] &&
  ok || fail "one warning that Braid cannot run there: $(grep WARN "$tmp/err")"
grep -q "did not report the communicator" "$tmp/err" && fail "a communicator was queried before its group ended" || ok

# Two communicators of different unique ids in one group: one rank of each here, so neither is "one thread driving
# several ranks"; they stay with NCCL only because no algorithm serves 1 rank.
expect_rc 0 "two communicators of one rank each in one group" -- "${run[@]}" "$app" distinct
[ "$(grep -c "shim: communicator of ncclCommInitRank, rank 0 of 1 device 0: calls go to NCCL (no Braid algorithm for 1 ranks)$" "$tmp/err")" = 1 ] &&
  ok || fail "communicator lines of two 1-rank communicators: $(grep 'communicator of' "$tmp/err")"
grep -q "one thread drives several ranks" "$tmp/err" && fail "distinct communicators counted as one: $(grep 'communicator of' "$tmp/err")" || ok

expect_rc 0 "a communicator destroyed inside its group" -- "${run[@]}" "$app" destroy
grep -q "communicator of" "$tmp/err" && fail "a destroyed communicator was recorded: $(grep 'communicator of' "$tmp/err")" ||
  ok

finish
