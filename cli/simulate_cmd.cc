// `braid simulate ALGO --topology T [-b 1K -e 1G -f 2] [-d float] [--json] [--html report.html]`: runs an
// algorithm in Braid's simulator (include/braid/simulate.h) over a sweep of sizes and prints an nccl-tests-like
// table (../shared/reference/nccl_plugins.md §6.3-6.4) next to NCCL's model (include/braid/nccl_model.h), NCCL's
// own algorithm run in the same simulator, and the lower bound (include/braid/bounds.h). With --html it also
// writes a self-contained page (cli/report/html_report.h).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "braid/algorithm.h"
#include "braid/bounds.h"
#include "braid/classic.h"
#include "braid/collective.h"
#include "braid/file_io.h"
#include "braid/nccl_model.h"
#include "braid/simulate.h"
#include "braid/topology.h"
#include "cli/commands.h"
#include "cli/output_path.h"
#include "cli/topology_arg.h"
#include "comm/pareto/compare.h"
#include "common/text.h"
#include "report/html_report.h"
#include "report/synth_report.h"

namespace braid::cli {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kUsageError = 2;
constexpr int kFailure = 1;
/// Default timeline size: the largest swept size up to this many bytes (a link timeline at 1 GB has one
/// segment per rate change of every slice; 16 MiB keeps it to a few thousand segments per link).
constexpr uint64_t kDefaultTimelineCap = uint64_t{16} << 20;

struct SimulateCmdOptions {
  std::string algo;
  std::string topology;
  std::string coll;
  std::string min_bytes = "1K";
  std::string max_bytes = "1G";
  long long factor = 2;
  std::string dtype = "float";
  bool json = false;
  std::string html;
  bool in_place = false;
  std::string protocol;
  int instances = 1;
  std::string timeline_size;
};

class CmdError {
 public:
  CmdError(int code, std::string message) : code_(code), message_(std::move(message)) {}
  int code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  int code_;
  std::string message_;
};

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

struct DataType {
  const char* name;  // nccl-tests spelling
  std::vector<const char*> aliases;
  uint64_t bytes;
};

const std::vector<DataType>& dataTypes() {
  static const std::vector<DataType> types = {
      {"int8", {"char"}, 1},
      {"uint8", {}, 1},
      {"int32", {"int"}, 4},
      {"uint32", {}, 4},
      {"int64", {}, 8},
      {"uint64", {}, 8},
      {"half", {"fp16", "float16"}, 2},
      {"bfloat16", {"bf16"}, 2},
      {"float", {"fp32", "float32"}, 4},
      {"double", {"fp64", "float64"}, 8},
  };
  return types;
}

std::optional<DataType> parseDataType(const std::string& text) {
  const std::string t = lower(text);
  for (const DataType& d : dataTypes()) {
    if (t == d.name) return d;
    for (const char* alias : d.aliases) {
      if (t == alias) return d;
    }
  }
  return std::nullopt;
}

bool simulatable(CollectiveKind kind) {
  return kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kAllGather ||
         kind == CollectiveKind::kReduceScatter || kind == CollectiveKind::kAllToAll;
}

enum class Source { kFile, kClassic, kNccl, kNcclRing, kNcclTree };

class Simulation {
 public:
  Simulation(const SimulateCmdOptions& opt, Topology topology, NcclSystem system, CollectiveKind collective,
             DataType dtype, std::optional<Protocol> protocol)
      : opt_(opt),
        topology_(std::move(topology)),
        system_(std::move(system)),
        collective_(collective),
        dtype_(dtype),
        protocol_(protocol),
        nccl_(topology_, system_, collective, opt.in_place) {}

  Source source = Source::kFile;
  std::optional<Algorithm> algorithm;  // file and classic sources

  const Topology& topology() const { return topology_; }
  /// Report-level notes gathered while simulating (each once).
  const std::vector<std::string>& notes() const { return nccl_.notes(); }

  /// The bytes nccl-tests would run for a requested size: count = size / (element x multiplier) whole elements.
  std::pair<uint64_t, uint64_t> countAndBytes(uint64_t size) const {
    return ncclTestsCountAndBytes(collective_, topology_.numGpus(), dtype_.bytes, size);
  }

  double busFactor() const {
    CollectiveSpec spec;
    spec.kind = collective_;
    spec.num_ranks = topology_.numGpus();
    return spec.busBandwidthFactor();
  }

  /// Computes the lower bounds of a sweep at once (collectiveBounds: one cut computation for all sizes).
  void prepareBounds(const std::vector<uint64_t>& sizes) {
    Result<std::vector<CollectiveBound>> bounds = collectiveBounds(topology_, collective_, sizes);
    if (!bounds) throw CmdError(kFailure, fmt::format("lower bound: {}", bounds.status().message()));
    for (size_t i = 0; i < sizes.size(); ++i) bounds_[sizes[i]] = bounds->at(i);
  }

  /// One row for `bytes` (already a whole number of elements); with `timeline` the Braid run records it.
  SimulateRow row(uint64_t count, uint64_t bytes, std::optional<SimulateTimeline>* timeline) {
    SimulateRow row;
    row.size_bytes = bytes;
    row.count = count;
    row.type = dtype_.name;
    row.redop =
        collective_ == CollectiveKind::kAllReduce || collective_ == CollectiveKind::kReduceScatter ? "sum" : "none";
    const double factor = busFactor();
    auto busbw = [&](double time_us) { return time_us > 0 ? static_cast<double>(bytes) / time_us / 1e3 * factor : 0; };

    // NCCL's model.
    std::optional<NcclPrediction> prediction;
    Result<NcclPrediction> predicted = ncclPredict(system_, collective_, bytes);
    if (predicted) {
      prediction = std::move(*predicted);
      if (prediction->choice.time_us > 0) {
        row.nccl_time_us = prediction->choice.time_us;
        row.nccl_choice = prediction->choiceName();
        row.nccl_busbw_gbps = busbw(prediction->choice.time_us);
      } else {
        row.nccl_choice = "-";  // one rank: the model's local copy has no time (its notes say so)
      }
    } else if (predicted.status().code() == StatusCode::kUnsupported) {
      row.nccl_choice = "-";
    } else {
      throw CmdError(kFailure, fmt::format("NCCL model at {} bytes: {}", bytes, predicted.status().message()));
    }

    // NCCL's algorithm in the simulator.
    const NcclRun nccl = ncclRun(prediction, bytes);
    if (!nccl.note.empty()) row.notes.push_back(nccl.note);
    const Runnable nccl_runnable = ncclRunnable(nccl);

    // Braid's algorithm.
    Runnable braid{nullptr, &topology_, -1};
    std::optional<Protocol> braid_protocol = protocol_;
    switch (source) {
      case Source::kFile:
      case Source::kClassic: braid.algorithm = &*algorithm; break;
      case Source::kNccl:
        braid = nccl_runnable;
        if (!braid_protocol) braid_protocol = nccl.protocol;
        break;
      case Source::kNcclRing:
      case Source::kNcclTree: {
        const NcclAlgo algo = source == Source::kNcclRing ? NcclAlgo::kRing : NcclAlgo::kTree;
        Protocol p = Protocol::kSimple;
        if (protocol_) {
          p = *protocol_;
        } else if (prediction) {
          p = bestProtocol(*prediction, algo).value_or(Protocol::kSimple);
        }
        // As NCCL runs it (its ring iterates 2 MiB chunks in Simple; all-to-all is its p2p program).
        NcclRun fixed;
        fixed.algo = algo;
        fixed.protocol = p;
        braid = ncclRunnable(fixed);
        braid_protocol = p;
        break;
      }
    }
    row.in_window = bytes >= braid.algorithm->min_bytes && bytes <= braid.algorithm->max_bytes;
    if (!row.in_window) {
      row.notes.push_back(fmt::format("outside the algorithm's size window [{}, {}]", braid.algorithm->min_bytes,
                                      braid.algorithm->max_bytes == kUnlimitedBytes
                                          ? std::string("unlimited")
                                          : std::to_string(braid.algorithm->max_bytes)));
    }
    const bool record = timeline != nullptr;
    SimResult braid_result = run(braid, bytes, braid_protocol, opt_.instances, record);
    row.protocol = protocolName(braid_result.protocol);
    row.time_us = braid_result.time_us;
    row.algbw_gbps = row.time_us > 0 ? static_cast<double>(bytes) / row.time_us / 1e3 : 0;
    row.busbw_gbps = busbw(row.time_us);
    if (record) *timeline = makeTimeline(bytes, braid, braid_result);

    if (braid.algorithm == nccl_runnable.algorithm && braid_protocol == nccl.protocol && opt_.instances == 1) {
      row.nccl_sim_us = braid_result.time_us;  // the same run
    } else {
      row.nccl_sim_us = run(nccl_runnable, bytes, nccl.protocol, 1, false).time_us;
    }
    row.nccl_sim_busbw_gbps = busbw(row.nccl_sim_us);
    if ((source == Source::kFile || source == Source::kClassic) && row.time_us > 0) {
      if (std::optional<std::string> note =
              unvalidatedWinNote(collective_, braid_result.protocol, bytes, row.nccl_sim_us / row.time_us)) {
        row.notes.push_back(*note);
      }
      if (std::optional<std::string> note =
              unvalidatedNcclNote(collective_, nccl.label, bytes, row.nccl_sim_us / row.time_us)) {
        row.notes.push_back(*note);
      }
    }
    row.nccl_sim_algo = nccl.label;

    // Lower bound (prepared for the whole sweep by prepareBounds when it was called).
    auto prepared = bounds_.find(bytes);
    Result<CollectiveBound> bound = prepared != bounds_.end() ? Result<CollectiveBound>(prepared->second)
                                                              : collectiveBound(topology_, collective_, bytes);
    if (!bound) throw CmdError(kFailure, fmt::format("lower bound at {} bytes: {}", bytes, bound.status().message()));
    row.bound_us = bound->time_us;
    row.bound_bandwidth_us = bound->bandwidth_us;
    row.bound_cut_us = bound->cut_us;
    row.bound_route_us = bound->route_us;
    row.bound_latency_us = bound->latency_us;
    row.bound_busbw_gbps = busbw(bound->time_us);
    row.cut_bound_busbw_gbps = busbw(bound->cut_us);
    return row;
  }

 private:
  NcclRun ncclRun(const std::optional<NcclPrediction>& prediction, uint64_t bytes) {
    Result<NcclRun> chosen = nccl_.choose(prediction, bytes, protocol_.value_or(Protocol::kSimple));
    if (!chosen) throw CmdError(kFailure, chosen.status().message());
    return std::move(*chosen);
  }

  Runnable ncclRunnable(const NcclRun& r) {
    Result<Runnable> runnable = nccl_.runnable(r);
    if (!runnable) throw CmdError(kFailure, runnable.status().message());
    return *runnable;
  }

  SimResult run(const Runnable& what, uint64_t bytes, std::optional<Protocol> protocol, int instances, bool record) {
    Result<SimResult> result = simulateRunnable(what, bytes, protocol, opt_.in_place, instances, record);
    if (!result) throw CmdError(kFailure, result.status().message());
    return std::move(*result);
  }

  std::string vertexLabel(const Runnable& what, int vertex) const {
    const Vertex& v = what.topology->vertices[vertex];
    if (what.gpu_ranks >= 0 && v.kind == VertexKind::kGpu && v.rank >= what.gpu_ranks) {
      return fmt::format("nvswitch{}(nvls)", v.rank - what.gpu_ranks);
    }
    return v.name;
  }

  SimulateTimeline makeTimeline(uint64_t bytes, const Runnable& what, const SimResult& result) const {
    const Topology& topology = *what.topology;
    SimulateTimeline timeline;
    timeline.size_bytes = bytes;
    timeline.time_us = result.time_us;
    std::map<int, TimelineLink> by_link;
    for (const LinkSegment& s : result.timeline) {
      if (!(s.gbps > 0) || !(s.end_us > s.start_us)) continue;
      if (s.link < 0 || s.link >= static_cast<int>(topology.links.size())) continue;
      TimelineLink& link = by_link[s.link];
      link.segments.push_back(TimelineSegment{s.start_us, s.end_us, s.gbps, s.messages});
      link.bytes += s.gbps * (s.end_us - s.start_us) * 1e3;
    }
    std::map<std::string, int> label_uses;
    for (auto& [index, link] : by_link) {
      const Link& l = topology.links[index];
      link.link = index;
      link.bandwidth_gbps = l.bandwidth_gbps;
      link.label = fmt::format("{}->{} ({})", vertexLabel(what, l.src), vertexLabel(what, l.dst), linkKindName(l.kind));
      const int uses = label_uses[link.label]++;
      if (uses > 0) link.label += fmt::format(" #{}", uses + 1);  // parallel links between one pair
      std::sort(link.segments.begin(), link.segments.end(),
                [](const TimelineSegment& a, const TimelineSegment& b) { return a.start_us < b.start_us; });
      timeline.links.push_back(std::move(link));
    }
    return timeline;
  }

  const SimulateCmdOptions& opt_;
  Topology topology_;
  NcclSystem system_;
  CollectiveKind collective_;
  DataType dtype_;
  std::optional<Protocol> protocol_;
  std::map<uint64_t, CollectiveBound> bounds_;  // prepareBounds: size -> lower bound
  NcclBaselines nccl_;                          // after topology_ and system_, which it refers to
};

// ---- output ---------------------------------------------------------------------------------------------

struct Column {
  const char* group;
  const char* name;
  const char* unit;
  int width;
};

const std::vector<Column>& columns() {
  static const std::vector<Column> cols = {
      {"", "size", "(B)", 12},
      {"", "count", "(elements)", 12},
      {"", "type", "", 9},
      {"", "redop", "", 6},
      {"Braid", "proto", "", 7},
      {"Braid", "time", "(us)", 10},
      {"Braid", "algbw", "(GB/s)", 8},
      {"Braid", "busbw", "(GB/s)", 8},
      {"NCCL model", "time", "(us)", 10},
      {"NCCL model", "choice", "", 16},
      {"NCCL simulated", "time", "(us)", 10},
      {"NCCL simulated", "algorithm", "", 14},
      {"cut bound", "time", "(us)", 10},
      {"routed bound", "time", "(us)", 10},
      {"routed bound", "busbw", "(GB/s)", 8},
      {"ratios", "vs model", "(NCCL model/Braid)", 18},
      {"ratios", "vs NCCL", "(NCCL sim/Braid)", 16},
      {"ratios", "of cut", "(Braid/cut)", 12},
      {"ratios", "of routed", "(Braid/routed)", 15},
  };
  return cols;
}

std::string padLeft(const std::string& text, int width) {
  return text.size() >= static_cast<size_t>(width) ? text : std::string(width - text.size(), ' ') + text;
}

std::string headerLines() {
  const auto& cols = columns();
  std::string groups = "#";
  std::string names = "#";
  std::string units = "#";
  // Group titles centered over the span of their columns.
  size_t i = 0;
  while (i < cols.size()) {
    size_t j = i;
    int span = 0;
    while (j < cols.size() && std::string(cols[j].group) == cols[i].group) span += cols[j++].width + 1;
    std::string title = cols[i].group;
    if (!title.empty()) title = std::string(std::max(0, span - 1 - static_cast<int>(title.size())) / 2, ' ') + title;
    title.resize(std::max<size_t>(span, title.size()), ' ');
    groups += title;
    i = j;
  }
  for (const Column& c : cols) {
    names += padLeft(c.name, c.width) + " ";
    units += padLeft(c.unit, c.width) + " ";
  }
  auto trim = [](std::string s) {
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s;
  };
  return trim(groups) + "\n" + trim(names) + "\n" + trim(units) + "\n";
}

std::string fixed(double v, int decimals = 2) { return fmt::format("{:.{}f}", v, decimals); }

std::string rowLine(const SimulateRow& r) {
  const std::vector<std::string> cells = {
      std::to_string(r.size_bytes),
      std::to_string(r.count),
      r.type,
      r.redop,
      r.protocol,
      fixed(r.time_us),
      fixed(r.algbw_gbps),
      fixed(r.busbw_gbps),
      r.nccl_time_us ? fixed(*r.nccl_time_us) : "-",
      r.nccl_choice,
      fixed(r.nccl_sim_us),
      r.nccl_sim_algo,
      fixed(r.bound_cut_us),
      fixed(r.bound_us),
      fixed(r.bound_busbw_gbps),
      r.nccl_time_us && r.time_us > 0 ? fixed(*r.nccl_time_us / r.time_us) : "-",
      r.nccl_sim_us > 0 && r.time_us > 0 ? fixed(r.nccl_sim_us / r.time_us) : "-",
      r.bound_cut_us > 0 ? fixed(r.time_us / r.bound_cut_us) : "-",
      r.bound_us > 0 ? fixed(r.time_us / r.bound_us) : "-",
  };
  std::string line = " ";
  for (size_t i = 0; i < cells.size(); ++i) line += padLeft(cells[i], columns()[i].width) + " ";
  if (!r.in_window) line += "*";
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line + "\n";
}

double averageBusbw(const SimulateReport& report) {
  double sum = 0;
  for (const SimulateRow& r : report.rows) sum += r.busbw_gbps;
  return report.rows.empty() ? 0 : sum / static_cast<double>(report.rows.size());
}

// `min_bytes`, `max_bytes`: the sizes -b and -e asked for (nccl-tests' header prints them, not the sizes run).
std::string textReport(const SimulateReport& report, const SimulateCmdOptions& opt, uint64_t min_bytes,
                       uint64_t max_bytes) {
  std::string out = fmt::format("# Braid simulate: {} on {} ({} ranks), {}, protocol {}\n", report.algorithm,
                                report.topology, report.ranks, report.collective, report.protocol);
  out += fmt::format("#  minBytes {} maxBytes {} step: {}(factor) datatype {} {} instances {}\n", min_bytes, max_bytes,
                     opt.factor, report.datatype, report.in_place ? "in-place" : "out-of-place", report.instances);
  out += fmt::format(
      "#  busbw = algbw x {} (nccl-tests); vs model = NCCL model time / Braid time; vs NCCL = NCCL simulated time / "
      "Braid time (braid synth's vs NCCL); of cut, of routed = Braid time / that bound\n",
      fmt::format("{:.4g}", report.bus_factor));
  for (const std::string& line : report.bound_legend) out += "#  " + line + "\n";
  out += "#\n" + headerLines();
  bool any_outside = false;
  for (const SimulateRow& r : report.rows) {
    out += rowLine(r);
    any_outside = any_outside || !r.in_window;
  }
  if (any_outside) out += "#  * size outside the algorithm's [minBytes, maxBytes] window (simulated anyway)\n";
  std::vector<std::string> row_notes;
  for (const SimulateRow& r : report.rows) {
    for (const std::string& n : r.notes) {
      if (n.rfind("outside the algorithm", 0) == 0) continue;
      const std::string line = fmt::format("{}: {}", formatSize(r.size_bytes), n);
      row_notes.push_back(line);
    }
  }
  for (const std::string& n : report.notes) out += "# note: " + n + "\n";
  for (const std::string& n : row_notes) out += "# note: " + n + "\n";
  out += fmt::format("# Avg bus bandwidth    : {:.3f}\n", averageBusbw(report));
  if (report.timeline) {
    out += fmt::format("# Link timeline at {} bytes: {} link(s) carried data\n", report.timeline->size_bytes,
                       report.timeline->links.size());
  }
  if (!opt.html.empty()) out += fmt::format("# Report: {}\n", opt.html);
  return out;
}

Json optionalJson(const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); }

std::string jsonReport(const SimulateReport& report) {
  Json j;
  j["algorithm"] = report.algorithm;
  j["algorithm_name"] = report.algorithm_name;
  j["topology"] = report.topology;
  j["collective"] = report.collective;
  j["ranks"] = report.ranks;
  j["protocol"] = report.protocol;
  j["datatype"] = report.datatype;
  j["in_place"] = report.in_place;
  j["instances"] = report.instances;
  j["bus_factor"] = report.bus_factor;
  if (const std::optional<CollectiveKind> kind = parseCollective(report.collective)) {
    j["bounds"] = boundLabelsJson(*kind, false);
  }
  j["rows"] = Json::array();
  for (const SimulateRow& r : report.rows) {
    Json row;
    row["size_bytes"] = r.size_bytes;
    row["count"] = r.count;
    row["type"] = r.type;
    row["redop"] = r.redop;
    row["protocol"] = r.protocol;
    row["time_us"] = r.time_us;
    row["algbw_gbps"] = r.algbw_gbps;
    row["busbw_gbps"] = r.busbw_gbps;
    row["nccl_time_us"] = optionalJson(r.nccl_time_us);
    row["nccl_choice"] = r.nccl_time_us ? Json(r.nccl_choice) : Json(nullptr);
    row["nccl_busbw_gbps"] = optionalJson(r.nccl_busbw_gbps);
    row["nccl_sim_us"] = r.nccl_sim_us;
    row["nccl_sim_busbw_gbps"] = r.nccl_sim_busbw_gbps;
    row["nccl_sim_algorithm"] = r.nccl_sim_algo;
    row["cut_bound_us"] = r.bound_cut_us;
    row["route_bound_us"] = r.bound_route_us;
    row["latency_bound_us"] = r.bound_latency_us;
    row["bound_us"] = r.bound_us;
    row["cut_bound_busbw_gbps"] = r.cut_bound_busbw_gbps;
    row["bound_busbw_gbps"] = r.bound_busbw_gbps;
    row["speedup"] = r.nccl_time_us && r.time_us > 0 ? Json(*r.nccl_time_us / r.time_us) : Json(nullptr);
    row["speedup_vs_nccl"] = r.nccl_sim_us > 0 && r.time_us > 0 ? Json(r.nccl_sim_us / r.time_us) : Json(nullptr);
    row["ratio_to_cut_bound"] = r.bound_cut_us > 0 ? Json(r.time_us / r.bound_cut_us) : Json(nullptr);
    row["ratio_to_bound"] = r.bound_us > 0 ? Json(r.time_us / r.bound_us) : Json(nullptr);
    row["in_window"] = r.in_window;
    row["notes"] = r.notes;
    j["rows"].push_back(std::move(row));
  }
  j["avg_busbw_gbps"] = averageBusbw(report);
  j["timeline_size_bytes"] = report.timeline ? Json(report.timeline->size_bytes) : Json(nullptr);
  j["notes"] = report.notes;
  return dumpJson(j, 2) + "\n";
}

// ---- the command ----------------------------------------------------------------------------------------

int runSimulate(const SimulateCmdOptions& opt) {
  auto fail = [](int code, const std::string& message) {
    std::cerr << "braid simulate: " << message << "\n";
    return code;
  };
  try {
    // Usage first: the report file against the inputs, sizes, datatype, protocol, counts.
    if (std::optional<std::string> error =
            samePathError({{"ALGO", opt.algo}, {"--topology", opt.topology, true}}, {{"--html", opt.html}})) {
      return fail(kUsageError, *error);
    }
    const std::optional<uint64_t> min_bytes = parseNcclTestsSize(opt.min_bytes);
    if (!min_bytes) {
      return fail(kUsageError,
                  fmt::format("-b/--minbytes: '{}' is not a size (bytes, or a number with K, M or G)", opt.min_bytes));
    }
    const std::optional<uint64_t> max_bytes = parseNcclTestsSize(opt.max_bytes);
    if (!max_bytes) {
      return fail(kUsageError,
                  fmt::format("-e/--maxbytes: '{}' is not a size (bytes, or a number with K, M or G)", opt.max_bytes));
    }
    for (const auto& [flag, text, bytes] : {std::tuple{"-b/--minbytes", opt.min_bytes, *min_bytes},
                                            std::tuple{"-e/--maxbytes", opt.max_bytes, *max_bytes}}) {
      if (bytes > kMaxSimulatedBytes) {
        return fail(kUsageError, fmt::format("{}: {} is more than {} bytes (256G), the largest size simulated", flag,
                                             text, kMaxSimulatedBytes));
      }
    }
    if (*min_bytes > *max_bytes) {
      return fail(kUsageError, fmt::format("-b {} ({} bytes) is larger than -e {} ({} bytes)", opt.min_bytes,
                                           *min_bytes, opt.max_bytes, *max_bytes));
    }
    if (opt.factor < 2) return fail(kUsageError, fmt::format("-f/--stepfactor: {} must be at least 2", opt.factor));
    if (*min_bytes == 0) {
      return fail(kUsageError, fmt::format("-b/--minbytes: {} is 0 bytes, which -f {} never grows past; start the "
                                           "sweep at 1 byte or more",
                                           opt.min_bytes, opt.factor));
    }
    const std::optional<DataType> dtype = parseDataType(opt.dtype);
    if (!dtype) {
      return fail(kUsageError, fmt::format("-d/--datatype: unknown datatype '{}': expected int8, uint8, int32, uint32, "
                                           "int64, uint64, half, bfloat16, float or double",
                                           opt.dtype));
    }
    std::optional<Protocol> protocol;
    if (!opt.protocol.empty()) {
      protocol = parseProtocolName(opt.protocol);
      if (!protocol) {
        return fail(kUsageError,
                    fmt::format("--protocol: unknown protocol '{}': expected Simple, LL or LL128", opt.protocol));
      }
    }
    if (opt.instances < 1 || opt.instances > kMaxInstances) {
      return fail(kUsageError, fmt::format("--instances: {} must be between 1 and {} (NCCL's MAXCHANNELS for MSCCL: "
                                           "instances x channels must fit in it)",
                                           opt.instances, kMaxInstances));
    }
    std::optional<uint64_t> timeline_request;
    if (!opt.timeline_size.empty()) {
      timeline_request = parseNcclTestsSize(opt.timeline_size);
      if (!timeline_request) {
        return fail(kUsageError, fmt::format("--timeline-size: '{}' is not a size", opt.timeline_size));
      }
      if (*timeline_request > kMaxSimulatedBytes) {
        return fail(kUsageError, fmt::format("--timeline-size: {} is more than {} bytes (256G), the largest size "
                                             "simulated",
                                             opt.timeline_size, kMaxSimulatedBytes));
      }
    }
    std::optional<CollectiveKind> coll;
    if (!opt.coll.empty()) {
      coll = parseCollective(opt.coll);
      if (!coll || !simulatable(*coll)) {
        return fail(kUsageError,
                    fmt::format("--coll: '{}' is not one of allreduce, allgather, reducescatter, alltoall", opt.coll));
      }
    }

    // What ALGO is: a file, a classic algorithm name or one of NCCL's.
    Source source = Source::kFile;
    std::optional<ClassicAlgo> classic;
    std::error_code ec;
    // A path that is there at all (also a dangling link or a loop of links, which the loader reports) is a file.
    if (!std::filesystem::exists(std::filesystem::symlink_status(opt.algo, ec))) {
      const std::string name = lower(opt.algo);
      if (name == "nccl") {
        source = Source::kNccl;
      } else if (name == "nccl-ring") {
        source = Source::kNcclRing;
      } else if (name == "nccl-tree") {
        source = Source::kNcclTree;
      } else if (Result<ClassicAlgo> parsed = parseClassicAlgo(name)) {
        source = Source::kClassic;
        classic = *parsed;
      } else {
        return fail(kFailure,
                    fmt::format("ALGO '{}': no such file, and not an algorithm name (ring, multiring, "
                                "direct, recursive, tree, pairwise, hierarchical, 2dh, nccl, nccl-ring, nccl-tree)",
                                opt.algo));
      }
    }
    CollectiveKind collective = coll.value_or(CollectiveKind::kAllReduce);
    if (source == Source::kClassic) {
      const std::vector<CollectiveKind> applies = classicCollectives(*classic);
      if (std::find(applies.begin(), applies.end(), collective) == applies.end()) {
        std::string names;
        for (CollectiveKind k : applies) names += fmt::format("{}{}", names.empty() ? "" : ", ", collectiveName(k));
        return fail(kUsageError, fmt::format("{} does not implement {}; it implements {} (--coll)",
                                             classicAlgoName(*classic), collectiveName(collective), names));
      }
    }
    const bool nccl_source = source == Source::kNccl || source == Source::kNcclRing || source == Source::kNcclTree;
    if (nccl_source && opt.instances != 1) {
      return fail(kUsageError, fmt::format("--instances {}: NCCL's own algorithms ({}) run without MSCCL instances; "
                                           "instances apply to an algorithm file or a classical algorithm",
                                           opt.instances, opt.algo));
    }
    if (source == Source::kNcclTree && collective != CollectiveKind::kAllReduce &&
        collective != CollectiveKind::kAllToAll) {
      return fail(kUsageError, fmt::format("nccl-tree: NCCL runs its tree for allreduce only, not {} (--coll)",
                                           collectiveName(collective)));
    }
    if (opt.topology.empty()) return fail(kUsageError, "--topology is required");
    // The report's file is checked before anything is loaded or simulated.
    if (std::optional<std::string> error = outputPathsError({opt.html})) return fail(kFailure, *error);

    Result<Topology> loaded_topology = loadTopologyArgument(opt.topology);
    if (!loaded_topology) return fail(kFailure, loaded_topology.status().message());
    const int gpus = loaded_topology->numGpus();

    std::optional<Algorithm> algorithm;
    if (source == Source::kFile) {
      Result<Algorithm> loaded = loadAlgorithm(opt.algo);
      if (!loaded) return fail(kFailure, loaded.status().message());
      algorithm = std::move(*loaded);
      if (!simulatable(algorithm->collective)) {
        return fail(kFailure, fmt::format("{}: collective {} cannot be simulated here (allreduce, allgather, "
                                          "reducescatter and alltoall can)",
                                          opt.algo, algorithm->collective_name));
      }
      if (coll && *coll != algorithm->collective) {
        return fail(kUsageError, fmt::format("--coll {} contradicts {}, which is {}", opt.coll, opt.algo,
                                             collectiveName(algorithm->collective)));
      }
      collective = algorithm->collective;
      if (algorithm->num_ranks != gpus) {
        return fail(kFailure, fmt::format("{} has {} ranks but topology {} has {} GPUs", opt.algo, algorithm->num_ranks,
                                          loaded_topology->name, gpus));
      }
      VerifyReport report = verify(*algorithm);
      if (!report.ok) {
        return fail(kFailure, fmt::format("{} fails verification as {}; not simulated:\n{}", opt.algo,
                                          collectiveName(collective), report.toString()));
      }
    } else if (source == Source::kClassic) {
      ClassicRequest request;
      request.algo = *classic;
      request.spec.kind = collective;
      request.spec.num_ranks = gpus;
      request.spec.chunk_factor = 0;
      request.spec.in_place = opt.in_place;
      request.topology = &*loaded_topology;
      request.protocol = protocol.value_or(Protocol::kSimple);
      Result<Algorithm> built = buildClassic(request);
      if (!built) return fail(kFailure, built.status().message());
      algorithm = std::move(*built);
    }
    if (algorithm) {
      Status placed = checkPlacement(*algorithm, *loaded_topology);
      if (!placed) return fail(kFailure, placed.message());
    }

    Result<NcclSystem> system = ncclSystem(*loaded_topology);
    if (!system) return fail(kFailure, fmt::format("NCCL's view of {}: {}", opt.topology, system.status().message()));
    const std::vector<std::string> system_notes = system->notes;

    Simulation sim(opt, std::move(*loaded_topology), std::move(*system), collective, *dtype, protocol);
    sim.source = source;
    sim.algorithm = std::move(algorithm);

    SimulateReport report;
    report.algorithm = opt.algo;
    report.algorithm_name = sim.algorithm ? sim.algorithm->name : opt.algo;
    report.topology = sim.topology().name;
    report.collective = collectiveName(collective);
    report.ranks = gpus;
    if (protocol) {
      report.protocol = protocolName(*protocol);
    } else if (sim.algorithm) {
      report.protocol = protocolName(sim.algorithm->protocol);
    } else {
      report.protocol = "per size (NCCL's choice)";
    }
    report.datatype = dtype->name;
    // What was simulated: an algorithm that declares only the other kind of call runs as it declares.
    report.in_place = opt.in_place;
    report.instances = opt.instances;
    report.bus_factor = sim.busFactor();
    report.bound_legend = boundLegend(collective);
    for (const std::string& n : sim.topology().notes) report.notes.push_back("topology: " + n);
    for (const std::string& n : system_notes) report.notes.push_back("NCCL model: " + n);
    if (sim.algorithm) {
      for (const std::string& n : sim.algorithm->notes) report.notes.push_back("algorithm: " + n);
      const bool declared = opt.in_place ? sim.algorithm->in_place : sim.algorithm->out_of_place;
      if (!declared) {
        report.in_place = sim.algorithm->in_place;
        report.notes.push_back(fmt::format("the algorithm declares only {} calls; simulated that way",
                                           sim.algorithm->in_place ? "in-place" : "out-of-place"));
      }
    }
    if (collective == CollectiveKind::kAllToAll) {
      report.notes.push_back(
          "NCCL's model does not cover all-to-all (NCCL runs it as grouped send/recv): its columns show '-'; "
          "the grouped send/recv pattern is still simulated");
      if (source == Source::kNcclRing || source == Source::kNcclTree) {
        report.notes.push_back(
            fmt::format("{}: NCCL has no ring or tree all-to-all; its grouped send/recv program "
                        "(p2p/{}) is what ran",
                        lower(opt.algo), protocolName(protocol.value_or(Protocol::kSimple))));
      }
    }

    // The sweep, in nccl-tests' convention: whole elements per rank, sizes that come to 0 elements skipped.
    std::vector<std::pair<uint64_t, uint64_t>> sizes;  // (count, bytes)
    for (uint64_t s = *min_bytes;;) {
      auto [count, bytes] = sim.countAndBytes(s);
      if (count == 0) {
        report.notes.push_back(fmt::format("size {} holds no whole {} per rank; skipped", s, dtype->name));
      } else if (sizes.empty() || sizes.back().second != bytes) {
        sizes.emplace_back(count, bytes);
      }
      if (s > *max_bytes / static_cast<uint64_t>(opt.factor)) break;
      const uint64_t next = s * static_cast<uint64_t>(opt.factor);
      if (next > *max_bytes || next == s) break;
      s = next;
    }
    if (!sizes.empty() && (sizes.front().second != *min_bytes || sizes.back().second != *max_bytes)) {
      report.notes.push_back(fmt::format(
          "sizes run: {} .. {} ({} size(s)); -b {} -e {} -f {} asked for {} .. {}: sizes that hold no whole {} per "
          "rank are skipped or rounded down to whole elements, and the sweep stops at the last -b x f^k not above -e",
          sizes.front().second, sizes.back().second, sizes.size(), opt.min_bytes, opt.max_bytes, opt.factor, *min_bytes,
          *max_bytes, dtype->name));
    }
    if (sizes.empty()) {
      return fail(kUsageError,
                  fmt::format("no size in {} .. {} holds a whole {} per rank", *min_bytes, *max_bytes, dtype->name));
    }

    // Which size gets the link timeline.
    std::pair<uint64_t, uint64_t> timeline_size;
    if (timeline_request) {
      timeline_size = sim.countAndBytes(*timeline_request);
      if (timeline_size.first == 0) {
        return fail(kUsageError,
                    fmt::format("--timeline-size {} holds no whole {} per rank", *timeline_request, dtype->name));
      }
    } else {
      timeline_size = sizes.front();
      for (const auto& s : sizes) {
        if (s.second <= kDefaultTimelineCap) timeline_size = s;
      }
    }

    std::vector<uint64_t> bound_sizes = {timeline_size.second};
    for (const auto& s : sizes) bound_sizes.push_back(s.second);
    sim.prepareBounds(bound_sizes);
    std::optional<SimulateTimeline> timeline;
    // A size that cannot be simulated (e.g. an algorithm that deadlocks on NCCL_STEPS credits at large sizes)
    // costs its row, not the table: it is named in a note and the exit status is 1.
    std::vector<std::string> failures;
    for (const auto& [count, bytes] : sizes) {
      const bool record = bytes == timeline_size.second;
      try {
        report.rows.push_back(sim.row(count, bytes, record ? &timeline : nullptr));
      } catch (const CmdError& e) {
        if (e.code() != kFailure) throw;
        failures.push_back(e.message());
      }
    }
    if (report.rows.empty()) return fail(kFailure, failures.front());
    if (!timeline) {
      try {
        sim.row(timeline_size.first, timeline_size.second, &timeline);
      } catch (const CmdError& e) {
        if (e.code() != kFailure) throw;
        report.notes.push_back("no link timeline: " + e.message());
      }
    }
    for (const std::string& f : failures) report.notes.push_back("not simulated: " + f);
    report.timeline = std::move(timeline);
    for (const std::string& n : sim.notes()) report.notes.push_back(n);

    std::string out = opt.json ? jsonReport(report) : textReport(report, opt, *min_bytes, *max_bytes);
    if (!opt.html.empty()) {
      Status written = writeFileAtomic(opt.html, renderSimulateHtml(report));
      if (!written) return fail(kFailure, written.message());
    }
    std::cout << out;
    std::cout.flush();
    if (!std::cout) return fail(kFailure, "cannot write the report to standard output");
    if (!failures.empty()) {
      std::cerr << fmt::format("braid simulate: {} of {} size(s) could not be simulated (see the notes)\n",
                               failures.size(), sizes.size());
      return kFailure;
    }
    return 0;
  } catch (const CmdError& e) {
    return fail(e.code(), e.message());
  }
}

}  // namespace

void registerSimulateCommand(CLI::App& app, int* exit_code) {
  auto opt = std::make_shared<SimulateCmdOptions>();
  CLI::App* cmd = app.add_subcommand(
      "simulate",
      "Simulate an algorithm over a sweep of sizes; print an nccl-tests-like table with NCCL's model, NCCL's "
      "algorithm simulated, and the lower bound (--json, --html report)");
  cmd->add_option("algo", opt->algo,
                  "algorithm file (MSCCL XML, Braid JSON, TACCL JSON) or name: ring, multiring, direct, recursive, "
                  "tree, pairwise, hierarchical, 2dh, nccl, nccl-ring, nccl-tree")
      ->required();
  cmd->add_option("--topology,-t", opt->topology, "topology file or shipped name (e.g. dgx1-v100)")->required();
  cmd->add_option("--coll,-c", opt->coll,
                  "allreduce | allgather | reducescatter | alltoall (algorithm names; default allreduce)");
  cmd->add_option("-b,--minbytes", opt->min_bytes, "smallest size (nccl-tests syntax: 1K, 8M, 1G, bytes; default 1K)");
  cmd->add_option("-e,--maxbytes", opt->max_bytes, "largest size (default 1G)");
  cmd->add_option("-f,--stepfactor", opt->factor, "multiplication factor between sizes (default 2)");
  cmd->add_option("-d,--datatype", opt->dtype,
                  "int8 uint8 int32 uint32 int64 uint64 half bfloat16 float double (default float)");
  cmd->add_flag("--in-place", opt->in_place, "simulate in-place calls (default out-of-place)");
  cmd->add_option("--protocol,--proto", opt->protocol, "Simple | LL | LL128 (default: the algorithm's)");
  cmd->add_option("--instances", opt->instances, "MSCCL instances (default 1)");
  cmd->add_option("--timeline-size", opt->timeline_size,
                  "size whose per-link timeline the HTML report shows (default: largest swept size up to 16M)");
  cmd->add_flag("--json", opt->json, "print JSON instead of the table");
  cmd->add_option("--html", opt->html, "write a self-contained HTML report here")->check(outputPathCheck());
  cmd->callback([opt, exit_code]() { *exit_code = runSimulate(*opt); });
}

}  // namespace braid::cli
