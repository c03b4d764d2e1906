// `braid tune -t <topology> [--ranks N] [-o rules.conf] [--max-sim-bytes 1G] [--policy validated|model]`: the NCCL
// tuner plugin's decisions for a machine (runtime/nccl/tuner/model.h, accuracy.h; docs/nccl.md "Tuner plugin"),
// printed per collective and grid size (NCCL's choice, Braid's candidate, their predicted µs, whether the tuner
// overrides NCCL and why), and written as rules in NCCL's example-tuner CSV format (runtime/nccl/tuner/rules.h): one
// rule per run of grid sizes overridden with the same entry, for the topology's node and rank counts.
// `braid tune --nccl-tests-log FILE[=ALGO/PROTO|=default] ... [-o rules.conf]`: the same from nccl-tests logs
// measured on the cluster, one per NCCL_ALGO/NCCL_PROTO setting (runtime/nccl/tuner/measured.h): the fastest
// measured setting per size, compared with the runner-up and with NCCL's own choice when a log of it is given.
#include <fmt/format.h>

#include <cstdint>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "braid/collective.h"
#include "braid/file_io.h"
#include "braid/nccl_tests_log.h"
#include "braid/topology.h"
#include "cli/commands.h"
#include "cli/output_path.h"
#include "cli/topology_arg.h"
#include "common/env.h"
#include "common/text.h"
#include "tuner/accuracy.h"
#include "tuner/measured.h"
#include "tuner/model.h"
#include "tuner/rules.h"

namespace braid::cli {
namespace {

constexpr int kUsageError = 2;
constexpr int kFailure = 1;

struct TuneOptions {
  std::string topology;
  int ranks = 0;
  int nodes = 0;
  std::string output;
  std::string max_sim_bytes = "1G";
  std::vector<std::string> logs;  // --nccl-tests-log specs
  std::string collective;         // --coll: the collective of logs that do not say (parseCollective's names)
  std::string policy;             // --policy: BRAID_TUNER's values but off; empty: BRAID_TUNER, else validated
};

// The tuner policy of the modelled table and where it came from ("--policy", "BRAID_TUNER" or "default").
struct PolicyChoice {
  nccl_plugin::TunerPolicy policy = nccl_plugin::TunerPolicy::kValidated;
  std::string source;
};

// --policy, else BRAID_TUNER (the plugin's variable, read through the env registry), else the registry's default.
// `off` is refused from either: the plugin then leaves NCCL's choices alone, so there is no table to tune.
// nullopt (after the message on stderr) for off or a value that is not a policy.
std::optional<PolicyChoice> choosePolicy(const TuneOptions& opt) {
  PolicyChoice choice;
  std::string text = opt.policy;
  std::string named = "--policy " + opt.policy;
  choice.source = "--policy";
  if (opt.policy.empty()) {
    choice.source = envIsSet("BRAID_TUNER") ? "BRAID_TUNER" : "default";
    text = envString("BRAID_TUNER");
    named = "BRAID_TUNER=" + text;
  }
  const std::optional<nccl_plugin::TunerPolicy> policy = nccl_plugin::parseTunerPolicy(text);
  if (!policy) {
    std::cerr << fmt::format("braid tune: {}: not a tuner policy: expected validated or model{}\n", named,
                             opt.policy.empty() ? " (or pass --policy, which overrides BRAID_TUNER)" : "");
    return std::nullopt;
  }
  if (*policy == nccl_plugin::TunerPolicy::kOff) {
    std::cerr << fmt::format(
        "braid tune: {}: with off the tuner plugin leaves NCCL's algorithm/protocol choices alone (no model, no "
        "rules), so there is nothing to tune: expected validated or model{}\n",
        named, opt.policy.empty() ? " (or pass --policy, which overrides BRAID_TUNER)" : "");
    return std::nullopt;
  }
  choice.policy = *policy;
  return choice;
}

// The decision at one grid size: NCCL's choice as Braid's emulation of NCCL's model predicts it
// (TunerModel::ncclTimeUs), Braid's candidate, and whether the tuner overrides (tuner/accuracy.h).
nccl_plugin::TunerDecision decisionAt(const nccl_plugin::TunerModel& model, int func, uint64_t bytes,
                                      nccl_plugin::TunerPolicy policy) {
  nccl_plugin::NcclCostTable table;
  table.fill(-1.0);
  for (int a = 0; a < nccl_abi::kNumAlgorithms; ++a) {
    for (int p = 0; p < nccl_abi::kNumProtocols; ++p) {
      if (const auto us = model.ncclTimeUs(func, a, p, bytes)) table[a * nccl_abi::kNumProtocols + p] = *us;
    }
  }
  return nccl_plugin::decideOverride(model, func, bytes, table, policy);
}

// One rule per run of grid sizes g[i] .. g[j] where the tuner overrides NCCL with the same entry. The run's window
// reaches out to the geometric midpoints with the neighbouring grid sizes (geometricHandOver, where measured rules
// hand over too) when the decision at that midpoint is the same override (or, with --policy model, NCCL's own choice
// there is already that entry): inside one grid interval every entry's
// curve is linear in bytes, so the fastest entry, the validated band and the advantage cannot change and change back
// between the midpoint and the grid size. Otherwise the window stops at the grid size. The first run starts at 0, the
// last ends at the largest nBytes. Sizes where NCCL's choice stands get no rule.
std::vector<nccl_plugin::TunerRule> rulesFromModel(const nccl_plugin::TunerModel& model,
                                                   const std::vector<uint64_t>& grid, nccl_plugin::TunerPolicy policy) {
  std::vector<nccl_plugin::TunerRule> rules;
  for (int func = 0; func < nccl_abi::kNumFuncs; ++func) {
    std::vector<int> entry(grid.size(), -1);  // the overriding entry per grid size, -1: NCCL's choice stands
    for (size_t i = 0; i < grid.size(); ++i) {
      const nccl_plugin::TunerDecision d = decisionAt(model, func, grid[i], policy);
      if (d.override_nccl) entry[i] = d.candidate;
    }
    auto same_at = [&](uint64_t bytes, int want) {
      const nccl_plugin::TunerDecision d = decisionAt(model, func, bytes, policy);
      if (d.override_nccl) return d.candidate == want;
      // --policy model overrides wherever Braid's candidate differs from NCCL's choice: where both are the rule's
      // entry, forcing it changes nothing, and between there and the run the candidate stays that entry.
      return policy == nccl_plugin::TunerPolicy::kModel && d.nccl == want && d.candidate == want;
    };
    for (size_t i = 0; i < grid.size(); ++i) {
      if (entry[i] < 0) continue;
      size_t j = i;
      while (j + 1 < grid.size() && entry[j + 1] == entry[i]) ++j;
      nccl_plugin::TunerRule r;
      r.func = func;
      r.min_bytes = grid[i];
      if (i == 0) {
        r.min_bytes = 0;
      } else if (const uint64_t from = nccl_plugin::geometricHandOver(grid[i - 1], grid[i]) + 1;
                 from < grid[i] && same_at(from, entry[i])) {
        r.min_bytes = from;
      }
      r.max_bytes = grid[j];
      if (j + 1 == grid.size()) {
        r.max_bytes = std::numeric_limits<uint64_t>::max();
      } else if (const uint64_t to = nccl_plugin::geometricHandOver(grid[j], grid[j + 1]);
                 to > grid[j] && same_at(to, entry[i])) {
        r.max_bytes = to;
      }
      r.algo = entry[i] / nccl_abi::kNumProtocols;
      r.proto = entry[i] % nccl_abi::kNumProtocols;
      r.nodes = model.nodes();
      r.ranks = model.ranks();
      rules.push_back(r);
      i = j;
    }
  }
  return rules;
}

// Writes `rules` with `comment` to `path` (whole or not at all), then prints `table` and the rules line; without
// `path`, prints `table` alone. On a failed write nothing goes to stdout. 0 or kFailure.
int writeRulesAndPrint(const std::string& path, const std::vector<nccl_plugin::TunerRule>& rules,
                       const std::string& comment, const std::string& table) {
  if (!path.empty()) {
    if (Status written = writeFileAtomic(path, nccl_plugin::writeTunerRules(rules, comment)); !written) {
      std::cerr << "braid tune: " << written.message() << "\n";
      return kFailure;
    }
  }
  std::cout << table;
  if (!path.empty()) std::cout << "# " << rules.size() << " rules written to " << path << "\n";
  return 0;
}

// An -o that cannot be written (checkOutputPath) fails before the logs are read or the model is built.
bool outputDirectoryOk(const TuneOptions& opt) {
  if (opt.output.empty()) return true;
  if (std::optional<std::string> error = outputPathsError({opt.output})) {
    std::cerr << "braid tune: " << *error << "\n";
    return false;
  }
  return true;
}

std::string fromLogsCommand(const std::vector<nccl_plugin::MeasuredLog>& logs) {
  std::string out = "braid tune";
  for (const auto& m : logs) out += " --nccl-tests-log " + m.path + "=" + (m.nccl_default ? "default" : m.label());
  return out;
}

// --coll: parseCollective's names; nullopt when not given; kUsageError in *exit for an unknown name.
std::optional<CollectiveKind> parseCollOption(const TuneOptions& opt, int* exit) {
  if (opt.collective.empty()) return std::nullopt;
  const std::optional<CollectiveKind> collective = parseCollective(opt.collective);
  if (!collective || *collective == CollectiveKind::kCustom) {
    std::cerr << fmt::format(
        "braid tune: --coll: unknown collective '{}': expected allreduce, allgather, reducescatter, broadcast or "
        "reduce (or NCCL's all_reduce, all_gather, reduce_scatter)\n",
        opt.collective);
    *exit = kUsageError;
  }
  return collective;
}

// The measured table: one header line per log, then per collective and size the choice, runner-up and speedup.
std::string measuredTableText(const std::vector<nccl_plugin::MeasuredLog>& logs,
                              const nccl_plugin::MeasuredTable& table) {
  std::string out;
  for (const nccl_plugin::MeasuredLog& m : logs) {
    out += fmt::format("# {}: {} {}, {} sizes, {} ranks on {} host(s){}\n", m.path, m.log.collective, m.label(),
                       m.log.rows.size(), m.log.ranks > 0 ? std::to_string(m.log.ranks) : "?",
                       m.log.nodes > 0 ? std::to_string(m.log.nodes) : "?",
                       m.log.nccl_version.empty() ? "" : ", NCCL " + m.log.nccl_version);
  }
  out += fmt::format("{:<14} {:>12} {:<16} {:>11} {:<16} {:>11} {:>9} {:>11} {:>9}\n", "collective", "nBytes", "choice",
                     "time_us", "runner-up", "time_us", "margin", "nccl_us", "speedup");
  for (const nccl_plugin::MeasuredChoice& c : table.choices) {
    const std::string choice = c.algo < 0 ? "NCCL default"
                                          : fmt::format("{}/{}", nccl_plugin::ncclAlgoIndexName(c.algo),
                                                        nccl_plugin::ncclProtoIndexName(c.proto));
    const std::string runner = c.runner_up.empty() ? "-" : c.runner_up;
    const std::string runner_us = c.runner_up.empty() ? "-" : fmt::format("{:.2f}", c.runner_up_us);
    const std::string margin = c.runner_up.empty() ? "-" : fmt::format("{:.3f}x", c.runner_up_us / c.us);
    const std::string nccl_us = c.default_us ? fmt::format("{:.2f}", *c.default_us) : "-";
    const std::string speedup = c.default_us && c.algo >= 0 ? fmt::format("{:.3f}x", *c.default_us / c.us) : "-";
    out += fmt::format("{:<14} {:>12} {:<16} {:>11.2f} {:<16} {:>11} {:>9} {:>11} {:>9}\n",
                       nccl_plugin::ncclFuncName(c.func), c.bytes, choice, c.us, runner, runner_us, margin, nccl_us,
                       speedup);
  }
  out +=
      "# margin: runner-up time / chosen time; speedup: NCCL's own choice (a =default log) / chosen; "
      "sizes where NCCL's own choice was measured as fast get no rule\n";
  return out;
}

// `braid tune --nccl-tests-log ...`: the measured table and its rules. Every log is read and the table built
// before anything is printed.
int runTuneFromLogs(const TuneOptions& opt) {
  // 0 means "from the logs"; a negative count is no count.
  for (const auto& [name, value] : {std::pair<const char*, int>{"--ranks", opt.ranks}, {"--nodes", opt.nodes}}) {
    if (value < 0) {
      std::cerr << fmt::format("braid tune: {} {}: a count is at least 1\n", name, value);
      return kUsageError;
    }
  }
  int exit = 0;
  const std::optional<CollectiveKind> collective = parseCollOption(opt, &exit);
  if (exit != 0) return exit;
  if (!outputDirectoryOk(opt)) return kFailure;
  std::vector<nccl_plugin::MeasuredLog> logs;
  for (const std::string& spec : opt.logs) {
    Result<nccl_plugin::MeasuredLog> m = nccl_plugin::readMeasuredLog(spec, collective);
    if (!m) {
      // kInvalidArgument: what the command line says of the log (its label, the collective); a file that cannot be
      // read or parsed is an input error.
      std::cerr << "braid tune: " << m.status().message() << "\n";
      return m.status().code() == StatusCode::kInvalidArgument ? kUsageError : kFailure;
    }
    logs.push_back(std::move(*m));
  }
  // The logs must come from one machine: each log's device list ("# Rank N ... on HOST device D [BUS] NAME") against
  // the first log that has one. Different GPU models cannot be compared (status 2); other hosts or other PCI buses
  // for a rank may be the same machine type, so they are warned about once the table is built.
  std::vector<std::string> warnings;
  const nccl_plugin::MeasuredLog* reference = nullptr;
  for (const nccl_plugin::MeasuredLog& m : logs) {
    if (m.log.rank_lines.empty()) continue;
    if (reference == nullptr) {
      reference = &m;
      continue;
    }
    const RankTableDifferences d = compareRankTables(reference->log, reference->path, m.log, m.path);
    if (!d.devices.empty()) {
      std::cerr << "braid tune: the logs ran on different GPUs: " << d.devices
                << ": measurements of different machines cannot be compared; measure every setting on one "
                   "machine\n";
      return kUsageError;
    }
    if (!d.hosts.empty()) {
      warnings.push_back(d.hosts + ": the rules compare runs of different hosts as one machine");
    }
    if (!d.bus_ids.empty()) {
      warnings.push_back(d.bus_ids + ": the ranks sit on other GPUs (another machine or device order)");
    }
  }
  Result<nccl_plugin::MeasuredTable> table =
      nccl_plugin::rulesFromMeasurements(logs, opt.ranks > 0 ? opt.ranks : -1, opt.nodes > 0 ? opt.nodes : -1);
  if (!table) {
    std::cerr << "braid tune: " << table.status().message() << "\n";
    return kUsageError;
  }
  for (const std::string& w : warnings) std::cerr << "braid tune: warning: " << w << "\n";
  if (envIsSet("BRAID_TUNER") &&
      nccl_plugin::parseTunerPolicy(envString("BRAID_TUNER")) == nccl_plugin::TunerPolicy::kOff) {
    std::cerr << "braid tune: warning: BRAID_TUNER=" << envString("BRAID_TUNER")
              << " is set here: a tuner plugin run with it changes nothing and reads no rules file; unset it (or set "
                 "validated) where these rules should apply\n";
  }
  std::set<std::string> settings;
  for (const auto& m : logs) settings.insert(m.nccl_default ? "default" : m.label());
  if (settings.size() == 1) {
    // NCCL's default run pins nothing (NCCL keeps choosing): the file then holds no rule.
    const bool only_default = *settings.begin() == "default";
    std::cerr << "braid tune: warning: every log measures one setting (" << *settings.begin() << "): "
              << (only_default ? "NCCL's own choice, which a rule cannot pin, so the rules file holds no rule"
                               : "the rules pin it at every size with nothing compared")
              << "; give one log per NCCL_ALGO/NCCL_PROTO setting (and NCCL's default run) to choose between them\n";
  }
  return writeRulesAndPrint(
      opt.output, table->rules,
      fmt::format("{}\nfastest measured NCCL algorithm/protocol per size range ({} ranks, {} node(s))",
                  fromLogsCommand(logs), table->ranks, table->nodes),
      measuredTableText(logs, *table));
}

// The modelled table: the model's header and notes, then per collective and grid size NCCL's choice, Braid's
// candidate and the decision with its reason.
std::string modelTableText(const Topology& topology, const nccl_plugin::TunerModel& model,
                           const std::vector<uint64_t>& grid, const PolicyChoice& choice, int* overrides) {
  const nccl_plugin::TunerPolicy policy = choice.policy;
  std::string out = fmt::format("# {}: {} ranks on {} node(s); model built in {:.2f} s ({} simulations)\n",
                                topology.name, model.ranks(), model.nodes(), model.buildSeconds(), model.simulations());
  for (const std::string& note : model.notes()) out += "# " + note + "\n";
  out += fmt::format("{:<14} {:>12} {:<16} {:>10} {:<16} {:>10} {:<10} {:>9} {:<8} {}\n", "collective", "nBytes",
                     "nccl", "nccl_us", "candidate", "braid_us", "source", "advantage", "decision", "why");
  *overrides = 0;
  for (int func = 0; func < nccl_abi::kNumFuncs; ++func) {
    for (uint64_t bytes : grid) {
      const nccl_plugin::TunerDecision d = decisionAt(model, func, bytes, policy);
      if (d.nccl < 0) continue;
      const int algo = d.candidate / nccl_abi::kNumProtocols;
      const int proto = d.candidate % nccl_abi::kNumProtocols;
      *overrides += d.override_nccl ? 1 : 0;
      out += fmt::format("{:<14} {:>12} {:<16} {:>10} {:<16} {:>10.2f} {:<10} {:>9} {:<8} {}\n",
                         nccl_plugin::ncclFuncName(func), bytes, nccl_plugin::entryName(d.nccl),
                         d.nccl_us ? fmt::format("{:.2f}", *d.nccl_us) : std::string("-"),
                         nccl_plugin::entryName(d.candidate), d.candidate_us,
                         nccl_plugin::costSourceName(model.sourceAt(func, algo, proto, bytes)),
                         d.advantage > 0 ? fmt::format("{:.3f}x", d.advantage) : std::string("-"),
                         d.override_nccl ? "override" : "keep", d.why);
    }
  }
  out += fmt::format(
      "# nccl: NCCL's choice in Braid's emulation of NCCL 2.28's model (ncclPredict); nccl_us, braid_us: Braid's "
      "predictions; advantage = nccl_us / braid_us; policy {} ({}); {} override(s); sizes kept get no rule\n",
      nccl_plugin::tunerPolicyName(policy), choice.source, *overrides);
  return out;
}

int runTune(const TuneOptions& opt) {
  // The rules file may replace no input: the topology or a log (FILE of FILE=ALGO/PROTO; a name that exists in
  // neither spelling is skipped).
  std::vector<PathOption> inputs{{"--topology", opt.topology, true}};
  for (const std::string& spec : opt.logs) {
    inputs.push_back({"--nccl-tests-log", spec});
    if (const size_t eq = spec.rfind('='); eq != std::string::npos) {
      inputs.push_back({"--nccl-tests-log", spec.substr(0, eq)});
    }
  }
  if (std::optional<std::string> error = samePathError(inputs, {{"-o", opt.output}})) {
    std::cerr << "braid tune: " << *error << "\n";
    return kUsageError;
  }
  if (!opt.logs.empty()) {
    if (!opt.topology.empty()) {
      std::cerr << "braid tune: --topology and --nccl-tests-log are two sources of the table: give one\n";
      return kUsageError;
    }
    return runTuneFromLogs(opt);
  }
  if (opt.topology.empty()) {
    std::cerr << "braid tune: give --topology (rules from Braid's model) or --nccl-tests-log (rules from "
                 "measurements)\n";
    return kUsageError;
  }
  if (opt.nodes != 0 || !opt.collective.empty()) {
    std::cerr << "braid tune: --nodes and --coll apply to --nccl-tests-log only\n";
    return kUsageError;
  }
  const std::optional<PolicyChoice> policy = choosePolicy(opt);
  if (!policy) return kUsageError;
  Result<Topology> topology = loadTopologyArgument(opt.topology);
  if (!topology) {
    std::cerr << "braid tune: " << topology.status().message() << "\n";
    return kFailure;
  }
  if (opt.ranks != 0 && opt.ranks != topology->numGpus()) {
    std::cerr << fmt::format("braid tune: --ranks {}: topology {} has {} GPUs (the tuner models whole machines)\n",
                             opt.ranks, topology->name, topology->numGpus());
    return kUsageError;
  }
  nccl_plugin::TunerModelOptions options;
  const auto max_bytes = parseNcclTestsSize(opt.max_sim_bytes);
  if (!max_bytes) {
    std::cerr << "braid tune: --max-sim-bytes " << opt.max_sim_bytes << ": not a size (bytes, K/M/G suffix)\n";
    return kUsageError;
  }
  if (*max_bytes < nccl_plugin::kMinSimulatedBytes) {
    std::cerr << fmt::format(
        "braid tune: --max-sim-bytes {}: must be at least {} (1M); above the limit every entry is extrapolated from "
        "the last simulated sizes (shown 'extrapolated', never validated), and below 1M those are latency-bound\n",
        opt.max_sim_bytes, nccl_plugin::kMinSimulatedBytes);
    return kUsageError;
  }
  if (!outputDirectoryOk(opt)) return kFailure;
  options.max_simulated_bytes = *max_bytes;
  Result<nccl_plugin::TunerModel> model = nccl_plugin::TunerModel::build(*topology, options);
  if (!model) {
    std::cerr << "braid tune: " << model.status().message() << "\n";
    return kFailure;
  }
  int overrides = 0;
  const std::string table = modelTableText(*topology, *model, options.grid, *policy, &overrides);
  return writeRulesAndPrint(
      opt.output, rulesFromModel(*model, options.grid, policy->policy),
      fmt::format("braid tune -t {} --policy {}: where Braid's model overrides NCCL's own algorithm/protocol, per "
                  "size range ({} ranks, {} node(s)); other sizes keep NCCL's choice",
                  opt.topology, nccl_plugin::tunerPolicyName(policy->policy), model->ranks(), model->nodes()),
      table);
}

}  // namespace

void registerTuneCommand(CLI::App& app, int* exit_code) {
  auto opt = std::make_shared<TuneOptions>();
  CLI::App* cmd = app.add_subcommand(
      "tune",
      "The NCCL tuner plugin's table for a machine (per collective and size: the fastest NCCL algorithm/protocol in "
      "Braid's model, or measured in nccl-tests logs) and, with -o, a rules file in NCCL's example-tuner CSV format");
  cmd->add_option("--topology,-t", opt->topology, "topology file or shipped name (e.g. dgx-h100-x2)");
  cmd->add_option("--nccl-tests-log", opt->logs,
                  "an nccl-tests log measured on the cluster, as FILE=ALGO/PROTO (e.g. ar_ring_ll.txt=Ring/LL), "
                  "FILE=default (NCCL's own choice, the baseline) or FILE (setting from its NCCL INFO lines); "
                  "repeat per setting");
  cmd->add_option("--coll", opt->collective,
                  "with --nccl-tests-log: the collective (allreduce, allgather, reducescatter, broadcast, reduce, or "
                  "NCCL's all_reduce, all_gather, reduce_scatter) of logs whose text and file name do not say; it must "
                  "equal the collective of the logs that say");
  cmd->add_option(
      "--nodes", opt->nodes,
      "with --nccl-tests-log: the rules' nNodes when the logs do not list hosts; it must equal the host count of "
      "the logs that do");
  cmd->add_option("--ranks", opt->ranks,
                  "rank count; with -t it must equal the topology's GPU count (default: that count), with "
                  "--nccl-tests-log it must equal the rank count of the logs that list ranks and is the rules' nRanks "
                  "when they do not");
  cmd->add_option("-o,--output", opt->output, "write the rules file here (BRAID_TUNER_RULES / NCCL_TUNER_CONFIG_FILE)")
      ->check(outputPathCheck());
  cmd->add_option("--policy", opt->policy,
                  "with -t: when Braid's model overrides NCCL's choice, as BRAID_TUNER: validated (only where "
                  "both entries are inside their calibrated size bands and the candidate wins by more than their "
                  "known error) or model (wherever Braid's fastest differs); default: BRAID_TUNER, else validated");
  cmd->add_option("--max-sim-bytes", opt->max_sim_bytes,
                  "largest grid size simulated, nccl-tests syntax (default 1G, as BRAID_TUNER_MAX_SIM_BYTES)");
  cmd->callback([opt, exit_code]() { *exit_code = runTune(*opt); });
}

}  // namespace braid::cli
