// Lower bounds on a collective's time on a Topology: the ForestColl cut bound, the route-constrained LP bound
// (routeBound), the latency bound, and their combination for one nccl-tests call (collectiveBound).
//
// Units: bytes_per_rank in bytes, bandwidth in GB/s (1 GB/s = 1e3 bytes/us), times in microseconds.
// Source of the cut bound: ForestColl (Zhao et al., arXiv 2402.06787; liangyuRain/ForestColl README), summarised in
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

/// Largest GPU count routeBound solves its pair LP for (n (n-1) variables); above it routeBound is kUnsupported
/// and collectiveBound(s) report route_us = 0 (the cut bound alone).
inline constexpr int kRouteBoundMaxGpus = 256;

/// Route-constrained bandwidth lower bound, microseconds. ASSUMPTION: every GPU-to-GPU message from rank a to
/// rank b travels along the one route Topology::route(a, b) — as Braid's simulator (include/braid/simulate.h),
/// NCCL and MSCCL send it; algorithms may still relay data through other GPUs. Under it, a linear program gives
/// the bound: minimise T over f_ab >= 0 (bytes a sends b, for every ordered GPU pair with a route) subject to
///   for every link e:   sum of f_ab over pairs whose route crosses e <= B_e T   (B_e = bandwidth_gbps x 1e3 B/us),
///   for every GPU b:    sum_a f_ab >= D_in;   for every GPU a:  sum_b f_ab >= D_out,
///   for every node q (several nodes): sum of f_ab entering q >= N_in(q), leaving q >= N_out(q),
/// with m = bytes_per_rank, n GPUs, k of them in q:
///   all-gather      D_in = (n-1) m, D_out = m,         N_in = (n-k) m, N_out = k m;
///   reduce-scatter  D_in = m,       D_out = (n-1) m,   N_in = k m,     N_out = (n-k) m;
///   all-to-all      D_in = D_out = (n-1)/n m,          N_in = N_out = k (n-k)/n m   (m = one rank's send buffer);
///   all-reduce      the reduce-scatter time + the all-gather time (ForestColl's model, as allReduceCutBound).
/// Each demand is a necessary condition (derived in src/sim/route_bound.cc). Why it can be tighter than the cut
/// bound: the cut bound lets data into a GPU over every physical link at once, but a link no route between two
/// GPUs uses (a DGX A100 GPU's PCIe link: GPU pairs talk through the NVSwitch) carries nothing, and a slow link on
/// a route (a DGX-1's QPI between sockets) is shared by every pair whose route crosses it. It is not always
/// tighter: cuts through switches are not in the LP, so collectiveBound takes the maximum of both.
/// The LP is linear in m: solved once with GLPK's simplex (presolve on, terminal output off).
/// `bytes_per_rank` as the cut bounds (all-gather, reduce-scatter, all-reduce: one rank's share; all-to-all: one
/// rank's send buffer). Fewer than 2 GPUs: 0. Errors: kInvalidArgument when bytes_per_rank is negative or not
/// finite, a link on a route is malformed, or a GPU cannot reach or be reached from another over routes (even
/// relaying through GPUs; the message names it); kUnsupported for other collectives and above
/// kRouteBoundMaxGpus GPUs; kInternalError when GLPK fails (its code in the message).
Result<double> routeBound(const Topology& t, CollectiveKind collective, double bytes_per_rank);

/// Largest GPU count allToAllFlow solves its LP for (n^2 (n-1) flow columns: 31,745 at 32 GPUs); above it
/// allToAllFlow is kUnsupported and collectiveBound(s) report flow_us = 0.
inline constexpr int kAllToAllFlowMaxGpus = 32;

/// The all-to-all max-concurrent flow over Braid's routes and its decomposition into relay paths. ASSUMPTION as
/// routeBound: a message from rank a to rank b travels along Topology::route(a, b); data may be relayed through
/// GPUs (received, then sent on), never copied by a switch or NIC. Every rank sends a block of S / n bytes to each
/// other rank (S = one rank's send buffer). The LP (GLPK simplex, presolve on; src/cost/flow_bound.cc), per block:
///   minimise tau over f^s_ab >= 0 (blocks of source s that GPU a sends GPU b along route(a, b))
///   s.t. for every source s and rank v != s: (f^s into v) - (f^s out of v) = 1,
///        for every physical link e: sum over s and the pairs whose route crosses e of f^s_ab <= B_e tau.
/// This is the max-concurrent-flow formulation of TE-CCL (Liu et al., SIGCOMM'24) and of Shahrokhi and Matula's
/// concurrent flow (J. ACM 37(2), 1990), on the graph of GPU routes; the optimum is the fastest any all-to-all
/// that moves whole routes can be in the bandwidth model (alpha ignored): time_us >= us_per_byte x S. It is at
/// least routeBound's all-to-all value (whose demands this flow meets).
struct AllToAllFlow {
  /// One relay path of the blocks one rank sends another: ranks[0] = source, ranks.back() = destination, the
  /// ranks between relay; `fraction` of the block takes it. A (s, d) list's fractions sum to 1.
  struct Path {
    std::vector<int> ranks;
    double fraction = 0;
  };
  int num_ranks = 0;
  /// The optimum: the all-to-all of an S-byte send buffer per rank takes >= us_per_byte x S microseconds.
  double us_per_byte = 0;
  /// paths[s * num_ranks + d]: the flow's decomposition (Ford-Fulkerson, cycles cancelled); empty for s == d.
  std::vector<std::vector<Path>> paths;
  int lp_columns = 0;
  int lp_rows = 0;
  double seconds = 0;  // wall time of the LP and the decomposition
};

/// Solves the flow LP within `seconds_limit` (GLPK's tm_lim) and decomposes it. Fewer than 2 GPUs: us_per_byte 0,
/// no paths. Errors: kInvalidArgument for a non-positive time limit, a malformed link on a route or GPUs the
/// routes do not join (as routeBound); kUnsupported above kAllToAllFlowMaxGpus GPUs; kTimeout at the time limit;
/// kInternalError when GLPK fails or the decomposition does not account for every block.
Result<AllToAllFlow> allToAllFlow(const Topology& t, double seconds_limit = 60);

/// Both bounds for one call of nccl-tests size `size_bytes`: time_us = max(bandwidth bound, latency bound), the
/// bandwidth bound being max(cut bound, route bound, and for all-to-all the max-concurrent flow). For all-gather
/// bytes_per_rank = size / n; reduce-scatter size / n; all-reduce size / n per rank share; all-to-all size (each rank's
/// send buffer).
struct CollectiveBound {
  double time_us = 0;       // max(bandwidth_us, latency_us)
  double bandwidth_us = 0;  // the bandwidth bound: max(cut_us, route_us, flow_us)
  double cut_us = 0;        // the ForestColl cut bound (allGatherCutBound ... allToAllCutBound)
  double route_us = 0;      // routeBound; 0 above kRouteBoundMaxGpus GPUs (not computed)
  double flow_us = 0;       // all-to-all: allToAllFlow's optimum; 0 for other collectives and above 32 GPUs
  double latency_us = 0;    // the latency bound
  std::vector<int> cut;     // binding cut of the cut bound
};
Result<CollectiveBound> collectiveBound(const Topology& t, CollectiveKind collective, uint64_t size_bytes);

/// collectiveBound for a sweep of sizes at the cost of one: the cut bound is linear in the size (the max over cuts
/// S of k_S x size / B_S is size x max k_S / B_S) and so is the route bound (its LP is homogeneous in the data),
/// so each is computed once, at the largest size, and scaled (the all-to-all flow too: its LP is in blocks); the
/// latency bound does not depend on the size. Results in the order of `sizes`. Errors as collectiveBound.
Result<std::vector<CollectiveBound>> collectiveBounds(const Topology& t, CollectiveKind collective,
                                                      const std::vector<uint64_t>& sizes);

}  // namespace braid
