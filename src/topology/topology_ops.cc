// Topology invariants (validateTopology) and GPU-to-GPU routing (Topology::route).

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <queue>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "braid/topology.h"

namespace braid {

namespace {

std::string vertexLabel(const Topology& t, int id) {
  if (id >= 0 && id < static_cast<int>(t.vertices.size()))
    return fmt::format("vertex {} '{}'", id, t.vertices[id].name);
  return fmt::format("vertex {}", id);
}

std::string linkLabel(const Topology& t, size_t i) {
  const Link& l = t.links[i];
  auto name = [&](int v) {
    return (v >= 0 && v < static_cast<int>(t.vertices.size())) ? t.vertices[v].name : fmt::format("#{}", v);
  };
  return fmt::format("link {} ({} -> {})", i, name(l.src), name(l.dst));
}

Status topologyError(const Topology& t, const std::string& what) {
  const std::string where = t.source.empty() ? (t.name.empty() ? std::string("topology") : t.name) : t.source;
  return invalidArgument(fmt::format("{}: {}", where, what));
}

// Relative tolerance used to compare bottleneck bandwidths computed from the same link values.
bool atLeast(double value, double bound) { return value >= bound * (1.0 - 1e-12); }

}  // namespace

Status validateTopology(const Topology& t) {
  const int num_vertices = static_cast<int>(t.vertices.size());
  const int num_nodes = t.numNodes();
  std::set<std::string> node_names;
  for (int k = 0; k < num_nodes; ++k) {
    const Node& n = t.nodes[k];
    if (n.name.empty()) return topologyError(t, fmt::format("node {} has an empty name", k));
    if (!node_names.insert(n.name).second)
      return topologyError(t, fmt::format("node {} name '{}' is used twice", k, n.name));
  }

  std::map<std::string, int> names;
  std::vector<int> rank_owner;
  int num_gpus = 0;
  for (int i = 0; i < num_vertices; ++i) {
    const Vertex& v = t.vertices[i];
    if (v.id != i)
      return topologyError(t, fmt::format("vertex {} '{}' has id {} (must equal its index)", i, v.name, v.id));
    if (v.name.empty()) return topologyError(t, fmt::format("vertex {} has an empty name", i));
    auto [it, fresh] = names.emplace(v.name, i);
    if (!fresh)
      return topologyError(t, fmt::format("vertex {} name '{}' is already used by vertex {}", i, v.name, it->second));
    if (v.node < -1 || v.node >= num_nodes) {
      return topologyError(
          t, fmt::format("{}: node index {} out of range (0..{} or -1)", vertexLabel(t, i), v.node, num_nodes - 1));
    }
    if (v.kind == VertexKind::kGpu) {
      ++num_gpus;
      if (v.node < 0) return topologyError(t, fmt::format("{}: a GPU must belong to a node", vertexLabel(t, i)));
      if (v.rank < 0) return topologyError(t, fmt::format("{}: GPU has no rank", vertexLabel(t, i)));
      if (v.name != fmt::format("gpu{}", v.rank)) {
        return topologyError(
            t, fmt::format("{}: GPU with rank {} must be named 'gpu{}'", vertexLabel(t, i), v.rank, v.rank));
      }
      if (v.rank >= static_cast<int>(rank_owner.size())) rank_owner.resize(v.rank + 1, -1);
      if (rank_owner[v.rank] >= 0) {
        return topologyError(t, fmt::format("{}: rank {} is also held by {}", vertexLabel(t, i), v.rank,
                                            vertexLabel(t, rank_owner[v.rank])));
      }
      rank_owner[v.rank] = i;
    } else if (v.rank != -1) {
      return topologyError(t, fmt::format("{}: only GPUs have a rank (found {})", vertexLabel(t, i), v.rank));
    }
  }
  for (size_t r = 0; r < rank_owner.size(); ++r) {
    if (rank_owner[r] < 0) {
      return topologyError(t, fmt::format("GPU ranks must be dense 0..{}: rank {} is missing", num_gpus - 1, r));
    }
  }

  // Node membership: nodes[k].gpus / nics list exactly the GPUs / NICs whose node is k, in local order.
  for (int k = 0; k < num_nodes; ++k) {
    const Node& n = t.nodes[k];
    for (auto [list, kind, what] :
         {std::tuple{&n.gpus, VertexKind::kGpu, "gpus"}, std::tuple{&n.nics, VertexKind::kNic, "nics"}}) {
      std::set<int> seen;
      for (size_t j = 0; j < list->size(); ++j) {
        const int id = (*list)[j];
        if (id < 0 || id >= num_vertices) {
          return topologyError(t, fmt::format("node '{}' {}[{}]: vertex id {} does not exist", n.name, what, j, id));
        }
        const Vertex& v = t.vertices[id];
        if (v.kind != kind) {
          return topologyError(t, fmt::format("node '{}' {}[{}]: {} is a {}, not a {}", n.name, what, j,
                                              vertexLabel(t, id), vertexKindName(v.kind), vertexKindName(kind)));
        }
        if (v.node != k) {
          return topologyError(t, fmt::format("node '{}' {}[{}]: {} says it belongs to node {}", n.name, what, j,
                                              vertexLabel(t, id), v.node));
        }
        if (!seen.insert(id).second) {
          return topologyError(t, fmt::format("node '{}' {}: {} is listed twice", n.name, what, vertexLabel(t, id)));
        }
        if (v.local != static_cast<int>(j)) {
          return topologyError(t, fmt::format("node '{}' {}[{}]: {} has local index {} (expected {})", n.name, what, j,
                                              vertexLabel(t, id), v.local, j));
        }
      }
    }
  }
  for (int i = 0; i < num_vertices; ++i) {
    const Vertex& v = t.vertices[i];
    if ((v.kind != VertexKind::kGpu && v.kind != VertexKind::kNic) || v.node < 0) continue;
    const std::vector<int>& list = v.kind == VertexKind::kGpu ? t.nodes[v.node].gpus : t.nodes[v.node].nics;
    bool found = false;
    for (int id : list) found = found || id == i;
    if (!found) {
      return topologyError(t, fmt::format("{}: belongs to node '{}' but is not in its {} list", vertexLabel(t, i),
                                          t.nodes[v.node].name, v.kind == VertexKind::kGpu ? "gpus" : "nics"));
    }
  }

  for (size_t i = 0; i < t.links.size(); ++i) {
    const Link& l = t.links[i];
    if (l.src < 0 || l.src >= num_vertices)
      return topologyError(t, fmt::format("{}: source vertex {} does not exist", linkLabel(t, i), l.src));
    if (l.dst < 0 || l.dst >= num_vertices)
      return topologyError(t, fmt::format("{}: destination vertex {} does not exist", linkLabel(t, i), l.dst));
    if (l.src == l.dst)
      return topologyError(t, fmt::format("{}: a link may not join a vertex to itself", linkLabel(t, i)));
    if (!std::isfinite(l.bandwidth_gbps) || l.bandwidth_gbps <= 0) {
      return topologyError(t,
                           fmt::format("{}: bandwidth must be > 0 GB/s (found {})", linkLabel(t, i), l.bandwidth_gbps));
    }
    if (!std::isfinite(l.alpha_us) || l.alpha_us < 0) {
      return topologyError(t, fmt::format("{}: alpha must be >= 0 us (found {})", linkLabel(t, i), l.alpha_us));
    }
    if (l.lanes < 1)
      return topologyError(t, fmt::format("{}: lanes must be >= 1 (found {})", linkLabel(t, i), l.lanes));
  }
  return Status::ok();
}

// Lexicographic route search (widest bottleneck, then fewest hops, then least summed alpha), in two passes:
// 1. a max-bottleneck Dijkstra finds the widest achievable bottleneck B;
// 2. a Dijkstra on (hops, alpha) restricted to links with bandwidth >= B finds the shortest of the widest paths.
// Any path of pass 2 has bottleneck exactly B (>= B by construction, <= B by maximality of B).
// Intermediate vertices may be anything except GPUs: a route never relays through a third GPU.
std::optional<Route> Topology::route(int src_rank, int dst_rank) const {
  const int src = gpuVertex(src_rank);
  const int dst = gpuVertex(dst_rank);
  if (src < 0 || dst < 0) return std::nullopt;
  if (src == dst) {
    Route self;
    self.bandwidth_gbps = std::numeric_limits<double>::infinity();
    return self;
  }
  const int n = static_cast<int>(vertices.size());
  std::vector<std::vector<int>> out(n);
  for (size_t i = 0; i < links.size(); ++i) {
    const Link& l = links[i];
    if (l.src < 0 || l.src >= n || l.dst < 0 || l.dst >= n) continue;
    out[l.src].push_back(static_cast<int>(i));
  }
  auto passable = [&](int v) { return v == dst || vertices[v].kind != VertexKind::kGpu; };

  // Pass 1: widest bottleneck.
  std::vector<double> width(n, -1.0);
  std::priority_queue<std::pair<double, int>> widest;
  width[src] = std::numeric_limits<double>::infinity();
  widest.push({width[src], src});
  while (!widest.empty()) {
    auto [w, v] = widest.top();
    widest.pop();
    if (w < width[v]) continue;
    if (v == dst) break;
    if (v != src && !passable(v)) continue;
    for (int li : out[v]) {
      const Link& l = links[li];
      if (!passable(l.dst)) continue;
      const double through = std::min(w, l.bandwidth_gbps);
      if (through > width[l.dst]) {
        width[l.dst] = through;
        widest.push({through, l.dst});
      }
    }
  }
  if (width[dst] <= 0) return std::nullopt;
  const double bottleneck = width[dst];

  // Pass 2: fewest hops, then least alpha, over links at least as wide as the bottleneck.
  using Cost = std::pair<int, double>;
  const Cost kUnreached{std::numeric_limits<int>::max(), 0.0};
  std::vector<Cost> cost(n, kUnreached);
  std::vector<int> via(n, -1);
  using Entry = std::tuple<int, double, int>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;
  cost[src] = {0, 0.0};
  queue.push({0, 0.0, src});
  while (!queue.empty()) {
    auto [hops, alpha, v] = queue.top();
    queue.pop();
    if (Cost{hops, alpha} > cost[v]) continue;
    if (v == dst) break;
    if (v != src && !passable(v)) continue;
    for (int li : out[v]) {
      const Link& l = links[li];
      if (!passable(l.dst) || !atLeast(l.bandwidth_gbps, bottleneck)) continue;
      const Cost next{hops + 1, alpha + l.alpha_us};
      if (next < cost[l.dst]) {
        cost[l.dst] = next;
        via[l.dst] = li;
        queue.push({next.first, next.second, l.dst});
      }
    }
  }
  if (via[dst] < 0) return std::nullopt;
  Route r;
  for (int v = dst; v != src; v = links[via[v]].src) r.links.push_back(via[v]);
  std::reverse(r.links.begin(), r.links.end());
  r.bandwidth_gbps = std::numeric_limits<double>::infinity();
  for (int li : r.links) {
    const Link& l = links[li];
    r.alpha_us += l.alpha_us;
    if (l.bandwidth_gbps < r.bandwidth_gbps) {
      r.bandwidth_gbps = l.bandwidth_gbps;
      r.slowest_kind = l.kind;
    }
  }
  return r;
}

}  // namespace braid
