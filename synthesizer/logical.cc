// The logical topology of a sketch on a topology (TACCL's "logical topology", taccl_msccl.md §1.4): which
// ranks may send to which directly, at what α-β cost, over which physical links, with which relay rules and
// which symmetry group.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "synthesizer/model.h"
#include "synthesizer/watchdog.h"

namespace braid::synth {
namespace {

bool nvlinkOnly(const Topology& t, const Route& route) {
  for (int l : route.links) {
    if (t.links[l].kind != LinkKind::kNvlink) return false;
  }
  return !route.links.empty();
}

bool close(double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max({1.0, std::fabs(a), std::fabs(b)}); }

std::string pairName(const LogicalTopology& lt, int src, int dst) {
  return fmt::format("rank {} (node {} GPU {}) -> rank {} (node {} GPU {})", src, lt.node_of[src], lt.local_of[src],
                     dst, lt.node_of[dst], lt.local_of[dst]);
}

// The permutation of TACCL symmetry offset [offset, group]: r -> ((r mod group) + offset) mod group + (r div
// group) * group (taccl_msccl.md §1.4).
std::vector<int> offsetPermutation(int n, int offset, int group) {
  std::vector<int> perm(n);
  for (int r = 0; r < n; ++r) perm[r] = ((r % group) + offset) % group + (r / group) * group;
  return perm;
}

// Why `perm` is not an automorphism of the logical topology, or empty when it is.
std::string automorphismViolation(const LogicalTopology& lt, const std::vector<int>& perm) {
  for (const LogicalLink& l : lt.links) {
    const int image = lt.find(perm[l.src], perm[l.dst]);
    if (image < 0) {
      return fmt::format("the link {} maps to {}, which the sketch does not allow", pairName(lt, l.src, l.dst),
                         pairName(lt, perm[l.src], perm[l.dst]));
    }
    const LogicalLink& m = lt.links[image];
    if (!close(l.gbps, m.gbps) || !close(l.alpha_us, m.alpha_us) || l.inter_node != m.inter_node) {
      return fmt::format("the link {} ({:.4g} GB/s, α {:.4g} µs) maps to {} ({:.4g} GB/s, α {:.4g} µs)",
                         pairName(lt, l.src, l.dst), l.gbps, l.alpha_us, pairName(lt, m.src, m.dst), m.gbps,
                         m.alpha_us);
    }
    if (l.inter_node) {
      for (int o = 0; o < lt.num_ranks; ++o) {
        if (lt.relay_allowed[l.id][o] != lt.relay_allowed[image][perm[o]]) {
          return fmt::format("the relay rule of {} for rank {}'s chunks differs from its image's",
                             pairName(lt, l.src, l.dst), o);
        }
      }
    }
  }
  return "";
}

constexpr size_t kMaxGroupSize = 4096;

}  // namespace

int LogicalTopology::find(int src, int dst) const {
  auto it = index.find({src, dst});
  return it == index.end() ? -1 : it->second;
}

int LogicalTopology::addLink(int src, int dst, const Route& route, bool inter) {
  LogicalLink l;
  l.id = static_cast<int>(links.size());
  l.src = src;
  l.dst = dst;
  l.alpha_us = route.alpha_us;
  l.gbps = route.bandwidth_gbps;
  l.inter_node = inter;
  l.resources = route.links;
  index[{src, dst}] = l.id;
  out_links[src].push_back(l.id);
  in_links[dst].push_back(l.id);
  links.push_back(std::move(l));
  return links.back().id;
}

int LogicalTopology::imageLink(int g, int link) const {
  const LogicalLink& l = links[link];
  return find(symmetry[g][l.src], symmetry[g][l.dst]);
}

double StageContext::secondsLeft() const {
  return std::max(0.0, std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count());
}

double StageContext::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void StageContext::report(const SynthesisProgress& p) const {
  if (watchdog) {
    watchdog->report(p);
    return;
  }
  if (!progress) return;
  SynthesisProgress q = p;
  q.elapsed_seconds = elapsed();
  progress(q);
}

Result<LogicalTopology> buildLogicalTopology(const Topology& topology, const Sketch& given, bool transposed,
                                             std::vector<std::string>* notes) {
  // TACCL ignores gpus_to_sender_rev_map entries that name GPUs beyond the node (A-Dying-Pig/taccl's
  // adp_mi300x-n2 sketch has an entry "8" on 8-GPU nodes); so does Braid, with a note.
  Sketch sketch = given;
  if (topology.numNodes() > 0) {
    const int gpn = static_cast<int>(topology.nodes[0].gpus.size());
    for (auto it = sketch.relay_for.begin(); it != sketch.relay_for.end();) {
      std::vector<int> kept;
      for (int g : it->second) {
        if (g >= 0 && g < gpn) kept.push_back(g);
      }
      if (it->first < 0 || it->first >= gpn || kept.size() != it->second.size()) {
        if (notes) {
          notes->push_back(fmt::format("{}: relay_for entry {} names GPUs beyond the {} GPUs per node: {}",
                                       sketch.source, it->first, gpn,
                                       it->first < 0 || it->first >= gpn ? "entry ignored" : "those GPUs ignored"));
        }
        if (it->first < 0 || it->first >= gpn) {
          it = sketch.relay_for.erase(it);
          continue;
        }
        it->second = kept;
      }
      ++it;
    }
  }
  BRAID_RETURN_IF_ERROR(checkSketch(sketch, topology));
  LogicalTopology lt;
  lt.topology = &topology;
  lt.transposed = transposed;
  lt.num_ranks = topology.numGpus();
  const int n = lt.num_ranks;
  if (n < 1) return Status(StatusCode::kInvalidArgument, fmt::format("topology {} has no GPUs", topology.name));
  lt.node_of.assign(n, -1);
  lt.local_of.assign(n, -1);
  std::vector<std::vector<int>> node_ranks(topology.numNodes());
  for (int r = 0; r < n; ++r) {
    const Vertex& v = topology.vertices[topology.gpuVertex(r)];
    lt.node_of[r] = v.node;
    if (v.node >= 0) node_ranks[v.node].push_back(r);
  }
  for (auto& ranks : node_ranks) {
    for (size_t i = 0; i < ranks.size(); ++i) lt.local_of[ranks[i]] = static_cast<int>(i);
  }
  for (int r = 0; r < n; ++r) {
    if (lt.node_of[r] < 0) {
      return Status(
          StatusCode::kInvalidArgument,
          fmt::format("topology {}: GPU rank {} belongs to no node; sketches address GPUs by node", topology.name, r));
    }
  }
  lt.resource_gbps.resize(topology.links.size());
  for (size_t e = 0; e < topology.links.size(); ++e) lt.resource_gbps[e] = topology.links[e].bandwidth_gbps;
  lt.out_links.assign(n, {});
  lt.in_links.assign(n, {});

  // The data of logical link (a -> b) moves a -> b, or b -> a when transposed (reduce-scatter).
  auto addLink = [&](int a, int b, bool inter) -> Status {
    if (lt.find(a, b) >= 0) return Status::ok();
    const int from = transposed ? b : a, to = transposed ? a : b;
    std::optional<Route> route = topology.route(from, to);
    if (!route) {
      return Status(StatusCode::kInvalidArgument,
                    fmt::format("{}: the sketch connects {} but the topology {} has no route between them",
                                sketch.source, pairName(lt, from, to), topology.name));
    }
    lt.addLink(a, b, *route, inter);
    return Status::ok();
  };

  // Intra-node links.
  for (const auto& ranks : node_ranks) {
    const int g = static_cast<int>(ranks.size());
    std::vector<std::pair<int, int>> pairs;
    if (sketch.intranode_links == IntraLinks::kExplicit) {
      for (auto [a, b] : sketch.intranode_pairs) {
        if (a < g && b < g && a != b) pairs.push_back({ranks[a], ranks[b]});
      }
    } else {
      bool any_nvlink = false;
      std::vector<std::pair<int, int>> nvlink_pairs, all_pairs;
      for (int a : ranks) {
        for (int b : ranks) {
          if (a == b) continue;
          std::optional<Route> route = topology.route(a, b);
          if (!route) continue;
          all_pairs.push_back({a, b});
          if (nvlinkOnly(topology, *route)) nvlink_pairs.push_back({a, b}), any_nvlink = true;
        }
      }
      pairs = (sketch.intranode_links == IntraLinks::kNvlink && any_nvlink) ? nvlink_pairs : all_pairs;
    }
    for (auto [a, b] : pairs) BRAID_RETURN_IF_ERROR(addLink(a, b, false));
  }

  // Inter-node links: local sender -> local receivers on every other node.
  const int nodes = topology.numNodes();
  const int gpn = nodes > 0 ? static_cast<int>(node_ranks[0].size()) : 0;
  std::map<int, std::vector<int>> conn;
  if (nodes > 1) {
    switch (sketch.internode_conn) {
      case InterConn::kMap: conn = sketch.internode_map; break;
      case InterConn::kFullyConnected:
        for (int s = 0; s < gpn; ++s) {
          for (int d = 0; d < gpn; ++d) conn[s].push_back(d);
        }
        break;
      case InterConn::kDirectMap:
        for (int s = 0; s < gpn; ++s) conn[s] = {s};
        break;
    }
    if (conn.empty()) {
      return Status(StatusCode::kInvalidArgument,
                    fmt::format("{}: internode.connections is empty but the topology {} has {} nodes", sketch.source,
                                topology.name, nodes));
    }
  }
  for (int x = 0; x < nodes; ++x) {
    for (int y = 0; y < nodes; ++y) {
      if (x == y) continue;
      for (const auto& [s, dsts] : conn) {
        for (int d : dsts) {
          BRAID_RETURN_IF_ERROR(addLink(node_ranks[x][s], node_ranks[y][d], true));
        }
      }
    }
  }
  lt.relay_allowed.assign(lt.links.size(), {});
  for (const LogicalLink& l : lt.links) {
    if (!l.inter_node) continue;
    std::vector<char>& allowed = lt.relay_allowed[l.id];
    allowed.assign(n, 0);
    auto rev = sketch.relay_for.find(lt.local_of[l.src]);
    for (int o = 0; o < n; ++o) {
      if (lt.node_of[o] != lt.node_of[l.src]) continue;
      const bool listed = rev == sketch.relay_for.end() || sketch.relay_for.empty() ||
                          std::count(rev->second.begin(), rev->second.end(), lt.local_of[o]) > 0;
      allowed[o] = listed ? 1 : 0;
    }
  }
  lt.enforce_ordering = sketch.enforce_ordering;
  if (sketch.intranode_strategy == "switch") {
    for (const SketchSwitch& sw : sketch.switches) {
      if (!sw.hyperedge.empty()) {
        lt.hyperedge = sw.hyperedge;
        break;
      }
    }
  }

  // Symmetry group: the generators that are automorphisms, closed under composition.
  std::vector<int> identity(n);
  for (int r = 0; r < n; ++r) identity[r] = r;
  lt.symmetry = {identity};
  std::vector<std::vector<int>> generators;
  for (auto [offset, group] : sketch.symmetry) {
    if (group <= 0 || n % group != 0) continue;  // checkSketch rejects these
    std::vector<int> perm = offsetPermutation(n, offset, group);
    if (perm == identity) continue;
    std::string why = automorphismViolation(lt, perm);
    if (!why.empty()) {
      if (notes) {
        notes->push_back(fmt::format("symmetry [{}, {}] dropped: it is not a symmetry of the logical topology ({})",
                                     offset, group, why));
      }
      continue;
    }
    generators.push_back(std::move(perm));
  }
  std::set<std::vector<int>> seen = {identity};
  for (size_t i = 0; i < lt.symmetry.size() && !generators.empty(); ++i) {
    for (const std::vector<int>& gen : generators) {
      std::vector<int> next(n);
      for (int r = 0; r < n; ++r) next[r] = gen[lt.symmetry[i][r]];
      if (seen.insert(next).second) lt.symmetry.push_back(std::move(next));
    }
    if (lt.symmetry.size() > kMaxGroupSize) {
      if (notes) {
        notes->push_back(fmt::format("symmetry group larger than {} elements: symmetry not used", kMaxGroupSize));
      }
      lt.symmetry = {identity};
      break;
    }
  }
  return lt;
}

}  // namespace braid::synth
