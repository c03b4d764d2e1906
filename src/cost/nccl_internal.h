// Internal to braid_cost, shared by NCCL's channel search (nccl_search.cc), its tuning model (nccl_tuning.cc), its
// p2p paths (nccl_p2p.cc) and the baseline builder (nccl_baseline.cc), which needs the channels' GPU orders, not
// only their count and bandwidth.
#pragma once

#include <string>
#include <vector>

#include "braid/nccl_model.h"
#include "braid/program_builder.h"

namespace braid::nccl {

/// NCCL path types in NCCL's order (nccl@2.28.9 src/graph/topo.h PATH_*); only compared with each other.
enum PathType {
  kPathLoc = 0,
  kPathNvl = 1,
  kPathNvb = 2,
  kPathC2c = 3,
  kPathPix = 4,
  kPathPxb = 5,
  kPathP2c = 6,
  kPathPxn = 7,
  kPathPhb = 8,
  kPathSys = 9,
  kPathNet = 10,
  kPathDis = 11
};
const char* pathTypeName(int type);  // "NVL", "PIX", ...
/// The PathType of a path class name ("LOC", "NVL", "NVB", "PIX", "PXB", "P2C", "PHB", "SYS", "NET"; others
/// kPathDis), e.g. of gpuNicPathClass's answer.
int pathTypeOf(const std::string& name);

/// NCCL_MAX_NVLS_ARITY: the most GPUs an NVLS group takes (its graph's channel cap; all-gather / reduce-scatter
/// NVLS is off above it).
inline constexpr int kMaxNvlsArity = 32;

/// The channels of one NCCL graph (ring or tree pattern) on one node, as NCCL's search lays them out:
/// orders[c] lists the node's GPU ranks in channel c's order (a ring's cycle on one node; across nodes the chain
/// from the GPU the channel's NIC feeds to the GPU that hands back to it); nics[c] is that NIC's vertex id
/// (-1 on one node). Duplicated channels (NCCL's ncclTopoDupChannels) repeat the orders of the first ones.
struct NodeChannels {
  std::vector<std::vector<int>> orders;
  std::vector<int> nics;
};

/// ncclSystem plus, per node with GPUs (in node order), the ring and tree channels behind it. Every node's
/// channel list is cut to the system's channel count (NCCL keeps the minimum over nodes).
struct SearchResult {
  NcclSystem system;
  std::vector<int> node_index;  // Topology::nodes index of each entry below
  std::vector<NodeChannels> ring;
  std::vector<NodeChannels> tree;
};

Result<SearchResult> search(const Topology& topology);

/// NCCL 2.28's point-to-point channel counts (ncclTopoComputeP2pChannels, ncclTopoGetNchannels in
/// src/graph/paths.cc): fills system.p2p_channels and system.p2p_channels_per_peer (see NcclSystem) from the ring's
/// channel count, the GPU pairs' routes and `nvlink_lane_gbps` (NCCL's per-link NVLink bandwidth for the arch).
void p2pChannelCounts(const Topology& topology, double nvlink_lane_gbps, NcclSystem& system);

/// How NCCL 2.28 routes each GPU pair's point-to-point traffic (nccl_p2p.cc): element s * numGpus() + d is the
/// rank of the GPU that relays s -> d, or -1 when s sends along Topology::route. On one node the relay is NCCL's
/// NVB intermediate GPU (two single NVLink hops, used when wider than the direct route); across nodes the PXN
/// proxy (the GPU owning the NIC of the peer's rail, NVLink-connected to the sender, PIX/PXB to that NIC).
/// Sources: nccl@2.28.9 src/graph/paths.cc ncclTopoSetPaths, ncclTopoCheckP2p, src/graph/search.cc
/// ncclTopoGetNetDev (NCCL_P2P_PXN_LEVEL=2), src/transport/p2p.cc and net.cc.
std::vector<int> p2pRelays(const Topology& topology);

/// NCCL's all-to-all (grouped send/recv of every pair) over `channels` channels, each pair's data split across
/// them (chunk p * channels + k of rank r goes to p on channel k): a pair with a relay in `relay` (p2pRelays) goes
/// sender -> relay (into the relay's scratch) -> receiver, the others directly; each forward runs on a channel of
/// its own after the `channels` plain ones (NCCL forwards every pair on its own connection, concurrently). Sends
/// and receives run on separate threadblocks (NCCL's p2p kernel does not make a peer's send wait for its receive);
/// in place, a chunk's arrival waits for the send of the slot it lands in. Errors: kInternalError when `relay` has
/// the wrong size.
Status buildP2pAllToAll(algos::ProgramBuilder& builder, const std::vector<int>& relay, int channels);

}  // namespace braid::nccl
