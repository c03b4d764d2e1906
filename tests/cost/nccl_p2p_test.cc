// NCCL's all-to-all baseline takes the p2p paths NCCL takes: NVB relays through an NVLink neighbour on a DGX-1
// (nothing over PCIe or the inter-socket link), PXN across nodes on a rail-optimised DGX H100 pair. The expected
// loads come from the topology's links alone; the measured ones from walking the IR's send steps over
// Topology::route of each hop.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "braid/nccl_model.h"
#include "braid/simulate.h"
#include "braid/topology.h"

namespace braid {
namespace {

Topology shipped(const std::string& name) {
  Result<Topology> t = loadTopologyOrShipped(name);
  EXPECT_TRUE(t.isOk()) << t.status().toString();
  return t.isOk() ? std::move(t).value() : Topology{};
}

bool sends(OpType op) {
  return op == OpType::kSend || op == OpType::kRecvCopySend || op == OpType::kRecvReduceSend ||
         op == OpType::kRecvReduceCopySend;
}

// Chunks each link carries: every send step's count along Topology::route(rank, send peer).
std::vector<long long> linkChunks(const Algorithm& a, const Topology& t) {
  std::vector<long long> load(t.links.size(), 0);
  for (const RankProgram& p : a.ranks) {
    for (const Threadblock& tb : p.threadblocks) {
      for (const Step& s : tb.steps) {
        if (!sends(s.type)) continue;
        EXPECT_GE(tb.send_peer, 0);
        std::optional<Route> r = t.route(p.rank, tb.send_peer);
        EXPECT_TRUE(r.has_value()) << p.rank << " -> " << tb.send_peer;
        if (!r) continue;
        for (int l : r->links) load[l] += s.count;
      }
    }
  }
  return load;
}

// Chunks each rank sends to each peer, [src][dst].
std::map<std::pair<int, int>, long long> pairChunks(const Algorithm& a) {
  std::map<std::pair<int, int>, long long> out;
  for (const RankProgram& p : a.ranks) {
    for (const Threadblock& tb : p.threadblocks) {
      for (const Step& s : tb.steps) {
        if (sends(s.type)) out[{p.rank, tb.send_peer}] += s.count;
      }
    }
  }
  return out;
}

int localIndex(const Topology& t, int rank) {
  const Node& node = t.nodes[t.vertices[t.gpuVertex(rank)].node];
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    if (node.gpus[i] == t.gpuVertex(rank)) return static_cast<int>(i);
  }
  return -1;
}

TEST(NcclP2p, Dgx1AllToAllRelaysOverNvlinkOnly) {
  const Topology t = shipped("dgx1-v100");
  const int n = t.numGpus();
  // Which GPU pairs have an NVLink, from the link list.
  std::vector<std::vector<bool>> nvlink(n, std::vector<bool>(n, false));
  for (const Link& l : t.links) {
    if (l.kind == LinkKind::kNvlink) nvlink[t.vertices[l.src].rank][t.vertices[l.dst].rank] = true;
  }
  int direct = 0, relayable = 0;
  for (int s = 0; s < n; ++s) {
    for (int d = 0; d < n; ++d) {
      if (s == d) continue;
      if (nvlink[s][d]) {
        ++direct;
        continue;
      }
      bool via = false;
      for (int m = 0; m < n; ++m) via = via || (nvlink[s][m] && nvlink[m][d]);
      ASSERT_TRUE(via) << s << " -> " << d;
      ++relayable;
      // Topology::route itself takes PCIe and the inter-socket link for these pairs.
      std::optional<Route> r = t.route(s, d);
      ASSERT_TRUE(r.has_value());
      EXPECT_NE(r->slowest_kind, LinkKind::kNvlink);
    }
  }
  ASSERT_EQ(direct, 32);     // 16 NVLink pairs, both directions
  ASSERT_EQ(relayable, 24);  // every other pair is two NVLink hops apart
  for (bool in_place : {false, true}) {
    SCOPED_TRACE(in_place ? "in place" : "out of place");
    Result<Algorithm> a =
        ncclBaselineAlgorithm(t, CollectiveKind::kAllToAll, NcclAlgo::kRing, in_place, Protocol::kSimple);
    ASSERT_TRUE(a.isOk()) << a.status().toString();
    const VerifyReport report = verify(*a);
    ASSERT_TRUE(report.ok) << report.toString();
    const long long K = ncclSystem(t)->p2p_channels_per_peer;  // each pair's data: one chunk per p2p channel
    const std::vector<long long> load = linkChunks(*a, t);
    long long on_nvlink = 0;
    for (size_t l = 0; l < t.links.size(); ++l) {
      if (t.links[l].kind == LinkKind::kNvlink) {
        on_nvlink += load[l];
      } else {
        EXPECT_EQ(load[l], 0) << "link " << l << " (" << t.vertices[t.links[l].src].name << " -> "
                              << t.vertices[t.links[l].dst].name << ")";
      }
    }
    EXPECT_EQ(on_nvlink, K * (direct + 2 * relayable));
  }
}

TEST(NcclP2p, DgxH100PairCrossesNodesOnThePeersRail) {
  const Topology t = shipped("dgx-h100-x2");
  const int n = t.numGpus();
  // Without PXN, GPU 4 (socket 1) reaches GPU 9 (node 1, rail 1) through the inter-socket link to NIC 1.
  std::optional<Route> plain = t.route(4, 9);
  ASSERT_TRUE(plain.has_value());
  bool crosses_sockets = false;
  for (int l : plain->links) crosses_sockets = crosses_sockets || t.links[l].kind == LinkKind::kSys;
  ASSERT_TRUE(crosses_sockets);

  Result<Algorithm> a = ncclBaselineAlgorithm(t, CollectiveKind::kAllToAll, NcclAlgo::kRing, false, Protocol::kSimple);
  ASSERT_TRUE(a.isOk()) << a.status().toString();
  const VerifyReport report = verify(*a);
  ASSERT_TRUE(report.ok) << report.toString();
  const long long K = ncclSystem(t)->p2p_channels_per_peer;
  const int nodes = 2, per_node = n / nodes;
  for (const auto& [pair, chunks] : pairChunks(*a)) {
    const auto [s, d] = pair;
    const bool same_node = t.vertices[t.gpuVertex(s)].node == t.vertices[t.gpuVertex(d)].node;
    if (!same_node) {
      // Every network transfer stays on one rail: sender and receiver have the same local index, and the
      // sender carries what its node's GPUs send to that GPU (K chunks each, its own included).
      EXPECT_EQ(localIndex(t, s), localIndex(t, d)) << s << " -> " << d;
      EXPECT_EQ(chunks, K * per_node) << s << " -> " << d;
    } else {
      // Its own chunks for d, plus those for the (nodes - 1) remote GPUs on d's rail, which d forwards.
      EXPECT_EQ(chunks, K * nodes) << s << " -> " << d;
    }
  }
  EXPECT_EQ(pairChunks(*a).size(), static_cast<size_t>(nodes * per_node * (per_node - 1) + n));
  const std::vector<long long> load = linkChunks(*a, t);
  for (size_t l = 0; l < t.links.size(); ++l) {
    const Link& link = t.links[l];
    const bool cpu = t.vertices[link.src].kind == VertexKind::kCpu || t.vertices[link.dst].kind == VertexKind::kCpu;
    if (cpu || link.kind == LinkKind::kSys) {
      EXPECT_EQ(load[l], 0) << t.vertices[link.src].name << " -> " << t.vertices[link.dst].name;
    }
  }
}

TEST(NcclP2p, NvSwitchNodeHasNoRelays) {
  // One NVSwitch node: every pair is NVL, so the program is the plain direct exchange (no scratch).
  const Topology t = shipped("dgx-h100-x1");
  Result<Algorithm> a = ncclBaselineAlgorithm(t, CollectiveKind::kAllToAll, NcclAlgo::kRing, false, Protocol::kSimple);
  ASSERT_TRUE(a.isOk()) << a.status().toString();
  for (const RankProgram& p : a->ranks) {
    for (const Threadblock& tb : p.threadblocks) {
      for (const Step& s : tb.steps) {
        EXPECT_NE(s.src_buf, BufferKind::kScratch);
        EXPECT_NE(s.dst_buf, BufferKind::kScratch);
      }
    }
  }
  const long long K = ncclSystem(t)->p2p_channels_per_peer;
  for (const auto& [pair, chunks] : pairChunks(*a)) EXPECT_EQ(chunks, K) << pair.first << " -> " << pair.second;
}

TEST(NcclP2p, RelayedAllToAllRunsInTheSimulator) {
  // The simulator runs MSCCL's slice-per-iteration FIFO semantics, which the symbolic verifier does not: a
  // relay's forwards must not pile up behind each other (2 x DGX-2 relays 15 GPUs' chunks through one proxy).
  for (const char* name : {"dgx1-v100", "dgx-h100-x2", "dgx2-x2", "ndv2-x2"}) {
    const Topology t = shipped(name);
    for (bool in_place : {false, true}) {
      Result<Algorithm> a =
          ncclBaselineAlgorithm(t, CollectiveKind::kAllToAll, NcclAlgo::kRing, in_place, Protocol::kSimple);
      ASSERT_TRUE(a.isOk()) << a.status().toString();
      double last = 0;
      for (uint64_t size : {uint64_t{1} << 10, uint64_t{1} << 20}) {
        SCOPED_TRACE(std::string(name) + (in_place ? " in place " : " ") + std::to_string(size));
        SimOptions options;
        options.size_bytes = size;
        options.in_place = in_place;
        Result<SimResult> r = simulate(*a, t, options);
        ASSERT_TRUE(r.isOk()) << r.status().toString();
        EXPECT_GT(r->time_us, last);
        last = r->time_us;
      }
    }
  }
}

}  // namespace
}  // namespace braid
