// Tuner rules in NCCL's example-tuner CSV format (rules.h).
#include "tuner/rules.h"

#include <fmt/format.h>

#include <charconv>
#include <optional>

#include "abi/nccl_types.h"
#include "braid/file_io.h"
#include "common/text.h"

namespace braid::nccl_plugin {
namespace {

constexpr const char* kFuncNames[] = {"broadcast", "reduce", "allgather", "reducescatter", "allreduce"};
constexpr const char* kAlgoNames[] = {"tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat"};
constexpr const char* kProtoNames[] = {"ll", "ll128", "simple"};
constexpr const char* kFieldNames[] = {"collective_type", "min_bytes", "max_bytes", "algorithm",  "protocol",
                                       "channels",        "nNodes",    "nRanks",    "numPipeOps", "regBuff"};
constexpr int kMaxChannels = 64;  // NCCL's MAXCHANNELS (nccl_plugins.md §4.5)

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

template <size_t N>
std::optional<int> indexOf(const char* const (&names)[N], std::string_view text) {
  const std::string lower = lowerCase(std::string(text));
  for (size_t i = 0; i < N; ++i) {
    if (lower == names[i]) return static_cast<int>(i);
  }
  return std::nullopt;
}

template <size_t N>
std::string oneOf(const char* const (&names)[N]) {
  std::string out;
  for (size_t i = 0; i < N; ++i) out += (i ? ", " : "") + std::string(names[i]);
  return out;
}

std::optional<uint64_t> parseBytes(std::string_view text) {
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

// An integer in [lo, hi] or -1 (the format's "any" / "keep").
std::optional<int> parseCount(std::string_view text, int lo, int hi) {
  int v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  if (v != -1 && (v < lo || v > hi)) return std::nullopt;
  return v;
}

// One rule line's fields; the error names the field (1-based) that is wrong.
Result<TunerRule> parseRuleFields(const std::vector<std::string_view>& f) {
  auto bad = [&](int i, const std::string& why) {
    return invalidArgument(fmt::format("field {} ({}): {}", i + 1, kFieldNames[i], why));
  };
  if (f.size() < 8 || f.size() > 10) {
    return invalidArgument(fmt::format("{} fields; a rule has 8, 9 or 10: {}", f.size(),
                                       "collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,"
                                       "nRanks[,numPipeOps[,regBuff]]"));
  }
  TunerRule r;
  const auto func = indexOf(kFuncNames, f[0]);
  if (!func) return bad(0, fmt::format("'{}' is not one of {}", f[0], oneOf(kFuncNames)));
  r.func = *func;
  const auto lo = parseBytes(f[1]);
  if (!lo) return bad(1, fmt::format("'{}' is not a byte count", f[1]));
  const auto hi = parseBytes(f[2]);
  if (!hi) return bad(2, fmt::format("'{}' is not a byte count", f[2]));
  if (*hi < *lo) return bad(2, fmt::format("{} is below min_bytes {}", *hi, *lo));
  r.min_bytes = *lo;
  r.max_bytes = *hi;
  const auto algo = indexOf(kAlgoNames, f[3]);
  if (!algo) return bad(3, fmt::format("'{}' is not one of {}", f[3], oneOf(kAlgoNames)));
  r.algo = *algo;
  const auto proto = indexOf(kProtoNames, f[4]);
  if (!proto) return bad(4, fmt::format("'{}' is not one of {}", f[4], oneOf(kProtoNames)));
  r.proto = *proto;
  const auto channels = parseCount(f[5], 1, kMaxChannels);
  if (!channels) return bad(5, fmt::format("'{}' is not -1 or a channel count 1..{}", f[5], kMaxChannels));
  r.channels = *channels;
  int* const counts[] = {&r.nodes, &r.ranks, &r.pipe_ops};
  for (int i = 6; i < 9 && i < static_cast<int>(f.size()); ++i) {
    const auto v = parseCount(f[i], 1, 1 << 30);
    if (!v) return bad(i, fmt::format("'{}' is not -1 or a positive count", f[i]));
    *counts[i - 6] = *v;
  }
  if (f.size() == 10) {
    const auto v = parseCount(f[9], 0, 1);
    if (!v) return bad(9, fmt::format("'{}' is not 0, 1 or -1", f[9]));
    r.reg_buff = *v;
  }
  return r;
}

}  // namespace

const char* ruleFuncName(int func) { return func >= 0 && func < 5 ? kFuncNames[func] : "?"; }
const char* ruleAlgoName(int algo) { return algo >= 0 && algo < 7 ? kAlgoNames[algo] : "?"; }
const char* ruleProtoName(int proto) { return proto >= 0 && proto < 3 ? kProtoNames[proto] : "?"; }

std::optional<int> parseRuleAlgo(std::string_view name) {
  // NCCL_ALGO's spellings (nccl@2.28.9 src/graph/tuning.cc ncclAlgoStr) are the rules' names without '_'.
  static constexpr const char* kEnvNames[] = {"tree",     "ring", "collnetdirect", "collnetchain", "nvls",
                                              "nvlstree", "pat"};
  if (auto i = indexOf(kAlgoNames, name)) return i;
  return indexOf(kEnvNames, name);
}

std::optional<int> parseRuleProto(std::string_view name) { return indexOf(kProtoNames, name); }

bool TunerRule::matches(int call_func, uint64_t n_bytes, int call_nodes, int call_ranks, int call_pipe_ops,
                        int call_reg_buff) const {
  return func == call_func && n_bytes >= min_bytes && n_bytes <= max_bytes && (nodes == -1 || nodes == call_nodes) &&
         (ranks == -1 || ranks == call_ranks) && (pipe_ops == -1 || pipe_ops == call_pipe_ops) &&
         (reg_buff == -1 || call_reg_buff == -1 || reg_buff == call_reg_buff);
}

bool TunerRule::sameAs(const TunerRule& o) const {
  return func == o.func && min_bytes == o.min_bytes && max_bytes == o.max_bytes && algo == o.algo && proto == o.proto &&
         channels == o.channels && nodes == o.nodes && ranks == o.ranks && pipe_ops == o.pipe_ops &&
         reg_buff == o.reg_buff;
}

TunerRules parseTunerRules(std::string_view text, const std::string& filename) {
  TunerRules out;
  int line_no = 0;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    std::string_view line = trimmed(text.substr(0, eol));
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    ++line_no;
    if (line.empty() || line.front() == '#') continue;
    std::vector<std::string_view> fields;
    for (size_t start = 0;;) {
      const size_t comma = line.find(',', start);
      fields.push_back(trimmed(line.substr(start, comma == std::string_view::npos ? comma : comma - start)));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    Result<TunerRule> rule = parseRuleFields(fields);
    if (!rule) {
      out.warnings.push_back(fmt::format("{}:{}: {}; line skipped", filename, line_no, rule.status().message()));
      continue;
    }
    rule->line = line_no;
    out.rules.push_back(*rule);
  }
  return out;
}

Result<TunerRules> readTunerRulesFile(const std::string& path) {
  BRAID_ASSIGN_OR_RETURN(std::string text, readFile(path));
  return parseTunerRules(text, path);
}

std::string writeTunerRules(const std::vector<TunerRule>& rules, std::string_view comment) {
  std::string out;
  while (!comment.empty()) {
    const size_t eol = comment.find('\n');
    out += "# " + std::string(comment.substr(0, eol)) + "\n";
    comment = eol == std::string_view::npos ? std::string_view() : comment.substr(eol + 1);
  }
  out += "# collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff\n";
  for (const TunerRule& r : rules) {
    out +=
        fmt::format("{},{},{},{},{},{},{},{},{},{}\n", ruleFuncName(r.func), r.min_bytes, r.max_bytes,
                    ruleAlgoName(r.algo), ruleProtoName(r.proto), r.channels, r.nodes, r.ranks, r.pipe_ops, r.reg_buff);
  }
  return out;
}

const TunerRule* firstMatchingRule(const std::vector<TunerRule>& rules, int func, uint64_t n_bytes, int nodes,
                                   int ranks, int pipe_ops, int reg_buff) {
  for (const TunerRule& r : rules) {
    if (r.matches(func, n_bytes, nodes, ranks, pipe_ops, reg_buff)) return &r;
  }
  return nullptr;
}

}  // namespace braid::nccl_plugin
