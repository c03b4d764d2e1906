// Tuner rules from measured nccl-tests logs (measured.h).
#include "tuner/measured.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "abi/nccl_types.h"
#include "common/text.h"
#include "tuner/model.h"

namespace braid::nccl_plugin {
namespace {

// nccl-tests' collective names -> NCCL's ncclFunc_t (nccl_abi::Func), for the five collectives the tuner decides.
std::optional<int> funcOf(const std::string& collective) {
  static const std::map<std::string, int> kFuncs = {{"broadcast", nccl_abi::kFuncBroadcast},
                                                    {"reduce", nccl_abi::kFuncReduce},
                                                    {"all_gather", nccl_abi::kFuncAllGather},
                                                    {"reduce_scatter", nccl_abi::kFuncReduceScatter},
                                                    {"all_reduce", nccl_abi::kFuncAllReduce}};
  const auto it = kFuncs.find(collective);
  if (it == kFuncs.end()) return std::nullopt;
  return it->second;
}

// nccl-tests' name of a collective (its binary's name less "_perf"); "custom" has none and keeps Braid's name.
std::string ncclTestsName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllGather: return "all_gather";
    case CollectiveKind::kReduceScatter: return "reduce_scatter";
    case CollectiveKind::kAllReduce: return "all_reduce";
    case CollectiveKind::kAllToAll: return "alltoall";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kReduce: return "reduce";
    case CollectiveKind::kCustom: break;
  }
  return collectiveName(kind);
}

Status invalid(const std::string& text) { return Status(StatusCode::kInvalidArgument, text); }

// "ALGO/PROTO" -> indices; the error says what is wrong with the label.
Status parseSetting(const std::string& path, const std::string& algo_text, const std::string& proto_text,
                    MeasuredLog* out) {
  const std::optional<int> algo = parseRuleAlgo(algo_text);
  const std::optional<int> proto = parseRuleProto(proto_text);
  if (!algo) {
    return invalid(
        fmt::format("{}: algorithm '{}' is not one of NCCL_ALGO's Tree, Ring, CollnetDirect, CollnetChain, "
                    "NVLS, NVLSTree, PAT",
                    path, algo_text));
  }
  if (!proto) {
    return invalid(fmt::format("{}: protocol '{}' is not one of NCCL_PROTO's LL, LL128, Simple", path, proto_text));
  }
  out->algo = *algo;
  out->proto = *proto;
  return Status::ok();
}

// The setting of a log from its label ("Ring/LL", "default") or, without one, from its NCCL INFO lines.
Status settingOf(const std::string& label, MeasuredLog* m) {
  const std::string what =
      "name the setting it measured: FILE=ALGO/PROTO (e.g. =Ring/LL128) or FILE=default for NCCL's own choice";
  if (lowerCase(label) == "default") {
    m->nccl_default = true;
    return Status::ok();
  }
  if (!label.empty()) {
    const size_t slash = label.find('/');
    if (slash == std::string::npos) return invalid(fmt::format("{}: label '{}': {}", m->path, label, what));
    return parseSetting(m->path, label.substr(0, slash), label.substr(slash + 1), m);
  }
  if (m->log.nccl_algo.empty() || m->log.nccl_proto.empty()) {
    return invalid(fmt::format(
        "{}: the log does not say which NCCL_ALGO and NCCL_PROTO it ran with{}; {}", m->path,
        m->log.nccl_algo.empty() && m->log.nccl_proto.empty()
            ? ""
            : fmt::format(" (only NCCL_{} is set by environment)", m->log.nccl_algo.empty() ? "PROTO" : "ALGO"),
        what));
  }
  return parseSetting(m->path, m->log.nccl_algo, m->log.nccl_proto, m);
}

// Splits "FILE=LABEL" at the last '=' when what follows looks like a label (has '/' or is "default").
std::pair<std::string, std::string> splitSpec(const std::string& spec) {
  const size_t eq = spec.rfind('=');
  if (eq == std::string::npos) return {spec, ""};
  const std::string label = spec.substr(eq + 1);
  if (label.find('/') == std::string::npos && lowerCase(label) != "default") return {spec, ""};
  if (label.find('/') != std::string::npos && label.find('/') != label.rfind('/')) return {spec, ""};
  return {spec.substr(0, eq), label};
}

struct Timed {
  const MeasuredLog* log;
  double us;
};

// The decisions of one collective at every size any of its logs measured.
std::vector<MeasuredChoice> choose(int func, const std::vector<const MeasuredLog*>& logs) {
  std::set<uint64_t> sizes;
  for (const MeasuredLog* m : logs) {
    for (const NcclTestsRow& r : m->log.rows) sizes.insert(r.size_bytes);
  }
  std::vector<MeasuredChoice> out;
  for (uint64_t bytes : sizes) {
    std::vector<Timed> forced;
    MeasuredChoice c;
    c.func = func;
    c.bytes = bytes;
    for (const MeasuredLog* m : logs) {
      for (const NcclTestsRow& r : m->log.rows) {
        if (r.size_bytes != bytes) continue;
        if (m->nccl_default) {
          c.default_us = r.timeUs();
        } else {
          forced.push_back({m, r.timeUs()});
        }
      }
    }
    std::stable_sort(forced.begin(), forced.end(), [](const Timed& a, const Timed& b) { return a.us < b.us; });
    const bool nccl_wins = forced.empty() || (c.default_us && *c.default_us <= forced[0].us);
    if (nccl_wins) {
      c.us = c.default_us.value_or(0);
      if (!forced.empty()) c.runner_up = forced[0].log->label(), c.runner_up_us = forced[0].us;
    } else {
      c.algo = forced[0].log->algo;
      c.proto = forced[0].log->proto;
      c.us = forced[0].us;
      if (forced.size() > 1) c.runner_up = forced[1].log->label(), c.runner_up_us = forced[1].us;
      if (c.default_us && (c.runner_up.empty() || *c.default_us < c.runner_up_us)) {
        c.runner_up = "NCCL default";
        c.runner_up_us = *c.default_us;
      }
    }
    out.push_back(c);
  }
  return out;
}

// The rank and host counts the logs of one collective agree on. `forced_ranks` > 0 (--ranks) must equal the rank
// count of every log that lists its ranks, `forced_nodes` > 0 (--nodes) the host count of every log that lists hosts.
Status agreedCounts(const std::vector<const MeasuredLog*>& logs, int forced_ranks, int forced_nodes, int* ranks,
                    int* nodes) {
  const MeasuredLog* ranks_from = nullptr;
  const MeasuredLog* nodes_from = nullptr;
  *ranks = forced_ranks > 0 ? forced_ranks : -1;
  *nodes = forced_nodes > 0 ? forced_nodes : -1;
  for (const MeasuredLog* m : logs) {
    if (forced_ranks > 0 && m->log.ranks > 0 && m->log.ranks != forced_ranks) {
      return invalid(fmt::format("--ranks {} contradicts the {} ranks in {}", forced_ranks, m->log.ranks, m->path));
    }
    if (forced_ranks <= 0 && m->log.ranks > 0) {
      if (ranks_from != nullptr && m->log.ranks != *ranks) {
        return invalid(
            fmt::format("{} ran {} ranks but {} ran {}: rules are per rank count (measure one communicator size)",
                        ranks_from->path, *ranks, m->path, m->log.ranks));
      }
      ranks_from = m, *ranks = m->log.ranks;
    }
    if (forced_nodes > 0 && m->log.nodes > 0 && m->log.nodes != forced_nodes) {
      return invalid(fmt::format("--nodes {} contradicts the {} hosts in {}", forced_nodes, m->log.nodes, m->path));
    }
    if (forced_nodes <= 0 && m->log.nodes > 0) {
      if (nodes_from != nullptr && m->log.nodes != *nodes) {
        return invalid(fmt::format("{} ran on {} hosts but {} on {}: rules are per host count (measure one machine)",
                                   nodes_from->path, *nodes, m->path, m->log.nodes));
      }
      nodes_from = m, *nodes = m->log.nodes;
    }
  }
  return Status::ok();
}

// One rule per run of sizes with the same forced winner; runs where NCCL's own choice wins get none.
void appendRules(const std::vector<MeasuredChoice>& choices, int ranks, int nodes, std::vector<TunerRule>* rules) {
  uint64_t lo = 0;
  for (size_t i = 0; i < choices.size(); ++i) {
    const MeasuredChoice& c = choices[i];
    const bool last = i + 1 == choices.size();
    if (!last && choices[i + 1].algo == c.algo && choices[i + 1].proto == c.proto) continue;
    const uint64_t hi = last ? std::numeric_limits<uint64_t>::max() : geometricHandOver(c.bytes, choices[i + 1].bytes);
    if (c.algo >= 0) {
      TunerRule r;
      r.func = c.func;
      r.min_bytes = lo;
      r.max_bytes = hi;
      r.algo = c.algo;
      r.proto = c.proto;
      r.ranks = ranks;
      r.nodes = nodes;
      rules->push_back(r);
    }
    lo = hi + (last ? 0 : 1);
  }
}

}  // namespace

std::string MeasuredLog::label() const {
  if (nccl_default) return "NCCL default";
  return fmt::format("{}/{}", ncclAlgoIndexName(algo), ncclProtoIndexName(proto));
}

Result<MeasuredLog> readMeasuredLog(const std::string& spec, std::optional<CollectiveKind> collective) {
  const auto [path, label] = splitSpec(spec);
  MeasuredLog m;
  m.path = path;
  Result<NcclTestsLog> log = readNcclTestsLog(path);
  if (!log) {
    // A file that cannot be read (a directory, a device, a loop of links, a binary or empty file) is an input error
    // like a malformed one: kInvalidArgument is kept for what the command line says of the log.
    const StatusCode code = log.status().code();
    return Status(code == StatusCode::kInvalidArgument ? StatusCode::kParseError : code, log.status().message());
  }
  m.log = std::move(*log);
  if (!m.log.collective.empty() && collective && ncclTestsName(*collective) != m.log.collective) {
    return invalid(
        fmt::format("--coll {} contradicts the collective of {}: it measured {} (--coll names the "
                    "collective of logs that do not say)",
                    ncclTestsName(*collective), path, m.log.collective));
  }
  if (m.log.collective.empty() && collective) m.log.collective = ncclTestsName(*collective);
  if (m.log.collective.empty()) {
    return invalid(
        fmt::format("{}: neither the log nor its file name says which collective it measured "
                    "(all_reduce_perf, ...): pass --coll",
                    path));
  }
  const std::optional<int> func = funcOf(m.log.collective);
  if (!func) {
    return invalid(
        fmt::format("{}: {} is not decided by NCCL's tuner (it chooses algorithms for broadcast, reduce, "
                    "all_gather, reduce_scatter and all_reduce; all-to-all and send/recv run as p2p)",
                    path, m.log.collective));
  }
  m.func = *func;
  BRAID_RETURN_IF_ERROR(settingOf(label, &m));
  return m;
}

Result<MeasuredTable> rulesFromMeasurements(const std::vector<MeasuredLog>& logs, int ranks, int nodes) {
  MeasuredTable table;
  for (int func = 0; func < nccl_abi::kNumFuncs; ++func) {
    std::vector<const MeasuredLog*> mine;
    for (const MeasuredLog& m : logs) {
      if (m.func != func) continue;
      for (const MeasuredLog* other : mine) {
        if (other->nccl_default == m.nccl_default && other->algo == m.algo && other->proto == m.proto) {
          return invalid(fmt::format("{} and {} both measured {} with {}: give one log per setting", other->path,
                                     m.path, m.log.collective, m.label()));
        }
      }
      mine.push_back(&m);
    }
    if (mine.empty()) continue;
    int func_ranks = -1, func_nodes = -1;
    BRAID_RETURN_IF_ERROR(agreedCounts(mine, ranks, nodes, &func_ranks, &func_nodes));
    std::vector<MeasuredChoice> choices = choose(func, mine);
    appendRules(choices, func_ranks, func_nodes, &table.rules);
    table.choices.insert(table.choices.end(), choices.begin(), choices.end());
    if (table.ranks == -1) table.ranks = func_ranks;
    if (table.nodes == -1) table.nodes = func_nodes;
  }
  return table;
}

uint64_t geometricHandOver(uint64_t a, uint64_t b) {
  const long double mid = std::floor(std::sqrt(static_cast<long double>(a) * static_cast<long double>(b)));
  const uint64_t m = mid >= static_cast<long double>(std::numeric_limits<uint64_t>::max())
                         ? std::numeric_limits<uint64_t>::max()
                         : static_cast<uint64_t>(mid);
  return std::clamp(m, a, b - 1);
}

}  // namespace braid::nccl_plugin
