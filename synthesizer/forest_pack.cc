// Arborescence packing (forest_pack.h): groups of identical partial out-trees grow one arc at a time, each arc
// admitted with the largest multiplicity that keeps the remaining problem feasible (Lovász's constructive proof of
// Edmonds' branching theorem, as ForestColl's BranchingGenerator uses it).
//
// State: groups g = (S_g, m_g) (vertex set of the partial tree, multiplicity), remaining capacities c. For a
// nonempty rank set X let val(X) = c(arcs entering X) + sum of m_g over the groups with S_g ∩ X ≠ ∅, and
// M = sum of all m_g. By Edmonds' theorem in its root-set form the groups can be completed iff val(X) >= M for every
// nonempty X. The flow network below has min cut s -> v equal to min over X ∋ v of val(X): a source s, a vertex
// t_g per group with an arc s -> t_g of capacity m_g and arcs t_g -> every rank of S_g of "infinite" capacity, and
// the rank-to-rank arcs with their remaining capacities.
//
// Admitting m units of an arc x -> y (x ∈ S_g, y ∉ S_g) for group g splits it into (S_g + y, m) and (S_g, m_g - m)
// and lowers c(x, y) by m. This lowers val(X) by exactly m on the sets P = {X : y ∈ X, x ∉ X, S_g ∩ X ≠ ∅} and leaves
// every other val(X) unchanged (on X with S_g ∩ X = ∅ and y ∈ X the lost arc and the new group cancel). So the
// largest admissible m is min(m_full, min_P val - M), m_full = min(m_g, c(x, y)). Every set of P contains y, so one
// max-flow to y suffices: at the tentative state with m = m_full its value is f = min(min over X ∋ y outside P of
// val(X), min_P val - m_full), and the first term is >= M because the current state is feasible; hence
// m* = min(m_full, f + m_full - M). In that tentative network the new group (S_g + y, m_full) adds exactly m_full
// to every cut separating s from y, so f = m_full + F with F the flow to y when group g's source arc is lowered to
// m_g - m_full and c(x, y) to c(x, y) - m_full, and no extra vertex is needed.
//
// val(X) never increases (each step changes it by 0 or -m) and S_g only grows, so an arc rejected for a group
// (m* <= 0) stays rejected for it and for the groups split off it later: it is never tried again. A completed
// group (S_g = all ranks) adds m_g to every val(X) and to M; it leaves the network and M.
#include "synthesizer/forest_pack.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "synthesizer/flow_graph.h"

namespace braid::synth {
namespace {

/// The flow network of the file comment on ranks 0..n-1, the source n and `slots` group vertices n+1.. (a slot
/// holds one incomplete group; a free slot has capacity 0 on all its arcs). Rank arcs exist for the pairs with
/// remaining capacity at construction (capacities only drop); a slot's arc to a rank is added when the rank first
/// joins a group of that slot and keeps existing (at capacity 0) after the group leaves (arc descriptors stay valid
/// as arcs are added: flow_graph.h).
class PackNetwork {
 public:
  PackNetwork(int n, const std::vector<int64_t>& remaining, int slots, int64_t infinite)
      : n_(n), slots_(slots), infinite_(infinite), flow_(n + 1 + slots) {
    rank_arc_.assign(static_cast<size_t>(n) * n, std::nullopt);
    for (int u = 0; u < n; ++u) {
      for (int v = 0; v < n; ++v) {
        if (u != v && remaining[u * n + v] > 0) rank_arc_[u * n + v] = addEdge(u, v, remaining[u * n + v]);
      }
    }
    source_arc_.resize(slots);
    member_arc_.assign(static_cast<size_t>(slots) * n, std::nullopt);
    for (int j = 0; j < slots; ++j) source_arc_[j] = addEdge(n, slotVertex(j), 0);
  }

  int slots() const { return slots_; }
  /// Slot-to-rank arcs present, at any capacity.
  int64_t memberArcs() const { return member_arcs_; }
  /// Only on pairs that had remaining capacity when the network was built.
  void setArc(int u, int v, int64_t capacity) { flow_.setCapacity(*rank_arc_[u * n_ + v], capacity); }
  void setSource(int slot, int64_t capacity) { flow_.setCapacity(source_arc_[slot], capacity); }
  void addMember(int slot, int rank) {
    std::optional<Arc>& arc = member_arc_[slot * n_ + rank];
    if (!arc) {
      arc = addEdge(slotVertex(slot), rank, 0);
      ++member_arcs_;
    }
    flow_.setCapacity(*arc, infinite_);
  }
  void clearSlot(int slot) {
    setSource(slot, 0);
    for (int r = 0; r < n_; ++r) {
      if (const std::optional<Arc>& arc = member_arc_[slot * n_ + r]) flow_.setCapacity(*arc, 0);
    }
  }

  /// After maxFlowTo: whether `rank` is on the sink side of the minimum cut nearest the source (not in the search
  /// tree grown from the source, which at the end is the set the source reaches in the residual network).
  bool sinkSide(int rank) const { return !flow_.inSourceTree(rank); }

  int64_t maxFlowTo(int v) { return flow_.maxFlow(n_, v); }

 private:
  using Arc = FlowGraph::Arc;

  int slotVertex(int slot) const { return n_ + 1 + slot; }
  Arc addEdge(int a, int b, int64_t capacity) { return flow_.addArc(a, b, capacity); }

  int n_;
  int slots_;
  int64_t infinite_;
  FlowGraph flow_;
  int64_t member_arcs_ = 0;
  std::vector<std::optional<Arc>> rank_arc_;    // [u * n + v]
  std::vector<Arc> source_arc_;                 // [slot]
  std::vector<std::optional<Arc>> member_arc_;  // [slot * n + rank]
};

/// Rank sets as bit rows of `words` 64-bit words.
using Bits = std::vector<uint64_t>;
inline bool hasBit(const uint64_t* row, int i) { return (row[i >> 6] >> (i & 63)) & 1; }
inline void setBit(uint64_t* row, int i) { row[i >> 6] |= uint64_t{1} << (i & 63); }
inline bool intersects(const uint64_t* a, const uint64_t* b, int words) {
  for (int w = 0; w < words; ++w) {
    if (a[w] & b[w]) return true;
  }
  return false;
}

/// A group of identical partial out-trees.
struct Group {
  int root = -1;
  int64_t multiplicity = 0;
  int slot = -1;                           // its vertex in the network; -1 once complete
  Bits in_tree;                            // S_g
  std::vector<int> order;                  // ranks in the order they joined (root first)
  std::vector<std::pair<int, int>> edges;  // (parent, child), parent joined before child
  Bits rejected;                           // row x (words at x * words): children y with x -> y admitting no unit
  size_t scan = 0;                         // order[0..scan) have no candidate arc left
  size_t synced = 0;                       // tight sets [0, synced) are applied to `rejected`
};

/// The packing's own check of its output (cheap): spanning trees in the documented edge order, k units per root,
/// per-arc usage within capacity. Returns an empty string when the packing is valid.
std::string packingError(int n, const std::vector<int64_t>& capacity, int64_t k, const std::vector<PackedTree>& trees) {
  std::vector<int64_t> per_root(n, 0);
  std::vector<int64_t> used(static_cast<size_t>(n) * n, 0);
  for (const PackedTree& t : trees) {
    if (t.root < 0 || t.root >= n || t.multiplicity < 1 || t.edges.size() != static_cast<size_t>(n - 1)) {
      return fmt::format("malformed tree group (root {}, multiplicity {}, {} edges)", t.root, t.multiplicity,
                         t.edges.size());
    }
    per_root[t.root] += t.multiplicity;
    std::vector<char> in(n, 0);
    in[t.root] = 1;
    for (const auto& [p, c] : t.edges) {
      if (p < 0 || p >= n || c < 0 || c >= n || !in[p] || in[c]) {
        return fmt::format("tree of root {}: edge {} -> {} out of order", t.root, p, c);
      }
      in[c] = 1;
      used[p * n + c] += t.multiplicity;
    }
  }
  for (int r = 0; r < n; ++r) {
    if (per_root[r] != k) return fmt::format("root {} has {} tree units, not {}", r, per_root[r], k);
  }
  for (int u = 0; u < n; ++u) {
    for (int v = 0; v < n; ++v) {
      if (used[u * n + v] > capacity[u * n + v]) {
        return fmt::format("arc {} -> {} carries {} units over its capacity {}", u, v, used[u * n + v],
                           capacity[u * n + v]);
      }
    }
  }
  return {};
}

}  // namespace

bool treeUnitsFeasible(int n, const std::vector<int64_t>& capacity, int64_t k) {
  if (n < 1 || k < 1 || capacity.size() != static_cast<size_t>(n) * n) return false;
  if (k > std::numeric_limits<int64_t>::max() / 4 / (n + 1)) return false;
  const int64_t units = static_cast<int64_t>(n) * k;
  std::vector<int64_t> remaining(capacity.size(), 0);
  for (int u = 0; u < n; ++u) {
    for (int v = 0; v < n; ++v) {
      if (capacity[u * n + v] < 0) return false;
      remaining[u * n + v] = u == v ? 0 : std::min(capacity[u * n + v], units);
    }
  }
  PackNetwork network(n, remaining, /*slots=*/n, units + 1);
  for (int r = 0; r < n; ++r) {
    network.setSource(r, k);
    network.addMember(r, r);
  }
  for (int v = 0; v < n; ++v) {
    if (network.maxFlowTo(v) < units) return false;
  }
  return true;
}

Result<std::vector<PackedTree>> packArborescences(int n, const std::vector<int64_t>& capacity, int64_t k,
                                                  const std::function<bool()>& deadline_check) {
  if (n < 1) return invalidArgument(fmt::format("tree packing needs at least 1 rank, got {}", n));
  if (capacity.size() != static_cast<size_t>(n) * n) {
    return invalidArgument(
        fmt::format("capacity has {} entries, expected n x n = {}", capacity.size(), static_cast<size_t>(n) * n));
  }
  for (size_t i = 0; i < capacity.size(); ++i) {
    if (capacity[i] < 0) {
      return invalidArgument(fmt::format("capacity of arc {} -> {} is negative ({})", i / n, i % n, capacity[i]));
    }
  }
  if (k < 1) return invalidArgument(fmt::format("trees per root must be >= 1, got {}", k));
  // Flows stay below the network's source capacity n k; residuals of an arc pair below twice its capacity.
  if (k > std::numeric_limits<int64_t>::max() / 4 / (n + 1)) {
    return invalidArgument(fmt::format("{} trees per root on {} ranks overflow int64 flow arithmetic", k, n));
  }
  const int64_t units = static_cast<int64_t>(n) * k;
  if (n == 1) return std::vector<PackedTree>{PackedTree{0, k, {}}};

  // No packing puts more than n k units on an arc, so capacities clamp to n k without changing the solutions.
  std::vector<int64_t> remaining(capacity.size(), 0);
  for (int u = 0; u < n; ++u) {
    for (int v = 0; v < n; ++v) remaining[u * n + v] = u == v ? 0 : std::min(capacity[u * n + v], units);
  }
  const int64_t infinite = units + 1;

  const int words = (n + 63) / 64;
  std::vector<Group> groups(n);
  for (int r = 0; r < n; ++r) {
    Group& g = groups[r];
    g.root = r;
    g.multiplicity = k;
    g.slot = r;
    g.in_tree.assign(words, 0);
    setBit(g.in_tree.data(), r);
    g.order = {r};
    g.rejected.assign(static_cast<size_t>(n) * words, 0);
  }
  // The network lives on the heap and is never copied or moved: its arc table holds descriptors into its graph.
  auto buildNetwork = [&](int slots) {
    auto built = std::make_unique<PackNetwork>(n, remaining, slots, infinite);
    for (const Group& g : groups) {
      if (g.slot < 0) continue;
      built->setSource(g.slot, g.multiplicity);
      for (int r : g.order) built->addMember(g.slot, r);
    }
    return built;
  };
  std::unique_ptr<PackNetwork> network = buildNetwork(n + n / 4 + 4);
  std::vector<int> free_slots;  // popped from the back: lowest slot first
  for (int j = network->slots() - 1; j >= n; --j) free_slots.push_back(j);

  // Feasibility of the whole problem: every rank's max-flow from the super-source reaches n k.
  int short_ranks = 0, first_short = -1;
  int64_t first_flow = 0;
  for (int v = 0; v < n; ++v) {
    if (deadline_check && !deadline_check()) return Status(StatusCode::kTimeout, "tree packing: deadline passed");
    const int64_t flow = network->maxFlowTo(v);
    if (flow < units) {
      if (short_ranks++ == 0) {
        first_short = v;
        first_flow = flow;
      }
    }
  }
  if (short_ranks > 0) {
    return Status(StatusCode::kInfeasible,
                  fmt::format("{} trees per root do not fit: the max-flow into rank {} from a super-source with {} "
                              "unit(s) per rank is {}, short of n*k = {} by {} ({} of {} ranks fall short)",
                              k, first_short, k, first_flow, units, units - first_flow, short_ranks, n));
  }

  int64_t live_members = n;  // sum of |S_g| over the incomplete groups

  // Tight sets: rank sets X with val(X) = M. They stay tight (val - M never increases), and a tight X rejects
  // every arc x -> y with x ∉ X, y ∈ X for every group whose S meets X (X is then one of the arc's P-sets, and
  // admitting any unit would push val(X) below M). Each max-flow that finds the admissible amount limited by a cut
  // records that cut (the sink side of the minimum cut nearest the source).
  Bits tight;  // tight set i at words [i * words, (i + 1) * words)
  std::set<Bits> tight_seen;
  auto tightSet = [&](size_t i) { return tight.data() + i * words; };
  // Rejections of tight set i for group g (S_g as it is now).
  auto applyTight = [&](Group& g, size_t i) {
    const uint64_t* t = tightSet(i);
    if (!intersects(t, g.in_tree.data(), words)) return;
    for (int x : g.order) {
      if (hasBit(t, x)) continue;
      uint64_t* row = g.rejected.data() + static_cast<size_t>(x) * words;
      for (int w = 0; w < words; ++w) row[w] |= t[w];
    }
  };
  // y joins S_g: the tight sets g knows that now meet S_g for the first time reject arcs from all of S_g into them;
  // those already meeting it reject the arcs from y into them.
  auto join = [&](Group& g, int parent, int y) {
    for (size_t i = 0; i < g.synced; ++i) {
      const uint64_t* t = tightSet(i);
      if (hasBit(t, y)) {
        if (!intersects(t, g.in_tree.data(), words)) {
          for (int x : g.order) {
            uint64_t* row = g.rejected.data() + static_cast<size_t>(x) * words;
            for (int w = 0; w < words; ++w) row[w] |= t[w];
          }
        }
      } else if (intersects(t, g.in_tree.data(), words)) {
        uint64_t* row = g.rejected.data() + static_cast<size_t>(y) * words;
        for (int w = 0; w < words; ++w) row[w] |= t[w];
      }
    }
    setBit(g.in_tree.data(), y);
    ++live_members;
    g.order.push_back(y);
    g.edges.emplace_back(parent, y);
    network->addMember(g.slot, y);
  };
  auto recordTight = [&]() {
    Bits sink(words, 0);
    for (int r = 0; r < n; ++r) {
      if (network->sinkSide(r)) setBit(sink.data(), r);
    }
    if (tight_seen.insert(sink).second) tight.insert(tight.end(), sink.begin(), sink.end());
  };

  int64_t demand = units;  // M: total multiplicity of the incomplete groups
  std::deque<int> queue;
  for (int r = 0; r < n; ++r) queue.push_back(r);
  std::vector<std::vector<PackedTree>> done(n);
  while (!queue.empty()) {
    const int gi = queue.front();
    if (static_cast<int>(groups[gi].order.size()) == n) {
      Group& g = groups[gi];
      network->clearSlot(g.slot);
      free_slots.push_back(g.slot);
      g.slot = -1;
      demand -= g.multiplicity;
      live_members -= n;
      done[g.root].push_back(PackedTree{g.root, g.multiplicity, std::move(g.edges)});
      queue.pop_front();
      // Arcs of groups gone (and rank arcs spent) still cost every max-flow a scan: rebuild once they dominate.
      if (network->memberArcs() > 2 * live_members + 2 * n) network = buildNetwork(network->slots());
      continue;
    }
    {
      Group& g = groups[gi];
      const size_t known = tight.size() / words;
      for (size_t i = g.synced; i < known; ++i) applyTight(g, i);
      g.synced = known;
    }
    // Next candidate arc in BFS order: the earliest-joined parent with an arc left, then the lowest child.
    int x = -1, y = -1;
    {
      Group& g = groups[gi];
      while (g.scan < g.order.size() && y < 0) {
        const int from = g.order[g.scan];
        const uint64_t* row = g.rejected.data() + static_cast<size_t>(from) * words;
        for (int to = 0; to < n; ++to) {
          if (!hasBit(g.in_tree.data(), to) && remaining[from * n + to] > 0 && !hasBit(row, to)) {
            x = from;
            y = to;
            break;
          }
        }
        if (y < 0) ++g.scan;
      }
      if (y < 0) {
        return internalError(
            fmt::format("tree packing stuck: a group of root {} (multiplicity {}) spans {} of {} "
                        "ranks and no arc out of it admits a unit",
                        g.root, g.multiplicity, g.order.size(), n));
      }
    }
    const int64_t arc_cap = remaining[x * n + y];
    const int64_t m_full = std::min(groups[gi].multiplicity, arc_cap);
    int64_t admitted = m_full;
    bool cut_limited = false;
    if (groups[gi].order.size() > 1) {  // with S_g = {x} the set family P is empty: m_full is always admissible
      if (deadline_check && !deadline_check()) return Status(StatusCode::kTimeout, "tree packing: deadline passed");
      const int slot = groups[gi].slot;
      network->setArc(x, y, arc_cap - m_full);
      network->setSource(slot, groups[gi].multiplicity - m_full);
      const int64_t flow = network->maxFlowTo(y);
      network->setArc(x, y, arc_cap);
      network->setSource(slot, groups[gi].multiplicity);
      // f_t = flow + m_full is the tentative state's flow into y; f_t <= M makes the cut tight once committed.
      cut_limited = flow + m_full <= demand;
      admitted = std::min(m_full, flow + 2 * m_full - demand);
    }
    if (admitted <= 0) {
      setBit(groups[gi].rejected.data() + static_cast<size_t>(x) * words, y);
      recordTight();
      continue;
    }
    remaining[x * n + y] -= admitted;
    network->setArc(x, y, remaining[x * n + y]);
    if (cut_limited) recordTight();
    if (admitted < groups[gi].multiplicity) {
      // Split: the rest keeps S_g; x -> y is dead for it (its capacity is spent or its P-sets are now tight).
      Group rest = groups[gi];
      rest.multiplicity -= admitted;
      setBit(rest.rejected.data() + static_cast<size_t>(x) * words, y);
      rest.slot = -1;
      groups[gi].multiplicity = admitted;
      network->setSource(groups[gi].slot, admitted);
      groups.push_back(std::move(rest));
      const int ri = static_cast<int>(groups.size()) - 1;
      if (free_slots.empty()) {
        const int old_slots = network->slots();
        const int new_slots = old_slots + old_slots / 2;
        network = buildNetwork(new_slots);
        for (int j = new_slots - 1; j >= old_slots; --j) free_slots.push_back(j);
      }
      Group& r = groups[ri];
      r.slot = free_slots.back();
      free_slots.pop_back();
      network->setSource(r.slot, r.multiplicity);
      for (int v : r.order) network->addMember(r.slot, v);
      live_members += static_cast<int64_t>(r.order.size());
      queue.insert(queue.begin() + 1, ri);
    }
    join(groups[gi], x, y);
  }

  std::vector<PackedTree> trees;
  for (auto& per_root : done) {
    for (auto& t : per_root) trees.push_back(std::move(t));
  }
  const std::string error = packingError(n, capacity, k, trees);
  if (!error.empty()) return internalError("tree packing produced an invalid packing: " + error);
  return trees;
}

}  // namespace braid::synth
