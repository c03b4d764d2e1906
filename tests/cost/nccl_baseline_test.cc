// NCCL's algorithms in the IR (ncclBaselineAlgorithm): every one verifies, sits on its topology, and uses the
// channel count of NCCL's search (ncclSystem); rings follow the hardware NCCL's rings follow.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "braid/nccl_model.h"
#include "braid/topology.h"

namespace braid {
namespace {

Topology shipped(const std::string& name) {
  Result<Topology> t = loadTopologyOrShipped(name);
  EXPECT_TRUE(t.isOk()) << t.status().toString();
  return t.isOk() ? std::move(t).value() : Topology{};
}

struct Case {
  CollectiveKind collective;
  NcclAlgo algo;
};

TEST(NcclBaseline, VerifiesAndUsesNcclsChannels) {
  const Case cases[] = {{CollectiveKind::kAllGather, NcclAlgo::kRing},
                        {CollectiveKind::kReduceScatter, NcclAlgo::kRing},
                        {CollectiveKind::kAllReduce, NcclAlgo::kRing},
                        {CollectiveKind::kAllReduce, NcclAlgo::kTree},
                        {CollectiveKind::kAllToAll, NcclAlgo::kRing}};
  for (const char* name : {"dgx1-v100", "dgx-a100-x1", "dgx-h100-x2", "ndv2-x2"}) {
    const Topology t = shipped(name);
    Result<NcclSystem> sys = ncclSystem(t);
    ASSERT_TRUE(sys.isOk()) << sys.status().toString();
    for (const Case& c : cases) {
      for (bool in_place : {false, true}) {
        SCOPED_TRACE(std::string(name) + " " + collectiveName(c.collective) + " " + ncclAlgoName(c.algo) +
                     (in_place ? " in-place" : " out-of-place"));
        Result<Algorithm> a = ncclBaselineAlgorithm(t, c.collective, c.algo, in_place, Protocol::kSimple);
        ASSERT_TRUE(a.isOk()) << a.status().toString();
        EXPECT_EQ(a->num_ranks, t.numGpus());
        EXPECT_EQ(a->collective, c.collective);
        EXPECT_TRUE(in_place ? a->in_place : a->out_of_place);
        const VerifyReport report = verify(*a);
        EXPECT_TRUE(report.ok) << report.toString();
        const Status placed = checkPlacement(*a, t);
        EXPECT_TRUE(placed.isOk()) << placed.message();
        const int want = c.collective == CollectiveKind::kAllToAll ? sys->p2p_channels_per_peer
                         : c.algo == NcclAlgo::kTree               ? sys->tree.channels
                                                                   : sys->ring.channels;
        std::set<int> used;
        for (const RankProgram& p : a->ranks) {
          for (const Threadblock& tb : p.threadblocks) used.insert(tb.channel);
        }
        if (c.collective == CollectiveKind::kAllToAll) {
          // NCCL's p2p channels per peer, plus one per forward of a relayed pair (tests/cost/nccl_p2p_test.cc).
          EXPECT_GE(a->num_channels, want);
          for (int ch = 0; ch < want; ++ch) EXPECT_TRUE(used.count(ch)) << "channel " << ch;
        } else {
          EXPECT_EQ(a->num_channels, want);
          EXPECT_EQ(static_cast<int>(used.size()), want);
        }
      }
    }
  }
}

TEST(NcclBaseline, Dgx1RingsHopOverDirectNvlink) {
  const Topology t = shipped("dgx1-v100");
  Result<Algorithm> a = ncclBaselineAlgorithm(t, CollectiveKind::kAllReduce, NcclAlgo::kRing, false, Protocol::kLL);
  ASSERT_TRUE(a.isOk());
  EXPECT_EQ(a->protocol, Protocol::kLL);
  for (const Transfer& x : algorithmTransfers(*a, &t)) {
    ASSERT_TRUE(x.route.has_value());
    EXPECT_EQ(x.route->links.size(), 1u) << x.src << " -> " << x.dst;
    EXPECT_EQ(t.links[x.route->links[0]].kind, LinkKind::kNvlink) << x.src << " -> " << x.dst;
  }
}

TEST(NcclBaseline, RingsCrossNodesBetweenTheNicsGpus) {
  // ndv2-x2: one NIC per node on the PCIe switch of GPUs 2 and 3 (local), so NCCL's channel enters and leaves
  // each node through those two GPUs: every inter-node send goes from a local GPU 2/3 to a local GPU 2/3.
  const Topology t = shipped("ndv2-x2");
  std::set<int> near;
  for (const NicAffinity& a : nicAffinity(t)) {
    if (a.path_class == "PIX") near.insert(a.rank);  // the others reach the NIC through the CPU
  }
  ASSERT_EQ(near, (std::set<int>{2, 3, 10, 11}));
  Result<Algorithm> a = ncclBaselineAlgorithm(t, CollectiveKind::kAllGather, NcclAlgo::kRing, false, Protocol::kSimple);
  ASSERT_TRUE(a.isOk());
  int crossing = 0;
  for (const Transfer& x : algorithmTransfers(*a, &t)) {
    const int src_node = t.vertices[t.gpuVertex(x.src)].node;
    const int dst_node = t.vertices[t.gpuVertex(x.dst)].node;
    if (src_node == dst_node) continue;
    ++crossing;
    EXPECT_TRUE(near.count(x.src) && near.count(x.dst)) << x.src << " -> " << x.dst;
  }
  EXPECT_EQ(crossing, 2);  // one ring (one channel): node 0 -> node 1 and back
}

TEST(NcclBaseline, TreeJoinsNodeChainsAtTheirHeads) {
  // dgx-h100-x2, all-reduce Tree: per channel one inter-node edge (a binary tree over 2 nodes), used both ways.
  const Topology t = shipped("dgx-h100-x2");
  Result<Algorithm> a = ncclBaselineAlgorithm(t, CollectiveKind::kAllReduce, NcclAlgo::kTree, false, Protocol::kSimple);
  ASSERT_TRUE(a.isOk());
  const int channels = ncclSystem(t)->tree.channels;
  int crossing = 0;
  for (const RankProgram& p : a->ranks) {
    for (const Threadblock& tb : p.threadblocks) {
      if (tb.send_peer < 0) continue;
      if (t.vertices[t.gpuVertex(p.rank)].node != t.vertices[t.gpuVertex(tb.send_peer)].node) ++crossing;
    }
  }
  EXPECT_EQ(crossing, 2 * channels);
}

TEST(NcclBaseline, InNetworkAlgorithmsAreUnsupported) {
  const Topology t = shipped("dgx-h100-x1");
  for (NcclAlgo algo :
       {NcclAlgo::kNvls, NcclAlgo::kNvlsTree, NcclAlgo::kCollNetDirect, NcclAlgo::kCollNetChain, NcclAlgo::kPat}) {
    Result<Algorithm> a = ncclBaselineAlgorithm(t, CollectiveKind::kAllReduce, algo, false, Protocol::kSimple);
    ASSERT_FALSE(a.isOk());
    EXPECT_EQ(a.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(a.status().message().find(ncclAlgoName(algo)), std::string::npos) << a.status().message();
  }
  Result<Algorithm> tree_ag =
      ncclBaselineAlgorithm(t, CollectiveKind::kAllGather, NcclAlgo::kTree, false, Protocol::kSimple);
  ASSERT_FALSE(tree_ag.isOk());
  EXPECT_EQ(tree_ag.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace braid
