// Plans: the IR lowered for one message size on every rank (ARCHITECTURE.md §3 "Plan"). The executor runs
// plans, never the IR directly; the simulator and the real transports run the same plans.
//
// Units: bytes. A plan is lowered for `size_bytes` in nccl-tests' convention: the larger of the send and
// receive buffers of one rank (all-reduce/broadcast/reduce: the buffer; all-gather: the gathered output;
// reduce-scatter: the full input; all-to-all: the whole send buffer).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "braid/algorithm.h"
#include "braid/status.h"

namespace braid {

/// A byte range of one rank's input, output or scratch buffer.
struct BufferRef {
  BufferKind buffer = BufferKind::kInput;
  uint64_t offset = 0;  // bytes from the start of that buffer
  uint64_t bytes = 0;
};

/// One IR step with concrete byte ranges. `src`/`dst` are meaningful when opReadsSrc / opWritesDst (for
/// kSend the data sent is `src`; for kRecv it lands in `dst`; fused ops use both). `bytes` is the number of
/// bytes moved or reduced (src.bytes == dst.bytes when both are used; may be 0 for empty chunks).
struct PlanStep {
  OpType type = OpType::kNop;
  BufferRef src;
  BufferRef dst;
  uint64_t bytes = 0;
  std::vector<Dependency> deps;  // (threadblock, step) on the same rank that must finish first
};

struct PlanThreadblock {
  int id = 0;
  int send_peer = -1;
  int recv_peer = -1;
  int channel = 0;  // channel id after instancing (instance i of channel c -> c + i * num_channels)
  std::vector<PlanStep> steps;
  /// Staging for steps that receive and reduce without storing first (kRecvReduceSend, and receive-reduce
  /// steps whose src overlaps their dst): a range of the scratch buffer at or beyond RankPlan::scratch_bytes,
  /// as large as the largest slice of such a step of this threadblock; bytes == 0 when it has none.
  BufferRef temp{BufferKind::kScratch, 0, 0};
};

struct PlanCopy {  // TACCL precopy or the in-place/out-of-place entry copy, in bytes
  BufferRef src;
  BufferRef dst;
};

struct RankPlan {
  int rank = 0;
  uint64_t input_bytes = 0;
  uint64_t output_bytes = 0;
  uint64_t scratch_bytes = 0;
  /// Executor staging (PlanThreadblock::temp) placed after the algorithm's scratch: a transport gives every
  /// rank a scratch buffer of scratch_bytes + temp_bytes.
  uint64_t temp_bytes = 0;
  std::vector<PlanCopy> precopies;  // run before any threadblock starts
  std::vector<PlanThreadblock> threadblocks;
};

struct Plan {
  std::string algorithm;  // Algorithm::name
  CollectiveKind collective = CollectiveKind::kAllGather;
  int num_ranks = 0;
  uint64_t size_bytes = 0;  // nccl-tests size (see top of file)
  bool in_place = false;
  Protocol protocol = Protocol::kSimple;
  int instances = 1;
  uint64_t slice_bytes = 0;     // pipelining unit: every step is executed in slices of at most this many bytes
  uint64_t element_bytes = 1;   // datatype size: slices are cut on whole elements
  std::vector<RankPlan> ranks;  // ranks[r].rank == r
};

struct LowerOptions {
  uint64_t size_bytes = 0;
  bool in_place = false;
  std::optional<Protocol> protocol;  // default: the algorithm's
  int instances = 1;                 // MSCCL instances: each threadblock is replicated, data split across them
  uint64_t slice_bytes = 0;          // 0: protocol default (see runtime/plan/)
  uint64_t element_bytes = 1;        // datatype size: chunk and slice boundaries fall on whole elements
};

/// Lowers `algorithm` for one size. Chunk i of a buffer of B bytes split into C chunks spans
/// [floor(i*B/C), floor((i+1)*B/C)) so counts that do not divide get uneven chunks, never an overrun.
/// Boundaries are rounded to whole elements (element_bytes). A step over several chunks becomes consecutive
/// plan steps, each either whole chunks that fit in one slice together or a single chunk (one chunk each
/// with instances > 1): the executor loops over slices outside and steps inside (executor.h), and iteration
/// j must hold slice j of every chunk a step covers. A size outside the algorithm's
/// [min_bytes, max_bytes] window is not an error (windows are a selection concern).
/// Errors: kInvalidArgument when the algorithm does not declare the requested mode (in-place/out-of-place),
/// when size_bytes is not a multiple of element_bytes times the collective's size multiplier, or when
/// instances < 1.
Result<Plan> lowerAlgorithm(const Algorithm& algorithm, const LowerOptions& options);

/// The slice size lowering uses for a protocol when LowerOptions::slice_bytes is 0: one slot of NCCL's
/// per-connection FIFO of NCCL_STEPS = 8 slots (runtime/plan/lower.cc gives the derivation).
/// Simple 524288 (4 MiB / 8), LL 32768, LL128 576000 bytes of data.
uint64_t defaultSliceBytes(Protocol protocol);

}  // namespace braid
