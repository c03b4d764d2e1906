// Bandwidth lower bounds for all-gather, reduce-scatter and all-reduce on a Topology (ForestColl cut bound).
//
// Units: bytes_per_rank in bytes, bandwidth in GB/s (1 GB/s = 1e3 bytes/us), times in microseconds.
// Source: ForestColl (Zhao et al., arXiv 2402.06787; liangyuRain/ForestColl README), summarised in
// shared/reference/anchors_algorithms.md §1: T_AG = max over cuts S of (data that must cross into S) /
// (bandwidth into S). The model is bandwidth-only: link alpha_us is ignored.
#pragma once

#include <cstdint>
#include <vector>

#include "braid/collective.h"
#include "braid/status.h"
#include "braid/topology.h"

namespace braid {

/// A cut bound: the time the binding cut needs and the cut itself.
struct CutBound {
  double time_us = 0;    // lower bound on the collective's duration, microseconds
  std::vector<int> cut;  // vertex ids (ascending) of the side S the binding data flows into; empty if no cut
};

/// All-gather lower bound: max over vertex sets S holding at least one GPU but not all GPUs of
///   |GPUs not in S| * bytes_per_rank / B_in(S),
/// where B_in(S) is the summed bandwidth_gbps of links entering S (switches, NICs, CPUs on either side).
/// `bytes_per_rank` is each rank's contribution (the gathered output is numGpus() * bytes_per_rank).
/// Computed exactly without enumerating sets: Dinkelbach iteration on the ratio, each step solving
/// max_S |G \ S| - t * B_in(S) with 2(N-1) s-t min cuts (see src/sim/bounds.cc).
/// Fewer than 2 GPUs: time 0, empty cut. kInvalidArgument when a GPU cannot reach or be reached by another
/// GPU (the message names it), when a link is malformed, or when bytes_per_rank is negative or not finite.
Result<CutBound> allGatherCutBound(const Topology& t, double bytes_per_rank);

/// Reduce-scatter lower bound: the all-gather bound on the reversed graph (reduce-scatter is all-gather
/// run backwards), i.e. max over S of |GPUs not in S| * bytes_per_rank / B_out(S). `bytes_per_rank` is
/// each rank's output share; `cut` is the set S whose outgoing bandwidth binds.
Result<CutBound> reduceScatterCutBound(const Topology& t, double bytes_per_rank);

/// All-reduce lower bound as ForestColl models it (reduce-scatter then all-gather, no in-network
/// reduction): reduceScatterCutBound + allGatherCutBound with the same `bytes_per_rank` (buffer bytes /
/// numGpus()). `cut` is the all-gather cut.
Result<CutBound> allReduceCutBound(const Topology& t, double bytes_per_rank);

}  // namespace braid

namespace braid {

/// All-to-all lower bound. `bytes_per_rank` is each rank's whole send buffer (it sends bytes_per_rank /
/// numGpus() to every rank). Over a vertex set S: |GPUs in S| * |GPUs not in S| * bytes_per_rank / n must
/// leave S (and as much enter it): time >= that / B_out(S) and / B_in(S). The reported bound is the maximum
/// over the cuts examined — every GPU alone, every node, every set of whole nodes up to 2^16 sets (all
/// subsets of up to 16 nodes; beyond that, prefixes and halves in node order), and the min cut on the
/// GPU-balanced bisection — so it is a valid lower bound, and exact (equals brute force) on topologies
/// where one of those cuts binds. Errors as allGatherCutBound.
Result<CutBound> allToAllCutBound(const Topology& t, double bytes_per_rank);

/// Latency lower bound (alpha only): data from every rank must reach every other rank, so the collective takes
/// at least the alpha-diameter — the largest, over rank pairs, of the smallest summed link alpha_us on a path
/// between them (GPUs may relay). time_us = diameter_us. This holds in the simulator's multi-port model, where a
/// rank may send to all its peers at once (direct algorithms finish in one step). Under a single-port model (a
/// rank joins one transfer per step, as recursive doubling) a chunk reaches at most twice as many ranks per step,
/// so ceil(log2 n) steps of at least the smallest route alpha are needed: single_port_us, reported for
/// information, not part of the bound (SCCL/TACCL's step counts; Thakur et al. 2005). Errors as
/// allGatherCutBound; kInvalidArgument for custom collectives.
struct LatencyBound {
  double time_us = 0;         // = diameter_us
  double single_port_us = 0;  // steps x min_alpha_us (single-port model; informative)
  int steps = 0;              // ceil(log2 n)
  double min_alpha_us = 0;    // smallest route alpha between two GPUs
  double diameter_us = 0;     // largest over pairs of the shortest alpha path
};
Result<LatencyBound> latencyBound(const Topology& t, CollectiveKind collective);

/// Both bounds for one call of nccl-tests size `size_bytes`: time_us = max(bandwidth cut bound,
/// latency bound). For all-gather bytes_per_rank = size / n; reduce-scatter size / n; all-reduce size / n
/// per rank share; all-to-all size (each rank's send buffer).
struct CollectiveBound {
  double time_us = 0;
  double bandwidth_us = 0;  // the cut bound
  double latency_us = 0;    // the latency bound
  std::vector<int> cut;     // binding cut of the bandwidth bound
};
Result<CollectiveBound> collectiveBound(const Topology& t, CollectiveKind collective, uint64_t size_bytes);

/// collectiveBound for a sweep of sizes at the cost of one: the cut bound is linear in the size (the max over cuts
/// S of k_S x size / B_S is size x max k_S / B_S), so it is computed once, at the largest size, and scaled; the
/// latency bound does not depend on the size. Results in the order of `sizes`. Errors as collectiveBound.
Result<std::vector<CollectiveBound>> collectiveBounds(const Topology& t, CollectiveKind collective,
                                                      const std::vector<uint64_t>& sizes);

}  // namespace braid
