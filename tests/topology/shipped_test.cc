// Shipped topologies (topologies/*.yaml): each loads and validates, with GPU/node/NIC counts and bandwidths
// derived by hand from the sources in topologies/README.md; findShippedTopology and loadTopology's format choice.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "braid/file_io.h"
#include "braid/topology.h"
#include "support/corpus.h"

namespace braid {
namespace {

namespace fs = std::filesystem;

Topology loadShipped(const std::string& name) {
  Result<std::string> path = findShippedTopology(name);
  EXPECT_TRUE(path.isOk()) << path.status().toString();
  if (!path) return Topology();
  Result<Topology> t = loadTopology(*path);
  EXPECT_TRUE(t.isOk()) << t.status().toString();
  if (!t) return Topology();
  EXPECT_TRUE(validateTopology(*t).isOk());
  return *t;
}

int countKind(const Topology& t, VertexKind kind) {
  int n = 0;
  for (const Vertex& v : t.vertices) n += v.kind == kind ? 1 : 0;
  return n;
}

// The single link a -> b (by vertex name); fails the test when there is not exactly one.
const Link* linkBetween(const Topology& t, const std::string& a, const std::string& b) {
  const std::vector<int> ids = t.linksBetween(t.findVertex(a), t.findVertex(b));
  EXPECT_EQ(ids.size(), 1u) << a << " -> " << b;
  return ids.size() == 1 ? &t.links[ids[0]] : nullptr;
}

struct Expected {
  std::string name;
  int gpus, nodes, nics, net_switches;
};

TEST(ShippedTopologies, CountsOfEveryFile) {
  const Expected all[] = {
      {"dgx1-v100", 8, 1, 4, 0},   {"ndv2-x1", 8, 1, 1, 0},       {"ndv2-x2", 16, 2, 2, 1},
      {"ndv2-x4", 32, 4, 4, 1},    {"dgx2-x1", 16, 1, 8, 0},      {"dgx2-x2", 32, 2, 16, 1},
      {"dgx-a100-x1", 8, 1, 8, 0}, {"dgx-a100-x2", 16, 2, 16, 8}, {"dgx-a100-x4", 32, 4, 32, 8},
      {"dgx-h100-x1", 8, 1, 8, 0}, {"dgx-h100-x2", 16, 2, 16, 8}, {"dgx-h100-x4", 32, 4, 32, 8},
      {"pcie-2s4g", 8, 1, 1, 0},
  };
  for (const Expected& e : all) {
    SCOPED_TRACE(e.name);
    Topology t = loadShipped(e.name);
    EXPECT_EQ(t.name, e.name);
    EXPECT_EQ(t.numGpus(), e.gpus);
    EXPECT_EQ(t.numNodes(), e.nodes);
    EXPECT_EQ(countKind(t, VertexKind::kNic), e.nics);
    EXPECT_EQ(countKind(t, VertexKind::kNetSwitch), e.net_switches);
    EXPECT_FALSE(t.notes.empty());
    // Every GPU pair has a route (the topology is connected without relaying through GPUs).
    for (int a = 0; a < t.numGpus(); a += 5) {
      for (int b = 0; b < t.numGpus(); b += 3) EXPECT_TRUE(t.route(a, b).has_value()) << a << "->" << b;
    }
  }
}

// The NV# entries of the real DGX-1 nvidia-smi matrix (realcases RC-20), read here with a separate little parser.
std::map<std::pair<int, int>, int> smiNvlinkLanes(const std::string& text) {
  std::map<std::pair<int, int>, int> lanes;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::vector<std::string> cells;
    for (std::string w; words >> w;) cells.push_back(w);
    // Matrix rows look like "GPU3  NV2 NV1 NV2 X ..."; the header row's second word is "GPU1".
    if (cells.size() < 9 || cells[0].rfind("GPU", 0) != 0 || cells[1].rfind("GPU", 0) == 0) continue;
    const int a = std::stoi(cells[0].substr(3));
    for (int b = 0; b < 8; ++b) {
      if (cells[1 + b].rfind("NV", 0) == 0) lanes[{a, b}] = std::stoi(cells[1 + b].substr(2));
    }
  }
  return lanes;
}

TEST(ShippedTopologies, Dgx1NvlinkMatrixMatchesRealNvidiaSmi) {
  Topology t = loadShipped("dgx1-v100");
  BRAID_SKIP_WITHOUT_REALCASES();
  const std::string smi_path = (testing::realcasesDir() / "smi/dgx1-v100-sxm2-hybrid-cube-mesh-1nic.txt").string();
  Result<std::string> smi = readFile(smi_path);
  ASSERT_TRUE(smi.isOk());
  const std::map<std::pair<int, int>, int> expected = smiNvlinkLanes(*smi);
  ASSERT_EQ(expected.size(), 32u);  // 16 NVLink pairs, both directions
  for (int a = 0; a < 8; ++a) {
    int lanes_total = 0;
    for (int b = 0; b < 8; ++b) {
      if (a == b) continue;
      const std::vector<int> ids = t.linksBetween(t.gpuVertex(a), t.gpuVertex(b));
      auto it = expected.find({a, b});
      if (it == expected.end()) {
        EXPECT_TRUE(ids.empty()) << "gpu" << a << "-gpu" << b << " has no NVLink on a DGX-1";
        continue;
      }
      ASSERT_EQ(ids.size(), 1u) << "gpu" << a << "-gpu" << b;
      const Link& l = t.links[ids[0]];
      EXPECT_EQ(l.kind, LinkKind::kNvlink);
      EXPECT_EQ(l.lanes, it->second) << "gpu" << a << "-gpu" << b;
      EXPECT_DOUBLE_EQ(l.bandwidth_gbps, 20.0 * it->second);  // NCCL SM70: 20 GB/s per NVLink
      lanes_total += l.lanes;
    }
    EXPECT_EQ(lanes_total, 6) << "a V100 has 6 NVLinks";
  }
}

TEST(ShippedTopologies, Dgx1RoutesByHand) {
  Topology t = loadShipped("dgx1-v100");
  // gpu0 -> gpu3: NV2 direct, 40 GB/s.
  std::optional<Route> r = t.route(0, 3);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->links.size(), 1u);
  EXPECT_DOUBLE_EQ(r->bandwidth_gbps, 40);
  // gpu0 -> gpu5: no NVLink; PCIe to socket 0, QPI (6 GB/s, the bottleneck), PCIe down: 5 links, alpha 5 x 1.0.
  r = t.route(0, 5);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->links.size(), 5u);
  EXPECT_DOUBLE_EQ(r->bandwidth_gbps, 6);
  EXPECT_EQ(r->slowest_kind, LinkKind::kSys);
  EXPECT_DOUBLE_EQ(r->alpha_us, 5.0);
  // NIC placement as on a DGX-1: nic1 on the PCIe switch of gpu2/gpu3 (PIX in RC-20).
  EXPECT_NE(linkBetween(t, "node0.nic1", "node0.pcie1"), nullptr);
  EXPECT_NE(linkBetween(t, "gpu2", "node0.pcie1"), nullptr);
  const Link* qpi = linkBetween(t, "node0.cpu0", "node0.cpu1");
  ASSERT_NE(qpi, nullptr);
  EXPECT_EQ(qpi->kind, LinkKind::kSys);
}

TEST(ShippedTopologies, BandwidthsDerivedFromNcclConstants) {
  {
    Topology t = loadShipped("dgx-a100-x2");
    const Link* nv = linkBetween(t, "gpu9", "node1.nvswitch");
    ASSERT_NE(nv, nullptr);
    EXPECT_EQ(nv->lanes, 12);
    EXPECT_DOUBLE_EQ(nv->bandwidth_gbps, 240);  // 12 x 20 GB/s (SM80)
    const Link* net = linkBetween(t, "node1.nic5", "rail5");
    ASSERT_NE(net, nullptr);
    EXPECT_DOUBLE_EQ(net->bandwidth_gbps, 25);                                    // 200 Gb/s / 8
    EXPECT_DOUBLE_EQ(linkBetween(t, "gpu9", "node1.pcie0")->bandwidth_gbps, 24);  // PCIe Gen4 x16
    // gpu1 -> gpu9: PCIe (24) beats the 25 GB/s NIC; gpu-pcie-nic-rail-nic-pcie-gpu = 6 links.
    std::optional<Route> r = t.route(1, 9);
    ASSERT_TRUE(r.has_value());
    EXPECT_DOUBLE_EQ(r->bandwidth_gbps, 24);
    EXPECT_EQ(r->links.size(), 6u);
    EXPECT_NEAR(r->alpha_us, 4 * 1.0 + 2 * 1.3, 1e-12);
    // gpu0 -> gpu7 inside a node: through the NVSwitch, 240 GB/s, alpha 2 x 0.35.
    r = t.route(0, 7);
    ASSERT_TRUE(r.has_value());
    EXPECT_DOUBLE_EQ(r->bandwidth_gbps, 240);
    EXPECT_NEAR(r->alpha_us, 0.7, 1e-12);
  }
  {
    Topology t = loadShipped("dgx-h100-x4");
    const Link* nv = linkBetween(t, "gpu31", "node3.nvswitch");
    ASSERT_NE(nv, nullptr);
    EXPECT_EQ(nv->lanes, 18);
    EXPECT_NEAR(nv->bandwidth_gbps, 370.8, 1e-9);                                  // 18 x 20.6 GB/s (SM90)
    EXPECT_DOUBLE_EQ(linkBetween(t, "node2.nic7", "rail7")->bandwidth_gbps, 50);   // 400 Gb/s / 8
    EXPECT_DOUBLE_EQ(linkBetween(t, "gpu31", "node3.pcie3")->bandwidth_gbps, 48);  // PCIe Gen5 x16
  }
  {
    Topology t = loadShipped("dgx2-x2");
    EXPECT_DOUBLE_EQ(linkBetween(t, "gpu20", "node1.nvswitch")->bandwidth_gbps, 120);   // 6 x 20 GB/s (SM70)
    EXPECT_DOUBLE_EQ(linkBetween(t, "node1.nic7", "netswitch")->bandwidth_gbps, 12.5);  // 100 Gb/s / 8
    std::optional<Route> r = t.route(0, 15);
    ASSERT_TRUE(r.has_value());
    EXPECT_DOUBLE_EQ(r->bandwidth_gbps, 120);
    EXPECT_EQ(r->links.size(), 2u);
  }
  {
    Topology t = loadShipped("ndv2-x2");
    // gpu2 -> gpu10 (both next to their node's NIC): 6 links, bottleneck PCIe Gen3 12 (< 12.5 EDR).
    std::optional<Route> r = t.route(2, 10);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->links.size(), 6u);
    EXPECT_DOUBLE_EQ(r->bandwidth_gbps, 12);
    EXPECT_NEAR(r->alpha_us, 6.6, 1e-12);  // 4 PCIe hops x 1.0 + 2 IB hops x 1.3
  }
  {
    Topology t = loadShipped("pcie-2s4g");
    std::optional<Route> r = t.route(0, 3);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->links.size(), 2u);
    EXPECT_DOUBLE_EQ(r->bandwidth_gbps, 24);
    r = t.route(3, 4);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->links.size(), 5u);
    EXPECT_DOUBLE_EQ(r->bandwidth_gbps, 10);
    EXPECT_EQ(r->slowest_kind, LinkKind::kSys);
    int nvlinks = 0;
    for (const Link& l : t.links) nvlinks += l.kind == LinkKind::kNvlink ? 1 : 0;
    EXPECT_EQ(nvlinks, 0);
  }
}

TEST(FindShippedTopology, ByNameWithOrWithoutExtension) {
  Result<std::string> a = findShippedTopology("dgx1-v100");
  Result<std::string> b = findShippedTopology("dgx1-v100.yaml");
  ASSERT_TRUE(a.isOk()) << a.status().toString();
  ASSERT_TRUE(b.isOk());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(fs::path(*a).filename().string(), "dgx1-v100.yaml");
  Result<std::string> missing = findShippedTopology("dgx9-nonexistent");
  ASSERT_FALSE(missing.isOk());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("dgx9-nonexistent"), std::string::npos);
  EXPECT_NE(missing.status().message().find("dgx-a100-x2"), std::string::npos) << "lists what is available";
  EXPECT_FALSE(findShippedTopology("../etc/passwd").isOk());
  EXPECT_FALSE(findShippedTopology("").isOk());
}

TEST(FindShippedTopology, EnvironmentDirectoryComesFirst) {
  const fs::path dir = fs::path(BRAID_BINARY_DIR) / "t1-topology-env-test";
  fs::create_directories(dir);
  { std::ofstream(dir / "dgx1-v100.yaml") << "name: mine\nnodes: [{name: h}]\nvertices: [{kind: gpu, node: h}]\n"; }
  setenv("BRAID_TOPOLOGY_DIR", dir.c_str(), 1);
  Result<std::string> found = findShippedTopology("dgx1-v100");
  unsetenv("BRAID_TOPOLOGY_DIR");
  ASSERT_TRUE(found.isOk());
  EXPECT_EQ(*found, (dir / "dgx1-v100.yaml").string());
  Result<Topology> t = loadTopology(*found);
  ASSERT_TRUE(t.isOk()) << t.status().toString();
  EXPECT_EQ(t->name, "mine");
  // Without the variable the source tree's file is found again.
  Result<std::string> again = findShippedTopology("dgx1-v100");
  ASSERT_TRUE(again.isOk());
  EXPECT_NE(*again, *found);
  fs::remove_all(dir);
}

TEST(LoadTopology, ChoosesFormatByContentNotExtension) {
  const fs::path dir = fs::path(BRAID_BINARY_DIR) / "t1-load-test";
  fs::create_directories(dir);
  Result<std::string> yaml = readFile(*findShippedTopology("pcie-2s4g"));
  ASSERT_TRUE(yaml.isOk());
  { std::ofstream(dir / "machine.txt") << *yaml; }
  Result<Topology> t = loadTopology((dir / "machine.txt").string());
  ASSERT_TRUE(t.isOk()) << t.status().toString();
  EXPECT_EQ(t->numGpus(), 8);
  EXPECT_EQ(t->source, (dir / "machine.txt").string());
  // Unknown content: a clear error naming the file.
  { std::ofstream(dir / "notes.yaml") << "just some words\nand more words\n"; }
  Result<Topology> bad = loadTopology((dir / "notes.yaml").string());
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("notes.yaml"), std::string::npos);
  EXPECT_NE(bad.status().message().find("unrecognized topology format"), std::string::npos) << bad.status().message();
  { std::ofstream(dir / "empty.yaml") << "  \n"; }
  EXPECT_NE(loadTopology((dir / "empty.yaml").string()).status().message().find("empty"), std::string::npos);
  { std::ofstream(dir / "algo.xml") << "<?xml version=\"1.0\"?>\n<!-- c -->\n<algo name=\"x\"></algo>\n"; }
  Result<Topology> algo = loadTopology((dir / "algo.xml").string());
  ASSERT_FALSE(algo.isOk());
  EXPECT_NE(algo.status().message().find("MSCCL algorithm"), std::string::npos) << algo.status().message();
  // A Braid YAML file with an error keeps the line and field.
  { std::ofstream(dir / "typo.yaml") << "name: x\nnodes: [{name: h}]\nvertice: []\n"; }
  Result<Topology> typo = loadTopology((dir / "typo.yaml").string());
  ASSERT_FALSE(typo.isOk());
  EXPECT_NE(typo.status().message().find("typo.yaml:3: vertice: unknown key"), std::string::npos)
      << typo.status().message();
  Result<Topology> none = loadTopology((dir / "does-not-exist.yaml").string());
  ASSERT_FALSE(none.isOk());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  fs::remove_all(dir);
}

// A file cut short or malformed is named with its line and what is wrong, in XML and JSON alike.
TEST(LoadTopology, MalformedXmlAndJsonNameTheLine) {
  const fs::path dir = fs::path(BRAID_BINARY_DIR) / "t1-load-malformed";
  fs::create_directories(dir);
  // A comment that never closes: no root element can be found.
  { std::ofstream(dir / "cut.xml") << "<?xml version=\"1.0\"?>\n<!-- a hint file\n   for 8 GPUs\n"; }
  Result<Topology> cut = loadTopology((dir / "cut.xml").string());
  ASSERT_FALSE(cut.isOk());
  EXPECT_NE(cut.status().message().find("cut.xml:2: xml: unexpected end of file inside a comment opened here"),
            std::string::npos)
      << cut.status().message();
  // A TACCL profile cut in the middle of an array, and one with a NaN: the parser's line.
  { std::ofstream(dir / "cut.json") << "{\n  \"name\": \"p\",\n  \"links\": [[0, 1],\n"; }
  Result<Topology> json = loadTopology((dir / "cut.json").string());
  ASSERT_FALSE(json.isOk());
  EXPECT_NE(json.status().message().find("cut.json:4: json: malformed JSON: parse error at line 4"), std::string::npos)
      << json.status().message();
  { std::ofstream(dir / "nan.json") << "{\n  \"alpha\": NaN\n}\n"; }
  Result<Topology> nan = loadTopology((dir / "nan.json").string());
  ASSERT_FALSE(nan.isOk());
  EXPECT_NE(nan.status().message().find("nan.json:2: json: malformed JSON"), std::string::npos)
      << nan.status().message();
  fs::remove_all(dir);
}

// Inter-socket (SYS) bandwidth follows the CPU of each machine, with NCCL's per-CPU constants
// (nccl_plugins.md §4.5: BDW 6, SKL 10, AMD 16, SRP 22); the CPU model is in the file and named in its notes.
// NDv2 and DGX-1 share the GPU board but not the CPU (topologies/README.md: NDv2 is Skylake, DGX-1 Broadwell).
TEST(ShippedTopologies, SysBandwidthFollowsTheCpu) {
  const std::map<std::string, double> by_cpu = {
      {"Xeon E5-2698 v4", 6}, {"Xeon Platinum 8168", 10}, {"EPYC 7742", 16}, {"Xeon Platinum 8480C", 22}};
  const std::map<std::string, std::pair<std::string, std::string>> expected = {
      // name -> (CPU model, what the notes say)
      {"dgx1-v100", {"Xeon E5-2698 v4", "QPI 6 GB/s (NCCL BDW: 2x Xeon E5-2698 v4, Broadwell)"}},
      {"ndv2-x1", {"Xeon Platinum 8168", "UPI 10 GB/s (NCCL SKL: 2x Xeon Platinum 8168, Skylake"}},
      {"ndv2-x2", {"Xeon Platinum 8168", "UPI 10 GB/s (NCCL SKL: 2x Xeon Platinum 8168, Skylake"}},
      {"ndv2-x4", {"Xeon Platinum 8168", "UPI 10 GB/s (NCCL SKL: 2x Xeon Platinum 8168, Skylake"}},
      {"dgx2-x1", {"Xeon Platinum 8168", "10 GB/s: NCCL SKL, the DGX-2's 2x Xeon Platinum 8168 (Skylake)"}},
      {"dgx2-x2", {"Xeon Platinum 8168", "10 GB/s: NCCL SKL, the DGX-2's 2x Xeon Platinum 8168 (Skylake)"}},
      {"dgx-a100-x1", {"EPYC 7742", "inter-socket 16 GB/s (NCCL AMD: 2x EPYC 7742)"}},
      {"dgx-a100-x4", {"EPYC 7742", "inter-socket 16 GB/s (NCCL AMD: 2x EPYC 7742)"}},
      {"dgx-h100-x1", {"Xeon Platinum 8480C", "inter-socket 22 GB/s (NCCL SRP: 2x Xeon Platinum 8480C"}},
      {"dgx-h100-x2", {"Xeon Platinum 8480C", "inter-socket 22 GB/s (NCCL SRP: 2x Xeon Platinum 8480C"}},
  };
  for (const auto& [name, want] : expected) {
    SCOPED_TRACE(name);
    Topology t = loadShipped(name);
    int sys = 0, cpus = 0;
    for (const Vertex& v : t.vertices) {
      if (v.kind != VertexKind::kCpu) continue;
      ++cpus;
      EXPECT_EQ(v.model, want.first) << v.name;
    }
    EXPECT_GE(cpus, 2);
    for (const Link& l : t.links) {
      if (l.kind != LinkKind::kSys) continue;
      ++sys;
      EXPECT_DOUBLE_EQ(l.bandwidth_gbps, by_cpu.at(want.first)) << t.vertices[l.src].name;
    }
    EXPECT_GE(sys, 2);
    bool noted = false;
    for (const std::string& n : t.notes) noted = noted || n.find(want.second) != std::string::npos;
    EXPECT_TRUE(noted) << "notes do not name the CPU: " << want.second;
  }
  // The real DGX-1 matrix (RC-20) imports with the DGX-1's Broadwell value, the same as dgx1-v100.yaml.
  BRAID_SKIP_WITHOUT_REALCASES();
  const std::string smi = (testing::realcasesDir() / "smi/dgx1-v100-sxm2-hybrid-cube-mesh-1nic.txt").string();
  Result<Topology> imported = loadTopology(smi);
  ASSERT_TRUE(imported.isOk()) << imported.status().toString();
  const Topology dgx1 = loadShipped("dgx1-v100");
  const Link* shipped = linkBetween(dgx1, "node0.cpu0", "node0.cpu1");
  ASSERT_NE(shipped, nullptr);
  const Link* from_smi = linkBetween(*imported, "cpu0", "cpu1");
  ASSERT_NE(from_smi, nullptr);
  EXPECT_DOUBLE_EQ(from_smi->bandwidth_gbps, shipped->bandwidth_gbps);
  EXPECT_DOUBLE_EQ(from_smi->bandwidth_gbps, 6.0);
}

// Real files in the other formats reach their importers (written by another engineer): the result must be the
// 8-GPU machine each file describes.
TEST(LoadTopology, RealFilesInOtherFormats) {
  BRAID_SKIP_WITHOUT_REALCASES();
  const std::string base = testing::realcasesDir().string() + "/";
  for (const char* rel : {"smi/dgx1-v100-sxm2-hybrid-cube-mesh-1nic.txt", "topo/hgx-8x-a100-80g-nvswitch-5cx6bond.xml",
                          "taccl/topo/topo-ndv2-1MB.json"}) {
    SCOPED_TRACE(rel);
    Result<Topology> t = loadTopology(base + rel);
    ASSERT_TRUE(t.isOk()) << t.status().toString();
    EXPECT_EQ(t->numGpus(), 8);
    EXPECT_TRUE(validateTopology(*t).isOk()) << validateTopology(*t).toString();
  }
}

}  // namespace
}  // namespace braid
