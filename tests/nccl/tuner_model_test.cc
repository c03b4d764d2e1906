// Braid's tuner table builder (runtime/nccl/tuner/model.h): the grid, the interpolation, which entries are
// simulated or analytical, and how long building takes on the 16-GPU shipped topologies.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "braid/nccl_model.h"
#include "braid/topology.h"
#include "tuner/model.h"
#include "tuner/plugin.h"

namespace braid::nccl_plugin {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = kKiB * 1024;
constexpr uint64_t kGiB = kMiB * 1024;

TEST(TunerModel, DefaultGridHasTheTestedSizes) {
  const std::vector<uint64_t> grid = defaultTunerGrid();
  ASSERT_EQ(grid.size(), 12u);
  EXPECT_EQ(grid.front(), 256u);
  EXPECT_EQ(grid.back(), kGiB);
  for (uint64_t size : {kKiB, kMiB, kGiB}) EXPECT_NE(std::find(grid.begin(), grid.end(), size), grid.end()) << size;
}

// BRAID_TUNER_MAX_SIM_BYTES below 1M, 0 included, warns and uses 1M (docs/env.md); a malformed value keeps 1G.
TEST(TunerModel, MaxSimBytesBelowOneMebibyteUsesOneMebibyte) {
  for (const char* value : {"0", "1", "1K", "512K"}) {
    ::setenv("BRAID_TUNER_MAX_SIM_BYTES", value, 1);
    const TunerSettings s = tunerSettingsFromEnvironment();
    EXPECT_EQ(s.model.max_simulated_bytes, kMiB) << value;
    ASSERT_EQ(s.warnings.size(), 1u) << value;
    EXPECT_EQ(s.warnings[0],
              std::string("BRAID_TUNER_MAX_SIM_BYTES=") + value + ": below the smallest useful value; 1048576 used");
  }
  ::setenv("BRAID_TUNER_MAX_SIM_BYTES", "lots", 1);
  const TunerSettings bad = tunerSettingsFromEnvironment();
  EXPECT_EQ(bad.model.max_simulated_bytes, kGiB);
  ASSERT_EQ(bad.warnings.size(), 1u);
  EXPECT_EQ(bad.warnings[0], "BRAID_TUNER_MAX_SIM_BYTES=lots: not a size (bytes, K/M/G suffix); 1073741824 kept");
  ::unsetenv("BRAID_TUNER_MAX_SIM_BYTES");
}

TEST(TunerModel, InterpolationBelowBetweenAndAboveTheGrid) {
  const std::vector<uint64_t> x = {100, 200, 400};
  const std::vector<double> y = {10, 20, 60};
  EXPECT_DOUBLE_EQ(interpolateUs(x, y, 1), 10);  // below: the first point
  EXPECT_DOUBLE_EQ(interpolateUs(x, y, 100), 10);
  EXPECT_DOUBLE_EQ(interpolateUs(x, y, 150), 15);  // linear in bytes
  EXPECT_DOUBLE_EQ(interpolateUs(x, y, 200), 20);
  EXPECT_DOUBLE_EQ(interpolateUs(x, y, 300), 40);
  EXPECT_DOUBLE_EQ(interpolateUs(x, y, 400), 60);
  EXPECT_DOUBLE_EQ(interpolateUs(x, y, 600), 100);  // above: the last segment (slope 0.2 us/B) extended
  EXPECT_DOUBLE_EQ(interpolateUs({100}, {7}, 5000), 7);
}

TEST(TunerModel, RejectsABadGrid) {
  Result<Topology> t = loadTopologyOrShipped("dgx-a100-x1");
  ASSERT_TRUE(t.isOk()) << t.status().toString();
  TunerModelOptions options;
  options.grid = {1024};
  EXPECT_EQ(TunerModel::build(*t, options).status().code(), StatusCode::kInvalidArgument);
  options.grid = {4096, 1024};
  EXPECT_EQ(TunerModel::build(*t, options).status().code(), StatusCode::kInvalidArgument);
}

// Which source each all-reduce entry gets, and analytical entries equal ncclPredict at the grid sizes.
TEST(TunerModel, SourcesAndAnalyticalEntries) {
  Result<Topology> t = loadTopologyOrShipped("dgx-a100-x1");
  ASSERT_TRUE(t.isOk()) << t.status().toString();
  TunerModelOptions options;
  options.grid = {1 * kKiB, 64 * kKiB, 1 * kMiB};
  Result<TunerModel> m = TunerModel::build(*t, options);
  ASSERT_TRUE(m.isOk()) << m.status().toString();
  EXPECT_EQ(m->ranks(), 8);
  EXPECT_EQ(m->nodes(), 1);
  for (int proto = 0; proto < 3; ++proto) {
    EXPECT_EQ(m->curve(nccl_abi::kFuncAllReduce, nccl_abi::kAlgoRing, proto).source, CostSource::kSimulated);
    EXPECT_EQ(m->curve(nccl_abi::kFuncAllGather, nccl_abi::kAlgoRing, proto).source, CostSource::kSimulated);
    // Broadcast has no IR baseline: NCCL's analytical ring.
    EXPECT_EQ(m->curve(nccl_abi::kFuncBroadcast, nccl_abi::kAlgoRing, proto).source, CostSource::kAnalytical);
    EXPECT_EQ(m->curve(nccl_abi::kFuncAllReduce, nccl_abi::kAlgoCollNetDirect, proto).source, CostSource::kNone);
  }
  Result<NcclSystem> system = ncclSystem(*t);
  ASSERT_TRUE(system.isOk());
  for (uint64_t bytes : options.grid) {
    Result<NcclPrediction> p = ncclPredict(*system, CollectiveKind::kBroadcast, bytes);
    ASSERT_TRUE(p.isOk());
    for (const NcclEstimate& e : p->all) {
      if (e.algo != NcclAlgo::kRing || e.time_us < 0) continue;
      const int proto = e.protocol == Protocol::kLL ? 0 : e.protocol == Protocol::kLL128 ? 1 : 2;
      EXPECT_DOUBLE_EQ(m->timeUs(nccl_abi::kFuncBroadcast, nccl_abi::kAlgoRing, proto, bytes).value(), e.time_us);
    }
  }
  EXPECT_FALSE(m->timeUs(nccl_abi::kFuncAllReduce, nccl_abi::kAlgoCollNetDirect, 2, kMiB).has_value());
  EXPECT_FALSE(m->timeUs(7, 1, 2, kMiB).has_value());  // not a tuner collective
}

TEST(TunerModel, AboveTheRankLimitEverythingIsAnalytical) {
  Result<Topology> t = loadTopologyOrShipped("dgx-a100-x1");
  ASSERT_TRUE(t.isOk());
  TunerModelOptions options;
  options.grid = {kKiB, kMiB};
  options.max_simulated_ranks = 4;
  Result<TunerModel> m = TunerModel::build(*t, options);
  ASSERT_TRUE(m.isOk());
  EXPECT_EQ(m->simulations(), 0);
  EXPECT_EQ(m->curve(nccl_abi::kFuncAllReduce, nccl_abi::kAlgoRing, 2).source, CostSource::kAnalytical);
  bool noted = false;
  for (const std::string& n : m->notes()) noted |= n.find("BRAID_TUNER_MAX_SIM_RANKS") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST(TunerModel, SimulatedCurvesStopAtTheSizeLimitAndExtendTheLastSegment) {
  Result<Topology> t = loadTopologyOrShipped("dgx-a100-x1");
  ASSERT_TRUE(t.isOk());
  TunerModelOptions options;
  options.grid = {kKiB, 4 * kKiB, 16 * kKiB, 64 * kKiB};
  options.max_simulated_bytes = 4 * kKiB;
  Result<TunerModel> m = TunerModel::build(*t, options);
  ASSERT_TRUE(m.isOk());
  const CostCurve& c = m->curve(nccl_abi::kFuncAllReduce, nccl_abi::kAlgoRing, 2);
  ASSERT_EQ(c.source, CostSource::kSimulated);
  ASSERT_EQ(c.bytes.size(), 2u);
  const double slope = (c.us[1] - c.us[0]) / (4.0 * kKiB - 1.0 * kKiB);
  EXPECT_NEAR(m->timeUs(nccl_abi::kFuncAllReduce, 1, 2, 64 * kKiB).value(), c.us[1] + slope * (60.0 * kKiB), 1e-6);
}

}  // namespace
}  // namespace braid::nccl_plugin
