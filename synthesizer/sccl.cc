// SCCL's k-synchronous all-gather on Z3 (sccl.h): the capacity graph, the Boolean encoding per (S, C), and the
// search over round splits.
#include "synthesizer/sccl.h"

#include <fmt/format.h>
#include <z3++.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <limits>
#include <numeric>
#include <optional>
#include <utility>

#include "synthesizer/budget.h"
#include "synthesizer/watchdog.h"

namespace braid::synth {
namespace {

using Clock = std::chrono::steady_clock;

/// The first split of `rounds` over `steps` steps in lexicographic order: 1, ..., 1, rounds - (steps - 1).
std::vector<int> firstSplit(int steps, int rounds) {
  std::vector<int> split(steps, 1);
  split.back() = rounds - (steps - 1);
  return split;
}

/// The next split in lexicographic order whose parts are >= 1 and whose first part is at most `first_max` (more
/// rounds in step 1 than its sends can use only take them from later steps); false after the last. Generated one
/// at a time: there are C(R-1, S-1) of them.
bool nextSplit(std::vector<int>* split, int first_max) {
  const int steps = static_cast<int>(split->size());
  int tail = split->back();  // sum of the parts after position i
  for (int i = steps - 2; i >= 0; --i) {
    const bool room = tail - 1 >= steps - 1 - i;
    if (room && !(i == 0 && (*split)[0] + 1 > first_max)) {
      ++(*split)[i];
      int rest = tail - 1;
      for (int j = i + 1; j < steps - 1; ++j) {
        (*split)[j] = 1;
        --rest;
      }
      split->back() = rest;
      return true;
    }
    tail += (*split)[i];
  }
  return false;
}

/// The Boolean model for S steps and C chunks per rank; bandwidth constraints are added per split.
class ScclModel {
 public:
  ScclModel(z3::context& z, const LogicalTopology& logical, const ScclGraph& graph, const ChunkProblem& problem,
            int steps)
      : z_(z), logical_(logical), graph_(graph), problem_(problem), steps_(steps), base_(z) {
    const int n = logical.num_ranks;
    const int chunks = static_cast<int>(problem.chunks.size());
    has_.assign(static_cast<size_t>(chunks) * n * (steps + 1), -1);
    send_.assign(static_cast<size_t>(chunks) * logical.links.size() * (steps + 1), -1);
    for (int c = 0; c < chunks; ++c) {
      const int owner = problem.chunks[c].owner;
      for (int v = 0; v < n; ++v) {
        for (int s = 1; s <= steps; ++s) {
          if (v != owner && graph.hop[owner][v] >= 0 && graph.hop[owner][v] <= s) has_[hasIndex(c, v, s)] = newVar();
        }
      }
      for (const LogicalLink& l : logical.links) {
        if (!graph.link_usable[l.id] || l.dst == owner) continue;
        for (int s = 1; s <= steps; ++s) {
          // The sender must hold c after step s-1 and the receiver must not.
          const int h = graph.hop[owner][l.src];
          if (h < 0 || h > s - 1) continue;
          if (graph.hop[owner][l.dst] > s) continue;
          send_[sendIndex(c, l.id, s)] = newVar();
        }
      }
    }
    for (int c = 0; c < chunks; ++c) {
      const int owner = problem.chunks[c].owner;
      for (int v = 0; v < n; ++v) {
        if (v == owner) continue;
        for (int s = 1; s <= steps; ++s) {
          const z3::expr h = has(c, v, s);
          z3::expr_vector why(z_);
          why.push_back(has(c, v, s - 1));
          for (int l : logical.in_links[v]) {
            if (std::optional<z3::expr> x = send(c, l, s)) why.push_back(*x);
          }
          base_.push_back(z3::implies(h, z3::mk_or(why)));
          base_.push_back(z3::implies(has(c, v, s - 1), h));
        }
        base_.push_back(has(c, v, steps));
      }
      for (const LogicalLink& l : logical.links) {
        for (int s = 1; s <= steps; ++s) {
          std::optional<z3::expr> x = send(c, l.id, s);
          if (!x) continue;
          base_.push_back(z3::implies(*x, has(c, l.src, s - 1)));
          base_.push_back(z3::implies(*x, !has(c, l.dst, s - 1)));
        }
      }
    }
    // Per physical link, the sends that cross it in a step (bandwidth constraints are per split).
    crossing_.assign(graph.resource_cap.size(), {});
    for (const LogicalLink& l : logical.links) {
      if (!graph.link_usable[l.id]) continue;
      for (int e : l.resources) crossing_[e].push_back(l.id);
    }
  }

  const z3::expr_vector& base() const { return base_; }
  int chunksPerRank() const { return static_cast<int>(problem_.chunks.size()) / std::max(1, logical_.num_ranks); }

  /// The most rounds step 1 can use: max over physical links of ceil(C x the logical links crossing it / cap).
  int firstStepRounds(int chunks) const {
    int most = 1;
    for (size_t e = 0; e < crossing_.size(); ++e) {
      const int cap = graph_.resource_cap[e];
      if (cap <= 0 || crossing_[e].empty()) continue;
      const int64_t sends = static_cast<int64_t>(chunks) * static_cast<int64_t>(crossing_[e].size());
      most = std::max<int>(most, static_cast<int>((sends + cap - 1) / cap));
    }
    return most;
  }
  int numVariables() const { return static_cast<int>(vars_.size()); }

  /// Step s's bandwidth constraints for r_s = `rounds` rounds: the sends crossing each physical link at most
  /// cap x rounds.
  void addBandwidth(z3::solver& solver, int s, int rounds) const {
    const int chunks = static_cast<int>(problem_.chunks.size());
    for (size_t e = 0; e < crossing_.size(); ++e) {
      if (crossing_[e].empty() || graph_.resource_cap[e] <= 0) continue;
      z3::expr_vector on(z_);
      for (int l : crossing_[e]) {
        for (int c = 0; c < chunks; ++c) {
          if (std::optional<z3::expr> x = send(c, l, s)) on.push_back(*x);
        }
      }
      const unsigned limit = static_cast<unsigned>(graph_.resource_cap[e]) * static_cast<unsigned>(rounds);
      if (on.size() > limit) solver.add(z3::atmost(on, limit));
    }
  }

  /// Counting constraints implied by the bandwidth ones, stated so the solver need not derive them: after step s
  /// rank v holds at most C + in_v x (r_1 + ... + r_s) chunks and at least nC - in_v x (r_{s+1} + ... + r_S)
  /// (in_v = the capacity into v per round), for the split `split`.
  void addCounting(z3::solver& solver, const std::vector<int>& split) const {
    const int n = logical_.num_ranks;
    const int chunks = static_cast<int>(problem_.chunks.size());
    const int per_rank = chunks / std::max(1, n);
    int total = 0;
    for (int r : split) total += r;
    for (int v = 0; v < n; ++v) {
      const int in = graph_.ingress_cap[v];
      int before = 0;
      for (int s = 1; s < steps_; ++s) {
        before += split[s - 1];
        z3::expr_vector held(z_);
        for (int c = 0; c < chunks; ++c) held.push_back(has(c, v, s));
        const int most = per_rank + in * before;
        const int least = chunks - in * (total - before);
        if (most < chunks) solver.add(z3::atmost(held, static_cast<unsigned>(most)));
        if (least > 0) solver.add(z3::atleast(held, static_cast<unsigned>(least)));
      }
    }
  }

  /// The first link that delivers each chunk to each rank, and the step it does it in, from a model.
  void read(const z3::model& m, Routing* routing, std::vector<std::vector<int>>* step_of) const {
    const int n = logical_.num_ranks;
    const int chunks = static_cast<int>(problem_.chunks.size());
    routing->parent.assign(chunks, std::vector<int>(n, -1));
    step_of->assign(chunks, std::vector<int>(n, 0));
    for (int c = 0; c < chunks; ++c) {
      const int owner = problem_.chunks[c].owner;
      for (int v = 0; v < n; ++v) {
        if (v == owner) continue;
        for (int s = 1; s <= steps_; ++s) {
          if (!m.eval(has(c, v, s), true).is_true()) continue;
          for (int l : logical_.in_links[v]) {
            std::optional<z3::expr> x = send(c, l, s);
            if (x && m.eval(*x, true).is_true()) {
              routing->parent[c][v] = l;
              break;
            }
          }
          (*step_of)[c][v] = s;
          break;
        }
      }
    }
  }

 private:
  size_t hasIndex(int c, int v, int s) const {
    return (static_cast<size_t>(c) * logical_.num_ranks + v) * (steps_ + 1) + s;
  }
  size_t sendIndex(int c, int l, int s) const {
    return (static_cast<size_t>(c) * logical_.links.size() + l) * (steps_ + 1) + s;
  }
  int newVar() {
    vars_.push_back(z_.bool_const(fmt::format("b{}", vars_.size()).c_str()));
    return static_cast<int>(vars_.size()) - 1;
  }
  z3::expr has(int c, int v, int s) const {
    if (s == 0) return z_.bool_val(v == problem_.chunks[c].owner);
    if (v == problem_.chunks[c].owner) return z_.bool_val(true);
    const int i = has_[hasIndex(c, v, s)];
    return i < 0 ? z_.bool_val(false) : vars_[i];
  }
  std::optional<z3::expr> send(int c, int l, int s) const {
    const int i = send_[sendIndex(c, l, s)];
    if (i < 0) return std::nullopt;
    return vars_[i];
  }

  z3::context& z_;
  const LogicalTopology& logical_;
  const ScclGraph& graph_;
  const ChunkProblem& problem_;
  int steps_;
  std::vector<z3::expr> vars_;
  std::vector<int> has_, send_;
  std::vector<std::vector<int>> crossing_;
  z3::expr_vector base_;
};

/// The schedule of a solution: step s spans [T_{s-1}, T_s) with T_s - T_{s-1} = the largest α of a link used in
/// it + r_s x chunk bytes / u; on each link, transfers in step order (then chunk id).
Schedule stepSchedule(const LogicalTopology& logical, const ScclGraph& graph, const ChunkProblem& problem,
                      const Routing& routing, const std::vector<std::vector<int>>& step_of,
                      const std::vector<int>& rounds_per_step) {
  const int steps = static_cast<int>(rounds_per_step.size());
  std::vector<double> alpha(steps + 1, 0);
  for (size_t c = 0; c < routing.parent.size(); ++c) {
    for (size_t v = 0; v < routing.parent[c].size(); ++v) {
      const int l = routing.parent[c][v];
      if (l >= 0) alpha[step_of[c][v]] = std::max(alpha[step_of[c][v]], logical.links[l].alpha_us);
    }
  }
  std::vector<double> t(steps + 1, 0);
  for (int s = 1; s <= steps; ++s) {
    t[s] = t[s - 1] + alpha[s] + rounds_per_step[s - 1] * problem.chunk_bytes / (graph.unit_gbps * 1e3);
  }
  Schedule out;
  out.link_order.assign(logical.links.size(), {});
  for (size_t c = 0; c < routing.parent.size(); ++c) {
    for (size_t v = 0; v < routing.parent[c].size(); ++v) {
      const int l = routing.parent[c][v];
      if (l < 0) continue;
      const int s = step_of[c][v];
      out.transfers.push_back({.chunk = static_cast<int>(c), .link = l, .start_us = t[s - 1], .end_us = t[s]});
    }
  }
  for (int i = 0; i < static_cast<int>(out.transfers.size()); ++i) out.link_order[out.transfers[i].link].push_back(i);
  for (std::vector<int>& order : out.link_order) {
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return std::pair(out.transfers[a].start_us, out.transfers[a].chunk) <
             std::pair(out.transfers[b].start_us, out.transfers[b].chunk);
    });
  }
  for (int i = 0; i < static_cast<int>(out.transfers.size()); ++i) out.groups.push_back({i});
  out.makespan_us = t[steps];
  return out;
}

}  // namespace

int ScclGraph::roundsLowerBound(int chunks) const {
  int best = 1;
  for (int v = 0; v < num_ranks; ++v) {
    if (ingress_cap[v] <= 0) continue;
    const int need = (num_ranks - 1) * chunks;
    best = std::max(best, (need + ingress_cap[v] - 1) / ingress_cap[v]);
  }
  return best;
}

Result<ScclGraph> scclGraph(const LogicalTopology& logical) {
  const Topology& topology = *logical.topology;
  ScclGraph g;
  g.num_ranks = logical.num_ranks;
  // The unit: one lane of the fastest link leaving a GPU (NVLink where there is NVLink).
  double fastest = 0;
  for (const Link& link : topology.links) {
    if (topology.vertices[link.src].kind != VertexKind::kGpu || link.bandwidth_gbps <= fastest) continue;
    fastest = link.bandwidth_gbps;
    g.unit_gbps = link.bandwidth_gbps / std::max(1, link.lanes);
  }
  if (!(g.unit_gbps > 0)) return unsupported("SCCL's model: no link leaves a GPU");
  // Where the fastest lane does not join every pair (ranks joined only by slower PCIe, QPI or NICs), the unit is the
  // largest bandwidth that does: the smallest over pairs of the widest route path (max-min bottleneck).
  const int n_ranks = logical.num_ranks;
  for (int a = 0; a < n_ranks; ++a) {
    std::vector<double> width(n_ranks, 0);
    std::vector<char> done(n_ranks, 0);
    width[a] = std::numeric_limits<double>::infinity();
    for (int it = 0; it < n_ranks; ++it) {
      int v = -1;
      for (int w = 0; w < n_ranks; ++w) {
        if (!done[w] && (v < 0 || width[w] > width[v])) v = w;
      }
      if (v < 0 || !(width[v] > 0)) break;
      done[v] = 1;
      for (int l : logical.out_links[v]) {
        const LogicalLink& link = logical.links[l];
        width[link.dst] = std::max(width[link.dst], std::min(width[v], link.gbps));
      }
    }
    for (int b = 0; b < n_ranks; ++b) {
      if (b != a && width[b] > 0) g.unit_gbps = std::min(g.unit_gbps, width[b]);
    }
  }
  g.resource_cap.assign(logical.resource_gbps.size(), 0);
  for (size_t e = 0; e < logical.resource_gbps.size(); ++e) {
    g.resource_cap[e] = static_cast<int>(std::floor(logical.resource_gbps[e] / g.unit_gbps + 1e-9));
  }
  g.link_usable.assign(logical.links.size(), 0);
  for (const LogicalLink& l : logical.links) {
    g.link_usable[l.id] =
        std::all_of(l.resources.begin(), l.resources.end(), [&](int e) { return g.resource_cap[e] >= 1; });
  }
  const int n = logical.num_ranks;
  g.hop.assign(n, std::vector<int>(n, -1));
  for (int a = 0; a < n; ++a) {
    std::deque<int> queue{a};
    g.hop[a][a] = 0;
    while (!queue.empty()) {
      const int v = queue.front();
      queue.pop_front();
      for (int l : logical.out_links[v]) {
        const int w = logical.links[l].dst;
        if (!g.link_usable[l] || g.hop[a][w] >= 0) continue;
        g.hop[a][w] = g.hop[a][v] + 1;
        queue.push_back(w);
      }
    }
    for (int b = 0; b < n; ++b) {
      if (g.hop[a][b] < 0) {
        return unsupported(fmt::format(
            "SCCL's model: rank {} cannot reach rank {} over links of at least one {:g} GB/s lane (the fastest "
            "lane leaving a GPU, SCCL's unit of bandwidth); use --method forest or taccl",
            a, b, g.unit_gbps));
      }
      g.steps_lower_bound = std::max(g.steps_lower_bound, g.hop[a][b]);
    }
  }
  // Ingress: the physical links into v's GPU that some usable logical link ends on.
  g.ingress_cap.assign(n, 0);
  std::vector<char> counted(g.resource_cap.size(), 0);
  for (const LogicalLink& l : logical.links) {
    if (!g.link_usable[l.id] || l.resources.empty()) continue;
    const int last = l.resources.back();
    if (counted[last]) continue;
    counted[last] = 1;
    g.ingress_cap[l.dst] += g.resource_cap[last];
  }
  return g;
}

namespace {

/// The smallest share of the budget one check gets (Z3 resource units).
constexpr uint64_t kMinCheckUnits = kUnitsPerSecond;
/// What a check gets in the first pass over the splits, and how many undecided splits the second pass retries.
constexpr uint64_t kFirstPassUnits = 2 * kUnitsPerSecond;
constexpr size_t kMaxRetries = 64;

/// One search: a Z3 context, the budget left and what was refuted, shared by the instances it tries.
class ScclSearch {
 public:
  ScclSearch(const LogicalTopology& logical, const ScclGraph& graph, uint64_t size_bytes, const StageContext& ctx,
             StageReport* report)
      : logical_(logical), graph_(graph), size_bytes_(size_bytes), ctx_(ctx), report_(report) {}

  /// The first feasible split of R in [r_lo, r_hi] rounds over `steps` steps with `chunks` chunks per rank, in
  /// order of R then lexicographic split; nullopt when all are refuted or the search was cut short (cutShort()).
  std::optional<ScclSolution> attempt(int chunks, int steps, int r_lo, int r_hi) {
    ChunkProblem problem = makeChunkProblem(CollectiveKind::kAllGather, logical_, chunks, /*root=*/0, size_bytes_);
    // A context per (S, C): its memory goes with it, and what it finds does not depend on the instances before.
    z3::context z_;
    Watchdog::SolverGuard guard(ctx_.watchdog, z_, ctx_.deadline);
    ScclModel model(z_, logical_, graph_, problem, steps);
    report_->variables = model.numVariables();
    report_->constraints = static_cast<int>(model.base().size());
    z3::solver solver(z_, "QF_FD");
    for (unsigned i = 0; i < model.base().size(); ++i) solver.add(model.base()[i]);
    // In step 1 every sender has only its own C chunks, so a physical link carries at most C x the logical links
    // crossing it: more rounds than the busiest link then needs are never needed.
    const int first_max = model.firstStepRounds(chunks);
    for (int rounds = r_lo; rounds <= r_hi && !cut_short_; ++rounds) {
      // Two passes over the splits: every split first with a small share (feasible ones are usually quick), then
      // the ones that pass left undecided with a quarter of what is left each.
      std::vector<std::vector<int>> retry;
      bool undecided = false;
      std::vector<int> split = firstSplit(steps, rounds);
      for (bool more = split.front() <= first_max; more && !cut_short_; more = nextSplit(&split, first_max)) {
        const Check c = check(model, solver, split, std::min(left_, kFirstPassUnits));
        if (c == Check::kSat) return solution(model, solver, problem, split);
        if (c == Check::kUnknown) {
          if (retry.size() < kMaxRetries) {
            retry.push_back(split);
          } else {
            undecided = true;
          }
        }
      }
      for (const std::vector<int>& again : retry) {
        if (cut_short_) break;
        const uint64_t share = std::max(left_ / 4, std::min(left_, kMinCheckUnits));
        const Check c = check(model, solver, again, share);
        if (c == Check::kSat) return solution(model, solver, problem, again);
        if (c == Check::kUnknown) undecided = true;
      }
      undecided = undecided || cut_short_;
      (undecided ? open_ : refuted_).push_back(fmt::format("{}/{}/{}", steps, rounds, chunks));
    }
    return std::nullopt;
  }

 private:
  enum class Check { kSat, kUnsat, kUnknown };

  /// One check of `split` under at most `units` (and the wall clock); marks the search cut short when the budget
  /// or the time is gone, or the watchdog interrupted the check.
  Check check(const ScclModel& model, z3::solver& solver, const std::vector<int>& split, uint64_t units) {
    if (left_ == 0 || ctx_.secondsLeft() <= 0) {
      cut_short_ = true;
      return Check::kUnknown;
    }
    ctx_.report({.stage = "sccl",
                 .detail = fmt::format("{} steps, {} rounds ({}), {} chunk(s) per rank", split.size(),
                                       std::accumulate(split.begin(), split.end(), 0), fmt::join(split, "+"),
                                       model.chunksPerRank()),
                 .variables = report_->variables,
                 .constraints = report_->constraints});
    solver.push();
    for (int s = 1; s <= static_cast<int>(split.size()); ++s) model.addBandwidth(solver, s, split[s - 1]);
    model.addCounting(solver, split);
    z3::check_result r = z3::unknown;
    try {
      r = checkWithin(solver, ctx_, "sccl", units, &left_);
    } catch (const z3::exception&) {
      cut_short_ = true;  // the watchdog interrupted the check at the deadline (the context stays cancelled)
      return Check::kUnknown;
    }
    ++checks_;
    if (r == z3::sat) return Check::kSat;  // the model is read before the pop
    solver.pop();
    if (r == z3::unknown && (left_ == 0 || ctx_.secondsLeft() <= 0)) cut_short_ = true;
    return r == z3::unsat ? Check::kUnsat : Check::kUnknown;
  }

  /// The solution in the solver's model; `problem` (which `model` refers to) is moved into it last.
  ScclSolution solution(const ScclModel& model, z3::solver& solver, ChunkProblem& problem,
                        const std::vector<int>& split) {
    ScclSolution out;
    std::vector<std::vector<int>> step_of;
    model.read(solver.get_model(), &out.routing, &step_of);
    out.steps = static_cast<int>(split.size());
    out.rounds = std::accumulate(split.begin(), split.end(), 0);
    out.chunks = model.chunksPerRank();
    out.rounds_per_step = split;
    out.schedule = stepSchedule(logical_, graph_, problem, out.routing, step_of, split);
    out.routing.makespan_us = out.schedule.makespan_us;
    out.problem = std::move(problem);
    out.checks = checks_;
    out.units = unitsSpent();
    return out;
  }

 public:
  /// Records (S, R, C) as refuted by the ingress bound (R < roundsLowerBound(C)) without a check.
  void refuteByBound(int steps, int rounds, int chunks) {
    refuted_.push_back(fmt::format("{}/{}/{} (ingress bound)", steps, rounds, chunks));
  }

  /// The search was interrupted at the deadline outside a check: (S, *, C) is left undecided.
  void cancelled(int steps, int chunks) {
    cut_short_ = true;
    open_.push_back(fmt::format("{}/*/{}", steps, chunks));
  }

  bool cutShort() const { return cut_short_; }
  int checks() const { return checks_; }
  uint64_t unitsSpent() const { return ctx_.units - left_; }
  std::string refuted() const { return refuted_.empty() ? "none" : fmt::format("{}", fmt::join(refuted_, ", ")); }
  /// Instances a check left undecided (its share of the budget spent): neither found nor refuted.
  const std::vector<std::string>& open() const { return open_; }

 private:
  const LogicalTopology& logical_;
  const ScclGraph& graph_;
  uint64_t size_bytes_;
  const StageContext& ctx_;
  StageReport* report_;
  uint64_t left_ = ctx_.units;
  int checks_ = 0;
  bool cut_short_ = false;
  std::vector<std::string> refuted_;  // "S/R/C" proved infeasible
  std::vector<std::string> open_;     // "S/R/C" left undecided
};

}  // namespace

Result<ScclSolution> scclAllGather(const LogicalTopology& logical, const ScclRequest& request, uint64_t size_bytes,
                                   const StageContext& ctx, StageReport* report) {
  const auto start = Clock::now();
  if (request.steps < 0 || request.steps > kScclMaxSteps || request.rounds < 0 || request.rounds > kScclMaxRounds ||
      request.chunks < 0 || request.chunks > kScclMaxChunks) {
    return invalidArgument(fmt::format("SCCL: steps {} (1..{}), rounds {} (1..{}) and chunks {} (1..{}); 0 = searched",
                                       request.steps, kScclMaxSteps, request.rounds, kScclMaxRounds, request.chunks,
                                       kScclMaxChunks));
  }
  if (request.steps > 0 && request.rounds > 0 && request.rounds < request.steps) {
    return invalidArgument(fmt::format("SCCL: {} rounds cannot fill {} steps (every step lasts a round at least)",
                                       request.rounds, request.steps));
  }
  BRAID_ASSIGN_OR_RETURN(ScclGraph graph, scclGraph(logical));
  if (request.steps > 0 && request.steps < graph.steps_lower_bound) {
    return Status(StatusCode::kInfeasible,
                  fmt::format("SCCL: {} steps are fewer than the hop diameter {} (a chunk moves one link per step)",
                              request.steps, graph.steps_lower_bound));
  }
  if (request.rounds > 0 && request.rounds < graph.steps_lower_bound) {
    return Status(StatusCode::kInfeasible,
                  fmt::format("SCCL: {} rounds are fewer than the hop diameter {} (every step lasts a round at least)",
                              request.rounds, graph.steps_lower_bound));
  }
  ScclSearch search(logical, graph, size_bytes, ctx, report);
  const int s_lo = request.steps > 0 ? request.steps : graph.steps_lower_bound;
  const int s_hi = request.steps > 0 ? request.steps : std::min(kScclMaxSteps, s_lo + kScclMaxExtraSteps);
  // The chunk counts to try, in order.
  std::vector<int> chunk_counts;
  if (request.chunks > 0) {
    chunk_counts.push_back(request.chunks);
  } else if (request.objective == ScclObjective::kLatency) {
    chunk_counts.push_back(1);
  } else {
    for (int c = 1; c <= kScclMaxBandwidthChunks; ++c) chunk_counts.push_back(c);
    std::stable_sort(chunk_counts.begin(), chunk_counts.end(), [&](int a, int b) {
      return static_cast<int64_t>(graph.roundsLowerBound(a)) * b < static_cast<int64_t>(graph.roundsLowerBound(b)) * a;
    });
  }
  std::optional<ScclSolution> found;
  bool capped = false;  // some instance was left out because it needs more rounds than kScclMaxRounds
  for (int chunks : chunk_counts) {
    const int r_floor = graph.roundsLowerBound(chunks);
    if (r_floor > kScclMaxRounds) {
      capped = true;
      continue;
    }
    for (int steps = s_lo; steps <= s_hi && !found && !search.cutShort(); ++steps) {
      int r_lo = request.rounds > 0 ? request.rounds : std::max(steps, r_floor);
      int r_hi = request.rounds > 0 ? request.rounds : std::min(kScclMaxRounds, r_lo + 2 * logical.num_ranks);
      if (request.objective == ScclObjective::kBandwidth && request.rounds == 0) r_hi = r_lo;
      if (r_lo < steps || r_lo > kScclMaxRounds) continue;
      if (r_hi < r_floor) {
        search.refuteByBound(steps, r_hi, chunks);  // fewer rounds than the ingress bound: no check needed
        continue;
      }
      try {
        found = search.attempt(chunks, steps, std::max(r_lo, r_floor), r_hi);
      } catch (const z3::exception&) {
        // The watchdog cancelled the context at the deadline while the model was being built or changed.
        search.cancelled(steps, chunks);
      }
    }
    if (found || search.cutShort()) break;
  }
  report->seconds = std::chrono::duration<double>(Clock::now() - start).count();
  report->solver_units = search.unitsSpent();
  if (found) {
    const ScclSolution& out = *found;
    report->makespan_us = out.schedule.makespan_us;
    report->status = fmt::format(
        "({} steps, {} rounds, {} chunks): rounds per step {}, R/C = {:.4g}; lower bounds {} steps, R/C {:.4g}; {} "
        "checks; refuted {}{}; unit {:.4g} GB/s",
        out.steps, out.rounds, out.chunks, fmt::join(out.rounds_per_step, "+"),
        static_cast<double>(out.rounds) / out.chunks, graph.steps_lower_bound,
        static_cast<double>(graph.roundsLowerBound(out.chunks)) / out.chunks, search.checks(), search.refuted(),
        search.open().empty()
            ? ""
            : fmt::format("; undecided within their share of the budget {}", fmt::join(search.open(), ", ")),
        graph.unit_gbps);
    return std::move(*found);
  }
  if (search.cutShort() || !search.open().empty()) {
    return Status(StatusCode::kTimeout,
                  fmt::format("SCCL: no all-gather found within the budget or the time limit after {} check{} "
                              "(steps/rounds/chunks refuted: {}; undecided: {})",
                              search.checks(), search.checks() == 1 ? "" : "s", search.refuted(),
                              fmt::join(search.open(), ", ")));
  }
  // Every instance tried was refuted. That proves no algorithm exists when the request fixed all three; otherwise
  // only that none exists within the search's range.
  const bool exhaustive = request.steps > 0 && request.rounds > 0 && request.chunks > 0 && !capped;
  if (capped && search.checks() == 0) {
    return unsupported(
        fmt::format("SCCL: {} chunk(s) per rank need at least {} rounds (the ingress bound), above "
                    "the search's limit of {}",
                    chunk_counts.front(), graph.roundsLowerBound(chunk_counts.front()), kScclMaxRounds));
  }
  return Status(exhaustive ? StatusCode::kInfeasible : StatusCode::kNotFound,
                fmt::format("SCCL: no all-gather {} steps {}..{}; steps/rounds/chunks refuted: {}",
                            exhaustive ? "exists in" : "within the search's range of", s_lo, s_hi, search.refuted()));
}

}  // namespace braid::synth
