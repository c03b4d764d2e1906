// Importer tests on small hand-written inputs: every leniency rule and every error of the NCCL topology XML,
// nvidia-smi matrix and TACCL profile/sketch readers. Expected vertices, links and bandwidths are worked out by
// hand from the inputs and NCCL's constants (../shared/reference/nccl_plugins.md §4.5).

#include "braid/importers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "braid/taccl.h"
#include "braid/topology.h"
#include "support/corpus.h"

namespace braid {
namespace {

bool hasNote(const Topology& t, const std::string& needle) {
  for (const std::string& n : t.notes) {
    if (n.find(needle) != std::string::npos) return true;
  }
  return false;
}

std::string allNotes(const Topology& t) {
  std::string s;
  for (const std::string& n : t.notes) s += n + "\n";
  return s;
}

// The single link a -> b (vertex names) of `kind`; fails the test when there is not exactly one.
const Link* linkBetween(const Topology& t, const std::string& a, const std::string& b, LinkKind kind) {
  const int va = t.findVertex(a), vb = t.findVertex(b);
  if (va < 0 || vb < 0) {
    ADD_FAILURE() << "no vertex " << (va < 0 ? a : b);
    return nullptr;
  }
  const Link* found = nullptr;
  int count = 0;
  for (int li : t.linksBetween(va, vb)) {
    if (t.links[li].kind == kind) found = &t.links[li], ++count;
  }
  if (count != 1) {
    ADD_FAILURE() << count << " " << linkKindName(kind) << " links " << a << " -> " << b;
    return nullptr;
  }
  return found;
}

int countKind(const Topology& t, VertexKind kind) {
  int n = 0;
  for (const Vertex& v : t.vertices) n += v.kind == kind ? 1 : 0;
  return n;
}

int countLinks(const Topology& t, LinkKind kind) {
  int n = 0;
  for (const Link& l : t.links) n += l.kind == kind ? 1 : 0;
  return n;
}

std::string neighbourOf(const Topology& t, const std::string& name, LinkKind kind) {
  for (int li : t.outLinks(t.findVertex(name))) {
    if (t.links[li].kind == kind) return t.vertices[t.links[li].dst].name;
  }
  return "";
}

void expectParseError(const Status& s, const std::string& file, int line, const std::string& field) {
  EXPECT_EQ(s.code(), StatusCode::kParseError) << s.toString();
  const std::string where = line > 0 ? file + ":" + std::to_string(line) + ":" : file + ":";
  EXPECT_NE(s.message().find(where), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(field), std::string::npos) << s.message();
}

// ---------------------------------------------------------------------------------------------------------------
// NCCL topology XML

// Two sockets (Intel model 85 = 0x55: Skylake, 10 GB/s SYS). Rank 1 sits behind a Gen4 switch with a 200 Gb/s NIC;
// rank 0 (dev 0!) hangs off cpu 1 at Gen3 x16. Only rank 1 lists the NVLink to rank 0 (count 4, SM80: 80 GB/s).
constexpr char kSmallDump[] = R"(<system version="1">
  <!-- a comment the parser must skip -->
  <cpu numaid="0" affinity="ff" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="85">
    <pci busid="0000:10:00.0" class="0x060400" link_speed="16.0 GT/s PCIe" link_width="16">
      <pci busid="0000:11:00.0" class="0x030200" vendor="0x10de" device="0x20b2" link_speed="16 GT/s" link_width="8">
        <gpu dev="1" sm="80" rank="1" gdr="1">
          <nvlink target="0000:21:00.0" count="4" tclass="0x030200"/>
        </gpu>
      </pci>
      <pci busid="0000:12:00.0" class="0x020000" link_speed="16 GT/s" link_width="16">
        <nic>
          <net name="mlx5_0" dev="0" speed="200000" port="1" latency="0.000000" guid="0x1" maxconn="1" gdr="1" coll="1" keep="1"/>
        </nic>
      </pci>
    </pci>
  </cpu>
  <cpu numaid="1" affinity="ff00" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="85">
    <pci busid="0000:21:00.0" class="0x030200" link_speed="8 GT/s" link_width="16">
      <gpu dev="0" sm="80" rank="0" gdr="1"/>
    </pci>
  </cpu>
</system>
)";

TEST(NcclXmlTest, SmallDumpVerticesLinksAndBandwidths) {
  auto r = importNcclTopoXml(kSmallDump, "small.xml");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const Topology& t = *r;
  EXPECT_TRUE(validateTopology(t).isOk());
  ASSERT_EQ(t.numGpus(), 2);
  // Ranks come from the rank attribute, not from dev or document order.
  EXPECT_EQ(t.vertices[t.gpuVertex(0)].busid, "0000:21:00.0");
  EXPECT_EQ(t.vertices[t.gpuVertex(1)].busid, "0000:11:00.0");
  EXPECT_EQ(t.vertices[t.gpuVertex(1)].model, "A100-SXM4-80GB");
  EXPECT_EQ(t.vertices[t.gpuVertex(1)].numa, 0);
  EXPECT_EQ(t.vertices[t.gpuVertex(0)].numa, 1);
  EXPECT_EQ(countKind(t, VertexKind::kCpu), 2);
  EXPECT_EQ(countKind(t, VertexKind::kPcieSwitch), 1);
  EXPECT_EQ(countKind(t, VertexKind::kNic), 1);
  EXPECT_EQ(countKind(t, VertexKind::kNetSwitch), 1);
  // NVLink 4 lanes × 20 GB/s both ways; the reverse was added and noted.
  const Link* nv = linkBetween(t, "gpu1", "gpu0", LinkKind::kNvlink);
  ASSERT_NE(nv, nullptr);
  EXPECT_EQ(nv->lanes, 4);
  EXPECT_DOUBLE_EQ(nv->bandwidth_gbps, 80.0);
  const Link* back = linkBetween(t, "gpu0", "gpu1", LinkKind::kNvlink);
  ASSERT_NE(back, nullptr);
  EXPECT_DOUBLE_EQ(back->bandwidth_gbps, 80.0);
  EXPECT_TRUE(hasNote(t, "listed by one GPU only")) << allNotes(t);
  // PCIe: Gen4 x16 switch uplink 16*120/80 = 24; Gen4 x8 GPU 12; Gen3 x16 GPU 12; NIC Gen4 x16 24.
  EXPECT_DOUBLE_EQ(linkBetween(t, "pcie_0000:10:00.0", "cpu0", LinkKind::kPcie)->bandwidth_gbps, 24.0);
  EXPECT_DOUBLE_EQ(linkBetween(t, "gpu1", "pcie_0000:10:00.0", LinkKind::kPcie)->bandwidth_gbps, 12.0);
  EXPECT_DOUBLE_EQ(linkBetween(t, "gpu0", "cpu1", LinkKind::kPcie)->bandwidth_gbps, 12.0);
  EXPECT_DOUBLE_EQ(linkBetween(t, "mlx5_0", "pcie_0000:10:00.0", LinkKind::kPcie)->bandwidth_gbps, 24.0);
  // NET 200000 Mb/s / 8000 = 25 GB/s; SYS Skylake 10 GB/s.
  EXPECT_DOUBLE_EQ(linkBetween(t, "mlx5_0", "net", LinkKind::kNet)->bandwidth_gbps, 25.0);
  EXPECT_DOUBLE_EQ(linkBetween(t, "cpu0", "cpu1", LinkKind::kSys)->bandwidth_gbps, 10.0);
  EXPECT_EQ(t.links.size(), 2u /*nvlink*/ + 2 * 4 /*pcie*/ + 2 /*net*/ + 2 /*sys*/);
  // GPU-GPU traffic takes NVLink (80 GB/s beats the PCIe/SYS path).
  auto route = t.route(0, 1);
  ASSERT_TRUE(route.has_value());
  EXPECT_EQ(route->links.size(), 1u);
  EXPECT_DOUBLE_EQ(route->bandwidth_gbps, 80.0);
}

TEST(NcclXmlTest, NvswitchLanesAreSummedAndInvisibleSwitchIsNoted) {
  // SM90: 20.6 GB/s per lane. gpu0 lists two switch targets (9 + 9 = 18 lanes); gpu1 has the VM-style invisible
  // target fffffff:ff:ff.0 with count 18 (BUG-08); gpu2 lists only 8 lanes and is named in a note.
  const std::string xml = R"(<system version="1"><cpu numaid="0" vendor="AuthenticAMD">
    <pci busid="0000:01:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16"><gpu dev="0" sm="90" rank="0">
      <nvlink target="0000:c0:00.0" count="9" tclass="0x068000"/><nvlink target="0000:c1:00.0" count="9" tclass="0x068000"/>
    </gpu></pci>
    <pci busid="0000:02:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16"><gpu dev="1" sm="90" rank="1">
      <nvlink target="fffffff:ff:ff.0" count="18" tclass="0x068000"/>
    </gpu></pci>
    <pci busid="0000:03:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16"><gpu dev="2" sm="90" rank="2">
      <nvlink target="0000:c0:00.0" count="8" tclass="0x068000"/>
    </gpu></pci>
  </cpu></system>)";
  auto r = importNcclTopoXml(xml, "nvs.xml");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const Topology& t = *r;
  EXPECT_EQ(countKind(t, VertexKind::kNvSwitch), 1);
  const Link* l0 = linkBetween(t, "gpu0", "nvswitch", LinkKind::kNvlink);
  const Link* l1 = linkBetween(t, "nvswitch", "gpu1", LinkKind::kNvlink);
  const Link* l2 = linkBetween(t, "gpu2", "nvswitch", LinkKind::kNvlink);
  ASSERT_TRUE(l0 && l1 && l2);
  EXPECT_EQ(l0->lanes, 18);
  EXPECT_NEAR(l0->bandwidth_gbps, 18 * 20.6, 1e-9);
  EXPECT_EQ(l1->lanes, 18);
  EXPECT_EQ(l2->lanes, 8);
  EXPECT_NEAR(l2->bandwidth_gbps, 8 * 20.6, 1e-9);
  EXPECT_TRUE(hasNote(t, "fffffff:ff:ff.0")) << allNotes(t);
  EXPECT_TRUE(hasNote(t, "gpu2 = 0000:03:00.0 has 8")) << allNotes(t);
  // Gen5 x16 = 16*240/80 = 48 GB/s, AMD CPU.
  EXPECT_DOUBLE_EQ(linkBetween(t, "gpu0", "cpu0", LinkKind::kPcie)->bandwidth_gbps, 48.0);
  auto route = t.route(0, 2);
  ASSERT_TRUE(route.has_value());
  EXPECT_EQ(route->links.size(), 2u);
  EXPECT_NEAR(route->bandwidth_gbps, 8 * 20.6, 1e-9);
}

TEST(NcclXmlTest, SelfLoopNvlinkEmptySpeedAndWidthZero) {
  // RC-04 shape: self-loop NVLink, link_speed="" and link_width="0" ⇒ NCCL's Gen3 fallback x16 = 12 GB/s.
  const std::string xml = R"(<system version="1">
  <cpu numaid="0" vendor="AuthenticAMD">
    <pci busid="0001:00:00.0" class="0x030200" link_speed="" link_width="0">
      <gpu dev="0" sm="80" rank="0" gdr="1"><nvlink target="0001:00:00.0" count="12" tclass="0x030200"/></gpu>
    </pci>
    <pci busid="0002:00:00.0" class="0x030200" link_speed="" link_width="0">
      <gpu dev="1" sm="80" rank="1" gdr="1"><nvlink target="0002:00:00.0" count="12" tclass="0x030200"/></gpu>
    </pci>
  </cpu>
</system>)";
  auto r = importNcclTopoXml(xml, "selfloop.xml");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const Topology& t = *r;
  EXPECT_EQ(countLinks(t, LinkKind::kNvlink), 0);
  EXPECT_EQ(countKind(t, VertexKind::kNvSwitch), 0);
  EXPECT_TRUE(hasNote(t, "self-loops")) << allNotes(t);
  EXPECT_TRUE(hasNote(t, "link_speed missing or empty")) << allNotes(t);
  EXPECT_TRUE(hasNote(t, "link_width 0 read as x16")) << allNotes(t);
  EXPECT_DOUBLE_EQ(linkBetween(t, "gpu0", "cpu0", LinkKind::kPcie)->bandwidth_gbps, 12.0);
  auto route = t.route(0, 1);
  ASSERT_TRUE(route.has_value());
  EXPECT_EQ(route->slowest_kind, LinkKind::kPcie);
  EXPECT_DOUBLE_EQ(route->bandwidth_gbps, 12.0);
}

TEST(NcclXmlTest, MalformedSpeedUnitClasslessChildrenHexAndExtraAttributes) {
  // "32 GT/s PCIe/s" read as 32 GT/s: x16 → 48 GB/s; x4 of 8 GT/s → 4*60/80 = 3 GB/s. A class-less <pci> with
  // <pci> children is a switch; a class-less leaf is ignored. rank="0x1" is hex. Unknown attributes are ignored.
  const std::string xml = R"(<system version="1">
  <cpu numaid="0x0" arch="x86_64" vendor="GenuineIntel" modelid="143" extra="yes">
    <pci busid="0000:45:00.0">
      <pci busid="0000:4f:00.0" class="0x030200" link_speed="32 GT/s PCIe/s" link_width="16">
        <gpu dev="0x0" sm="90" rank="0x1" gdr="1" keep="1"/>
      </pci>
      <pci busid="0000:50:00.0" link_speed="32 GT/s PCIe/s" link_width="16"/>
      <pci busid="0000:51:00.0" class="0x030200" link_speed="8 GT/s" link_width="4">
        <gpu dev="1" sm="90" rank="0"/>
      </pci>
    </pci>
  </cpu>
</system>)";
  auto r = importNcclTopoXml(xml, "lenient.xml");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const Topology& t = *r;
  ASSERT_EQ(t.numGpus(), 2);
  EXPECT_EQ(t.vertices[t.gpuVertex(1)].busid, "0000:4f:00.0");
  EXPECT_EQ(t.vertices[t.gpuVertex(0)].busid, "0000:51:00.0");
  EXPECT_EQ(countKind(t, VertexKind::kPcieSwitch), 1);
  EXPECT_DOUBLE_EQ(linkBetween(t, "gpu1", "pcie_0000:45:00.0", LinkKind::kPcie)->bandwidth_gbps, 48.0);
  EXPECT_DOUBLE_EQ(linkBetween(t, "gpu0", "pcie_0000:45:00.0", LinkKind::kPcie)->bandwidth_gbps, 3.0);
  EXPECT_TRUE(hasNote(t, "malformed unit")) << allNotes(t);
  EXPECT_TRUE(hasNote(t, "without class and without <gpu>/<nic> child")) << allNotes(t);
  EXPECT_TRUE(hasNote(t, "without class but with <pci> children")) << allNotes(t);
  // The class-less switch carries no speed: Gen3 fallback x16 = 12 GB/s to the CPU.
  EXPECT_DOUBLE_EQ(linkBetween(t, "pcie_0000:45:00.0", "cpu0", LinkKind::kPcie)->bandwidth_gbps, 12.0);
}

TEST(NcclXmlTest, HintFileFakeBusIdsZeroVendorAndNvlinkUnknownNote) {
  // RC-02/RC-03 shape: hint file, fake ffff:ff bridge, vendor 0x0000, GPUs and NICs by class only.
  const std::string xml = R"(<system version="1">
  <cpu numaid="0" affinity="ff" arch="x86_64" vendor="GenuineIntel" modelid="143">
    <pci busid="ffff:ff:01.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16" vendor="0x0000" device="0x0000">
      <pci busid="0002:00:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16"/>
      <pci busid="0102:00:00.0" class="0x020700" link_speed="32.0 GT/s PCIe" link_width="16"/>
    </pci>
    <pci busid="0001:00:00.0" class="0x030200" link_speed="16 GT/s" link_width="16"/>
  </cpu>
  <cpu numaid="1" vendor="GenuineIntel" modelid="143">
    <pci busid="0003:00:00.0" class="0x030200" link_speed="16 GT/s" link_width="16"/>
  </cpu>
</system>)";
  auto r = importNcclTopoXml(xml, "hint.xml");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const Topology& t = *r;
  ASSERT_EQ(t.numGpus(), 3);
  // PCI bus-id order (document order is 0002, 0001, 0003): 0001, 0002 (under the switch), 0003.
  EXPECT_EQ(t.vertices[t.gpuVertex(0)].busid, "0001:00:00.0");
  EXPECT_EQ(t.vertices[t.gpuVertex(1)].busid, "0002:00:00.0");
  EXPECT_EQ(t.vertices[t.gpuVertex(2)].busid, "0003:00:00.0");
  EXPECT_EQ(neighbourOf(t, "gpu1", LinkKind::kPcie), "pcie_ffff:ff:01.0");
  EXPECT_EQ(neighbourOf(t, "gpu0", LinkKind::kPcie), "cpu0");
  EXPECT_TRUE(hasNote(t, "ranked by PCI bus id")) << allNotes(t);
  EXPECT_TRUE(hasNote(t, "gpu0=0001:00:00.0, gpu1=0002:00:00.0, gpu2=0003:00:00.0")) << allNotes(t);
  // No PCI device id in the file: no specific built-in model.
  EXPECT_TRUE(hasNote(t, "no specific model is suggested")) << allNotes(t);
  EXPECT_FALSE(hasNote(t, "topologies/")) << allNotes(t);
  EXPECT_EQ(countKind(t, VertexKind::kNic), 1);
  EXPECT_EQ(neighbourOf(t, "nic0", LinkKind::kPcie), "pcie_ffff:ff:01.0");
  EXPECT_EQ(countLinks(t, LinkKind::kNvlink), 0);
  EXPECT_EQ(countLinks(t, LinkKind::kNet), 0);
  EXPECT_TRUE(hasNote(t, "no NVLink info in this hint file")) << allNotes(t);
  EXPECT_TRUE(hasNote(t, "PCIe links only")) << allNotes(t);
  EXPECT_TRUE(hasNote(t, "ffff:ff:01.0")) << allNotes(t);
  EXPECT_TRUE(hasNote(t, "vendor id 0x0000")) << allNotes(t);
  // Sapphire Rapids (model 143 = 0x8F): 22 GB/s SYS.
  EXPECT_DOUBLE_EQ(linkBetween(t, "cpu0", "cpu1", LinkKind::kSys)->bandwidth_gbps, 22.0);
  // GPU 0 and 2 are on different sockets: the route crosses the SYS link.
  auto route = t.route(0, 2);
  ASSERT_TRUE(route.has_value());
  bool crosses_sys = false;
  for (int li : route->links) crosses_sys = crosses_sys || t.links[li].kind == LinkKind::kSys;
  EXPECT_TRUE(crosses_sys);
}

TEST(NcclXmlTest, HintFileRanksGpusAndNicsByNumericBusId) {
  // Bus ids in document order: 1b:00.0 (no domain), 0000:1A:00.1 (upper case), 0000:1a:00.0, "gpu-x" (unreadable),
  // 0001:00:00.0, 0000:1a:1f.0. Numerically (domain, bus, device, function): 0:1a:00.0 < 0:1a:00.1 < 0:1a:1f.0 <
  // 0:1b:00.0 < 1:00:00.0, then the unreadable one last. NICs: 0000:30:00.0 (cpu0) before 0000:20:00.0 (cpu1) in
  // the file, so nic0 = 20 (cpu1) and nic1 = 30 (cpu0).
  const std::string xml = R"(<system version="1">
  <cpu numaid="0" vendor="GenuineIntel" modelid="85">
    <pci busid="1b:00.0" class="0x030200"/>
    <pci busid="0000:1A:00.1" class="0x030200"/>
    <pci busid="0000:30:00.0" class="0x020700"/>
    <pci busid="0000:1a:00.0" class="0x030200"/>
  </cpu>
  <cpu numaid="1" vendor="GenuineIntel" modelid="85">
    <pci busid="gpu-x" class="0x030200"/>
    <pci busid="0001:00:00.0" class="0x030200"/>
    <pci busid="0000:20:00.0" class="0x020700"/>
    <pci busid="0000:1a:1f.0" class="0x030200"/>
  </cpu>
</system>)";
  auto r = importNcclTopoXml(xml, "order.xml");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const Topology& t = *r;
  ASSERT_EQ(t.numGpus(), 6);
  const std::vector<std::string> expected = {"0000:1a:00.0", "0000:1A:00.1", "0000:1a:1f.0",
                                             "1b:00.0",      "0001:00:00.0", "gpu-x"};
  for (int rank = 0; rank < 6; ++rank) EXPECT_EQ(t.vertices[t.gpuVertex(rank)].busid, expected[rank]) << rank;
  EXPECT_EQ(t.vertices[t.gpuVertex(2)].numa, 1);  // 0000:1a:1f.0 sits under cpu1
  EXPECT_TRUE(hasNote(t, "GPUs with a missing or unreadable bus id ranked last, in document order (gpu-x)"))
      << allNotes(t);
  ASSERT_EQ(t.nodes[0].nics.size(), 2u);
  EXPECT_EQ(t.vertices[t.nodes[0].nics[0]].name, "nic0");
  EXPECT_EQ(neighbourOf(t, "nic0", LinkKind::kPcie), "cpu1");
  EXPECT_EQ(neighbourOf(t, "nic1", LinkKind::kPcie), "cpu0");
  EXPECT_TRUE(hasNote(t, "hint-file NICs numbered nic0.. by PCI bus id")) << allNotes(t);
}

TEST(NcclXmlTest, FullDumpKeepsRankAttributeOverBusIdOrder) {
  // Rank 0 has the larger bus id: a full dump keeps the rank attribute, no bus-id note.
  const std::string xml = R"(<system version="1">
  <cpu numaid="0" vendor="GenuineIntel" modelid="85">
    <pci busid="0000:02:00.0" class="0x030200"><gpu dev="0" sm="80" rank="0"/></pci>
    <pci busid="0000:01:00.0" class="0x030200"><gpu dev="1" sm="80" rank="1"/></pci>
  </cpu>
</system>)";
  auto r = importNcclTopoXml(xml, "dump.xml");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->vertices[r->gpuVertex(0)].busid, "0000:02:00.0");
  EXPECT_EQ(r->vertices[r->gpuVertex(1)].busid, "0000:01:00.0");
  EXPECT_FALSE(hasNote(*r, "bus id")) << allNotes(*r);
}

TEST(NcclXmlTest, HintFileSuggestsTheNvlinkModelOfItsGpu) {
  auto note = [](const std::string& devices) {
    std::string xml = "<system version=\"1\"><cpu numaid=\"0\">";
    int bus = 1;
    for (size_t i = 0; i < devices.size(); i += 7) {  // "0x20b0 " per GPU; "-" for no device attribute
      const std::string d = devices.substr(i, 6);
      xml += "<pci busid=\"0000:0" + std::to_string(bus++) + ":00.0\" class=\"0x030200\"";
      if (d[0] != '-') xml += " device=\"" + d + "\"";
      xml += "/>";
    }
    xml += "</cpu></system>";
    auto r = importNcclTopoXml(xml, "hint.xml");
    EXPECT_TRUE(r.isOk()) << r.status().toString();
    if (!r.isOk()) return std::string();
    for (const std::string& n : r->notes) {
      if (n.find("no NVLink info in this hint file") != std::string::npos) return n;
    }
    ADD_FAILURE() << "no NVLink note:\n" << allNotes(*r);
    return std::string();
  };
  const std::string prefix = "no NVLink info in this hint file; NVLink comes from detection or a built-in model ";
  const std::string suffix = "; this topology has PCIe links only";
  // A100-SXM4 (p4d: 0x20b0) and A100-SXM4-80GB: DGX A100, not the V100 NDv2 model.
  EXPECT_EQ(note("0x20b0 0x20b0 "),
            prefix + "matching the GPU: A100-SXM4-40GB (PCI device 0x20b0), so topologies/dgx-a100-x1.yaml" + suffix);
  EXPECT_EQ(note("0x20b2 "),
            prefix + "matching the GPU: A100-SXM4-80GB (PCI device 0x20b2), so topologies/dgx-a100-x1.yaml" + suffix);
  EXPECT_EQ(note("0x2330 "),
            prefix + "matching the GPU: H100-SXM5-80GB (PCI device 0x2330), so topologies/dgx-h100-x1.yaml" + suffix);
  EXPECT_EQ(note("0x1db5 "),
            prefix +
                "matching the GPU: V100-SXM2-32GB (PCI device 0x1db5), so topologies/dgx1-v100.yaml or "
                "topologies/ndv2-x1.yaml" +
                suffix);
  EXPECT_EQ(note("0x1db8 "),
            prefix + "matching the GPU: V100-SXM3-32GB (PCI device 0x1db8), so topologies/dgx2-x1.yaml" + suffix);
  // H800 (8 NVLinks) and a PCIe A100: no shipped model fits; an unknown id is named.
  EXPECT_EQ(note("0x2324 "), prefix + "matching the GPU; none is built in for H800 (PCI device 0x2324)" + suffix);
  EXPECT_EQ(note("0x20b5 "),
            prefix + "matching the GPU; none is built in for A100-PCIE-80GB (PCI device 0x20b5)" + suffix);
  EXPECT_EQ(note("0x1234 "), prefix + "matching the GPU; none is built in for PCI device 0x1234" + suffix);
  // No device id (Azure hint files) or mixed ids: no specific file.
  EXPECT_EQ(note("------ "),
            prefix + "matching the GPU (the file gives no PCI device id, so no specific model is suggested)" + suffix);
  EXPECT_EQ(note("0x20b0 0x2330 "),
            prefix + "matching the GPUs (they have different PCI device ids, so no single model fits)" + suffix);
}

TEST(NcclXmlTest, FullDumpOfNvlinkGenerationGpusWithoutNvlinkSaysSo) {
  // Two GPUs on one PCIe switch; `gpu` holds each <gpu> element's attributes and children, `device` the <pci device>.
  auto notesOf = [](const std::string& gpu0, const std::string& gpu1, const std::string& device = "") {
    const std::string dev = device.empty() ? "" : " device=\"" + device + "\"";
    const std::string xml =
        "<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:10:00.0\" class=\"0x060400\">"
        "<pci busid=\"0000:11:00.0\" class=\"0x030200\"" +
        dev + ">" + gpu0 + "</pci><pci busid=\"0000:12:00.0\" class=\"0x030200\"" + dev + ">" + gpu1 +
        "</pci></pci></cpu></system>";
    auto r = importNcclTopoXml(xml, "dump.xml");
    EXPECT_TRUE(r.isOk()) << r.status().toString();
    return r.isOk() ? *r : Topology();
  };
  const std::string head =
      "no <nvlink> element in this full dump although its GPUs are sm90 (a generation whose SXM boards have NVLink): "
      "NVLink is probably present but not in the dump (NCCL writes <nvlink> only for the links NVML shows it; a "
      "container or VM without them, or a static file for NCCL_TOPO_FILE, which NCCL completes from detection at "
      "run time, has none); assumed: no NVLink, this topology has PCIe links only. To fix: dump the topology again "
      "with NCCL_TOPO_DUMP_FILE=<file> from a run where NVLink is visible (`nvidia-smi nvlink --status` lists the "
      "links)";
  const std::string tail = "; PCIe cards without NVLink need no fix";
  const Topology h100 = notesOf("<gpu dev=\"0\" sm=\"90\" rank=\"0\"/>", "<gpu dev=\"1\" sm=\"90\" rank=\"1\"/>");
  EXPECT_TRUE(hasNote(h100, head +
                                ", or use the built-in model topologies/dgx-h100-x1.yaml (H100/H200 SXM: 18 NVLinks to "
                                "NVSwitch; an H800 has 8)" +
                                tail))
      << allNotes(h100);
  ASSERT_TRUE(h100.route(0, 1).has_value());
  EXPECT_EQ(h100.route(0, 1)->slowest_kind, LinkKind::kPcie);  // what the note says was assumed
  // A PCI device id names the product and its model.
  const Topology sxm =
      notesOf("<gpu dev=\"0\" sm=\"90\" rank=\"0\"/>", "<gpu dev=\"1\" sm=\"90\" rank=\"1\"/>", "0x2330");
  EXPECT_TRUE(hasNote(sxm, head + ", or use the built-in model topologies/dgx-h100-x1.yaml (H100-SXM5-80GB)" + tail))
      << allNotes(sxm);
  // sm80 without a device id: the DGX A100 model; sm100: no built-in model, the rest of the note as it is.
  const Topology a100 = notesOf("<gpu sm=\"80\" rank=\"0\"/>", "<gpu sm=\"80\" rank=\"1\"/>");
  EXPECT_TRUE(hasNote(a100, "its GPUs are sm80 (a generation"));
  EXPECT_TRUE(
      hasNote(a100, "or use the built-in model topologies/dgx-a100-x1.yaml (A100 SXM4: 12 NVLinks to NVSwitch)"))
      << allNotes(a100);
  const Topology b200 = notesOf("<gpu sm=\"100\" rank=\"0\"/>", "<gpu sm=\"100\" rank=\"1\"/>");
  EXPECT_TRUE(hasNote(b200, "its GPUs are sm100 (a generation"));
  EXPECT_TRUE(hasNote(b200, "nvlink --status` lists the links); PCIe cards without NVLink need no fix"))
      << allNotes(b200);
  EXPECT_FALSE(hasNote(b200, "built-in model"));
  const Topology mixed = notesOf("<gpu sm=\"80\" rank=\"0\"/>", "<gpu sm=\"90\" rank=\"1\"/>");
  EXPECT_TRUE(hasNote(mixed, "its GPUs are sm80/sm90 (a generation")) << allNotes(mixed);
  EXPECT_FALSE(hasNote(mixed, "built-in model"));
  // No note: an <nvlink> element on one GPU (even a self-loop, RC-04), a PCIe generation (sm86, sm89), a PCIe card's
  // device id (H100-PCIE, A100-PCIE), an unknown sm, a single GPU.
  const std::string none = "no <nvlink> element in this full dump";
  for (const Topology& t : {notesOf("<gpu sm=\"90\" rank=\"0\"><nvlink target=\"0000:11:00.0\" count=\"12\"/></gpu>",
                                    "<gpu sm=\"90\" rank=\"1\"/>"),
                            notesOf("<gpu sm=\"86\" rank=\"0\"/>", "<gpu sm=\"86\" rank=\"1\"/>"),
                            notesOf("<gpu sm=\"89\" rank=\"0\"/>", "<gpu sm=\"89\" rank=\"1\"/>"),
                            notesOf("<gpu sm=\"90\" rank=\"0\"/>", "<gpu sm=\"90\" rank=\"1\"/>", "0x2331"),
                            notesOf("<gpu sm=\"80\" rank=\"0\"/>", "<gpu sm=\"80\" rank=\"1\"/>", "0x20b5"),
                            notesOf("<gpu rank=\"0\"/>", "<gpu sm=\"90\" rank=\"1\"/>")}) {
    EXPECT_FALSE(hasNote(t, none)) << allNotes(t);
  }
  auto single = importNcclTopoXml(
      "<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:11:00.0\" class=\"0x030200\">"
      "<gpu sm=\"90\" rank=\"0\"/></pci></cpu></system>",
      "one.xml");
  ASSERT_TRUE(single.isOk()) << single.status().toString();
  EXPECT_FALSE(hasNote(*single, none)) << allNotes(*single);
}

TEST(NcclXmlTest, DuplicateAttributesAreRejected) {
  struct Case {
    std::string xml;
    int line;
    std::string attr, element, values;
  };
  const std::vector<Case> cases = {
      // On <gpu>: first value would have been taken silently.
      {"<system version=\"1\">\n<cpu numaid=\"0\">\n"
       "<pci busid=\"0000:01:00.0\" class=\"0x030200\"><gpu dev=\"0\" sm=\"80\" rank=\"0\" rank=\"1\"/></pci>\n"
       "</cpu>\n</system>\n",
       3, "rank", "<gpu>", "(\"0\" and \"1\")"},
      // Start tag over several lines; a value that contains "rank=" does not count. The line is the second's.
      {"<system version=\"1\">\n<cpu numaid=\"0\">\n"
       "<pci busid=\"0000:01:00.0\" class=\"0x030200\"><gpu dev=\"0\" note='rank=\"5\"' rank=\"0\"\n"
       "   sm=\"80\"\n   rank=\"2\"/></pci>\n</cpu>\n</system>\n",
       5, "rank", "<gpu>", "(\"0\" and \"2\")"},
      // The root, a hint <pci>, a <cpu> and an element the importer ignores (<pcilink>).
      {"<system version=\"1\" version=\"1\">\n<cpu/>\n</system>\n", 1, "version", "<system>", ""},
      {"<system version=\"1\">\n<cpu numaid=\"0\">\n<pci busid=\"0001:00:00.0\" class=\"0x030200\" "
       "busid=\"0002:00:00.0\"/>\n</cpu>\n</system>\n",
       3, "busid", "<pci>", "(\"0001:00:00.0\" and \"0002:00:00.0\")"},
      {"<system version=\"1\">\n<cpu numaid=\"0\" numaid=\"1\">\n</cpu>\n</system>\n", 2, "numaid", "<cpu>", ""},
      {"<system version=\"1\">\n<cpu numaid=\"0\">\n<pci busid=\"0000:01:00.0\" class=\"0x060400\">\n"
       "<pcilink target=\"a\" target=\"b\"/>\n</pci>\n</cpu>\n</system>\n",
       4, "target", "<pcilink>", ""},
      // <net> of a NIC.
      {"<system version=\"1\">\n<cpu numaid=\"0\">\n<nic>\n<net name=\"eth0\" dev=\"0\" speed=\"100\"\n"
       "speed=\"200\"/>\n</nic>\n</cpu>\n</system>\n",
       5, "speed", "<net>", "(\"100\" and \"200\")"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.xml);
    auto r = importNcclTopoXml(c.xml, "dupattr.xml");
    ASSERT_FALSE(r.isOk());
    EXPECT_EQ(r.status().code(), StatusCode::kParseError);
    EXPECT_NE(r.status().message().find("dupattr.xml:" + std::to_string(c.line) + ": " + c.attr), std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find(c.element + " has attribute '" + c.attr + "' twice"), std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find(c.values), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("not well-formed"), std::string::npos) << r.status().message();
  }
  // The same name on two different elements is fine.
  auto ok = importNcclTopoXml(
      "<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\" class=\"0x030200\"/>"
      "<pci busid=\"0000:02:00.0\" class=\"0x030200\"/></cpu></system>",
      "ok.xml");
  EXPECT_TRUE(ok.isOk()) << ok.status().toString();
}

TEST(NcclXmlTest, NicsWithoutPciParentAndDualPortNic) {
  // RC-14/RC-13 shape: veth/bridge NICs dropped, eth0 kept at its speed; a dual-port NIC gives two NICs.
  const std::string xml = R"(<system version="1">
  <cpu numaid="3" vendor="AuthenticAMD">
    <pci busid="0000:01:00.0" class="0x030000" link_speed="16.0 GT/s PCIe" link_width="16"><gpu dev="0" sm="89" rank="0" gdr="0"/></pci>
    <pci busid="0000:02:00.0" class="0x020700" link_speed="8.0 GT/s PCIe" link_width="16">
      <nic>
        <net name="mlx5_0" dev="0" speed="100000" port="1"/>
        <net name="mlx5_1" dev="1" speed="100000" port="2"/>
      </nic>
    </pci>
    <nic>
      <net name="eth0" dev="2" speed="50000"/>
      <net name="veth1234" dev="3" speed="10000"/>
      <net name="br-abcdef" dev="4" speed="10000"/>
    </nic>
  </cpu>
</system>)";
  auto r = importNcclTopoXml(xml, "nics.xml");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const Topology& t = *r;
  EXPECT_EQ(countKind(t, VertexKind::kNic), 3);
  EXPECT_GE(t.findVertex("mlx5_0"), 0);
  EXPECT_GE(t.findVertex("mlx5_1"), 0);
  EXPECT_GE(t.findVertex("eth0"), 0);
  EXPECT_LT(t.findVertex("veth1234"), 0);
  EXPECT_TRUE(hasNote(t, "veth1234")) << allNotes(t);
  EXPECT_TRUE(hasNote(t, "br-abcdef")) << allNotes(t);
  EXPECT_TRUE(hasNote(t, "2 ports")) << allNotes(t);
  EXPECT_TRUE(hasNote(t, "gdr=0")) << allNotes(t);
  // Each port: Gen3 x16 = 12 GB/s PCIe to the CPU, 100000/8000 = 12.5 GB/s to the network.
  EXPECT_DOUBLE_EQ(linkBetween(t, "mlx5_1", "cpu3", LinkKind::kPcie)->bandwidth_gbps, 12.0);
  EXPECT_DOUBLE_EQ(linkBetween(t, "mlx5_1", "net", LinkKind::kNet)->bandwidth_gbps, 12.5);
  // eth0 has no PCI parent: attached to its CPU at 50000/8000 = 6.25 GB/s.
  EXPECT_DOUBLE_EQ(linkBetween(t, "eth0", "cpu3", LinkKind::kPcie)->bandwidth_gbps, 6.25);
  EXPECT_EQ(t.vertices[t.findVertex("cpu3")].numa, 3);
}

TEST(NcclXmlTest, NvlinkTargetMatchingNothingIsNoted) {
  const std::string xml = R"(<system version="1"><cpu numaid="0">
    <pci busid="0000:01:00.0" class="0x030200" link_speed="16 GT/s" link_width="16"><gpu dev="0" sm="70" rank="0">
      <nvlink target="0000:99:00.0" count="2" tclass="0x030200"/>
      <nvlink target="0000:02:00.0" count="1" tclass="0x030200"/>
    </gpu></pci>
    <pci busid="0000:02:00.0" class="0x030200" link_speed="16 GT/s" link_width="16"><gpu dev="1" sm="70" rank="1">
      <nvlink target="0000:01:00.0" count="1" tclass="0x030200"/>
    </gpu></pci>
  </cpu></system>)";
  auto r = importNcclTopoXml(xml, "dangling.xml");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const Topology& t = *r;
  EXPECT_EQ(countLinks(t, LinkKind::kNvlink), 2);
  EXPECT_DOUBLE_EQ(linkBetween(t, "gpu0", "gpu1", LinkKind::kNvlink)->bandwidth_gbps, 20.0);  // SM70
  EXPECT_TRUE(hasNote(t, "0000:99:00.0")) << allNotes(t);
  EXPECT_TRUE(hasNote(t, "vendor/arch unknown")) << allNotes(t);
}

TEST(NcclXmlTest, DenseRanksAndManyNodesWithoutCap) {
  // BUG-07: no fixed node cap. 1 GPU (rank 8: renumbered 0) + 300 NICs.
  std::string xml = "<system version=\"1\"><cpu numaid=\"0\" vendor=\"AuthenticAMD\">\n";
  xml +=
      "<pci busid=\"0000:01:00.0\" class=\"0x030200\" link_speed=\"16 GT/s\" link_width=\"16\"><gpu dev=\"0\" "
      "sm=\"80\" rank=\"8\"/></pci>\n";
  for (int i = 0; i < 300; ++i) {
    xml += "<pci busid=\"0001:" + std::to_string(i) +
           ":00.0\" class=\"0x020000\" link_speed=\"16 GT/s\" link_width=\"8\"><nic><net name=\"n" + std::to_string(i) +
           "\" dev=\"" + std::to_string(i) + "\" speed=\"100000\"/></nic></pci>\n";
  }
  xml += "</cpu></system>\n";
  auto r = importNcclTopoXml(xml, "big.xml");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->numGpus(), 1);
  EXPECT_EQ(countKind(*r, VertexKind::kNic), 300);
  EXPECT_TRUE(hasNote(*r, "renumbered")) << allNotes(*r);
}

TEST(NcclXmlTest, GraphFileIsRefusedClearly) {
  const std::string xml =
      "<!-- c -->\n<graphs version=\"1\">\n  <graph id=\"0\"><channel><gpu "
      "dev=\"0x1\"/></channel></graph>\n</graphs>\n";
  auto r = importNcclTopoXml(xml, "g.xml");
  ASSERT_FALSE(r.isOk());
  expectParseError(r.status(), "g.xml", 2, "graphs");
  EXPECT_NE(r.status().message().find("NCCL graph file (NCCL_GRAPH_FILE), not a topology"), std::string::npos);
}

TEST(NcclXmlTest, Errors) {
  {
    auto r = importNcclTopoXml("<topology>\n</topology>\n", "root.xml");
    ASSERT_FALSE(r.isOk());
    expectParseError(r.status(), "root.xml", 1, "topology");
  }
  {
    auto r = importNcclTopoXml("<system version=\"1\">\n<cpu numaid=\"0\">\n<pci busid=\"1\">\n</cpu>\n</system>\n",
                               "bad.xml");
    ASSERT_FALSE(r.isOk());
    expectParseError(r.status(), "bad.xml", 4, "xml");
  }
  {
    auto r = importNcclTopoXml("<system version=\"2\"><cpu/></system>", "v.xml");
    ASSERT_FALSE(r.isOk());
    expectParseError(r.status(), "v.xml", 1, "version");
  }
  {
    const std::string xml =
        "<system version=\"1\">\n<cpu numaid=\"0\">\n"
        "<pci busid=\"0000:01:00.0\" class=\"0x030200\"><gpu dev=\"0\" sm=\"80\" rank=\"0\"/></pci>\n"
        "<pci busid=\"0000:02:00.0\" class=\"0x030200\"><gpu dev=\"1\" sm=\"80\" rank=\"0\"/></pci>\n"
        "</cpu>\n</system>\n";
    auto r = importNcclTopoXml(xml, "dup.xml");
    ASSERT_FALSE(r.isOk());
    expectParseError(r.status(), "dup.xml", 4, "rank");
  }
  {
    const std::string xml =
        "<system version=\"1\">\n<cpu numaid=\"0\">\n"
        "<pci busid=\"0000:01:00.0\" class=\"0x030200\"><gpu dev=\"0\" sm=\"80\" rank=\"two\"/></pci>\n"
        "</cpu>\n</system>\n";
    auto r = importNcclTopoXml(xml, "rank.xml");
    ASSERT_FALSE(r.isOk());
    expectParseError(r.status(), "rank.xml", 3, "rank");
  }
  {
    const std::string xml = "<system version=\"1\">\n<cpu numaid=\"zero\">\n</cpu>\n</system>\n";
    auto r = importNcclTopoXml(xml, "numa.xml");
    ASSERT_FALSE(r.isOk());
    expectParseError(r.status(), "numa.xml", 2, "numaid");
  }
  {
    // g5-style minimal hint: no class, no GPU.
    const std::string xml =
        "<system version=\"1\">\n  <cpu numaid=\"0\">\n    <pci busid=\"0000:00:16.0\"/>\n  </cpu>\n</system>\n";
    auto r = importNcclTopoXml(xml, "min.xml");
    ASSERT_FALSE(r.isOk());
    expectParseError(r.status(), "min.xml", 3, "class");
  }
  {
    auto r = importNcclTopoXml("", "empty.xml");
    ASSERT_FALSE(r.isOk());
    EXPECT_EQ(r.status().code(), StatusCode::kParseError);
    EXPECT_NE(r.status().message().find("empty.xml"), std::string::npos);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// nvidia-smi topo -m

constexpr char kSmallSmi[] =
    "\x1b[4m\tGPU0\tGPU1\tGPU2\tNIC0\tCPU Affinity\tNUMA Affinity\x1b[0m\n"
    "GPU0\t X \tNV2\tSYS\tPIX\t0-7\t0\n"
    "GPU1\tNV2\t X \tSYS\tPIX\t0-7\t0\n"
    "GPU2\tSYS\tSYS\t X \tSYS\t8-15\t1\n"
    "NIC0\tPIX\tPIX\tSYS\t X \n"
    "\n"
    "Legend:\n"
    "  X    = Self\n"
    "\n"
    "NIC Legend:\n"
    "\n"
    "  NIC0: mlx5_3\n";

// The class nvidia-smi prints for a pair, as the PCIe path type of a route: PIX, PXB, PHB (NODE too: through the
// CPU) and SYS; "" for NV# and anything else.
std::string smiClassAsPathType(const std::string& cell) {
  if (cell == "PIX" || cell == "PXB" || cell == "PHB" || cell == "SYS") return cell;
  if (cell == "NODE") return "PHB";
  if (cell == "SOC") return "SYS";
  return "";
}

// Imports an `nvidia-smi topo -m` matrix and checks, cell by cell, that the built topology gives every GPU-GPU pair
// that is not NV# (Topology::route) and every GPU-NIC pair (gpuNicRoute) the matrix's class (gpuNicPathClass:
// PCIe switch vertices crossed, host bridges, CPUs, SYS links). The matrix is read here independently of the
// importer: the header's device columns, one row per device, "NICk: name" legend lines. Returns the cells checked.
int expectRoutesMatchMatrix(const std::string& text, const std::string& filename) {
  SCOPED_TRACE(filename);
  auto imported = importNvidiaSmiTopo(text, filename);
  if (!imported.isOk()) {
    ADD_FAILURE() << imported.status().toString();
    return 0;
  }
  const Topology& t = *imported;
  std::vector<std::string> columns;
  std::map<std::string, std::vector<std::string>> rows;
  std::map<std::string, std::string> legend;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::vector<std::string> tok;
    for (std::string w; words >> w;) tok.push_back(w);
    if (tok.empty()) continue;
    if (columns.empty()) {
      if (tok[0] != "GPU0" || (tok.size() > 1 && tok[1] == "X")) continue;
      for (const std::string& w : tok) {
        if (w == "CPU" || w == "NUMA" || w == "GPU" || w == "Affinity") break;
        columns.push_back(w);
      }
      continue;
    }
    if (tok.size() >= 2 && tok[0].size() > 1 && tok[0].back() == ':') {
      legend[tok[0].substr(0, tok[0].size() - 1)] = tok[1];
      continue;
    }
    if (tok.size() > columns.size() && std::find(columns.begin(), columns.end(), tok[0]) != columns.end()) {
      rows[tok[0]] = std::vector<std::string>(tok.begin() + 1, tok.begin() + 1 + columns.size());
    }
  }
  if (columns.empty()) {
    ADD_FAILURE() << "no header";
    return 0;
  }
  // GPUs are ranked in column order; NICs are named from the legend.
  std::map<std::string, int> rank, nic;
  for (const std::string& c : columns) {
    if (c.rfind("GPU", 0) == 0) {
      const int r = static_cast<int>(rank.size());
      rank[c] = r;
    } else {
      const int v = t.findVertex(legend.count(c) ? legend[c] : c);
      EXPECT_GE(v, 0) << "no vertex for " << c;
      if (v >= 0) nic[c] = v;
    }
  }
  int checked = 0;
  for (size_t a = 0; a < columns.size(); ++a) {
    if (!rank.count(columns[a]) || !rows.count(columns[a])) continue;
    for (size_t b = 0; b < columns.size(); ++b) {
      if (a == b) continue;
      const std::string want = smiClassAsPathType(rows[columns[a]][b]);
      if (want.empty()) continue;
      SCOPED_TRACE(columns[a] + " -> " + columns[b] + " (" + rows[columns[a]][b] + ")");
      std::optional<Route> r;
      if (rank.count(columns[b])) {
        r = t.route(rank[columns[a]], rank[columns[b]]);
      } else if (nic.count(columns[b])) {
        r = gpuNicRoute(t, rank[columns[a]], nic[columns[b]]);
      } else {
        continue;
      }
      if (!r) {
        ADD_FAILURE() << "no route";
        continue;
      }
      EXPECT_EQ(gpuNicPathClass(t, *r), want);
      ++checked;
    }
  }
  return checked;
}

TEST(NvidiaSmiTest, SmallMatrixStructureAndRoutes) {
  auto r = importNvidiaSmiTopo(kSmallSmi, "small.txt");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const Topology& t = *r;
  EXPECT_TRUE(validateTopology(t).isOk());
  ASSERT_EQ(t.numGpus(), 3);
  EXPECT_EQ(countKind(t, VertexKind::kNic), 1);
  ASSERT_GE(t.findVertex("mlx5_3"), 0);  // name from the NIC legend
  EXPECT_EQ(countKind(t, VertexKind::kCpu), 2);
  EXPECT_EQ(countKind(t, VertexKind::kPcieSwitch), 1);  // GPU0, GPU1, NIC0 behind one PIX switch
  const std::string sw = neighbourOf(t, "gpu0", LinkKind::kPcie);
  EXPECT_EQ(neighbourOf(t, "gpu1", LinkKind::kPcie), sw);
  EXPECT_EQ(neighbourOf(t, "mlx5_3", LinkKind::kPcie), sw);
  EXPECT_EQ(neighbourOf(t, "gpu2", LinkKind::kPcie), "cpu1");
  EXPECT_EQ(t.vertices[t.gpuVertex(2)].numa, 1);
  // NV2: 2 lanes; 2 lanes per GPU is no known generation ⇒ 20 GB/s per lane (noted).
  const Link* nv = linkBetween(t, "gpu0", "gpu1", LinkKind::kNvlink);
  ASSERT_NE(nv, nullptr);
  EXPECT_EQ(nv->lanes, 2);
  EXPECT_DOUBLE_EQ(nv->bandwidth_gbps, 40.0);
  EXPECT_TRUE(hasNote(t, "not recognised")) << allNotes(t);
  auto r01 = t.route(0, 1);
  ASSERT_TRUE(r01.has_value());
  EXPECT_EQ(r01->slowest_kind, LinkKind::kNvlink);
  auto r02 = t.route(0, 2);
  ASSERT_TRUE(r02.has_value());
  // gpu0 -> switch -> cpu0 -> cpu1 -> gpu2, crossing the SYS link (10 GB/s, the bottleneck): 2 lanes per GPU is no
  // known generation, so no reference machine and NCCL's Skylake class.
  EXPECT_EQ(r02->links.size(), 4u);
  EXPECT_EQ(r02->slowest_kind, LinkKind::kSys);
  EXPECT_DOUBLE_EQ(r02->bandwidth_gbps, 10.0);
  EXPECT_TRUE(hasNote(t, "no reference machine for this GPU generation: 10 GB/s (NCCL's Skylake class")) << allNotes(t);
}

// Inter-socket bandwidth follows the CPU of the reference machine of the inferred GPU generation (NCCL §4.5:
// BDW 6, SKL 10, AMD 16, SRP 22).
TEST(NvidiaSmiTest, SysBandwidthFollowsTheCpuOfTheGpuGeneration) {
  // V100 with direct NVLinks (GPU0: NV2 x 3 = 6 lanes, the most of any GPU): DGX-1, Xeon E5-2698 v4 Broadwell, 6.
  const std::string v100 =
      "        GPU0    GPU1    GPU2    GPU3    CPU Affinity\n"
      "GPU0     X      NV2     NV2     NV2     0-9\n"
      "GPU1    NV2      X      SYS     SYS     0-9\n"
      "GPU2    NV2     SYS      X      NODE    10-19\n"
      "GPU3    NV2     SYS     NODE     X      10-19\n";
  auto a = importNvidiaSmiTopo(v100, "v100.txt");
  ASSERT_TRUE(a.isOk()) << a.status().toString();
  EXPECT_TRUE(hasNote(*a, "looks like V100 (SM70)")) << allNotes(*a);
  EXPECT_DOUBLE_EQ(linkBetween(*a, "cpu0", "cpu1", LinkKind::kSys)->bandwidth_gbps, 6.0);
  EXPECT_TRUE(hasNote(*a, "Intel Xeon E5-2698 v4 (Broadwell) of the DGX-1: 6 GB/s (NCCL BDW)")) << allNotes(*a);

  // 16 GPUs, NV6 between every pair: 15 x 6 = 90 lanes > 18 ports, an NVSwitch: DGX-2, Xeon Platinum 8168, 10.
  std::string dgx2 = " ";
  for (int g = 0; g < 16; ++g) dgx2 += " GPU" + std::to_string(g);
  dgx2 += " CPU Affinity\n";
  for (int g = 0; g < 16; ++g) {
    dgx2 += "GPU" + std::to_string(g);
    for (int h = 0; h < 16; ++h) dgx2 += g == h ? " X" : " NV6";
    dgx2 += g < 8 ? " 0-23\n" : " 24-47\n";
  }
  auto b = importNvidiaSmiTopo(dgx2, "dgx2.txt");
  ASSERT_TRUE(b.isOk()) << b.status().toString();
  EXPECT_EQ(countKind(*b, VertexKind::kNvSwitch), 1);
  EXPECT_EQ(countKind(*b, VertexKind::kCpu), 2);
  EXPECT_DOUBLE_EQ(linkBetween(*b, "cpu0", "cpu1", LinkKind::kSys)->bandwidth_gbps, 10.0);
  EXPECT_TRUE(hasNote(*b, "Intel Xeon Platinum 8168 (Skylake) of the DGX-2: 10 GB/s (NCCL SKL)")) << allNotes(*b);

  // A100 NV12 on 4 GPUs (3 x 12 = 36 > 18: NVSwitch), two sockets: DGX A100, EPYC 7742, 16.
  const std::string a100 =
      "        GPU0    GPU1    GPU2    GPU3    CPU Affinity\n"
      "GPU0     X      NV12    NV12    NV12    0-63\n"
      "GPU1    NV12     X      NV12    NV12    0-63\n"
      "GPU2    NV12    NV12     X      NV12    64-127\n"
      "GPU3    NV12    NV12    NV12     X      64-127\n";
  auto c = importNvidiaSmiTopo(a100, "a100.txt");
  ASSERT_TRUE(c.isOk()) << c.status().toString();
  EXPECT_DOUBLE_EQ(linkBetween(*c, "cpu0", "cpu1", LinkKind::kSys)->bandwidth_gbps, 16.0);
  EXPECT_TRUE(hasNote(*c, "AMD EPYC 7742 of the DGX A100: 16 GB/s (NCCL AMD)")) << allNotes(*c);

  // One socket: no SYS link and no CPU note.
  const std::string one =
      "        GPU0    GPU1    CPU Affinity\n"
      "GPU0     X      NV2     0-9\n"
      "GPU1    NV2      X      0-9\n";
  auto d = importNvidiaSmiTopo(one, "one.txt");
  ASSERT_TRUE(d.isOk()) << d.status().toString();
  EXPECT_EQ(countLinks(*d, LinkKind::kSys), 0);
  EXPECT_FALSE(hasNote(*d, "inter-socket")) << allNotes(*d);
}

TEST(NvidiaSmiTest, PixPxbPhbNodeNesting) {
  // One socket: 0-1 PIX, {0,1}-2 PXB, 3 on another host bridge (NODE). Hop counts follow the classes.
  const std::string smi =
      "        GPU0    GPU1    GPU2    GPU3    CPU Affinity\n"
      "GPU0     X      PIX     PXB     NODE    0-15\n"
      "GPU1    PIX      X      PXB     NODE    0-15\n"
      "GPU2    PXB     PXB      X      NODE    0-15\n"
      "GPU3    NODE    NODE    NODE     X      0-15\n";
  auto r = importNvidiaSmiTopo(smi, "nest.txt");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const Topology& t = *r;
  EXPECT_EQ(countKind(t, VertexKind::kCpu), 1);
  // The PXB cluster {0,1,2}: an upstream switch with a leaf for the PIX group {0,1} and one for GPU2.
  EXPECT_EQ(countKind(t, VertexKind::kPcieSwitch), 3);
  EXPECT_EQ(t.route(0, 1)->links.size(), 2u);  // gpu0 -> PIX switch -> gpu1
  EXPECT_EQ(t.route(0, 2)->links.size(), 4u);  // gpu0 -> PIX leaf -> PXB switch -> leaf -> gpu2
  EXPECT_EQ(t.route(0, 3)->links.size(), 4u);  // gpu0 -> PIX -> PXB -> cpu -> gpu3
  EXPECT_EQ(t.route(2, 3)->links.size(), 4u);  // gpu2 -> leaf -> PXB -> cpu -> gpu3
  EXPECT_EQ(gpuNicPathClass(t, *t.route(0, 1)), "PIX");
  EXPECT_EQ(gpuNicPathClass(t, *t.route(0, 2)), "PXB");
  EXPECT_EQ(gpuNicPathClass(t, *t.route(1, 2)), "PXB");
  EXPECT_EQ(gpuNicPathClass(t, *t.route(0, 3)), "PHB");
  EXPECT_EQ(countLinks(t, LinkKind::kSys), 0);
  EXPECT_EQ(t.route(0, 3)->slowest_kind, LinkKind::kPcie);
  EXPECT_DOUBLE_EQ(t.route(0, 3)->bandwidth_gbps, 24.0);  // no NVLink: Gen4 x16 assumed and noted
  EXPECT_TRUE(hasNote(t, "PCIe assumed Gen4")) << allNotes(t);
}

TEST(NvidiaSmiTest, PxbGroupIsASwitchTreeNotOneSwitch) {
  // GPU0-GPU1 PIX; GPU2, GPU3 and NIC0 each alone, PXB to everything in the group; GPU4 on another host bridge.
  // Two lone devices on one switch would be PIX apart: each gets a leaf under the group's upstream switch.
  const std::string smi =
      "        GPU0    GPU1    GPU2    GPU3    GPU4    NIC0    CPU Affinity    NUMA Affinity\n"
      "GPU0     X      PIX     PXB     PXB     NODE    PXB     0-15    0\n"
      "GPU1    PIX      X      PXB     PXB     NODE    PXB     0-15    0\n"
      "GPU2    PXB     PXB      X      PXB     NODE    PXB     0-15    0\n"
      "GPU3    PXB     PXB     PXB      X      NODE    PXB     0-15    0\n"
      "GPU4    NODE    NODE    NODE    NODE     X      NODE    0-15    0\n"
      "NIC0    PXB     PXB     PXB     PXB     NODE     X\n"
      "\n"
      "NIC Legend:\n"
      "\n"
      "  NIC0: mlx5_0\n";
  EXPECT_EQ(expectRoutesMatchMatrix(smi, "pxb.txt"), 5 * 4 + 5);
  auto r = importNvidiaSmiTopo(smi, "pxb.txt");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const Topology& t = *r;
  // Upstream switch + leaves for {GPU0,GPU1}, GPU2, GPU3, NIC0.
  EXPECT_EQ(countKind(t, VertexKind::kPcieSwitch), 5);
  EXPECT_EQ(neighbourOf(t, "gpu0", LinkKind::kPcie), neighbourOf(t, "gpu1", LinkKind::kPcie));
  EXPECT_NE(neighbourOf(t, "gpu2", LinkKind::kPcie), neighbourOf(t, "gpu3", LinkKind::kPcie));
  EXPECT_NE(neighbourOf(t, "gpu2", LinkKind::kPcie), neighbourOf(t, "mlx5_0", LinkKind::kPcie));
  EXPECT_EQ(neighbourOf(t, "gpu4", LinkKind::kPcie), "cpu0");
  EXPECT_EQ(t.route(2, 3)->links.size(), 4u);  // gpu2 -> leaf -> upstream -> leaf -> gpu3
  for (const NicAffinity& a : nicAffinity(t)) {
    SCOPED_TRACE(a.rank);
    EXPECT_EQ(a.path_class, a.rank < 4 ? "PXB" : "PHB");
  }
}

TEST(NvidiaSmiTest, EverySmiCorpusFileGivesTheMatrixClassForEveryPair) {
  BRAID_SKIP_WITHOUT_REALCASES();
  const std::filesystem::path dir = testing::realcasesDir() / "smi";
  int files = 0, cells = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".txt") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    cells += expectRoutesMatchMatrix(text.str(), entry.path().string());
    ++files;
  }
  EXPECT_GT(files, 0) << "no .txt file in " << dir;
  EXPECT_GT(cells, 0);
}

TEST(NvidiaSmiTest, HashPrefixSocTokenOldNicNameAndNvswitch) {
  // Lines with '#' and without leading spaces, old SOC token, NIC column named mlx5_0, NV18 everywhere ⇒ NVSwitch.
  const std::string smi =
      "# GPU0 GPU1 GPU2 GPU3 mlx5_0 CPU Affinity\n"
      "# GPU0 X NV18 NV18 NV18 PHB 0-9\n"
      "# GPU1 NV18 X NV18 NV18 PHB 0-9\n"
      "# GPU2 NV18 NV18 X NV18 SOC 10-19\n"
      "# GPU3 NV18 NV18 NV18 X SOC 10-19\n"
      "# mlx5_0 PHB PHB SOC SOC X\n";
  auto r = importNvidiaSmiTopo(smi, "nvs.txt");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const Topology& t = *r;
  EXPECT_EQ(countKind(t, VertexKind::kNvSwitch), 1);
  EXPECT_EQ(countKind(t, VertexKind::kCpu), 2);
  const Link* l = linkBetween(t, "gpu3", "nvswitch", LinkKind::kNvlink);
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->lanes, 18);
  EXPECT_NEAR(l->bandwidth_gbps, 18 * 20.6, 1e-9);
  EXPECT_EQ(countLinks(t, LinkKind::kNvlink), 8);
  // H100: DGX H100's Xeon Platinum 8480C (Sapphire Rapids), NCCL SRP 22 GB/s between the sockets.
  EXPECT_DOUBLE_EQ(linkBetween(t, "cpu0", "cpu1", LinkKind::kSys)->bandwidth_gbps, 22.0);
  EXPECT_TRUE(hasNote(t, "Xeon Platinum 8480C (Sapphire Rapids) of the DGX H100: 22 GB/s (NCCL SRP)")) << allNotes(t);
  EXPECT_GE(t.findVertex("mlx5_0"), 0);
  EXPECT_EQ(neighbourOf(t, "mlx5_0", LinkKind::kPcie), neighbourOf(t, "gpu0", LinkKind::kPcie));
  // PCIe Gen5 x16 for an 18-lane (SM90) GPU: 48 GB/s.
  EXPECT_DOUBLE_EQ(linkBetween(t, "mlx5_0", neighbourOf(t, "mlx5_0", LinkKind::kPcie), LinkKind::kPcie)->bandwidth_gbps,
                   48.0);
}

TEST(NvidiaSmiTest, Errors) {
  {
    auto r = importNvidiaSmiTopo("hello\nworld\n", "none.txt");
    ASSERT_FALSE(r.isOk());
    expectParseError(r.status(), "none.txt", 0, "header");
  }
  {
    const std::string smi = "\tGPU0\tGPU1\n GPU0\t X\tQQ\n GPU1\tNV1\t X\n";
    auto r = importNvidiaSmiTopo(smi, "cell.txt");
    ASSERT_FALSE(r.isOk());
    expectParseError(r.status(), "cell.txt", 2, "GPU1");
    EXPECT_NE(r.status().message().find("QQ"), std::string::npos);
  }
  {
    const std::string smi = "\tGPU0\tGPU1\tGPU2\nGPU0\t X\tNV1\nGPU1\tNV1\t X\tSYS\nGPU2\tSYS\tSYS\tX\n";
    auto r = importNvidiaSmiTopo(smi, "short.txt");
    ASSERT_FALSE(r.isOk());
    expectParseError(r.status(), "short.txt", 2, "GPU2");
  }
  {
    const std::string smi = "\tGPU0\tGPU1\nGPU0\t X\tPIX\n";
    auto r = importNvidiaSmiTopo(smi, "rows.txt");
    ASSERT_FALSE(r.isOk());
    expectParseError(r.status(), "rows.txt", 1, "GPU1");
  }
  {
    const std::string smi = "\tGPU0\tGPU1\nGPU0\tPIX\tPIX\nGPU1\tPIX\tX\n";
    auto r = importNvidiaSmiTopo(smi, "diag.txt");
    ASSERT_FALSE(r.isOk());
    expectParseError(r.status(), "diag.txt", 2, "GPU0");
  }
  {
    const std::string smi = "\tGPU0\tGPU0\nGPU0\tX\tPIX\n";
    auto r = importNvidiaSmiTopo(smi, "dupcol.txt");
    ASSERT_FALSE(r.isOk());
    expectParseError(r.status(), "dupcol.txt", 1, "GPU0");
  }
}

// nvidia-smi prints one class per pair in both cells; a pair whose cells differ (here GPU1 -> GPU2 NV1 on line 3,
// GPU2 -> GPU1 SYS on line 4) would otherwise become a one-way NVLink. Refused at the later row, both cells named.
TEST(NvidiaSmiTest, AsymmetricMatrixIsRefusedNamingBothCells) {
  const std::string smi =
      "\tGPU0\tGPU1\tGPU2\tCPU Affinity\n"
      "GPU0\t X\tSYS\tSYS\t0-7\n"
      "GPU1\tSYS\t X\tNV1\t0-7\n"
      "GPU2\tSYS\tSYS\t X\t0-7\n";
  auto r = importNvidiaSmiTopo(smi, "asym.txt");
  ASSERT_FALSE(r.isOk());
  // Reported at the later row (GPU2's, line 4), whose device is the field.
  expectParseError(r.status(), "asym.txt", 4, "GPU2");
  const std::string& m = r.status().message();
  EXPECT_EQ(m.rfind("asym.txt:4: GPU2: the matrix is not symmetric", 0), 0u) << m;
  EXPECT_NE(m.find("not symmetric"), std::string::npos) << m;
  EXPECT_NE(m.find("GPU1 -> GPU2 as NV1"), std::string::npos) << m;
  EXPECT_NE(m.find("GPU2 -> GPU1 as SYS"), std::string::npos) << m;
  EXPECT_NE(m.find("line 3"), std::string::npos) << m;
  // A PCIe class that differs is refused the same way (GPU0 -> GPU1 PIX, GPU1 -> GPU0 NODE).
  const std::string pcie = "\tGPU0\tGPU1\nGPU0\t X\tPIX\nGPU1\tNODE\t X\n";
  auto p = importNvidiaSmiTopo(pcie, "asym_pcie.txt");
  ASSERT_FALSE(p.isOk());
  expectParseError(p.status(), "asym_pcie.txt", 3, "GPU1");
  EXPECT_EQ(p.status().message().rfind("asym_pcie.txt:3: GPU1: the matrix is not symmetric", 0), 0u)
      << p.status().message();
  EXPECT_NE(p.status().message().find("GPU0 -> GPU1 as PIX"), std::string::npos) << p.status().message();
  EXPECT_NE(p.status().message().find("GPU1 -> GPU0 as NODE"), std::string::npos) << p.status().message();
  // The same matrix made symmetric imports, with the NVLink both ways.
  const std::string sym =
      "\tGPU0\tGPU1\tGPU2\tCPU Affinity\n"
      "GPU0\t X\tSYS\tSYS\t0-7\n"
      "GPU1\tSYS\t X\tNV1\t0-7\n"
      "GPU2\tSYS\tNV1\t X\t0-7\n";
  auto ok = importNvidiaSmiTopo(sym, "sym.txt");
  ASSERT_TRUE(ok.isOk()) << ok.status().toString();
  int nvlinks = 0;
  for (const Link& l : ok->links) nvlinks += l.kind == LinkKind::kNvlink;
  EXPECT_EQ(nvlinks, 2);
}

// ---------------------------------------------------------------------------------------------------------------
// TACCL

constexpr char kNdv2Profile[] = R"({
  "name": "NDv2_1MB", "gpus_per_node": 8, "nics_per_node": 1, "alpha": 0.3,
  "node_betas_list": [23, 46], "node_invbws_list": [23, 46],
  "remote_invbw": 107, "remote_alpha": 2.6, "remote_beta": 105
})";

TEST(TacclProfileTest, Ndv2HybridCubeMeshExactly) {
  auto r = importTacclProfile(kNdv2Profile, "ndv2.json", nullptr);
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const Topology& t = *r;
  EXPECT_TRUE(validateTopology(t).isOk());
  ASSERT_EQ(t.numGpus(), 8);
  const std::set<std::pair<int, int>> two = {{0, 1}, {0, 4}, {1, 3}, {2, 3}, {2, 6}, {4, 5}, {5, 7}, {6, 7}};
  const std::set<std::pair<int, int>> one = {{0, 2}, {0, 3}, {1, 2}, {1, 5}, {3, 7}, {4, 6}, {4, 7}, {5, 6}};
  EXPECT_EQ(t.links.size(), 32u);
  for (const Link& l : t.links) {
    const int a = std::min(t.vertices[l.src].rank, t.vertices[l.dst].rank);
    const int b = std::max(t.vertices[l.src].rank, t.vertices[l.dst].rank);
    ASSERT_EQ(l.kind, LinkKind::kNvlink);
    if (two.count({a, b})) {
      EXPECT_EQ(l.lanes, 2);
      EXPECT_NEAR(l.bandwidth_gbps, 1000.0 / 23, 1e-9);  // 43.478 GB/s
    } else {
      EXPECT_TRUE(one.count({a, b})) << a << "-" << b;
      EXPECT_EQ(l.lanes, 1);
      EXPECT_NEAR(l.bandwidth_gbps, 1000.0 / 46, 1e-9);
    }
    EXPECT_DOUBLE_EQ(l.alpha_us, 0.3);
  }
  EXPECT_NEAR(1000.0 / 23, 43.5, 0.05);  // the anchor "β 23 µs/MB ≈ 43.5 GB/s"
  EXPECT_TRUE(hasNote(t, "inter-node links need a sketch")) << allNotes(t);
  EXPECT_TRUE(hasNote(t, "NDv2")) << allNotes(t);
}

TEST(TacclProfileTest, Dgx2AndHubAndSpoke) {
  auto d = importTacclProfile(R"({"name":"DGX2_1MB","gpus_per_node":16,"nics_per_node":8,"alpha":0.3,
    "node_betas_list":[8],"node_invbws_list":[8]})",
                              "dgx2.json", nullptr);
  ASSERT_TRUE(d.isOk()) << d.status().toString();
  EXPECT_EQ(d->numGpus(), 16);
  EXPECT_EQ(countKind(*d, VertexKind::kNvSwitch), 1);
  EXPECT_EQ(d->links.size(), 32u);
  EXPECT_DOUBLE_EQ(d->links[0].bandwidth_gbps, 125.0);  // 1000 / 8
  auto route = d->route(3, 12);
  ASSERT_TRUE(route.has_value());
  EXPECT_DOUBLE_EQ(route->alpha_us, 0.3);  // α/2 per hop
  auto h =
      importTacclProfile(R"({"name":"box","gpus_per_node":3,"alpha":1,"node_betas_list":[50]})", "hub.json", nullptr);
  ASSERT_TRUE(h.isOk()) << h.status().toString();
  EXPECT_EQ(h->links.size(), 6u);
  EXPECT_DOUBLE_EQ(h->links[0].bandwidth_gbps, 20.0);
  EXPECT_TRUE(hasNote(*h, "HubAndSpoke")) << allNotes(*h);
}

TEST(TacclProfileTest, CustomMatrixIsDstSrcAndDiagonalIsNotALink) {
  // links[dst][src]: 0 -> 1 has 2 links of β 50 (2 × 20 = 40 GB/s); 1 -> 0 one link of β 100 (10 GB/s);
  // 2 -> 0 one link β 25 (40 GB/s); 1 -> 2 one link β 20 (50 GB/s); nothing 0 -> 2 or 2 -> 1. The diagonal (5, α)
  // makes no link.
  const std::string json = R"({"name":"custom3","gpus_per_node":3,"nics_per_node":1,"alpha":5,
    "links":[[5,1,1],[2,5,0],[0,1,5]],
    "betas":[[5,100,25],[50,5,0],[0,20,5]],
    "invbws":[[5,105,30],[55,5,0],[0,25,5]]})";
  auto r = importTacclProfile(json, "custom.json", nullptr);
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const Topology& t = *r;
  EXPECT_EQ(t.links.size(), 4u);
  const Link* l01 = linkBetween(t, "gpu0", "gpu1", LinkKind::kPcie);
  const Link* l10 = linkBetween(t, "gpu1", "gpu0", LinkKind::kPcie);
  const Link* l20 = linkBetween(t, "gpu2", "gpu0", LinkKind::kPcie);
  const Link* l12 = linkBetween(t, "gpu1", "gpu2", LinkKind::kPcie);
  ASSERT_TRUE(l01 && l10 && l20 && l12);
  EXPECT_EQ(l01->lanes, 2);
  EXPECT_DOUBLE_EQ(l01->bandwidth_gbps, 40.0);
  EXPECT_DOUBLE_EQ(l10->bandwidth_gbps, 10.0);
  EXPECT_DOUBLE_EQ(l20->bandwidth_gbps, 40.0);
  EXPECT_DOUBLE_EQ(l12->bandwidth_gbps, 50.0);
  EXPECT_TRUE(t.linksBetween(t.gpuVertex(0), t.gpuVertex(2)).empty());
  EXPECT_TRUE(t.linksBetween(t.gpuVertex(2), t.gpuVertex(1)).empty());
  // Without the 1 -> 2 link nothing enters gpu2: no collective can reach it, and the import says so.
  const std::string cut = R"({"name":"custom3","gpus_per_node":3,"nics_per_node":1,"alpha":5,
    "links":[[5,1,1],[2,5,0],[0,0,5]],
    "betas":[[5,100,25],[50,5,0],[0,0,5]],
    "invbws":[[5,105,30],[55,5,0],[0,0,5]]})";
  auto rejected = importTacclProfile(cut, "custom.json", nullptr);
  ASSERT_FALSE(rejected.isOk());
  EXPECT_EQ(rejected.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(rejected.status().message(),
            "custom.json: gpu0 has no path to gpu2 (no chain of links leads from one to the other): a collective over "
            "all GPUs is impossible");
}

TEST(TacclProfileTest, ProfileErrors) {
  {
    auto r = importTacclProfile(
        "{\"name\":\"c\",\"gpus_per_node\":2,\"alpha\":1,\n\"links\":[[0,1],[1,0]],\n\"betas\":[[0,0],[3,0]]}",
        "b0.json", nullptr);
    ASSERT_FALSE(r.isOk());
    expectParseError(r.status(), "b0.json", 3, "betas[0][1]");
  }
  {
    auto r =
        importTacclProfile("{\n\"name\": \"NDv2\",\n\"gpus_per_node\": 8,\n\"alpha\": 1,\n\"node_betas_list\": [23]\n}",
                           "nd.json", nullptr);
    ASSERT_FALSE(r.isOk());
    expectParseError(r.status(), "nd.json", 5, "node_betas_list");
  }
  {
    auto r = importTacclProfile("{\n\"gpus_per_node\": \"8\",\n\"alpha\": 1\n}", "type.json", nullptr);
    ASSERT_FALSE(r.isOk());
    expectParseError(r.status(), "type.json", 2, "gpus_per_node");
  }
  {
    auto r = importTacclProfile("{\n\"gpus_per_node\": 8,\n\"alpha\": 1,\n", "trunc.json", nullptr);
    ASSERT_FALSE(r.isOk());
    expectParseError(r.status(), "trunc.json", 4, "json");
  }
}

constexpr char kSketchMap[] = R"({
  "nnodes": 2,
  "intranode_sketch": {"strategy": "switch", "switches": [[0,1,2,3],[4,5,6,7]], "switch_hyperedge_strategy": ["uc-min","uc-max"]},
  "internode_sketch": {
    "strategy": "relay",
    "internode_conn": {"0": [1], "2": [3]},
    "gpus_to_sender_rev_map": {"0": [0, 1], "2": [2, 3]},
    "enforce_ordering": true
  },
  "symmetry_offsets": [[8, 16]],
  "hyperparameters": {"input_chunkup": 3}
})";

TEST(TacclSketchTest, ReadsEveryKey) {
  auto r = readTacclSketch(kSketchMap, "sk.json");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const TacclSketch& s = *r;
  EXPECT_EQ(s.source, "sk.json");
  EXPECT_EQ(s.nnodes, 2);
  EXPECT_EQ(s.intranode_strategy, "switch");
  ASSERT_EQ(s.switches.size(), 2u);
  EXPECT_EQ(s.switches[1].gpus, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(s.switches[0].strategy, "uc-min");
  EXPECT_EQ(s.switches[1].strategy, "uc-max");
  EXPECT_TRUE(s.has_internode);
  EXPECT_EQ(s.internode_strategy, "relay");
  EXPECT_EQ(s.internode_conn_kind, "map");
  EXPECT_EQ(s.internode_conn.at(0), std::vector<int>{1});
  EXPECT_EQ(s.internode_conn.at(2), std::vector<int>{3});
  EXPECT_EQ(s.gpus_to_sender_rev_map.at(2), (std::vector<int>{2, 3}));
  EXPECT_TRUE(s.enforce_ordering);
  ASSERT_EQ(s.symmetry_offsets.size(), 1u);
  EXPECT_EQ(s.symmetry_offsets[0], std::make_pair(8, 16));
  EXPECT_EQ(s.input_chunkup, 3);

  auto single =
      readTacclSketch(R"({"nnodes":1,"intranode_sketch":{"strategy":"none"},"symmetry_offsets":[]})", "one.json");
  ASSERT_TRUE(single.isOk()) << single.status().toString();
  EXPECT_FALSE(single->has_internode);
  EXPECT_TRUE(single->symmetry_offsets.empty());
  EXPECT_EQ(single->input_chunkup, 1);
  auto full = readTacclSketch(R"({"nnodes":3,"intranode_sketch":{"strategy":"maxmin"},
    "internode_sketch":{"strategy":"relay","internode_conn":"fully-connected"}})",
                              "fc.json");
  ASSERT_TRUE(full.isOk()) << full.status().toString();
  EXPECT_EQ(full->internode_conn_kind, "fully-connected");
  EXPECT_TRUE(full->internode_conn.empty());
}

TEST(TacclSketchTest, Errors) {
  {
    auto r = readTacclSketch("{\n  \"nnodes\": 1,\n  \"intranode_sketch\": {\n    \"strategy\": \"ring\"\n  }\n}",
                             "s1.json");
    ASSERT_FALSE(r.isOk());
    expectParseError(r.status(), "s1.json", 4, "intranode_sketch.strategy");
    EXPECT_NE(r.status().message().find("ring"), std::string::npos);
  }
  {
    auto r = readTacclSketch(
        "{\"nnodes\": 2,\n\"intranode_sketch\": {\"strategy\": \"none\"},\n\"internode_sketch\": "
        "{\"strategy\": \"relay\",\n\"internode_conn\": \"star\"}}",
        "s2.json");
    ASSERT_FALSE(r.isOk());
    expectParseError(r.status(), "s2.json", 4, "internode_sketch.internode_conn");
  }
  {
    auto r = readTacclSketch("{\"nnodes\": 2,\n\"intranode_sketch\": {\"strategy\": \"none\"}}", "s3.json");
    ASSERT_FALSE(r.isOk());
    expectParseError(r.status(), "s3.json", 1, "internode_sketch");
  }
  {
    auto r = readTacclSketch(
        "{\"nnodes\": 2,\"intranode_sketch\": {\"strategy\": \"none\"},\n\"internode_sketch\": "
        "{\"strategy\": \"scatter\", \"internode_conn\": \"direct-map\"}}",
        "s4.json");
    ASSERT_FALSE(r.isOk());
    expectParseError(r.status(), "s4.json", 2, "internode_sketch.strategy");
  }
  {
    auto r = readTacclSketch(
        "{\"nnodes\": 2,\"intranode_sketch\": {\"strategy\": \"none\"},\n\"internode_sketch\": "
        "{\"strategy\": \"relay\", \"internode_conn\": {\"0\": [1], \"1\": [0, 2]}}}",
        "s5.json");
    ASSERT_FALSE(r.isOk());
    EXPECT_NE(r.status().message().find("same number"), std::string::npos) << r.status().message();
  }
  {
    auto r = readTacclSketch(
        "{\"nnodes\": 2,\"intranode_sketch\": {\"strategy\": \"none\"},\n\"internode_sketch\": "
        "{\"strategy\": \"relay\", \"internode_conn\": \"direct-map\", \"enforce_ordering\": true}}",
        "s6.json");
    ASSERT_FALSE(r.isOk());
    expectParseError(r.status(), "s6.json", 2, "enforce_ordering");
  }
  {
    auto r = readTacclSketch(
        "{\"nnodes\": 1,\n\"intranode_sketch\": {\"strategy\": \"switch\", \"switches\": [[0,1],[1,2]],\n"
        "\"switch_hyperedge_strategy\": [\"uc-min\", \"uc-min\"]}}",
        "s7.json");
    ASSERT_FALSE(r.isOk());
    EXPECT_NE(r.status().message().find("identical or disjoint"), std::string::npos) << r.status().message();
  }
  {
    auto r = readTacclSketch(
        "{\"nnodes\": 1,\n\"intranode_sketch\": {\"strategy\": \"switch\", \"switches\": [[0,1]],\n"
        "\"switch_hyperedge_strategy\": [\"uc-mid\"]}}",
        "s8.json");
    ASSERT_FALSE(r.isOk());
    expectParseError(r.status(), "s8.json", 3, "switch_hyperedge_strategy");
  }
  {
    auto r = readTacclSketch("{\"nnodes\": 0, \"intranode_sketch\": {\"strategy\": \"none\"}}", "s9.json");
    ASSERT_FALSE(r.isOk());
    expectParseError(r.status(), "s9.json", 1, "nnodes");
  }
  {
    auto r = readTacclSketch(
        "{\"nnodes\": 1,\n\"intranode_sketch\": {\"strategy\": \"none\"},\n\"symmetry_offsets\": [[8]]}", "s10.json");
    ASSERT_FALSE(r.isOk());
    expectParseError(r.status(), "s10.json", 3, "symmetry_offsets");
  }
  {
    auto r = readTacclSketch("[1, 2]", "s11.json");
    ASSERT_FALSE(r.isOk());
    EXPECT_EQ(r.status().code(), StatusCode::kParseError);
  }
}

TEST(TacclSketchTest, MissingFileIsNotFoundWithPath) {
  const std::string path = std::string(BRAID_BINARY_DIR) + "/no-such-dir/sk3-dgx2-n2.json";
  auto r = loadTacclSketch(path);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find(path), std::string::npos);
}

TEST(TacclProfileTest, TwoNodesThroughNicsAndNetSwitch) {
  auto sk = readTacclSketch(kSketchMap, "sk.json");
  ASSERT_TRUE(sk.isOk());
  auto r = importTacclProfile(kNdv2Profile, "ndv2.json", &*sk);
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const Topology& t = *r;
  EXPECT_TRUE(validateTopology(t).isOk());
  ASSERT_EQ(t.numGpus(), 16);
  ASSERT_EQ(t.numNodes(), 2);
  EXPECT_EQ(t.nodes[1].gpus.size(), 8u);
  EXPECT_EQ(t.vertices[t.gpuVertex(9)].node, 1);  // ranks are node-major
  EXPECT_EQ(countKind(t, VertexKind::kNic), 2);   // NDv2: 1 NIC per node
  EXPECT_EQ(countKind(t, VertexKind::kNetSwitch), 1);
  // Sender 0 of node 0 reaches receiver 1 of node 1 (rank 9): NIC links at 1000/105 GB/s, α 2.6 in total.
  auto r09 = t.route(0, 9);
  ASSERT_TRUE(r09.has_value());
  EXPECT_EQ(r09->links.size(), 4u);
  EXPECT_NEAR(r09->bandwidth_gbps, 1000.0 / 105, 1e-9);
  EXPECT_NEAR(r09->alpha_us, 2.6, 1e-9);
  EXPECT_EQ(t.links[r09->links[1]].kind, LinkKind::kNet);  // gpu -> nic -> net -> nic -> gpu
  EXPECT_EQ(t.links[r09->links[2]].kind, LinkKind::kNet);
  auto r11 = t.route(10, 3);  // sender 2 of node 1 -> receiver 3 of node 0
  EXPECT_TRUE(r11.has_value());
  // Senders and receivers get duplex NIC links (reduce-scatter runs the connections backwards): receiver 1 of
  // node 1 (rank 9) reaches sender 0 of node 0. GPUs the sketch does not name (4..7) have no NIC link at all.
  EXPECT_TRUE(t.route(9, 0).has_value());
  EXPECT_FALSE(t.route(4, 12).has_value());
  EXPECT_FALSE(t.route(5, 9).has_value());
  // Inside a node the NDv2 links are unchanged.
  EXPECT_EQ(t.route(8, 9)->slowest_kind, LinkKind::kNvlink);

  // A sender beyond the profile's GPUs names the sketch file.
  TacclSketch bad = *sk;
  bad.internode_conn[9] = {1};
  auto e = importTacclProfile(kNdv2Profile, "ndv2.json", &bad);
  ASSERT_FALSE(e.isOk());
  EXPECT_NE(e.status().message().find("sk.json"), std::string::npos);
  EXPECT_NE(e.status().message().find("internode_conn"), std::string::npos);
  // A multi-node sketch needs remote α/β in the profile.
  auto no_remote =
      importTacclProfile(R"({"name":"NDv2","gpus_per_node":8,"alpha":1,"node_betas_list":[23,46]})", "nr.json", &*sk);
  ASSERT_FALSE(no_remote.isOk());
  EXPECT_NE(no_remote.status().message().find("remote_alpha"), std::string::npos);
}

TEST(TacclProfileTest, FullyConnectedSketchGivesEveryGpuANicPath) {
  auto sk = readTacclSketch(R"({"nnodes":3,"intranode_sketch":{"strategy":"none"},
    "internode_sketch":{"strategy":"relay","internode_conn":"fully-connected"},"symmetry_offsets":[]})",
                            "fc.json");
  ASSERT_TRUE(sk.isOk());
  auto r = importTacclProfile(R"({"name":"box","gpus_per_node":2,"nics_per_node":2,"alpha":1,"node_betas_list":[10],
    "remote_alpha":4,"remote_beta":50,"remote_invbw":54})",
                              "box.json", &*sk);
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const Topology& t = *r;
  EXPECT_EQ(t.numGpus(), 6);
  EXPECT_EQ(countKind(t, VertexKind::kNic), 6);
  for (int a = 0; a < 6; ++a) {
    for (int b = 0; b < 6; ++b) {
      if (a / 2 == b / 2) continue;
      auto route = t.route(a, b);
      ASSERT_TRUE(route.has_value()) << a << "->" << b;
      EXPECT_DOUBLE_EQ(route->bandwidth_gbps, 20.0);  // 1000 / 50
      EXPECT_DOUBLE_EQ(route->alpha_us, 4.0);
    }
  }
  // GPU 1 uses NIC 1 (g * nics / gpus).
  EXPECT_FALSE(t.linksBetween(t.gpuVertex(1), t.findVertex("node0.nic1")).empty());
}

// ---------------------------------------------------------------------------------------------------------------
// Import accuracy: classes shown as nvidia-smi shows them, odd PCIe links, NUMA ids, NIC legends, rank-less GPUs,
// truncated files.

// The GPU x GPU cells of an `nvidia-smi topo -m` matrix, read here independently of the importer (SOC as SYS).
std::vector<std::vector<std::string>> smiGpuCells(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(text);
  std::string line;
  int gpus = -1;
  while (std::getline(in, line)) {
    for (char& c : line) {
      if (c == '#') c = ' ';
    }
    std::istringstream words(line);
    std::vector<std::string> tok;
    for (std::string w; words >> w;) tok.push_back(w);
    if (tok.empty()) continue;
    if (gpus < 0) {
      if (tok[0] != "GPU0") continue;
      gpus = 0;
      while (gpus < static_cast<int>(tok.size()) && tok[gpus].rfind("GPU", 0) == 0 && tok[gpus].size() > 3) ++gpus;
      continue;
    }
    if (tok[0] != "GPU" + std::to_string(rows.size()) || static_cast<int>(tok.size()) <= gpus) continue;
    std::vector<std::string> row(tok.begin() + 1, tok.begin() + 1 + gpus);
    for (std::string& c : row) c = c == "SOC" ? "SYS" : c;
    rows.push_back(row);
  }
  return rows;
}

// `topo show`'s "as nvidia-smi topo -m" matrix (topologyToJson route_matrix.class) of the imported matrix is the
// matrix itself, cell for cell. Returns the cells compared.
int expectShownClassesMatchMatrix(const std::string& text, const std::string& filename) {
  SCOPED_TRACE(filename);
  Result<Topology> t = importNvidiaSmiTopo(text, filename);
  if (!t.isOk()) {
    ADD_FAILURE() << t.status().toString();
    return 0;
  }
  const std::vector<std::vector<std::string>> want = smiGpuCells(text);
  const nlohmann::json shown = nlohmann::json::parse(topologyToJson(*t))["route_matrix"]["class"];
  EXPECT_EQ(shown.size(), want.size());
  int cells = 0;
  for (size_t a = 0; a < want.size() && a < shown.size(); ++a) {
    for (size_t b = 0; b < want[a].size(); ++b) {
      EXPECT_EQ(shown[a][b].get<std::string>(), want[a][b]) << "GPU" << a << " -> GPU" << b;
      ++cells;
    }
  }
  return cells;
}

TEST(ImportAccuracy, ShownRouteClassesAreTheSmiMatrixOwn) {
  // Three PCIe cards whose host bridges meet in the CPU (NODE), and four sharing one host bridge (PHB) per socket.
  const std::string node3 =
      "\tGPU0\tGPU1\tGPU2\tCPU Affinity\tNUMA Affinity\n"
      "GPU0\t X \tNODE\tNODE\t0-31\t0\n"
      "GPU1\tNODE\t X \tNODE\t0-31\t0\n"
      "GPU2\tNODE\tNODE\t X \t0-31\t0\n";
  EXPECT_EQ(expectShownClassesMatchMatrix(node3, "a6000x3.txt"), 9);
  const std::string phb =
      "\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\n"
      "GPU0\t X \tPHB\tSYS\tSYS\t0-7\t0\n"
      "GPU1\tPHB\t X \tSYS\tSYS\t0-7\t0\n"
      "GPU2\tSYS\tSYS\t X \tPHB\t8-15\t1\n"
      "GPU3\tSYS\tSYS\tPHB\t X \t8-15\t1\n";
  EXPECT_EQ(expectShownClassesMatchMatrix(phb, "phb.txt"), 16);
  std::ifstream in(std::string(BRAID_SOURCE_DIR) + "/tests/topology/data/dgx-h100-smi.txt");
  std::stringstream dgx;
  dgx << in.rdbuf();
  EXPECT_EQ(expectShownClassesMatchMatrix(dgx.str(), "dgx-h100-smi.txt"), 64);
}

TEST(ImportAccuracy, EverySmiCorpusFileIsShownAsItsMatrix) {
  BRAID_SKIP_WITHOUT_REALCASES();
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(testing::realcasesDir() / "smi")) {
    if (!entry.is_regular_file() || entry.path().extension() != ".txt") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_GT(expectShownClassesMatchMatrix(text.str(), entry.path().string()), 0);
    ++files;
  }
  EXPECT_GT(files, 0);
}

// One A100 (0x20b2, sm80: PCIe Gen4) under a bridge; the bridge's and the GPU's link attributes vary.
std::string oneGpuXml(const std::string& bridge_link, const std::string& gpu_link, const std::string& numaid = "0") {
  return "<system version=\"1\">\n"
         "  <cpu numaid=\"" +
         numaid +
         "\" arch=\"x86_64\" vendor=\"AuthenticAMD\">\n"
         "    <pci busid=\"0000:01:00.0\" class=\"0x060400\" " +
         bridge_link +
         ">\n"
         "      <pci busid=\"0000:02:00.0\" class=\"0x030200\" device=\"0x20b2\" " +
         gpu_link +
         ">\n"
         "        <gpu dev=\"0\" sm=\"80\" rank=\"0\" gdr=\"1\"/>\n"
         "      </pci>\n"
         "    </pci>\n"
         "  </cpu>\n"
         "</system>\n";
}

double pcieUp(const Topology& t, const std::string& from) {
  const std::string to = neighbourOf(t, from, LinkKind::kPcie);
  const Link* l = linkBetween(t, from, to, LinkKind::kPcie);
  return l ? l->bandwidth_gbps : -1;
}

TEST(ImportAccuracy, OddPcieLinksAreNotedWithTheValueUsed) {
  const std::string gen4 = "link_speed=\"16.0 GT/s PCIe\" link_width=\"16\"";  // 16 x 120 / 80 = 24 GB/s
  {  // A VM's bridge at 2.5 GT/s x1 (15 / 80 = 0.1875 GB/s) above a Gen4 x16 GPU: taken as the GPU's 24 GB/s.
    Result<Topology> t = importNcclTopoXml(oneGpuXml("link_speed=\"2.5 GT/s PCIe\" link_width=\"1\"", gen4), "vm.xml");
    ASSERT_TRUE(t.isOk()) << t.status().toString();
    EXPECT_DOUBLE_EQ(pcieUp(*t, "pcie_0000:01:00.0"), 24.0);
    EXPECT_DOUBLE_EQ(pcieUp(*t, "gpu0"), 24.0);
    EXPECT_TRUE(hasNote(*t, "vm.xml:3: PCIe bridge 0000:01:00.0 reports 2.5 GT/s x1 (0.188 GB/s)")) << allNotes(*t);
    EXPECT_TRUE(hasNote(*t, "its link taken as 24 GB/s")) << allNotes(*t);
  }
  {  // 64 GT/s on a Gen4 card: read as 16 GT/s x16 = 24 GB/s (not 16 x 480 / 80 = 96).
    Result<Topology> t =
        importNcclTopoXml(oneGpuXml(gen4, "link_speed=\"64.0 GT/s PCIe\" link_width=\"16\""), "gen6.xml");
    ASSERT_TRUE(t.isOk()) << t.status().toString();
    EXPECT_DOUBLE_EQ(pcieUp(*t, "gpu0"), 24.0);
    EXPECT_TRUE(hasNote(*t,
                        "gen6.xml:4: PCIe link_speed 64 GT/s is beyond the PCIe Gen4 (16 GT/s) of a "
                        "A100-SXM4-80GB: read as 16 GT/s x16 (24 GB/s)"))
        << allNotes(*t);
  }
  {  // The GPU itself at Gen1 x1: read as its generation's x16.
    Result<Topology> t = importNcclTopoXml(oneGpuXml(gen4, "link_speed=\"2.5 GT/s PCIe\" link_width=\"1\""), "x1.xml");
    ASSERT_TRUE(t.isOk()) << t.status().toString();
    EXPECT_DOUBLE_EQ(pcieUp(*t, "gpu0"), 24.0);
    EXPECT_TRUE(hasNote(*t, "x1.xml:4: A100-SXM4-80GB PCIe link 2.5 GT/s x1 (0.188 GB/s)")) << allNotes(*t);
  }
  {  // Ordinary links: no note.
    Result<Topology> t = importNcclTopoXml(oneGpuXml(gen4, gen4), "ok.xml");
    ASSERT_TRUE(t.isOk()) << t.status().toString();
    EXPECT_FALSE(hasNote(*t, "GT/s")) << allNotes(*t);
  }
}

TEST(ImportAccuracy, NumaIdsOutOfRangeAreNotedAndRoundTrip) {
  const std::string gen4 = "link_speed=\"16.0 GT/s PCIe\" link_width=\"16\"";
  for (const char* numaid : {"99999999999", "-1"}) {
    SCOPED_TRACE(numaid);
    Result<Topology> t = importNcclTopoXml(oneGpuXml(gen4, gen4, numaid), "numa.xml");
    ASSERT_TRUE(t.isOk()) << t.status().toString();
    EXPECT_TRUE(hasNote(*t, std::string("numa.xml:2: <cpu> numaid ") + numaid)) << allNotes(*t);
    EXPECT_EQ(t->vertices[t->gpuVertex(0)].numa, 0);
    Result<Topology> back = readTopologyYaml(writeTopologyYaml(*t), "numa.yaml");
    EXPECT_TRUE(back.isOk()) << back.status().toString();
  }
  const std::string smi =
      "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n"
      "GPU0\t X \tSYS\t0-7\t99999999999\n"
      "GPU1\tSYS\t X \t8-15\t1\n";
  Result<Topology> t = importNvidiaSmiTopo(smi, "numa.txt");
  ASSERT_TRUE(t.isOk()) << t.status().toString();
  EXPECT_TRUE(hasNote(*t, "numa.txt:2: GPU0's NUMA Affinity '99999999999' is not a NUMA node id")) << allNotes(*t);
  // GPU1 keeps NUMA 1; GPU0's socket is numbered by position (0).
  EXPECT_EQ(t->vertices[t->gpuVertex(0)].numa, 0);
  EXPECT_EQ(t->vertices[t->gpuVertex(1)].numa, 1);
}

TEST(ImportAccuracy, NicLegendDuplicatesAreNoted) {
  const std::string smi =
      "\tGPU0\tNIC0\tNIC1\tCPU Affinity\n"
      "GPU0\t X \tPIX\tPIX\t0-7\n"
      "NIC0\tPIX\t X \tPIX\n"
      "NIC1\tPIX\tPIX\t X \n"
      "\n"
      "NIC Legend:\n"
      "\n"
      "  NIC0: mlx5_0\n"
      "  NIC0: mlx5_9\n"
      "  NIC1: mlx5_0\n"
      "  NIC7: mlx5_7\n";
  Result<Topology> t = importNvidiaSmiTopo(smi, "legend.txt");
  ASSERT_TRUE(t.isOk()) << t.status().toString();
  EXPECT_TRUE(hasNote(*t,
                      "legend.txt:9: NIC0 appears twice in the NIC legend (mlx5_9 here, mlx5_0 at line 8): the "
                      "first is kept"))
      << allNotes(*t);
  EXPECT_TRUE(hasNote(*t, "legend.txt:10: NIC name mlx5_0 is already taken")) << allNotes(*t);
  EXPECT_TRUE(hasNote(*t, "legend.txt:11: NIC legend entry NIC7: mlx5_7 ignored")) << allNotes(*t);
  EXPECT_GE(t->findVertex("mlx5_0"), 0);
  EXPECT_GE(t->findVertex("NIC1"), 0);
  EXPECT_LT(t->findVertex("mlx5_9"), 0);
}

TEST(ImportAccuracy, GpuElementsWithoutRankGetConsistentNotes) {
  // Two H100 <gpu> elements without rank, NVLinked to each other: both used, ranked by bus id, NVLinks kept.
  const std::string xml = R"(<system version="1">
  <cpu numaid="0" arch="x86_64" vendor="AuthenticAMD">
    <pci busid="0000:0b:00.0" class="0x030200" device="0x2330" link_speed="32.0 GT/s PCIe" link_width="16">
      <gpu dev="1" sm="90"><nvlink target="0000:0a:00.0" count="18" tclass="0x030200"/></gpu>
    </pci>
    <pci busid="0000:0a:00.0" class="0x030200" device="0x2330" link_speed="32.0 GT/s PCIe" link_width="16">
      <gpu dev="0" sm="90"><nvlink target="0000:0b:00.0" count="18" tclass="0x030200"/></gpu>
    </pci>
  </cpu>
</system>
)";
  Result<Topology> t = importNcclTopoXml(xml, "norank.xml");
  ASSERT_TRUE(t.isOk()) << t.status().toString();
  ASSERT_EQ(t->numGpus(), 2);
  EXPECT_EQ(t->vertices[t->gpuVertex(0)].busid, "0000:0a:00.0");
  EXPECT_EQ(linkBetween(*t, "gpu0", "gpu1", LinkKind::kNvlink)->lanes, 18);
  EXPECT_TRUE(hasNote(*t, "no <gpu> element has a rank: the 2 GPUs")) << allNotes(*t);
  EXPECT_FALSE(hasNote(*t, "ignored")) << allNotes(*t);
  EXPECT_FALSE(hasNote(*t, "hint file")) << allNotes(*t);
  // With one ranked GPU, the rank-less one is another process's: left out, and said so.
  std::string mixed = xml;
  mixed.replace(mixed.find("<gpu dev=\"0\" sm=\"90\">"), 21, "<gpu dev=\"0\" sm=\"90\" rank=\"0\">");
  Result<Topology> m = importNcclTopoXml(mixed, "mixed.xml");
  ASSERT_TRUE(m.isOk()) << m.status().toString();
  EXPECT_EQ(m->numGpus(), 1);
  EXPECT_TRUE(hasNote(*m, "<gpu> elements without rank ignored")) << allNotes(*m);
  EXPECT_TRUE(hasNote(*m, "0000:0b:00.0 line 4")) << allNotes(*m);
  EXPECT_FALSE(hasNote(*m, "no <gpu> element has a rank")) << allNotes(*m);
}

TEST(ImportAccuracy, TruncatedXmlSaysUnexpectedEndOfFile) {
  const std::string whole = oneGpuXml("link_speed=\"16.0 GT/s PCIe\" link_width=\"16\"", "");
  {  // Cut after the <gpu> line: <system>, <cpu> and two <pci> are open.
    const std::string cut = whole.substr(0, whole.find("      </pci>"));
    Result<Topology> t = importNcclTopoXml(cut, "cut.xml");
    ASSERT_FALSE(t.isOk());
    expectParseError(t.status(), "cut.xml", 5, "xml");
    EXPECT_NE(t.status().message().find("unexpected end of file (unclosed <system> from line 1, innermost <pci> "
                                        "from line 4)"),
              std::string::npos)
        << t.status().message();
  }
  {  // Cut inside an attribute value.
    const std::string cut = whole.substr(0, whole.find("0000:02:00.0") + 4);
    Result<Topology> t = importNcclTopoXml(cut, "mid.xml");
    ASSERT_FALSE(t.isOk());
    expectParseError(t.status(), "mid.xml", 4, "xml");
    EXPECT_NE(t.status().message().find("unexpected end of file (unclosed <system> from line 1, innermost <pci> "
                                        "from line 4)"),
              std::string::npos)
        << t.status().message();
  }
  {  // A wrong end tag is a mismatch, not a truncation.
    std::string wrong = whole;
    wrong.replace(wrong.find("</system>"), 9, "</sytem>");
    Result<Topology> t = importNcclTopoXml(wrong, "wrong.xml");
    ASSERT_FALSE(t.isOk());
    EXPECT_EQ(t.status().message().find("unexpected end of file"), std::string::npos) << t.status().message();
    EXPECT_NE(t.status().message().find("malformed XML"), std::string::npos) << t.status().message();
  }
}

}  // namespace
}  // namespace braid
