// Simulator calibration against measured NCCL tables (docs/simulator.md, "Calibration").
//
// A measured point is NCCL's bus bandwidth at one size. Braid predicts it the way NCCL runs it. All-reduce:
// ncclPredict (NCCL 2.28's tuning model) picks the algorithm and protocol, the matching NCCL algorithm is built
// (ncclBaselineAlgorithm, or the NVLS emulation ncclNvlsProgram) and run in the simulator with a SimModel;
// busbw = size / time x 2(n-1)/n. All-to-all: NCCL's grouped send/recv (ncclBaselineAlgorithm's p2p program on
// NCCL's p2p channels, with NCCL's p2p chunk as slice, NcclBaselines::runnable); busbw = size / time x (n-1)/n
// (nccl-tests, nccl_plugins.md §6.4). Fitting adjusts parameters by coordinate descent on the squared log error:
// the NVLink efficiencies and latencies on ND A100 v4's all-reduce (fitModel), the per-step network handshake on
// the H20 all-to-all log (fitAllToAllModel). Units: bytes, microseconds, GB/s.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "braid/collective.h"
#include "braid/simulate.h"
#include "braid/status.h"

namespace braid::calibration {

struct MeasuredPoint {
  uint64_t size_bytes = 0;
  double busbw_gbps = 0;
};

struct CalibrationCase {
  std::string name;                                        // e.g. "Azure ND A100 v4"
  std::string source;                                      // where the numbers come from
  std::string topology;                                    // shipped topology name, or a YAML file, it runs on
  CollectiveKind collective = CollectiveKind::kAllReduce;  // kAllReduce or kAllToAll
  std::vector<MeasuredPoint> points;
  uint64_t accept_from_bytes = 0;     // sizes >= this must be within `tolerance` (when gated_sizes is empty)
  std::vector<uint64_t> gated_sizes;  // when set: exactly these sizes must be within `tolerance` (the fit points)
  double tolerance = 0.15;            // relative busbw error allowed
};

/// The published cases: [0] Azure ND A100 v4 (the fit target), [1] Azure ND H100 v5 (NVLS), then, for each that
/// exists under `shared_dir`/realcases/nccltests: hgx-h100-xe9680-2node-16rank-all_reduce_perf.txt (RC-50,
/// out-of-place busbw, on dgx-h100-x2) and h20-vm-2node-4rank-alltoall_perf.txt (RC-53, NCCL all-to-all,
/// out-of-place busbw, on perf/calibration/topologies/h20-vm-x2.yaml, gated at every size >= 1 MiB).
/// Errors: a log exists but cannot be parsed (file, line).
Result<std::vector<CalibrationCase>> publishedCases(const std::string& shared_dir);
/// The case whose CalibrationCase::topology ends with `topology` (e.g. "dgx-h100-x2", "h20-vm-x2.yaml"), or nullptr.
const CalibrationCase* findCase(const std::vector<CalibrationCase>& cases, const std::string& topology);
/// The calibration topology of the H20 all-to-all case (a YAML file beside this library's sources).
std::string h20TopologyPath();

struct PredictedPoint {
  uint64_t size_bytes = 0;
  double measured_gbps = 0;
  double predicted_gbps = 0;
  double time_us = 0;
  std::string choice;  // NCCL's choice, e.g. "Ring/LL128"
  double error = 0;    // predicted / measured - 1
};

/// Predicts every point of the case with `model`.
Result<std::vector<PredictedPoint>> evaluate(const CalibrationCase& c, const SimModel& model);
/// Fits efficiencies and latencies to the case's points >= 1 MiB, starting from `start`.
Result<SimModel> fitModel(const CalibrationCase& c, const SimModel& start, bool verbose);
/// Fits SimModel::p2p_net_step_us to an all-to-all case's gated points, starting from `start` (everything else
/// unchanged: NCCL's documented chunk sizes, steps and channels stay as they are).
Result<SimModel> fitAllToAllModel(const CalibrationCase& c, const SimModel& start, bool verbose);

std::string formatTable(const CalibrationCase& c, const std::vector<PredictedPoint>& rows);
bool withinTolerance(const CalibrationCase& c, const std::vector<PredictedPoint>& rows);
/// Whether a size is held to the case's tolerance (gated_sizes, else accept_from_bytes).
bool isGated(const CalibrationCase& c, uint64_t size);
/// The model's fields as C++ assignments (what SimModel::defaults() holds).
std::string describeModel(const SimModel& model);

}  // namespace braid::calibration
