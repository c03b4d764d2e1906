#!/usr/bin/env bash
# End-to-end tests of `braid simulate`: the nccl-tests-like table, --json, the HTML report rendered by headless
# Chromium, an MSCCL XML from the corpus, and exit codes.
# Usage: simulate_test.sh BRAID_BINARY SOURCE_DIR SHARED_DIR
source "$(dirname "$0")/lib.sh" "$@"
# check DESCRIPTION PYTHON_CODE FILE...: the Python code (which sees argv and a loaded `d` = json of the first
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

# ---- The issue's example: NCCL's ring all-reduce on a DGX-1, 1K .. 1G ------------------------------------
expect_rc 0 "simulate nccl-ring dgx1-v100" -- "$braid" simulate nccl-ring --topology dgx1-v100 --coll allreduce -b 1K -e 1G
cp "$tmp/out" "$tmp/ring.txt"
grep -q '^# Braid simulate: nccl-ring on dgx1-v100 (8 ranks), allreduce' "$tmp/ring.txt" && ok ||
  fail "header line missing: $(head -1 "$tmp/ring.txt")"
grep -q '(us)' "$tmp/ring.txt" && grep -q '(GB/s)' "$tmp/ring.txt" && ok || fail "no units line in the header"
rows=$(grep -vc '^#' "$tmp/ring.txt")
# 1K .. 1G by factor 2 is 2^10 .. 2^30: 21 sizes.
[ "$rows" = 21 ] && ok || fail "table has $rows rows, want 21"
# Every row: size, then a NCCL choice such as Ring/LL, and numbers.
bad=$(grep -v '^#' "$tmp/ring.txt" | grep -Evc ' (Ring|Tree|CollNetDirect|CollNetChain|NVLS|NVLSTree|PAT)/(LL|LL128|Simple) ')
[ "$bad" = 0 ] && ok || fail "$bad rows without a NCCL choice"
first=$(grep -v '^#' "$tmp/ring.txt" | head -1 | awk '{print $1, $2, $3, $4}')
# 1024 bytes of float: 256 elements, all-reduce sums.
[ "$first" = "1024 256 float sum" ] && ok || fail "first row starts '$first', want '1024 256 float sum'"

expect_rc 0 "simulate nccl-ring --json --html" -- "$braid" simulate nccl-ring --topology dgx1-v100 --coll allreduce \
  -b 1K -e 1G --json --html "$tmp/report.html"
cp "$tmp/out" "$tmp/ring.json"
check_json "JSON rows" '
rows = d["rows"]
assert d["collective"] == "allreduce" and d["ranks"] == 8 and d["topology"] == "dgx1-v100", (d["collective"], d["ranks"])
for k in ("algorithm", "protocol"):
    assert k in d, k
assert len(rows) == 21, len(rows)
need = ["size_bytes", "time_us", "algbw_gbps", "busbw_gbps", "nccl_time_us", "nccl_choice", "bound_us"]
for r in rows:
    for k in need:
        assert k in r and r[k] is not None, (k, r.get("size_bytes"))
# Sizes are 2^10 .. 2^30.
assert [r["size_bytes"] for r in rows] == [2**e for e in range(10, 31)], [r["size_bytes"] for r in rows]
for r in rows:
    # nccl-tests definitions: algbw = size / time (GB = 1e9 B, so bytes/us / 1e3); busbw = algbw * 2(n-1)/n
    # for all-reduce, 2*7/8 = 1.75 on 8 ranks; count = size / 4 for float.
    algbw = r["size_bytes"] / r["time_us"] / 1e3
    assert abs(r["algbw_gbps"] - algbw) <= 1e-6 * algbw, (r["size_bytes"], r["algbw_gbps"], algbw)
    assert abs(r["busbw_gbps"] - 1.75 * algbw) <= 1e-6 * algbw, (r["size_bytes"], r["busbw_gbps"])
    assert r["count"] == r["size_bytes"] // 4, r["count"]
    # The bound is a lower bound on time, so busbw cannot exceed busbw at the bound.
    assert r["time_us"] >= r["bound_us"] * (1 - 1e-9), ("faster than the bound", r["size_bytes"], r["time_us"], r["bound_us"])
    assert r["busbw_gbps"] <= r["bound_busbw_gbps"] * (1 + 1e-9), ("busbw above bound", r["size_bytes"])
    assert r["nccl_time_us"] > 0 and "/" in r["nccl_choice"], r
    assert r["nccl_sim_us"] > 0, r
    assert r["bound_us"] > 0, r
    assert abs(r["speedup"] - r["nccl_time_us"] / r["time_us"]) <= 1e-9 * r["speedup"], r
    assert abs(r["speedup_vs_nccl"] - r["nccl_sim_us"] / r["time_us"]) <= 1e-9 * r["speedup_vs_nccl"], r
times = [r["time_us"] for r in rows]
assert all(b > a for a, b in zip(times, times[1:])), ("times do not increase with size", times)
bounds = [r["bound_us"] for r in rows]
assert all(b >= a for a, b in zip(bounds, bounds[1:])), ("bound decreases with size", bounds)
# Large messages are bandwidth-bound: doubling 512M -> 1G must take between 1.5x and 2.1x the time.
ratio = times[-1] / times[-2]
assert 1.5 <= ratio <= 2.1, ("1G / 512M time ratio", ratio)
' "$tmp/ring.json"
check_json "JSON bounds: cut bound and its ratio on every row, each bound labelled" '
for r in d["rows"]:
    for k in ("cut_bound_us", "route_bound_us", "latency_bound_us", "ratio_to_cut_bound", "ratio_to_bound"):
        assert r[k] is not None, (k, r["size_bytes"])
    assert abs(r["ratio_to_cut_bound"] - r["time_us"] / r["cut_bound_us"]) <= 1e-9 * r["ratio_to_cut_bound"], r
    assert abs(r["ratio_to_bound"] - r["time_us"] / r["bound_us"]) <= 1e-9 * r["ratio_to_bound"], r
    parts = max(r["cut_bound_us"], r["route_bound_us"], r["latency_bound_us"])
    assert abs(r["bound_us"] - parts) <= 1e-9 * r["bound_us"], (r["bound_us"], parts)
    assert r["time_us"] >= r["cut_bound_us"] * (1 - 1e-9), r
    # busbw at the cut bound: size / cut bound / 1e3 x 2(n-1)/n.
    want = r["size_bytes"] / r["cut_bound_us"] / 1e3 * 1.75
    assert abs(r["cut_bound_busbw_gbps"] - want) <= 1e-9 * want, (r["cut_bound_busbw_gbps"], want)
b = d["bounds"]
assert b["cut_bound_us"]["valid_for"].startswith("any algorithm"), b
assert "follow Braid" in b["route_bound_us"]["valid_for"] and "follow Braid" in b["bound_us"]["valid_for"], b
assert "reduce-scatter + all-gather" in b["all_reduce"], b
' "$tmp/ring.json"
grep -q '^#  cut bound = .*valid for any algorithm' "$tmp/ring.txt" && ok || fail "text: no cut bound legend"
grep -q "^#  routed bound = .*follow Braid's routes" "$tmp/ring.txt" && ok || fail "text: no routed bound legend"
grep -q '^#  all-reduce: the cut and route bounds are the reduce-scatter + all-gather bound' "$tmp/ring.txt" && ok ||
  fail "text: no all-reduce bound line"
# Columns 18 and 19 of the text table are Braid/cut and Braid/routed: the JSON's ratios (checked above against
# time / bound) to the printed 2 decimals.
grep -v '^#' "$tmp/ring.txt" | awk '{print $1, $18, $19}' >"$tmp/ring-ratios.txt"
check_json "text Braid/cut and Braid/routed agree with the JSON" '
text = {int(a): (float(c), float(r)) for a, c, r in (l.split() for l in open(sys.argv[2]))}
assert len(text) == len(d["rows"]), (len(text), len(d["rows"]))
for r in d["rows"]:
    c, routed = text[r["size_bytes"]]
    assert abs(c - r["ratio_to_cut_bound"]) <= 0.006 and abs(routed - r["ratio_to_bound"]) <= 0.006, (r["size_bytes"], c, routed)
' "$tmp/ring.json" "$tmp/ring-ratios.txt"

# The two speedup columns name their baselines: vs model = NCCL's analytical model time / Braid (column 16), vs NCCL =
# NCCL's algorithm simulated / Braid (column 17, braid synth's "vs NCCL"); both agree with the JSON's ratios.
grep -q '^#.* vs model  *vs NCCL  *of cut  *of routed$' "$tmp/ring.txt" && ok || fail "text: speedup column names"
grep -q '^#.*(NCCL model/Braid) (NCCL sim/Braid)  *(Braid/cut)' "$tmp/ring.txt" && ok || fail "text: speedup column units"
grep -q '^#  busbw = .*vs model = NCCL model time / Braid time; vs NCCL = NCCL simulated time / Braid time' \
  "$tmp/ring.txt" && ok || fail "text: speedup legend"
grep -v '^#' "$tmp/ring.txt" | awk '{print $1, $16, $17}' >"$tmp/ring-speedups.txt"
check_json "text vs model and vs NCCL agree with the JSON" '
text = {int(a): (float(m), float(s)) for a, m, s in (l.split() for l in open(sys.argv[2]))}
assert len(text) == len(d["rows"]), (len(text), len(d["rows"]))
for r in d["rows"]:
    m, s = text[r["size_bytes"]]
    assert abs(m - r["speedup"]) <= 0.006 and abs(s - r["speedup_vs_nccl"]) <= 0.006, (r["size_bytes"], m, s)
' "$tmp/ring.json" "$tmp/ring-speedups.txt"
# The header prints the sizes -b and -e asked for, as nccl-tests does; a sweep that does not reach -e says so in a note.
expect_rc 0 "simulate -b 1M -e 5M" -- "$braid" simulate ring -t dgx-a100-x1 -b 1M -e 5M -f 2
grep -q '^#  minBytes 1048576 maxBytes 5242880 step: 2(factor) datatype float out-of-place ' "$tmp/out" && ok ||
  fail "-e 5M: header $(sed -n 2p "$tmp/out")"
grep -q '^# note: sizes run: 1048576 .. 4194304 (3 size(s)); -b 1M -e 5M -f 2 asked for 1048576 .. 5242880' "$tmp/out" &&
  ok || fail "-e 5M: no note on the sizes run"
expect_rc 0 "simulate -b 1M -e 4M" -- "$braid" simulate ring -t dgx-a100-x1 -b 1M -e 4M -f 2
grep -q '^#  minBytes 1048576 maxBytes 4194304 ' "$tmp/out" && ok || fail "-e 4M: header $(sed -n 2p "$tmp/out")"
grep -q 'sizes run' "$tmp/out" && fail "-e 4M: a sizes-run note though every size was run" || ok

# The cut bound in closed form: dgx-a100-x1 all-reduce (reduce-scatter + all-gather) is bound by one GPU's links,
# 12 NVLinks (240 GB/s) + its PCIe switch (24 GB/s): 2 x 7/8 S / 264e3 us; busbw at the cut bound 264 GB/s.
expect_rc 0 "nccl-ring allreduce 1G on dgx-a100-x1" -- "$braid" simulate nccl-ring -t dgx-a100-x1 -c allreduce \
  -b 1G -e 1G --json
check_json "cut bound closed form" '
r = d["rows"][0]
want = 2 * 7 / 8 * 2**30 / 264e3
assert abs(r["cut_bound_us"] - want) <= 1e-6 * want, (r["cut_bound_us"], want)
assert abs(r["cut_bound_busbw_gbps"] - 264) <= 1e-6, r["cut_bound_busbw_gbps"]
assert abs(r["ratio_to_cut_bound"] - r["time_us"] / want) <= 1e-6 * r["ratio_to_cut_bound"], r
' "$tmp/out"
# The text table and the JSON come from the same simulation: the 1G Braid time agrees to the printed 2 decimals.
t_text=$(grep -v '^#' "$tmp/ring.txt" | awk '$1 == 1073741824 {print $6}')
check_json "text and JSON agree at 1G" '
t = [r["time_us"] for r in d["rows"] if r["size_bytes"] == 2**30][0]
assert abs(t - float(sys.argv[2])) <= 0.006, (t, sys.argv[2])
' "$tmp/ring.json" "$t_text"

# ---- The HTML report ---------------------------------------------------------------------------------------
if [ -s "$tmp/report.html" ]; then
  ok
  size=$(stat -c %s "$tmp/report.html")
  [ "$size" -lt 2000000 ] && ok || fail "report is $size bytes, want < 2 MB"
  python3 - "$tmp/report.html" >"$tmp/py.out" 2>&1 <<'EOF' && ok || fail "report is not self-contained: $(head -3 "$tmp/py.out")"
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
# No external resources: the only URL is the SVG namespace name.
urls = [u for u in re.findall(r"(?:https?:)?//[^\s\"'<>)]+", text) if u not in ("http://www.w3.org/2000/svg",)]
assert not urls, urls[:5]
assert not re.search(r"<(script|link|img|iframe)[^>]*\bsrc=|<link\b|@import|@font-face", text), "external reference"
EOF
else
  fail "--html wrote no report"
fi

chrome=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$chrome" ]; then
  if [ -n "${CI:-}" ]; then
    fail "chromium is required in CI (scripts/install-deps.sh installs it) to render the HTML report"
  else
    skip "chromium not installed: the HTML report is not rendered (install it with scripts/install-deps.sh)"
  fi
else
  timeout 60 "$chrome" --headless=new --no-sandbox --disable-gpu --user-data-dir="$tmp/chrome-profile" \
    --dump-dom "file://$tmp/report.html" >"$tmp/dom.html" 2>"$tmp/chrome.err"
  rc=$?
  [ "$rc" = 0 ] && ok || fail "chromium --dump-dom exited $rc: $(tail -2 "$tmp/chrome.err")"
  python3 - "$tmp/dom.html" >"$tmp/py.out" 2>&1 <<'EOF' && ok || fail "rendered DOM: $(head -5 "$tmp/py.out")"
import re, sys
dom = open(sys.argv[1], encoding="utf-8").read()
for needle in ('id="busbw-plot"', 'id="link-timeline"'):
    assert needle in dom, needle + " missing"
plot = dom[dom.index('id="busbw-plot"'):]
plot = plot[:plot.index("</svg>")]
for cls in ("series-braid", "series-nccl", "series-nccl-sim", "series-bound", "series-cut-bound"):
    m = re.search(r'<(polyline|path)[^>]*class="%s"[^>]*>' % cls, plot)
    assert m, cls + " series missing"
    # Each series has a point per size (21 sizes).
    pts = re.search(r'points="([^"]*)"', m.group(0)).group(1).split() if m.group(1) == "polyline" else []
    assert len(pts) == 21, (cls, len(pts))
tl = dom[dom.index('id="link-timeline"'):]
tl = tl[:tl.index("</svg>")]
rows = re.findall(r'<g class="link-row"[^>]*>(.*?)</g>', tl, re.S)
assert rows, "no link rows in the timeline"
rects = sum(len(re.findall(r"<rect\b", r)) for r in rows)
assert rects >= 1, "no rect in the timeline"
assert "-&gt;" in tl or "->" in tl, "link labels missing"
assert re.search(r"gpu\d+-(&gt;|>)\S+ \((nvlink|pcie|sys|net|c2c)\)", tl), "no label like gpu0->gpu1 (nvlink)"
assert "time (us)" in tl, "no time axis"
print(len(rows), "links,", rects, "rects")
EOF
  timeout 60 "$chrome" --headless=new --no-sandbox --disable-gpu --user-data-dir="$tmp/chrome-profile2" \
    --window-size=1280,1800 --screenshot="$tmp/shot.png" "file://$tmp/report.html" >/dev/null 2>"$tmp/chrome.err"
  shot=$(stat -c %s "$tmp/shot.png" 2>/dev/null || echo 0)
  [ "$shot" -gt 10240 ] && ok || fail "screenshot is $shot bytes, want > 10 KB"
fi

# ---- Other algorithms and collectives ------------------------------------------------------------------------
# A classic algorithm with a datatype: all-gather of doubles; count = size / (8 bytes x 8 ranks).
expect_rc 0 "multiring allgather double" -- "$braid" simulate multiring --coll allgather -t dgx1-v100 -d double \
  -b 64K -e 1M --json
cp "$tmp/out" "$tmp/ag.json"
check_json "allgather rows" '
rows = d["rows"]
assert [r["size_bytes"] for r in rows] == [65536, 131072, 262144, 524288, 1048576], [r["size_bytes"] for r in rows]
for r in rows:
    assert r["count"] == r["size_bytes"] // 64 and r["type"] == "double" and r["redop"] == "none", r
    algbw = r["size_bytes"] / r["time_us"] / 1e3
    assert abs(r["busbw_gbps"] - algbw * 7 / 8) <= 1e-6 * algbw, r  # (n-1)/n for all-gather
    assert r["time_us"] >= r["bound_us"] * (1 - 1e-9), r
' "$tmp/ag.json"

# All-to-all: NCCL model has no entry ("-" / null), NCCL's grouped send/recv is still simulated.
expect_rc 0 "pairwise alltoall" -- "$braid" simulate pairwise --coll alltoall -t dgx1-v100 -b 1M -e 4M --json
cp "$tmp/out" "$tmp/a2a.json"
check_json "alltoall nulls" '
rows = d["rows"]
assert len(rows) == 3, len(rows)
for r in rows:
    assert r["nccl_time_us"] is None and r["nccl_choice"] is None, r
    assert r["nccl_sim_us"] > 0 and r["bound_us"] > 0 and r["time_us"] >= r["bound_us"] * (1 - 1e-9), r
' "$tmp/a2a.json"
expect_rc 0 "pairwise alltoall text" -- "$braid" simulate pairwise --coll alltoall -t dgx1-v100 -b 1M -e 1M
row=$(grep -v '^#' "$tmp/out")
echo "$row" | grep -q ' - ' && ok || fail "all-to-all row does not show '-' for NCCL's model: $row"

# NCCL's own choice per size, on an 8-GPU H100: the Braid column is NCCL's algorithm, so it equals NCCL simulated.
expect_rc 0 "nccl on dgx-h100-x1" -- "$braid" simulate nccl -t dgx-h100-x1 -b 1K -e 64M -f 4 --json
cp "$tmp/out" "$tmp/nccl.json"
check_json "nccl equals nccl-sim" '
rows = d["rows"]
assert len(rows) == 9, len(rows)  # 1K, 4K, ..., 64M
for r in rows:
    assert abs(r["time_us"] - r["nccl_sim_us"]) <= 1e-9 * r["time_us"], r
' "$tmp/nccl.json"

# NCCL's ring as NCCL runs it: where NCCL's model picks Ring/Simple (a DGX-1 all-reduce at 256M and 1G),
# nccl-ring is the same run as nccl and as synth's ring column (2 MiB iterations), and its vs NCCL is 1.
expect_rc 0 "nccl on dgx1-v100 256M-1G" -- "$braid" simulate nccl -t dgx1-v100 -b 256M -e 1G -f 4 --json
cp "$tmp/out" "$tmp/nccl_big.json"
expect_rc 0 "nccl-ring on dgx1-v100 256M-1G" -- "$braid" simulate nccl-ring -t dgx1-v100 -b 256M -e 1G -f 4 --json
cp "$tmp/out" "$tmp/ring_big.json"
check_json "nccl-ring equals nccl where NCCL picks Ring/Simple" '
ring = json.load(open(sys.argv[2]))
assert [r["nccl_sim_algorithm"] for r in d["rows"]] == ["Ring/Simple"] * 2, d["rows"]
for a, b in zip(d["rows"], ring["rows"]):
    assert a["time_us"] == b["time_us"] == b["nccl_sim_us"], (a, b)
' "$tmp/nccl_big.json" "$tmp/ring_big.json"
# All-to-all has no NCCL ring: the note says what ran instead.
expect_rc 0 "nccl-ring alltoall" -- "$braid" simulate nccl-ring -t dgx1-v100 --coll alltoall -b 1M -e 1M
grep -q "NCCL has no ring or tree all-to-all" "$tmp/out" && ok || fail "no note on nccl-ring all-to-all"
# A win of a Simple program over NCCL's LL at 1M is outside Simple's validated band: noted.
expect_rc 0 "ring 1M note" -- "$braid" simulate ring -t dgx1-v100 -b 1M -e 1M --protocol Simple --json
check_json "unvalidated win noted" '
r = d["rows"][0]
if r["speedup_vs_nccl"] > 1:
    assert any("outside its validated band" in n for n in r["notes"]), r["notes"]
else:
    assert not any("outside its validated band" in n for n in r["notes"]), r["notes"]
' "$tmp/out"

# ---- An MSCCL XML from the corpus on a matching shipped topology ------------------------------------------
xml=$rc_dir/msccl/ndv4_allreduce_ring_r48ll.xml
if [ -f "$xml" ]; then
  # ndv4 = 8 x A100 on NVSwitch: dgx-a100-x1. Window [266240, 2078719]: of 128K .. 4M only 512K (524288) and
  # 1M (1048576) lie inside it; 256K = 262144 < 266240 and 2M = 2097152 > 2078719.
  expect_rc 0 "simulate MSCCL XML" -- "$braid" simulate "$xml" -t dgx-a100-x1 -b 128K -e 4M --json --in-place
  cp "$tmp/out" "$tmp/xml.json"
  check_json "MSCCL XML rows" '
rows = d["rows"]
assert d["collective"] == "allreduce" and d["ranks"] == 8, d["collective"]
assert [r["size_bytes"] for r in rows] == [2**e for e in range(17, 23)], [r["size_bytes"] for r in rows]
inside = {r["size_bytes"]: r["in_window"] for r in rows}
want = {s: 266240 <= s <= 2078719 for s in inside}
assert inside == want, (inside, want)
for r in rows:
    assert r["protocol"] == "LL", r["protocol"]  # the file says proto="LL"
    assert r["time_us"] > 0 and r["time_us"] >= r["bound_us"] * (1 - 1e-9), r
' "$tmp/xml.json"
  expect_rc 0 "simulate MSCCL XML text" -- "$braid" simulate "$xml" -t dgx-a100-x1 -b 128K -e 4M --in-place
  n=$(grep -v '^#' "$tmp/out" | grep -c '\*$')
  [ "$n" = 4 ] && ok || fail "$n rows marked outside the window, want 4 (128K, 256K, 2M, 4M)"
  # 8 ranks on a 16-GPU topology: exit 1, both counts named.
  # The XML declares only in-place calls: without --in-place the header says what was simulated (in-place), as the
  # note does.
  expect_rc 0 "simulate in-place-only XML out-of-place" -- "$braid" simulate "$xml" -t dgx-a100-x1 -b 1M -e 1M
  grep -q '^#  minBytes 1048576 maxBytes 1048576 step: 2(factor) datatype float in-place ' "$tmp/out" && ok ||
    fail "in-place-only XML: header $(sed -n 2p "$tmp/out")"
  grep -q '^# note: the algorithm declares only in-place calls; simulated that way' "$tmp/out" && ok ||
    fail "in-place-only XML: no note"
  expect_rc 0 "simulate in-place-only XML --json" -- "$braid" simulate "$xml" -t dgx-a100-x1 -b 1M -e 1M --json
  check_json "in-place-only XML: JSON in_place" 'assert d["in_place"] is True, d["in_place"]' "$tmp/out"
  expect_rc 1 "XML on the wrong topology" -- "$braid" simulate "$xml" -t dgx2-x1 -b 1M -e 1M
  grep -q "8 ranks" "$tmp/err" && grep -q "16 GPUs" "$tmp/err" && ok || fail "rank mismatch not named: $(cat "$tmp/err")"
  [ ! -s "$tmp/out" ] && ok || fail "a failed simulate printed on stdout"
else
  skip "realcases absent ($rc_dir): MSCCL XML simulation skipped"
fi

# ---- Errors: 2 for usage, 1 for what cannot be found or run ----------------------------------------------
expect_rc 2 "bad size syntax" -- "$braid" simulate ring -t dgx1-v100 -b 1X
grep -q -- "-b" "$tmp/err" && ok || fail "size error does not name -b"
expect_rc 2 "unknown datatype" -- "$braid" simulate ring -t dgx1-v100 -d complex
expect_rc 2 "-b above -e" -- "$braid" simulate ring -t dgx1-v100 -b 1G -e 1K
expect_rc 2 "factor 1" -- "$braid" simulate ring -t dgx1-v100 -f 1
expect_rc 2 "unknown collective" -- "$braid" simulate ring -t dgx1-v100 --coll gather
expect_rc 2 "tree cannot all-gather" -- "$braid" simulate tree -t dgx1-v100 --coll allgather
expect_rc 2 "unknown protocol" -- "$braid" simulate ring -t dgx1-v100 --protocol XYZ
expect_rc 2 "zero instances" -- "$braid" simulate ring -t dgx1-v100 --instances 0
expect_rc 2 "instances for NCCL's ring" -- "$braid" simulate nccl-ring -t dgx1-v100 --instances 2
grep -q "without MSCCL instances" "$tmp/err" && ok || fail "instances refusal unclear: $(cat "$tmp/err")"
expect_rc 2 "-b 0" -- "$braid" simulate ring -t dgx1-v100 -b 0 -e 1K
grep -q -- "-b/--minbytes: 0 is 0 bytes" "$tmp/err" && ok || fail "-b 0 refusal unclear: $(cat "$tmp/err")"
expect_rc 2 "missing --topology" -- "$braid" simulate ring
expect_rc 1 "missing algorithm file" -- "$braid" simulate "$tmp/nope.xml" -t dgx1-v100
grep -q "nope.xml" "$tmp/err" && ok || fail "missing file not named: $(cat "$tmp/err")"
[ ! -s "$tmp/out" ] && ok || fail "a failed simulate printed on stdout"
expect_rc 1 "unknown topology" -- "$braid" simulate ring -t no-such-topology
# One GPU: NCCL's model has no time for a local copy, so its columns show '-', not 0.00 and a ratio of 0.
cat >"$tmp/one-gpu.json" <<'EOF'
{"name": "one-gpu", "gpus_per_node": 1, "nics_per_node": 1, "alpha": 10, "betas": [[0]], "invbws": [[10]],
 "links": [[0]], "remote_alpha": 10, "remote_beta": 10, "remote_invbw": 10}
EOF
expect_rc 0 "simulate on one GPU" -- "$braid" simulate ring -t "$tmp/one-gpu.json" --coll allreduce -b 1K -e 1K
awk '$1 == 1024 {print $9, $10, $16}' "$tmp/out" | grep -qx -- '- - -' && ok ||
  fail "one GPU: the NCCL model's time and choice are not '-': $(grep '^ *1024 ' "$tmp/out")"
expect_rc 1 "html into a missing directory" -- "$braid" simulate ring -t dgx1-v100 -b 1K -e 4K --html "$tmp/no/dir/r.html"

finish
