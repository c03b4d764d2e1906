// The batched route searches (Router::From, allGpuRoutes, RouteCache, nicAffinity) against the one-pair searches they
// replace (Router::best, Topology::route, gpuNicRoute), link for link, on every shipped topology (topologies/*.yaml).

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "braid/topology.h"
#include "topology/paths.h"

namespace braid {
namespace {

namespace fs = std::filesystem;

std::vector<Topology> shippedTopologies() {
  std::vector<fs::path> paths;
  for (const auto& entry : fs::directory_iterator(fs::path(BRAID_SOURCE_DIR) / "topologies")) {
    if (entry.path().extension() == ".yaml") paths.push_back(entry.path());
  }
  std::sort(paths.begin(), paths.end());
  std::vector<Topology> out;
  for (const fs::path& p : paths) {
    Result<Topology> t = loadTopology(p.string());
    EXPECT_TRUE(t.isOk()) << p << ": " << t.status().toString();
    if (t) out.push_back(*t);
  }
  return out;
}

// Equal routes: the same links in order; bandwidth, alpha and slowest kind follow from the links but are compared too.
void expectSameRoute(const std::optional<Route>& want, const std::optional<Route>& got, const std::string& what) {
  ASSERT_EQ(want.has_value(), got.has_value()) << what;
  if (!want) return;
  EXPECT_EQ(want->links, got->links) << what;
  EXPECT_EQ(want->bandwidth_gbps, got->bandwidth_gbps) << what;
  EXPECT_EQ(want->alpha_us, got->alpha_us) << what;
  EXPECT_EQ(want->slowest_kind, got->slowest_kind) << what;
}

TEST(BatchedRoutes, ShippedTopologiesAreAllThere) {
  // 13 files in topologies/ (topologies/README.md); a missing one would silently shrink the tests below.
  EXPECT_EQ(shippedTopologies().size(), 13u);
}

TEST(BatchedRoutes, RouterFromIsRouterBestForEveryVertexPair) {
  for (const Topology& t : shippedTopologies()) {
    const int n = static_cast<int>(t.vertices.size());
    // Two relay rules: any vertex but a GPU (the GPU routes' rule across nodes) and PCIe/CPU/NVSwitch only (the
    // GPU -> NIC rule).
    const Router no_gpu(t, [&t](int v) { return t.vertices[v].kind != VertexKind::kGpu; });
    const Router host(t, [&t](int v) {
      const VertexKind k = t.vertices[v].kind;
      return k == VertexKind::kPcieSwitch || k == VertexKind::kCpu || k == VertexKind::kNvSwitch;
    });
    for (const Router* router : {&no_gpu, &host}) {
      for (int src = 0; src < n; ++src) {
        Router::From from(*router, src);
        // Destinations in reverse order, so that later ones reuse searches completed for earlier ones.
        for (int dst = n - 1; dst >= 0; --dst) {
          expectSameRoute(router->best(src, dst), from.best(dst),
                          t.name + " " + t.vertices[src].name + " -> " + t.vertices[dst].name);
        }
      }
    }
  }
}

TEST(BatchedRoutes, AllGpuRoutesIsTopologyRouteForEveryPair) {
  for (const Topology& t : shippedTopologies()) {
    const int g = t.numGpus();
    const std::vector<std::optional<Route>> all = allGpuRoutes(t);
    ASSERT_EQ(all.size(), static_cast<size_t>(g) * g) << t.name;
    for (int a = 0; a < g; ++a) {
      EXPECT_FALSE(all[static_cast<size_t>(a) * g + a].has_value()) << t.name << " " << a;
      for (int b = 0; b < g; ++b) {
        if (a == b) continue;
        const std::optional<Route> one = t.route(a, b);
        EXPECT_TRUE(one.has_value()) << t.name << " " << a << " -> " << b;  // shipped topologies are connected
        expectSameRoute(one, all[static_cast<size_t>(a) * g + b],
                        t.name + " gpu" + std::to_string(a) + " -> gpu" + std::to_string(b));
      }
    }
  }
}

TEST(BatchedRoutes, RouteCacheIsTopologyRouteInAnyOrder) {
  // Pairs in a scrambled order (a fixed permutation: position-dependent, every pair once, sources interleaved) and
  // a cache that keeps 2 sources, so that searches are evicted and rebuilt; the diagonal (a route without links)
  // and an unknown rank (no route) too.
  for (const Topology& t : shippedTopologies()) {
    const int g = t.numGpus();
    RouteCache cache(t, 2);
    const long long pairs = static_cast<long long>(g) * g;
    for (long long k = 0; k < pairs; ++k) {
      const long long p = (k * 7919) % pairs;  // 7919 is prime and divides no pair count (g^2): a permutation
      const int a = static_cast<int>(p / g), b = static_cast<int>(p % g);
      expectSameRoute(t.route(a, b), cache.route(a, b),
                      t.name + " gpu" + std::to_string(a) + " -> gpu" + std::to_string(b));
    }
    EXPECT_FALSE(cache.route(0, g).has_value()) << t.name;
    EXPECT_FALSE(cache.route(-1, 0).has_value()) << t.name;
  }
}

TEST(BatchedRoutes, NicAffinityMatchesGpuNicRoute) {
  for (const Topology& t : shippedTopologies()) {
    for (const NicAffinity& a : nicAffinity(t)) {
      const std::string what = t.name + " gpu" + std::to_string(a.rank) + " -> " + t.vertices[a.nic_vertex].name;
      const std::optional<Route> r = gpuNicRoute(t, a.rank, a.nic_vertex);
      ASSERT_TRUE(r.has_value()) << what;
      EXPECT_EQ(a.bandwidth_gbps, r->bandwidth_gbps) << what;
      EXPECT_EQ(a.hops, static_cast<int>(r->links.size())) << what;
      EXPECT_EQ(a.path_class, gpuNicPathClass(t, *r)) << what;
    }
  }
}

}  // namespace
}  // namespace braid
