#!/usr/bin/env bash
# `braid topo import` and `braid topo show` on topologies that cannot carry a collective (a GPU without a path to
# another), on names given twice, on parallel links (allowed: a multigraph), and on an NCCL full dump of H100s
# without <nvlink> elements (imported PCIe-only, with a note saying so and how to fix it). Every shipped topology
# and every realcase topology file that loads still loads.
# Usage: topo_checks_test.sh BRAID_BINARY SOURCE_DIR SHARED_DIR
source "$(dirname "$0")/lib.sh" "$@"

# Three GPUs on one node; gpu2 has no link at all.
cat >"$tmp/island.yaml" <<'EOF'
name: island
nodes: [{name: h}]
vertices:
  - {kind: gpu, node: h}
  - {kind: gpu, node: h}
  - {kind: gpu, node: h}
  - {name: sw, kind: pcie_switch, node: h}
links:
  - {a: gpu0, b: sw, kind: pcie, bandwidth: 24, alpha: 1}
  - {a: gpu1, b: sw, kind: pcie, bandwidth: 24, alpha: 1}
EOF
want="island.yaml: gpu0 has no path to gpu2 (no chain of links leads from one to the other): a collective over all GPUs is impossible"
expect_rc 1 "show: a GPU without links" -- "$braid" topo show "$tmp/island.yaml"
grep -qF "$want" "$tmp/err" && ok || fail "show island: $(cat "$tmp/err")"
expect_rc 1 "import: a GPU without links" -- "$braid" topo import "$tmp/island.yaml" -o "$tmp/island-out.yaml"
grep -qF "$want" "$tmp/err" && ok || fail "import island: $(cat "$tmp/err")"
[ ! -e "$tmp/island-out.yaml" ] && ok || fail "import wrote a topology it refused"

# gpu2 can send to the switch but nothing comes back: gpu0 cannot reach gpu2 (links are directed).
sed 's/^  - {a: gpu1, b: sw\(.*\)$/  - {a: gpu1, b: sw\1\n  - {src: gpu2, dst: sw\1/' "$tmp/island.yaml" >"$tmp/oneway.yaml"
expect_rc 1 "show: a one-way link" -- "$braid" topo show "$tmp/oneway.yaml"
grep -qF "oneway.yaml: gpu0 has no path to gpu2" "$tmp/err" && ok || fail "show one-way: $(cat "$tmp/err")"
# Both directions: a valid topology.
sed 's/^  - {src: gpu2, dst: sw, \(.*\)$/  - {a: gpu2, b: sw, \1/' "$tmp/oneway.yaml" >"$tmp/joined.yaml"
expect_rc 0 "show: every GPU joined" -- "$braid" topo show "$tmp/joined.yaml"

# The same vertex name or node name twice: file, line and field.
cat >"$tmp/twice.yaml" <<'EOF'
name: twice
nodes: [{name: h}]
vertices:
  - {kind: gpu, node: h}
  - {kind: gpu, node: h}
  - {name: sw, kind: pcie_switch, node: h}
  - {name: sw, kind: pcie_switch, node: h}
links:
  - {a: "gpu*", b: sw, kind: pcie, bandwidth: 24, alpha: 1}
EOF
expect_rc 1 "show: a vertex name twice" -- "$braid" topo show "$tmp/twice.yaml"
grep -qF "twice.yaml:7: vertices[3].name: vertex name 'sw' is already used" "$tmp/err" && ok ||
  fail "vertex name twice: $(cat "$tmp/err")"
sed 's/^nodes: \[{name: h}\]$/nodes: [{name: h}, {name: h}]/' "$tmp/joined.yaml" >"$tmp/nodes.yaml"
expect_rc 1 "import: a node name twice" -- "$braid" topo import "$tmp/nodes.yaml" -o "$tmp/nodes-out.yaml"
grep -qF "nodes.yaml:2: nodes[1].name: node name 'h' is used twice" "$tmp/err" && ok ||
  fail "node name twice: $(cat "$tmp/err")"

# A second link between gpu0 and the switch: parallel links are allowed (docs/formats/topology.md) and each stays.
sed '$a\  - {a: gpu0, b: sw, kind: pcie, bandwidth: 24, alpha: 1}' "$tmp/joined.yaml" >"$tmp/parallel.yaml"
expect_rc 0 "import: parallel links" -- "$braid" topo import "$tmp/parallel.yaml" -o "$tmp/parallel-out.yaml"
[ "$(grep -c '{src: "gpu0", dst: "sw"' "$tmp/parallel-out.yaml")" = 2 ] && ok ||
  fail "parallel links: $(grep gpu0 "$tmp/parallel-out.yaml")"

# Every shipped topology loads.
for f in "$src"/topologies/*.yaml; do
  expect_rc 0 "show $(basename "$f")" -- "$braid" topo show "$f"
done

if [ -d "$rc_dir/topo" ]; then
  # RC-07: AWS's p5 full static file, 8 x sm90 <gpu> and no <nvlink>: PCIe only, said with the fix.
  p5="$rc_dir/topo/aws-p5-48xl-topo-pr1226.xml"
  note="no <nvlink> element in this full dump although its GPUs are sm90"
  expect_rc 0 "import p5 static file" -- "$braid" topo import "$p5" -o "$tmp/p5.yaml"
  grep -q "^note: $note" "$tmp/err" && ok || fail "import p5: no NVLink note: $(cat "$tmp/err")"
  grep -qF "NCCL_TOPO_DUMP_FILE=<file> from a run where NVLink is visible" "$tmp/err" && ok ||
    fail "import p5: the note does not say how to fix it"
  expect_rc 0 "show p5 static file" -- "$braid" topo show "$p5"
  grep -q "^  - $note" "$tmp/out" && ok || fail "show p5: no NVLink note"
  grep -q "^  - $note" <("$braid" topo show "$tmp/p5.yaml") && ok || fail "the note did not travel into the YAML"
  # Every realcase topology that is a topology loads (graph files, and hint files with no GPU class, are refused).
  for f in "$rc_dir"/topo/*.xml; do
    case "$(basename "$f")" in
      *-graph.xml | aws-g5-48xl-topo-minimal.xml | aws-p5-48xl-topo-2023-hint.xml) want_rc=1 ;;
      *) want_rc=0 ;;
    esac
    expect_rc "$want_rc" "show $(basename "$f")" -- "$braid" topo show "$f"
  done
  for f in "$rc_dir"/smi/*.txt "$rc_dir"/taccl/topo/*.json; do
    expect_rc 0 "show $(basename "$f")" -- "$braid" topo show "$f"
  done
else
  skip "realcases absent ($rc_dir): p5 note and realcase loading not checked"
fi

finish
