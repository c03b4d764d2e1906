// Braid's predictions for NCCL's tuner cost table (model.h).
#include "tuner/model.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <utility>

#include "braid/nccl_model.h"
#include "braid/nccl_runs.h"
#include "braid/simulate.h"

namespace braid::nccl_plugin {
namespace {

// NCCL's ncclFunc_t 0..4 as Braid's collective.
CollectiveKind collectiveOf(int func) {
  switch (func) {
    case nccl_abi::kFuncBroadcast: return CollectiveKind::kBroadcast;
    case nccl_abi::kFuncReduce: return CollectiveKind::kReduce;
    case nccl_abi::kFuncAllGather: return CollectiveKind::kAllGather;
    case nccl_abi::kFuncReduceScatter: return CollectiveKind::kReduceScatter;
    default: return CollectiveKind::kAllReduce;
  }
}

// NCCL's protocol index (LL 0, LL128 1, Simple 2) as Braid's Protocol (whose order differs).
Protocol protocolOf(int proto) {
  switch (proto) {
    case nccl_abi::kProtoLL: return Protocol::kLL;
    case nccl_abi::kProtoLL128: return Protocol::kLL128;
    default: return Protocol::kSimple;
  }
}

int protoIndexOf(Protocol protocol) {
  switch (protocol) {
    case Protocol::kLL: return nccl_abi::kProtoLL;
    case Protocol::kLL128: return nccl_abi::kProtoLL128;
    case Protocol::kSimple: break;
  }
  return nccl_abi::kProtoSimple;
}

const CostCurve kNoCurve{};

// What one simulated size runs on (built by NcclBaselines; nullptr algorithm: the IR cannot express it).
using RunnableAt = std::function<Result<Runnable>(uint64_t bytes)>;

}  // namespace

const char* costSourceName(CostSource source) {
  switch (source) {
    case CostSource::kSimulated: return "simulated";
    case CostSource::kAnalytical: return "analytical";
    case CostSource::kExtrapolated: return "extrapolated";
    case CostSource::kNone: break;
  }
  return "none";
}

const char* ncclFuncName(int func) {
  static const char* const kNames[] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"};
  return func >= 0 && func < nccl_abi::kNumFuncs ? kNames[func] : "?";
}

const char* ncclAlgoIndexName(int algo) {
  return algo >= 0 && algo < kNumNcclAlgos ? ncclAlgoName(static_cast<NcclAlgo>(algo)) : "?";
}

const char* ncclProtoIndexName(int proto) {
  static const char* const kNames[] = {"LL", "LL128", "Simple"};
  return proto >= 0 && proto < nccl_abi::kNumProtocols ? kNames[proto] : "?";
}

double interpolateUs(const std::vector<uint64_t>& bytes, const std::vector<double>& us, uint64_t n_bytes) {
  const size_t n = std::min(bytes.size(), us.size());
  if (n == 0) return 0;
  if (n == 1 || n_bytes <= bytes[0]) return us[0];
  // The segment [i-1, i] holding n_bytes, or the last one above the grid.
  size_t i = 1;
  while (i + 1 < n && bytes[i] < n_bytes) ++i;
  if (n_bytes == bytes[i]) return us[i];  // a grid size: its value exactly
  const double x0 = static_cast<double>(bytes[i - 1]);
  const double x1 = static_cast<double>(bytes[i]);
  if (x1 <= x0) return us[i];
  const double t = (static_cast<double>(n_bytes) - x0) / (x1 - x0);
  return us[i - 1] + t * (us[i] - us[i - 1]);
}

std::vector<uint64_t> defaultTunerGrid() {
  std::vector<uint64_t> grid;
  for (uint64_t b = 256; b <= (uint64_t{1} << 30); b *= 4) grid.push_back(b);
  return grid;
}

// Fills a TunerModel's curves (model.h says which source each entry gets).
class TunerModelBuilder {
 public:
  TunerModelBuilder(const Topology& topology, const NcclSystem& system, const TunerModelOptions& options,
                    TunerModel* model)
      : topology_(topology), system_(system), options_(options), model_(*model) {}

  void run() {
    const bool simulate_any = model_.ranks_ <= options_.max_simulated_ranks;
    if (!simulate_any) {
      model_.notes_.push_back(fmt::format(
          "{} ranks > BRAID_TUNER_MAX_SIM_RANKS = {}: every entry is NCCL's analytical model (ncclPredict) on {}",
          model_.ranks_, options_.max_simulated_ranks, topology_.name));
    }
    for (int func = 0; func < nccl_abi::kNumFuncs; ++func) {
      if (!fillAnalytical(func)) continue;
      if (simulate_any) fillSimulated(func);
    }
  }

 private:
  CostCurve& curve(int func, int algo, int proto) { return model_.curves_[func][algo][proto]; }

  // ncclPredict on the grid; false when the model does not cover the collective (then every entry stays kNone).
  bool fillAnalytical(int func) {
    const CollectiveKind coll = collectiveOf(func);
    std::vector<NcclPrediction> predictions;
    for (uint64_t bytes : options_.grid) {
      Result<NcclPrediction> p = ncclPredict(system_, coll, bytes);
      if (!p) {
        model_.notes_.push_back(
            fmt::format("{}: NCCL's model: {}; NCCL's table left as it is", ncclFuncName(func), p.status().message()));
        return false;
      }
      predictions.push_back(std::move(*p));
    }
    for (size_t i = 0; i < predictions.size(); ++i) {
      for (const NcclEstimate& e : predictions[i].all) {
        CostCurve& c = curve(func, static_cast<int>(e.algo), protoIndexOf(e.protocol));
        if (i == 0) c.source = CostSource::kAnalytical;
        if (e.time_us < 0) c.source = CostSource::kNone;
        c.bytes.push_back(options_.grid[i]);
        c.us.push_back(e.time_us);
        c.nccl_us.push_back(e.time_us);
      }
    }
    for (auto& per_algo : model_.curves_[func]) {
      for (CostCurve& c : per_algo) {
        if (c.source == CostSource::kNone) c = CostCurve{};
      }
    }
    return true;
  }

  // The sizes simulated: grid sizes up to max_simulated_bytes (at least two), each rounded down to whole bytes per
  // rank (the simulator splits every buffer into per-rank blocks).
  std::vector<uint64_t> simulatedSizes() const {
    const uint64_t limit = std::max(options_.max_simulated_bytes, options_.grid[1]);
    const uint64_t ranks = static_cast<uint64_t>(std::max(1, model_.ranks_));
    std::vector<uint64_t> sizes;
    for (uint64_t b : options_.grid) {
      if (b > limit) break;
      const uint64_t rounded = std::max(ranks, b - b % ranks);
      if (sizes.empty() || rounded > sizes.back()) sizes.push_back(rounded);
    }
    return sizes;
  }

  void fillSimulated(int func) {
    const CollectiveKind coll = collectiveOf(func);
    if (coll != CollectiveKind::kAllGather && coll != CollectiveKind::kReduceScatter &&
        coll != CollectiveKind::kAllReduce) {
      return;  // ncclBaselineAlgorithm builds no broadcast / reduce
    }
    NcclBaselines baselines(topology_, system_, coll, /*in_place=*/false);
    std::vector<NcclAlgo> algos = {NcclAlgo::kRing};
    if (coll == CollectiveKind::kAllReduce) algos.push_back(NcclAlgo::kTree);
    for (NcclAlgo algo : algos) {
      for (int proto = 0; proto < nccl_abi::kNumProtocols; ++proto) {
        const Protocol protocol = protocolOf(proto);
        RunnableAt at = [&baselines, &topology = topology_, algo, protocol](uint64_t) -> Result<Runnable> {
          BRAID_ASSIGN_OR_RETURN(const Algorithm* built, baselines.tryBaseline(algo, protocol));
          return ncclRunnable(built, &topology, algo);
        };
        simulateInto(func, static_cast<int>(algo), proto, at);
      }
    }
    if (coll == CollectiveKind::kAllReduce && system_.nvls) {
      RunnableAt at = [&baselines](uint64_t bytes) -> Result<Runnable> {
        BRAID_ASSIGN_OR_RETURN(const NvlsProgram* program, baselines.tryNvls(baselines.nvlsRounds(bytes)));
        if (program == nullptr) return Runnable{};
        return Runnable{&program->algorithm, &program->topology, program->gpu_ranks};
      };
      for (NcclAlgo algo : {NcclAlgo::kNvls, NcclAlgo::kNvlsTree}) {
        simulateInto(func, static_cast<int>(algo), nccl_abi::kProtoSimple, at);
      }
    }
  }

  // Simulates one entry NCCL's model enables on the simulated sizes; on success the curve becomes kSimulated, otherwise
  // it keeps its analytical values and a note says why.
  void simulateInto(int func, int algo, int proto, const RunnableAt& at) {
    if (curve(func, algo, proto).source == CostSource::kNone) return;  // NCCL's model disables it here
    CostCurve simulated;
    simulated.source = CostSource::kSimulated;
    simulated.nccl_us = curve(func, algo, proto).nccl_us;
    const std::string what =
        fmt::format("{} {}/{}", ncclFuncName(func), ncclAlgoIndexName(algo), ncclProtoIndexName(proto));
    for (uint64_t bytes : simulatedSizes()) {
      Result<Runnable> runnable = at(bytes);
      if (runnable && runnable->algorithm == nullptr) {
        model_.notes_.push_back(fmt::format("{}: the IR cannot express it on {}; {}", what, topology_.name,
                                            fallbackWords(func, algo, proto)));
        return;
      }
      if (!runnable) {
        model_.notes_.push_back(
            fmt::format("{} not built: {}; {}", what, runnable.status().message(), fallbackWords(func, algo, proto)));
        return;
      }
      SimOptions options;
      options.size_bytes = bytes;
      options.in_place = false;
      options.protocol = protocolOf(proto);
      ++model_.simulations_;
      Result<SimResult> sim = simulate(*runnable, options);
      if (!sim) {
        model_.notes_.push_back(fmt::format("{} at {} bytes not simulated: {}; {}", what, bytes, sim.status().message(),
                                            fallbackWords(func, algo, proto)));
        return;
      }
      simulated.bytes.push_back(bytes);
      simulated.us.push_back(sim->time_us);
    }
    curve(func, algo, proto) = std::move(simulated);
  }

  std::string fallbackWords(int func, int algo, int proto) const {
    return model_.curves_[func][algo][proto].source == CostSource::kAnalytical ? "NCCL's analytical model used"
                                                                               : "NCCL's value left as it is";
  }

  const Topology& topology_;
  const NcclSystem& system_;
  const TunerModelOptions& options_;
  TunerModel& model_;
};

Result<TunerModel> TunerModel::build(const Topology& topology, const TunerModelOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (options.grid.size() < 2) return invalidArgument("tuner grid: at least 2 sizes are needed");
  for (size_t i = 1; i < options.grid.size(); ++i) {
    if (options.grid[i] <= options.grid[i - 1] || options.grid[0] == 0) {
      return invalidArgument(
          fmt::format("tuner grid: sizes must be positive and ascending (size {} is {} bytes)", i, options.grid[i]));
    }
  }
  Result<NcclSystem> system = ncclSystem(topology);
  if (!system) {
    return Status(system.status().code(),
                  fmt::format("NCCL's view of {}: {}", topology.name, system.status().message()));
  }
  TunerModel model;
  model.ranks_ = system->num_ranks;
  model.nodes_ = system->num_nodes;
  model.topology_name_ = topology.name;
  model.grid_ = options.grid;
  for (const std::string& note : system->notes) model.notes_.push_back("NCCL model: " + note);
  TunerModelBuilder(topology, *system, options, &model).run();
  model.build_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return model;
}

const CostCurve& TunerModel::curve(int func, int algo, int proto) const {
  if (func < 0 || func >= nccl_abi::kNumFuncs || algo < 0 || algo >= nccl_abi::kNumAlgorithms || proto < 0 ||
      proto >= nccl_abi::kNumProtocols) {
    return kNoCurve;
  }
  return curves_[func][algo][proto];
}

std::optional<double> TunerModel::timeUs(int func, int algo, int proto, uint64_t n_bytes) const {
  const CostCurve& c = curve(func, algo, proto);
  if (c.source == CostSource::kNone || c.bytes.empty()) return std::nullopt;
  return interpolateUs(c.bytes, c.us, n_bytes);
}

CostSource TunerModel::sourceAt(int func, int algo, int proto, uint64_t n_bytes) const {
  const CostCurve& c = curve(func, algo, proto);
  if (c.source == CostSource::kSimulated && !c.bytes.empty() &&
      (n_bytes < c.bytes.front() || n_bytes > c.bytes.back())) {
    return CostSource::kExtrapolated;
  }
  return c.source;
}

std::optional<double> TunerModel::ncclTimeUs(int func, int algo, int proto, uint64_t n_bytes) const {
  const CostCurve& c = curve(func, algo, proto);
  if (c.source == CostSource::kNone || c.nccl_us.empty()) return std::nullopt;
  return interpolateUs(grid_, c.nccl_us, n_bytes);
}

}  // namespace braid::nccl_plugin
