// ProgramBuilder: the small toolkit every classical algorithm in src/algos is written with.
//
// It turns "rank r, threadblock t: send chunk x" into the IR of include/braid/algorithm.h while
// keeping MSCCL's rules (../shared/reference/taccl_msccl.md §2.3):
//   - a threadblock has one send peer and one recv peer and runs on one channel; on each channel a
//     rank has at most one threadblock per send peer and one per recv peer (checked in finish());
//   - a step carries at most one cross-threadblock dependency: extra ones become `nop` steps in
//     front of it, the way MSCCL XML chains them; the target step gets has_dep;
//   - cnt < 72: longer transfers are split into pieces of at most 71 chunks (both ends of a
//     connection split the same way because matching sends and receives have equal counts).
// Algorithms address chunks in "logical" units; a scale factor f (spec.chunk_factor / base factor)
// multiplies every offset and count, so any multiple of an algorithm's base chunk factor works.
#pragma once

#include <string>
#include <vector>

#include "braid/algorithm.h"
#include "braid/collective.h"

namespace braid::algos {

/// A chunk range start in one buffer of the rank being programmed (logical units).
struct Loc {
  BufferKind buf = BufferKind::kInput;
  int off = 0;
};

/// A step already emitted: (threadblock, step index) on one rank. Invalid when tb < 0.
struct StepRef {
  int tb = -1;
  int step = -1;
  bool valid() const { return tb >= 0 && step >= 0; }
};

class ProgramBuilder {
 public:
  /// `spec` gives n and the mode; `refs_in_place` selects how input/output chunks are addressed:
  /// true = through their in-place aliases (output for allgather/allreduce/alltoall, input for
  /// reducescatter); false = separate input and output buffers. `scale` multiplies offsets/counts.
  ProgramBuilder(const CollectiveSpec& spec, bool refs_in_place, int scale);

  int numRanks() const { return spec_.num_ranks; }
  bool refsInPlace() const { return refs_in_place_; }

  /// Location of logical input chunk `idx` of `rank` / logical output chunk `idx`.
  Loc in(int rank, int idx) const;
  Loc out(int rank, int idx) const;
  static Loc scratch(int idx) { return Loc{BufferKind::kScratch, idx}; }
  /// True when the two locations of `rank` are the same memory in the addressing mode in use.
  bool same(Loc a, Loc b) const { return a.buf == b.buf && a.off == b.off; }

  /// A new threadblock on `rank`; returns its id.
  int newTb(int rank, int send_peer, int recv_peer, int channel);

  StepRef send(int rank, int tb, Loc src, int count, const std::vector<StepRef>& deps = {});
  StepRef recv(int rank, int tb, Loc dst, int count, const std::vector<StepRef>& deps = {});
  StepRef recvCopySend(int rank, int tb, Loc dst, int count, const std::vector<StepRef>& deps = {});
  StepRef recvReduceSend(int rank, int tb, Loc src, int count, const std::vector<StepRef>& deps = {});
  StepRef recvReduceCopy(int rank, int tb, Loc src, Loc dst, int count, const std::vector<StepRef>& deps = {});
  StepRef recvReduceCopySend(int rank, int tb, Loc src, Loc dst, int count, const std::vector<StepRef>& deps = {});
  StepRef copy(int rank, int tb, Loc src, Loc dst, int count, const std::vector<StepRef>& deps = {});
  /// A step that only waits: used as a join point for several dependencies.
  StepRef barrier(int rank, int tb, const std::vector<StepRef>& deps);

  /// The last step emitted in a threadblock (invalid when it has none).
  StepRef last(int rank, int tb) const;

  /// Fills the algorithm's ranks, buffer sizes, num_channels, and checks MSCCL's structural rules
  /// (peers in range, one threadblock per peer and direction on a channel, offsets in range).
  /// Errors are internal errors (a builder bug), never user errors.
  Status finish(Algorithm& algorithm);

 private:
  StepRef emit(int rank, int tb, OpType type, Loc src, Loc dst, int count, const std::vector<StepRef>& deps);
  int bufferSize(int rank, BufferKind buf) const;

  CollectiveSpec spec_;
  bool refs_in_place_;
  int scale_;
  std::vector<RankProgram> ranks_;
  std::vector<std::string> errors_;
};

/// Largest chunk count MSCCL accepts in one step (cnt < 72).
inline constexpr int kMaxStepCount = 71;
/// Azure msccl-executor-nccl's default MSCCL_MAX_NUM_STEPS.
inline constexpr int kAzureMaxSteps = 64;

}  // namespace braid::algos
