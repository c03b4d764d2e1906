// When the tuner overrides NCCL's choice (runtime/nccl/tuner/accuracy.h): the calibrated bands per entry and the
// rule, on hand-made tables and predictions. Expected values come from docs/simulator.md's calibration tables
// (the worst errors inside each band) and are computed here by hand.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <map>
#include <string>
#include <utility>

#include "tuner/accuracy.h"
#include "tuner/plugin.h"

namespace braid::nccl_plugin {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = kKiB * 1024;
constexpr uint64_t kGiB = kMiB * 1024;
constexpr int kP = nccl_abi::kNumProtocols;
constexpr int kAllReduce = nccl_abi::kFuncAllReduce;

int entry(int algo, int proto) { return algo * kP + proto; }

NcclCostTable emptyTable() {
  NcclCostTable t;
  t.fill(-1.0);
  return t;
}

// Braid's predictions for the test: a map from entry to (µs, source).
PredictionOf predictions(std::map<int, EntryPrediction> values) {
  return [values = std::move(values)](int algo, int proto) -> std::optional<EntryPrediction> {
    const auto it = values.find(entry(algo, proto));
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

EntryPrediction simulated(double us) { return {us, CostSource::kSimulated}; }

TEST(TunerAccuracy, NvlsEmulationIsValidatedFromSixteenMebibytes) {
  // ND H100 v5: +41.9 % at 8 MiB (outside ±15 %), +13.8 % at 16 MiB, -5.3 % at 32 MiB.
  const ModelAccuracy at8 =
      modelAccuracy(kAllReduce, nccl_abi::kAlgoNvls, nccl_abi::kProtoSimple, CostSource::kSimulated, 8 * kMiB);
  EXPECT_FALSE(at8.validated);
  EXPECT_NE(at8.basis.find("validated from 16 MiB"), std::string::npos) << at8.basis;
  const ModelAccuracy at16 =
      modelAccuracy(kAllReduce, nccl_abi::kAlgoNvls, nccl_abi::kProtoSimple, CostSource::kSimulated, 16 * kMiB);
  EXPECT_TRUE(at16.validated);
  EXPECT_DOUBLE_EQ(at16.optimistic, 0.138);
  EXPECT_DOUBLE_EQ(at16.pessimistic, 0.053);
  EXPECT_TRUE(modelAccuracy(kAllReduce, nccl_abi::kAlgoNvls, nccl_abi::kProtoSimple, CostSource::kSimulated, 16 * kGiB)
                  .validated);
  // 2-node log RC-50: NVLSTree +22.0 % at 16 MiB (outside), +1.9 % at 32 MiB, at most +12.3 % above.
  EXPECT_FALSE(
      modelAccuracy(kAllReduce, nccl_abi::kAlgoNvlsTree, nccl_abi::kProtoSimple, CostSource::kSimulated, 16 * kMiB)
          .validated);
  const ModelAccuracy tree32 =
      modelAccuracy(kAllReduce, nccl_abi::kAlgoNvlsTree, nccl_abi::kProtoSimple, CostSource::kSimulated, 32 * kMiB);
  EXPECT_TRUE(tree32.validated);
  EXPECT_DOUBLE_EQ(tree32.optimistic, 0.123);
  EXPECT_DOUBLE_EQ(tree32.pessimistic, 0.0);
}

TEST(TunerAccuracy, ExtrapolatedEntriesAreNotValidated) {
  // A simulated Ring/Simple read beyond the simulated grid (BRAID_TUNER_MAX_SIM_BYTES) is inside the size band but
  // no simulation stands behind it.
  const ModelAccuracy a =
      modelAccuracy(kAllReduce, nccl_abi::kAlgoRing, nccl_abi::kProtoSimple, CostSource::kExtrapolated, kGiB);
  EXPECT_FALSE(a.validated);
  EXPECT_NE(a.basis.find("extrapolated beyond the simulated sizes"), std::string::npos) << a.basis;
  EXPECT_TRUE(
      modelAccuracy(kAllReduce, nccl_abi::kAlgoRing, nccl_abi::kProtoSimple, CostSource::kSimulated, kGiB).validated);
}

TEST(TunerAccuracy, OnlySimulatedAllReduceEntriesInsideTheirBandsAreValidated) {
  // Ring/Simple: +35..+59 % at 32-128 MiB, within ±15 % from 256 MiB (ND A100 v4).
  EXPECT_FALSE(
      modelAccuracy(kAllReduce, nccl_abi::kAlgoRing, nccl_abi::kProtoSimple, CostSource::kSimulated, 128 * kMiB)
          .validated);
  EXPECT_TRUE(modelAccuracy(kAllReduce, nccl_abi::kAlgoRing, nccl_abi::kProtoSimple, CostSource::kSimulated, 256 * kMiB)
                  .validated);
  // The same band for NCCL's analytical formula: the calibration measured the simulator, not ncclPredict.
  EXPECT_FALSE(
      modelAccuracy(kAllReduce, nccl_abi::kAlgoRing, nccl_abi::kProtoSimple, CostSource::kAnalytical, 256 * kMiB)
          .validated);
  // Ring/LL within ±15 % at 1 and 2 MiB only; Tree never (21-52 % pessimistic on the 2-node log).
  EXPECT_FALSE(
      modelAccuracy(kAllReduce, nccl_abi::kAlgoRing, nccl_abi::kProtoLL, CostSource::kSimulated, 512 * kKiB).validated);
  EXPECT_TRUE(
      modelAccuracy(kAllReduce, nccl_abi::kAlgoRing, nccl_abi::kProtoLL, CostSource::kSimulated, 2 * kMiB).validated);
  EXPECT_FALSE(modelAccuracy(kAllReduce, nccl_abi::kAlgoRing, nccl_abi::kProtoLL, CostSource::kSimulated, 2 * kMiB + 1)
                   .validated);
  EXPECT_FALSE(
      modelAccuracy(kAllReduce, nccl_abi::kAlgoTree, nccl_abi::kProtoLL128, CostSource::kSimulated, kMiB).validated);
  // No published all-gather table.
  EXPECT_FALSE(
      modelAccuracy(nccl_abi::kFuncAllGather, nccl_abi::kAlgoRing, nccl_abi::kProtoSimple, CostSource::kSimulated, kGiB)
          .validated);
}

TEST(TunerAccuracy, UnvalidatedCandidateLeavesNcclsChoice) {
  // The dgx-h100-x2 case at 4 MiB: NCCL picks Tree/LL128; Braid predicts NVLSTree/Simple 2.8x faster, where its
  // emulation is not validated.
  NcclCostTable nccl = emptyTable();
  nccl[entry(nccl_abi::kAlgoTree, nccl_abi::kProtoLL128)] = 90;
  nccl[entry(nccl_abi::kAlgoNvlsTree, nccl_abi::kProtoSimple)] = 120;
  const PredictionOf braid = predictions({{entry(nccl_abi::kAlgoTree, nccl_abi::kProtoLL128), simulated(198)},
                                          {entry(nccl_abi::kAlgoNvlsTree, nccl_abi::kProtoSimple), simulated(70)}});
  const TunerDecision d = decideOverride(braid, kAllReduce, 4 * kMiB, nccl, TunerPolicy::kValidated);
  EXPECT_EQ(d.nccl, entry(nccl_abi::kAlgoTree, nccl_abi::kProtoLL128));
  EXPECT_EQ(d.candidate, entry(nccl_abi::kAlgoNvlsTree, nccl_abi::kProtoSimple));
  EXPECT_FALSE(d.override_nccl);
  EXPECT_DOUBLE_EQ(d.advantage, 198.0 / 70.0);
  EXPECT_NE(d.why.find("candidate not validated at 4 MiB"), std::string::npos) << d.why;
  EXPECT_NE(d.why.find("validated from 32 MiB"), std::string::npos) << d.why;
  // BRAID_TUNER=model takes Braid's fastest all the same; off never.
  EXPECT_TRUE(decideOverride(braid, kAllReduce, 4 * kMiB, nccl, TunerPolicy::kModel).override_nccl);
  EXPECT_FALSE(decideOverride(braid, kAllReduce, 4 * kMiB, nccl, TunerPolicy::kOff).override_nccl);
}

TEST(TunerAccuracy, ValidatedCandidateMustWinByMoreThanBothErrors) {
  // 1 GiB all-reduce: NCCL picks NVLS/Simple; Braid predicts Ring/Simple faster. Both inside their bands: the
  // candidate Ring/Simple may be 10.3 % optimistic, NCCL's NVLS/Simple 5.3 % pessimistic, so the advantage must
  // exceed 1.103 / (1 - 0.053) = 1.1647307...
  const double required = 1.103 / 0.947;
  NcclCostTable nccl = emptyTable();
  nccl[entry(nccl_abi::kAlgoNvls, nccl_abi::kProtoSimple)] = 3900;
  nccl[entry(nccl_abi::kAlgoRing, nccl_abi::kProtoSimple)] = 4100;
  const int nvls = entry(nccl_abi::kAlgoNvls, nccl_abi::kProtoSimple);
  const int ring = entry(nccl_abi::kAlgoRing, nccl_abi::kProtoSimple);
  const TunerDecision wins = decideOverride(predictions({{nvls, simulated(3900)}, {ring, simulated(3000)}}), kAllReduce,
                                            kGiB, nccl, TunerPolicy::kValidated);
  EXPECT_EQ(wins.candidate, ring);
  EXPECT_NEAR(wins.required, required, 1e-12);
  EXPECT_DOUBLE_EQ(wins.advantage, 1.3);
  EXPECT_TRUE(wins.override_nccl) << wins.why;
  // 3900 / 3380 = 1.1538 < 1.1647: within the error.
  const TunerDecision close = decideOverride(predictions({{nvls, simulated(3900)}, {ring, simulated(3380)}}),
                                             kAllReduce, kGiB, nccl, TunerPolicy::kValidated);
  EXPECT_EQ(close.candidate, ring);
  EXPECT_FALSE(close.override_nccl);
  EXPECT_NE(close.why.find("within the models' known error"), std::string::npos) << close.why;
  // 3900 / 3330 = 1.1712 > 1.1647.
  EXPECT_TRUE(decideOverride(predictions({{nvls, simulated(3900)}, {ring, simulated(3330)}}), kAllReduce, kGiB, nccl,
                             TunerPolicy::kValidated)
                  .override_nccl);
}

TEST(TunerAccuracy, NcclsChoiceMustBeValidatedAndModelledToBeCompared) {
  // 1 MiB: Ring/LL is validated there, NCCL's Tree/LL128 is not (its simulation is up to 52 % pessimistic).
  NcclCostTable nccl = emptyTable();
  nccl[entry(nccl_abi::kAlgoTree, nccl_abi::kProtoLL128)] = 100;
  nccl[entry(nccl_abi::kAlgoRing, nccl_abi::kProtoLL)] = 110;
  const int tree = entry(nccl_abi::kAlgoTree, nccl_abi::kProtoLL128);
  const int ring = entry(nccl_abi::kAlgoRing, nccl_abi::kProtoLL);
  const TunerDecision d = decideOverride(predictions({{tree, simulated(200)}, {ring, simulated(50)}}), kAllReduce, kMiB,
                                         nccl, TunerPolicy::kValidated);
  EXPECT_EQ(d.candidate, ring);
  EXPECT_FALSE(d.override_nccl);
  EXPECT_NE(d.why.find("NCCL's choice not validated at 1 MiB"), std::string::npos) << d.why;
  // NCCL's choice without a Braid prediction: nothing to compare with.
  const TunerDecision unmodelled =
      decideOverride(predictions({{ring, simulated(50)}}), kAllReduce, kMiB, nccl, TunerPolicy::kValidated);
  EXPECT_EQ(unmodelled.candidate, ring);
  EXPECT_FALSE(unmodelled.nccl_us.has_value());
  EXPECT_FALSE(unmodelled.override_nccl);
  // An analytical candidate is NCCL's own formula: never validated.
  const TunerDecision analytical =
      decideOverride(predictions({{tree, simulated(200)}, {ring, {50, CostSource::kAnalytical}}}), kAllReduce, kMiB,
                     nccl, TunerPolicy::kValidated);
  EXPECT_FALSE(analytical.override_nccl);
  EXPECT_NE(analytical.why.find("analytical"), std::string::npos) << analytical.why;
}

TEST(TunerAccuracy, ChoicesTakeTheFirstSmallestAllowedEntry) {
  // NCCL picks the first smallest non-negative entry; an entry Braid does not predict competes with NCCL's value.
  NcclCostTable nccl = emptyTable();
  nccl[entry(nccl_abi::kAlgoTree, nccl_abi::kProtoLL)] = 30;
  nccl[entry(nccl_abi::kAlgoRing, nccl_abi::kProtoLL)] = 30;
  nccl[entry(nccl_abi::kAlgoPat, nccl_abi::kProtoSimple)] = 30;
  const TunerDecision d =
      decideOverride(predictions({{entry(nccl_abi::kAlgoTree, nccl_abi::kProtoLL), simulated(40)},
                                  {entry(nccl_abi::kAlgoCollNetDirect, nccl_abi::kProtoSimple), simulated(1)}}),
                     kAllReduce, 4 * kKiB, nccl, TunerPolicy::kModel);
  EXPECT_EQ(d.nccl, entry(nccl_abi::kAlgoTree, nccl_abi::kProtoLL));  // three at 30: the first
  // Braid's 40 for Tree/LL; Ring/LL and PAT keep NCCL's 30 (no prediction): Ring/LL, the first of them.
  // CollNetDirect's 1 us does not count: NCCL does not allow it (-1).
  EXPECT_EQ(d.candidate, entry(nccl_abi::kAlgoRing, nccl_abi::kProtoLL));
  EXPECT_TRUE(d.override_nccl);
  // Under the default policy a candidate without a prediction is not validated.
  EXPECT_FALSE(decideOverride(predictions({{entry(nccl_abi::kAlgoTree, nccl_abi::kProtoLL), simulated(40)}}),
                              kAllReduce, 4 * kKiB, nccl, TunerPolicy::kValidated)
                   .override_nccl);
  const TunerDecision none = decideOverride(predictions({}), kAllReduce, kKiB, emptyTable(), TunerPolicy::kModel);
  EXPECT_EQ(none.nccl, -1);
  EXPECT_FALSE(none.override_nccl);
}

TEST(TunerAccuracy, BraidTunerVariable) {
  EXPECT_EQ(parseTunerPolicy("OFF"), TunerPolicy::kOff);
  EXPECT_EQ(parseTunerPolicy("model"), TunerPolicy::kModel);
  EXPECT_EQ(parseTunerPolicy("Validated"), TunerPolicy::kValidated);
  EXPECT_FALSE(parseTunerPolicy("on").has_value());
  ::setenv("BRAID_TUNER", "sometimes", 1);
  const TunerSettings bad = tunerSettingsFromEnvironment();
  EXPECT_EQ(bad.policy, TunerPolicy::kValidated);
  ASSERT_EQ(bad.warnings.size(), 1u);
  EXPECT_EQ(bad.warnings[0], "BRAID_TUNER=sometimes: not validated, model or off; validated kept");
  ::setenv("BRAID_TUNER", "off", 1);
  EXPECT_EQ(tunerSettingsFromEnvironment().policy, TunerPolicy::kOff);
  ::unsetenv("BRAID_TUNER");
  EXPECT_EQ(tunerSettingsFromEnvironment().policy, TunerPolicy::kValidated);
}

TEST(TunerAccuracy, SizeText) {
  EXPECT_EQ(sizeText(256), "256 B");
  EXPECT_EQ(sizeText(64 * kKiB), "64 KiB");
  EXPECT_EQ(sizeText(3 * kGiB / 2), "1.5 GiB");
}

}  // namespace
}  // namespace braid::nccl_plugin
