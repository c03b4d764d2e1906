// Stage 1's Z3 model (routing_model.h): candidate geometries, the route variables and structural constraints,
// load and arrival constraints per makespan bound, lower bounds (hop arrivals, cuts, the linear relaxation) and the
// greedy incumbent. The encoding is described at the top of routing.cc.
#include "synthesizer/routing_model.h"

#include <glpk.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <queue>
#include <unordered_map>

#include "common/log.h"

namespace braid::synth::routing {
namespace {

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

}  // namespace

std::string postconditionName(int rank, const Chunk& chunk) {
  return fmt::format("postcondition: rank {} receives chunk (owner {}, piece {})", rank, chunk.owner, chunk.piece);
}

std::string infeasibleMessage(const std::vector<std::string>& groups) {
  std::string out = "the sketch admits no routing: conflicting constraints: ";
  for (size_t i = 0; i < groups.size(); ++i) out += (i ? ", " : "") + groups[i];
  return out;
}

bool relayAllows(const LogicalTopology& lt, int link, int owner) {
  if (link >= static_cast<int>(lt.relay_allowed.size())) return true;
  const std::vector<char>& allowed = lt.relay_allowed[link];
  if (allowed.empty()) return true;
  return owner >= 0 && owner < static_cast<int>(allowed.size()) && allowed[owner] != 0;
}

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

std::optional<std::pair<int, int>> RoutingModel::computeGeometry() {
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

double RoutingModel::lowerBound() const {
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
    lb = std::max({lb, cutBound(lt_, bytes, need[r], lt_.in_links[r]), cutBound(lt_, bytes, own[r], lt_.out_links[r])});
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

void RoutingModel::build(double latency_floor) {
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

z3::expr_vector RoutingModel::boundConstraints(double bound) const {
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

z3::expr_vector RoutingModel::makespanAtLeastLoads(const z3::expr& t) const {
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

double RoutingModel::nextLoadValue(double bound) const {
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

std::optional<double> RoutingModel::lpBound(double seconds, bool* clock_cut) const {
  if (clock_cut != nullptr) *clock_cut = !(seconds > 0);
  if (!(seconds > 0)) return std::nullopt;
  // A row of the relaxation: sum of coefficient x column, plus a constant (the slots fixed to 1).
  struct Row {
    std::map<int, double> coef;  // GLPK column (1-based) -> coefficient
    double constant = 0;
  };
  std::vector<int> column(x_.size(), 0);  // slot -> GLPK column, 0 = none yet
  std::vector<char> zero(x_.size(), 0);
  for (int s : zeros_) zero[s] = 1;
  int num_columns = 0;
  auto add = [&](Row& row, int s, double k) {
    if (x_[s].is_true()) {
      row.constant += k;
    } else if (!zero[s]) {
      if (!column[s]) column[s] = ++num_columns;
      row.coef[column[s]] += k;
    }
  };
  std::vector<std::pair<Row, std::pair<int, double>>> rows;  // row, (GLPK bound type, bound)
  auto emit = [&](Row row, int type, double bound) {
    for (auto it = row.coef.begin(); it != row.coef.end();) it = it->second == 0 ? row.coef.erase(it) : std::next(it);
    const double rhs = bound - row.constant;
    if (row.coef.empty()) return type == GLP_FX ? std::abs(rhs) <= 1e-9 : rhs >= -1e-9;  // 0 (=|<=) rhs
    row.constant = 0;
    rows.push_back({std::move(row), {type, rhs}});
    return true;
  };
  bool consistent = true;
  for (const auto& [a, b] : ties_) {
    Row row;
    add(row, a, 1);
    add(row, b, -1);
    consistent &= emit(std::move(row), GLP_FX, 0);
  }
  const int n = lt_.num_ranks;
  for (size_t c = 0; c < pb_.chunks.size(); ++c) {
    if (!enc_[c].constrained) continue;
    const Chunk& chunk = pb_.chunks[c];
    const Geometry& g = geometry(c);
    std::vector<std::vector<int>> in(n), out(n);  // slots of the links entering / leaving each rank
    for (size_t i = 0; i < g.links.size(); ++i) {
      const LogicalLink& link = lt_.links[g.links[i]];
      in[link.dst].push_back(enc_[c].slot[i]);
      out[link.src].push_back(enc_[c].slot[i]);
    }
    std::vector<char> target(n, 0);
    for (int t : chunk.targets) target[t] = 1;
    for (int v = 0; v < n; ++v) {
      if (v == chunk.owner) continue;
      if (!target[v] && in[v].size() <= 1) continue;
      Row row;
      for (int s : in[v]) add(row, s, 1);
      consistent &= emit(std::move(row), target[v] ? GLP_FX : GLP_UP, 1);  // receive once (exactly at targets)
    }
    for (size_t i = 0; i < g.links.size(); ++i) {
      const int u = lt_.links[g.links[i]].src;
      if (u == chunk.owner) continue;
      Row row;  // send at most what was received
      add(row, enc_[c].slot[i], 1);
      for (int s : in[u]) add(row, s, -1);
      consistent &= emit(std::move(row), GLP_UP, 0);
    }
    if (pb_.kind == CollectiveKind::kAllToAll) {
      for (int v = 0; v < n; ++v) {
        if (v == chunk.dest || out[v].empty()) continue;
        Row row;  // a path forwards at most what it received (the owner sends one unit)
        for (int s : out[v]) add(row, s, 1);
        if (v != chunk.owner)
          for (int s : in[v]) add(row, s, -1);
        consistent &= emit(std::move(row), GLP_UP, v == chunk.owner ? 1 : 0);
      }
    }
  }
  if (!consistent) return std::nullopt;  // a fixed slot contradicts a row: the main model decides that, not the LP
  const int t_col = ++num_columns;
  const double bytes = pb_.chunk_bytes;
  auto load = [&](const std::vector<std::pair<int, int>>& slots, double per_chunk) {
    if (slots.empty()) return;
    Row row;  // per_chunk x chunks <= T
    for (const auto& [s, m] : slots) add(row, s, per_chunk * m);
    row.coef[t_col] -= 1;
    emit(std::move(row), GLP_UP, 0);
  };
  for (size_t l = 0; l < lt_.links.size(); ++l) load(link_load_[l], lt_.links[l].cost(bytes));
  for (size_t e = 0; e < res_load_.size(); ++e) {
    if (lt_.resource_gbps[e] <= 0) continue;
    const double per_chunk = bytes / (lt_.resource_gbps[e] * 1e3);
    if (res_single_link_[e] >= 0 && per_chunk <= lt_.links[res_single_link_[e]].cost(bytes)) continue;
    load(res_load_[e], per_chunk);
  }
  if (rows.empty()) return std::nullopt;

  std::unique_ptr<glp_prob, void (*)(glp_prob*)> lp(glp_create_prob(), glp_delete_prob);
  glp_set_obj_dir(lp.get(), GLP_MIN);
  glp_add_cols(lp.get(), num_columns);
  for (int j = 1; j < t_col; ++j) glp_set_col_bnds(lp.get(), j, GLP_DB, 0.0, 1.0);
  glp_set_col_bnds(lp.get(), t_col, GLP_LO, 0.0, 0.0);
  glp_set_obj_coef(lp.get(), t_col, 1.0);
  glp_add_rows(lp.get(), static_cast<int>(rows.size()));
  std::vector<int> ia{0}, ja{0};
  std::vector<double> ar{0};
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& [row, bound] = rows[i];
    const int r = static_cast<int>(i) + 1;
    glp_set_row_bnds(lp.get(), r, bound.first, bound.second, bound.second);
    for (const auto& [j, k] : row.coef) {
      ia.push_back(r);
      ja.push_back(j);
      ar.push_back(k);
    }
  }
  glp_load_matrix(lp.get(), static_cast<int>(ia.size()) - 1, ia.data(), ja.data(), ar.data());
  // Dual simplex from the all-slack basis, which is dual feasible (the only cost, T's, is positive), on the scaled
  // problem, bounded by GLPK's own time limit.
  const int terminal = glp_term_out(GLP_OFF);  // glp_scale_prob prints regardless of msg_lev
  glp_scale_prob(lp.get(), GLP_SF_AUTO);
  glp_smcp params;
  glp_init_smcp(&params);
  params.msg_lev = GLP_MSG_OFF;
  params.meth = GLP_DUALP;
  params.presolve = GLP_OFF;
  params.tm_lim = static_cast<int>(std::clamp(seconds * 1000, 1.0, 2.0e9));
  const auto start = SteadyClock::now();
  const int rc = glp_simplex(lp.get(), &params);
  glp_term_out(terminal);
  const int status = glp_get_status(lp.get());
  BRAID_LOG(kTrace, "routing LP bound: {} columns, {} rows, GLPK code {} status {}, T {:.6g} us, {:.3f} s", num_columns,
            rows.size(), rc, status, glp_get_obj_val(lp.get()), secondsSince(start));
  if (clock_cut != nullptr) *clock_cut = rc == GLP_ETMLIM;
  if (rc != 0 || status != GLP_OPT) return std::nullopt;
  const double t = glp_get_obj_val(lp.get());
  if (!std::isfinite(t) || t <= 0) return std::nullopt;
  return t * (1 - 1e-7);  // below the optimum by more than GLPK's relative tolerances
}

std::vector<std::vector<int>> RoutingModel::extract(const z3::model& model) const {
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

bool RoutingModel::satisfiedBy(const std::vector<std::vector<int>>& parent) const {
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

std::vector<std::vector<int>> RoutingModel::greedy() const {
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

z3::expr_vector RoutingModel::usedLinkDefinitions(z3::expr_vector* used) const {
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

int RoutingModel::newVar(const std::string& name) {
  x_.push_back(z_.bool_const(name.c_str()));
  ++num_vars_;
  return static_cast<int>(x_.size()) - 1;
}

int RoutingModel::newConstant(bool value) {
  x_.push_back(z_.bool_val(value));
  return static_cast<int>(x_.size()) - 1;
}

void RoutingModel::mapImage(int c, int rep, int g) {
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

void RoutingModel::constrainChunk(int c, double latency_floor) {
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

void RoutingModel::breakPieceSymmetry() {
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

void RoutingModel::addCardinality(const std::vector<std::pair<int, int>>& load, long long k,
                                  z3::expr_vector* out) const {
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

}  // namespace braid::synth::routing
