// Arborescence packing for the tree-based all-gather (ForestColl's step 4: Zhao et al., arXiv 2402.06787;
// ../shared/reference/anchors_algorithms.md §1): k arc-disjoint spanning out-trees per root in an integer
// capacitated digraph, built constructively along Lovász's proof of Edmonds' branching theorem with exact integer
// max-flows (Boost.Graph's Boykov-Kolmogorov).
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "braid/status.h"

namespace braid::synth {

/// One group of identical out-arborescences rooted at `root`, spanning all n ranks: `multiplicity` tree units
/// use exactly these edges. edges are (parent, child) rank pairs in an order where each parent is already in the
/// tree (root first), n-1 of them.
struct PackedTree {
  int root = -1;
  int64_t multiplicity = 0;
  std::vector<std::pair<int, int>> edges;
};

/// Packs k arc-disjoint spanning out-arborescences per root (every rank 0..n-1 is a root) into the integer
/// capacitated digraph capacity[u * n + v] (units; 0 = no edge; diagonal ignored): the trees' multiplicities on
/// each edge sum to at most its capacity, and each root's groups' multiplicities sum to k.
///
/// Feasible iff for every rank v the max-flow from a super-source (an arc of capacity k to every rank) to v is
/// >= n*k (Edmonds' branching theorem, in its root-set form: disjoint spanning branchings with root sets R_i
/// exist iff every nonempty X has in-degree >= #{i : R_i ∩ X = ∅}); equivalently every nonempty X ⊆ ranks has
/// sum of capacities entering X >= k (n - |X|).
///
/// Output: the groups ordered by root, and per root in the order they were completed; deterministic (a function of
/// the inputs only). Each root has at most 1 + (number of splits) groups; every group has multiplicity >= 1.
///
/// Cost: n max-flows for the feasibility test, then at most one max-flow (on n + 1 + #incomplete-groups vertices) per
/// arc tried: an arc rejected for a group is never tried again for it, and a cut found tight rejects every arc into
/// it without a flow. Measured (RelWithDebInfo, one core): n = 64 complete digraph, capacity 3, k = 3: 0.27 s;
/// 8 boxes of 8 (capacity 600 inside a box, 20 across), k = 84: 712 groups in 6 s.
///
/// Errors: kInvalidArgument for n < 1, capacity.size() != n*n, a negative capacity (diagonal included), k < 1 or
/// n*k too large for int64 arithmetic; kInfeasible when the flow condition fails (the message names the lowest rank
/// whose max-flow falls short, the shortfall in units, and how many ranks fall short); kTimeout when
/// `deadline_check` (may be empty; called before every max-flow) returns false; kInternalError if the construction
/// gets stuck on a feasible instance, which Lovász's proof rules out (a bug).
/// True when `capacity` (n x n units, as packArborescences) holds k spanning out-trees per root: the flow condition
/// above, checked exactly. False as well for malformed input (sizes, negative capacities, k < 1).
bool treeUnitsFeasible(int n, const std::vector<int64_t>& capacity, int64_t k);

Result<std::vector<PackedTree>> packArborescences(int n, const std::vector<int64_t>& capacity, int64_t k,
                                                  const std::function<bool()>& deadline_check = {});

}  // namespace braid::synth
