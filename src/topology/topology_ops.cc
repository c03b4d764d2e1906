// Topology invariants (validateTopology) and GPU-to-GPU routing (Topology::route).

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <list>
#include <map>
#include <memory>
#include <queue>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "braid/topology.h"
#include "topology/paths.h"

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

// Every GPU reaches every other GPU by some chain of links, through any vertices, other GPUs included (algorithms
// relay data through GPUs: TACCL's NDv2 model joins some GPU pairs only through a third GPU). That holds exactly when
// gpu0 reaches every GPU and every GPU reaches gpu0: one search forward and one over the reversed links, O(vertices +
// links). The error names the first GPU pair without a path.
Status checkGpuReachability(const Topology& t) {
  const int num_vertices = static_cast<int>(t.vertices.size());
  const int num_gpus = t.numGpus();
  if (num_gpus < 2) return Status::ok();
  std::vector<std::vector<int>> out(num_vertices), in(num_vertices);
  for (const Link& l : t.links) {
    out[l.src].push_back(l.dst);
    in[l.dst].push_back(l.src);
  }
  auto reached = [&](const std::vector<std::vector<int>>& next_of) {
    std::vector<char> seen(num_vertices, 0);
    std::vector<int> queue{t.gpuVertex(0)};
    seen[queue[0]] = 1;
    for (size_t head = 0; head < queue.size(); ++head) {
      for (int next : next_of[queue[head]]) {
        if (!seen[next]) {
          seen[next] = 1;
          queue.push_back(next);
        }
      }
    }
    return seen;
  };
  const std::vector<char> from0 = reached(out), to0 = reached(in);
  for (int r = 1; r < num_gpus; ++r) {
    const int v = t.gpuVertex(r);
    if (from0[v] && to0[v]) continue;
    const auto [a, b] = from0[v] ? std::pair{r, 0} : std::pair{0, r};
    return topologyError(t, fmt::format("gpu{} has no path to gpu{} (no chain of links leads from one to the other): a "
                                        "collective over all GPUs is impossible",
                                        a, b));
  }
  return Status::ok();
}

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
    // Physical ranges: 1 KB/s .. 1 PB/s and at most 10 s of latency. Values beyond are typos, and they would
    // overflow or underflow the solvers' scaling (GLPK aborts on a zero scale factor).
    constexpr double kMinBandwidthGbps = 1e-6, kMaxBandwidthGbps = 1e6, kMaxAlphaUs = 1e7;
    if (!std::isfinite(l.bandwidth_gbps) || l.bandwidth_gbps <= 0) {
      return topologyError(t,
                           fmt::format("{}: bandwidth must be > 0 GB/s (found {})", linkLabel(t, i), l.bandwidth_gbps));
    }
    if (l.bandwidth_gbps < kMinBandwidthGbps || l.bandwidth_gbps > kMaxBandwidthGbps) {
      return topologyError(t, fmt::format("{}: bandwidth {} GB/s is outside {:g} .. {:g} GB/s", linkLabel(t, i),
                                          l.bandwidth_gbps, kMinBandwidthGbps, kMaxBandwidthGbps));
    }
    if (!std::isfinite(l.alpha_us) || l.alpha_us < 0 || l.alpha_us > kMaxAlphaUs) {
      return topologyError(
          t, fmt::format("{}: alpha must be in 0 .. {:g} us (found {})", linkLabel(t, i), kMaxAlphaUs, l.alpha_us));
    }
    if (l.lanes < 1)
      return topologyError(t, fmt::format("{}: lanes must be >= 1 (found {})", linkLabel(t, i), l.lanes));
  }
  return checkGpuReachability(t);
}

// Intermediate vertices may be anything except GPUs: a route never relays through a third GPU. Between two GPUs
// of one node the route stays inside that node and off the network (no NIC, no network switch): NCCL never moves
// intra-node GPU traffic over the network, even where a NIC path would be wider than the inter-socket link.
// (Topology::route and allGpuRoutes share this one implementation.)
namespace {

// Topology::route with each GPU's nearest NICs (nearestNics) taken from `nics_of(rank)`. Each search is handed to
// `search(key, relay, src, dst)`, which returns Router(t, relay()).best(src, dst); `key` names the relay rule among
// this source's searches ({-1}: any vertex but a GPU; {-2}: inside the source's node; otherwise the sorted NIC
// vertices allowed), so that a caller routing many pairs (allGpuRoutes) reuses one search per source and rule.
template <typename NicsOf, typename Search>
std::optional<Route> routeWithNics(const Topology& t, int src_rank, int dst_rank, const NicsOf& nics_of,
                                   const Search& search) {
  const std::vector<Vertex>& vertices = t.vertices;
  const int src = t.gpuVertex(src_rank);
  const int dst = t.gpuVertex(dst_rank);
  if (src < 0 || dst < 0) return std::nullopt;
  if (src == dst) {
    Route self;
    self.bandwidth_gbps = std::numeric_limits<double>::infinity();
    return self;
  }
  const int node = vertices[src].node;
  const bool same_node = node >= 0 && node == vertices[dst].node;
  if (!same_node && node >= 0 && vertices[dst].node >= 0) {
    // Across nodes, leave and enter through the GPUs' nearest NICs (nearestNics), as NCCL binds a GPU to its
    // nearest NIC: first each GPU's own traffic NIC, then any nearest NIC at one end (rail-only networks join
    // only same-rail NICs), then any at both; without such a path, the unconstrained search below.
    const std::vector<int>& src_nics = nics_of(src_rank);
    const std::vector<int>& dst_nics = nics_of(dst_rank);
    if (!src_nics.empty() && !dst_nics.empty()) {
      auto through = [&](const std::vector<int>& allowed) {
        std::vector<int> key = allowed;
        std::sort(key.begin(), key.end());
        key.erase(std::unique(key.begin(), key.end()), key.end());
        auto relay = [&vertices, key]() -> std::function<bool(int)> {
          return [&vertices, key](int v) {
            const Vertex& x = vertices[v];
            if (x.kind == VertexKind::kGpu) return false;
            return x.kind != VertexKind::kNic || std::binary_search(key.begin(), key.end(), v);
          };
        };
        return search(key, relay, src, dst);
      };
      auto with = [](std::vector<int> a, const std::vector<int>& b) {
        a.insert(a.end(), b.begin(), b.end());
        return a;
      };
      for (const std::vector<int>& allowed : {std::vector<int>{src_nics[0], dst_nics[0]}, with(src_nics, {dst_nics[0]}),
                                              with({src_nics[0]}, dst_nics), with(src_nics, dst_nics)}) {
        std::optional<Route> r = through(allowed);
        if (r) return r;
      }
    }
  }
  auto relay = [&vertices, same_node, node]() -> std::function<bool(int)> {
    return [&vertices, same_node, node](int v) {
      const Vertex& x = vertices[v];
      if (x.kind == VertexKind::kGpu) return false;
      return !same_node || (x.node == node && x.kind != VertexKind::kNic && x.kind != VertexKind::kNetSwitch);
    };
  };
  return search(std::vector<int>{same_node ? -2 : -1}, relay, src, dst);
}

}  // namespace

std::optional<Route> Topology::route(int src_rank, int dst_rank) const {
  std::optional<std::vector<int>> src_nics, dst_nics;
  const std::shared_ptr<const Router::Adjacency> out = Router::adjacency(*this);
  return routeWithNics(
      *this, src_rank, dst_rank,
      [&](int rank) -> const std::vector<int>& {
        std::optional<std::vector<int>>& slot = rank == src_rank ? src_nics : dst_nics;
        if (!slot) slot = nearestNics(*this, rank);
        return *slot;
      },
      [&](const std::vector<int>&, const auto& relay, int src, int dst) {
        return Router(*this, relay(), out).best(src, dst);
      });
}

namespace {

// A source's searches, one per relay rule (routeWithNics' key): every destination routed under the same rule shares
// its widths and its (hops, alpha) searches.
struct Searches {
  Router router;
  Router::From from;
  Searches(const Topology& t, std::function<bool(int)> relay, std::shared_ptr<const Router::Adjacency> adjacency,
           int src)
      : router(t, std::move(relay), std::move(adjacency)), from(router, src) {}
};
using SourceSearches = std::map<std::vector<int>, std::unique_ptr<Searches>>;

}  // namespace

struct RouteCache::Impl {
  const Topology& t;
  size_t kept;
  std::shared_ptr<const Router::Adjacency> out;
  std::vector<std::optional<std::vector<int>>> nics;
  std::list<std::pair<int, SourceSearches>> sources;  // most recently used first

  Impl(const Topology& topology, int sources_kept)
      : t(topology),
        kept(static_cast<size_t>(std::max(1, sources_kept))),
        out(Router::adjacency(topology)),
        nics(static_cast<size_t>(std::max(0, topology.numGpus()))) {}

  SourceSearches& searchesOf(int src_vertex) {
    for (auto it = sources.begin(); it != sources.end(); ++it) {
      if (it->first != src_vertex) continue;
      if (it != sources.begin()) sources.splice(sources.begin(), sources, it);
      return sources.front().second;
    }
    if (sources.size() >= kept) sources.pop_back();
    sources.emplace_front(src_vertex, SourceSearches{});
    return sources.front().second;
  }
};

RouteCache::RouteCache(const Topology& topology, int sources_kept)
    : impl_(std::make_unique<Impl>(topology, sources_kept)) {}

RouteCache::~RouteCache() = default;

std::optional<Route> RouteCache::route(int src_rank, int dst_rank) {
  Impl& c = *impl_;
  const int n = static_cast<int>(c.nics.size());
  if (src_rank < 0 || src_rank >= n || dst_rank < 0 || dst_rank >= n) return c.t.route(src_rank, dst_rank);
  auto nics_of = [&c](int rank) -> const std::vector<int>& {
    if (!c.nics[rank]) c.nics[rank] = nearestNics(c.t, rank);
    return *c.nics[rank];
  };
  auto search = [&c](const std::vector<int>& key, const auto& relay, int src, int dst) {
    std::unique_ptr<Searches>& slot = c.searchesOf(src)[key];
    if (!slot) slot = std::make_unique<Searches>(c.t, relay(), c.out, src);
    return slot->from.best(dst);
  };
  return routeWithNics(c.t, src_rank, dst_rank, nics_of, search);
}

std::vector<std::optional<Route>> allGpuRoutes(const Topology& topology) {
  const int n = topology.numGpus();
  std::vector<std::optional<std::vector<int>>> nics(n);
  auto nics_of = [&](int rank) -> const std::vector<int>& {
    if (!nics[rank]) nics[rank] = nearestNics(topology, rank);
    return *nics[rank];
  };
  const std::shared_ptr<const Router::Adjacency> out = Router::adjacency(topology);
  // One Router and one Router::From per relay rule of the current source.
  SourceSearches searches;
  auto search = [&](const std::vector<int>& key, const auto& relay, int src, int dst) {
    std::unique_ptr<Searches>& slot = searches[key];
    if (!slot) slot = std::make_unique<Searches>(topology, relay(), out, src);
    return slot->from.best(dst);
  };
  std::vector<std::optional<Route>> routes(static_cast<size_t>(n) * n);
  for (int a = 0; a < n; ++a) {
    searches.clear();  // the keys name rules of one source
    for (int b = 0; b < n; ++b) {
      if (a != b) routes[static_cast<size_t>(a) * n + b] = routeWithNics(topology, a, b, nics_of, search);
    }
  }
  return routes;
}

}  // namespace braid
