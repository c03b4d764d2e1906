#!/usr/bin/env bash
# End-to-end tests of the `braid` CLI as a user runs it: exit codes, outputs, errors.
# Usage: cli_test.sh BRAID_BINARY SOURCE_DIR SHARED_DIR
source "$(dirname "$0")/lib.sh" "$@"
json_get() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

# Version and usage errors.
expect_rc 0 "--version" -- "$braid" --version
expect_rc 2 "no subcommand" -- "$braid"
expect_rc 2 "unknown option" -- "$braid" topo show --no-such-flag x
# A bad option value names the command, as every other error of `braid <cmd>` does.
expect_rc 2 "bad option value" -- "$braid" simulate ring -t dgx1-v100 --instances 1e9
grep -q "^braid simulate: error: .*--instances" "$tmp/err" || fail "bad option value: no 'braid simulate: error:' line"
# An unknown command word is named as such, with the valid ones (CLI11 alone says a subcommand is required).
expect_rc 2 "unknown command" -- "$braid" frob --json
grep -qF "braid: error: 'frob' is not a braid command: expected one of topo, verify, algo, demo, bound, simulate, synth, tune" \
  "$tmp/err" && ok || fail "unknown command: $(head -1 "$tmp/err")"
expect_rc 2 "unknown topo subcommand" -- "$braid" topo frob x.yaml
grep -qF "braid topo: error: 'frob' is not a braid topo command: expected one of import, show, draw" "$tmp/err" && ok ||
  fail "unknown topo subcommand: $(head -1 "$tmp/err")"
expect_rc 2 "topo without a subcommand" -- "$braid" topo
grep -qF "braid topo: error: a subcommand is required: one of import, show, draw" "$tmp/err" && ok ||
  fail "topo alone: $(head -1 "$tmp/err")"
expect_rc 0 "topo --help" -- "$braid" topo --help

# Shipped topologies: show --json parses and has the right GPU count.
declare -A gpus=([dgx1-v100]=8 [ndv2-x1]=8 [ndv2-x2]=16 [ndv2-x4]=32 [dgx2-x1]=16 [dgx2-x2]=32 [dgx-a100-x1]=8
  [dgx-a100-x2]=16 [dgx-a100-x4]=32 [dgx-h100-x1]=8 [dgx-h100-x2]=16 [dgx-h100-x4]=32 [pcie-2s4g]=8)
for name in "${!gpus[@]}"; do
  "$braid" topo show "$name" --json >"$tmp/t.json" 2>"$tmp/err" || { fail "topo show $name"; continue; }
  got=$(json_get "$tmp/t.json" 'd["gpus"]')
  [ "$got" = "${gpus[$name]}" ] && ok || fail "topo show $name: gpus=$got, want ${gpus[$name]}"
done

# Draw: a well-formed SVG with one element per GPU label.
expect_rc 0 "topo draw dgx2-x1" -- "$braid" topo draw dgx2-x1 -o "$tmp/d.svg"
python3 -c "import xml.etree.ElementTree as E,sys; E.parse(sys.argv[1])" "$tmp/d.svg" && ok || fail "draw: SVG does not parse"
grep -q 'gpu15' "$tmp/d.svg" && ok || fail "draw: gpu15 missing from the SVG"

# Missing file and unknown format: exit 1, message names the file, nothing written.
expect_rc 1 "topo show missing" -- "$braid" topo show "$tmp/nope.yaml"
grep -q "nope.yaml" "$tmp/err" && ok || fail "missing file not named in the error"
printf 'this is not a topology\n' >"$tmp/garbage.txt"
expect_rc 1 "topo import garbage" -- "$braid" topo import "$tmp/garbage.txt" -o "$tmp/garbage.yaml"
# A shipped name imports as its YAML, which then loads as a file.
expect_rc 0 "topo import of a shipped name" -- "$braid" topo import dgx1-v100 -o "$tmp/shipped.yaml"
expect_rc 0 "topo show of the imported shipped topology" -- "$braid" topo show "$tmp/shipped.yaml"
grep -q "8 GPUs in 1 node" "$tmp/out" && ok || fail "imported dgx1-v100: $(head -2 "$tmp/out")"
[ ! -e "$tmp/garbage.yaml" ] && ok || fail "a failed import left an output file"
printf 'name: x\nnodes:\n  - template: dgx\n' >"$tmp/bad.yaml"
expect_rc 1 "bad yaml" -- "$braid" topo show "$tmp/bad.yaml"
grep -q "bad.yaml:3: nodes\[0\].template" "$tmp/err" && ok || fail "YAML error does not name file:line ($(cat "$tmp/err"))"

if [ -d "$rc_dir" ]; then
  # Every nvidia-smi matrix imports to YAML, and the YAML reads back with the same GPU count.
  for f in "$rc_dir"/smi/*.txt; do
    b=$(basename "$f" .txt)
    if "$braid" topo import "$f" -o "$tmp/$b.yaml" 2>"$tmp/err"; then
      "$braid" topo show "$f" --json >"$tmp/a.json" && "$braid" topo show "$tmp/$b.yaml" --json >"$tmp/b.json" || {
        fail "show $b"
        continue
      }
      [ "$(json_get "$tmp/a.json" 'd["gpus"]')" = "$(json_get "$tmp/b.json" 'd["gpus"]')" ] && ok ||
        fail "$b: GPU count changed through YAML"
    else
      fail "import $f: $(head -1 "$tmp/err")"
    fi
  done
  # DGX-1 matrix: 16 NVLink pairs = 32 directed GPU-GPU links; 8 of the pairs have 2 lanes.
  "$braid" topo show "$rc_dir/smi/dgx1-v100-sxm2-hybrid-cube-mesh-1nic.txt" --json >"$tmp/dgx1.json"
  n=$(json_get "$tmp/dgx1.json" 'sum(1 for l in d["links"] if l["kind"]=="nvlink" and l["src"].startswith("gpu") and l["dst"].startswith("gpu"))')
  [ "$n" = 32 ] && ok || fail "DGX-1 matrix: $n directed NVLink links, want 32"
  n=$(json_get "$tmp/dgx1.json" 'sum(1 for l in d["links"] if l["kind"]=="nvlink" and l["lanes"]==2)')
  [ "$n" = 16 ] && ok || fail "DGX-1 matrix: $n directed NV2 links, want 16"

  # NCCL XML: a full dump imports; a graph file is refused with a message naming it.
  expect_rc 0 "import HGX A100 dump" -- "$braid" topo import "$rc_dir/topo/hgx-8x-a100-80g-nvswitch-5cx6bond.xml" -o "$tmp/hgx.yaml"
  expect_rc 1 "graph file refused" -- "$braid" topo show "$rc_dir/topo/azure-ncv4-a100pcie-graph.xml"
  grep -q "azure-ncv4-a100pcie-graph.xml" "$tmp/err" && ok || fail "graph-file refusal does not name the file"

  # TACCL profile + sketch: 2 NDv2 nodes.
  "$braid" topo import "$rc_dir/taccl/topo/topo-ndv2-1MB.json" --sketch "$rc_dir/taccl/sketch/sk1-ndv2-n2.json" \
    -o "$tmp/ndv2n2.yaml" 2>"$tmp/err" && "$braid" topo show "$tmp/ndv2n2.yaml" --json >"$tmp/n2.json" &&
    [ "$(json_get "$tmp/n2.json" 'd["gpus"]')" = 16 ] && ok || fail "TACCL profile + sketch: $(head -1 "$tmp/err")"

  # braid verify: verdicts as exit codes.
  expect_rc 0 "verify ring r48ll" -- "$braid" verify "$rc_dir/msccl/ndv4_allreduce_ring_r48ll.xml"
  expect_rc 0 "verify a2a with cpy --json" -- "$braid" verify "$rc_dir/msccl/ndv4_alltoall_allpairs_a2a2ll.xml" --json
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d['verified'] else 1)" "$tmp/out" && ok ||
    fail "verify --json does not say verified=true"
  expect_rc 1 "verify alltoall missing self chunk" -- "$braid" verify "$rc_dir/taccl/outputs_xml/mi300x-dumb_alltoall_n8_original.xml"
  expect_rc 0 "verify alltoall with copy" -- "$braid" verify "$rc_dir/taccl/outputs_xml/mi300x_alltoall_n24_withcopy.xml"
  expect_rc 1 "verify custom" -- "$braid" verify "$rc_dir/msccl/msccltools_custom_alltonext_24gpu.xml"
  expect_rc 1 "verify broadcast without coll" -- "$braid" verify "$rc_dir/taccl/outputs_xml/mcrl_A_broadcast.A.n2.gpu2.i3.xml"
  grep -q "coll" "$tmp/err" && ok || fail "missing-coll error does not name the attribute"
  expect_rc 0 "verify ndv2 ar with topology" -- "$braid" verify "$rc_dir/msccl/msccl_allreduce_small_LL.xml" --topology dgx-a100-x1
  # 24 ranks on an 8-GPU topology: the count is the finding; no per-pair NO ROUTE listing.
  expect_rc 1 "verify with a topology of another GPU count" -- "$braid" verify \
    "$rc_dir/taccl/outputs_xml/mi300x_alltoall_n24_withcopy.xml" --topology dgx1-v100
  grep -q "GPU count 8 does not match the algorithm's 24 ranks" "$tmp/out" || fail "GPU count mismatch not reported"
  if grep -q "NO ROUTE" "$tmp/out"; then fail "GPU count mismatch still lists NO ROUTE pairs"; fi
  expect_rc 1 "verify with wrong-size topology" -- "$braid" verify "$rc_dir/msccl/ndv4_allreduce_ring_r48ll.xml" --topology dgx2-x1
else
  skip "realcases absent ($rc_dir): corpus CLI checks skipped"
fi

# braid algo: every algorithm x collective it applies to, on 5 ranks, verifies and re-verifies from XML.
for spec in ring:allgather ring:reducescatter ring:allreduce ring:alltoall direct:allgather direct:allreduce \
  recursive:allgather recursive:reducescatter recursive:allreduce tree:allreduce pairwise:alltoall; do
  a=${spec%%:*}
  c=${spec##*:}
  expect_rc 0 "algo $a $c" -- "$braid" algo "$a" --coll "$c" -n 5 -o "$tmp/$a-$c.xml"
  expect_rc 0 "verify algo $a $c" -- "$braid" verify "$tmp/$a-$c.xml"
done
# Broadcast and reduce take a root; the XML keeps it and re-verifies.
for spec in ring:broadcast ring:reduce direct:broadcast direct:reduce recursive:broadcast recursive:reduce; do
  a=${spec%%:*}
  c=${spec##*:}
  expect_rc 0 "algo $a $c root 3" -- "$braid" algo "$a" --coll "$c" --root 3 -n 5 -o "$tmp/$a-$c-root3.xml"
  grep -q 'root="3"' "$tmp/$a-$c-root3.xml" && ok || fail "algo $a $c: root 3 not in the XML"
  expect_rc 0 "verify algo $a $c root 3" -- "$braid" verify "$tmp/$a-$c-root3.xml"
done
expect_rc 2 "root outside the ranks" -- "$braid" algo ring --coll broadcast --root 5 -n 5
expect_rc 2 "root on a collective without one" -- "$braid" algo ring --coll allreduce --root 1 -n 5
expect_rc 0 "algo hierarchical on dgx-a100-x2" -- "$braid" algo hierarchical --coll allreduce --topology dgx-a100-x2 -o "$tmp/h.json"
expect_rc 0 "verify Braid JSON" -- "$braid" verify "$tmp/h.json" --topology dgx-a100-x2
# Requests that cannot be satisfied as asked are usage errors (2); nothing is written.
expect_rc 2 "tree does not do allgather" -- "$braid" algo tree --coll allgather -n 4 -o "$tmp/x.xml"
[ ! -e "$tmp/x.xml" ] && ok || fail "a refused algo left an output file"
expect_rc 2 "unknown collective" -- "$braid" algo ring --coll foo -n 4
expect_rc 2 "unknown protocol" -- "$braid" algo ring --coll allgather -n 4 --proto XYZ
expect_rc 2 "negative channels" -- "$braid" algo ring --coll allgather -n 4 --channels -1
expect_rc 2 "channels above MSCCL's 32" -- "$braid" algo multiring --coll allgather -n 4 --channels 33
grep -qF -- "--channels: 33 is not in 0..32" "$tmp/err" && ok || fail "--channels 33: $(head -1 "$tmp/err")"
# nchannels: at most 32 (MSCCL's MAXCHANNELS). The ring uses channel 0 only, so the declared count alone decides.
expect_rc 0 "algo ring -n 8" -- "$braid" algo ring --coll allgather -n 8 -o "$tmp/ch.xml"
sed 's/nchannels="1"/nchannels="32"/' "$tmp/ch.xml" >"$tmp/ch32.xml"
expect_rc 0 "verify nchannels=32" -- "$braid" verify "$tmp/ch32.xml"
sed 's/nchannels="1"/nchannels="99999"/' "$tmp/ch.xml" >"$tmp/ch99999.xml"
expect_rc 1 "verify nchannels=99999" -- "$braid" verify "$tmp/ch99999.xml"
grep -qF "nchannels must be in 1..32 (MSCCL's MAXCHANNELS), got 99999" "$tmp/out" && grep -qF "$tmp/ch99999.xml" "$tmp/out" &&
  ok || fail "verify nchannels=99999: $(cat "$tmp/out")"
expect_rc 1 "simulate nchannels=99999" -- "$braid" simulate "$tmp/ch99999.xml" -t pcie-2s4g -b 1M -e 1M
grep -qF "nchannels must be in 1..32 (MSCCL's MAXCHANNELS), got 99999" "$tmp/err" && ok ||
  fail "simulate nchannels=99999: $(head -2 "$tmp/err")"
expect_rc 2 "zero ranks" -- "$braid" algo ring --coll allgather -n 0
# A direct all-to-all on 1024 ranks has 1024 x 1023 sends and as many receives, ~290 MiB of XML: above the 256 MiB
# `braid verify` reads, so it is refused and nothing is written (a few seconds: built and verified first).
expect_rc 1 "algo too large to read back" -- "$braid" algo direct --coll alltoall -n 1024 -o "$tmp/a2a1024.xml"
grep -qF "more than the 256 MiB Braid reads back from an algorithm file; not written: use fewer ranks or chunks" \
  "$tmp/err" && ok || fail "algo -n 1024: $(head -1 "$tmp/err")"
[ ! -e "$tmp/a2a1024.xml" ] && ok || fail "algo -n 1024 wrote a file verify cannot read"
expect_rc 2 "rank count differs from topology" -- "$braid" algo ring --coll allgather -n 4 -t dgx1-v100
expect_rc 2 "hierarchical without topology" -- "$braid" algo hierarchical --coll allreduce -n 8
# 2dh (Tutel's hierarchical all-to-all): node shape from -n and --ranks-per-node or from the topology's nodes.
expect_rc 0 "algo 2dh -n 8 --ranks-per-node 4" -- "$braid" algo 2dh --coll alltoall -n 8 --ranks-per-node 4 -o "$tmp/2dh.xml"
expect_rc 0 "verify 2dh" -- "$braid" verify "$tmp/2dh.xml"
grep -q 'coll="alltoall"' "$tmp/2dh.xml" && grep -q 'ngpus="8"' "$tmp/2dh.xml" && ok || fail "2dh XML header"
expect_rc 0 "algo 2dh on dgx-h100-x2" -- "$braid" algo 2dh --coll alltoall --topology dgx-h100-x2 -o "$tmp/2dh16.xml"
expect_rc 0 "verify 2dh on dgx-h100-x2" -- "$braid" verify "$tmp/2dh16.xml" --topology dgx-h100-x2
expect_rc 0 "algo 2dh summary" -- "$braid" algo 2dh --coll alltoall --topology dgx-h100-x2 --ranks-per-node 8
grep -q "2DH over 2 node(s) x 8 rank(s)" "$tmp/out" && ok || fail "2dh summary: $(cat "$tmp/out")"
expect_rc 2 "2dh without a node shape" -- "$braid" algo 2dh --coll alltoall -n 8
# -n and --ranks-per-node that do not fit together are a command-line error, as out-of-range values are.
expect_rc 2 "2dh shape not dividing the ranks" -- "$braid" algo 2dh --coll alltoall -n 10 --ranks-per-node 4
grep -q "10 ranks do not split into nodes of 4" "$tmp/err" && ok || fail "2dh -n 10 -g 4: $(cat "$tmp/err")"
expect_rc 2 "2dh nodes larger than the ranks" -- "$braid" algo 2dh --coll alltoall -n 8 --ranks-per-node 16
expect_rc 1 "2dh shape contradicting the topology" -- "$braid" algo 2dh --coll alltoall -t dgx-h100-x2 --ranks-per-node 4
expect_rc 2 "2dh on allreduce" -- "$braid" algo 2dh --coll allreduce -n 8 --ranks-per-node 4
expect_rc 2 "--ranks-per-node on ring" -- "$braid" algo ring --coll alltoall -n 8 --ranks-per-node 4
# Three nodes with no network between them: the topology is refused when loaded (validateTopology), so no algorithm
# may claim to run there.
cat >"$tmp/nonet.yaml" <<'YAML'
name: nonet
templates:
  t:
    gpus: 2
    links: [{a: gpu0, b: gpu1, kind: nvlink, bandwidth: 10, alpha: 1}]
nodes: {template: t, count: 3}
YAML
expect_rc 1 "hierarchical on disconnected nodes" -- "$braid" algo hierarchical --coll allreduce -t "$tmp/nonet.yaml" -o "$tmp/nonet.xml"
[ ! -e "$tmp/nonet.xml" ] && ok || fail "an unplaceable algorithm was written"
grep -q "nonet.yaml: gpu0 has no path to gpu2 .*: a collective over all GPUs is impossible" "$tmp/err" && ok ||
  fail "disconnected nodes: the error does not name the GPUs without a path: $(cat "$tmp/err")"

# A local file with a shipped topology's name is used, and stderr says so, once.
mkdir "$tmp/shadow"
cp "$src/topologies/pcie-2s4g.yaml" "$tmp/shadow/dgx1-v100"
(cd "$tmp/shadow" && "$braid" topo show dgx1-v100 --json) >"$tmp/out" 2>"$tmp/err"
[ "$(json_get "$tmp/out" 'd["name"]')" = pcie-2s4g ] && ok || fail "shadowing file: not the local file's topology"
[ "$(grep -c "note: using the file ./dgx1-v100; the shipped topology dgx1-v100 (.*) is not used" "$tmp/err")" = 1 ] &&
  ok || fail "shadowing file: no single note: $(cat "$tmp/err")"
(cd "$tmp/shadow" && "$braid" algo ring --coll allgather -t dgx1-v100 -o "$tmp/shadow/ring.xml") >"$tmp/out" 2>"$tmp/err"
[ "$(grep -c "note: using the file ./dgx1-v100" "$tmp/err")" = 1 ] && ok || fail "algo -t: $(cat "$tmp/err")"
cp "$src/topologies/pcie-2s4g.yaml" "$tmp/shadow/ndv2-x1.yaml"
(cd "$tmp/shadow" && "$braid" bound -t ndv2-x1.yaml -c allgather -b 1K -e 1K) >"$tmp/out" 2>"$tmp/err"
grep -q "note: using the file ./ndv2-x1.yaml; the shipped topology ndv2-x1 (.*) is not used" "$tmp/err" && ok ||
  fail "bound -t ndv2-x1.yaml: $(cat "$tmp/err")"
(cd "$tmp" && "$braid" topo show dgx1-v100) >"$tmp/out" 2>"$tmp/err"
grep -q "note:" "$tmp/err" && fail "no local file, yet a note: $(cat "$tmp/err")" || ok

# nchannels outside 1..32 gives MSCCL's range, from the reader (0) as from verify() (99).
"$braid" algo ring --coll allgather -n 2 -o "$tmp/ch.xml" >/dev/null 2>&1 || fail "algo ring -n 2 -o ch.xml"
"$braid" algo ring --coll allgather -n 2 -o "$tmp/ch.json" >/dev/null 2>&1 || fail "algo ring -n 2 -o ch.json"
for v in 0 -1 99; do
  sed "s/nchannels=\"1\"/nchannels=\"$v\"/" "$tmp/ch.xml" >"$tmp/ch$v.xml"
  expect_rc 1 "verify nchannels=$v" -- "$braid" verify "$tmp/ch$v.xml"
  grep -qF "nchannels must be in 1..32 (MSCCL's MAXCHANNELS), got $v" "$tmp/out" "$tmp/err" && ok ||
    fail "nchannels=$v: $(cat "$tmp/err" "$tmp/out" | grep -i nchannels | head -2)"
  sed "s/\"num_channels\": 1,/\"num_channels\": $v,/" "$tmp/ch.json" >"$tmp/ch$v.json"
  expect_rc 1 "verify num_channels $v" -- "$braid" verify "$tmp/ch$v.json"
  grep -qF "nchannels must be in 1..32 (MSCCL's MAXCHANNELS), got $v" "$tmp/out" "$tmp/err" && ok ||
    fail "num_channels $v: $(cat "$tmp/err" "$tmp/out" | grep -i channels | head -2)"
done

# -n out of range: one message for 0, negative and too large counts (usage error).
for n in 0 -3 99999; do
  expect_rc 2 "algo -n $n" -- "$braid" algo ring --coll allreduce -n "$n"
  grep -qF -- "braid algo: -n $n: the number of ranks must be in 1..2048" "$tmp/err" && ok ||
    fail "algo -n $n: $(head -1 "$tmp/err")"
done
# A request the verifier could not hold, or whose file would pass 256 MiB, is refused before it is built: exit 2
# naming -n, the count and the limit, within a second, nothing written.
start=$(date +%s%N)
expect_rc 2 "algo ring allreduce -n 2048" -- "$braid" algo ring --coll allreduce -n 2048 -o "$tmp/big.xml"
grep -qF -- "-n 2048: ring allreduce would hold $((2 * 2048 * 2048)) chunks over all ranks, more than the $((1 << 22))" \
  "$tmp/err" && ok || fail "algo -n 2048: $(head -1 "$tmp/err")"
expect_rc 2 "algo direct alltoall -n 961 -o .json" -- "$braid" algo direct --coll alltoall -n 961 -o "$tmp/big.json"
grep -q -- "-n 961: the Braid JSON of direct alltoall would be at least [0-9.]* MiB ($((2 * 961 * 960)) steps or more), more than the 256 MiB" \
  "$tmp/err" && ok || fail "algo direct -n 961: $(head -1 "$tmp/err")"
[ $(( ($(date +%s%N) - start) / 1000000 )) -lt 5000 ] && ok || fail "the refusals took more than 5 s: something was built"
[ ! -e "$tmp/big.xml" ] && [ ! -e "$tmp/big.json" ] && ok || fail "a refused algorithm was written"

# The README's main job.
(cd "$tmp" && "$braid" demo --time-limit 5 >demo.out 2>demo.err) && ok || fail "demo: $(head -3 "$tmp/demo.err")"
n=$(ls "$tmp"/braid-out/*.xml 2>/dev/null | wc -l)
# Synthesized all-gather, all-reduce and all-to-all (tests/cli/synth_test.sh checks them further).
[ "$n" = 3 ] && ok || fail "demo wrote $n XML files, want 3"

finish
