// Route search shared by Topology::route (GPU -> GPU) and gpuNicRoute (GPU -> NIC). Private to braid_topology
// (src/topology).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <utility>
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

  /// best(src, dst) for many destinations of one source, sharing the work: widths(src) once, and one (hops, α)
  /// search per distinct bottleneck value, run to completion and kept for every destination with that bottleneck.
  /// best(dst) returns exactly Router::best(src, dst): the search stopped at dst is a prefix of the complete one,
  /// and a vertex's predecessor never changes once it is settled. The Router must outlive this object.
  class From {
   public:
    From(const Router& router, int src);
    std::optional<Route> best(int dst);

   private:
    const Router& router_;
    int src_;
    std::vector<double> width_;
    std::vector<std::pair<double, std::vector<int>>> via_;  // bottleneck -> predecessor link per vertex
  };

 private:
  // Predecessor link of each vertex on its fewest-hops-then-least-α route from `src` over links at least
  // `bottleneck` wide (-1: unreached); the search stops once `stop` is settled (-1: never).
  std::vector<int> shortestTree(int src, int stop, double bottleneck) const;
  // The route to `dst` read back through `via` (shortestTree's); nullopt when dst was not reached.
  std::optional<Route> routeFromTree(int src, int dst, const std::vector<int>& via) const;

  const Topology& t_;
  std::function<bool(int)> relay_;
  std::shared_ptr<const Adjacency> out_;
};

}  // namespace braid
