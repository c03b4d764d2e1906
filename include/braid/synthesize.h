// Sketch-guided synthesis in TACCL's line (Shah et al., "TACCL: Guiding Collective Algorithm Synthesis
// using Communication Sketches", NSDI'23; ../shared/reference/taccl_msccl.md §1.5) on Z3 instead of
// Gurobi: routing (Z3) -> ordering (greedy list scheduling with TACCL's heuristics) -> exact scheduling
// with contiguity (Z3) -> MSCCL program. Reduce-scatter is the all-gather run backwards, all-reduce is
// reduce-scatter followed by all-gather (TACCL §1.6). Every returned algorithm has passed verify().
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "braid/algorithm.h"
#include "braid/bounds.h"
#include "braid/collective.h"
#include "braid/sketch.h"
#include "braid/status.h"
#include "braid/topology.h"

namespace braid {

/// A progress report from a running stage (the CLI prints these on stderr after 2 s).
struct SynthesisProgress {
  std::string stage;   // "routing", "ordering", "scheduling", "lowering", "verify"
  std::string detail;  // e.g. "bisection 5/12: T <= 812.3 us feasible"
  int variables = 0;   // solver problem size, when a solver runs
  int constraints = 0;
  double solver_seconds = 0;     // seconds spent in Z3 so far in this stage
  double elapsed_seconds = 0;    // since synthesize() started
  double best_makespan_us = -1;  // best makespan found so far in the stage's model, -1 = none yet
};

/// How synthesize() builds the algorithm.
enum class SynthesisMethod {
  /// TACCL's sketch-guided pipeline: routing (Z3), greedy ordering, exact scheduling with contiguity (Z3).
  kTaccl,
  /// Tree packing (ForestColl: Zhao et al., arXiv 2402.06787), in the route model: the optimal rate of any
  /// all-gather made of trees along Topology::route from a linear program, k spanning out-trees per root packed by
  /// Edmonds' branching theorem with exact integer max-flows, pieces pipelined down the trees. All-gather,
  /// reduce-scatter (the trees reversed) and all-reduce (reduce-scatter, then all-gather); the sketch is not used.
  /// All-to-all: the max-concurrent flow over the routes (include/braid/bounds.h allToAllFlow, an LP on GLPK) cut
  /// into relay paths, `forest_pieces` pieces per block dealt to them, a fluid schedule (synthesizer/forest.h).
  kForest,
  /// SCCL's k-synchronous synthesis (Cai et al., PPoPP'21, arXiv 2008.08708 §3-4) on Z3: all-gather in S steps
  /// of R rounds in all with C chunks per rank, every link moving at most its capacity (in lanes of the fastest
  /// link leaving a GPU) times the step's rounds; the least steps first, then the least rounds
  /// (`sccl_steps`, `sccl_rounds`, `sccl_chunks` fix them). Reduce-scatter runs the all-gather of the transposed
  /// links backwards, all-reduce is reduce-scatter then all-gather; no sketch. Single nodes in practice: ranks
  /// must reach each other over links of at least one such lane (synthesizer/sccl.h).
  kSccl,
};

/// Whether kForest builds `collective` on `num_gpus` GPUs: all-gather, reduce-scatter and all-reduce (tree
/// packing) on any count, all-to-all (the max-concurrent flow, include/braid/bounds.h allToAllFlow) up to
/// kAllToAllFlowMaxGpus.
bool forestMethodBuilds(CollectiveKind collective, int num_gpus);

/// What kSccl minimises first: kLatency the steps (then rounds, with 1 chunk per rank unless given); kBandwidth the
/// rounds per chunk R/C (chunks 1 .. 8 unless given; then the fewest steps for it).
enum class ScclObjective { kLatency, kBandwidth };

/// Whether kSccl builds `collective`: all-gather, reduce-scatter and all-reduce.
bool scclMethodBuilds(CollectiveKind collective);

/// "taccl", "forest", "sccl"; parseSynthesisMethod returns nullopt for anything else.
const char* synthesisMethodName(SynthesisMethod method);
std::optional<SynthesisMethod> parseSynthesisMethod(const std::string& name);

struct SynthesisRequest {
  const Topology* topology = nullptr;  // required
  /// The sketch; when `has_sketch` is false one is derived (deriveSketch).
  Sketch sketch;
  bool has_sketch = false;
  CollectiveKind collective = CollectiveKind::kAllGather;
  int root = 0;  // broadcast / reduce
  /// nccl-tests size the costs are taken at; 0 = the sketch's size_bytes (then 1 MiB per chunk).
  uint64_t size_bytes = 0;
  /// Wall-clock limit for the whole synthesis, seconds. Every solver call gets the time left as its own
  /// limit, and a watchdog thread interrupts any Z3 check still running at its stage's deadline. Stages that run
  /// out keep their best solution so far (the greedy one at worst) and say so in the stage report ("feasible
  /// (time limit)", "kept greedy ..."); when routing has found nothing by then, synthesize() fails with kTimeout
  /// "no algorithm within the time limit of N s (stage routing)". Emitting and verify() run after the limit
  /// (well under a second on the shipped topologies). Whatever the wall clock ends makes the result depend on the
  /// machine and its load: SynthesisResult::clock_cuts names those stages.
  /// Finite, positive and at most kMaxSynthesisTimeLimitSeconds (kInvalidArgument otherwise).
  double time_limit_s = 60;
  /// The solvers' budget, in Z3 resource units (Z3's rlimit, counted over every check of every stage): Z3 counts the
  /// same units for the same problem on any machine and under any load, so a search ended by its budget gives the
  /// same algorithm on a quiet or a busy machine. 0 (default): time_limit_s x kSynthesisUnitsPerSecond. TACCL
  /// pipeline: each movement's routing gets 60 % of its share (all-reduce's two movements half each) and
  /// scheduling what routing left; the tree method uses no Z3.
  uint64_t budget_units = 0;
  Protocol protocol = Protocol::kSimple;  // written into the algorithm
  SynthesisMethod method = SynthesisMethod::kTaccl;
  /// kForest: the smallest number of trees per root k (1 .. 32) whose integer rate is within this fraction of the
  /// optimal rate is used (fewer trees mean fewer, larger messages); 0 asks for the best k up to 32. -1 (default):
  /// chosen — 0.03 and 0.1 are both candidates when `score` is set, 0.03 otherwise.
  double forest_tolerance = -1;
  /// kForest: pieces each tree unit's share is cut into and pipelined down its tree (1 .. 64); fewer when the
  /// algorithm would exceed 4096 chunks. All-to-all: pieces per block (1, 2, 3, 4, 6, 8, 12 and 16 are candidates
  /// when 0, up to 8192 chunks; with `score` each is scored, otherwise the fluid schedule's fastest is kept). 0
  /// (default): chosen — 1, 2, 4, 8, 16 and 32 are candidates when `score` is set; otherwise 4, and 2 then 1 when 4 is
  /// too large to verify.
  int forest_pieces = 0;
  /// kSccl: steps S (1 .. 16), rounds R (S .. 64) and chunks per rank C (1 .. 32); 0 = searched as
  /// `sccl_objective` says (synthesizer/sccl.h): the fewest steps from the hop diameter up (3 more at most), the
  /// fewest rounds from max(S, the ingress bound) up, C = 1; or the least R/C, then the fewest steps.
  int sccl_steps = 0;
  int sccl_rounds = 0;
  int sccl_chunks = 0;
  ScclObjective sccl_objective = ScclObjective::kLatency;
  /// kForest: scores a verified candidate algorithm at the costing size, lower is better (the CLI, the benchmarks
  /// and the communicator's Pareto set pass Braid's simulator, in µs); may be empty. With it, every candidate of
  /// the choices above (and both bandwidth splits, where the LP's differs from the equal-share one: forest.h) is
  /// built, verified and scored, and the lowest score is kept; a candidate that cannot be scored is skipped. The
  /// scores are listed in a note. Candidates stop at the time limit, keeping the best so far.
  std::function<Result<double>(const Algorithm& algorithm, uint64_t size_bytes)> score;
  /// What `score` measures, for the note (e.g. "Braid's simulator, us").
  std::string score_name;
  /// Progress reports; may be empty. Calls never overlap, but may come from the watchdog thread: while a solver
  /// call runs, the last report is repeated about twice a second with "(running N s)" appended to its detail.
  std::function<void(const SynthesisProgress&)> progress;
  /// When set, receives SynthesisResult::clock_cuts also when synthesize() fails: a failure with stages here may be
  /// the wall clock's (another run, or a larger time limit, may succeed); its message then says so too.
  std::vector<std::string>* clock_cuts_out = nullptr;
};

/// Z3 resource units per second of SynthesisRequest::time_limit_s when the request sets no budget: about a third of
/// what the routing and scheduling models spend per second on one core of a 2-core machine, so that the budget is
/// normally spent before the wall-clock limit even on a busy machine.
inline constexpr uint64_t kSynthesisUnitsPerSecond = 1'000'000;

/// The largest SynthesisRequest::time_limit_s, seconds (about 11.6 days): deadlines a steady_clock holds without
/// overflow on any platform, and `--time-limit`'s maximum in the CLI.
inline constexpr double kMaxSynthesisTimeLimitSeconds = 1e6;

/// What one stage did.
struct StageReport {
  std::string name;    // "routing", "ordering", "scheduling", "reverse-scheduling", "lowering"
  double seconds = 0;  // wall time
  /// Z3 resource units the stage's checks spent (Z3's rlimit count): its solver work, the same on any machine.
  uint64_t solver_units = 0;
  int variables = 0;  // solver variables (0 for non-solver stages)
  int constraints = 0;
  std::string status;      // "optimal", "feasible (time limit)", "greedy", "skipped: <why>", ...
  double makespan_us = 0;  // the stage's model makespan after it ran
};

struct SynthesisResult {
  Algorithm algorithm;  // verified; provenance filled (generator, topology, sketch, solver, created)
  SynthesisMethod method = SynthesisMethod::kTaccl;  // the method that built it
  Sketch sketch;                                     // the sketch used (derived or given); empty for kForest
  int chunkup = 1;      // chunks per rank's share (kTaccl: the sketch's chunkup; kForest: trees per root x pieces)
  CollectiveSpec spec;  // what was verified (out-of-place and in-place where declared)
  std::vector<StageReport> stages;
  double makespan_us = 0;  // the synthesizer's α-β model estimate at the costing size
  uint64_t costing_size_bytes = 0;
  double seconds = 0;         // wall time of synthesize()
  uint64_t budget_units = 0;  // the solvers' budget it ran under (SynthesisRequest::budget_units)
  /// Stages that the wall-clock limit ended before their budget ("routing", "scheduling", "tree candidates", ...):
  /// another run, on another machine or under another load, may give another algorithm. Empty: the result is a
  /// function of the inputs and the budget alone.
  std::vector<std::string> clock_cuts;
  std::vector<std::string> notes;  // sketch derivation, symmetry dropped, time limits hit, ...
};

/// Synthesizes `request.collective` (allgather, reducescatter, allreduce, alltoall, broadcast, reduce) for
/// the topology. Errors: kInvalidArgument (no topology, sketch inconsistent with it: names the sketch field),
/// kInfeasible when the sketch admits no algorithm — the message names the conflicting constraint groups (Z3
/// unsat core, e.g. "relay: gpus_to_sender_rev_map" and "postcondition: rank 17 receives chunk (3,0)"),
/// kUnsupported for custom collectives (and, with SynthesisMethod::kForest, for all-to-all, broadcast and reduce),
/// kTimeout when no routing (or, for kForest, no tree rate) was found within the time limit, kInternalError if a
/// produced algorithm fails verify() (a bug).
Result<SynthesisResult> synthesize(const SynthesisRequest& request);

}  // namespace braid
