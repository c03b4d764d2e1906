// The nccl-tests log reader (include/braid/nccl_tests_log.h) on every log in ../shared/realcases/nccltests, as
// published and in the shapes users paste them in (lines without '#', trimmed columns, no redop/root, a table
// printed twice). Values were read off the files by hand; every row is also checked against nccl-tests' own
// definitions (algbw = size / time, busbw = algbw x the collective's factor), which catches a misaligned column.
#include "braid/nccl_tests_log.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "braid/file_io.h"
#include "support/corpus.h"

namespace braid {
namespace {

std::string logPath(const std::string& name) { return (testing::realcasesDir() / "nccltests" / name).string(); }

std::vector<std::string> realcaseLogs() {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(testing::realcasesDir() / "nccltests")) {
    if (entry.is_regular_file()) out.push_back(entry.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Rewrites every line of `text` with `edit` (which may return "" to drop a line).
template <class Edit>
std::string eachLine(const std::string& text, Edit edit) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) out += edit(line) + "\n";
  return out;
}

std::vector<std::string> split(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> f;
  std::string w;
  while (in >> w) f.push_back(w);
  return f;
}

std::string join(const std::vector<std::string>& f, size_t from, size_t to) {
  std::string out;
  for (size_t i = from; i < to && i < f.size(); ++i) out += (out.empty() ? "" : "  ") + f[i];
  return out;
}

bool isDataLine(const std::string& line) {
  const auto f = split(line);
  return f.size() >= 13 && f[0].find_first_not_of("0123456789") == std::string::npos;
}

void expectSameOutOfPlace(const NcclTestsLog& a, const NcclTestsLog& b) {
  ASSERT_EQ(a.rows.size(), b.rows.size());
  for (size_t i = 0; i < a.rows.size(); ++i) {
    EXPECT_EQ(a.rows[i].size_bytes, b.rows[i].size_bytes) << i;
    EXPECT_EQ(a.rows[i].count, b.rows[i].count) << i;
    EXPECT_DOUBLE_EQ(a.rows[i].oop_time_us, b.rows[i].oop_time_us) << i;
    EXPECT_DOUBLE_EQ(a.rows[i].oop_algbw, b.rows[i].oop_algbw) << i;
    EXPECT_DOUBLE_EQ(a.rows[i].oop_busbw, b.rows[i].oop_busbw) << i;
  }
}

TEST(NcclTestsLog, TwoNodeH100AllReduce) {
  BRAID_SKIP_WITHOUT_REALCASES();
  auto log = readNcclTestsLog(logPath("hgx-h100-xe9680-2node-16rank-all_reduce_perf.txt"));
  ASSERT_TRUE(log.isOk()) << log.status().toString();
  // 8 B .. 16 GiB by factor 2: 2^3 .. 2^34 -> 32 rows.
  ASSERT_EQ(log->rows.size(), 32u);
  EXPECT_EQ(log->collective, "all_reduce");
  EXPECT_EQ(log->ranks, 16);
  EXPECT_EQ(log->nodes, 2);
  EXPECT_EQ(log->nccl_version, "2.26.2+cuda12.8");  // a line that lost its '#'
  const NcclTestsRow& first = log->rows.front();
  EXPECT_EQ(first.size_bytes, 8u);
  EXPECT_EQ(first.count, 2u);
  EXPECT_EQ(first.type, "float");
  EXPECT_EQ(first.redop, "sum");
  EXPECT_EQ(first.root, -1);
  EXPECT_DOUBLE_EQ(first.oop_time_us, 68.52);
  EXPECT_DOUBLE_EQ(first.ip_time_us, 24.70);
  EXPECT_DOUBLE_EQ(first.timeUs(), (68.52 + 24.70) / 2);
  const NcclTestsRow& gib = log->rows.at(27);  // 2^30
  EXPECT_EQ(gib.size_bytes, 1073741824u);
  EXPECT_DOUBLE_EQ(gib.oop_busbw, 448.90);
  EXPECT_DOUBLE_EQ(gib.ip_busbw, 450.37);
  EXPECT_DOUBLE_EQ(log->rows.back().oop_algbw, 250.24);
}

TEST(NcclTestsLog, H20AllToAllWithoutHeaderAndNotApplicableWrong) {
  BRAID_SKIP_WITHOUT_REALCASES();
  auto log = readNcclTestsLog(logPath("h20-vm-2node-4rank-alltoall_perf.txt"));
  ASSERT_TRUE(log.isOk()) << log.status().toString();
  ASSERT_EQ(log->rows.size(), 13u);
  EXPECT_EQ(log->collective, "alltoall");  // from the file name
  EXPECT_EQ(log->ranks, 4);
  EXPECT_EQ(log->nodes, 2);
  EXPECT_EQ(log->rows.front().redop, "none");
  EXPECT_DOUBLE_EQ(log->rows.front().oop_busbw, 14.85);
  EXPECT_DOUBLE_EQ(log->rows.front().ip_time_us, 53.47);  // followed by "N/A"
  EXPECT_EQ(log->rows.back().size_bytes, 4294967296u);
}

TEST(NcclTestsLog, H200SizesThatAreNotPowersOfTwo) {
  BRAID_SKIP_WITHOUT_REALCASES();
  auto log = readNcclTestsLog(logPath("h200-2node-16rank-all_reduce_perf-baremetal.txt"));
  ASSERT_TRUE(log.isOk()) << log.status().toString();
  ASSERT_EQ(log->rows.size(), 3u);
  EXPECT_EQ(log->rows.at(1).size_bytes, 3221225472u);  // -f 3
  EXPECT_DOUBLE_EQ(log->rows.at(2).oop_busbw, 488.81);
  EXPECT_EQ(log->ranks, 16);
}

// Every realcases log: algbw = size / time and busbw = algbw x factor to the printed precision, in both groups.
TEST(NcclTestsLog, EveryRealcasesRowMatchesNcclTestsDefinitions) {
  BRAID_SKIP_WITHOUT_REALCASES();
  const std::vector<std::string> logs = realcaseLogs();
  ASSERT_GE(logs.size(), 4u);
  for (const std::string& path : logs) {
    auto log = readNcclTestsLog(path);
    ASSERT_TRUE(log.isOk()) << log.status().toString();
    ASSERT_FALSE(log->collective.empty()) << path;
    ASSERT_GT(log->ranks, 1) << path;
    const double factor = ncclTestsBusFactor(log->collective, log->ranks).value();
    for (const NcclTestsRow& r : log->rows) {
      ASSERT_TRUE(r.has_out_of_place && r.has_in_place) << path << ":" << r.line;
      for (auto [time, algbw, busbw] :
           {std::tuple{r.oop_time_us, r.oop_algbw, r.oop_busbw}, std::tuple{r.ip_time_us, r.ip_algbw, r.ip_busbw}}) {
        const double expect_algbw = static_cast<double>(r.size_bytes) / (time * 1e3);
        // Times are printed with 4-5 significant digits, bandwidths with 2 decimals.
        EXPECT_NEAR(algbw, expect_algbw, 0.006 + 0.002 * expect_algbw) << path << ":" << r.line;
        EXPECT_NEAR(busbw, expect_algbw * factor, 0.006 + 0.002 * busbw) << path << ":" << r.line;
      }
    }
  }
}

// The shapes logs arrive in: every '#' lost, the in-place group or the last #wrong trimmed, the redop and root
// columns of nccl-tests before 2.10 absent, the table printed twice. Each reads to the same out-of-place rows.
TEST(NcclTestsLog, LostHashesTrimmedColumnsOldFormatsAndRepeats) {
  BRAID_SKIP_WITHOUT_REALCASES();
  for (const std::string& path : realcaseLogs()) {
    const std::string text = readFile(path).value();
    const NcclTestsLog original = parseNcclTestsLog(text, path).value();
    const std::string no_hash = eachLine(text, [](std::string line) {
      const size_t p = line.find('#');
      if (p != std::string::npos) line.erase(p, 1);
      return line;
    });
    const std::string in_place_trimmed =
        eachLine(text, [](const std::string& line) { return isDataLine(line) ? join(split(line), 0, 9) : line; });
    const std::string wrong_trimmed =
        eachLine(text, [](const std::string& line) { return isDataLine(line) ? join(split(line), 0, 8) : line; });
    const std::string last_wrong_trimmed =
        eachLine(text, [](const std::string& line) { return isDataLine(line) ? join(split(line), 0, 12) : line; });
    const std::string old_format = eachLine(text, [](const std::string& line) {
      if (!isDataLine(line)) return line.find("redop") != std::string::npos ? std::string("#") : line;
      const auto f = split(line);
      return join(f, 0, 3) + "  " + join(f, 5, 13);  // size count type time algbw busbw #wrong ...
    });
    for (const auto& [what, variant] :
         {std::pair{"no '#'", no_hash}, std::pair{"in-place trimmed", in_place_trimmed},
          std::pair{"#wrong trimmed", wrong_trimmed}, std::pair{"last #wrong trimmed", last_wrong_trimmed},
          std::pair{"no redop/root", old_format}, std::pair{"printed twice", text + text}}) {
      SCOPED_TRACE(path + ": " + what);
      auto parsed = parseNcclTestsLog(variant, path);
      ASSERT_TRUE(parsed.isOk()) << parsed.status().toString();
      expectSameOutOfPlace(original, parsed.value());
      EXPECT_EQ(parsed->ranks, original.ranks);
    }
    const NcclTestsLog trimmed = parseNcclTestsLog(in_place_trimmed, path).value();
    EXPECT_FALSE(trimmed.rows.front().has_in_place);
    EXPECT_DOUBLE_EQ(trimmed.rows.front().timeUs(), original.rows.front().oop_time_us);
    const NcclTestsLog old = parseNcclTestsLog(old_format, path).value();
    EXPECT_EQ(old.rows.front().redop, "");
    EXPECT_TRUE(old.rows.front().has_in_place);
    EXPECT_DOUBLE_EQ(old.rows.front().ip_busbw, original.rows.front().ip_busbw);
  }
}

TEST(NcclTestsLog, RedopWithoutRootAndFloatErrorsOfOldVersions) {
  // nccl-tests 2.0-2.9: "size count type redop time algbw busbw error time algbw busbw error".
  const std::string text =
      "#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n"
      "     1048576        262144     float     sum    100.0   10.49   19.66  1e-07    104.9   10.00   18.75  2e-07\n"
      "    16777216       4194304     float     sum    500.0   33.55   62.91  0e+00    512.0   32.77   61.44  0e+00\n";
  auto log = parseNcclTestsLog(text, "old_all_reduce_perf.log");
  ASSERT_TRUE(log.isOk()) << log.status().toString();
  ASSERT_EQ(log->rows.size(), 2u);
  EXPECT_EQ(log->collective, "all_reduce");
  EXPECT_EQ(log->rows[0].redop, "sum");
  EXPECT_EQ(log->rows[0].root, -1);
  EXPECT_DOUBLE_EQ(log->rows[0].oop_time_us, 100.0);
  EXPECT_DOUBLE_EQ(log->rows[1].ip_time_us, 512.0);
  // The same rows without the header: the alignment that satisfies algbw = size / time decides.
  auto bare = parseNcclTestsLog(text.substr(text.find('\n') + 1), "x.log");
  ASSERT_TRUE(bare.isOk()) << bare.status().toString();
  EXPECT_DOUBLE_EQ(bare->rows[0].oop_time_us, 100.0);
  EXPECT_DOUBLE_EQ(bare->rows[1].ip_algbw, 32.77);
}

TEST(NcclTestsLog, MetadataFromInfoLines) {
  const std::string text =
      "# Collective test starting: all_gather_perf\n"
      "node-A:123:123 [0] NCCL INFO NCCL_ALGO set by environment to Ring\n"
      "node-A:123:123 [0] NCCL INFO NCCL_PROTO set by environment to LL128\n"
      "#  Rank  0 Group  0 Pid    1 on node-A device  0 [0x18] NVIDIA H100\n"
      "#  Rank  1 Group  0 Pid    2 on node-A device  1 [0x2a] NVIDIA H100\n"
      "#  Rank  2 Group  0 Pid    3 on node-B device  0 [0x18] NVIDIA H100\n"
      "     1048576         87381     float    none      -1    40.00   26.21   17.48      0    40.00   26.21   17.48"
      "      0\n";
  auto log = parseNcclTestsLog(text, "run.txt");
  ASSERT_TRUE(log.isOk()) << log.status().toString();
  EXPECT_EQ(log->collective, "all_gather");
  EXPECT_EQ(log->nccl_algo, "Ring");
  EXPECT_EQ(log->nccl_proto, "LL128");
  EXPECT_EQ(log->ranks, 3);
  EXPECT_EQ(log->nodes, 2);
}

// The device list, one entry per rank (first line kept), and how two lists differ: host names, a rank's GPU model,
// a rank's PCI bus (nccl-tests' "[0000:5d:00]" and older "[0x5d]" name one bus).
TEST(NcclTestsLog, RankTablesAndTheirDifferences) {
  const std::string row =
      "     1048576        262144     float     sum      -1    40.00   26.21   45.87      0    40.00   26.21   45.87"
      "      0\n";
  const std::string a_text =
      "#  Rank  1 Group  0 Pid    2 on node-A device  1 [0000:5d:00] NVIDIA H100 80GB HBM3\n"
      "#  Rank  0 Group  0 Pid    1 on node-A device  0 [0000:18:00] NVIDIA H100 80GB HBM3\n"
      "#  Rank  0 Group  0 Pid    1 on node-A device  0 [0000:18:00] NVIDIA H100 80GB HBM3\n" +
      row;
  auto a = parseNcclTestsLog(a_text, "a.txt");
  ASSERT_TRUE(a.isOk()) << a.status().toString();
  ASSERT_EQ(a->rank_lines.size(), 2u);
  EXPECT_EQ(a->rank_lines[0].rank, 0);
  EXPECT_EQ(a->rank_lines[0].line, 2);
  EXPECT_EQ(a->rank_lines[1].host, "node-A");
  EXPECT_EQ(a->rank_lines[1].device, 1);
  EXPECT_EQ(a->rank_lines[1].bus, "0000:5d:00");
  EXPECT_EQ(a->rank_lines[1].name, "NVIDIA H100 80GB HBM3");

  // The same machine printed by an older nccl-tests: bus numbers only. No difference.
  auto same = parseNcclTestsLog(
      "#  Rank  0 Group  0 Pid  7 on node-A device  0 [0x18] NVIDIA H100 80GB HBM3\n"
      "#  Rank  1 Group  0 Pid  8 on node-A device  1 [0x5d] NVIDIA H100 80GB HBM3\n" +
          row,
      "same.txt");
  ASSERT_TRUE(same.isOk());
  const RankTableDifferences none = compareRankTables(*a, "a.txt", *same, "same.txt");
  EXPECT_EQ(none.hosts, "");
  EXPECT_EQ(none.devices, "");
  EXPECT_EQ(none.bus_ids, "");

  // Another host, rank 1 on another bus and another GPU model.
  auto b = parseNcclTestsLog(
      "#  Rank  0 Group  0 Pid  7 on node-C device  0 [0000:18:00] NVIDIA H100 80GB HBM3\n"
      "#  Rank  1 Group  0 Pid  8 on node-C device  1 [0000:3a:00] NVIDIA H200\n" +
          row,
      "b.txt");
  ASSERT_TRUE(b.isOk());
  const RankTableDifferences d = compareRankTables(*a, "a.txt", *b, "b.txt");
  EXPECT_EQ(d.hosts, "a.txt ran on node-A, b.txt on node-C");
  EXPECT_EQ(d.devices, "rank 1 is a NVIDIA H100 80GB HBM3 in a.txt (line 1) but a NVIDIA H200 in b.txt (line 2)");
  EXPECT_EQ(d.bus_ids, "rank 1 is at PCI bus [0000:5d:00] in a.txt (line 1) but [0000:3a:00] in b.txt (line 2)");

  // A log without a device list is compared with nothing.
  auto bare = parseNcclTestsLog(row, "bare.txt");
  ASSERT_TRUE(bare.isOk());
  EXPECT_TRUE(bare->rank_lines.empty());
  EXPECT_EQ(compareRankTables(*a, "a.txt", *bare, "bare.txt").hosts, "");
}

TEST(NcclTestsLog, MalformedRowsNameFileLineAndField) {
  auto r = parseNcclTestsLog("# header\n  1024 256 float sum -1 1.0 x 3.0 0 1.0 2.0 3.0 0\n", "log.txt");
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), StatusCode::kParseError);
  EXPECT_NE(r.status().message().find("log.txt:2"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("out-of-place algbw"), std::string::npos) << r.status().message();
  r = parseNcclTestsLog("1024 256 12 sum -1 1.0 2.0 3.0 0\n", "log.txt");
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("(type)"), std::string::npos) << r.status().message();
  r = parseNcclTestsLog("1024 256 float sum -1 1.0 2.0 3.0 0 4.0 zz 5.0 0\n", "log.txt");
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("in-place algbw"), std::string::npos) << r.status().message();
  r = parseNcclTestsLog("1024 256 float sum -1\n", "log.txt");
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("missing"), std::string::npos) << r.status().message();
  r = parseNcclTestsLog("# nThread 1 nGpus 1\n# Out of bounds values : 0 OK\n", "empty.txt");
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("empty.txt: no nccl-tests table row"), std::string::npos);
  EXPECT_EQ(readNcclTestsLog("/nonexistent/x.txt").status().code(), StatusCode::kNotFound);
}

TEST(NcclTestsLog, CollectiveNamesAndBusFactors) {
  EXPECT_EQ(ncclTestsCollectiveIn("all_reduce_perf").value(), "all_reduce");
  EXPECT_EQ(ncclTestsCollectiveIn("reduce_scatter_perf").value(), "reduce_scatter");
  EXPECT_EQ(ncclTestsCollectiveIn("ring-LL-allgather.txt").value(), "all_gather");
  EXPECT_EQ(ncclTestsCollectiveIn("ReduceScatter.log").value(), "reduce_scatter");
  EXPECT_EQ(ncclTestsCollectiveIn("reduce_perf").value(), "reduce");
  EXPECT_EQ(ncclTestsCollectiveIn("scatter_perf").value(), "scatter");
  EXPECT_FALSE(ncclTestsCollectiveIn("measurements.txt").has_value());
  EXPECT_DOUBLE_EQ(ncclTestsBusFactor("all_reduce", 16).value(), 30.0 / 16);
  EXPECT_DOUBLE_EQ(ncclTestsBusFactor("alltoall", 4).value(), 0.75);
  EXPECT_DOUBLE_EQ(ncclTestsBusFactor("broadcast", 8).value(), 1.0);
  EXPECT_FALSE(ncclTestsBusFactor("all_reduce", 0).has_value());
  EXPECT_FALSE(ncclTestsBusFactor("nonsense", 8).has_value());
}

}  // namespace
}  // namespace braid
