// NCCL's algorithms per topology and collective (include/braid/nccl_runs.h).
#include "braid/nccl_runs.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace braid {

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

uint64_t ncclP2pSliceBytes(const Topology& topology) {
  const int n = topology.numGpus();
  int node = -1;
  for (int r = 0; r < n; ++r) {
    const int q = topology.vertices[topology.gpuVertex(r)].node;
    if (node >= 0 && q != node) return kNcclP2pNetChunkBytes;
    node = q;
  }
  for (const std::optional<Route>& route : allGpuRoutes(topology)) {
    if (!route || route->links.empty()) continue;
    for (int l : route->links) {
      if (topology.links[l].kind != LinkKind::kNvlink) return kNcclP2pPciChunkBytes;
    }
  }
  return kNcclP2pNvlChunkBytes;
}

Runnable ncclRunnable(const Algorithm* algorithm, const Topology* topology, NcclAlgo algo) {
  Runnable what{algorithm, topology, -1};
  if (algo == NcclAlgo::kRing) {
    what.simple_slice_bytes = kNcclRingSimpleSliceBytes;
    what.simple_slices_per_iteration = kNcclRingSimpleSlicesPerChunk;
    what.simple_fifo_slices = kNcclRingSimpleFifoSlices;
  }
  return what;
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

int NcclBaselines::nvlsRounds(uint64_t bytes) const {
  const int channels = std::max(1, system_.nvls_graph.channels);
  const uint64_t per_round = static_cast<uint64_t>(std::max(1, system_.ranks_per_node)) *
                             static_cast<uint64_t>(channels) * (uint64_t{1} << 20);
  const int k = static_cast<int>(std::clamp<uint64_t>((bytes + per_round - 1) / per_round, 1, 4));
  return channels * k;
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
    const int rounds = nvlsRounds(bytes);
    BRAID_ASSIGN_OR_RETURN(const NvlsProgram* program, tryNvls(rounds));
    if (program) {
      r.nvls_rounds = rounds;
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
  if (collective_ != CollectiveKind::kAllToAll) return ncclRunnable(algorithm, &topology_, run.algo);
  Runnable what{algorithm, &topology_, -1};
  if (p2p_slice_bytes_ == 0) p2p_slice_bytes_ = ncclP2pSliceBytes(topology_);
  what.simple_slice_bytes = p2p_slice_bytes_;
  what.nccl_p2p = true;
  return what;
}

}  // namespace braid
