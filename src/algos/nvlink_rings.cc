// Rings that follow NVLink, as NCCL's ring search builds them (src/graph/search.cc in NVIDIA/nccl;
// ../shared/reference/nccl_plugins.md §5): a ring is a Hamiltonian cycle of the GPUs in which every
// hop is a direct NVLink connection or GPU -> NVSwitch -> GPU over NVLink. Several rings share the
// NVLink lanes: a lane (one physical link, one direction) carries at most one ring, so a bonded
// NV2 pair can carry two rings in each direction — on a DGX-1 the search finds rings that use the
// NV2 pairs twice, like NCCL's channels there.
//
// The search is a depth-first search from rank 0 that tries the widest remaining connection first,
// with a bound on the number of partial paths it expands so that it always terminates quickly.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "braid/classic_blocks.h"

namespace braid::algos {
namespace {

constexpr long kExpansionBudget = 2'000'000;

// Remaining NVLink lanes: direct GPU->GPU, GPU->switch and switch->GPU.
struct Lanes {
  int n = 0;
  std::vector<std::vector<int>> direct;  // [a][b]
  std::vector<int> switches;             // NVSwitch vertex ids
  std::vector<std::vector<int>> up;      // [a][switch index]
  std::vector<std::vector<int>> down;    // [switch index][b]

  int viaSwitch(int a, int b) const {
    for (size_t s = 0; s < switches.size(); ++s) {
      if (up[a][s] > 0 && down[s][b] > 0) return static_cast<int>(s);
    }
    return -1;
  }
  bool usable(int a, int b) const { return direct[a][b] > 0 || viaSwitch(a, b) >= 0; }
  // Width used to order the search: direct lanes first (more lanes = wider), then switch paths.
  int width(int a, int b) const {
    if (direct[a][b] > 0) return 1000 + direct[a][b];
    const int s = viaSwitch(a, b);
    return s < 0 ? 0 : std::min(up[a][s], down[s][b]);
  }
  void take(int a, int b) {
    if (direct[a][b] > 0) {
      --direct[a][b];
      return;
    }
    const int s = viaSwitch(a, b);
    --up[a][s];
    --down[s][b];
  }
};

Lanes nvlinkLanes(const Topology& topology) {
  Lanes lanes;
  lanes.n = topology.numGpus();
  const int n = lanes.n;
  lanes.direct.assign(n, std::vector<int>(n, 0));
  std::map<int, int> switch_index;
  for (const Vertex& v : topology.vertices) {
    if (v.kind == VertexKind::kNvSwitch) {
      switch_index[v.id] = static_cast<int>(lanes.switches.size());
      lanes.switches.push_back(v.id);
    }
  }
  lanes.up.assign(n, std::vector<int>(lanes.switches.size(), 0));
  lanes.down.assign(lanes.switches.size(), std::vector<int>(n, 0));
  auto rankOf = [&](int vid) {
    if (vid < 0 || vid >= static_cast<int>(topology.vertices.size())) return -1;
    const Vertex& v = topology.vertices[vid];
    return v.kind == VertexKind::kGpu && v.rank >= 0 && v.rank < n ? v.rank : -1;
  };
  for (const Link& l : topology.links) {
    if (l.kind != LinkKind::kNvlink) continue;
    const int a = rankOf(l.src);
    const int b = rankOf(l.dst);
    const int lanes_here = std::max(l.lanes, 1);
    if (a >= 0 && b >= 0 && a != b) {
      lanes.direct[a][b] += lanes_here;
    } else if (a >= 0 && switch_index.count(l.dst)) {
      lanes.up[a][switch_index[l.dst]] += lanes_here;
    } else if (b >= 0 && switch_index.count(l.src)) {
      lanes.down[switch_index[l.src]][b] += lanes_here;
    }
  }
  return lanes;
}

// Hamiltonian cycle through 0..n-1 over edges where ok(a, b); neighbours tried by decreasing
// width(a, b), then by rank. Empty when none is found within the budget.
RingOrder hamiltonianCycle(int n, const std::function<bool(int, int)>& ok, const std::function<int(int, int)>& width,
                           bool* exhausted) {
  RingOrder path = {0};
  std::vector<bool> used(n, false);
  used[0] = true;
  long expansions = 0;
  *exhausted = false;
  std::function<bool()> extend = [&]() -> bool {
    if (static_cast<int>(path.size()) == n) return ok(path.back(), 0);
    if (++expansions > kExpansionBudget) {
      *exhausted = true;
      return false;
    }
    const int at = path.back();
    std::vector<int> candidates;
    for (int b = 0; b < n; ++b) {
      if (!used[b] && ok(at, b)) candidates.push_back(b);
    }
    std::stable_sort(candidates.begin(), candidates.end(), [&](int x, int y) { return width(at, x) > width(at, y); });
    for (int b : candidates) {
      used[b] = true;
      path.push_back(b);
      if (extend()) return true;
      path.pop_back();
      used[b] = false;
      if (*exhausted) return false;
    }
    return false;
  };
  if (n == 1) return path;
  // Necessary condition, checked first so hopeless searches end at once: every GPU has a way out
  // and a way in.
  for (int a = 0; a < n; ++a) {
    bool out = false, in = false;
    for (int b = 0; b < n; ++b) {
      if (b == a) continue;
      out = out || ok(a, b);
      in = in || ok(b, a);
    }
    if (!out || !in) return {};
  }
  if (extend()) return path;
  return {};
}

std::string ringText(const RingOrder& ring) {
  std::string text;
  for (int r : ring) text += (text.empty() ? "" : " ") + std::to_string(r);
  return text;
}

// Why no ring exists, as plainly as the route matrix `bw` (GB/s, 0 = no route) shows: a GPU with no route to or
// from any other, or (3 GPUs or more) one whose only route partner is a single GPU both ways, which a ring cannot
// pass through; else the general statement.
std::string whyNoRing(const Topology& topology, const std::vector<std::vector<double>>& bw) {
  const int n = static_cast<int>(bw.size());
  const auto gpu = [&](int r) { return topology.vertices[topology.gpuVertex(r)].name; };
  std::vector<std::vector<int>> to(n), from(n);
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a != b && bw[a][b] > 0) {
        to[a].push_back(b);
        from[b].push_back(a);
      }
    }
  }
  for (int a = 0; a < n; ++a) {
    if (to[a].empty()) return fmt::format("{} has no route to any other GPU", gpu(a));
    if (from[a].empty()) return fmt::format("no GPU has a route to {}", gpu(a));
  }
  for (int a = 0; a < n; ++a) {
    if (n > 2 && to[a].size() == 1 && from[a].size() == 1 && to[a][0] == from[a][0]) {
      return fmt::format("{} has routes only to and from {}", gpu(a), gpu(to[a][0]));
    }
  }
  return "no order of the GPUs has a route between every pair of neighbours";
}
}  // namespace

Result<RingSearch> findRings(const Topology& topology, int max_rings) {
  const int n = topology.numGpus();
  if (n < 1) return invalidArgument(fmt::format("topology '{}' has no GPUs to build a ring over", topology.name));
  RingSearch result;
  if (n == 1) {
    result.rings = {RingOrder{0}};
    result.all_nvlink = true;
    return result;
  }
  Lanes lanes = nvlinkLanes(topology);
  bool exhausted = false;
  while (static_cast<int>(result.rings.size()) < std::max(max_rings, 1)) {
    RingOrder ring = hamiltonianCycle(
        n, [&](int a, int b) { return lanes.usable(a, b); }, [&](int a, int b) { return lanes.width(a, b); },
        &exhausted);
    if (ring.empty()) break;
    for (int i = 0; i < n; ++i) lanes.take(ring[i], ring[(i + 1) % n]);
    result.rings.push_back(std::move(ring));
  }
  if (!result.rings.empty()) {
    result.all_nvlink = true;
    for (size_t k = 0; k < result.rings.size(); ++k) {
      result.notes.push_back(fmt::format("ring {} follows NVLink: {}", k, ringText(result.rings[k])));
    }
    return result;
  }
  // No NVLink Hamiltonian cycle: the order whose narrowest route is widest. That search needs every pair's route;
  // above kMaxRouteSearchRanks GPUs it would take minutes, so rank order is used (GPUs are numbered node by
  // node, so the ring crosses each node boundary once).
  constexpr int kMaxRouteSearchRanks = 128;
  if (n > kMaxRouteSearchRanks) {
    RingOrder ring(n);
    for (int i = 0; i < n; ++i) ring[i] = i;
    result.rings.push_back(std::move(ring));
    result.notes.push_back(fmt::format(
        "{} GPUs and no NVLink ring: rank order (node by node); the all-pairs route search stops at {} GPUs", n,
        kMaxRouteSearchRanks));
    return result;
  }
  std::vector<std::vector<double>> bw(n, std::vector<double>(n, 0.0));
  std::vector<std::vector<LinkKind>> kind(n, std::vector<LinkKind>(n, LinkKind::kNvlink));
  std::set<double, std::greater<double>> widths;
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      std::optional<Route> route = topology.route(a, b);
      if (route && route->bandwidth_gbps > 0) {
        bw[a][b] = route->bandwidth_gbps;
        kind[a][b] = route->slowest_kind;
        widths.insert(route->bandwidth_gbps);
      }
    }
  }
  for (double threshold : widths) {
    RingOrder ring = hamiltonianCycle(
        n, [&](int a, int b) { return bw[a][b] >= threshold; },
        [&](int a, int b) { return static_cast<int>(bw[a][b] * 1000); }, &exhausted);
    if (ring.empty()) continue;
    double bottleneck = bw[ring[0]][ring[1 % n]];
    LinkKind slowest = kind[ring[0]][ring[1 % n]];
    for (int i = 0; i < n; ++i) {
      const int a = ring[i], b = ring[(i + 1) % n];
      if (bw[a][b] < bottleneck) {
        bottleneck = bw[a][b];
        slowest = kind[a][b];
      }
    }
    result.rings = {ring};
    result.all_nvlink = false;
    result.notes.push_back(fmt::format(
        "no ring of the {} GPUs uses NVLink on every hop{}; falling back to the best route order {} "
        "(narrowest hop {:g} GB/s over {})",
        n, exhausted ? " (search budget exhausted)" : "", ringText(ring), bottleneck, linkKindName(slowest)));
    return result;
  }
  return invalidArgument(
      fmt::format("topology '{}': no ring through all {} GPUs exists: {} (routes do not relay through "
                  "a third GPU; check the links of the topology)",
                  topology.name, n, whyNoRing(topology, bw)));
}

}  // namespace braid::algos
