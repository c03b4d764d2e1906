// Stage 2 (orderTransfers: greedy list scheduling) and stage 3 (scheduleExact: contiguity + exact times on Z3)
// of the synthesizer (synthesizer/model.h; TACCL, taccl_msccl.md §1.5). Small cases are built by hand — the
// logical topology, the chunks and their routes — with chunk_bytes = 1000 B so that a 1 GB/s link has
// β = 1000 / (1 · 1e3) = 1 µs; every expected time is derived in the comment next to it.

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "braid/sketch.h"
#include "braid/topology.h"
#include "synthesizer/model.h"

namespace braid::synth {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kBytes = 1000;  // chunk bytes: β = 1 µs at 1 GB/s

// A hand-built logical topology: ranks with their node, links added one by one.
struct Logical {
  LogicalTopology lt;
  explicit Logical(std::vector<int> node_of) {
    lt.num_ranks = static_cast<int>(node_of.size());
    lt.node_of = node_of;
    std::vector<int> count(lt.num_ranks, 0);
    for (int r = 0; r < lt.num_ranks; ++r) lt.local_of.push_back(count[node_of[r]]++);
    lt.out_links.assign(lt.num_ranks, {});
    lt.in_links.assign(lt.num_ranks, {});
    std::vector<int> identity(lt.num_ranks);
    std::iota(identity.begin(), identity.end(), 0);
    lt.symmetry = {identity};
  }
  // Link src -> dst with α (µs), bandwidth (GB/s) and the physical links (resources) it crosses.
  int link(int src, int dst, double alpha, double gbps, std::vector<int> resources = {}) {
    LogicalLink l;
    l.id = static_cast<int>(lt.links.size());
    l.src = src;
    l.dst = dst;
    l.alpha_us = alpha;
    l.gbps = gbps;
    l.inter_node = lt.node_of[src] != lt.node_of[dst];
    l.resources = std::move(resources);
    for (int e : l.resources) {
      if (e >= static_cast<int>(lt.resource_gbps.size())) lt.resource_gbps.resize(e + 1, 1e9);
    }
    lt.index[{src, dst}] = l.id;
    lt.out_links[src].push_back(l.id);
    lt.in_links[dst].push_back(l.id);
    lt.links.push_back(l);
    // Inter-node links may carry any chunk of the sender's node.
    std::vector<char> allowed;
    if (l.inter_node) {
      for (int o = 0; o < lt.num_ranks; ++o) allowed.push_back(lt.node_of[o] == lt.node_of[src] ? 1 : 0);
    }
    lt.relay_allowed.push_back(allowed);
    return l.id;
  }
};

// Chunks given as (owner, targets); no symmetry.
ChunkProblem chunks(int num_ranks, const std::vector<std::pair<int, std::vector<int>>>& list) {
  ChunkProblem p;
  p.num_ranks = num_ranks;
  p.chunk_bytes = kBytes;
  for (const auto& [owner, targets] : list) {
    Chunk c;
    c.id = static_cast<int>(p.chunks.size());
    c.owner = owner;
    c.targets = targets;
    p.chunks.push_back(c);
  }
  p.image = {std::vector<int>(p.chunks.size())};
  std::iota(p.image[0].begin(), p.image[0].end(), 0);
  for (size_t c = 0; c < p.chunks.size(); ++c) p.orbit.push_back({static_cast<int>(c), 0});
  return p;
}

// Routes: (chunk, link) pairs; the link delivers the chunk to its destination.
Routing routes(const LogicalTopology& lt, const ChunkProblem& p, const std::vector<std::pair<int, int>>& hops) {
  Routing r;
  r.parent.assign(p.chunks.size(), std::vector<int>(lt.num_ranks, -1));
  for (auto [c, l] : hops) r.parent[c][lt.links[l].dst] = l;
  return r;
}

StageContext context(double seconds) {
  StageContext ctx;
  ctx.start = Clock::now();
  ctx.deadline = ctx.start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  return ctx;
}

// The transfer of chunk c on link l.
const Transfer& find(const Schedule& s, int c, int l) {
  for (const Transfer& t : s.transfers) {
    if (t.chunk == c && t.link == l) return t;
  }
  ADD_FAILURE() << "no transfer of chunk " << c << " on link " << l;
  static Transfer none;
  return none;
}

std::vector<int> chunksOnLink(const Schedule& s, int l) {
  std::vector<int> out;
  for (int t : s.link_order[l]) out.push_back(s.transfers[t].chunk);
  return out;
}

std::vector<int> groupSizes(const Schedule& s, int l) {
  std::vector<int> out;
  for (const std::vector<int>& g : s.groups) {
    if (s.transfers[g[0]].link == l) out.push_back(static_cast<int>(g.size()));
  }
  return out;
}

// Independent checks of a schedule: every routed transfer listed once per link and group, chunks forwarded only
// after they arrived (end = arrival of the transfer's message), messages of a link one after the other, group
// members sharing a start, makespan = last arrival.
void expectConsistent(const LogicalTopology& lt, const ChunkProblem& p, const Routing& r, const Schedule& s) {
  size_t routed = 0;
  for (const auto& parent : r.parent) {
    for (int l : parent) routed += l >= 0 ? 1 : 0;
  }
  ASSERT_EQ(s.transfers.size(), routed);
  std::vector<int> in_group(s.transfers.size(), 0);
  for (const auto& g : s.groups) {
    for (size_t i = 0; i < g.size(); ++i) {
      ++in_group[g[i]];
      EXPECT_EQ(s.transfers[g[i]].link, s.transfers[g[0]].link);
      EXPECT_NEAR(s.transfers[g[i]].start_us, s.transfers[g[0]].start_us, 1e-9);
    }
  }
  for (int v : in_group) EXPECT_EQ(v, 1);
  double makespan = 0;
  const double tol = 1e-6;
  for (const Transfer& t : s.transfers) {
    makespan = std::max(makespan, t.end_us);
    const int src = lt.links[t.link].src;
    if (src == p.chunks[t.chunk].owner) {
      EXPECT_GE(t.start_us, -tol);
    } else {
      EXPECT_GE(t.start_us + tol, find(s, t.chunk, r.parent[t.chunk][src]).end_us)
          << "chunk " << t.chunk << " leaves rank " << src << " before it arrived";
    }
    EXPECT_GE(t.end_us + tol, t.start_us + lt.links[t.link].cost(p.chunk_bytes));
  }
  EXPECT_NEAR(s.makespan_us, makespan, tol);
  for (size_t l = 0; l < s.link_order.size(); ++l) {
    const auto& order = s.link_order[l];
    for (size_t i = 1; i < order.size(); ++i) {
      const Transfer& a = s.transfers[order[i - 1]];
      const Transfer& b = s.transfers[order[i]];
      const bool same_message = std::fabs(a.start_us - b.start_us) < 1e-9 && std::fabs(a.end_us - b.end_us) < 1e-9;
      if (!same_message) {
        EXPECT_GE(b.start_us + tol, a.end_us) << "link " << l << " position " << i;
      }
    }
  }
}

// ---- ordering -------------------------------------------------------------------------------------------

// Line 0 -> 1 -> 2, α = 0.5 µs, 1 GB/s (β = 1 µs): T = 1.5 µs per transfer. Chunks c0, c1 of rank 0 go to 1
// and 2. c0 crosses 0->1 in [0, T]; then c1 on 0->1 and c0 on 1->2 in [T, 2T]; c1 on 1->2 in [2T, 3T].
TEST(Ordering, LinePipelinesTwoChunks) {
  Logical g({0, 0, 0});
  const int a = g.link(0, 1, 0.5, 1);
  const int b = g.link(1, 2, 0.5, 1);
  ChunkProblem p = chunks(3, {{0, {1, 2}}, {0, {1, 2}}});
  Routing r = routes(g.lt, p, {{0, a}, {0, b}, {1, a}, {1, b}});
  StageReport rep;
  Schedule s = orderTransfers(g.lt, p, r, &rep);
  expectConsistent(g.lt, p, r, s);
  const double T = 1.5;
  EXPECT_DOUBLE_EQ(s.makespan_us, 3 * T);
  EXPECT_DOUBLE_EQ(find(s, 0, a).start_us, 0);
  EXPECT_DOUBLE_EQ(find(s, 1, a).start_us, T);
  EXPECT_DOUBLE_EQ(find(s, 0, b).start_us, T);
  EXPECT_DOUBLE_EQ(find(s, 1, b).start_us, 2 * T);
  EXPECT_EQ(rep.name, "ordering");
  EXPECT_EQ(rep.status, "greedy");
  EXPECT_DOUBLE_EQ(rep.makespan_us, 3 * T);
  EXPECT_EQ(s.groups.size(), 4u);
  for (const auto& grp : s.groups) EXPECT_EQ(grp.size(), 1u);
}

// One link, three chunks: serialized, 3 (α + β) = 3 · 1.5 µs; order by chunk id.
TEST(Ordering, SharedLinkSerializes) {
  Logical g({0, 0});
  const int a = g.link(0, 1, 0.5, 1);
  ChunkProblem p = chunks(2, {{0, {1}}, {0, {1}}, {0, {1}}});
  Routing r = routes(g.lt, p, {{0, a}, {1, a}, {2, a}});
  Schedule s = orderTransfers(g.lt, p, r, nullptr);
  expectConsistent(g.lt, p, r, s);
  EXPECT_DOUBLE_EQ(s.makespan_us, 4.5);
  EXPECT_EQ(chunksOnLink(s, a), (std::vector<int>{0, 1, 2}));
  EXPECT_DOUBLE_EQ(find(s, 2, a).start_us, 3.0);
}

// Links 0->1 and 0->2 share physical link 0 (rank 0's switch port, 2 GB/s: busy 1000 / 2e3 = 0.5 µs per chunk);
// their own bottleneck is 1 GB/s (β = 1). Chunk 0 goes 0->1 at 0 (ends 1.5); chunk 1 on 0->2 waits for the
// port: starts 0.5, ends 0.5 + 1.5 = 2.0. Without the shared port both would end at 1.5.
TEST(Ordering, SharedResourceDelaysSecondLink) {
  Logical g({0, 0, 0});
  const int a = g.link(0, 1, 0.5, 1, {0, 1});
  const int b = g.link(0, 2, 0.5, 1, {0, 2});
  g.lt.resource_gbps = {2, 1, 1};
  ChunkProblem p = chunks(3, {{0, {1}}, {0, {2}}});
  Routing r = routes(g.lt, p, {{0, a}, {1, b}});
  Schedule s = orderTransfers(g.lt, p, r, nullptr);
  expectConsistent(g.lt, p, r, s);
  EXPECT_DOUBLE_EQ(find(s, 0, a).start_us, 0);
  EXPECT_DOUBLE_EQ(find(s, 1, b).start_us, 0.5);
  EXPECT_DOUBLE_EQ(s.makespan_us, 2.0);
}

// Node 0 = ranks 0, 1; node 1 = ranks 2, 3. Rank 0 relays rank 1's chunk R over the inter-node link 0->2 (α 1,
// 1 GB/s: 2 µs); intra links 1->0 and 2->3 cost 0.1 µs (10 GB/s). Chunks: R = 0 (owner 1, to 0, 2, 3), O0 = 1
// and O1 = 2 (owner 0, to 2).
// Without enforce_ordering: at 0, R on 1->0 (two more hops to go) first [0, 0.1]; O0 on 0->2 [0, 2]; at 2 R
// (one hop left after 0->2) beats O1 (none): 0->2 carries O0, R, O1; R reaches 3 at 2 + 2 + 0.1 = 4.1, O1 ends
// at 6. With enforce_ordering rank 0's own chunks go first: O0, O1, R; R ends on 2->3 at 6 + 0.1 = 6.1.
TEST(Ordering, EnforceOrderingSendsOwnChunksFirst) {
  for (bool enforce : {false, true}) {
    Logical g({0, 0, 1, 1});
    const int in = g.link(1, 0, 0, 10);
    const int x = g.link(0, 2, 1, 1);
    const int out = g.link(2, 3, 0, 10);
    g.lt.enforce_ordering = enforce;
    ChunkProblem p = chunks(4, {{1, {0, 2, 3}}, {0, {2}}, {0, {2}}});
    Routing r = routes(g.lt, p, {{0, in}, {0, x}, {0, out}, {1, x}, {2, x}});
    Schedule s = orderTransfers(g.lt, p, r, nullptr);
    expectConsistent(g.lt, p, r, s);
    if (enforce) {
      EXPECT_EQ(chunksOnLink(s, x), (std::vector<int>{1, 2, 0}));
      EXPECT_NEAR(s.makespan_us, 6.1, 1e-12);
    } else {
      EXPECT_EQ(chunksOnLink(s, x), (std::vector<int>{1, 0, 2}));
      EXPECT_NEAR(find(s, 0, out).end_us, 4.1, 1e-12);
      EXPECT_DOUBLE_EQ(s.makespan_us, 6.0);
    }
  }
}

// Same machine, R only goes to 0 and 2: at 2 µs R and O1 tie on remaining path (none after 0->2) and start;
// the sender's own chunk O1 goes first although R has the smaller id. 0->2 carries O0, O1, R.
TEST(Ordering, OwnChunkBeforeRelayedOnTies) {
  Logical g({0, 0, 1, 1});
  const int in = g.link(1, 0, 0, 10);
  const int x = g.link(0, 2, 1, 1);
  ChunkProblem p = chunks(4, {{1, {0, 2}}, {0, {2}}, {0, {2}}});
  Routing r = routes(g.lt, p, {{0, in}, {0, x}, {1, x}, {2, x}});
  Schedule s = orderTransfers(g.lt, p, r, nullptr);
  expectConsistent(g.lt, p, r, s);
  EXPECT_EQ(chunksOnLink(s, x), (std::vector<int>{1, 2, 0}));
}

// A chunk whose route sends it from a rank that never receives it: the ordering still lists every transfer and
// says the routing is inconsistent.
TEST(Ordering, InconsistentRoutingIsReported) {
  Logical g({0, 0, 0});
  g.link(0, 1, 0, 1);
  const int b = g.link(1, 2, 0, 1);
  ChunkProblem p = chunks(3, {{0, {2}}});
  Routing r = routes(g.lt, p, {{0, b}});
  StageReport rep;
  Schedule s = orderTransfers(g.lt, p, r, &rep);
  EXPECT_EQ(s.transfers.size(), 1u);
  EXPECT_NE(rep.status.find("routing inconsistent"), std::string::npos) << rep.status;
}

// ---- exact scheduling ----------------------------------------------------------------------------------

// Two ranks on two nodes, one inter-node link with α = 10 µs, 1 GB/s (β = 1 µs), crossing one NIC resource of
// 1 GB/s; four chunks of rank 0 to rank 1. Alone: 4 · 11 = 44 µs. All together: one message, 10 + 4 · 1 = 14.
// max_contig 2: two messages of two, 2 · (10 + 2) = 24 (three + one: 13 + 11 = 24 as well).
TEST(Scheduling, GroupsContiguousChunksOnInterNodeLinks) {
  for (int max_contig : {6, 2, 1}) {
    Logical g({0, 1});
    const int x = g.link(0, 1, 10, 1, {0});
    g.lt.resource_gbps = {1};
    ChunkProblem p = chunks(2, {{0, {1}}, {0, {1}}, {0, {1}}, {0, {1}}});
    Routing r = routes(g.lt, p, {{0, x}, {1, x}, {2, x}, {3, x}});
    Schedule s = orderTransfers(g.lt, p, r, nullptr);
    EXPECT_DOUBLE_EQ(s.makespan_us, 44);
    StageReport rep;
    ASSERT_TRUE(scheduleExact(g.lt, p, &s, max_contig, context(30), &rep).isOk());
    expectConsistent(g.lt, p, r, s);
    EXPECT_EQ(rep.name, "scheduling");
    if (max_contig == 6) {
      EXPECT_EQ(rep.status, "optimal");
      EXPECT_NEAR(s.makespan_us, 14, 1e-9);
      EXPECT_EQ(groupSizes(s, x), (std::vector<int>{4}));
      // One message: every member starts at 0 and arrives at 14.
      for (const Transfer& t : s.transfers) EXPECT_NEAR(t.end_us, 14, 1e-9);
    } else if (max_contig == 2) {
      EXPECT_EQ(rep.status, "optimal");
      EXPECT_NEAR(s.makespan_us, 24, 1e-9);
      for (int size : groupSizes(s, x)) EXPECT_LE(size, 2);
    } else {
      EXPECT_EQ(rep.status, "exact (no contiguity decisions)");
      EXPECT_NEAR(s.makespan_us, 44, 1e-9);
    }
    EXPECT_NEAR(rep.makespan_us, s.makespan_us, 1e-12);
  }
}

// A group starts only when all its chunks are at the sender. Node 0 = ranks 0, 1; rank 2 on node 1. Chunk A is
// rank 0's, chunk B comes from rank 1 over 1->0 (α 0, 0.2 GB/s: 5 µs). Inter-node 0->2: α 10, β 1.
// Greedy: A [0, 11], B [11, 22] -> 22. Together: start when B is there (5), 5 + 10 + 2 = 17. B alone first
// is no better: B [5, 16], A [16, 27].
TEST(Scheduling, GroupWaitsForItsLastChunk) {
  Logical g({0, 0, 1});
  const int in = g.link(1, 0, 0, 0.2);
  const int x = g.link(0, 2, 10, 1);
  ChunkProblem p = chunks(3, {{0, {2}}, {1, {0, 2}}});
  Routing r = routes(g.lt, p, {{0, x}, {1, in}, {1, x}});
  Schedule s = orderTransfers(g.lt, p, r, nullptr);
  EXPECT_DOUBLE_EQ(s.makespan_us, 22);
  StageReport rep;
  ASSERT_TRUE(scheduleExact(g.lt, p, &s, 6, context(30), &rep).isOk());
  expectConsistent(g.lt, p, r, s);
  EXPECT_EQ(rep.status, "optimal");
  EXPECT_NEAR(s.makespan_us, 17, 1e-9);
  EXPECT_NEAR(find(s, 0, x).start_us, 5, 1e-9);
  EXPECT_EQ(groupSizes(s, x), (std::vector<int>{2}));
}

// Without inter-node links there is nothing to decide: the times are the longest-path times of the fixed orders,
// never later than the greedy ones. Star of 4 ranks through a switch with 2 GB/s ports (0.5 µs per chunk) and
// 1 GB/s links (α 0.5): all-gather routed directly (12 transfers) plus chunk pipelining through rank 1.
TEST(Scheduling, NoInterNodeLinksIsLongestPath) {
  Logical g({0, 0, 0, 0});
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < 4; ++b) {
      if (a != b) g.link(a, b, 0.5, 1, {a, 4 + b});  // out port of a, in port of b
    }
  }
  g.lt.resource_gbps.assign(8, 2);
  ChunkProblem p = chunks(4, {{0, {1, 2, 3}}, {1, {0, 2, 3}}, {2, {0, 1, 3}}, {3, {0, 1, 2}}, {0, {1, 2, 3}}});
  std::vector<std::pair<int, int>> hops;
  for (int c = 0; c < 4; ++c) {
    for (int d = 0; d < 4; ++d) {
      if (d != c) hops.push_back({c, g.lt.find(c, d)});
    }
  }
  hops.push_back({4, g.lt.find(0, 1)});  // chunk 4: 0 -> 1 -> {2, 3}
  hops.push_back({4, g.lt.find(1, 2)});
  hops.push_back({4, g.lt.find(1, 3)});
  Routing r = routes(g.lt, p, hops);
  Schedule s = orderTransfers(g.lt, p, r, nullptr);
  const double greedy = s.makespan_us;
  StageReport rep;
  ASSERT_TRUE(scheduleExact(g.lt, p, &s, 6, context(30), &rep).isOk());
  expectConsistent(g.lt, p, r, s);
  EXPECT_EQ(rep.status, "exact (no contiguity decisions)");
  EXPECT_LE(s.makespan_us, greedy + 1e-9);
  EXPECT_EQ(rep.variables, 0);
  // Lower bound by hand: rank 0's out port carries 3 + 1 chunks (4 · 0.5 = 2 µs) and chunk 4's second hop needs
  // 2 · 1.5 = 3 µs: the makespan is at least 3.
  EXPECT_GE(s.makespan_us, 3 - 1e-9);
}

// Four ranks, two nodes ({0, 1}, {2, 3}), inter-node links r -> r + 2 mod 4 (α 10, β 1), three chunks per rank
// to its peer. Symmetry group: node swap r -> r + 2 mod 4 and the swap inside nodes r -> r xor 1 (4 elements).
// Variables without sharing: 12 transfers · (start, stream start, arrival) + 4 links · 2 Bools + makespan = 45;
// with sharing one class per position: 3 · 3 + 2 + 1 = 12. Both: one message per link, 10 + 3 = 13 µs.
TEST(Scheduling, SymmetricTransfersShareVariables) {
  int variables[2] = {0, 0};
  for (int use_symmetry : {0, 1}) {
    Logical g({0, 0, 1, 1});
    for (int r = 0; r < 4; ++r) g.link(r, (r + 2) % 4, 10, 1);
    std::vector<std::pair<int, std::vector<int>>> list;
    for (int r = 0; r < 4; ++r) {
      for (int j = 0; j < 3; ++j) list.push_back({r, {(r + 2) % 4}});  // chunk id 3r + j
    }
    ChunkProblem p = chunks(4, list);
    if (use_symmetry) {
      g.lt.symmetry = {{0, 1, 2, 3}, {2, 3, 0, 1}, {1, 0, 3, 2}, {3, 2, 1, 0}};
      p.image.clear();
      for (const auto& perm : g.lt.symmetry) {
        std::vector<int> img(12);
        for (int c = 0; c < 12; ++c) img[c] = 3 * perm[c / 3] + c % 3;
        p.image.push_back(img);
      }
      // Representatives: rank 0's chunks; element g maps chunk j of rank 0 to chunk j of rank perm_g(0).
      for (int c = 0; c < 12; ++c) {
        for (int e = 0; e < 4; ++e) {
          if (g.lt.symmetry[e][0] == c / 3) p.orbit[c] = {c % 3, e};
        }
      }
    }
    std::vector<std::pair<int, int>> hops;
    for (int c = 0; c < 12; ++c) hops.push_back({c, c / 3});  // link id r = the owner's link
    Routing r = routes(g.lt, p, hops);
    Schedule s = orderTransfers(g.lt, p, r, nullptr);
    EXPECT_DOUBLE_EQ(s.makespan_us, 33);  // 3 · 11
    StageReport rep;
    ASSERT_TRUE(scheduleExact(g.lt, p, &s, 6, context(30), &rep).isOk());
    expectConsistent(g.lt, p, r, s);
    EXPECT_EQ(rep.status, "optimal");
    EXPECT_NEAR(s.makespan_us, 13, 1e-9);
    for (int l = 0; l < 4; ++l) EXPECT_EQ(groupSizes(s, l), (std::vector<int>{3}));
    variables[use_symmetry] = rep.variables;
  }
  EXPECT_EQ(variables[0], 45);
  EXPECT_EQ(variables[1], 12);
}

TEST(Scheduling, RejectsInconsistentSchedules) {
  Logical g({0, 1});
  const int x = g.link(0, 1, 10, 1);
  ChunkProblem p = chunks(2, {{0, {1}}, {0, {1}}});
  Routing r = routes(g.lt, p, {{0, x}, {1, x}});
  Schedule s = orderTransfers(g.lt, p, r, nullptr);
  s.link_order[x].pop_back();  // a transfer in no link order
  StageReport rep;
  Status st = scheduleExact(g.lt, p, &s, 6, context(30), &rep);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("no link_order"), std::string::npos) << st.message();
}

// Independent oracle for the exact stage: the earliest makespan of fixed link orders, fixed resource orders (by
// input start) and given groups (together[t]: t shares a message with the transfer before it on its link).
// A group starts when all its chunks have arrived, the link's previous message has arrived, and member k (from
// 0) may stream its bytes at start + k β only after the previous user of each physical link started streaming
// plus its occupancy. Iterated to a fixpoint; infinity when the groups admit no schedule.
double oracleMakespan(const LogicalTopology& lt, const ChunkProblem& p, const Schedule& in,
                      const std::vector<char>& together) {
  const int n = static_cast<int>(in.transfers.size());
  std::vector<int> head(n), k(n, 0), size(n, 1), prev_on_link(n, -1), pred(n, -1);
  for (const auto& order : in.link_order) {
    for (size_t i = 0; i < order.size(); ++i) {
      const int t = order[i];
      prev_on_link[t] = i > 0 ? order[i - 1] : -1;
      if (i > 0 && together[t]) {
        head[t] = head[order[i - 1]];
        k[t] = k[order[i - 1]] + 1;
        size[head[t]] = k[t] + 1;
      } else {
        head[t] = t;
      }
    }
  }
  for (int t = 0; t < n; ++t) {
    const Transfer& tr = in.transfers[t];
    for (int u = 0; u < n; ++u) {
      if (in.transfers[u].chunk == tr.chunk && lt.links[in.transfers[u].link].dst == lt.links[tr.link].src) pred[t] = u;
    }
  }
  auto beta = [&](int t) { return p.chunk_bytes / (lt.links[in.transfers[t].link].gbps * 1e3); };
  std::vector<double> S(n, 0.0);  // start of the group headed by t
  auto arrival = [&](int t) {
    return S[head[t]] + lt.links[in.transfers[t].link].alpha_us + size[head[t]] * beta(head[t]);
  };
  std::vector<std::vector<int>> users(lt.resource_gbps.size());
  std::vector<int> by_start(n);
  std::iota(by_start.begin(), by_start.end(), 0);
  std::stable_sort(by_start.begin(), by_start.end(),
                   [&](int a, int b) { return in.transfers[a].start_us < in.transfers[b].start_us; });
  for (int t : by_start) {
    for (int e : lt.links[in.transfers[t].link].resources) users[e].push_back(t);
  }
  bool changed = true;
  for (int pass = 0; changed; ++pass) {
    // Without a positive cycle n + 1 passes reach the fixpoint; a cycle (a group whose members another link's
    // transfer must stream between, with no room for it) means these groups admit no schedule.
    if (pass > n + 1) return std::numeric_limits<double>::infinity();
    changed = false;
    auto raise = [&](int t, double v) {
      if (v > S[head[t]] + 1e-12) S[head[t]] = v, changed = true;
    };
    for (int t = 0; t < n; ++t) {
      if (pred[t] >= 0) raise(t, arrival(pred[t]));
      const int q = prev_on_link[t];
      if (q >= 0 && head[q] != head[t]) raise(t, arrival(q));
    }
    for (size_t e = 0; e < users.size(); ++e) {
      for (size_t i = 1; i < users[e].size(); ++i) {
        const int a = users[e][i - 1], b = users[e][i];
        if (head[a] == head[b]) continue;
        raise(b, S[head[a]] + k[a] * beta(a) + p.chunk_bytes / (lt.resource_gbps[e] * 1e3) - k[b] * beta(b));
      }
    }
  }
  double makespan = 0;
  for (int t = 0; t < n; ++t) makespan = std::max(makespan, arrival(t));
  return makespan;
}

// Random two-node machines (ranks 0, 1 | 2, 3) with three chunks per rank, relayed across nodes by either GPU,
// NICs shared by both inter-node links of a node, max_contig 2 or 3: the exact stage must reach the best
// makespan over every grouping the orders allow (enumerated, evaluated by the oracle above).
TEST(Scheduling, MatchesExhaustiveSearchOnRandomCases) {
  std::mt19937 rng(12345);
  auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  for (int round = 0; round < 12; ++round) {
    Logical g({0, 0, 1, 1});
    // Resources 0..3: NIC out of node 0, NIC out of node 1, and two NVLink-ish resources per node direction.
    const int x02 = g.link(0, 2, uniform(4, 12), 1, {0});
    const int x13 = g.link(1, 3, uniform(4, 12), 1, {0});
    const int x20 = g.link(2, 0, uniform(4, 12), 1, {1});
    const int x31 = g.link(3, 1, uniform(4, 12), 1, {1});
    const int i01 = g.link(0, 1, uniform(0.2, 1), uniform(2, 6), {2});
    const int i10 = g.link(1, 0, uniform(0.2, 1), uniform(2, 6), {3});
    const int i23 = g.link(2, 3, uniform(0.2, 1), uniform(2, 6), {4});
    const int i32 = g.link(3, 2, uniform(0.2, 1), uniform(2, 6), {5});
    g.lt.resource_gbps = {uniform(1.2, 2.5), uniform(1.2, 2.5), 8, 8, 8, 8};
    const int mate_link[4] = {i01, i10, i23, i32};
    const int cross[4] = {x02, x13, x20, x31};
    std::vector<std::pair<int, std::vector<int>>> list;
    std::vector<std::pair<int, int>> hops;
    for (int r = 0; r < 4; ++r) {
      for (int j = 0; j < 3; ++j) {
        const int c = static_cast<int>(list.size());
        std::vector<int> targets;
        for (int d = 0; d < 4; ++d) {
          if (d != r) targets.push_back(d);
        }
        list.push_back({r, targets});
        const int mate = r ^ 1;
        hops.push_back({c, mate_link[r]});
        // Cross from the owner or from its node-mate, then to the remaining rank of the other node.
        const int sender = std::uniform_int_distribution<int>(0, 1)(rng) ? r : mate;
        hops.push_back({c, cross[sender]});
        const int landed = (sender + 2) % 4;
        hops.push_back({c, mate_link[landed]});
      }
    }
    ChunkProblem p = chunks(4, list);
    Routing r = routes(g.lt, p, hops);
    Schedule s = orderTransfers(g.lt, p, r, nullptr);
    const int max_contig = 2 + round % 2;
    // Exhaustive search over the together flags of the inter-node links' consecutive pairs.
    std::vector<int> pairs;
    for (int l : cross) {
      for (size_t i = 1; i < s.link_order[l].size(); ++i) pairs.push_back(s.link_order[l][i]);
    }
    ASSERT_LE(pairs.size(), 16u);
    double best = std::numeric_limits<double>::infinity();
    for (uint32_t mask = 0; mask < (1u << pairs.size()); ++mask) {
      std::vector<char> together(s.transfers.size(), 0);
      for (size_t b = 0; b < pairs.size(); ++b) together[pairs[b]] = (mask >> b) & 1;
      bool ok = true;
      for (int l : cross) {
        int run = 1;
        for (size_t i = 1; i < s.link_order[l].size(); ++i) {
          run = together[s.link_order[l][i]] ? run + 1 : 1;
          ok &= run <= max_contig;
        }
      }
      if (ok) best = std::min(best, oracleMakespan(g.lt, p, s, together));
    }
    const Schedule greedy = s;
    const double greedy_makespan = oracleMakespan(g.lt, p, s, std::vector<char>(s.transfers.size(), 0));
    EXPECT_NEAR(greedy_makespan, s.makespan_us, 1e-9) << "round " << round;
    StageReport rep;
    StageContext ctx = context(30);
    if (getenv("SC_VERBOSE")) {
      ctx.progress = [](const SynthesisProgress& q) { std::printf("  %s\n", q.detail.c_str()); };
    }
    ASSERT_TRUE(scheduleExact(g.lt, p, &s, max_contig, ctx, &rep).isOk());
    expectConsistent(g.lt, p, r, s);
    // "optimal": no schedule better by more than max(0.01%, 10 ns) in the nanosecond-rounded model;
    // "optimal (gap <= 1%)": within 1% of a lower bound, hence of the optimum.
    if (rep.status == "optimal") {
      EXPECT_NEAR(s.makespan_us, best, std::max(1e-4 * best, 0.01) + 1e-3) << "round " << round;
    } else {
      EXPECT_EQ(rep.status, "optimal (gap <= 1%)") << "round " << round;
      EXPECT_LE(s.makespan_us, best * 1.01 + 1e-9) << "round " << round;
    }
    EXPECT_GE(s.makespan_us, best - 1e-9) << "round " << round;
    // The groups written back give that makespan under the oracle too.
    std::vector<char> chosen(s.transfers.size(), 0);
    for (const auto& grp : s.groups) {
      for (size_t i = 1; i < grp.size(); ++i) chosen[grp[i]] = 1;
    }
    EXPECT_NEAR(oracleMakespan(g.lt, p, greedy, chosen), s.makespan_us, 1e-9) << "round " << round;
  }
}

// ---- shipped machines: size and speed --------------------------------------------------------------------

Topology shipped(const std::string& name) {
  Result<Topology> t = loadTopologyOrShipped(name);
  EXPECT_TRUE(t.isOk()) << t.status().toString();
  return t.isOk() ? *t : Topology{};
}

// DGX H100 x2 (16 ranks), all-gather with 2 chunks per rank, relayed through GPU 0 of each node (sketch map
// {0: [0]}, TACCL sk1-ndv2 style), node-swap symmetry [8, 16]. Routes by hand: the owner sends to its 7
// node-mates, GPU 0 sends to GPU 0 of the other node, which sends to its 7 node-mates: 32 chunks · 15 = 480
// transfers; 16 chunks cross each inter-node link (15 contiguity decisions per link). 64 KiB chunks: the
// inter-node α (several µs) is worth amortizing. The exact stage must return within its time limit and never
// be worse than the greedy schedule.
TEST(Scheduling, TwoNodeSixteenRanksWithinTimeLimit) {
  Topology topo = shipped("dgx-h100-x2");
  ASSERT_EQ(topo.numGpus(), 16);
  Sketch sk;
  sk.source = "scheduling_test";
  sk.nodes = 2;
  sk.intranode_links = IntraLinks::kNvlink;
  sk.internode_conn = InterConn::kMap;
  sk.internode_map = {{0, {0}}};
  sk.symmetry = {{8, 16}};
  sk.chunkup = 2;
  for (bool symmetric : {true, false}) {
    if (!symmetric) sk.symmetry.clear();
    Result<LogicalTopology> lt = buildLogicalTopology(topo, sk, false, nullptr);
    ASSERT_TRUE(lt.isOk()) << lt.status().toString();
    ASSERT_EQ(lt->symmetry.size(), symmetric ? 2u : 1u);
    ChunkProblem p = makeChunkProblem(CollectiveKind::kAllGather, *lt, 2, 0, 16 * 2 * 65536);
    Routing r;
    r.parent.assign(p.chunks.size(), std::vector<int>(16, -1));
    auto link = [&](int src, int dst) {
      const int l = lt->find(src, dst);
      EXPECT_GE(l, 0) << src << " -> " << dst;
      return l;
    };
    for (const Chunk& c : p.chunks) {
      const int a = c.owner / 8, b = 1 - a;
      for (int k = 0; k < 8; ++k) {
        if (8 * a + k != c.owner) r.parent[c.id][8 * a + k] = link(c.owner, 8 * a + k);
      }
      r.parent[c.id][8 * b] = link(8 * a, 8 * b);
      for (int k = 1; k < 8; ++k) r.parent[c.id][8 * b + k] = link(8 * b, 8 * b + k);
    }
    Schedule s = orderTransfers(*lt, p, r, nullptr);
    ASSERT_EQ(s.transfers.size(), 480u);
    const double greedy = s.makespan_us;
    const double limit = 8;
    const auto t0 = Clock::now();
    StageReport rep;
    StageContext ctx = context(limit);
    if (getenv("SC_VERBOSE")) {
      ctx.progress = [](const SynthesisProgress& q) {
        std::printf("  [%.2f s] %s (%d vars, best %.3f)\n", q.elapsed_seconds, q.detail.c_str(), q.variables,
                    q.best_makespan_us);
      };
    }
    ASSERT_TRUE(scheduleExact(*lt, p, &s, 6, ctx, &rep).isOk());
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    expectConsistent(*lt, p, r, s);
    EXPECT_LE(seconds, limit + 1.0);
    EXPECT_LE(s.makespan_us, greedy + 1e-9);
    EXPECT_TRUE(rep.status == "optimal" || rep.status == "optimal (gap <= 1%)" ||
                rep.status == "feasible (time limit)" || rep.status == "feasible (budget)" ||
                rep.status.rfind("kept greedy", 0) == 0)
        << rep.status;
    std::printf("2-node 16 ranks (%s): greedy %.3f us -> %.3f us, %s, %d variables, %d constraints, %.2f s\n",
                symmetric ? "symmetric" : "no symmetry", greedy, s.makespan_us, rep.status.c_str(), rep.variables,
                rep.constraints, seconds);
  }
}

// 32 ranks (DGX H100 x4, direct-map inter-node links), all-to-all with 2 chunks per (source, destination):
// 32 · 31 · 2 = 1984 chunks; cross-node chunks go to the same local GPU of the destination's node, then to the
// destination. Ordering them must take well under 1 s.
TEST(Ordering, LargeAllToAllIsFast) {
  Topology topo = shipped("dgx-h100-x4");
  ASSERT_EQ(topo.numGpus(), 32);
  Sketch sk;
  sk.source = "scheduling_test";
  sk.nodes = 4;
  sk.internode_conn = InterConn::kDirectMap;
  sk.chunkup = 2;
  Result<LogicalTopology> lt = buildLogicalTopology(topo, sk, false, nullptr);
  ASSERT_TRUE(lt.isOk()) << lt.status().toString();
  ChunkProblem p = makeChunkProblem(CollectiveKind::kAllToAll, *lt, 2, 0, 32 * 2 * 65536);
  ASSERT_EQ(p.chunks.size(), 1984u);
  Routing r;
  r.parent.assign(p.chunks.size(), std::vector<int>(32, -1));
  size_t expected = 0;
  for (const Chunk& c : p.chunks) {
    const int s = c.owner, d = c.dest;
    if (s / 8 == d / 8) {
      r.parent[c.id][d] = lt->find(s, d);
      expected += 1;
    } else {
      const int via = 8 * (d / 8) + s % 8;  // same local GPU on the destination's node
      r.parent[c.id][via] = lt->find(s, via);
      if (via != d) r.parent[c.id][d] = lt->find(via, d);
      expected += via != d ? 2 : 1;
    }
  }
  const auto t0 = Clock::now();
  Schedule s = orderTransfers(*lt, p, r, nullptr);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  // Same node: 32 · 7 · 2 = 448 one-hop chunks; other nodes: 32 · 24 · 2 = 1536 chunks, of which 32 · 3 · 2 =
  // 192 go to the same local GPU (one hop) and 1344 take two: 448 + 192 + 2688 = 3328 transfers.
  EXPECT_EQ(expected, 3328u);
  ASSERT_EQ(s.transfers.size(), 3328u);
  expectConsistent(*lt, p, r, s);
  EXPECT_LT(seconds, 1.0);
  std::printf("32-rank all-to-all: %zu transfers ordered in %.3f s, makespan %.2f us\n", s.transfers.size(), seconds,
              s.makespan_us);
}

}  // namespace
}  // namespace braid::synth
