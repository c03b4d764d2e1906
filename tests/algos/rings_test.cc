// Rings that follow NVLink: DGX-1 built by hand from the nvidia-smi matrix in
// ../shared/realcases/smi/dgx1-v100-sxm2-hybrid-cube-mesh-1nic.txt (NV1/NV2 hybrid cube mesh),
// an NVSwitch box, and boxes with no NVLink Hamiltonian cycle (fallback to route order).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "braid/classic.h"
#include "braid/classic_blocks.h"

namespace braid {
namespace {

constexpr double kNvlinkLaneGbps = 25;  // V100 NVLink 2.0, per lane and direction

// The NVLink pairs of the smi matrix, with their lane counts (NV1 = 1, NV2 = 2).
const std::vector<std::tuple<int, int, int>> kDgx1Pairs = {
    {0, 1, 1}, {0, 2, 1}, {0, 3, 2}, {0, 4, 2}, {1, 2, 2}, {1, 3, 1}, {1, 5, 2}, {2, 3, 2},
    {2, 6, 1}, {3, 7, 1}, {4, 5, 1}, {4, 6, 1}, {4, 7, 2}, {5, 6, 2}, {5, 7, 1}, {6, 7, 2},
};

// DGX-1: 8 GPUs, 4 PCIe switches (2 GPUs each), 2 CPU sockets joined by SYS, NVLink per the matrix.
Topology dgx1() {
  Topology t;
  t.name = "dgx1-by-hand";
  const int node = t.addNode("node0");
  std::vector<int> gpu;
  for (int i = 0; i < 8; ++i) gpu.push_back(t.addVertex(VertexKind::kGpu, node));
  const int cpu0 = t.addVertex(VertexKind::kCpu, node, "cpu0");
  const int cpu1 = t.addVertex(VertexKind::kCpu, node, "cpu1");
  t.addDuplexLink(cpu0, cpu1, LinkKind::kSys, 19.2, 1.0);
  for (int s = 0; s < 4; ++s) {
    const int sw = t.addVertex(VertexKind::kPcieSwitch, node, "pcie" + std::to_string(s));
    t.addDuplexLink(sw, s < 2 ? cpu0 : cpu1, LinkKind::kPcie, 16, 1.0);
    t.addDuplexLink(gpu[2 * s], sw, LinkKind::kPcie, 16, 1.0);
    t.addDuplexLink(gpu[2 * s + 1], sw, LinkKind::kPcie, 16, 1.0);
  }
  for (auto [a, b, lanes] : kDgx1Pairs) {
    t.addDuplexLink(gpu[a], gpu[b], LinkKind::kNvlink, kNvlinkLaneGbps * lanes, 0.7, lanes);
  }
  return t;
}

int lanesBetween(int a, int b) {
  for (auto [x, y, lanes] : kDgx1Pairs) {
    if ((x == a && y == b) || (x == b && y == a)) return lanes;
  }
  return 0;
}

bool directNvlink(const Topology& t, int a, int b) {
  for (int li : t.linksBetween(t.gpuVertex(a), t.gpuVertex(b))) {
    if (t.links[li].kind == LinkKind::kNvlink) return true;
  }
  return false;
}

// Direct NVLink, or GPU -> NVSwitch -> GPU with both links NVLink.
bool nvlinkConnected(const Topology& t, int a, int b) {
  if (directNvlink(t, a, b)) return true;
  for (int up : t.outLinks(t.gpuVertex(a))) {
    const Link& l = t.links[up];
    if (l.kind != LinkKind::kNvlink || t.vertices[l.dst].kind != VertexKind::kNvSwitch) continue;
    for (int down : t.linksBetween(l.dst, t.gpuVertex(b))) {
      if (t.links[down].kind == LinkKind::kNvlink) return true;
    }
  }
  return false;
}

Result<Algorithm> build(ClassicAlgo algo, CollectiveKind kind, const Topology& t, bool in_place = false,
                        int channels = 0) {
  ClassicRequest request;
  request.algo = algo;
  request.spec.kind = kind;
  request.spec.num_ranks = t.numGpus();
  request.spec.in_place = in_place;
  request.spec.chunk_factor = 0;
  request.topology = &t;
  request.num_channels = channels;
  return buildClassic(request);
}

bool isHamiltonian(const algos::RingOrder& ring, int n) {
  std::set<int> seen(ring.begin(), ring.end());
  return static_cast<int>(ring.size()) == n && static_cast<int>(seen.size()) == n && *seen.begin() == 0 &&
         *seen.rbegin() == n - 1;
}

TEST(NvlinkRings, Dgx1RingAllGatherUsesNvlinkOnly) {
  const Topology t = dgx1();
  Result<Algorithm> a = build(ClassicAlgo::kRing, CollectiveKind::kAllGather, t);
  ASSERT_TRUE(a.isOk()) << a.status().toString();
  VerifyReport report = verify(*a);
  EXPECT_TRUE(report.ok) << report.toString();
  int sends = 0;
  for (const RankProgram& p : a->ranks) {
    for (const Threadblock& tb : p.threadblocks) {
      for (const Step& s : tb.steps) {
        if (!opSends(s.type)) continue;
        ++sends;
        EXPECT_TRUE(directNvlink(t, p.rank, tb.send_peer))
            << "rank " << p.rank << " sends to " << tb.send_peer << " without a direct NVLink link";
      }
    }
  }
  EXPECT_EQ(sends, 8 * 7);
  ASSERT_FALSE(a->notes.empty());
  EXPECT_NE(a->notes[0].find("follows NVLink"), std::string::npos) << a->notes[0];
}

TEST(NvlinkRings, Dgx1EveryCollectiveVerifies) {
  const Topology t = dgx1();
  for (ClassicAlgo algo : {ClassicAlgo::kRing, ClassicAlgo::kMultiRing}) {
    for (CollectiveKind kind : classicCollectives(algo)) {
      for (bool in_place : {false, true}) {
        Result<Algorithm> a = build(algo, kind, t, in_place);
        ASSERT_TRUE(a.isOk()) << a.status().toString();
        VerifyReport report = verify(*a);
        EXPECT_TRUE(report.ok) << classicAlgoName(algo) << " " << collectiveName(kind) << "\n" << report.toString();
      }
    }
  }
}

TEST(NvlinkRings, Dgx1MultiRingRespectsLanesAndReusesNv2Pairs) {
  const Topology t = dgx1();
  Result<algos::RingSearch> search = algos::findRings(t, 16);
  ASSERT_TRUE(search.isOk()) << search.status().toString();
  ASSERT_TRUE(search->all_nvlink);
  // Each GPU has 6 NVLink lanes per direction, so at most 6 rings; a greedy search finds several.
  EXPECT_GE(search->rings.size(), 3u);
  EXPECT_LE(search->rings.size(), 6u);
  std::map<std::pair<int, int>, int> used;  // directed pair -> rings using it
  for (const algos::RingOrder& ring : search->rings) {
    ASSERT_TRUE(isHamiltonian(ring, 8));
    for (int i = 0; i < 8; ++i) ++used[{ring[i], ring[(i + 1) % 8]}];
  }
  bool nv2_used_twice = false;
  for (const auto& [pair, count] : used) {
    const int lanes = lanesBetween(pair.first, pair.second);
    EXPECT_GT(lanes, 0) << pair.first << "->" << pair.second << " is not an NVLink pair";
    EXPECT_LE(count, lanes) << pair.first << "->" << pair.second << " carries more rings than lanes";
    if (lanes == 2 && count == 2) nv2_used_twice = true;
  }
  EXPECT_TRUE(nv2_used_twice) << "NCCL's DGX-1 rings use the NV2 pairs twice";

  Result<Algorithm> a = build(ClassicAlgo::kMultiRing, CollectiveKind::kAllReduce, t);
  ASSERT_TRUE(a.isOk());
  EXPECT_EQ(a->num_channels, static_cast<int>(search->rings.size()));
  EXPECT_EQ(a->num_chunks, 8 * a->num_channels);
  for (const RankProgram& p : a->ranks) {
    for (const Threadblock& tb : p.threadblocks) EXPECT_TRUE(directNvlink(t, p.rank, tb.send_peer));
  }
}

TEST(NvlinkRings, NvswitchBoxRingsLimitedByLanes) {
  Topology t;
  t.name = "nvswitch-box";
  const int node = t.addNode("node0");
  const int sw = t.addVertex(VertexKind::kNvSwitch, node, "nvswitch");
  for (int i = 0; i < 8; ++i) {
    const int gpu = t.addVertex(VertexKind::kGpu, node);
    t.addDuplexLink(gpu, sw, LinkKind::kNvlink, 150, 0.7, 6);
  }
  Result<algos::RingSearch> search = algos::findRings(t, 16);
  ASSERT_TRUE(search.isOk());
  EXPECT_TRUE(search->all_nvlink);
  EXPECT_EQ(search->rings.size(), 6u) << "6 lanes per GPU and direction: exactly 6 rings";
  Result<Algorithm> a = build(ClassicAlgo::kMultiRing, CollectiveKind::kAllGather, t, true);
  ASSERT_TRUE(a.isOk());
  VerifyReport report = verify(*a);
  EXPECT_TRUE(report.ok) << report.toString();
}

TEST(NvlinkRings, BridgedPairsFallBackAndCrossSysTwice) {
  // Four GPUs: NVLink bridges 0-1 and 2-3, everything else through PCIe and the socket link
  // (realcases smi/4gpu-nvlink-bridged-pairs-2socket.txt).
  Topology t;
  t.name = "bridged-pairs";
  const int node = t.addNode("node0");
  std::vector<int> gpu;
  for (int i = 0; i < 4; ++i) gpu.push_back(t.addVertex(VertexKind::kGpu, node));
  const int cpu0 = t.addVertex(VertexKind::kCpu, node, "cpu0");
  const int cpu1 = t.addVertex(VertexKind::kCpu, node, "cpu1");
  t.addDuplexLink(cpu0, cpu1, LinkKind::kSys, 10, 1.5);
  for (int i = 0; i < 4; ++i) t.addDuplexLink(gpu[i], i < 2 ? cpu0 : cpu1, LinkKind::kPcie, 16, 1.0);
  t.addDuplexLink(gpu[0], gpu[1], LinkKind::kNvlink, 56, 0.7, 4);
  t.addDuplexLink(gpu[2], gpu[3], LinkKind::kNvlink, 56, 0.7, 4);
  Result<algos::RingSearch> search = algos::findRings(t, 4);
  ASSERT_TRUE(search.isOk()) << search.status().toString();
  EXPECT_FALSE(search->all_nvlink);
  ASSERT_EQ(search->rings.size(), 1u);
  const algos::RingOrder& ring = search->rings[0];
  ASSERT_TRUE(isHamiltonian(ring, 4));
  int socket_crossings = 0;
  for (int i = 0; i < 4; ++i) socket_crossings += (ring[i] < 2) != (ring[(i + 1) % 4] < 2) ? 1 : 0;
  EXPECT_EQ(socket_crossings, 2);
  ASSERT_FALSE(search->notes.empty());
  EXPECT_NE(search->notes[0].find("falling back"), std::string::npos) << search->notes[0];
  EXPECT_NE(search->notes[0].find("sys"), std::string::npos) << search->notes[0];

  Result<Algorithm> a = build(ClassicAlgo::kRing, CollectiveKind::kAllReduce, t);
  ASSERT_TRUE(a.isOk());
  EXPECT_TRUE(verify(*a).ok);
  ASSERT_FALSE(a->notes.empty());
  EXPECT_NE(a->notes[0].find("falling back"), std::string::npos);
}

TEST(NvlinkRings, DisconnectedGpusAreAnError) {
  Topology t;
  t.name = "islands";
  const int node = t.addNode("node0");
  const int a = t.addVertex(VertexKind::kGpu, node);
  const int b = t.addVertex(VertexKind::kGpu, node);
  const int c = t.addVertex(VertexKind::kGpu, node);
  t.addDuplexLink(a, b, LinkKind::kNvlink, 25, 0.7);
  (void)c;
  Result<algos::RingSearch> search = algos::findRings(t, 1);
  ASSERT_FALSE(search.isOk());
  const std::string expected = t.vertices[c].name + " has no route to any other GPU";
  EXPECT_NE(search.status().message().find(expected), std::string::npos) << search.status().message();
  Result<Algorithm> ring = build(ClassicAlgo::kRing, CollectiveKind::kAllGather, t);
  EXPECT_FALSE(ring.isOk());
}

TEST(NvlinkRings, AGpuReachedOnlyThroughAnotherGpuIsNamed) {
  // a - b - c over NVLink: routes never relay through a third GPU, so c's only route partner is b (both ways) and
  // no ring of the three exists.
  Topology t;
  t.name = "chain";
  const int node = t.addNode("node0");
  const int a = t.addVertex(VertexKind::kGpu, node);
  const int b = t.addVertex(VertexKind::kGpu, node);
  const int c = t.addVertex(VertexKind::kGpu, node);
  t.addDuplexLink(a, b, LinkKind::kNvlink, 25, 0.7);
  t.addDuplexLink(b, c, LinkKind::kNvlink, 25, 0.7);
  Result<algos::RingSearch> search = algos::findRings(t, 1);
  ASSERT_FALSE(search.isOk());
  const std::string expected = t.vertices[a].name + " has routes only to and from " + t.vertices[b].name;
  EXPECT_NE(search.status().message().find(expected), std::string::npos) << search.status().message();
}

TEST(NvlinkRings, TwoGpusAndOneGpu) {
  Topology two;
  two.name = "two";
  const int node = two.addNode("node0");
  const int a = two.addVertex(VertexKind::kGpu, node);
  const int b = two.addVertex(VertexKind::kGpu, node);
  two.addDuplexLink(a, b, LinkKind::kNvlink, 100, 0.7, 4);
  Result<algos::RingSearch> search = algos::findRings(two, 8);
  ASSERT_TRUE(search.isOk());
  EXPECT_EQ(search->rings.size(), 4u) << "4 lanes each way: 4 rings 0 -> 1 -> 0";
  Result<Algorithm> ar = build(ClassicAlgo::kMultiRing, CollectiveKind::kAllReduce, two);
  ASSERT_TRUE(ar.isOk());
  EXPECT_TRUE(verify(*ar).ok) << verify(*ar).toString();

  Topology one;
  one.name = "one";
  one.addVertex(VertexKind::kGpu, one.addNode("node0"));
  Result<Algorithm> single = build(ClassicAlgo::kRing, CollectiveKind::kReduceScatter, one);
  ASSERT_TRUE(single.isOk());
  EXPECT_TRUE(verify(*single).ok);
}

// The shipped machine descriptions (topologies/*.yaml, read by the topology layer): every ring,
// multiring and hierarchical algorithm verifies; on the DGX-1 the ring hops are NVLink only; on
// multi-node machines the ring crosses between nodes exactly once per node boundary.
TEST(NvlinkRings, ShippedTopologies) {
  const std::vector<std::string> names = {"dgx1-v100", "dgx-a100-x1", "dgx-a100-x2", "dgx-h100-x1",
                                          "dgx2-x1",   "ndv2-x2",     "pcie-2s4g"};
  for (const std::string& name : names) {
    // The topologies ship with the source tree: not finding one is a failure, not a reason to skip.
    Result<Topology> t = loadTopologyOrShipped(name);
    ASSERT_TRUE(t.isOk()) << name << ": " << t.status().toString();
    for (ClassicAlgo algo : {ClassicAlgo::kRing, ClassicAlgo::kMultiRing, ClassicAlgo::kHierarchical}) {
      for (CollectiveKind kind : classicCollectives(algo)) {
        Result<Algorithm> a = build(algo, kind, *t, kind == CollectiveKind::kAllReduce);
        ASSERT_TRUE(a.isOk()) << name << " " << classicAlgoName(algo) << ": " << a.status().toString();
        VerifyReport report = verify(*a);
        EXPECT_TRUE(report.ok) << name << " " << classicAlgoName(algo) << " " << collectiveName(kind) << "\n"
                               << report.toString();
      }
    }
    Result<Algorithm> ring = build(ClassicAlgo::kRing, CollectiveKind::kAllGather, *t);
    ASSERT_TRUE(ring.isOk());
    int node_crossings = 0;
    for (const RankProgram& p : ring->ranks) {
      const int peer = p.threadblocks[0].send_peer;
      const Vertex& me = t->vertices[t->gpuVertex(p.rank)];
      const Vertex& next = t->vertices[t->gpuVertex(peer)];
      node_crossings += me.node != next.node ? 1 : 0;
      if (name == "dgx1-v100") {
        EXPECT_TRUE(directNvlink(*t, p.rank, peer)) << p.rank << " -> " << peer;
      }
    }
    EXPECT_EQ(node_crossings, t->numNodes() > 1 ? t->numNodes() : 0) << name;
    // Hierarchical all-reduce: inside a node every ring hop is NVLink (NDv2 nodes are DGX-1s, whose
    // local order 0..7 is not an NVLink ring); across nodes a GPU talks to the same local index only.
    if (name == "ndv2-x2" || name == "dgx-a100-x2") {
      Result<Algorithm> h = build(ClassicAlgo::kHierarchical, CollectiveKind::kAllReduce, *t);
      ASSERT_TRUE(h.isOk());
      for (const RankProgram& p : h->ranks) {
        const Vertex& me = t->vertices[t->gpuVertex(p.rank)];
        for (const Threadblock& tb : p.threadblocks) {
          const Vertex& peer = t->vertices[t->gpuVertex(tb.send_peer)];
          if (peer.node == me.node) {
            EXPECT_TRUE(nvlinkConnected(*t, p.rank, tb.send_peer)) << name << ": " << p.rank << " -> " << tb.send_peer;
          } else {
            EXPECT_EQ(peer.local, me.local) << name;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace braid
