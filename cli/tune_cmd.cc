// `braid tune -t <topology> [--ranks N] [-o rules.conf] [--max-sim-bytes 1G]`: the NCCL tuner plugin's table
// for a machine (runtime/nccl/tuner/model.h, docs/nccl.md "Tuner plugin"), printed per collective and grid size
// (the algorithm/protocol Braid predicts fastest among those NCCL's model enables, its µs and where the value comes
// from), and written as rules in NCCL's example-tuner CSV format (runtime/nccl/tuner/rules.h): one rule per run of
// grid sizes with the same choice, for the topology's node and rank counts. Deriving rules from measured nccl-tests
// logs is not implemented.
#include <fmt/format.h>

#include <cstdint>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "braid/file_io.h"
#include "braid/topology.h"
#include "cli/commands.h"
#include "common/text.h"
#include "tuner/model.h"
#include "tuner/rules.h"

namespace braid::cli {
namespace {

constexpr int kUsageError = 2;
constexpr int kFailure = 1;

struct TuneOptions {
  std::string topology;
  int ranks = 0;
  std::string output;
  std::string max_sim_bytes = "1G";
};

// The fastest modelled entry of `func` at `bytes`: {algo, proto, µs}; algo -1 when none is modelled.
struct Choice {
  int algo = -1;
  int proto = -1;
  double us = 0;
};

Choice fastest(const nccl_plugin::TunerModel& model, int func, uint64_t bytes) {
  Choice best;
  for (int a = 0; a < nccl_abi::kNumAlgorithms; ++a) {
    for (int p = 0; p < nccl_abi::kNumProtocols; ++p) {
      const auto us = model.timeUs(func, a, p, bytes);
      if (us && (best.algo < 0 || *us < best.us)) best = {a, p, *us};
    }
  }
  return best;
}

// One rule per run of grid sizes with the same choice: the choice at grid size g[i] covers (g[i-1], g[i]]; the first
// run starts at 0, the last ends at the largest nBytes.
std::vector<nccl_plugin::TunerRule> rulesFromModel(const nccl_plugin::TunerModel& model,
                                                   const std::vector<uint64_t>& grid) {
  std::vector<nccl_plugin::TunerRule> rules;
  for (int func = 0; func < nccl_abi::kNumFuncs; ++func) {
    uint64_t lo = 0;
    for (size_t i = 0; i < grid.size(); ++i) {
      const Choice c = fastest(model, func, grid[i]);
      const bool last = i + 1 == grid.size();
      const Choice next = last ? Choice{} : fastest(model, func, grid[i + 1]);
      if (!last && next.algo == c.algo && next.proto == c.proto) continue;
      if (c.algo >= 0) {
        nccl_plugin::TunerRule r;
        r.func = func;
        r.min_bytes = lo;
        r.max_bytes = last ? std::numeric_limits<uint64_t>::max() : grid[i];
        r.algo = c.algo;
        r.proto = c.proto;
        r.nodes = model.nodes();
        r.ranks = model.ranks();
        rules.push_back(r);
      }
      lo = grid[i] + 1;
    }
  }
  return rules;
}

int runTune(const TuneOptions& opt) {
  Result<Topology> topology = loadTopologyOrShipped(opt.topology);
  if (!topology) {
    std::cerr << "braid tune: " << topology.status().toString() << "\n";
    return kFailure;
  }
  if (opt.ranks != 0 && opt.ranks != topology->numGpus()) {
    std::cerr << fmt::format("braid tune: --ranks {}: topology {} has {} GPUs (the tuner models whole machines)\n",
                             opt.ranks, topology->name, topology->numGpus());
    return kUsageError;
  }
  nccl_plugin::TunerModelOptions options;
  const auto max_bytes = parseNcclTestsSize(opt.max_sim_bytes);
  if (!max_bytes || *max_bytes == 0) {
    std::cerr << "braid tune: --max-sim-bytes " << opt.max_sim_bytes << ": not a size (bytes, K/M/G suffix)\n";
    return kUsageError;
  }
  if (*max_bytes < nccl_plugin::kMinSimulatedBytes) {
    std::cerr << fmt::format(
        "braid tune: --max-sim-bytes {}: at least {} (1M): smaller limits extrapolate large "
        "sizes from latency-bound points\n",
        opt.max_sim_bytes, nccl_plugin::kMinSimulatedBytes);
    return kUsageError;
  }
  options.max_simulated_bytes = *max_bytes;
  Result<nccl_plugin::TunerModel> model = nccl_plugin::TunerModel::build(*topology, options);
  if (!model) {
    std::cerr << "braid tune: " << model.status().toString() << "\n";
    return kFailure;
  }
  std::cout << fmt::format("# {}: {} ranks on {} node(s); model built in {:.2f} s ({} simulations)\n", topology->name,
                           model->ranks(), model->nodes(), model->buildSeconds(), model->simulations());
  for (const std::string& note : model->notes()) std::cout << "# " << note << "\n";
  std::cout << fmt::format("{:<14} {:>12} {:<16} {:>12} {}\n", "collective", "nBytes", "choice", "time_us", "source");
  for (int func = 0; func < nccl_abi::kNumFuncs; ++func) {
    for (uint64_t bytes : options.grid) {
      const Choice c = fastest(*model, func, bytes);
      if (c.algo < 0) continue;
      std::cout << fmt::format(
          "{:<14} {:>12} {:<16} {:>12.2f} {}\n", nccl_plugin::ncclFuncName(func), bytes,
          fmt::format("{}/{}", nccl_plugin::ncclAlgoIndexName(c.algo), nccl_plugin::ncclProtoIndexName(c.proto)), c.us,
          nccl_plugin::costSourceName(model->curve(func, c.algo, c.proto).source));
    }
  }
  if (!opt.output.empty()) {
    const std::string text = nccl_plugin::writeTunerRules(
        rulesFromModel(*model, options.grid),
        fmt::format("braid tune -t {}: Braid's fastest algorithm/protocol per size range ({} ranks, {} node(s))",
                    opt.topology, model->ranks(), model->nodes()));
    if (Status written = writeFileAtomic(opt.output, text); !written) {
      std::cerr << "braid tune: " << written.toString() << "\n";
      return kFailure;
    }
    std::cout << "# rules written to " << opt.output << "\n";
  }
  return 0;
}

}  // namespace

void registerTuneCommand(CLI::App& app, int* exit_code) {
  auto opt = std::make_shared<TuneOptions>();
  CLI::App* cmd = app.add_subcommand(
      "tune",
      "The NCCL tuner plugin's predictions for a machine (per collective and size: the fastest NCCL "
      "algorithm/protocol in Braid's model) and, with -o, a rules file in NCCL's example-tuner CSV format");
  cmd->add_option("--topology,-t", opt->topology, "topology file or shipped name (e.g. dgx-h100-x2)")->required();
  cmd->add_option("--ranks", opt->ranks, "rank count; must equal the topology's GPU count (default: that count)");
  cmd->add_option("-o,--output", opt->output, "write the rules file here (BRAID_TUNER_RULES / NCCL_TUNER_CONFIG_FILE)");
  cmd->add_option("--max-sim-bytes", opt->max_sim_bytes,
                  "largest grid size simulated, nccl-tests syntax (default 1G, as BRAID_TUNER_MAX_SIM_BYTES)");
  cmd->callback([opt, exit_code]() { *exit_code = runTune(*opt); });
}

}  // namespace braid::cli
