// Comparing an algorithm with NCCL and the lower bound in Braid's simulator (`braid synth`, `braid demo`,
// `braid simulate`, perf/). Free of CLI11 so benchmarks can compile it.
//
// Per nccl-tests size the comparison simulates (include/braid/simulate.h, SimModel::defaults()):
//   * the algorithm itself;
//   * NCCL's own choice: the algorithm/protocol NCCL 2.28's tuning model picks (ncclPredict,
//     include/braid/nccl_model.h; ../shared/reference/nccl_plugins.md §4) built in the IR
//     (ncclBaselineAlgorithm) — NVLS through the switch pseudo-rank emulation (ncclNvlsProgram), choices the IR
//     cannot express (CollNet, PAT) replaced by NCCL's ring with a note; all-to-all is NCCL's grouped send/recv;
//   * NCCL's ring with the protocol NCCL's model rates fastest for the ring at that size (what
//     `braid simulate nccl-ring` runs);
// and takes the lower bounds from collectiveBounds (include/braid/bounds.h, ../shared/reference/anchors_algorithms.md
// §1): the ForestColl hardware cut bound, valid for any algorithm, and the combined bound max(cut, route-constrained
// LP, latency), valid for algorithms whose messages follow Braid's routes. Every row carries Braid's ratio to both;
// boundLabels() says what each bound is valid for, in the words every report prints. Units: bytes, microseconds.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "braid/algorithm.h"
#include "braid/collective.h"
#include "braid/nccl_model.h"
#include "braid/nccl_runs.h"
#include "braid/sim_accuracy.h"
#include "braid/simulate.h"
#include "braid/status.h"
#include "braid/topology.h"
#include "common/text.h"

namespace braid {

/// The largest message size the CLI simulates (-b/-e/--timeline-size of `braid simulate`, --sizes of `braid
/// synth`): 256 GiB, more than any GPU's memory. The simulator's work and memory grow with the size (about
/// 0.07 s and 3 MiB per GiB for a ring on 8 GPUs), so a size near 2^63 would run for days.
inline constexpr uint64_t kMaxSimulatedBytes = uint64_t{256} << 30;
/// The most MSCCL instances `braid simulate --instances` accepts: NCCL's MAXCHANNELS for MSCCL (32), the most
/// channels instances x an algorithm's channels can fill.
inline constexpr int kMaxInstances = kMaxAlgorithmChannels;

/// Simple, LL or LL128 in any letter case; nullopt otherwise. (Sizes: parseNcclTestsSize in common/text.h.)
std::optional<Protocol> parseProtocolName(const std::string& text);

/// nccl-tests' element count and buffer size for a requested size (nccl-tests src/common.cu): count =
/// size / (element_bytes x multiplier) whole elements, multiplier = 1 for all-reduce (and broadcast/reduce) and
/// the rank count for all-gather, reduce-scatter and all-to-all; bytes = count x element_bytes x multiplier.
/// {0, 0} when the size holds no whole element per rank.
std::pair<uint64_t, uint64_t> ncclTestsCountAndBytes(CollectiveKind collective, int ranks, uint64_t element_bytes,
                                                     uint64_t size);

/// Which lower bound a report column or JSON field holds.
enum class BoundKind { kCut, kRoute, kLatency, kCombined };

/// A lower bound as reports name it. `what` and `valid_for` are the words every report (tables, --json, HTML)
/// prints beside the figure, so a ratio to a bound always names the bound.
struct BoundLabel {
  BoundKind kind = BoundKind::kCut;
  std::string field;        // per-size JSON field of braid synth / simulate: "cut_bound_us", ..., "bound_us"
  std::string bound_field;  // the field of `braid bound --json`: "cut_us", "route_us", "latency_us", "bound_us"
  std::string name;         // short name for headers: "cut bound", "route bound", "latency bound", "routed bound"
  std::string what;         // how it is computed (include/braid/bounds.h)
  std::string valid_for;    // which algorithms it bounds
};

/// The four bounds in report order (cut, route, latency, combined). The cut bound is ForestColl's hardware cut
/// bound (valid for any algorithm without in-network reduction); the route bound and the combined bound
/// max(cut, route, latency) hold for algorithms whose GPU-to-GPU messages follow Topology::route, as Braid's,
/// NCCL's and MSCCL's do in Braid's simulator; the latency bound (alpha-diameter) for any algorithm in the
/// multi-port model. For all-reduce `what` says the cut and route bounds are the reduce-scatter bound + the
/// all-gather bound (ForestColl's model).
std::vector<BoundLabel> boundLabels(CollectiveKind collective);

/// Legend lines for text reports, without a comment prefix: "<name> = <what>; valid for <valid_for>" per bound, and
/// for all-reduce a line saying the cut and route bounds are the reduce-scatter + all-gather bound.
std::vector<std::string> boundLegend(CollectiveKind collective);

/// "the reduce-scatter + all-gather bound (...)" for all-reduce; empty for other collectives.
std::string allReduceBoundNote(CollectiveKind collective);

/// The calibration that stands for a Braid program in `protocol` (sim_accuracy.h): NCCL's p2p program for all-to-all,
/// NCCL's ring in that protocol for the other collectives; nullptr where none was measured.
const SimCalibration* validatedBandFor(CollectiveKind collective, Protocol protocol);

/// The calibration of NCCL's choice `choice` ("Tree/LL", "Ring/Simple", "p2p/Simple", as SizeComparison::nccl_choice
/// spells it) for `collective` (sim_accuracy.h: the all-reduce tables stand for the ring collectives too; all-to-all
/// has its own); nullptr where no published measurement covers it.
const SimCalibration* ncclChoiceBand(CollectiveKind collective, const std::string& choice);

/// A note for a row where Braid's simulated time beats NCCL's (`speedup` > 1) at `bytes` while NCCL's choice there
/// lies outside its validated band (ncclChoiceBand): NCCL's simulated time, and so the win, is only as good as the
/// simulator's model of NCCL (e.g. Tree/LL, whose busbw it puts 31-45 % low). nullopt when speedup <= 1 or the size
/// is inside the band.
std::optional<std::string> unvalidatedNcclNote(CollectiveKind collective, const std::string& nccl_choice,
                                               uint64_t bytes, double speedup);

/// A note for a row where Braid's simulated time beats NCCL's (`speedup` = NCCL time / Braid time > 1) at `bytes` with
/// Braid's program in `protocol` outside that protocol's validated band (sim_accuracy.h: for all-to-all NCCL's p2p
/// program, for the other collectives NCCL's ring in that protocol, measured against published tables; no band at all
/// counts as outside): the win may be the simulator's optimism for the protocol at that size. nullopt when
/// speedup <= 1 or the size is inside the band.
std::optional<std::string> unvalidatedWinNote(CollectiveKind collective, Protocol protocol, uint64_t bytes,
                                              double speedup);

/// simulate(Runnable) at one size with SimModel::defaults(): the runnable's own iteration in Simple (NCCL's ring:
/// ncclRunnable) and, for NCCL's p2p program, net_step_us = p2p_net_step_us.
/// Errors: "simulating <name> at <bytes> bytes: <why>".
Result<SimResult> simulateRunnable(const Runnable& what, uint64_t bytes, std::optional<Protocol> protocol,
                                   bool in_place, int instances, bool record_timeline);

/// A SynthesisRequest::score for `topology` (which must outlive it): the simulated time in µs of a candidate at
/// `size_bytes`, rounded down to whole float elements per rank, out-of-place, with the algorithm's protocol — what
/// compareAlgorithm reports for it at that size.
std::function<Result<double>(const Algorithm&, uint64_t)> simulatedScore(const Topology& topology);
/// SynthesisRequest::score_name for simulatedScore.
inline constexpr const char* kSimulatedScoreName = "Braid's simulator (us, float, out-of-place)";

struct CompareOptions {
  uint64_t element_bytes = 4;        // nccl-tests datatype size (float)
  std::optional<Protocol> protocol;  // run the algorithm with this protocol (default: its own)
  /// Called before each simulation ("simulating NCCL's Ring/LL128 at 268435456 bytes"); may be empty.
  std::function<void(const std::string&)> progress;
};

/// One size of a comparison. Times in microseconds; ratios > 1 favour the algorithm (speedups) or say how far
/// it is from a bound (ratio_to_bound, ratio_to_cut_bound >= 1: the bounds are lower bounds; boundLabels()). NCCL's
/// columns are empty (nullopt) where NCCL's algorithms cannot run on the topology (e.g. a TACCL profile whose GPUs
/// reach no common NIC); a row note says why.
struct SizeComparison {
  uint64_t requested_bytes = 0;         // the size asked for
  uint64_t size_bytes = 0;              // nccl-tests size actually run (whole elements per rank)
  uint64_t count = 0;                   // nccl-tests count (elements per rank)
  double predicted_us = 0;              // the algorithm, simulated
  std::string protocol;                 // protocol the algorithm ran with
  std::optional<double> nccl_us;        // NCCL's own choice, simulated
  std::string nccl_choice = "-";        // NCCL model's pick ("Ring/LL128"); "p2p/<proto>" for all-to-all
  std::string nccl_simulated = "-";     // what was simulated for nccl_us (differs from nccl_choice when replaced)
  std::optional<double> nccl_ring_us;   // NCCL's ring, simulated with the model's best ring protocol
  std::string nccl_ring_choice = "-";   // e.g. "Ring/LL128"; "p2p/Simple" for all-to-all (no ring all-to-all)
  std::optional<double> nccl_model_us;  // ncclPredict's time (nullopt for all-to-all)
  double bound_us = 0;                  // combined bound max(cut, route, latency): algorithms following Braid's routes
  double bound_bandwidth_us = 0;        // max(cut, route) bandwidth bound
  double bound_cut_us = 0;              // the ForestColl hardware cut bound alone: any algorithm
  double bound_route_us = 0;            // the route-constrained LP bound alone (0 when not computed)
  double bound_latency_us = 0;          // the latency bound (alpha-diameter)
  std::optional<double> speedup_vs_nccl;  // nccl_us / predicted_us
  std::optional<double> speedup_vs_ring;  // nccl_ring_us / predicted_us
  double ratio_to_bound = 0;              // predicted_us / bound_us (0 when the bound is 0)
  double ratio_to_cut_bound = 0;          // predicted_us / bound_cut_us (0 when the cut bound is 0)
  std::vector<std::string> notes;
};

struct Comparison {
  std::vector<SizeComparison> sizes;  // in the order asked, sizes holding no whole element left out
  std::vector<std::string> notes;     // NCCL model assumptions, skipped sizes, NVLS emulation, ...
};

/// Compares `algorithm` (rank count = topology GPUs) with NCCL and the bound for `collective` (allgather,
/// reducescatter, allreduce, alltoall) at each nccl-tests size in `sizes` (requested bytes; whole elements of
/// options.element_bytes as nccl-tests runs them), out-of-place. Errors: kInvalidArgument for other collectives,
/// a rank count that differs from the topology's or a list with no usable size; bound errors and errors simulating
/// `algorithm` as they come (the message names the size). NCCL's side failing (no NCCL view of the topology, a
/// baseline that cannot be built or placed) is not an error: its columns stay empty and a note says why.
Result<Comparison> compareAlgorithm(const Algorithm& algorithm, const Topology& topology, CollectiveKind collective,
                                    const std::vector<uint64_t>& sizes, const CompareOptions& options = {});

}  // namespace braid
