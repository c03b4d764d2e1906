// Calibration: the nccl-tests parser on the realcases logs (values read off the files by hand), and the
// simulator's accuracy: SimModel::defaults() (fitted on Azure ND A100 v4 and on the realcases H20 all-to-all by
// perf/calibrate --fit) predicts ND H100 v5 all-reduce busbw within 15% at >= 16 MiB and the realcases 2-node H100
// log within 15% at >= 64 MiB, with NCCL's own algorithm choice simulated, and reproduces the H20 all-to-all log
// within 15% at >= 1 MiB.
#include "calibration/calibration.h"

#include <gtest/gtest.h>

#include <cmath>

#include "braid/file_io.h"
#include "support/corpus.h"

namespace braid::calibration {
namespace {

TEST(NcclTestsParser, ReadsTheTwoNodeH100Log) {
  BRAID_SKIP_WITHOUT_REALCASES();
  const auto path =
      (testing::realcasesDir() / "nccltests" / "hgx-h100-xe9680-2node-16rank-all_reduce_perf.txt").string();
  auto text = readFile(path);
  ASSERT_TRUE(text.isOk());
  auto rows = parseNcclTestsOutput(text.value(), path);
  ASSERT_TRUE(rows.isOk()) << rows.status().toString();
  // 8 B .. 16 GiB by factor 2: 2^3 .. 2^34 -> 32 rows.
  ASSERT_EQ(rows->size(), 32u);
  EXPECT_EQ(rows->front().size_bytes, 8u);
  EXPECT_EQ(rows->front().count, 2u);
  EXPECT_EQ(rows->front().type, "float");
  EXPECT_EQ(rows->front().redop, "sum");
  EXPECT_DOUBLE_EQ(rows->front().oop_time_us, 68.52);
  EXPECT_DOUBLE_EQ(rows->front().ip_time_us, 24.70);
  const NcclTestsRow& gib = rows->at(27);  // 2^30
  EXPECT_EQ(gib.size_bytes, 1073741824u);
  EXPECT_DOUBLE_EQ(gib.oop_busbw, 448.90);
  EXPECT_DOUBLE_EQ(gib.ip_busbw, 450.37);
  EXPECT_DOUBLE_EQ(rows->back().oop_algbw, 250.24);
}

TEST(NcclTestsParser, NotApplicableWrongCountsAndOddSizes) {
  BRAID_SKIP_WITHOUT_REALCASES();
  const auto a2a = (testing::realcasesDir() / "nccltests" / "h20-vm-2node-4rank-alltoall_perf.txt").string();
  auto rows = parseNcclTestsOutput(readFile(a2a).value(), a2a);
  ASSERT_TRUE(rows.isOk()) << rows.status().toString();
  ASSERT_EQ(rows->size(), 13u);
  EXPECT_EQ(rows->front().redop, "none");
  EXPECT_DOUBLE_EQ(rows->front().oop_busbw, 14.85);
  const auto h200 =
      (testing::realcasesDir() / "nccltests" / "h200-2node-16rank-all_reduce_perf-baremetal.txt").string();
  rows = parseNcclTestsOutput(readFile(h200).value(), h200);
  ASSERT_TRUE(rows.isOk());
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ(rows->at(1).size_bytes, 3221225472u);  // -f 3
  EXPECT_DOUBLE_EQ(rows->at(2).oop_busbw, 488.81);
}

TEST(NcclTestsParser, MalformedRowsNameFileAndLine) {
  auto r = parseNcclTestsOutput("# header\n  1024 256 float sum -1 1.0 2.0 3.0 0 1.0 2.0\n", "log.txt");
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), StatusCode::kParseError);
  EXPECT_NE(r.status().message().find("log.txt:2"), std::string::npos) << r.status().message();
  r = parseNcclTestsOutput("1024 256 float sum -1 1.0 x 3.0 0 1.0 2.0 3.0 0\n", "log.txt");
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("algbw"), std::string::npos) << r.status().message();
}

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
