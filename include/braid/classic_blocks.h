// The building blocks of the classical algorithms (braid_algos): buildClassic (classic.cc) assembles them, and
// NCCL's algorithms in the IR (src/cost) reuse its rings, direct exchange, binary trees and ring search. Every
// builder writes one algorithm for spec.num_ranks >= 2 into a ProgramBuilder, addressing
// chunks in logical units of its base chunk factor (see each function), and returns a Status that
// is an internal error only when the builder itself is wrong. docs/algorithms.md explains each.
#pragma once

#include <string>
#include <vector>

#include "braid/collective.h"
#include "braid/program_builder.h"
#include "braid/topology.h"

namespace braid::algos {

/// A ring: ranks in ring order (ring[i] sends to ring[i+1], the last to the first).
using RingOrder = std::vector<int>;

// ---- ring.cc: ring algorithms over one or several rings, ring k on channel k ----------------
/// Base chunk factor: allreduce n*K, the others K (K = rings.size()). Broadcast and reduce are chains
/// along each ring from / to `root` (ignored by the other collectives).
int ringBaseFactor(CollectiveKind kind, int n, int num_rings);
Status buildRings(ProgramBuilder& b, CollectiveKind kind, const std::vector<RingOrder>& rings, int root = 0);

// ---- direct.cc: all-pairs over K channels ---------------------------------------------------
/// Base chunk factor: allreduce n*K, the others K. Broadcast: `root` sends to every rank; reduce: every
/// rank sends to `root`, which reduces the n-1 arrivals one after another.
int directBaseFactor(CollectiveKind kind, int n, int channels);
Status buildDirect(ProgramBuilder& b, CollectiveKind kind, int channels, int root = 0);

// ---- pairwise.cc: pairwise-exchange all-to-all (base chunk factor 1) -----------------------
Status buildPairwise(ProgramBuilder& b);

// ---- recursive.cc: recursive doubling / halving with fold-in (base chunk factor 1) ---------
/// Broadcast and reduce: binomial trees rooted at `root` (ignored by the other collectives).
Status buildRecursive(ProgramBuilder& b, CollectiveKind kind, int root = 0);
/// The binomial tree of MPICH's broadcast and reduce over n ranks rooted at `root`: with v = (r - root)
/// mod n, the parent of v is v minus its lowest set bit; the children of v are v + 2^j for every 2^j
/// below v's lowest set bit (below the first power of two >= n for the root) with v + 2^j < n.
/// parent[root] = -1; children in increasing 2^j (smallest subtree first).
std::vector<int> binomialParents(int n, int root);
std::vector<std::vector<int>> binomialChildren(int n, int root);

// ---- tree.cc: double binary tree all-reduce (base chunk factor 2*replicas) -----------------
/// Parent of each rank (-1 for the root) in the in-order binary tree over positions 1..n where
/// position p holds rank (p - 1 + shift) mod n. Tree 0 uses shift 0, tree 1 shift n-1.
std::vector<int> binaryTreeParents(int n, int shift);
/// Children of each rank in the same tree (0, 1 or 2, in the order they are reduced).
std::vector<std::vector<int>> binaryTreeChildren(int n, int shift);
Status buildDoubleBinaryTree(ProgramBuilder& b, int replicas);

// ---- hierarchical.cc: two-level node/GPU algorithms ----------------------------------------
struct NodeGrid {
  int nodes = 0;                // m
  int gpus_per_node = 0;        // g; rank = node * g + local
  std::vector<int> local_ring;  // intra-node ring over local indices (empty = 0..g-1)
};
/// The grid of a topology's nodes, with the intra-node ring following NVLink when the first node
/// has an NVLink Hamiltonian cycle (notes say which order is used). Errors when nodes hold
/// different GPU counts or ranks are not numbered node by node, or when `num_ranks` differs from
/// the topology's GPUs.
Result<NodeGrid> nodeGrid(const Topology& topology, int num_ranks, std::vector<std::string>* notes);
/// Base chunk factor: allreduce g*m, the others 1.
int hierarchicalBaseFactor(CollectiveKind kind, const NodeGrid& grid);
Status buildHierarchical(ProgramBuilder& b, CollectiveKind kind, const NodeGrid& grid);

/// The grid of `num_ranks` ranks in nodes of `ranks_per_node` (rank = node * g + local; local order, no
/// NVLink ring). Errors: kInvalidArgument when ranks_per_node < 1 or does not divide num_ranks.
Result<NodeGrid> explicitGrid(int num_ranks, int ranks_per_node);

// ---- alltoall_2dh.cc: Tutel's two-dimensional hierarchical all-to-all (base chunk factor 1) -------
/// Needs spec.num_ranks == grid.nodes * grid.gpus_per_node; any shape (one node, one rank per node included).
Status buildAllToAll2dh(ProgramBuilder& b, const NodeGrid& grid);

// ---- nvlink_rings.cc ------------------------------------------------------------------------
struct RingSearch {
  std::vector<RingOrder> rings;  // at least one
  bool all_nvlink = false;       // every hop a direct NVLink or through an NVSwitch
  std::vector<std::string> notes;
};
/// Up to `max_rings` (>= 1) Hamiltonian cycles over the GPUs in which every hop is a direct NVLink
/// link or goes GPU -> NVSwitch -> GPU over NVLink, each NVLink lane carrying at most one ring
/// direction (NCCL's ring search, ../shared/reference/nccl_plugins.md §5). When no such cycle
/// exists: one ring in the order whose weakest Topology::route is widest (above 128 GPUs: rank order), with a
/// note saying so.
/// Errors when some GPU cannot reach the next one at all.
Result<RingSearch> findRings(const Topology& topology, int max_rings);

}  // namespace braid::algos
