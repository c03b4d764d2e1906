// All-to-all max-concurrent flow over Braid's routes (include/braid/bounds.h allToAllFlow), solved with GLPK's
// simplex, and its decomposition into relay paths.
//
// The LP, source-aggregated (one commodity per source rank s, whose demands are its n - 1 blocks; a block is the
// 1/n of a send buffer one rank sends another), in units of one block:
//   minimise  tau
//   over      f^s_p >= 0 for every source s and every route pair p = (a, b) with b != s (blocks of s that a sends b)
//   s.t.      sum_{p into v} f^s_p - sum_{p out of v} f^s_p = 1      for every source s and rank v != s
//             sum_s sum_{p crossing e} f^s_p <= B_e tau               for every physical link e a route crosses
// A rank may forward blocks it does not own (a GPU relay); no switch or NIC copies. Every rank v != s ends with
// exactly one block of s more than it forwards, so the flow of commodity s decomposes into paths from s that
// deliver one block to each other rank (plus cycles, which only load links and are cancelled). tau in blocks per
// GB/s: a block of S/n bytes takes tau x S / n / 1e3 us.
//
// Decomposition of commodity s (Ford and Fulkerson's flow decomposition): walk from s along pairs that carry
// flow; stop at the first rank whose delivered share is still below one block; take the smallest of the pairs'
// flows and the missing share, subtract it along the walk and record the path. A walk that returns to a rank
// closes a cycle: the cycle's smallest flow is removed from it. Each step empties a pair or a demand, so the walk
// ends after at most (pairs + ranks) steps per source.
#include <glpk.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "braid/bounds.h"
#include "cost/route_lp.h"

namespace braid {
namespace {

using cost_internal::GlpkMatrix;
using cost_internal::GlpkProblem;
using cost_internal::PairRoute;

/// Flow values below this (blocks) are numerical noise of the simplex.
constexpr double kFlowEps = 1e-9;

struct FlowLp {
  double tau = 0;
  int columns = 0;
  int rows = 0;
  std::vector<double> flow;  // flow[s * pairs + p]; pairs whose destination is s hold 0
};

Result<FlowLp> solveFlowLp(const Topology& t, const std::vector<PairRoute>& routes, double seconds_limit) {
  const int n = t.numGpus();
  const int num_pairs = static_cast<int>(routes.size());
  GlpkProblem problem;
  glp_prob* lp = problem.get();
  glp_set_obj_dir(lp, GLP_MIN);
  // Column 1 is tau; then one column per (s, p) with routes[p].dst != s.
  std::vector<int> column(static_cast<size_t>(n) * num_pairs, 0);
  int columns = 1;
  for (int s = 0; s < n; ++s) {
    for (int p = 0; p < num_pairs; ++p) {
      if (routes[p].dst != s) column[static_cast<size_t>(s) * num_pairs + p] = ++columns;
    }
  }
  glp_add_cols(lp, columns);
  for (int c = 1; c <= columns; ++c) glp_set_col_bnds(lp, c, GLP_LO, 0.0, 0.0);
  glp_set_obj_coef(lp, 1, 1.0);

  GlpkMatrix matrix;
  auto add = [&matrix](int row, int col, double value) { matrix.add(row, col, value); };
  // Conservation rows, one per (s, v != s).
  std::vector<int> row_of(static_cast<size_t>(n) * n, 0);
  int rows = 0;
  for (int s = 0; s < n; ++s) {
    for (int v = 0; v < n; ++v) {
      if (v == s) continue;
      row_of[static_cast<size_t>(s) * n + v] = ++rows;
    }
  }
  glp_add_rows(lp, rows);
  for (int r = 1; r <= rows; ++r) glp_set_row_bnds(lp, r, GLP_FX, 1.0, 1.0);
  for (int s = 0; s < n; ++s) {
    for (int p = 0; p < num_pairs; ++p) {
      const int col = column[static_cast<size_t>(s) * num_pairs + p];
      if (col == 0) continue;
      add(row_of[static_cast<size_t>(s) * n + routes[p].dst], col, 1.0);
      if (routes[p].src != s) add(row_of[static_cast<size_t>(s) * n + routes[p].src], col, -1.0);
    }
  }
  // Capacity rows, one per physical link some route crosses.
  std::vector<std::vector<int>> pairs_on_link(t.links.size());
  for (int p = 0; p < num_pairs; ++p) {
    for (int l : routes[p].links) pairs_on_link[l].push_back(p);
  }
  for (size_t l = 0; l < t.links.size(); ++l) {
    if (pairs_on_link[l].empty()) continue;
    const int row = glp_add_rows(lp, 1);
    ++rows;
    glp_set_row_bnds(lp, row, GLP_UP, 0.0, 0.0);
    for (int s = 0; s < n; ++s) {
      for (int p : pairs_on_link[l]) {
        const int col = column[static_cast<size_t>(s) * num_pairs + p];
        if (col != 0) add(row, col, 1.0);
      }
    }
    add(row, 1, -t.links[l].bandwidth_gbps);
  }
  matrix.load(lp);

  // GLPK's primal simplex after its presolver (the equality rows make the all-slack basis infeasible, which the
  // primal's first phase handles), within the time limit.
  const int limit_ms = static_cast<int>(std::clamp(seconds_limit, 0.001, 2e6) * 1e3);
  BRAID_ASSIGN_OR_RETURN(
      const double tau, cost_internal::solveSimplex(t, lp, GLP_PRIMAL, /*presolve=*/true, limit_ms, "all-to-all flow"));
  FlowLp out;
  out.tau = tau;
  out.columns = columns;
  out.rows = rows;
  if (tau <= 0) return internalError("all-to-all flow: GLPK returned the objective 0 for a flow that moves data");
  out.flow.assign(column.size(), 0.0);
  for (size_t i = 0; i < column.size(); ++i) {
    if (column[i] != 0) out.flow[i] = std::max(0.0, glp_get_col_prim(lp, column[i]));
  }
  return out;
}

/// Paths of commodity `s` (file comment); flow holds its pair flows and is consumed. paths[d] gets the paths to d
/// with their fractions normalised to sum 1.
Status decompose(const Topology& t, const std::vector<PairRoute>& routes, int s, std::vector<double> flow,
                 std::vector<std::vector<AllToAllFlow::Path>>* paths) {
  const int n = t.numGpus();
  std::vector<std::vector<int>> out_pairs(n);
  for (int p = 0; p < static_cast<int>(routes.size()); ++p) out_pairs[routes[p].src].push_back(p);
  std::vector<double> missing(n, 1.0);
  missing[s] = 0;
  std::vector<int> position(n, -1);  // rank -> index in the walk, -1 when not on it
  const size_t max_steps = (routes.size() + n + 1) * (static_cast<size_t>(n) + 1) * 4;
  size_t steps = 0;
  auto nextPair = [&](int v) {
    int best = -1;
    for (int p : out_pairs[v]) {
      if (flow[p] > kFlowEps && (best < 0 || flow[p] > flow[best])) best = p;
    }
    return best;
  };
  auto anyMissing = [&] { return std::any_of(missing.begin(), missing.end(), [](double m) { return m > 1e-7; }); };
  while (anyMissing()) {
    if (++steps > max_steps) {
      return internalError("all-to-all flow: the decomposition of " + cost_internal::rankName(t, s) +
                           "'s flow did not end");
    }
    std::vector<int> walk = {s};  // ranks
    std::vector<int> used;        // pairs, used[i] from walk[i] to walk[i + 1]
    std::fill(position.begin(), position.end(), -1);
    position[s] = 0;
    bool recorded = false;
    while (!recorded) {
      const int v = walk.back();
      const int p = nextPair(v);
      if (p < 0) {
        if (used.empty()) {
          return internalError("all-to-all flow: " + cost_internal::rankName(t, s) +
                               "'s flow leaves ranks without their block");
        }
        flow[used.back()] = 0;  // a dead end of rounding noise
        break;
      }
      const int w = routes[p].dst;
      if (position[w] >= 0) {  // a cycle: walk[position[w]] ... v -> w
        double least = flow[p];
        for (size_t i = position[w]; i < used.size(); ++i) least = std::min(least, flow[used[i]]);
        flow[p] -= least;
        for (size_t i = position[w]; i < used.size(); ++i) flow[used[i]] -= least;
        break;
      }
      walk.push_back(w);
      used.push_back(p);
      position[w] = static_cast<int>(walk.size()) - 1;
      if (missing[w] > kFlowEps) {
        double amount = missing[w];
        for (int q : used) amount = std::min(amount, flow[q]);
        for (int q : used) flow[q] -= amount;
        missing[w] -= amount;
        if (missing[w] <= 1e-7) missing[w] = 0;
        (*paths)[w].push_back({walk, amount});
        recorded = true;
      }
    }
  }
  for (int d = 0; d < n; ++d) {
    if (d == s) continue;
    std::vector<AllToAllFlow::Path>& list = (*paths)[d];
    double total = 0;
    for (const AllToAllFlow::Path& path : list) total += path.fraction;
    if (list.empty() || std::fabs(total - 1) > 1e-6) {
      return internalError("all-to-all flow: the paths " + cost_internal::rankName(t, s) + " -> " +
                           cost_internal::rankName(t, d) + " carry " + std::to_string(total) + " blocks, not 1");
    }
    for (AllToAllFlow::Path& path : list) path.fraction /= total;
  }
  return Status::ok();
}

}  // namespace

Result<AllToAllFlow> allToAllFlow(const Topology& t, double seconds_limit) {
  const auto start = std::chrono::steady_clock::now();
  const int n = t.numGpus();
  AllToAllFlow out;
  out.num_ranks = n;
  out.paths.assign(static_cast<size_t>(n) * n, {});
  if (n < 2) return out;
  if (n > kAllToAllFlowMaxGpus) {
    return unsupported("all-to-all flow: topology '" + t.name + "' has " + std::to_string(n) + " GPUs, more than the " +
                       std::to_string(kAllToAllFlowMaxGpus) + " the flow LP (n^3 columns) is solved for");
  }
  if (!(seconds_limit > 0)) return invalidArgument("all-to-all flow: the time limit must be positive (seconds)");
  BRAID_ASSIGN_OR_RETURN(const std::vector<PairRoute> routes, cost_internal::gpuRoutes(t));
  BRAID_ASSIGN_OR_RETURN(FlowLp lp, solveFlowLp(t, routes, seconds_limit));
  out.us_per_byte = lp.tau / n / 1e3;
  out.lp_columns = lp.columns;
  out.lp_rows = lp.rows;
  const size_t num_pairs = routes.size();
  for (int s = 0; s < n; ++s) {
    std::vector<double> flow(lp.flow.begin() + static_cast<std::ptrdiff_t>(s * num_pairs),
                             lp.flow.begin() + static_cast<std::ptrdiff_t>((s + 1) * num_pairs));
    std::vector<std::vector<AllToAllFlow::Path>> paths(n);
    BRAID_RETURN_IF_ERROR(decompose(t, routes, s, std::move(flow), &paths));
    for (int d = 0; d < n; ++d) out.paths[static_cast<size_t>(s) * n + d] = std::move(paths[d]);
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace braid
