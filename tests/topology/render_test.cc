// topologyToJson, describeTopology and drawTopologySvg on shipped topologies; GPU -> NIC affinity (nicAffinity)
// on small hand-built topologies.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <pugixml.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "braid/file_io.h"
#include "braid/topology.h"

namespace braid {
namespace {

Topology shipped(const std::string& name) {
  Result<std::string> path = findShippedTopology(name);
  EXPECT_TRUE(path.isOk()) << path.status().toString();
  Result<std::string> text = readFile(path.isOk() ? *path : "");
  EXPECT_TRUE(text.isOk());
  Result<Topology> t = readTopologyYaml(text.isOk() ? *text : "", name + ".yaml");
  EXPECT_TRUE(t.isOk()) << t.status().toString();
  return t.isOk() ? *t : Topology();
}

// The GPU x GPU class matrix rows printed by describeTopology: row name -> cells.
std::vector<std::vector<std::string>> classMatrix(const std::string& text, int gpus) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(text);
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line.rfind("GPU x GPU best route", 0) == 0) {
      inside = true;
      std::getline(in, line);  // header
      continue;
    }
    if (!inside) continue;
    std::istringstream words(line);
    std::vector<std::string> cells;
    for (std::string w; words >> w;) cells.push_back(w);
    if (cells.empty() || cells[0].rfind("gpu", 0) != 0) break;
    cells.erase(cells.begin());
    rows.push_back(cells);
    if (static_cast<int>(rows.size()) == gpus) break;
  }
  return rows;
}

TEST(TopologyJson, FieldsAndCounts) {
  Topology t = shipped("dgx-a100-x2");
  const nlohmann::json j = nlohmann::json::parse(topologyToJson(t));
  EXPECT_EQ(j["name"], "dgx-a100-x2");
  EXPECT_EQ(j["gpus"], 16);
  EXPECT_EQ(j["nodes"], 2);
  ASSERT_EQ(j["links"].size(), t.links.size());
  ASSERT_EQ(j["vertices"].size(), t.vertices.size());
  EXPECT_EQ(j["notes"].size(), t.notes.size());
  // The first template link is gpu0 <-> nvswitch (12 lanes, 240 GB/s, 0.35 us).
  const nlohmann::json& l0 = j["links"][0];
  EXPECT_EQ(l0["src"], "gpu0");
  EXPECT_EQ(l0["dst"], "node0.nvswitch");
  EXPECT_EQ(l0["kind"], "nvlink");
  EXPECT_EQ(l0["lanes"], 12);
  EXPECT_DOUBLE_EQ(l0["bandwidth_gbps"].get<double>(), 240);
  EXPECT_DOUBLE_EQ(l0["alpha_us"].get<double>(), 0.35);
  // GPU vertices named by rank, in node order; rank 9 is local GPU 1 of node1.
  int gpus = 0;
  for (const auto& v : j["vertices"]) {
    if (v["kind"] != "gpu") continue;
    EXPECT_EQ(v["name"], "gpu" + std::to_string(v["rank"].get<int>()));
    if (v["rank"] == 9) {
      EXPECT_EQ(v["node"], "node1");
      EXPECT_EQ(v["local"], 1);
    }
    ++gpus;
  }
  EXPECT_EQ(gpus, 16);
  EXPECT_EQ(j["node_list"][1]["nics"][3], "node1.nic3");
  EXPECT_EQ(j["node_list"][1]["template"], "dgx-a100");
}

TEST(DescribeTopology, Dgx1MatrixEqualsRealNvidiaSmi) {
  Topology t = shipped("dgx1-v100");
  const std::string text = describeTopology(t);
  // The GPU part of the real DGX-1 `nvidia-smi topo -m` (realcases RC-20), typed in by hand.
  const std::vector<std::vector<std::string>> expected = {
      {"X", "NV1", "NV1", "NV2", "NV2", "SYS", "SYS", "SYS"}, {"NV1", "X", "NV2", "NV1", "SYS", "NV2", "SYS", "SYS"},
      {"NV1", "NV2", "X", "NV2", "SYS", "SYS", "NV1", "SYS"}, {"NV2", "NV1", "NV2", "X", "SYS", "SYS", "SYS", "NV1"},
      {"NV2", "SYS", "SYS", "SYS", "X", "NV1", "NV1", "NV2"}, {"SYS", "NV2", "SYS", "SYS", "NV1", "X", "NV2", "NV1"},
      {"SYS", "SYS", "NV1", "SYS", "NV1", "NV2", "X", "NV2"}, {"SYS", "SYS", "SYS", "NV1", "NV2", "NV1", "NV2", "X"},
  };
  EXPECT_EQ(classMatrix(text, 8), expected) << text;
  EXPECT_NE(text.find("8 GPUs in 1 node(s); 4 NICs"), std::string::npos) << text;
  EXPECT_NE(text.find("node0 [dgx1-v100]: 8 GPUs (gpu0-gpu7) V100-SXM2-16GB, 4 NICs"), std::string::npos) << text;
  EXPECT_NE(text.find("Notes:"), std::string::npos);
}

TEST(DescribeTopology, PcieAndNetworkClasses) {
  {
    const std::string text = describeTopology(shipped("pcie-2s4g"));
    const auto m = classMatrix(text, 8);
    ASSERT_EQ(m.size(), 8u) << text;
    EXPECT_EQ(m[0][1], "PIX");
    EXPECT_EQ(m[0][4], "SYS");
    EXPECT_EQ(m[7][6], "PIX");
  }
  {
    const std::string text = describeTopology(shipped("dgx-a100-x2"));
    const auto m = classMatrix(text, 16);
    ASSERT_EQ(m.size(), 16u) << text;
    EXPECT_EQ(m[0][7], "NV12");
    EXPECT_EQ(m[0][8], "NET");
    EXPECT_EQ(m[15][3], "NET");
    EXPECT_EQ(m[9][9], "X");
    // Link classes aggregate the 16 GPU->NVSwitch links into one line.
    EXPECT_NE(text.find("nvlink  gpu->nvswitch               12        240      0.35      16"), std::string::npos)
        << text;
  }
  {
    Topology big = shipped("dgx-h100-x4");
    big.name = "x";
    EXPECT_NE(describeTopology(big).find("32 GPUs in 4 node(s)"), std::string::npos);
  }
}

TEST(DrawTopologySvg, WellFormedWithEveryVertexAndLink) {
  for (const char* name : {"dgx2-x1", "dgx-a100-x2", "dgx1-v100", "ndv2-x4"}) {
    SCOPED_TRACE(name);
    Topology t = shipped(name);
    const std::string svg = drawTopologySvg(t);
    pugi::xml_document doc;
    pugi::xml_parse_result parsed = doc.load_string(svg.c_str());
    ASSERT_TRUE(parsed) << parsed.description();
    pugi::xml_node root = doc.child("svg");
    ASSERT_TRUE(root);
    // One box per vertex (its <title> is the vertex name followed by its kind).
    int vertex_boxes = 0, gpu_boxes = 0;
    for (pugi::xml_node r : root.children("rect")) {
      const std::string title = r.child_value("title");
      if (title.empty()) continue;
      ++vertex_boxes;
      gpu_boxes += title.find("(gpu") != std::string::npos ? 1 : 0;
    }
    EXPECT_EQ(vertex_boxes, static_cast<int>(t.vertices.size()));
    EXPECT_EQ(gpu_boxes, t.numGpus());
    // One line or arc per full-duplex link: every shipped link comes in both directions, so half the links.
    int drawn = 0;
    for (pugi::xml_node g : root.children("g")) {
      for (pugi::xml_node l : g.children()) drawn += std::string(l.name()) == "line" || std::string(l.name()) == "path";
    }
    EXPECT_EQ(drawn * 2, static_cast<int>(t.links.size()));
    EXPECT_NE(svg.find("nvlink:"), std::string::npos) << "legend";
    EXPECT_NE(svg.find("pcie:"), std::string::npos) << "legend";
    const double width = root.attribute("width").as_double();
    EXPECT_GT(width, 500);
    EXPECT_LT(width, 4000);
  }
}

// Hand-built node for nicAffinity (PCIe 24 GB/s, SYS 10 GB/s, NVLink 100 GB/s):
//   cpu0 -- swA -- {gpu0, nic0, nic1}                  gpu0: nic0 + nic1 tie, PIX, 2 hops
//   cpu0 -- swB -- {nic2, swB1 -- gpu1}                 gpu1: nic2, PXB, 3 hops
//   cpu0 -- gpu2                                        gpu2: all three NICs through cpu0, PHB, 3 hops
//   cpu1 -- swC -- gpu3, cpu0 == SYS == cpu1            gpu3: all three NICs across sockets, SYS, 10 GB/s
//   gpu3 == NVLink == gpu0 (a wider route through gpu0 exists but may not be used)
// Every NIC also hangs off one network switch (routes may not leave the node through it).
Topology affinityNode() {
  Topology t;
  t.name = "affinity";
  const int node = t.addNode("node0");
  const int cpu0 = t.addVertex(VertexKind::kCpu, node, "node0.cpu0");
  const int cpu1 = t.addVertex(VertexKind::kCpu, node, "node0.cpu1");
  const int sw_a = t.addVertex(VertexKind::kPcieSwitch, node, "node0.swA");
  const int sw_b = t.addVertex(VertexKind::kPcieSwitch, node, "node0.swB");
  const int sw_b1 = t.addVertex(VertexKind::kPcieSwitch, node, "node0.swB1");
  const int sw_c = t.addVertex(VertexKind::kPcieSwitch, node, "node0.swC");
  const int gpu0 = t.addVertex(VertexKind::kGpu, node);
  const int gpu1 = t.addVertex(VertexKind::kGpu, node);
  const int gpu2 = t.addVertex(VertexKind::kGpu, node);
  const int gpu3 = t.addVertex(VertexKind::kGpu, node);
  const int nic0 = t.addVertex(VertexKind::kNic, node, "node0.nic0");
  const int nic1 = t.addVertex(VertexKind::kNic, node, "node0.nic1");
  const int nic2 = t.addVertex(VertexKind::kNic, node, "node0.nic2");
  const int net = t.addVertex(VertexKind::kNetSwitch, -1, "net");
  auto pcie = [&](int a, int b) { t.addDuplexLink(a, b, LinkKind::kPcie, 24, 0.5); };
  pcie(sw_a, cpu0);
  pcie(sw_b, cpu0);
  pcie(sw_b1, sw_b);
  pcie(sw_c, cpu1);
  pcie(gpu0, sw_a);
  pcie(nic0, sw_a);
  pcie(nic1, sw_a);
  pcie(nic2, sw_b);
  pcie(gpu1, sw_b1);
  pcie(gpu2, cpu0);
  pcie(gpu3, sw_c);
  t.addDuplexLink(cpu0, cpu1, LinkKind::kSys, 10, 1.0);
  t.addDuplexLink(gpu3, gpu0, LinkKind::kNvlink, 100, 0.6, 4);
  for (int nic : {nic0, nic1, nic2}) t.addDuplexLink(nic, net, LinkKind::kNet, 25, 1.35);
  return t;
}

// rank -> names of its nearest NICs.
std::map<int, std::set<std::string>> nearestNames(const Topology& t) {
  std::map<int, std::set<std::string>> out;
  for (const NicAffinity& a : nicAffinity(t)) out[a.rank].insert(t.vertices[a.nic_vertex].name);
  return out;
}

TEST(NicAffinity, ClassesTiesBandwidthAndHops) {
  const Topology t = affinityNode();
  ASSERT_TRUE(validateTopology(t).isOk()) << validateTopology(t).toString();
  const std::vector<NicAffinity> all = nicAffinity(t);
  const std::set<std::string> every_nic = {"node0.nic0", "node0.nic1", "node0.nic2"};
  const std::map<int, std::set<std::string>> expected = {
      {0, {"node0.nic0", "node0.nic1"}}, {1, {"node0.nic2"}}, {2, every_nic}, {3, every_nic}};
  EXPECT_EQ(nearestNames(t), expected);
  ASSERT_EQ(all.size(), 2u + 1u + 3u + 3u);
  for (const NicAffinity& a : all) {
    SCOPED_TRACE(fmt::format("gpu{} -> {}", a.rank, t.vertices[a.nic_vertex].name));
    switch (a.rank) {
      case 0:
        EXPECT_EQ(a.path_class, "PIX");
        EXPECT_DOUBLE_EQ(a.bandwidth_gbps, 24);
        EXPECT_EQ(a.hops, 2);
        break;
      case 1:
        EXPECT_EQ(a.path_class, "PXB");
        EXPECT_DOUBLE_EQ(a.bandwidth_gbps, 24);
        EXPECT_EQ(a.hops, 3);
        break;
      case 2:
        EXPECT_EQ(a.path_class, "PHB");
        EXPECT_DOUBLE_EQ(a.bandwidth_gbps, 24);
        EXPECT_EQ(a.hops, 3);
        break;
      case 3:
        // gpu3 -> swC -> cpu1 -> cpu0 -> swA/swB -> nic: never through gpu0's NVLink.
        EXPECT_EQ(a.path_class, "SYS");
        EXPECT_DOUBLE_EQ(a.bandwidth_gbps, 10);
        EXPECT_EQ(a.hops, 5);
        break;
      default: ADD_FAILURE() << "unexpected rank";
    }
  }
  // Sorted by rank, then by the NIC's local index.
  for (size_t i = 1; i < all.size(); ++i) {
    const NicAffinity& p = all[i - 1];
    const NicAffinity& q = all[i];
    EXPECT_TRUE(p.rank < q.rank ||
                (p.rank == q.rank && t.vertices[p.nic_vertex].local < t.vertices[q.nic_vertex].local));
  }
}

TEST(NicAffinity, RoutesAvoidGpusNicsAndTheNetwork) {
  const Topology t = affinityNode();
  const int nic0 = t.findVertex("node0.nic0");
  std::optional<Route> r = gpuNicRoute(t, 3, nic0);
  ASSERT_TRUE(r.has_value());
  std::vector<std::string> path = {t.vertices[t.links[r->links.front()].src].name};
  for (int li : r->links) path.push_back(t.vertices[t.links[li].dst].name);
  EXPECT_EQ(path,
            (std::vector<std::string>{"gpu3", "node0.swC", "node0.cpu1", "node0.cpu0", "node0.swA", "node0.nic0"}));
  EXPECT_EQ(r->slowest_kind, LinkKind::kSys);
  EXPECT_EQ(gpuNicPathClass(t, *r), "SYS");
  // Not a NIC, not a GPU rank: no route.
  EXPECT_FALSE(gpuNicRoute(t, 3, t.findVertex("node0.cpu0")).has_value());
  EXPECT_FALSE(gpuNicRoute(t, 9, nic0).has_value());
  // Cut gpu3's PCIe link: its only way out is the NVLink to gpu0, which a GPU -> NIC route may not relay through.
  Topology cut = t;
  const int gpu3 = cut.gpuVertex(3);
  std::vector<Link> kept;
  for (const Link& l : cut.links) {
    if ((l.src == gpu3 || l.dst == gpu3) && l.kind == LinkKind::kPcie) continue;
    kept.push_back(l);
  }
  cut.links = kept;
  EXPECT_FALSE(gpuNicRoute(cut, 3, nic0).has_value());
  EXPECT_EQ(nearestNames(cut).count(3), 0u);
  const std::string text = describeTopology(cut);
  EXPECT_NE(text.find("gpu3   none (no NIC reachable in its node)"), std::string::npos) << text;
}

TEST(NicAffinity, WiderRouteWinsOverNearerTypeAsInNccl) {
  // A 2 GB/s NIC on the GPU's own switch and a 24 GB/s NIC behind the CPU: NCCL's ncclTopoGetLocal takes the
  // widest route first, so the PHB NIC is the nearest; with equal widths the PIX one would be.
  Topology t;
  const int node = t.addNode("node0");
  const int cpu = t.addVertex(VertexKind::kCpu, node, "cpu0");
  const int sw = t.addVertex(VertexKind::kPcieSwitch, node, "sw0");
  const int gpu = t.addVertex(VertexKind::kGpu, node);
  const int slow = t.addVertex(VertexKind::kNic, node, "slow_nic");
  const int fast = t.addVertex(VertexKind::kNic, node, "fast_nic");
  t.addDuplexLink(sw, cpu, LinkKind::kPcie, 24, 0.5);
  t.addDuplexLink(gpu, sw, LinkKind::kPcie, 24, 0.5);
  t.addDuplexLink(slow, sw, LinkKind::kPcie, 2, 0.5);
  t.addDuplexLink(fast, cpu, LinkKind::kPcie, 24, 0.5);
  ASSERT_TRUE(validateTopology(t).isOk());
  std::vector<NicAffinity> a = nicAffinity(t);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].nic_vertex, fast);
  EXPECT_EQ(a[0].path_class, "PHB");
  EXPECT_DOUBLE_EQ(a[0].bandwidth_gbps, 24);
  EXPECT_EQ(a[0].hops, 3);
  for (Link& l : t.links) {
    if (l.src == slow || l.dst == slow) l.bandwidth_gbps = 24;
  }
  a = nicAffinity(t);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].nic_vertex, slow);
  EXPECT_EQ(a[0].path_class, "PIX");
}

TEST(NicAffinity, C2cHostBridgeAndOtherNodes) {
  Topology t;
  // node0: Grace-Hopper style GPU -> C2C -> CPU -> PCIe -> NIC.
  const int n0 = t.addNode("node0");
  const int grace = t.addVertex(VertexKind::kCpu, n0, "node0.grace");
  const int gh = t.addVertex(VertexKind::kGpu, n0);
  const int nic0 = t.addVertex(VertexKind::kNic, n0, "node0.nic0");
  t.addDuplexLink(gh, grace, LinkKind::kC2c, 450, 0.2);
  t.addDuplexLink(nic0, grace, LinkKind::kPcie, 48, 0.5);
  // node1: a GPU and a NIC under one PCIe host bridge (as the nvidia-smi importer models a PHB cluster).
  // node2: a GPU with no NIC at all, joined to the other nodes' NICs only by the network.
  const int n1 = t.addNode("node1");
  const int hb = t.addVertex(VertexKind::kPcieSwitch, n1, "node1.host_bridge0");
  const int g1 = t.addVertex(VertexKind::kGpu, n1);
  const int nic1 = t.addVertex(VertexKind::kNic, n1, "node1.nic0");
  t.addDuplexLink(g1, hb, LinkKind::kPcie, 24, 0.5);
  t.addDuplexLink(nic1, hb, LinkKind::kPcie, 24, 0.5);
  const int n2 = t.addNode("node2");
  const int g2 = t.addVertex(VertexKind::kGpu, n2);
  const int net = t.addVertex(VertexKind::kNetSwitch, -1, "net");
  t.addDuplexLink(nic0, net, LinkKind::kNet, 50, 1.35);
  t.addDuplexLink(nic1, net, LinkKind::kNet, 50, 1.35);
  t.addDuplexLink(g2, net, LinkKind::kNet, 50, 1.35);
  ASSERT_TRUE(validateTopology(t).isOk()) << validateTopology(t).toString();
  const std::vector<NicAffinity> a = nicAffinity(t);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].rank, 0);
  EXPECT_EQ(a[0].nic_vertex, nic0);
  EXPECT_EQ(a[0].path_class, "P2C");
  EXPECT_DOUBLE_EQ(a[0].bandwidth_gbps, 48);
  EXPECT_EQ(a[1].rank, 1);
  EXPECT_EQ(a[1].nic_vertex, nic1);
  EXPECT_EQ(a[1].path_class, "PHB");
  // gpu2's node has no NIC: no entry, even though node0's NIC is one network hop away.
  const std::string text = describeTopology(t);
  EXPECT_NE(text.find("gpu2   none (no NIC reachable in its node)"), std::string::npos) << text;
}

// The "GPU -> nearest NIC" lines of describeTopology: GPU name -> the rest of the line.
std::map<std::string, std::string> nearestNicLines(const std::string& text) {
  std::map<std::string, std::string> lines;
  std::istringstream in(text);
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line.rfind("GPU -> nearest NIC", 0) == 0) {
      inside = true;
      continue;
    }
    if (!inside) continue;
    if (line.rfind("  gpu", 0) != 0) break;
    std::istringstream words(line);
    std::string gpu;
    words >> gpu;
    std::string rest;
    std::getline(words, rest);
    lines[gpu] = rest.substr(rest.find_first_not_of(' '));
  }
  return lines;
}

TEST(DescribeTopology, NearestNicSection) {
  {
    const std::string text = describeTopology(affinityNode());
    const auto lines = nearestNicLines(text);
    ASSERT_EQ(lines.size(), 4u) << text;
    EXPECT_EQ(lines.at("gpu0"), "node0.nic0, node0.nic1  PIX  24 GB/s  2 hops");
    EXPECT_EQ(lines.at("gpu1"), "node0.nic2  PXB  24 GB/s  3 hops");
    EXPECT_EQ(lines.at("gpu2"), "node0.nic0, node0.nic1, node0.nic2  PHB  24 GB/s  3 hops");
    EXPECT_EQ(lines.at("gpu3"), "node0.nic0, node0.nic1, node0.nic2  SYS  10 GB/s  5 hops");
  }
  {
    // DGX-1: two GPUs and one NIC per PCIe switch.
    const std::string text = describeTopology(shipped("dgx1-v100"));
    const auto lines = nearestNicLines(text);
    ASSERT_EQ(lines.size(), 8u) << text;
    for (int g = 0; g < 8; ++g) {
      EXPECT_EQ(lines.at(fmt::format("gpu{}", g)), fmt::format("node0.nic{}  PIX  12 GB/s  2 hops", g / 2));
    }
  }
  {
    // Mixed hop counts among tied NICs are shown as a range.
    Topology t = affinityNode();
    const int sw_a = t.findVertex("node0.swA");
    const int extra = t.addVertex(VertexKind::kPcieSwitch, 0, "node0.swA2");
    const int nic3 = t.addVertex(VertexKind::kNic, 0, "node0.nic3");
    t.addDuplexLink(extra, sw_a, LinkKind::kPcie, 24, 0.5);
    t.addDuplexLink(nic3, extra, LinkKind::kPcie, 24, 0.5);
    ASSERT_TRUE(validateTopology(t).isOk());
    EXPECT_EQ(nearestNicLines(describeTopology(t)).at("gpu2"),
              "node0.nic0, node0.nic1, node0.nic2, node0.nic3  PHB  24 GB/s  3-4 hops");
  }
  // No NICs anywhere: no section.
  Topology bare;
  const int node = bare.addNode("node0");
  const int a = bare.addVertex(VertexKind::kGpu, node);
  const int b = bare.addVertex(VertexKind::kGpu, node);
  bare.addDuplexLink(a, b, LinkKind::kNvlink, 50, 0.6, 2);
  EXPECT_EQ(describeTopology(bare).find("GPU -> nearest NIC"), std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(topologyToJson(bare));
  EXPECT_TRUE(j["nic_affinity"].empty());
  EXPECT_EQ(j["route_matrix"]["class"][0][1], "NV2");
}

TEST(TopologyJson, NicAffinityAndRouteMatrix) {
  const Topology t = affinityNode();
  const nlohmann::json j = nlohmann::json::parse(topologyToJson(t));
  ASSERT_TRUE(j["nic_affinity"].is_array());
  ASSERT_EQ(j["nic_affinity"].size(), 9u);
  const nlohmann::json& first = j["nic_affinity"][0];
  EXPECT_EQ(first["gpu"], "gpu0");
  EXPECT_EQ(first["nic"], "node0.nic0");
  EXPECT_EQ(first["class"], "PIX");
  EXPECT_DOUBLE_EQ(first["bandwidth_gbps"].get<double>(), 24);
  EXPECT_EQ(first["hops"], 2);
  const nlohmann::json& last = j["nic_affinity"][8];
  EXPECT_EQ(last["gpu"], "gpu3");
  EXPECT_EQ(last["nic"], "node0.nic2");
  EXPECT_EQ(last["class"], "SYS");
  EXPECT_DOUBLE_EQ(last["bandwidth_gbps"].get<double>(), 10);
  EXPECT_EQ(last["hops"], 5);

  // route_matrix holds the same data as the text matrices.
  for (const char* name : {"dgx1-v100", "pcie-2s4g", "dgx-a100-x2"}) {
    SCOPED_TRACE(name);
    const Topology s = shipped(name);
    const int gpus = s.numGpus();
    const nlohmann::json js = nlohmann::json::parse(topologyToJson(s));
    const nlohmann::json& m = js["route_matrix"];
    ASSERT_EQ(m["gpus"].size(), static_cast<size_t>(gpus));
    ASSERT_EQ(m["class"].size(), static_cast<size_t>(gpus));
    ASSERT_EQ(m["bandwidth_gbps"].size(), static_cast<size_t>(gpus));
    EXPECT_EQ(m["class"].get<std::vector<std::vector<std::string>>>(), classMatrix(describeTopology(s), gpus));
    for (int a = 0; a < gpus; ++a) {
      EXPECT_EQ(m["gpus"][a], fmt::format("gpu{}", a));
      for (int b = 0; b < gpus; ++b) {
        const nlohmann::json& cell = m["bandwidth_gbps"][a][b];
        if (a == b) {
          EXPECT_TRUE(cell.is_null());
          continue;
        }
        std::optional<Route> r = s.route(a, b);
        ASSERT_TRUE(r.has_value());
        EXPECT_DOUBLE_EQ(cell.get<double>(), r->bandwidth_gbps);
      }
    }
  }
  {
    // 32 GPUs: the matrix is there.
    const nlohmann::json x4 = nlohmann::json::parse(topologyToJson(shipped("dgx-h100-x4")));
    EXPECT_EQ(x4["route_matrix"]["class"].size(), 32u);
    EXPECT_EQ(x4["nic_affinity"].size(), 64u);  // two NICs on each GPU's switch
  }
  // Above 32 GPUs the text omits the matrices and the JSON has null; above 64 the text lists 32 GPUs' NICs.
  Topology big;
  const int node = big.addNode("node0");
  const int sw = big.addVertex(VertexKind::kPcieSwitch, node, "node0.sw");
  const int nic = big.addVertex(VertexKind::kNic, node, "node0.nic0");
  big.addDuplexLink(nic, sw, LinkKind::kPcie, 24, 0.5);
  for (int g = 0; g < 70; ++g) big.addDuplexLink(big.addVertex(VertexKind::kGpu, node), sw, LinkKind::kPcie, 24, 0.5);
  ASSERT_TRUE(validateTopology(big).isOk());
  const nlohmann::json jb = nlohmann::json::parse(topologyToJson(big));
  EXPECT_TRUE(jb["route_matrix"].is_null());
  EXPECT_EQ(jb["nic_affinity"].size(), 70u);
  const std::string text = describeTopology(big);
  EXPECT_NE(text.find("GPU x GPU matrix omitted (70 GPUs > 32)."), std::string::npos) << text;
  EXPECT_EQ(nearestNicLines(text).size(), 32u) << text;
  EXPECT_NE(text.find("  ... and 38 more GPUs (all in --json)"), std::string::npos) << text;
}

}  // namespace
}  // namespace braid
