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

/// Slots of NCCL's per-connection FIFO (NCCL_STEPS, nccl src/include/device.h): lowering's default
/// LowerOptions::fifo_depth and the simulator's SimModel::fifo_depth.
inline constexpr int kNcclSteps = 8;
/// The channel the communicator's call check uses (comm/README.md): every plan's channels lie below it
/// (validatePlan refuses one at or above it), so check messages never match a plan's.
inline constexpr int kCallCheckChannel = (1 << 16) - 1;

/// A byte range of one rank's input, output or scratch buffer.
struct BufferRef {
  BufferKind buffer = BufferKind::kInput;
  uint64_t offset = 0;  // bytes from the start of that buffer
  uint64_t bytes = 0;
  friend bool operator==(const BufferRef&, const BufferRef&) = default;
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
  friend bool operator==(const PlanStep&, const PlanStep&) = default;
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
  friend bool operator==(const PlanThreadblock&, const PlanThreadblock&) = default;
};

struct PlanCopy {  // TACCL precopy or the in-place/out-of-place entry copy, in bytes
  BufferRef src;
  BufferRef dst;
  friend bool operator==(const PlanCopy&, const PlanCopy&) = default;
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
  friend bool operator==(const RankPlan&, const RankPlan&) = default;
};

struct Plan {
  std::string algorithm;  // Algorithm::name
  CollectiveKind collective = CollectiveKind::kAllGather;
  int num_ranks = 0;
  uint64_t size_bytes = 0;  // nccl-tests size (see top of file)
  bool in_place = false;
  Protocol protocol = Protocol::kSimple;
  int instances = 1;
  uint64_t slice_bytes = 0;    // pipelining unit: every step is executed in slices of at most this many bytes
  uint64_t element_bytes = 1;  // datatype size: slices are cut on whole elements
  /// Slices of each step one iteration of a threadblock's loop covers, all of them in flight together
  /// (LowerOptions::slices_per_iteration; 1..kMaxSlicesPerIteration). Dependencies and step order count
  /// iterations; a threadblock's staging holds slices_per_iteration slices.
  uint32_t slices_per_iteration = 1;
  /// Slices a connection's FIFO holds in flight for this plan: LowerOptions::fifo_depth, raised to the
  /// largest step count when lowering's FIFO rule shrank the slices (lowerAlgorithm). A transport with a
  /// bounded FIFO (the simulated one) gives every connection this many slots.
  int fifo_depth = kNcclSteps;
  std::vector<RankPlan> ranks;  // ranks[r].rank == r
  /// Field by field: two plans are equal when every rank runs the same steps on the same bytes.
  friend bool operator==(const Plan&, const Plan&) = default;
};

struct LowerOptions {
  uint64_t size_bytes = 0;
  bool in_place = false;
  std::optional<Protocol> protocol;  // default: the algorithm's
  int instances = 1;                 // MSCCL instances: each threadblock is replicated, data split across them
  uint64_t slice_bytes = 0;          // 0: protocol default (defaultSliceBytes); at most 2^62 is used
  uint64_t element_bytes = 1;        // datatype size: chunk and slice boundaries fall on whole elements
  int fifo_depth = kNcclSteps;       // slots of a connection's FIFO; <= 0: unbounded (no FIFO rule)
  /// Slices per iteration of the executor's loop (Plan::slices_per_iteration), 1..kMaxSlicesPerIteration. Braid's
  /// runtimes run 1 (the CPU executor and the device-resident CUDA loop iterate one slice); a simulation of NCCL's
  /// ring in Simple runs NCCL's CHUNKSTEPS / SLICESTEPS = 2 (include/braid/nccl_runs.h, ncclRunnable).
  uint32_t slices_per_iteration = 1;
};

/// The most slices one iteration may cover (the executor tracks an iteration's slices in one 32-bit mask).
inline constexpr uint32_t kMaxSlicesPerIteration = 32;

/// Lowers `algorithm` for one size. Chunk i of a buffer of B bytes split into C chunks spans
/// [floor(i*B/C), floor((i+1)*B/C)) so counts that do not divide get uneven chunks, never an overrun.
/// Boundaries are rounded to whole elements (element_bytes). A step over several chunks becomes consecutive
/// plan steps, each either whole chunks that fit in one slice together or a single chunk (one chunk each
/// with instances > 1): the executor loops over slices outside and steps inside (executor.h), and iteration
/// j must hold slice j of every chunk a step covers. A size outside the algorithm's
/// [min_bytes, max_bytes] window is not an error (windows are a selection concern).
///
/// The FIFO rule: a step of `count` chunks posts up to `count` x k slices to one peer per iteration of the
/// executor's slice loop (k = slices_per_iteration) before its threadblock's next step runs. As MSCCL sizes its
/// per-iteration chunk so that the largest step fits the connection's FIFO, when m x k for the largest step count
/// m of the algorithm exceeds fifo_depth, the slice shrinks to slice x fifo_depth / (m x k) (at least one element)
/// and Plan::fifo_depth becomes m x k: the same bytes in flight, and no credit deadlock between peers that send
/// before they receive. Every path that runs an algorithm (simulate(), the Communicator) lowers here, so the plan
/// simulated is the plan executed.
/// Errors: kInvalidArgument when the algorithm does not declare the requested mode (in-place/out-of-place),
/// when size_bytes is not a multiple of element_bytes times the collective's size multiplier, when
/// instances < 1, or when slices_per_iteration is outside 1..kMaxSlicesPerIteration.
Result<Plan> lowerAlgorithm(const Algorithm& algorithm, const LowerOptions& options);

/// The slice size lowering uses for a protocol when LowerOptions::slice_bytes is 0: one slot of NCCL's
/// per-connection FIFO of NCCL_STEPS = 8 slots (runtime/plan/lower.cc gives the derivation).
/// Simple 524288 (4 MiB / 8), LL 32768, LL128 576000 bytes of data.
uint64_t defaultSliceBytes(Protocol protocol);

/// The options one collective call lowers with: its size, mode, instances and datatype size, the algorithm's
/// protocol, lowering's slice per protocol (defaultSliceBytes) and NCCL_STEPS FIFO slots. The Communicator
/// lowers every call with these, and simulate() with SimModel::defaults() derives the same (its model's
/// slice_bytes and fifo_depth are these defaults), so both run identical plans.
LowerOptions callLowerOptions(uint64_t size_bytes, bool in_place, int instances, uint64_t element_bytes);

/// Checks that the executor can run `plan` indexing only what it names, for the ranks in `ranks` (empty:
/// every rank; the executor passes ExecOptions::local_ranks). Per plan: ranks.size() == num_ranks >= 1,
/// element_bytes >= 1, instances >= 1, slices_per_iteration in 1..kMaxSlicesPerIteration, every listed rank in range
/// once. Per listed rank r: ranks[r].rank == r; every precopy and every step range inside its buffer (input_bytes,
/// output_bytes, scratch_bytes) and on whole elements, src.bytes == dst.bytes == bytes where used; threadblock ids
/// 0..T-1 in order, peers in [-1, num_ranks) and not r, channel >= 0, a sending (receiving) step has a send
/// (recv) peer; staging inside [scratch_bytes, scratch_bytes + temp_bytes) of the scratch buffer and as large
/// as every staged iteration (needsStaging, iterationBytes); fewer than 2^32 slices per step; dependencies naming an
/// earlier step of the rank. Per connection (sender, receiver, channel) with both ends listed: the sender's slices and
/// bytes equal the receiver's. O(steps of the listed ranks). Deadlocks between dependencies are the
/// executor's to report (it names the waiting steps).
/// Errors: kInvalidArgument "plan '<algorithm>': rank R tb T step S: <what is wrong>".
Status validatePlan(const Plan& plan, const std::vector<int>& ranks = {});

namespace plan {

/// Whether two byte ranges share a byte (same buffer kind, overlapping [offset, offset + bytes)).
bool overlaps(const BufferRef& a, const BufferRef& b);
/// Whether two byte ranges are the same bytes.
bool sameRange(const BufferRef& a, const BufferRef& b);
/// Whether the executor runs this step through the threadblock's staging area (PlanThreadblock::temp):
/// kRecvReduceSend always (it stores nothing), kRecvReduceCopy(Send) when src overlaps dst.
bool needsStaging(const PlanStep& step);
/// The staging (bytes) a step needs when the executor runs it in slices of `slice_bytes` (0: no slicing).
inline uint64_t stagedSliceBytes(const PlanStep& step, uint64_t slice_bytes) {
  return slice_bytes == 0 || step.bytes < slice_bytes ? step.bytes : slice_bytes;
}
/// The slice the executor cuts steps into: 0 (one slice per step) when plan.slice_bytes is 0, otherwise
/// slice_bytes rounded down to whole elements, at least one element.
inline uint64_t executedSliceBytes(const Plan& plan) {
  if (plan.slice_bytes == 0 || plan.element_bytes == 0) return plan.slice_bytes;
  return plan.slice_bytes < plan.element_bytes ? plan.element_bytes
                                               : plan.slice_bytes / plan.element_bytes * plan.element_bytes;
}
/// Bytes of one iteration of a step: executedSliceBytes x slices_per_iteration (0: one iteration per step),
/// saturating at 2^64 - 1.
inline uint64_t iterationBytes(const Plan& plan) {
  const uint64_t slice = executedSliceBytes(plan);
  const uint64_t k = plan.slices_per_iteration < 1 ? 1 : plan.slices_per_iteration;
  if (slice == 0) return 0;
  return slice > UINT64_MAX / k ? UINT64_MAX : slice * k;
}
/// Slices (messages, for a sending step) of a step of `bytes` bytes cut in slices of `slice` bytes (0: one):
/// ceil(bytes / slice), at least 1 — a zero-byte step is one zero-byte slice.
inline uint64_t sliceCount(uint64_t bytes, uint64_t slice) {
  if (slice == 0 || bytes <= slice) return 1;
  return bytes / slice + (bytes % slice != 0 ? 1 : 0);
}

}  // namespace plan

}  // namespace braid
