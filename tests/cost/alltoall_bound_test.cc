// All-to-all cut bound (allToAllCutBound): closed forms on a switch and on two nodes joined by one NIC link, and
// brute force over every vertex subset of random small graphs; the max-concurrent flow (allToAllFlow) below.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "braid/bounds.h"
#include "braid/topology.h"

namespace braid {
namespace {

// n GPUs on one switch, every GPU linked both ways at `bw` GB/s.
Topology singleSwitch(int n, double bw) {
  Topology t;
  t.name = "switch";
  const int node = t.addNode("node0");
  const int sw = t.addVertex(VertexKind::kNvSwitch, node, "sw");
  for (int i = 0; i < n; ++i) t.addDuplexLink(t.addVertex(VertexKind::kGpu, node), sw, LinkKind::kNvlink, bw, 0.5);
  return t;
}

// Two nodes of g GPUs on a fast switch each; the switches' NICs joined by one link each way of `nic_bw` GB/s.
Topology twoNodes(int g, double gpu_bw, double nic_bw) {
  Topology t;
  t.name = "two-nodes";
  int nic[2];
  for (int q = 0; q < 2; ++q) {
    const int node = t.addNode("node" + std::to_string(q));
    const int sw = t.addVertex(VertexKind::kNvSwitch, node, "node" + std::to_string(q) + ".sw");
    for (int i = 0; i < g; ++i) {
      t.addDuplexLink(t.addVertex(VertexKind::kGpu, node), sw, LinkKind::kNvlink, gpu_bw, 0.5);
    }
    nic[q] = t.addVertex(VertexKind::kNic, node, "node" + std::to_string(q) + ".nic");
    t.addDuplexLink(nic[q], sw, LinkKind::kPcie, 1000, 1.0);
  }
  t.addDuplexLink(nic[0], nic[1], LinkKind::kNet, nic_bw, 1.3);
  return t;
}

// Brute force: max over every vertex subset S of a(n-a)/n x m / min(B_out(S), B_in(S)), in microseconds.
double bruteForce(const Topology& t, double m) {
  const int nv = static_cast<int>(t.vertices.size());
  const double n = t.numGpus();
  double best = 0;
  for (uint32_t mask = 1; mask + 1 < (1u << nv); ++mask) {
    double a = 0, out = 0, in = 0;
    for (const Vertex& v : t.vertices) a += (v.kind == VertexKind::kGpu && ((mask >> v.id) & 1u)) ? 1 : 0;
    if (a == 0 || a == n) continue;
    for (const Link& l : t.links) {
      const bool s_in = (mask >> l.src) & 1u, d_in = (mask >> l.dst) & 1u;
      if (s_in && !d_in) out += l.bandwidth_gbps;
      if (!s_in && d_in) in += l.bandwidth_gbps;
    }
    best = std::max(best, a * (n - a) / n * m / (std::min(out, in) * 1e3));
  }
  return best;
}

// The ratio of one given cut, recomputed here from its definition.
double cutValue(const Topology& t, const std::vector<int>& cut, double m) {
  std::vector<bool> in_s(t.vertices.size(), false);
  for (int v : cut) in_s[v] = true;
  const double n = t.numGpus();
  double a = 0, out = 0, in = 0;
  for (const Vertex& v : t.vertices) a += (v.kind == VertexKind::kGpu && in_s[v.id]) ? 1 : 0;
  for (const Link& l : t.links) {
    if (in_s[l.src] && !in_s[l.dst]) out += l.bandwidth_gbps;
    if (!in_s[l.src] && in_s[l.dst]) in += l.bandwidth_gbps;
  }
  return a * (n - a) / n * m / (std::min(out, in) * 1e3);
}

TEST(AllToAllBound, SingleSwitchIsInjectionBound) {
  // Each GPU sends (n-1)/n of its buffer S through its own uplink of B: T = (n-1) S / (n B).
  // n = 8, B = 50 GB/s = 5e4 bytes/us, S = 1e6 bytes: 7 x 1e6 / (8 x 5e4) = 17.5 us.
  const Topology t = singleSwitch(8, 50);
  Result<CutBound> b = allToAllCutBound(t, 1e6);
  ASSERT_TRUE(b.isOk()) << b.status().toString();
  EXPECT_NEAR(b->time_us, 17.5, 1e-9);
  EXPECT_NEAR(bruteForce(t, 1e6), 17.5, 1e-9);
  ASSERT_EQ(b->cut.size(), 1u);  // one GPU alone binds
  EXPECT_EQ(t.vertices[b->cut[0]].kind, VertexKind::kGpu);
}

TEST(AllToAllBound, TwoNodesAreBoundByTheNicLink) {
  // n = 8 GPUs, 4 per node; the node cut carries (n/2)^2 x S/n = 16 x S / 8 = 2 S bytes each way over one
  // 10 GB/s link: T = 2 S / 1e4 us. With S = 1e6: 200 us. (A GPU alone: 7/8 x 1e6 / 4e5 = 2.19 us.)
  const Topology t = twoNodes(4, 400, 10);
  Result<CutBound> b = allToAllCutBound(t, 1e6);
  ASSERT_TRUE(b.isOk()) << b.status().toString();
  EXPECT_NEAR(b->time_us, 200.0, 1e-9);
  EXPECT_NEAR(bruteForce(t, 1e6), 200.0, 1e-9);
  // The binding set is one whole node (its 4 GPUs, switch and NIC).
  ASSERT_EQ(b->cut.size(), 6u);
  const int node = t.vertices[b->cut[0]].node;
  for (int v : b->cut) EXPECT_EQ(t.vertices[v].node, node);
}

TEST(AllToAllBound, EdgeCasesAndErrors) {
  EXPECT_EQ(allToAllCutBound(singleSwitch(1, 10), 1e6)->time_us, 0);
  EXPECT_FALSE(allToAllCutBound(singleSwitch(4, 10), -1).isOk());
  EXPECT_FALSE(allToAllCutBound(singleSwitch(4, 10), std::numeric_limits<double>::infinity()).isOk());
  Topology cut_off = singleSwitch(3, 10);
  cut_off.addVertex(VertexKind::kGpu, 0);  // gpu3, linked to nothing
  Result<CutBound> b = allToAllCutBound(cut_off, 1e6);
  ASSERT_FALSE(b.isOk());
  EXPECT_NE(b.status().message().find("gpu3"), std::string::npos) << b.status().message();
}

// Random connected graphs of <= 12 vertices with switches. Half of them ("clustered") are two nodes whose inside
// links are all >= 1000 GB/s and whose only connection is one link pair of <= 2 GB/s: any set that splits a node
// cuts an inside link, so its ratio is at most (n^2/4)/n / 1000 = n / 4000 <= 0.003 per byte/1e3, while the node
// cut has a(n-a)/n / 2 >= 0.25 of the same units — the node cut binds and the bound must equal brute force.
TEST(AllToAllBound, BruteForceOverRandomGraphs) {
  std::mt19937 rng(20260401);
  int clustered_checked = 0;
  for (int trial = 0; trial < 30; ++trial) {
    const bool clustered = trial % 2 == 1;
    Topology t;
    t.name = "random" + std::to_string(trial);
    std::uniform_int_distribution<int> gpus_d(2, 6), switches_d(1, 4);
    const int gpus = gpus_d(rng);
    const int switches = std::min(switches_d(rng), 12 - gpus);
    const int n0 = t.addNode("node0");
    const int n1 = t.addNode("node1");
    std::vector<int> ids;
    std::vector<int> side;
    for (int i = 0; i < gpus; ++i) {
      const int q = clustered ? (i < (gpus + 1) / 2 ? 0 : 1) : static_cast<int>(rng() % 2);
      ids.push_back(t.addVertex(VertexKind::kGpu, q == 0 ? n0 : n1));
      side.push_back(q);
    }
    for (int i = 0; i < switches; ++i) {
      const int q = clustered ? i % 2 : static_cast<int>(rng() % 2);
      ids.push_back(t.addVertex(VertexKind::kPcieSwitch, q == 0 ? n0 : n1, "sw" + std::to_string(i)));
      side.push_back(q);
    }
    std::uniform_real_distribution<double> fast(1000, 5000), any(1, 100), slow(0.5, 2);
    const int nv = static_cast<int>(ids.size());
    if (clustered) {
      // A spanning chain inside each node, extra random inside links, one slow link pair between the nodes.
      for (int q = 0; q < 2; ++q) {
        int prev = -1;
        for (int v = 0; v < nv; ++v) {
          if (side[v] != q) continue;
          if (prev >= 0) t.addDuplexLink(ids[prev], ids[v], LinkKind::kPcie, fast(rng), 1);
          prev = v;
        }
      }
      for (int e = 0; e < nv; ++e) {
        const int a = static_cast<int>(rng() % nv), b = static_cast<int>(rng() % nv);
        if (a != b && side[a] == side[b]) t.addLink(ids[a], ids[b], LinkKind::kPcie, fast(rng), 1);
      }
      int a = -1, b = -1;
      for (int v = 0; v < nv; ++v) {
        if (side[v] == 0 && a < 0) a = v;
        if (side[v] == 1 && b < 0) b = v;
      }
      t.addLink(ids[a], ids[b], LinkKind::kNet, slow(rng), 1);
      t.addLink(ids[b], ids[a], LinkKind::kNet, slow(rng), 1);
    } else {
      for (int v = 1; v < nv; ++v) t.addDuplexLink(ids[v - 1], ids[v], LinkKind::kPcie, any(rng), 1);
      const int extra = static_cast<int>(rng() % (2 * nv));
      for (int e = 0; e < extra; ++e) {
        const int a = static_cast<int>(rng() % nv), b = static_cast<int>(rng() % nv);
        if (a != b) t.addLink(ids[a], ids[b], LinkKind::kPcie, any(rng), 1);
      }
    }
    SCOPED_TRACE(t.name);
    const double m = 1e6;
    Result<CutBound> b = allToAllCutBound(t, m);
    ASSERT_TRUE(b.isOk()) << b.status().toString();
    const double brute = bruteForce(t, m);
    EXPECT_GT(b->time_us, 0);
    EXPECT_GE(brute, b->time_us * (1 - 1e-12));  // a lower bound from examined cuts never exceeds the max
    EXPECT_NEAR(cutValue(t, b->cut, m), b->time_us, 1e-9 * b->time_us);  // the reported cut gives the value
    if (clustered && t.numGpus() >= 2) {
      EXPECT_NEAR(b->time_us, brute, 1e-9 * brute);
      ++clustered_checked;
    }
  }
  EXPECT_GE(clustered_checked, 10);
}

// ---- the max-concurrent flow (allToAllFlow): hand-derived optima on a switch, a path and a ring; on random
// small graphs it is at least the route and cut bounds and its paths rebuild a flow that fits every link.

constexpr double kS = 256.0 * (1 << 20);  // one rank's send buffer, bytes

void expectFlowRel(double got, double want, const std::string& what) {
  EXPECT_NEAR(got, want, 1e-7 * std::max(1.0, std::fabs(want))) << what;
}

// n GPUs joined GPU to GPU: i <-> i+1 (and n-1 <-> 0 when `ring`), bw GB/s each way.
Topology chain(int n, double bw, bool ring) {
  Topology t;
  t.name = ring ? "ring" : "path";
  const int node = t.addNode("node0");
  std::vector<int> g;
  for (int i = 0; i < n; ++i) g.push_back(t.addVertex(VertexKind::kGpu, node));
  for (int i = 0; i + 1 < n; ++i) t.addDuplexLink(g[i], g[i + 1], LinkKind::kNvlink, bw, 0.5);
  if (ring) t.addDuplexLink(g[n - 1], g[0], LinkKind::kNvlink, bw, 0.5);
  return t;
}

// Rebuilds the per-link load from the paths (fraction x one block per pair crossed) and checks the paths' shape.
void checkPaths(const Topology& t, const AllToAllFlow& f) {
  const int n = t.numGpus();
  ASSERT_EQ(f.paths.size(), static_cast<size_t>(n) * n);
  std::vector<double> load(t.links.size(), 0);  // blocks
  for (int s = 0; s < n; ++s) {
    for (int d = 0; d < n; ++d) {
      const auto& list = f.paths[static_cast<size_t>(s) * n + d];
      if (s == d) {
        EXPECT_TRUE(list.empty());
        continue;
      }
      double total = 0;
      for (const AllToAllFlow::Path& p : list) {
        ASSERT_GE(p.ranks.size(), 2u);
        EXPECT_EQ(p.ranks.front(), s);
        EXPECT_EQ(p.ranks.back(), d);
        EXPECT_GT(p.fraction, 0);
        total += p.fraction;
        for (size_t h = 0; h + 1 < p.ranks.size(); ++h) {
          std::optional<Route> r = t.route(p.ranks[h], p.ranks[h + 1]);
          ASSERT_TRUE(r.has_value()) << p.ranks[h] << " -> " << p.ranks[h + 1];
          for (int l : r->links) load[l] += p.fraction;
        }
      }
      EXPECT_NEAR(total, 1.0, 1e-9) << s << " -> " << d;
    }
  }
  // The time the paths take on the busiest link equals the optimum (within the simplex's tolerance).
  double busiest_us = 0;
  for (size_t l = 0; l < t.links.size(); ++l) {
    busiest_us = std::max(busiest_us, load[l] * (kS / n) / (t.links[l].bandwidth_gbps * 1e3));
  }
  EXPECT_LE(busiest_us, f.us_per_byte * kS * (1 + 1e-6));
}

TEST(AllToAllFlow, SwitchIsDirect) {
  // Every GPU sends its n - 1 blocks up its own link: (n-1)/n S / bw.
  for (int n : {2, 5, 8}) {
    const Topology t = singleSwitch(n, 100);
    Result<AllToAllFlow> f = allToAllFlow(t);
    ASSERT_TRUE(f.isOk()) << f.status().toString();
    expectFlowRel(f->us_per_byte * kS, (n - 1.0) / n * kS / 100e3, "switch n=" + std::to_string(n));
    checkPaths(t, *f);
    for (const auto& list : f->paths) {
      for (const auto& p : list) EXPECT_EQ(p.ranks.size(), 2u);
    }
  }
}

TEST(AllToAllFlow, PathRelaysThroughTheMiddleGpu) {
  // 0 - 1 - 2: routes never cross a GPU, so 0 -> 2 relays through 1; link 0->1 carries blocks 0->1 and 0->2,
  // 1->2 carries 0->2 and 1->2: two blocks of S/3 per link.
  const Topology t = chain(3, 50, false);
  Result<AllToAllFlow> f = allToAllFlow(t);
  ASSERT_TRUE(f.isOk()) << f.status().toString();
  expectFlowRel(f->us_per_byte * kS, 2 * (kS / 3) / 50e3, "path");
  checkPaths(t, *f);
  const auto& relay = f->paths[0 * 3 + 2];
  ASSERT_EQ(relay.size(), 1u);
  EXPECT_EQ(relay[0].ranks, (std::vector<int>{0, 1, 2}));
}

TEST(AllToAllFlow, BidirectionalRingOfFour) {
  // Per source: two neighbours one hop away, the opposite rank two hops: 4 block-hops; 16 over 8 link directions.
  const Topology t = chain(4, 25, true);
  Result<AllToAllFlow> f = allToAllFlow(t);
  ASSERT_TRUE(f.isOk()) << f.status().toString();
  expectFlowRel(f->us_per_byte * kS, 2 * (kS / 4) / 25e3, "ring");
  checkPaths(t, *f);
}

TEST(AllToAllFlow, RandomGraphsBoundAndDecompose) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 12; ++trial) {
    const int n = 3 + trial % 4;
    Topology t;
    t.name = "random" + std::to_string(trial);
    const int node = t.addNode("node0");
    std::vector<int> g;
    for (int i = 0; i < n; ++i) g.push_back(t.addVertex(VertexKind::kGpu, node));
    const int sw = t.addVertex(VertexKind::kNvSwitch, node, "sw");
    std::uniform_int_distribution<int> bw(1, 8);
    for (int i = 0; i < n; ++i) {
      t.addDuplexLink(g[i], g[(i + 1) % n], LinkKind::kNvlink, 10.0 * bw(rng), 0.5);  // keeps it connected
      if (rng() % 2) t.addDuplexLink(g[i], sw, LinkKind::kNvlink, 10.0 * bw(rng), 0.5);
    }
    Result<AllToAllFlow> f = allToAllFlow(t);
    ASSERT_TRUE(f.isOk()) << t.name << ": " << f.status().toString();
    Result<double> route = routeBound(t, CollectiveKind::kAllToAll, kS);
    Result<CutBound> cut = allToAllCutBound(t, kS);
    ASSERT_TRUE(route.isOk() && cut.isOk());
    const double flow_us = f->us_per_byte * kS;
    EXPECT_GE(flow_us, *route * (1 - 1e-7)) << t.name;
    EXPECT_GE(flow_us, cut->time_us * (1 - 1e-7)) << t.name;
    checkPaths(t, *f);
    Result<CollectiveBound> b = collectiveBound(t, CollectiveKind::kAllToAll, static_cast<uint64_t>(kS));
    ASSERT_TRUE(b.isOk());
    expectFlowRel(b->flow_us, flow_us, "collectiveBound flow_us");
    EXPECT_GE(b->bandwidth_us, b->flow_us);
  }
}

TEST(AllToAllFlow, Limits) {
  EXPECT_EQ(allToAllFlow(singleSwitch(kAllToAllFlowMaxGpus + 1, 10)).status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(allToAllFlow(singleSwitch(4, 10), 0).status().code(), StatusCode::kInvalidArgument);
  Result<AllToAllFlow> one = allToAllFlow(singleSwitch(1, 10));
  ASSERT_TRUE(one.isOk());
  EXPECT_EQ(one->us_per_byte, 0);
}

}  // namespace
}  // namespace braid
