// allGatherCutBound / reduceScatterCutBound / allReduceCutBound: closed forms derived by hand, errors, and
// random small graphs checked against brute-force enumeration of every vertex subset.
#include "braid/bounds.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace braid {
namespace {

constexpr double kBytes = 1 << 20;  // bytes per rank

// Ring of n GPUs, bandwidth b GB/s each way between neighbours.
Topology ring(int n, double b) {
  Topology t;
  int node = t.addNode("node0");
  for (int i = 0; i < n; ++i) t.addVertex(VertexKind::kGpu, node);
  for (int i = 0; i < n; ++i) t.addDuplexLink(i, (i + 1) % n, LinkKind::kNvlink, b, 1.0);
  return t;
}

TEST(AllGatherCutBound, RingClosedForm) {
  // A set S of k GPUs forming one arc has 2 entering links (2B) and n - k GPUs outside: (n-k)m/(2B), largest
  // at k = 1. A set of several arcs has 2B per arc and no more outside GPUs, so it is never worse. Switch-free,
  // so the worst S is a single GPU: (n-1) m / (2B). B GB/s = B * 1e3 bytes/us.
  for (int n : {3, 4, 5, 8, 11}) {
    const double b = 25;
    Result<CutBound> r = allGatherCutBound(ring(n, b), kBytes);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_NEAR(r->time_us, (n - 1) * kBytes / (2 * b * 1e3), 1e-9 * r->time_us) << n;
    EXPECT_EQ(r->cut.size(), 1u);
    Result<CutBound> rs = reduceScatterCutBound(ring(n, b), kBytes);
    ASSERT_TRUE(rs.isOk());
    EXPECT_NEAR(rs->time_us, r->time_us, 1e-9 * r->time_us);
    Result<CutBound> ar = allReduceCutBound(ring(n, b), kBytes);
    ASSERT_TRUE(ar.isOk());
    EXPECT_NEAR(ar->time_us, 2 * r->time_us, 1e-9 * r->time_us);
  }
}

TEST(AllGatherCutBound, FullMeshClosedForm) {
  // k GPUs in S: k (n-k) links enter at B each, n-k GPUs outside: (n-k)m/(k(n-k)B) = m/(kB), max at k = 1: m/B.
  for (int n : {2, 4, 7}) {
    const double b = 40;
    Topology t;
    int node = t.addNode("node0");
    for (int i = 0; i < n; ++i) t.addVertex(VertexKind::kGpu, node);
    for (int i = 0; i < n; ++i) {
      for (int j = i + 1; j < n; ++j) t.addDuplexLink(i, j, LinkKind::kNvlink, b, 1.0);
    }
    Result<CutBound> r = allGatherCutBound(t, kBytes);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_NEAR(r->time_us, kBytes / (b * 1e3), 1e-9 * r->time_us) << n;
  }
}

TEST(AllGatherCutBound, SwitchClosedForm) {
  // One switch, each GPU linked to it at B per direction. S = k GPUs without the switch: k links enter
  // (kB), n-k GPUs outside: (n-k)m/(kB), max at k = 1: (n-1)m/B. S = k GPUs plus the switch: the n-k outside
  // GPUs' links enter ((n-k)B): m/B, never more. Bound: (n-1) m / B, cut = one GPU.
  for (int n : {2, 3, 8, 10}) {
    const double b = 450;
    Topology t;
    int node = t.addNode("node0");
    for (int i = 0; i < n; ++i) t.addVertex(VertexKind::kGpu, node);
    int sw = t.addVertex(VertexKind::kNvSwitch, node, "nvswitch0");
    for (int i = 0; i < n; ++i) t.addDuplexLink(i, sw, LinkKind::kNvlink, b, 1.0);
    Result<CutBound> r = allGatherCutBound(t, kBytes);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_NEAR(r->time_us, (n - 1) * kBytes / (b * 1e3), 1e-9 * r->time_us) << n;
    ASSERT_EQ(r->cut.size(), 1u);
    EXPECT_EQ(t.vertices[r->cut[0]].kind, VertexKind::kGpu);
  }
}

TEST(AllGatherCutBound, FewerThanTwoGpusIsZero) {
  Topology t;
  int node = t.addNode("node0");
  int g = t.addVertex(VertexKind::kGpu, node);
  int sw = t.addVertex(VertexKind::kNvSwitch, node, "sw");
  t.addDuplexLink(g, sw, LinkKind::kNvlink, 10, 1);
  Result<CutBound> r = allGatherCutBound(t, kBytes);
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(r->time_us, 0);
  EXPECT_TRUE(r->cut.empty());
  Result<CutBound> empty = allReduceCutBound(Topology{}, kBytes);
  ASSERT_TRUE(empty.isOk());
  EXPECT_EQ(empty->time_us, 0);
}

TEST(AllGatherCutBound, UnreachableGpuIsInvalidArgument) {
  Topology t = ring(3, 10);
  int g = t.addVertex(VertexKind::kGpu, 0);  // gpu3, no links
  Result<CutBound> r = allGatherCutBound(t, kBytes);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("gpu3"), std::string::npos) << r.status().message();
  // One-way link only: gpu3 is reached but cannot send back.
  t.addLink(0, g, LinkKind::kNvlink, 10, 1);
  r = allGatherCutBound(t, kBytes);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("gpu3"), std::string::npos) << r.status().message();
  EXPECT_EQ(reduceScatterCutBound(t, kBytes).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(allGatherCutBound(ring(3, 10), -1).status().code(), StatusCode::kInvalidArgument);
}

TEST(AllGatherCutBound, FatTreeOfNvSwitchBoxes) {
  // b boxes of 8 GPUs; each GPU <-> its box's NVSwitch at 450 GB/s and <-> one global IB switch at 50 GB/s.
  // Single GPU: ingress 450 + 50 = 500, (8b-1) GPUs outside. One box (8 GPUs + NVSwitch): ingress 8 * 50 =
  // 400, 8(b-1) outside. b = 2: 15m/500 > 8m/400 (single GPU binds); b = 16: 120m/400 > 127m/500 (box binds).
  // Matches anchors_algorithms.md §1 (algbw = 8b m / T: 533.3 GB/s at b = 2, 426.7 GB/s at b = 16).
  for (int boxes : {2, 16}) {
    Topology t;
    std::vector<int> gpus;
    for (int b = 0; b < boxes; ++b) {
      int node = t.addNode("node" + std::to_string(b));
      for (int i = 0; i < 8; ++i) gpus.push_back(t.addVertex(VertexKind::kGpu, node));
    }
    int ib = t.addVertex(VertexKind::kNetSwitch, -1, "ib");
    for (int b = 0; b < boxes; ++b) {
      int sw = t.addVertex(VertexKind::kNvSwitch, b, "nvswitch" + std::to_string(b));
      for (int i = 0; i < 8; ++i) {
        t.addDuplexLink(gpus[8 * b + i], sw, LinkKind::kNvlink, 450, 1);
        t.addDuplexLink(gpus[8 * b + i], ib, LinkKind::kNet, 50, 1);
      }
    }
    Result<CutBound> r = allGatherCutBound(t, kBytes);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    const double expected = boxes == 2 ? 15 * kBytes / 500e3 : 120 * kBytes / 400e3;
    EXPECT_NEAR(r->time_us, expected, 1e-9 * expected) << boxes;
    EXPECT_EQ(r->cut.size(), boxes == 2 ? 1u : 9u) << boxes;
  }
}

// max over valid S of |G \ S| * m / bw(S), bw = into S (all-gather) or out of S (reduce-scatter).
double bruteForce(const Topology& t, bool into) {
  const int n = static_cast<int>(t.vertices.size());
  const int gpus = t.numGpus();
  double best = 0;
  for (int mask = 1; mask < (1 << n); ++mask) {
    int inside = 0;
    for (const Vertex& v : t.vertices) inside += (v.kind == VertexKind::kGpu && (mask >> v.id & 1)) ? 1 : 0;
    if (inside == 0 || inside == gpus) continue;
    double bw = 0;
    for (const Link& l : t.links) {
      bool src_in = mask >> l.src & 1;
      bool dst_in = mask >> l.dst & 1;
      if (into ? (!src_in && dst_in) : (src_in && !dst_in)) bw += l.bandwidth_gbps;
    }
    best = std::max(best, (gpus - inside) * kBytes / (bw * 1e3));
  }
  return best;
}

TEST(AllGatherCutBound, MatchesBruteForceOnRandomGraphs) {
  const VertexKind kSwitchKinds[] = {VertexKind::kNvSwitch, VertexKind::kPcieSwitch, VertexKind::kNic, VertexKind::kCpu,
                                     VertexKind::kNetSwitch};
  for (unsigned seed = 1; seed <= 40; ++seed) {
    std::mt19937 rng(seed);
    const int n = std::uniform_int_distribution<int>(3, 12)(rng);
    const int num_gpus = std::uniform_int_distribution<int>(2, n - 1)(rng);
    Topology t;
    int node = t.addNode("node0");
    for (int i = 0; i < num_gpus; ++i) t.addVertex(VertexKind::kGpu, node);
    for (int i = num_gpus; i < n; ++i) {
      t.addVertex(kSwitchKinds[rng() % 5], node, "sw" + std::to_string(i));
    }
    std::uniform_real_distribution<double> bw(1.0, 100.0);
    // A random directed Hamiltonian cycle makes the graph strongly connected; extra links, some one-way.
    std::vector<int> order(n);
    for (int i = 0; i < n; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    for (int i = 0; i < n; ++i) t.addLink(order[i], order[(i + 1) % n], LinkKind::kNvlink, bw(rng), 1);
    const int extra = std::uniform_int_distribution<int>(0, 2 * n)(rng);
    for (int e = 0; e < extra; ++e) {
      int a = rng() % n;
      int b = rng() % n;
      if (a == b) continue;
      if (rng() % 2) {
        t.addDuplexLink(a, b, LinkKind::kPcie, bw(rng), 1);
      } else {
        t.addLink(a, b, LinkKind::kNet, bw(rng), 1);
      }
    }
    Result<CutBound> ag = allGatherCutBound(t, kBytes);
    ASSERT_TRUE(ag.isOk()) << seed << ": " << ag.status().toString();
    const double ag_expected = bruteForce(t, true);
    EXPECT_NEAR(ag->time_us, ag_expected, 1e-9 * ag_expected) << "seed " << seed;
    // The reported cut attains the reported time.
    double in_bw = 0;
    std::vector<bool> in_s(n);
    for (int v : ag->cut) in_s[v] = true;
    int outside = 0;
    for (const Vertex& v : t.vertices) outside += (v.kind == VertexKind::kGpu && !in_s[v.id]) ? 1 : 0;
    for (const Link& l : t.links) in_bw += (!in_s[l.src] && in_s[l.dst]) ? l.bandwidth_gbps : 0;
    EXPECT_NEAR(outside * kBytes / (in_bw * 1e3), ag->time_us, 1e-12 * ag_expected) << "seed " << seed;

    Result<CutBound> rs = reduceScatterCutBound(t, kBytes);
    ASSERT_TRUE(rs.isOk()) << seed;
    const double rs_expected = bruteForce(t, false);
    EXPECT_NEAR(rs->time_us, rs_expected, 1e-9 * rs_expected) << "seed " << seed;
    Result<CutBound> ar = allReduceCutBound(t, kBytes);
    ASSERT_TRUE(ar.isOk()) << seed;
    EXPECT_NEAR(ar->time_us, ag_expected + rs_expected, 1e-9 * (ag_expected + rs_expected)) << "seed " << seed;
  }
}

}  // namespace
}  // namespace braid
