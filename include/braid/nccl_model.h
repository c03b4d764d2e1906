// NCCL baselines: what NCCL 2.28 would do on a topology.
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
  double bw_intra = 0;     // GB/s per channel
  double bw_inter = 0;     // GB/s per channel (0 on one node, except the NVLS graph: NCCL's NVLS formula uses it)
  std::string type_intra;  // NCCL path type: "NVL", "PIX", "PXB", "PHB", "SYS", ...
  std::string type_inter;  // across nodes the GPU <-> NIC path type NCCL's search settled on ("PIX", ...); empty
                           // on one node
  double latency_inter_us = 0;
};

struct NcclSystem {
  int num_ranks = 0;
  int num_nodes = 0;
  int ranks_per_node = 0;   // max over nodes
  int arch = 0;             // compute-capability row: 0 Volta, 1 Ampere, 2 Hopper, 3 Blackwell
  std::string arch_name;    // "Volta", "Ampere", "Hopper", "Blackwell"
  bool nvls = false;        // NVLink SHARP: Hopper+ GPUs on an NVSwitch
  bool mixed_arch = false;  // GPUs of several architectures: NCCL disables LL128
  std::string cpu_vendor;   // host CPUs: "Intel", "AMD", "Arm", "Power" or "mixed" (multi-node LL cap row, net
                            // overhead: AMD 2 us, others 1 us)
  NcclGraph ring;
  NcclGraph tree;
  NcclGraph nvls_graph;
  /// Point-to-point (send/recv, all-to-all) channels as ncclTopoComputeP2pChannels lays them out: p2p_channels =
  /// pow2Up(ring channels) (NCCL_MAX_P2P_NCHANNELS = MAXCHANNELS, NCCL_MIN_P2P_NCHANNELS = 1), and
  /// p2p_channels_per_peer = pow2Up of the fewest channels any peer gets (ncclTopoGetNchannels: 2 x NVLink lanes
  /// for an NVLink peer, 2 for any other local peer, NCCL_NCHANNELS_PER_NET_PEER for a remote one: 2, halved while
  /// 2 x ranks > 4 x channels, at least the NICs the GPU needs for its PCIe bandwidth), at most p2p_channels.
  int p2p_channels = 0;
  int p2p_channels_per_peer = 0;
  std::vector<std::string> notes;  // what was assumed (e.g. GPU arch inferred from the model name)
};

/// Derives NCCL's view of a topology: GPU arch from Vertex::model (V100/A100/H100/H200/B200...; unknown ->
/// Ampere with a note), channels and per-channel bandwidths as NCCL's search would find them.
/// Method (nccl@2.28.9 src/graph/search.cc ncclTopoCompute, nccl_plugins.md §4.5; src/cost/nccl_search.cc), per
/// node with GPUs:
///  * link bandwidths as NCCL rates them: NVLink = per-link GB/s by SM (V100 20, A100/A30 20, A10/A40 12, Hopper
///    20.6, Blackwell 40.1) x lanes; PCIe, inter-socket and NIC links as the topology says;
///  * one node: a ring channel is a cycle through the GPUs over Topology::route hops (greedy depth-first search;
///    with NVLink also src/algos' findRings on the lanes left at that speed, e.g. a DGX-1's 6 lane-disjoint
///    rings), each hop taking the channel's speed from every link it crosses; several nodes: a channel is NIC ->
///    GPU chain -> the same NIC (gpuNicRoute hops), each channel taking its speed from the NIC as well;
///  * pass 1 walks NCCL's speed list for the arch (intra on one node, inter across nodes) down from the first
///    speed the GPUs can carry, widening path types until channels fit, keeps the most channels x speed, stops at
///    a perfect graph or when the next speed is under 0.49 of the best; channels are then duplicated at half speed
///    (speed >= 25, not on Hopper+ below 50 with more than 4 channels); pass 2 tries faster speeds;
///  * trees: NCCL's balanced-tree pattern with the ring's channel count (pass 2 raises bwIntra up to 2 x bwInter);
///    NVLS (Hopper+ nodes whose GPUs reach an NVSwitch): one channel per GPU (per NIC-nearest GPU across nodes),
///    the head GPU's switch links carrying twice the channel's speed;
///  * nodes combine as NCCL's init does (min channels and bandwidths, max path types), rings and trees end with
///    the same channel count.
/// Assumptions, also in `notes`: NVLink SHARP usable on Hopper+ NVSwitch nodes; CollNet off (NCCL's default);
/// a channel leaves a node through the NIC it entered by (no cross-NIC); latency_inter_us = the NIC's network link
/// alpha; CPU vendor from the CPU vertices' model (Intel if unknown); ring and tree hops take no NVB paths
/// (channel hops never relay through a GPU; the all-to-all baseline's p2p paths do, see ncclBaselineAlgorithm). Greedy
/// layouts never backtrack across channels (NCCL's search does, within its time limit), so on irregular topologies the
/// channel count can be below NCCL's. Errors: kInvalidArgument without GPUs; kUnsupported when a node of a multi-node
/// topology has no NIC on the network.
Result<NcclSystem> ncclSystem(const Topology& topology);

struct NcclEstimate {
  NcclAlgo algo = NcclAlgo::kRing;
  Protocol protocol = Protocol::kSimple;
  double time_us = -1;  // -1: disabled for this collective/system
  double latency_us = 0;
  double bus_bw_gbps = 0;  // model bus bandwidth after refinements
  double alg_bw_gbps = 0;  // bandwidth used in the time formula
};

struct NcclPrediction {
  NcclEstimate choice;             // fastest enabled estimate (NCCL's pick)
  std::vector<NcclEstimate> all;   // every algorithm x protocol, disabled ones with time_us = -1
  std::string choiceName() const;  // e.g. "Ring/LL128"
};

/// NCCL's prediction for one collective call of nccl-tests size `size_bytes` (for all-gather and
/// reduce-scatter this is count x typesize x nRanks, the nBytes NCCL's tuner sees).
/// kUnsupported for collectives NCCL's model does not cover (all-to-all: NCCL runs it as grouped p2p, whose time
/// Braid gets by simulating ncclBaselineAlgorithm's program). Source: nccl@2.28.9 src/graph/tuning.cc
/// (src/cost/nccl_tuning.cc).
Result<NcclPrediction> ncclPredict(const NcclSystem& system, CollectiveKind collective, uint64_t size_bytes);

/// NCCL's algorithm built in the IR: kRing -> NCCL's rings (NVLink rings within a node, one ring per
/// channel, chained through NICs across nodes), kTree -> double binary tree over nodes with chains inside.
/// All-to-all -> NCCL's grouped send/recv pattern (every pair, all channels), each pair on NCCL's p2p path:
/// along Topology::route; on one node, for GPUs without a direct NVLink, through the NVLink neighbour of both
/// (NCCL's NVB path, nccl@2.28.9 src/graph/paths.cc), when that is wider than the route; across nodes through the
/// sender-node GPU that owns the NIC of the receiver's rail (PXN, NCCL_P2P_PXN_LEVEL=2 by default,
/// src/graph/search.cc ncclTopoGetNetDev) when it is NVLink-connected to the sender and PIX/PXB to that NIC. The
/// relay receives into scratch and forwards (NCCL stages the data in the relay's memory). Errors: kUnsupported for
/// algos that need hardware the IR cannot express (NVLS, CollNet) — name it — and for PAT (not built); kInvalidArgument
/// for Tree with all-gather/reduce-scatter (NCCL's tree is all-reduce only) and for collectives other than
/// allgather/reducescatter/allreduce/alltoall. Rings/trees use NcclSystem::ring/tree.channels channels; the channel
/// orders are those of ncclSystem's search (src/cost/nccl_baseline.cc, nccl_p2p.cc).
Result<Algorithm> ncclBaselineAlgorithm(const Topology& topology, CollectiveKind collective, NcclAlgo algo,
                                        bool in_place, Protocol protocol);

}  // namespace braid

namespace braid {

/// NVLink SHARP (NCCL's NVLS / NVLSTree all-reduce) emulated in the IR so the simulator can run it: each
/// node's NVSwitch becomes an extra rank (rank numGpus() + node index) that reduces what the GPUs push into
/// it (multimem.ld_reduce) and multicasts what they store (multimem.st). Per round and share i: every GPU
/// sends its share-i part to the switch (M/n each, M per GPU uplink in all), the switch reduces and returns
/// share i to GPU i (M/n), GPU i combines it across nodes (recursive doubling with the GPUs of the same
/// local index in the other nodes, through their NICs — NCCL's NVLSTree inter-node step), stores it to the
/// switch (M/n) and the switch multicasts it to all n GPUs (M per GPU downlink). So each GPU link carries
/// M(1 + 1/n) per direction, as NVLS does (nccl@2.28.9 src/device/all_reduce.h, NVLS primitives; the NCCL
/// model's NVLS bandwidth term in nccl_plugins.md §4.3). The program is for simulation only: it is not a
/// verifiable GPU-rank algorithm (the switch is no GPU).
struct NvlsProgram {
  Topology topology;    // the input topology with each node's NVSwitch turned into a pseudo-GPU rank
  Algorithm algorithm;  // all-reduce over numGpus() + numNodes() ranks; the last numNodes() are switches
  int gpu_ranks = 0;
};

/// Builds the emulation for an all-reduce split into `rounds` rounds spread over `channels` channels
/// (rounds >= channels >= 1). The GPU<->switch links are scaled by `nvls_efficiency`: NCCL's model
/// multiplies NVLS bandwidth by nvlsEfficiency (Hopper 0.85, Blackwell 0.74; nccl_plugins.md §4.2), the
/// switch's reduction/multicast throughput relative to plain NVLink (ncclNvlsEfficiency gives it by arch). Errors:
/// kUnsupported unless every node has the same number of GPUs, exactly one NVSwitch vertex linked to all of them, and
/// the node count is a power of two; kInvalidArgument for bad counts.
Result<NvlsProgram> ncclNvlsProgram(const Topology& topology, int channels, int rounds, double nvls_efficiency);

/// NCCL's nvlsEfficiency for an arch row of NcclSystem::arch (0 Volta, 1 Ampere: 0 — no NVLS; 2 Hopper
/// 0.85; 3 Blackwell 0.74).
double ncclNvlsEfficiency(int arch);

}  // namespace braid
