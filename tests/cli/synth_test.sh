#!/usr/bin/env bash
# End-to-end tests of `braid synth` and `braid demo`: synthesis on shipped topologies, the MSCCL XML verified by
# `braid verify`, the JSON report (keys, numbers, a lower bound never above the simulated time), the Braid JSON's
# provenance, an infeasible sketch (exit 2 naming the conflicting constraint group, no stack trace), a missing
# sketch, usage errors, a TACCL profile + TACCL sketch pair, and the demo writing its three XML files.
# Usage: synth_test.sh BRAID_BINARY SOURCE_DIR SHARED_DIR
source "$(dirname "$0")/lib.sh" "$@"
# check_json DESCRIPTION PYTHON_CODE FILE...: the Python code (which sees argv and a loaded `d` = json of the first
# file) must exit 0; it prints what is wrong otherwise.
check_json() {
  local what=$1 code=$2
  shift 2
  if python3 - "$@" >"$tmp/py.out" 2>&1 <<EOF; then ok; else fail "$what: $(head -5 "$tmp/py.out")"; fi
import json, sys
d = json.load(open(sys.argv[1]))
$code
EOF
}
# no_crash WHAT: stderr of the last expect_rc holds no sign of an escaped exception or a crash.
no_crash() {
  if grep -Eq "terminate called|what\(\):|Aborted|Segmentation|core dumped|std::" "$tmp/err"; then
    fail "$1: stderr looks like a crash: $(head -3 "$tmp/err")"
  else
    ok
  fi
}
# The report's common checks; argv[2] = expected collective, argv[3] = expected ranks, argv[4] = the sizes asked
# for (comma-separated bytes) and argv[5] = the nccl-tests multiplier (ranks for all-gather, reduce-scatter and
# all-to-all, 1 for all-reduce).
report_checks='
coll, ranks, asked, mult = sys.argv[2], int(sys.argv[3]), [int(x) for x in sys.argv[4].split(",")], int(sys.argv[5])
assert d["verified"] is True, d["verified"]
assert d["collective"] == coll, d["collective"]
assert d["ranks"] == ranks, d["ranks"]
assert isinstance(d["synthesis_seconds"], (int, float)) and d["synthesis_seconds"] > 0, d["synthesis_seconds"]
for k in ("topology", "sketch", "chunkup", "stages", "notes", "algorithm"):
    assert k in d, k
assert d["sketch"]["yaml"].strip(), "sketch YAML text missing"
assert d["chunkup"] >= 1
assert len(d["stages"]) >= 1 and all("name" in s and "seconds" in s for s in d["stages"]), d["stages"]
a = d["algorithm"]
for k in ("threadblocks", "steps", "channels", "chunks"):
    assert isinstance(a[k], int) and a[k] > 0, (k, a[k])
sizes = d["sizes"]
assert len(sizes) == len(asked), (len(sizes), asked)
for s, want in zip(sizes, asked):
    # nccl-tests: count = size / (4 bytes x multiplier) whole floats per rank; size_bytes = count x 4 x multiplier.
    count = want // (4 * mult)
    assert s["size_bytes"] == count * 4 * mult, (s["size_bytes"], want)
    for k in ("predicted_us", "nccl_us", "nccl_ring_us", "bound_us"):
        assert isinstance(s[k], (int, float)) and s[k] > 0, (k, s)
    assert isinstance(s["nccl_choice"], str) and "/" in s["nccl_choice"], s["nccl_choice"]
    # A lower bound can never exceed the simulated time of an algorithm that implements the collective.
    assert s["bound_us"] <= s["predicted_us"] * (1 + 1e-9), ("bound above Braid", s["size_bytes"], s["bound_us"], s["predicted_us"])
    assert s["bound_us"] <= s["nccl_ring_us"] * (1 + 1e-9), ("bound above NCCL ring", s["size_bytes"])
    assert abs(s["speedup_vs_nccl"] - s["nccl_us"] / s["predicted_us"]) <= 1e-9 * s["speedup_vs_nccl"], s
    assert abs(s["speedup_vs_ring"] - s["nccl_ring_us"] / s["predicted_us"]) <= 1e-9 * s["speedup_vs_ring"], s
    assert abs(s["ratio_to_bound"] - s["predicted_us"] / s["bound_us"]) <= 1e-9 * s["ratio_to_bound"], s
    # The hardware cut bound is on every row with its ratio; the routed bound is the largest of its three parts.
    assert s["cut_bound_us"] > 0 and s["cut_bound_us"] <= s["predicted_us"] * (1 + 1e-9), s
    assert abs(s["ratio_to_cut_bound"] - s["predicted_us"] / s["cut_bound_us"]) <= 1e-9 * s["ratio_to_cut_bound"], s
    assert s["ratio_to_cut_bound"] >= s["ratio_to_bound"] * (1 - 1e-9), s
    parts = max(s["cut_bound_us"], s["route_bound_us"], s["latency_bound_us"])
    assert abs(s["bound_us"] - parts) <= 1e-9 * s["bound_us"], (s["bound_us"], parts)
# Each bound field says what it is valid for.
b = d["bounds"]
assert b["cut_bound_us"]["valid_for"].startswith("any algorithm"), b["cut_bound_us"]
for k in ("route_bound_us", "bound_us"):
    assert "follow Braid" in b[k]["valid_for"], (k, b[k])
assert ("all_reduce" in b) == (coll == "allreduce"), b.keys()
if coll == "allreduce":
    assert "reduce-scatter + all-gather" in b["all_reduce"], b["all_reduce"]
    assert b["cut_bound_us"]["what"].startswith("reduce-scatter + all-gather"), b["cut_bound_us"]
times = [s["predicted_us"] for s in sizes]
assert all(b > a for a, b in zip(times, times[1:])), ("Braid times do not grow with the size", times)
'

# ---- DGX-1 all-gather: XML + report -------------------------------------------------------------------------
expect_rc 0 "synth dgx1-v100 allgather" -- "$braid" synth --topology dgx1-v100 --coll allgather --time-limit 8 \
  -o "$tmp/ag.xml" --json "$tmp/ag.json"
cp "$tmp/out" "$tmp/ag.txt"
[ -s "$tmp/ag.xml" ] && ok || fail "synth did not write ag.xml"
grep -q "VERIFIED" "$tmp/ag.txt" && ok || fail "summary does not say VERIFIED: $(head -2 "$tmp/ag.txt")"
grep -q "routing" "$tmp/ag.txt" && ok || fail "summary has no stage table"
expect_rc 0 "verify the synthesized all-gather" -- "$braid" verify "$tmp/ag.xml" --topology dgx1-v100
grep -q "VERIFIED" "$tmp/out" && ok || fail "braid verify does not say VERIFIED"
# Default sizes 1K, 1M, 256M; all-gather on 8 ranks: multiplier 8.
check_json "all-gather report" "$report_checks" "$tmp/ag.json" allgather 8 1024,1048576,268435456 8
check_json "all-gather report: topology, derived sketch" '
assert d["topology"]["name"] == "dgx1-v100", d["topology"]
assert d["sketch"]["derived"] is True, d["sketch"]
assert d["algorithm"]["file"].endswith("ag.xml"), d["algorithm"]["file"]
' "$tmp/ag.json"
# The table printed on stdout agrees with the report at 256M (Braid us column, 2 decimals).
t_text=$(awk '$1 == "256M" {print $2}' "$tmp/ag.txt")
check_json "summary table and report agree at 256M" '
t = [s["predicted_us"] for s in d["sizes"] if s["size_bytes"] == 268435456][0]
assert abs(t - float(sys.argv[2])) <= 0.006, (t, sys.argv[2])
' "$tmp/ag.json" "${t_text:-nan}"
# The table's last two columns are Braid/cut and Braid/routed; the legend names both bounds.
r_text=$(awk '$1 == "256M" {print $(NF-1), $NF}' "$tmp/ag.txt")
check_json "summary table ratios agree with the report at 256M" '
s = [s for s in d["sizes"] if s["size_bytes"] == 268435456][0]
cut, routed = (float(x) for x in sys.argv[2].split())
assert abs(cut - s["ratio_to_cut_bound"]) <= 0.006 and abs(routed - s["ratio_to_bound"]) <= 0.006, (sys.argv[2], s)
' "$tmp/ag.json" "${r_text:-nan nan}"
grep -q 'Braid/cut  Braid/routed$' "$tmp/ag.txt" && ok || fail "table header has no Braid/cut, Braid/routed columns"
grep -q '^# cut bound = .*valid for any algorithm' "$tmp/ag.txt" && ok || fail "no cut bound legend line"
grep -q "^# routed bound = .*valid for algorithms whose GPU-to-GPU messages follow Braid's routes" "$tmp/ag.txt" && ok ||
  fail "no routed bound legend line"

# The comparison's columns are what the other commands compute on their own at 1M: the synthesized XML in
# `braid simulate` (Braid), `braid simulate nccl-ring` (NCCL's ring with the protocol its model picks) and
# `braid bound` (the bound).
"$braid" simulate "$tmp/ag.xml" --topology dgx1-v100 -b 1M -e 1M --json >"$tmp/sim-ag.json" 2>/dev/null
"$braid" simulate nccl-ring --topology dgx1-v100 --coll allgather -b 1M -e 1M --json >"$tmp/sim-ring.json" 2>/dev/null
"$braid" bound --topology dgx1-v100 --coll allgather -b 1M -e 1M --json >"$tmp/bound.json" 2>/dev/null
check_json "comparison agrees with braid simulate and braid bound at 1M" '
s = [s for s in d["sizes"] if s["size_bytes"] == 2**20][0]
braid = json.load(open(sys.argv[2]))["rows"][0]
ring = json.load(open(sys.argv[3]))["rows"][0]
bound = json.load(open(sys.argv[4]))["rows"][0]
close = lambda a, b: abs(a - b) <= 1e-9 * max(abs(a), abs(b))
assert braid["size_bytes"] == ring["size_bytes"] == bound["size_bytes"] == 2**20
assert close(s["predicted_us"], braid["time_us"]), (s["predicted_us"], braid["time_us"])
assert close(s["nccl_ring_us"], ring["time_us"]), (s["nccl_ring_us"], ring["time_us"])
assert s["nccl_ring_choice"] == "Ring/" + ring["protocol"], (s["nccl_ring_choice"], ring["protocol"])
assert close(s["bound_us"], bound["bound_us"]), (s["bound_us"], bound["bound_us"])
assert close(s["cut_bound_us"], bound["cut_us"]), (s["cut_bound_us"], bound["cut_us"])
assert close(s["route_bound_us"], bound["route_us"]), (s["route_bound_us"], bound["route_us"])
' "$tmp/ag.json" "$tmp/sim-ag.json" "$tmp/sim-ring.json" "$tmp/bound.json"

# ---- PCIe box all-reduce: Braid JSON output with provenance, report on stdout --------------------------------
expect_rc 0 "synth pcie-2s4g allreduce" -- "$braid" synth -t pcie-2s4g -c allreduce --time-limit 8 \
  --sizes 4K,16M -o "$tmp/ar.json" --json -
cp "$tmp/out" "$tmp/ar-report.json"
# All-reduce: multiplier 1.
check_json "all-reduce report on stdout" "$report_checks" "$tmp/ar-report.json" allreduce 8 4096,16777216 1
check_json "Braid JSON provenance" '
p = d["provenance"]
r = json.load(open(sys.argv[2]))
assert p["generator"] == "braid synth", p["generator"]
assert p["solver"].startswith("z3"), p["solver"]
pred = {int(k): v for k, v in p["predicted_us"].items()}
want = {s["size_bytes"]: s["predicted_us"] for s in r["sizes"]}
assert pred.keys() == want.keys(), (pred.keys(), want.keys())
for k in want:
    assert abs(pred[k] - want[k]) <= 1e-9 * want[k], (k, pred[k], want[k])
# lower_bound_us is the bound at the largest size (16M).
assert abs(p["lower_bound_us"] - r["sizes"][-1]["bound_us"]) <= 1e-9 * p["lower_bound_us"], p["lower_bound_us"]
for s in r["sizes"]:
    assert float(p["extra"]["nccl_us.%d" % s["size_bytes"]]) > 0
    assert float(p["extra"]["bound_us.%d" % s["size_bytes"]]) > 0
    assert abs(float(p["extra"]["cut_bound_us.%d" % s["size_bytes"]]) - s["cut_bound_us"]) <= 1e-5 * s["cut_bound_us"]
assert "follow Braid" in p["extra"]["lower_bound_valid_for"], p["extra"]
' "$tmp/ar.json" "$tmp/ar-report.json"
expect_rc 0 "verify the Braid JSON all-reduce" -- "$braid" verify "$tmp/ar.json"

# ---- An infeasible sketch: 2 nodes x 2 GPUs, only GPU 0 may cross and it relays only its own chunks --------------
cat >"$tmp/two.yaml" <<'YAML'
name: two-by-two
templates:
  box:
    gpus: 2
    nics: 1
    switches: [{name: pcie, kind: pcie_switch}]
    links:
      - {a: gpu0, b: gpu1, kind: nvlink, bandwidth: 20, alpha: 0.7}
      - {a: [gpu0, gpu1, nic0], b: pcie, kind: pcie, bandwidth: 12, alpha: 1.0}
nodes: {template: box, count: 2}
network: {kind: switch, bandwidth: 12.5, alpha: 1.3}
YAML
cat >"$tmp/stuck.yaml" <<'YAML'
# GPU 0 of each node sends to GPU 0 of the other node but forwards only its own chunks: GPU 1's chunks can never
# leave their node, so no all-gather exists.
name: stuck
nodes: 2
intranode: {links: nvlink}
internode:
  connections: {0: [0]}
  relay_for: {0: [0]}
chunkup: 1
YAML
expect_rc 2 "infeasible sketch" -- "$braid" synth -t "$tmp/two.yaml" --sketch "$tmp/stuck.yaml" -c allgather \
  --time-limit 8 -o "$tmp/stuck.xml"
grep -q "infeasible" "$tmp/err" && ok || fail "no 'infeasible' in: $(head -3 "$tmp/err")"
grep -Eq "relay|gpus_to_sender_rev_map|postcondition|receives" "$tmp/err" && ok ||
  fail "the message names no constraint group: $(head -3 "$tmp/err")"
no_crash "infeasible sketch"
[ ! -e "$tmp/stuck.xml" ] && ok || fail "an infeasible synthesis wrote its output"
# The same topology with a sketch that lets GPU 0 relay everything is feasible.
sed 's/relay_for: {0: \[0\]}/relay_for: {0: [0, 1]}/' "$tmp/stuck.yaml" >"$tmp/relay.yaml"
expect_rc 0 "feasible relay sketch" -- "$braid" synth -t "$tmp/two.yaml" --sketch "$tmp/relay.yaml" -c allgather \
  --time-limit 8 --sizes 1M -o "$tmp/relay.xml"
expect_rc 0 "verify the relayed all-gather" -- "$braid" verify "$tmp/relay.xml" --topology "$tmp/two.yaml"

# ---- Missing files and usage errors ----------------------------------------------------------------------------
expect_rc 1 "missing sketch" -- "$braid" synth -t dgx1-v100 --sketch "$tmp/nonesuch.yaml" -c allgather
grep -q "no such file" "$tmp/err" && ok || fail "missing sketch: $(head -2 "$tmp/err")"
no_crash "missing sketch"
expect_rc 1 "missing topology" -- "$braid" synth -t "$tmp/nonesuch-topo.yaml" -c allgather
# Output destinations are checked before synthesis; a report that cannot be written leaves no algorithm behind.
expect_rc 1 "report into a missing directory" -- "$braid" synth -t "$tmp/two.yaml" --sketch "$tmp/relay.yaml" \
  -c allgather --sizes 1M -o "$tmp/orphan.xml" --json "$tmp/nodir/r.json"
grep -q "does not exist" "$tmp/err" && ok || fail "missing report directory: $(head -2 "$tmp/err")"
[ ! -e "$tmp/orphan.xml" ] && ok || fail "the algorithm was written although the command failed"
# ... and an algorithm that cannot be written leaves no report behind (/dev/full passes the up-front check, a device
# is written directly, and fails when written).
if [ -c /dev/full ] && [ -w /dev/full ]; then
  expect_rc 1 "algorithm into /dev/full" -- "$braid" synth -t "$tmp/two.yaml" --sketch "$tmp/relay.yaml" \
    -c allgather --sizes 1M -o /dev/full --json "$tmp/orphan.json"
  grep -q "/dev/full: write failed" "$tmp/err" && ok || fail "-o /dev/full: $(head -2 "$tmp/err")"
  [ ! -e "$tmp/orphan.json" ] && ok || fail "the report was written although the algorithm was not"
  [ ! -s "$tmp/out" ] && ok || fail "-o /dev/full printed: $(head -1 "$tmp/out")"
else
  skip "no writable /dev/full"
fi
expect_rc 2 "-o - is refused" -- "$braid" synth -t "$tmp/two.yaml" --sketch "$tmp/relay.yaml" -c allgather -o -
expect_rc 2 "unknown collective" -- "$braid" synth -t dgx1-v100 -c gather
expect_rc 2 "bad --sizes" -- "$braid" synth -t dgx1-v100 -c allgather --sizes 1K,lots
expect_rc 2 "bad --time-limit" -- "$braid" synth -t dgx1-v100 -c allgather --time-limit 0
expect_rc 2 "bad --protocol" -- "$braid" synth -t dgx1-v100 -c allgather --protocol fast
expect_rc 2 "--root on all-gather" -- "$braid" synth -t dgx1-v100 -c allgather --root 3
expect_rc 2 "missing --coll" -- "$braid" synth -t dgx1-v100

# ---- A TACCL profile with a TACCL sketch (RC-41/42: NDv2, two nodes, 16 ranks) --------------------------------
if [ -d "$rc_dir/taccl" ]; then
  expect_rc 0 "synth TACCL ndv2 profile + sk1-ndv2-n2" -- "$braid" synth -t "$rc_dir/taccl/topo/topo-ndv2-1MB.json" \
    --sketch "$rc_dir/taccl/sketch/sk1-ndv2-n2.json" -c allgather --time-limit 8 --sizes 1M -o "$tmp/taccl.xml" \
    --json "$tmp/taccl.json"
  check_json "TACCL pair report" '
assert d["ranks"] == 16, d["ranks"]
assert d["topology"]["nodes"] == 2, d["topology"]
assert d["sketch"]["derived"] is False and d["sketch"]["source"].endswith("sk1-ndv2-n2.json"), d["sketch"]
' "$tmp/taccl.json"
  expect_rc 0 "verify the TACCL-pair all-gather" -- "$braid" verify "$tmp/taccl.xml"
else
  skip "$rc_dir/taccl not found: the TACCL profile + sketch synthesis skipped"
fi

# ---- The README's main job ---------------------------------------------------------------------------------------
(cd "$tmp" && "$braid" demo --time-limit 5 >demo.out 2>demo.err) && ok || fail "demo: $(head -3 "$tmp/demo.err")"
n=$(ls "$tmp"/braid-out/*.xml 2>/dev/null | wc -l)
[ "$n" = 3 ] && ok || fail "demo wrote $n XML files, want 3"
for c in allgather allreduce alltoall; do
  f="$tmp/braid-out/dgx1-v100_${c}_braid.xml"
  expect_rc 0 "verify demo $c" -- "$braid" verify "$f" --topology dgx1-v100
  grep -Eq "^  $c +256M " "$tmp/demo.out" && ok || fail "demo table has no $c 256M row"
done
grep -q 'Braid/cut  Braid/routed$' "$tmp/demo.out" && ok || fail "demo table has no Braid/cut, Braid/routed columns"
grep -q '^  cut bound = .*valid for any algorithm' "$tmp/demo.out" && ok || fail "demo: no cut bound legend line"
grep -q '^  all-reduce: the cut and route bounds are the reduce-scatter + all-gather bound' "$tmp/demo.out" && ok ||
  fail "demo: no all-reduce bound line"


# The tree-packing method (--method forest): an optimal-rate all-reduce that verifies and is written whole; what it
# does not build is refused with exit 2 (usage) or 1 (unsupported), naming the method.
expect_rc 0 "synth forest dgx1-v100 allreduce" -- "$braid" synth --method forest -t dgx1-v100 -c allreduce \
  -o "$tmp/forest.xml" --json "$tmp/forest.json"
no_crash "synth forest"
expect_rc 0 "verify the forest all-reduce" -- "$braid" verify "$tmp/forest.xml" --topology dgx1-v100
check_json "forest report" 'assert d["verified"] is True, d["verified"]' "$tmp/forest.json"
expect_rc 2 "unknown method" -- "$braid" synth --method blink -t dgx1-v100 -c allgather
grep -q "not taccl, forest or sccl" "$tmp/err" && ok || fail "unknown method: $(head -2 "$tmp/err")"
expect_rc 2 "forest with a sketch" -- "$braid" synth --method forest --sketch "$tmp/relay.yaml" -t dgx1-v100 -c allgather
expect_rc 0 "forest all-to-all (max-concurrent flow)" -- "$braid" synth --method forest -t dgx1-v100 -c alltoall \
  --pieces 4 -o "$tmp/flow.xml"
expect_rc 0 "verify the flow all-to-all" -- "$braid" verify "$tmp/flow.xml" --topology dgx1-v100
expect_rc 2 "tree tolerance on the flow all-to-all" -- "$braid" synth --method forest --tree-tolerance 0.1 \
  -t dgx1-v100 -c alltoall
grep -q "packs no trees" "$tmp/err" && ok || fail "--tree-tolerance with alltoall: $(head -2 "$tmp/err")"
expect_rc 1 "forest broadcast" -- "$braid" synth --method forest -t dgx1-v100 -c broadcast
grep -q "forest method builds allgather" "$tmp/err" && ok || fail "forest broadcast: $(head -2 "$tmp/err")"
expect_rc 2 "forest pieces out of range" -- "$braid" synth --method forest --pieces 0 -t dgx1-v100 -c allgather
expect_rc 2 "pieces without the forest method" -- "$braid" synth --pieces 8 -t dgx1-v100 -c allgather
grep -q "applies to --method forest only" "$tmp/err" && ok || fail "--pieces with taccl: $(head -2 "$tmp/err")"
expect_rc 0 "sccl least-steps all-gather" -- "$braid" synth --method sccl -t dgx1-v100 -c allgather \
  -o "$tmp/sccl.xml" --json "$tmp/sccl.json"
expect_rc 0 "verify the sccl all-gather" -- "$braid" verify "$tmp/sccl.xml" --topology dgx1-v100
check_json "sccl report: 2 steps, 2 rounds, 1 chunk on DGX-1" \
  'assert d["method"] == "sccl" and d["sketch"] is None and d["sccl"] == {"steps": 2, "rounds": 2, "chunks": 1}, d["sccl"]' \
  "$tmp/sccl.json"
expect_rc 2 "sccl: two steps cannot carry 7 rounds of 6 chunks on DGX-1" -- "$braid" synth --method sccl \
  --sccl-steps 2 --sccl-rounds 7 --sccl-chunks 6 -t dgx1-v100 -c allgather
grep -q "infeasible" "$tmp/err" && ok || fail "sccl 2/7/6: $(head -2 "$tmp/err")"
expect_rc 2 "sccl options without the sccl method" -- "$braid" synth --sccl-steps 2 -t dgx1-v100 -c allgather
grep -q "apply to --method sccl only" "$tmp/err" && ok || fail "--sccl-steps with taccl: $(head -2 "$tmp/err")"
expect_rc 2 "sccl objective misspelt" -- "$braid" synth --method sccl --sccl-objective fast -t dgx1-v100 -c allgather
expect_rc 2 "sccl rounds below steps" -- "$braid" synth --method sccl --sccl-steps 3 --sccl-rounds 2 \
  -t dgx1-v100 -c allgather
expect_rc 1 "sccl all-to-all" -- "$braid" synth --method sccl -t dgx1-v100 -c alltoall
grep -q "sccl method builds allgather" "$tmp/err" && ok || fail "sccl alltoall: $(head -2 "$tmp/err")"
check_json "forest report names its method" 'assert d["method"] == "forest" and d["sketch"] is None, d["method"]' \
  "$tmp/forest.json"

# ---- Pareto set: --sizes FROM:TO ------------------------------------------------------------------------------
mkdir -p "$tmp/set"
expect_rc 0 "synth --sizes 1K:1G:16 (Pareto set)" -- "$braid" synth -t dgx-h100-x1 -c allreduce --sizes 1K:1G:16 \
  --time-limit 8 -o "$tmp/set" --json "$tmp/set.json"
no_crash "Pareto set"
grep -q "^# Braid Pareto set: allreduce on dgx-h100-x1" "$tmp/out" && ok || fail "no Pareto set header: $(head -2 "$tmp/out")"
# Window labels and file names are exact byte counts (the largest of K/M/G/T that divides, else bytes), the window
# half-open: [min_bytes, max_bytes + 1) — a window that ends at 65535 reads "[0, 64K)", never a rounded "64K" end.
cp "$tmp/out" "$tmp/set.txt"
check_json "Pareto set labels and file names are exact" '
import os
def exact(n):
    if n is None:
        return "inf"
    unit = ""
    for u in "KMGT":
        if n == 0 or n % 1024:
            break
        n, unit = n // 1024, u
    return str(n) + unit
text = open(sys.argv[2]).read()
assert "6 size(s) 1K .. 1G:" in text, text.splitlines()[0]
for w in d["windows"]:
    end = None if w["max_bytes"] is None else w["max_bytes"] + 1
    label = "[%s, %s)" % (exact(w["min_bytes"]), exact(end))
    assert "  " + label + "  " in text, (label, text)
    if w["file"] is not None:
        name = "allreduce-dgx-h100-x1-%s-%s.xml" % (exact(w["min_bytes"]), exact(end))
        assert os.path.basename(w["file"]) == name, (w["file"], name)
assert any(w["max_bytes"] is not None and w["max_bytes"] % 1024 for w in d["windows"]), d["windows"]
assert "e+" not in text, text
assert "Braid takes a size only at NCCL/Braid >= 1.108 (--min-speedup)" in text, text.splitlines()[1]
' "$tmp/set.json" "$tmp/set.txt"
check_json "Pareto set windows cover every size once; NCCL's window where NVLS beats every candidate" '
import os
w, pts = d["windows"], d["points"]
assert abs(d["min_speedup"] - 1.108) < 1e-9, d["min_speedup"]  # 1 + the H20 all-to-all calibration error, +10.8 %
assert w[0]["min_bytes"] == 0 and w[-1]["max_bytes"] is None, (w[0], w[-1])
for a, b in zip(w, w[1:]):
    assert b["min_bytes"] == a["max_bytes"] + 1, (a, b)
assert [p["size_bytes"] for p in pts] == [1024 * 16**i for i in range(6)], pts
for p in pts:
    win = w[p["window"]]
    assert win["min_bytes"] <= p["size_bytes"] and (win["max_bytes"] is None or p["size_bytes"] <= win["max_bytes"])
    m = d["min_speedup"]
    if win["served_by"] == "nccl":
        assert p["nccl_us"] < p["braid_us"] * m, p
        assert win["file"] is None, win
    else:
        assert p["braid_us"] * m <= p["nccl_us"] * (1 + 1e-9), p
        assert os.path.isfile(win["file"]), win
assert w[pts[-1]["window"]]["served_by"] == "nccl" and "NVLS" in pts[-1]["nccl_choice"], pts[-1]
for i, win in enumerate(w):
    seen = []
    for p in pts:
        if p["window"] == i and p["nccl_choice"] not in seen:
            seen.append(p["nccl_choice"])
    assert win["nccl_choices"] == seen, (win, seen)
    assert all(p["braid"] == win["source"] for p in pts if p["window"] == i), win
' "$tmp/set.json"
for f in "$tmp"/set/*.xml; do
  expect_rc 0 "verify $(basename "$f")" -- "$braid" verify "$f" --topology dgx-h100-x1
done
grep -q 'minBytes="0"' "$tmp"/set/allreduce-dgx-h100-x1-0-*.xml && ok || fail "first window's XML lacks minBytes=0"
expect_rc 2 "Pareto set with --method" -- "$braid" synth -t dgx-h100-x1 -c allreduce --sizes 1K:1M --method forest
grep -q "does not apply to a Pareto set" "$tmp/err" && ok || fail "--method with a range: $(head -2 "$tmp/err")"
expect_rc 2 "--min-speedup below 1" -- "$braid" synth -t dgx-h100-x1 -c allreduce --sizes 1K:1M --min-speedup 0.9
grep -q "min-speedup '0.9': not a decimal number in \[1, 1000\]" "$tmp/err" && ok || fail "--min-speedup 0.9: $(head -2 "$tmp/err")"
for bad in "" nan 1e308 0x1.2p0; do
  expect_rc 2 "--min-speedup '$bad'" -- "$braid" synth -t dgx-h100-x1 -c allreduce --sizes 1K:1M --min-speedup "$bad"
done
expect_rc 2 "Pareto set -o naming an .xml file" -- "$braid" synth -t dgx-h100-x1 -c allreduce --sizes 1K:1M -o "$tmp/set.xml"
[ ! -e "$tmp/set.xml" ] && ok || fail "-o set.xml with a range created $tmp/set.xml"
expect_rc 2 "--min-speedup without a Pareto set" -- "$braid" synth -t dgx-h100-x1 -c allreduce --min-speedup 1.2
grep -q "applies to a Pareto set only" "$tmp/err" && ok || fail "--min-speedup alone: $(head -2 "$tmp/err")"
expect_rc 2 "backwards range" -- "$braid" synth -t dgx-h100-x1 -c allreduce --sizes 1M:1K
expect_rc 2 "Pareto set of broadcast" -- "$braid" synth -t dgx-h100-x1 -c broadcast --sizes 1K:1M
expect_rc 1 "Pareto set into a file" -- "$braid" synth -t dgx-h100-x1 -c allreduce --sizes 1K:1M -o "$tmp/set.json"
before=$(ls "$tmp/set" | wc -l)
expect_rc 1 "Pareto set into a directory holding another set" -- "$braid" synth -t dgx-h100-x1 -c allreduce \
  --sizes 1K:1M --time-limit 8 -o "$tmp/set"
grep -q "already holds allreduce-dgx-h100-x1-" "$tmp/err" && ok || fail "stale set files: $(head -2 "$tmp/err")"
[ "$(ls "$tmp/set" | wc -l)" = "$before" ] && ok || fail "a refused Pareto set changed its directory"
expect_rc 1 "Pareto set into a directory whose parent is missing" -- "$braid" synth -t dgx-h100-x1 -c allreduce \
  --sizes 1K:1M -o "$tmp/missing/set"
grep -qF "cannot write $tmp/missing/set: directory $tmp/missing does not exist" "$tmp/err" && ok ||
  fail "missing parent: $(head -2 "$tmp/err")"
[ ! -e "$tmp/missing" ] && ok || fail "a refused Pareto set created a directory"
# --json may go into the directory -o creates; under a window file's name it is refused before any work.
expect_rc 2 "Pareto set report named as a window file" -- "$braid" synth -t dgx-h100-x1 -c allgather \
  --sizes 1K:64K --time-limit 8 -o "$tmp/newset" --json "$tmp/newset/allgather-dgx-h100-x1-8K-inf.xml"
grep -q -- "kept for the set's window files" "$tmp/err" && ok || fail "report as a window: $(head -2 "$tmp/err")"
[ ! -e "$tmp/newset" ] && ok || fail "a refused Pareto set created its directory"
expect_rc 0 "Pareto set into a new directory" -- "$braid" synth -t dgx-h100-x1 -c allgather --sizes 1K:64K \
  --time-limit 8 -o "$tmp/newset" --json "$tmp/newset/set.json"
[ "$(ls "$tmp"/newset/allgather-dgx-h100-x1-*.xml | wc -l)" -ge 1 ] && ok || fail "new -o directory holds no window"
grep -q '"windows"' "$tmp/newset/set.json" && ok || fail "no report in the new -o directory"
mkdir -p "$tmp/set2"
expect_rc 1 "Pareto set with an unwritable report" -- "$braid" synth -t dgx-h100-x1 -c allreduce --sizes 1K:1M \
  --time-limit 8 -o "$tmp/set2" --json "$tmp/nodir/set.json"
[ -z "$(ls "$tmp/set2")" ] && ok || fail "a failed Pareto set left files: $(ls "$tmp/set2")"
expect_rc 2 "Pareto set with --root" -- "$braid" synth -t dgx-h100-x1 -c allreduce --sizes 1K:1M --root 3
# --time-limit is finite and at most 1e6 s: a longer one would overflow the solvers' nanosecond deadlines.
for t in inf 1e10 1000001 nan 0 -5; do
  expect_rc 2 "--time-limit $t" -- "$braid" synth -t pcie-2s4g -c allgather --method forest --time-limit "$t"
  grep -q -- "--time-limit: .* at most 1e+06" "$tmp/err" && ok || fail "--time-limit $t: $(head -2 "$tmp/err")"
done
expect_rc 2 "Pareto set with --time-limit inf" -- "$braid" synth -t pcie-2s4g -c allgather --sizes 1K:1M \
  --time-limit inf
expect_rc 2 "demo --time-limit 1e10" -- "$braid" demo --time-limit 1e10 -o "$tmp/demo-limit"
grep -q -- "--time-limit" "$tmp/err" && ok || fail "demo --time-limit 1e10: $(head -2 "$tmp/err")"
[ ! -e "$tmp/demo-limit" ] && ok || fail "demo with a refused --time-limit created its directory"
expect_rc 0 "--time-limit 1e6 (the maximum)" -- "$braid" synth -t pcie-2s4g -c allgather --method forest \
  --time-limit 1e6 --sizes 1M -o "$tmp/max-limit.xml"
for b in -1 0 99999999999999999999 1.5; do
  expect_rc 2 "--budget $b" -- "$braid" synth -t dgx1-v100 -c allgather --budget "$b"
  grep -q -- "--budget" "$tmp/err" && ok || fail "--budget $b: $(head -2 "$tmp/err")"
done
expect_rc 2 "--budget with the forest method" -- "$braid" synth -t dgx1-v100 -c allgather --method forest --budget 5

finish
