// Topology model: a directed multigraph of GPUs, NICs and switches joined by links.
//
// Units: bandwidth in GB/s (10^9 bytes/s) per direction, latency alpha in microseconds.
// A physical full-duplex link is two directed Links. GPUs are the ranks of a collective: GPU
// vertices carry rank 0..numGpus()-1, numbered node by node, and are named "gpu<rank>".
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "braid/status.h"

namespace braid {

enum class VertexKind {
  kGpu,
  kNic,
  kNvSwitch,    // NVSwitch fabric (all its ports folded into one vertex)
  kPcieSwitch,  // PCIe switch or root complex / host bridge
  kCpu,         // CPU socket (NUMA node); GPUs in different sockets meet through it (SYS)
  kNetSwitch,   // network switch (leaf/spine/rail)
};

enum class LinkKind {
  kNvlink,  // NVLink, direct or to an NVSwitch
  kPcie,    // PCIe (GPU/NIC to switch, switch to CPU)
  kSys,     // inter-socket (QPI/UPI/xGMI/SMP interconnect)
  kNet,     // NIC to network switch, switch to switch
  kC2c,     // chip-to-chip (Grace-Hopper)
};

const char* vertexKindName(VertexKind kind);  // "gpu", "nic", "nvswitch", "pcie_switch", "cpu", "net_switch"
const char* linkKindName(LinkKind kind);      // "nvlink", "pcie", "sys", "net", "c2c"
std::optional<VertexKind> parseVertexKind(const std::string& name);
std::optional<LinkKind> parseLinkKind(const std::string& name);

struct Vertex {
  int id = -1;  // index into Topology::vertices
  VertexKind kind = VertexKind::kGpu;
  std::string name;   // unique; GPUs are "gpu<rank>"
  int node = -1;      // index into Topology::nodes; -1 for vertices outside any node (network switches)
  int rank = -1;      // GPUs only: the collective rank
  int local = -1;     // index among vertices of the same kind inside the node (GPU i, NIC i, ...)
  std::string model;  // e.g. "V100-SXM2-16GB", "ConnectX-7"; may be empty
  std::string busid;  // PCI bus id when known (imported topologies)
  int numa = -1;      // NUMA node / CPU socket when known
};

struct Link {
  int src = -1;  // vertex id
  int dst = -1;  // vertex id
  LinkKind kind = LinkKind::kNvlink;
  double bandwidth_gbps = 0;  // GB/s in this direction, all lanes together
  double alpha_us = 0;        // per-transfer latency, microseconds
  int lanes = 1;              // parallel physical links folded into this one (NV1 = 1, NV2 = 2, ...)
};

struct Node {
  std::string name;       // e.g. "node0"
  std::string tmpl;       // template it was built from (YAML), may be empty
  std::vector<int> gpus;  // vertex ids, in local order
  std::vector<int> nics;  // vertex ids, in local order
};

/// A path between two vertices: the links in order, its bottleneck bandwidth and summed alpha.
struct Route {
  std::vector<int> links;  // indices into Topology::links
  double bandwidth_gbps = 0;
  double alpha_us = 0;
  LinkKind slowest_kind = LinkKind::kNvlink;  // kind of the bottleneck link
};

class Topology {
 public:
  std::string name;
  std::string source;  // file it came from, or "builtin:<name>"
  std::vector<Vertex> vertices;
  std::vector<Link> links;
  std::vector<Node> nodes;
  /// What an importer or builder assumed or ignored (one sentence each). Shown by `topo show`.
  std::vector<std::string> notes;

  int addNode(const std::string& name, const std::string& tmpl = "");
  /// Adds a vertex; GPUs get rank = number of GPUs added before and the name "gpu<rank>"
  /// (`name` is ignored for GPUs). Returns the vertex id.
  int addVertex(VertexKind kind, int node, const std::string& name = "");
  /// Adds one directed link; returns its index.
  int addLink(int src, int dst, LinkKind kind, double bandwidth_gbps, double alpha_us, int lanes = 1);
  /// Adds the two directions of a full-duplex link.
  void addDuplexLink(int a, int b, LinkKind kind, double bandwidth_gbps, double alpha_us, int lanes = 1);

  int numGpus() const;
  int numNodes() const { return static_cast<int>(nodes.size()); }
  /// Vertex id of the GPU with this rank, or -1.
  int gpuVertex(int rank) const;
  /// Vertex id by name, or -1.
  int findVertex(const std::string& name) const;
  std::vector<int> outLinks(int vertex) const;
  std::vector<int> inLinks(int vertex) const;
  /// Direct links src -> dst (vertex ids), possibly several.
  std::vector<int> linksBetween(int src, int dst) const;
  /// Best route between two GPU ranks that does not pass through a third GPU: the widest
  /// bottleneck, then the fewest hops, then the smallest alpha. Two GPUs of one node are routed
  /// inside the node and never over the network (as NCCL does). GPUs of different nodes leave and enter
  /// through their own nearest NIC (ties spread by GPU local index, as NCCL binds GPUs to NICs) when such a
  /// route exists. nullopt if none exists.
  std::optional<Route> route(int src_rank, int dst_rank) const;
};

/// Topology::route for every ordered pair of GPU ranks at once, in one vector: element a * numGpus() + b is
/// route(a, b) (nullopt on the diagonal and where no route exists). The same routes as route(a, b), computed with
/// each GPU's nearest NICs found once instead of once per pair.
std::vector<std::optional<Route>> allGpuRoutes(const Topology& topology);

/// Topology::route for many pairs asked in any order: the adjacency, each GPU's nearest NICs and the searches of the
/// `sources_kept` most recently used sources are built once and kept (as allGpuRoutes shares them), so routing every
/// destination of a source costs about one route. route(a, b) is exactly Topology::route(a, b). Not thread-safe; the
/// topology must outlive it.
class RouteCache {
 public:
  explicit RouteCache(const Topology& topology, int sources_kept = 8);
  ~RouteCache();
  RouteCache(const RouteCache&) = delete;
  RouteCache& operator=(const RouteCache&) = delete;
  std::optional<Route> route(int src_rank, int dst_rank);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// CUDA compute capability (SM x 10 + minor, e.g. 90 for sm_90) of a GPU named by `model`, as importers and the
/// YAML record it in Vertex::model: an explicit "sm<NN>" token ("sm90", "H100/H800 (sm90)") wins; otherwise a
/// product name, matched by whole tokens (letters and digits split at anything else, case-insensitive):
/// B100/B200/GB200 100; H100/H200/H800/H20/GH200 90; L4/L20/L40/L40S/RTX 40xx 89; A10/A10G/A16/A40/A2 and the
/// RTX A-series/RTX 30xx 86; A100/A800/A30 80; T4/RTX 20xx 75; V100 70; P100 60 (NVIDIA's CUDA GPU list).
/// nullopt for an empty or unrecognised model (e.g. "MI300X").
std::optional<int> gpuComputeCapability(const std::string& model);

/// Checks the model's invariants (ids, names, ranks, link ranges, no self-loops, nodes; parallel links allowed) and
/// that each GPU reaches every other by a chain of links. Errors name the file and the vertex, link or GPU pair.
Status validateTopology(const Topology& topology);

/// Loads any supported topology file, choosing the format from the content: Braid YAML,
/// NCCL topology XML (full dump or hint file), `nvidia-smi topo -m` text, TACCL profile JSON.
/// Errors name the file, line and field.
Result<Topology> loadTopology(const std::string& path);

/// Braid YAML (docs/formats/topology.md).
Result<Topology> readTopologyYaml(const std::string& text, const std::string& filename);
std::string writeTopologyYaml(const Topology& topology);

/// `{"name","source","gpus","nodes","vertices":[...],"links":[{"src","dst","kind","lanes","bandwidth_gbps",
/// "alpha_us"}],"nic_affinity":[{"gpu","nic","class","bandwidth_gbps","hops"}],"route_matrix":{"gpus","class",
/// "bandwidth_gbps"} (null above 32 GPUs),"notes":[...]}`. bandwidth_gbps is GB/s (bytes), per direction.
std::string topologyToJson(const Topology& topology);
/// Human-readable summary (what `braid topo show` prints).
std::string describeTopology(const Topology& topology);
/// SVG picture of GPUs, switches, NICs and links.
std::string drawTopologySvg(const Topology& topology);

/// loadTopology(path) when `file_or_name` is an existing file, otherwise the shipped topology of that
/// name (findShippedTopology). kNotFound names both possibilities when neither exists.
Result<Topology> loadTopologyOrShipped(const std::string& file_or_name);

/// Shipped topologies by name (e.g. "dgx1-v100", "dgx-a100-x2"): looks in the topologies/
/// directory (BRAID_TOPOLOGY_DIR, then the install and source locations).
Result<std::string> findShippedTopology(const std::string& name);
/// The names findShippedTopology finds (the .yaml files of those directories, without the extension), sorted,
/// each once; empty when no directory holds any.
std::vector<std::string> shippedTopologyNames();

/// One of a GPU's nearest NICs (nicAffinity).
struct NicAffinity {
  int rank = -1;              // the GPU's collective rank
  int nic_vertex = -1;        // vertex id of the NIC
  std::string path_class;     // NCCL path type of the route: "PIX", "PXB", "PHB", "SYS", ... (gpuNicPathClass)
  double bandwidth_gbps = 0;  // bottleneck bandwidth of the route, GB/s
  int hops = 0;               // links on the route
};

/// Best route from the GPU of rank `rank` to the NIC vertex `nic_vertex`, ranked as Topology::route ranks
/// GPU-GPU routes (widest bottleneck, then fewest hops, then least alpha). Intermediate vertices may be PCIe
/// switches, CPUs and NVSwitches, never another GPU, another NIC or a network switch. nullopt if none exists.
std::optional<Route> gpuNicRoute(const Topology& topology, int rank, int nic_vertex);

/// NCCL path type of a GPU -> NIC route (nccl src/graph/topo.h PATH_*; ../shared/reference/nccl_plugins.md
/// §4.3 uses them as typeIntra/typeInter), from the vertices and links on it:
///   "NVL" NVLink only;
///   "PIX" PCIe through at most one PCIe switch (PATH_PIX);
///   "PXB" PCIe through several PCIe switches, no CPU (PATH_PXB);
///   "P2C" through a chip-to-chip (C2C) link to the CPU, then PCIe (PATH_P2C, Grace-Hopper);
///   "PHB" through the CPU / host bridge of one socket (PATH_PHB; nvidia-smi splits it into PHB and NODE), also
///         when the route crosses a PCIe switch vertex named "host_bridge*" (how the nvidia-smi importer models
///         a PHB cluster);
///   "SYS" across the inter-socket link (a kSys link; PATH_SYS, nvidia-smi SYS);
///   "NET" through a network link (PATH_NET).
/// Listed from nearest to farthest; the order is NCCL's.
std::string gpuNicPathClass(const Topology& topology, const Route& route);

/// For every GPU, its nearest NIC(s) in the same node, chosen as NCCL's ncclTopoGetLocal chooses a GPU's local
/// NICs (nccl src/graph/topo.cc): the widest route bottleneck first, then the nearest path type
/// (gpuNicPathClass order); NICs that tie on both are all listed (hop counts may differ among them). Routes
/// come from gpuNicRoute, so none passes through another GPU. Sorted by rank, then by the NIC's local index;
/// a GPU with no reachable NIC in its node has no entry.
std::vector<NicAffinity> nicAffinity(const Topology& topology);

/// A GPU's nearest NICs (nicAffinity's ties, as vertex ids), starting with its traffic NIC: the one at position
/// (GPU local index mod number of ties) — GPUs that share a PCIe switch with as many NICs use one NIC each, as
/// NCCL spreads GPUs over equally close NICs (nccl src/graph/topo.cc ncclTopoGetLocalNet). Empty when the GPU
/// has no NIC in its node.
std::vector<int> nearestNics(const Topology& topology, int rank);

}  // namespace braid
