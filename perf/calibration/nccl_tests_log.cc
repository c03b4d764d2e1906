// The reader of nccl-tests output logs (calibration.h parseNcclTestsOutput). Apart from the fit so that it needs
// nothing but the common layer (the fuzz target nccl_tests links it alone).
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "calibration/calibration.h"

namespace braid::calibration {
namespace {

// Splits a line into whitespace-separated fields.
std::vector<std::string> fields(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  std::string f;
  while (in >> f) out.push_back(f);
  return out;
}

bool parseDouble(const std::string& s, double* out) {
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return end != s.c_str() && *end == '\0' && std::isfinite(*out);
}

bool parseUint(const std::string& s, uint64_t* out) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) return false;
  errno = 0;
  *out = std::strtoull(s.c_str(), nullptr, 10);
  return errno != ERANGE;
}

}  // namespace

Result<std::vector<NcclTestsRow>> parseNcclTestsOutput(const std::string& text, const std::string& filename) {
  std::vector<NcclTestsRow> rows;
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const auto f = fields(line);
    if (f.empty() || f[0][0] == '#') continue;
    uint64_t size = 0;
    if (!parseUint(f[0], &size)) continue;  // "NCCL version ...", INFO lines
    if (f.size() < 13) {
      return Status(StatusCode::kParseError,
                    fmt::format("{}:{}: data row has {} fields, nccl-tests rows have 13 (size count type redop "
                                "root time algbw busbw #wrong time algbw busbw #wrong)",
                                filename, line_no, f.size()));
    }
    NcclTestsRow row;
    row.size_bytes = size;
    row.type = f[2];
    row.redop = f[3];
    const char* bad = nullptr;
    if (!parseUint(f[1], &row.count)) bad = "count";
    if (!bad && !parseDouble(f[5], &row.oop_time_us)) bad = "out-of-place time";
    if (!bad && !parseDouble(f[6], &row.oop_algbw)) bad = "out-of-place algbw";
    if (!bad && !parseDouble(f[7], &row.oop_busbw)) bad = "out-of-place busbw";
    if (!bad && !parseDouble(f[9], &row.ip_time_us)) bad = "in-place time";
    if (!bad && !parseDouble(f[10], &row.ip_algbw)) bad = "in-place algbw";
    if (!bad && !parseDouble(f[11], &row.ip_busbw)) bad = "in-place busbw";
    if (bad)
      return Status(StatusCode::kParseError, fmt::format("{}:{}: field {} is not a number", filename, line_no, bad));
    const bool repeated =
        std::any_of(rows.begin(), rows.end(), [&](const NcclTestsRow& r) { return r.size_bytes == row.size_bytes; });
    if (!repeated) rows.push_back(row);
  }
  return rows;
}

}  // namespace braid::calibration
