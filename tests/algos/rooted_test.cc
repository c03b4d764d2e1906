// buildClassic for the rooted collectives (broadcast, reduce): every algorithm that builds them, n = 1..17,
// every root, in place and out of place, proven by verify(); plus the chain, star and binomial-tree shapes
// counted by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "braid/classic.h"
#include "braid/classic_blocks.h"
#include "braid/topology.h"
#include "support/classic_requests.h"

namespace braid {
namespace {

constexpr int kMaxRanks = 17;
constexpr CollectiveKind kBcast = CollectiveKind::kBroadcast;
constexpr CollectiveKind kReduce = CollectiveKind::kReduce;

Result<Algorithm> build(ClassicAlgo algo, CollectiveKind kind, int n, int root, bool in_place, int channels = 0,
                        const Topology* topology = nullptr, int chunk_factor = 0) {
  ClassicRequest request = testing::classicRequest(algo, kind, n, in_place, root);
  request.spec.chunk_factor = chunk_factor;
  request.num_channels = channels;
  request.topology = topology;
  return buildClassic(request);
}

std::string describe(ClassicAlgo algo, CollectiveKind kind, int n, int root, bool in_place, int channels) {
  return std::string(classicAlgoName(algo)) + " " + collectiveName(kind) + " n=" + std::to_string(n) +
         " root=" + std::to_string(root) + " channels=" + std::to_string(channels) +
         (in_place ? " in-place" : " out-of-place");
}

// Builds and verifies the requested mode and every declared mode; true when all of it holds.
bool verifiedBuild(ClassicAlgo algo, CollectiveKind kind, int n, int root, bool in_place, int channels,
                   const Topology* topology = nullptr) {
  const std::string what = describe(algo, kind, n, root, in_place, channels);
  Result<Algorithm> a = build(algo, kind, n, root, in_place, channels, topology);
  EXPECT_TRUE(a.isOk()) << what << ": " << a.status().toString();
  if (!a.isOk()) return false;
  bool good = true;
  auto expect = [&](bool condition, const std::string& why) {
    EXPECT_TRUE(condition) << what << ": " << why;
    good = good && condition;
  };
  expect(a->root == root, "root not recorded");
  expect(a->collective == kind, "wrong collective");
  expect(in_place ? a->in_place : a->out_of_place, "requested mode not declared");
  for (const RankProgram& p : a->ranks) {
    for (const Threadblock& tb : p.threadblocks) {
      for (const Step& s : tb.steps) {
        expect(s.count < 72, "MSCCL cnt limit");
        expect(s.deps.size() <= 1, "MSCCL carries one dependency per step");
      }
    }
  }
  Result<CollectiveSpec> spec = a->spec(in_place);
  expect(spec.isOk() && spec->root == root, "spec of the requested mode");
  if (!spec.isOk()) return false;
  VerifyReport requested = verify(*a, *spec);
  expect(requested.ok, requested.toString());
  VerifyReport all = verify(*a);
  expect(all.ok, "declared modes:\n" + all.toString());
  return good;
}

struct Config {
  ClassicAlgo algo;
  int channels;
};

// Every algorithm and channel count that builds broadcast and reduce, as in classic_test's sweeps.
const std::vector<Config> kConfigs = {
    {ClassicAlgo::kRing, 0},   {ClassicAlgo::kRing, 3},   {ClassicAlgo::kMultiRing, 0},
    {ClassicAlgo::kDirect, 0}, {ClassicAlgo::kDirect, 2}, {ClassicAlgo::kRecursiveDoubling, 0},
};

TEST(RootedSweep, EveryRootEveryModeVerifies) {
  int verified = 0;
  for (const Config& config : kConfigs) {
    const std::vector<CollectiveKind> applies = classicCollectives(config.algo);
    for (CollectiveKind kind : {kBcast, kReduce}) {
      ASSERT_NE(std::find(applies.begin(), applies.end(), kind), applies.end())
          << classicAlgoName(config.algo) << " should build " << collectiveName(kind);
      for (int n = 1; n <= kMaxRanks; ++n) {
        for (int root = 0; root < n; ++root) {
          for (bool in_place : {false, true}) {
            verified += verifiedBuild(config.algo, kind, n, root, in_place, config.channels) ? 1 : 0;
          }
        }
      }
    }
  }
  // 6 configurations x 2 collectives x (1 + 2 + ... + 17 = 17*18/2 = 153 (n, root) pairs) x 2 modes = 3672.
  EXPECT_EQ(verified, 6 * 2 * (kMaxRanks * (kMaxRanks + 1) / 2) * 2);
  EXPECT_EQ(verified, 3672);
}

// On the DGX-1 the ring follows NVLink: every hop of the chain is a direct NVLink link.
TEST(RootedSweep, Dgx1RingsFollowNvlink) {
  Result<Topology> t = loadTopologyOrShipped("dgx1-v100");
  ASSERT_TRUE(t.isOk()) << t.status().toString();
  for (ClassicAlgo algo : {ClassicAlgo::kRing, ClassicAlgo::kMultiRing}) {
    for (CollectiveKind kind : {kBcast, kReduce}) {
      for (int root = 0; root < 8; ++root) {
        for (bool in_place : {false, true}) {
          EXPECT_TRUE(verifiedBuild(algo, kind, 8, root, in_place, 0, &*t));
          Result<Algorithm> a = build(algo, kind, 8, root, in_place, 0, &*t);
          ASSERT_TRUE(a.isOk());
          EXPECT_TRUE(checkPlacement(*a, *t).isOk());
          for (const RankProgram& p : a->ranks) {
            for (const Threadblock& tb : p.threadblocks) {
              if (tb.send_peer < 0) continue;
              bool nvlink = false;
              for (int li : t->linksBetween(t->gpuVertex(p.rank), t->gpuVertex(tb.send_peer))) {
                nvlink |= t->links[li].kind == LinkKind::kNvlink;
              }
              EXPECT_TRUE(nvlink) << classicAlgoName(algo) << " rank " << p.rank << " -> " << tb.send_peer;
            }
          }
        }
      }
    }
  }
}

// ---- shapes counted by hand -----------------------------------------------------------------

struct Counts {
  std::vector<int> sends, recvs;
};

Counts count(const Algorithm& a) {
  Counts c{std::vector<int>(a.num_ranks, 0), std::vector<int>(a.num_ranks, 0)};
  for (const RankProgram& p : a.ranks) {
    for (const Threadblock& tb : p.threadblocks) {
      for (const Step& s : tb.steps) {
        c.sends[p.rank] += opSends(s.type) ? 1 : 0;
        c.recvs[p.rank] += opReceives(s.type) ? 1 : 0;
      }
    }
  }
  return c;
}

std::vector<OpType> types(const Threadblock& tb) {
  std::vector<OpType> t;
  for (const Step& s : tb.steps) t.push_back(s.type);
  return t;
}

// n = 6, root 2, rank order: broadcast 2 -> 3 -> 4 -> 5 -> 0 -> 1; reduce 3 -> 4 -> 5 -> 0 -> 1 -> 2.
TEST(RootedStructure, RingChains) {
  Result<Algorithm> b = build(ClassicAlgo::kRing, kBcast, 6, 2, false);
  ASSERT_TRUE(b.isOk()) << b.status().toString();
  EXPECT_TRUE(b->out_of_place);
  EXPECT_FALSE(b->in_place) << "the root's copy makes it an out-of-place program";
  EXPECT_EQ(b->num_chunks, 1);
  const std::vector<int> next = {1, -1, 3, 4, 5, 0};  // rank 1 ends the chain
  const std::vector<int> prev = {5, 0, -1, 2, 3, 4};  // the root receives nothing
  for (const RankProgram& p : b->ranks) {
    ASSERT_EQ(p.threadblocks.size(), 1u);
    EXPECT_EQ(p.threadblocks[0].send_peer, next[p.rank]) << p.rank;
    EXPECT_EQ(p.threadblocks[0].recv_peer, prev[p.rank]) << p.rank;
  }
  EXPECT_EQ(types(b->ranks[2].threadblocks[0]), (std::vector<OpType>{OpType::kSend, OpType::kCopy}));
  EXPECT_EQ(types(b->ranks[4].threadblocks[0]), (std::vector<OpType>{OpType::kRecvCopySend}));
  EXPECT_EQ(types(b->ranks[1].threadblocks[0]), (std::vector<OpType>{OpType::kRecv}));
  Result<Algorithm> bi = build(ClassicAlgo::kRing, kBcast, 6, 2, true);
  ASSERT_TRUE(bi.isOk());
  EXPECT_TRUE(bi->in_place && !bi->out_of_place);
  EXPECT_EQ(types(bi->ranks[2].threadblocks[0]), (std::vector<OpType>{OpType::kSend})) << "in place: no copy";

  Result<Algorithm> r = build(ClassicAlgo::kRing, kReduce, 6, 2, false);
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_TRUE(r->in_place && r->out_of_place) << "only the root writes, after reading: one program for both";
  const std::vector<int> rnext = {1, 2, -1, 4, 5, 0};
  const std::vector<int> rprev = {5, 0, 1, -1, 3, 4};
  for (const RankProgram& p : r->ranks) {
    ASSERT_EQ(p.threadblocks.size(), 1u);
    EXPECT_EQ(p.threadblocks[0].send_peer, rnext[p.rank]) << p.rank;
    EXPECT_EQ(p.threadblocks[0].recv_peer, rprev[p.rank]) << p.rank;
  }
  EXPECT_EQ(types(r->ranks[3].threadblocks[0]), (std::vector<OpType>{OpType::kSend}));
  EXPECT_EQ(types(r->ranks[0].threadblocks[0]), (std::vector<OpType>{OpType::kRecvReduceSend}));
  EXPECT_EQ(types(r->ranks[2].threadblocks[0]), (std::vector<OpType>{OpType::kRecvReduceCopy}));
  // K rings: ring k moves chunk k on channel k; every rank but the chain's end sends once per ring.
  Result<Algorithm> k3 = build(ClassicAlgo::kRing, kBcast, 5, 4, false, 3);
  ASSERT_TRUE(k3.isOk());
  EXPECT_EQ(k3->num_chunks, 3);
  EXPECT_EQ(k3->num_channels, 3);
  EXPECT_EQ(count(*k3).sends, (std::vector<int>{3, 3, 3, 0, 3}));
}

TEST(RootedStructure, DirectStar) {
  const int n = 7;
  const int root = 3;
  Result<Algorithm> b = build(ClassicAlgo::kDirect, kBcast, n, root, false);
  ASSERT_TRUE(b.isOk()) << b.status().toString();
  Counts c = count(*b);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(c.sends[r], r == root ? n - 1 : 0) << r;
    EXPECT_EQ(c.recvs[r], r == root ? 0 : 1) << r;
  }
  std::set<int> peers;
  for (const Threadblock& tb : b->ranks[root].threadblocks) {
    if (tb.send_peer >= 0) {
      EXPECT_TRUE(peers.insert(tb.send_peer).second) << "one threadblock per peer";
    }
  }
  EXPECT_EQ(peers.size(), static_cast<size_t>(n - 1));

  Result<Algorithm> r = build(ClassicAlgo::kDirect, kReduce, n, root, true);
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_TRUE(r->in_place && r->out_of_place);
  c = count(*r);
  for (int q = 0; q < n; ++q) {
    EXPECT_EQ(c.sends[q], q == root ? 0 : 1) << q;
    EXPECT_EQ(c.recvs[q], q == root ? n - 1 : 0) << q;
  }
  // The root's reductions form one chain: each waits for the one before, the first reads the input.
  const auto& tbs = r->ranks[root].threadblocks;
  ASSERT_EQ(static_cast<int>(tbs.size()), n - 1);
  for (size_t i = 0; i < tbs.size(); ++i) {
    ASSERT_EQ(tbs[i].steps.size(), 1u);
    const Step& s = tbs[i].steps[0];
    EXPECT_EQ(s.type, OpType::kRecvReduceCopy);
    EXPECT_EQ(s.dst_buf, BufferKind::kOutput);
    EXPECT_EQ(s.src_buf, i == 0 ? BufferKind::kInput : BufferKind::kOutput);
    if (i == 0) {
      EXPECT_TRUE(s.deps.empty());
    } else {
      ASSERT_EQ(s.deps.size(), 1u);
      EXPECT_EQ(s.deps[0].tb, static_cast<int>(i) - 1);
    }
  }
  // Without the chain two arrivals reduce into the root's output at once: the verifier says so.
  Algorithm racy = *r;
  for (Threadblock& tb : racy.ranks[root].threadblocks) {
    for (Step& s : tb.steps) s.deps.clear();
  }
  VerifyReport race = verify(racy);
  ASSERT_FALSE(race.ok);
  bool found = false;
  for (const VerifyIssue& issue : race.issues) found |= issue.kind == IssueKind::kRace && issue.rank == root;
  EXPECT_TRUE(found) << race.toString();
}

// Rounds of the broadcast when every rank sends to one child per round, largest subtree (last child
// listed) first: a child receives in round (its parent's round) + (its place in the parent's send order).
int rounds(int n, int root, const std::vector<std::vector<int>>& children) {
  std::vector<int> round(n, -1);
  round[root] = 0;
  int last = 0;
  for (int v = 0; v < n; ++v) {  // relative rank order: a parent (v minus its lowest bit) comes first
    const int r = (root + v) % n;
    EXPECT_GE(round[r], 0) << "rank " << r << " reached before its parent";
    const std::vector<int>& kids = children[r];
    for (size_t i = 0; i < kids.size(); ++i) {
      round[kids[i]] = round[r] + static_cast<int>(kids.size() - i);
      last = std::max(last, round[kids[i]]);
    }
  }
  return last;
}

TEST(RootedStructure, BinomialTreesByHand) {
  // n = 8, root 0: 0 -> {1, 2, 4}, 2 -> 3, 4 -> {5, 6}, 6 -> 7.
  EXPECT_EQ(algos::binomialParents(8, 0), (std::vector<int>{-1, 0, 0, 2, 0, 4, 4, 6}));
  EXPECT_EQ(algos::binomialChildren(8, 0)[0], (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(algos::binomialChildren(8, 0)[4], (std::vector<int>{5, 6}));
  // n = 6, root 3: relative ranks v = (r - 3) mod 6 with parents 1->0, 2->0, 3->2, 4->0, 5->4, i.e. real
  // 4->3, 5->3, 0->5, 1->3, 2->1.
  EXPECT_EQ(algos::binomialParents(6, 3), (std::vector<int>{5, 3, 1, -1, 3, 3}));
  EXPECT_EQ(algos::binomialChildren(6, 3)[3], (std::vector<int>{4, 5, 1}));
  // ceil(log2 n) rounds for every n and root; every rank but the root is the child of its parent.
  for (int n = 1; n <= 40; ++n) {
    int log2_ceil = 0;
    while ((1 << log2_ceil) < n) ++log2_ceil;
    for (int root : {0, n / 2, n - 1}) {
      const std::vector<int> parents = algos::binomialParents(n, root);
      const auto children = algos::binomialChildren(n, root);
      EXPECT_EQ(rounds(n, root, children), log2_ceil) << "n=" << n << " root=" << root;
      int edges = 0;
      for (int r = 0; r < n; ++r) {
        for (int child : children[r]) {
          EXPECT_EQ(parents[child], r);
          ++edges;
        }
      }
      EXPECT_EQ(edges, n - 1);
    }
  }
  // The built broadcast: every rank but the root receives once; the root sends to its 3 children
  // largest subtree first, each send waiting for the one before.
  Result<Algorithm> b = build(ClassicAlgo::kRecursiveDoubling, kBcast, 8, 0, false);
  ASSERT_TRUE(b.isOk()) << b.status().toString();
  const Counts c = count(*b);
  EXPECT_EQ(c.recvs, (std::vector<int>{0, 1, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(c.sends, (std::vector<int>{3, 0, 1, 0, 2, 0, 1, 0}));
  std::vector<int> order;
  for (const Threadblock& tb : b->ranks[0].threadblocks) order.push_back(tb.send_peer);
  EXPECT_EQ(order, (std::vector<int>{4, 2, 1}));
  // Reduce: the mirror image, n - 1 sends in all, the root receives from its 3 children.
  Result<Algorithm> r = build(ClassicAlgo::kRecursiveDoubling, kReduce, 8, 5, false);
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const Counts rc = count(*r);
  int total = 0;
  for (int s : rc.sends) total += s;
  EXPECT_EQ(total, 7);
  EXPECT_EQ(rc.sends[5], 0);
  EXPECT_EQ(rc.recvs[5], 3);
}

// Reduce: non-root ranks never write their output (NCCL ignores recvbuff there) nor their input; broadcast
// out of place never writes an input.
TEST(RootedStructure, WritesOnlyWhereAllowed) {
  for (const Config& config : kConfigs) {
    for (int n : {2, 5, 8, 11}) {
      for (int root : {0, n - 1, n / 2}) {
        Result<Algorithm> r = build(config.algo, kReduce, n, root, false, config.channels);
        ASSERT_TRUE(r.isOk());
        for (const RankProgram& p : r->ranks) {
          for (const Threadblock& tb : p.threadblocks) {
            for (const Step& s : tb.steps) {
              if (!opWritesDst(s.type)) continue;
              EXPECT_NE(s.dst_buf, BufferKind::kInput) << r->name << " rank " << p.rank;
              if (p.rank != root) {
                EXPECT_NE(s.dst_buf, BufferKind::kOutput) << r->name << " rank " << p.rank;
              }
            }
          }
        }
        Result<Algorithm> b = build(config.algo, kBcast, n, root, false, config.channels);
        ASSERT_TRUE(b.isOk());
        for (const RankProgram& p : b->ranks) {
          for (const Threadblock& tb : p.threadblocks) {
            for (const Step& s : tb.steps) {
              if (opWritesDst(s.type)) {
                EXPECT_NE(s.dst_buf, BufferKind::kInput) << b->name << " rank " << p.rank;
              }
            }
          }
        }
      }
    }
  }
}

TEST(RootedStructure, ChunkFactorMultiples) {
  // 4 chunks per rank on 2 rings: 2 per ring, each step moves both.
  Result<Algorithm> a = build(ClassicAlgo::kRing, kReduce, 5, 1, false, 2, nullptr, 4);
  ASSERT_TRUE(a.isOk()) << a.status().toString();
  EXPECT_EQ(a->num_chunks, 4);
  for (const RankProgram& p : a->ranks) {
    for (const Threadblock& tb : p.threadblocks) {
      for (const Step& s : tb.steps) EXPECT_EQ(s.count, 2);
    }
  }
  EXPECT_TRUE(verify(*a).ok) << verify(*a).toString();
  Result<Algorithm> odd = build(ClassicAlgo::kRing, kReduce, 5, 1, false, 2, nullptr, 3);
  ASSERT_FALSE(odd.isOk());
  EXPECT_NE(odd.status().message().find("multiple of 2"), std::string::npos);
  Result<Algorithm> tree = build(ClassicAlgo::kRecursiveDoubling, kBcast, 9, 7, true, 0, nullptr, 5);
  ASSERT_TRUE(tree.isOk()) << tree.status().toString();
  EXPECT_TRUE(verify(*tree).ok) << verify(*tree).toString();
}

TEST(RootedErrors, BadRootsAndAlgorithms) {
  Result<Algorithm> high = build(ClassicAlgo::kRing, kBcast, 4, 4, false);
  ASSERT_FALSE(high.isOk());
  EXPECT_EQ(high.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(build(ClassicAlgo::kDirect, kReduce, 4, -1, false).isOk());
  for (ClassicAlgo algo : {ClassicAlgo::kDoubleBinaryTree, ClassicAlgo::kPairwise}) {
    Result<Algorithm> no = build(algo, kBcast, 4, 0, false);
    ASSERT_FALSE(no.isOk());
    EXPECT_NE(no.status().message().find("does not apply to broadcast"), std::string::npos) << no.status().message();
  }
  Result<Algorithm> channels = build(ClassicAlgo::kRecursiveDoubling, kReduce, 4, 0, false, 2);
  EXPECT_FALSE(channels.isOk()) << "the binomial tree runs on one channel";
}

}  // namespace
}  // namespace braid
