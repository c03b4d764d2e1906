// The tuner plugin's implementation (plugin.h).
#include "tuner/plugin.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_set>

#include "braid/topology.h"
#include "common/env.h"
#include "common/log.h"
#include "common/plugin_log.h"
#include "common/text.h"

namespace braid::nccl_plugin {
namespace {

// A note that says the model guessed (a GPU model not recognised, an arch assumed, a machine taken as PCIe-only
// because its file has no NVLink) changes every prediction: a warning; the other notes are INFO.
void logModelNote(const std::string& note) {
  const bool guessed = note.find("assumed") != std::string::npos || note.find("not recognised") != std::string::npos ||
                       note.find("PCIe links only") != std::string::npos;
  if (guessed) {
    log(nccl_abi::kLogWarn, nccl_abi::kSubsysTuning, "TUNER/Braid: " + note);
  } else if (logEnabled(LogLevel::kInfo)) {
    log(nccl_abi::kLogInfo, nccl_abi::kSubsysTuning, "TUNER/Braid: " + note);
  }
}

// The contexts init handed out and finalize has not taken back (finalize refuses anything else).
std::mutex& liveContextsMutex() {
  static std::mutex mu;
  return mu;
}
std::unordered_set<TunerContext*>& liveContexts() {
  static std::unordered_set<TunerContext*> set;  // freed with the library (dlclose, exit)
  return set;
}

std::string ncclVariable(const char* name) {
  // NCCL's own variables are not in Braid's registry (src/common/env.cc lists BRAID_* only); docs/nccl.md lists them.
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

bool fileExists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// Identifies a topology source for the model cache: the text naming it, and for a file its size and mtime.
std::string sourceKey(const std::string& source, const TunerModelOptions& options) {
  std::string key = fmt::format("{}|{}|{}", source, options.max_simulated_bytes, options.max_simulated_ranks);
  for (uint64_t b : options.grid) key += fmt::format(",{}", b);
  struct stat st {};
  if (::stat(source.c_str(), &st) == 0) {
    key += fmt::format("|{}|{}", static_cast<long long>(st.st_size), static_cast<long long>(st.st_mtime));
  }
  return key;
}

// One model per topology source and options in the process: NCCL creates a communicator per GPU in one process
// (nccl-tests -g), each with its own tuner context; they share the model. Building holds the lock, so
// concurrent inits of the same machine build it once.
Result<std::shared_ptr<const TunerModel>> cachedModel(const std::string& key, const Topology& topology,
                                                      const TunerModelOptions& options) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const TunerModel>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  BRAID_ASSIGN_OR_RETURN(TunerModel built, TunerModel::build(topology, options));
  auto model = std::make_shared<const TunerModel>(std::move(built));
  cache.emplace(key, model);
  return model;
}

// The topology init uses and where it came from; a reason and level when there is none.
struct TopologyChoice {
  std::optional<Topology> topology;
  std::string source;  // "BRAID_TOPOLOGY=dgx-h100-x2", "NCCL_TOPO_DUMP_FILE=/tmp/topo.xml"
  std::string key_source;
  std::string why_not;
  nccl_abi::DebugLevel level = nccl_abi::kLogInfo;
};

TopologyChoice chooseTopology(const TunerSettings& settings) {
  TopologyChoice c;
  if (!settings.topology.empty()) {
    c.source = "BRAID_TOPOLOGY=" + settings.topology;
    c.key_source = settings.topology;
    Result<Topology> t = loadTopologyOrShipped(settings.topology);
    if (t) {
      c.topology = std::move(*t);
    } else {
      c.why_not = fmt::format("{}: {}", c.source, t.status().message());
      c.level = nccl_abi::kLogWarn;
    }
    return c;
  }
  if (!settings.topo_dump_file.empty()) {
    c.source = "NCCL_TOPO_DUMP_FILE=" + settings.topo_dump_file;
    c.key_source = settings.topo_dump_file;
    if (!fileExists(settings.topo_dump_file)) {
      c.why_not = fmt::format("{}: no such file (yet); set BRAID_TOPOLOGY", c.source);
      return c;
    }
    Result<Topology> t = loadTopology(settings.topo_dump_file);
    if (t) {
      c.topology = std::move(*t);
    } else {
      c.why_not = fmt::format("{}: {}", c.source, t.status().message());
      c.level = nccl_abi::kLogWarn;
    }
    return c;
  }
  c.why_not = "no topology: set BRAID_TOPOLOGY (a topology file or shipped name) or NCCL_TOPO_DUMP_FILE";
  return c;
}

std::vector<TunerRule> loadRules(const TunerSettings& settings) {
  if (settings.rules_file.empty()) return {};
  Result<TunerRules> read = readTunerRulesFile(settings.rules_file);
  if (!read) {
    log(nccl_abi::kLogWarn, nccl_abi::kSubsysTuning,
        fmt::format("TUNER/Braid: {}={}: {}; no rules", settings.rules_variable, settings.rules_file,
                    read.status().message()));
    return {};
  }
  for (const std::string& w : read->warnings) {
    log(nccl_abi::kLogWarn, nccl_abi::kSubsysTuning, "TUNER/Braid: rules: " + w);
  }
  BRAID_PLUGIN_LOG(kLogInfo, kSubsysTuning, "TUNER/Braid: {} rule(s) from {}={}", read->rules.size(),
                   settings.rules_variable, settings.rules_file);
  return std::move(read->rules);
}

bool isNvls(int algo) { return algo == nccl_abi::kAlgoNvls || algo == nccl_abi::kAlgoNvlsTree; }
bool isCollNet(int algo) { return algo == nccl_abi::kAlgoCollNetDirect || algo == nccl_abi::kAlgoCollNetChain; }

}  // namespace

TunerSettings tunerSettingsFromEnvironment() {
  TunerSettings s;
  s.topology = envString("BRAID_TOPOLOGY");
  s.topo_dump_file = ncclVariable("NCCL_TOPO_DUMP_FILE");
  s.rules_file = envString("BRAID_TUNER_RULES");
  s.rules_variable = "BRAID_TUNER_RULES";
  if (s.rules_file.empty()) {
    s.rules_file = ncclVariable("NCCL_TUNER_CONFIG_FILE");
    s.rules_variable = "NCCL_TUNER_CONFIG_FILE";
  }
  const std::string policy = envString("BRAID_TUNER");
  if (const auto parsed = parseTunerPolicy(policy)) {
    s.policy = *parsed;
  } else {
    s.warnings.push_back(
        fmt::format("BRAID_TUNER={}: not validated, model or off; {} kept", policy, tunerPolicyName(s.policy)));
  }
  const std::string max_bytes = envString("BRAID_TUNER_MAX_SIM_BYTES");
  if (const auto v = parseNcclTestsSize(max_bytes); v && *v >= kMinSimulatedBytes) {
    s.model.max_simulated_bytes = *v;
  } else if (v) {  // 0 included: below 1M, as documented (docs/env.md)
    s.model.max_simulated_bytes = kMinSimulatedBytes;
    s.warnings.push_back(fmt::format("BRAID_TUNER_MAX_SIM_BYTES={}: below the smallest useful value; {} used",
                                     max_bytes, kMinSimulatedBytes));
  } else {
    s.warnings.push_back(fmt::format("BRAID_TUNER_MAX_SIM_BYTES={}: not a size (bytes, K/M/G suffix); {} kept",
                                     max_bytes, s.model.max_simulated_bytes));
  }
  Result<int64_t> max_ranks = envInt("BRAID_TUNER_MAX_SIM_RANKS");
  if (max_ranks && *max_ranks >= 0 && *max_ranks <= std::numeric_limits<int>::max()) {
    s.model.max_simulated_ranks = static_cast<int>(*max_ranks);
  } else {
    s.warnings.push_back(fmt::format("BRAID_TUNER_MAX_SIM_RANKS={}: not a rank count >= 0; {} kept",
                                     envString("BRAID_TUNER_MAX_SIM_RANKS"), s.model.max_simulated_ranks));
  }
  return s;
}

std::unique_ptr<TunerContext> TunerContext::create(size_t n_ranks, size_t n_nodes, const TunerSettings& settings) {
  auto ctx = std::make_unique<TunerContext>();
  ctx->ranks_ = n_ranks;
  ctx->nodes_ = n_nodes;
  ctx->policy_ = settings.policy;
  for (const std::string& w : settings.warnings) log(nccl_abi::kLogWarn, nccl_abi::kSubsysTuning, "TUNER/Braid: " + w);
  if (settings.policy == TunerPolicy::kOff) {
    ctx->pass_through_ = "BRAID_TUNER=off";
    log(nccl_abi::kLogInfo, nccl_abi::kSubsysTuning,
        "TUNER/Braid: BRAID_TUNER=off: NCCL's cost table and choices are left as they are (no model, no rules)");
    return ctx;
  }
  ctx->rules_ = loadRules(settings);

  TopologyChoice choice = chooseTopology(settings);
  if (choice.topology) {
    const Topology& t = *choice.topology;
    if (static_cast<size_t>(t.numGpus()) != n_ranks || static_cast<size_t>(t.numNodes()) != n_nodes) {
      choice.why_not = fmt::format(
          "{} ({}) has {} GPU(s) on {} node(s) but the communicator has {} rank(s) on {} "
          "node(s)",
          choice.source, t.name, t.numGpus(), t.numNodes(), n_ranks, n_nodes);
      choice.level = nccl_abi::kLogWarn;
    } else {
      Result<std::shared_ptr<const TunerModel>> model =
          cachedModel(sourceKey(choice.key_source, settings.model), t, settings.model);
      if (model) {
        ctx->model_ = std::move(*model);
        for (const std::string& note : t.notes) logModelNote(note);
      } else {
        choice.why_not = fmt::format("{}: {}", choice.source, model.status().message());
        choice.level = nccl_abi::kLogWarn;
      }
    }
  }
  if (!ctx->model_) {
    ctx->pass_through_ = choice.why_not;
    log(choice.level, nccl_abi::kSubsysTuning,
        fmt::format("TUNER/Braid: {}; NCCL's cost table is left as it is{}", choice.why_not,
                    ctx->rules_.empty() ? "" : " (rules still apply)"));
    return ctx;
  }
  const TunerModel& m = *ctx->model_;
  BRAID_PLUGIN_LOG(kLogInfo, kSubsysTuning,
                   "TUNER/Braid: {} ({}): {} ranks on {} node(s); model built in {:.2f} s ({} simulations); "
                   "BRAID_TUNER={}",
                   choice.source, m.topologyName(), m.ranks(), m.nodes(), m.buildSeconds(), m.simulations(),
                   tunerPolicyName(ctx->policy_));
  for (const std::string& note : m.notes()) logModelNote(note);
  return ctx;
}

void TunerContext::fillCostTable(int func, size_t n_bytes, int pipe_ops, float* cells, int num_algo, int num_proto,
                                 int reg_buff, int* n_channels) const {
  if (policy_ == TunerPolicy::kOff) return;
  if (cells == nullptr || func < 0 || func >= nccl_abi::kNumFuncs || num_algo <= 0 || num_proto <= 0) return;
  std::optional<TunerDecision> decision;
  if (model_) {
    // NCCL's choice over the whole table: an entry outside the 7 x 3 Braid knows is one it cannot compare with.
    int nccl_best = -1;
    for (int i = 0; i < num_algo * num_proto; ++i) {
      if (cells[i] >= 0 && (nccl_best < 0 || cells[i] < cells[nccl_best])) nccl_best = i;
    }
    const bool inside = nccl_best >= 0 && nccl_best / num_proto < nccl_abi::kNumAlgorithms &&
                        nccl_best % num_proto < nccl_abi::kNumProtocols;
    NcclCostTable table;
    table.fill(-1.0);
    for (int a = 0; a < num_algo && a < nccl_abi::kNumAlgorithms; ++a) {
      for (int p = 0; p < num_proto && p < nccl_abi::kNumProtocols; ++p) {
        table[a * nccl_abi::kNumProtocols + p] = cells[a * num_proto + p];
      }
    }
    decision = decideOverride(*model_, func, n_bytes, table, policy_);
    if (!inside && nccl_best >= 0) {
      decision->override_nccl = false;
      decision->why = fmt::format("NCCL's choice (entry {} of a {} x {} table) is not an entry Braid models", nccl_best,
                                  num_algo, num_proto);
    }
    if (decision->override_nccl) {
      for (int a = 0; a < num_algo && a < nccl_abi::kNumAlgorithms; ++a) {
        for (int p = 0; p < num_proto && p < nccl_abi::kNumProtocols; ++p) {
          float& cell = cells[a * num_proto + p];
          if (!(cell >= 0)) continue;  // -1: NCCL does not allow it (and never NaN)
          if (const auto us = model_->timeUs(func, a, p, n_bytes)) cell = static_cast<float>(*us);
        }
      }
    }
  }
  const TunerRule* rule =
      firstMatchingRule(rules_, func, n_bytes, static_cast<int>(nodes_), static_cast<int>(ranks_), pipe_ops, reg_buff);
  if (rule != nullptr) {
    if (rule->algo < num_algo && rule->proto < num_proto) {
      float& cell = cells[rule->algo * num_proto + rule->proto];
      if (cell >= 0) cell = 0.0f;
    }
    if (rule->channels > 0 && n_channels != nullptr) *n_channels = rule->channels;
  }
  if (logEnabled(LogLevel::kInfo)) {
    logDecision(func, n_bytes, cells, num_algo, num_proto, rule, decision ? &*decision : nullptr);
  }
}

void TunerContext::logDecision(int func, size_t n_bytes, const float* cells, int num_algo, int num_proto,
                               const TunerRule* rule, const TunerDecision* decision) const {
  int best = -1;
  for (int i = 0; i < num_algo * num_proto; ++i) {
    if (cells[i] >= 0 && (best < 0 || cells[i] < cells[best])) best = i;
  }
  std::string from;
  if (rule != nullptr) {
    from = fmt::format("rule at line {}", rule->line);
  } else if (decision == nullptr) {
    from = "NCCL's table (pass-through)";
  } else if (decision->override_nccl) {
    from = fmt::format("Braid's model over NCCL's {}: {}", entryName(decision->nccl), decision->why);
  } else {
    from = fmt::format("NCCL's choice kept, Braid's candidate {}: {}", entryName(decision->candidate), decision->why);
  }
  if (best < 0) {
    log(nccl_abi::kLogInfo, nccl_abi::kSubsysTuning,
        fmt::format("TUNER/Braid: {} {} bytes: no allowed entry", ncclFuncName(func), n_bytes));
    return;
  }
  log(nccl_abi::kLogInfo, nccl_abi::kSubsysTuning,
      fmt::format("TUNER/Braid: {} {} bytes -> {}/{} {:.2f} us ({})", ncclFuncName(func), n_bytes,
                  ncclAlgoIndexName(best / num_proto), ncclProtoIndexName(best % num_proto), cells[best], from));
}

void TunerContext::chooseV2(int func, size_t n_bytes, int coll_net_support, int nvls_support, int pipe_ops,
                            int* algorithm, int* protocol, int* n_channels) const {
  if (policy_ == TunerPolicy::kOff) return;
  if (algorithm == nullptr || protocol == nullptr || func < 0 || func >= nccl_abi::kNumFuncs) return;
  const TunerRule* rule = firstMatchingRule(rules_, func, n_bytes, static_cast<int>(nodes_), static_cast<int>(ranks_),
                                            pipe_ops, /*reg_buff=*/-1);
  std::optional<TunerDecision> decision;
  if (rule != nullptr) {
    *algorithm = rule->algo;
    *protocol = rule->proto;
    if (rule->channels > 0 && n_channels != nullptr) *n_channels = rule->channels;
  } else if (model_) {
    // v2 passes no table: NCCL's choice as Braid's emulation of NCCL's model predicts it.
    NcclCostTable table;
    table.fill(-1.0);
    for (int a = 0; a < nccl_abi::kNumAlgorithms; ++a) {
      if ((isNvls(a) && !nvls_support) || (isCollNet(a) && !coll_net_support)) continue;
      for (int p = 0; p < nccl_abi::kNumProtocols; ++p) {
        if (const auto us = model_->ncclTimeUs(func, a, p, n_bytes)) table[a * nccl_abi::kNumProtocols + p] = *us;
      }
    }
    decision = decideOverride(*model_, func, n_bytes, table, policy_);
    if (decision->override_nccl) {
      *algorithm = decision->candidate / nccl_abi::kNumProtocols;
      *protocol = decision->candidate % nccl_abi::kNumProtocols;
    }
  }
  if (logEnabled(LogLevel::kInfo)) {
    log(nccl_abi::kLogInfo, nccl_abi::kSubsysTuning,
        fmt::format("TUNER/Braid: {} {} bytes -> {}/{} (v2, {})", ncclFuncName(func), n_bytes,
                    ncclAlgoIndexName(*algorithm), ncclProtoIndexName(*protocol),
                    rule != nullptr ? fmt::format("rule at line {}", rule->line)
                    : !decision     ? std::string("pass-through")
                    : decision->override_nccl
                        ? fmt::format("Braid's model over NCCL's {}: {}", entryName(decision->nccl), decision->why)
                        : fmt::format("NCCL's choice kept, Braid's candidate {}: {}", entryName(decision->candidate),
                                      decision->why)));
  }
}

int tunerInit(void** context, uint64_t comm_id, size_t n_ranks, size_t n_nodes, nccl_abi::Logger logger,
              nccl_abi::NvlDomainInfoV5* nvl_domains, nccl_abi::TunerConstantsV5* /*constants*/) {
  return guarded(nccl_abi::kSubsysTuning, "tuner init", [&]() -> int {
    setLogger(logger);
    if (context == nullptr) {
      log(nccl_abi::kLogWarn, nccl_abi::kSubsysTuning, "TUNER/Braid: init: no context pointer");
      return nccl_abi::kInvalidArgument;
    }
    *context = nullptr;
    if (nvl_domains != nullptr) {
      BRAID_PLUGIN_LOG(kLogInfo, kSubsysTuning,
                       "TUNER/Braid: comm {:#x}: {} rank(s), {} node(s), {} NVLink domain(s) of {}..{} rank(s)",
                       comm_id, n_ranks, n_nodes, nvl_domains->nNvlDomains, nvl_domains->minRanksPerNvlDomain,
                       nvl_domains->maxRanksPerNvlDomain);
    }
    TunerContext* made = TunerContext::create(n_ranks, n_nodes, tunerSettingsFromEnvironment()).release();
    {
      std::lock_guard<std::mutex> lock(liveContextsMutex());
      liveContexts().insert(made);
    }
    *context = made;
    return nccl_abi::kSuccess;
  });
}

int tunerGetCollInfo(void* context, int coll_type, size_t n_bytes, int num_pipe_ops, float** cost_table, int num_algo,
                     int num_proto, int reg_buff, int* n_channels) {
  guarded(nccl_abi::kSubsysTuning, "tuner getCollInfo", [&]() -> int {
    if (context != nullptr) {
      static_cast<const TunerContext*>(context)->fillCostTable(coll_type, n_bytes, num_pipe_ops,
                                                               nccl_abi::costTableCells(cost_table), num_algo,
                                                               num_proto, reg_buff, n_channels);
    }
    return nccl_abi::kSuccess;
  });
  return nccl_abi::kSuccess;  // an error would abort the collective in NCCL 2.28 (nccl_plugins.md §2.2)
}

int tunerGetCollInfoV2(void* context, int coll_type, size_t n_bytes, int coll_net_support, int nvls_support,
                       int num_pipe_ops, int* algorithm, int* protocol, int* n_channels) {
  guarded(nccl_abi::kSubsysTuning, "tuner getCollInfo", [&]() -> int {
    if (context != nullptr) {
      static_cast<const TunerContext*>(context)->chooseV2(coll_type, n_bytes, coll_net_support, nvls_support,
                                                          num_pipe_ops, algorithm, protocol, n_channels);
    }
    return nccl_abi::kSuccess;
  });
  return nccl_abi::kSuccess;
}

int tunerFinalize(void* context) {
  return guarded(nccl_abi::kSubsysTuning, "tuner finalize", [&]() -> int {
    if (context == nullptr) return nccl_abi::kSuccess;
    auto* ctx = static_cast<TunerContext*>(context);
    {
      std::lock_guard<std::mutex> lock(liveContextsMutex());
      if (liveContexts().erase(ctx) == 0) {
        log(nccl_abi::kLogWarn, nccl_abi::kSubsysTuning,
            "TUNER/Braid: finalize: not a live Braid tuner context (finalized twice?)");
        return nccl_abi::kInvalidArgument;
      }
    }
    delete ctx;
    return nccl_abi::kSuccess;
  });
}

}  // namespace braid::nccl_plugin
