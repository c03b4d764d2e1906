#!/usr/bin/env bash
# The NCCL-API shim on a GPU: shim_gpu_check (an NCCL program, 2 ranks as processes) runs first with NCCL alone, then
# with LD_PRELOAD=libbraid_nccl.so and BRAID_ALGO_DIR=tests/data/shim (a 2-rank ring all-reduce and all-gather, as
# `braid algo ring --coll C -n 2` writes them). Both runs must give correct results; the preloaded one must say that
# the all-reduce and all-gather ran in Braid and the reduce-scatter (no algorithm) in NCCL. A third run has no files
# but BRAID_TOPOLOGY=ALGO_DIR/nvlink-2g.yaml: rank 0 synthesizes the Pareto set (libbraid_nccl_pareto.so beside the
# shim), both ranks must hold the same set, results must be right and the 16 KiB all-reduce must run one of its
# algorithms. A fourth run gives each rank its own Braid host (BRAID_HOSTID) with BRAID_NCCL_ACROSS_HOSTS=hierarchical:
# both ranks must report the hierarchical executor (proxies over tcp) ready, results must be right and the all-reduce
# and all-gather must run in Braid.
# Usage: shim_gpu_check.sh LIBBRAID_NCCL CHECK_BINARY ALGO_DIR. Exit 0 pass, 1 fail, 77 skipped (no GPU; says why).
set -uo pipefail
shim=$1
check=$2
algos=$3
# shellcheck source=tests/nccl/require_built.sh
source "$(dirname "$0")/require_built.sh"
require_built braid_nccl "$shim" nccl_shim_gpu_check "$check"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

"$check" 2
status=$?
if [ "$status" = 77 ]; then
  echo "SKIP: no usable GPU (above); the shim's GPU path needs one"
  exit 77
fi
if [ "$status" = 126 ] || [ "$status" = 127 ]; then
  echo "FAIL: $check could not be started (status $status: a shared library it needs is missing, see above)"
  exit 1
fi
if [ "$status" != 0 ]; then
  echo "FAIL: the program fails with NCCL alone (status $status): not the shim's doing"
  exit 1
fi

LD_PRELOAD=$shim BRAID_ALGO_DIR=$algos BRAID_DEBUG=INFO "$check" 2 2>"$log"
status=$?
grep 'shim:' "$log"
if [ "$status" != 0 ]; then
  echo "FAIL: with the shim the program exits $status"
  cat "$log"
  exit 1
fi
fail=0
for want in 'ncclAllReduce count 4096 float sum out-of-place 2 ranks 16 KiB -> braid ring_allreduce_n2' \
            'ncclAllReduce count 4096 float sum in-place 2 ranks 16 KiB -> braid ring_allreduce_n2' \
            'ncclAllReduce count 1000 float avg out-of-place 2 ranks 4000 B -> braid ring_allreduce_n2' \
            'ncclAllGather count 4096 float out-of-place 2 ranks 32 KiB -> braid ring_allgather_n2' \
            'ncclReduceScatter count 4096 float sum out-of-place 2 ranks 32 KiB -> NCCL (no Braid algorithm'; do
  if ! grep -qF "$want" "$log"; then
    echo "FAIL: no shim line '$want' (on every rank)"
    fail=1
  fi
done
if grep -q 'shim: .*Braid failed\|shim: .*could not be set up' "$log"; then
  echo "FAIL: Braid fell back to NCCL (above)"
  fail=1
fi

# BRAID_TOPOLOGY: the Pareto set synthesized on rank 0 and sent to rank 1.
LD_PRELOAD=$shim BRAID_TOPOLOGY=$algos/nvlink-2g.yaml BRAID_DEBUG=INFO "$check" 2 2>"$log"
status=$?
grep 'shim:' "$log"
if [ "$status" != 0 ]; then
  echo "FAIL: with the shim and BRAID_TOPOLOGY the program exits $status"
  cat "$log"
  exit 1
fi
sets=$(grep -o 'Pareto set from rank 0: [1-9][0-9]* algorithms (digest [0-9a-f]*)' "$log")
if [ "$(echo "$sets" | grep -c .)" != 2 ] || [ "$(echo "$sets" | sort -u | wc -l)" != 1 ]; then
  echo "FAIL: the two ranks do not log one and the same Pareto set: $sets"
  fail=1
fi
if ! grep -q 'ncclAllReduce count 4096 float sum out-of-place 2 ranks 16 KiB -> braid .* (BRAID_TOPOLOGY ' "$log"; then
  echo "FAIL: the 16 KiB all-reduce did not run an algorithm of the Pareto set"
  fail=1
fi
if grep -q 'shim: .*Braid failed\|shim: .*could not be set up\|no Pareto set' "$log"; then
  echo "FAIL: Braid fell back to NCCL with BRAID_TOPOLOGY (above)"
  fail=1
fi
# BRAID_NCCL_ACROSS_HOSTS=hierarchical: each rank process its own Braid host (BRAID_HOSTID, --braid-hosts), so the
# shim runs the device-resident executor with the connection between the ranks proxied over TCP (loopback).
LD_PRELOAD=$shim BRAID_ALGO_DIR=$algos BRAID_NCCL_ACROSS_HOSTS=hierarchical BRAID_SOCKET_IFNAME=lo BRAID_DEBUG=INFO \
  "$check" 2 --braid-hosts 2>"$log"
status=$?
grep 'shim:' "$log"
if [ "$status" != 0 ]; then
  echo "FAIL: with the shim on the hierarchical path the program exits $status"
  cat "$log"
  exit 1
fi
ready=$(grep -c 'shim: communicator of ncclCommInitRank, rank [01] of 2 device [0-9]*: Braid ready (device-resident executor, hierarchical: 2 hosts, proxies over tcp)' "$log")
if [ "$ready" != 2 ]; then
  echo "FAIL: $ready of 2 ranks report the hierarchical executor ready"
  fail=1
fi
for want in 'ncclAllReduce count 4096 float sum out-of-place 2 ranks 16 KiB -> braid ring_allreduce_n2' \
            'ncclAllGather count 4096 float out-of-place 2 ranks 32 KiB -> braid ring_allgather_n2'; do
  if ! grep -qF "$want" "$log"; then
    echo "FAIL: hierarchical: no shim line '$want'"
    fail=1
  fi
done
if grep -q 'shim: .*Braid failed\|shim: .*could not be set up' "$log"; then
  echo "FAIL: Braid fell back to NCCL on the hierarchical path (above)"
  fail=1
fi
[ "$fail" = 0 ] && echo "PASS: correct results with and without the shim; Braid ran the calls it has algorithms for, from files, from BRAID_TOPOLOGY's Pareto set and on the hierarchical path across two named hosts"
exit "$fail"
