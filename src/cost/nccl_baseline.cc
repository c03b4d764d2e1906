// NCCL's algorithms built in the IR (include/braid/nccl_model.h, ncclBaselineAlgorithm), with the channels NCCL's
// search lays out (nccl::search in nccl_model.cc):
//   Ring  — one ring per channel, NcclSystem::ring.channels of them, data split evenly across channels. On one
//           node a channel's ring is the cycle the search found (NVLink rings on a DGX-1, any order through an
//           NVSwitch); across nodes it is the nodes' chains in node order, each entering its node at the GPU its
//           NIC feeds and leaving from the GPU that hands back to that NIC (nccl@2.28.9 src/graph/search.cc ring
//           pattern "NET n -> GPU a -> ... -> GPU x -> NET n"). Costs: anchors_algorithms.md §4 (ring rows).
//   Tree  — all-reduce only (NCCL's tree runs no other collective): per channel, a chain through each node's GPUs
//           (the tree graph's channel order) and, across nodes, a binary tree over the nodes' chain heads — the two
//           trees of NCCL's double binary tree (src/graph/trees.cc ncclGetDtree; Braid's binaryTreeParents with
//           shifts 0 and nNodes-1) on alternating channels. On one node NCCL's tree is just the chain. Each
//           channel reduces its share up to the root and broadcasts it back down (Sanders et al. 2009).
//   All-to-all — NCCL runs it as grouped ncclSend/ncclRecv, every pair at once, each pair's data split over NCCL's
//           p2p channels per peer (NcclSystem::p2p_channels_per_peer), each pair on the path NCCL's p2p picks
//           (nccl_p2p.cc): straight
//           along Topology::route, through an NVLink neighbour (NVB) when two GPUs of a node lack a direct NVLink,
//           and across nodes through the GPU next to the peer's rail NIC (PXN).
//   NVLS, NVLSTree, CollNetDirect, CollNetChain need in-network reduction (NVLink SHARP, SHARP) that GPU-rank
//   programs cannot express (ncclNvlsProgram emulates NVLS for the simulator only); PAT is not built.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "braid/classic_blocks.h"
#include "braid/nccl_model.h"
#include "cost/nccl_internal.h"

namespace braid {
namespace {

using algos::Loc;
using algos::ProgramBuilder;
using algos::StepRef;

// Per channel: each rank's parent (-1 at the root) and children, in the order their data is reduced.
struct ChannelTree {
  std::vector<int> parent;
  std::vector<std::vector<int>> children;
};

// The channel's tree: node chains (from the tree graph) joined by a binary tree over the nodes' first GPUs.
ChannelTree channelTree(const nccl::SearchResult& sr, int num_ranks, int channel) {
  ChannelTree tree;
  tree.parent.assign(num_ranks, -1);
  tree.children.assign(num_ranks, {});
  const int m = static_cast<int>(sr.tree.size());
  std::vector<int> head(m, -1);
  for (int q = 0; q < m; ++q) {
    const std::vector<int>& chain = sr.tree[q].orders[channel];
    head[q] = chain.front();
    for (size_t i = 1; i < chain.size(); ++i) {
      tree.parent[chain[i]] = chain[i - 1];
      tree.children[chain[i - 1]].push_back(chain[i]);
    }
  }
  if (m > 1) {
    const int shift = channel % 2 == 0 ? 0 : m - 1;
    const std::vector<int> node_parent = algos::binaryTreeParents(m, shift);
    const std::vector<std::vector<int>> node_children = algos::binaryTreeChildren(m, shift);
    for (int q = 0; q < m; ++q) {
      if (node_parent[q] >= 0) tree.parent[head[q]] = head[node_parent[q]];
      for (int c : node_children[q]) tree.children[head[q]].push_back(head[c]);
    }
  }
  return tree;
}

// Tree all-reduce: channel c owns chunk c. A rank folds its children's partial sums into its output chunk one
// after the other, sends the sum to its parent, receives the result and passes it down. The way up and the way
// down run on separate threadblocks, as NCCL splits a tree channel's warps between reduce and broadcast
// (nccl src/device/all_reduce.h, runTreeSplit), so slices pipeline both ways at once.
void buildTreeAllReduce(ProgramBuilder& b, const std::vector<ChannelTree>& trees) {
  const int n = b.numRanks();
  for (int c = 0; c < static_cast<int>(trees.size()); ++c) {
    const ChannelTree& tree = trees[c];
    for (int r = 0; r < n; ++r) {
      StepRef reduced;
      for (int child : tree.children[r]) {
        const int up = b.newTb(r, -1, child, c);
        reduced = b.recvReduceCopy(r, up, reduced.valid() ? b.out(r, c) : b.in(r, c), b.out(r, c), 1, {reduced});
      }
      StepRef have_result = reduced;
      if (tree.parent[r] >= 0) {
        b.send(r, b.newTb(r, tree.parent[r], -1, c), reduced.valid() ? b.out(r, c) : b.in(r, c), 1, {reduced});
        have_result = b.recv(r, b.newTb(r, -1, tree.parent[r], c), b.out(r, c), 1);
      } else if (!reduced.valid() && !b.same(b.in(r, c), b.out(r, c))) {
        have_result = b.copy(r, b.newTb(r, -1, -1, c), b.in(r, c), b.out(r, c), 1);  // a root without children
      }
      for (int child : tree.children[r]) b.send(r, b.newTb(r, child, -1, c), b.out(r, c), 1, {have_result});
    }
  }
}

// What the p2p paths relay, for the algorithm's notes; empty when every pair goes straight.
std::string relayNote(const Topology& t, const std::vector<int>& relays) {
  const int n = t.numGpus();
  int nvb = 0, pxn = 0;
  for (int s = 0; s < n; ++s) {
    for (int d = 0; d < n; ++d) {
      if (relays[static_cast<size_t>(s) * n + d] < 0) continue;
      ++(t.vertices[t.gpuVertex(s)].node == t.vertices[t.gpuVertex(d)].node ? nvb : pxn);
    }
  }
  if (nvb + pxn == 0) return "";
  return fmt::format(
      "p2p paths as NCCL picks them: {} pair(s) relayed through an NVLink neighbour (NVB), {} through the GPU of "
      "the peer's rail NIC (PXN); the relay receives into scratch and forwards",
      nvb, pxn);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return s;
}

}  // namespace

Result<Algorithm> ncclBaselineAlgorithm(const Topology& topology, CollectiveKind collective, NcclAlgo algo,
                                        bool in_place, Protocol protocol) {
  switch (algo) {
    case NcclAlgo::kNvls:
    case NcclAlgo::kNvlsTree:
      return unsupported(fmt::format(
          "NCCL's {} reduces inside the NVSwitch (NVLink SHARP multimem loads/stores); an IR program of GPU ranks "
          "cannot express it (ncclNvlsProgram builds a simulation-only emulation)",
          ncclAlgoName(algo)));
    case NcclAlgo::kCollNetDirect:
    case NcclAlgo::kCollNetChain:
      return unsupported(fmt::format(
          "NCCL's {} reduces inside the network switches (SHARP); an IR program of GPU ranks cannot express it",
          ncclAlgoName(algo)));
    case NcclAlgo::kPat:
      return unsupported("NCCL's PAT (one GPU per node, log-latency all-gather/reduce-scatter) is not built by Braid");
    case NcclAlgo::kRing:
    case NcclAlgo::kTree: break;
  }
  const bool a2a = collective == CollectiveKind::kAllToAll;
  if (collective != CollectiveKind::kAllGather && collective != CollectiveKind::kReduceScatter &&
      collective != CollectiveKind::kAllReduce && !a2a) {
    return invalidArgument(fmt::format("NCCL baseline: {} is not built (allgather, reducescatter, allreduce, alltoall)",
                                       collectiveName(collective)));
  }
  if (algo == NcclAlgo::kTree && !a2a && collective != CollectiveKind::kAllReduce) {
    return invalidArgument(fmt::format("NCCL's Tree runs all-reduce only; {} uses Ring (or PAT/NVLS) in NCCL",
                                       collectiveName(collective)));
  }
  BRAID_ASSIGN_OR_RETURN(nccl::SearchResult sr, nccl::search(topology));
  const NcclSystem& sys = sr.system;
  const int n = sys.num_ranks;
  int expected = 0;
  for (int q : sr.node_index) {
    for (int vid : topology.nodes[q].gpus) {
      if (topology.vertices[vid].rank != expected++) {
        return unsupported(fmt::format(
            "NCCL baseline: topology '{}' does not number GPU ranks node by node (node {}), so NCCL's per-node "
            "chains cannot be joined in rank order",
            topology.name, topology.nodes[q].name));
      }
    }
  }

  CollectiveSpec spec;
  spec.kind = collective;
  spec.num_ranks = n;
  spec.in_place = in_place;
  // All-to-all: every pair on NCCL's p2p channels per peer (ncclTopoComputeP2pChannels), the others on the graph's.
  const int channels =
      a2a ? std::max(1, sys.p2p_channels_per_peer) : (algo == NcclAlgo::kRing ? sys.ring.channels : sys.tree.channels);
  bool both_modes = false;
  std::string what;
  std::vector<std::string> notes = sys.notes;
  std::vector<algos::RingOrder> rings;
  std::vector<ChannelTree> trees;
  std::vector<int> relays;
  if (a2a) {
    spec.chunk_factor = algos::directBaseFactor(collective, n, channels);
    what = "p2p";
    notes.push_back(fmt::format(
        "all-to-all as NCCL runs it: grouped send/recv between every pair, each pair split over NCCL's {} p2p "
        "channel(s) per peer; NCCL's {} has no all-to-all",
        channels, ncclAlgoName(algo)));
    relays = nccl::p2pRelays(topology);
    if (std::string note = relayNote(topology, relays); !note.empty()) notes.push_back(std::move(note));
  } else if (algo == NcclAlgo::kRing) {
    for (int c = 0; c < channels; ++c) {
      algos::RingOrder ring;
      for (const nccl::NodeChannels& node : sr.ring) {
        ring.insert(ring.end(), node.orders[c].begin(), node.orders[c].end());
      }
      rings.push_back(std::move(ring));
    }
    spec.chunk_factor = algos::ringBaseFactor(collective, n, channels);
    both_modes = n > 1 && (collective == CollectiveKind::kReduceScatter || collective == CollectiveKind::kAllReduce);
    what = "ring";
  } else {
    for (int c = 0; c < channels; ++c) trees.push_back(channelTree(sr, n, c));
    spec.chunk_factor = channels;
    both_modes = true;
    what = "tree";
    notes.push_back(sys.num_nodes > 1
                        ? "tree: a chain through each node's GPUs, binary trees over the nodes (NCCL's double binary "
                          "tree) on alternating channels"
                        : "tree: on one node NCCL's tree is a chain through the GPUs, one per channel");
  }
  BRAID_RETURN_IF_ERROR(validateSpec(spec));

  ProgramBuilder builder(spec, spec.in_place && !both_modes, 1);
  if (n == 1) {
    const Loc src = builder.in(0, 0);
    const Loc dst = builder.out(0, 0);
    if (!builder.same(src, dst)) builder.copy(0, builder.newTb(0, -1, -1, 0), src, dst, spec.inputChunks());
  } else if (a2a) {
    BRAID_RETURN_IF_ERROR(nccl::buildP2pAllToAll(builder, relays, channels));
  } else if (algo == NcclAlgo::kRing) {
    BRAID_RETURN_IF_ERROR(algos::buildRings(builder, collective, rings));
  } else {
    buildTreeAllReduce(builder, trees);
  }

  Algorithm algorithm;
  algorithm.name = fmt::format("nccl_{}_{}_n{}", lower(what), collectiveName(collective), n);
  algorithm.collective = collective;
  algorithm.collective_name = collectiveName(collective);
  algorithm.protocol = protocol;
  algorithm.in_place = both_modes || in_place;
  algorithm.out_of_place = both_modes || !in_place;
  algorithm.provenance.generator = fmt::format("braid nccl baseline {}", a2a ? "p2p" : ncclAlgoName(algo));
  algorithm.provenance.topology = topology.source.empty() ? topology.name : topology.source;
  algorithm.notes = std::move(notes);
  BRAID_RETURN_IF_ERROR(builder.finish(algorithm));
  algorithm.num_channels = std::max(algorithm.num_channels, channels);
  return algorithm;
}

}  // namespace braid
