#!/usr/bin/env bash
# `braid bound`: values against closed forms on a shipped topology, the size sweep, JSON, and error exits.
# Usage: bound_test.sh BRAID_BINARY SOURCE_DIR SHARED_DIR
source "$(dirname "$0")/lib.sh" "$@"
# check DESCRIPTION PYTHON_EXPRESSION_ON_d: the JSON in $tmp/out parsed as d; the expression must be true.
check() {
  python3 - "$tmp/out" "$2" <<'PY' && ok || fail "$1"
import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if eval(sys.argv[2]) else 1)
PY
}

[ -f "$src/topologies/dgx-a100-x1.yaml" ] || {
  echo "FAIL: $src/topologies/dgx-a100-x1.yaml missing"
  exit 1
}
# dgx-a100-x1 (topologies/dgx-a100-x1.yaml): 8 GPUs, each linked to the NVSwitch by 12 NVLinks x 20 GB/s and to
# its PCIe switch at 24 GB/s, so B_gpu = 240 + 24 = 264 GB/s into (and out of) every GPU. One GPU alone is the
# binding cut: it must receive the other 7 shares of S/8.
#   all-gather:  T = (n-1)/n x S / B_gpu = 7/8 x 2^30 / 264e3 us = 3558.8027... us; busbw = (7/8) S / T = 264.
#   all-reduce:  reduce-scatter + all-gather = 2 x 3558.80 us; busbw = 2(7/8) S / T = 264.
#   all-to-all:  (n-1)/n x S through the GPU's 264 GB/s: 3558.80 us as well.
# Latency: every GPU pair is GPU -> NVSwitch -> GPU, 2 x 0.35 = 0.7 us (the alpha-diameter).
expect_rc 0 "allgather 1G --json" -- "$braid" bound --topology dgx-a100-x1 --coll allgather -b 1G -e 1G --json
check "one row" 'len(d["rows"]) == 1 and d["rows"][0]["size_bytes"] == 2**30'
check "allgather bound = 7/8 S / 264 GB/s" 'abs(d["rows"][0]["bound_us"] - 7/8 * 2**30 / 264e3) < 1e-6'
check "allgather busbw ceiling = 264 GB/s" 'abs(d["rows"][0]["busbw_gbps"] - 264) < 1e-9'
check "algbw = size / bound" 'abs(d["rows"][0]["algbw_gbps"] - 2**30 / d["rows"][0]["bound_us"] / 1e3) < 1e-9'
check "latency bound = diameter 0.7 us" 'abs(d["rows"][0]["latency_us"] - 0.7) < 1e-9'
check "the binding cut is one GPU" 'len(d["cut"]) == 1 and d["cut"][0].startswith("gpu")'
check "names" 'd["topology"] == "dgx-a100-x1" and d["collective"] == "allgather"'

expect_rc 0 "allreduce 1G --json" -- "$braid" bound -t dgx-a100-x1 -c allreduce -b 1G -e 1G --json
check "allreduce bound = 2 x 7/8 S / 264 GB/s" 'abs(d["rows"][0]["bound_us"] - 2 * 7/8 * 2**30 / 264e3) < 1e-6'
check "allreduce busbw ceiling = 264 GB/s" 'abs(d["rows"][0]["busbw_gbps"] - 264) < 1e-9'

expect_rc 0 "alltoall 1G --json" -- "$braid" bound -t dgx-a100-x1 -c alltoall -b 1G -e 1G --json
check "alltoall bound = 7/8 S / 264 GB/s" 'abs(d["rows"][0]["bound_us"] - 7/8 * 2**30 / 264e3) < 1e-6'

# Small sizes are latency-bound: 1 KiB of all-gather moves in 7/8 x 1024 / 264e3 = 0.0034 us < 0.7 us.
expect_rc 0 "sweep 1K..1G x2 --json" -- "$braid" bound -t dgx-a100-x1 -c allgather --json
check "default sweep 1K..1G x2 has 21 rows" 'len(d["rows"]) == 21 and d["rows"][0]["size_bytes"] == 1024'
check "1 KiB is latency-bound" 'd["rows"][0]["bound_us"] == d["rows"][0]["latency_us"] and abs(d["rows"][0]["bound_us"] - 0.7) < 1e-9'
check "bound = max(bandwidth, latency) in every row" 'all(abs(r["bound_us"] - max(r["bandwidth_us"], r["latency_us"])) < 1e-12 for r in d["rows"])'
check "bandwidth bound grows linearly" 'all(abs(r["bandwidth_us"] - 7/8 * r["size_bytes"] / 264e3) < 1e-9 * r["bandwidth_us"] + 1e-12 for r in d["rows"])'

# nccl-tests size syntax and factor.
expect_rc 0 "sweep -b 1M -e 16M -f 4" -- "$braid" bound -t dgx-a100-x1 -c reducescatter -b 1M -e 16M -f 4 --json
check "-f 4: 1M, 4M, 16M" '[r["size_bytes"] for r in d["rows"]] == [2**20, 2**22, 2**24]'
expect_rc 0 "plain byte counts" -- "$braid" bound -t dgx-a100-x1 -c allgather -b 1048576 -e 1m --json
check "1048576 = 1m" '[r["size_bytes"] for r in d["rows"]] == [2**20]'

# The table: a header, one line per size, the binding cut once.
expect_rc 0 "table" -- "$braid" bound -t dgx-a100-x1 -c allgather -b 1K -e 4K
[ "$(grep -vc '^#' "$tmp/out")" = 3 ] && ok || fail "table: want 3 data rows, got $(grep -vc '^#' "$tmp/out")"
[ "$(grep -c 'binding cut: gpu' "$tmp/out")" = 1 ] && ok || fail "table: binding cut not printed once"
grep -q 'busbw' "$tmp/out" && ok || fail "table: no busbw column"

# Two nodes: the all-to-all cut is no longer one GPU.
expect_rc 0 "alltoall on dgx-a100-x2" -- "$braid" bound -t dgx-a100-x2 -c alltoall -b 1G -e 1G --json
check "alltoall on two nodes is bound by more than one GPU's links" 'len(d["cut"]) > 1 and d["rows"][0]["bound_us"] > 15/16 * 2**30 / 264e3'

# Usage errors exit 2, a missing topology 1; nothing on stdout either way.
expect_rc 2 "-b > -e" -- "$braid" bound -t dgx-a100-x1 -c allgather -b 2K -e 1K
[ ! -s "$tmp/out" ] && ok || fail "-b > -e printed on stdout"
expect_rc 2 "bad size" -- "$braid" bound -t dgx-a100-x1 -c allgather -b 1X
grep -q "1X" "$tmp/err" && ok || fail "bad size not named in the error"
expect_rc 2 "fractional size" -- "$braid" bound -t dgx-a100-x1 -c allgather -e 1.5G
expect_rc 2 "zero size" -- "$braid" bound -t dgx-a100-x1 -c allgather -b 0
expect_rc 2 "factor 1" -- "$braid" bound -t dgx-a100-x1 -c allgather -f 1
expect_rc 2 "unknown collective" -- "$braid" bound -t dgx-a100-x1 -c gather
expect_rc 2 "broadcast has no bound" -- "$braid" bound -t dgx-a100-x1 -c broadcast
expect_rc 2 "no --coll" -- "$braid" bound -t dgx-a100-x1
expect_rc 1 "missing topology" -- "$braid" bound -t "$tmp/nope.yaml" -c allgather
grep -q "nope.yaml" "$tmp/err" && ok || fail "missing topology not named in the error"
[ ! -s "$tmp/out" ] && ok || fail "missing topology printed on stdout"

finish
