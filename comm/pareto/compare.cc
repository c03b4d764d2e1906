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
#include "braid/sim_accuracy.h"

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

Result<SimResult> simulateRunnable(const Runnable& what, uint64_t bytes, std::optional<Protocol> protocol,
                                   bool in_place, int instances, bool record_timeline) {
  SimOptions options;
  options.size_bytes = bytes;
  options.in_place = in_place;
  options.protocol = protocol;
  options.instances = instances;
  options.record_timeline = record_timeline;
  return simulate(what, options);
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

const SimCalibration* validatedBandFor(CollectiveKind collective, Protocol protocol) {
  return collective == CollectiveKind::kAllToAll ? allToAllSimCalibration(protocol)
                                                 : allReduceSimCalibration(NcclAlgo::kRing, protocol);
}

const SimCalibration* ncclChoiceBand(CollectiveKind collective, const std::string& choice) {
  const size_t slash = choice.find('/');
  if (slash == std::string::npos) return nullptr;
  const std::string proto = choice.substr(slash + 1);
  for (Protocol p : {Protocol::kSimple, Protocol::kLL, Protocol::kLL128}) {
    if (proto != protocolName(p)) continue;
    if (collective == CollectiveKind::kAllToAll) return allToAllSimCalibration(p);
    Result<NcclAlgo> algo = parseNcclAlgo(choice.substr(0, slash));
    return algo.isOk() ? allReduceSimCalibration(*algo, p) : nullptr;
  }
  return nullptr;
}

std::optional<std::string> unvalidatedNcclNote(CollectiveKind collective, const std::string& nccl_choice,
                                               uint64_t bytes, double speedup) {
  if (!(speedup > 1)) return std::nullopt;
  const SimCalibration* band = ncclChoiceBand(collective, nccl_choice);
  if (band != nullptr && insideValidatedBand(*band, bytes)) return std::nullopt;
  return fmt::format(
      "NCCL's {} here is outside the simulator's validated band for it ({}): the {:.3f}x rests on the "
      "simulator's model of NCCL too",
      nccl_choice, band != nullptr ? band->outside : "no published measurement of it", speedup);
}

std::optional<std::string> unvalidatedWinNote(CollectiveKind collective, Protocol protocol, uint64_t bytes,
                                              double speedup) {
  if (!(speedup > 1)) return std::nullopt;
  const SimCalibration* band = validatedBandFor(collective, protocol);
  if (band != nullptr && insideValidatedBand(*band, bytes)) return std::nullopt;
  return fmt::format(
      "{:.3f}x over NCCL rests on the simulator's {} outside its validated band ({}); it may not hold on the GPU "
      "(docs/simulator.md, Calibration)",
      speedup, protocolName(protocol), band != nullptr ? band->outside : "no published measurement of NCCL in it");
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
      BRAID_ASSIGN_OR_RETURN(SimResult run, simulateRunnable(ncclRunnable(ring, &topology, NcclAlgo::kRing), bytes,
                                                             ring_protocol, false, 1, false));
      row.nccl_ring_us = run.time_us;
      return Status::ok();
    }();
    if (!ring_status) row.notes.push_back("NCCL's ring not simulated: " + ring_status.message());

    if (row.predicted_us > 0 && row.nccl_us) {
      row.speedup_vs_nccl = *row.nccl_us / row.predicted_us;
      if (std::optional<std::string> note =
              unvalidatedWinNote(collective, braid_run.protocol, bytes, *row.speedup_vs_nccl)) {
        row.notes.push_back(*note);
      }
      if (std::optional<std::string> note =
              unvalidatedNcclNote(collective, row.nccl_choice, bytes, *row.speedup_vs_nccl)) {
        row.notes.push_back(*note);
      }
    }
    if (row.predicted_us > 0 && row.nccl_ring_us) row.speedup_vs_ring = *row.nccl_ring_us / row.predicted_us;
  }
  if (nccl) {
    for (const std::string& n : nccl->notes()) out.notes.push_back(n);
  }
  out.sizes = std::move(rows);
  return out;
}

}  // namespace braid
