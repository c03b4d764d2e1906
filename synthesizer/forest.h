// The tree-packing construction (ForestColl: Zhao et al., arXiv 2402.06787; ../shared/reference/anchors_algorithms.md
// §1) in Braid's route model: every message from rank a to rank b follows Topology::route(a, b), as the simulator,
// NCCL and MSCCL send it, so a logical link's traffic loads every physical link of its route.
//
//   forestRate      the optimal broadcast rate per root of a tree-based all-gather (linear program, GLPK), and the
//                   split of every physical link's bandwidth among the logical links whose routes cross it;
//   forestUnits     that split in integer tree units (k trees per root), checked exactly with integer max-flows;
//   packArborescences (forest_pack.h) the k out-trees per root;
//   forestPipeline  the trees as the synthesizer's routing (chunk -> parent link), ordered into a schedule.
//
// Units: GB/s (1 GB/s = 1e3 bytes/us), bytes, microseconds.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "braid/bounds.h"
#include "braid/status.h"
#include "synthesizer/forest_pack.h"
#include "synthesizer/model.h"

namespace braid::synth {

/// The optimal rate of a tree-based all-gather on a logical topology.
struct ForestRate {
  /// GB/s at which every root can broadcast its share to every other rank at once.
  /// An all-gather of m bytes per rank then takes m / (rate_gbps x 1e3) us (bandwidth only).
  double rate_gbps = 0;
  /// Bandwidth given to each logical link (index = LogicalTopology::links), GB/s; on every physical link the sum
  /// over the logical links whose route crosses it is at most its bandwidth.
  std::vector<double> link_gbps;
  int lp_columns = 0;
  int lp_rows = 0;
  double seconds = 0;
  /// Empty for the LP's own split; otherwise which logical links share the physical links equally
  /// (forestEqualShareRate).
  std::string sharing;
};

/// The linear program: maximise R over c_l >= 0 (bandwidth of logical link l) and, for every destination rank v, a
/// flow f^v from a super-source with an arc of capacity R to every rank, of value n R into v, with f^v_l <= c_l and,
/// for every physical link e, sum of c_l over the logical links whose route crosses e <= B_e. By Edmonds' branching
/// theorem (root-set form, as ForestColl uses it) the flow condition is exactly what k trees per root of rate R/k
/// each need, so R is the best rate any all-gather built of trees along these routes reaches. Relays are GPUs (a
/// tree's inner vertices); switches never copy. Errors: kInvalidArgument for fewer than 2 ranks or a rank no
/// logical link reaches; kTimeout when GLPK hits `seconds_limit`; kInternalError when GLPK fails otherwise.
///
/// With `link_caps` (one per logical link, GB/s) the physical links drop out: c_l <= link_caps[l] instead, and the
/// result's link_gbps are the caps; kInfeasible when the links with a positive cap do not connect every rank. That
/// case is solved by max-flows (cappedTreeRate), not by the LP: same optimum, no GLPK (lp_columns = lp_rows = 0).
/// The rate of forestRate's flow condition under fixed capacities `caps` (GB/s per logical link): min over the
/// ranks v in `destinations` (one per orbit of a symmetry the capacities respect) and nonempty S not holding v of
/// c(S -> outside S) / |S|, exact up to rounding the capacities down to 1e-9 GB/s (Dinkelbach's iteration on
/// integer max-flows: forest_cut_rate.cc). `*max_flows` (may be null): how many max-flows it took. Errors:
/// kInvalidArgument (caps.size() != links, a negative capacity, values too large for 64-bit flows), kInfeasible
/// when the links with a positive capacity do not connect every rank to every destination.
Result<double> cappedTreeRate(const LogicalTopology& logical, const std::vector<double>& caps,
                              const std::vector<int>& destinations, int* max_flows = nullptr);

Result<ForestRate> forestRate(const LogicalTopology& logical, double seconds_limit,
                              const std::vector<double>* link_caps = nullptr);

/// The bandwidth each kept logical link gets when every kept link sends at once and every physical link is shared
/// equally by the kept logical links crossing it: min over its route's links e of B_e / (kept links crossing e), as
/// Braid's simulator shares a link among the messages on it (docs/simulator.md, "Fair sharing of links"); 0 for
/// links not kept. keep has one entry per logical link.
std::vector<double> equalShareCaps(const LogicalTopology& logical, const std::vector<char>& keep);

/// The best tree rate whose link bandwidths are equal shares (equalShareCaps), over a few sets of kept links: every
/// pair; the pairs `split` (forestRate's LP) gives bandwidth; on several nodes, the pairs inside nodes plus the
/// pairs of the same local index across nodes (rails). The LP's own split is optimal but may give the logical links
/// on one physical link unequal bandwidths, which links shared equally do not deliver; an equal-share rate is
/// delivered whenever the kept links are busy together. rate_gbps <= split.rate_gbps. Errors: as forestRate.
/// `split` may be null (the LP was not solved): its candidate is then left out.
Result<ForestRate> forestEqualShareRate(const LogicalTopology& logical, const ForestRate* split, double seconds_limit);

/// forestRateStage solves the LP (forestRate without caps) only up to this many logical links: its size grows with
/// n^2 links x one flow per destination orbit (4032 links on 8 DGX H100: 32,257 columns, 28.6 s on this 2-core
/// machine) while the equal-share rates take max-flows (10-20 ms there).
inline constexpr size_t kMaxTreeRateLpLinks = 2048;

/// ForestRate in integer units: `k` trees per root, each at rate_gbps / k; capacity[u * n + v] = how many tree units
/// the logical link u -> v carries (floor(c_l k / rate)). rate_gbps <= the LP's rate: the largest rate at which the
/// units are feasible (every rank's max-flow from the super-source is >= n k; exact integer arithmetic).
struct ForestUnits {
  int64_t k = 0;
  double rate_gbps = 0;
  std::vector<int64_t> capacity;  // n x n, row = sender
};

/// Chooses the smallest k in min_k..max_k whose feasible rate is within `tolerance` (relative) of the LP's rate, or
/// the k with the best rate when none is (min_k = max_k fixes k). Errors: kInvalidArgument for max_k < min_k,
/// min_k < 1 or a rate that is not positive; kInternalError when no k is feasible at any positive rate.
Result<ForestUnits> forestUnits(const LogicalTopology& logical, const ForestRate& rate, int max_k, double tolerance,
                                int min_k = 1);

/// The trees as a synthesizer pipeline: chunkup = k x pipeline pieces per root; the pieces of a tree group of
/// multiplicity m follow its edges. The schedule is the fluid one of the construction: every logical link sends at
/// the rate of its tree units (units x rate / k), one chunk at a time in the order chunks reach its sender (ties:
/// lower piece first); a chunk arrives the route's α after its last byte is sent, while the link already sends the
/// next one (cut-through, as the simulator); the rates fit every physical link by construction.
struct ForestPipeline {
  ChunkProblem problem;
  Routing routing;
  Schedule schedule;
  int pipeline = 1;  // pieces per tree unit
  int64_t k = 1;     // trees per root
};

/// Builds the chunk problem, routing and schedule for `trees` (packArborescences on `units`) at nccl-tests size
/// `size_bytes` with `pipeline` pieces per tree unit.
ForestPipeline forestPipeline(const LogicalTopology& logical, const std::vector<PackedTree>& trees,
                              const ForestUnits& units, int pipeline, uint64_t size_bytes);

/// A logical topology with a link for every ordered pair of ranks that has a route (Topology::route), no relay
/// restriction and no symmetry; `transposed` as buildLogicalTopology (reduce-scatter: data moves dst -> src).
/// Errors: kInvalidArgument when a rank has no route to or from any other.
Result<LogicalTopology> buildCompleteLogicalTopology(const Topology& topology, bool transposed);

}  // namespace braid::synth

namespace braid::synth {

/// The tree rates of one logical topology (stage "tree rate"): the LP's optimum with its own split of the physical
/// links, and the best equal-share rate (forestEqualShareRate).
struct ForestRates {
  ForestRate split;
  ForestRate equal;
};

/// Runs forestRate and forestEqualShareRate under ctx's deadline; appends the stage report ("tree rate" + tag) to
/// `stages`. Errors: forestRate's; kTimeout with the stage named.
Result<ForestRates> forestRateStage(const LogicalTopology& logical, const StageContext& ctx, const std::string& tag,
                                    std::vector<StageReport>* stages);

/// Integer tree units and their packing (stages "tree units" and "packing" + tag): k <= 32 trees per root, the
/// smallest k within `tolerance` of `rate` (forestUnits), or k = fixed_k when fixed_k > 0 (the reduce-scatter part
/// of an all-reduce takes the all-gather part's k, so that both cut the buffer alike). Errors: those of forestUnits
/// and packArborescences; kTimeout when ctx's deadline passes.
struct ForestTrees {
  ForestUnits units;
  std::vector<PackedTree> trees;
};
Result<ForestTrees> forestTreesStage(const LogicalTopology& logical, const ForestRate& rate, double tolerance,
                                     int fixed_k, const StageContext& ctx, const std::string& tag,
                                     std::vector<StageReport>* stages);

/// forestPipeline with `pieces` pieces per tree unit, fewer (halved) while n k pieces would exceed 4096 chunks; the
/// stage report ("schedule" + tag) goes to `stages`.
ForestPipeline forestScheduleStage(const LogicalTopology& logical, const ForestTrees& trees, int pieces,
                                   uint64_t size_bytes, const std::string& tag, std::vector<StageReport>* stages);

}  // namespace braid::synth

namespace braid::synth {

/// The all-to-all of the max-concurrent flow (include/braid/bounds.h allToAllFlow) as a synthesizer pipeline:
/// chunkup = `pieces` per (source, destination) block; the pieces of a block are dealt to its flow paths by largest
/// remainder of pieces x fraction (ties: the earlier path), and each piece follows its path's logical links. The
/// schedule is fluid: every logical link sends at the rate that ends its share of the data when the most loaded
/// physical link ends its own (rates in proportion to the chunks each logical link carries, every physical link at
/// most full), one chunk at a time in the order chunks reach its sender (ties: lower piece, owner, destination); a
/// chunk arrives the route's α after its last byte is sent (cut-through, as the simulator).
struct FlowPipeline {
  ChunkProblem problem;
  Routing routing;
  Schedule schedule;
  /// The bandwidth-only time of the dealt pieces, us: max over physical links of their bytes / bandwidth (the
  /// flow's optimum when every fraction is a multiple of 1 / pieces).
  double fluid_us = 0;
};

/// Builds the pipeline on `logical` (buildCompleteLogicalTopology, not transposed) at nccl-tests size `size_bytes`
/// (one rank's send buffer). Errors: kInvalidArgument when pieces < 1 or flow.num_ranks differs from the logical
/// topology's; kInternalError when a path hop has no logical link.
Result<FlowPipeline> flowPipeline(const LogicalTopology& logical, const AllToAllFlow& flow, int pieces,
                                  uint64_t size_bytes);

}  // namespace braid::synth
