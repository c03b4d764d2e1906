// Stage 1 of the synthesizer: TACCL's routing MILP (Shah et al., "TACCL", NSDI'23 §5.1; taccl/routing.py as
// summarised in ../shared/reference/taccl_msccl.md §1.5) re-designed for Z3.
//
// What TACCL's MILP decides, this stage decides: which logical links carry each chunk (a tree rooted at its owner
// for all-gather / broadcast, a path to its destination for all-to-all), minimizing the makespan T of a bandwidth
// relaxation: T >= load of every logical link (chunks x α-β cost), T >= load of every physical resource (bytes /
// bandwidth), T >= arrival time of every chunk at every rank that needs it.
//
// How it is encoded for Z3 (the re-design):
//   - Candidate links of a chunk: the links on paths from its owner of at most shortest + slack hops, over links
//     usable by the chunk (inter-node links only for the owners their relay rule allows). Everything else has no
//     variable.
//   - Bool x[c][l] for candidate links of representative chunks only (ChunkProblem::orbit); chunk g(c) uses
//     x[c][l] for link imageLink(g, l). Constraints of images that are exact images of the representative's are
//     not repeated; those of images whose candidate sets, targets or costs differ are generated with the
//     substituted variables (and the links that do not correspond are forced off), so the result is valid even
//     where the symmetry is not an automorphism.
//   - Hop levels instead of times: a rank v that receives a chunk does so at hop h(v) = dist(v) + k(v), k(v) in
//     0..slack (order-encoded Booleans, none for slack 0), and a link (u, v) used gives h(v) = h(u) + 1. This keeps
//     routes acyclic and within shortest + slack hops without real arithmetic.
//   - With the makespan bound B fixed, every load constraint is a cardinality constraint: all chunks have the
//     same size, so link l carries at most floor(B / cost_l) chunks and resource e at most
//     floor(B · gbps_e · 1e3 / chunk_bytes) (chunk, link crossing e) pairs. No scaling or rounding of costs.
//   - Arrival times (Real t[c][r], x[c][(u,v)] -> t[v] >= t[u] + cost) are added only for chunks whose longest
//     possible arrival (hops x largest cost) exceeds the makespan lower bound; in the bandwidth-bound regime no
//     chunk needs them and the model is pseudo-Boolean.
//   - The pieces of one (owner, destination) are interchangeable; their variables are lexicographically ordered.
//   - Lower bounds: hop-count arrivals, cuts around every rank and node (chunks that must enter / leave them over
//     links and shared resources), and, once a check times out, the linear relaxation (bisection on T with LRA
//     feasibility checks). Without arrival times every makespan is a load value (k x a link cost or k x a
//     resource's per-chunk time), so bounds round up to the next such value.
//   - Minimization by bisection on B with incremental checks (push/pop) of Z3's SMT solver, each bounded by a
//     share of the time left (1/16 first, 4x longer on a second pass over bounds that timed out); each
//     satisfiable check moves the upper end to the routes' true makespan. A load-balancing greedy (symmetric BFS
//     trees) gives the first upper bound without a solver call when it satisfies every constraint.
//     Measured (2 cores, 60 s limit, 2e6-byte chunks): DGX-1 all-gather chunkup 6 slack 1 — bisection 0.2-0.5 s
//     to the proven optimum, z3::optimize (T real, loads as sums of ite) finds the optimum but does not prove it
//     in 60 s; 2x DGX-2 derived sketch slack 1 — bisection 0.3-0.7 s (within 0.6 % of the bound), optimize
//     60 s; DGX-1 all-to-all chunkup 2 slack 1 — 0.7-5 s vs 3.6 s. The SMT core also beat Z3's SAT engine
//     (logic QF_FD): 0.3 s vs 4-10 s on DGX-1, and QF_FD's push recompiles cardinality constraints without a time
//     limit. Bisection is the default; BRAID_ROUTING_ENGINE=optimize selects z3::optimize (kept for comparison;
//     its time limit is not always honoured on large models).
//   - Hyperedge tweak (TACCL's uc-min / uc-max): with the makespan bound at best x (1 + 1e-3), a bisection on the
//     number of distinct intra-node links used (at most / at least k), a few seconds at most; the routes found
//     last stay when it times out.
//   - Infeasible: a diagnostic model with per-chunk variables over every reachable link, whose constraint groups
//     (postconditions, relay rules, shortest paths, symmetry) are tracked literals; the unsat core, shrunk by
//     deletion, names the conflicting groups.
#include <fmt/format.h>
#include <z3++.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <queue>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "synthesizer/model.h"

namespace braid::synth {
namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr int kInf = std::numeric_limits<int>::max() / 4;
constexpr double kGapTarget = 0.01;       // stop bisection at 1 % relative gap
constexpr double kHyperedgeSlack = 1e-3;  // the hyperedge tweak may cost at most 0.1 % of the makespan
constexpr double kHyperedgeSeconds = 5;   // ... and may take this long (at most a quarter of the time left)
constexpr double kLpSeconds = 5;          // the linear relaxation's bound may take this long (a fifth at most)

const char kRelayGroup[] = "relay: inter-node links may carry only the chunks of gpus_to_sender_rev_map";
const char kPathsGroup[] = "logical topology: shortest paths (+slack)";
const char kSymmetryGroup[] = "symmetry: the sketch's symmetry offsets tie chunk routes";

std::string postconditionName(int rank, const Chunk& chunk) {
  return fmt::format("postcondition: rank {} receives chunk (owner {}, piece {})", rank, chunk.owner, chunk.piece);
}

std::string infeasibleMessage(const std::vector<std::string>& groups) {
  std::string out = "the sketch admits no routing: conflicting constraints: ";
  for (size_t i = 0; i < groups.size(); ++i) out += (i ? ", " : "") + groups[i];
  return out;
}

double secondsSince(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

bool relayAllows(const LogicalTopology& lt, int link, int owner) {
  if (link >= static_cast<int>(lt.relay_allowed.size())) return true;
  const std::vector<char>& allowed = lt.relay_allowed[link];
  if (allowed.empty()) return true;
  return owner >= 0 && owner < static_cast<int>(allowed.size()) && allowed[owner] != 0;
}

/// BFS hop distances over the links usable by chunks of `owner`: from `root` along links (forward) or to `root`
/// against them (backward). kInf where unreachable.
std::vector<int> hopDistances(const LogicalTopology& lt, int root, bool forward, int owner, bool apply_relay) {
  std::vector<int> dist(lt.num_ranks, kInf);
  std::deque<int> queue{root};
  dist[root] = 0;
  while (!queue.empty()) {
    const int u = queue.front();
    queue.pop_front();
    for (int l : forward ? lt.out_links[u] : lt.in_links[u]) {
      if (apply_relay && !relayAllows(lt, l, owner)) continue;
      const int v = forward ? lt.links[l].dst : lt.links[l].src;
      if (dist[v] != kInf) continue;
      dist[v] = dist[u] + 1;
      queue.push_back(v);
    }
  }
  return dist;
}

/// Where a chunk of (owner, dest) may go: hop distances and candidate links.
struct Geometry {
  int owner = -1;
  int dest = -1;                  // all-to-all destination, -1 for gather-style chunks
  std::vector<int> dist;          // hops from the owner over usable links
  std::vector<int> dist_to_dest;  // hops to dest (all-to-all)
  std::vector<int> links;         // candidate links, sorted by id
  std::vector<int> extra;         // per rank: how many hops beyond dist a route may take to it (k(v) <= extra)
};

/// Candidate links (see the file comment). `apply_relay` / `apply_paths` false give the diagnostic model's
/// wider sets (any link reachable from the owner, relay rules ignored).
Geometry makeGeometry(const LogicalTopology& lt, int owner, int dest, int slack, bool apply_relay, bool apply_paths) {
  Geometry g;
  g.owner = owner;
  g.dest = dest;
  g.dist = hopDistances(lt, owner, true, owner, apply_relay);
  if (dest >= 0) g.dist_to_dest = hopDistances(lt, dest, false, owner, apply_relay);
  g.extra.assign(lt.num_ranks, 0);
  const int budget = dest >= 0 && g.dist[dest] < kInf ? g.dist[dest] + slack : kInf;
  for (const LogicalLink& link : lt.links) {
    if (apply_relay && !relayAllows(lt, link.id, owner)) continue;
    const int u = link.src, v = link.dst;
    if (v == owner || g.dist[u] >= kInf) continue;
    if (dest >= 0) {
      if (u == dest || g.dist_to_dest[v] >= kInf) continue;
      if (apply_paths && g.dist[u] + 1 + g.dist_to_dest[v] > budget) continue;
    } else if (apply_paths && g.dist[u] + 1 > g.dist[v] + slack) {
      continue;
    }
    g.links.push_back(link.id);
  }
  std::sort(g.links.begin(), g.links.end());
  for (int r = 0; r < lt.num_ranks; ++r) {
    if (g.dist[r] >= kInf) continue;
    g.extra[r] =
        dest >= 0 ? (g.dist_to_dest[r] < kInf ? std::max(0, budget - g.dist[r] - g.dist_to_dest[r]) : 0) : slack;
  }
  g.extra[owner] = 0;
  return g;
}

/// Position of `link` in a sorted candidate list, -1 if absent.
int indexOf(const std::vector<int>& sorted, int link) {
  auto it = std::lower_bound(sorted.begin(), sorted.end(), link);
  return it != sorted.end() && *it == link ? static_cast<int>(it - sorted.begin()) : -1;
}

/// True makespan of the relaxation for routes `parent` (the objective the stage minimizes): max over logical links
/// of chunks x cost, over resources of chunks x bytes / bandwidth, and over chunk targets of the arrival time
/// along the route. -1 when a route is broken (a target without a chain to the owner).
double routesMakespan(const LogicalTopology& lt, const ChunkProblem& pb, const std::vector<std::vector<int>>& parent) {
  const double bytes = pb.chunk_bytes;
  std::vector<int> link_count(lt.links.size(), 0);
  double t_max = 0;
  std::vector<double> arrival(lt.num_ranks);
  std::vector<char> state(lt.num_ranks);
  for (size_t c = 0; c < pb.chunks.size(); ++c) {
    const Chunk& chunk = pb.chunks[c];
    for (int r = 0; r < lt.num_ranks; ++r)
      if (parent[c][r] >= 0) ++link_count[parent[c][r]];
    std::fill(state.begin(), state.end(), 0);  // 0 unknown, 1 in progress, 2 done
    state[chunk.owner] = 2;
    arrival[chunk.owner] = 0;
    std::function<bool(int)> resolve = [&](int r) -> bool {
      if (state[r] == 2) return true;
      if (state[r] == 1 || parent[c][r] < 0) return false;
      state[r] = 1;
      const LogicalLink& link = lt.links[parent[c][r]];
      if (link.dst != r || !resolve(link.src)) return false;
      arrival[r] = arrival[link.src] + link.cost(bytes);
      state[r] = 2;
      return true;
    };
    for (int target : chunk.targets) {
      if (!resolve(target)) return -1;
      t_max = std::max(t_max, arrival[target]);
    }
  }
  std::vector<double> resource_count(lt.resource_gbps.size(), 0);
  for (size_t l = 0; l < lt.links.size(); ++l) {
    if (link_count[l] == 0) continue;
    t_max = std::max(t_max, link_count[l] * lt.links[l].cost(bytes));
    for (int e : lt.links[l].resources) resource_count[e] += link_count[l];
  }
  for (size_t e = 0; e < resource_count.size(); ++e)
    if (resource_count[e] > 0 && lt.resource_gbps[e] > 0)
      t_max = std::max(t_max, resource_count[e] * bytes / (lt.resource_gbps[e] * 1e3));
  return t_max;
}

/// Removes transfers to ranks that are not targets and forward nothing (repeatedly); they only add load.
void pruneUselessLeaves(const LogicalTopology& lt, const ChunkProblem& pb, std::vector<std::vector<int>>* parent) {
  for (size_t c = 0; c < pb.chunks.size(); ++c) {
    std::vector<char> target(lt.num_ranks, 0);
    for (int t : pb.chunks[c].targets) target[t] = 1;
    std::vector<int>& par = (*parent)[c];
    bool changed = true;
    while (changed) {
      changed = false;
      std::vector<int> children(lt.num_ranks, 0);
      for (int r = 0; r < lt.num_ranks; ++r)
        if (par[r] >= 0) ++children[lt.links[par[r]].src];
      for (int r = 0; r < lt.num_ranks; ++r) {
        if (par[r] >= 0 && !target[r] && children[r] == 0) {
          par[r] = -1;
          changed = true;
        }
      }
    }
  }
}

/// Number of distinct intra-node logical links the routes use (the hyperedge objective).
int distinctIntraLinks(const LogicalTopology& lt, const std::vector<std::vector<int>>& parent) {
  std::vector<char> used(lt.links.size(), 0);
  for (const auto& par : parent)
    for (int l : par)
      if (l >= 0 && !lt.links[l].inter_node) used[l] = 1;
  return static_cast<int>(std::count(used.begin(), used.end(), 1));
}

/// Lower bound on the time `need` chunks take to cross the links `links` (each chunk crosses at least one of
/// them): with makespan B, link l carries at most floor(B / cost_l) chunks and a physical resource e at most
/// floor(B / (bytes / bandwidth_e)) (chunk, link) pairs in total. Links are grouped by the resource most of them
/// share (e.g. a GPU's NVSwitch port); a group carries at most min(resource bound, sum of its link bounds). Returns
/// the largest B (to 1e-6 relative) whose capacity is still below `need`.
double cutBound(const LogicalTopology& lt, double bytes, int need, const std::vector<int>& links) {
  if (need <= 0 || links.empty()) return 0;
  std::unordered_map<int, int> shared;
  for (int l : links)
    for (int e : lt.links[l].resources) ++shared[e];
  std::map<int, std::vector<int>> groups;  // resource (or -1 - link for a link alone) -> links
  double hi = 0;
  for (int l : links) {
    int key = -1 - l;
    for (int e : lt.links[l].resources) {
      if (lt.resource_gbps[e] <= 0) continue;
      if (key < 0 || shared[e] > shared[key] ||
          (shared[e] == shared[key] && lt.resource_gbps[e] < lt.resource_gbps[key]))
        key = e;
    }
    groups[key].push_back(l);
    hi = std::max(hi, lt.links[l].cost(bytes));
    if (key >= 0) hi = std::max(hi, bytes / (lt.resource_gbps[key] * 1e3));
  }
  hi *= need;
  auto capacity = [&](double b) {
    double total = 0;
    for (const auto& [key, ls] : groups) {
      double sum = 0;
      for (int l : ls) sum += std::floor((b + 1e-9) / lt.links[l].cost(bytes));
      if (key >= 0) sum = std::min(sum, std::floor((b + 1e-9) / (bytes / (lt.resource_gbps[key] * 1e3))));
      total += sum;
    }
    return total;
  };
  double lo = 0;
  while (hi - lo > 1e-6 * hi) {
    const double mid = (lo + hi) / 2;
    (capacity(mid) >= need ? hi : lo) = mid;
  }
  return lo;
}

// ---- the main model ---------------------------------------------------------------------------------------

/// The encoding of one chunk in the main model.
struct ChunkEnc {
  int geometry = -1;
  std::vector<int> slot;  // x slot per candidate link (Geometry::links order)
  bool constrained = false;
};

class RoutingModel {
 public:
  RoutingModel(z3::context& z, const LogicalTopology& lt, const ChunkProblem& pb, int slack)
      : z_(z), lt_(lt), pb_(pb), slack_(slack), base_(z), identity_(lt.num_ranks) {
    std::iota(identity_.begin(), identity_.end(), 0);
  }

  /// Computes candidate geometries (cheap, no Z3). Returns the postcondition that no route can meet, if any.
  std::optional<std::pair<int, int>> computeGeometry() {
    std::map<std::pair<int, int>, int> by_key;
    enc_.resize(pb_.chunks.size());
    for (size_t c = 0; c < pb_.chunks.size(); ++c) {
      const Chunk& chunk = pb_.chunks[c];
      const int dest = pb_.kind == CollectiveKind::kAllToAll ? chunk.dest : -1;
      auto [it, fresh] = by_key.emplace(std::make_pair(chunk.owner, dest), static_cast<int>(geoms_.size()));
      if (fresh) geoms_.push_back(makeGeometry(lt_, chunk.owner, dest, slack_, true, true));
      enc_[c].geometry = it->second;
      const Geometry& g = geoms_[it->second];
      for (int t : chunk.targets)
        if (g.dist[t] >= kInf) return std::make_pair(static_cast<int>(c), t);
    }
    return std::nullopt;
  }

  const Geometry& geometry(int c) const { return geoms_[enc_[c].geometry]; }

  int representative(int c) const { return pb_.orbit.size() == pb_.chunks.size() ? pb_.orbit[c].first : c; }
  int element(int c) const { return pb_.orbit.size() == pb_.chunks.size() ? pb_.orbit[c].second : 0; }

  /// Lower bound on the makespan: the slowest chunk's fastest arrival over its candidate links, and cuts (see
  /// cutBound) around every rank (chunks it needs enter it, chunks it owns leave it) and every node.
  double lowerBound() const {
    double lb = 0;
    const double bytes = pb_.chunk_bytes;
    std::vector<std::vector<double>> fastest(geoms_.size());  // per geometry: cheapest arrival at each rank
    for (size_t c = 0; c < pb_.chunks.size(); ++c) {
      const Geometry& g = geometry(c);
      std::vector<double>& best = fastest[enc_[c].geometry];
      if (!best.empty()) {
        for (int t : pb_.chunks[c].targets) lb = std::max(lb, best[t]);
        continue;
      }
      best.assign(lt_.num_ranks, std::numeric_limits<double>::infinity());
      using Item = std::pair<double, int>;
      std::priority_queue<Item, std::vector<Item>, std::greater<>> heap;
      best[g.owner] = 0;
      heap.emplace(0.0, g.owner);
      while (!heap.empty()) {
        auto [d, u] = heap.top();
        heap.pop();
        if (d > best[u]) continue;
        for (int l : lt_.out_links[u]) {
          if (indexOf(g.links, l) < 0) continue;
          const int v = lt_.links[l].dst;
          const double nd = d + lt_.links[l].cost(bytes);
          if (nd < best[v]) {
            best[v] = nd;
            heap.emplace(nd, v);
          }
        }
      }
      for (int t : pb_.chunks[c].targets) lb = std::max(lb, best[t]);
    }
    // Cuts around single ranks: a rank receives every chunk it is a target of, and sends every chunk it owns at
    // least once.
    std::vector<int> need(lt_.num_ranks, 0), own(lt_.num_ranks, 0);
    for (const Chunk& chunk : pb_.chunks) {
      if (!chunk.targets.empty()) ++own[chunk.owner];
      for (int t : chunk.targets) ++need[t];
    }
    for (int r = 0; r < lt_.num_ranks; ++r)
      lb = std::max(
          {lb, cutBound(lt_, bytes, need[r], lt_.in_links[r]), cutBound(lt_, bytes, own[r], lt_.out_links[r])});
    // Cuts around nodes: chunks owned outside with a target inside enter the node at least once; chunks owned
    // inside with a target outside leave it at least once.
    std::map<int, std::vector<int>> nodes;
    for (int r = 0; r < static_cast<int>(lt_.node_of.size()); ++r) nodes[lt_.node_of[r]].push_back(r);
    if (nodes.size() < 2) return lb;
    std::vector<char> inside(lt_.num_ranks);
    for (const auto& [node, set] : nodes) {
      std::fill(inside.begin(), inside.end(), 0);
      for (int r : set) inside[r] = 1;
      int enter = 0, leave = 0;
      for (const Chunk& chunk : pb_.chunks) {
        bool any_in = false, any_out = false;
        for (int t : chunk.targets) (inside[t] ? any_in : any_out) = true;
        if (!inside[chunk.owner] && any_in) ++enter;
        if (inside[chunk.owner] && any_out) ++leave;
      }
      std::vector<int> in_links, out_links;
      for (const LogicalLink& link : lt_.links) {
        if (!inside[link.src] && inside[link.dst]) in_links.push_back(link.id);
        if (inside[link.src] && !inside[link.dst]) out_links.push_back(link.id);
      }
      lb = std::max({lb, cutBound(lt_, bytes, enter, in_links), cutBound(lt_, bytes, leave, out_links)});
    }
    return lb;
  }

  /// Builds variables and structural constraints. `latency_floor`: chunks whose longest possible arrival is at
  /// most this need no arrival-time variables (the makespan bound is never below it).
  void build(double latency_floor) {
    latency_floor_ = latency_floor;
    const int n = lt_.num_ranks;
    // Representatives first: fresh variables (or `true` where a target has a single candidate in-link).
    for (size_t c = 0; c < pb_.chunks.size(); ++c) {
      if (representative(c) != static_cast<int>(c)) continue;
      const Geometry& g = geometry(c);
      std::vector<int> in_count(n, 0);
      for (int l : g.links) ++in_count[lt_.links[l].dst];
      std::vector<char> target(n, 0);
      for (int t : pb_.chunks[c].targets) target[t] = 1;
      ChunkEnc& e = enc_[c];
      e.constrained = true;
      for (int l : g.links) {
        const int v = lt_.links[l].dst;
        if (target[v] && in_count[v] == 1) {
          e.slot.push_back(newConstant(true));
        } else {
          e.slot.push_back(newVar(fmt::format("x_c{}_l{}", c, l)));
        }
      }
    }
    // Stabilizer ties: an element that maps a representative onto itself maps its routes onto themselves.
    for (size_t c = 0; c < pb_.chunks.size(); ++c) {
      if (representative(c) != static_cast<int>(c)) continue;
      for (size_t g = 1; g < pb_.image.size(); ++g) {
        if (pb_.image[g][c] != static_cast<int>(c)) continue;
        const Geometry& geo = geometry(c);
        for (size_t i = 0; i < geo.links.size(); ++i) {
          const int img = lt_.imageLink(static_cast<int>(g), geo.links[i]);
          const int j = img >= 0 ? indexOf(geo.links, img) : -1;
          const z3::expr& xi = x_[enc_[c].slot[i]];
          if (j < 0) {
            base_.push_back(!xi);
            zeros_.push_back(enc_[c].slot[i]);
            suspects_.insert(static_cast<int>(c));
          } else if (j != static_cast<int>(i)) {
            base_.push_back(xi == x_[enc_[c].slot[j]]);
            ties_.push_back({enc_[c].slot[i], enc_[c].slot[j]});
          }
        }
      }
    }
    // Images: substituted variables; constraints only where the image is not exact.
    for (size_t c = 0; c < pb_.chunks.size(); ++c) {
      const int rep = representative(c);
      if (rep == static_cast<int>(c)) continue;
      mapImage(static_cast<int>(c), rep, element(c));
    }
    for (size_t c = 0; c < pb_.chunks.size(); ++c)
      if (enc_[c].constrained) constrainChunk(static_cast<int>(c), latency_floor);
    breakPieceSymmetry();
    // Loads: (link -> slot multiplicities), (resource -> slot multiplicities).
    std::vector<std::unordered_map<int, int>> link_mult(lt_.links.size());
    for (size_t c = 0; c < pb_.chunks.size(); ++c) {
      const Geometry& g = geometry(c);
      for (size_t i = 0; i < g.links.size(); ++i) ++link_mult[g.links[i]][enc_[c].slot[i]];
    }
    std::vector<std::unordered_map<int, int>> res_mult(lt_.resource_gbps.size());
    link_load_.resize(lt_.links.size());
    for (size_t l = 0; l < lt_.links.size(); ++l) {
      for (const auto& [slot, m] : link_mult[l]) link_load_[l].push_back({slot, m});
      std::sort(link_load_[l].begin(), link_load_[l].end());
      for (int e : lt_.links[l].resources)
        for (const auto& [slot, m] : link_mult[l]) res_mult[e][slot] += m;
    }
    res_load_.resize(res_mult.size());
    res_single_link_.assign(res_mult.size(), -1);
    std::vector<std::vector<int>> links_of_res(res_mult.size());
    for (size_t l = 0; l < lt_.links.size(); ++l)
      if (!link_load_[l].empty())
        for (int e : lt_.links[l].resources) links_of_res[e].push_back(static_cast<int>(l));
    for (size_t e = 0; e < res_mult.size(); ++e) {
      for (const auto& [slot, m] : res_mult[e]) res_load_[e].push_back({slot, m});
      std::sort(res_load_[e].begin(), res_load_[e].end());
      auto& ls = links_of_res[e];
      ls.erase(std::unique(ls.begin(), ls.end()), ls.end());
      if (ls.size() == 1 && res_load_[e] == link_load_[ls[0]]) res_single_link_[e] = ls[0];
    }
  }

  /// Constraints for makespan bound `bound` (µs): loads as cardinality constraints, arrivals <= bound.
  z3::expr_vector boundConstraints(double bound) const {
    z3::expr_vector out(z_);
    const double bytes = pb_.chunk_bytes;
    std::vector<long long> link_k(lt_.links.size(), -1);
    for (size_t l = 0; l < lt_.links.size(); ++l) {
      if (link_load_[l].empty()) continue;
      link_k[l] = static_cast<long long>(std::floor((bound + 1e-9) / lt_.links[l].cost(bytes)));
      addCardinality(link_load_[l], link_k[l], &out);
    }
    for (size_t e = 0; e < res_load_.size(); ++e) {
      if (res_load_[e].empty() || lt_.resource_gbps[e] <= 0) continue;
      const long long k = static_cast<long long>(std::floor((bound + 1e-9) / (bytes / (lt_.resource_gbps[e] * 1e3))));
      if (res_single_link_[e] >= 0 && k >= link_k[res_single_link_[e]]) continue;  // implied by the link's
      addCardinality(res_load_[e], k, &out);
    }
    for (const z3::expr& t : arrival_targets_) out.push_back(t <= realVal(bound));
    return out;
  }

  /// The z3::optimize form of the loads: t >= cost x count for every link, bytes / bandwidth x count for every
  /// resource, t >= arrival for every chunk target with arrival variables.
  z3::expr_vector makespanAtLeastLoads(const z3::expr& t) const {
    z3::expr_vector out(z_);
    const double bytes = pb_.chunk_bytes;
    auto add = [&](const std::vector<std::pair<int, int>>& load, double per_chunk) {
      if (load.empty()) return;
      z3::expr_vector terms(z_);
      for (const auto& [slot, m] : load) terms.push_back(z3::ite(x_[slot], z_.real_val(m), z_.real_val(0)));
      out.push_back(t >= realVal(per_chunk) * z3::sum(terms));
    };
    for (size_t l = 0; l < lt_.links.size(); ++l) add(link_load_[l], lt_.links[l].cost(bytes));
    for (size_t e = 0; e < res_load_.size(); ++e) {
      if (lt_.resource_gbps[e] <= 0) continue;
      const double per_chunk = bytes / (lt_.resource_gbps[e] * 1e3);
      if (res_single_link_[e] >= 0 && per_chunk <= lt_.links[res_single_link_[e]].cost(bytes)) continue;
      add(res_load_[e], per_chunk);
    }
    for (const z3::expr& a : arrival_targets_) out.push_back(t >= a);
    return out;
  }

  /// Without arrival-time variables the makespan of any routing above the latency floor is a load: k x cost of a
  /// link, or k x bytes / bandwidth of a resource its links do not dominate. The smallest such value >= `bound`
  /// (`bound` itself when arrival times are modeled).
  double nextLoadValue(double bound) const {
    if (uses_reals_) return bound;
    const double bytes = pb_.chunk_bytes;
    double best = std::numeric_limits<double>::infinity();
    auto consider = [&](double per_chunk) {
      best = std::min(best, std::ceil(bound / per_chunk * (1 - 1e-12)) * per_chunk);
    };
    for (size_t l = 0; l < lt_.links.size(); ++l)
      if (!link_load_[l].empty()) consider(lt_.links[l].cost(bytes));
    for (size_t e = 0; e < res_load_.size(); ++e) {
      if (res_load_[e].empty() || lt_.resource_gbps[e] <= 0) continue;
      const double per_chunk = bytes / (lt_.resource_gbps[e] * 1e3);
      if (res_single_link_[e] >= 0 && per_chunk <= lt_.links[res_single_link_[e]].cost(bytes)) continue;
      consider(per_chunk);
    }
    return std::isfinite(best) ? std::max(best, bound) : bound;
  }

  /// Lower bound from the linear relaxation (x in [0, 1], no hop levels, no arrival times): receive once, forward
  /// at most what was received, loads within T. A bisection on T in [low, high] with LRA feasibility checks (Z3's
  /// SMT solver with its older simplex, arith.solver=2, whose checks honour the time limit: z3::optimize and the
  /// default arithmetic solver ran minutes past it on a 5000-variable relaxation, DGX-1 all-to-all chunkup 12).
  /// Returns the largest T shown infeasible (every routing takes longer), or nullopt when none above `low` was
  /// shown within `seconds`.
  std::optional<double> lpBound(double low, double high, double seconds) const {
    const auto start = SteadyClock::now();
    z3::expr_vector lp(z_);  // the relaxation's constraints
    std::vector<std::optional<z3::expr>> r(x_.size());
    std::vector<char> zero(x_.size(), 0);
    for (int s : zeros_) zero[s] = 1;
    auto val = [&](int s) -> z3::expr {
      if (x_[s].is_true()) return z_.real_val(1);
      if (zero[s]) return z_.real_val(0);
      if (!r[s]) {
        r[s] = z_.real_const(fmt::format("r{}", s).c_str());
        lp.push_back(*r[s] >= 0 && *r[s] <= 1);
      }
      return *r[s];
    };
    for (const auto& [a, b] : ties_) lp.push_back(val(a) == val(b));
    const int n = lt_.num_ranks;
    for (size_t c = 0; c < pb_.chunks.size(); ++c) {
      if (!enc_[c].constrained) continue;
      const Chunk& chunk = pb_.chunks[c];
      const Geometry& g = geometry(c);
      std::vector<z3::expr_vector> in, out;
      for (int v = 0; v < n; ++v) in.emplace_back(z_), out.emplace_back(z_);
      for (size_t i = 0; i < g.links.size(); ++i) {
        const LogicalLink& link = lt_.links[g.links[i]];
        in[link.dst].push_back(val(enc_[c].slot[i]));
        out[link.src].push_back(val(enc_[c].slot[i]));
      }
      std::vector<char> target(n, 0);
      for (int t : chunk.targets) target[t] = 1;
      auto total = [&](const z3::expr_vector& v) { return v.size() ? z3::sum(v) : z_.real_val(0); };
      for (int v = 0; v < n; ++v) {
        if (v == chunk.owner) continue;
        if (target[v]) {
          lp.push_back(total(in[v]) == 1);
        } else if (in[v].size() > 1) {
          lp.push_back(total(in[v]) <= 1);
        }
      }
      for (size_t i = 0; i < g.links.size(); ++i) {
        const int u = lt_.links[g.links[i]].src;
        if (u != chunk.owner) lp.push_back(val(enc_[c].slot[i]) <= total(in[u]));
      }
      if (pb_.kind == CollectiveKind::kAllToAll) {
        for (int v = 0; v < n; ++v) {
          if (v == chunk.dest || out[v].size() == 0) continue;
          lp.push_back(total(out[v]) <= (v == chunk.owner ? z_.real_val(1) : total(in[v])));
        }
      }
    }
    const z3::expr t = z_.real_const("T_lp");
    lp.push_back(t >= 0);
    const double bytes = pb_.chunk_bytes;
    auto load = [&](const std::vector<std::pair<int, int>>& slots, double per_chunk) {
      if (slots.empty()) return;
      z3::expr_vector terms(z_);
      for (const auto& [s, m] : slots) terms.push_back(z_.real_val(m) * val(s));
      lp.push_back(t >= realVal(per_chunk) * z3::sum(terms));
    };
    for (size_t l = 0; l < lt_.links.size(); ++l) load(link_load_[l], lt_.links[l].cost(bytes));
    for (size_t e = 0; e < res_load_.size(); ++e) {
      if (lt_.resource_gbps[e] <= 0) continue;
      const double per_chunk = bytes / (lt_.resource_gbps[e] * 1e3);
      if (res_single_link_[e] >= 0 && per_chunk <= lt_.links[res_single_link_[e]].cost(bytes)) continue;
      load(res_load_[e], per_chunk);
    }
    std::optional<double> shown;
    bool first = true;
    while (high - low > 0.5 * kGapTarget * high) {
      const double left = seconds - secondsSince(start);
      if (left <= 0.01) break;
      // The first probe is just above `low`: when the relaxation fits there it cannot help, and one check says so.
      const double mid = first ? low + 0.5 * kGapTarget * high : (low + high) / 2;
      // A fresh, non-incremental solver per check: the incremental one's push / assumptions preprocess without a
      // time limit (minutes on large relaxations).
      z3::solver check(z_);
      z3::params p(z_);
      p.set("timeout", static_cast<unsigned>(std::clamp(left * 1000, 1.0, 4.0e9)));
      p.set("arith.solver", 2u);
      check.set(p);
      for (unsigned i = 0; i < lp.size(); ++i) check.add(lp[i]);
      check.add(t <= realVal(mid));
      const z3::check_result r = check.check();
      if (r == z3::unsat) {
        low = mid;
        shown = mid;
      } else if (r == z3::sat && !first) {
        high = mid;
      } else {
        break;
      }
      first = false;
    }
    return shown;
  }

  /// Routes of every chunk under `model`.
  std::vector<std::vector<int>> extract(const z3::model& model) const {
    std::vector<std::vector<int>> parent(pb_.chunks.size(), std::vector<int>(lt_.num_ranks, -1));
    std::vector<int> value(x_.size(), -1);
    for (size_t c = 0; c < pb_.chunks.size(); ++c) {
      const Geometry& g = geometry(c);
      for (size_t i = 0; i < g.links.size(); ++i) {
        const int s = enc_[c].slot[i];
        if (value[s] < 0) value[s] = model.eval(x_[s], true).is_true() ? 1 : 0;
        if (value[s]) parent[c][lt_.links[g.links[i]].dst] = g.links[i];
      }
    }
    return parent;
  }

  /// Are `parent`'s routes a solution of the structural constraints (candidates, trees/paths, hop budgets,
  /// symmetry ties), up to the order of interchangeable pieces? Used to start from the greedy routes without a
  /// solver call (the pieces' order changes no load, so the bisection is unaffected).
  bool satisfiedBy(const std::vector<std::vector<int>>& parent) const {
    const int n = lt_.num_ranks;
    for (size_t c = 0; c < pb_.chunks.size(); ++c) {
      const Geometry& g = geometry(c);
      const Chunk& chunk = pb_.chunks[c];
      std::vector<char> target(n, 0);
      for (int t : chunk.targets) target[t] = 1;
      std::vector<int> children(n, 0);
      for (int r = 0; r < n; ++r) {
        const int l = parent[c][r];
        if (l < 0) {
          if (target[r]) return false;
          continue;
        }
        if (indexOf(g.links, l) < 0 || lt_.links[l].dst != r) return false;
        ++children[lt_.links[l].src];
      }
      for (int r = 0; r < n; ++r) {
        if (r == chunk.owner || parent[c][r] < 0) continue;
        if (!target[r] && children[r] == 0) return false;
        // Hop count along the chain within the budget; the chain reaches the owner (no cycle).
        int hops = 0, v = r;
        while (v != chunk.owner && hops <= n) {
          if (parent[c][v] < 0) return false;
          v = lt_.links[parent[c][v]].src;
          ++hops;
        }
        if (v != chunk.owner || hops > g.dist[r] + g.extra[r]) return false;
      }
      if (pb_.kind == CollectiveKind::kAllToAll)
        for (int r = 0; r < n; ++r)
          if (children[r] > 1) return false;
      // Symmetry: images follow their representative exactly; stabilizers fix the routes.
      const int rep = representative(c);
      const std::vector<int>& perm = lt_.symmetry.empty() ? identity_ : lt_.symmetry[element(c)];
      for (int r = 0; r < n; ++r) {
        const int l = parent[rep][r];
        const int img = l < 0 ? -1 : lt_.imageLink(element(c), l);
        if (l >= 0 && img < 0) return false;
        if (parent[c][perm[r]] != img) return false;
      }
      if (rep == static_cast<int>(c)) {
        for (size_t ge = 1; ge < pb_.image.size(); ++ge) {
          if (pb_.image[ge][c] != static_cast<int>(c)) continue;
          for (int r = 0; r < n; ++r) {
            const int l = parent[c][r];
            const int img = l < 0 ? -1 : lt_.imageLink(static_cast<int>(ge), l);
            if (l >= 0 && img < 0) return false;
            if (parent[c][lt_.symmetry[ge][r]] != img) return false;
          }
        }
      }
    }
    return true;
  }

  /// Load-balancing greedy: each representative's BFS tree (path) takes, rank by rank from the farthest, the
  /// candidate in-link from the previous layer whose link would finish earliest; images copy it.
  std::vector<std::vector<int>> greedy() const {
    const int n = lt_.num_ranks;
    const double bytes = pb_.chunk_bytes;
    std::vector<std::vector<int>> parent(pb_.chunks.size(), std::vector<int>(n, -1));
    std::vector<int> load(lt_.links.size(), 0);
    std::vector<std::vector<int>> images(pb_.chunks.size());
    for (size_t c = 0; c < pb_.chunks.size(); ++c) images[representative(c)].push_back(static_cast<int>(c));
    for (size_t c = 0; c < pb_.chunks.size(); ++c) {
      if (representative(c) != static_cast<int>(c)) continue;
      const Geometry& g = geometry(c);
      std::vector<char> needed(n, 0);
      for (int t : pb_.chunks[c].targets) needed[t] = 1;
      std::vector<int> order;
      for (int r = 0; r < n; ++r)
        if (g.dist[r] < kInf && r != g.owner) order.push_back(r);
      std::sort(order.begin(), order.end(), [&](int a, int b) { return g.dist[a] > g.dist[b]; });
      for (int v : order) {
        if (!needed[v]) continue;
        int best = -1;
        double best_finish = 0;
        for (int l : lt_.in_links[v]) {
          const int u = lt_.links[l].src;
          if (indexOf(g.links, l) < 0 || g.dist[u] + 1 != g.dist[v]) continue;
          const double finish = (load[l] + static_cast<double>(images[c].size())) * lt_.links[l].cost(bytes);
          if (best < 0 || finish < best_finish) best = l, best_finish = finish;
        }
        if (best < 0) return {};
        parent[c][v] = best;
        needed[lt_.links[best].src] = 1;
      }
      for (int img : images[c]) {
        const int ge = element(img);
        const std::vector<int>& perm = lt_.symmetry.empty() ? identity_ : lt_.symmetry[ge];
        for (int r = 0; r < n; ++r) {
          if (parent[c][r] < 0) continue;
          const int l = lt_.imageLink(ge, parent[c][r]);
          if (l < 0) return {};
          parent[img][perm[r]] = l;
          ++load[l];
        }
      }
    }
    return parent;
  }

  /// The hyperedge objective's terms: one Boolean per intra-node link that some chunk may use, true iff used.
  z3::expr_vector usedLinkDefinitions(z3::expr_vector* used) const {
    z3::expr_vector defs(z_);
    for (size_t l = 0; l < lt_.links.size(); ++l) {
      if (link_load_[l].empty() || lt_.links[l].inter_node) continue;
      z3::expr_vector any(z_);
      for (const auto& sm : link_load_[l]) any.push_back(x_[sm.first]);
      z3::expr u = z_.bool_const(fmt::format("used_l{}", l).c_str());
      defs.push_back(u == z3::mk_or(any));
      used->push_back(u);
    }
    return defs;
  }

  const z3::expr_vector& base() const { return base_; }
  double latencyFloor() const { return latency_floor_; }
  const std::set<int>& suspects() const { return suspects_; }
  int numVariables() const { return num_vars_; }
  bool usesReals() const { return uses_reals_; }

 private:
  int newVar(const std::string& name) {
    x_.push_back(z_.bool_const(name.c_str()));
    ++num_vars_;
    return static_cast<int>(x_.size()) - 1;
  }
  int newConstant(bool value) {
    x_.push_back(z_.bool_val(value));
    return static_cast<int>(x_.size()) - 1;
  }
  z3::expr realVal(double v) const { return z_.real_val(fmt::format("{:.9f}", v).c_str()); }

  /// Variables of chunk c = image[g][rep]: the representative's, moved by g; where the candidate sets do not
  /// correspond, fresh variables forced off (and the representative's non-corresponding links forced off).
  void mapImage(int c, int rep, int g) {
    const Geometry& gc = geometry(c);
    const Geometry& gr = geometry(rep);
    ChunkEnc& e = enc_[c];
    e.slot.assign(gc.links.size(), -1);
    bool exact = gc.links.size() == gr.links.size();
    const double bytes = pb_.chunk_bytes;
    for (size_t i = 0; i < gr.links.size(); ++i) {
      const int img = lt_.imageLink(g, gr.links[i]);
      const int j = img >= 0 ? indexOf(gc.links, img) : -1;
      if (j < 0 || e.slot[j] >= 0) {
        base_.push_back(!x_[enc_[rep].slot[i]]);
        zeros_.push_back(enc_[rep].slot[i]);
        suspects_.insert(rep);
        exact = false;
        continue;
      }
      e.slot[j] = enc_[rep].slot[i];
      if (std::abs(lt_.links[img].cost(bytes) - lt_.links[gr.links[i]].cost(bytes)) > 1e-9) exact = false;
    }
    for (size_t j = 0; j < gc.links.size(); ++j) {
      if (e.slot[j] >= 0) continue;
      e.slot[j] = newVar(fmt::format("x_c{}_l{}", c, gc.links[j]));
      base_.push_back(!x_[e.slot[j]]);
      zeros_.push_back(e.slot[j]);
      suspects_.insert(rep);
      exact = false;
    }
    const std::vector<int>& perm = lt_.symmetry.empty() ? identity_ : lt_.symmetry[g];
    std::vector<int> mapped;
    for (int t : pb_.chunks[rep].targets) mapped.push_back(perm[t]);
    std::vector<int> targets = pb_.chunks[c].targets;
    std::sort(mapped.begin(), mapped.end());
    std::sort(targets.begin(), targets.end());
    if (mapped != targets || perm[gr.owner] != gc.owner) exact = false;
    for (int r = 0; exact && r < lt_.num_ranks; ++r)
      if (gr.dist[r] != gc.dist[perm[r]] || gr.extra[r] != gc.extra[perm[r]]) exact = false;
    e.constrained = !exact;
  }

  /// Per-chunk constraints: receive once (exactly once at targets), send only what was received, non-targets
  /// forward what they receive, all-to-all routes are paths, hop levels, and arrival times where needed.
  void constrainChunk(int c, double latency_floor) {
    const int n = lt_.num_ranks;
    const Chunk& chunk = pb_.chunks[c];
    const Geometry& g = geometry(c);
    const ChunkEnc& e = enc_[c];
    const double bytes = pb_.chunk_bytes;
    // One expr_vector per rank (copies of an expr_vector share one Z3 vector, so no fill constructor).
    std::vector<z3::expr_vector> in, out;
    for (int v = 0; v < n; ++v) in.emplace_back(z_), out.emplace_back(z_);
    for (size_t i = 0; i < g.links.size(); ++i) {
      const LogicalLink& link = lt_.links[g.links[i]];
      in[link.dst].push_back(x_[e.slot[i]]);
      out[link.src].push_back(x_[e.slot[i]]);
    }
    std::vector<char> target(n, 0);
    for (int t : chunk.targets) target[t] = 1;
    for (int v = 0; v < n; ++v) {
      if (v == chunk.owner) continue;
      if (target[v]) {
        if (in[v].size() == 1) {
          if (!in[v][0].is_true()) base_.push_back(in[v][0]);
        } else {
          base_.push_back(z3::mk_or(in[v]));
          base_.push_back(z3::atmost(in[v], 1));
        }
      } else if (in[v].size() > 0) {
        if (in[v].size() > 1) base_.push_back(z3::atmost(in[v], 1));
        if (out[v].size() == 0) {
          for (unsigned i = 0; i < in[v].size(); ++i) base_.push_back(!in[v][i]);
        } else {
          base_.push_back(z3::implies(z3::mk_or(in[v]), z3::mk_or(out[v])));
        }
      }
      if (pb_.kind == CollectiveKind::kAllToAll && out[v].size() > 1) base_.push_back(z3::atmost(out[v], 1));
    }
    if (pb_.kind == CollectiveKind::kAllToAll && out[chunk.owner].size() > 1)
      base_.push_back(z3::atmost(out[chunk.owner], 1));
    // Send only what was received.
    for (size_t i = 0; i < g.links.size(); ++i) {
      const int u = lt_.links[g.links[i]].src;
      if (u == chunk.owner) continue;
      const z3::expr& x = x_[e.slot[i]];
      if (in[u].size() == 0) {
        base_.push_back(!x);
      } else {
        base_.push_back(z3::implies(x, z3::mk_or(in[u])));
      }
    }
    // Hop levels: k(v) >= m as Booleans ge[v][m], m = 1..extra(v); h(v) = dist(v) + k(v) = h(u) + 1.
    std::vector<std::vector<z3::expr>> ge(n);
    for (int v = 0; v < n; ++v) {
      if (v == chunk.owner || in[v].size() == 0) continue;
      for (int m = 1; m <= g.extra[v]; ++m) {
        ge[v].push_back(z_.bool_const(fmt::format("k_c{}_r{}_{}", c, v, m).c_str()));
        ++num_vars_;
        if (m >= 2) base_.push_back(z3::implies(ge[v][m - 1], ge[v][m - 2]));
      }
    }
    auto level_at_least = [&](int v, int m) -> z3::expr {
      if (m <= 0) return z_.bool_val(true);
      if (m > static_cast<int>(ge[v].size())) return z_.bool_val(false);
      return ge[v][m - 1];
    };
    for (size_t i = 0; i < g.links.size(); ++i) {
      const LogicalLink& link = lt_.links[g.links[i]];
      const int u = link.src, v = link.dst;
      const int delta = g.dist[u] + 1 - g.dist[v];  // k(v) = k(u) + delta
      const int top = std::max(static_cast<int>(ge[v].size()), static_cast<int>(ge[u].size()) + delta);
      const z3::expr& x = x_[e.slot[i]];
      for (int m = 1; m <= top; ++m) {
        const z3::expr a = level_at_least(v, m), b = level_at_least(u, m - delta);
        if (a.is_true() && b.is_true()) continue;
        if (a.is_false() && b.is_false()) continue;
        base_.push_back(z3::implies(x, a == b));
      }
    }
    // Arrival times, only where the latency can exceed the makespan floor.
    double max_cost = 0;
    for (int l : g.links) max_cost = std::max(max_cost, lt_.links[l].cost(bytes));
    double worst = 0;
    for (int t : chunk.targets) worst = std::max(worst, (g.dist[t] + g.extra[t]) * max_cost);
    if (worst <= latency_floor + 1e-9) return;
    uses_reals_ = true;
    std::vector<std::optional<z3::expr>> t(n);
    t[chunk.owner] = z_.real_val(0);
    for (int v = 0; v < n; ++v) {
      if (v == chunk.owner || in[v].size() == 0) continue;
      t[v] = z_.real_const(fmt::format("t_c{}_r{}", c, v).c_str());
      ++num_vars_;
    }
    for (size_t i = 0; i < g.links.size(); ++i) {
      const LogicalLink& link = lt_.links[g.links[i]];
      base_.push_back(z3::implies(x_[e.slot[i]], *t[link.dst] >= *t[link.src] + realVal(link.cost(bytes))));
    }
    for (int target_rank : chunk.targets) arrival_targets_.push_back(*t[target_rank]);
  }

  /// The pieces of one (owner, dest) are interchangeable: swapping two pieces' routes (for a whole orbit of
  /// representatives at once) changes no load, arrival or symmetry tie. So the representatives' pieces are ordered:
  /// the route variables of piece p are lexicographically >= those of piece p + 1 (standard lex-leader encoding with
  /// prefix-equality literals). This removes the chunkup! equivalent copies of every solution from unsat proofs.
  void breakPieceSymmetry() {
    std::map<std::pair<int, int>, std::vector<int>> pieces;  // (owner, dest) -> representative chunks by piece
    for (size_t c = 0; c < pb_.chunks.size(); ++c) {
      if (representative(c) != static_cast<int>(c)) continue;
      const Chunk& chunk = pb_.chunks[c];
      pieces[{chunk.owner, pb_.kind == CollectiveKind::kAllToAll ? chunk.dest : -1}].push_back(static_cast<int>(c));
    }
    for (auto& [key, chunks] : pieces) {
      std::sort(chunks.begin(), chunks.end(), [&](int a, int b) { return pb_.chunks[a].piece < pb_.chunks[b].piece; });
      for (size_t k = 0; k + 1 < chunks.size(); ++k) {
        const int a = chunks[k], b = chunks[k + 1];
        if (enc_[a].geometry != enc_[b].geometry) continue;
        z3::expr equal_so_far = z_.bool_val(true);
        for (size_t i = 0; i < enc_[a].slot.size(); ++i) {
          const z3::expr& xa = x_[enc_[a].slot[i]];
          const z3::expr& xb = x_[enc_[b].slot[i]];
          if (z3::eq(xa, xb) || (xa.is_true() && xb.is_true())) continue;
          base_.push_back(z3::implies(equal_so_far && xb, xa));
          if (i + 1 == enc_[a].slot.size()) break;
          z3::expr next = z_.bool_const(fmt::format("lex_c{}_{}", a, i).c_str());
          ++num_vars_;
          base_.push_back(next == (equal_so_far && (xa == xb)));
          equal_so_far = next;
        }
      }
    }
  }

  void addCardinality(const std::vector<std::pair<int, int>>& load, long long k, z3::expr_vector* out) const {
    long long fixed = 0, total = 0;
    bool unit = true;
    z3::expr_vector vars(z_);
    std::vector<int> coeffs;
    for (const auto& [slot, m] : load) {
      total += m;
      if (x_[slot].is_true()) {
        fixed += m;
        continue;
      }
      vars.push_back(x_[slot]);
      coeffs.push_back(m);
      unit = unit && m == 1;
    }
    if (total <= k) return;
    const long long rest = k - fixed;
    if (rest < 0) {
      out->push_back(z_.bool_val(false));
    } else if (unit) {
      out->push_back(z3::atmost(vars, static_cast<unsigned>(rest)));
    } else {
      out->push_back(z3::pble(vars, coeffs.data(), static_cast<int>(rest)));
    }
  }

  z3::context& z_;
  const LogicalTopology& lt_;
  const ChunkProblem& pb_;
  int slack_;
  std::vector<Geometry> geoms_;
  std::vector<ChunkEnc> enc_;
  std::vector<z3::expr> x_;
  int num_vars_ = 0;
  bool uses_reals_ = false;
  double latency_floor_ = 0;
  z3::expr_vector base_;
  std::vector<z3::expr> arrival_targets_;
  std::vector<std::vector<std::pair<int, int>>> link_load_, res_load_;
  std::vector<int> res_single_link_;
  std::set<int> suspects_;                 // representatives whose orbit has links forced off by the symmetry
  std::vector<int> zeros_;                 // slots forced off by symmetry ties
  std::vector<std::pair<int, int>> ties_;  // slots forced equal by stabilizers
  std::vector<int> identity_;
};

// ---- infeasibility diagnosis ---------------------------------------------------------------------------

/// The diagnostic model of the chunks `chunks` (one symmetry orbit: without loads, orbits do not interact): per-chunk
/// variables over every link reachable from the owner, relay rules ignored; hop counts as reals; the four
/// constraint groups as tracked literals. Returns the conflicting groups of its unsat core, shrunk by deletion,
/// or nothing when the orbit is satisfiable or undecided within `seconds`.
std::vector<std::string> diagnoseOrbit(const LogicalTopology& lt, const ChunkProblem& pb,
                                       const RoutingModel& main_model, int slack, const std::vector<int>& chunks,
                                       double seconds) {
  const int n = lt.num_ranks;
  // Without the path rule the orbit's routes are free but for relay rules and symmetry ties, so those conflicts are
  // reachability questions: the representative may use a link only when the link and all its images (under the
  // elements mapping it to the orbit's chunks, and its stabilizers) exist and, with relay rules, may carry the
  // chunks they would carry. A target unreachable without relay rules conflicts with the symmetry alone; one
  // unreachable only with them, with relay rules and symmetry. Both cores are minimal (each chunk alone can reach
  // every target: checked before any solving). Z3 takes long to refute these unrestricted routings.
  {
    const int rep = main_model.representative(chunks.front());
    const Chunk& chunk = pb.chunks[rep];
    const int dest = pb.kind == CollectiveKind::kAllToAll ? chunk.dest : -1;
    std::vector<std::vector<int>> elements(pb.chunks.size());  // per chunk of the orbit: elements rep -> chunk
    for (int c : chunks) {
      if (c != rep) elements[c].push_back(main_model.element(c));
      for (size_t g = 1; c == rep && g < pb.image.size(); ++g)
        if (pb.image[g][rep] == rep) elements[c].push_back(static_cast<int>(g));
    }
    auto unreachable_target = [&](bool relay_rules) {
      std::vector<char> ok(lt.links.size(), 0);
      for (const LogicalLink& link : lt.links) {
        bool usable = link.dst != chunk.owner && (!relay_rules || relayAllows(lt, link.id, chunk.owner));
        for (int c : chunks)
          for (int g : elements[c]) {
            if (!usable) break;
            const int img = lt.imageLink(g, link.id);
            usable = img >= 0 && lt.links[img].dst != pb.chunks[c].owner &&
                     (!relay_rules || relayAllows(lt, img, pb.chunks[c].owner));
          }
        ok[link.id] = usable;
      }
      std::vector<char> seen(n, 0);
      std::deque<int> queue{chunk.owner};
      seen[chunk.owner] = 1;
      while (!queue.empty()) {
        const int u = queue.front();
        queue.pop_front();
        if (u == dest) continue;
        for (int l : lt.out_links[u])
          if (ok[l] && !seen[lt.links[l].dst]) seen[lt.links[l].dst] = 1, queue.push_back(lt.links[l].dst);
      }
      for (int t : chunk.targets)
        if (!seen[t]) return t;
      return -1;
    };
    if (const int t = unreachable_target(false); t >= 0) return {postconditionName(t, chunk), kSymmetryGroup};
    if (const int t = unreachable_target(true); t >= 0)
      return {postconditionName(t, chunk), kRelayGroup, kSymmetryGroup};
  }
  z3::context z;
  const auto t0 = SteadyClock::now();
  z3::expr relay = z.bool_const("group_relay");
  z3::expr paths = z.bool_const("group_paths");
  z3::expr symmetry = z.bool_const("group_symmetry");
  std::vector<z3::expr> post_lits;
  std::vector<std::string> post_names;
  z3::solver s(z);
  std::vector<Geometry> wide(pb.chunks.size());
  std::vector<std::vector<z3::expr>> x(pb.chunks.size());
  for (int c : chunks) {
    const Chunk& chunk = pb.chunks[c];
    const int dest = pb.kind == CollectiveKind::kAllToAll ? chunk.dest : -1;
    wide[c] = makeGeometry(lt, chunk.owner, dest, slack, false, false);
    for (int l : wide[c].links) x[c].push_back(z.bool_const(fmt::format("x_c{}_l{}", c, l).c_str()));
  }
  for (int c : chunks) {
    const Chunk& chunk = pb.chunks[c];
    const Geometry& w = wide[c];
    const Geometry& main_geo = main_model.geometry(c);
    std::vector<z3::expr_vector> in, out;  // one Z3 vector per rank (copies would share one)
    for (int v = 0; v < n; ++v) in.emplace_back(z), out.emplace_back(z);
    std::vector<z3::expr> hops;
    for (int r = 0; r < n; ++r) hops.push_back(z.real_const(fmt::format("h_c{}_r{}", c, r).c_str()));
    s.add(hops[chunk.owner] == 0);
    for (size_t i = 0; i < w.links.size(); ++i) {
      const LogicalLink& link = lt.links[w.links[i]];
      in[link.dst].push_back(x[c][i]);
      out[link.src].push_back(x[c][i]);
      s.add(z3::implies(x[c][i], hops[link.dst] == hops[link.src] + 1));
      if (indexOf(main_geo.links, link.id) < 0)
        s.add(z3::implies(relayAllows(lt, link.id, chunk.owner) ? paths : relay, !x[c][i]));
    }
    std::vector<char> target(n, 0);
    for (int t : chunk.targets) target[t] = 1;
    for (int v = 0; v < n; ++v) {
      if (v == chunk.owner) continue;
      if (in[v].size() > 1) s.add(z3::atmost(in[v], 1));
      if (target[v]) {
        post_lits.push_back(z.bool_const(fmt::format("post_c{}_r{}", c, v).c_str()));
        post_names.push_back(postconditionName(v, chunk));
        s.add(z3::implies(post_lits.back(), in[v].size() ? z3::mk_or(in[v]) : z.bool_val(false)));
      } else if (in[v].size() > 0) {
        s.add(z3::implies(z3::mk_or(in[v]), out[v].size() ? z3::mk_or(out[v]) : z.bool_val(false)));
      }
      if (pb.kind == CollectiveKind::kAllToAll && out[v].size() > 1) s.add(z3::atmost(out[v], 1));
      if (in[v].size() > 0) {
        if (main_geo.dist[v] < kInf) {
          s.add(z3::implies(paths, hops[v] <= main_geo.dist[v] + main_geo.extra[v]));
        }
      }
    }
    for (size_t i = 0; i < w.links.size(); ++i) {
      const int u = lt.links[w.links[i]].src;
      if (u == chunk.owner) continue;
      s.add(z3::implies(x[c][i], in[u].size() ? z3::mk_or(in[u]) : z.bool_val(false)));
    }
  }
  // Symmetry ties between each chunk and its representative (stabilizers included).
  auto tie = [&](int c, int rep, int g) {
    const Geometry& wc = wide[c];
    const Geometry& wr = wide[rep];
    std::vector<char> matched(wc.links.size(), 0);
    for (size_t i = 0; i < wr.links.size(); ++i) {
      const int img = lt.imageLink(g, wr.links[i]);
      const int j = img >= 0 ? indexOf(wc.links, img) : -1;
      if (j < 0) {
        s.add(z3::implies(symmetry, !x[rep][i]));
      } else {
        matched[j] = 1;
        if (c != rep || j != static_cast<int>(i)) s.add(z3::implies(symmetry, x[c][j] == x[rep][i]));
      }
    }
    for (size_t j = 0; j < wc.links.size(); ++j)
      if (!matched[j]) s.add(z3::implies(symmetry, !x[c][j]));
  };
  for (int c : chunks) {
    const int rep = main_model.representative(c);
    if (rep != c) {
      tie(c, rep, main_model.element(c));
      continue;
    }
    for (size_t g = 1; g < pb.image.size(); ++g)
      if (pb.image[g][c] == c) tie(c, rep, static_cast<int>(g));
  }
  // Tracked literals: every postcondition, then the three groups.
  std::vector<z3::expr> lits = post_lits;
  std::vector<std::string> names = post_names;
  lits.push_back(relay);
  names.push_back(kRelayGroup);
  lits.push_back(paths);
  names.push_back(kPathsGroup);
  lits.push_back(symmetry);
  names.push_back(kSymmetryGroup);
  auto check_with = [&](const std::vector<int>& active, double limit) -> z3::check_result {
    const double left = std::min(limit, seconds - secondsSince(t0));
    if (left <= 0.01) return z3::unknown;
    z3::params p(z);
    p.set("timeout", static_cast<unsigned>(std::max(1.0, left * 1000)));
    s.set(p);
    z3::expr_vector assumptions(z);
    for (int i : active) assumptions.push_back(lits[i]);
    return s.check(assumptions);
  };
  std::vector<int> all(lits.size());
  std::iota(all.begin(), all.end(), 0);
  if (check_with(all, seconds) != z3::unsat) return {};
  std::vector<int> core;
  const z3::expr_vector uc = s.unsat_core();
  for (unsigned k = 0; k < uc.size(); ++k)
    for (size_t i = 0; i < lits.size(); ++i)
      if (z3::eq(uc[k], lits[i])) core.push_back(static_cast<int>(i));
  std::sort(core.begin(), core.end());
  // Deletion: drop each literal whose removal keeps the rest unsat (each check briefly; undecided ones stay).
  std::vector<char> kept(lits.size(), 0);
  for (int i : core) kept[i] = 1;
  for (int i : core) {
    kept[i] = 0;
    std::vector<int> trial;
    for (size_t j = 0; j < lits.size(); ++j)
      if (kept[j]) trial.push_back(static_cast<int>(j));
    if (check_with(trial, std::max(1.0, seconds / 10)) != z3::unsat) kept[i] = 1;
  }
  core.clear();
  for (size_t j = 0; j < lits.size(); ++j)
    if (kept[j]) core.push_back(static_cast<int>(j));
  std::vector<std::string> groups;
  const int max_post = 4;
  int posts = 0, post_total = 0;
  for (int i : core)
    if (i < static_cast<int>(post_lits.size())) ++post_total;
  for (int i : core) {
    if (i < static_cast<int>(post_lits.size()) && posts++ >= max_post) continue;
    groups.push_back(names[i]);
  }
  if (post_total > max_post)
    groups.insert(groups.begin() + max_post, fmt::format("{} more postconditions", post_total - max_post));
  return groups;
}

/// Why the main model is unsatisfiable: the first orbit whose diagnostic model is, orbits with links forced off by
/// the symmetry first (they are where a conflict can come from). Empty when none was found within `seconds`.
std::vector<std::string> diagnose(const LogicalTopology& lt, const ChunkProblem& pb, const RoutingModel& main_model,
                                  int slack, double seconds) {
  const auto t0 = SteadyClock::now();
  std::map<int, std::vector<int>> orbits;  // representative -> its chunks
  for (size_t c = 0; c < pb.chunks.size(); ++c)
    orbits[main_model.representative(static_cast<int>(c))].push_back(static_cast<int>(c));
  std::vector<int> order(main_model.suspects().begin(), main_model.suspects().end());
  for (const auto& [rep, chunks] : orbits)
    if (!main_model.suspects().count(rep)) order.push_back(rep);
  for (int rep : order) {
    const double left = seconds - secondsSince(t0);
    if (left <= 0.01) break;
    std::vector<std::string> groups = diagnoseOrbit(lt, pb, main_model, slack, orbits[rep], left);
    if (!groups.empty()) return groups;
  }
  return {};
}

// ---- the stage ------------------------------------------------------------------------------------------

Status checkInputs(const LogicalTopology& lt, const ChunkProblem& pb, int path_slack) {
  if (lt.num_ranks <= 0 || pb.num_ranks != lt.num_ranks)
    return invalidArgument(
        fmt::format("routing: chunk problem has {} ranks, logical topology {}", pb.num_ranks, lt.num_ranks));
  if (static_cast<int>(lt.out_links.size()) != lt.num_ranks || static_cast<int>(lt.in_links.size()) != lt.num_ranks)
    return invalidArgument("routing: logical topology without out_links/in_links for every rank");
  if (path_slack < 0) return invalidArgument(fmt::format("routing: path_slack {} is negative", path_slack));
  if (!(pb.chunk_bytes > 0))
    return invalidArgument(fmt::format("routing: chunk_bytes {} is not positive", pb.chunk_bytes));
  if (pb.kind != CollectiveKind::kAllGather && pb.kind != CollectiveKind::kAllToAll &&
      pb.kind != CollectiveKind::kBroadcast)
    return invalidArgument(
        fmt::format("routing: movement pattern {} is not allgather, alltoall or broadcast", collectiveName(pb.kind)));
  for (const LogicalLink& link : lt.links) {
    if (link.id < 0 || link.id >= static_cast<int>(lt.links.size()) || &lt.links[link.id] != &link)
      return invalidArgument(fmt::format("routing: logical link {} -> {} has id {}", link.src, link.dst, link.id));
    if (!(link.gbps > 0))
      return invalidArgument(fmt::format("routing: logical link {} ({} -> {}) has bandwidth {} GB/s", link.id, link.src,
                                         link.dst, link.gbps));
    for (int e : link.resources)
      if (e < 0 || e >= static_cast<int>(lt.resource_gbps.size()))
        return invalidArgument(
            fmt::format("routing: logical link {} names resource {} of {}", link.id, e, lt.resource_gbps.size()));
  }
  for (const Chunk& chunk : pb.chunks) {
    if (chunk.owner < 0 || chunk.owner >= lt.num_ranks)
      return invalidArgument(fmt::format("routing: chunk {} has owner {}", chunk.id, chunk.owner));
    if (pb.kind == CollectiveKind::kAllToAll && (chunk.dest < 0 || chunk.dest >= lt.num_ranks))
      return invalidArgument(fmt::format("routing: all-to-all chunk {} has destination {}", chunk.id, chunk.dest));
    for (int t : chunk.targets)
      if (t < 0 || t >= lt.num_ranks || t == chunk.owner)
        return invalidArgument(fmt::format("routing: chunk {} (owner {}) has target {}", chunk.id, chunk.owner, t));
  }
  if (pb.image.size() > lt.symmetry.size())
    return invalidArgument(fmt::format("routing: chunk images for {} symmetry elements, logical topology has {}",
                                       pb.image.size(), lt.symmetry.size()));
  for (size_t g = 0; g < lt.symmetry.size(); ++g)
    if (static_cast<int>(lt.symmetry[g].size()) != lt.num_ranks)
      return invalidArgument(fmt::format("routing: symmetry element {} permutes {} ranks, not {}", g,
                                         lt.symmetry[g].size(), lt.num_ranks));
  for (size_t g = 0; g < pb.image.size(); ++g)
    if (pb.image[g].size() != pb.chunks.size())
      return invalidArgument(fmt::format("routing: image of symmetry element {} has {} entries for {} chunks", g,
                                         pb.image[g].size(), pb.chunks.size()));
  if (!pb.orbit.empty()) {
    if (pb.orbit.size() != pb.chunks.size())
      return invalidArgument(
          fmt::format("routing: orbit has {} entries for {} chunks", pb.orbit.size(), pb.chunks.size()));
    for (size_t c = 0; c < pb.chunks.size(); ++c) {
      const auto [rep, g] = pb.orbit[c];
      if (rep < 0 || rep >= static_cast<int>(pb.chunks.size()) || g < 0 || g >= static_cast<int>(pb.image.size()) ||
          g >= static_cast<int>(lt.symmetry.size()) || pb.image[g][rep] != static_cast<int>(c) ||
          pb.orbit[rep].first != rep)
        return invalidArgument(
            fmt::format("routing: chunk {}: orbit entry ({}, {}) is not a representative and an "
                        "element mapping it to the chunk",
                        c, rep, g));
    }
  }
  return Status::ok();
}

/// Which solver minimizes. Measured on DGX-1 all-gather, chunkup 6, slack 1 (2 cores): see routeChunks.
bool useOptimizeEngine() {
  const char* env = std::getenv("BRAID_ROUTING_ENGINE");
  return env != nullptr && std::string(env) == "optimize";
}

}  // namespace

Result<Routing> routeChunks(const LogicalTopology& logical, const ChunkProblem& problem, int path_slack,
                            const StageContext& ctx, StageReport* report) {
  const auto t0 = SteadyClock::now();
  StageReport local;
  StageReport& rep = report ? *report : local;
  rep = StageReport{};
  rep.name = "routing";
  BRAID_RETURN_IF_ERROR(checkInputs(logical, problem, path_slack));
  double solver_seconds = 0;
  auto progress = [&](const std::string& detail, int variables, int constraints, double best) {
    SynthesisProgress p;
    p.stage = "routing";
    p.detail = detail;
    p.variables = variables;
    p.constraints = constraints;
    p.solver_seconds = solver_seconds;
    p.best_makespan_us = best;
    ctx.report(p);
  };
  try {
    z3::context z;
    auto model = std::make_unique<RoutingModel>(z, logical, problem, path_slack);
    if (auto unreachable = model->computeGeometry()) {
      const auto [c, target] = *unreachable;
      const Chunk& chunk = problem.chunks[c];
      const int dest = problem.kind == CollectiveKind::kAllToAll ? chunk.dest : -1;
      const Geometry wide = makeGeometry(logical, chunk.owner, dest, path_slack, false, false);
      rep.seconds = secondsSince(t0);
      rep.status = "infeasible";
      return Status(StatusCode::kInfeasible, infeasibleMessage({postconditionName(target, chunk),
                                                                wide.dist[target] < kInf ? kRelayGroup : kPathsGroup}));
    }
    const double lower = model->lowerBound();
    model->build(lower);

    // The incumbent: the greedy routes when they satisfy every structural constraint, else Z3's first model.
    std::vector<std::vector<int>> best;
    double best_t = -1;
    auto greedy = model->greedy();
    if (!greedy.empty() && model->satisfiedBy(greedy)) {
      best = std::move(greedy);
      best_t = routesMakespan(logical, problem, best);
    }
    double lo = lower;
    rep.variables = model->numVariables();
    rep.constraints = static_cast<int>(model->base().size());
    auto solver = std::make_unique<z3::solver>(z);
    for (unsigned i = 0; i < model->base().size(); ++i) solver->add(model->base()[i]);
    auto timed_check = [&](double seconds) {
      z3::params p(z);
      p.set("timeout", static_cast<unsigned>(std::clamp(seconds * 1000, 1.0, 4.0e9)));
      solver->set(p);
      const auto c0 = SteadyClock::now();
      const z3::check_result r = solver->check();
      solver_seconds += secondsSince(c0);
      return r;
    };
    auto adopt = [&](std::vector<std::vector<int>> routes) -> double {
      pruneUselessLeaves(logical, problem, &routes);
      const double t = routesMakespan(logical, problem, routes);
      if (t < 0) return -1;
      if (best_t < 0 || t < best_t) {
        best = std::move(routes);
        best_t = t;
      }
      return t;
    };
    // The linear relaxation's bound, tried once when a check times out (proofs are what it helps with). Above the
    // latency floor it also lets chunks whose longest arrival stays below it drop their arrival-time variables
    // (model and solver are rebuilt), and bounds round up to the next load value when no arrival times remain.
    bool lp_tried = false;
    auto try_lp = [&]() {
      lp_tried = true;
      const auto c0 = SteadyClock::now();
      const std::optional<double> lp = model->lpBound(lo, best_t, std::min(ctx.secondsLeft() / 5, kLpSeconds));
      solver_seconds += secondsSince(c0);
      if (lp && *lp * (1 - 1e-9) > lo) {
        lo = *lp * (1 - 1e-9);
        if (model->usesReals() && lo > model->latencyFloor()) {
          auto lifted = std::make_unique<RoutingModel>(z, logical, problem, path_slack);
          lifted->computeGeometry();
          lifted->build(lo);
          model = std::move(lifted);
          solver = std::make_unique<z3::solver>(z);
          for (unsigned i = 0; i < model->base().size(); ++i) solver->add(model->base()[i]);
          rep.variables = model->numVariables();
          rep.constraints = static_cast<int>(model->base().size());
        }
        lo = model->nextLoadValue(lo);
      }
      progress(lp ? fmt::format("linear relaxation: T > {:.3f} us", *lp) : "linear relaxation: no better bound",
               rep.variables, rep.constraints, best_t);
    };
    if (best_t < 0) {
      const z3::check_result r = timed_check(ctx.secondsLeft());
      progress(fmt::format("first routing: {}", r == z3::sat     ? "found"
                                                : r == z3::unsat ? "none exists"
                                                                 : "timed out"),
               rep.variables, rep.constraints, -1);
      if (r == z3::unsat) {
        const auto d0 = SteadyClock::now();
        const std::vector<std::string> groups =
            diagnose(logical, problem, *model, path_slack, std::max(1.0, ctx.secondsLeft()));
        solver_seconds += secondsSince(d0);
        progress(fmt::format("unsat core: {} constraint groups", groups.size()), rep.variables, rep.constraints, -1);
        rep.seconds = secondsSince(t0);
        rep.status = "infeasible";
        return Status(StatusCode::kInfeasible,
                      groups.empty() ? infeasibleMessage({"(the unsat core could not be computed in the time left)"})
                                     : infeasibleMessage(groups));
      }
      if (r != z3::sat) {
        rep.seconds = secondsSince(t0);
        rep.status = "timeout";
        return Status(StatusCode::kTimeout,
                      fmt::format("routing: Z3 found no routing within the time limit ({:.1f} s of solver time)",
                                  solver_seconds));
      }
      if (adopt(model->extract(solver->get_model())) < 0)
        return internalError("routing: Z3's model does not give every target a route from the owner");
    }

    bool proven = false;
    if (useOptimizeEngine()) {
      // z3::optimize: T real, T >= every load (sums of ite(x, count, 0) times the cost) and arrival, minimize T.
      z3::optimize opt(z);
      for (unsigned i = 0; i < model->base().size(); ++i) opt.add(model->base()[i]);
      const z3::expr t = z.real_const("T");
      const z3::expr_vector loads = model->makespanAtLeastLoads(t);
      for (unsigned i = 0; i < loads.size(); ++i) opt.add(loads[i]);
      opt.add(t >= z.real_val(fmt::format("{:.9f}", lo).c_str()));
      opt.add(t <= z.real_val(fmt::format("{:.9f}", best_t).c_str()));
      opt.minimize(t);
      z3::params p(z);
      p.set("timeout", static_cast<unsigned>(std::clamp(ctx.secondsLeft() * 1000, 1.0, 4.0e9)));
      opt.set(p);
      const auto c0 = SteadyClock::now();
      const z3::check_result r = opt.check();
      solver_seconds += secondsSince(c0);
      std::optional<z3::model> m;
      try {
        if (r != z3::unsat) m = opt.get_model();
      } catch (const z3::exception&) {
      }
      // A model of a finished optimization is complete; one left by a timeout may be partial and is then ignored.
      if (m && adopt(model->extract(*m)) < 0 && r == z3::sat)
        return internalError("routing: Z3's optimize model does not give every target a route from the owner");
      if (r == z3::sat) lo = best_t;
      proven = best_t - lo <= kGapTarget * best_t + 1e-12;
      rep.constraints = static_cast<int>(model->base().size() + loads.size());
      progress(fmt::format("optimize: {}", r == z3::sat ? "optimal" : "timed out"), rep.variables, rep.constraints,
               best_t);
    } else {
      // Bisection on the makespan bound. `floor` is the lower end of the search: the proven bound `lo`, or a bound
      // whose check timed out (then the search goes on above it with the time left, but optimality is unproven).
      // Checks start with short time limits (a check far below the optimum can take long to refute); when the
      // search has closed up to a timed-out bound, it is repeated from the proven bound with 4x the limit.
      int step = 0;
      double floor = lo;
      double per_check = std::max(0.5, ctx.secondsLeft() / 16);
      bool timed_out = false;
      while (true) {
        const double left = ctx.secondsLeft();
        if (left <= 0.05 || best_t - lo <= kGapTarget * best_t) break;
        if (best_t - floor <= kGapTarget * best_t) {
          if (!timed_out) break;
          floor = lo;
          per_check *= 4;
          timed_out = false;
          continue;
        }
        const double bound = (floor + best_t) / 2;
        const double budget = std::min(left, per_check);
        solver->push();
        const z3::expr_vector bounds = model->boundConstraints(bound);
        for (unsigned i = 0; i < bounds.size(); ++i) solver->add(bounds[i]);
        const z3::check_result r = timed_check(budget);
        ++step;
        std::string what;
        if (r == z3::sat) {
          const double t = adopt(model->extract(solver->get_model()));
          if (t < 0 || t > bound + 1e-6) {
            solver->pop();
            return internalError(
                fmt::format("routing: Z3's model at bound {:.3f} us gives makespan {:.3f} us", bound, t));
          }
          what = fmt::format("feasible, routes take {:.3f} us", t);
        } else if (r == z3::unsat) {
          // No routing within `bound`: the optimum is the next load value above it (when loads decide).
          lo = std::max(lo, bound);
          if (lo > model->latencyFloor()) lo = std::max(lo, model->nextLoadValue(bound * (1 + 1e-9)));
          floor = std::max(floor, lo);
          what = "infeasible";
        } else {
          floor = bound;
          timed_out = true;
          what = "timed out";
        }
        solver->pop();
        rep.constraints = std::max(rep.constraints, static_cast<int>(model->base().size() + bounds.size()));
        progress(fmt::format("bisection {}: T <= {:.3f} us {}", step, bound, what), rep.variables, rep.constraints,
                 best_t);
        if (r == z3::unknown && !lp_tried && ctx.secondsLeft() > 0.1) {
          try_lp();
          floor = std::max(floor, lo);
        }
      }
      proven = best_t - lo <= kGapTarget * best_t + 1e-12;
    }
    rep.status = proven ? "optimal (gap <= 1%)" : "feasible (time limit)";

    // Hyperedge tweak: at (almost) the same makespan, fewer (uc-min) or more (uc-max) distinct intra-node links.
    if ((logical.hyperedge == "uc-min" || logical.hyperedge == "uc-max") && ctx.secondsLeft() > 0.1) {
      const bool minimize = logical.hyperedge == "uc-min";
      const double bound = best_t * (1 + kHyperedgeSlack);
      z3::expr_vector used(z);
      const z3::expr_vector defs = model->usedLinkDefinitions(&used);
      solver->push();
      const z3::expr_vector bounds = model->boundConstraints(bound);
      for (unsigned i = 0; i < bounds.size(); ++i) solver->add(bounds[i]);
      for (unsigned i = 0; i < defs.size(); ++i) solver->add(defs[i]);
      // Bisection on the number of distinct links: [low, high] holds the goals not yet refuted.
      int current = distinctIntraLinks(logical, best);
      const int start = current;
      int low = minimize ? 0 : current + 1, high = minimize ? current - 1 : static_cast<int>(used.size());
      const auto h0 = SteadyClock::now();
      const double budget = std::min(ctx.secondsLeft() / 4, kHyperedgeSeconds);
      while (low <= high && used.size() > 0) {
        const double left = std::min(ctx.secondsLeft(), budget - secondsSince(h0));
        if (left <= 0.05) break;
        const int goal = minimize ? (low + high) / 2 : (low + high + 1) / 2;
        solver->push();
        solver->add(minimize ? z3::atmost(used, static_cast<unsigned>(goal))
                             : z3::atleast(used, static_cast<unsigned>(goal)));
        const z3::check_result r = timed_check(std::min(left, budget / 3));
        bool improved = false;
        if (r == z3::sat) {
          auto routes = model->extract(solver->get_model());
          pruneUselessLeaves(logical, problem, &routes);
          const double t = routesMakespan(logical, problem, routes);
          const int count = distinctIntraLinks(logical, routes);
          if (t >= 0 && t <= bound + 1e-6 && (minimize ? count < current : count > current)) {
            best = std::move(routes);
            best_t = t;
            current = count;
            improved = true;
          }
        }
        solver->pop();
        progress(fmt::format("hyperedge {}: {} {} distinct intra-node links {}", logical.hyperedge,
                             minimize ? "at most" : "at least", goal,
                             r == z3::sat     ? "possible"
                             : r == z3::unsat ? "impossible"
                                              : "timed out"),
                 rep.variables, rep.constraints, best_t);
        if (improved) {
          (minimize ? high : low) = minimize ? current - 1 : current + 1;
        } else if (r != z3::sat) {
          (minimize ? low : high) = minimize ? goal + 1 : goal - 1;  // refuted, or not found in time: look closer
        } else {
          break;  // a model that does not improve once pruned
        }
      }
      solver->pop();
      if (current != start)
        rep.status += fmt::format("; {} {} -> {} intra-node links", logical.hyperedge, start, current);
    }

    Routing routing;
    routing.parent = std::move(best);
    routing.makespan_us = best_t;
    rep.makespan_us = best_t;
    rep.seconds = secondsSince(t0);
    return routing;
  } catch (const z3::exception& e) {
    rep.seconds = secondsSince(t0);
    rep.status = "error";
    return internalError(fmt::format("routing: Z3: {}", e.msg()));
  }
}

}  // namespace braid::synth
