// Expert-parallel dispatch and combine on a Communicator (Mixture-of-Experts layers; docs/moe.md).
//
// `num_experts` experts are spread over the ranks in blocks: expert e lives on rank e / E_local, as local expert
// e % E_local, with E_local = num_experts / ranks. Every token chooses `top_k` experts (expert_ids[t * top_k + k];
// -1 leaves that slot unrouted). Dispatch sends each routed (token, k) slot's hidden vector to its expert's rank;
// combine returns the experts' outputs and forms, per token, the weighted sum over its slots.
//
// Capacity and dropped tokens (GShard, Lepikhin et al. 2020 §3.2; Tutel, Hwang et al., MLSys'23 §3): with
// `capacity` >= 0, at most `capacity` slots of this rank go to each expert; slots are admitted in priority order —
// every token's first choice (k = 0) in token order, then every token's second choice, ... — and the rest are
// dropped: not sent, and contributing nothing to the combined output (a residual connection carries those tokens in
// the model). `capacity` = -1 is dropless, as DeepEP's normal kernels (deepseek-ai/DeepEP): the receive sizes are
// exchanged first, so buffers need not be padded. A slot routed twice to the same expert counts twice.
//
// Received layout (what the experts compute on): expert-major — local expert 0's slots, then local expert 1's, ...;
// within one expert by source rank, and within one source in the priority order above. `expert_counts()` gives the
// slots per local expert, so a grouped GEMM over the buffer needs nothing else.
//
// Traffic: one all-to-all-v of the slot vectors per dispatch and one per combine (Communicator::allToAllv, flat or
// hierarchical as the communicator chooses), plus, at plan time, one all-to-all of per-expert counts (E_local
// 64-bit integers per rank pair). Every rank calls plan / dispatch / combine collectively, in the same order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "braid/comm.h"
#include "braid/datatype.h"
#include "braid/status.h"

namespace braid::moe {

struct RoutingRequest {
  const int32_t* expert_ids = nullptr;  // [num_tokens x top_k]; each in [0, num_experts) or -1 (unrouted)
  size_t num_tokens = 0;                // this rank's tokens (may differ between ranks, may be 0)
  int top_k = 1;                        // 1..64
  int num_experts = 0;                  // a positive multiple of the rank count, the same on every rank
  int64_t capacity = -1;                // slots per (this rank, expert); -1: dropless
};

/// The routing of one batch: who sends which slot where. Built once per batch by plan(), then used by any number
/// of dispatch() / combine() calls (e.g. several hidden tensors routed alike).
class DispatchPlan {
 public:
  /// Collective. Errors (kInvalidArgument naming this rank, the token and the slot): a null expert_ids with
  /// tokens, an expert id out of range, top_k out of range, num_experts not a positive multiple of the rank count;
  /// ranks that disagree on num_experts or top_k fail on every rank; transport errors as the communicator's.
  static Result<DispatchPlan> plan(Communicator& comm, const RoutingRequest& request);

  int ranks() const { return ranks_; }
  int localExperts() const { return local_experts_; }
  size_t numTokens() const { return num_tokens_; }
  int topK() const { return top_k_; }
  /// Slots this rank receives, summed over its local experts (rows of dispatch's output, combine's input).
  size_t receivedSlots() const { return recv_total_; }
  /// Slots per local expert, in the received layout's order ([localExperts()]).
  const std::vector<int64_t>& expertCounts() const { return expert_counts_; }
  /// Slots per (source rank, local expert) received here, [ranks() x localExperts()].
  const std::vector<int64_t>& sourceExpertCounts() const { return recv_counts_; }
  /// This rank's slots that capacity dropped, and that were sent.
  int64_t droppedSlots() const { return dropped_; }
  int64_t sentSlots() const { return sent_total_; }
  /// Per slot t * top_k + k of this rank: its row in the send order (grouped by destination rank, then local
  /// expert), or -1 when unrouted or dropped.
  const std::vector<int64_t>& slotRows() const { return slot_row_; }

  /// Collective: sends every admitted slot's vector of `hidden` elements of `type` from `tokens`
  /// ([numTokens() x hidden]) to its expert; `received` ([receivedSlots() x hidden]) gets them in the received
  /// layout. Errors: null buffers with data to move, a hidden size that differs between ranks (caught by the
  /// all-to-all-v's size check, naming both ranks).
  Status dispatch(Communicator& comm, const void* tokens, size_t hidden, DataType type, void* received) const;

  /// Collective: the reverse of dispatch. `expert_out` ([receivedSlots() x hidden], received layout) goes back to
  /// the slots' ranks, and `out[t]` ([numTokens() x hidden]) = sum over admitted slots k of
  /// weights[t * top_k + k] * expert_out(t, k); tokens without an admitted slot get zeros. Accumulates in double
  /// and rounds once to `type`; `type` is kFloat16, kBfloat16, kFloat32 or kFloat64 (kInvalidArgument
  /// otherwise). `weights` may be null: every weight 1.
  Status combine(Communicator& comm, const void* expert_out, size_t hidden, DataType type, const float* weights,
                 void* out) const;

 private:
  Status exchangeVectors(Communicator& comm, const void* send, size_t hidden, DataType type, void* recv,
                         bool forward) const;

  int ranks_ = 0;
  int rank_ = 0;
  int local_experts_ = 0;
  int top_k_ = 1;
  size_t num_tokens_ = 0;
  std::vector<int64_t> slot_row_;        // [num_tokens * top_k]
  std::vector<int64_t> send_counts_;     // [ranks * local_experts]: slots to (rank, local expert)
  std::vector<int64_t> recv_counts_;     // [ranks * local_experts]: slots from (rank, local expert)
  std::vector<int64_t> expert_counts_;   // [local_experts]
  std::vector<size_t> send_rank_rows_;   // [ranks]: rows to each rank
  std::vector<size_t> send_rank_first_;  // [ranks]: first row of each rank in the send order
  std::vector<size_t> recv_rank_rows_;   // [ranks]
  std::vector<size_t> recv_rank_first_;  // [ranks]: first row from each rank in the wire (source-major) order
  std::vector<size_t> wire_to_layout_;   // [recv_total]: received row (source-major) -> expert-major row
  size_t recv_total_ = 0;
  int64_t sent_total_ = 0;
  int64_t dropped_ = 0;
};

}  // namespace braid::moe
