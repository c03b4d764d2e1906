// Comparing an algorithm with NCCL and the lower bound (compare.h).
#include "comm/pareto/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "braid/bounds.h"

namespace braid {
namespace {

bool comparable(CollectiveKind kind) {
  return kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kAllGather ||
         kind == CollectiveKind::kReduceScatter || kind == CollectiveKind::kAllToAll;
}

}  // namespace

std::string allReduceBoundNote(CollectiveKind collective) {
  if (collective != CollectiveKind::kAllReduce) return "";
  return "the reduce-scatter + all-gather bound (ForestColl's all-reduce model: no in-network reduction; NCCL's "
         "NVLS, which reduces inside the NVSwitch, can beat it)";
}

std::vector<BoundLabel> boundLabels(CollectiveKind collective) {
  const std::string sum = collective == CollectiveKind::kAllReduce ? "reduce-scatter + all-gather: " : "";
  const std::string routed =
      "algorithms whose GPU-to-GPU messages follow Braid's routes (Topology::route), as Braid's, NCCL's and MSCCL's "
      "do in Braid's simulator";
  return {
      {BoundKind::kCut, "cut_bound_us", "cut_us", "cut bound",
       sum + "ForestColl's hardware cut bound: max over vertex sets of the data that must cross into (out of) the set "
             "/ the bandwidth of the links crossing it; link alpha ignored",
       "any algorithm without in-network reduction"},
      {BoundKind::kRoute, "route_bound_us", "route_us", "route bound",
       sum +
           "route-constrained LP (routeBound): the links each GPU pair's route crosses carry that pair's bytes; 0 "
           "when not computed (above " +
           std::to_string(kRouteBoundMaxGpus) + " GPUs)",
       routed},
      {BoundKind::kLatency, "latency_bound_us", "latency_us", "latency bound",
       "alpha-diameter: the largest, over GPU pairs, of the smallest summed link alpha between them (latencyBound)",
       "any algorithm (multi-port model: a rank may send to all its peers at once)"},
      {BoundKind::kCombined, "bound_us", "bound_us", "routed bound",
       "max(cut bound, route bound, latency bound; all-to-all: and the max-concurrent flow) (collectiveBound)", routed},
  };
}

std::vector<std::string> boundLegend(CollectiveKind collective) {
  std::vector<std::string> lines;
  // The all-reduce composition gets a line of its own instead of a prefix on each bound.
  const bool all_reduce = collective == CollectiveKind::kAllReduce;
  for (const BoundLabel& b : boundLabels(all_reduce ? CollectiveKind::kAllGather : collective)) {
    lines.push_back(fmt::format("{} = {}; valid for {}", b.name, b.what, b.valid_for));
  }
  if (all_reduce) lines.push_back("all-reduce: the cut and route bounds are " + allReduceBoundNote(collective));
  return lines;
}

std::optional<Protocol> parseProtocolName(const std::string& text) {
  for (Protocol p : {Protocol::kSimple, Protocol::kLL, Protocol::kLL128}) {
    if (lowerCase(protocolName(p)) == lowerCase(text)) return p;
  }
  return std::nullopt;
}

std::pair<uint64_t, uint64_t> ncclTestsCountAndBytes(CollectiveKind collective, int ranks, uint64_t element_bytes,
                                                     uint64_t size) {
  const bool per_rank = collective == CollectiveKind::kAllGather || collective == CollectiveKind::kReduceScatter ||
                        collective == CollectiveKind::kAllToAll;
  const uint64_t mult = per_rank ? static_cast<uint64_t>(std::max(1, ranks)) : 1;
  const uint64_t count = size / (element_bytes * mult);
  return {count, count * element_bytes * mult};
}

std::optional<Protocol> bestProtocol(const NcclPrediction& prediction, NcclAlgo algo) {
  std::optional<Protocol> best;
  double best_time = std::numeric_limits<double>::infinity();
  for (const NcclEstimate& e : prediction.all) {
    if (e.algo == algo && e.time_us >= 0 && e.time_us < best_time) {
      best_time = e.time_us;
      best = e.protocol;
    }
  }
  return best;
}

// ---- NcclBaselines ---------------------------------------------------------------------------------------

NcclBaselines::NcclBaselines(const Topology& topology, const NcclSystem& system, CollectiveKind collective,
                             bool in_place)
    : topology_(topology), system_(system), collective_(collective), in_place_(in_place) {}

Result<const Algorithm*> NcclBaselines::tryBaseline(NcclAlgo algo, Protocol protocol) {
  const auto key = std::make_pair(static_cast<int>(algo), static_cast<int>(protocol));
  if (auto it = baselines_.find(key); it != baselines_.end()) return &it->second;
  if (inexpressible_.count(key)) return static_cast<const Algorithm*>(nullptr);
  Result<Algorithm> built = ncclBaselineAlgorithm(topology_, collective_, algo, in_place_, protocol);
  if (built) return &baselines_.emplace(key, std::move(*built)).first->second;
  if (built.status().code() != StatusCode::kUnsupported) {
    return Status(built.status().code(),
                  fmt::format("NCCL {}/{} for {} on {}: {}", ncclAlgoName(algo), protocolName(protocol),
                              collectiveName(collective_), topology_.name, built.status().message()));
  }
  inexpressible_.insert(key);
  return static_cast<const Algorithm*>(nullptr);
}

Result<const Algorithm*> NcclBaselines::baseline(NcclAlgo algo, Protocol protocol) {
  Result<const Algorithm*> built = tryBaseline(algo, protocol);
  if (built && !*built) {
    return unsupported(fmt::format("NCCL {}/{} cannot be built for {} on {}", ncclAlgoName(algo),
                                   protocolName(protocol), collectiveName(collective_), topology_.name));
  }
  return built;
}

Result<const NvlsProgram*> NcclBaselines::tryNvls(int rounds) {
  if (auto it = nvls_.find(rounds); it != nvls_.end()) return &it->second;
  if (nvls_refused_) return static_cast<const NvlsProgram*>(nullptr);
  Result<NvlsProgram> built =
      ncclNvlsProgram(topology_, std::max(1, system_.nvls_graph.channels), rounds, ncclNvlsEfficiency(system_.arch));
  if (built) return &nvls_.emplace(rounds, std::move(*built)).first->second;
  if (built.status().code() != StatusCode::kUnsupported) {
    return Status(built.status().code(),
                  fmt::format("NCCL NVLS emulation on {}: {}", topology_.name, built.status().message()));
  }
  nvls_refused_ = true;
  nvls_refusal_ = built.status().message();
  return static_cast<const NvlsProgram*>(nullptr);
}

void NcclBaselines::addNote(const std::string& note) {
  if (std::find(notes_.begin(), notes_.end(), note) == notes_.end()) notes_.push_back(note);
}

Result<NcclRun> NcclBaselines::choose(const std::optional<NcclPrediction>& prediction, uint64_t bytes,
                                      Protocol p2p_protocol) {
  NcclRun r;
  if (!prediction) {  // all-to-all: NCCL runs grouped send/recv, which ncclBaselineAlgorithm builds
    r.algo = NcclAlgo::kRing;
    r.protocol = p2p_protocol;
    r.label = fmt::format("p2p/{}", protocolName(r.protocol));
    return r;
  }
  r.algo = prediction->choice.algo;
  r.protocol = prediction->choice.protocol;
  r.label = prediction->choiceName();
  const bool nvls = r.algo == NcclAlgo::kNvls || r.algo == NcclAlgo::kNvlsTree;
  if (nvls && collective_ == CollectiveKind::kAllReduce) {
    // Rounds as runtime/calibration/calibration.cc runs NVLS: about 1 MiB per GPU share and round, 1 to 4
    // rounds per channel.
    const int channels = std::max(1, system_.nvls_graph.channels);
    const uint64_t per_round = static_cast<uint64_t>(std::max(1, system_.ranks_per_node)) *
                               static_cast<uint64_t>(channels) * (uint64_t{1} << 20);
    const int k = static_cast<int>(std::clamp<uint64_t>((bytes + per_round - 1) / per_round, 1, 4));
    BRAID_ASSIGN_OR_RETURN(const NvlsProgram* program, tryNvls(channels * k));
    if (program) {
      r.nvls_rounds = channels * k;
      addNote(
          "NVLS (NVLink SHARP) is simulated with the switch as a pseudo-rank that reduces and multicasts "
          "(ncclNvlsProgram); in-network reduction can beat the lower bound, which assumes none");
      return r;
    }
  } else {
    BRAID_ASSIGN_OR_RETURN(const Algorithm* built, tryBaseline(r.algo, r.protocol));
    if (built) return r;
  }
  const std::string why = nvls_refused_ && nvls ? nvls_refusal_ : std::string("the IR cannot express it");
  r.algo = NcclAlgo::kRing;
  r.protocol = bestProtocol(*prediction, NcclAlgo::kRing).value_or(Protocol::kSimple);
  r.label = fmt::format("{}/{}", ncclAlgoName(r.algo), protocolName(r.protocol));
  r.note = fmt::format("NCCL chose {} ({}); simulated {} instead", prediction->choiceName(), why, r.label);
  return r;
}

Result<Runnable> NcclBaselines::runnable(const NcclRun& run) {
  if (run.nvls_rounds > 0) {
    BRAID_ASSIGN_OR_RETURN(const NvlsProgram* program, tryNvls(run.nvls_rounds));
    if (!program) return internalError(fmt::format("NCCL NVLS emulation on {}: {}", topology_.name, nvls_refusal_));
    return Runnable{&program->algorithm, &program->topology, program->gpu_ranks};
  }
  BRAID_ASSIGN_OR_RETURN(const Algorithm* algorithm, baseline(run.algo, run.protocol));
  return Runnable{algorithm, &topology_, -1};
}

Result<SimResult> simulateRunnable(const Runnable& what, uint64_t bytes, std::optional<Protocol> protocol,
                                   bool in_place, int instances, bool record_timeline) {
  SimOptions options;
  options.size_bytes = bytes;
  options.in_place = in_place;
  options.protocol = protocol;
  options.instances = instances;
  options.record_timeline = record_timeline;
  Result<SimResult> result = simulate(*what.algorithm, *what.topology, options);
  if (!result) {
    return Status(result.status().code(), fmt::format("simulating {} at {} bytes: {}",
                                                      what.algorithm->name.empty() ? "(unnamed)" : what.algorithm->name,
                                                      bytes, result.status().message()));
  }
  return result;
}

std::function<Result<double>(const Algorithm&, uint64_t)> simulatedScore(const Topology& topology) {
  const Topology* t = &topology;
  return [t](const Algorithm& algorithm, uint64_t size_bytes) -> Result<double> {
    const uint64_t n = static_cast<uint64_t>(std::max(1, t->numGpus()));
    const uint64_t bytes = std::max<uint64_t>(n * 4, size_bytes - size_bytes % (n * 4));
    Runnable what{&algorithm, t, -1};
    BRAID_ASSIGN_OR_RETURN(SimResult sim, simulateRunnable(what, bytes, std::nullopt, false, 1, false));
    return sim.time_us;
  };
}

// ---- compareAlgorithm -------------------------------------------------------------------------------------

Result<Comparison> compareAlgorithm(const Algorithm& algorithm, const Topology& topology, CollectiveKind collective,
                                    const std::vector<uint64_t>& sizes, const CompareOptions& options) {
  if (!comparable(collective)) {
    return invalidArgument(fmt::format(
        "{} cannot be compared: the simulator, NCCL's baselines and the bounds cover allgather, reducescatter, "
        "allreduce and alltoall",
        collectiveName(collective)));
  }
  const int gpus = topology.numGpus();
  if (algorithm.num_ranks != gpus) {
    return invalidArgument(fmt::format("{} has {} ranks but topology {} has {} GPUs", algorithm.name,
                                       algorithm.num_ranks, topology.name, gpus));
  }
  if (options.element_bytes == 0) return invalidArgument("element size must be positive (bytes)");

  Comparison out;
  Result<NcclSystem> system = ncclSystem(topology);
  if (system) {
    for (const std::string& n : system->notes) out.notes.push_back("NCCL model: " + n);
  } else {
    out.notes.push_back(
        fmt::format("NCCL not compared: NCCL's view of {}: {}", topology.name, system.status().message()));
  }
  if (collective == CollectiveKind::kAllToAll) {
    out.notes.push_back(
        "all-to-all: NCCL's model does not cover it (NCCL runs grouped send/recv); the NCCL and ring columns are "
        "that send/recv pattern");
  }

  // nccl-tests sizes: whole elements per rank.
  std::vector<SizeComparison> rows;
  std::vector<uint64_t> bound_sizes;
  for (uint64_t requested : sizes) {
    const auto [count, bytes] = ncclTestsCountAndBytes(collective, gpus, options.element_bytes, requested);
    if (count == 0) {
      out.notes.push_back(
          fmt::format("size {} holds no whole {}-byte element per rank; skipped", requested, options.element_bytes));
      continue;
    }
    SizeComparison row;
    row.requested_bytes = requested;
    row.size_bytes = bytes;
    row.count = count;
    rows.push_back(std::move(row));
    bound_sizes.push_back(bytes);
  }
  if (rows.empty()) return invalidArgument("no size holds a whole element per rank");

  Result<std::vector<CollectiveBound>> bounds = collectiveBounds(topology, collective, bound_sizes);
  if (!bounds) return Status(bounds.status().code(), fmt::format("lower bound: {}", bounds.status().message()));

  std::optional<NcclBaselines> nccl;
  if (system) nccl.emplace(topology, *system, collective, /*in_place=*/false);
  const Runnable braid{&algorithm, &topology, -1};
  for (size_t i = 0; i < rows.size(); ++i) {
    SizeComparison& row = rows[i];
    const uint64_t bytes = row.size_bytes;
    const CollectiveBound& bound = bounds->at(i);
    row.bound_us = bound.time_us;
    row.bound_bandwidth_us = bound.bandwidth_us;
    row.bound_cut_us = bound.cut_us;
    row.bound_route_us = bound.route_us;
    row.bound_latency_us = bound.latency_us;

    if (options.progress) options.progress(fmt::format("simulating {} at {} bytes", algorithm.name, bytes));
    BRAID_ASSIGN_OR_RETURN(SimResult braid_run, simulateRunnable(braid, bytes, options.protocol, false, 1, false));
    row.predicted_us = braid_run.time_us;
    row.protocol = protocolName(braid_run.protocol);
    row.ratio_to_bound = row.bound_us > 0 ? row.predicted_us / row.bound_us : 0;
    row.ratio_to_cut_bound = row.bound_cut_us > 0 ? row.predicted_us / row.bound_cut_us : 0;
    if (!nccl) continue;

    std::optional<NcclPrediction> prediction;
    Result<NcclPrediction> predicted = ncclPredict(*system, collective, bytes);
    if (predicted) {
      prediction = std::move(*predicted);
      row.nccl_model_us = prediction->choice.time_us;
      row.nccl_choice = prediction->choiceName();
    } else if (predicted.status().code() != StatusCode::kUnsupported) {
      row.notes.push_back(fmt::format("NCCL not compared: NCCL model: {}", predicted.status().message()));
      continue;
    }

    // NCCL's own choice.
    Status nccl_status = [&]() -> Status {
      BRAID_ASSIGN_OR_RETURN(NcclRun chosen, nccl->choose(prediction, bytes, Protocol::kSimple));
      if (!chosen.note.empty()) row.notes.push_back(chosen.note);
      if (!prediction) row.nccl_choice = chosen.label;
      row.nccl_simulated = chosen.label;
      BRAID_ASSIGN_OR_RETURN(Runnable runnable, nccl->runnable(chosen));
      if (options.progress) options.progress(fmt::format("simulating NCCL's {} at {} bytes", chosen.label, bytes));
      BRAID_ASSIGN_OR_RETURN(SimResult run, simulateRunnable(runnable, bytes, chosen.protocol, false, 1, false));
      row.nccl_us = run.time_us;
      return Status::ok();
    }();
    if (!nccl_status) row.notes.push_back("NCCL's choice not simulated: " + nccl_status.message());

    // NCCL's ring with the protocol its model rates best for the ring (all-to-all: the send/recv pattern).
    Status ring_status = [&]() -> Status {
      if (!prediction) {
        if (!row.nccl_us) return Status::ok();  // the same send/recv run failed above
        row.nccl_ring_us = row.nccl_us;
        row.nccl_ring_choice = row.nccl_simulated;
        return Status::ok();
      }
      const Protocol ring_protocol = bestProtocol(*prediction, NcclAlgo::kRing).value_or(Protocol::kSimple);
      row.nccl_ring_choice = fmt::format("{}/{}", ncclAlgoName(NcclAlgo::kRing), protocolName(ring_protocol));
      if (row.nccl_us && row.nccl_simulated == row.nccl_ring_choice) {
        row.nccl_ring_us = row.nccl_us;  // the same run
        return Status::ok();
      }
      BRAID_ASSIGN_OR_RETURN(const Algorithm* ring, nccl->baseline(NcclAlgo::kRing, ring_protocol));
      BRAID_ASSIGN_OR_RETURN(SimResult run,
                             simulateRunnable(Runnable{ring, &topology, -1}, bytes, ring_protocol, false, 1, false));
      row.nccl_ring_us = run.time_us;
      return Status::ok();
    }();
    if (!ring_status) row.notes.push_back("NCCL's ring not simulated: " + ring_status.message());

    if (row.predicted_us > 0 && row.nccl_us) row.speedup_vs_nccl = *row.nccl_us / row.predicted_us;
    if (row.predicted_us > 0 && row.nccl_ring_us) row.speedup_vs_ring = *row.nccl_ring_us / row.predicted_us;
  }
  if (nccl) {
    for (const std::string& n : nccl->notes()) out.notes.push_back(n);
  }
  out.sizes = std::move(rows);
  return out;
}

}  // namespace braid
