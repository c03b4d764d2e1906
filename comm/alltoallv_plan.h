// All-to-all-v plans, built by hand for one rank from its own counts (the peers build theirs): the flat direct
// exchange and Tutel's two-dimensional hierarchical exchange (2DH). comm/README.md, "All-to-all-v".
#pragma once

#include <cstdint>
#include <vector>

#include "braid/plan.h"
#include "braid/status.h"

namespace braid::comm {

/// One rank's all-to-all-v call in bytes: send_bytes[p] bytes from input offset send_offset[p] go to peer p,
/// recv_bytes[p] bytes from peer p land at output offset recv_offset[p]. send_bytes[rank] == recv_bytes[rank].
struct AllToAllvCall {
  int rank = 0;
  int num_ranks = 0;
  uint64_t element_bytes = 1;
  std::vector<uint64_t> send_bytes, send_offset, recv_bytes, recv_offset;  // num_ranks entries each
  uint64_t input_bytes = 0;                                                // max(send_offset + send_bytes)
  uint64_t output_bytes = 0;                                               // max(recv_offset + recv_bytes)
};

/// The flat exchange (MPI_Alltoallv's semantics): a send threadblock and a receive threadblock per peer, all at
/// once (one message each, zero bytes included), and a local copy of the own block. Checked with validatePlan.
Result<Plan> flatAllToAllvPlan(const AllToAllvCall& call);

/// 2DH (Tutel, MLSys'23 §5; tutel nccl_all_to_all_2d_async) for variable sizes over `nodes` x `ranks_per_node`
/// ranks (rank = node * g + local index; both > 1). With this rank (q, j):
///   phase 0/1: to each node peer (q, j') one message holding, in node order, the blocks for (q', j') (q' = 0..m-1),
///              packed in scratch by stride copies unless they already lie back to back in the input;
///   phase 1:   from each node peer (q, j') one message of its blocks for (q', j), into scratch; the block for this
///              rank is copied to the output;
///   phase 2/3: to each (q', j), q' != q, one message holding, in local order, the blocks of node q's ranks for
///              (q', j): this rank's own from the input, the others from the phase-1 arrivals (stride copies);
///   phase 3:   from each (q', j) one message of node q''s blocks for this rank, straight into the output when
///              recv_offset places them back to back, else into scratch and copied out.
/// `from_node_peers[j' * m + q']`: the bytes node peer (q, j') sends this rank in phase 1 for rank (q', j) (its
/// send_bytes for (q', j)); entries of j' = j are ignored. Every rank learns them from an intra-node exchange of
/// counts before the call (the receiver of phase 3 needs nothing: its recv_bytes give its blocks). Scratch: the
/// phase-0 and phase-2 packing, the phase-1 arrivals and, when the output is not back to back, the phase-3
/// arrivals — at most about three times the bytes the rank sends and receives.
///
/// Messages carry their blocks grouped as lowering groups chunks (runtime/plan/instances.cc): whole blocks that fit
/// in one slice together, or one block larger than a slice alone, so slice s of a step holds slice s of each block
/// it covers and every copy depends on exactly the step that received its block. Both ends of a connection group
/// the same block sizes the same way (when the ranks' counts agree: the call check compares them first). A message
/// whose blocks are all empty is sent as one zero-byte message. Checked with validatePlan.
Result<Plan> twoDimAllToAllvPlan(const AllToAllvCall& call, int nodes, int ranks_per_node,
                                 const std::vector<uint64_t>& from_node_peers);

}  // namespace braid::comm
