// The tree-rate LP and its integer units (synthesizer/forest_rate.cc) against brute force over every cut.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "braid/topology.h"
#include "synthesizer/forest.h"

namespace braid::synth {
namespace {

// min over vertex sets S holding a GPU but not every GPU of B_in(S) / |GPUs not in S|: the best per-root rate the
// cut bound allows (ForestColl's optimality condition), by enumerating all 2^|V| sets.
double bruteForceRate(const Topology& t) {
  const int nv = static_cast<int>(t.vertices.size());
  const int gpus = t.numGpus();
  double best = std::numeric_limits<double>::infinity();
  for (uint32_t mask = 1; mask < (1u << nv); ++mask) {
    int inside = 0;
    for (int v = 0; v < nv; ++v) {
      if ((mask >> v & 1) && t.vertices[v].kind == VertexKind::kGpu) ++inside;
    }
    if (inside == 0 || inside == gpus) continue;
    double in = 0;
    for (const Link& l : t.links) {
      if (!(mask >> l.src & 1) && (mask >> l.dst & 1)) in += l.bandwidth_gbps;
    }
    best = std::min(best, in / (gpus - inside));
  }
  return best;
}

// A random tree of switches (PCIe switch vertices, one node) with GPUs as leaves; duplex links of random bandwidth,
// equal in both directions. Every GPU pair then has exactly one route. The equal directions matter: ForestColl's
// switch removal (edge splitting) keeps every max-flow only at switches whose in- and out-bandwidth are equal, and
// without that the cut bound is not reached (a star whose GPUs send at 10 GB/s and receive at 20-80 GB/s has cut
// bound 10 GB/s per root, but 3 roots x 2 tree edges must share 30 GB/s of uplinks: 5 GB/s).
Topology randomSwitchTree(std::mt19937& rng, int switches, int gpus) {
  Topology t;
  t.name = "random-tree";
  const int node = t.addNode("node0");
  std::uniform_int_distribution<int> bw(1, 8);
  std::vector<int> sw;
  for (int s = 0; s < switches; ++s) {
    sw.push_back(t.addVertex(VertexKind::kPcieSwitch, node, "sw" + std::to_string(s)));
    if (s > 0) {
      const int parent = sw[std::uniform_int_distribution<int>(0, s - 1)(rng)];
      t.addDuplexLink(sw[s], parent, LinkKind::kPcie, 10.0 * bw(rng), 1.0);
    }
  }
  for (int g = 0; g < gpus; ++g) {
    const int v = t.addVertex(VertexKind::kGpu, node);
    const int s = sw[std::uniform_int_distribution<int>(0, switches - 1)(rng)];
    t.addDuplexLink(v, s, LinkKind::kPcie, 10.0 * bw(rng), 1.0);
  }
  return t;
}

// A random strongly connected digraph of GPUs with direct NVLink-kind links only (no switch): routes are the direct
// links, so the tree rate is Edmonds' bound over GPU subsets.
Topology randomDirectGraph(std::mt19937& rng, int gpus) {
  Topology t;
  t.name = "random-direct";
  const int node = t.addNode("node0");
  std::vector<int> v;
  for (int g = 0; g < gpus; ++g) {
    v.push_back(t.addVertex(VertexKind::kGpu, node));
  }
  std::uniform_int_distribution<int> bw(1, 6);
  for (int g = 0; g < gpus; ++g) t.addLink(v[g], v[(g + 1) % gpus], LinkKind::kNvlink, 10.0 * bw(rng), 0.5);
  std::bernoulli_distribution extra(0.4);
  for (int a = 0; a < gpus; ++a) {
    for (int b = 0; b < gpus; ++b) {
      if (a != b && b != (a + 1) % gpus && extra(rng)) t.addLink(v[a], v[b], LinkKind::kNvlink, 10.0 * bw(rng), 0.5);
    }
  }
  return t;
}

void expectRateIsCutOptimum(const Topology& t) {
  ASSERT_TRUE(validateTopology(t).isOk()) << validateTopology(t).toString();
  Result<LogicalTopology> logical = buildCompleteLogicalTopology(t, false);
  ASSERT_TRUE(logical.isOk()) << logical.status().toString();
  Result<ForestRate> rate = forestRate(*logical, 60);
  ASSERT_TRUE(rate.isOk()) << rate.status().toString();
  const double expected = bruteForceRate(t);
  EXPECT_NEAR(rate->rate_gbps, expected, 1e-6 * expected) << writeTopologyYaml(t);
  // The split never oversubscribes a physical link.
  std::vector<double> load(t.links.size(), 0);
  for (const LogicalLink& l : logical->links) {
    for (int e : l.resources) load[e] += rate->link_gbps[l.id];
  }
  for (size_t e = 0; e < t.links.size(); ++e) EXPECT_LE(load[e], t.links[e].bandwidth_gbps * (1 + 1e-7));
}

TEST(ForestRate, EqualsBruteForceCutOnRandomSwitchTrees) {
  std::mt19937 rng(20261202);
  for (int trial = 0; trial < 30; ++trial) {
    const int switches = 1 + trial % 4;
    const int gpus = 2 + trial % 5;
    expectRateIsCutOptimum(randomSwitchTree(rng, switches, gpus));
  }
}

TEST(ForestRate, EqualsBruteForceCutOnRandomDirectGraphs) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 30; ++trial) expectRateIsCutOptimum(randomDirectGraph(rng, 2 + trial % 6));
}

// min over ranks v and nonempty S not holding v of c(S -> outside S) / |S|, over every subset: the capped rate's
// definition (forest.h cappedTreeRate), by enumeration.
double bruteForceCappedRate(const LogicalTopology& logical, const std::vector<double>& caps) {
  const int n = logical.num_ranks;
  double best = std::numeric_limits<double>::infinity();
  for (uint32_t mask = 1; mask < (1u << n) - 1; ++mask) {
    double out = 0;
    for (const LogicalLink& l : logical.links) {
      if ((mask >> l.src & 1) && !(mask >> l.dst & 1)) out += caps[l.id];
    }
    best = std::min(best, out / __builtin_popcount(mask));
  }
  return best;
}

TEST(CappedTreeRate, EqualsBruteForceOnRandomCapacities) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    const int n = 3 + trial % 6;
    const Topology t = randomDirectGraph(rng, n);
    Result<LogicalTopology> logical = buildCompleteLogicalTopology(t, false);
    ASSERT_TRUE(logical.isOk()) << logical.status().toString();
    // Random capacities on the complete logical topology, some links off, a ring kept so that it stays connected.
    std::vector<double> caps(logical->links.size(), 0);
    std::uniform_real_distribution<double> cap(0.5, 40);
    std::bernoulli_distribution off(0.3);
    for (const LogicalLink& l : logical->links) {
      caps[l.id] = l.dst == (l.src + 1) % n || !off(rng) ? cap(rng) : 0;
    }
    std::vector<int> everyone(n);
    for (int v = 0; v < n; ++v) everyone[v] = v;
    int flows = 0;
    Result<double> rate = cappedTreeRate(*logical, caps, everyone, &flows);
    ASSERT_TRUE(rate.isOk()) << rate.status().toString();
    const double expected = bruteForceCappedRate(*logical, caps);
    EXPECT_NEAR(*rate, expected, 1e-8 * expected + 1e-9) << "trial " << trial;
    EXPECT_GE(flows, n);
  }
}

TEST(CappedTreeRate, DisconnectedLinksAreInfeasible) {
  std::mt19937 rng(3);
  const Topology t = randomDirectGraph(rng, 4);
  Result<LogicalTopology> logical = buildCompleteLogicalTopology(t, false);
  ASSERT_TRUE(logical.isOk());
  std::vector<double> caps(logical->links.size(), 0);
  for (const LogicalLink& l : logical->links) caps[l.id] = l.dst == 0 ? 0 : 10;  // nothing reaches rank 0
  EXPECT_EQ(cappedTreeRate(*logical, caps, {0, 1, 2, 3}).status().code(), StatusCode::kInfeasible);
  EXPECT_EQ(cappedTreeRate(*logical, {1.0}, {0}).status().code(), StatusCode::kInvalidArgument);
}

TEST(ForestRate, UnevenStarIsBoundByUplinksNotByTheCut) {
  // The star of the comment above randomSwitchTree: uplinks 10 GB/s, downlinks 40, 80, 20. The cut bound allows 10
  // GB/s per root; trees along routes reach 5 (3 roots x 2 edges over 30 GB/s of uplinks), by hand.
  Topology t;
  t.name = "uneven-star";
  const int node = t.addNode("node0");
  const int sw = t.addVertex(VertexKind::kPcieSwitch, node, "sw0");
  const double down[3] = {40, 80, 20};
  for (int g = 0; g < 3; ++g) {
    const int v = t.addVertex(VertexKind::kGpu, node);
    t.addLink(v, sw, LinkKind::kPcie, 10, 1.0);
    t.addLink(sw, v, LinkKind::kPcie, down[g], 1.0);
  }
  EXPECT_NEAR(bruteForceRate(t), 10, 1e-12);
  Result<LogicalTopology> logical = buildCompleteLogicalTopology(t, false);
  ASSERT_TRUE(logical.isOk());
  Result<ForestRate> rate = forestRate(*logical, 60);
  ASSERT_TRUE(rate.isOk());
  EXPECT_NEAR(rate->rate_gbps, 5, 1e-7);
}

TEST(ForestRate, StarOfEqualLinksGivesIngressOverOthers) {
  // 4 GPUs on one switch at 100 GB/s each way: every GPU must take in 3 shares, so R = 100 / 3 (by hand).
  Topology t;
  t.name = "star";
  const int node = t.addNode("node0");
  const int sw = t.addVertex(VertexKind::kNvSwitch, node, "nvswitch");
  for (int g = 0; g < 4; ++g) {
    const int v = t.addVertex(VertexKind::kGpu, node);
    t.addDuplexLink(v, sw, LinkKind::kNvlink, 100, 0.35);
  }
  Result<LogicalTopology> logical = buildCompleteLogicalTopology(t, false);
  ASSERT_TRUE(logical.isOk());
  Result<ForestRate> rate = forestRate(*logical, 60);
  ASSERT_TRUE(rate.isOk());
  EXPECT_NEAR(rate->rate_gbps, 100.0 / 3, 1e-7);
  Result<ForestUnits> units = forestUnits(*logical, *rate, 8, 0.005);
  ASSERT_TRUE(units.isOk());
  EXPECT_EQ(units->k, 1);  // one tree per root, every pair one unit
  EXPECT_NEAR(units->rate_gbps, 100.0 / 3, 1e-6);
  EXPECT_TRUE(treeUnitsFeasible(4, units->capacity, units->k));
  EXPECT_FALSE(treeUnitsFeasible(4, units->capacity, units->k + 1));
}

TEST(ForestUnits, FeasibleAtTheirRateAndWithinToleranceOnRandomTrees) {
  std::mt19937 rng(99);
  for (int trial = 0; trial < 12; ++trial) {
    Topology t = randomSwitchTree(rng, 1 + trial % 3, 3 + trial % 4);
    Result<LogicalTopology> logical = buildCompleteLogicalTopology(t, false);
    ASSERT_TRUE(logical.isOk());
    Result<ForestRate> rate = forestRate(*logical, 60);
    ASSERT_TRUE(rate.isOk());
    Result<ForestUnits> units = forestUnits(*logical, *rate, 32, 0.005);
    ASSERT_TRUE(units.isOk()) << units.status().toString();
    EXPECT_TRUE(treeUnitsFeasible(t.numGpus(), units->capacity, units->k));
    EXPECT_LE(units->rate_gbps, rate->rate_gbps * (1 + 1e-9));
    EXPECT_GT(units->rate_gbps, 0);
  }
}

TEST(TreeUnitsFeasible, MatchesTheFlowConditionByHand) {
  // Directed 3-cycle with capacity 1: each rank receives 1 unit from its predecessor; with k = 1 a rank needs
  // n k - k = 2 units from others through one incoming arc: infeasible. With capacity 2: feasible.
  std::vector<int64_t> cap(9, 0);
  cap[0 * 3 + 1] = cap[1 * 3 + 2] = cap[2 * 3 + 0] = 1;
  EXPECT_FALSE(treeUnitsFeasible(3, cap, 1));
  cap[0 * 3 + 1] = cap[1 * 3 + 2] = cap[2 * 3 + 0] = 2;
  EXPECT_TRUE(treeUnitsFeasible(3, cap, 1));
  EXPECT_FALSE(treeUnitsFeasible(3, cap, 2));
  EXPECT_FALSE(treeUnitsFeasible(3, {1, 2}, 1));  // wrong size
}

TEST(ForestRate, RefusesARankWithoutRoutes) {
  Topology t;
  t.name = "island";
  const int node = t.addNode("node0");
  const int a = t.addVertex(VertexKind::kGpu, node);
  const int b = t.addVertex(VertexKind::kGpu, node);
  t.addVertex(VertexKind::kGpu, node);
  t.addDuplexLink(a, b, LinkKind::kNvlink, 50, 0.5);
  Result<LogicalTopology> logical = buildCompleteLogicalTopology(t, false);
  ASSERT_FALSE(logical.isOk());
  EXPECT_NE(logical.status().message().find("rank 2"), std::string::npos) << logical.status().message();
}

}  // namespace
}  // namespace braid::synth
