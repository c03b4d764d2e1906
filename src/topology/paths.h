// Route search shared by Topology::route (GPU -> GPU) and gpuNicRoute (GPU -> NIC). Private to braid_topology
// (src/topology).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "braid/topology.h"

namespace braid {

/// Lexicographic best routes — widest bottleneck, then fewest hops, then least summed α — in two passes:
/// 1. a max-bottleneck Dijkstra finds the widest achievable bottleneck B;
/// 2. a Dijkstra on (hops, α) over links with bandwidth >= B finds the shortest of the widest paths.
/// Any path of pass 2 has bottleneck exactly B (>= B by construction, <= B by maximality of B).
/// Routes relay only through vertices for which `relay(vertex)` holds (the endpoints are exempt).
/// The adjacency list is built once (or shared, see adjacency()); the topology must outlive the Router.
class Router {
 public:
  /// Outgoing link indices per vertex, shareable between Routers over one topology.
  using Adjacency = std::vector<std::vector<int>>;
  static std::shared_ptr<const Adjacency> adjacency(const Topology& topology);

  Router(const Topology& topology, std::function<bool(int vertex)> relay);
  /// As above, reusing `out` = adjacency(topology) (routing many pairs builds it once).
  Router(const Topology& topology, std::function<bool(int vertex)> relay, std::shared_ptr<const Adjacency> out);

  /// Widest bottleneck (GB/s) from vertex `src` to every vertex; -1 where unreachable, +inf at `src`.
  std::vector<double> widths(int src) const;
  /// Fewest hops, then least α, from `src` to `dst` over links at least `bottleneck` GB/s wide.
  std::optional<Route> shortestWithin(int src, int dst, double bottleneck) const;
  /// The best route from `src` to `dst`; nullopt when none exists.
  std::optional<Route> best(int src, int dst) const;

 private:
  const Topology& t_;
  std::function<bool(int)> relay_;
  std::shared_ptr<const Adjacency> out_;
};

}  // namespace braid
