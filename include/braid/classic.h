// Classical collective algorithms built in the IR: the baselines Braid compares against and the
// fallbacks it runs when no synthesized algorithm applies. Costs in the α-β model are in
// ../shared/reference/anchors_algorithms.md §4.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "braid/algorithm.h"
#include "braid/collective.h"
#include "braid/topology.h"

namespace braid {

enum class ClassicAlgo {
  kRing,                // ring (Patarasuk & Yuan 2009); rank order, or NCCL-style NVLink rings with a topology;
                        // broadcast / reduce: NCCL's chain along the ring from / to the root
  kMultiRing,           // several rings over disjoint/duplicated NVLink cycles, data split across them
  kDirect,              // direct / all-pairs: every rank exchanges with every other rank in one step;
                        // broadcast / reduce: the root sends to / receives from every rank
  kRecursiveDoubling,   // recursive doubling (all-gather, all-reduce) / halving (reduce-scatter); non-powers of two
                        // handled; broadcast / reduce: binomial tree rooted at the root (Thakur et al. 2005)
  kDoubleBinaryTree,    // NCCL's double binary tree all-reduce (Sanders et al. 2009)
  kPairwise,            // pairwise-exchange all-to-all: in round k rank r sends to r+k, receives from r-k
  kHierarchical,        // two-level: intra-node then inter-node then intra-node (needs nodes in the topology)
  kTwoDimHierarchical,  // Tutel's 2DH all-to-all (MLSys'23): stride copy, intra-node all-to-all, stride copy,
                        // inter-node all-to-all among the ranks of one local index (nodes from the topology or
                        // ClassicRequest::ranks_per_node)
};

const char* classicAlgoName(ClassicAlgo algo);  // "ring", "multiring", "direct", "recursive", "tree", "pairwise",
                                                // "hierarchical", "2dh"
Result<ClassicAlgo> parseClassicAlgo(const std::string& name);
/// The collectives an algorithm applies to.
std::vector<CollectiveKind> classicCollectives(ClassicAlgo algo);

struct ClassicRequest {
  ClassicAlgo algo = ClassicAlgo::kRing;
  CollectiveSpec spec;                 // num_ranks, in_place, root (broadcast / reduce); chunk_factor is chosen
                                       // by the builder when 0
  const Topology* topology = nullptr;  // optional: rings follow NVLink, hierarchy follows nodes
  Protocol protocol = Protocol::kSimple;
  int num_channels = 0;  // 0 = builder's choice (multiring: one per ring found)
  /// 2dh: ranks per node g (rank = node * g + local index; num_ranks must be a multiple of g). 0 = the topology's
  /// nodes; with a topology as well, it must equal the topology's GPUs per node.
  int ranks_per_node = 0;
};

/// Builds the algorithm. Errors: kInvalidArgument when the algorithm does not apply to the
/// collective or the topology lacks what it needs (names what).
Result<Algorithm> buildClassic(const ClassicRequest& request);

/// What buildClassic(request) would build, found without building it (no programs: rings and node grids only), so
/// that a request too large to verify or to write can be refused first.
struct ClassicShape {
  CollectiveSpec spec;      // the request's, with the chunk factor the builder chooses
  int64_t chunk_cells = 0;  // input + output chunks summed over the ranks: what verify() counts against
                            // kMaxVerifiedChunks, scratch chunks left out (a lower bound)
  int64_t min_steps = 0;    // a lower bound of the steps over all ranks (direct, pairwise: every rank sends to and
                            // receives from every other, 2 n (n - 1)); 0 where none is known cheaply
};
/// Errors: buildClassic's for the request itself.
Result<ClassicShape> classicShape(const ClassicRequest& request);

}  // namespace braid
