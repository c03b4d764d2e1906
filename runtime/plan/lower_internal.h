// Lowering's passes (runtime/plan/): the shared state they fill in order.
//
//   (first)       checkAlgorithmStructure() (src/ir, include/braid/algorithm.h): the IR is well-formed enough
//                 to index (ids, peers, channels, deps, ranges)
//   chunks.cc     element geometry of every buffer; replays the data flow to size scratch chunks and to
//                 pair every receive with its send, and checks that chunk sizes agree along every move
//   buffers.cc    byte ranges: chunk ranges to BufferRefs with in-place aliasing, staging (temp) layout
//   instances.cc  replicates threadblocks per instance, splits chunks across instances, maps deps
//   lower.cc      lowerAlgorithm(): options, the passes in order, slice sizes per protocol
#pragma once

#include <cstdint>
#include <vector>

#include "braid/algorithm.h"
#include "braid/collective.h"
#include "braid/plan.h"
#include "braid/status.h"

namespace braid::plan {

inline constexpr uint64_t kUnknownSize = UINT64_MAX;  // a chunk whose contents (and so size) are undefined

/// Element offset of chunk i of a buffer of `elements` elements cut into `chunks` chunks:
/// floor(i * elements / chunks), computed without overflow.
uint64_t chunkStart(uint64_t elements, int chunks, int i);

/// A half-open range of elements of one of a rank's buffers (before in-place aliasing).
struct ElemRange {
  BufferKind buffer = BufferKind::kInput;
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t size() const { return end - begin; }
};

/// Where every chunk of every buffer lies, in elements. Input and output chunks are positional (the
/// collective's layout); scratch chunks get the size of the chunks that land in them (chunks.cc).
struct Geometry {
  CollectiveSpec spec;
  uint64_t input_elements = 0;                       // per rank
  uint64_t output_elements = 0;                      // per rank
  std::vector<std::vector<uint64_t>> scratch_start;  // rank -> chunk -> element offset; size s_chunks + 1

  int chunks(int rank, BufferKind buffer) const;
  uint64_t start(int rank, BufferKind buffer, int chunk) const;  // chunk may equal chunks(): the end
  uint64_t size(int rank, BufferKind buffer, int chunk) const {
    return start(rank, buffer, chunk + 1) - start(rank, buffer, chunk);
  }
  uint64_t scratchElements(int rank) const { return scratch_start[rank].back(); }
  /// Chunks [first, first + count); with parts > 1 (count must be 1) part `part` of that chunk:
  /// elements [floor(part * E / parts), floor((part + 1) * E / parts)) of its E elements.
  ElemRange range(int rank, BufferKind buffer, int first, int count, int part = 0, int parts = 1) const;
};

/// Flat step numbering: step s of threadblock t of rank r is base[r][t] + s.
struct StepIndex {
  std::vector<std::vector<int64_t>> base;
  int64_t total = 0;
  explicit StepIndex(const Algorithm& algorithm);
  int64_t of(int rank, int tb, int step) const { return base[rank][tb] + step; }
};

/// What the data-flow replay found: the sender of every receiving step.
struct DataFlow {
  std::vector<int64_t> sender;  // flat step -> flat step of the matching send, -1 for steps that do not receive
};

// chunks.cc
/// Positional geometry for one size (scratch not sized yet).
Geometry makeGeometry(const Algorithm& algorithm, const CollectiveSpec& spec, uint64_t elements_per_rank);
/// Replays the program in FIFO order on chunk sizes: sizes every scratch chunk (geometry.scratch_start),
/// pairs receives with sends, and checks that sizes agree wherever a chunk moves, is reduced or lands.
/// Errors: kInvalidArgument for a deadlock, a count mismatch or a send nobody receives; kUnsupported when
/// chunks of different sizes meet (only possible when the size does not split evenly into chunks).
Result<DataFlow> replayDataFlow(const Algorithm& algorithm, const StepIndex& index, Geometry& geometry);

// buffers.cc
/// The bytes of `range` on `rank`, resolved through the in-place aliases of the collective.
BufferRef resolve(const Geometry& geometry, int rank, const ElemRange& range, uint64_t element_bytes);
/// Places every threadblock's staging after the rank's scratch: fills PlanThreadblock::temp and
/// RankPlan::temp_bytes. The executor stages one slice at a time, so a threadblock needs its largest staged
/// slice: min(step bytes, slice_bytes) (slice_bytes 0: no slicing).
void layoutStaging(RankPlan& rank_plan, uint64_t slice_bytes);

// instances.cc
/// Builds every rank's threadblocks: `instances` copies of each, channel c of copy i on c + i*nchannels,
/// each chunk split in `instances` parts, dependencies mapped to the same copy. A step over several chunks
/// becomes one step per chunk when instances > 1, otherwise consecutive groups of chunks that fit in one
/// slice of `slice_bytes` (0: unlimited) together, so every plan step is one chunk or one slice.
void buildThreadblocks(const Algorithm& algorithm, const Geometry& geometry, int instances, uint64_t element_bytes,
                       uint64_t slice_bytes, std::vector<RankPlan>& ranks);

}  // namespace braid::plan
