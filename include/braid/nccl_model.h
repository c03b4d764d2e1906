// NCCL baselines (issue 3 §3): what NCCL 2.28 would do on a topology.
//   (a) NCCL's algorithms built in the IR (multi-ring with NCCL's channel count, double binary tree; across
//       nodes the ring/tree over NICs), run in Braid's simulator like any other algorithm;
//   (b) NCCL's own analytical model (nccl@2.28.9 src/graph/tuning.cc, constants and formulas in
//       ../shared/reference/nccl_plugins.md §4): per algorithm/protocol latency and bandwidth, the
//       algorithm/protocol NCCL picks for a size and its predicted time.
// Units: bytes, microseconds, GB/s (1 GB/s = 1e3 bytes/us).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "braid/algorithm.h"
#include "braid/collective.h"
#include "braid/status.h"
#include "braid/topology.h"

namespace braid {

enum class NcclAlgo { kTree, kRing, kCollNetDirect, kCollNetChain, kNvls, kNvlsTree, kPat };
inline constexpr int kNumNcclAlgos = 7;
const char* ncclAlgoName(NcclAlgo algo);  // NCCL's spelling: "Tree", "Ring", "CollNetDirect", "CollNetChain",
                                          // "NVLS", "NVLSTree", "PAT"
Result<NcclAlgo> parseNcclAlgo(const std::string& name);  // case-insensitive

/// What NCCL's topology search would find on a topology (nccl_plugins.md §4.5), per algorithm graph.
struct NcclGraph {
  int channels = 0;
  double bw_intra = 0;  // GB/s per channel
  double bw_inter = 0;  // GB/s per channel (0 on one node)
  std::string type_intra;  // NCCL path type: "NVL", "PIX", "PXB", "PHB", "SYS", ...
  std::string type_inter;  // "NET" across nodes, empty on one node
  double latency_inter_us = 0;
};

struct NcclSystem {
  int num_ranks = 0;
  int num_nodes = 0;
  int ranks_per_node = 0;  // max over nodes
  int arch = 0;            // compute-capability row: 0 Volta, 1 Ampere, 2 Hopper, 3 Blackwell
  std::string arch_name;   // "Volta", "Ampere", "Hopper", "Blackwell"
  bool nvls = false;       // NVLink SHARP: Hopper+ GPUs on an NVSwitch
  NcclGraph ring;
  NcclGraph tree;
  NcclGraph nvls_graph;
  std::vector<std::string> notes;  // what was assumed (e.g. GPU arch inferred from the model name)
};

/// Derives NCCL's view of a topology: GPU arch from Vertex::model (V100/A100/H100/H200/B200...; unknown ->
/// Ampere with a note), channels and per-channel bandwidths as NCCL's search would find them.
Result<NcclSystem> ncclSystem(const Topology& topology);

struct NcclEstimate {
  NcclAlgo algo = NcclAlgo::kRing;
  Protocol protocol = Protocol::kSimple;
  double time_us = -1;   // -1: disabled for this collective/system
  double latency_us = 0;
  double bus_bw_gbps = 0;  // model bus bandwidth after refinements
  double alg_bw_gbps = 0;  // bandwidth used in the time formula
};

struct NcclPrediction {
  NcclEstimate choice;              // fastest enabled estimate (NCCL's pick)
  std::vector<NcclEstimate> all;    // every algorithm x protocol, disabled ones with time_us = -1
  std::string choiceName() const;   // e.g. "Ring/LL128"
};

/// NCCL's prediction for one collective call of nccl-tests size `size_bytes` (for all-gather and
/// reduce-scatter this is count x typesize x nRanks, the nBytes NCCL's tuner sees).
/// kUnsupported for collectives NCCL's model does not cover (all-to-all: NCCL runs it as grouped p2p).
Result<NcclPrediction> ncclPredict(const NcclSystem& system, CollectiveKind collective, uint64_t size_bytes);

/// NCCL's algorithm built in the IR: kRing -> NCCL's rings (NVLink rings within a node, one ring per
/// channel, chained through NICs across nodes), kTree -> double binary tree over nodes with chains inside.
/// All-to-all -> NCCL's grouped send/recv pattern (every pair, all channels). Errors: kUnsupported for algos
/// that need hardware the IR cannot express (NVLS, CollNet) — name it.
Result<Algorithm> ncclBaselineAlgorithm(const Topology& topology, CollectiveKind collective, NcclAlgo algo,
                                        bool in_place, Protocol protocol);

}  // namespace braid
