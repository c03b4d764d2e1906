// Tuner rules from measured nccl-tests logs (runtime/nccl/tuner/measured.h): settings from labels and NCCL INFO
// lines, the fastest setting per size, NCCL's own choice keeping sizes where it is as fast, hand-over at geometric
// midpoints, and the errors a user meets. Expected rules are worked out by hand in the comments.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "abi/nccl_types.h"
#include "braid/file_io.h"
#include "support/corpus.h"
#include "tuner/measured.h"

namespace braid::nccl_plugin {
namespace {

class MeasuredRulesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("braid-measured-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // An all_reduce_perf log of 16 ranks on 2 hosts with one row per (size, µs); `extra` goes before the table.
  std::string write(const std::string& name, const std::vector<std::pair<uint64_t, double>>& rows,
                    const std::string& extra = "", int ranks = 16) {
    std::string text = "# nThread 1 nGpus 1 minBytes 1024 maxBytes 1073741824 step: 1024(factor)\n" + extra;
    for (int r = 0; r < ranks; ++r) {
      text += "#  Rank " + std::to_string(r) + " Group  0 Pid " + std::to_string(100 + r) + " on node-" +
              (r < ranks / 2 ? "A" : "B") + " device 0 [0x18] NVIDIA H100\n";
    }
    text +=
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
        "busbw #wrong\n";
    for (const auto& [bytes, us] : rows) {
      const double algbw = static_cast<double>(bytes) / (us * 1e3);
      char line[256];
      std::snprintf(line, sizeof(line), "%12llu %12llu float sum -1 %8.2f %7.2f %7.2f 0 %8.2f %7.2f %7.2f 0\n",
                    static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(bytes / 4), us, algbw,
                    algbw * 30 / 16, us, algbw, algbw * 30 / 16);
      text += line;
    }
    const std::string path = (dir_ / name).string();
    EXPECT_TRUE(writeFileAtomic(path, text).isOk());
    return path;
  }

  std::filesystem::path dir_;
};

constexpr uint64_t kK = 1024, kM = kK * kK, kG = kM * kK;

TEST_F(MeasuredRulesTest, FastestSettingPerSizeAndNcclKeepsItsTies) {
  std::vector<MeasuredLog> logs;
  for (const std::string& spec :
       {write("all_reduce_ring_ll.txt", {{kK, 10}, {kM, 100}, {kG, 10000}}) + "=Ring/LL",
        write("all_reduce_ring_simple.txt", {{kK, 20}, {kM, 50}, {kG, 5000}}) + "=ring/simple",
        write("all_reduce_tree_ll.txt", {{kK, 8}, {kM, 200}, {kG, 20000}}) + "=Tree/LL",
        write("all_reduce_default.txt", {{kK, 9}, {kM, 60}, {kG, 5000}}) + "=default"}) {
    auto m = readMeasuredLog(spec);
    ASSERT_TRUE(m.isOk()) << m.status().toString();
    EXPECT_EQ(m->func, 4);  // all_reduce, from the file name
    logs.push_back(*m);
  }
  auto table = rulesFromMeasurements(logs);
  ASSERT_TRUE(table.isOk()) << table.status().toString();
  ASSERT_EQ(table->choices.size(), 3u);
  // 1 KiB: Tree/LL 8 us beats NCCL's 9 us (runner-up); 1 MiB: Ring/Simple 50 us beats NCCL's 60 us;
  // 1 GiB: Ring/Simple 5000 us ties NCCL's own choice, which keeps the size.
  EXPECT_EQ(table->choices[0].algo, 0);
  EXPECT_EQ(table->choices[0].proto, 0);
  EXPECT_DOUBLE_EQ(table->choices[0].us, 8);
  EXPECT_EQ(table->choices[0].runner_up, "NCCL default");
  EXPECT_DOUBLE_EQ(table->choices[0].runner_up_us, 9);
  EXPECT_EQ(table->choices[1].algo, 1);
  EXPECT_EQ(table->choices[1].proto, 2);
  EXPECT_DOUBLE_EQ(table->choices[1].default_us.value(), 60);
  EXPECT_EQ(table->choices[2].algo, -1);
  EXPECT_EQ(table->choices[2].runner_up, "Ring/Simple");
  // Rules: [0, sqrt(2^10 * 2^20) = 2^15] Tree/LL, [2^15 + 1, sqrt(2^20 * 2^30) = 2^25] Ring/Simple, nothing above.
  ASSERT_EQ(table->rules.size(), 2u);
  EXPECT_EQ(table->rules[0].min_bytes, 0u);
  EXPECT_EQ(table->rules[0].max_bytes, 32768u);
  EXPECT_EQ(table->rules[0].algo, 0);
  EXPECT_EQ(table->rules[1].min_bytes, 32769u);
  EXPECT_EQ(table->rules[1].max_bytes, 33554432u);
  EXPECT_EQ(table->rules[1].algo, 1);
  EXPECT_EQ(table->rules[1].proto, 2);
  for (const TunerRule& r : table->rules) {
    EXPECT_EQ(r.func, 4);
    EXPECT_EQ(r.ranks, 16);
    EXPECT_EQ(r.nodes, 2);
  }
  // The rules file round-trips.
  const TunerRules back = parseTunerRules(writeTunerRules(table->rules), "x");
  ASSERT_EQ(back.rules.size(), 2u);
  EXPECT_TRUE(back.rules[1].sameAs(table->rules[1]));
}

TEST_F(MeasuredRulesTest, WithoutNcclsOwnChoiceTheLastRuleRunsToTheTop) {
  std::vector<MeasuredLog> logs = {
      readMeasuredLog(write("all_gather_a.txt", {{kK, 5}, {4 * kK, 6}, {kM, 90}}) + "=Ring/LL").value(),
      readMeasuredLog(write("all_gather_b.txt", {{kK, 7}, {4 * kK, 7}, {kM, 40}}) + "=Ring/Simple").value()};
  auto table = rulesFromMeasurements(logs, /*ranks=*/-1, /*nodes=*/-1);
  ASSERT_TRUE(table.isOk()) << table.status().toString();
  // 1K and 4K: Ring/LL; 1M: Ring/Simple. Hand-over at sqrt(4096 * 1048576) = 65536.
  ASSERT_EQ(table->rules.size(), 2u);
  EXPECT_EQ(table->rules[0].func, 2);
  EXPECT_EQ(table->rules[0].max_bytes, 65536u);
  EXPECT_EQ(table->rules[1].min_bytes, 65537u);
  EXPECT_EQ(table->rules[1].max_bytes, std::numeric_limits<uint64_t>::max());
}

TEST_F(MeasuredRulesTest, SettingFromNcclInfoLines) {
  const std::string info =
      "node-A:1:1 [0] NCCL INFO NCCL_ALGO set by environment to NVLSTree\n"
      "node-A:1:1 [0] NCCL INFO NCCL_PROTO set by environment to Simple\n";
  auto m = readMeasuredLog(write("x_all_reduce_perf.log", {{kM, 10}}, info));
  ASSERT_TRUE(m.isOk()) << m.status().toString();
  EXPECT_EQ(m->algo, 5);
  EXPECT_EQ(m->proto, 2);
  EXPECT_EQ(m->label(), "NVLSTree/Simple");
  // Only NCCL_ALGO set: the protocol is NCCL's choice, which no rule can name.
  auto half =
      readMeasuredLog(write("y_all_reduce_perf.log", {{kM, 10}}, "x NCCL INFO NCCL_ALGO set by environment to Ring\n"));
  ASSERT_FALSE(half.isOk());
  EXPECT_NE(half.status().message().find("only NCCL_ALGO"), std::string::npos) << half.status().message();
}

TEST_F(MeasuredRulesTest, ErrorsNameTheFiles) {
  const std::string plain = write("plain_all_reduce.txt", {{kM, 10}});
  auto r = readMeasuredLog(plain);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(plain), std::string::npos);
  EXPECT_NE(r.status().message().find("=default"), std::string::npos) << r.status().message();
  r = readMeasuredLog(plain + "=Ring/Fast");
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("protocol 'Fast'"), std::string::npos) << r.status().message();
  r = readMeasuredLog(plain + "=Star/LL");
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("algorithm 'Star'"), std::string::npos) << r.status().message();
  const std::string a2a = write("alltoall_perf.txt", {{kM, 10}});
  r = readMeasuredLog(a2a + "=Ring/LL");
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("p2p"), std::string::npos) << r.status().message();
  const std::string unnamed = write("measurements.txt", {{kM, 10}});
  r = readMeasuredLog(unnamed + "=Ring/LL");
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("--coll"), std::string::npos) << r.status().message();
  // --coll names the collective of a log that does not say, in any of parseCollective's spellings.
  for (const char* name : {"allgather", "all_gather", "AllGather"}) {
    auto named = readMeasuredLog(unnamed + "=Ring/LL", parseCollective(name));
    ASSERT_TRUE(named.isOk()) << name << ": " << named.status().toString();
    EXPECT_EQ(named->log.collective, "all_gather");
    EXPECT_EQ(named->func, nccl_abi::kFuncAllGather);
  }
  auto all_reduce = readMeasuredLog(unnamed + "=Ring/LL", CollectiveKind::kAllReduce);
  ASSERT_TRUE(all_reduce.isOk()) << all_reduce.status().toString();
  EXPECT_EQ(all_reduce->func, nccl_abi::kFuncAllReduce);
  r = readMeasuredLog(unnamed + "=Ring/LL", CollectiveKind::kAllToAll);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("alltoall is not decided by NCCL's tuner"), std::string::npos)
      << r.status().message();
  // A log that names its collective keeps it: --coll must agree, a contradicting one names both.
  auto own = readMeasuredLog(plain + "=Ring/LL", CollectiveKind::kAllReduce);
  ASSERT_TRUE(own.isOk()) << own.status().toString();
  EXPECT_EQ(own->func, nccl_abi::kFuncAllReduce);
  r = readMeasuredLog(plain + "=Ring/LL", CollectiveKind::kAllGather);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("--coll all_gather contradicts the collective of " + plain +
                                      ": it measured all_reduce"),
            std::string::npos)
      << r.status().message();
  EXPECT_EQ(readMeasuredLog((dir_ / "missing.txt").string() + "=Ring/LL").status().code(), StatusCode::kNotFound);

  // Two logs of one setting; rank counts that differ.
  std::vector<MeasuredLog> twice = {readMeasuredLog(plain + "=Ring/LL").value(),
                                    readMeasuredLog(write("p2_all_reduce.txt", {{kM, 11}}) + "=ring/ll").value()};
  auto table = rulesFromMeasurements(twice);
  ASSERT_FALSE(table.isOk());
  EXPECT_NE(table.status().message().find("p2_all_reduce.txt"), std::string::npos) << table.status().message();
  std::vector<MeasuredLog> sizes = {
      readMeasuredLog(plain + "=Ring/LL").value(),
      readMeasuredLog(write("eight_all_reduce.txt", {{kM, 11}}, "", 8) + "=Tree/LL").value()};
  table = rulesFromMeasurements(sizes);
  ASSERT_FALSE(table.isOk());
  EXPECT_NE(table.status().message().find("ran 16 ranks but"), std::string::npos) << table.status().message();
  // --ranks that contradicts a log's rank count is an error naming that log, not an override.
  table = rulesFromMeasurements(sizes, 16, 2);
  ASSERT_FALSE(table.isOk());
  EXPECT_EQ(table.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(table.status().message().find("--ranks 16 contradicts the 8 ranks in " +
                                          (dir_ / "eight_all_reduce.txt").string()),
            std::string::npos)
      << table.status().message();
  std::vector<MeasuredLog> sixteen = {readMeasuredLog(plain + "=Ring/LL").value()};
  table = rulesFromMeasurements(sixteen, 8, -1);
  ASSERT_FALSE(table.isOk());
  EXPECT_NE(table.status().message().find("--ranks 8 contradicts the 16 ranks in " + plain), std::string::npos)
      << table.status().message();
  // --nodes that contradicts the log's 2 hosts is an error naming the log, as --ranks is.
  table = rulesFromMeasurements(sixteen, 16, 4);
  ASSERT_FALSE(table.isOk());
  EXPECT_EQ(table.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(table.status().message().find("--nodes 4 contradicts the 2 hosts in " + plain), std::string::npos)
      << table.status().message();
  // --ranks and --nodes that agree with the log.
  table = rulesFromMeasurements(sixteen, 16, 2);
  ASSERT_TRUE(table.isOk()) << table.status().toString();
  EXPECT_EQ(table->rules.at(0).ranks, 16);
  EXPECT_EQ(table->rules.at(0).nodes, 2);
  // A log without rank lines takes --ranks.
  std::vector<MeasuredLog> unlisted = {
      readMeasuredLog(write("unlisted_all_reduce.txt", {{kM, 10}}, "", 0) + "=Ring/LL").value()};
  table = rulesFromMeasurements(unlisted, 8, 4);
  ASSERT_TRUE(table.isOk()) << table.status().toString();
  EXPECT_EQ(table->rules.at(0).ranks, 8);
  EXPECT_EQ(table->rules.at(0).nodes, 4);
}

// The published 2-node H100 all-reduce log (RC-50) as NCCL's own choice next to a forced setting derived from it:
// 10 % faster up to 1 MiB and 10 % slower above. The rules cover [0, hand-over below 2 MiB] only.
TEST_F(MeasuredRulesTest, RealcasesLogAsTheBaseline) {
  BRAID_SKIP_WITHOUT_REALCASES();
  const std::string base =
      (testing::realcasesDir() / "nccltests" / "hgx-h100-xe9680-2node-16rank-all_reduce_perf.txt").string();
  auto nccl = readMeasuredLog(base + "=default");
  ASSERT_TRUE(nccl.isOk()) << nccl.status().toString();
  std::vector<std::pair<uint64_t, double>> rows;
  for (const NcclTestsRow& r : nccl->log.rows) {
    rows.push_back({r.size_bytes, r.timeUs() * (r.size_bytes <= kM ? 0.9 : 1.1)});
  }
  auto forced = readMeasuredLog(write("h100_all_reduce_tree_ll.txt", rows) + "=Tree/LL");
  ASSERT_TRUE(forced.isOk());
  auto table = rulesFromMeasurements({*nccl, *forced});
  ASSERT_TRUE(table.isOk()) << table.status().toString();
  ASSERT_EQ(table->rules.size(), 1u);
  EXPECT_EQ(table->rules[0].min_bytes, 0u);
  EXPECT_EQ(table->rules[0].max_bytes, 1482910u);  // floor(sqrt(2^20 * 2^21))
  EXPECT_EQ(table->rules[0].ranks, 16);
  EXPECT_EQ(table->rules[0].nodes, 2);
  for (const MeasuredChoice& c : table->choices) {
    EXPECT_EQ(c.algo >= 0, c.bytes <= kM) << c.bytes;
    if (c.algo >= 0) {
      EXPECT_NEAR(*c.default_us / c.us, 1 / 0.9, 0.01) << c.bytes;
    }
  }
}

}  // namespace
}  // namespace braid::nccl_plugin
