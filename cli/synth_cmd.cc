// `braid synth --topology T [--sketch S | --method forest] --coll C [--size BYTES] [--time-limit SECONDS] [-o
// out.xml|out.json]
// [--json report.json]`: sketch-guided synthesis (include/braid/synthesize.h; TACCL, NSDI'23, on Z3), the
// synthesized algorithm compared with NCCL and the lower bound in Braid's simulator (cli/compare.h), the MSCCL XML
// or Braid JSON written, and a JSON report (docs/cli.md "braid synth").
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <exception>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "braid/algorithm.h"
#include "braid/collective.h"
#include "braid/file_io.h"
#include "braid/sketch.h"
#include "braid/synthesize.h"
#include "braid/taccl.h"
#include "braid/topology.h"
#include "cli/commands.h"
#include "common/text.h"
#include "report/compare.h"
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
  std::string out;
  std::string format;
  std::string json;
  int root = 0;
  std::string protocol;
  std::string sizes = "1K,1M,256M";
  std::string method = "taccl";
  std::optional<double> tree_tolerance;  // forest only; default SynthesisRequest's
  std::optional<int> pieces;
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
/// says (loadTacclTopology); anything else as every command loads it (loadTopologyOrShipped).
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
    Result<Topology> topology = loadTacclTopology(opt.topology, taccl);
    if (!topology) throw CmdError(kFailure, topology.status().message());
    return std::move(*topology);
  }
  Result<Topology> topology = loadTopologyOrShipped(opt.topology);
  if (!topology) throw CmdError(kFailure, topology.status().message());
  return std::move(*topology);
}

std::string summaryHeader(const SynthesisResult& result, const Topology& topology, CollectiveKind collective,
                          bool sketch_given) {
  const Algorithm& a = result.algorithm;
  const std::string how =
      result.method == SynthesisMethod::kForest
          ? std::string("method forest (tree packing, no sketch)")
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

int runSynth(const SynthCmdOptions& opt) {
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
    if (!(opt.time_limit_s > 0)) {
      return fail(kUsageError, fmt::format("--time-limit: {} must be a positive number of seconds", opt.time_limit_s));
    }
    const std::optional<SynthesisMethod> method = parseSynthesisMethod(lower(opt.method));
    if (!method) return fail(kUsageError, fmt::format("--method: '{}' is not taccl or forest", opt.method));
    const bool tolerance_given = opt.tree_tolerance.has_value(), pieces_given = opt.pieces.has_value();
    if ((tolerance_given || pieces_given) && *method != SynthesisMethod::kForest) {
      return fail(kUsageError,
                  fmt::format("{} applies to --method forest only", pieces_given ? "--pieces" : "--tree-tolerance"));
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

    // Output destinations are checked before any work: a missing directory fails now, not after synthesis.
    if (opt.out == "-") return fail(kUsageError, "-o -: write the algorithm to a file (--json - prints the report)");
    for (const std::string& path : {opt.out, opt.json == "-" ? std::string() : opt.json}) {
      if (path.empty()) continue;
      const std::filesystem::path parent = std::filesystem::path(path).parent_path();
      std::error_code ec;
      if (!parent.empty() && !std::filesystem::is_directory(parent, ec)) {
        return fail(kFailure, fmt::format("cannot write {}: directory {} does not exist", path, parent.string()));
      }
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
    request.protocol = protocol;
    request.method = *method;
    if (tolerance_given) request.forest_tolerance = *opt.tree_tolerance;
    if (pieces_given) request.forest_pieces = *opt.pieces;
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
      Result<Comparison> compared = compareAlgorithm(result.algorithm, topology, *collective, sizes);
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
    // The report file is written first and the algorithm last, so a failing report leaves no algorithm behind
    // (each file is written whole or not at all).
    SynthReport report;
    report.topology = &topology;
    report.collective = *collective;
    report.result = &result;
    report.comparison = comparison ? &*comparison : nullptr;
    report.sketch_given = sketch.has_value();
    report.time_limit_s = opt.time_limit_s;
    report.output = opt.out;
    report.output_format = format;
    report.notes = notes;
    const bool json_to_stdout = opt.json == "-";
    if (!opt.json.empty()) {
      const std::string text = dumpJson(synthReportJson(report), 2) + "\n";
      if (json_to_stdout) {
        std::cout << text;
      } else {
        Status written = writeFileAtomic(opt.json, text);
        if (!written) return fail(kFailure, written.message());
      }
    }
    if (!opt.out.empty()) {
      const std::string text =
          format == "json" ? writeAlgorithmJson(result.algorithm) : writeMscclXml(result.algorithm);
      Status written = writeFileAtomic(opt.out, text);
      if (!written) return fail(kFailure, written.message());
    }
    if (!json_to_stdout) {
      std::string out = summaryHeader(result, topology, *collective, sketch.has_value());
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
          for (const std::string& n : s.notes) out += fmt::format("# note: {} bytes: {}\n", s.size_bytes, n);
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
  cmd->add_option("--time-limit", opt->time_limit_s, "wall-clock budget for the solvers, seconds")
      ->capture_default_str();
  cmd->add_option("-o,--output", opt->out, "write the algorithm: .json = Braid JSON, otherwise MSCCL XML");
  cmd->add_option("--format", opt->format, "xml | json: format of -o (default: by extension)");
  cmd->add_option("--json", opt->json, "write the JSON report here ('-' = standard output, replacing the summary)");
  cmd->add_option("--root", opt->root, "root rank of broadcast / reduce")->capture_default_str();
  cmd->add_option("--method", opt->method,
                  "taccl (sketch-guided, Z3) | forest (optimal tree packing in the route model; allgather, "
                  "reducescatter, allreduce)")
      ->capture_default_str();
  cmd->add_option("--tree-tolerance", opt->tree_tolerance,
                  "forest: use the fewest trees per root whose rate is within this fraction of the optimum (0 = best; "
                  "default: 0.03 and 0.1 both built, the simulator keeps the faster)");
  cmd->add_option("--pieces", opt->pieces,
                  "forest: pieces per tree, pipelined down it (1..64; default: 1, 2, 4, 8, 16 and 32 built, the "
                  "simulator keeps the fastest at the costing size)");
  cmd->add_option("--protocol,--proto", opt->protocol, "Simple | LL | LL128 (default Simple)");
  cmd->add_option("--sizes", opt->sizes, "comma-separated nccl-tests sizes the comparison simulates")
      ->capture_default_str();
  cmd->callback([opt, exit_code]() { *exit_code = runSynth(*opt); });
}

}  // namespace braid::cli
