// GPU -> nearest NIC (nicAffinity) on the real topologies in ../shared/realcases, checked against the GPU-NIC
// affinity that realcases/README.md §1-2 says a correct product finds. The expectations were read off each file
// by hand. Where a file has PCI bus ids, GPUs are named by bus id, not by rank, so the checks hold whatever order
// the importer numbers the GPUs in; NICs are named by their PCIe switch's bus id or their device name.

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "braid/topology.h"
#include "support/corpus.h"

namespace braid {
namespace {

namespace fs = std::filesystem;

const fs::path kRealcases = testing::realcasesDir();

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

Topology load(const std::string& relative) {
  Result<Topology> t = loadTopology((kRealcases / relative).string());
  EXPECT_TRUE(t.isOk()) << relative << ": " << t.status().toString();
  return t.isOk() ? *t : Topology();
}

// Rank of the GPU with this PCI bus id, or -1.
int rankOfBusid(const Topology& t, const std::string& busid) {
  for (const Vertex& v : t.vertices) {
    if (v.kind == VertexKind::kGpu && lower(v.busid) == lower(busid)) return v.rank;
  }
  return -1;
}

// Bus id (else name) of the PCIe switch a device hangs off directly; "" when it hangs off a CPU.
std::string parentSwitch(const Topology& t, int vertex) {
  for (int li : t.outLinks(vertex)) {
    const Vertex& up = t.vertices[t.links[li].dst];
    if (t.links[li].kind == LinkKind::kPcie && up.kind == VertexKind::kPcieSwitch)
      return up.busid.empty() ? up.name : lower(up.busid);
  }
  return "";
}

// A vertex name without an importer's node prefix ("node0.mlx5_0" -> "mlx5_0").
std::string bareName(const std::string& name) {
  const size_t dot = name.find('.');
  return dot == std::string::npos || name.rfind("node", 0) != 0 ? name : name.substr(dot + 1);
}

std::map<int, std::vector<NicAffinity>> byRank(const std::vector<NicAffinity>& all) {
  std::map<int, std::vector<NicAffinity>> out;
  for (const NicAffinity& a : all) out[a.rank].push_back(a);
  return out;
}

// Hint files with PCIe switches holding GPUs and NICs: every GPU's nearest NICs are exactly the NICs on its own
// switch (`per_switch` of them), PIX. `nic_busids` (GPU bus id -> its NICs' bus ids) is checked when the importer
// keeps NIC bus ids.
void expectSwitchLocal(const Topology& t, const std::map<std::string, std::string>& gpu_switch, size_t per_switch,
                       const std::map<std::string, std::set<std::string>>& nic_busids) {
  const auto near = byRank(nicAffinity(t));
  ASSERT_EQ(static_cast<int>(gpu_switch.size()), t.numGpus());
  for (const auto& [gpu_busid, sw] : gpu_switch) {
    SCOPED_TRACE("GPU " + gpu_busid);
    const int rank = rankOfBusid(t, gpu_busid);
    ASSERT_GE(rank, 0) << "no GPU with this bus id";
    EXPECT_EQ(parentSwitch(t, t.gpuVertex(rank)), sw);
    ASSERT_TRUE(near.count(rank)) << "no nearest NIC";
    const std::vector<NicAffinity>& list = near.at(rank);
    EXPECT_EQ(list.size(), per_switch);
    std::set<std::string> busids;
    bool all_busids = true;
    for (const NicAffinity& a : list) {
      EXPECT_EQ(a.path_class, "PIX");
      EXPECT_EQ(a.hops, 2);
      EXPECT_GT(a.bandwidth_gbps, 0);
      EXPECT_EQ(parentSwitch(t, a.nic_vertex), sw) << t.vertices[a.nic_vertex].name << " is not on the GPU's switch";
      const std::string& b = t.vertices[a.nic_vertex].busid;
      all_busids = all_busids && !b.empty();
      busids.insert(lower(b));
    }
    if (all_busids) {
      EXPECT_EQ(busids, nic_busids.at(gpu_busid));
    }
  }
  // Every NIC on a GPU switch is the nearest of the GPUs on that switch: switches x per_switch NICs in all.
  std::set<int> used;
  for (const auto& [rank, list] : near) {
    for (const NicAffinity& a : list) used.insert(a.nic_vertex);
  }
  std::set<std::string> switches;
  for (const auto& [gpu, sw] : gpu_switch) switches.insert(sw);
  EXPECT_EQ(used.size(), switches.size() * per_switch);
}

TEST(AffinityCorpus, Ndv4TwoGpusTwoNicsPerSwitch) {
  BRAID_SKIP_WITHOUT_REALCASES();
  // RC-02: 4 virtual switches ffff:ff:0X.0, each with 2 A100s and 2 HDR NICs (rail pairs).
  const Topology t = load("topo/azure-ndv4-a100-topo.xml");
  ASSERT_EQ(t.numGpus(), 8);
  const std::map<std::string, std::string> gpu_switch = {
      {"0003:00:00.0", "ffff:ff:01.0"}, {"0004:00:00.0", "ffff:ff:01.0"}, {"0001:00:00.0", "ffff:ff:02.0"},
      {"0002:00:00.0", "ffff:ff:02.0"}, {"000d:00:00.0", "ffff:ff:03.0"}, {"000e:00:00.0", "ffff:ff:03.0"},
      {"000b:00:00.0", "ffff:ff:04.0"}, {"000c:00:00.0", "ffff:ff:04.0"}};
  const std::set<std::string> s1 = {"0103:00:00.0", "0104:00:00.0"}, s2 = {"0101:00:00.0", "0102:00:00.0"},
                              s3 = {"0107:00:00.0", "0108:00:00.0"}, s4 = {"0105:00:00.0", "0106:00:00.0"};
  expectSwitchLocal(t, gpu_switch, 2,
                    {{"0003:00:00.0", s1},
                     {"0004:00:00.0", s1},
                     {"0001:00:00.0", s2},
                     {"0002:00:00.0", s2},
                     {"000d:00:00.0", s3},
                     {"000e:00:00.0", s3},
                     {"000b:00:00.0", s4},
                     {"000c:00:00.0", s4}});
}

TEST(AffinityCorpus, P4dTwoGpusShareOneEfa) {
  BRAID_SKIP_WITHOUT_REALCASES();
  // RC-05: 4 switches with 2 A100s and 1 EFA each; one EFA is the nearest NIC of exactly 2 GPUs.
  const Topology t = load("topo/aws-p4d-24xl-topo.xml");
  ASSERT_EQ(t.numGpus(), 8);
  const std::map<std::string, std::string> gpu_switch = {
      {"0000:10:1c.0", "ffff:ff:01.0"}, {"0000:10:1d.0", "ffff:ff:01.0"}, {"0000:20:1c.0", "ffff:ff:02.0"},
      {"0000:20:1d.0", "ffff:ff:02.0"}, {"0000:90:1c.0", "ffff:ff:03.0"}, {"0000:90:1d.0", "ffff:ff:03.0"},
      {"0000:a0:1c.0", "ffff:ff:04.0"}, {"0000:a0:1d.0", "ffff:ff:04.0"}};
  std::map<std::string, std::set<std::string>> efa;
  for (const auto& [gpu, sw] : gpu_switch) efa[gpu] = {gpu.substr(0, 8) + "1b.0"};  // 0000:10:1c.0 -> 0000:10:1b.0
  expectSwitchLocal(t, gpu_switch, 1, efa);
  std::map<int, int> gpus_per_nic;
  for (const NicAffinity& a : nicAffinity(t)) ++gpus_per_nic[a.nic_vertex];
  ASSERT_EQ(gpus_per_nic.size(), 4u);
  for (const auto& [nic, n] : gpus_per_nic) EXPECT_EQ(n, 2) << t.vertices[nic].name;
}

TEST(AffinityCorpus, Ndv5OneNicPerGpu) {
  BRAID_SKIP_WITHOUT_REALCASES();
  // RC-03: 8 switches, each with 1 H100 and 1 NIC: 1:1 affinity.
  const Topology t = load("topo/azure-ndv5-h100-topo.xml");
  ASSERT_EQ(t.numGpus(), 8);
  const std::vector<std::string> gpus = {"0001:00:00.0", "0002:00:00.0", "0003:00:00.0", "0008:00:00.0",
                                         "0009:00:00.0", "000a:00:00.0", "000b:00:00.0", "000c:00:00.0"};
  std::map<std::string, std::string> gpu_switch;
  std::map<std::string, std::set<std::string>> nic;
  for (size_t i = 0; i < gpus.size(); ++i) {
    gpu_switch[gpus[i]] = "ffff:ff:0" + std::to_string(i + 1) + ".0";
    nic[gpus[i]] = {"010" + std::to_string(i + 1) + ":00:00.0"};
  }
  expectSwitchLocal(t, gpu_switch, 1, nic);
  std::set<int> distinct;
  for (const NicAffinity& a : nicAffinity(t)) distinct.insert(a.nic_vertex);
  EXPECT_EQ(distinct.size(), 8u);
}

TEST(AffinityCorpus, HgxA100UnpairedNicIsNeverNearest) {
  BRAID_SKIP_WITHOUT_REALCASES();
  // RC-09: 3-level Broadcom switch trees; mlx5_bond_0 (0000:06:00.0) hangs off the CPU outside any GPU switch.
  // Each other bond shares a top switch with two GPUs: GPU -> (2 or 4 switches) -> NIC, PXB.
  const Topology t = load("topo/hgx-8x-a100-80g-nvswitch-5cx6bond.xml");
  ASSERT_EQ(t.numGpus(), 8);
  const std::map<std::string, std::string> expected = {
      {"0000:13:00.0", "mlx5_bond_1"}, {"0000:19:00.0", "mlx5_bond_1"}, {"0000:48:00.0", "mlx5_bond_2"},
      {"0000:4d:00.0", "mlx5_bond_2"}, {"0000:89:00.0", "mlx5_bond_3"}, {"0000:8e:00.0", "mlx5_bond_3"},
      {"0000:ad:00.0", "mlx5_bond_4"}, {"0000:b3:00.0", "mlx5_bond_4"}};
  const auto near = byRank(nicAffinity(t));
  EXPECT_EQ(near.size(), 8u) << "every GPU has a nearest NIC";
  for (const auto& [busid, nic] : expected) {
    SCOPED_TRACE("GPU " + busid);
    const int rank = rankOfBusid(t, busid);
    ASSERT_GE(rank, 0);
    ASSERT_TRUE(near.count(rank));
    ASSERT_EQ(near.at(rank).size(), 1u);
    const NicAffinity& a = near.at(rank).front();
    EXPECT_EQ(bareName(t.vertices[a.nic_vertex].name), nic);
    EXPECT_EQ(a.path_class, "PXB");
    EXPECT_NE(bareName(t.vertices[a.nic_vertex].name), "mlx5_bond_0");
  }
  // The unpaired NIC is reachable, only farther: through the CPU (PHB) from its socket's GPUs.
  int bond0 = -1;
  for (const Vertex& v : t.vertices) {
    if (v.kind == VertexKind::kNic && bareName(v.name) == "mlx5_bond_0") bond0 = v.id;
  }
  ASSERT_GE(bond0, 0);
  EXPECT_EQ(parentSwitch(t, bond0), "");
  std::optional<Route> r = gpuNicRoute(t, rankOfBusid(t, "0000:13:00.0"), bond0);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(gpuNicPathClass(t, *r), "PHB");
}

TEST(AffinityCorpus, Rtx3090Numa0GpusReachTheNicThroughSys) {
  BRAID_SKIP_WITHOUT_REALCASES();
  // RC-12: one 56G IB NIC (mlx5_0) on NUMA 1, under the switch of GPUs 9b-9e.
  const Topology t = load("topo/pcie-8x-rtx3090-plx-1nic.xml");
  ASSERT_EQ(t.numGpus(), 8);
  const auto near = byRank(nicAffinity(t));
  const std::map<std::string, std::string> expected = {
      {"0000:0f:00.0", "SYS"}, {"0000:10:00.0", "SYS"}, {"0000:11:00.0", "SYS"}, {"0000:12:00.0", "SYS"},
      {"0000:9b:00.0", "PIX"}, {"0000:9c:00.0", "PIX"}, {"0000:9d:00.0", "PIX"}, {"0000:9e:00.0", "PIX"}};
  for (const auto& [busid, cls] : expected) {
    SCOPED_TRACE("GPU " + busid);
    const int rank = rankOfBusid(t, busid);
    ASSERT_GE(rank, 0);
    ASSERT_TRUE(near.count(rank));
    ASSERT_EQ(near.at(rank).size(), 1u);
    EXPECT_EQ(bareName(t.vertices[near.at(rank).front().nic_vertex].name), "mlx5_0");
    EXPECT_EQ(near.at(rank).front().path_class, cls);
  }
}

TEST(AffinityCorpus, Dgx1SmiMatrixNicNearGpu2And3) {
  BRAID_SKIP_WITHOUT_REALCASES();
  // RC-20: mlx5_0 is PIX to GPU2/3, NODE to GPU0/1 (NCCL's PHB: through the CPU of the same socket) and SYS to
  // GPU4-7. nvidia-smi matrices carry no bus ids: ranks are the matrix's GPU columns.
  const Topology t = load("smi/dgx1-v100-sxm2-hybrid-cube-mesh-1nic.txt");
  ASSERT_EQ(t.numGpus(), 8);
  const auto near = byRank(nicAffinity(t));
  const std::vector<std::string> expected = {"PHB", "PHB", "PIX", "PIX", "SYS", "SYS", "SYS", "SYS"};
  for (int rank = 0; rank < 8; ++rank) {
    SCOPED_TRACE(rank);
    ASSERT_TRUE(near.count(rank));
    ASSERT_EQ(near.at(rank).size(), 1u);
    EXPECT_EQ(bareName(t.vertices[near.at(rank).front().nic_vertex].name), "mlx5_0");
    EXPECT_EQ(near.at(rank).front().path_class, expected[rank]);
  }
}

TEST(AffinityCorpus, HgxA100FourNumaGpus4To7HaveNoLocalNic) {
  BRAID_SKIP_WITHOUT_REALCASES();
  // RC-22: 4 NUMA nodes, 3 NICs. GPU0/1 share a PCIe switch tree with NIC0, GPU2/3 with NIC2 (PXB in the
  // matrix); GPU4-7 (NUMA 2 and 3) have no NIC in their NUMA node, so every NIC is SYS away from them.
  const Topology t = load("smi/hgx-a100-nv12-3nic-4numa.txt");
  ASSERT_EQ(t.numGpus(), 8);
  const auto near = byRank(nicAffinity(t));
  for (int rank = 0; rank < 8; ++rank) {
    SCOPED_TRACE(rank);
    ASSERT_TRUE(near.count(rank)) << "every GPU has a nearest NIC";
    const int gpu_numa = t.vertices[t.gpuVertex(rank)].numa;
    for (const NicAffinity& a : near.at(rank)) {
      const Vertex& nic = t.vertices[a.nic_vertex];
      if (rank < 4) {
        ASSERT_EQ(near.at(rank).size(), 1u);
        EXPECT_EQ(bareName(nic.name), rank < 2 ? "mlx5_0" : "mlx5_2");
        // Below the host bridge: PXB in the matrix, a tree of several PCIe switches.
        EXPECT_EQ(a.path_class, "PXB");
        EXPECT_EQ(nic.numa, gpu_numa);
      } else {
        EXPECT_EQ(a.path_class, "SYS");
        EXPECT_NE(nic.numa, gpu_numa);
      }
    }
  }
}

TEST(AffinityCorpus, EveryTopologyFileGivesConsistentAffinity) {
  BRAID_SKIP_WITHOUT_REALCASES();
  const std::set<std::string> classes = {"NVL", "PIX", "PXB", "P2C", "PHB", "SYS", "NET"};
  int files = 0;
  for (const char* dir : {"topo", "smi"}) {
    for (const auto& entry : fs::directory_iterator(kRealcases / dir)) {
      Result<Topology> loaded = loadTopology(entry.path().string());
      if (!loaded.isOk()) continue;  // graph files and files the importer refuses are covered elsewhere
      const Topology& t = *loaded;
      SCOPED_TRACE(entry.path().filename().string());
      ++files;
      const std::vector<NicAffinity> all = nicAffinity(t);
      std::set<int> ranks;
      for (const NicAffinity& a : all) {
        ASSERT_GE(a.rank, 0);
        ASSERT_LT(a.rank, t.numGpus());
        ASSERT_GE(a.nic_vertex, 0);
        ASSERT_LT(a.nic_vertex, static_cast<int>(t.vertices.size()));
        EXPECT_EQ(t.vertices[a.nic_vertex].kind, VertexKind::kNic);
        EXPECT_EQ(t.vertices[a.nic_vertex].node, t.vertices[t.gpuVertex(a.rank)].node);
        EXPECT_TRUE(classes.count(a.path_class)) << a.path_class;
        EXPECT_GT(a.bandwidth_gbps, 0);
        EXPECT_GE(a.hops, 1);
        // The route behind it passes through no other GPU.
        std::optional<Route> r = gpuNicRoute(t, a.rank, a.nic_vertex);
        ASSERT_TRUE(r.has_value());
        EXPECT_EQ(static_cast<int>(r->links.size()), a.hops);
        for (size_t i = 0; i + 1 < r->links.size(); ++i) {
          EXPECT_NE(t.vertices[t.links[r->links[i]].dst].kind, VertexKind::kGpu);
        }
        ranks.insert(a.rank);
      }
      const std::string text = describeTopology(t);
      bool any_nic = false;
      for (const Node& n : t.nodes) any_nic = any_nic || !n.nics.empty();
      EXPECT_EQ(text.find("GPU -> nearest NIC") != std::string::npos, any_nic && t.numGpus() > 0);
      EXPECT_NE(topologyToJson(t).find("\"nic_affinity\""), std::string::npos);
    }
  }
  EXPECT_GE(files, 15);
}

}  // namespace
}  // namespace braid
