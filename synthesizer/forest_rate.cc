// The optimal rate of a tree-based all-gather in the route model (a linear program on GLPK) and its integer tree
// units (exact max-flow checks, forest_pack.h). Method: ForestColl (Zhao et al., arXiv 2402.06787) steps 1-2, with
// the switch removal replaced by the route model's own split of every physical link among the GPU pairs whose
// routes cross it (forest.h).
#include <fmt/format.h>
#include <glpk.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/log.h"
#include "synthesizer/forest.h"

namespace braid::synth {
namespace {

using SteadyClock = std::chrono::steady_clock;

/// Tree units of every logical link at per-tree rate `unit_gbps` (floor, with a relative slack of 1e-9 so that
/// a link the LP filled exactly keeps its last unit).
std::vector<int64_t> unitsAt(const LogicalTopology& logical, const ForestRate& rate, double unit_gbps) {
  const int n = logical.num_ranks;
  std::vector<int64_t> capacity(static_cast<size_t>(n) * n, 0);
  for (const LogicalLink& l : logical.links) {
    const double units = rate.link_gbps[l.id] / unit_gbps;
    capacity[static_cast<size_t>(l.src) * n + l.dst] += static_cast<int64_t>(std::floor(units * (1 + 1e-9) + 1e-9));
  }
  return capacity;
}

/// The node shifts that are automorphisms of the logical topology with its physical links: shift s maps every vertex
/// of node i to the vertex of the same kind and local index in node (i + s) mod nodes (vertices outside nodes, such
/// as network switches, stay), and is kept when it maps every physical link onto a link of the same kind and
/// bandwidth and every logical link's route onto the route of its image. Returns link permutations (perm[l] = image
/// of logical link l), the identity first; only the identity when the nodes are not all alike.
std::vector<std::vector<int>> nodeShiftGroup(const LogicalTopology& logical) {
  const int num_links = static_cast<int>(logical.links.size());
  std::vector<int> identity(num_links);
  for (int l = 0; l < num_links; ++l) identity[l] = l;
  std::vector<std::vector<int>> group = {identity};
  const Topology* t = logical.topology;
  if (t == nullptr || t->numNodes() < 2) return group;
  const int nodes = t->numNodes();
  std::map<std::tuple<int, int, int>, int> by_place;  // (node, kind, local) -> vertex
  for (const Vertex& v : t->vertices) by_place[{v.node, static_cast<int>(v.kind), v.local}] = v.id;
  std::map<std::pair<int, int>, std::vector<int>> links_between;
  for (size_t e = 0; e < t->links.size(); ++e) links_between[{t->links[e].src, t->links[e].dst}].push_back(e);
  for (int shift = 1; shift < nodes; ++shift) {
    std::vector<int> vmap(t->vertices.size(), -1);
    bool ok = true;
    for (const Vertex& v : t->vertices) {
      if (v.node < 0) {
        vmap[v.id] = v.id;
        continue;
      }
      auto it = by_place.find({(v.node + shift) % nodes, static_cast<int>(v.kind), v.local});
      if (it == by_place.end()) {
        ok = false;
        break;
      }
      vmap[v.id] = it->second;
    }
    std::vector<int> emap(t->links.size(), -1);
    for (const auto& [ends, list] : links_between) {
      if (!ok) break;
      auto image = links_between.find({vmap[ends.first], vmap[ends.second]});
      if (image == links_between.end() || image->second.size() != list.size()) {
        ok = false;
        break;
      }
      for (size_t i = 0; i < list.size(); ++i) {
        const Link& a = t->links[list[i]];
        const Link& b = t->links[image->second[i]];
        if (a.kind != b.kind || std::fabs(a.bandwidth_gbps - b.bandwidth_gbps) > 1e-9 * a.bandwidth_gbps) ok = false;
        emap[list[i]] = image->second[i];
      }
    }
    std::vector<int> perm(num_links, -1);
    for (int l = 0; l < num_links && ok; ++l) {
      const LogicalLink& link = logical.links[l];
      const int a = t->vertices[vmap[t->gpuVertex(link.src)]].rank, b = t->vertices[vmap[t->gpuVertex(link.dst)]].rank;
      const int image = logical.find(a, b);
      if (image < 0) {
        ok = false;
        break;
      }
      std::vector<int> mapped;
      for (int e : link.resources) mapped.push_back(emap[e]);
      std::vector<int> theirs = logical.links[image].resources;
      std::sort(mapped.begin(), mapped.end());
      std::sort(theirs.begin(), theirs.end());
      if (mapped != theirs) ok = false;
      perm[l] = image;
    }
    if (!ok) return {identity};
    group.push_back(std::move(perm));
  }
  return group;
}

}  // namespace

Result<ForestRate> forestRate(const LogicalTopology& logical, double seconds_limit,
                              const std::vector<double>* link_caps) {
  const int n = logical.num_ranks;
  const int num_links = static_cast<int>(logical.links.size());
  if (n < 2) return Status(StatusCode::kInvalidArgument, "tree packing needs at least 2 ranks");
  for (int r = 0; r < n; ++r) {
    if (logical.in_links[r].empty() || logical.out_links[r].empty()) {
      return Status(StatusCode::kInvalidArgument, fmt::format("rank {} has no route {} any other rank", r,
                                                              logical.in_links[r].empty() ? "from" : "to"));
    }
  }
  const auto start = SteadyClock::now();
  // Symmetry: averaging an optimal solution over a group of automorphisms gives an optimal solution whose c is
  // constant on link orbits, and with such a c the flow condition holds for a destination iff it holds for its
  // images. So c gets one column per link orbit and flows are written for one destination per rank orbit.
  std::vector<std::vector<int>> group = nodeShiftGroup(logical);
  if (link_caps != nullptr) {
    if (link_caps->size() != static_cast<size_t>(num_links)) {
      return Status(StatusCode::kInvalidArgument, "forestRate: one capacity per logical link is needed");
    }
    // Tying c on orbits is only valid for capacities the group preserves.
    for (const std::vector<int>& g : group) {
      for (int l = 0; l < num_links; ++l) {
        if (std::fabs((*link_caps)[l] - (*link_caps)[g[l]]) > 1e-9 * std::max(1.0, (*link_caps)[l])) {
          group.resize(1);
          break;
        }
      }
    }
  }
  std::vector<int> orbit(num_links, -1);  // link -> representative (smallest id in its orbit)
  for (int l = 0; l < num_links; ++l) {
    orbit[l] = l;
    for (const std::vector<int>& g : group) orbit[l] = std::min(orbit[l], g[l]);
  }
  std::vector<int> destinations;
  {
    std::vector<char> covered(n, 0);
    for (int v = 0; v < n; ++v) {
      if (covered[v]) continue;
      destinations.push_back(v);
      for (const std::vector<int>& g : group) {
        // The image of rank v: the destination of the image of any link entering v.
        covered[logical.links[g[logical.in_links[v].front()]].dst] = 1;
      }
    }
  }
  if (link_caps != nullptr) {
    int flows = 0;
    BRAID_ASSIGN_OR_RETURN(const double rate, cappedTreeRate(logical, *link_caps, destinations, &flows));
    ForestRate out;
    out.rate_gbps = rate;
    out.link_gbps.resize(num_links);
    for (int l = 0; l < num_links; ++l) out.link_gbps[l] = std::max(0.0, (*link_caps)[l]);
    out.seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
    BRAID_LOG(kTrace, "capped tree rate: {} max-flows ({} symmetries, {} destinations), R {:.6g} GB/s, {:.3f} s", flows,
              group.size(), destinations.size(), rate, out.seconds);
    return out;
  }
  // Columns: R, then c per link orbit, then f^v_l for every representative destination v and link l not leaving v.
  const int r_col = 1;
  std::vector<int> c_of(num_links, 0);
  int columns = 1;
  for (int l = 0; l < num_links; ++l) {
    if (orbit[l] == l) c_of[l] = ++columns;
  }
  auto c_col = [&](int l) { return c_of[orbit[l]]; };
  std::vector<std::vector<int>> f_col(n, std::vector<int>(num_links, 0));
  for (int v : destinations) {
    for (const LogicalLink& l : logical.links) {
      if (l.src != v) f_col[v][l.id] = ++columns;
    }
  }
  std::vector<int> ia{0}, ja{0};
  std::vector<double> ar{0};
  struct RowBound {
    int type;
    double lo, hi;
  };
  std::vector<RowBound> rows;
  auto coef = [&](int col, double value) {
    ia.push_back(static_cast<int>(rows.size()) + 1);
    ja.push_back(col);
    ar.push_back(value);
  };
  // Flow conservation for destination v: every other rank u sends out R more than it receives.
  for (int v : destinations) {
    for (int u = 0; u < n; ++u) {
      if (u == v) continue;
      for (int l : logical.out_links[u]) coef(f_col[v][l], 1);
      for (int l : logical.in_links[u]) {
        if (f_col[v][l]) coef(f_col[v][l], -1);
      }
      coef(r_col, -1);
      rows.push_back({GLP_FX, 0, 0});
    }
    // f^v_l <= c_l.
    for (const LogicalLink& l : logical.links) {
      if (!f_col[v][l.id]) continue;
      coef(f_col[v][l.id], 1);
      coef(c_col(l.id), -1);
      rows.push_back({GLP_UP, 0, 0});
    }
  }
  // Physical links: the logical links crossing one share its bandwidth.
  std::vector<std::vector<int>> crossing(logical.resource_gbps.size());
  for (const LogicalLink& l : logical.links) {
    for (int e : l.resources) crossing[e].push_back(l.id);
  }
  for (size_t e = 0; e < crossing.size() && link_caps == nullptr; ++e) {
    if (crossing[e].empty()) continue;
    for (int l : crossing[e]) coef(c_col(l), 1);
    rows.push_back({GLP_UP, 0, logical.resource_gbps[e]});
  }

  std::unique_ptr<glp_prob, void (*)(glp_prob*)> lp(glp_create_prob(), glp_delete_prob);
  glp_set_obj_dir(lp.get(), GLP_MAX);
  glp_add_cols(lp.get(), columns);
  for (int j = 1; j <= columns; ++j) glp_set_col_bnds(lp.get(), j, GLP_LO, 0.0, 0.0);
  if (link_caps != nullptr) {
    for (int l = 0; l < num_links; ++l) {
      if (orbit[l] != l) continue;
      const double cap = std::max(0.0, (*link_caps)[l]);
      glp_set_col_bnds(lp.get(), c_of[l], cap > 0 ? GLP_DB : GLP_FX, 0.0, cap);
    }
  }
  glp_set_obj_coef(lp.get(), r_col, 1.0);
  glp_add_rows(lp.get(), static_cast<int>(rows.size()));
  for (size_t i = 0; i < rows.size(); ++i) {
    glp_set_row_bnds(lp.get(), static_cast<int>(i) + 1, rows[i].type, rows[i].lo, rows[i].hi);
  }
  glp_load_matrix(lp.get(), static_cast<int>(ia.size()) - 1, ia.data(), ja.data(), ar.data());
  const int terminal = glp_term_out(GLP_OFF);
  glp_smcp params;
  glp_init_smcp(&params);
  params.msg_lev = GLP_MSG_OFF;
  params.presolve = GLP_ON;
  params.tm_lim = static_cast<int>(std::clamp(seconds_limit * 1000, 1.0, 2.0e9));
  const int rc = glp_simplex(lp.get(), &params);
  glp_term_out(terminal);
  const int status = glp_get_status(lp.get());
  ForestRate out;
  out.lp_columns = columns;
  out.lp_rows = static_cast<int>(rows.size());
  out.seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
  BRAID_LOG(
      kTrace,
      "tree-rate LP: {} columns, {} rows ({} symmetries, {} destinations), GLPK code {} status {}, R {:.6g} GB/s, "
      "{:.3f} s",
      columns, rows.size(), group.size(), destinations.size(), rc, status, glp_get_obj_val(lp.get()), out.seconds);
  if (rc == GLP_ETMLIM) {
    return Status(StatusCode::kTimeout, fmt::format("the tree-rate LP ({} columns, {} rows) ran past {:g} s", columns,
                                                    rows.size(), seconds_limit));
  }
  if (rc != 0 || status != GLP_OPT) {
    return internalError(fmt::format("GLPK failed on the tree-rate LP (code {}, status {})", rc, status));
  }
  out.rate_gbps = glp_get_col_prim(lp.get(), r_col);
  out.link_gbps.resize(num_links);
  for (int l = 0; l < num_links; ++l) {
    out.link_gbps[l] =
        link_caps != nullptr ? std::max(0.0, (*link_caps)[l]) : std::max(0.0, glp_get_col_prim(lp.get(), c_col(l)));
  }
  if (!(out.rate_gbps > 0)) {
    if (link_caps != nullptr) {
      return Status(StatusCode::kInfeasible, "the logical links kept do not connect every rank to every other");
    }
    return internalError("the tree-rate LP found no positive rate");
  }
  return out;
}

std::vector<double> equalShareCaps(const LogicalTopology& logical, const std::vector<char>& keep) {
  std::vector<int> count(logical.resource_gbps.size(), 0);
  for (const LogicalLink& l : logical.links) {
    if (!keep[l.id]) continue;
    for (int e : l.resources) ++count[e];
  }
  std::vector<double> caps(logical.links.size(), 0);
  for (const LogicalLink& l : logical.links) {
    if (!keep[l.id]) continue;
    double cap = std::numeric_limits<double>::infinity();
    for (int e : l.resources) cap = std::min(cap, logical.resource_gbps[e] / count[e]);
    caps[l.id] = std::isfinite(cap) ? cap : 0;
  }
  return caps;
}

Result<ForestRate> forestEqualShareRate(const LogicalTopology& logical, const ForestRate* split, double seconds_limit) {
  const auto start = SteadyClock::now();
  const int num_links = static_cast<int>(logical.links.size());
  struct Candidate {
    std::string name;
    std::vector<char> keep;
  };
  std::vector<Candidate> candidates;
  candidates.push_back({"every pair", std::vector<char>(num_links, 1)});
  if (split != nullptr) {
    std::vector<char> keep(num_links, 0);
    for (int l = 0; l < num_links; ++l) keep[l] = split->link_gbps[l] > 1e-9 * split->rate_gbps;
    candidates.push_back({"the pairs the split uses", std::move(keep)});
  }
  bool multi_node = false;
  for (const LogicalLink& l : logical.links) multi_node |= l.inter_node;
  if (multi_node) {
    std::vector<char> keep(num_links, 0);
    for (const LogicalLink& l : logical.links) {
      keep[l.id] = !l.inter_node || logical.local_of[l.src] == logical.local_of[l.dst];
    }
    candidates.push_back({"pairs inside nodes and same-index pairs across nodes", std::move(keep)});
  }
  std::optional<ForestRate> best;
  for (const Candidate& c : candidates) {
    const double left = seconds_limit - std::chrono::duration<double>(SteadyClock::now() - start).count();
    if (left <= 0) {
      if (best) break;
      return Status(StatusCode::kTimeout, fmt::format("the equal-share tree rates ran past {:g} s", seconds_limit));
    }
    const std::vector<double> caps = equalShareCaps(logical, c.keep);
    Result<ForestRate> rate = forestRate(logical, left, &caps);
    if (!rate.isOk()) {
      if (rate.status().code() == StatusCode::kInfeasible) continue;
      return rate.status();
    }
    BRAID_LOG(kTrace, "equal-share tree rate over {}: {:.6g} GB/s", c.name, rate->rate_gbps);
    if (!best || rate->rate_gbps > best->rate_gbps * (1 + 1e-9)) {
      best = std::move(*rate);
      best->sharing = c.name;
    }
  }
  if (!best) return internalError("no equal-share tree rate (not even over every pair) was found");
  best->seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
  return *best;
}

Result<ForestUnits> forestUnits(const LogicalTopology& logical, const ForestRate& rate, int max_k, double tolerance,
                                int min_k) {
  if (min_k < 1 || max_k < min_k) {
    return Status(StatusCode::kInvalidArgument, "forestUnits: need 1 <= min_k <= max_k");
  }
  if (!(rate.rate_gbps > 0)) return Status(StatusCode::kInvalidArgument, "forestUnits: the rate must be positive");
  const int n = logical.num_ranks;
  std::optional<ForestUnits> best;
  for (int k = min_k; k <= max_k; ++k) {
    auto feasibleAt = [&](double r) { return treeUnitsFeasible(n, unitsAt(logical, rate, r / k), k); };
    double lo = 0, hi = rate.rate_gbps;
    if (feasibleAt(hi)) {
      lo = hi;
    } else {
      // Feasibility only gets easier as the rate drops (every link's unit count grows); 0 is the limit.
      for (int i = 0; i < 40; ++i) {
        const double mid = 0.5 * (lo + hi);
        (feasibleAt(mid) ? lo : hi) = mid;
      }
    }
    if (lo > 0 && (!best || lo > best->rate_gbps * (1 + 1e-12))) {
      best = ForestUnits{k, lo, unitsAt(logical, rate, lo / k)};
    }
    if (best && best->rate_gbps >= rate.rate_gbps * (1 - tolerance)) break;
  }
  if (!best)
    return internalError(
        "no tree units are feasible at any positive rate (the logical topology is not "
        "strongly connected)");
  return *best;
}

Result<LogicalTopology> buildCompleteLogicalTopology(const Topology& topology, bool transposed) {
  LogicalTopology lt;
  lt.topology = &topology;
  lt.transposed = transposed;
  const int n = topology.numGpus();
  lt.num_ranks = n;
  lt.node_of.assign(n, -1);
  lt.local_of.assign(n, -1);
  std::vector<int> count(std::max(1, topology.numNodes()), 0);
  for (int r = 0; r < n; ++r) {
    const Vertex& v = topology.vertices[topology.gpuVertex(r)];
    lt.node_of[r] = v.node;
    lt.local_of[r] = v.node >= 0 ? count[v.node]++ : r;
  }
  lt.resource_gbps.resize(topology.links.size());
  for (size_t e = 0; e < topology.links.size(); ++e) lt.resource_gbps[e] = topology.links[e].bandwidth_gbps;
  lt.out_links.assign(n, {});
  lt.in_links.assign(n, {});
  const std::vector<std::optional<Route>> routes = allGpuRoutes(topology);
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      const int from = transposed ? b : a, to = transposed ? a : b;
      const std::optional<Route>& route = routes[static_cast<size_t>(from) * n + to];
      if (!route) continue;
      lt.addLink(a, b, *route, lt.node_of[a] != lt.node_of[b]);
    }
  }
  for (int r = 0; r < n; ++r) {
    if (n > 1 && (lt.in_links[r].empty() || lt.out_links[r].empty())) {
      return Status(StatusCode::kInvalidArgument,
                    fmt::format("topology {}: GPU rank {} has no route {} any other GPU", topology.name, r,
                                lt.in_links[r].empty() ? "from" : "to"));
    }
  }
  lt.relay_allowed.assign(lt.links.size(), {});
  for (const LogicalLink& l : lt.links) {
    if (l.inter_node) lt.relay_allowed[l.id].assign(n, 1);
  }
  std::vector<int> identity(n);
  for (int r = 0; r < n; ++r) identity[r] = r;
  lt.symmetry = {identity};
  return lt;
}

}  // namespace braid::synth
