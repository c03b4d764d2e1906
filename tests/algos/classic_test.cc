// buildClassic: every algorithm, every collective it applies to, n = 1..17, in place and out of
// place, proven by verify(); plus structural facts counted by hand and the errors bad requests get.
#include "braid/classic.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "braid/classic_blocks.h"
#include "support/classic_requests.h"

namespace braid {
namespace {

constexpr int kMaxRanks = 17;

Result<Algorithm> build(ClassicAlgo algo, CollectiveKind kind, int n, bool in_place, const Topology* topo = nullptr,
                        int channels = 0, int chunk_factor = 0, int ranks_per_node = 0) {
  ClassicRequest request = testing::classicRequest(algo, kind, n, in_place);
  request.spec.chunk_factor = chunk_factor;
  request.topology = topo;
  request.num_channels = channels;
  request.ranks_per_node = ranks_per_node;
  return buildClassic(request);
}

// Builds, checks the declared modes include the requested one, and verifies every declared mode.
void expectVerified(ClassicAlgo algo, CollectiveKind kind, int n, bool in_place, const Topology* topo = nullptr,
                    int channels = 0, int ranks_per_node = 0) {
  const std::string what = std::string(classicAlgoName(algo)) + " " + collectiveName(kind) + " n=" + std::to_string(n) +
                           (in_place ? " in-place" : " out-of-place");
  Result<Algorithm> algorithm = build(algo, kind, n, in_place, topo, channels, 0, ranks_per_node);
  ASSERT_TRUE(algorithm.isOk()) << what << ": " << algorithm.status().toString();
  const Algorithm& a = *algorithm;
  EXPECT_EQ(a.num_ranks, n) << what;
  EXPECT_EQ(a.collective, kind) << what;
  EXPECT_EQ(a.collective_name, collectiveName(kind)) << what;
  EXPECT_EQ(a.provenance.generator, std::string("braid algo ") + classicAlgoName(algo)) << what;
  EXPECT_TRUE(in_place ? a.in_place : a.out_of_place) << what << ": requested mode not declared";
  ASSERT_EQ(static_cast<int>(a.ranks.size()), n) << what;
  for (const RankProgram& p : a.ranks) {
    for (const Threadblock& tb : p.threadblocks) {
      EXPECT_LT(tb.channel, a.num_channels) << what;
      if (static_cast<int>(tb.steps.size()) > algos::kAzureMaxSteps) {
        const bool noted = std::any_of(a.notes.begin(), a.notes.end(), [](const std::string& note) {
          return note.find("MSCCL_MAX_NUM_STEPS") != std::string::npos;
        });
        EXPECT_TRUE(noted) << what << ": a threadblock over 64 steps must be reported in the notes";
      }
      for (const Step& s : tb.steps) {
        EXPECT_LT(s.count, 72) << what << ": MSCCL cnt limit";
        EXPECT_LE(s.deps.size(), 1u) << what << ": MSCCL carries one dependency per step";
      }
    }
  }
  // The requested mode explicitly, then every declared mode.
  Result<CollectiveSpec> spec = a.spec(in_place);
  ASSERT_TRUE(spec.isOk()) << what << ": " << spec.status().toString();
  VerifyReport requested = verify(a, *spec);
  EXPECT_TRUE(requested.ok) << what << ":\n" << requested.toString();
  VerifyReport all = verify(a);
  EXPECT_TRUE(all.ok) << what << " (declared modes):\n" << all.toString();
  EXPECT_EQ(all.modes_checked.size(), static_cast<size_t>((a.in_place ? 1 : 0) + (a.out_of_place ? 1 : 0))) << what;
}

void sweep(ClassicAlgo algo, int channels = 0) {
  for (CollectiveKind kind : classicCollectives(algo)) {
    for (int n = 1; n <= kMaxRanks; ++n) {
      for (bool in_place : {false, true}) expectVerified(algo, kind, n, in_place, nullptr, channels);
    }
  }
}

TEST(ClassicSweep, Ring) { sweep(ClassicAlgo::kRing); }
TEST(ClassicSweep, RingThreeChannels) { sweep(ClassicAlgo::kRing, 3); }
TEST(ClassicSweep, MultiRing) { sweep(ClassicAlgo::kMultiRing); }
TEST(ClassicSweep, Direct) { sweep(ClassicAlgo::kDirect); }
TEST(ClassicSweep, DirectTwoChannels) { sweep(ClassicAlgo::kDirect, 2); }
TEST(ClassicSweep, Recursive) { sweep(ClassicAlgo::kRecursiveDoubling); }
TEST(ClassicSweep, DoubleBinaryTree) { sweep(ClassicAlgo::kDoubleBinaryTree); }
TEST(ClassicSweep, DoubleBinaryTreeTwoPairs) { sweep(ClassicAlgo::kDoubleBinaryTree, 4); }
TEST(ClassicSweep, Pairwise) { sweep(ClassicAlgo::kPairwise); }

// m nodes of g GPUs; NVLink inside a node through one NVSwitch, one NIC per GPU to a leaf switch.
Topology grid(int m, int g) {
  Topology t;
  t.name = "grid" + std::to_string(m) + "x" + std::to_string(g);
  const int leaf = -1;
  std::vector<int> nics;
  for (int q = 0; q < m; ++q) {
    const int node = t.addNode("");
    const int sw = t.addVertex(VertexKind::kNvSwitch, node, "nvs" + std::to_string(q));
    for (int j = 0; j < g; ++j) {
      const int gpu = t.addVertex(VertexKind::kGpu, node);
      t.addDuplexLink(gpu, sw, LinkKind::kNvlink, 300, 0.7, 12);
      const int nic = t.addVertex(VertexKind::kNic, node, "nic" + std::to_string(q) + "_" + std::to_string(j));
      t.addDuplexLink(gpu, nic, LinkKind::kPcie, 32, 1.0);
      nics.push_back(nic);
    }
  }
  (void)leaf;
  const int net = t.addVertex(VertexKind::kNetSwitch, -1, "leaf");
  for (int nic : nics) t.addDuplexLink(nic, net, LinkKind::kNet, 25, 2.6);
  return t;
}

TEST(ClassicSweep, Hierarchical) {
  const std::vector<std::pair<int, int>> shapes = {{1, 1}, {1, 4}, {2, 1}, {2, 2}, {2, 3},  {3, 2}, {3, 3},
                                                   {4, 4}, {2, 8}, {3, 5}, {5, 3}, {1, 17}, {17, 1}};
  for (auto [m, g] : shapes) {
    const Topology t = grid(m, g);
    for (CollectiveKind kind : classicCollectives(ClassicAlgo::kHierarchical)) {
      for (bool in_place : {false, true}) expectVerified(ClassicAlgo::kHierarchical, kind, m * g, in_place, &t);
    }
  }
}

// Tutel's 2DH all-to-all on every node shape, from ranks per node and from a topology's nodes (the degenerate
// shapes 1 x g and m x 1 included), in both modes.
TEST(ClassicSweep, TwoDimHierarchical) {
  const std::vector<std::pair<int, int>> shapes = {{2, 2}, {2, 4}, {3, 3}, {4, 8}, {1, 8}, {8, 1},
                                                   {1, 1}, {2, 3}, {3, 5}, {5, 3}, {2, 1}, {1, 2}};
  for (auto [m, g] : shapes) {
    const Topology t = grid(m, g);
    for (bool in_place : {false, true}) {
      expectVerified(ClassicAlgo::kTwoDimHierarchical, CollectiveKind::kAllToAll, m * g, in_place, nullptr, 0, g);
      expectVerified(ClassicAlgo::kTwoDimHierarchical, CollectiveKind::kAllToAll, m * g, in_place, &t);
      expectVerified(ClassicAlgo::kTwoDimHierarchical, CollectiveKind::kAllToAll, m * g, in_place, &t, 0, g);
    }
  }
}

// Per rank (q, j): to each node peer (q, j') one message of m chunks, to each (q', j) one of g chunks, and
// nothing to any rank of another node and another local index; the chunks received from node peers land in
// scratch (m > 1) and at most 2p scratch chunks are used. The degenerate shapes are the direct exchange.
TEST(ClassicStructure, TwoDimHierarchicalMessagesFollowTheNodeGrid) {
  const std::vector<std::pair<int, int>> shapes = {{2, 2}, {2, 4}, {3, 3}, {4, 8}, {1, 8}, {8, 1}};
  for (auto [m, g] : shapes) {
    const int n = m * g;
    Result<Algorithm> a =
        build(ClassicAlgo::kTwoDimHierarchical, CollectiveKind::kAllToAll, n, false, nullptr, 0, 0, g);
    ASSERT_TRUE(a.isOk()) << a.status().toString();
    EXPECT_EQ(a->num_chunks, n);
    EXPECT_TRUE(a->in_place && a->out_of_place);
    for (const RankProgram& p : a->ranks) {
      const int q = p.rank / g;
      const int j = p.rank % g;
      std::map<int, int> sent;      // peer -> chunks
      std::map<int, int> messages;  // peer -> send steps
      for (const Threadblock& tb : p.threadblocks) {
        for (const Step& s : tb.steps) {
          if (!opSends(s.type)) continue;
          sent[tb.send_peer] += s.count;
          messages[tb.send_peer] += 1;
        }
      }
      EXPECT_EQ(static_cast<int>(sent.size()), (g - 1) + (m - 1)) << m << "x" << g << " rank " << p.rank;
      for (const auto& [peer, chunks] : sent) {
        const int pq = peer / g;
        const int pj = peer % g;
        EXPECT_TRUE(pq == q || pj == j) << m << "x" << g << ": rank " << p.rank << " sends to " << peer;
        EXPECT_EQ(chunks, pq == q ? m : g) << m << "x" << g << ": rank " << p.rank << " to " << peer;
        EXPECT_EQ(messages[peer], 1) << m << "x" << g << ": rank " << p.rank << " to " << peer;
      }
      EXPECT_LE(p.scratch_chunks, 2 * n);
      if (m == 1 || g == 1) {
        EXPECT_EQ(p.scratch_chunks, 0) << m << "x" << g;
      }
    }
  }
}

// With their default chunk factor and channels, every algorithm fits Azure's default of 64 steps per
// threadblock up to 17 ranks.
TEST(ClassicStructure, DefaultsFitAzureStepLimit) {
  for (ClassicAlgo algo : {ClassicAlgo::kRing, ClassicAlgo::kMultiRing, ClassicAlgo::kDirect,
                           ClassicAlgo::kRecursiveDoubling, ClassicAlgo::kDoubleBinaryTree, ClassicAlgo::kPairwise}) {
    for (CollectiveKind kind : classicCollectives(algo)) {
      for (int n = 1; n <= kMaxRanks; ++n) {
        Result<Algorithm> a = build(algo, kind, n, false);
        ASSERT_TRUE(a.isOk());
        for (const RankProgram& p : a->ranks) {
          for (const Threadblock& tb : p.threadblocks) {
            EXPECT_LE(static_cast<int>(tb.steps.size()), algos::kAzureMaxSteps)
                << classicAlgoName(algo) << " " << collectiveName(kind) << " n=" << n;
          }
        }
      }
    }
  }
}

// ---- structure counted by hand ------------------------------------------------------------

std::vector<int> sendsPerRank(const Algorithm& a) {
  std::vector<int> sends(a.num_ranks, 0);
  for (const RankProgram& p : a.ranks) {
    for (const Threadblock& tb : p.threadblocks) {
      for (const Step& s : tb.steps) sends[p.rank] += opSends(s.type) ? 1 : 0;
    }
  }
  return sends;
}

TEST(ClassicStructure, RingAllReduceSendsTwiceNMinusOne) {
  for (int n : {2, 3, 5, 8, 13}) {
    Result<Algorithm> a = build(ClassicAlgo::kRing, CollectiveKind::kAllReduce, n, false);
    ASSERT_TRUE(a.isOk()) << a.status().toString();
    EXPECT_EQ(a->num_chunks, n);  // one chunk per rank-owned segment
    EXPECT_EQ(a->num_channels, 1);
    for (int s : sendsPerRank(*a)) EXPECT_EQ(s, 2 * (n - 1)) << "n=" << n;
    for (const RankProgram& p : a->ranks) {
      ASSERT_EQ(p.threadblocks.size(), 1u);
      EXPECT_EQ(p.threadblocks[0].send_peer, (p.rank + 1) % n);
      EXPECT_EQ(p.threadblocks[0].recv_peer, (p.rank + n - 1) % n);
      // send, n-2 rrs, rrcs, n-2 rcs, recv
      EXPECT_EQ(static_cast<int>(p.threadblocks[0].steps.size()), 2 * n - 1);
    }
    EXPECT_TRUE(a->in_place && a->out_of_place) << "ring all-reduce is valid in both modes";
  }
}

TEST(ClassicStructure, RingAllGatherAndDirectAllGatherSendNMinusOne) {
  for (int n : {2, 4, 7, 16}) {
    for (ClassicAlgo algo : {ClassicAlgo::kRing, ClassicAlgo::kDirect}) {
      Result<Algorithm> a = build(algo, CollectiveKind::kAllGather, n, false);
      ASSERT_TRUE(a.isOk()) << a.status().toString();
      EXPECT_EQ(a->num_chunks, n);
      for (int s : sendsPerRank(*a)) EXPECT_EQ(s, n - 1) << classicAlgoName(algo) << " n=" << n;
      EXPECT_TRUE(a->out_of_place);
      EXPECT_FALSE(a->in_place) << "the out-of-place program copies the own chunk: one mode only";
    }
  }
  // Direct: one threadblock per peer, each sending to and receiving from that peer.
  Result<Algorithm> a = build(ClassicAlgo::kDirect, CollectiveKind::kAllGather, 5, true);
  ASSERT_TRUE(a.isOk());
  for (const RankProgram& p : a->ranks) {
    std::set<int> peers;
    for (const Threadblock& tb : p.threadblocks) {
      EXPECT_EQ(tb.send_peer, tb.recv_peer);
      peers.insert(tb.send_peer);
    }
    EXPECT_EQ(peers.size(), 4u);
    EXPECT_EQ(peers.count(p.rank), 0u);
  }
}

TEST(ClassicStructure, DirectAllReduceIsReduceScatterThenAllGather) {
  const int n = 6;
  Result<Algorithm> a = build(ClassicAlgo::kDirect, CollectiveKind::kAllReduce, n, false);
  ASSERT_TRUE(a.isOk());
  EXPECT_EQ(a->num_chunks, n);
  for (int s : sendsPerRank(*a)) EXPECT_EQ(s, 2 * (n - 1));
}

TEST(ClassicStructure, PairwiseRoundKSendsToRPlusK) {
  const int n = 7;
  Result<Algorithm> a = build(ClassicAlgo::kPairwise, CollectiveKind::kAllToAll, n, false);
  ASSERT_TRUE(a.isOk());
  for (const RankProgram& p : a->ranks) {
    ASSERT_EQ(static_cast<int>(p.threadblocks.size()), n - 1);
    for (int k = 1; k < n; ++k) {
      const Threadblock& tb = p.threadblocks[k - 1];
      EXPECT_EQ(tb.send_peer, (p.rank + k) % n);
      EXPECT_EQ(tb.recv_peer, (p.rank - k + n) % n);
      // Round k waits for round k-1 (its first real step depends on the previous threadblock).
      if (k > 1) {
        const Step& first_send =
            *std::find_if(tb.steps.begin(), tb.steps.end(), [](const Step& s) { return s.type == OpType::kSend; });
        ASSERT_EQ(first_send.deps.size(), 1u);
        EXPECT_EQ(first_send.deps[0].tb, k - 2);
      }
    }
  }
  for (int s : sendsPerRank(*a)) EXPECT_EQ(s, n - 1);
  // In place the receives go through scratch at the sender's index: every index but the own one.
  Result<Algorithm> ip = build(ClassicAlgo::kPairwise, CollectiveKind::kAllToAll, n, true);
  ASSERT_TRUE(ip.isOk());
  EXPECT_TRUE(ip->in_place);
  EXPECT_FALSE(ip->out_of_place);
  for (const RankProgram& p : ip->ranks) EXPECT_EQ(p.scratch_chunks, p.rank == n - 1 ? n - 1 : n);
}

TEST(ClassicStructure, RecursiveDoublingRoundsAndFoldIn) {
  // Power of two: log2(n) exchanges with partners r ^ 1, r ^ 2, r ^ 4.
  Result<Algorithm> a = build(ClassicAlgo::kRecursiveDoubling, CollectiveKind::kAllReduce, 8, false);
  ASSERT_TRUE(a.isOk());
  for (const RankProgram& p : a->ranks) {
    ASSERT_EQ(p.threadblocks.size(), 3u);
    for (int j = 0; j < 3; ++j) EXPECT_EQ(p.threadblocks[j].send_peer, p.rank ^ (1 << j));
  }
  for (int s : sendsPerRank(*a)) EXPECT_EQ(s, 3);
  // n = 6: p' = 4, ranks 0 and 2 fold into 1 and 3; they send once and receive once.
  Result<Algorithm> f = build(ClassicAlgo::kRecursiveDoubling, CollectiveKind::kAllReduce, 6, false);
  ASSERT_TRUE(f.isOk());
  const std::vector<int> sends = sendsPerRank(*f);
  EXPECT_EQ(sends, (std::vector<int>{1, 3, 1, 3, 2, 2}));
  EXPECT_EQ(f->ranks[0].threadblocks.size(), 1u);
  EXPECT_EQ(f->ranks[0].threadblocks[0].send_peer, 1);
  ASSERT_FALSE(f->notes.empty());
  EXPECT_NE(f->notes[0].find("not a power of two"), std::string::npos);
  // Reduce-scatter n = 8: messages halve: 4, 2, 1 chunks.
  Result<Algorithm> rs = build(ClassicAlgo::kRecursiveDoubling, CollectiveKind::kReduceScatter, 8, false);
  ASSERT_TRUE(rs.isOk());
  std::vector<int> counts;
  for (const Threadblock& tb : rs->ranks[5].threadblocks) {
    for (const Step& s : tb.steps) {
      if (s.type == OpType::kSend) counts.push_back(s.count);
    }
  }
  EXPECT_EQ(counts, (std::vector<int>{4, 2, 1}));
}

TEST(ClassicStructure, BinaryTreesByHand) {
  // n = 8, tree 0 over positions 1..8 (rank = position-1): root 8 -> 4 -> {2, 6}, 2 -> {1, 3}, 6 -> {5, 7}.
  EXPECT_EQ(algos::binaryTreeParents(8, 0), (std::vector<int>{1, 3, 1, 7, 5, 3, 5, -1}));
  // Tree 1: the same shape with position p holding rank (p + 6) mod 8.
  EXPECT_EQ(algos::binaryTreeParents(8, 7), (std::vector<int>{2, 0, 6, 4, 2, 4, -1, 0}));
  // n = 5: root 4 -> 2 -> {1, 3}, 4 -> 5 (rank = position-1).
  EXPECT_EQ(algos::binaryTreeParents(5, 0), (std::vector<int>{1, 3, 1, -1, 3}));
  // Even n: a rank forwarding data (having children) in one tree is a leaf in the other.
  for (int n = 2; n <= 16; n += 2) {
    const auto c0 = algos::binaryTreeChildren(n, 0);
    const auto c1 = algos::binaryTreeChildren(n, n - 1);
    for (int r = 0; r < n; ++r) {
      EXPECT_FALSE(!c0[r].empty() && !c1[r].empty()) << "n=" << n << " rank " << r << " is interior in both trees";
    }
  }
  Result<Algorithm> a = build(ClassicAlgo::kDoubleBinaryTree, CollectiveKind::kAllReduce, 8, false);
  ASSERT_TRUE(a.isOk());
  EXPECT_EQ(a->num_chunks, 2);
  EXPECT_EQ(a->num_channels, 2);
  // Each tree: 7 sends up + 7 sends down = 14; both trees: 28.
  int total = 0;
  for (int s : sendsPerRank(*a)) total += s;
  EXPECT_EQ(total, 2 * 2 * (8 - 1));
}

TEST(ClassicStructure, OneRank) {
  for (ClassicAlgo algo : {ClassicAlgo::kRing, ClassicAlgo::kDirect, ClassicAlgo::kRecursiveDoubling}) {
    Result<Algorithm> oop = build(algo, CollectiveKind::kAllGather, 1, false);
    ASSERT_TRUE(oop.isOk());
    ASSERT_EQ(oop->ranks[0].threadblocks.size(), 1u);
    ASSERT_EQ(oop->ranks[0].threadblocks[0].steps.size(), 1u);
    EXPECT_EQ(oop->ranks[0].threadblocks[0].steps[0].type, OpType::kCopy);
    Result<Algorithm> ip = build(algo, CollectiveKind::kAllGather, 1, true);
    ASSERT_TRUE(ip.isOk());
    EXPECT_TRUE(ip->ranks[0].threadblocks.empty()) << "in place on one rank there is nothing to do";
  }
}

TEST(ClassicStructure, ChunkFactorMultiplesScaleEveryStep) {
  Result<Algorithm> a = build(ClassicAlgo::kRing, CollectiveKind::kAllReduce, 4, false, nullptr, 0, 12);
  ASSERT_TRUE(a.isOk()) << a.status().toString();
  EXPECT_EQ(a->num_chunks, 12);
  for (const Step& s : a->ranks[0].threadblocks[0].steps) EXPECT_EQ(s.count, 3);
  EXPECT_TRUE(verify(*a).ok) << verify(*a).toString();
  // 100 chunks per message would exceed cnt < 72: the builder splits them on both ends.
  Result<Algorithm> big = build(ClassicAlgo::kRecursiveDoubling, CollectiveKind::kAllGather, 4, false, nullptr, 0, 50);
  ASSERT_TRUE(big.isOk()) << big.status().toString();
  VerifyReport report = verify(*big);
  EXPECT_TRUE(report.ok) << report.toString();
  // Ring all-to-all on 17 ranks with 10 chunks per piece: messages of up to 160 chunks split in
  // three, which takes a threadblock past 64 steps; the notes say so.
  Result<Algorithm> split = build(ClassicAlgo::kRing, CollectiveKind::kAllToAll, 17, false, nullptr, 0, 10);
  ASSERT_TRUE(split.isOk()) << split.status().toString();
  EXPECT_TRUE(verify(*split).ok) << verify(*split).toString();
  size_t longest = 0;
  for (const RankProgram& p : split->ranks) {
    for (const Threadblock& tb : p.threadblocks) longest = std::max(longest, tb.steps.size());
  }
  EXPECT_GT(longest, 64u);
  ASSERT_FALSE(split->notes.empty());
  EXPECT_NE(split->notes.back().find("MSCCL_MAX_NUM_STEPS"), std::string::npos);
}

TEST(ClassicStructure, HierarchicalAllReduceUsesCounterpartsAcrossNodes) {
  const Topology t = grid(2, 4);
  Result<Algorithm> a = build(ClassicAlgo::kHierarchical, CollectiveKind::kAllReduce, 8, false, &t);
  ASSERT_TRUE(a.isOk()) << a.status().toString();
  EXPECT_EQ(a->num_chunks, 8);
  for (const RankProgram& p : a->ranks) {
    for (const Threadblock& tb : p.threadblocks) {
      const bool crosses = tb.send_peer / 4 != p.rank / 4;
      // Across nodes a rank only talks to the GPU with the same local index.
      if (crosses) {
        EXPECT_EQ(tb.send_peer % 4, p.rank % 4);
      }
    }
  }
  // Inter-node: ring all-reduce of m = 2 chunks: 2(m-1) = 2 sends; intra: 2(g-1) = 6.
  for (int s : sendsPerRank(*a)) EXPECT_EQ(s, 8);
}

// The sweep above can fail: one wrong offset or a missing dependency is caught.
TEST(ClassicStructure, VerifierCatchesABrokenRing) {
  Result<Algorithm> a = build(ClassicAlgo::kRing, CollectiveKind::kAllReduce, 5, false);
  ASSERT_TRUE(a.isOk());
  Algorithm wrong_offset = *a;
  Step& rrs = wrong_offset.ranks[2].threadblocks[0].steps[1];
  ASSERT_EQ(rrs.type, OpType::kRecvReduceSend);
  rrs.src_off = (rrs.src_off + 1) % 5;
  VerifyReport report = verify(wrong_offset);
  EXPECT_FALSE(report.ok);
  // Direct reduce-scatter without its chain dependency: two receives reduce into one chunk at once.
  Result<Algorithm> d = build(ClassicAlgo::kDirect, CollectiveKind::kReduceScatter, 4, false);
  ASSERT_TRUE(d.isOk());
  Algorithm racy = *d;
  for (Threadblock& tb : racy.ranks[0].threadblocks) {
    for (Step& s : tb.steps) s.deps.clear();
  }
  VerifyReport race = verify(racy);
  ASSERT_FALSE(race.ok);
  bool found_race = false;
  for (const VerifyIssue& issue : race.issues) found_race |= issue.kind == IssueKind::kRace && issue.rank == 0;
  EXPECT_TRUE(found_race) << race.toString();
}

// ---- errors ---------------------------------------------------------------------------------

TEST(ClassicErrors, BadRequestsSayWhy) {
  Result<Algorithm> tree_ag = build(ClassicAlgo::kDoubleBinaryTree, CollectiveKind::kAllGather, 4, false);
  ASSERT_FALSE(tree_ag.isOk());
  EXPECT_EQ(tree_ag.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(tree_ag.status().message().find("allreduce"), std::string::npos);

  Result<Algorithm> hier = build(ClassicAlgo::kHierarchical, CollectiveKind::kAllReduce, 8, false);
  ASSERT_FALSE(hier.isOk());
  EXPECT_NE(hier.status().message().find("topology"), std::string::npos);

  Result<Algorithm> zero = build(ClassicAlgo::kRing, CollectiveKind::kAllGather, 0, false);
  EXPECT_FALSE(zero.isOk());

  Result<Algorithm> factor = build(ClassicAlgo::kRing, CollectiveKind::kAllReduce, 4, false, nullptr, 0, 6);
  ASSERT_FALSE(factor.isOk());
  EXPECT_NE(factor.status().message().find("multiple of 4"), std::string::npos);

  Result<Algorithm> channels = build(ClassicAlgo::kRing, CollectiveKind::kAllGather, 4, false, nullptr, 40);
  EXPECT_FALSE(channels.isOk());
  Result<Algorithm> rd_channels =
      build(ClassicAlgo::kRecursiveDoubling, CollectiveKind::kAllGather, 4, false, nullptr, 2);
  EXPECT_FALSE(rd_channels.isOk());
  Result<Algorithm> odd_tree = build(ClassicAlgo::kDoubleBinaryTree, CollectiveKind::kAllReduce, 4, false, nullptr, 3);
  EXPECT_FALSE(odd_tree.isOk());

  const Topology t = grid(2, 4);
  Result<Algorithm> mismatch = build(ClassicAlgo::kRing, CollectiveKind::kAllGather, 6, false, &t);
  ASSERT_FALSE(mismatch.isOk());
  EXPECT_NE(mismatch.status().message().find("8 GPUs"), std::string::npos);

  Topology uneven = grid(1, 3);
  const int node = uneven.addNode("odd");
  uneven.addVertex(VertexKind::kGpu, node);
  Result<Algorithm> bad_grid = build(ClassicAlgo::kHierarchical, CollectiveKind::kAllGather, 4, false, &uneven);
  ASSERT_FALSE(bad_grid.isOk());
  EXPECT_NE(bad_grid.status().message().find("different GPU counts"), std::string::npos);

  // 2dh: no node shape, a shape that does not divide the ranks, a shape that contradicts the topology.
  Result<Algorithm> no_shape = build(ClassicAlgo::kTwoDimHierarchical, CollectiveKind::kAllToAll, 8, false);
  ASSERT_FALSE(no_shape.isOk());
  EXPECT_NE(no_shape.status().message().find("node shape"), std::string::npos) << no_shape.status().toString();
  Result<Algorithm> not_dividing =
      build(ClassicAlgo::kTwoDimHierarchical, CollectiveKind::kAllToAll, 10, false, nullptr, 0, 0, 4);
  ASSERT_FALSE(not_dividing.isOk());
  EXPECT_NE(not_dividing.status().message().find("10 ranks do not split into nodes of 4"), std::string::npos)
      << not_dividing.status().toString();
  Result<Algorithm> contradicts =
      build(ClassicAlgo::kTwoDimHierarchical, CollectiveKind::kAllToAll, 8, false, &t, 0, 0, 2);
  ASSERT_FALSE(contradicts.isOk());
  EXPECT_NE(contradicts.status().message().find("2 ranks per node contradicts topology 'grid2x4'"), std::string::npos)
      << contradicts.status().toString();
  Result<Algorithm> not_alltoall =
      build(ClassicAlgo::kTwoDimHierarchical, CollectiveKind::kAllReduce, 8, false, nullptr, 0, 0, 4);
  ASSERT_FALSE(not_alltoall.isOk());
  Result<Algorithm> uneven_2dh = build(ClassicAlgo::kTwoDimHierarchical, CollectiveKind::kAllToAll, 4, false, &uneven);
  ASSERT_FALSE(uneven_2dh.isOk());
}

TEST(ClassicNames, RoundTrip) {
  for (ClassicAlgo algo : {ClassicAlgo::kRing, ClassicAlgo::kMultiRing, ClassicAlgo::kDirect,
                           ClassicAlgo::kRecursiveDoubling, ClassicAlgo::kDoubleBinaryTree, ClassicAlgo::kPairwise,
                           ClassicAlgo::kHierarchical, ClassicAlgo::kTwoDimHierarchical}) {
    Result<ClassicAlgo> parsed = parseClassicAlgo(classicAlgoName(algo));
    ASSERT_TRUE(parsed.isOk());
    EXPECT_EQ(*parsed, algo);
  }
  EXPECT_FALSE(parseClassicAlgo("bruck").isOk());
}

}  // namespace
}  // namespace braid
