// Two-level (hierarchical) algorithms over m nodes of g GPUs, rank = node*g + local.
// Costs: ../shared/reference/anchors_algorithms.md §4 ("2D / hierarchical AllReduce", "2DH
// All-to-All", Tutel, MLSys'23 §5). Rings inside a node run over the local ranks in NVLink ring order
// (NodeGrid::local_ring, found on the first node by findRings; local order otherwise); rings across
// nodes join the GPUs with the same local index, so inter-node traffic of a rank goes to its
// counterparts only (one NIC rail each, as NCCL's and Tutel's hierarchical schemes).
//   all-reduce:     intra-node ring reduce-scatter of g blocks of m chunks -> inter-node ring
//                   all-reduce of the own block -> intra-node ring all-gather of the blocks.
//   all-gather:     inter-node ring all-gather of the own chunk -> intra-node ring all-gather of the
//                   m chunks each local rank now holds (strided in the output: m steps per hop).
//   reduce-scatter: the mirror: intra-node ring reduce-scatter of strided chunk sets into scratch
//                   -> inter-node ring reduce-scatter.
//   all-to-all:     2DH: intra-node exchange of the chunks bound for each local index (into scratch,
//                   grouped by destination node) -> inter-node exchange of one g-chunk block per
//                   node pair.
#include <fmt/format.h>

#include "braid/classic_blocks.h"

namespace braid::algos {
namespace {

int mod(int a, int n) { return ((a % n) + n) % n; }

}  // namespace

namespace {

// The intra-node ring order of the first node that holds GPUs: its GPUs (local order) and NVSwitches
// with the NVLink links among them, searched by findRings. Local order when no NVLink ring exists.
std::vector<int> intraNodeRing(const Topology& topology, const Node& node, std::vector<std::string>* notes) {
  const int g = static_cast<int>(node.gpus.size());
  std::vector<int> identity(g);
  for (int i = 0; i < g; ++i) identity[i] = i;
  if (g < 3) return identity;  // every order is the same ring
  Topology sub;
  sub.name = topology.name + ":" + node.name;
  const int sub_node = sub.addNode(node.name);
  std::vector<int> map(topology.vertices.size(), -1);
  for (int vid : node.gpus) map[vid] = sub.addVertex(VertexKind::kGpu, sub_node);
  const int node_index = topology.vertices[node.gpus.front()].node;
  for (const Vertex& v : topology.vertices) {
    if (v.kind == VertexKind::kNvSwitch && v.node == node_index) map[v.id] = sub.addVertex(v.kind, sub_node, v.name);
  }
  for (const Link& l : topology.links) {
    if (l.kind != LinkKind::kNvlink || l.src < 0 || l.dst < 0) continue;
    if (l.src >= static_cast<int>(map.size()) || l.dst >= static_cast<int>(map.size())) continue;
    if (map[l.src] < 0 || map[l.dst] < 0) continue;
    sub.addLink(map[l.src], map[l.dst], l.kind, l.bandwidth_gbps, l.alpha_us, l.lanes);
  }
  Result<RingSearch> search = findRings(sub, 1);
  std::string text;
  if (search.isOk() && search->all_nvlink) {
    for (int i : search->rings[0]) text += (text.empty() ? "" : " ") + std::to_string(i);
    if (notes) notes->push_back(fmt::format("intra-node rings follow NVLink in local order {}", text));
    return search->rings[0];
  }
  if (notes) notes->push_back("no NVLink ring inside a node: intra-node rings run in local order");
  return identity;
}

}  // namespace

Result<NodeGrid> nodeGrid(const Topology& topology, int num_ranks, std::vector<std::string>* notes) {
  NodeGrid grid;
  int expected_rank = 0;
  for (const Node& node : topology.nodes) {
    if (node.gpus.empty()) continue;
    const int g = static_cast<int>(node.gpus.size());
    if (grid.gpus_per_node == 0) grid.gpus_per_node = g;
    if (g != grid.gpus_per_node) {
      return invalidArgument(
          fmt::format("hierarchical: topology '{}' has nodes with different GPU counts ({} has {}, the first has {}); "
                      "the two-level algorithms need the same number of GPUs in every node",
                      topology.name, node.name, g, grid.gpus_per_node));
    }
    for (int vid : node.gpus) {
      if (vid < 0 || vid >= static_cast<int>(topology.vertices.size()) ||
          topology.vertices[vid].rank != expected_rank) {
        return unsupported(
            fmt::format("hierarchical: topology '{}': GPU ranks are not numbered node by node "
                        "(node {} lists a GPU that is not rank {})",
                        topology.name, node.name, expected_rank));
      }
      ++expected_rank;
    }
    ++grid.nodes;
  }
  if (grid.nodes == 0) {
    return invalidArgument(fmt::format("hierarchical: topology '{}' has no node with GPUs", topology.name));
  }
  for (const Node& node : topology.nodes) {
    if (node.gpus.empty()) continue;
    grid.local_ring = intraNodeRing(topology, node, notes);
    break;
  }
  if (grid.nodes * grid.gpus_per_node != num_ranks) {
    return invalidArgument(
        fmt::format("hierarchical: topology '{}' has {} GPUs in {} nodes but the collective has {} ranks",
                    topology.name, grid.nodes * grid.gpus_per_node, grid.nodes, num_ranks));
  }
  return grid;
}

Result<NodeGrid> explicitGrid(int num_ranks, int ranks_per_node) {
  if (ranks_per_node < 1 || num_ranks < 1 || num_ranks % ranks_per_node != 0) {
    return invalidArgument(
        fmt::format("{} ranks do not split into nodes of {} rank(s): ranks per node must be "
                    "at least 1 and divide the rank count",
                    num_ranks, ranks_per_node));
  }
  NodeGrid grid;
  grid.nodes = num_ranks / ranks_per_node;
  grid.gpus_per_node = ranks_per_node;
  return grid;
}

int hierarchicalBaseFactor(CollectiveKind kind, const NodeGrid& grid) {
  return kind == CollectiveKind::kAllReduce ? grid.gpus_per_node * grid.nodes : 1;
}

Status buildHierarchical(ProgramBuilder& b, CollectiveKind kind, const NodeGrid& grid) {
  const int g = grid.gpus_per_node;
  const int m = grid.nodes;
  auto rankOf = [&](int q, int j) { return q * g + j; };
  // Intra-node ring: local indices in ring order (the same on every node), and each one's position.
  std::vector<int> ring = grid.local_ring;
  if (static_cast<int>(ring.size()) != g) {
    ring.resize(g);
    for (int i = 0; i < g; ++i) ring[i] = i;
  }
  std::vector<int> pos(g);
  for (int i = 0; i < g; ++i) pos[ring[i]] = i;
  auto lr = [&](int t) { return ring[mod(t, g)]; };
  for (int r = 0; r < b.numRanks(); ++r) {
    const int q = r / g;
    const int j = r % g;
    const int pj = pos[j];  // this GPU's position in the intra-node ring
    const int next_local = rankOf(q, lr(pj + 1));
    const int prev_local = rankOf(q, lr(pj - 1));
    const int next_node = rankOf(mod(q + 1, m), j);
    const int prev_node = rankOf(mod(q - 1, m), j);
    switch (kind) {
      case CollectiveKind::kAllReduce: {
        auto block = [&](int t) { return mod(t, g) * m; };  // first chunk of the block owned by ring position t
        StepRef done;
        const int intra = g > 1 ? b.newTb(r, next_local, prev_local, 0) : -1;
        if (g > 1) {
          b.send(r, intra, b.in(r, block(pj - 1)), m);
          for (int s = 1; s < g - 1; ++s) b.recvReduceSend(r, intra, b.in(r, block(pj - 1 - s)), m);
          done = b.recvReduceCopy(r, intra, b.in(r, block(pj)), b.out(r, block(pj)), m);
        }
        if (m > 1) {
          auto cur = [&](int x) { return g > 1 ? b.out(r, x) : b.in(r, x); };
          auto seg = [&](int t) { return block(pj) + mod(t, m); };
          const int inter = b.newTb(r, next_node, prev_node, 0);
          b.send(r, inter, cur(seg(q - 1)), 1, {done});
          for (int s = 1; s < m - 1; ++s) b.recvReduceSend(r, inter, cur(seg(q - 1 - s)), 1);
          b.recvReduceCopySend(r, inter, cur(seg(q)), b.out(r, seg(q)), 1);
          for (int s = 1; s < m - 1; ++s) b.recvCopySend(r, inter, b.out(r, seg(q - s)), 1);
          done = b.recv(r, inter, b.out(r, seg(q - (m - 1))), 1);
        }
        if (g > 1) {
          b.send(r, intra, b.out(r, block(pj)), m, {done});
          for (int s = 1; s < g - 1; ++s) b.recvCopySend(r, intra, b.out(r, block(pj - s)), m);
          b.recv(r, intra, b.out(r, block(pj - (g - 1))), m);
        }
        break;
      }
      case CollectiveKind::kAllGather: {
        StepRef done;
        const Loc own_in = b.in(r, 0);
        const Loc own_out = b.out(r, r);
        if (!b.same(own_in, own_out)) done = b.copy(r, b.newTb(r, -1, -1, 0), own_in, own_out, 1);
        if (m > 1) {
          const int inter = b.newTb(r, next_node, prev_node, 0);
          b.send(r, inter, own_in, 1);
          for (int s = 1; s < m; ++s) {
            const Loc dst = b.out(r, rankOf(mod(q - s, m), j));
            done = s < m - 1 ? b.recvCopySend(r, inter, dst, 1, {done}) : b.recv(r, inter, dst, 1, {done});
          }
        }
        if (g > 1) {
          const int intra = b.newTb(r, next_local, prev_local, 0);
          for (int qq = 0; qq < m; ++qq) b.send(r, intra, b.out(r, rankOf(qq, j)), 1, {done});
          for (int s = 1; s < g; ++s) {
            for (int qq = 0; qq < m; ++qq) {
              const Loc dst = b.out(r, rankOf(qq, lr(pj - s)));
              if (s < g - 1) {
                b.recvCopySend(r, intra, dst, 1);
              } else {
                b.recv(r, intra, dst, 1);
              }
            }
          }
        }
        break;
      }
      case CollectiveKind::kReduceScatter: {
        StepRef done;
        if (g > 1) {
          const int intra = b.newTb(r, next_local, prev_local, 0);
          for (int qq = 0; qq < m; ++qq) b.send(r, intra, b.in(r, rankOf(qq, lr(pj - 1))), 1);
          for (int s = 1; s < g - 1; ++s) {
            for (int qq = 0; qq < m; ++qq) b.recvReduceSend(r, intra, b.in(r, rankOf(qq, lr(pj - 1 - s))), 1);
          }
          for (int qq = 0; qq < m; ++qq) {
            const Loc dst = m == 1 ? b.out(r, 0) : ProgramBuilder::scratch(qq);
            done = b.recvReduceCopy(r, intra, b.in(r, rankOf(qq, j)), dst, 1);
          }
        }
        if (m > 1) {
          auto src = [&](int qq) {
            return g > 1 ? ProgramBuilder::scratch(mod(qq, m)) : b.in(r, rankOf(mod(qq, m), j));
          };
          const int inter = b.newTb(r, next_node, prev_node, 0);
          b.send(r, inter, src(q - 1), 1, {done});
          for (int s = 1; s < m - 1; ++s) b.recvReduceSend(r, inter, src(q - 1 - s), 1);
          b.recvReduceCopy(r, inter, src(q), b.out(r, 0), 1);
        }
        break;
      }
      case CollectiveKind::kAllToAll: {
        // Phase 1 (intra-node): scratch[q'*g + j'] = the chunk local j' of this node sends to (q', j).
        const int local = b.newTb(r, -1, -1, 0);
        for (int qq = 0; qq < m; ++qq)
          b.copy(r, local, b.in(r, rankOf(qq, j)), ProgramBuilder::scratch(rankOf(qq, j)), 1);
        std::vector<StepRef> phase1 = {b.last(r, local)};
        for (int jj = 0; jj < g; ++jj) {
          if (jj == j) continue;
          const int peer = rankOf(q, jj);
          const int tb = b.newTb(r, peer, peer, 0);
          for (int qq = 0; qq < m; ++qq) b.send(r, tb, b.in(r, rankOf(qq, jj)), 1);
          for (int qq = 0; qq < m; ++qq) b.recv(r, tb, ProgramBuilder::scratch(rankOf(qq, jj)), 1);
          phase1.push_back(b.last(r, tb));
        }
        const StepRef all_in = phase1.size() > 1 ? b.barrier(r, local, phase1) : phase1.front();
        // Phase 2 (inter-node): the g chunks for node q' travel as one block to (q', j).
        for (int qq = 0; qq < m; ++qq) {
          if (qq == q) continue;
          const int peer = rankOf(qq, j);
          const int tb = b.newTb(r, peer, peer, 0);
          b.send(r, tb, ProgramBuilder::scratch(rankOf(qq, 0)), g, {all_in});
          b.recv(r, tb, b.out(r, rankOf(qq, 0)), g);
        }
        b.copy(r, local, ProgramBuilder::scratch(rankOf(q, 0)), b.out(r, rankOf(q, 0)), g, {all_in});
        break;
      }
      default: return invalidArgument(fmt::format("hierarchical: {} is not supported", collectiveName(kind)));
    }
  }
  return Status::ok();
}

}  // namespace braid::algos
