// The calibration's statement per modelled entry and the override rule (accuracy.h).
#include "tuner/accuracy.h"

#include <fmt/format.h>

#include <limits>
#include <tuple>

#include "braid/sim_accuracy.h"
#include "common/text.h"

namespace braid::nccl_plugin {
namespace {

constexpr int kP = nccl_abi::kNumProtocols;

// NCCL's all-reduce entry (abi algorithm and protocol indices) in the calibration (sim_accuracy.h).
const SimCalibration* calibrationOf(int func, int algo, int proto) {
  if (func != nccl_abi::kFuncAllReduce || algo < 0 || algo >= kNumNcclAlgos) return nullptr;
  const Protocol protocol = proto == nccl_abi::kProtoLL      ? Protocol::kLL
                            : proto == nccl_abi::kProtoLL128 ? Protocol::kLL128
                                                             : Protocol::kSimple;
  return allReduceSimCalibration(static_cast<NcclAlgo>(algo), protocol);
}

}  // namespace

std::string sizeText(uint64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  double value = static_cast<double>(bytes);
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  if (value == static_cast<double>(static_cast<uint64_t>(value))) return fmt::format("{:.0f} {}", value, kUnits[unit]);
  return fmt::format("{:.1f} {}", value, kUnits[unit]);
}

std::string entryName(int entry) {
  if (entry < 0) return "-";
  return fmt::format("{}/{}", ncclAlgoIndexName(entry / kP), ncclProtoIndexName(entry % kP));
}

ModelAccuracy modelAccuracy(int func, int algo, int proto, CostSource source, uint64_t n_bytes) {
  ModelAccuracy a;
  const std::string name = fmt::format("{}/{}", ncclAlgoIndexName(algo), ncclProtoIndexName(proto));
  if (source == CostSource::kNone) {
    a.basis = name + " has no Braid prediction";
    return a;
  }
  if (source == CostSource::kAnalytical) {
    a.basis = name + " is NCCL's analytical formula on Braid's topology, not calibrated against measurements";
    return a;
  }
  if (source == CostSource::kExtrapolated) {
    a.basis = name + " is extrapolated beyond the simulated sizes (BRAID_TUNER_MAX_SIM_BYTES), not validated";
    return a;
  }
  const SimCalibration* c = calibrationOf(func, algo, proto);
  if (c == nullptr) {
    a.basis = fmt::format("{} {} is not validated: no published measurement to calibrate it against",
                          ncclFuncName(func), name);
    return a;
  }
  if (!insideValidatedBand(*c, n_bytes)) {
    a.basis = c->outside;
    return a;
  }
  a.validated = true;
  a.optimistic = c->worst_optimistic;
  a.pessimistic = c->worst_pessimistic;
  a.basis = c->band;
  return a;
}

const char* tunerPolicyName(TunerPolicy policy) {
  switch (policy) {
    case TunerPolicy::kModel: return "model";
    case TunerPolicy::kOff: return "off";
    case TunerPolicy::kValidated: break;
  }
  return "validated";
}

std::optional<TunerPolicy> parseTunerPolicy(const std::string& text) {
  const std::string t = lowerCase(text);
  if (t == "validated") return TunerPolicy::kValidated;
  if (t == "model") return TunerPolicy::kModel;
  if (t == "off") return TunerPolicy::kOff;
  return std::nullopt;
}

TunerDecision decideOverride(const PredictionOf& braid, int func, uint64_t n_bytes, const NcclCostTable& nccl,
                             TunerPolicy policy) {
  std::array<std::optional<EntryPrediction>, std::tuple_size_v<NcclCostTable>> predicted;
  TunerDecision d;
  double best_nccl = 0;
  double best_merged = 0;
  for (int i = 0; i < static_cast<int>(nccl.size()); ++i) {
    if (!(nccl[i] >= 0)) continue;  // not allowed (and never NaN)
    if (d.nccl < 0 || nccl[i] < best_nccl) {
      d.nccl = i;
      best_nccl = nccl[i];
    }
    predicted[i] = braid(i / kP, i % kP);
    const double merged = predicted[i] ? predicted[i]->us : nccl[i];
    if (d.candidate < 0 || merged < best_merged) {
      d.candidate = i;
      best_merged = merged;
    }
  }
  if (d.nccl < 0) {
    d.why = "NCCL allows no entry";
    return d;
  }
  d.candidate_us = best_merged;
  const std::optional<EntryPrediction>& of_nccl = predicted[d.nccl];
  const std::optional<EntryPrediction>& of_candidate = predicted[d.candidate];
  if (of_nccl) d.nccl_us = of_nccl->us;
  if (of_nccl && of_candidate && of_candidate->us > 0) d.advantage = of_nccl->us / of_candidate->us;
  if (policy == TunerPolicy::kOff) {
    d.why = "BRAID_TUNER=off";
    return d;
  }
  if (d.candidate == d.nccl) {
    d.why = "Braid's fastest is NCCL's choice";
    return d;
  }
  if (policy == TunerPolicy::kModel) {
    d.override_nccl = true;
    d.why = "BRAID_TUNER=model: Braid's fastest prediction";
    return d;
  }
  const std::string at = sizeText(n_bytes);
  const ModelAccuracy cand = modelAccuracy(func, d.candidate / kP, d.candidate % kP,
                                           of_candidate ? of_candidate->source : CostSource::kNone, n_bytes);
  if (!cand.validated) {
    d.why = fmt::format("candidate not validated at {}: {}", at, cand.basis);
    return d;
  }
  if (!d.nccl_us) {
    d.why = fmt::format("NCCL's choice {} has no Braid prediction to compare with", entryName(d.nccl));
    return d;
  }
  const ModelAccuracy def = modelAccuracy(func, d.nccl / kP, d.nccl % kP, of_nccl->source, n_bytes);
  if (!def.validated) {
    d.why = fmt::format("NCCL's choice not validated at {}, so the advantage cannot be bounded: {}", at, def.basis);
    return d;
  }
  d.required = (1 + cand.optimistic) / (1 - def.pessimistic);
  if (d.advantage <= d.required) {
    d.why = fmt::format("advantage {:.3f}x is within the models' known error (needs > {:.3f}x: {}; {})", d.advantage,
                        d.required, cand.basis, def.basis);
    return d;
  }
  d.override_nccl = true;
  d.why = fmt::format("advantage {:.3f}x > {:.3f}x, both validated at {} ({}; {})", d.advantage, d.required, at,
                      cand.basis, def.basis);
  return d;
}

TunerDecision decideOverride(const TunerModel& model, int func, uint64_t n_bytes, const NcclCostTable& nccl,
                             TunerPolicy policy) {
  const PredictionOf braid = [&model, func, n_bytes](int algo, int proto) -> std::optional<EntryPrediction> {
    const std::optional<double> us = model.timeUs(func, algo, proto, n_bytes);
    if (!us) return std::nullopt;
    return EntryPrediction{*us, model.sourceAt(func, algo, proto, n_bytes)};
  };
  return decideOverride(braid, func, n_bytes, nccl, policy);
}

}  // namespace braid::nccl_plugin
