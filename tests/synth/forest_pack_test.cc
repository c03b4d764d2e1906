// packArborescences (synthesizer/forest_pack.h): k spanning out-trees per root in an integer capacitated digraph.
// Expected feasibility comes from the cut form of Edmonds' theorem, evaluated here by hand or by brute force over
// all 2^n rank sets: k trees per root fit iff every nonempty X has
//   rho(X) = sum of capacities of arcs entering X  >=  k (n - |X|)   (the roots outside X each need k arcs into X).
// Every packing returned is checked independently: each group spans all ranks with n-1 edges whose parent is
// already in the tree, each root's multiplicities sum to k, and every arc carries at most its capacity.

#include "synthesizer/forest_pack.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace braid::synth {
namespace {

using Caps = std::vector<int64_t>;

// The cut condition over every nonempty proper subset X (X = all ranks gives 0 >= 0).
bool cutFeasible(int n, const Caps& cap, int64_t k) {
  for (uint32_t x = 1; x + 1 < (1u << n); ++x) {
    int64_t in = 0;
    int size = 0;
    for (int v = 0; v < n; ++v) {
      if (!(x >> v & 1)) continue;
      ++size;
      for (int u = 0; u < n; ++u) {
        if (!(x >> u & 1)) in += cap[u * n + v];
      }
    }
    if (in < k * (n - size)) return false;
  }
  return true;
}

// The largest k for which the cut condition holds (0 when none does).
int64_t maxFeasibleK(int n, const Caps& cap) {
  int64_t k = 0;
  while (cutFeasible(n, cap, k + 1)) ++k;
  return k;
}

// Empty string when `trees` is a valid packing of k trees per root into `cap`; otherwise what is wrong.
std::string validate(int n, const Caps& cap, int64_t k, const std::vector<PackedTree>& trees) {
  std::vector<int64_t> per_root(n, 0);
  Caps used(cap.size(), 0);
  for (const PackedTree& t : trees) {
    if (t.root < 0 || t.root >= n) return "root out of range";
    if (t.multiplicity <= 0) return "non-positive multiplicity";
    if (static_cast<int>(t.edges.size()) != n - 1) return "tree of root " + std::to_string(t.root) + " has wrong size";
    per_root[t.root] += t.multiplicity;
    std::vector<bool> in(n, false);
    in[t.root] = true;
    for (const auto& [p, c] : t.edges) {
      if (p < 0 || p >= n || c < 0 || c >= n) return "edge out of range";
      if (!in[p]) return "parent " + std::to_string(p) + " not yet in the tree";
      if (in[c]) return "child " + std::to_string(c) + " already in the tree";
      in[c] = true;
      used[p * n + c] += t.multiplicity;
    }
  }
  for (int r = 0; r < n; ++r) {
    if (per_root[r] != k) return "root " + std::to_string(r) + " has " + std::to_string(per_root[r]) + " units";
  }
  for (int u = 0; u < n; ++u) {
    for (int v = 0; v < n; ++v) {
      if (u != v && used[u * n + v] > cap[u * n + v]) {
        return "arc " + std::to_string(u) + "->" + std::to_string(v) + " over capacity";
      }
    }
  }
  return "";
}

Caps complete(int n, int64_t c) {
  Caps cap(static_cast<size_t>(n) * n, c);
  for (int v = 0; v < n; ++v) cap[v * n + v] = 0;
  return cap;
}

TEST(ForestPack, CompleteDigraphOnFourRanks) {
  const int n = 4;
  const Caps cap = complete(n, 1);
  // k = 1: X of size s has rho(X) = s (4 - s) >= 4 - s for s >= 1.
  auto packed = packArborescences(n, cap, 1);
  ASSERT_TRUE(packed.isOk()) << packed.status().toString();
  EXPECT_EQ(validate(n, cap, 1, *packed), "");
  // 4 roots x 3 arcs = 12 arcs = every arc of the digraph, each used exactly once.
  int64_t arcs = 0;
  for (const PackedTree& t : *packed) arcs += t.multiplicity * static_cast<int64_t>(t.edges.size());
  EXPECT_EQ(arcs, 12);

  // k = 2: X = {v} has rho = 3 < 2 x 3 = 6. As a flow: the min cut into v is X = {v}, worth rho(X) + k = 3 + 2 = 5
  // (the super-source's arc into v) against n k = 8: short by 3, on every rank.
  auto infeasible = packArborescences(n, cap, 2);
  ASSERT_FALSE(infeasible.isOk());
  EXPECT_EQ(infeasible.status().code(), StatusCode::kInfeasible);
  const std::string& msg = infeasible.status().message();
  EXPECT_NE(msg.find("rank 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("is 5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("by 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("4 of 4 ranks"), std::string::npos) << msg;
}

TEST(ForestPack, DirectedRingHasOnlyThePaths) {
  // One-way ring 0 -> 1 -> 2 -> 3 -> 0 with capacity 3: X = {v} has rho = 3 = k (n - 1) at k = 1, and each root's
  // only spanning out-tree is the path around the ring.
  const int n = 4;
  Caps cap(n * n, 0);
  for (int v = 0; v < n; ++v) cap[v * n + (v + 1) % n] = 3;
  auto packed = packArborescences(n, cap, 1);
  ASSERT_TRUE(packed.isOk()) << packed.status().toString();
  ASSERT_EQ(packed->size(), 4u);
  for (int r = 0; r < n; ++r) {
    const PackedTree& t = (*packed)[r];
    EXPECT_EQ(t.root, r);
    EXPECT_EQ(t.multiplicity, 1);
    std::vector<std::pair<int, int>> path;
    for (int i = 0; i < n - 1; ++i) path.emplace_back((r + i) % n, (r + i + 1) % n);
    EXPECT_EQ(t.edges, path);
  }
  EXPECT_EQ(packArborescences(n, cap, 2).status().code(), StatusCode::kInfeasible);
}

TEST(ForestPack, BidirectionalRingOfFive) {
  // Ring of 5, capacity c each way. A contiguous arc X of s ranks (1 <= s <= 4) has exactly two arcs entering it,
  // rho(X) = 2c; any other X is a union of >= 2 separated runs with >= 4 entering arcs, so rho(X) >= 4c. The
  // binding sets are the single ranks: 2c >= k (5 - 1) = 4k, so the largest k is floor(c / 2).
  const int n = 5;
  for (int64_t c : {2, 3, 4, 6, 7}) {
    Caps cap(n * n, 0);
    for (int v = 0; v < n; ++v) {
      cap[v * n + (v + 1) % n] = c;
      cap[((v + 1) % n) * n + v] = c;
    }
    const int64_t kmax = c / 2;
    ASSERT_EQ(maxFeasibleK(n, cap), kmax) << "c = " << c;
    auto packed = packArborescences(n, cap, kmax);
    ASSERT_TRUE(packed.isOk()) << "c = " << c << ": " << packed.status().toString();
    EXPECT_EQ(validate(n, cap, kmax, *packed), "") << "c = " << c;
    EXPECT_EQ(packArborescences(n, cap, kmax + 1).status().code(), StatusCode::kInfeasible) << "c = " << c;
  }
}

TEST(ForestPack, Dgx1HybridCubeMesh) {
  // NVLink lanes of topologies/dgx1-v100.yaml: NV2 pairs 0-3 0-4 1-2 1-5 2-3 4-7 5-6 6-7, NV1 pairs 0-1 0-2 1-3
  // 2-6 3-7 4-5 4-6 5-7; each direction of a pair carries lanes x units.
  const int n = 8;
  const std::vector<std::pair<int, int>> nv2 = {{0, 3}, {0, 4}, {1, 2}, {1, 5}, {2, 3}, {4, 7}, {5, 6}, {6, 7}};
  const std::vector<std::pair<int, int>> nv1 = {{0, 1}, {0, 2}, {1, 3}, {2, 6}, {3, 7}, {4, 5}, {4, 6}, {5, 7}};
  for (int64_t units : {1, 4, 7, 12}) {
    Caps cap(n * n, 0);
    for (auto [a, b] : nv2) cap[a * n + b] = cap[b * n + a] = 2 * units;
    for (auto [a, b] : nv1) cap[a * n + b] = cap[b * n + a] = units;
    // Every GPU has 6 lanes in, so single ranks give k <= 6 units / 7; the brute force checks all other sets.
    const int64_t k = maxFeasibleK(n, cap);
    EXPECT_EQ(k, 6 * units / 7) << "units = " << units;
    if (k >= 1) {
      auto packed = packArborescences(n, cap, k);
      ASSERT_TRUE(packed.isOk()) << "units = " << units << ": " << packed.status().toString();
      EXPECT_EQ(validate(n, cap, k, *packed), "") << "units = " << units;
    }
    EXPECT_EQ(packArborescences(n, cap, k + 1).status().code(), StatusCode::kInfeasible) << "units = " << units;
  }
}

TEST(ForestPack, RandomDigraphsMatchTheCutCondition) {
  int feasible = 0, infeasible = 0;
  for (int n = 3; n <= 6; ++n) {
    for (uint32_t seed = 1; seed <= 40; ++seed) {
      std::mt19937 rng(seed * 1000 + n);  // raw engine output: the same sequence on every standard library
      Caps cap(n * n, 0);
      for (int u = 0; u < n; ++u) {
        for (int v = 0; v < n; ++v) {
          if (u != v) cap[u * n + v] = rng() % 5;
        }
      }
      for (int64_t k = 1; k <= 3; ++k) {
        const bool expected = cutFeasible(n, cap, k);
        auto packed = packArborescences(n, cap, k);
        SCOPED_TRACE("n = " + std::to_string(n) + ", seed = " + std::to_string(seed) + ", k = " + std::to_string(k));
        if (expected) {
          ++feasible;
          ASSERT_TRUE(packed.isOk()) << packed.status().toString();
          EXPECT_EQ(validate(n, cap, k, *packed), "");
        } else {
          ++infeasible;
          ASSERT_FALSE(packed.isOk());
          EXPECT_EQ(packed.status().code(), StatusCode::kInfeasible);
        }
      }
    }
  }
  // Both outcomes are exercised.
  EXPECT_GT(feasible, 50);
  EXPECT_GT(infeasible, 50);
}

TEST(ForestPack, RandomDigraphsAtTheirLargestK) {
  // Denser random digraphs on 7 and 8 ranks (capacities 0..9) at the largest k of the brute-force cut condition:
  // the packing needs group splits and cut-limited arcs here.
  size_t groups = 0, roots = 0;
  for (int n = 7; n <= 8; ++n) {
    for (uint32_t seed = 1; seed <= 15; ++seed) {
      std::mt19937 rng(seed * 7919 + n);
      Caps cap(n * n, 0);
      for (int u = 0; u < n; ++u) {
        for (int v = 0; v < n; ++v) {
          if (u != v) cap[u * n + v] = rng() % 10;
        }
      }
      const int64_t k = maxFeasibleK(n, cap);
      SCOPED_TRACE("n = " + std::to_string(n) + ", seed = " + std::to_string(seed) + ", k = " + std::to_string(k));
      if (k >= 1) {
        auto packed = packArborescences(n, cap, k);
        ASSERT_TRUE(packed.isOk()) << packed.status().toString();
        EXPECT_EQ(validate(n, cap, k, *packed), "");
        groups += packed->size();
        roots += n;
      }
      EXPECT_EQ(packArborescences(n, cap, k + 1).status().code(), StatusCode::kInfeasible);
    }
  }
  EXPECT_GT(groups, roots);  // some roots needed more than one group
}

// Boxes of 8 ranks: capacity `intra` between ranks of a box, `inter` between ranks of different boxes.
Caps boxes(int n, int64_t intra, int64_t inter) {
  Caps cap(static_cast<size_t>(n) * n, 0);
  for (int u = 0; u < n; ++u) {
    for (int v = 0; v < n; ++v) {
      if (u != v) cap[u * n + v] = u / 8 == v / 8 ? intra : inter;
    }
  }
  return cap;
}

TEST(ForestPack, TwoBoxes) {
  // 16 ranks, intra 20, inter 1. A single rank has 7 x 20 + 8 x 1 = 148 units in, >= 15 k for k <= 9; a box has
  // 8 x 8 = 64 units in, >= 8 k for k <= 8; the brute force over all 2^16 sets confirms k = 8.
  const int n = 16;
  const Caps cap = boxes(n, 20, 1);
  const int64_t k = maxFeasibleK(n, cap);
  ASSERT_EQ(k, 8);
  auto packed = packArborescences(n, cap, k);
  ASSERT_TRUE(packed.isOk()) << packed.status().toString();
  EXPECT_EQ(validate(n, cap, k, *packed), "");
  EXPECT_EQ(packArborescences(n, cap, k + 1).status().code(), StatusCode::kInfeasible);
}

TEST(ForestPack, DeterministicOutput) {
  const int n = 6;
  std::mt19937 rng(7);
  Caps cap(n * n, 0);
  for (int u = 0; u < n; ++u) {
    for (int v = 0; v < n; ++v) {
      if (u != v) cap[u * n + v] = 2 + rng() % 4;
    }
  }
  const int64_t k = maxFeasibleK(n, cap);
  ASSERT_GE(k, 1);
  auto a = packArborescences(n, cap, k);
  auto b = packArborescences(n, cap, k);
  ASSERT_TRUE(a.isOk() && b.isOk());
  ASSERT_EQ(a->size(), b->size());
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i].root, (*b)[i].root);
    EXPECT_EQ((*a)[i].multiplicity, (*b)[i].multiplicity);
    EXPECT_EQ((*a)[i].edges, (*b)[i].edges);
  }
  // Groups come ordered by root.
  for (size_t i = 1; i < a->size(); ++i) EXPECT_LE((*a)[i - 1].root, (*a)[i].root);
}

TEST(ForestPack, SingleRankAndHugeCapacities) {
  auto one = packArborescences(1, {0}, 5);
  ASSERT_TRUE(one.isOk());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].root, 0);
  EXPECT_EQ((*one)[0].multiplicity, 5);
  EXPECT_TRUE((*one)[0].edges.empty());
  // Capacities far above n k (clamped inside) do not overflow: 3 ranks, k = 1000.
  const Caps cap = complete(3, int64_t{1} << 60);
  auto packed = packArborescences(3, cap, 1000);
  ASSERT_TRUE(packed.isOk()) << packed.status().toString();
  EXPECT_EQ(validate(3, cap, 1000, *packed), "");
}

TEST(ForestPack, InvalidInput) {
  EXPECT_EQ(packArborescences(3, Caps(8, 1), 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(packArborescences(0, {}, 1).status().code(), StatusCode::kInvalidArgument);
  Caps negative = complete(3, 1);
  negative[1 * 3 + 2] = -1;
  EXPECT_EQ(packArborescences(3, negative, 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(packArborescences(3, complete(3, 1), 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(packArborescences(3, complete(3, 1), -2).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(packArborescences(3, complete(3, 1), INT64_MAX / 2).status().code(), StatusCode::kInvalidArgument);
}

TEST(ForestPack, DeadlineCheckStopsThePacking) {
  int calls = 0;
  auto stopped = packArborescences(6, complete(6, 2), 2, [&] { return ++calls < 10; });
  EXPECT_EQ(stopped.status().code(), StatusCode::kTimeout);
  EXPECT_EQ(calls, 10);
}

// Complete digraph with capacity 3 per arc: single ranks bind, 3 (n - 1) >= k (n - 1), so k = 3 is the largest k
// (a set of s ranks has 3 s (n - s) entering units >= 3 (n - s)).
void packComplete(int n) {
  const Caps cap = complete(n, 3);
  const auto start = std::chrono::steady_clock::now();
  auto packed = packArborescences(n, cap, 3);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(packed.isOk()) << packed.status().toString();
  EXPECT_EQ(validate(n, cap, 3, *packed), "");
  std::printf("complete digraph n=%d cap=3 k=3: %zu tree groups in %.3f s\n", n, packed->size(), seconds);
  const auto fail_start = std::chrono::steady_clock::now();
  EXPECT_EQ(packArborescences(n, cap, 4).status().code(), StatusCode::kInfeasible);
  std::printf("  k=4 rejected in %.3f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - fail_start).count());
}

TEST(ForestPack, CompleteDigraph16) { packComplete(16); }

TEST(ForestPack, CompleteDigraph32) { packComplete(32); }
TEST(ForestPack, CompleteDigraph64) { packComplete(64); }

// 8 boxes of 8: a single rank has 7 intra + 56 inter units in, >= 63 k; a union of j boxes has 8 j (64 - 8 j) inter
// units in, >= (64 - 8 j) k, i.e. k <= 8 j inter. With (intra, inter) = (60, 2): 532 / 63 -> k = 8; with
// (600, 20): 5320 / 63 -> k = 84 (k + 1 fails on the single ranks).
void packBoxes64(int64_t intra, int64_t inter, int64_t k) {
  const int n = 64;
  const Caps cap = boxes(n, intra, inter);
  const auto start = std::chrono::steady_clock::now();
  auto packed = packArborescences(n, cap, k);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(packed.isOk()) << packed.status().toString();
  EXPECT_EQ(validate(n, cap, k, *packed), "");
  std::printf("8 boxes of 8, intra %ld inter %ld, k=%ld: %zu tree groups in %.3f s\n", static_cast<long>(intra),
              static_cast<long>(inter), static_cast<long>(k), packed->size(), seconds);
  EXPECT_EQ(packArborescences(n, cap, k + 1).status().code(), StatusCode::kInfeasible);
}

TEST(ForestPack, Boxes64Small) { packBoxes64(60, 2, 8); }
TEST(ForestPack, Boxes64Large) { packBoxes64(600, 20, 84); }

}  // namespace
}  // namespace braid::synth
