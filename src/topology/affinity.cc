// GPU -> NIC affinity: routes from a GPU to the NICs of its node (gpuNicRoute), their NCCL path type
// (gpuNicPathClass) and each GPU's nearest NICs (nicAffinity), chosen as NCCL's ncclTopoGetLocal does
// (nccl src/graph/topo.cc: widest path first, then the lowest path type; ties all kept).

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "braid/topology.h"
#include "topology/paths.h"

namespace braid {

namespace {

// Path types in NCCL's order (nccl src/graph/topo.h PATH_NVL < PATH_PIX < PATH_PXB < PATH_P2C < PATH_PHB <
// PATH_SYS < PATH_NET); the numbers are only compared with each other.
int pathTypeOrder(const std::string& path_class) {
  static const char* const kOrder[] = {"NVL", "PIX", "PXB", "P2C", "PHB", "SYS", "NET"};
  for (int i = 0; i < static_cast<int>(std::size(kOrder)); ++i) {
    if (path_class == kOrder[i]) return i;
  }
  return static_cast<int>(std::size(kOrder));
}

// Bottleneck bandwidths computed from the same link values compare equal up to rounding.
bool sameBandwidth(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(std::abs(a), std::abs(b)); }

// GPUs, NICs and network switches are never relays: a GPU -> NIC route stays on the node's PCIe/CPU fabric.
Router nicRouter(const Topology& t) {
  return Router(t, [&t](int v) {
    const VertexKind k = t.vertices[v].kind;
    return k == VertexKind::kPcieSwitch || k == VertexKind::kCpu || k == VertexKind::kNvSwitch;
  });
}

bool isGpuVertex(const Topology& t, int v) {
  return v >= 0 && v < static_cast<int>(t.vertices.size()) && t.vertices[v].kind == VertexKind::kGpu;
}
bool isNicVertex(const Topology& t, int v) {
  return v >= 0 && v < static_cast<int>(t.vertices.size()) && t.vertices[v].kind == VertexKind::kNic;
}

}  // namespace

std::optional<Route> gpuNicRoute(const Topology& t, int rank, int nic_vertex) {
  const int gpu = t.gpuVertex(rank);
  if (!isGpuVertex(t, gpu) || !isNicVertex(t, nic_vertex)) return std::nullopt;
  return nicRouter(t).best(gpu, nic_vertex);
}

std::string gpuNicPathClass(const Topology& t, const Route& r) {
  bool all_nvlink = !r.links.empty(), any_net = false, any_sys = false, any_c2c = false, host_bridge = false;
  int pcie_switches = 0;
  for (size_t i = 0; i < r.links.size(); ++i) {
    const Link& l = t.links[r.links[i]];
    all_nvlink = all_nvlink && l.kind == LinkKind::kNvlink;
    any_net = any_net || l.kind == LinkKind::kNet;
    any_sys = any_sys || l.kind == LinkKind::kSys;
    any_c2c = any_c2c || l.kind == LinkKind::kC2c;
    if (i + 1 == r.links.size()) continue;  // the destination is not crossed
    const Vertex& via = t.vertices[l.dst];
    if (via.kind == VertexKind::kCpu) host_bridge = true;
    if (via.kind == VertexKind::kPcieSwitch) {
      ++pcie_switches;
      if (via.name.find("host_bridge") != std::string::npos) host_bridge = true;
    }
  }
  if (all_nvlink) return "NVL";
  if (any_net) return "NET";
  if (any_sys) return "SYS";
  if (any_c2c) return "P2C";
  if (host_bridge) return "PHB";
  return pcie_switches > 1 ? "PXB" : "PIX";
}

namespace {

// The nearest NICs of one GPU (ties all listed), as nicAffinity describes.
std::vector<NicAffinity> gpuAffinity(const Topology& t, const Router& router, int rank) {
  std::vector<NicAffinity> best;
  const int gpu = t.gpuVertex(rank);
  if (!isGpuVertex(t, gpu)) return best;
  const int node = t.vertices[gpu].node;
  if (node < 0 || node >= t.numNodes()) return best;
  Router::From from(router, gpu);
  for (int nic : t.nodes[node].nics) {
    if (!isNicVertex(t, nic)) continue;
    std::optional<Route> r = from.best(nic);
    if (!r) continue;
    NicAffinity a;
    a.rank = rank;
    a.nic_vertex = nic;
    a.path_class = gpuNicPathClass(t, *r);
    a.bandwidth_gbps = r->bandwidth_gbps;
    a.hops = static_cast<int>(r->links.size());
    if (!best.empty()) {
      const NicAffinity& b = best.front();
      const bool wider = a.bandwidth_gbps > b.bandwidth_gbps && !sameBandwidth(a.bandwidth_gbps, b.bandwidth_gbps);
      const bool same_width = sameBandwidth(a.bandwidth_gbps, b.bandwidth_gbps);
      const int order_a = pathTypeOrder(a.path_class), order_b = pathTypeOrder(b.path_class);
      if (wider || (same_width && order_a < order_b)) {
        best.clear();
      } else if (!same_width || order_a > order_b) {
        continue;
      }
    }
    best.push_back(a);
  }
  return best;
}

}  // namespace

std::vector<NicAffinity> nicAffinity(const Topology& t) {
  std::vector<NicAffinity> result;
  const Router router = nicRouter(t);
  const int gpus = t.numGpus();
  for (int rank = 0; rank < gpus; ++rank) {
    std::vector<NicAffinity> best = gpuAffinity(t, router, rank);
    result.insert(result.end(), best.begin(), best.end());
  }
  return result;
}

std::vector<int> nearestNics(const Topology& t, int rank) {
  const std::vector<NicAffinity> best = gpuAffinity(t, nicRouter(t), rank);
  if (best.empty()) return {};
  // Rotate so that the traffic NIC (GPU local index mod ties) comes first.
  const int gpu = t.gpuVertex(rank);
  const size_t first = static_cast<size_t>(std::max(0, t.vertices[gpu].local)) % best.size();
  std::vector<int> nics;
  for (size_t i = 0; i < best.size(); ++i) nics.push_back(best[(first + i) % best.size()].nic_vertex);
  return nics;
}

}  // namespace braid
