// What `braid synth` and `braid demo` print and write about a synthesis (cli/synth_cmd.cc,
// cli/demo_cmd.cc): progress lines, the stage table, the comparison table (compare.h), the provenance the
// algorithm file carries and the JSON report (docs/cli.md "braid synth" gives its schema).
// Units: bytes, microseconds, seconds.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "braid/algorithm.h"
#include "braid/pareto.h"
#include "braid/synthesize.h"
#include "braid/topology.h"
#include "comm/pareto/compare.h"

namespace braid::cli {

/// One progress line: "[<prefix> 3.2s] routing: bisection 4/10, 812 vars, 2301 constraints, z3 1.4s, best
/// 1234.5 us" (problem size, solver time and makespan only when known).
std::string formatProgress(const std::string& prefix, const SynthesisProgress& progress);

/// Prints progress lines to a stream once `quiet_s` seconds have passed since it was made, then at most one
/// line per `interval_s` (a new stage is always printed). Use callback() as SynthesisRequest::progress.
class ProgressPrinter {
 public:
  explicit ProgressPrinter(std::string prefix, std::ostream& out, double quiet_s = 2.0, double interval_s = 0.5);
  void report(const SynthesisProgress& progress);
  std::function<void(const SynthesisProgress&)> callback();
  bool printedAny() const { return printed_any_; }
  double elapsedSeconds() const;

 private:
  std::string prefix_;
  std::ostream& out_;
  double quiet_s_;
  double interval_s_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_;
  std::string last_stage_;
  bool printed_any_ = false;
};

/// The stage table: name, seconds, variables, constraints, status, makespan (us), one stage per line.
std::string stageTable(const std::vector<StageReport>& stages);

/// The comparison table, one row per (block, size): size, Braid us (protocol), NCCL us and its choice, NCCL ring
/// us, cut bound us, routed bound us, speedup vs NCCL, vs ring, Braid/cut, Braid/routed (the bounds of
/// boundLabels(): the cut bound holds for any algorithm, the routed bound for algorithms following Braid's routes).
/// With `labels` the first column names each block (the demo's collective column). Notes and the bound legend
/// (boundLegend) are not included.
std::string comparisonTable(const std::vector<std::pair<std::string, const Comparison*>>& blocks, bool labels);

/// Records a comparison in the algorithm's provenance: predicted_us per size, lower_bound_us = the routed bound at
/// the largest size, and extra "nccl_us.<bytes>", "nccl_choice.<bytes>", "nccl_ring_us.<bytes>", "bound_us.<bytes>"
/// (routed bound), "cut_bound_us.<bytes>" (cut bound), "lower_bound_valid_for" (what the routed bound holds for).
void recordComparison(const Comparison& comparison, Provenance* provenance);

/// Everything the JSON report holds.
struct SynthReport {
  const Topology* topology = nullptr;
  CollectiveKind collective = CollectiveKind::kAllGather;
  const SynthesisResult* result = nullptr;
  const Comparison* comparison = nullptr;  // nullptr: not compared (broadcast, reduce)
  bool sketch_given = false;               // false: derived
  double time_limit_s = 0;
  double command_seconds = 0;   // wall time of the whole command up to the report (synthesis is one stage of it)
  uint64_t peak_rss_bytes = 0;  // the process' peak resident memory (getrusage), 0 = unknown
  std::string output;           // the algorithm file written, empty when none
  std::string output_format;
  std::vector<std::string> notes;  // command-level notes (beside the synthesizer's and the comparison's)
};

/// What each bound field means, as JSON: {"<field>": {"name", "what", "valid_for"}, ...} over boundLabels(), keyed
/// by BoundLabel::field (or ::bound_field, `braid bound`'s names, when `bound_command_fields`); for all-reduce also
/// "all_reduce": the reduce-scatter + all-gather note.
nlohmann::ordered_json boundLabelsJson(CollectiveKind collective, bool bound_command_fields);

/// The report as JSON: synthesis_seconds, command_seconds, peak_rss_bytes, verified, collective, ranks, topology,
/// sketch {source, name, derived, yaml}, chunkup, time_limit_s, budget_units, clock_cuts[] and deterministic (no clock
/// cut), costing_size_bytes, model_makespan_us, stages[] (with solver_units), algorithm {...}, bounds (boundLabelsJson,
/// when compared), sizes[] (size_bytes, predicted_us, nccl_us, nccl_choice, nccl_ring_us, cut_bound_us, route_bound_us,
/// latency_bound_us, bound_us, speedup_vs_nccl, speedup_vs_ring, ratio_to_cut_bound, ratio_to_bound, ...), notes[].
nlohmann::ordered_json synthReportJson(const SynthReport& report);

/// A byte count, exact: in the largest of K, M, G, T (powers of 1024) that divides it, else in bytes ("1K", "1023K",
/// "256M", "1G", "1448", "1048575"); "inf" for kUnlimitedBytes. Window labels and Pareto-set file names use it.
std::string bytesText(uint64_t bytes);

/// The end of a size window [min_bytes, max_bytes] (max inclusive) as the first size past it: bytesText(max + 1),
/// "inf" for kUnlimitedBytes. Window labels read "[64K, 16M)" and Pareto-set file names "...-64K-16M.xml".
std::string windowEndText(uint64_t max_bytes);

/// The process' peak resident memory in bytes (getrusage ru_maxrss), 0 when the OS does not say.
uint64_t peakRssBytes();

/// The Pareto set as a table, one row per measured size grouped by window: window, served by (algorithm /
/// protocol, or "NCCL <choice>"), size, Braid us (the fastest candidate), NCCL us (its choice, simulated), NCCL
/// choice, cut bound us, NCCL/Braid.
std::string paretoSetTable(const CollectiveParetoSet& set);

/// The Pareto set as JSON: collective, windows[] {min_bytes, max_bytes (null = unlimited), served_by ("braid" |
/// "nccl"), algorithm, protocol, source, file}, points[] {size_bytes, window, braid_us, braid, nccl_us,
/// nccl_choice, cut_bound_us}, notes[]. `files[i]`: where window i's algorithm was written ("" = not written).
nlohmann::ordered_json paretoSetJson(const CollectiveParetoSet& set, const std::vector<std::string>& files);

}  // namespace braid::cli
