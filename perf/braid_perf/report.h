// braid_perf's output: nccl-tests' text table (header, "# Using devices", the two-level column header, one row
// per size, footer; nccl-tests src/util.cu and ../shared/realcases/nccltests/ for widths) and the -J JSON file
// (nccl-tests' JSON layout: config, devices, one record per row with "out_of_place" and "in_place").
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "braid_perf/options.h"

namespace braid::perf {

/// One "# Using devices" line: the rank, its process and host. CPU ranks print device 0 "[cpu]".
struct DeviceLine {
  int rank = 0;
  int64_t pid = 0;
  std::string host;
  std::string info;  // after "[cpu] ", e.g. "CPU (Intel(R) Xeon(R) ...)"
};

/// Result of one mode (out-of-place or in-place) of a row.
struct ModeResult {
  double time_us = 0;  // per operation, combined over ranks per -a
  double algbw = 0;    // GB/s
  double busbw = 0;    // GB/s
  bool checked = false;
  int64_t wrong = 0;  // elements, summed over ranks
};

struct RowResult {
  uint64_t bytes = 0;
  uint64_t count = 0;
  std::string type;
  std::string op;  // "none" for collectives that do not reduce
  int root = -1;   // -1 for collectives without a root
  ModeResult out_of_place;
  ModeResult in_place;
};

/// Time in µs in 7 columns: two decimals below 100 µs, one below 10000 µs, none above (as nccl-tests).
std::string formatTime(double time_us);
/// Bandwidth in GB/s in 6 columns, two decimals.
std::string formatBandwidth(double gbps);

/// Lines before the column header: version, testName(collective), parameters, Braid's line, "#", "# Using
/// devices", one line per rank. Each line ends with '\n'.
std::string formatPreamble(const Options& options, const std::string& version, const std::string& braid_line,
                           const std::vector<DeviceLine>& devices);
/// "#" and the three column header lines.
std::string formatColumnHeader();
/// One data row with both modes, '\n'-terminated.
std::string formatRow(const RowResult& row);
/// "# Out of bounds values : N OK|FAILED", "# Avg bus bandwidth    : x ", "#", "# Collective test concluded: p".
/// `test_name`: testName(collective).
std::string formatFooter(int out_of_bounds, double avg_busbw, const std::string& test_name);

/// Whether -J `path` can be written, checked before the sweep runs, in the braid CLI's words (checkOutputPath):
/// the file, when it exists, is a writable regular file; otherwise its directory exists and is writable. Creates
/// nothing. Errors: kInvalidUsage "-J: an empty path names no file to write" (a bad flag, exit 2); kInvalidArgument
/// "cannot write <path>: directory <dir> does not exist", "cannot write <path>: it is a directory", ... (exit 1).
Status checkJsonPath(const std::string& path);

/// The -J document, built as the run goes.
class JsonReport {
 public:
  JsonReport(const Options& options, const std::vector<std::string>& argv, const std::string& version,
             const std::vector<DeviceLine>& devices, const std::string& transport);
  void addRow(const RowResult& row);
  void finish(int out_of_bounds, double avg_busbw, const std::vector<std::string>& errors);
  const nlohmann::json& document() const { return doc_; }
  /// Writes the document (2-space indented). Errors: kSystemError naming the file.
  Status write(const std::string& path) const;

 private:
  nlohmann::json doc_;
};

/// Local time as "YYYY-MM-DD HH:MM:SS".
std::string nowString();

}  // namespace braid::perf
