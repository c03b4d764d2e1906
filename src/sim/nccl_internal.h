// Internal to braid_sim: NCCL's channel search (nccl_model.cc) as the baseline builder (nccl_baseline.cc) needs
// it — the channels' GPU orders, not only their count and bandwidth.
#pragma once

#include <vector>

#include "braid/nccl_model.h"

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

}  // namespace braid::nccl
