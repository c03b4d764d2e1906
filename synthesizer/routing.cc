// Stage 1 of the synthesizer: TACCL's routing MILP (Shah et al., "TACCL", NSDI'23 §5.1; taccl/routing.py as
// summarised in ../shared/reference/taccl_msccl.md §1.5) re-designed for Z3.
//
// What TACCL's MILP decides, this stage decides: which logical links carry each chunk (a tree rooted at its owner
// for all-gather / broadcast, a path to its destination for all-to-all), minimizing the makespan T of a bandwidth
// relaxation: T >= load of every logical link (chunks x α-β cost), T >= load of every physical resource (bytes /
// bandwidth), T >= arrival time of every chunk at every rank that needs it.
//
// How it is encoded for Z3 (the re-design; the model is routing_model.{h,cc}, the diagnosis routing_diagnosis.cc,
// the driver this file):
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
//     links and shared resources), and, once a check times out, the linear relaxation (one LP, min T, on GLPK
//     with its own time limit; see RoutingModel::lpBound). Without arrival times every makespan is a load value (k x a
//     link cost or k x a resource's per-chunk time), so bounds round up to the next such value.
//   - Minimization by bisection on B with incremental checks (push/pop) of Z3's SMT solver, each bounded by a
//     share of the stage's resource units (budget.h: 1/16 first, 4x more on a second pass over bounds that ran out);
//     each
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
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/env.h"
#include "synthesizer/budget.h"
#include "synthesizer/model.h"
#include "synthesizer/routing_model.h"
#include "synthesizer/watchdog.h"

namespace braid::synth {
namespace {

using routing::diagnose;
using routing::distinctIntraLinks;
using routing::Geometry;
using routing::infeasibleMessage;
using routing::kGapTarget;
using routing::kInf;
using routing::kPathsGroup;
using routing::kRelayGroup;
using routing::makeGeometry;
using routing::postconditionName;
using routing::pruneUselessLeaves;
using routing::routesMakespan;
using routing::RoutingModel;
using routing::secondsSince;
using routing::SteadyClock;

constexpr double kHyperedgeSlack = 1e-3;                   // the hyperedge tweak may cost at most 0.1 % of the makespan
constexpr uint64_t kHyperedgeUnits = 5 * kUnitsPerSecond;  // ... and spend this much (a quarter of the budget at most)
constexpr uint64_t kMinCheckUnits = kUnitsPerSecond / 2;   // the smallest share of the budget a bisection check gets
constexpr uint64_t kDiagnosisUnits = kUnitsPerSecond;      // the unsat core may spend at least this much
constexpr double kLpSeconds = 5;  // the linear relaxation's bound may take this long (a fifth of the time left at most)

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
bool useOptimizeEngine() { return envString("BRAID_ROUTING_ENGINE") == "optimize"; }

/// One run of the stage: the model and its solver, the incumbent routes and the proven lower bound, and the
/// steps that move them (first routing, linear relaxation, bisection or z3::optimize, hyperedge tweak).
class RoutingSearch {
 public:
  RoutingSearch(const LogicalTopology& logical, const ChunkProblem& problem, int path_slack, const StageContext& ctx,
                StageReport& rep)
      : logical_(logical), problem_(problem), path_slack_(path_slack), ctx_(ctx), rep_(rep) {}

  /// Geometry, bounds and the incumbent: the greedy routes when they satisfy every structural constraint, else
  /// Z3's first model. Errors: kInfeasible (with the conflicting groups), kTimeout.
  Status start(SteadyClock::time_point t0);
  /// z3::optimize: T real, T >= every load (sums of ite(x, count, 0) times the cost) and arrival, minimize T.
  Status optimize();
  /// Bisection on the makespan bound (see the file comment).
  Status bisect();
  /// At (almost) the same makespan, fewer (uc-min) or more (uc-max) distinct intra-node links.
  void hyperedgeTweak();

  bool proven() const { return hasIncumbent() && best_t_ - lo_ <= kGapTarget * best_t_ + 1e-12; }
  bool hasIncumbent() const { return best_t_ >= 0; }
  uint64_t unitsLeft() const { return units_left_; }
  Routing routing() {
    Routing out;
    out.parent = std::move(best_);
    out.makespan_us = best_t_;
    return out;
  }

 private:
  void progress(const std::string& detail, double best) const;
  /// One check of solver_ under at most `units` of the stage's budget (and the wall clock; budget.h).
  z3::check_result boundedCheck(uint64_t units);
  double adopt(std::vector<std::vector<int>> routes);
  void resetSolver();
  void tryLp();

  const LogicalTopology& logical_;
  const ChunkProblem& problem_;
  int path_slack_;
  const StageContext& ctx_;
  StageReport& rep_;
  z3::context z_;
  Watchdog::SolverGuard guard_{ctx_.watchdog, z_, ctx_.deadline};  // interrupts z_'s checks at the stage deadline
  std::unique_ptr<RoutingModel> model_;
  std::unique_ptr<z3::solver> solver_;
  std::vector<std::vector<int>> best_;
  double best_t_ = -1;
  double lo_ = 0;
  double solver_seconds_ = 0;
  bool lp_tried_ = false;
  uint64_t units_left_ = ctx_.units;  // the stage's budget not yet spent
};

void RoutingSearch::progress(const std::string& detail, double best) const {
  SynthesisProgress p;
  p.stage = "routing";
  p.detail = detail;
  p.variables = rep_.variables;
  p.constraints = rep_.constraints;
  p.solver_seconds = solver_seconds_;
  p.best_makespan_us = best;
  ctx_.report(p);
}

z3::check_result RoutingSearch::boundedCheck(uint64_t units) {
  const auto c0 = SteadyClock::now();
  const z3::check_result r = checkWithin(*solver_, ctx_, "routing", units, &units_left_);
  solver_seconds_ += secondsSince(c0);
  return r;
}

double RoutingSearch::adopt(std::vector<std::vector<int>> routes) {
  pruneUselessLeaves(logical_, problem_, &routes);
  const double t = routesMakespan(logical_, problem_, routes);
  if (t < 0) return -1;
  if (best_t_ < 0 || t < best_t_) {
    best_ = std::move(routes);
    best_t_ = t;
  }
  return t;
}

void RoutingSearch::resetSolver() {
  solver_ = std::make_unique<z3::solver>(z_);
  for (unsigned i = 0; i < model_->base().size(); ++i) solver_->add(model_->base()[i]);
  rep_.variables = model_->numVariables();
  rep_.constraints = static_cast<int>(model_->base().size());
}

// The linear relaxation's bound, tried once when a check times out (proofs are what it helps with). Above the
// latency floor it also lets chunks whose longest arrival stays below it drop their arrival-time variables (model
// and solver are rebuilt), and bounds round up to the next load value when no arrival times remain.
void RoutingSearch::tryLp() {
  lp_tried_ = true;
  const double seconds = std::min(ctx_.secondsLeft() / 5, kLpSeconds);
  progress(fmt::format("linear relaxation: GLPK, {:.1f} s at most", seconds), best_t_);
  const auto c0 = SteadyClock::now();
  bool clock_cut = false;
  const std::optional<double> lp = model_->lpBound(seconds, &clock_cut);
  if (clock_cut) ctx_.clockCut("routing");
  solver_seconds_ += secondsSince(c0);
  if (lp && *lp * (1 - 1e-9) > lo_) {
    lo_ = *lp * (1 - 1e-9);
    if (model_->usesReals() && lo_ > model_->latencyFloor()) {
      auto lifted = std::make_unique<RoutingModel>(z_, logical_, problem_, path_slack_);
      lifted->computeGeometry();
      lifted->build(lo_);
      model_ = std::move(lifted);
      resetSolver();
    }
    lo_ = model_->nextLoadValue(lo_);
  }
  progress(lp ? fmt::format("linear relaxation: T > {:.3f} us", *lp) : "linear relaxation: no better bound", best_t_);
}

Status RoutingSearch::start(SteadyClock::time_point t0) {
  model_ = std::make_unique<RoutingModel>(z_, logical_, problem_, path_slack_);
  if (auto unreachable = model_->computeGeometry()) {
    const auto [c, target] = *unreachable;
    const Chunk& chunk = problem_.chunks[c];
    const int dest = problem_.kind == CollectiveKind::kAllToAll ? chunk.dest : -1;
    const Geometry wide = makeGeometry(logical_, chunk.owner, dest, path_slack_, false, false);
    rep_.seconds = secondsSince(t0);
    rep_.status = "infeasible";
    return Status(StatusCode::kInfeasible, infeasibleMessage({postconditionName(target, chunk),
                                                              wide.dist[target] < kInf ? kRelayGroup : kPathsGroup}));
  }
  const double lower = model_->lowerBound();
  model_->build(lower);
  auto greedy = model_->greedy();
  if (!greedy.empty() && model_->satisfiedBy(greedy)) {
    best_ = std::move(greedy);
    best_t_ = routesMakespan(logical_, problem_, best_);
  }
  lo_ = lower;
  resetSolver();
  if (best_t_ >= 0) return Status::ok();
  const z3::check_result r = boundedCheck(units_left_);
  progress(fmt::format("first routing: {}", r == z3::sat     ? "found"
                                            : r == z3::unsat ? "none exists"
                                                             : "out of budget"),
           -1);
  if (r == z3::unsat) {
    const auto d0 = SteadyClock::now();
    const std::vector<std::string> groups =
        diagnose(logical_, problem_, *model_, path_slack_, std::max(kDiagnosisUnits, units_left_), ctx_);
    solver_seconds_ += secondsSince(d0);
    progress(fmt::format("unsat core: {} constraint groups", groups.size()), -1);
    rep_.seconds = secondsSince(t0);
    rep_.status = "infeasible";
    return Status(StatusCode::kInfeasible,
                  groups.empty() ? infeasibleMessage({"(the unsat core could not be computed in the time left)"})
                                 : infeasibleMessage(groups));
  }
  if (r != z3::sat) {
    rep_.seconds = secondsSince(t0);
    rep_.status = "timeout";
    return Status(
        StatusCode::kTimeout,
        fmt::format("routing: Z3 found no routing within the budget ({:.1f} s of solver time)", solver_seconds_));
  }
  if (adopt(model_->extract(solver_->get_model())) < 0)
    return internalError("routing: Z3's model does not give every target a route from the owner");
  return Status::ok();
}

Status RoutingSearch::optimize() {
  z3::optimize opt(z_);
  for (unsigned i = 0; i < model_->base().size(); ++i) opt.add(model_->base()[i]);
  const z3::expr t = z_.real_const("T");
  const z3::expr_vector loads = model_->makespanAtLeastLoads(t);
  for (unsigned i = 0; i < loads.size(); ++i) opt.add(loads[i]);
  opt.add(t >= z_.real_val(fmt::format("{:.9f}", lo_).c_str()));
  opt.add(t <= z_.real_val(fmt::format("{:.9f}", best_t_).c_str()));
  opt.minimize(t);
  const auto c0 = SteadyClock::now();
  const z3::check_result r = checkWithin(opt, ctx_, "routing", units_left_, &units_left_);
  solver_seconds_ += secondsSince(c0);
  std::optional<z3::model> m;
  try {
    if (r != z3::unsat) m = opt.get_model();
  } catch (const z3::exception&) {
  }
  // A model of a finished optimization is complete; one left by a timeout may be partial and is then ignored.
  if (m && adopt(model_->extract(*m)) < 0 && r == z3::sat)
    return internalError("routing: Z3's optimize model does not give every target a route from the owner");
  if (r == z3::sat) lo_ = best_t_;
  rep_.constraints = static_cast<int>(model_->base().size() + loads.size());
  progress(fmt::format("optimize: {}", r == z3::sat ? "optimal" : "timed out"), best_t_);
  return Status::ok();
}

// `floor` is the lower end of the search: the proven bound `lo_`, or a bound whose check ran out of units (then the
// search goes on above it with the units left, but optimality is unproven). Checks start with small shares of the
// budget (a check far below the optimum can take long to refute); when the search has closed up to a bound that ran
// out, it is repeated from the proven bound with 4x the share.
Status RoutingSearch::bisect() {
  int step = 0;
  double floor = lo_;
  uint64_t per_check = std::max(kMinCheckUnits, units_left_ / 16);
  bool timed_out = false;
  while (true) {
    if (units_left_ < kMinCheckUnits / 10 || best_t_ - lo_ <= kGapTarget * best_t_) break;
    if (ctx_.secondsLeft() <= 0) {
      ctx_.clockCut("routing");
      break;
    }
    if (best_t_ - floor <= kGapTarget * best_t_) {
      if (!timed_out) break;
      floor = lo_;
      per_check *= 4;
      timed_out = false;
      continue;
    }
    const double bound = (floor + best_t_) / 2;
    solver_->push();
    const z3::expr_vector bounds = model_->boundConstraints(bound);
    for (unsigned i = 0; i < bounds.size(); ++i) solver_->add(bounds[i]);
    const z3::check_result r = boundedCheck(per_check);
    ++step;
    std::string what;
    if (r == z3::sat) {
      const double t = adopt(model_->extract(solver_->get_model()));
      if (t < 0 || t > bound + 1e-6) {
        solver_->pop();
        return internalError(fmt::format("routing: Z3's model at bound {:.3f} us gives makespan {:.3f} us", bound, t));
      }
      what = fmt::format("feasible, routes take {:.3f} us", t);
    } else if (r == z3::unsat) {
      // No routing within `bound`: the optimum is the next load value above it (when loads decide).
      lo_ = std::max(lo_, bound);
      if (lo_ > model_->latencyFloor()) lo_ = std::max(lo_, model_->nextLoadValue(bound * (1 + 1e-9)));
      floor = std::max(floor, lo_);
      what = "infeasible";
    } else {
      floor = bound;
      timed_out = true;
      what = "out of budget";
    }
    solver_->pop();
    rep_.constraints = std::max(rep_.constraints, static_cast<int>(model_->base().size() + bounds.size()));
    progress(fmt::format("bisection {}: T <= {:.3f} us {}", step, bound, what), best_t_);
    if (r == z3::unknown && !lp_tried_ && units_left_ > 0) {
      tryLp();
      floor = std::max(floor, lo_);
    }
  }
  return Status::ok();
}

void RoutingSearch::hyperedgeTweak() {
  const bool minimize = logical_.hyperedge == "uc-min";
  const double bound = best_t_ * (1 + kHyperedgeSlack);
  z3::expr_vector used(z_);
  const z3::expr_vector defs = model_->usedLinkDefinitions(&used);
  solver_->push();
  const z3::expr_vector bounds = model_->boundConstraints(bound);
  for (unsigned i = 0; i < bounds.size(); ++i) solver_->add(bounds[i]);
  for (unsigned i = 0; i < defs.size(); ++i) solver_->add(defs[i]);
  // Bisection on the number of distinct links: [low, high] holds the goals not yet refuted.
  int current = distinctIntraLinks(logical_, best_);
  const int start = current;
  int low = minimize ? 0 : current + 1, high = minimize ? current - 1 : static_cast<int>(used.size());
  uint64_t budget = std::min(units_left_ / 4, kHyperedgeUnits);
  const uint64_t per_check = budget / 3;
  while (low <= high && used.size() > 0) {
    if (budget < kMinCheckUnits / 10) break;
    const int goal = minimize ? (low + high) / 2 : (low + high + 1) / 2;
    solver_->push();
    solver_->add(minimize ? z3::atmost(used, static_cast<unsigned>(goal))
                          : z3::atleast(used, static_cast<unsigned>(goal)));
    const uint64_t before = units_left_;
    const z3::check_result r = boundedCheck(std::min(budget, per_check));
    budget -= std::min(budget, before - units_left_);
    bool improved = false;
    if (r == z3::sat) {
      auto routes = model_->extract(solver_->get_model());
      pruneUselessLeaves(logical_, problem_, &routes);
      const double t = routesMakespan(logical_, problem_, routes);
      const int count = distinctIntraLinks(logical_, routes);
      if (t >= 0 && t <= bound + 1e-6 && (minimize ? count < current : count > current)) {
        best_ = std::move(routes);
        best_t_ = t;
        current = count;
        improved = true;
      }
    }
    solver_->pop();
    progress(fmt::format("hyperedge {}: {} {} distinct intra-node links {}", logical_.hyperedge,
                         minimize ? "at most" : "at least", goal,
                         r == z3::sat     ? "possible"
                         : r == z3::unsat ? "impossible"
                                          : "out of budget"),
             best_t_);
    if (improved) {
      (minimize ? high : low) = minimize ? current - 1 : current + 1;
    } else if (r != z3::sat) {
      (minimize ? low : high) = minimize ? goal + 1 : goal - 1;  // refuted, or not found in time: look closer
    } else {
      break;  // a model that does not improve once pruned
    }
  }
  solver_->pop();
  if (current != start)
    rep_.status += fmt::format("; {} {} -> {} intra-node links", logical_.hyperedge, start, current);
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
  std::unique_ptr<RoutingSearch> search;
  try {
    search = std::make_unique<RoutingSearch>(logical, problem, path_slack, ctx, rep);
    BRAID_RETURN_IF_ERROR(search->start(t0));
    BRAID_RETURN_IF_ERROR(useOptimizeEngine() ? search->optimize() : search->bisect());
    rep.status = search->proven()         ? "optimal (gap <= 1%)"
                 : ctx.secondsLeft() <= 0 ? "feasible (time limit)"
                                          : "feasible (budget)";
    if ((logical.hyperedge == "uc-min" || logical.hyperedge == "uc-max") && search->unitsLeft() > 0)
      search->hyperedgeTweak();
    Routing routing = search->routing();
    rep.makespan_us = routing.makespan_us;
    rep.seconds = secondsSince(t0);
    rep.solver_units = ctx.units - search->unitsLeft();
    return routing;
  } catch (const z3::exception& e) {
    // After the deadline this is the watchdog's interrupt (the context stays cancelled): the search ends there.
    rep.seconds = secondsSince(t0);
    if (search) rep.solver_units = ctx.units - search->unitsLeft();
    const bool late = ctx.secondsLeft() <= 0;
    if (late) ctx.clockCut("routing");
    if (search && search->hasIncumbent()) {
      const bool proven = search->proven();
      Routing routing = search->routing();
      rep.makespan_us = routing.makespan_us;
      rep.status = proven ? "optimal (gap <= 1%)"
                   : late ? "feasible (time limit)"
                          : fmt::format("feasible (Z3 error: {})", e.msg());
      if (!late && ctx.notes) ctx.notes->push_back(fmt::format("routing: Z3 error, best routes kept: {}", e.msg()));
      return routing;
    }
    if (late) {
      rep.status = "timeout";
      return Status(StatusCode::kTimeout,
                    fmt::format("routing: Z3 found no routing within the time limit (interrupted: {})", e.msg()));
    }
    rep.status = "error";
    return internalError(fmt::format("routing: Z3: {}", e.msg()));
  }
}

}  // namespace braid::synth
