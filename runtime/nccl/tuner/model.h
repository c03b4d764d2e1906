// Braid's predictions for NCCL's tuner cost table (docs/nccl.md "Tuner plugin"): per NCCL collective, algorithm
// and protocol, the time in µs of one call of nBytes, precomputed at init on a grid of sizes and interpolated.
//
// Where a value comes from, per (collective, algorithm, protocol):
//   * simulated: NCCL's algorithm built in Braid's IR (NcclBaselines, include/braid/nccl_runs.h) run in Braid's
//     simulator (simulate(), SimModel::defaults(), out-of-place): Ring x {LL, LL128, Simple} for all-gather,
//     reduce-scatter and all-reduce; Tree x {LL, LL128, Simple} for all-reduce; NVLS and NVLSTree / Simple for
//     all-reduce through the NVLS emulation (ncclNvlsProgram, NcclBaselines::nvlsRounds rounds); only entries
//     NCCL's model enables on Braid's topology are simulated (the others are kNone);
//   * analytical: everything else NCCL's model enables on Braid's topology (broadcast and reduce rings, NVLS for
//     all-gather / reduce-scatter, PAT, CollNet when enabled): ncclPredict's time (nccl@2.28.9
//     src/graph/tuning.cc; nccl_plugins.md §4) on the same grid; also every entry when the rank count is above
//     TunerModelOptions::max_simulated_ranks, and an entry whose simulation failed (a note says why);
//   * none: ncclPredict disables it (time -1) at some grid size; the plugin leaves NCCL's value as it is.
// Sizes follow NCCL's tuner convention (nccl_plugins.md §2.2): nBytes = count x element size, times nRanks for
// all-gather and reduce-scatter — the same number as nccl-tests' size, which is what simulate() and ncclPredict take.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "abi/nccl_types.h"
#include "braid/status.h"
#include "braid/topology.h"

namespace braid::nccl_plugin {

/// Where one curve's values come from; kExtrapolated: a simulated curve read outside the sizes it simulated
/// (TunerModel::sourceAt), which no calibration vouches for.
enum class CostSource { kNone, kSimulated, kAnalytical, kExtrapolated };
const char* costSourceName(CostSource source);  // "none", "simulated", "analytical", "extrapolated"

/// One (collective, algorithm, protocol): µs at increasing sizes (bytes).
struct CostCurve {
  CostSource source = CostSource::kNone;
  std::vector<uint64_t> bytes;
  std::vector<double> us;
  /// NCCL's own prediction (ncclPredict) on the model's grid, whatever `source` is; empty for kNone.
  std::vector<double> nccl_us;
};

/// Linear interpolation of a curve (bytes ascending, at least one point): below the first point its value, between
/// two points linear in bytes, above the last point the last segment extended (one point: its value).
double interpolateUs(const std::vector<uint64_t>& bytes, const std::vector<double>& us, uint64_t n_bytes);

/// The default grid: powers of 4 from 256 B to 1 GiB (256, 1 Ki, 4 Ki, ..., 256 Mi, 1 Gi; 12 sizes).
std::vector<uint64_t> defaultTunerGrid();

/// The smallest BRAID_TUNER_MAX_SIM_BYTES / --max-sim-bytes accepted: 1 MiB. Below it the extended last segment is
/// latency-bound and predicts large sizes far off (1 GiB all-reduce Tree/Simple on dgx-h100-x2: 18.7 ms with 1 KiB
/// simulated, 4.2 ms simulated).
inline constexpr uint64_t kMinSimulatedBytes = uint64_t{1} << 20;

struct TunerModelOptions {
  std::vector<uint64_t> grid = defaultTunerGrid();  // ascending nBytes; 2 sizes at least
  /// Grid sizes above this are not simulated (the simulator's time grows with the size); simulated curves extend
  /// their last segment beyond it. At least the second grid size is always simulated. BRAID_TUNER_MAX_SIM_BYTES.
  uint64_t max_simulated_bytes = uint64_t{1} << 30;
  /// Above this many ranks nothing is simulated: every entry is analytical (ncclPredict). BRAID_TUNER_MAX_SIM_RANKS.
  int max_simulated_ranks = 32;
};

/// The table builder: one per topology (the plugin caches it per process).
class TunerModel {
 public:
  /// Builds every curve for `topology`. Errors: kInvalidArgument for a grid with fewer than 2 sizes or not
  /// ascending; ncclSystem's errors (no GPUs, a node without a NIC on the network), prefixed "NCCL's view of <name>".
  /// A simulation that fails is not an error: that curve becomes analytical and a note says why.
  static Result<TunerModel> build(const Topology& topology, const TunerModelOptions& options = {});

  int ranks() const { return ranks_; }
  int nodes() const { return nodes_; }
  const std::string& topologyName() const { return topology_name_; }
  /// The curve of NCCL collective `func` (0..4), algorithm `algo` (0..6), protocol `proto` (0..2, NCCL's
  /// indices: LL 0, LL128 1, Simple 2); an empty kNone curve outside those ranges.
  const CostCurve& curve(int func, int algo, int proto) const;
  /// interpolateUs of that curve at `n_bytes`; nullopt for a kNone curve.
  std::optional<double> timeUs(int func, int algo, int proto, uint64_t n_bytes) const;
  /// Where timeUs' value at `n_bytes` comes from: the curve's source, except kExtrapolated for a simulated curve
  /// at a size below its first or above its last simulated size (BRAID_TUNER_MAX_SIM_BYTES cuts the simulated grid).
  CostSource sourceAt(int func, int algo, int proto, uint64_t n_bytes) const;
  /// NCCL's own prediction of that entry (ncclPredict, interpolated on the grid); nullopt where NCCL's model
  /// disables it. What NCCL's table holds as far as Braid's emulation of NCCL 2.28's model goes.
  std::optional<double> ncclTimeUs(int func, int algo, int proto, uint64_t n_bytes) const;
  /// The grid the model was built on (TunerModelOptions::grid).
  const std::vector<uint64_t>& grid() const { return grid_; }
  /// What was assumed or replaced while building (NCCL model assumptions, failed simulations, rank limit).
  const std::vector<std::string>& notes() const { return notes_; }
  /// Wall-clock seconds build() took.
  double buildSeconds() const { return build_seconds_; }
  /// How many simulate() runs build() made.
  int simulations() const { return simulations_; }

 private:
  int ranks_ = 0;
  int nodes_ = 0;
  std::string topology_name_;
  std::vector<uint64_t> grid_;
  std::array<std::array<std::array<CostCurve, nccl_abi::kNumProtocols>, nccl_abi::kNumAlgorithms>, nccl_abi::kNumFuncs>
      curves_;
  std::vector<std::string> notes_;
  double build_seconds_ = 0;
  int simulations_ = 0;

  friend class TunerModelBuilder;
};

/// NCCL's names: "Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce" (func 0..4), "Tree" ... "PAT"
/// (algo 0..6), "LL", "LL128", "Simple" (proto 0..2); "?" outside.
const char* ncclFuncName(int func);
const char* ncclAlgoIndexName(int algo);
const char* ncclProtoIndexName(int proto);

}  // namespace braid::nccl_plugin
