// `braid synth --topology T [--sketch S | --method forest] --coll C [--size BYTES] [--time-limit SECONDS]
// [--budget UNITS] [-o out.xml|out.json] [--json report.json]`: sketch-guided synthesis (include/braid/synthesize.h;
// TACCL, NSDI'23, on Z3) or tree packing, the algorithm compared with NCCL and the lower bound in Braid's simulator
// (comm/pareto/compare.h), the MSCCL XML or Braid JSON written, and a JSON report; with `--sizes FROM:TO` the
// collective's Pareto set instead (include/braid/pareto.h), one MSCCL XML per window into `-o DIR` (docs/cli.md
// "braid synth").
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <exception>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "braid/algorithm.h"
#include "braid/collective.h"
#include "braid/file_io.h"
#include "braid/pareto.h"
#include "braid/sketch.h"
#include "braid/synthesize.h"
#include "braid/taccl.h"
#include "braid/topology.h"
#include "cli/commands.h"
#include "cli/output_path.h"
#include "cli/topology_arg.h"
#include "comm/pareto/compare.h"
#include "common/text.h"
#include "report/synth_report.h"

namespace braid::cli {
namespace {

constexpr int kFailure = 1;
constexpr int kUsageError = 2;  // also: the sketch admits no algorithm (kInfeasible)

struct SynthCmdOptions {
  std::string topology;
  std::string sketch;
  std::string coll;
  std::string size;
  double time_limit_s = 60;
  std::string budget;  // empty: SynthesisRequest's default (from the time limit); else a positive integer
  std::string out;
  std::string format;
  std::string json;
  int root = 0;
  std::string protocol;
  std::string sizes = "1K,1M,256M";
  std::string method;                    // empty: taccl
  std::optional<double> tree_tolerance;  // forest only; default SynthesisRequest's
  std::optional<int> pieces;
  std::optional<int> sccl_steps, sccl_rounds, sccl_chunks;  // sccl only; 0 / absent: searched
  std::string sccl_objective;                               // sccl only: latency (default) | bandwidth
  std::optional<std::string> min_speedup;                   // Pareto set only; default defaultParetoMinSpeedup()
};

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

/// True when the file's first non-blank character is '{' (TACCL profile or sketch JSON).
bool isJsonFile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  Result<std::string> text = readFile(path);
  if (!text) return false;
  const size_t first = text->find_first_not_of(" \t\r\n");
  return first != std::string::npos && (*text)[first] == '{';
}

/// TACCL's sketch fields from a Braid sketch, for building a multi-node topology from a TACCL profile
/// (loadTacclTopology) when the sketch is YAML.
TacclSketch tacclSketchFrom(const Sketch& s) {
  TacclSketch t;
  t.source = s.source;
  t.nnodes = s.nodes;
  t.intranode_strategy = s.intranode_strategy;
  for (const SketchSwitch& sw : s.switches) t.switches.push_back(TacclSwitch{sw.gpus, sw.hyperedge});
  t.has_internode = s.nodes > 1;
  t.internode_strategy = "relay";
  t.internode_conn_kind = interConnName(s.internode_conn);
  t.internode_conn = s.internode_map;
  t.gpus_to_sender_rev_map = s.relay_for;
  t.enforce_ordering = s.enforce_ordering;
  t.symmetry_offsets = s.symmetry;
  t.input_chunkup = s.chunkup;
  return t;
}

bool synthesizable(CollectiveKind kind) {
  return kind == CollectiveKind::kAllGather || kind == CollectiveKind::kReduceScatter ||
         kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kAllToAll ||
         kind == CollectiveKind::kBroadcast || kind == CollectiveKind::kReduce;
}

bool comparable(CollectiveKind kind) {
  return kind == CollectiveKind::kAllGather || kind == CollectiveKind::kReduceScatter ||
         kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kAllToAll;
}

class CmdError {
 public:
  CmdError(int code, std::string message) : code_(code), message_(std::move(message)) {}
  int code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  int code_;
  std::string message_;
};

/// Loads the topology: a TACCL profile with a multi-node sketch joins as many copies of its node as the sketch
/// says (loadTacclTopology); anything else as every command loads it (loadTopologyArgument).
Topology loadSynthTopology(const SynthCmdOptions& opt, const std::optional<Sketch>& sketch) {
  if (sketch && sketch->nodes > 1 && isJsonFile(opt.topology)) {
    TacclSketch taccl;
    if (isJsonFile(opt.sketch)) {
      Result<TacclSketch> loaded = loadTacclSketch(opt.sketch);
      if (!loaded) throw CmdError(kFailure, loaded.status().message());
      taccl = std::move(*loaded);
    } else {
      taccl = tacclSketchFrom(*sketch);
    }
    noteShadowedTopology(opt.topology);
    Result<Topology> topology = loadTacclTopology(opt.topology, taccl);
    if (!topology) throw CmdError(kFailure, topology.status().message());
    return std::move(*topology);
  }
  Result<Topology> topology = loadTopologyArgument(opt.topology);
  if (!topology) throw CmdError(kFailure, topology.status().message());
  return std::move(*topology);
}

std::string summaryHeader(const SynthesisResult& result, const Topology& topology, CollectiveKind collective,
                          bool sketch_given) {
  const Algorithm& a = result.algorithm;
  const std::string how =
      result.method == SynthesisMethod::kForest
          ? std::string(collective == CollectiveKind::kAllToAll ? "method forest (max-concurrent flow, no sketch)"
                                                                : "method forest (tree packing, no sketch)")
      : result.method == SynthesisMethod::kSccl
          ? fmt::format("method sccl ({} steps, {} rounds, {} chunks; no sketch)",
                        a.provenance.extra.count("sccl_steps") ? a.provenance.extra.at("sccl_steps") : "?",
                        a.provenance.extra.count("sccl_rounds") ? a.provenance.extra.at("sccl_rounds") : "?",
                        a.provenance.extra.count("sccl_chunks") ? a.provenance.extra.at("sccl_chunks") : "?")
          : fmt::format("sketch {}{}", result.sketch.source.empty() ? result.sketch.name : result.sketch.source,
                        sketch_given ? "" : " (derived)");
  std::string out = fmt::format("# Braid synth: {} on {} ({} ranks, {} node(s)), {}, chunkup {}: {:.2f} s, VERIFIED\n",
                                collectiveName(collective), topology.name, a.num_ranks, topology.numNodes(), how,
                                result.chunkup, result.seconds);
  out += fmt::format("# algorithm {}: {} chunks, {} channel(s), {} threadblocks, {} steps, protocol {}, {}\n", a.name,
                     a.num_chunks, a.num_channels, a.numThreadblocks(), a.numSteps(), protocolName(a.protocol),
                     a.in_place && a.out_of_place ? "in-place and out-of-place"
                     : a.in_place                 ? "in-place"
                                                  : "out-of-place");
  out += fmt::format("# model makespan {:.2f} us at {} bytes (the synthesizer's alpha-beta model)\n",
                     result.makespan_us, result.costing_size_bytes);
  return out;
}

/// --budget: empty = the default (0 for SynthesisRequest); otherwise a whole number of units, 1 .. 10^15.
uint64_t parseBudget(const std::string& text) {
  if (text.empty()) return 0;
  const bool digits = std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || text.size() > 16 || std::stoull(text) == 0 || std::stoull(text) > 1'000'000'000'000'000ULL) {
    throw CmdError(kUsageError,
                   fmt::format("--budget: '{}' is not a whole number of Z3 resource units from 1 to 10^15", text));
  }
  return std::stoull(text);
}

/// --sizes FROM:TO[:FACTOR] (nccl-tests' -b/-e/-f; factor 4 by default): the measured sizes of a Pareto set.
/// nullopt when `text` is not a range; throws CmdError on a bad one.
std::optional<std::vector<uint64_t>> parseSizeRange(const std::string& text) {
  if (text.find(':') == std::string::npos) return std::nullopt;
  std::vector<std::string> parts;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ':')) parts.push_back(item);
  if (parts.size() < 2 || parts.size() > 3 || text.back() == ':')
    throw CmdError(kUsageError, fmt::format("--sizes: '{}' is not FROM:TO or FROM:TO:FACTOR (e.g. 1K:1G)", text));
  const std::optional<uint64_t> from = parseNcclTestsSize(parts[0]), to = parseNcclTestsSize(parts[1]);
  if (!from || !to || *from == 0 || *to < *from)
    throw CmdError(
        kUsageError,
        fmt::format("--sizes: '{}' is not a range of sizes FROM <= TO (bytes, or numbers with K, M or G)", text));
  if (*to > kMaxSimulatedBytes)
    throw CmdError(kUsageError, fmt::format("--sizes: {} is more than {} bytes (256G), the largest size simulated",
                                            parts[1], kMaxSimulatedBytes));
  uint64_t factor = 4;
  if (parts.size() == 3) {
    const std::optional<uint64_t> f = parseNcclTestsSize(parts[2]);
    if (!f || *f < 2 || *f > 1024)
      throw CmdError(kUsageError, fmt::format("--sizes: factor '{}' is not 2..1024", parts[2]));
    factor = *f;
  }
  std::vector<uint64_t> sizes;
  for (uint64_t s = *from; s <= *to; s *= factor) {
    sizes.push_back(s);
    if (s > *to / factor) break;
  }
  if (sizes.size() > 64) throw CmdError(kUsageError, fmt::format("--sizes: '{}' gives more than 64 sizes", text));
  return sizes;
}

/// `braid synth --sizes FROM:TO`: the collective's Pareto set (include/braid/pareto.h), its table, the algorithm of
/// every window Braid serves written into the directory -o (MSCCL XML, minBytes/maxBytes set), --json the set.
int runParetoSet(const SynthCmdOptions& opt, CollectiveKind collective, const std::vector<uint64_t>& sizes) {
  for (const auto& [given, name] :
       std::vector<std::pair<bool, std::string>>{{!opt.sketch.empty(), "--sketch"},
                                                 {!opt.size.empty(), "--size"},
                                                 {!opt.protocol.empty(), "--protocol"},
                                                 {!opt.format.empty(), "--format"},
                                                 {opt.tree_tolerance.has_value(), "--tree-tolerance"},
                                                 {opt.pieces.has_value(), "--pieces"},
                                                 {opt.sccl_steps.has_value(), "--sccl-steps"},
                                                 {opt.sccl_rounds.has_value(), "--sccl-rounds"},
                                                 {opt.sccl_chunks.has_value(), "--sccl-chunks"},
                                                 {!opt.sccl_objective.empty(), "--sccl-objective"},
                                                 {!opt.method.empty(), "--method"},
                                                 {opt.root != 0, "--root"}}) {
    if (given)
      throw CmdError(kUsageError, fmt::format("{} does not apply to a Pareto set (--sizes FROM:TO): every method and "
                                              "protocol is a candidate",
                                              name));
  }
  if (collective != CollectiveKind::kAllGather && collective != CollectiveKind::kReduceScatter &&
      collective != CollectiveKind::kAllReduce && collective != CollectiveKind::kAllToAll) {
    throw CmdError(kUsageError, fmt::format("--sizes FROM:TO: a Pareto set is for allgather, reducescatter, "
                                            "allreduce or alltoall, not {}",
                                            collectiveName(collective)));
  }
  if (std::optional<std::string> error = timeLimitError(opt.time_limit_s)) throw CmdError(kUsageError, *error);
  std::optional<double> min_speedup;
  if (opt.min_speedup) {
    min_speedup = parseDecimalNumber(*opt.min_speedup);
    if (!min_speedup || *min_speedup < 1 || *min_speedup > 1000) {
      throw CmdError(kUsageError, fmt::format("--min-speedup '{}': not a decimal number in [1, 1000] (1: Braid takes "
                                              "every size where it is predicted at least as fast as NCCL)",
                                              *opt.min_speedup));
    }
  }
  std::error_code ec;
  // A missing -o directory is created when the set is written (its parent must exist); anything else there is an
  // error before synthesis starts.
  bool create_out = false;
  if (!opt.out.empty() && !std::filesystem::is_directory(opt.out, ec)) {
    if (std::filesystem::exists(opt.out, ec))
      throw CmdError(kFailure,
                     fmt::format("-o {}: a Pareto set is written into a directory, and this is none", opt.out));
    const std::string extension = lower(std::filesystem::path(opt.out).extension().string());
    if (extension == ".xml" || extension == ".json") {
      throw CmdError(kUsageError, fmt::format("-o {}: a Pareto set writes one MSCCL XML per Braid window into a "
                                              "directory; name a directory (created when missing), not a {} file",
                                              opt.out, extension));
    }
    // The directory is created as a file would be: its parent must exist and take it.
    if (std::optional<std::string> error = outputPathsError({opt.out})) throw CmdError(kFailure, *error);
    create_out = true;
  }
  // Whether --json goes into the -o directory (compared as absolute paths with the existing directories above
  // them resolved: "pd/set.json" and "./pd/../pd/set.json" with -o pd).
  auto canonical = [](const std::filesystem::path& p) {
    std::error_code ignored;
    std::filesystem::path c = std::filesystem::weakly_canonical(std::filesystem::absolute(p, ignored), ignored);
    return c.empty() ? std::filesystem::absolute(p, ignored).lexically_normal() : c;
  };
  const bool json_in_out = !opt.out.empty() && !opt.json.empty() && opt.json != "-" &&
                           canonical(std::filesystem::path(opt.json).parent_path()) == canonical(opt.out);
  // --json into the -o directory this run creates: its directory is there when the report is written.
  if (!opt.json.empty() && opt.json != "-" && !(json_in_out && create_out)) {
    if (std::optional<std::string> error = outputPathsError({opt.json})) throw CmdError(kFailure, *error);
  }
  const Topology topology = loadSynthTopology(opt, std::nullopt);
  const std::string prefix = fmt::format("{}-{}-", collectiveName(collective), topology.name);
  if (json_in_out) {
    // The windows' files are <prefix><min>-<max>.xml in -o: a report under such a name would replace one of them.
    const std::filesystem::path name = std::filesystem::path(opt.json).filename();
    if (name.string().rfind(prefix, 0) == 0 && name.extension() == ".xml")
      throw CmdError(kUsageError, fmt::format("--json {}: a name of the form {}*.xml in -o {} is kept for the set's "
                                              "window files; write the report to another name",
                                              opt.json, prefix, opt.out));
  }
  if (!opt.out.empty() && !create_out) {
    // Another set's files beside this one would give a loader overlapping windows.
    for (const auto& entry : std::filesystem::directory_iterator(opt.out, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind(prefix, 0) == 0 && entry.path().extension() == ".xml")
        throw CmdError(kFailure, fmt::format("-o {}: it already holds {} (a Pareto set's window); a set goes into a "
                                             "directory without {}*.xml files",
                                             opt.out, name, prefix));
    }
  }
  const auto start = std::chrono::steady_clock::now();
  ParetoOptions options;
  options.sizes = sizes;
  options.time_limit_s = opt.time_limit_s;
  options.budget_units = parseBudget(opt.budget);
  options.min_speedup = min_speedup;
  auto last_line = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  options.progress = [&start, &last_line](const std::string& line) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_line < std::chrono::milliseconds(500)) return;  // about two lines a second at most
    last_line = now;
    std::cerr << fmt::format("[synth {:.1f}s] {}\n", std::chrono::duration<double>(now - start).count(), line);
  };
  Result<CollectiveParetoSet> set = synthesizeCollectiveParetoSet(topology, topology.name, collective, options);
  if (!set) throw CmdError(kFailure, set.status().message());
  for (size_t i = 0; i < topology.notes.size(); ++i)
    set->notes.insert(set->notes.begin() + static_cast<std::ptrdiff_t>(i), "topology: " + topology.notes[i]);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Every file is written whole; if one fails, those already written are removed (none or all of the set).
  std::vector<std::string> files(set->windows.size()), written;
  auto write = [&written, &opt, create_out](const std::string& path, const std::function<Status()>& write_file) {
    Status status = write_file();
    if (!status) {
      std::error_code ignored;
      for (const std::string& f : written) std::filesystem::remove(f, ignored);
      if (create_out) std::filesystem::remove(opt.out, ignored);  // the directory this run created, empty again
      throw CmdError(kFailure, status.message());
    }
    written.push_back(path);
  };
  for (size_t i = 0; i < set->windows.size() && !opt.out.empty(); ++i) {
    const ParetoWindow& w = set->windows[i];
    if (w.nccl || w.candidate.algorithm.num_ranks == 0) continue;
    files[i] = (std::filesystem::path(opt.out) /
                fmt::format("{}{}-{}.xml", prefix, bytesText(w.min_bytes), windowEndText(w.max_bytes)))
                   .string();
  }
  // Every output is a file of its own, checked again with the windows' names known, before any is written.
  std::vector<PathOption> outputs{{"--json", opt.json == "-" ? std::string() : opt.json}};
  for (const std::string& f : files) {
    if (!f.empty()) outputs.push_back({"-o", f});
  }
  if (std::optional<std::string> error = samePathError({}, outputs)) throw CmdError(kUsageError, *error);
  if (create_out && !std::filesystem::create_directory(opt.out, ec) && ec)
    throw CmdError(kFailure, fmt::format("-o {}: cannot create the directory: {}", opt.out, ec.message()));
  for (size_t i = 0; i < set->windows.size() && !opt.out.empty(); ++i) {
    const ParetoWindow& w = set->windows[i];
    if (files[i].empty()) continue;
    // MSCCL XML has no instance count: a window served with several instances is written out with them.
    Result<Algorithm> written_out = replicateInstances(w.candidate.algorithm, w.candidate.instances);
    if (!written_out) throw CmdError(kFailure, written_out.status().message());
    write(files[i], [&] { return writeAlgorithmFile(files[i], *written_out, AlgorithmFileFormat::kMscclXml); });
  }
  if (!opt.json.empty()) {
    nlohmann::ordered_json j = paretoSetJson(*set, files);
    j["topology"] = topology.name;
    j["ranks"] = topology.numGpus();
    j["seconds"] = seconds;
    const std::string text = dumpJson(j, 2) + "\n";
    if (opt.json == "-") {
      std::cout << text;
      return 0;
    }
    write(opt.json, [&] { return writeFileAtomic(opt.json, text); });
  }
  int braid_windows = 0;
  for (const ParetoWindow& w : set->windows) braid_windows += w.nccl ? 0 : 1;
  std::string out = fmt::format(
      "# Braid Pareto set: {} on {} ({} ranks, {} node(s)), {} size(s) {} .. {}: {} window(s), {} served by Braid, "
      "{} left to NCCL; {:.1f} s\n",
      collectiveName(collective), topology.name, topology.numGpus(), topology.numNodes(), set->points.size(),
      bytesText(set->points.front().size_bytes), bytesText(set->points.back().size_bytes), set->windows.size(),
      braid_windows, set->windows.size() - braid_windows, seconds);
  out += fmt::format(
      "# times: Braid's simulator, float, out-of-place; NCCL = NCCL 2.28's own choice (its tuning model) built in "
      "the IR and simulated the same way; cut bound = ForestColl's hardware cut bound; NCCL/Braid > 1: Braid "
      "faster; Braid takes a size only at NCCL/Braid >= {} (--min-speedup)\n",
      set->min_speedup);
  out += paretoSetTable(*set);
  for (const std::string& n : set->notes) out += "# note: " + n + "\n";
  for (const std::string& f : files)
    if (!f.empty()) out += fmt::format("# wrote {}\n", f);
  if (!opt.out.empty() && std::all_of(files.begin(), files.end(), [](const std::string& f) { return f.empty(); }))
    out += fmt::format("# no window is served by Braid: no algorithm file written to {}\n", opt.out);
  if (!opt.json.empty()) out += fmt::format("# report {}\n", opt.json);
  std::cout << out;
  std::cout.flush();
  if (!std::cout) throw CmdError(kFailure, "cannot write to standard output");
  return 0;
}

int runSynth(const SynthCmdOptions& opt) {
  const auto command_start = std::chrono::steady_clock::now();
  auto fail = [](int code, const std::string& message) {
    std::cerr << "braid synth: " << message << "\n";
    return code;
  };
  try {
    // ---- usage -------------------------------------------------------------------------------------------
    const std::optional<CollectiveKind> collective = parseCollective(opt.coll);
    if (!collective || !synthesizable(*collective)) {
      return fail(kUsageError,
                  fmt::format("--coll: '{}' is not one of allgather, reducescatter, allreduce, alltoall, broadcast, "
                              "reduce",
                              opt.coll));
    }
    // No output may replace an input or another output (-o is a directory for a Pareto set: the same rule).
    if (std::optional<std::string> error = samePathError({{"--topology", opt.topology, true}, {"--sketch", opt.sketch}},
                                                         {{"-o", opt.out}, {"--json", opt.json}})) {
      return fail(kUsageError, *error);
    }
    if (std::optional<std::vector<uint64_t>> range = parseSizeRange(opt.sizes)) {
      return runParetoSet(opt, *collective, *range);
    }
    if (opt.min_speedup)
      return fail(kUsageError, "--min-speedup applies to a Pareto set only (--sizes FROM:TO, e.g. 1K:1G)");
    uint64_t costing_size = 0;
    if (!opt.size.empty()) {
      const std::optional<uint64_t> parsed = parseNcclTestsSize(opt.size);
      if (!parsed || *parsed == 0) {
        return fail(kUsageError,
                    fmt::format("--size: '{}' is not a size (bytes, or a number with K, M or G)", opt.size));
      }
      costing_size = *parsed;
    }
    std::vector<uint64_t> sizes;
    {
      std::stringstream list(opt.sizes);
      std::string item;
      while (std::getline(list, item, ',')) {
        item.erase(0, item.find_first_not_of(" \t"));
        item.erase(item.find_last_not_of(" \t") + 1);
        const std::optional<uint64_t> parsed = parseNcclTestsSize(item);
        if (!parsed || *parsed == 0) {
          return fail(kUsageError,
                      fmt::format("--sizes: '{}' is not a size (bytes, or a number with K, M or G)", item));
        }
        if (*parsed > kMaxSimulatedBytes) {
          return fail(kUsageError, fmt::format("--sizes: {} is more than {} bytes (256G), the largest size simulated",
                                               item, kMaxSimulatedBytes));
        }
        sizes.push_back(*parsed);
      }
      if (sizes.empty()) return fail(kUsageError, "--sizes: no size given (e.g. 1K,1M,256M)");
    }
    if (std::optional<std::string> error = timeLimitError(opt.time_limit_s)) return fail(kUsageError, *error);
    const std::optional<SynthesisMethod> method =
        parseSynthesisMethod(opt.method.empty() ? std::string("taccl") : lower(opt.method));
    if (!method) return fail(kUsageError, fmt::format("--method: '{}' is not taccl, forest or sccl", opt.method));
    const bool sccl_given = opt.sccl_steps || opt.sccl_rounds || opt.sccl_chunks || !opt.sccl_objective.empty();
    if (sccl_given && *method != SynthesisMethod::kSccl) {
      return fail(kUsageError,
                  "--sccl-steps, --sccl-rounds, --sccl-chunks and --sccl-objective apply to --method sccl only");
    }
    const std::string objective = lower(opt.sccl_objective);
    if (!objective.empty() && objective != "latency" && objective != "bandwidth") {
      return fail(kUsageError, fmt::format("--sccl-objective: '{}' is not latency or bandwidth", opt.sccl_objective));
    }
    if (*method == SynthesisMethod::kSccl && !opt.sketch.empty()) {
      return fail(kUsageError, "--sketch applies to --method taccl only (the sccl method uses no sketch)");
    }
    for (const auto& [value, name, hi] :
         std::vector<std::tuple<std::optional<int>, std::string, int>>{{opt.sccl_steps, "--sccl-steps", 16},
                                                                       {opt.sccl_rounds, "--sccl-rounds", 64},
                                                                       {opt.sccl_chunks, "--sccl-chunks", 32}}) {
      if (value && (*value < 1 || *value > hi)) {
        return fail(kUsageError, fmt::format("{}: {} is not in 1..{}", name, *value, hi));
      }
    }
    if (opt.sccl_steps && opt.sccl_rounds && *opt.sccl_rounds < *opt.sccl_steps) {
      return fail(kUsageError, fmt::format("--sccl-rounds: {} rounds cannot fill {} steps (a step lasts a round at "
                                           "least)",
                                           *opt.sccl_rounds, *opt.sccl_steps));
    }
    if (*method == SynthesisMethod::kForest && !opt.budget.empty()) {
      return fail(kUsageError, "--budget applies to --method taccl (the forest method runs no Z3 solver)");
    }
    const bool tolerance_given = opt.tree_tolerance.has_value(), pieces_given = opt.pieces.has_value();
    if ((tolerance_given || pieces_given) && *method != SynthesisMethod::kForest) {
      return fail(kUsageError,
                  fmt::format("{} applies to --method forest only", pieces_given ? "--pieces" : "--tree-tolerance"));
    }
    if (tolerance_given && collective && *collective == CollectiveKind::kAllToAll) {
      return fail(kUsageError, "--tree-tolerance applies to tree packing; the forest method's alltoall packs no trees");
    }
    if (tolerance_given && !(*opt.tree_tolerance >= 0 && *opt.tree_tolerance < 1)) {
      return fail(kUsageError, fmt::format("--tree-tolerance: {} is not in [0, 1)", *opt.tree_tolerance));
    }
    if (pieces_given && (*opt.pieces < 1 || *opt.pieces > 64)) {
      return fail(kUsageError, fmt::format("--pieces: {} is not in 1..64", *opt.pieces));
    }
    if (*method == SynthesisMethod::kForest && !opt.sketch.empty()) {
      return fail(kUsageError, "--sketch applies to --method taccl only (the forest method uses no sketch)");
    }
    Protocol protocol = Protocol::kSimple;
    if (!opt.protocol.empty()) {
      const std::optional<Protocol> parsed = parseProtocolName(opt.protocol);
      if (!parsed) {
        return fail(kUsageError,
                    fmt::format("--protocol: unknown protocol '{}': expected Simple, LL or LL128", opt.protocol));
      }
      protocol = *parsed;
    }
    std::string format = lower(opt.format);
    if (!format.empty() && format != "xml" && format != "json") {
      return fail(kUsageError, fmt::format("--format: '{}' is not xml or json", opt.format));
    }
    if (!format.empty() && opt.out.empty()) return fail(kUsageError, "--format needs -o FILE");
    if (format.empty() && !opt.out.empty()) {
      format = lower(std::filesystem::path(opt.out).extension().string()) == ".json" ? "json" : "xml";
    }
    if (opt.root < 0) return fail(kUsageError, fmt::format("--root: {} is not a rank", opt.root));
    if (opt.root != 0 && *collective != CollectiveKind::kBroadcast && *collective != CollectiveKind::kReduce) {
      return fail(kUsageError, "--root applies to broadcast and reduce only");
    }

    // Output destinations are checked before any work: a missing directory fails now, not after synthesis.
    if (opt.out == "-") return fail(kUsageError, "-o -: write the algorithm to a file (--json - prints the report)");
    if (std::optional<std::string> error = outputPathsError({opt.out, opt.json})) return fail(kFailure, *error);

    // ---- inputs ------------------------------------------------------------------------------------------
    std::optional<Sketch> sketch;
    if (!opt.sketch.empty()) {
      Result<Sketch> loaded = loadSketch(opt.sketch);
      if (!loaded) return fail(kFailure, loaded.status().message());
      sketch = std::move(*loaded);
    }
    const Topology topology = loadSynthTopology(opt, sketch);
    if (opt.root >= topology.numGpus()) {
      return fail(kUsageError, fmt::format("--root {}: topology {} has {} GPUs (ranks 0..{})", opt.root, topology.name,
                                           topology.numGpus(), topology.numGpus() - 1));
    }

    // ---- synthesis ---------------------------------------------------------------------------------------
    ProgressPrinter progress("synth", std::cerr);
    SynthesisRequest request;
    request.topology = &topology;
    if (sketch) {
      request.sketch = *sketch;
      request.has_sketch = true;
    }
    request.collective = *collective;
    request.root = opt.root;
    request.size_bytes = costing_size;
    request.time_limit_s = opt.time_limit_s;
    request.budget_units = parseBudget(opt.budget);
    request.protocol = protocol;
    request.method = *method;
    if (tolerance_given) request.forest_tolerance = *opt.tree_tolerance;
    if (pieces_given) request.forest_pieces = *opt.pieces;
    request.sccl_steps = opt.sccl_steps.value_or(0);
    request.sccl_rounds = opt.sccl_rounds.value_or(0);
    request.sccl_chunks = opt.sccl_chunks.value_or(0);
    request.sccl_objective = objective == "bandwidth" ? ScclObjective::kBandwidth : ScclObjective::kLatency;
    if (*method == SynthesisMethod::kForest) {
      request.score = simulatedScore(topology);
      request.score_name = kSimulatedScoreName;
    }
    request.progress = progress.callback();
    Result<SynthesisResult> synthesized = synthesize(request);
    if (!synthesized) {
      if (synthesized.status().code() == StatusCode::kInfeasible) {
        return fail(kUsageError, "infeasible: " + synthesized.status().message());
      }
      return fail(kFailure, synthesized.status().message());
    }
    SynthesisResult& result = *synthesized;
    if (progress.printedAny()) {
      std::cerr << fmt::format("[synth {:.1f}s] done: {} verified\n", progress.elapsedSeconds(), result.algorithm.name);
    }

    // ---- comparison --------------------------------------------------------------------------------------
    std::optional<Comparison> comparison;
    std::vector<std::string> notes;
    if (comparable(*collective)) {
      CompareOptions compare_options;
      compare_options.progress = [&progress](const std::string& line) {
        progress.report({.stage = "comparison", .detail = line});
      };
      Result<Comparison> compared = compareAlgorithm(result.algorithm, topology, *collective, sizes, compare_options);
      if (!compared) return fail(kFailure, "comparison: " + compared.status().message());
      comparison = std::move(*compared);
      recordComparison(*comparison, &result.algorithm.provenance);
    } else {
      notes.push_back(
          fmt::format("{} is not compared: the simulator, NCCL's baselines and the bounds cover "
                      "allgather, reducescatter, allreduce and alltoall",
                      collectiveName(*collective)));
    }
    for (const std::string& n : topology.notes) notes.push_back("topology: " + n);

    // ---- outputs -----------------------------------------------------------------------------------------
    // All or nothing: the algorithm and the report are rendered and checked (the algorithm against the 256 MiB
    // Braid reads back) before either is written; a report that then fails to be written takes the algorithm file
    // this run created with it.
    SynthReport report;
    report.topology = &topology;
    report.collective = *collective;
    report.result = &result;
    report.comparison = comparison ? &*comparison : nullptr;
    report.sketch_given = sketch.has_value();
    report.time_limit_s = opt.time_limit_s;
    report.command_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - command_start).count();
    report.peak_rss_bytes = peakRssBytes();
    report.output = opt.out;
    report.output_format = format;
    report.notes = notes;
    const bool json_to_stdout = opt.json == "-";
    std::string algorithm_text;
    if (!opt.out.empty()) {
      Result<std::string> rendered =
          renderAlgorithmFile(opt.out, result.algorithm,
                              format == "json" ? AlgorithmFileFormat::kBraidJson : AlgorithmFileFormat::kMscclXml);
      if (!rendered) return fail(kFailure, rendered.status().message());
      algorithm_text = std::move(*rendered);
    }
    const std::string report_text = opt.json.empty() ? std::string() : dumpJson(synthReportJson(report), 2) + "\n";
    if (!opt.out.empty()) {
      std::error_code ec;
      const bool existed = std::filesystem::exists(opt.out, ec);
      Status written = writeFileAtomic(opt.out, algorithm_text);
      if (!written) return fail(kFailure, written.message());
      if (!opt.json.empty() && !json_to_stdout) {
        Status reported = writeFileAtomic(opt.json, report_text);
        if (!reported) {
          if (!existed && std::filesystem::is_regular_file(opt.out, ec)) std::filesystem::remove(opt.out, ec);
          return fail(kFailure, reported.message() + (existed ? "" : fmt::format("; {} removed", opt.out)));
        }
      }
    } else if (!opt.json.empty() && !json_to_stdout) {
      Status reported = writeFileAtomic(opt.json, report_text);
      if (!reported) return fail(kFailure, reported.message());
    }
    if (json_to_stdout) std::cout << report_text;
    if (!json_to_stdout) {
      std::string out = summaryHeader(result, topology, *collective, sketch.has_value());
      out += fmt::format(
          "# wall time: synthesis {:.2f} s of the command's {:.2f} s (loading, synthesis, comparison); "
          "peak memory {:.1f} MiB\n",
          result.seconds, report.command_seconds, report.peak_rss_bytes / 1048576.0);
      out += "#\n# stages\n" + stageTable(result.stages);
      if (comparison) {
        out +=
            "#\n# simulated (Braid's simulator, float, out-of-place; vs = NCCL time / Braid time; Braid/cut and "
            "Braid/routed = Braid time / that bound)\n";
        for (const std::string& line : boundLegend(*collective)) out += "# " + line + "\n";
        out += comparisonTable({{"", &*comparison}}, false);
      }
      for (const std::string& n : notes) out += "# note: " + n + "\n";
      for (const std::string& n : result.notes) out += "# note: " + n + "\n";
      if (comparison) {
        for (const std::string& n : comparison->notes) out += "# note: " + n + "\n";
        for (const SizeComparison& s : comparison->sizes) {
          for (const std::string& n : s.notes) out += fmt::format("# note: {}: {}\n", bytesText(s.size_bytes), n);
        }
      }
      if (!opt.out.empty())
        out += fmt::format("# wrote {} ({})\n", opt.out, format == "json" ? "Braid JSON" : "MSCCL XML");
      if (!opt.json.empty()) out += fmt::format("# report {}\n", opt.json);
      std::cout << out;
    }
    std::cout.flush();
    if (!std::cout) return fail(kFailure, "cannot write to standard output");
    return 0;
  } catch (const CmdError& e) {
    return fail(e.code(), e.message());
  }
}

}  // namespace

void registerSynthCommand(CLI::App& app, int* exit_code) {
  auto opt = std::make_shared<SynthCmdOptions>();
  CLI::App* cmd = app.add_subcommand(
      "synth",
      "Synthesize a collective algorithm for a topology (sketch-guided, TACCL-style on Z3), verify it, compare it "
      "with NCCL and the lower bound in the simulator, write MSCCL XML / Braid JSON and a JSON report");
  cmd->add_option("--topology,-t", opt->topology,
                  "topology file (Braid YAML, NCCL XML, nvidia-smi matrix, TACCL profile JSON) or shipped name")
      ->required();
  cmd->add_option("--sketch,-s", opt->sketch,
                  "communication sketch: Braid YAML or TACCL JSON (default: derived from the topology)");
  cmd->add_option("--coll,-c", opt->coll, "allgather | reducescatter | allreduce | alltoall | broadcast | reduce")
      ->required();
  cmd->add_option("--size", opt->size,
                  "nccl-tests size the link costs are taken at (1K, 8M, bytes; default: the sketch's, else 1 MiB per "
                  "chunk)");
  cmd->add_option("--time-limit", opt->time_limit_s,
                  "wall-clock limit, seconds; a stage it ends early makes the result machine-dependent (said in a "
                  "note and in --json's clock_cuts)")
      ->capture_default_str();
  cmd->add_option("--budget", opt->budget,
                  "the solvers' budget in Z3 resource units: the same algorithm on any machine and under any load "
                  "(default: 1,000,000 per second of --time-limit)");
  cmd->add_option("-o,--output", opt->out, "write the algorithm: .json = Braid JSON, otherwise MSCCL XML")
      ->check(outputPathCheck());
  cmd->add_option("--format", opt->format, "xml | json: format of -o (default: by extension)");
  cmd->add_option("--json", opt->json, "write the JSON report here ('-' = standard output, replacing the summary)")
      ->check(outputPathCheck());
  cmd->add_option("--root", opt->root, "root rank of broadcast / reduce")->capture_default_str();
  cmd->add_option("--method", opt->method,
                  "taccl (default: sketch-guided, Z3) | forest (optimal tree packing in the route model: allgather, "
                  "reducescatter, allreduce; the max-concurrent flow: alltoall up to 32 GPUs) | sccl (SCCL's "
                  "least-steps k-synchronous search on Z3: allgather, reducescatter, allreduce)");
  cmd->add_option("--sccl-steps", opt->sccl_steps, "sccl: steps (1..16; default: the fewest, searched)");
  cmd->add_option("--sccl-rounds", opt->sccl_rounds,
                  "sccl: rounds in all (steps..64; default: the fewest for the steps, searched)");
  cmd->add_option("--sccl-chunks", opt->sccl_chunks,
                  "sccl: chunks per rank (1..32; default: 1 for latency, 1..8 searched for bandwidth)");
  cmd->add_option(
      "--sccl-objective", opt->sccl_objective,
      "sccl: latency (default: fewest steps, then rounds) | bandwidth (least rounds per chunk, then steps)");
  cmd->add_option("--tree-tolerance", opt->tree_tolerance,
                  "forest: use the fewest trees per root whose rate is within this fraction of the optimum (0 = best; "
                  "default: 0.03 and 0.1 both built, the simulator keeps the faster)");
  cmd->add_option("--pieces", opt->pieces,
                  "forest: pieces per tree, pipelined down it (1..64; default: 1, 2, 4, 8, 16 and 32 built, the "
                  "simulator keeps the fastest at the costing size); alltoall: pieces per block");
  cmd->add_option("--protocol,--proto", opt->protocol, "Simple | LL | LL128 (default Simple)");
  cmd->add_option("--sizes", opt->sizes,
                  "comma-separated nccl-tests sizes the comparison simulates; FROM:TO[:FACTOR] (e.g. 1K:1G, factor "
                  "4) builds the collective's Pareto set instead: every method and protocol, NCCL's windows marked, "
                  "-o DIR gets one MSCCL XML per Braid window")
      ->capture_default_str();
  cmd->add_option("--min-speedup", opt->min_speedup,
                  fmt::format("with --sizes FROM:TO: Braid takes a size from NCCL only where NCCL's choice is "
                              "predicted to take at least this x Braid's time (1..1000; default {}: 1 + the "
                              "simulator's worst validated error on NCCL's point-to-point programs; 1 = every size "
                              "where Braid is predicted at least as fast)",
                              defaultParetoMinSpeedup()));
  cmd->callback([opt, exit_code]() { *exit_code = runSynth(*opt); });
}

}  // namespace braid::cli
