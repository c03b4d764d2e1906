// Stage 1's Z3 model (routing_model.cc), shared by the driver (routing.cc) and the infeasibility diagnosis
// (routing_diagnosis.cc). The encoding is described at the top of routing.cc. Private to synthesizer/.
#pragma once

#include <fmt/format.h>
#include <z3++.h>

#include <chrono>
#include <limits>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "synthesizer/model.h"

namespace braid::synth::routing {

using SteadyClock = std::chrono::steady_clock;
constexpr int kInf = std::numeric_limits<int>::max() / 4;
constexpr double kGapTarget = 0.01;  // the makespan search stops at 1 % relative gap (bisection, linear relaxation)

// Constraint groups the infeasibility diagnosis names.
inline constexpr char kRelayGroup[] = "relay: inter-node links may carry only the chunks of gpus_to_sender_rev_map";
inline constexpr char kPathsGroup[] = "logical topology: shortest paths (+slack)";
inline constexpr char kSymmetryGroup[] = "symmetry: the sketch's symmetry offsets tie chunk routes";

/// "postcondition: rank R receives chunk (owner O, piece P)".
std::string postconditionName(int rank, const Chunk& chunk);
/// The kInfeasible message naming conflicting constraint groups.
std::string infeasibleMessage(const std::vector<std::string>& groups);

inline double secondsSince(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

/// May logical link `link` carry chunks of `owner` (the relay rule of inter-node links)?
bool relayAllows(const LogicalTopology& lt, int link, int owner);

/// Where a chunk of (owner, dest) may go: hop distances and candidate links.
struct Geometry {
  int owner = -1;
  int dest = -1;                  // all-to-all destination, -1 for gather-style chunks
  std::vector<int> dist;          // hops from the owner over usable links
  std::vector<int> dist_to_dest;  // hops to dest (all-to-all)
  std::vector<int> links;         // candidate links, sorted by id
  std::vector<int> extra;         // per rank: how many hops beyond dist a route may take to it (k(v) <= extra)
};

/// Candidate links (see routing.cc's file comment). `apply_relay` / `apply_paths` false give the diagnostic
/// model's wider sets (any link reachable from the owner, relay rules ignored).
Geometry makeGeometry(const LogicalTopology& lt, int owner, int dest, int slack, bool apply_relay, bool apply_paths);

/// Position of `link` in a sorted candidate list, -1 if absent.
int indexOf(const std::vector<int>& sorted, int link);

/// True makespan of the relaxation for routes `parent` (the objective the stage minimizes): max over logical links
/// of chunks x cost, over resources of chunks x bytes / bandwidth, and over chunk targets of the arrival time
/// along the route. -1 when a route is broken (a target without a chain to the owner).
double routesMakespan(const LogicalTopology& lt, const ChunkProblem& pb, const std::vector<std::vector<int>>& parent);

/// Removes transfers to ranks that are not targets and forward nothing (repeatedly); they only add load.
void pruneUselessLeaves(const LogicalTopology& lt, const ChunkProblem& pb, std::vector<std::vector<int>>* parent);

/// Number of distinct intra-node logical links the routes use (the hyperedge objective).
int distinctIntraLinks(const LogicalTopology& lt, const std::vector<std::vector<int>>& parent);

/// The encoding of one chunk in the main model.
struct ChunkEnc {
  int geometry = -1;
  std::vector<int> slot;  // x slot per candidate link (Geometry::links order)
  bool constrained = false;
};

/// The main model: route variables of representative chunks, structural constraints in base(), load and arrival
/// constraints per makespan bound (boundConstraints), bounds and a greedy incumbent.
class RoutingModel {
 public:
  RoutingModel(z3::context& z, const LogicalTopology& lt, const ChunkProblem& pb, int slack)
      : z_(z), lt_(lt), pb_(pb), slack_(slack), base_(z), identity_(lt.num_ranks) {
    std::iota(identity_.begin(), identity_.end(), 0);
  }

  /// Computes candidate geometries (cheap, no Z3). Returns the postcondition that no route can meet, if any.
  std::optional<std::pair<int, int>> computeGeometry();

  const Geometry& geometry(int c) const { return geoms_[enc_[c].geometry]; }

  int representative(int c) const { return pb_.orbit.size() == pb_.chunks.size() ? pb_.orbit[c].first : c; }
  int element(int c) const { return pb_.orbit.size() == pb_.chunks.size() ? pb_.orbit[c].second : 0; }

  /// Lower bound on the makespan: the slowest chunk's fastest arrival over its candidate links, and cuts (see
  /// cutBound) around every rank (chunks it needs enter it, chunks it owns leave it) and every node.
  double lowerBound() const;

  /// Builds variables and structural constraints. `latency_floor`: chunks whose longest possible arrival is at
  /// most this need no arrival-time variables (the makespan bound is never below it).
  void build(double latency_floor);

  /// Constraints for makespan bound `bound` (µs): loads as cardinality constraints, arrivals <= bound.
  z3::expr_vector boundConstraints(double bound) const;

  /// The z3::optimize form of the loads: t >= cost x count for every link, bytes / bandwidth x count for every
  /// resource, t >= arrival for every chunk target with arrival variables.
  z3::expr_vector makespanAtLeastLoads(const z3::expr& t) const;

  /// Without arrival-time variables the makespan of any routing above the latency floor is a load: k x cost of a
  /// link, or k x bytes / bandwidth of a resource its links do not dominate. The smallest such value >= `bound`
  /// (`bound` itself when arrival times are modeled).
  double nextLoadValue(double bound) const;

  /// Lower bound from the linear relaxation (x in [0, 1], no hop levels, no arrival times): receive once, forward
  /// at most what was received, loads within T; minimize T. One LP solved by GLPK's dual simplex under its own time
  /// limit (`seconds`; GLPK checks its clock between iterations). Returns the optimum
  /// (every routing takes at least this long, µs, lowered by GLPK's tolerance), or nullopt when GLPK did not reach
  /// it in time or the relaxation is infeasible. Measured (2 shared cores): pcie-2s4g all-to-all (chunkup 1, slack
  /// 1) 729 columns, 862 rows, 0.012 s; dgx1-v100 all-to-all (chunkup 6) 2737 columns, 3920 rows, 0.58 s. Z3 on the
  /// pcie-2s4g relaxation (LRA checks of a bisection on T, arith.solver=2) ran for minutes past its 1 s timeout and
  /// ignored Z3_interrupt as well; z3::optimize with the default arithmetic solver did the same on DGX-1 all-to-all
  /// chunkup 12. `*clock_cut` (may be null) is set when GLPK's time limit ended the solve.
  std::optional<double> lpBound(double seconds, bool* clock_cut = nullptr) const;

  /// Routes of every chunk under `model`.
  std::vector<std::vector<int>> extract(const z3::model& model) const;

  /// Are `parent`'s routes a solution of the structural constraints (candidates, trees/paths, hop budgets,
  /// symmetry ties), up to the order of interchangeable pieces? Used to start from the greedy routes without a
  /// solver call (the pieces' order changes no load, so the bisection is unaffected).
  bool satisfiedBy(const std::vector<std::vector<int>>& parent) const;

  /// Load-balancing greedy: each representative's BFS tree (path) takes, rank by rank from the farthest, the
  /// candidate in-link from the previous layer whose link would finish earliest; images copy it.
  std::vector<std::vector<int>> greedy() const;

  /// The hyperedge objective's terms: one Boolean per intra-node link that some chunk may use, true iff used.
  z3::expr_vector usedLinkDefinitions(z3::expr_vector* used) const;

  const z3::expr_vector& base() const { return base_; }
  double latencyFloor() const { return latency_floor_; }
  const std::set<int>& suspects() const { return suspects_; }
  int numVariables() const { return num_vars_; }
  bool usesReals() const { return uses_reals_; }

 private:
  int newVar(const std::string& name);
  int newConstant(bool value);
  z3::expr realVal(double v) const { return z_.real_val(fmt::format("{:.9f}", v).c_str()); }

  /// Variables of chunk c = image[g][rep]: the representative's, moved by g; where the candidate sets do not
  /// correspond, fresh variables forced off (and the representative's non-corresponding links forced off).
  void mapImage(int c, int rep, int g);

  /// Per-chunk constraints: receive once (exactly once at targets), send only what was received, non-targets
  /// forward what they receive, all-to-all routes are paths, hop levels, and arrival times where needed.
  void constrainChunk(int c, double latency_floor);

  /// The pieces of one (owner, dest) are interchangeable: swapping two pieces' routes (for a whole orbit of
  /// representatives at once) changes no load, arrival or symmetry tie. So the representatives' pieces are ordered:
  /// the route variables of piece p are lexicographically >= those of piece p + 1 (standard lex-leader encoding with
  /// prefix-equality literals). This removes the chunkup! equivalent copies of every solution from unsat proofs.
  void breakPieceSymmetry();

  void addCardinality(const std::vector<std::pair<int, int>>& load, long long k, z3::expr_vector* out) const;

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

/// Why the main model is unsatisfiable: the first orbit whose diagnostic model is, orbits with links forced off by
/// the symmetry first (they are where a conflict can come from). Empty when none was found within `units` Z3
/// resource units (budget.h) or by ctx's deadline (ctx.watchdog, when set, interrupts checks past it).
std::vector<std::string> diagnose(const LogicalTopology& lt, const ChunkProblem& pb, const RoutingModel& main_model,
                                  int slack, uint64_t units, const StageContext& ctx);

}  // namespace braid::synth::routing
