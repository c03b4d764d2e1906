// braid_perf's output against real nccl-tests outputs (../shared/realcases/nccltests/): the column header, the
// parameter line, device lines, every data row rebuilt from its own numbers, and the footer must come out
// character for character as nccl-tests printed them.
#include "braid_perf/report.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace braid::perf {
namespace {

const std::string kRealcases = std::string(BRAID_SHARED_DIR) + "/realcases/nccltests";

std::vector<std::string> readLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

std::vector<std::string> realcaseFiles() {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(kRealcases, ec)) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

TEST(PerfReportTest, ColumnHeaderIsNcclTests) {
  const std::string path = kRealcases + "/gcp-a3mega-h100-2node-16rank-all_reduce_perf.txt";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " missing";
  const std::vector<std::string> lines = readLines(path);
  // The three lines after the "#" that follows the device list.
  size_t at = 0;
  while (at < lines.size() && lines[at].find("out-of-place") == std::string::npos) ++at;
  ASSERT_LT(at + 2, lines.size());
  const std::string want = "#\n" + lines[at] + "\n" + lines[at + 1] + "\n" + lines[at + 2] + "\n";
  EXPECT_EQ(formatColumnHeader(), want);
}

TEST(PerfReportTest, EveryRealRowRebuildsExactly) {
  const std::vector<std::string> files = realcaseFiles();
  if (files.empty()) GTEST_SKIP() << kRealcases << " missing";
  int rows = 0;
  for (const std::string& file : files) {
    for (const std::string& line : readLines(file)) {
      if (line.empty() || line[0] == '#' || line.rfind("NCCL", 0) == 0) continue;
      std::istringstream in(line);
      RowResult row;
      std::string wrong_out, wrong_in;
      in >> row.bytes >> row.count >> row.type >> row.op >> row.root >> row.out_of_place.time_us >>
          row.out_of_place.algbw >> row.out_of_place.busbw >> wrong_out >> row.in_place.time_us >> row.in_place.algbw >>
          row.in_place.busbw >> wrong_in;
      ASSERT_FALSE(in.fail()) << file << ": " << line;
      for (auto [mode, text] : {std::pair{&row.out_of_place, wrong_out}, std::pair{&row.in_place, wrong_in}}) {
        mode->checked = text != "N/A";
        mode->wrong = mode->checked ? std::stoll(text) : 0;
      }
      EXPECT_EQ(formatRow(row), line + "\n") << file;
      ++rows;
    }
  }
  EXPECT_GT(rows, 60);
}

TEST(PerfReportTest, ParameterAndDeviceLinesAreNcclTests) {
  const std::string path = kRealcases + "/h200-2node-16rank-all_reduce_perf-baremetal.txt";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " missing";
  const std::vector<std::string> lines = readLines(path);
  // "# nThread 1 nGpus 1 minBytes 1073741824 maxBytes 17179869184 step: 3(factor) warmup iters: 5 iters: 20 ..."
  Options o;
  o.program = "all_reduce_perf";
  o.min_bytes = 1073741824;
  o.max_bytes = 17179869184ull;
  o.step_factor = 3;
  o.warmup_iters = 5;
  o.iters = 20;
  const std::string preamble =
      formatPreamble(o, "0.1.0", "", {DeviceLine{0, 6287, "node-A", "CPU"}, DeviceLine{10, 7440, "node-B", "CPU"}});
  std::istringstream in(preamble);
  std::vector<std::string> ours;
  for (std::string l; std::getline(in, l);) ours.push_back(l);
  ASSERT_EQ(ours.size(), 7u);
  EXPECT_EQ(ours[0], "# Braid braid_perf version 0.1.0 (nccl-tests format)");
  EXPECT_EQ(ours[1], "# Collective test starting: all_reduce_perf");
  EXPECT_EQ(ours[2], lines[0]);
  EXPECT_EQ(ours[3], "#");
  EXPECT_EQ(ours[4], "# Using devices");
  // Everything up to the device number ("#  Rank  0 Group  0 Pid   6287 on     node-A device "); CPU ranks are
  // device 0.
  const std::string real0 = lines[3], real10 = lines[13];
  const size_t cut = real0.find("device ") + 7;
  EXPECT_EQ(ours[5].substr(0, cut), real0.substr(0, cut));
  EXPECT_EQ(ours[6].substr(0, cut), real10.substr(0, cut));
  EXPECT_EQ(ours[6].substr(cut, 2), " 0");
  EXPECT_EQ(ours[5].substr(real0.find('[')), "[cpu] CPU");
}

TEST(PerfReportTest, StartingLineNamesTheCollectiveStarted) {
  Options o;
  o.collective = Collective::kReduceScatter;
  o.program = "braid_perf reduce_scatter";
  const std::string preamble = formatPreamble(o, "0.1.0", "", {});
  EXPECT_NE(preamble.find("\n# Collective test starting: reduce_scatter_perf\n"), std::string::npos) << preamble;
}

// -J is checked before the sweep: a missing folder, a folder named as the file, an unwritable file.
TEST(PerfReportTest, JsonPathIsCheckedWithoutCreatingIt) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("braid_perf_json_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string fresh = (dir / "out.json").string();
  EXPECT_TRUE(checkJsonPath(fresh).isOk()) << checkJsonPath(fresh).toString();
  EXPECT_FALSE(std::filesystem::exists(fresh));
  const Status missing = checkJsonPath((dir / "no/such/folder/x.json").string());
  EXPECT_EQ(missing.code(), StatusCode::kInvalidArgument);
  // The braid CLI's words for an output whose directory is missing (checkOutputPath).
  EXPECT_EQ(missing.message(), "cannot write " + (dir / "no/such/folder/x.json").string() + ": directory " +
                                   (dir / "no/such/folder").string() + " does not exist");
  const Status is_dir = checkJsonPath(dir.string());
  EXPECT_NE(is_dir.message().find("is a directory"), std::string::npos) << is_dir.message();
  { std::ofstream(fresh) << "{}"; }
  EXPECT_TRUE(checkJsonPath(fresh).isOk());                        // an existing file is overwritten at the end
  EXPECT_EQ(checkJsonPath("").code(), StatusCode::kInvalidUsage);  // a bad flag: exit 2
  std::filesystem::remove_all(dir);
}

TEST(PerfReportTest, FooterIsNcclTests) {
  const std::string path = kRealcases + "/gcp-a3mega-h100-2node-16rank-all_reduce_perf.txt";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " missing";
  const std::vector<std::string> lines = readLines(path);
  ASSERT_GE(lines.size(), 2u);
  const std::string footer = formatFooter(0, 70.742, "all_reduce_perf");
  EXPECT_EQ(footer, lines[lines.size() - 2] + "\n" + lines[lines.size() - 1] + "\n" +
                        "#\n# Collective test concluded: all_reduce_perf\n");
  EXPECT_EQ(formatFooter(3, 1.5, "x").substr(0, 34), "# Out of bounds values : 3 FAILED\n");
}

TEST(PerfReportTest, NumberWidths) {
  EXPECT_EQ(formatTime(68.52), "  68.52");
  EXPECT_EQ(formatTime(135.84), "  135.8");
  EXPECT_EQ(formatTime(9999.94), " 9999.9");
  EXPECT_EQ(formatTime(12646.2), "  12646");
  EXPECT_EQ(formatBandwidth(0.004), "  0.00");
  EXPECT_EQ(formatBandwidth(458.654), "458.65");
}

TEST(PerfReportTest, JsonHasConfigDevicesAndOneRecordPerRow) {
  Options o;
  o.program = "all_gather_perf";
  o.collective = Collective::kAllGather;
  o.threads = 2;
  o.min_bytes = 8;
  o.max_bytes = 64;
  o.step_factor = 2;
  JsonReport report(o, {"all_gather_perf", "-t", "2"}, "0.1.0", {DeviceLine{0, 1, "h", "CPU"}, {1, 1, "h", "CPU"}},
                    "auto");
  RowResult row;
  row.bytes = 64;
  row.count = 8;
  row.type = "float";
  row.op = "none";
  row.out_of_place = {12.5, 0.1, 0.05, true, 0};
  row.in_place = {11.5, 0.2, 0.1, false, 0};
  report.addRow(row);
  report.finish(0, 0.075, {});
  const nlohmann::json& d = report.document();
  EXPECT_EQ(d["collective"], "all_gather");
  EXPECT_EQ(d["config"]["nthreads"], 2);
  EXPECT_EQ(d["config"]["step_factor"], 2);
  EXPECT_EQ(d["config"]["devices"].size(), 2u);
  ASSERT_EQ(d["results"].size(), 1u);
  const nlohmann::json& r = d["results"][0];
  EXPECT_EQ(r["size"], 64);
  EXPECT_EQ(r["count"], 8);
  EXPECT_EQ(r["redop"], "none");
  EXPECT_EQ(r["out_of_place"]["time"], 12.5);
  EXPECT_EQ(r["out_of_place"]["nwrong"], 0);
  EXPECT_TRUE(r["in_place"]["nwrong"].is_null());
  EXPECT_EQ(d["out_of_bounds"]["okay"], true);
  EXPECT_EQ(d["average_bus_bandwidth"]["bandwidth"], 0.075);
}

}  // namespace
}  // namespace braid::perf
