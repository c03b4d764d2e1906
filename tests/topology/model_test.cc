// validateTopology and Topology::route on small hand-built models whose answers are worked out by hand.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "braid/topology.h"

namespace braid {
namespace {

// Two nodes. node0: gpu0, gpu1 joined by a 2-lane NVLink (40 GB/s) and both on a PCIe switch (12 GB/s).
// node1: gpu2 on its own PCIe switch. Each node has one NIC on its switch; the NICs meet on a net switch.
Topology twoNodes() {
  Topology t;
  t.name = "two-nodes";
  const int n0 = t.addNode("node0");
  const int n1 = t.addNode("node1");
  const int g0 = t.addVertex(VertexKind::kGpu, n0);
  const int g1 = t.addVertex(VertexKind::kGpu, n0);
  const int p0 = t.addVertex(VertexKind::kPcieSwitch, n0, "node0.pcie");
  const int nic0 = t.addVertex(VertexKind::kNic, n0, "node0.nic0");
  const int g2 = t.addVertex(VertexKind::kGpu, n1);
  const int p1 = t.addVertex(VertexKind::kPcieSwitch, n1, "node1.pcie");
  const int nic1 = t.addVertex(VertexKind::kNic, n1, "node1.nic0");
  const int sw = t.addVertex(VertexKind::kNetSwitch, -1, "sw");
  t.addDuplexLink(g0, g1, LinkKind::kNvlink, 40, 0.7, 2);
  t.addDuplexLink(g0, p0, LinkKind::kPcie, 12, 1.0);
  t.addDuplexLink(g1, p0, LinkKind::kPcie, 12, 1.0);
  t.addDuplexLink(nic0, p0, LinkKind::kPcie, 12, 1.0);
  t.addDuplexLink(g2, p1, LinkKind::kPcie, 12, 1.0);
  t.addDuplexLink(nic1, p1, LinkKind::kPcie, 12, 1.0);
  t.addDuplexLink(nic0, sw, LinkKind::kNet, 12.5, 1.3);
  t.addDuplexLink(nic1, sw, LinkKind::kNet, 12.5, 1.3);
  return t;
}

TEST(ValidateTopology, AcceptsWellFormedModel) {
  Topology t = twoNodes();
  EXPECT_TRUE(validateTopology(t).isOk()) << validateTopology(t).toString();
}

TEST(ValidateTopology, RejectsSelfLoopNamingTheLink) {
  Topology t = twoNodes();
  t.addLink(2, 2, LinkKind::kPcie, 12, 1.0);
  Status s = validateTopology(t);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("node0.pcie -> node0.pcie"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("itself"), std::string::npos) << s.message();
}

TEST(ValidateTopology, RejectsBadBandwidthAlphaLanesAndEndpoints) {
  {
    Topology t = twoNodes();
    t.links[3].bandwidth_gbps = 0;
    Status s = validateTopology(t);
    ASSERT_FALSE(s.isOk());
    EXPECT_NE(s.message().find("link 3"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("bandwidth"), std::string::npos) << s.message();
  }
  {
    Topology t = twoNodes();
    t.links[5].alpha_us = -0.5;
    Status s = validateTopology(t);
    ASSERT_FALSE(s.isOk());
    EXPECT_NE(s.message().find("link 5"), std::string::npos);
    EXPECT_NE(s.message().find("alpha"), std::string::npos);
  }
  {
    Topology t = twoNodes();
    t.links[0].lanes = 0;
    Status s = validateTopology(t);
    ASSERT_FALSE(s.isOk());
    EXPECT_NE(s.message().find("lanes"), std::string::npos);
  }
  {
    Topology t = twoNodes();
    t.links[1].dst = 99;
    Status s = validateTopology(t);
    ASSERT_FALSE(s.isOk());
    EXPECT_NE(s.message().find("99"), std::string::npos);
  }
  {
    Topology t = twoNodes();
    t.links[1].bandwidth_gbps = std::nan("");
    EXPECT_FALSE(validateTopology(t).isOk());
  }
}

TEST(ValidateTopology, RejectsRankGapsDuplicatesAndNames) {
  {
    Topology t = twoNodes();
    t.vertices[4].rank = 5;  // gpu2 -> rank 5 leaves ranks 2..4 missing
    t.vertices[4].name = "gpu5";
    Status s = validateTopology(t);
    ASSERT_FALSE(s.isOk());
    EXPECT_NE(s.message().find("rank 2 is missing"), std::string::npos) << s.message();
  }
  {
    Topology t = twoNodes();
    t.vertices[1].rank = 0;
    t.vertices[1].name = "gpu0";
    Status s = validateTopology(t);
    ASSERT_FALSE(s.isOk());  // duplicate name gpu0 is caught first
    EXPECT_NE(s.message().find("gpu0"), std::string::npos);
  }
  {
    Topology t = twoNodes();
    t.vertices[4].name = "gpuX";
    Status s = validateTopology(t);
    ASSERT_FALSE(s.isOk());
    EXPECT_NE(s.message().find("must be named 'gpu2'"), std::string::npos) << s.message();
  }
  {
    Topology t = twoNodes();
    t.vertices[7].name = "node0.pcie";
    Status s = validateTopology(t);
    ASSERT_FALSE(s.isOk());
    EXPECT_NE(s.message().find("already used by vertex 2"), std::string::npos) << s.message();
  }
  {
    Topology t = twoNodes();
    t.vertices[3].id = 4;
    EXPECT_FALSE(validateTopology(t).isOk());
  }
}

TEST(ValidateTopology, RejectsInconsistentNodeMembership) {
  {
    Topology t = twoNodes();
    t.vertices[4].node = 0;  // gpu2 claims node0 but is listed by node1
    Status s = validateTopology(t);
    ASSERT_FALSE(s.isOk());
    EXPECT_NE(s.message().find("node1"), std::string::npos) << s.message();
  }
  {
    Topology t = twoNodes();
    t.nodes[0].gpus.pop_back();  // gpu1 no longer listed
    Status s = validateTopology(t);
    ASSERT_FALSE(s.isOk());
    EXPECT_NE(s.message().find("gpu1"), std::string::npos) << s.message();
  }
  {
    Topology t = twoNodes();
    t.nodes[1].nics.push_back(4);  // a GPU in a NIC list
    EXPECT_FALSE(validateTopology(t).isOk());
  }
  {
    Topology t = twoNodes();
    t.nodes[1].name = "node0";
    EXPECT_FALSE(validateTopology(t).isOk());
  }
  {
    Topology t = twoNodes();
    t.vertices[5].rank = 3;  // a switch with a rank
    EXPECT_FALSE(validateTopology(t).isOk());
  }
}

TEST(ValidateTopology, RejectsGpusThatCannotReachEveryOtherGpu) {
  auto message = [](const Topology& t) {
    const Status s = validateTopology(t);
    return s.isOk() ? std::string("ok") : s.message();
  };
  const std::string why = " (no chain of links leads from one to the other): a collective over all GPUs is impossible";
  {  // gpu2's node has lost its NIC's uplink: neither direction between gpu2 and node0's GPUs exists.
    Topology t = twoNodes();
    t.links.pop_back();  // sw -> node1.nic0
    t.links.pop_back();  // node1.nic0 -> sw
    EXPECT_EQ(message(t), "two-nodes: gpu0 has no path to gpu2" + why);
  }
  {  // One direction only: node1.nic0 -> sw gone, so gpu2 cannot send to node0 though it can receive.
    Topology t = twoNodes();
    t.links.erase(t.links.end() - 2);
    t.source = "one-way.yaml";
    EXPECT_EQ(message(t), "one-way.yaml: gpu2 has no path to gpu0" + why);
    t.links.erase(t.links.end() - 1);  // sw -> node1.nic0 too: now gpu0 reaches gpu2 no more
    EXPECT_EQ(message(t), "one-way.yaml: gpu0 has no path to gpu2" + why);
  }
  {  // A chain gpu0 = gpu1 = gpu2 by NVLink only: joined through gpu1, as TACCL's NDv2 model joins some pairs.
    Topology t;
    t.name = "chain";
    const int n = t.addNode("n");
    const int g0 = t.addVertex(VertexKind::kGpu, n);
    const int g1 = t.addVertex(VertexKind::kGpu, n);
    const int g2 = t.addVertex(VertexKind::kGpu, n);
    const int g3 = t.addVertex(VertexKind::kGpu, n);
    t.addDuplexLink(g0, g1, LinkKind::kNvlink, 50, 0.5);
    t.addDuplexLink(g1, g2, LinkKind::kNvlink, 50, 0.5);
    t.addLink(g3, g2, LinkKind::kNvlink, 50, 0.5);  // gpu3 sends, nothing comes back
    EXPECT_EQ(message(t), "chain: gpu0 has no path to gpu3" + why);
    t.addLink(g0, g3, LinkKind::kNvlink, 50, 0.5);  // a directed ring through gpu3: every pair joined
    EXPECT_EQ(message(t), "ok");
  }
  {  // A lone GPU is fine; a second GPU without links is not.
    Topology t;
    t.name = "lone";
    const int n = t.addNode("n");
    t.addVertex(VertexKind::kGpu, n);
    EXPECT_EQ(message(t), "ok");
    t.addVertex(VertexKind::kGpu, n);
    EXPECT_EQ(message(t), "lone: gpu0 has no path to gpu1" + why);
  }
}

TEST(ValidateTopology, ParallelLinksAreAMultigraphNotAnError) {
  // docs/formats/topology.md: a directed multigraph. A second PCIe link beside gpu0's NVLink, and the same NVLink
  // given twice, are both accepted as links of their own.
  Topology t = twoNodes();
  t.addDuplexLink(0, 1, LinkKind::kPcie, 12, 1.0);
  t.addDuplexLink(0, 1, LinkKind::kNvlink, 40, 0.7, 2);
  EXPECT_TRUE(validateTopology(t).isOk()) << validateTopology(t).toString();
  EXPECT_EQ(t.linksBetween(0, 1).size(), 3u);
}

TEST(Route, PrefersWidestThenFewestHops) {
  Topology t = twoNodes();
  // gpu0 -> gpu1: NVLink 40 GB/s direct beats PCIe (12 GB/s via the switch).
  std::optional<Route> r = t.route(0, 1);
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->links.size(), 1u);
  EXPECT_EQ(t.links[r->links[0]].kind, LinkKind::kNvlink);
  EXPECT_DOUBLE_EQ(r->bandwidth_gbps, 40);
  EXPECT_DOUBLE_EQ(r->alpha_us, 0.7);
  EXPECT_EQ(r->slowest_kind, LinkKind::kNvlink);

  // gpu0 -> gpu2: gpu0-pcie-nic0-sw-nic1-pcie-gpu2, 6 links, bottleneck 12 GB/s (PCIe), alpha 1+1+1.3+1.3+1+1.
  r = t.route(0, 2);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->links.size(), 6u);
  EXPECT_DOUBLE_EQ(r->bandwidth_gbps, 12);
  EXPECT_NEAR(r->alpha_us, 6.6, 1e-12);
  EXPECT_EQ(r->slowest_kind, LinkKind::kPcie);
  EXPECT_EQ(t.vertices[t.links[r->links.front()].src].name, "gpu0");
  EXPECT_EQ(t.vertices[t.links[r->links.back()].dst].name, "gpu2");
  for (size_t i = 0; i + 1 < r->links.size(); ++i) EXPECT_EQ(t.links[r->links[i]].dst, t.links[r->links[i + 1]].src);
}

TEST(Route, NeverRelaysThroughAThirdGpu) {
  // gpu0 = gpu1 = gpu2 by fast NVLink (a chain), plus a slow PCIe path gpu0 - sw - gpu2.
  Topology t;
  const int n = t.addNode("n");
  const int g0 = t.addVertex(VertexKind::kGpu, n);
  const int g1 = t.addVertex(VertexKind::kGpu, n);
  const int g2 = t.addVertex(VertexKind::kGpu, n);
  const int sw = t.addVertex(VertexKind::kPcieSwitch, n, "sw");
  t.addDuplexLink(g0, g1, LinkKind::kNvlink, 50, 0.5);
  t.addDuplexLink(g1, g2, LinkKind::kNvlink, 50, 0.5);
  t.addDuplexLink(g0, sw, LinkKind::kPcie, 8, 1);
  t.addDuplexLink(sw, g2, LinkKind::kPcie, 8, 1);
  std::optional<Route> r = t.route(0, 2);
  ASSERT_TRUE(r.has_value());
  EXPECT_DOUBLE_EQ(r->bandwidth_gbps, 8);  // the 50 GB/s path would relay through gpu1
  EXPECT_EQ(r->links.size(), 2u);
  EXPECT_EQ(r->slowest_kind, LinkKind::kPcie);
  // Without the switch there is no route at all.
  Topology only_chain = t;
  only_chain.links.resize(4);
  EXPECT_FALSE(only_chain.route(0, 2).has_value());
  EXPECT_TRUE(only_chain.route(0, 1).has_value());
}

TEST(Route, GpusOfOneNodeNeverMeetOverTheNetwork) {
  // Two sockets joined by a 22 GB/s SYS link; each GPU also has a 50 GB/s NIC on its own PCIe switch, both NICs on
  // one network switch. The NIC path (bottleneck 24 GB/s PCIe) is wider than SYS (22), but NCCL keeps intra-node
  // traffic inside the node: the route must be gpu0 - sw0 - cpu0 - cpu1 - sw1 - gpu1 (5 links, SYS-bound).
  Topology t;
  const int n = t.addNode("n");
  const int g0 = t.addVertex(VertexKind::kGpu, n);
  const int g1 = t.addVertex(VertexKind::kGpu, n);
  const int sw0 = t.addVertex(VertexKind::kPcieSwitch, n, "sw0");
  const int sw1 = t.addVertex(VertexKind::kPcieSwitch, n, "sw1");
  const int c0 = t.addVertex(VertexKind::kCpu, n, "cpu0");
  const int c1 = t.addVertex(VertexKind::kCpu, n, "cpu1");
  const int nic0 = t.addVertex(VertexKind::kNic, n, "nic0");
  const int nic1 = t.addVertex(VertexKind::kNic, n, "nic1");
  const int net = t.addVertex(VertexKind::kNetSwitch, -1, "net");
  t.addDuplexLink(g0, sw0, LinkKind::kPcie, 24, 1);
  t.addDuplexLink(g1, sw1, LinkKind::kPcie, 24, 1);
  t.addDuplexLink(sw0, c0, LinkKind::kPcie, 24, 1);
  t.addDuplexLink(sw1, c1, LinkKind::kPcie, 24, 1);
  t.addDuplexLink(c0, c1, LinkKind::kSys, 22, 1);
  t.addDuplexLink(nic0, sw0, LinkKind::kPcie, 24, 1);
  t.addDuplexLink(nic1, sw1, LinkKind::kPcie, 24, 1);
  t.addDuplexLink(nic0, net, LinkKind::kNet, 50, 1);
  t.addDuplexLink(nic1, net, LinkKind::kNet, 50, 1);
  std::optional<Route> r = t.route(0, 1);
  ASSERT_TRUE(r.has_value());
  EXPECT_DOUBLE_EQ(r->bandwidth_gbps, 22);
  EXPECT_EQ(r->slowest_kind, LinkKind::kSys);
  EXPECT_EQ(r->links.size(), 5u);
  for (int li : r->links) EXPECT_NE(t.links[li].kind, LinkKind::kNet);
  // Put gpu1 in another node: now the network is the way (and the only one once SYS is gone).
  Topology two = t;
  two.addNode("m");
  two.vertices[g1].node = 1;
  two.links.erase(
      std::remove_if(two.links.begin(), two.links.end(), [](const Link& l) { return l.kind == LinkKind::kSys; }),
      two.links.end());
  std::optional<Route> across = two.route(0, 1);
  ASSERT_TRUE(across.has_value());
  EXPECT_DOUBLE_EQ(across->bandwidth_gbps, 24);
  EXPECT_EQ(across->links.size(), 6u);  // gpu0 sw0 nic0 net nic1 sw1 gpu1
}

TEST(Route, TieOnWidthBreaksByHopsThenAlpha) {
  Topology t;
  const int n = t.addNode("n");
  const int g0 = t.addVertex(VertexKind::kGpu, n);
  const int g1 = t.addVertex(VertexKind::kGpu, n);
  const int a = t.addVertex(VertexKind::kPcieSwitch, n, "a");
  const int b = t.addVertex(VertexKind::kPcieSwitch, n, "b");
  const int c = t.addVertex(VertexKind::kPcieSwitch, n, "c");
  const int d = t.addVertex(VertexKind::kPcieSwitch, n, "d");
  // Path 1: g0-a-b-g1 (3 hops, alpha 0.3). Path 2: g0-c-g1 (2 hops, alpha 5). Path 3: g0-d-g1 (2 hops, alpha 2).
  // All 10 GB/s wide. Fewest hops first: paths 2 and 3; then least alpha: path 3 through d.
  t.addDuplexLink(g0, a, LinkKind::kPcie, 10, 0.1);
  t.addDuplexLink(a, b, LinkKind::kPcie, 10, 0.1);
  t.addDuplexLink(b, g1, LinkKind::kPcie, 10, 0.1);
  t.addDuplexLink(g0, c, LinkKind::kPcie, 10, 2.5);
  t.addDuplexLink(c, g1, LinkKind::kPcie, 10, 2.5);
  t.addDuplexLink(g0, d, LinkKind::kPcie, 10, 1.0);
  t.addDuplexLink(d, g1, LinkKind::kPcie, 10, 1.0);
  std::optional<Route> r = t.route(0, 1);
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->links.size(), 2u);
  EXPECT_EQ(t.links[r->links[0]].dst, d);
  EXPECT_DOUBLE_EQ(r->alpha_us, 2.0);
  // Make path 1 wider: width now wins over hops.
  t.links[0].bandwidth_gbps = t.links[2].bandwidth_gbps = t.links[4].bandwidth_gbps = 11;
  r = t.route(0, 1);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->links.size(), 3u);
  EXPECT_DOUBLE_EQ(r->bandwidth_gbps, 11);
  // Directed: the reverse direction still has only 10 GB/s links, so it takes d.
  r = t.route(1, 0);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->links.size(), 2u);
  EXPECT_EQ(t.links[r->links[0]].dst, d);
}

TEST(GpuComputeCapability, ProductNamesAndSmTokens) {
  // Compute capabilities from NVIDIA's CUDA GPU list (developer.nvidia.com/cuda-gpus).
  const std::pair<const char*, int> known[] = {{"H100-SXM5-80GB", 90},
                                               {"NVIDIA H100 80GB HBM3", 90},
                                               {"H800", 90},
                                               {"H20", 90},
                                               {"H200-SXM-141GB", 90},
                                               {"GH200", 90},
                                               {"B200", 100},
                                               {"GB200", 100},
                                               {"A100-SXM4-40GB", 80},
                                               {"A800", 80},
                                               {"A30", 80},
                                               {"A10G", 86},
                                               {"A10", 86},
                                               {"A40", 86},
                                               {"RTX-A6000", 86},
                                               {"NVIDIA RTX A6000", 86},
                                               {"RTX-3090", 86},
                                               {"GeForce RTX 4090", 89},
                                               {"RTX 6000 Ada", 89},
                                               {"L40S", 89},
                                               {"L20", 89},
                                               {"L4", 89},
                                               {"Tesla T4", 75},
                                               {"V100-SXM2-16GB", 70},
                                               {"Tesla P100", 60},
                                               {"sm90", 90},
                                               {"SM_86", 86},
                                               {"H100/H800 (sm90)", 90},
                                               {"sm 80", 80},
                                               {"A100 (sm86)", 86}};
  for (const auto& [model, sm] : known) EXPECT_EQ(gpuComputeCapability(model), sm) << model;
  // A100 is not A10 plus a digit, MI300X is not NVIDIA's, an empty model says nothing.
  for (const char* model : {"", "MI300X", "A1000x", "gpu", "sm", "smx90", "RTX", "4090"}) {
    EXPECT_FALSE(gpuComputeCapability(model).has_value()) << model;
  }
}

TEST(Route, BadRanksAndSelf) {
  Topology t = twoNodes();
  EXPECT_FALSE(t.route(0, 3).has_value());
  EXPECT_FALSE(t.route(-1, 0).has_value());
  std::optional<Route> self = t.route(1, 1);
  ASSERT_TRUE(self.has_value());
  EXPECT_TRUE(self->links.empty());
  EXPECT_TRUE(std::isinf(self->bandwidth_gbps));
}

}  // namespace
}  // namespace braid
