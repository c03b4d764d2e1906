// Braid topology YAML: templates, networks, explicit vertices/links, errors with line and field, and the
// write/read round trip (also on every shipped file).

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "braid/file_io.h"
#include "braid/topology.h"

namespace braid {
namespace {

void expectSameTopology(const Topology& a, const Topology& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.notes, b.notes);
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  for (size_t k = 0; k < a.nodes.size(); ++k) {
    EXPECT_EQ(a.nodes[k].name, b.nodes[k].name);
    EXPECT_EQ(a.nodes[k].tmpl, b.nodes[k].tmpl);
    EXPECT_EQ(a.nodes[k].gpus, b.nodes[k].gpus);
    EXPECT_EQ(a.nodes[k].nics, b.nodes[k].nics);
  }
  ASSERT_EQ(a.vertices.size(), b.vertices.size());
  for (size_t i = 0; i < a.vertices.size(); ++i) {
    const Vertex& u = a.vertices[i];
    const Vertex& v = b.vertices[i];
    EXPECT_EQ(u.id, v.id);
    EXPECT_EQ(u.kind, v.kind) << u.name;
    EXPECT_EQ(u.name, v.name);
    EXPECT_EQ(u.node, v.node) << u.name;
    EXPECT_EQ(u.rank, v.rank) << u.name;
    EXPECT_EQ(u.local, v.local) << u.name;
    EXPECT_EQ(u.model, v.model) << u.name;
    EXPECT_EQ(u.busid, v.busid) << u.name;
    EXPECT_EQ(u.numa, v.numa) << u.name;
  }
  ASSERT_EQ(a.links.size(), b.links.size());
  for (size_t i = 0; i < a.links.size(); ++i) {
    const Link& l = a.links[i];
    const Link& m = b.links[i];
    EXPECT_EQ(l.src, m.src) << "link " << i;
    EXPECT_EQ(l.dst, m.dst) << "link " << i;
    EXPECT_EQ(l.kind, m.kind) << "link " << i;
    EXPECT_EQ(l.lanes, m.lanes) << "link " << i;
    EXPECT_EQ(l.bandwidth_gbps, m.bandwidth_gbps) << "link " << i;  // exact: the writer prints round-trip doubles
    EXPECT_EQ(l.alpha_us, m.alpha_us) << "link " << i;
  }
}

std::string errorOf(const std::string& yaml) {
  Result<Topology> t = readTopologyYaml(yaml, "x.yaml");
  EXPECT_FALSE(t.isOk()) << "expected an error for:\n" << yaml;
  if (t.isOk()) return "";
  EXPECT_EQ(t.status().code(), StatusCode::kParseError) << t.status().toString();
  return t.status().message();
}

// Two nodes from one template; each node: 2 GPUs on an NVSwitch (4 lanes x 25 GB/s), 2 NICs on a PCIe switch.
const char* kTwoNodeRail = R"(name: tiny
notes: ["made up for a test"]
templates:
  box:
    gpus: {count: 2, model: G1}
    nics: {count: 2, model: N1}
    switches:
      - {name: nvs, kind: nvswitch}
      - {name: pci, kind: pcie_switch}
    links:
      - {a: "gpu*", b: nvs, kind: nvlink, lanes: 4, lane_bandwidth: 25, alpha: 0.5}
      - {a: [gpu0, gpu1, "nic*"], b: pci, kind: pcie, bandwidth: 24, alpha: 1}
nodes: {template: box, count: 2}
network: {kind: rail, speed_gbit: 200, alpha: 1.5}
)";

TEST(TopologyYaml, TemplatesAndRailNetwork) {
  Result<Topology> r = readTopologyYaml(kTwoNodeRail, "tiny.yaml");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const Topology& t = *r;
  EXPECT_EQ(t.name, "tiny");
  EXPECT_EQ(t.source, "tiny.yaml");
  ASSERT_EQ(t.numNodes(), 2);
  EXPECT_EQ(t.numGpus(), 4);
  EXPECT_EQ(t.nodes[1].name, "node1");
  EXPECT_EQ(t.nodes[1].tmpl, "box");
  // Ranks node by node in local order: node1 holds ranks 2 and 3.
  ASSERT_EQ(t.nodes[1].gpus.size(), 2u);
  EXPECT_EQ(t.vertices[t.nodes[1].gpus[0]].name, "gpu2");
  EXPECT_EQ(t.vertices[t.nodes[1].gpus[1]].rank, 3);
  EXPECT_EQ(t.vertices[t.nodes[1].gpus[1]].local, 1);
  EXPECT_EQ(t.vertices[t.nodes[1].gpus[1]].model, "G1");
  EXPECT_GE(t.findVertex("node1.nic1"), 0);
  EXPECT_GE(t.findVertex("node0.nvs"), 0);
  EXPECT_GE(t.findVertex("rail0"), 0);
  EXPECT_GE(t.findVertex("rail1"), 0);
  EXPECT_EQ(t.findVertex("rail2"), -1);
  // Per node: 2 GPU-nvswitch + 4 PCIe duplex links = 12 directed; rails: 4 NICs duplex = 8 directed.
  EXPECT_EQ(t.links.size(), 2u * 12u + 8u);
  const std::vector<int> nv = t.linksBetween(t.findVertex("gpu3"), t.findVertex("node1.nvs"));
  ASSERT_EQ(nv.size(), 1u);
  EXPECT_DOUBLE_EQ(t.links[nv[0]].bandwidth_gbps, 100);  // 4 lanes x 25
  EXPECT_EQ(t.links[nv[0]].lanes, 4);
  // NIC 1 of node 1 sits on rail 1 at 200 Gb/s / 8 = 25 GB/s.
  const std::vector<int> net = t.linksBetween(t.findVertex("node1.nic1"), t.findVertex("rail1"));
  ASSERT_EQ(net.size(), 1u);
  EXPECT_DOUBLE_EQ(t.links[net[0]].bandwidth_gbps, 25);
  EXPECT_DOUBLE_EQ(t.links[net[0]].alpha_us, 1.5);
  EXPECT_TRUE(t.linksBetween(t.findVertex("node1.nic1"), t.findVertex("rail0")).empty());
  // gpu0 -> gpu3 crosses the network: the bottleneck is the PCIe link at 24 GB/s.
  std::optional<Route> route = t.route(0, 3);
  ASSERT_TRUE(route.has_value());
  EXPECT_DOUBLE_EQ(route->bandwidth_gbps, 24);
  EXPECT_EQ(route->links.size(), 6u);
}

TEST(TopologyYaml, FatTreeOversubscription) {
  // 5 nodes x 2 NICs of 25 GB/s, 2 nodes per leaf -> 3 leaves (the last holds 1 node), 2 spines, 2:1.
  // Leaf 0 and 1: downlink 4 x 25 = 100, uplink 50, 25 per spine. Leaf 2: downlink 50, uplink 25, 12.5 per spine.
  const std::string yaml = R"(name: ft
templates:
  n:
    gpus: 1
    nics: 2
    switches: [{name: p, kind: pcie_switch}]
    links: [{a: ["gpu0", "nic*"], b: p, kind: pcie, bandwidth: 30, alpha: 1}]
nodes: {template: n, count: 5}
network: {kind: fat-tree, bandwidth: 25, alpha: 1, nodes_per_leaf: 2, spines: 2, oversubscription: "2:1"}
)";
  Result<Topology> r = readTopologyYaml(yaml, "ft.yaml");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const Topology& t = *r;
  EXPECT_EQ(t.numGpus(), 5);
  const int leaf0 = t.findVertex("leaf0"), leaf2 = t.findVertex("leaf2"), spine1 = t.findVertex("spine1");
  ASSERT_GE(leaf0, 0);
  ASSERT_GE(leaf2, 0);
  ASSERT_GE(spine1, 0);
  EXPECT_EQ(t.findVertex("leaf3"), -1);
  ASSERT_EQ(t.linksBetween(leaf0, spine1).size(), 1u);
  EXPECT_DOUBLE_EQ(t.links[t.linksBetween(leaf0, spine1)[0]].bandwidth_gbps, 25);
  EXPECT_DOUBLE_EQ(t.links[t.linksBetween(spine1, leaf0)[0]].bandwidth_gbps, 25);
  EXPECT_DOUBLE_EQ(t.links[t.linksBetween(leaf2, spine1)[0]].bandwidth_gbps, 12.5);
  // node4's NICs are on leaf2; node3's on leaf1.
  EXPECT_EQ(t.linksBetween(t.findVertex("node4.nic1"), leaf2).size(), 1u);
  EXPECT_EQ(t.linksBetween(t.findVertex("node3.nic0"), t.findVertex("leaf1")).size(), 1u);
  // gpu0 -> gpu4 goes up to a spine: bottleneck 12.5 on leaf2's uplink, 8 links.
  std::optional<Route> route = t.route(0, 4);
  ASSERT_TRUE(route.has_value());
  EXPECT_DOUBLE_EQ(route->bandwidth_gbps, 12.5);
  EXPECT_EQ(route->links.size(), 8u);
  EXPECT_EQ(route->slowest_kind, LinkKind::kNet);
  // gpu0 -> gpu1 stays under leaf0: 6 links, bottleneck 25 (NIC).
  route = t.route(0, 1);
  ASSERT_TRUE(route.has_value());
  EXPECT_EQ(route->links.size(), 6u);
  EXPECT_DOUBLE_EQ(route->bandwidth_gbps, 25);
}

TEST(TopologyYaml, ExplicitVerticesLinksAndMeshPattern) {
  const std::string yaml = R"(name: mesh
nodes:
  - {name: host}
vertices:
  - {kind: gpu, node: host, model: M}
  - {kind: gpu, node: host}
  - {name: gpu2, kind: gpu, node: host}
  - {kind: gpu, node: host, busid: "0000:07:00.0", numa: 1}
  - {name: ext, kind: net_switch}
links:
  - {a: "gpu*", b: "gpu*", kind: nvlink, lanes: 2, bandwidth: 50, alpha: 0.7}
  - {src: gpu3, dst: ext, kind: net, bandwidth: 12.5, alpha: 2}
)";
  Result<Topology> r = readTopologyYaml(yaml, "mesh.yaml");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const Topology& t = *r;
  EXPECT_EQ(t.numGpus(), 4);
  EXPECT_EQ(t.vertices[3].busid, "0000:07:00.0");
  EXPECT_EQ(t.vertices[3].numa, 1);
  EXPECT_EQ(t.vertices[0].model, "M");
  // A 4-GPU full mesh: 6 pairs x 2 directions, plus one directed link.
  EXPECT_EQ(t.links.size(), 13u);
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < 4; ++b) EXPECT_EQ(t.linksBetween(a, b).size(), a == b ? 0u : 1u) << a << "->" << b;
  }
  EXPECT_EQ(t.linksBetween(3, 4).size(), 1u);
  EXPECT_TRUE(t.linksBetween(4, 3).empty());
}

TEST(TopologyYaml, ErrorsNameLineAndField) {
  EXPECT_EQ(errorOf(R"(name: a
templates:
  dgx-a100:
    gpus: 2
nodes:
  - {template: dgx, count: 2}
)"),
            "x.yaml:6: nodes[0].template: unknown template 'dgx' (defined: dgx-a100)");
  // A typo in a key is an error, not silently ignored.
  EXPECT_EQ(
      errorOf(R"(name: a
templates:
  t:
    gpus: 2
    links:
      - {a: gpu0, b: gpu1, kind: nvlink, bandwdith: 20, alpha: 1}
nodes: {template: t}
)"),
      "x.yaml:6: templates.t.links[0].bandwdith: unknown key 'bandwdith' (allowed: a, alpha, b, bandwidth, directed, "
      "dst, kind, lane_bandwidth, lanes, speed_gbit, src)");
  EXPECT_NE(errorOf("name: a\nnodez: 3\n").find("x.yaml:2: nodez: unknown key"), std::string::npos);
  // Template endpoint that does not exist.
  std::string e = errorOf(R"(name: a
templates:
  t:
    gpus: 2
    links:
      - {a: gpu0, b: gpu7, kind: nvlink, bandwidth: 20, alpha: 1}
nodes: {template: t}
)");
  EXPECT_NE(e.find("x.yaml:6: templates.t.links[0].b: 'gpu7' matches no vertex of template 't'"), std::string::npos)
      << e;
  // Self loop.
  e = errorOf(
      "name: a\nnodes: [{name: h}]\nvertices: [{kind: gpu, node: h}]\nlinks:\n  - {a: gpu0, b: gpu0, kind: pcie, "
      "bandwidth: 1, alpha: 0}\n");
  EXPECT_NE(e.find("x.yaml:5: links[0]: link from 'gpu0' to itself"), std::string::npos) << e;
  // Bad values.
  e = errorOf(
      "name: a\nnodes: [{name: h}]\nvertices: [{kind: gpu, node: h}, {kind: gpu, node: h}]\nlinks:\n"
      "  - {a: gpu0, b: gpu1, kind: pcie, bandwidth: -3, alpha: 0}\n");
  EXPECT_NE(e.find("x.yaml:5: links[0].bandwidth: must be > 0"), std::string::npos) << e;
  // Finite but outside physical ranges (1e308 GB/s made GLPK abort the process).
  e = errorOf(
      "name: a\nnodes: [{name: h}]\nvertices: [{kind: gpu, node: h}, {kind: gpu, node: h}]\nlinks:\n"
      "  - {a: gpu0, b: gpu1, kind: pcie, bandwidth: 1e308, alpha: 0}\n");
  EXPECT_NE(e.find("bandwidth 1e+308 GB/s is outside 1e-06 .. 1e+06 GB/s"), std::string::npos) << e;
  e = errorOf(
      "name: a\nnodes: [{name: h}]\nvertices: [{kind: gpu, node: h}, {kind: gpu, node: h}]\nlinks:\n"
      "  - {a: gpu0, b: gpu1, kind: pcie, bandwidth: 1e-300, alpha: 0}\n");
  EXPECT_NE(e.find("is outside 1e-06 .. 1e+06 GB/s"), std::string::npos) << e;
  e = errorOf(
      "name: a\nnodes: [{name: h}]\nvertices: [{kind: gpu, node: h}, {kind: gpu, node: h}]\nlinks:\n"
      "  - {a: gpu0, b: gpu1, kind: pcie, bandwidth: 3, alpha: 1e308}\n");
  EXPECT_NE(e.find("alpha must be in 0 .. 1e+07 us"), std::string::npos) << e;
  e = errorOf(
      "name: a\nnodes: [{name: h}]\nvertices: [{kind: gpu, node: h}, {kind: gpu, node: h}]\nlinks:\n"
      "  - {a: gpu0, b: gpu1, kind: pcie, bandwidth: 3, alpha: fast}\n");
  EXPECT_NE(e.find("x.yaml:5: links[0].alpha: 'fast' is not a finite number"), std::string::npos) << e;
  e = errorOf(
      "name: a\nnodes: [{name: h}]\nvertices: [{kind: gpu, node: h}, {kind: gpu, node: h}]\nlinks:\n"
      "  - {a: gpu0, b: gpu1, kind: optical, bandwidth: 3, alpha: 1}\n");
  EXPECT_NE(e.find("links[0].kind: unknown link kind 'optical'"), std::string::npos) << e;
  e = errorOf(
      "name: a\nnodes: [{name: h}]\nvertices: [{kind: gpu, node: h}, {kind: gpu, node: h}]\nlinks:\n"
      "  - {a: gpu0, b: gpu1, kind: pcie, bandwidth: 3, speed_gbit: 100, alpha: 1}\n");
  EXPECT_NE(e.find("give only one of"), std::string::npos) << e;
  e = errorOf(
      "name: a\nnodes: [{name: h}]\nvertices: [{kind: gpu, node: h}, {kind: gpu, node: h}]\nlinks:\n"
      "  - {a: gpu0, b: gpu1, kind: pcie, bandwidth: 3}\n");
  EXPECT_NE(e.find("x.yaml:5: links[0].alpha: missing"), std::string::npos) << e;
  e = errorOf(
      "name: a\nnodes: [{name: h}]\nvertices:\n  - {kind: gpu, node: h}\n  - {name: gpu5, kind: gpu, node: h}\n");
  EXPECT_NE(e.find("x.yaml:5: vertices[1].name: GPUs are named by rank"), std::string::npos) << e;
  e = errorOf("name: a\nnodes: [{name: h}]\nvertices:\n  - {kind: gpu, node: elsewhere}\n");
  EXPECT_NE(e.find("x.yaml:4: vertices[0].node: unknown node 'elsewhere'"), std::string::npos) << e;
  // Network errors.
  e = errorOf(std::string(kTwoNodeRail).replace(std::string(kTwoNodeRail).find("kind: rail"), 10, "kind: ring"));
  EXPECT_NE(e.find("x.yaml:14: network.kind: unknown network kind 'ring'"), std::string::npos) << e;
  e = errorOf(
      std::string(kTwoNodeRail).replace(std::string(kTwoNodeRail).find("alpha: 1.5"), 10, "alpha: 1.5, spines: 2"));
  EXPECT_NE(e.find("network.spines: only used by kind fat-tree"), std::string::npos) << e;
  // Duplicate key, syntax error, empty or non-mapping document, no GPUs.
  e = errorOf("name: a\nname: b\n");
  EXPECT_NE(e.find("x.yaml:2: name: key 'name' appears twice"), std::string::npos) << e;
  e = errorOf("name: a\nnodes: [{name: h}\nvertices: []\n");
  EXPECT_NE(e.find("x.yaml:"), std::string::npos) << e;
  EXPECT_NE(e.find("YAML"), std::string::npos) << e;
  EXPECT_FALSE(errorOf("").empty());
  EXPECT_FALSE(errorOf("- 1\n- 2\n").empty());
  e = errorOf("name: a\nnodes: [{name: h}]\n");
  EXPECT_NE(e.find("no GPUs"), std::string::npos) << e;
  e = errorOf("name: a\ntemplates:\n  t: {gpus: {count: -1}}\nnodes: {template: t}\n");
  EXPECT_NE(e.find("x.yaml:3: templates.t.gpus.count: -1 is out of range"), std::string::npos) << e;
  e = errorOf("name: a\ntemplates:\n  t: {gpus: 1}\nnodes: {template: t, count: 2, name: x}\n");
  EXPECT_NE(e.find("nodes.name: a name is only allowed with count 1"), std::string::npos) << e;
  e = errorOf("name: a\ntemplates:\n  t: {gpus: 1}\nnodes: [{template: t, name: x}, {template: t, name: x}]\n");
  EXPECT_NE(e.find("node name 'x' is used twice"), std::string::npos) << e;
}

TEST(TopologyYaml, RoundTripKeepsEveryField) {
  Result<Topology> r = readTopologyYaml(kTwoNodeRail, "tiny.yaml");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  Topology t = *r;
  // Fields that only imports set, and awkward strings and numbers.
  t.vertices[0].busid = "0000:07:00.0";
  t.vertices[1].numa = 3;
  t.vertices[2].model = "quote \" backslash \\ colon: # hash";
  t.notes.push_back("a note with 'quotes', a colon: and a\ttab");
  t.links[0].bandwidth_gbps = 20.6 * 18;
  t.links[1].alpha_us = 1.0 / 3.0;
  t.links[2].bandwidth_gbps = 1e-5;
  const std::string text = writeTopologyYaml(t);
  Result<Topology> back = readTopologyYaml(text, "tiny.yaml");
  ASSERT_TRUE(back.isOk()) << back.status().toString() << "\n" << text;
  expectSameTopology(t, *back);
  // Writing again gives the same text.
  EXPECT_EQ(writeTopologyYaml(*back), text);
}

TEST(TopologyYaml, RoundTripOfEveryShippedFile) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(BRAID_SOURCE_DIR) / "topologies";
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    ++files;
    SCOPED_TRACE(entry.path().string());
    Result<std::string> text = readFile(entry.path().string());
    ASSERT_TRUE(text.isOk());
    Result<Topology> t = readTopologyYaml(*text, entry.path().string());
    ASSERT_TRUE(t.isOk()) << t.status().toString();
    const std::string flat = writeTopologyYaml(*t);
    Result<Topology> back = readTopologyYaml(flat, entry.path().string());
    ASSERT_TRUE(back.isOk()) << back.status().toString();
    expectSameTopology(*t, *back);
  }
  EXPECT_GE(files, 13);
}

}  // namespace
}  // namespace braid

namespace braid {
namespace {

// The first YAML example of docs/formats/topology.md must stay valid and mean what the text says.
TEST(TopologyYaml, DocumentationExample) {
  Result<std::string> doc = readFile(std::string(BRAID_SOURCE_DIR) + "/docs/formats/topology.md");
  ASSERT_TRUE(doc.isOk()) << doc.status().toString();
  const size_t begin = doc->find("```yaml\n");
  ASSERT_NE(begin, std::string::npos);
  const size_t end = doc->find("```", begin + 8);
  ASSERT_NE(end, std::string::npos);
  Result<Topology> r = readTopologyYaml(doc->substr(begin + 8, end - begin - 8), "topology.md");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const Topology& t = *r;
  EXPECT_EQ(t.numGpus(), 512);
  EXPECT_EQ(t.numNodes(), 64);
  EXPECT_GE(t.findVertex("leaf15"), 0);
  EXPECT_EQ(t.findVertex("leaf16"), -1);
  EXPECT_GE(t.findVertex("spine7"), 0);
  EXPECT_EQ(t.vertices[t.gpuVertex(511)].node, 63);
  // A leaf holds 4 nodes x 8 NICs x 25 GB/s = 800 GB/s; 2:1 -> 400 up, 50 to each of 8 spines.
  const std::vector<int> up = t.linksBetween(t.findVertex("leaf3"), t.findVertex("spine5"));
  ASSERT_EQ(up.size(), 1u);
  EXPECT_DOUBLE_EQ(t.links[up[0]].bandwidth_gbps, 50);
  // The explicit storage switch reaches all 8 spines at 400 Gb/s = 50 GB/s, both ways.
  const int storage = t.findVertex("storage");
  ASSERT_GE(storage, 0);
  EXPECT_EQ(t.outLinks(storage).size(), 8u);
  EXPECT_EQ(t.inLinks(storage).size(), 8u);
  EXPECT_DOUBLE_EQ(t.links[t.outLinks(storage)[0]].bandwidth_gbps, 50);
  // node12.nic3 hangs under leaf3 (nodes 12..15).
  EXPECT_EQ(t.linksBetween(t.findVertex("node12.nic3"), t.findVertex("leaf3")).size(), 1u);
  // Cross-leaf route: GPU -> PCIe -> NIC -> leaf -> spine -> leaf -> NIC -> PCIe -> GPU, bottleneck PCIe 24.
  std::optional<Route> route = t.route(0, 511);
  ASSERT_TRUE(route.has_value());
  EXPECT_EQ(route->links.size(), 8u);
  EXPECT_DOUBLE_EQ(route->bandwidth_gbps, 24);
}

}  // namespace
}  // namespace braid

namespace braid {
namespace {

TEST(TopologyYaml, LargeClusterFromFewLines) {
  // 512 nodes x 8 GPUs on 8 rails: 4096 ranks from a dozen lines, read, written and read back.
  const std::string yaml = R"(name: big
templates:
  n:
    gpus: 8
    nics: 8
    switches: [{name: nvs, kind: nvswitch}, {name: pci, kind: pcie_switch}]
    links:
      - {a: "gpu*", b: nvs, kind: nvlink, lanes: 18, lane_bandwidth: 20.6, alpha: 0.35}
      - {a: ["gpu*", "nic*"], b: pci, kind: pcie, bandwidth: 48, alpha: 1}
nodes: {template: n, count: 512}
network: {kind: rail, speed_gbit: 400, alpha: 1.3}
)";
  Result<Topology> r = readTopologyYaml(yaml, "big.yaml");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->numGpus(), 4096);
  EXPECT_EQ(r->vertices.size(), 512u * 18u + 8u);
  EXPECT_EQ(r->links.size(), 512u * (8u + 16u + 8u) * 2u);
  const int g = r->gpuVertex(4095);
  EXPECT_EQ(r->vertices[g].node, 511);
  EXPECT_EQ(r->vertices[g].local, 7);
  EXPECT_EQ(r->vertices[r->findVertex("node511.nic7")].local, 7);
  Result<Topology> back = readTopologyYaml(writeTopologyYaml(*r), "big.yaml");
  ASSERT_TRUE(back.isOk()) << back.status().toString();
  EXPECT_EQ(back->links.size(), r->links.size());
  EXPECT_EQ(back->vertices[g].name, "gpu4095");
}

}  // namespace
}  // namespace braid
