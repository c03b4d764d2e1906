#include "topology/paths.h"

#include <algorithm>
#include <limits>
#include <queue>
#include <tuple>
#include <utility>

namespace braid {
namespace {

// Bottleneck bandwidths computed from the same link values compare equal up to rounding.
bool atLeast(double value, double bound) { return value >= bound * (1.0 - 1e-12); }

}  // namespace

std::shared_ptr<const Router::Adjacency> Router::adjacency(const Topology& topology) {
  auto out = std::make_shared<Adjacency>(topology.vertices.size());
  const int n = static_cast<int>(topology.vertices.size());
  for (size_t i = 0; i < topology.links.size(); ++i) {
    const Link& l = topology.links[i];
    if (l.src < 0 || l.src >= n || l.dst < 0 || l.dst >= n) continue;
    (*out)[l.src].push_back(static_cast<int>(i));
  }
  return out;
}

Router::Router(const Topology& topology, std::function<bool(int vertex)> relay)
    : Router(topology, std::move(relay), adjacency(topology)) {}

Router::Router(const Topology& topology, std::function<bool(int vertex)> relay, std::shared_ptr<const Adjacency> out)
    : t_(topology), relay_(std::move(relay)), out_(std::move(out)) {}

std::vector<double> Router::widths(int src) const {
  const int n = static_cast<int>(t_.vertices.size());
  std::vector<double> width(n, -1.0);
  std::priority_queue<std::pair<double, int>> queue;
  width[src] = std::numeric_limits<double>::infinity();
  queue.push({width[src], src});
  while (!queue.empty()) {
    auto [w, v] = queue.top();
    queue.pop();
    if (w < width[v]) continue;
    if (v != src && !relay_(v)) continue;
    for (int li : (*out_)[v]) {
      const Link& l = t_.links[li];
      const double through = std::min(w, l.bandwidth_gbps);
      if (through > width[l.dst]) {
        width[l.dst] = through;
        queue.push({through, l.dst});
      }
    }
  }
  return width;
}

std::vector<int> Router::shortestTree(int src, int stop, double bottleneck) const {
  const int n = static_cast<int>(t_.vertices.size());
  using Cost = std::pair<int, double>;
  std::vector<Cost> cost(n, Cost{std::numeric_limits<int>::max(), 0.0});
  std::vector<int> via(n, -1);
  using Entry = std::tuple<int, double, int>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;
  cost[src] = {0, 0.0};
  queue.push({0, 0.0, src});
  while (!queue.empty()) {
    auto [hops, alpha, v] = queue.top();
    queue.pop();
    if (Cost{hops, alpha} > cost[v]) continue;
    if (v == stop) break;
    if (v != src && !relay_(v)) continue;
    for (int li : (*out_)[v]) {
      const Link& l = t_.links[li];
      if (!atLeast(l.bandwidth_gbps, bottleneck)) continue;
      const Cost next{hops + 1, alpha + l.alpha_us};
      if (next < cost[l.dst]) {
        cost[l.dst] = next;
        via[l.dst] = li;
        queue.push({next.first, next.second, l.dst});
      }
    }
  }
  return via;
}

std::optional<Route> Router::routeFromTree(int src, int dst, const std::vector<int>& via) const {
  if (via[dst] < 0) return std::nullopt;
  Route r;
  for (int v = dst; v != src; v = t_.links[via[v]].src) r.links.push_back(via[v]);
  std::reverse(r.links.begin(), r.links.end());
  r.bandwidth_gbps = std::numeric_limits<double>::infinity();
  for (int li : r.links) {
    const Link& l = t_.links[li];
    r.alpha_us += l.alpha_us;
    if (l.bandwidth_gbps < r.bandwidth_gbps) {
      r.bandwidth_gbps = l.bandwidth_gbps;
      r.slowest_kind = l.kind;
    }
  }
  return r;
}

std::optional<Route> Router::shortestWithin(int src, int dst, double bottleneck) const {
  return routeFromTree(src, dst, shortestTree(src, dst, bottleneck));
}

std::optional<Route> Router::best(int src, int dst) const {
  const std::vector<double> width = widths(src);
  if (width[dst] <= 0) return std::nullopt;
  return shortestWithin(src, dst, width[dst]);
}

Router::From::From(const Router& router, int src) : router_(router), src_(src), width_(router.widths(src)) {}

std::optional<Route> Router::From::best(int dst) {
  const double bottleneck = width_[dst];
  if (bottleneck <= 0) return std::nullopt;
  // Exact equality: destinations share a search only when Router::best would run it with the same bound.
  for (const auto& [b, via] : via_) {
    if (b == bottleneck) return router_.routeFromTree(src_, dst, via);
  }
  via_.emplace_back(bottleneck, router_.shortestTree(src_, -1, bottleneck));
  return router_.routeFromTree(src_, dst, via_.back().second);
}

}  // namespace braid
