// What the calibration (docs/simulator.md "Calibration", `build/bin/calibrate`) says of the simulator's prediction of
// NCCL's all-reduce algorithms and protocols: per (algorithm, protocol) the sizes at which published measurements of
// NCCL running that entry are predicted within ±15 % bus bandwidth — the entry's validated band — and the worst errors
// there. An error is predicted busbw / measured busbw − 1 = measured time / predicted time − 1: +0.14 means the real
// call took up to 1.14 × the predicted time (the model is optimistic), −0.05 down to 0.95 ×. The bands come from three
// machines (8 × A100, 8 × H100, 2 × 8 × H100) and are stated per algorithm, protocol and size, not per machine. Used by
// the NCCL tuner's override rule (runtime/nccl/tuner/accuracy.h) and by the comparison with NCCL
// (comm/pareto/compare.h), which notes wins that rest on a protocol outside its band.
#pragma once

#include <cstdint>

#include "braid/algorithm.h"
#include "braid/nccl_model.h"

namespace braid {

struct SimCalibration {
  NcclAlgo algo = NcclAlgo::kRing;
  Protocol protocol = Protocol::kSimple;
  uint64_t min_bytes = 0;        // min_bytes = max_bytes = 0: no validated band
  uint64_t max_bytes = 0;        // UINT64_MAX: every size from min_bytes up to the tables' largest (8 or 16 GiB)
  double worst_optimistic = 0;   // largest error in the band (>= 0)
  double worst_pessimistic = 0;  // most negative error in the band, as a positive fraction
  const char* band = "";         // the band's rows, one line
  const char* outside = "";      // what the calibration says outside the band, one line
};

/// The calibration of NCCL's all-reduce entry (algo, protocol), nullptr where no published measurement covers it.
const SimCalibration* allReduceSimCalibration(NcclAlgo algo, Protocol protocol);

/// The calibration of NCCL's all-to-all (its p2p program; `algo` kRing stands for it) in `protocol`: the H20 log
/// RC-53, Simple, validated from 1 MiB (docs/simulator.md "Calibration: NCCL all-to-all"); nullptr for LL and LL128.
const SimCalibration* allToAllSimCalibration(Protocol protocol);

/// The largest error by which the simulator is known to be optimistic about a point-to-point program inside a
/// validated band: the worst_optimistic of NCCL's ring in every protocol and of its all-to-all (p2p) program, the
/// calibrated programs that move data over links as Braid's synthesized ones do (NVLS and NVLSTree, which emulate
/// the switch's reduction, are left out). A fraction (0.108 with the calibration of docs/simulator.md: H20 log
/// RC-53's all-to-all at +10.8 %).
double worstValidatedPointToPointOptimism();

/// Whether `bytes` lies inside `c`'s validated band.
inline bool insideValidatedBand(const SimCalibration& c, uint64_t bytes) {
  return c.max_bytes != 0 && bytes >= c.min_bytes && bytes <= c.max_bytes;
}

}  // namespace braid
