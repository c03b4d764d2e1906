// Shared pieces of the fuzz targets: the input as a string, quiet logging, and the size guard that keeps the
// symbolic verifier on inputs it replays in milliseconds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "braid/algorithm.h"
#include "braid/topology.h"
#include "common/log.h"

namespace braid::fuzz {

inline std::string inputText(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

/// Readers warn about odd inputs on stderr; at thousands of inputs a second that is noise and time. BRAID_DEBUG, when
/// set, keeps its meaning (BRAID_DEBUG=WARN shows the warnings while reproducing one input).
inline void quietLogs() {
  if (std::getenv("BRAID_DEBUG") == nullptr) setLogLevel(LogLevel::kNone);
}

/// Whether verify() on `algorithm` is cheap enough for a fuzz iteration: at most 64 ranks, 4096 chunks per buffer
/// and 20000 steps in all. Larger algorithms are parsed and serialized but not replayed (the replay allocates per
/// chunk and per step).
inline bool smallEnoughToVerify(const Algorithm& algorithm) {
  constexpr long long kMaxChunks = 4096;
  if (algorithm.num_ranks < 1 || algorithm.num_ranks > 64 || algorithm.num_chunks > kMaxChunks) return false;
  long long steps = 0;
  for (const RankProgram& program : algorithm.ranks) {
    if (program.input_chunks > kMaxChunks || program.output_chunks > kMaxChunks ||
        program.scratch_chunks > kMaxChunks) {
      return false;
    }
    for (const Threadblock& tb : program.threadblocks) steps += static_cast<long long>(tb.steps.size());
  }
  return steps <= 20000;
}

/// What follows a successful read of an algorithm in `braid verify`: the symbolic replay (when small enough) and
/// both writers.
inline void exerciseAlgorithm(const Algorithm& algorithm) {
  if (smallEnoughToVerify(algorithm)) {
    VerifyReport report = verify(algorithm);
    (void)report.toString();
  }
  (void)writeAlgorithmJson(algorithm);
  (void)writeMscclXml(algorithm);
}

/// What follows a successful import in `braid topo import` and `topo show`. Every reader validates what it returns,
/// so a topology that fails validateTopology here is a reader bug: it aborts (a finding). Topologies of at most 16
/// GPUs and 256 vertices then get the text and JSON descriptions, the SVG drawing and the YAML written read back
/// (a failure there is not reported). topologyToJson computes GPU-NIC affinity (nicAffinity) and every GPU pair's
/// route (allGpuRoutes, its route matrix) for every such topology with at least one GPU, so neither is called again
/// here: a second call on the same topology would run the same code on the same input. Larger topologies stop
/// after validation: their all-pairs routing takes seconds under the sanitizers, and fuzzing spends its time on
/// parsing.
inline void exerciseTopology(const Topology& topology) {
  if (Status valid = validateTopology(topology); !valid.isOk()) {
    std::fprintf(stderr, "reader returned an invalid topology: %s\n", valid.toString().c_str());
    std::abort();
  }
  if (topology.numGpus() > 16 || topology.vertices.size() > 256) return;
  (void)describeTopology(topology);
  (void)topologyToJson(topology);
  (void)drawTopologySvg(topology);
  (void)readTopologyYaml(writeTopologyYaml(topology), "fuzz-roundtrip.yaml");
}

}  // namespace braid::fuzz
