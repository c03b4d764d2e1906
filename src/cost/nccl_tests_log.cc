// The nccl-tests log reader (include/braid/nccl_tests_log.h). Needs nothing but the common layer, so the fuzz
// target nccl_tests compiles it alone.
#include "braid/nccl_tests_log.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "braid/file_io.h"

namespace braid {
namespace {

std::vector<std::string> fields(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  std::string f;
  while (in >> f) out.push_back(f);
  return out;
}

bool parseDouble(const std::string& s, double* out) {
  char* end = nullptr;
  errno = 0;
  *out = std::strtod(s.c_str(), &end);
  return end != s.c_str() && *end == '\0' && std::isfinite(*out) && errno != ERANGE;
}

bool parseUint(const std::string& s, uint64_t* out) {
  if (s.empty() || s.size() > 20 || s.find_first_not_of("0123456789") != std::string::npos) return false;
  errno = 0;
  *out = std::strtoull(s.c_str(), nullptr, 10);
  return errno != ERANGE;
}

bool parseInt(const std::string& s, int64_t* out) {
  const bool negative = !s.empty() && s[0] == '-';
  uint64_t magnitude = 0;
  if (!parseUint(negative ? s.substr(1) : s, &magnitude) || magnitude > (uint64_t{1} << 62)) return false;
  *out = negative ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude);
  return true;
}

bool isNumber(const std::string& s) {
  double ignored;
  return parseDouble(s, &ignored);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// What the column header says about the columns between type and the first time ("redop root", "redop", none).
struct Columns {
  bool known = false;
  bool redop = true;
  bool root = true;
};

// The header line "size count type redop root time algbw busbw #wrong ..." (with or without its '#').
void readHeader(const std::vector<std::string>& f, Columns* columns) {
  std::vector<std::string> words;
  for (const std::string& w : f) {
    if (w != "#") words.push_back(lower(w[0] == '#' && w.size() > 1 && w != "#wrong" ? w.substr(1) : w));
  }
  if (words.size() < 4 || words[0] != "size" || words[1] != "count" || words[2] != "type") return;
  columns->known = true;
  columns->redop = std::find(words.begin(), words.end(), "redop") != words.end();
  columns->root = std::find(words.begin(), words.end(), "root") != words.end();
}

// One group "time algbw busbw [#wrong]" at `at`: false when the three numbers are not there.
bool readGroup(const std::vector<std::string>& f, size_t at, double* time, double* algbw, double* busbw) {
  return at + 3 <= f.size() && parseDouble(f[at], time) && parseDouble(f[at + 1], algbw) &&
         parseDouble(f[at + 2], busbw);
}

// Whether algbw = size / time (nccl-tests' definition: bytes / µs / 1e3 = GB/s) holds to the printed precision.
bool consistent(uint64_t size, double time_us, double algbw) {
  if (!(time_us > 0)) return false;
  const double expect = static_cast<double>(size) / (time_us * 1e3);
  return std::fabs(expect - algbw) <= 0.006 + 0.01 * expect;
}

// Where the first time column is: after type, redop (a word) and root (an integer) when the row has them. The
// header decides when it was seen; otherwise the alignment whose first group satisfies algbw = size / time wins,
// and a redop is taken to be followed by a root (nccl-tests >= 2.10) when neither alignment or both do.
size_t firstTimeColumn(const std::vector<std::string>& f, uint64_t size, const Columns& columns, bool* has_redop,
                       bool* has_root) {
  size_t at = 3;
  *has_redop = at < f.size() && !isNumber(f[at]) && f[at] != "N/A";
  if (columns.known && columns.redop != *has_redop) *has_redop = columns.redop && *has_redop;
  if (*has_redop) ++at;
  int64_t root = 0;
  const bool integer_next = at < f.size() && parseInt(f[at], &root);
  if (columns.known) {
    *has_root = columns.root && integer_next;
  } else {
    double t0, a0, b0, t1, a1, b1;
    const bool without = readGroup(f, at, &t0, &a0, &b0) && consistent(size, t0, a0);
    const bool with = integer_next && readGroup(f, at + 1, &t1, &a1, &b1) && consistent(size, t1, a1);
    *has_root = with != without ? with : (*has_redop && integer_next);
  }
  return *has_root ? at + 1 : at;
}

// Reads a data row (f[0] is its size, f[1] its count). The error names the field that is not what a row holds.
Result<NcclTestsRow> readRow(const std::vector<std::string>& f, const Columns& columns, const std::string& where) {
  NcclTestsRow row;
  parseUint(f[0], &row.size_bytes);
  parseUint(f[1], &row.count);
  if (f.size() < 3 || isNumber(f[2])) {
    return Status(StatusCode::kParseError,
                  fmt::format("{}: field 3 (type): expected a data type name such as float after size and count, "
                              "got '{}'",
                              where, f.size() < 3 ? "" : f[2]));
  }
  row.type = f[2];
  bool has_redop = false, has_root = false;
  size_t at = firstTimeColumn(f, row.size_bytes, columns, &has_redop, &has_root);
  if (has_redop) row.redop = f[3];
  if (has_root) parseInt(f[at - 1], &row.root);
  static const char* kNames[] = {"out-of-place time", "out-of-place algbw", "out-of-place busbw"};
  for (int k = 0; k < 3; ++k) {
    double ignored;
    if (at + k >= f.size() || !parseDouble(f[at + k], &ignored)) {
      return Status(StatusCode::kParseError,
                    fmt::format("{}: field {} ({}): {} (a row is: size count type [redop [root]] time algbw busbw "
                                "#wrong [time algbw busbw #wrong])",
                                where, at + k + 1, kNames[k],
                                at + k >= f.size() ? "missing" : "'" + f[at + k] + "' is not a number"));
    }
  }
  readGroup(f, at, &row.oop_time_us, &row.oop_algbw, &row.oop_busbw);
  row.has_out_of_place = true;
  // The in-place group starts after the out-of-place #wrong; a trimmed row may end anywhere after it.
  if (readGroup(f, at + 4, &row.ip_time_us, &row.ip_algbw, &row.ip_busbw)) {
    row.has_in_place = true;
  } else {
    for (size_t k = at + 4; k < f.size() && k < at + 7; ++k) {
      double ignored;
      if (!parseDouble(f[k], &ignored)) {
        return Status(StatusCode::kParseError,
                      fmt::format("{}: field {} (in-place {}): '{}' is not a number", where, k + 1,
                                  k == at + 4   ? "time"
                                  : k == at + 5 ? "algbw"
                                                : "busbw",
                                  f[k]));
      }
    }
  }
  return row;
}

// Metadata from a line that is not a row.
void readMetadata(const std::string& line, int line_no, const std::vector<std::string>& f, NcclTestsLog* log,
                  std::set<std::string>* ranks, std::set<std::string>* hosts) {
  static const std::string kStarting = "Collective test starting:";
  if (const size_t p = line.find(kStarting); p != std::string::npos) {
    const std::vector<std::string> rest = fields(line.substr(p + kStarting.size()));
    if (!rest.empty()) {
      if (auto c = ncclTestsCollectiveIn(rest[0])) log->collective = *c;
    }
  }
  for (const char* var : {"NCCL_ALGO", "NCCL_PROTO"}) {
    const std::string key = std::string(var) + " set by environment to ";
    if (const size_t p = line.find(key); p != std::string::npos) {
      const std::vector<std::string> value = fields(line.substr(p + key.size()));
      if (!value.empty()) (std::string(var) == "NCCL_ALGO" ? log->nccl_algo : log->nccl_proto) = value[0];
    }
  }
  if (const size_t p = line.find("NCCL version "); p != std::string::npos && log->nccl_version.empty()) {
    const std::vector<std::string> value = fields(line.substr(p + 13));
    if (!value.empty()) log->nccl_version = value[0];
  }
  // "#  Rank  0 Group  0 Pid 6899 on node-A device 0 [...] NVIDIA H100"
  size_t i = (!f.empty() && f[0] == "#") ? 1 : 0;
  if (f.size() >= i + 8 && f[i] == "Rank" && f[i + 2] == "Group" && f[i + 4] == "Pid" && f[i + 6] == "on") {
    ranks->insert(f[i + 1]);
    hosts->insert(f[i + 7]);
    int64_t rank = 0;
    if (parseInt(f[i + 1], &rank) && rank >= 0 && rank < (int64_t{1} << 30)) {
      NcclTestsRankLine r;
      r.rank = static_cast<int>(rank);
      r.host = f[i + 7];
      r.line = line_no;
      size_t k = i + 8;
      int64_t device = 0;
      if (k + 1 < f.size() && f[k] == "device" && parseInt(f[k + 1], &device) && device >= 0 && device < 1 << 20) {
        r.device = static_cast<int>(device);
        k += 2;
      }
      if (k < f.size() && f[k].size() >= 2 && f[k].front() == '[' && f[k].back() == ']') {
        r.bus = f[k].substr(1, f[k].size() - 2);
        ++k;
      }
      for (; k < f.size(); ++k) r.name += (r.name.empty() ? "" : " ") + f[k];
      const bool listed = std::any_of(log->rank_lines.begin(), log->rank_lines.end(),
                                      [&](const NcclTestsRankLine& l) { return l.rank == r.rank; });
      if (!listed) log->rank_lines.push_back(std::move(r));
    }
  }
}

// The PCI bus number in a device-list bracket: "0000:5d:00" (domain:bus:device) and "0x5d" both give 0x5d; -1 when
// the text is neither.
long busNumber(const std::string& bus) {
  auto hex = [](const std::string& s, long* out) {
    if (s.empty() || s.size() > 8 || s.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) return false;
    *out = std::strtol(s.c_str(), nullptr, 16);
    return true;
  };
  long value = -1;
  if (bus.size() > 2 && (bus.compare(0, 2, "0x") == 0 || bus.compare(0, 2, "0X") == 0)) {
    return hex(bus.substr(2), &value) ? value : -1;
  }
  const size_t first = bus.find(':');
  if (first == std::string::npos) return -1;
  const size_t second = bus.find(':', first + 1);
  const std::string part = bus.substr(first + 1, second == std::string::npos ? std::string::npos : second - first - 1);
  return hex(part, &value) ? value : -1;
}

std::string hostList(const std::vector<NcclTestsRankLine>& lines) {
  std::set<std::string> hosts;
  for (const NcclTestsRankLine& l : lines) hosts.insert(l.host);
  std::string out;
  for (const std::string& h : hosts) out += (out.empty() ? "" : ", ") + h;
  return out;
}

}  // namespace

double NcclTestsRow::timeUs() const {
  if (has_out_of_place && has_in_place) return (oop_time_us + ip_time_us) / 2;
  return has_out_of_place ? oop_time_us : ip_time_us;
}

Result<NcclTestsLog> parseNcclTestsLog(const std::string& text, const std::string& filename) {
  NcclTestsLog log;
  const size_t slash = filename.find_last_of('/');
  if (auto c = ncclTestsCollectiveIn(slash == std::string::npos ? filename : filename.substr(slash + 1))) {
    log.collective = *c;
  }
  std::set<std::string> ranks, hosts;  // "Rank N ... on HOST" lines (a table printed twice lists them twice)
  Columns columns;
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const std::vector<std::string> f = fields(line);
    if (f.empty()) continue;
    uint64_t size = 0, count = 0;
    if (f[0][0] == '#' || !parseUint(f[0], &size) || f.size() < 2 || !parseUint(f[1], &count)) {
      readHeader(f, &columns);
      readMetadata(line, line_no, f, &log, &ranks, &hosts);
      continue;
    }
    Result<NcclTestsRow> row = readRow(f, columns, fmt::format("{}:{}", filename, line_no));
    if (!row.isOk()) return row.status();
    row->line = line_no;
    const bool repeated = std::any_of(log.rows.begin(), log.rows.end(),
                                      [&](const NcclTestsRow& r) { return r.size_bytes == row->size_bytes; });
    if (!repeated) log.rows.push_back(std::move(*row));
  }
  if (log.rows.empty()) {
    return Status(
        StatusCode::kParseError,
        fmt::format("{}: no nccl-tests table row (size count type [redop [root]] time algbw busbw ...)", filename));
  }
  log.ranks = static_cast<int>(ranks.size());
  log.nodes = static_cast<int>(hosts.size());
  std::sort(log.rank_lines.begin(), log.rank_lines.end(),
            [](const NcclTestsRankLine& x, const NcclTestsRankLine& y) { return x.rank < y.rank; });
  return log;
}

RankTableDifferences compareRankTables(const NcclTestsLog& a, const std::string& a_path, const NcclTestsLog& b,
                                       const std::string& b_path) {
  RankTableDifferences out;
  if (a.rank_lines.empty() || b.rank_lines.empty()) return out;
  const std::string a_hosts = hostList(a.rank_lines);
  const std::string b_hosts = hostList(b.rank_lines);
  if (a_hosts != b_hosts) out.hosts = fmt::format("{} ran on {}, {} on {}", a_path, a_hosts, b_path, b_hosts);
  for (const NcclTestsRankLine& x : a.rank_lines) {
    auto it = std::find_if(b.rank_lines.begin(), b.rank_lines.end(),
                           [&](const NcclTestsRankLine& y) { return y.rank == x.rank; });
    if (it == b.rank_lines.end()) continue;
    const NcclTestsRankLine& y = *it;
    if (out.devices.empty() && !x.name.empty() && !y.name.empty() && x.name != y.name) {
      out.devices = fmt::format("rank {} is a {} in {} (line {}) but a {} in {} (line {})", x.rank, x.name, a_path,
                                x.line, y.name, b_path, y.line);
    }
    if (out.bus_ids.empty() && !x.bus.empty() && !y.bus.empty()) {
      const long xb = busNumber(x.bus);
      const long yb = busNumber(y.bus);
      const bool differ = xb >= 0 && yb >= 0 ? xb != yb : x.bus != y.bus;
      if (differ) {
        out.bus_ids = fmt::format("rank {} is at PCI bus [{}] in {} (line {}) but [{}] in {} (line {})", x.rank, x.bus,
                                  a_path, x.line, y.bus, b_path, y.line);
      }
    }
  }
  return out;
}

Result<NcclTestsLog> readNcclTestsLog(const std::string& path) {
  BRAID_ASSIGN_OR_RETURN(std::string text, readFile(path));
  return parseNcclTestsLog(text, path);
}

std::optional<std::string> ncclTestsCollectiveIn(const std::string& name) {
  const std::string n = lower(name);
  // Longest names first: "reduce_scatter" before "reduce", "all_reduce" before "reduce".
  static const char* kNames[] = {"reduce_scatter", "all_reduce", "all_gather", "alltoall", "broadcast",
                                 "sendrecv",       "hypercube",  "scatter",    "gather",   "reduce"};
  for (const char* c : kNames) {
    const std::string plain = c;
    std::string dashed = plain;
    std::replace(dashed.begin(), dashed.end(), '_', '-');
    std::string joined = plain;
    joined.erase(std::remove(joined.begin(), joined.end(), '_'), joined.end());
    for (const std::string& form : {plain, dashed, joined}) {
      if (n.find(form) != std::string::npos) return plain;
    }
  }
  return std::nullopt;
}

std::optional<double> ncclTestsBusFactor(const std::string& collective, int ranks) {
  if (ranks < 1) return std::nullopt;
  const double n = ranks;
  if (collective == "all_reduce") return 2 * (n - 1) / n;
  if (collective == "all_gather" || collective == "reduce_scatter" || collective == "alltoall") return (n - 1) / n;
  for (const char* c : {"broadcast", "reduce", "sendrecv", "hypercube", "scatter", "gather"}) {
    if (collective == c) return 1.0;
  }
  return std::nullopt;
}

}  // namespace braid
