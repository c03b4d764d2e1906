// Route-constrained bandwidth lower bound (include/braid/bounds.h routeBound): a linear program over the bytes
// each ordered GPU pair exchanges along its one route, Topology::route, solved with GLPK's simplex.
//
// The LP, in units of the per-rank datum m (bytes_per_rank; all-to-all: the send buffer S):
//   minimise  tau
//   over      f_ab >= 0 for every ordered GPU pair (a, b) that has a route (bytes a sends b, all messages)
//   s.t.      sum over pairs whose route crosses link e of f_ab <= B_e * tau     for every link e used by a route
//             sum_a f_ab >= D_in            for every GPU b        (what b must receive)
//             sum_b f_ab >= D_out           for every GPU a        (what must leave a)
//             sum_{a not in q, b in q} f_ab >= N_in(q)    for every node q, when there are several nodes
//             sum_{a in q, b not in q} f_ab >= N_out(q)
// B_e is in GB/s, so with m bytes per unit the time is tau * m / 1e3 us (1 GB/s = 1e3 bytes/us). Every constraint
// is linear in m, so the LP is solved once for m = 1 and scaled.
//
// Why each demand is necessary (n GPUs; node q holds k of them; no algorithm compresses data, and a byte a GPU
// receives is counted once per message that carries it, relays included):
//   all-gather: b ends with the n - 1 foreign shares of m bytes, each delivered to b by some message:
//     D_in = (n-1) m. The other GPUs need a's share, so it leaves a at least once: D_out = m. Node q: each of the
//     n - k outside shares reaches q's GPUs, and its bytes first enter q in a message from an outside GPU to an
//     inside one: N_in = (n-k) m; likewise the k inside shares must first leave q: N_out = k m.
//   reduce-scatter (all-gather run backwards): a's input holds n - 1 foreign shares, each needed in another GPU's
//     sum; a partial sum of share c carries share c's elements only, so each foreign share leaves a in at least
//     m bytes: D_out = (n-1) m. b's output depends on the other GPUs' inputs: D_in = m. Node q: the inside GPUs'
//     contributions to each of the n - k outside shares leave q in at least m bytes each: N_out = (n-k) m; the
//     k inside shares need outside contributions: N_in = k m.
//   all-reduce: reduce-scatter then all-gather, the two LP times added (the model of allReduceCutBound).
//   all-to-all: every GPU sends S/n distinct bytes to each of the n - 1 others and receives as much:
//     D_in = D_out = (n-1)/n S; node q: the k (n-k) inside-outside pairs' blocks cross the node's boundary in
//     each direction: N_in = N_out = k (n-k) / n S.
// Missing pairs (no route) get no variable. When the GPUs are strongly connected by routes every demand row has a
// variable and every variable crosses a link, so the LP is feasible and bounded.
#include <glpk.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "braid/bounds.h"
#include "cost/route_lp.h"

namespace braid {
namespace cost_internal {

std::string rankName(const Topology& t, int rank) { return t.vertices[t.gpuVertex(rank)].name; }

Result<std::vector<PairRoute>> gpuRoutes(const Topology& t) {
  const int n = t.numGpus();
  const int num_vertices = static_cast<int>(t.vertices.size());
  std::vector<PairRoute> routes;
  std::vector<std::vector<int>> out(n), in(n);
  std::vector<std::optional<Route>> all = allGpuRoutes(t);  // all[a * n + b] = t.route(a, b)
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      std::optional<Route>& r = all[static_cast<size_t>(a) * n + b];
      if (a == b || !r || r->links.empty()) continue;
      for (int l : r->links) {
        if (l < 0 || l >= static_cast<int>(t.links.size())) {
          return invalidArgument("route bound: the route " + rankName(t, a) + " -> " + rankName(t, b) + " names link " +
                                 std::to_string(l) + ", outside the topology");
        }
        const Link& link = t.links[l];
        if (link.src < 0 || link.src >= num_vertices || link.dst < 0 || link.dst >= num_vertices) {
          return invalidArgument("route bound: link " + std::to_string(l) + " has an endpoint outside the topology");
        }
        if (!std::isfinite(link.bandwidth_gbps) || link.bandwidth_gbps <= 0) {
          return invalidArgument("route bound: link " + std::to_string(l) + " (" + t.vertices[link.src].name + " -> " +
                                 t.vertices[link.dst].name + ") needs a positive finite bandwidth");
        }
      }
      out[a].push_back(b);
      in[b].push_back(a);
      routes.push_back(PairRoute{a, b, std::move(r->links)});
    }
  }
  // Strong connectivity of the route graph from rank 0 (relaying through GPUs is allowed).
  auto reach = [n](const std::vector<std::vector<int>>& adj) {
    std::vector<bool> seen(n, false);
    std::vector<int> stack = {0};
    seen[0] = true;
    while (!stack.empty()) {
      const int v = stack.back();
      stack.pop_back();
      for (int w : adj[v]) {
        if (!seen[w]) {
          seen[w] = true;
          stack.push_back(w);
        }
      }
    }
    return seen;
  };
  const std::vector<bool> from_first = reach(out);
  const std::vector<bool> to_first = reach(in);
  for (int g = 1; g < n; ++g) {
    if (!from_first[g]) {
      return invalidArgument("route bound: GPU " + rankName(t, g) + " cannot be reached from " + rankName(t, 0) +
                             " over GPU-to-GPU routes (Topology::route), even relaying through GPUs");
    }
    if (!to_first[g]) {
      return invalidArgument("route bound: GPU " + rankName(t, g) + " cannot reach " + rankName(t, 0) +
                             " over GPU-to-GPU routes (Topology::route), even relaying through GPUs");
    }
  }
  return routes;
}

Result<double> solveSimplex(const Topology& t, glp_prob* lp, int method, bool presolve, int time_limit_ms,
                            const std::string& what) {
  glp_scale_prob(lp, GLP_SF_AUTO);
  glp_smcp params;
  glp_init_smcp(&params);
  params.msg_lev = GLP_MSG_OFF;
  params.meth = method;
  params.presolve = presolve ? GLP_ON : GLP_OFF;
  params.tm_lim = time_limit_ms;
  const int rc = glp_simplex(lp, &params);
  if (rc == GLP_ETMLIM) {
    return Status(StatusCode::kTimeout, what + ": GLPK's simplex reached its time limit of " +
                                            std::to_string(params.tm_lim) + " ms on topology '" + t.name + "' (" +
                                            std::to_string(glp_get_num_cols(lp)) + " columns, " +
                                            std::to_string(glp_get_num_rows(lp)) + " rows)");
  }
  if (rc != 0) {
    return internalError(what + ": GLPK's simplex failed on topology '" + t.name + "' (glp_simplex code " +
                         std::to_string(rc) + ", " + std::to_string(glp_get_num_cols(lp)) + " columns)");
  }
  const int status = glp_get_status(lp);
  if (status != GLP_OPT) {
    return internalError(what + ": GLPK found no optimum on topology '" + t.name + "' (glp_get_status " +
                         std::to_string(status) + ")");
  }
  const double objective = glp_get_obj_val(lp);
  if (!std::isfinite(objective) || objective < 0) {
    return internalError(what + ": GLPK returned the objective " + std::to_string(objective));
  }
  return objective;
}

}  // namespace cost_internal

namespace {

using cost_internal::GlpkMatrix;
using cost_internal::GlpkProblem;
using cost_internal::gpuRoutes;
using cost_internal::PairRoute;
using cost_internal::rankName;
using cost_internal::solveSimplex;

/// Demands of one LP in units of the per-rank datum (see the file comment).
struct Demands {
  double gpu_in = 0;
  double gpu_out = 0;
  // Per node, as a function of k = GPUs inside and n.
  double (*node_in)(double k, double n) = nullptr;
  double (*node_out)(double k, double n) = nullptr;
};

double outsideCount(double k, double n) { return n - k; }
double insideCount(double k, double /*n*/) { return k; }
double crossPairsOverN(double k, double n) { return k * (n - k) / n; }

Demands allGatherDemands(int n) { return Demands{static_cast<double>(n - 1), 1.0, &outsideCount, &insideCount}; }
Demands reduceScatterDemands(int n) { return Demands{1.0, static_cast<double>(n - 1), &insideCount, &outsideCount}; }
Demands allToAllDemands(int n) {
  const double d = static_cast<double>(n - 1) / n;
  return Demands{d, d, &crossPairsOverN, &crossPairsOverN};
}

/// Optimal tau of the LP (file comment) for the given routes and demands: us per byte of the datum x 1e3.
Result<double> solveRouteLp(const Topology& t, const std::vector<PairRoute>& routes, const Demands& d) {
  const int n = t.numGpus();
  const int num_pairs = static_cast<int>(routes.size());
  const int tau_col = num_pairs + 1;  // GLPK columns and rows are 1-based
  GlpkMatrix matrix;
  auto add = [&matrix](int row, int col, double value) { matrix.add(row, col, value); };

  GlpkProblem problem;
  glp_prob* lp = problem.get();
  glp_set_obj_dir(lp, GLP_MIN);
  glp_add_cols(lp, tau_col);
  for (int c = 1; c <= tau_col; ++c) glp_set_col_bnds(lp, c, GLP_LO, 0.0, 0.0);
  glp_set_obj_coef(lp, tau_col, 1.0);

  // Link rows: sum of the pairs crossing e - B_e tau <= 0; only links some route uses.
  std::vector<std::vector<int>> pairs_on_link(t.links.size());
  for (int p = 0; p < num_pairs; ++p) {
    for (int l : routes[p].links) pairs_on_link[l].push_back(p);
  }
  // A link row is implied by another's when its pairs are a subset of the other's and its bandwidth is no
  // smaller (equal sets and bandwidths: the lower index stays); the other link lies on the route of any of its
  // pairs, so only those links are candidates. Dropping implied rows leaves the LP's optimum unchanged.
  auto implied = [&](int l) {
    const std::vector<int>& mine = pairs_on_link[l];
    for (int other : routes[mine.front()].links) {
      if (other == l) continue;
      const std::vector<int>& theirs = pairs_on_link[other];
      const double b_mine = t.links[l].bandwidth_gbps, b_theirs = t.links[other].bandwidth_gbps;
      if (b_theirs > b_mine || theirs.size() < mine.size()) continue;
      if (b_theirs == b_mine && theirs.size() == mine.size() && other > l) continue;
      if (std::includes(theirs.begin(), theirs.end(), mine.begin(), mine.end())) return true;
    }
    return false;
  };
  int rows = 0;
  for (size_t l = 0; l < t.links.size(); ++l) {
    if (pairs_on_link[l].empty() || implied(static_cast<int>(l))) continue;
    const int row = glp_add_rows(lp, 1);
    ++rows;
    glp_set_row_bnds(lp, row, GLP_UP, 0.0, 0.0);
    for (int p : pairs_on_link[l]) add(row, p + 1, 1.0);
    add(row, tau_col, -t.links[l].bandwidth_gbps);
  }
  // Demand rows: a sum over pairs >= a lower bound.
  auto demandRow = [&](const std::vector<int>& pairs, double lower) {
    const int row = glp_add_rows(lp, 1);
    ++rows;
    glp_set_row_bnds(lp, row, GLP_LO, lower, 0.0);
    for (int p : pairs) add(row, p + 1, 1.0);
  };
  std::vector<std::vector<int>> into(n), out_of(n);
  for (int p = 0; p < num_pairs; ++p) {
    into[routes[p].dst].push_back(p);
    out_of[routes[p].src].push_back(p);
  }
  for (int g = 0; g < n; ++g) {
    if (d.gpu_in > 0) demandRow(into[g], d.gpu_in);
    if (d.gpu_out > 0) demandRow(out_of[g], d.gpu_out);
  }
  if (t.numNodes() > 1) {
    std::vector<int> node_of(n);
    for (int g = 0; g < n; ++g) node_of[g] = t.vertices[t.gpuVertex(g)].node;
    for (int q = 0; q < t.numNodes(); ++q) {
      const double k = static_cast<double>(std::count(node_of.begin(), node_of.end(), q));
      if (k == 0 || k == n) continue;
      std::vector<int> entering, leaving;
      for (int p = 0; p < num_pairs; ++p) {
        const bool src_in = node_of[routes[p].src] == q;
        const bool dst_in = node_of[routes[p].dst] == q;
        if (!src_in && dst_in) entering.push_back(p);
        if (src_in && !dst_in) leaving.push_back(p);
      }
      demandRow(entering, d.node_in(k, n));
      demandRow(leaving, d.node_out(k, n));
    }
  }
  if (rows == 0) return internalError("route bound: the LP has no constraints");
  matrix.load(lp);

  // Dual simplex from the all-slack basis, which is dual feasible (every cost >= 0), on the scaled problem.
  // Measured on the all-gather LP of 16 DGX H100 nodes (16256 pairs, 1024 rows; loaded 2-core machine, CPU time):
  // about 1.0 s (1680 iterations), where the primal simplex after GLPK's presolver takes about 1.6 s (2232).
  return solveSimplex(t, lp, GLP_DUALP, /*presolve=*/false, INT_MAX, "route bound");
}

}  // namespace

Result<double> routeBound(const Topology& t, CollectiveKind collective, double bytes_per_rank) {
  if (!std::isfinite(bytes_per_rank) || bytes_per_rank < 0) {
    return invalidArgument("bytes_per_rank must be finite and >= 0, got " + std::to_string(bytes_per_rank));
  }
  if (collective != CollectiveKind::kAllGather && collective != CollectiveKind::kReduceScatter &&
      collective != CollectiveKind::kAllReduce && collective != CollectiveKind::kAllToAll) {
    return unsupported(std::string("route bound: no bound for ") + collectiveName(collective) +
                       " (allgather, reducescatter, allreduce and alltoall have one)");
  }
  const int n = t.numGpus();
  if (n < 2) return 0.0;
  if (n > kRouteBoundMaxGpus) {
    return unsupported("route bound: topology '" + t.name + "' has " + std::to_string(n) + " GPUs, more than the " +
                       std::to_string(kRouteBoundMaxGpus) + " the pair LP is solved for");
  }
  BRAID_ASSIGN_OR_RETURN(const std::vector<PairRoute> routes, gpuRoutes(t));
  double tau = 0;
  switch (collective) {
    case CollectiveKind::kAllGather: {
      BRAID_ASSIGN_OR_RETURN(tau, solveRouteLp(t, routes, allGatherDemands(n)));
      break;
    }
    case CollectiveKind::kReduceScatter: {
      BRAID_ASSIGN_OR_RETURN(tau, solveRouteLp(t, routes, reduceScatterDemands(n)));
      break;
    }
    case CollectiveKind::kAllReduce: {
      BRAID_ASSIGN_OR_RETURN(const double reduce_scatter, solveRouteLp(t, routes, reduceScatterDemands(n)));
      BRAID_ASSIGN_OR_RETURN(const double all_gather, solveRouteLp(t, routes, allGatherDemands(n)));
      tau = reduce_scatter + all_gather;
      break;
    }
    default: {
      BRAID_ASSIGN_OR_RETURN(tau, solveRouteLp(t, routes, allToAllDemands(n)));
      break;
    }
  }
  // f <= B tau with f in units of bytes_per_rank and B in GB/s = 1e3 bytes/us.
  return tau * bytes_per_rank / 1e3;
}

}  // namespace braid
