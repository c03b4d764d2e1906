// When the tuner moves NCCL off its own choice (docs/nccl.md "When the tuner overrides NCCL").
//
// Each modelled entry carries what the calibration (docs/simulator.md "Calibration", `build/bin/calibrate`) says of
// it: the sizes at which published measurements of NCCL running that all-reduce algorithm/protocol are predicted
// within the calibration's tolerance (±15 % bus bandwidth) — the entry's validated band — and the worst errors
// there. An error is predicted busbw / measured busbw − 1 = measured time / predicted time − 1: +0.14 means the
// real call took up to 1.14 × the predicted time (the model is optimistic), −0.05 down to 0.95 ×.
//
// The rule, per call (collective, nBytes): NCCL's choice is the smallest allowed entry of NCCL's own table; Braid's
// candidate the smallest allowed entry once Braid's predictions replace NCCL's. NCCL's choice stands unless the
// candidate differs, both entries are simulated and validated at nBytes, and Braid's predicted advantage
// t(NCCL's choice) / t(candidate) exceeds (1 + worst optimistic error of the candidate) /
// (1 − worst pessimistic error of NCCL's choice), i.e. the candidate is faster even when both models err the
// worst way the calibration saw. The bands come from three machines (8 × A100, 8 × H100, 2 × 8 × H100) and are
// applied to every topology by algorithm, protocol and size.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "abi/nccl_types.h"
#include "tuner/model.h"

namespace braid::nccl_plugin {

/// What is known of Braid's prediction of one entry at one size.
struct ModelAccuracy {
  bool validated = false;  // the entry is simulated and inside its calibrated band
  double optimistic = 0;   // >= 0: measured time up to (1 + optimistic) x predicted
  double pessimistic = 0;  // >= 0: measured time down to (1 - pessimistic) x predicted
  std::string basis;       // one line: the band and its source, or why the entry is not validated
};

/// The calibration's statement for (NCCL collective `func`, algorithm `algo`, protocol `proto`) at `n_bytes`, for an
/// entry whose values come from `source` (only kSimulated entries can be validated: the calibration measured the
/// simulator, not NCCL's analytical formula).
ModelAccuracy modelAccuracy(int func, int algo, int proto, CostSource source, uint64_t n_bytes);

/// How the tuner uses Braid's model (BRAID_TUNER).
enum class TunerPolicy {
  kValidated,  // `validated` (default): override NCCL only by the rule above
  kModel,      // `model`: Braid's fastest prediction wins wherever it differs from NCCL's choice
  kOff,        // `off`: the tuner changes nothing (no model, no rules)
};
/// "validated", "model", "off"; parseTunerPolicy reads them case-insensitively (nullopt for anything else).
const char* tunerPolicyName(TunerPolicy policy);
std::optional<TunerPolicy> parseTunerPolicy(const std::string& text);

/// NCCL's cost table for one call, µs per entry (index algo x kNumProtocols + proto); negative: not allowed.
using NcclCostTable = std::array<double, nccl_abi::kNumAlgorithms * nccl_abi::kNumProtocols>;

/// One call's decision.
struct TunerDecision {
  int nccl = -1;                  // NCCL's choice (entry index), -1 when no entry is allowed
  int candidate = -1;             // Braid's fastest allowed entry (its prediction, else NCCL's value), -1 when none
  std::optional<double> nccl_us;  // Braid's prediction of NCCL's choice (nullopt: not modelled)
  double candidate_us = 0;        // the candidate's value (Braid's prediction when it has one)
  double advantage = 0;           // nccl_us / candidate_us when both are Braid's predictions, else 0
  double required = 0;            // the advantage the rule asks for (0 when it was not reached)
  bool override_nccl = false;     // write Braid's predictions: NCCL then picks the candidate
  std::string why;                // one line
};

/// Braid's prediction of one entry at the call's size: µs and where it comes from.
struct EntryPrediction {
  double us = 0;
  CostSource source = CostSource::kNone;
};
/// Braid's prediction of entry (algo, proto), nullopt where it has none.
using PredictionOf = std::function<std::optional<EntryPrediction>(int algo, int proto)>;

/// Applies the rule (or `policy`'s) to one call of collective `func` of `n_bytes`. NCCL's choice and the candidate
/// take the first smallest entry, as NCCL does. kOff never overrides.
TunerDecision decideOverride(const PredictionOf& braid, int func, uint64_t n_bytes, const NcclCostTable& nccl,
                             TunerPolicy policy);
/// The same with `model`'s curves (TunerModel::timeUs and the curve's source).
TunerDecision decideOverride(const TunerModel& model, int func, uint64_t n_bytes, const NcclCostTable& nccl,
                             TunerPolicy policy);

/// "Ring/LL128" for entry index a x kNumProtocols + p; "-" for -1.
std::string entryName(int entry);
/// "256 B", "64 KiB", "16 MiB", "1.5 GiB".
std::string sizeText(uint64_t bytes);

}  // namespace braid::nccl_plugin
