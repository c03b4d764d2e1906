// Calibration: the simulator's accuracy: SimModel::defaults() (fitted on Azure ND A100 v4 and on the realcases H20
// all-to-all by perf/calibrate --fit) predicts ND H100 v5 all-reduce busbw within 15% at >= 16 MiB and the realcases
// 2-node H100 log within 15% at >= 64 MiB, with NCCL's own algorithm choice simulated, and reproduces the H20
// all-to-all log within 15% at >= 1 MiB.
#include "calibration/calibration.h"

#include <gtest/gtest.h>

#include <cmath>

#include "braid/file_io.h"
#include "support/corpus.h"

namespace braid::calibration {
namespace {

// Runs one case with the default (calibrated) model and checks the gated sizes.
void expectCalibrated(int which) {
  auto cases = publishedCases(BRAID_SHARED_DIR);
  ASSERT_TRUE(cases.isOk()) << cases.status().toString();
  if (which >= static_cast<int>(cases->size())) GTEST_SKIP() << "realcases log absent";
  CalibrationCase c = cases->at(which);
  // Simulating every size up to 16 GiB is what perf/calibrate does; here sizes up to 1 GiB keep the test short.
  std::erase_if(c.points, [](const MeasuredPoint& p) { return p.size_bytes > (1ull << 30); });
  auto rows = evaluate(c, SimModel::defaults());
  ASSERT_TRUE(rows.isOk()) << rows.status().toString();
  EXPECT_TRUE(withinTolerance(c, rows.value())) << formatTable(c, rows.value());
}

TEST(Calibration, FitTargetNdA100v4) { expectCalibrated(0); }
TEST(Calibration, PredictsNdH100v5) { expectCalibrated(1); }
TEST(Calibration, PredictsTwoNodeH100Log) {
  BRAID_SKIP_WITHOUT_REALCASES();
  expectCalibrated(2);
}

// NCCL's all-to-all on the H20 VMs of RC-53: within 15% of the log's busbw at every size >= 1 MiB (the sizes up to
// 1 GiB here; perf/calibrate runs all 13). It is the case p2p_net_step_us was fitted on, so this pins the fit.
TEST(Calibration, FitsH20AllToAllLog) {
  BRAID_SKIP_WITHOUT_REALCASES();
  auto cases = publishedCases(BRAID_SHARED_DIR);
  ASSERT_TRUE(cases.isOk()) << cases.status().toString();
  const CalibrationCase* found = findCase(*cases, "h20-vm-x2.yaml");
  ASSERT_NE(found, nullptr);
  CalibrationCase c = *found;
  EXPECT_EQ(c.collective, CollectiveKind::kAllToAll);
  ASSERT_EQ(c.points.size(), 13u);  // 1 MiB .. 4 GiB
  std::erase_if(c.points, [](const MeasuredPoint& p) { return p.size_bytes > (1ull << 30); });
  auto rows = evaluate(c, SimModel::defaults());
  ASSERT_TRUE(rows.isOk()) << rows.status().toString();
  EXPECT_TRUE(withinTolerance(c, rows.value())) << formatTable(c, rows.value());
  for (const PredictedPoint& r : rows.value()) EXPECT_EQ(r.choice, "p2p/Simple");
}

}  // namespace
}  // namespace braid::calibration
