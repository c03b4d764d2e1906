// SCCL's k-synchronous all-gather synthesis (Cai et al., "Synthesizing Optimal Collective Algorithms", PPoPP'21,
// arXiv 2008.08708 §3-4; ../shared/reference/anchors_algorithms.md §3), on Z3, private to synthesizer/.
//
// Model. Every rank's buffer is cut into C chunks. An algorithm is S steps; step s lasts r_s >= 1 rounds (R = the
// sum). In a step, a physical link e carries at most cap_e x r_s chunks, where cap_e = floor(B_e / u) for the unit
// bandwidth u (the fastest lane of a link leaving a GPU: one NVLink); a chunk may be sent in step s only by a rank
// that held it after step s-1, along a logical link (a GPU pair's route, Topology::route) whose physical links all
// have cap_e >= 1. After step S every rank holds every chunk. The cost of step s at chunk size b is
// max alpha + r_s x b / u (SCCL's S·α + (R/C)·L·β): steps count latency, R/C bandwidth.
//
// Encoding (quantifier-free, pure Boolean with cardinality constraints; Z3's QF_FD solver): has[c][v][s] (rank v
// holds chunk c after step s; false where v is farther than s hops from c's owner) and send[c][l][s]; has needs
// has one step earlier or a send into v, a send needs has at its source one step earlier and not at its
// destination, and for a fixed split (r_1 .. r_S) of R every physical link's sends per step are at most
// cap_e x r_s (atmost). The search tries splits in lexicographic order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "braid/status.h"
#include "braid/synthesize.h"
#include "synthesizer/model.h"

namespace braid::synth {

/// What to search: 0 = searched.
///   kLatency: steps 0: the fewest steps from the hop diameter up (at most kScclMaxExtraSteps more); rounds 0: the
///     fewest rounds for those steps from max(steps, the ingress bound) up; chunks 0: 1.
///   kBandwidth: the chunk counts C = 1 .. kScclMaxBandwidthChunks (or `chunks`) in increasing order of their
///     ingress bound R(C)/C, then C; for each, R = R(C) (or `rounds`) and the fewest steps from the hop diameter
///     up (or `steps`): the first feasible (S, R, C) has the least R/C any C in range allows, and the fewest
///     steps for it.
struct ScclRequest {
  int steps = 0;
  int rounds = 0;
  int chunks = 0;
  ScclObjective objective = ScclObjective::kLatency;
};

inline constexpr int kScclMaxBandwidthChunks = 8;

inline constexpr int kScclMaxExtraSteps = 3;
inline constexpr int kScclMaxSteps = 16;
inline constexpr int kScclMaxChunks = 32;
inline constexpr int kScclMaxRounds = 64;

/// The capacities of SCCL's model on a logical topology.
struct ScclGraph {
  double unit_gbps = 0;               // u: one round moves one chunk per unit of capacity
  std::vector<int> resource_cap;      // per Topology::links index: floor(B_e / u); 0 = unusable
  std::vector<char> link_usable;      // per logical link: every resource it crosses has cap >= 1
  std::vector<std::vector<int>> hop;  // hop[a][b]: fewest usable logical links from rank a to rank b; -1 = none
  int steps_lower_bound = 0;          // the hop diameter
  /// The fewest rounds any all-gather of C chunks per rank needs: max over ranks v of ceil((n-1) C / the
  /// capacity entering v).
  int roundsLowerBound(int chunks) const;
  std::vector<int> ingress_cap;  // per rank: summed cap of the physical links into its GPU
  int num_ranks = 0;
};

/// Errors: kUnsupported when some rank cannot be reached over links of at least the unit bandwidth (SCCL's model
/// then has no algorithm; e.g. nodes joined by NICs slower than one NVLink).
Result<ScclGraph> scclGraph(const LogicalTopology& logical);

struct ScclSolution {
  int steps = 0;
  int rounds = 0;
  int chunks = 1;
  std::vector<int> rounds_per_step;  // r_1 .. r_S
  ChunkProblem problem;              // all-gather chunks, chunkup = C
  Routing routing;                   // parent[c][v]: the logical link that first delivers c to v
  Schedule schedule;                 // step s of the model: [T_{s-1}, T_s) at the costing size
  int checks = 0;                    // Z3 checks run
  uint64_t units = 0;                // Z3 resource units spent
};

/// The least-steps-then-least-rounds all-gather for `request` on `logical` (a transposed logical topology gives
/// the reduce-scatter's reversed movement), times at nccl-tests size `size_bytes`. Every check runs under the
/// stage's budget (ctx.units) and the wall clock (budget.h). Errors: kInvalidArgument for requests outside
/// 1..kScclMax*; kInfeasible when no algorithm exists (steps or rounds below the hop diameter, or S, R and C all
/// given and refuted); kNotFound when every instance in the searched range was refuted; kUnsupported when the
/// ingress bound needs more than kScclMaxRounds rounds; kTimeout when the budget or the time ended first (the
/// message lists what was refuted and what was left undecided); scclGraph's errors.
Result<ScclSolution> scclAllGather(const LogicalTopology& logical, const ScclRequest& request, uint64_t size_bytes,
                                   const StageContext& ctx, StageReport* report);

}  // namespace braid::synth
