/* Synthesizing a Pareto set at communicator init (target braid::braid_pareto, which brings in the synthesizer and
 * Z3). A program that only loads algorithms synthesized offline (BRAID_ALGO_DIR) or runs the classical ones links
 * braid::braid_comm alone and does not need this.
 *
 * Once enabled, a communicator whose topology (BRAID_TOPO / CommOptions::topology) has as many GPUs as it has
 * ranks gets the Pareto set rank 0 computes (include/braid/comm.h, selection source 2; comm/README.md).
 * Without it, such a communicator warns once on rank 0 and selects from BRAID_ALGO_DIR and the classical rule.
 */
#ifndef BRAID_PARETO_H_
#define BRAID_PARETO_H_

#include "braid/braid.h"

#ifdef __cplusplus
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "braid/comm.h"

namespace braid {

/// One measured size of a collective's Pareto set. Times in µs, Braid's simulator (float, out-of-place).
struct ParetoPoint {
  uint64_t size_bytes = 0;             // nccl-tests size (whole float elements per rank)
  int window = -1;                     // index into CollectiveParetoSet::windows
  double braid_us = 0;                 // the fastest Braid candidate (algorithm x protocol) at this size
  std::string braid_label;             // its source and protocol, e.g. "tree packing dgx-a100-x2 / Simple"
  std::optional<double> nccl_us;       // NCCL's own choice (its tuning model's pick, simulated); nullopt: none runs
  std::string nccl_choice = "-";       // e.g. "Ring/LL128", "NVLS/Simple", "p2p/Simple"
  std::optional<double> nccl_ring_us;  // NCCL's ring with its model's best ring protocol, simulated
  double cut_bound_us = 0;             // ForestColl's hardware cut bound (any algorithm without in-network reduction)
};

/// A window of sizes [min_bytes, max_bytes] (nccl-tests bytes, inclusive) and who serves it.
struct ParetoWindow {
  uint64_t min_bytes = 0;
  uint64_t max_bytes = kUnlimitedBytes;
  /// At the sizes measured in the window Braid's fastest candidate is not predicted faster than NCCL's own choice
  /// by the set's min_speedup: the window is left to NCCL. `candidate` is then the fastest Braid candidate there (what
  /// a Braid communicator, which has no NCCL to hand over to, runs).
  bool nccl = false;
  ParetoCandidate candidate;  // window_min / window_max and algorithm.min_bytes / max_bytes set to the window
};

/// The Pareto set of one collective: windows in increasing order that cover 0 .. kUnlimitedBytes without gaps or
/// overlaps (boundaries at the geometric midpoint of neighbouring measured sizes), and the measured sizes.
struct CollectiveParetoSet {
  CollectiveKind collective = CollectiveKind::kAllReduce;
  std::vector<ParetoWindow> windows;
  std::vector<ParetoPoint> points;
  std::vector<std::string> notes;  // candidates that failed to synthesize, NCCL model notes
  /// "<candidate>: <stage>" for every synthesis stage the wall clock ended before its budget
  /// (SynthesisResult::clock_cuts); empty: the set depends on the inputs and the budget alone.
  std::vector<std::string> clock_cuts;
  /// The margin the set was built with (ParetoOptions::min_speedup, resolved).
  double min_speedup = 1;
};

/// ParetoOptions::min_speedup when none is given: 1 + worstValidatedPointToPointOptimism() (include/braid/
/// sim_accuracy.h), 1.108 with docs/simulator.md's calibration. A predicted edge smaller than the error the
/// simulator is known to make on NCCL's own point-to-point programs is not one Braid can stand behind.
double defaultParetoMinSpeedup();

struct ParetoOptions {
  /// Sizes measured (nccl-tests bytes); empty: 1 KiB, 4 KiB, ..., 1 GiB.
  std::vector<uint64_t> sizes;
  double time_limit_s = 30;   // per synthesis (SynthesisRequest::time_limit_s)
  uint64_t budget_units = 0;  // per synthesis (SynthesisRequest::budget_units; 0 = from the time limit)
  /// Progress lines ("synthesizing allreduce: tree packing", ...); may be empty.
  std::function<void(const std::string&)> progress;
  /// Wall-clock end of the whole computation (steady clock); nullopt: none. Each synthesis's time limit is cut to
  /// the time left, and the deadline is checked before every synthesis, before NCCL's reference and before every
  /// simulated candidate x protocol: once it has passed, the call returns kTimeout naming the stage it reached.
  /// Past the deadline the call runs at most one simulated candidate x protocol (or one instance count) more.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  /// Braid takes a size from NCCL only where NCCL's choice is predicted to take at least min_speedup x the time of
  /// Braid's fastest candidate there (1: any predicted edge). nullopt: defaultParetoMinSpeedup(). Finite and >= 1,
  /// else kInvalidArgument.
  std::optional<double> min_speedup;
};

/// The Pareto set of `collective` (allgather, reducescatter, allreduce, alltoall) on `topology`. Candidates: the
/// TACCL pipeline (synthesize(), derived sketch), tree packing (SynthesisMethod::kForest; all-gather,
/// reduce-scatter, all-reduce) and the classical algorithms that apply (ring over the topology's NVLink rings,
/// recursive doubling, direct, double binary tree), each with each protocol (Simple, LL, LL128: MSCCL XML's
/// `proto`) and, with Simple, with 2, 4 and 8 MSCCL instances where that is at least 1 % faster than fewer
/// instances at the largest size (ParetoCandidate::instances; channels x instances <= 32). Every candidate is
/// simulated at every measured size; the fastest wins the size if it is predicted at least options.min_speedup x
/// faster than NCCL's own choice (compareAlgorithm's NCCL column: NCCL 2.28's tuning model, built in the IR and
/// simulated the same way), else NCCL does (a note names the sizes the margin left to NCCL). Runs of one server and
/// one Braid candidate form a window (a run left to NCCL is split where Braid's fastest changes: its `candidate` is
/// what a Braid communicator runs there). LL and LL128 stop being simulated for a candidate after two sizes in a row
/// at 1.5x its Simple time or more. A candidate that fails to synthesize is left out with a note. Errors:
/// kInvalidArgument (fewer than 2 GPUs, another collective, no usable size, min_speedup below 1 or not finite),
/// kUnsupported when no candidate can be built, kTimeout when options.deadline passes before the set is complete.
Result<CollectiveParetoSet> synthesizeCollectiveParetoSet(const Topology& topology, const std::string& topology_name,
                                                          CollectiveKind collective, const ParetoOptions& options = {});

/// The synthesizer-backed ParetoSynthesizer: synthesizeCollectiveParetoSet for all-gather, reduce-scatter,
/// all-reduce and all-to-all with the default options, every window's candidate kept (a window left to NCCL keeps
/// the fastest Braid candidate there: the communicator runs Braid's runtime). A collective with no candidate is
/// left out with a BRAID_DEBUG=INFO note. Deterministic for a given topology (solver budgets in Z3 resource units)
/// unless a synthesis hits its wall-clock limit.
Result<std::vector<ParetoCandidate>> synthesizeParetoSet(const Topology& topology, const std::string& topology_name);

/// synthesizeParetoSet as a ParetoSynthesizer (for CommOptions::pareto_synthesizer).
ParetoSynthesizer paretoSynthesizer();

/// Installs paretoSynthesizer() as the process-wide default (setDefaultParetoSynthesizer): every communicator
/// created afterwards without its own CommOptions::pareto_synthesizer uses it. Idempotent and thread-safe.
void enableParetoSynthesis();

}  // namespace braid

extern "C" {
#endif

/* enableParetoSynthesis() for C API users: call it before braidCommInit*. Always braidSuccess. */
braidResult_t braidEnableParetoSynthesis(void);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // BRAID_PARETO_H_
