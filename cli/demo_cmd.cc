// `braid demo`: the README's main job on a bundled default topology (dgx1-v100). It shows the topology,
// synthesizes all-gather, all-reduce and all-to-all for it with sketches derived from the topology
// (include/braid/synthesize.h), each verified, writes them as MSCCL XML (and Braid JSON with provenance), and
// prints one table comparing them in Braid's simulator with NCCL's own choice, NCCL's ring and the lower bound
// (comm/pareto/compare.h).
#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "braid/algorithm.h"
#include "braid/file_io.h"
#include "braid/synthesize.h"
#include "braid/topology.h"
#include "cli/commands.h"
#include "cli/output_path.h"
#include "cli/topology_arg.h"
#include "comm/pareto/compare.h"
#include "report/html_report.h"
#include "report/synth_report.h"

namespace braid::cli {
namespace {

struct DemoOptions {
  std::string topology = "dgx1-v100";
  std::string out_dir = "braid-out";
  double time_limit_s = 30;
};

/// The sizes the table shows: small (latency-bound), medium, large (bandwidth-bound).
const std::vector<uint64_t>& demoSizes() {
  static const std::vector<uint64_t> sizes = {uint64_t{1} << 10, uint64_t{1} << 20, uint64_t{256} << 20};
  return sizes;
}

/// The head of describeTopology: name, counts, nodes and link classes (the route matrices are left out).
std::string briefTopology(const Topology& topology) {
  const std::string full = describeTopology(topology);
  const size_t cut = full.find("\nGPU x GPU");
  return cut == std::string::npos ? full : full.substr(0, cut + 1);
}

/// The collectives the demo synthesizes, in order.
constexpr CollectiveKind kDemoCollectives[] = {CollectiveKind::kAllGather, CollectiveKind::kAllReduce,
                                               CollectiveKind::kAllToAll};

/// DIR/<topology>_<collective>_braid: the demo's output files for one collective, without the .xml / .json suffix.
std::string outputBase(const std::string& out_dir, const std::string& topology, CollectiveKind collective) {
  return (std::filesystem::path(out_dir) / fmt::format("{}_{}_braid", topology, collectiveName(collective))).string();
}

struct Outcome {
  CollectiveKind collective;
  std::optional<SynthesisResult> result;
  std::optional<Comparison> comparison;
};

int runDemo(const DemoOptions& opt) {
  if (std::optional<std::string> error = timeLimitError(opt.time_limit_s)) {
    std::cerr << "braid demo: " << *error << "\n";
    return 2;
  }
  Result<Topology> topo = loadTopologyArgument(opt.topology);
  if (!topo) {
    std::cerr << "braid demo: " << topo.status().message() << "\n";
    return 1;
  }
  // The files the demo writes may not replace the topology it reads, nor may -o (the directory) name it.
  std::vector<PathOption> outputs{{"-o", opt.out_dir}};
  for (CollectiveKind coll : kDemoCollectives) {
    for (const char* suffix : {".xml", ".json"})
      outputs.push_back({"-o", outputBase(opt.out_dir, topo->name, coll) + suffix});
  }
  if (std::optional<std::string> error = samePathError({{"--topology", opt.topology, true}}, outputs)) {
    std::cerr << "braid demo: " << *error << "\n";
    return 2;
  }
  // -o is checked and created before anything is printed.
  std::error_code ec;
  if (std::filesystem::exists(opt.out_dir, ec) && !std::filesystem::is_directory(opt.out_dir, ec)) {
    std::cerr << fmt::format(
        "braid demo: -o {}: exists and is not a directory (-o names the directory the demo "
        "writes its files into)\n",
        opt.out_dir);
    return 1;  // an output that cannot be written, as `synth --sizes ... -o FILE` (docs/cli.md)
  }
  std::filesystem::create_directories(opt.out_dir, ec);
  if (ec) {
    std::cerr << fmt::format("braid demo: cannot create {}: {}\n", opt.out_dir, ec.message());
    return 1;
  }
  // The files it will hold, checked before the first synthesis (a directory that cannot be written into).
  std::vector<std::string> files;
  for (size_t i = 1; i < outputs.size(); ++i) files.push_back(outputs[i].path);
  if (std::optional<std::string> error = outputPathsError(files)) {
    std::cerr << "braid demo: " << *error << "\n";
    return 1;
  }
  std::cout << briefTopology(*topo) << "\n";
  std::cout << fmt::format(
      "Synthesizing all-gather, all-reduce and all-to-all for {} ({} GPUs) with sketches derived from the "
      "topology, at most {:.0f} s of solver time each (progress on stderr after 2 s)\n",
      topo->name, topo->numGpus(), opt.time_limit_s);

  int failures = 0;
  std::vector<Outcome> outcomes;
  for (CollectiveKind coll : kDemoCollectives) {
    Outcome outcome{coll, std::nullopt, std::nullopt};
    const std::string name = collectiveName(coll);
    ProgressPrinter progress(name, std::cerr);
    SynthesisRequest request;
    request.topology = &*topo;
    request.collective = coll;
    request.time_limit_s = opt.time_limit_s;
    request.progress = progress.callback();
    Result<SynthesisResult> synthesized = synthesize(request);
    if (!synthesized) {
      std::cerr << fmt::format("braid demo: {}: {}\n", name, synthesized.status().message());
      ++failures;
      outcomes.push_back(std::move(outcome));
      continue;
    }
    SynthesisResult& result = *synthesized;
    // synthesize() verifies what it returns; the demo checks again, as `braid verify` would.
    VerifyReport verified = verify(result.algorithm);
    if (!verified.ok) {
      std::cerr << fmt::format("braid demo: {} FAILED verification:\n{}\n", result.algorithm.name, verified.toString());
      ++failures;
      outcomes.push_back(std::move(outcome));
      continue;
    }
    Result<Comparison> compared = compareAlgorithm(result.algorithm, *topo, coll, demoSizes());
    if (!compared) {
      std::cerr << fmt::format("braid demo: {}: comparison: {}\n", name, compared.status().message());
      ++failures;
    } else {
      recordComparison(*compared, &result.algorithm.provenance);
      outcome.comparison = std::move(*compared);
    }
    const std::string base = outputBase(opt.out_dir, topo->name, coll);
    const std::string xml = base + ".xml";
    const std::string json = base + ".json";
    Status st = writeAlgorithmFile(xml, result.algorithm, AlgorithmFileFormat::kMscclXml);
    if (st) st = writeAlgorithmFile(json, result.algorithm, AlgorithmFileFormat::kBraidJson);
    if (!st) {
      std::cerr << "braid demo: " << st.message() << "\n";
      ++failures;
    }
    const Algorithm& a = result.algorithm;
    std::cout << fmt::format(
        "{:<10} chunkup {} -> {} chunks, {} channel(s), {} threadblocks, {} steps, synthesized in {:.1f} s  "
        "VERIFIED -> {}\n",
        name, result.sketch.chunkup, a.num_chunks, a.num_channels, a.numThreadblocks(), a.numSteps(), result.seconds,
        xml);
    for (const StageReport& s : result.stages) {
      std::cout << fmt::format("    {:<22} {:>7.2f} s  {}\n", s.name, s.seconds, s.status);
    }
    outcome.result = std::move(result);
    outcomes.push_back(std::move(outcome));
  }

  std::vector<std::pair<std::string, const Comparison*>> blocks;
  for (const Outcome& o : outcomes) {
    if (o.comparison) blocks.emplace_back(collectiveName(o.collective), &*o.comparison);
  }
  if (!blocks.empty()) {
    std::cout << fmt::format(
        "\nSimulated on {} (Braid's simulator; float, out-of-place). NCCL = the algorithm and protocol NCCL's "
        "tuning model picks, simulated (often its ring); NCCL ring = NCCL's ring with its best protocol; vs = NCCL "
        "time / Braid time; Braid/cut and Braid/routed = "
        "Braid time / that bound:\n",
        topo->name);
    const bool any_all_reduce = std::any_of(outcomes.begin(), outcomes.end(), [](const Outcome& o) {
      return o.comparison && o.collective == CollectiveKind::kAllReduce;
    });
    for (const std::string& line :
         boundLegend(any_all_reduce ? CollectiveKind::kAllReduce : CollectiveKind::kAllGather)) {
      std::cout << "  " << line << "\n";
    }
    std::cout << comparisonTable(blocks, true);
    std::vector<std::string> printed;
    auto note = [&](const std::string& text) {
      if (std::find(printed.begin(), printed.end(), text) == printed.end()) printed.push_back(text);
    };
    for (const auto& [label, comparison] : blocks) {
      for (const std::string& n : comparison->notes) note(n);
      for (const SizeComparison& s : comparison->sizes) {
        for (const std::string& n : s.notes) note(fmt::format("{} {}: {}", label, formatSize(s.size_bytes), n));
      }
    }
    for (const std::string& n : printed) std::cout << "  note: " << n << "\n";
  }
  std::cout << (failures == 0
                    ? fmt::format("\nAll {} algorithms VERIFIED; written to {}/\n", outcomes.size(), opt.out_dir)
                    : fmt::format("\n{} of {} collectives FAILED\n", failures, outcomes.size()));
  return failures == 0 ? 0 : 1;
}

}  // namespace

void registerDemoCommand(CLI::App& app, int* exit_code) {
  auto opt = std::make_shared<DemoOptions>();
  CLI::App* cmd = app.add_subcommand(
      "demo",
      "Main job on a bundled topology: synthesize all-gather, all-reduce and all-to-all, verify them, compare them "
      "with NCCL and the lower bound in the simulator, write MSCCL XML");
  cmd->add_option("--topology", opt->topology, "Topology file or shipped name")->capture_default_str();
  cmd->add_option("-o,--out-dir", opt->out_dir, "Directory for the MSCCL XML and Braid JSON files")
      ->capture_default_str()
      ->check(outputPathCheck());
  cmd->add_option("--time-limit", opt->time_limit_s, "Solver time limit per collective, seconds")
      ->capture_default_str();
  cmd->callback([opt, exit_code] { *exit_code = runDemo(*opt); });
}

}  // namespace braid::cli
