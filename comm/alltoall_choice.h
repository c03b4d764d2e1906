// Flat or two-dimensional hierarchical (2DH, Tutel MLSys'23) all-to-all(v) for a communicator: the node shape of
// its ranks and the choice between the two per call size (comm/README.md, "All-to-all: flat or 2DH").
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "braid/algorithm.h"
#include "braid/status.h"
#include "braid/topology.h"

namespace braid::comm {

/// How the ranks sit in nodes: rank = node * ranks_per_node + local index (Tutel's LOCAL_SIZE layout).
struct NodeShape {
  int nodes = 0;           // m; 0 = unknown
  int ranks_per_node = 0;  // g
  std::string source;      // where it came from ("topology dgx-h100-x2", "BRAID_RANKS_PER_NODE=4", "hosts"), or why
                           // it is unknown
  bool known() const { return nodes > 0; }
  /// Both levels exist (m > 1 and g > 1): otherwise 2DH is the flat exchange.
  bool twoLevels() const { return nodes > 1 && ranks_per_node > 1; }
  std::string toString() const;  // "2 node(s) x 8 rank(s) (topology dgx-h100-x2)" or "unknown (<why>)"
};

/// The shape the bootstrap's host names give: ranks numbered host by host with the same count on every host.
/// Unknown (with the reason) otherwise.
NodeShape nodeShapeFromHosts(const std::vector<std::string>& hosts);

/// The communicator's node shape, first found of: `topology` (when not null: its nodes, which must hold the same
/// number of GPUs each and number ranks node by node), `ranks_per_node` (> 0: CommOptions::ranks_per_node or
/// BRAID_RANKS_PER_NODE, named by `ranks_per_node_source`), the host names. Errors (kInvalidArgument, naming the
/// setting): a ranks per node that does not divide `num_ranks`, or that contradicts the topology's nodes.
Result<NodeShape> resolveNodeShape(int num_ranks, const Topology* topology, int ranks_per_node,
                                   const std::string& ranks_per_node_source, const std::vector<std::string>& hosts);

/// BRAID_ALLTOALL / CommOptions::alltoall.
enum class AllToAllMode { kAuto, kFlat, kTwoDim };
/// "auto", "flat", "2dh" (kInvalidArgument naming `setting` otherwise).
Result<AllToAllMode> parseAllToAllMode(const std::string& value, const std::string& setting);
const char* allToAllModeName(AllToAllMode mode);

/// One decision: 2DH or flat, why, and the simulated times behind it (µs; < 0 when not simulated).
struct AllToAllDecision {
  bool two_dim = false;
  std::string why;
  double flat_us = -1;
  double two_dim_us = -1;
};

/// Chooses flat or 2DH per call. The same inputs (mode, shape, topology, size) give the same decision on every
/// rank: the simulator is deterministic. Thread-compatible (one communicator's calls come from one thread).
class AllToAllChooser {
 public:
  /// `mode_setting`: where the mode came from ("BRAID_ALLTOALL", "CommOptions::alltoall"), for the log.
  /// `topology` (may be null): the communicator's topology when its GPU count equals num_ranks. `log_rank`: the
  /// rank that logs decisions at BRAID_DEBUG=INFO (rank 0 logs, others pass -1).
  AllToAllChooser(int num_ranks, AllToAllMode mode, std::string mode_setting, NodeShape shape,
                  std::shared_ptr<const Topology> topology, int log_rank);

  AllToAllMode mode() const { return mode_; }
  const NodeShape& shape() const { return shape_; }
  /// Whether decide() depends on the size: auto mode with two levels and a topology to simulate on.
  bool needsSize() const;
  /// The decision for a call that moves `per_peer_bytes` from a rank to a peer (all-to-all-v: the mean over all
  /// pairs). Auto mode simulates (simulate(), include/braid/simulate.h) the flat exchange (the direct all-to-all)
  /// and 2DH (the 2dh algorithm) on the topology at the size bucket's lower edge, 2^floor(log2 per_peer_bytes)
  /// bytes per peer, and takes the faster; the decision is cached per bucket and logged once.
  const AllToAllDecision& decide(uint64_t per_peer_bytes);
  /// The direct or 2dh all-to-all for num_ranks ranks in the requested mode (out of place when both declared).
  Result<Algorithm> algorithm(bool two_dim, bool in_place) const;
  /// Mode and shape, for the catalog digest every rank compares.
  std::string digest() const;

 private:
  AllToAllDecision simulated(uint64_t per_peer_bytes) const;

  int num_ranks_;
  AllToAllMode mode_;
  std::string mode_setting_;
  NodeShape shape_;
  std::shared_ptr<const Topology> topology_;
  int log_rank_;
  std::map<int, AllToAllDecision> decisions_;  // bucket (floor(log2 bytes per peer), -1 for 0) -> decision
};

}  // namespace braid::comm
