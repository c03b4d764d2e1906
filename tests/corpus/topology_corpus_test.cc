// Corpus tests for the topology importers on the real files in ../shared/realcases (README.md sections 1, 2, 4).
// Expected GPU/NIC counts and NVLink lanes per GPU were read off each file by hand. Truncated and garbled
// copies of every file must give a result or a parse error: never a crash, an exception, or a hang.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "braid/file_io.h"
#include "braid/importers.h"
#include "braid/taccl.h"
#include "braid/topology.h"
#include "support/corpus.h"

namespace braid {
namespace {

namespace fs = std::filesystem;

const fs::path kRealcases = testing::realcasesDir();

std::string read(const fs::path& p) {
  auto text = readFile(p.string());
  EXPECT_TRUE(text.isOk()) << text.status().toString();
  return text.isOk() ? *text : std::string();
}

int count(const Topology& t, VertexKind kind) {
  int n = 0;
  for (const Vertex& v : t.vertices) n += v.kind == kind ? 1 : 0;
  return n;
}

// NVLink lanes leaving the GPU of this rank (direct and to NVSwitches).
int nvlinkLanesOut(const Topology& t, int rank) {
  int lanes = 0;
  for (int li : t.outLinks(t.gpuVertex(rank))) lanes += t.links[li].kind == LinkKind::kNvlink ? t.links[li].lanes : 0;
  return lanes;
}

bool hasNote(const Topology& t, const std::string& needle) {
  for (const std::string& n : t.notes) {
    if (n.find(needle) != std::string::npos) return true;
  }
  return false;
}

std::string allNotes(const Topology& t) {
  std::string out;
  for (const std::string& n : t.notes) out += "  " + n + "\n";
  return out;
}

std::string pcieNeighbour(const Topology& t, int vertex) {
  for (int li : t.outLinks(vertex)) {
    if (t.links[li].kind == LinkKind::kPcie) return t.vertices[t.links[li].dst].name;
  }
  return "";
}

struct Expect {
  std::string file;
  int gpus;  // -1: refused
  int nics;
  int lanes_per_gpu;   // NVLink lanes out of every GPU
  int error_line = 0;  // refused: line the error names
  std::string error_field;
};

enum class Format { kXml, kSmi, kTaccl };

Result<Topology> importAs(Format f, const std::string& text, const std::string& name) {
  switch (f) {
    case Format::kXml: return importNcclTopoXml(text, name);
    case Format::kSmi: return importNvidiaSmiTopo(text, name);
    case Format::kTaccl: return importTacclProfile(text, name, nullptr);
  }
  return internalError("unreachable");
}

void checkTable(Format format, const std::string& folder, const std::vector<Expect>& table) {
  std::set<std::string> listed;
  for (const Expect& e : table) {
    listed.insert(e.file);
    const fs::path path = kRealcases / folder / e.file;
    SCOPED_TRACE(path.string());
    ASSERT_TRUE(fs::exists(path));
    auto r = importAs(format, read(path), path.string());
    if (e.gpus < 0) {
      ASSERT_FALSE(r.isOk()) << "expected a refusal";
      EXPECT_EQ(r.status().code(), StatusCode::kParseError);
      const std::string where = path.string() + ":" + std::to_string(e.error_line) + ": " + e.error_field;
      EXPECT_NE(r.status().message().find(where), std::string::npos) << r.status().message();
      continue;
    }
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    const Topology& t = *r;
    EXPECT_TRUE(validateTopology(t).isOk());
    EXPECT_EQ(t.numGpus(), e.gpus);
    EXPECT_EQ(count(t, VertexKind::kNic), e.nics);
    for (int rank = 0; rank < t.numGpus(); ++rank)
      EXPECT_EQ(nvlinkLanesOut(t, rank), e.lanes_per_gpu) << "rank " << rank;
  }
  // Every file of the folder is in the table.
  for (const auto& entry : fs::directory_iterator(kRealcases / folder)) {
    if (entry.is_regular_file()) {
      EXPECT_TRUE(listed.count(entry.path().filename().string())) << entry.path();
    }
  }
}

TEST(TopologyCorpusTest, NcclTopologyXmlFiles) {
  BRAID_SKIP_WITHOUT_REALCASES();
  checkTable(Format::kXml, "topo",
             {
                 {"aws-g5-48xl-topo-minimal.xml", -1, 0, 0, 14, "class"},  // busids only: no GPU to import
                 {"aws-p4d-24xl-topo.xml", 8, 4, 0, 0, ""},
                 {"aws-p5-48xl-topo-2023-hint.xml", -1, 0, 0, 18, "class"},  // no class attributes at all
                 {"aws-p5-48xl-topo-pr1226.xml", 8, 32, 0, 0, ""},
                 {"azure-ncv4-a100pcie-graph.xml", -1, 0, 0, 1, "graphs"},
                 {"azure-ncv4-a100pcie-topo.xml", 4, 1, 0, 0, ""},  // self-loop NVLinks ignored; eth0 kept
                 {"azure-ndv2-v100-topo.xml", 8, 1, 0, 0, ""},
                 {"azure-ndv4-a100-topo.xml", 8, 8, 0, 0, ""},
                 {"azure-ndv5-h100-topo.xml", 8, 8, 0, 0, ""},
                 {"hgx-8x-a100-80g-nvswitch-5cx6bond.xml", 8, 5, 12, 0, ""},  // 6 NVSwitch targets x 2
                 {"hgx-8x-h800-nvswitch-8nic.xml", 8, 8, 8, 0, ""},           // 4 NVSwitch targets x 2
                 {"pcie-16x-l20-bf3-devrank-mismatch.xml", 16, 8, 0, 0, ""},
                 {"pcie-2x-rtx4090-amd.xml", 2, 2, 0, 0, ""},  // dual-port CX4: 2 nets
                 {"pcie-4x-rtxa6000-graph.xml", -1, 0, 0, 1, "graphs"},
                 {"pcie-4x-rtxa6000-veth-nics.xml", 4, 2, 0, 0, ""},  // 8 docker/veth NICs dropped
                 {"pcie-8x-rtx3090-plx-1nic.xml", 8, 1, 0, 0, ""},
             });
}

TEST(TopologyCorpusTest, NvidiaSmiFiles) {
  BRAID_SKIP_WITHOUT_REALCASES();
  checkTable(Format::kSmi, "smi",
             {
                 {"2x-rtx3090-nvlink-bridge-nv4.txt", 2, 0, 4, 0, ""},
                 {"4gpu-nvlink-bridged-pairs-2socket.txt", 4, 0, 4, 0, ""},
                 {"aws-g6e-12xl-4x-l40s-pcie-node.txt", 4, 0, 0, 0, ""},
                 {"aws-p4d-24xl-nv12.txt", 8, 0, 12, 0, ""},
                 {"dgx1-v100-sxm2-hybrid-cube-mesh-1nic.txt", 8, 1, 6, 0, ""},
                 {"hgx-a100-nv12-3nic-4numa.txt", 8, 3, 12, 0, ""},
                 {"pcie-8x-l4-phb-sys-2socket.txt", 8, 0, 0, 0, ""},
             });
}

TEST(TopologyCorpusTest, TacclProfiles) {
  BRAID_SKIP_WITHOUT_REALCASES();
  checkTable(Format::kTaccl, "taccl/topo",
             {
                 {"adp_topo-mi300x.json", 8, 0, 7, 0, ""},       // HubAndSpoke: one lane to each of 7 peers
                 {"adp_topo-mi300x_dumb.json", 4, 0, 3, 0, ""},  // HubAndSpoke over 4 GPUs
                 {"mcrl_akmu-A-GPU4-P2P-1-GDRLEVEL-SYS-GDRREAD-1-1MB.json", 4, 0, 0, 0, ""},  // custom: pcie links
                 {"mcrl_akmu-B-GPU2-P2P-0-GDRLEVEL-LOC-GDRREAD-0-1MB.json", 2, 0, 0, 0, ""},
                 {"mcrl_akmu-D-GPU1-P2P-1-GDRLEVEL-SYS-GDRREAD-1-1MB.json", 1, 0, 0, 0, ""},
                 {"topo-dgx2-1KB.json", 16, 0, 6, 0, ""},  // DGX-2: 6 NVLinks per GPU into the NVSwitch
                 {"topo-dgx2-1MB.json", 16, 0, 6, 0, ""},
                 {"topo-ndv2-1KB.json", 8, 0, 6, 0, ""},  // hybrid cube-mesh: 2 + 2 + 1 + 1
                 {"topo-ndv2-1MB.json", 8, 0, 6, 0, ""},
                 {"topo-ndv2-32KB.json", 8, 0, 6, 0, ""},
             });
}

TEST(TopologyCorpusTest, XmlDetailsCheckedByHand) {
  BRAID_SKIP_WITHOUT_REALCASES();
  auto load = [](const std::string& name) {
    const fs::path p = kRealcases / "topo" / name;
    return importNcclTopoXml(read(p), p.string());
  };
  {  // RC-01: no NVLink info, said clearly. No PCI device ids in the file: no specific model suggested.
    auto r = load("azure-ndv2-v100-topo.xml");
    ASSERT_TRUE(r.isOk());
    EXPECT_TRUE(hasNote(*r, "no NVLink info in this hint file; NVLink comes from detection or a built-in model"));
    EXPECT_TRUE(hasNote(*r, "no specific model is suggested"));
    EXPECT_EQ(count(*r, VertexKind::kCpu), 2);
    // Bus ids 0001..0008 are already in document order: gpu i = 000(i+1), GPU0-3 on NUMA 0.
    for (int rank = 0; rank < 8; ++rank) {
      EXPECT_EQ(r->vertices[r->gpuVertex(rank)].busid, "000" + std::to_string(rank + 1) + ":00:00.0");
      EXPECT_EQ(r->vertices[r->gpuVertex(rank)].numa, rank < 4 ? 0 : 1);
    }
    EXPECT_TRUE(hasNote(*r, "ranked by PCI bus id"));
    EXPECT_FALSE(hasNote(*r, "differ from the file's document order"));
    // modelid="85" = 0x55: Skylake (NDv2's Xeon Platinum 8168), NCCL SKL 10 GB/s, as topologies/ndv2-x1.yaml.
    EXPECT_DOUBLE_EQ(r->route(0, 4)->bandwidth_gbps, 10.0);
  }
  {  // RC-02: GPUs by bus id, not document order (0003, 0004, 0001, 0002, 000d, 000e, 000b, 000c); NICs too.
    auto r = load("azure-ndv4-a100-topo.xml");
    ASSERT_TRUE(r.isOk());
    // Rail pairing, read off the file by hand: rank -> (bus id, switch, NUMA, NIC on that switch).
    struct Rail {
      std::string gpu_busid, sw;
      int numa;
      std::string nic;
    };
    const std::vector<Rail> rails = {
        {"0001:00:00.0", "pcie_ffff:ff:02.0", 1, "nic0"},  // NIC 0101
        {"0002:00:00.0", "pcie_ffff:ff:02.0", 1, "nic1"},  // NIC 0102
        {"0003:00:00.0", "pcie_ffff:ff:01.0", 0, "nic2"},  // NIC 0103
        {"0004:00:00.0", "pcie_ffff:ff:01.0", 0, "nic3"},  // NIC 0104
        {"000b:00:00.0", "pcie_ffff:ff:04.0", 3, "nic4"},  // NIC 0105
        {"000c:00:00.0", "pcie_ffff:ff:04.0", 3, "nic5"},  // NIC 0106
        {"000d:00:00.0", "pcie_ffff:ff:03.0", 2, "nic6"},  // NIC 0107
        {"000e:00:00.0", "pcie_ffff:ff:03.0", 2, "nic7"},  // NIC 0108
    };
    for (int rank = 0; rank < 8; ++rank) {
      SCOPED_TRACE(rank);
      const Vertex& g = r->vertices[r->gpuVertex(rank)];
      EXPECT_EQ(g.name, "gpu" + std::to_string(rank));
      EXPECT_EQ(g.busid, rails[rank].gpu_busid);
      EXPECT_EQ(g.numa, rails[rank].numa);
      EXPECT_EQ(pcieNeighbour(*r, g.id), rails[rank].sw);
      const int nic = r->findVertex(rails[rank].nic);
      ASSERT_GE(nic, 0);
      EXPECT_EQ(pcieNeighbour(*r, nic), rails[rank].sw);
      EXPECT_EQ(r->nodes[0].nics[rank], nic);  // local NIC order = bus-id order
    }
    EXPECT_TRUE(hasNote(*r,
                        "gpu0=0001:00:00.0, gpu1=0002:00:00.0, gpu2=0003:00:00.0, gpu3=0004:00:00.0, "
                        "gpu4=000b:00:00.0, gpu5=000c:00:00.0, gpu6=000d:00:00.0, gpu7=000e:00:00.0"));
    // A100 machine: the V100 NDv2 model is not suggested; the file has no device ids, so none is.
    EXPECT_FALSE(hasNote(*r, "ndv2-x1"));
    EXPECT_TRUE(hasNote(*r, "no specific model is suggested"));
    // AMD EPYC (vendor AuthenticAMD): NCCL AMD 16 GB/s between NUMA nodes.
    EXPECT_DOUBLE_EQ(r->route(0, 2)->bandwidth_gbps, 16.0);
    std::map<std::string, std::pair<int, int>> per_switch;
    for (const Vertex& v : r->vertices) {
      if (v.kind == VertexKind::kGpu) ++per_switch[pcieNeighbour(*r, v.id)].first;
      if (v.kind == VertexKind::kNic) ++per_switch[pcieNeighbour(*r, v.id)].second;
    }
    EXPECT_EQ(per_switch.size(), 4u);
    for (const auto& [sw, counts] : per_switch) {
      EXPECT_EQ(sw.rfind("pcie_ffff:ff:0", 0), 0u) << sw;
      EXPECT_EQ(counts, std::make_pair(2, 2)) << sw;
    }
    EXPECT_EQ(count(*r, VertexKind::kCpu), 4);
  }
  {  // RC-03: 1:1 GPU-NIC per switch; PCIe Gen5 x16 = 48 GB/s.
    auto r = load("azure-ndv5-h100-topo.xml");
    ASSERT_TRUE(r.isOk());
    // Bus-id order equals document order here: GPU 0001,0002,0003,0008 | 0009,000a,000b,000c with NIC 0101..0108
    // on switch ffff:ff:0(i+1).0, so gpu i and nic i share a switch.
    const std::vector<std::string> gpu_busids = {"0001:00:00.0", "0002:00:00.0", "0003:00:00.0", "0008:00:00.0",
                                                 "0009:00:00.0", "000a:00:00.0", "000b:00:00.0", "000c:00:00.0"};
    for (int rank = 0; rank < 8; ++rank) {
      const std::string sw = "pcie_ffff:ff:0" + std::to_string(rank + 1) + ".0";
      EXPECT_EQ(r->vertices[r->gpuVertex(rank)].busid, gpu_busids[rank]);
      EXPECT_EQ(pcieNeighbour(*r, r->gpuVertex(rank)), sw) << rank;
      EXPECT_EQ(pcieNeighbour(*r, r->findVertex("nic" + std::to_string(rank))), sw) << rank;
    }
    EXPECT_FALSE(hasNote(*r, "ndv2-x1"));
    EXPECT_TRUE(hasNote(*r, "no specific model is suggested"));
    EXPECT_DOUBLE_EQ(r->route(0, 4)->bandwidth_gbps, 22.0);  // modelid 143 = 0x8F: Sapphire Rapids, NCCL SRP
    for (int rank = 0; rank < 8; ++rank) {
      const std::string sw = pcieNeighbour(*r, r->gpuVertex(rank));
      int nics = 0;
      for (int v : r->nodes[0].nics) nics += pcieNeighbour(*r, v) == sw ? 1 : 0;
      EXPECT_EQ(nics, 1) << rank;
      for (int li : r->outLinks(r->gpuVertex(rank))) EXPECT_DOUBLE_EQ(r->links[li].bandwidth_gbps, 48.0);
    }
  }
  {  // RC-05: 4 switches with 2 GPUs + 1 EFA each, Gen3 x16 (12 GB/s).
    auto r = load("aws-p4d-24xl-topo.xml");
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(count(*r, VertexKind::kPcieSwitch), 4);
    EXPECT_EQ(pcieNeighbour(*r, r->gpuVertex(0)), pcieNeighbour(*r, r->gpuVertex(1)));
    EXPECT_EQ(pcieNeighbour(*r, r->nodes[0].nics[0]), pcieNeighbour(*r, r->gpuVertex(0)));
    EXPECT_NE(pcieNeighbour(*r, r->gpuVertex(1)), pcieNeighbour(*r, r->gpuVertex(2)));
    EXPECT_DOUBLE_EQ(r->route(0, 1)->bandwidth_gbps, 12.0);
    // Bus ids 10:1c 10:1d | 20:1c 20:1d | 90:1c 90:1d | a0:1c a0:1d (the file's "GPU 0".."GPU 7" comments);
    // EFA NICs 10:1b, 20:1b, 90:1b, a0:1b: GPUs 2k and 2k+1 share switch k with nic k.
    const std::vector<std::string> busids = {"0000:10:1c.0", "0000:10:1d.0", "0000:20:1c.0", "0000:20:1d.0",
                                             "0000:90:1c.0", "0000:90:1d.0", "0000:a0:1c.0", "0000:a0:1d.0"};
    for (int rank = 0; rank < 8; ++rank) {
      EXPECT_EQ(r->vertices[r->gpuVertex(rank)].busid, busids[rank]);
      EXPECT_EQ(pcieNeighbour(*r, r->gpuVertex(rank)), "pcie_ffff:ff:0" + std::to_string(rank / 2 + 1) + ".0");
      EXPECT_EQ(pcieNeighbour(*r, r->findVertex("nic" + std::to_string(rank / 2))),
                pcieNeighbour(*r, r->gpuVertex(rank)));
    }
    // device="0x20b0" on every GPU: A100-SXM4-40GB, so the DGX A100 model, not the V100 NDv2 one.
    EXPECT_TRUE(hasNote(*r, "A100-SXM4-40GB (PCI device 0x20b0), so topologies/dgx-a100-x1.yaml"));
    EXPECT_FALSE(hasNote(*r, "ndv2-x1"));
    EXPECT_EQ(r->vertices[r->gpuVertex(0)].model, "A100-SXM4-40GB");
  }
  {  // RC-07 / BUG-07: 8 switch groups of 1 GPU + 4 NICs, all under one NUMA node (noted).
    auto r = load("aws-p5-48xl-topo-pr1226.xml");
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(count(*r, VertexKind::kPcieSwitch), 8);
    for (int rank = 0; rank < 8; ++rank) {
      const std::string sw = pcieNeighbour(*r, r->gpuVertex(rank));
      int nics = 0;
      for (int v : r->nodes[0].nics) nics += pcieNeighbour(*r, v) == sw ? 1 : 0;
      EXPECT_EQ(nics, 4) << rank;
    }
    EXPECT_TRUE(hasNote(*r, "all 8 GPUs sit under one <cpu>"));
    // 8 x sm90 <gpu> elements and not one <nvlink>: a p5 has NVSwitch, so the PCIe-only reading is said, with the
    // way to fix it and the H100 model (no PCI device ids in the file).
    EXPECT_TRUE(hasNote(*r, "no <nvlink> element in this full dump although its GPUs are sm90")) << allNotes(*r);
    EXPECT_TRUE(hasNote(*r,
                        "this topology has PCIe links only. To fix: dump the topology again with "
                        "NCCL_TOPO_DUMP_FILE=<file> from a run where NVLink is visible"));
    EXPECT_TRUE(hasNote(*r, "topologies/dgx-h100-x1.yaml"));
    EXPECT_EQ(r->route(0, 1)->slowest_kind, LinkKind::kPcie);
  }
  // Full dumps that need no such note: PCIe cards (sm86, sm89) and dumps with <nvlink> elements (self-loops too).
  for (const char* name :
       {"pcie-8x-rtx3090-plx-1nic.xml", "pcie-2x-rtx4090-amd.xml", "pcie-16x-l20-bf3-devrank-mismatch.xml",
        "pcie-4x-rtxa6000-veth-nics.xml", "hgx-8x-a100-80g-nvswitch-5cx6bond.xml", "hgx-8x-h800-nvswitch-8nic.xml",
        "azure-ncv4-a100pcie-topo.xml"}) {
    auto r = load(name);
    ASSERT_TRUE(r.isOk()) << name;
    EXPECT_FALSE(hasNote(*r, "no <nvlink> element in this full dump")) << name << "\n" << allNotes(*r);
  }
  {  // RC-09: NVSwitch 12 lanes x 20 GB/s; mlx5_bond_0 sits outside any GPU switch (directly on cpu0).
    auto r = load("hgx-8x-a100-80g-nvswitch-5cx6bond.xml");
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(count(*r, VertexKind::kNvSwitch), 1);
    EXPECT_DOUBLE_EQ(r->route(0, 7)->bandwidth_gbps, 240.0);
    EXPECT_EQ(pcieNeighbour(*r, r->findVertex("mlx5_bond_0")), "cpu0");
    EXPECT_EQ(pcieNeighbour(*r, r->findVertex("mlx5_bond_1")), pcieNeighbour(*r, r->findVertex("pcie_0000:17:00.0")));
  }
  {  // RC-10: H800 8 lanes x 20.6 GB/s; NICs with coll/maxconn attributes.
    auto r = load("hgx-8x-h800-nvswitch-8nic.xml");
    ASSERT_TRUE(r.isOk());
    EXPECT_NEAR(r->route(3, 4)->bandwidth_gbps, 8 * 20.6, 1e-9);
    EXPECT_EQ(r->vertices[r->gpuVertex(0)].model, "H800");
  }
  {  // RC-12: NIC only on NUMA 1; GDR off noted.
    auto r = load("pcie-8x-rtx3090-plx-1nic.xml");
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(r->vertices[r->findVertex("mlx5_0")].numa, 1);
    EXPECT_TRUE(hasNote(*r, "gdr=0"));
    EXPECT_EQ(r->route(0, 4)->slowest_kind, LinkKind::kSys);
  }
  {  // RC-13: NUMA ids 3 and 2.
    auto r = load("pcie-2x-rtx4090-amd.xml");
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(r->vertices[r->gpuVertex(0)].numa, 3);
    EXPECT_EQ(r->vertices[r->gpuVertex(1)].numa, 2);
  }
  {  // RC-15: ranks by the rank attribute (dev 4 = rank 2).
    auto r = load("pcie-16x-l20-bf3-devrank-mismatch.xml");
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(r->vertices[r->gpuVertex(2)].busid, "0000:4e:00.0");
    EXPECT_EQ(r->vertices[r->gpuVertex(8)].busid, "0000:42:00.0");
    EXPECT_EQ(r->vertices[r->gpuVertex(15)].busid, "0000:d6:00.0");
  }
  {  // RC-04: self-loops noted and never bandwidth.
    auto r = load("azure-ncv4-a100pcie-topo.xml");
    ASSERT_TRUE(r.isOk());
    EXPECT_TRUE(hasNote(*r, "self-loops"));
    EXPECT_EQ(r->route(0, 1)->slowest_kind, LinkKind::kPcie);
  }
}

TEST(TopologyCorpusTest, Dgx1MatrixGivesExactlyTheMatrixNvlinks) {
  BRAID_SKIP_WITHOUT_REALCASES();
  const fs::path p = kRealcases / "smi" / "dgx1-v100-sxm2-hybrid-cube-mesh-1nic.txt";
  auto r = importNvidiaSmiTopo(read(p), p.string());
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const Topology& t = *r;
  // Typed in from the file: pair -> NV count.
  const std::map<std::pair<int, int>, int> expected = {
      {{0, 1}, 1}, {{0, 2}, 1}, {{0, 3}, 2}, {{0, 4}, 2}, {{1, 2}, 2}, {{1, 3}, 1}, {{1, 5}, 2}, {{2, 3}, 2},
      {{2, 6}, 1}, {{3, 7}, 1}, {{4, 5}, 1}, {{4, 6}, 1}, {{4, 7}, 2}, {{5, 6}, 2}, {{5, 7}, 1}, {{6, 7}, 2},
  };
  std::map<std::pair<int, int>, int> found;
  for (const Link& l : t.links) {
    if (l.kind != LinkKind::kNvlink) continue;
    const int a = t.vertices[l.src].rank, b = t.vertices[l.dst].rank;
    ASSERT_GE(a, 0);
    ASSERT_GE(b, 0);
    EXPECT_TRUE(found.emplace(std::make_pair(a, b), l.lanes).second) << "duplicate " << a << "->" << b;
    EXPECT_DOUBLE_EQ(l.bandwidth_gbps, 20.0 * l.lanes);  // V100: 20 GB/s per lane
  }
  std::map<std::pair<int, int>, int> both;
  for (const auto& [pair, lanes] : expected) {
    both[pair] = lanes;
    both[{pair.second, pair.first}] = lanes;
  }
  EXPECT_EQ(found, both);
  // Routes follow the matrix class: NV pairs one NVLink hop, SYS pairs cross the SYS link.
  for (int a = 0; a < 8; ++a) {
    for (int b = 0; b < 8; ++b) {
      if (a == b) continue;
      auto route = t.route(a, b);
      ASSERT_TRUE(route.has_value());
      bool sys = false;
      for (int li : route->links) sys = sys || t.links[li].kind == LinkKind::kSys;
      if (both.count({a, b})) {
        EXPECT_EQ(route->links.size(), 1u) << a << "-" << b;
        EXPECT_EQ(route->slowest_kind, LinkKind::kNvlink);
      } else {
        EXPECT_TRUE(sys) << a << "-" << b << " is SYS in the matrix";
      }
    }
  }
  // Inter-socket link: 6 NVLinks per GPU = V100 = DGX-1, whose CPUs are Xeon E5-2698 v4 (Broadwell): NCCL BDW
  // 6 GB/s, the same value as topologies/dgx1-v100.yaml.
  ASSERT_EQ(count(t, VertexKind::kCpu), 2);
  for (const Link& l : t.links) {
    if (l.kind == LinkKind::kSys) {
      EXPECT_DOUBLE_EQ(l.bandwidth_gbps, 6.0);
    }
  }
  EXPECT_TRUE(hasNote(t, "Intel Xeon E5-2698 v4 (Broadwell) of the DGX-1: 6 GB/s (NCCL BDW)"));
  // The NIC (PIX to GPU2/3) shares their PCIe switch.
  const int nic = t.findVertex("mlx5_0");
  ASSERT_GE(nic, 0);
  EXPECT_EQ(pcieNeighbour(t, nic), pcieNeighbour(t, t.gpuVertex(2)));
  EXPECT_EQ(pcieNeighbour(t, nic), pcieNeighbour(t, t.gpuVertex(3)));
  EXPECT_NE(pcieNeighbour(t, nic), pcieNeighbour(t, t.gpuVertex(0)));
}

TEST(TopologyCorpusTest, SmiNumaAndNicLocality) {
  BRAID_SKIP_WITHOUT_REALCASES();
  const fs::path p = kRealcases / "smi" / "hgx-a100-nv12-3nic-4numa.txt";
  auto r = importNvidiaSmiTopo(read(p), p.string());
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(count(*r, VertexKind::kCpu), 4);
  EXPECT_EQ(r->vertices[r->gpuVertex(6)].numa, 3);
  // NIC0 is PXB to GPU0/1, NIC2 PXB to GPU2/3: a switch tree (own leaf switches under a common upstream switch,
  // never one shared switch, which would be PIX); GPU4-7 have no NIC on their CPU.
  EXPECT_NE(pcieNeighbour(*r, r->findVertex("mlx5_0")), pcieNeighbour(*r, r->gpuVertex(0)));
  EXPECT_NE(pcieNeighbour(*r, r->findVertex("mlx5_2")), pcieNeighbour(*r, r->gpuVertex(3)));
  for (int nic : r->nodes[0].nics) EXPECT_NE(r->vertices[nic].numa, 2);
  // NV12 = A100: the DGX A100's AMD EPYC 7742, NCCL AMD 16 GB/s on each of the 6 CPU pairs (both directions).
  int sys_links = 0;
  for (const Link& l : r->links) {
    if (l.kind != LinkKind::kSys) continue;
    ++sys_links;
    EXPECT_DOUBLE_EQ(l.bandwidth_gbps, 16.0);
  }
  EXPECT_EQ(sys_links, 12);
  {
    // p4d matrix: also NV12, so 16 (DGX A100). The real p4d has Intel Cascade Lake CPUs (NCCL SKL, 10, which its
    // XML hint file RC-05 gives with modelid 85); the matrix cannot show that, and the note says which CPU it assumed.
    const fs::path p4d = kRealcases / "smi" / "aws-p4d-24xl-nv12.txt";
    auto q = importNvidiaSmiTopo(read(p4d), p4d.string());
    ASSERT_TRUE(q.isOk());
    EXPECT_EQ(count(*q, VertexKind::kCpu), 2);
    for (const Link& l : q->links) {
      if (l.kind == LinkKind::kSys) {
        EXPECT_DOUBLE_EQ(l.bandwidth_gbps, 16.0);
      }
    }
    EXPECT_EQ(q->route(0, 4)->slowest_kind, LinkKind::kNvlink);  // GPU traffic takes the NVSwitch, not SYS
    EXPECT_TRUE(hasNote(*q, "AMD EPYC 7742 of the DGX A100"));
  }
  const fs::path l4 = kRealcases / "smi" / "pcie-8x-l4-phb-sys-2socket.txt";
  auto s = importNvidiaSmiTopo(read(l4), l4.string());
  ASSERT_TRUE(s.isOk());
  EXPECT_EQ(count(*s, VertexKind::kCpu), 2);
  EXPECT_EQ(s->route(0, 3)->slowest_kind, LinkKind::kPcie);
  EXPECT_EQ(s->route(3, 4)->slowest_kind, LinkKind::kSys);
  // PCIe only: no GPU generation, no reference machine: NCCL's Skylake class, 10 GB/s.
  EXPECT_DOUBLE_EQ(s->route(3, 4)->bandwidth_gbps, 10.0);
  EXPECT_TRUE(hasNote(*s, "no reference machine for this GPU generation"));
}

TEST(TopologyCorpusTest, TacclSketchesAllRead) {
  BRAID_SKIP_WITHOUT_REALCASES();
  const std::map<std::string, std::pair<int, std::string>> expected = {
      {"adp_mi300x-dumb-n2.json", {2, "direct-map"}},
      {"adp_mi300x-n2.json", {2, "direct-map"}},
      {"adp_mi300x-n3.json", {3, "direct-map"}},
      {"mcrl_sk-akmu-n2-gpu4-nonsymmetric.json", {2, "map"}},
      {"mcrl_sk-akmu-n3-gpu2-nonsymmetric.json", {3, "fully-connected"}},
      {"mcrl_sk-akmu-n3-gpu4.json", {3, "map"}},
      {"mcrl_sk-akmu-n5-gpu1.json", {5, "fully-connected"}},
      {"sk-dgx2-n1.json", {1, ""}},
      {"sk-ndv2-n1-cUp6.json", {1, ""}},
      {"sk1-dgx2-n1.json", {1, ""}},
      {"sk1-dgx2-n2.json", {2, "map"}},
      {"sk1-ndv2-n1.json", {1, ""}},
      {"sk1-ndv2-n2.json", {2, "map"}},
      {"sk1-ndv2-n4.json", {4, "map"}},
      {"sk2-dgx2-n2.json", {2, "direct-map"}},
      {"sk2-ndv2-n2.json", {2, "fully-connected"}},
      {"sk2-ndv2-n4.json", {4, "fully-connected"}},
      {"sk3-ndv2-n2.json", {2, "direct-map"}},
  };
  int seen = 0;
  for (const auto& entry : fs::directory_iterator(kRealcases / "taccl" / "sketch")) {
    const std::string name = entry.path().filename().string();
    auto s = loadTacclSketch(entry.path().string());
    ASSERT_TRUE(s.isOk()) << name << ": " << s.status().toString();
    ASSERT_TRUE(expected.count(name)) << name;
    EXPECT_EQ(s->nnodes, expected.at(name).first) << name;
    EXPECT_EQ(s->internode_conn_kind, expected.at(name).second) << name;
    ++seen;
  }
  EXPECT_EQ(seen, static_cast<int>(expected.size()));
  auto cup6 = loadTacclSketch((kRealcases / "taccl/sketch/sk-ndv2-n1-cUp6.json").string());
  EXPECT_EQ(cup6->input_chunkup, 6);
  auto dgx = loadTacclSketch((kRealcases / "taccl/sketch/sk1-dgx2-n2.json").string());
  EXPECT_EQ(dgx->internode_conn.at(15), std::vector<int>{14});
  EXPECT_EQ(dgx->gpus_to_sender_rev_map.at(15), (std::vector<int>{14, 15}));
  EXPECT_TRUE(dgx->enforce_ordering);
  EXPECT_EQ(dgx->symmetry_offsets, (std::vector<std::pair<int, int>>{{2, 16}, {16, 32}}));
  EXPECT_EQ(dgx->switches.at(0).strategy, "uc-min");
  // Sketches named by TACCL's commands.sh that do not exist: file-not-found with the path.
  for (const char* missing : {"sk3-dgx2-n2.json", "sk1-ndv2-n6.json", "sk1-ndv2-n8.json"}) {
    const std::string path = (kRealcases / "taccl/sketch" / missing).string();
    auto s = loadTacclSketch(path);
    ASSERT_FALSE(s.isOk());
    EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
    EXPECT_NE(s.status().message().find(path), std::string::npos);
  }
}

TEST(TopologyCorpusTest, TacclCommandPairsBuildMultiNodeTopologies) {
  BRAID_SKIP_WITHOUT_REALCASES();
  struct Pair {
    std::string topo, sketch;
    int gpus, nics;
  };
  // Pairs from TACCL's commands.sh (README RC-41) and the forks' own pairs.
  for (const Pair& p : std::vector<Pair>{
           {"topo-dgx2-1MB.json", "sk1-dgx2-n2.json", 32, 16},
           {"topo-ndv2-1MB.json", "sk1-ndv2-n2.json", 16, 2},
           {"topo-ndv2-1MB.json", "sk2-ndv2-n4.json", 32, 4},
           {"adp_topo-mi300x.json", "adp_mi300x-n3.json", 24, 24},
           {"mcrl_akmu-A-GPU4-P2P-1-GDRLEVEL-SYS-GDRREAD-1-1MB.json", "mcrl_sk-akmu-n3-gpu4.json", 12, 3},
           {"mcrl_akmu-D-GPU1-P2P-1-GDRLEVEL-SYS-GDRREAD-1-1MB.json", "mcrl_sk-akmu-n5-gpu1.json", 5, 5}}) {
    SCOPED_TRACE(p.topo + " + " + p.sketch);
    auto sk = loadTacclSketch((kRealcases / "taccl/sketch" / p.sketch).string());
    ASSERT_TRUE(sk.isOk()) << sk.status().toString();
    const fs::path tp = kRealcases / "taccl/topo" / p.topo;
    auto r = importTacclProfile(read(tp), tp.string(), &*sk);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_TRUE(validateTopology(*r).isOk());
    EXPECT_EQ(r->numGpus(), p.gpus);
    EXPECT_EQ(count(*r, VertexKind::kNic), p.nics);
    EXPECT_EQ(r->numNodes(), sk->nnodes);
  }
  // akmu-D: one GPU per node, fully connected: every pair of ranks is one NIC-to-NIC path.
  auto sk = loadTacclSketch((kRealcases / "taccl/sketch/mcrl_sk-akmu-n5-gpu1.json").string());
  const fs::path tp = kRealcases / "taccl/topo/mcrl_akmu-D-GPU1-P2P-1-GDRLEVEL-SYS-GDRREAD-1-1MB.json";
  auto r = importTacclProfile(read(tp), tp.string(), &*sk);
  ASSERT_TRUE(r.isOk());
  auto route = r->route(0, 4);
  ASSERT_TRUE(route.has_value());
  EXPECT_NEAR(route->bandwidth_gbps, 1000.0 / 112.83, 1e-9);
  EXPECT_NEAR(route->alpha_us, 153.43, 1e-9);
}

// Truncated and garbled copies of every corpus file, fed to every importer.
std::vector<std::pair<std::string, std::string>> variants(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  const size_t n = text.size();
  for (double f : {0.1, 0.5, 0.9})
    out.push_back({"cut" + std::to_string(static_cast<int>(f * 100)), text.substr(0, static_cast<size_t>(n * f))});
  if (n > 0) out.push_back({"one-byte-short", text.substr(0, n - 1)});
  out.push_back({"empty", ""});
  std::mt19937 rng(20240917);
  for (int k = 0; k < 24; ++k) {
    std::string g = text;
    const int flips = 1 + k % 6;
    for (int i = 0; i < flips && !g.empty(); ++i) {
      const size_t pos = rng() % g.size();
      g[pos] = static_cast<char>(g[pos] ^ static_cast<char>(1 + rng() % 255));
    }
    out.push_back({"flip" + std::to_string(k), g});
  }
  for (char c : {'>', '"', '}', ']', ':'}) {
    for (double f : {0.3, 0.7}) {
      std::string g = text;
      const size_t pos = g.find(c, static_cast<size_t>(g.size() * f));
      if (pos == std::string::npos) continue;
      g.erase(pos, 1);
      out.push_back({std::string("drop-") + c + std::to_string(static_cast<int>(f * 100)), g});
    }
    std::string all = text;
    all.erase(std::remove(all.begin(), all.end(), c), all.end());
    out.push_back({std::string("drop-all-") + c, all});
  }
  // Digits turned into huge numbers.
  std::string big = text;
  for (size_t pos = big.find_first_of("0123456789"); pos != std::string::npos;
       pos = big.find_first_of("0123456789", pos + 12)) {
    big.insert(pos, "99999999");
  }
  out.push_back({"huge-numbers", big});
  return out;
}

TEST(TopologyCorpusTest, TruncatedAndGarbledInputsNeverCrashOrHang) {
  BRAID_SKIP_WITHOUT_REALCASES();
  TacclSketch two_nodes;
  two_nodes.source = "garble-sketch.json";
  two_nodes.nnodes = 2;
  two_nodes.has_internode = true;
  two_nodes.internode_strategy = "relay";
  two_nodes.internode_conn_kind = "fully-connected";
  int calls = 0, accepted = 0;
  for (const char* folder : {"topo", "smi", "taccl/topo", "taccl/sketch"}) {
    for (const auto& entry : fs::directory_iterator(kRealcases / folder)) {
      const std::string original = read(entry.path());
      for (const auto& [what, text] : variants(original)) {
        const std::string name = entry.path().filename().string() + "~" + what;
        SCOPED_TRACE(name);
        std::vector<Result<Topology>> results;
        const auto start = std::chrono::steady_clock::now();
        results.push_back(importNcclTopoXml(text, name));
        results.push_back(importNvidiaSmiTopo(text, name));
        results.push_back(importTacclProfile(text, name, nullptr));
        results.push_back(importTacclProfile(text, name, &two_nodes));
        auto sketch = readTacclSketch(text, name);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        EXPECT_LT(seconds, 1.0);
        if (!sketch.isOk()) {
          EXPECT_EQ(sketch.status().code(), StatusCode::kParseError) << sketch.status().toString();
          EXPECT_NE(sketch.status().message().find(name), std::string::npos) << sketch.status().message();
        }
        for (const auto& r : results) {
          ++calls;
          if (r.isOk()) {
            ++accepted;
            EXPECT_TRUE(validateTopology(*r).isOk()) << validateTopology(*r).toString();
            EXPECT_GT(r->numGpus(), 0);
            continue;
          }
          EXPECT_EQ(r.status().code(), StatusCode::kParseError) << r.status().toString();
          const std::string& m = r.status().message();
          EXPECT_TRUE(m.find(name) != std::string::npos || m.find("garble-sketch.json") != std::string::npos) << m;
        }
      }
    }
  }
  EXPECT_GT(calls, 1000);
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace braid
