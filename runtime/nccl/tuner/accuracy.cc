// The calibration's statement per modelled entry and the override rule (accuracy.h).
#include "tuner/accuracy.h"

#include <fmt/format.h>

#include <limits>
#include <tuple>

#include "common/text.h"

namespace braid::nccl_plugin {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kNoUpperEnd = std::numeric_limits<uint64_t>::max();
constexpr int kP = nccl_abi::kNumProtocols;

// One all-reduce entry's calibration. Source: docs/simulator.md "Calibration", the three all-reduce tables of
// `build/bin/calibrate` with SimModel::defaults(): Azure ND A100 v4 on dgx-a100-x1 (Ring entries), Azure ND H100 v5
// on dgx-h100-x1 (Ring/LL, NVLS), the 2-node H100 log RC-50 on dgx-h100-x2 (Tree, NVLSTree); each row measures the
// entry NCCL chose at that size. The band holds the rows within ±15 %; a band without upper end holds every row
// from its start to the table's largest size (8 or 16 GiB).
struct EntryCalibration {
  int algo;
  int proto;
  uint64_t min_bytes;  // 0 and 0: no validated band
  uint64_t max_bytes;
  double worst_optimistic;   // largest error in the band (>= 0)
  double worst_pessimistic;  // most negative error in the band, as a positive fraction
  const char* band;          // the band's rows
  const char* outside;       // what the calibration says outside the band
};

constexpr EntryCalibration kAllReduceCalibration[] = {
    {nccl_abi::kAlgoRing, nccl_abi::kProtoLL, 1 * kMiB, 2 * kMiB, 0.006, 0.111,
     "Ring/LL validated at 1-2 MiB (ND A100 v4 +0.6 % at 1 MiB, -11.1 % at 2 MiB; ND H100 v5 -0.1 % at 1 MiB)",
     "Ring/LL is validated only at 1-2 MiB: below 1 MiB the simulation is up to 68 % optimistic (ND A100 v4 "
     "+40..+68 %, ND H100 v5 up to +53 %), above 2 MiB not measured"},
    {nccl_abi::kAlgoRing, nccl_abi::kProtoLL128, 4 * kMiB, 16 * kMiB, 0.009, 0.039,
     "Ring/LL128 validated at 4-16 MiB (ND A100 v4 -3.9 % .. +0.9 %)",
     "Ring/LL128 is validated only at 4-16 MiB (ND A100 v4); other sizes were not measured"},
    {nccl_abi::kAlgoRing, nccl_abi::kProtoSimple, 256 * kMiB, kNoUpperEnd, 0.103, 0.0,
     "Ring/Simple validated from 256 MiB (ND A100 v4 +3.5 % .. +10.3 % up to 8 GiB)",
     "Ring/Simple is validated from 256 MiB: at 32-128 MiB the simulation is 35-59 % optimistic (ND A100 v4), "
     "below 32 MiB not measured"},
    {nccl_abi::kAlgoTree, nccl_abi::kProtoLL, 0, 0, 0, 0, "",
     "Tree/LL is not validated: the simulation is 31-45 % pessimistic up to 128 KiB (2-node H100 log RC-50)"},
    {nccl_abi::kAlgoTree, nccl_abi::kProtoLL128, 0, 0, 0, 0, "",
     "Tree/LL128 is not validated: the simulation is 21-52 % pessimistic at 256 KiB-4 MiB (2-node H100 log RC-50)"},
    {nccl_abi::kAlgoTree, nccl_abi::kProtoSimple, 0, 0, 0, 0, "",
     "Tree/Simple is not validated: no published measurement of it (NCCL chose other entries at every size)"},
    {nccl_abi::kAlgoNvls, nccl_abi::kProtoSimple, 16 * kMiB, kNoUpperEnd, 0.138, 0.053,
     "NVLS/Simple (the NVLS emulation) validated from 16 MiB (ND H100 v5 -5.3 % .. +13.8 % up to 8 GiB)",
     "NVLS/Simple (the NVLS emulation) is validated from 16 MiB: below it the simulation is 42-97 % optimistic "
     "(ND H100 v5: +42 % at 8 MiB, +62 % at 4 MiB, +97 % at 2 MiB)"},
    {nccl_abi::kAlgoNvlsTree, nccl_abi::kProtoSimple, 32 * kMiB, kNoUpperEnd, 0.123, 0.0,
     "NVLSTree/Simple (the NVLS emulation) validated from 32 MiB (2-node H100 log RC-50 +1.9 % .. +12.3 % up to "
     "16 GiB)",
     "NVLSTree/Simple (the NVLS emulation) is validated from 32 MiB: below it the simulation is optimistic (2-node "
     "H100 log RC-50: +22 % at 16 MiB, +36 % at 8 MiB; the single-node NVLS emulation +42..+97 % at 2-8 MiB)"},
};

const EntryCalibration* calibrationOf(int func, int algo, int proto) {
  if (func != nccl_abi::kFuncAllReduce) return nullptr;
  for (const EntryCalibration& c : kAllReduceCalibration) {
    if (c.algo == algo && c.proto == proto) return &c;
  }
  return nullptr;
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
  const EntryCalibration* c = calibrationOf(func, algo, proto);
  if (c == nullptr) {
    a.basis = fmt::format("{} {} is not validated: no published measurement to calibrate it against",
                          ncclFuncName(func), name);
    return a;
  }
  if (c->max_bytes == 0 || n_bytes < c->min_bytes || n_bytes > c->max_bytes) {
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
    return EntryPrediction{*us, model.curve(func, algo, proto).source};
  };
  return decideOverride(braid, func, n_bytes, nccl, policy);
}

}  // namespace braid::nccl_plugin
