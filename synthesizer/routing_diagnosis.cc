// Stage 1's infeasibility diagnosis: when the main model (routing_model.h) has no routing, a diagnostic model per
// symmetry orbit with per-chunk variables over every reachable link, whose constraint groups (postconditions, relay
// rules, shortest paths, symmetry) are tracked literals; the unsat core, shrunk by deletion, names the groups that
// conflict.
#include <fmt/format.h>
#include <z3++.h>

#include <algorithm>
#include <deque>
#include <map>
#include <numeric>

#include "synthesizer/budget.h"
#include "synthesizer/routing_model.h"
#include "synthesizer/watchdog.h"

namespace braid::synth::routing {
namespace {

/// Without the path rule the orbit's routes are free but for relay rules and symmetry ties, so those conflicts are
/// reachability questions: the representative may use a link only when the link and all its images (under the
/// elements mapping it to the orbit's chunks, and its stabilizers) exist and, with relay rules, may carry the
/// chunks they would carry. A target unreachable without relay rules conflicts with the symmetry alone; one
/// unreachable only with them, with relay rules and symmetry. Both cores are minimal (each chunk alone can reach
/// every target: checked before any solving). Z3 takes long to refute these unrestricted routings. Returns the
/// conflicting groups, or nothing.
std::vector<std::string> reachabilityConflict(const LogicalTopology& lt, const ChunkProblem& pb,
                                              const RoutingModel& main_model, const std::vector<int>& chunks) {
  const int n = lt.num_ranks;
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
  if (const int t = unreachable_target(true); t >= 0) return {postconditionName(t, chunk), kRelayGroup, kSymmetryGroup};
  return {};
}

/// The diagnostic model of one orbit: its solver, the group literals and the postconditions' literals.
struct Diagnostic {
  explicit Diagnostic(z3::context& z)
      : relay(z.bool_const("group_relay")),
        paths(z.bool_const("group_paths")),
        symmetry(z.bool_const("group_symmetry")),
        s(z) {}
  z3::expr relay;
  z3::expr paths;
  z3::expr symmetry;
  std::vector<z3::expr> post_lits;
  std::vector<std::string> post_names;
  z3::solver s;
  std::vector<Geometry> wide;            // per chunk: candidate links without relay or path rules
  std::vector<std::vector<z3::expr>> x;  // per chunk: one Boolean per wide link
};

/// Variables and per-chunk constraints: receive at most once, targets receive (tracked), non-targets forward,
/// all-to-all routes are paths, hop levels; links outside the main model's candidates are off under the relay or
/// path group.
void addChunkConstraints(Diagnostic& d, const LogicalTopology& lt, const ChunkProblem& pb,
                         const RoutingModel& main_model, int slack, const std::vector<int>& chunks) {
  const int n = lt.num_ranks;
  z3::context& z = d.s.ctx();
  z3::solver& s = d.s;
  std::vector<Geometry>& wide = d.wide;
  std::vector<std::vector<z3::expr>>& x = d.x;
  const z3::expr& relay = d.relay;
  const z3::expr& paths = d.paths;
  std::vector<z3::expr>& post_lits = d.post_lits;
  std::vector<std::string>& post_names = d.post_names;
  wide.resize(pb.chunks.size());
  x.resize(pb.chunks.size());
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
}

/// Symmetry ties between each chunk and its representative (stabilizers included), under the symmetry group.
void addSymmetryTies(Diagnostic& d, const LogicalTopology& lt, const ChunkProblem& pb, const RoutingModel& main_model,
                     const std::vector<int>& chunks) {
  z3::solver& s = d.s;
  const std::vector<Geometry>& wide = d.wide;
  const std::vector<std::vector<z3::expr>>& x = d.x;
  const z3::expr& symmetry = d.symmetry;
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
}

/// Checks the model under every tracked literal and shrinks the unsat core by deletion (each check with a tenth of
/// the units; undecided ones stay). At most 4 postconditions are named, then a count of the others. Spends at most
/// `*units` (and subtracts what it spent).
std::vector<std::string> shrinkCore(Diagnostic& d, const StageContext& ctx, uint64_t* units) {
  z3::context& z = d.s.ctx();
  z3::solver& s = d.s;
  const std::vector<z3::expr>& post_lits = d.post_lits;
  // Tracked literals: every postcondition, then the three groups.
  std::vector<z3::expr> lits = post_lits;
  std::vector<std::string> names = d.post_names;
  lits.push_back(d.relay);
  names.push_back(kRelayGroup);
  lits.push_back(d.paths);
  names.push_back(kPathsGroup);
  lits.push_back(d.symmetry);
  names.push_back(kSymmetryGroup);
  const uint64_t per_check = std::max<uint64_t>(1, *units / 10);
  auto check_with = [&](const std::vector<int>& active, uint64_t limit) -> z3::check_result {
    z3::expr_vector assumptions(z);
    for (int i : active) assumptions.push_back(lits[i]);
    return checkWithin(s, ctx, "routing diagnosis", limit, units, assumptions);
  };
  std::vector<int> all(lits.size());
  std::iota(all.begin(), all.end(), 0);
  if (check_with(all, *units) != z3::unsat) return {};
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
    if (check_with(trial, per_check) != z3::unsat) kept[i] = 1;
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

/// The diagnostic model of the chunks `chunks` (one symmetry orbit: without loads, orbits do not interact): per-chunk
/// variables over every link reachable from the owner, relay rules ignored; hop counts as reals; the four
/// constraint groups as tracked literals. Returns the conflicting groups of its unsat core, shrunk by deletion,
/// or nothing when the orbit is satisfiable or undecided within `*units` (less what it spends).
std::vector<std::string> diagnoseOrbit(const LogicalTopology& lt, const ChunkProblem& pb,
                                       const RoutingModel& main_model, int slack, const std::vector<int>& chunks,
                                       const StageContext& ctx, uint64_t* units) {
  if (std::vector<std::string> groups = reachabilityConflict(lt, pb, main_model, chunks); !groups.empty())
    return groups;
  z3::context z;
  Watchdog::SolverGuard guard(ctx.watchdog, z, ctx.deadline);
  Diagnostic d(z);
  addChunkConstraints(d, lt, pb, main_model, slack, chunks);
  addSymmetryTies(d, lt, pb, main_model, chunks);
  return shrinkCore(d, ctx, units);
}

}  // namespace

/// Why the main model is unsatisfiable: the first orbit whose diagnostic model is, orbits with links forced off by
/// the symmetry first (they are where a conflict can come from). Empty when none was found within `units`.
std::vector<std::string> diagnose(const LogicalTopology& lt, const ChunkProblem& pb, const RoutingModel& main_model,
                                  int slack, uint64_t units, const StageContext& ctx) {
  std::map<int, std::vector<int>> orbits;  // representative -> its chunks
  for (size_t c = 0; c < pb.chunks.size(); ++c)
    orbits[main_model.representative(static_cast<int>(c))].push_back(static_cast<int>(c));
  std::vector<int> order(main_model.suspects().begin(), main_model.suspects().end());
  for (const auto& [rep, chunks] : orbits)
    if (!main_model.suspects().count(rep)) order.push_back(rep);
  for (int rep : order) {
    if (units == 0) break;
    std::vector<std::string> groups = diagnoseOrbit(lt, pb, main_model, slack, orbits[rep], ctx, &units);
    if (!groups.empty()) return groups;
  }
  return {};
}

}  // namespace braid::synth::routing
