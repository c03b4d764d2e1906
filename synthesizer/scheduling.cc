// Stage 3 of TACCL's synthesizer (taccl_msccl.md §1.5, taccl/scheduler.py): routes and the per-link and
// per-resource orders are fixed; decide which consecutive transfers of an inter-node link travel together as
// one message (one α for the group, at most max_contig chunks) and when every transfer starts, minimizing the
// makespan. TACCL solves this MILP with Gurobi; here it is a Z3 model over linear real arithmetic with one Bool
// per consecutive pair of an inter-node link, minimized by descent on the makespan with z3::solver.
//
// Model (per transfer t on logical link l; β = chunk_bytes / (gbps·1e3), α = l.alpha_us):
//   start_t    when t's message (its group) starts;
//   rstart_t   when t's own bytes start streaming: start_t for a group head, rstart of the previous member + β
//              for the others (the message carries its chunks back to back);
//   arr_t      when the group's message has arrived: rstart of the last member + α + β.
//   chunk:     start_t >= arr_p (p delivers t's chunk to l.src) and start_t >= 0;
//   link:      consecutive q, t on l: together(q,t) -> start_t = start_q, rstart_t = rstart_q + β, arr_q = arr_t;
//              otherwise start_t >= arr_q, rstart_t = start_t, arr_q = rstart_q + α + β. Intra-node links never
//              group: rstart = start, arr = start + α + β;
//   contiguity: no max_contig consecutive together(...) are all true (groups of at most max_contig);
//   resource:  consecutive p, n in the input order of a physical link e: rstart_n >= rstart_p + bytes/(cap_e·1e3);
//   makespan:  M >= arr_t for every transfer that ends a chunk's path.
// Transfers that are images of each other under the symmetry group (chunk by ChunkProblem::image, link by
// LogicalTopology::imageLink) and start together in the input share their variables, and pairs of such
// classes share their Bool; duplicate constraints after the sharing are dropped. Sharing only among transfers
// with equal input starts keeps the input schedule a solution, so the optimum is never worse than the input.
//
// The model only decides the Bools: its constants are rounded up to whole nanoseconds (small rationals keep
// Z3's simplex fast), and the times written back come from a longest-path pass over the chosen groups with the
// exact costs (asapTimes) — the earliest schedule for those decisions.
//
// Solving: descent with z3::solver and push/pop — ask for a makespan below the best schedule so far (by 0.01%,
// at least 10 ns); a feasible answer's Bools give a new best (its earliest-time schedule, usually well below
// the bound asked for), an infeasible answer proves the best optimal, Z3's time limit (the stage's time left)
// ends the search with the best so far, and so does a best schedule within 1% of the lower bound (kRelativeGap,
// status "optimal (gap <= 1%)"). Measured on TwoNodeSixteenRanksWithinTimeLimit (DGX H100 x2, 480
// transfers, 15 Bools with symmetry / 30 without, 2 shared cores), time to prove the optimum (49.231 µs, greedy
// 129.383 µs): descent 1.5 s / 3.6 s; bisection on the makespan with the same solver 4.3 s / 5.4 s (ten probes,
// the unsat ones near the optimum ~0.5 s each); z3::optimize minimize 2.2 s / 4.2 s. All three with the old
// simplex core (smt.arith.solver=2, a solver parameter here; z3::optimize accepts it only as a global parameter)
// and nanosecond constants: with Z3 4.8.12's default arithmetic core descent takes 4-5 s / 7.3 s, and with
// exact 12-digit constants none proved the optimum within 8 s.
#include <fmt/format.h>
#include <z3++.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "synthesizer/budget.h"
#include "synthesizer/model.h"
#include "synthesizer/watchdog.h"

namespace braid::synth {
namespace {

using Clock = std::chrono::steady_clock;

// The search stops once the best schedule is within this fraction of the lower bound (lowerBound): proving the
// last fraction of a percent can take the whole time limit (2-node NDv2 all-to-all: 5684.8 µs found in 0.4 s,
// bound 5665.0 µs, no proof in 20 s). The routing stage stops at the same gap.
constexpr double kRelativeGap = 0.01;

double tolerance(double x) { return 1e-9 * std::max(1.0, std::fabs(x)); }

// Everything about the input schedule the model and the longest-path pass need.
struct Prepared {
  std::vector<int> pred;                         // transfer delivering the chunk to the link's source, -1 at the owner
  std::vector<int> link_pos;                     // position in link_order
  std::vector<int> link_prev;                    // previous transfer on the same link, -1 for the first
  std::vector<char> leaf;                        // no transfer forwards this one's chunk further
  std::vector<std::vector<int>> resource_order;  // per physical link: transfers in input start order
  std::vector<double> beta;                      // per transfer: bytes / link bandwidth (µs)
  std::vector<double> alpha;                     // per transfer: link α (µs)
};

Status prepare(const LogicalTopology& logical, const ChunkProblem& problem, const Schedule& s, Prepared* prep) {
  const int num_transfers = static_cast<int>(s.transfers.size());
  const int num_links = static_cast<int>(logical.links.size());
  const int n = logical.num_ranks;
  if (static_cast<int>(s.link_order.size()) != num_links) {
    return invalidArgument(fmt::format("schedule: link_order has {} entries, the logical topology {} links",
                                       s.link_order.size(), num_links));
  }
  prep->link_pos.assign(num_transfers, -1);
  prep->link_prev.assign(num_transfers, -1);
  for (int l = 0; l < num_links; ++l) {
    for (size_t i = 0; i < s.link_order[l].size(); ++i) {
      const int t = s.link_order[l][i];
      if (t < 0 || t >= num_transfers || s.transfers[t].link != l || prep->link_pos[t] >= 0) {
        return invalidArgument(
            fmt::format("schedule: link_order[{}][{}] = {} is not a transfer of link {} listed once", l, i, t, l));
      }
      prep->link_pos[t] = static_cast<int>(i);
      prep->link_prev[t] = i > 0 ? s.link_order[l][i - 1] : -1;
    }
  }
  std::vector<std::vector<int>> deliver(problem.chunks.size());
  for (int t = 0; t < num_transfers; ++t) {
    const Transfer& tr = s.transfers[t];
    if (prep->link_pos[t] < 0) return invalidArgument(fmt::format("schedule: transfer {} is in no link_order", t));
    if (tr.chunk < 0 || tr.chunk >= static_cast<int>(problem.chunks.size())) {
      return invalidArgument(
          fmt::format("schedule: transfer {} names chunk {} of {}", t, tr.chunk, problem.chunks.size()));
    }
    std::vector<int>& d = deliver[tr.chunk];
    if (d.empty()) d.assign(n, -1);
    const int dst = logical.links[tr.link].dst;
    if (d[dst] >= 0) {
      return invalidArgument(
          fmt::format("schedule: chunk {} reaches rank {} twice (transfers {} and {})", tr.chunk, dst, d[dst], t));
    }
    d[dst] = t;
  }
  prep->pred.assign(num_transfers, -1);
  prep->leaf.assign(num_transfers, 1);
  prep->alpha.resize(num_transfers);
  prep->beta.resize(num_transfers);
  for (int t = 0; t < num_transfers; ++t) {
    const Transfer& tr = s.transfers[t];
    const LogicalLink& l = logical.links[tr.link];
    prep->alpha[t] = l.alpha_us;
    prep->beta[t] = problem.chunk_bytes / (l.gbps * 1e3);
    if (l.src == problem.chunks[tr.chunk].owner) continue;
    const int p = deliver[tr.chunk].empty() ? -1 : deliver[tr.chunk][l.src];
    if (p < 0) {
      return invalidArgument(fmt::format("schedule: transfer {} sends chunk {} from rank {}, which never receives it",
                                         t, tr.chunk, l.src));
    }
    prep->pred[t] = p;
    prep->leaf[p] = 0;
  }
  // Physical links in the order the input uses them: by start time, then link and position (members of a
  // group share a start and keep their link order).
  std::vector<int> by_start(num_transfers);
  std::iota(by_start.begin(), by_start.end(), 0);
  std::sort(by_start.begin(), by_start.end(), [&](int a, int b) {
    const Transfer& x = s.transfers[a];
    const Transfer& y = s.transfers[b];
    if (x.start_us != y.start_us) return x.start_us < y.start_us;
    if (x.link != y.link) return x.link < y.link;
    return prep->link_pos[a] < prep->link_pos[b];
  });
  prep->resource_order.assign(logical.resource_gbps.size(), {});
  for (int t : by_start) {
    for (int e : logical.links[s.transfers[t].link].resources) prep->resource_order[e].push_back(t);
  }
  return Status::ok();
}

// Earliest times for fixed orders and groups: together[t] = t travels in one message with link_prev[t].
// Longest path over group start times S (difference constraints S_g >= S_h + w) by repeated passes in the
// order of `key` (one pass when the order is topological). Fills start/end (end = the group's arrival) and
// returns the makespan, or -1 when the constraints have a positive cycle (no schedule exists).
double asapTimes(const LogicalTopology& logical, const ChunkProblem& problem, const Schedule& s, const Prepared& prep,
                 const std::vector<char>& together, const std::vector<double>& key, std::vector<double>* start,
                 std::vector<double>* end) {
  const int num_transfers = static_cast<int>(s.transfers.size());
  std::vector<int> group(num_transfers, -1), index(num_transfers, 0);
  std::vector<int> head;  // group -> first transfer
  std::vector<int> size;  // group -> members
  for (const std::vector<int>& order : s.link_order) {
    for (int t : order) {
      const int prev = prep.link_prev[t];
      if (prev >= 0 && together[t]) {
        group[t] = group[prev];
        index[t] = index[prev] + 1;
        ++size[group[t]];
      } else {
        group[t] = static_cast<int>(head.size());
        head.push_back(t);
        size.push_back(1);
      }
    }
  }
  const int num_groups = static_cast<int>(head.size());
  auto arrival = [&](int g) { return prep.alpha[head[g]] + size[g] * prep.beta[head[g]]; };  // from S_g
  struct Edge {
    int to;
    double w;
  };
  std::vector<std::vector<Edge>> out(num_groups);
  for (int t = 0; t < num_transfers; ++t) {
    const int g = group[t];
    if (prep.pred[t] >= 0) out[group[prep.pred[t]]].push_back({g, arrival(group[prep.pred[t]])});
    const int prev = prep.link_prev[t];
    if (prev >= 0 && group[prev] != g) out[group[prev]].push_back({g, arrival(group[prev])});
  }
  for (size_t e = 0; e < prep.resource_order.size(); ++e) {
    const std::vector<int>& order = prep.resource_order[e];
    const double occupancy = problem.chunk_bytes / (logical.resource_gbps[e] * 1e3);
    for (size_t i = 1; i < order.size(); ++i) {
      const int p = order[i - 1], q = order[i];
      if (group[p] == group[q]) continue;
      out[group[p]].push_back({group[q], index[p] * prep.beta[p] + occupancy - index[q] * prep.beta[q]});
    }
  }
  std::vector<int> order(num_groups);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return key[head[a]] < key[head[b]]; });
  std::vector<double> S(num_groups, 0.0);
  bool changed = true;
  for (int pass = 0; changed; ++pass) {
    if (pass > num_groups + 1) return -1;
    changed = false;
    for (int h : order) {
      for (const Edge& e : out[h]) {
        const double v = S[h] + e.w;
        if (v > S[e.to] + tolerance(v)) {
          S[e.to] = v;
          changed = true;
        }
      }
    }
  }
  start->assign(num_transfers, 0);
  end->assign(num_transfers, 0);
  double makespan = 0;
  for (int t = 0; t < num_transfers; ++t) {
    (*start)[t] = S[group[t]];
    (*end)[t] = S[group[t]] + arrival(group[t]);
    makespan = std::max(makespan, (*end)[t]);
  }
  return makespan;
}

// Groups of a schedule as together flags (t travels with link_prev[t]).
std::vector<char> togetherOf(const Schedule& s, const Prepared& prep) {
  std::vector<char> together(s.transfers.size(), 0);
  for (const std::vector<int>& g : s.groups) {
    for (size_t i = 1; i < g.size(); ++i) {
      if (g[i] >= 0 && g[i] < static_cast<int>(together.size()) && prep.link_prev[g[i]] == g[i - 1]) together[g[i]] = 1;
    }
  }
  return together;
}

void apply(const Prepared& prep, const std::vector<char>& together, const std::vector<double>& start,
           const std::vector<double>& end, double makespan, Schedule* s) {
  for (size_t t = 0; t < s->transfers.size(); ++t) {
    s->transfers[t].start_us = start[t];
    s->transfers[t].end_us = end[t];
  }
  s->groups.clear();
  for (const std::vector<int>& order : s->link_order) {
    for (int t : order) {
      if (prep.link_prev[t] >= 0 && together[t]) {
        s->groups.back().push_back(t);
      } else {
        s->groups.push_back({t});
      }
    }
  }
  s->makespan_us = makespan;
}

// Union-find over transfers for the symmetry classes.
int findRoot(std::vector<int>& parent, int x) {
  while (parent[x] != x) x = parent[x] = parent[parent[x]];
  return x;
}

// A duration for the model, rounded up to whole nanoseconds (see the header comment).
z3::expr realValue(z3::context& zc, double x_us) {
  return zc.real_val(fmt::format("{}/1000", static_cast<long long>(std::ceil(x_us * 1000 - 1e-6))).c_str());
}

// The Z3 model of the header comment, over symmetry classes.
struct Model {
  explicit Model(z3::context& zc) : makespan(zc.real_const("M")), constraints(zc) {}
  std::vector<int> cls;                          // transfer -> class
  std::vector<z3::expr> start, rstart, arrival;  // per class
  std::vector<z3::expr> bools;                   // together decisions
  std::vector<int> bool_of;                      // transfer -> index in bools (together with link_prev), -1 none
  z3::expr makespan;
  z3::expr_vector constraints;
  int variables = 0;
};

void buildModel(z3::context& zc, const LogicalTopology& logical, const ChunkProblem& problem, const Schedule& s,
                const Prepared& prep, int max_contig, Model* m) {
  const int num_transfers = static_cast<int>(s.transfers.size());
  const int num_links = static_cast<int>(logical.links.size());
  // Symmetry classes: t ~ image of t under each group element, when the image is a transfer of the schedule on
  // a link of the same kind and cost and both start at the same time in the input.
  std::vector<int> parent(num_transfers);
  std::iota(parent.begin(), parent.end(), 0);
  std::vector<std::vector<int>> at(problem.chunks.size());  // chunk -> rank -> transfer delivering it
  for (int t = 0; t < num_transfers; ++t) {
    std::vector<int>& a = at[s.transfers[t].chunk];
    if (a.empty()) a.assign(logical.num_ranks, -1);
    a[logical.links[s.transfers[t].link].dst] = t;
  }
  for (size_t g = 1; g < logical.symmetry.size() && g < problem.image.size(); ++g) {
    std::vector<int> link_image(num_links);
    for (int l = 0; l < num_links; ++l) link_image[l] = logical.imageLink(static_cast<int>(g), l);
    for (int t = 0; t < num_transfers; ++t) {
      const Transfer& tr = s.transfers[t];
      const int c = problem.image[g][tr.chunk];
      const int l = link_image[tr.link];
      if (c < 0 || l < 0 || at[c].empty()) continue;
      const int u = at[c][logical.links[l].dst];
      if (u < 0 || s.transfers[u].link != l) continue;
      const LogicalLink& a = logical.links[tr.link];
      const LogicalLink& b = logical.links[l];
      if (a.inter_node != b.inter_node || std::fabs(a.alpha_us - b.alpha_us) > tolerance(a.alpha_us) ||
          std::fabs(a.gbps - b.gbps) > tolerance(a.gbps)) {
        continue;
      }
      if (std::fabs(tr.start_us - s.transfers[u].start_us) > tolerance(tr.start_us)) continue;
      parent[findRoot(parent, t)] = findRoot(parent, u);
    }
  }
  m->cls.assign(num_transfers, -1);
  std::vector<int> rep;  // class -> a member
  for (int t = 0; t < num_transfers; ++t) {
    const int root = findRoot(parent, t);
    if (m->cls[root] < 0) {
      m->cls[root] = static_cast<int>(rep.size());
      rep.push_back(root);
    }
    m->cls[t] = m->cls[root];
  }
  const int num_classes = static_cast<int>(rep.size());
  for (int k = 0; k < num_classes; ++k) {
    const int t = rep[k];
    z3::expr st = zc.real_const(fmt::format("s{}", k).c_str());
    ++m->variables;
    m->start.push_back(st);
    if (logical.links[s.transfers[t].link].inter_node && max_contig > 1) {
      m->rstart.push_back(zc.real_const(fmt::format("q{}", k).c_str()));
      m->arrival.push_back(zc.real_const(fmt::format("a{}", k).c_str()));
      m->variables += 2;
    } else {
      m->rstart.push_back(st);
      m->arrival.push_back(st + realValue(zc, prep.alpha[t] + prep.beta[t]));
    }
  }
  ++m->variables;  // makespan

  std::set<std::tuple<char, int, int, double>> seen;
  auto once = [&](char kind, int a, int b, double w) { return seen.insert({kind, a, b, w}).second; };
  auto add = [&](const z3::expr& e) { m->constraints.push_back(e); };
  m->bool_of.assign(num_transfers, -1);
  std::map<std::pair<int, int>, int> bool_index;  // (class of link_prev, class) -> Bool
  for (int t = 0; t < num_transfers; ++t) {
    const int k = m->cls[t];
    const LogicalLink& l = logical.links[s.transfers[t].link];
    const bool grouping = l.inter_node && max_contig > 1;
    const z3::expr alpha = realValue(zc, prep.alpha[t]);
    const z3::expr beta = realValue(zc, prep.beta[t]);
    if (prep.pred[t] < 0) {
      if (once('Z', k, 0, 0)) add(m->start[k] >= 0);
    } else {
      const int kp = m->cls[prep.pred[t]];
      if (once('P', k, kp, 0)) add(m->start[k] >= m->arrival[kp]);
    }
    const int prev = prep.link_prev[t];
    if (prev < 0) {
      if (grouping && once('H', k, 0, 0)) add(m->rstart[k] == m->start[k]);
    } else {
      const int kq = m->cls[prev];
      if (!grouping) {
        if (once('L', kq, k, 0)) add(m->start[k] >= m->arrival[kq]);
      } else {
        auto [it, fresh] = bool_index.insert({{kq, k}, static_cast<int>(m->bools.size())});
        if (fresh) {
          const z3::expr b = zc.bool_const(fmt::format("g{}", m->bools.size()).c_str());
          m->bools.push_back(b);
          ++m->variables;
          add(z3::implies(b, m->start[k] == m->start[kq] && m->rstart[k] == m->rstart[kq] + beta &&
                                 m->arrival[kq] == m->arrival[k]));
          add(z3::implies(!b, m->start[k] >= m->arrival[kq] && m->rstart[k] == m->start[k] &&
                                  m->arrival[kq] == m->rstart[kq] + alpha + beta));
        }
        m->bool_of[t] = it->second;
      }
    }
    const bool last = prep.link_pos[t] + 1 == static_cast<int>(s.link_order[l.id].size());
    if (grouping && last && once('E', k, 0, 0)) add(m->arrival[k] == m->rstart[k] + alpha + beta);
    if (prep.leaf[t] && once('M', k, 0, 0)) add(m->makespan >= m->arrival[k]);
  }
  // At most max_contig transfers per group: no max_contig consecutive Bools all true.
  std::set<std::vector<int>> windows;
  for (int l = 0; l < num_links; ++l) {
    const std::vector<int>& order = s.link_order[l];
    if (!logical.links[l].inter_node || max_contig <= 1) continue;
    for (size_t j = 1; j + max_contig <= order.size(); ++j) {
      std::vector<int> w;
      for (int i = 0; i < max_contig; ++i) w.push_back(m->bool_of[order[j + i]]);
      if (!windows.insert(w).second) continue;
      z3::expr_vector lits(zc);
      for (int b : w) lits.push_back(!m->bools[b]);
      add(z3::mk_or(lits));
    }
  }
  for (size_t e = 0; e < prep.resource_order.size(); ++e) {
    const std::vector<int>& order = prep.resource_order[e];
    const double occupancy = problem.chunk_bytes / (logical.resource_gbps[e] * 1e3);
    for (size_t i = 1; i < order.size(); ++i) {
      const int kp = m->cls[order[i - 1]], kn = m->cls[order[i]];
      if (kp == kn || !once('R', kp, kn, occupancy)) continue;
      add(m->rstart[kn] >= m->rstart[kp] + realValue(zc, occupancy));
    }
  }
}

// A lower bound on the makespan of any schedule of the model: the longest chunk path with every hop costing
// at least α + β (grouping saves link time, not latency), the load of every link (ceil(m / max_contig) α +
// m β on inter-node links) and of every physical link.
double lowerBound(const LogicalTopology& logical, const ChunkProblem& problem, const Schedule& s, const Prepared& prep,
                  int max_contig) {
  const int num_transfers = static_cast<int>(s.transfers.size());
  std::vector<double> arrive(num_transfers, -1);
  double bound = 0;
  for (int t = 0; t < num_transfers; ++t) {
    // Walk up to the first transfer with a known arrival, then down again.
    std::vector<int> chain;
    for (int u = t; u >= 0 && arrive[u] < 0; u = prep.pred[u]) chain.push_back(u);
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      const int u = *it;
      arrive[u] = (prep.pred[u] >= 0 ? arrive[prep.pred[u]] : 0.0) + prep.alpha[u] + prep.beta[u];
    }
    bound = std::max(bound, arrive[t]);
  }
  for (size_t l = 0; l < s.link_order.size(); ++l) {
    const LogicalLink& link = logical.links[l];
    const int count = static_cast<int>(s.link_order[l].size());
    if (count == 0) continue;
    const double beta = problem.chunk_bytes / (link.gbps * 1e3);
    const int messages = link.inter_node && max_contig > 1 ? (count + max_contig - 1) / max_contig : count;
    bound = std::max(bound, messages * link.alpha_us + count * beta);
  }
  for (size_t e = 0; e < prep.resource_order.size(); ++e) {
    bound = std::max(bound, prep.resource_order[e].size() * problem.chunk_bytes / (logical.resource_gbps[e] * 1e3));
  }
  return bound;
}

}  // namespace

Status scheduleExact(const LogicalTopology& logical, const ChunkProblem& problem, Schedule* schedule, int max_contig,
                     const StageContext& ctx, StageReport* report) {
  const auto wall_start = Clock::now();
  StageReport local;
  StageReport& rep = report ? *report : local;
  rep = StageReport{};
  rep.name = "scheduling";
  auto finish = [&](const std::string& status) {
    rep.status = status;
    rep.makespan_us = schedule->makespan_us;
    rep.seconds = std::chrono::duration<double>(Clock::now() - wall_start).count();
    return Status::ok();
  };
  if (schedule == nullptr) return invalidArgument("scheduleExact: no schedule");
  Prepared prep;
  BRAID_RETURN_IF_ERROR(prepare(logical, problem, *schedule, &prep));
  const Schedule& s = *schedule;
  const int num_transfers = static_cast<int>(s.transfers.size());
  const double input_makespan = s.makespan_us;

  // The input's decisions, at their earliest times: the starting point and the fallback.
  std::vector<char> best_together = togetherOf(s, prep);
  std::vector<double> input_key(num_transfers);
  for (int t = 0; t < num_transfers; ++t) input_key[t] = s.transfers[t].start_us;
  std::vector<double> best_start, best_end;
  double best = asapTimes(logical, problem, s, prep, best_together, input_key, &best_start, &best_end);
  if (best < 0) {
    return invalidArgument("schedule: the fixed link and resource orders and groups admit no schedule (cyclic)");
  }
  auto keep = [&](const std::string& why) {
    if (best <= input_makespan + tolerance(input_makespan)) {
      apply(prep, best_together, best_start, best_end, best, schedule);
    }
    return finish(why);
  };

  bool any_grouping = false;
  for (int t = 0; t < num_transfers; ++t) {
    any_grouping |= logical.links[s.transfers[t].link].inter_node && prep.link_prev[t] >= 0;
  }
  if (!any_grouping || max_contig <= 1) {
    // No contiguity decision: the longest-path times of the fixed orders are optimal.
    ctx.report({.stage = "scheduling",
                .detail = "no inter-node contiguity decisions: longest-path times",
                .best_makespan_us = best});
    return keep("exact (no contiguity decisions)");
  }
  if (ctx.units == 0) return keep("kept greedy (no solver budget left)");
  if (ctx.secondsLeft() <= 0.01) {
    ctx.clockCut("scheduling");
    return keep("kept greedy (no time left for the solver)");
  }

  const double lb = std::min(best, lowerBound(logical, problem, s, prep, max_contig));
  const double solver_start_elapsed = ctx.elapsed();
  std::string status;
  bool improved = false;
  uint64_t units_left = ctx.units;
  try {
    z3::context zc;
    Watchdog::SolverGuard guard(ctx.watchdog, zc, ctx.deadline);  // interrupts zc's checks at the deadline
    struct Spent {  // the units spent, into the report, however the search ends
      const StageContext& ctx;
      const uint64_t& left;
      StageReport& rep;
      ~Spent() { rep.solver_units = ctx.units - left; }
    } spent{ctx, units_left, rep};
    Model m(zc);
    buildModel(zc, logical, problem, s, prep, max_contig, &m);
    rep.variables = m.variables;
    rep.constraints = static_cast<int>(m.constraints.size());
    ctx.report({.stage = "scheduling",
                .detail = fmt::format("{} transfers, {} contiguity Bools, makespan bounds [{:.6g}, {:.6g}] us: descent",
                                      num_transfers, m.bools.size(), lb, best),
                .variables = rep.variables,
                .constraints = rep.constraints,
                .best_makespan_us = best});
    z3::solver solver(zc);
    for (unsigned i = 0; i < m.constraints.size(); ++i) solver.add(m.constraints[i]);
    // Descent: ask for a schedule better than the best so far by more than `gap`; a feasible answer's Bools give
    // an earliest-time schedule (often far below the target), an infeasible one proves the best optimal.
    const double gap = std::max(1e-4 * best, 0.01);
    double target_hi = best;  // the model has a solution with M <= target_hi (up to rounding)
    bool stopped = false, proven = false, within_gap = false;
    for (int probe = 1;; ++probe) {
      const double target = target_hi - gap;
      if (target < lb) {
        proven = true;
        break;
      }
      if (best - lb <= kRelativeGap * best) {
        within_gap = true;
        break;
      }
      if (units_left == 0) {
        stopped = true;
        break;
      }
      z3::params params(zc);
      params.set("smt.arith.solver", 2u);
      solver.set(params);
      solver.push();
      solver.add(m.makespan <= realValue(zc, target));
      const z3::check_result r = checkWithin(solver, ctx, "scheduling", units_left, &units_left);
      std::string outcome;
      if (r == z3::sat) {
        z3::model zm = solver.get_model();
        std::vector<char> together(num_transfers, 0);
        std::vector<double> key(num_transfers);
        for (int t = 0; t < num_transfers; ++t) {
          if (m.bool_of[t] >= 0) together[t] = zm.eval(m.bools[m.bool_of[t]], true).is_true() ? 1 : 0;
          key[t] = zm.eval(m.start[m.cls[t]], true).as_double();
        }
        std::vector<double> st, en;
        const double value = asapTimes(logical, problem, s, prep, together, key, &st, &en);
        if (value < 0) {
          solver.pop();
          return internalError("scheduleExact: the contiguity decisions of Z3's model admit no schedule (model bug)");
        }
        if (value < best) {
          best = value;
          best_together = std::move(together);
          best_start = std::move(st);
          best_end = std::move(en);
          improved = true;
        }
        target_hi = std::min(target, best);
        outcome = fmt::format("feasible, schedule {:.6g} us", value);
      } else if (r == z3::unsat) {
        proven = true;
        outcome = "infeasible";
      } else {
        stopped = true;
        outcome = fmt::format("unknown ({})", solver.reason_unknown());
      }
      solver.pop();
      ctx.report({.stage = "scheduling",
                  .detail = fmt::format("probe {}: makespan <= {:.6g} us {}", probe, target, outcome),
                  .variables = rep.variables,
                  .constraints = rep.constraints,
                  .solver_seconds = ctx.elapsed() - solver_start_elapsed,
                  .best_makespan_us = best});
      if (proven || stopped) break;
    }
    if (proven) {
      status = "optimal";
    } else if (within_gap) {
      status = "optimal (gap <= 1%)";
    } else if (improved) {
      status = "feasible (budget)";
    } else {
      status = "kept greedy (budget spent before a better schedule)";
    }
  } catch (const z3::exception& e) {
    if (ctx.secondsLeft() <= 0) ctx.clockCut("scheduling");  // the watchdog's interrupt
    if (ctx.notes) ctx.notes->push_back(fmt::format("scheduling: Z3 error, input schedule kept: {}", e.msg()));
    status =
        improved ? fmt::format("feasible (Z3 error: {})", e.msg()) : fmt::format("kept greedy (Z3 error: {})", e.msg());
  }
  if (best > input_makespan + tolerance(input_makespan)) {
    return finish(
        fmt::format("kept greedy (exact schedule {:.6g} us is not better than {:.6g} us)", best, input_makespan));
  }
  apply(prep, best_together, best_start, best_end, best, schedule);
  return finish(status);
}

}  // namespace braid::synth
