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
# its PCIe switch at 24 GB/s, so the cut bound counts B_gpu = 240 + 24 = 264 GB/s into (and out of) every GPU; one
# GPU alone is its binding cut: cut_us = (n-1)/n x S / 264e3 = 7/8 x 2^30 / 264e3 us = 3558.80 us.
# The route bound is higher and binds: every GPU pair's route (Topology::route, the widest path) is
# GPU -> NVSwitch -> GPU at 240 GB/s (the PCIe path between two GPUs is 24 GB/s at best), so the PCIe link carries
# none of the collective and the GPU's NVSwitch link, 240 GB/s, is its only usable way in (and out):
#   all-gather:  T = (n-1)/n x S / 240e3 us = 7/8 x 2^30 / 240e3 = 3914.68 us; busbw = (7/8) S / T = 240 GB/s.
#   all-reduce:  reduce-scatter + all-gather = 2 x 3914.68 us; busbw = 2(7/8) S / T = 240.
#   all-to-all:  (n-1)/n x S through the GPU's 240 GB/s NVSwitch link: 3914.68 us as well.
# Latency: every GPU pair is GPU -> NVSwitch -> GPU, 2 x 0.35 = 0.7 us (the alpha-diameter).
expect_rc 0 "allgather 1G --json" -- "$braid" bound --topology dgx-a100-x1 --coll allgather -b 1G -e 1G --json
check "one row" 'len(d["rows"]) == 1 and d["rows"][0]["size_bytes"] == 2**30'
check "allgather bound = 7/8 S / 240 GB/s" 'abs(d["rows"][0]["bound_us"] - 7/8 * 2**30 / 240e3) < 1e-6'
check "allgather busbw ceiling = 240 GB/s" 'abs(d["rows"][0]["busbw_gbps"] - 240) < 1e-9'
check "allgather cut_us = 7/8 S / 264 GB/s" 'abs(d["rows"][0]["cut_us"] - 7/8 * 2**30 / 264e3) < 1e-6'
check "allgather route_us = 7/8 S / 240 GB/s" 'abs(d["rows"][0]["route_us"] - 7/8 * 2**30 / 240e3) < 1e-6'
check "bandwidth = max(cut, route)" 'd["rows"][0]["bandwidth_us"] == max(d["rows"][0]["cut_us"], d["rows"][0]["route_us"])'
check "algbw = size / bound" 'abs(d["rows"][0]["algbw_gbps"] - 2**30 / d["rows"][0]["bound_us"] / 1e3) < 1e-9'
check "latency bound = diameter 0.7 us" 'abs(d["rows"][0]["latency_us"] - 0.7) < 1e-9'
check "the cut bound's binding cut is one GPU" 'len(d["cut"]) == 1 and d["cut"][0].startswith("gpu")'
check "each bound says what it is valid for" 'd["bounds"]["cut_us"]["valid_for"].startswith("any algorithm") and "follow Braid" in d["bounds"]["route_us"]["valid_for"] and "follow Braid" in d["bounds"]["bound_us"]["valid_for"] and "all_reduce" not in d["bounds"]'
check "names" 'd["topology"] == "dgx-a100-x1" and d["collective"] == "allgather"'

expect_rc 0 "allreduce 1G --json" -- "$braid" bound -t dgx-a100-x1 -c allreduce -b 1G -e 1G --json
check "allreduce bound = 2 x 7/8 S / 240 GB/s" 'abs(d["rows"][0]["bound_us"] - 2 * 7/8 * 2**30 / 240e3) < 1e-6'
check "allreduce cut bound = 2 x 7/8 S / 264 GB/s" 'abs(d["rows"][0]["cut_us"] - 2 * 7/8 * 2**30 / 264e3) < 1e-6'
check "allreduce bounds are labelled reduce-scatter + all-gather" '"reduce-scatter + all-gather" in d["bounds"]["all_reduce"] and d["bounds"]["cut_us"]["what"].startswith("reduce-scatter + all-gather")'
check "allreduce busbw ceiling = 240 GB/s" 'abs(d["rows"][0]["busbw_gbps"] - 240) < 1e-9'
check "allreduce cut_us = 2 x 7/8 S / 264 GB/s" 'abs(d["rows"][0]["cut_us"] - 2 * 7/8 * 2**30 / 264e3) < 1e-6'

expect_rc 0 "alltoall 1G --json" -- "$braid" bound -t dgx-a100-x1 -c alltoall -b 1G -e 1G --json
check "alltoall bound = 7/8 S / 240 GB/s" 'abs(d["rows"][0]["bound_us"] - 7/8 * 2**30 / 240e3) < 1e-6'

# Small sizes are latency-bound: 1 KiB of all-gather moves in 7/8 x 1024 / 240e3 = 0.0037 us < 0.7 us.
expect_rc 0 "sweep 1K..1G x2 --json" -- "$braid" bound -t dgx-a100-x1 -c allgather --json
check "default sweep 1K..1G x2 has 21 rows" 'len(d["rows"]) == 21 and d["rows"][0]["size_bytes"] == 1024'
check "1 KiB is latency-bound" 'd["rows"][0]["bound_us"] == d["rows"][0]["latency_us"] and abs(d["rows"][0]["bound_us"] - 0.7) < 1e-9'
check "bound = max(bandwidth, latency) in every row" 'all(abs(r["bound_us"] - max(r["bandwidth_us"], r["latency_us"])) < 1e-12 for r in d["rows"])'
check "bandwidth bound grows linearly" 'all(abs(r["bandwidth_us"] - 7/8 * r["size_bytes"] / 240e3) < 1e-9 * r["bandwidth_us"] + 1e-12 for r in d["rows"])'
check "cut bound grows linearly" 'all(abs(r["cut_us"] - 7/8 * r["size_bytes"] / 264e3) < 1e-9 * r["cut_us"] + 1e-12 for r in d["rows"])'
check "bandwidth = max(cut, route) in every row" 'all(r["bandwidth_us"] == max(r["cut_us"], r["route_us"]) for r in d["rows"])'

# nccl-tests size syntax and factor.
expect_rc 0 "sweep -b 1M -e 16M -f 4" -- "$braid" bound -t dgx-a100-x1 -c reducescatter -b 1M -e 16M -f 4 --json
check "-f 4: 1M, 4M, 16M" '[r["size_bytes"] for r in d["rows"]] == [2**20, 2**22, 2**24]'
expect_rc 0 "plain byte counts" -- "$braid" bound -t dgx-a100-x1 -c allgather -b 1048576 -e 1m --json
check "1048576 = 1m" '[r["size_bytes"] for r in d["rows"]] == [2**20]'

# The table: a header, one line per size, which bound binds and the cut bound's binding cut once.
expect_rc 0 "table" -- "$braid" bound -t dgx-a100-x1 -c allgather -b 1K -e 4K
[ "$(grep -vc '^#' "$tmp/out")" = 3 ] && ok || fail "table: want 3 data rows, got $(grep -vc '^#' "$tmp/out")"
[ "$(grep -c 'binding cut of the cut bound: gpu' "$tmp/out")" = 1 ] && ok || fail "table: binding cut not printed once"
grep -q '^# cut bound = .*valid for any algorithm' "$tmp/out" && ok || fail "table: no cut bound legend"
grep -q "^# route bound = .*valid for algorithms whose GPU-to-GPU messages follow Braid's routes" "$tmp/out" && ok ||
  fail "table: no route bound legend"
grep -q 'bandwidth bound set by the route bound' "$tmp/out" && ok || fail "table: the route bound should bind on dgx-a100-x1"
grep -q 'route_us' "$tmp/out" && ok || fail "table: no route_us column"
grep -q 'busbw' "$tmp/out" && ok || fail "table: no busbw column"

# Two nodes: the all-to-all cut is no longer one GPU.
expect_rc 0 "alltoall on dgx-a100-x2" -- "$braid" bound -t dgx-a100-x2 -c alltoall -b 1G -e 1G --json
check "alltoall on two nodes is bound by more than one GPU's links" 'len(d["cut"]) > 1 and d["rows"][0]["bound_us"] > 15/16 * 2**30 / 264e3'

# dgx1-v100 all-to-all: the cut bound binds. Its socket bisection (4 GPUs a side) must carry 4 x 4 / 8 S = 2S each
# way over 6 NVLink lanes (120 GB/s) + the 6 GB/s QPI: 2S / 126e3. The route bound only asks each GPU to receive
# 7/8 S over its 120 GB/s of NVLink + 1.5 GB/s of QPI share: 7/8 S / 121.5e3, lower.
expect_rc 0 "alltoall on dgx1-v100" -- "$braid" bound -t dgx1-v100 -c alltoall -b 1G -e 1G --json
check "dgx1-v100 alltoall: route_us = 7/8 S / 121.5 GB/s" 'abs(d["rows"][0]["route_us"] - 7/8 * 2**30 / 121.5e3) < 1e-6'
check "dgx1-v100 alltoall: cut_us = 2 S / 126 GB/s, and it binds" 'abs(d["rows"][0]["cut_us"] - 2 * 2**30 / 126e3) < 1e-6 and d["rows"][0]["bandwidth_us"] == d["rows"][0]["cut_us"]'
check "dgx1-v100 alltoall: the max-concurrent flow (GPUs relaying) equals the cut bound" 'abs(d["rows"][0]["flow_us"] - d["rows"][0]["cut_us"]) < 1e-6 * d["rows"][0]["cut_us"]'
expect_rc 0 "alltoall table on dgx1-v100" -- "$braid" bound -t dgx1-v100 -c alltoall -b 1G -e 1G
grep -q 'bandwidth bound set by the cut bound and the max-concurrent flow alike' "$tmp/out" && ok ||
  fail "table: the cut bound and the flow should bind on dgx1-v100 all-to-all"

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
