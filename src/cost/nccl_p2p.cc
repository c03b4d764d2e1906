// NCCL 2.28's point-to-point paths (nccl::p2pRelays) and its all-to-all built on them (nccl::buildP2pAllToAll).
//
// NCCL runs all-to-all as grouped ncclSend/ncclRecv, one connection per pair, and picks the path of each pair as
// its topology code does (nccl@2.28.9 src/graph/paths.cc; restated here, not copied):
//   * NVB. ncclTopoSetPaths builds every GPU's paths by a breadth-first search that may pass through one GPU, and
//     only over NVLink ("Set 1 hop NVLink as NVB"); it replaces a path when the new one is wider. So two GPUs
//     without an NVLink between them, but each NVLink-linked to a third GPU, get a PATH_NVB path through that GPU
//     whenever it is wider than their PCIe / inter-socket path, and ncclTopoCheckP2p returns that GPU as the
//     intermediate rank: the P2P transport (src/transport/p2p.cc) places the connection's buffer in the
//     intermediate GPU's memory, the sender writes it over NVLink and the receiver reads it over NVLink.
//     NCCL_NVB_DISABLE=0 by default.
//   * PXN. Across nodes the sender uses the NIC of the local GPU that has the peer's device index (the peer's rail;
//     ncclTopoGetNetDev with NCCL_P2P_PXN_LEVEL=2, its default, and NCCL_PXN_DISABLE=0). When that NIC's own GPU
//     (ncclTopoGetLocalGpu) is NVLink-connected to the sender (path NVL) and reaches the NIC through PCIe switches
//     only (path PIX or PXB), that GPU becomes the proxy rank: the sender writes over NVLink into its memory and it
//     sends through the NIC (src/transport/net.cc sendSetup; the receiver always receives on its own NIC).
// In the IR the intermediate GPU receives the pair's data into scratch and forwards it, which moves the bytes over
// the same links as NCCL's intermediate buffer does (sender -> intermediate -> receiver).
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "braid/program_builder.h"
#include "cost/nccl_internal.h"

namespace braid::nccl {
namespace {

using algos::Loc;
using algos::ProgramBuilder;
using algos::StepRef;

// The route's links are all NVLink (directly or through NVSwitches): NCCL's PATH_NVL.
bool allNvlink(const Topology& t, const std::optional<Route>& r) {
  if (!r || r->links.empty()) return false;
  for (int l : r->links) {
    if (t.links[l].kind != LinkKind::kNvlink) return false;
  }
  return true;
}

// The route is one NVLink link, GPU to GPU: the only hop NCCL's path search lets a path take next to a GPU it
// passes through.
bool oneNvlinkHop(const Topology& t, const std::optional<Route>& r) {
  return r && r->links.size() == 1 && t.links[r->links[0]].kind == LinkKind::kNvlink;
}

// NVB: the intermediate GPU for s -> d on one node, or -1. The widest two-hop NVLink path wins when it is wider
// than the direct route; ties go to the widest last hop (the breadth-first search starts at the destination with
// its links sorted widest first, ncclTopoSort), then to the lowest rank.
int nvbRelay(const Topology& t, const std::vector<std::optional<Route>>& routes, int n, int s, int d) {
  const std::optional<Route>& direct = routes[static_cast<size_t>(s) * n + d];
  if (allNvlink(t, direct)) return -1;
  const double direct_bw = direct ? direct->bandwidth_gbps : 0;
  int best = -1;
  double best_bw = direct_bw, best_last = 0;
  const int node = t.vertices[t.gpuVertex(s)].node;
  for (int vid : t.nodes[node].gpus) {
    const int m = t.vertices[vid].rank;
    if (m == s || m == d) continue;
    const std::optional<Route>& first = routes[static_cast<size_t>(s) * n + m];
    const std::optional<Route>& last = routes[static_cast<size_t>(m) * n + d];
    if (!oneNvlinkHop(t, first) || !oneNvlinkHop(t, last)) continue;
    const double bw = std::min(first->bandwidth_gbps, last->bandwidth_gbps);
    if (bw > best_bw + 1e-9 || (best >= 0 && bw >= best_bw - 1e-9 && last->bandwidth_gbps > best_last + 1e-9)) {
      best = m;
      best_bw = bw;
      best_last = last->bandwidth_gbps;
    }
  }
  return best;
}

// ncclTopoGetLocalGpu: the NIC's own GPU — among the node's GPUs nearest to the NIC (widest route, then nearest
// path type), the first whose traffic NIC it is, else the first of them. -1 when no GPU reaches it.
int nicLocalGpu(const Topology& t, int node, int nic, int* path_type) {
  std::vector<int> nearest;
  double best_bw = -1;
  int best_type = kPathDis;
  for (int vid : t.nodes[node].gpus) {
    const int g = t.vertices[vid].rank;
    std::optional<Route> r = gpuNicRoute(t, g, nic);
    if (!r) continue;
    const int type = pathTypeOf(gpuNicPathClass(t, *r));
    if (r->bandwidth_gbps > best_bw + 1e-9 || (r->bandwidth_gbps >= best_bw - 1e-9 && type < best_type)) {
      nearest.clear();
      best_bw = r->bandwidth_gbps;
      best_type = type;
    }
    if (r->bandwidth_gbps >= best_bw - 1e-9 && type == best_type) nearest.push_back(g);
  }
  if (nearest.empty()) return -1;
  *path_type = best_type;
  for (int g : nearest) {
    const std::vector<int> own = nearestNics(t, g);
    if (!own.empty() && own[0] == nic) return g;
  }
  return nearest.front();
}

// The PXN candidate of each (node, local GPU index): the NIC local GPU (nicLocalGpu) of the first NIC nearest to
// that GPU, with its path type to the NIC; -1 when the GPU has no NIC. Computed once per node and index, since
// every GPU of a node sends to a peer with that index through it.
struct PxnProxy {
  int proxy = -1;
  int type = kPathDis;
};

std::vector<std::vector<PxnProxy>> pxnProxies(const Topology& t) {
  std::vector<std::vector<PxnProxy>> out(t.nodes.size());
  for (size_t q = 0; q < t.nodes.size(); ++q) {
    for (int vid : t.nodes[q].gpus) {
      PxnProxy p;
      const std::vector<int> nics = nearestNics(t, t.vertices[vid].rank);
      if (!nics.empty()) p.proxy = nicLocalGpu(t, static_cast<int>(q), nics[0], &p.type);
      out[q].push_back(p);
    }
  }
  return out;
}

// PXN: the proxy GPU for s -> d across nodes, or -1 (s sends through its own NIC): the proxy of s's node for d's
// local index, when it is not s, reaches its NIC through PCIe switches only (PIX/PXB) and has an NVLink route
// from s.
int pxnRelay(const Topology& t, const std::vector<std::optional<Route>>& routes,
             const std::vector<std::vector<PxnProxy>>& proxies, int n, int s, int d) {
  const int src_node = t.vertices[t.gpuVertex(s)].node;
  const Node& dst_node = t.nodes[t.vertices[t.gpuVertex(d)].node];
  const auto pos = std::find(dst_node.gpus.begin(), dst_node.gpus.end(), t.gpuVertex(d));
  const size_t index = static_cast<size_t>(pos - dst_node.gpus.begin());
  if (index >= proxies[src_node].size()) return -1;  // no local GPU with the peer's device index
  const PxnProxy& p = proxies[src_node][index];
  if (p.proxy < 0 || p.proxy == s || p.type > kPathPxb) return -1;
  return allNvlink(t, routes[static_cast<size_t>(s) * n + p.proxy]) ? p.proxy : -1;
}

}  // namespace

namespace {

int pow2Up(int x) {
  int p = 1;
  while (p < x) p *= 2;
  return p;
}

// getLocalNetCountByBw (paths.cc): how many of the GPU's nearest NICs it takes, in order, for their bandwidth to
// reach the GPU's bandwidth to its CPU. NCCL reads that bandwidth from a GPU -> CPU link; a GPU behind a PCIe switch
// has none, and the count is 0.
int localNetCountByBw(const Topology& t, int rank) {
  const int gv = t.gpuVertex(rank);
  double gpu_bw = 0;
  for (const Link& l : t.links) {
    if (l.src == gv && t.vertices[l.dst].kind == VertexKind::kCpu) gpu_bw = l.bandwidth_gbps;
  }
  int count = 0;
  double total = 0;
  for (int nic : nearestNics(t, rank)) {
    if (total >= gpu_bw) break;
    const std::optional<Route> r = gpuNicRoute(t, rank, nic);
    total += r ? r->bandwidth_gbps : 0;
    ++count;
  }
  return count;
}

// ncclTopoGetNchannels for a local peer r of rank g: 2 x the NVLink lanes of an all-NVLink route, else 2.
int channelsToLocalPeer(const Topology& t, double nvlink_lane_gbps, int g, int r) {
  const std::optional<Route> path = t.route(r, g);
  if (allNvlink(t, path) && nvlink_lane_gbps > 0) {
    return 2 * std::max(1, static_cast<int>(path->bandwidth_gbps / nvlink_lane_gbps + 1e-9));
  }
  return 2;  // PCIe, inter-socket, or an NVB path through a third GPU
}

// ncclTopoGetNchannels for any remote peer of rank g (NCCL_NCHANNELS_PER_NET_PEER = -1, auto): 2 per NIC, halved
// while 8+ operations would share a channel, at least the NICs g needs. `p2p_channels` is the communicator's
// un-rounded p2p channel count.
int channelsToRemotePeer(const Topology& t, int p2p_channels, int g) {
  int max_channels = 2;
  while (max_channels * t.numGpus() > p2p_channels * 4 && max_channels > 1) max_channels /= 2;
  return std::max(localNetCountByBw(t, g), max_channels);
}

}  // namespace

void p2pChannelCounts(const Topology& t, double nvlink_lane_gbps, NcclSystem& system) {
  constexpr int kMaxP2pChannels = 64;  // NCCL_MAX_P2P_NCHANNELS default: MAXCHANNELS
  const int n = t.numGpus();
  const int p2p = std::clamp(system.ring.channels, 1, kMaxP2pChannels);
  int fewest = p2p;
  for (int g = 0; g < n; ++g) {
    const Node& node = t.nodes[t.vertices[t.gpuVertex(g)].node];
    for (int vid : node.gpus) {
      const int r = t.vertices[vid].rank;
      if (r != g) fewest = std::min(fewest, channelsToLocalPeer(t, nvlink_lane_gbps, g, r));
    }
    if (static_cast<int>(node.gpus.size()) < n) fewest = std::min(fewest, channelsToRemotePeer(t, p2p, g));
  }
  system.p2p_channels = std::min(pow2Up(p2p), kMaxP2pChannels);
  system.p2p_channels_per_peer = std::min(pow2Up(fewest), system.p2p_channels);
}

std::vector<int> p2pRelays(const Topology& t) {
  const int n = t.numGpus();
  const std::vector<std::optional<Route>> routes = allGpuRoutes(t);
  const std::vector<std::vector<PxnProxy>> proxies = pxnProxies(t);
  std::vector<int> relay(static_cast<size_t>(n) * n, -1);
  for (int s = 0; s < n; ++s) {
    for (int d = 0; d < n; ++d) {
      if (s == d) continue;
      const int sv = t.gpuVertex(s), dv = t.gpuVertex(d);
      const int sn = t.vertices[sv].node, dn = t.vertices[dv].node;
      if (sn < 0 || dn < 0) continue;
      relay[static_cast<size_t>(s) * n + d] =
          sn == dn ? nvbRelay(t, routes, n, s, d) : pxnRelay(t, routes, proxies, n, s, d);
    }
  }
  return relay;
}

namespace {

// The all-to-all on channel k. Rank r talks to peer p on two threadblocks for every connection r <-> p that a
// first hop uses: a send-only one (r -> p) and a receive-only one (p -> r), as NCCL's p2p kernel runs a peer's send
// and its receive on separate warps that do not wait for each other (nccl src/device/sendrecv.h). The send
// threadblock sends r's own chunk for p (when direct), then r's chunks that p relays, in destination order; the
// receive threadblock takes p's own chunk for r, then p's chunks that r relays (into r's scratch), in the same
// order as p sends them. Then every relay forwards each chunk it holds on a send-only threadblock of its own channel
// (channels after the K plain ones), to a receive-only threadblock at the destination; a forward waits only on its
// receive. In place, a chunk that lands in a rank's buffer waits for the send that read that slot.
class P2pChannel {
 public:
  /// `origins[m * n + d]`: the ranks whose chunks for d relay m forwards, ascending; forward f of them runs on
  /// channel forward_base + f.
  P2pChannel(ProgramBuilder& b, const std::vector<int>& relay, const std::vector<std::vector<int>>& origins,
             int channels, int k, int forward_base)
      : b_(b), relay_(relay), origins_(origins), n_(b.numRanks()), K_(channels), k_(k), forward_base_(forward_base) {
    send_tb_.assign(static_cast<size_t>(n_) * n_, -1);
    recv_tb_.assign(static_cast<size_t>(n_) * n_, -1);
    sent_.assign(static_cast<size_t>(n_) * n_, StepRef{});
    held_.assign(static_cast<size_t>(n_) * n_, StepRef{});
    slot_.assign(static_cast<size_t>(n_) * n_, -1);
  }

  /// `scratch_next[r]`: the next free scratch chunk of rank r (shared by all channels).
  void build(std::vector<int>& scratch_next) {
    openThreadblocks();
    for (int r = 0; r < n_; ++r) {
      for (int i = 1; i < n_; ++i) sends(r, (r + i) % n_);
    }
    for (int r = 0; r < n_; ++r) {
      for (int i = 1; i < n_; ++i) receives(r, (r + i) % n_, scratch_next);
    }
    for (int r = 0; r < n_; ++r) {
      for (int d = 0; d < n_; ++d) forwards(r, d);
    }
  }

 private:
  int relayOf(int s, int d) const { return relay_[idx(s, d)]; }
  size_t idx(int a, int b) const { return static_cast<size_t>(a) * n_ + b; }

  // Threadblocks per rank in peer order r+1, r+2, ...: the send one, then the receive one, for each peer a first
  // hop connects r to.
  void openThreadblocks() {
    std::vector<bool> used(static_cast<size_t>(n_) * n_, false);  // [a][c]: a sends to c on a first hop
    for (int s = 0; s < n_; ++s) {
      for (int d = 0; d < n_; ++d) {
        if (s == d) continue;
        const int m = relayOf(s, d);
        used[idx(s, m < 0 ? d : m)] = true;
      }
    }
    for (int r = 0; r < n_; ++r) {
      for (int i = 1; i < n_; ++i) {
        const int p = (r + i) % n_;
        if (used[idx(r, p)]) send_tb_[idx(r, p)] = b_.newTb(r, p, -1, k_);
        if (used[idx(p, r)]) recv_tb_[idx(r, p)] = b_.newTb(r, -1, p, k_);
      }
    }
  }

  Loc chunk(int r, int peer) const { return b_.in(r, peer * K_ + k_); }

  // r's chunks that go to p on a first hop: its own for p when direct, then those p relays, by destination.
  void sends(int r, int p) {
    const int tb = send_tb_[idx(r, p)];
    if (tb < 0) return;
    if (relayOf(r, p) < 0) sent_[idx(r, p)] = b_.send(r, tb, chunk(r, p), 1);
    for (int i = 1; i < n_; ++i) {
      const int d = (r + i) % n_;
      if (d != p && relayOf(r, d) == p) sent_[idx(r, d)] = b_.send(r, tb, chunk(r, d), 1);
    }
  }

  // What p sends r on a first hop, in p's order: p's own chunk for r (into r's output), then p's chunks that r
  // relays (into r's scratch).
  void receives(int r, int p, std::vector<int>& scratch_next) {
    const int tb = recv_tb_[idx(r, p)];
    if (tb < 0) return;
    if (relayOf(p, r) < 0) b_.recv(r, tb, b_.out(r, p * K_ + k_), 1, landingDeps(r, p));
    for (int i = 1; i < n_; ++i) {
      const int d = (p + i) % n_;
      if (d == r || relayOf(p, d) != r) continue;
      const int slot = scratch_next[r]++;
      slot_[idx(p, d)] = slot;
      held_[idx(p, d)] = b_.recv(r, tb, ProgramBuilder::scratch(slot), 1);
    }
  }

  // In place, s's chunk landing in r's buffer waits for the send that read r's chunk for s out of that slot.
  std::vector<StepRef> landingDeps(int r, int s) const {
    if (!b_.same(b_.out(r, s * K_ + k_), chunk(r, s))) return {};
    return {sent_[idx(r, s)]};
  }

  // Relay r forwards to d every chunk it holds for d, each on its own channel: NCCL's intermediate GPU (NVB) and
  // proxy (PXN) move every pair on its own connection, concurrently, not one after another.
  void forwards(int r, int d) {
    const std::vector<int>& from = origins_[idx(r, d)];
    for (size_t f = 0; f < from.size(); ++f) {
      const int s = from[f];
      const int channel = forward_base_ + static_cast<int>(f);
      b_.send(r, b_.newTb(r, d, -1, channel), ProgramBuilder::scratch(slot_[idx(s, d)]), 1, {held_[idx(s, d)]});
      b_.recv(d, b_.newTb(d, -1, r, channel), b_.out(d, s * K_ + k_), 1, landingDeps(d, s));
    }
  }

  ProgramBuilder& b_;
  const std::vector<int>& relay_;
  const std::vector<std::vector<int>>& origins_;
  const int n_, K_, k_, forward_base_;
  std::vector<int> send_tb_;   // [r][p]: r's threadblock sending to p on this channel, -1 if none
  std::vector<int> recv_tb_;   // [r][p]: r's threadblock receiving from p on this channel, -1 if none
  std::vector<StepRef> sent_;  // [r][d]: the step that sends r's chunk for d out of r
  std::vector<StepRef> held_;  // [s][d]: the relay's receive of s's chunk for d
  std::vector<int> slot_;      // [s][d]: the relay's scratch chunk holding it
};

}  // namespace

Status buildP2pAllToAll(algos::ProgramBuilder& b, const std::vector<int>& relay, int channels) {
  const int n = b.numRanks();
  if (static_cast<int>(relay.size()) != n * n) {
    return internalError(fmt::format("p2p relays: {} entries for {} ranks", relay.size(), n));
  }
  for (int r = 0; r < n; ++r) {
    const Loc src = b.in(r, r * channels);
    const Loc dst = b.out(r, r * channels);
    if (!b.same(src, dst)) b.copy(r, b.newTb(r, -1, -1, 0), src, dst, channels);
  }
  std::vector<std::vector<int>> origins(static_cast<size_t>(n) * n);
  size_t most = 0;
  for (int s = 0; s < n; ++s) {
    for (int d = 0; d < n; ++d) {
      const int m = s == d ? -1 : relay[static_cast<size_t>(s) * n + d];
      if (m < 0) continue;
      std::vector<int>& from = origins[static_cast<size_t>(m) * n + d];
      from.push_back(s);
      most = std::max(most, from.size());
    }
  }
  std::vector<int> scratch_next(n, 0);
  for (int k = 0; k < channels; ++k) {
    const int forward_base = channels + k * static_cast<int>(most);
    P2pChannel(b, relay, origins, channels, k, forward_base).build(scratch_next);
  }
  return Status::ok();
}

}  // namespace braid::nccl
