// lowerAlgorithm(): the IR for one size on every rank (include/braid/plan.h). The passes, in order:
// the IR's structure checks (checkAlgorithmStructure, src/ir/verify_structure.cc), chunk geometry and the data-flow
// replay that sizes scratch chunks (chunks.cc), byte ranges with in-place aliasing and staging (buffers.cc),
// threadblocks and instances (instances.cc).
//
// Slice sizes. The executor cuts every step into slices of at most Plan::slice_bytes and pipelines them
// through fused steps, as NCCL pipelines a chunk through the slots of a connection's FIFO. The default slice
// is one slot of NCCL's per-connection buffer for the protocol: the buffer holds NCCL_STEPS = 8 slots
// (nccl src/include/device.h), and
//   Simple: NCCL_BUFFSIZE = 4 MiB (DEFAULT_BUFFSIZE, ../shared/reference/anchors_algorithms.md "NCCL knobs")
//           / 8 = 524288 bytes per slot, all of them data;
//   LL:     DEFAULT_LL_BUFFSIZE = NCCL_LL_LINES_PER_THREAD 8 x NCCL_LL_MAX_NTHREADS 512 x NCCL_STEPS 8 x 16-byte
//           lines = 512 KiB, so 65536 bytes of lines per slot; each 16-byte line carries 8 bytes of data and
//           8 of flags: 32768 bytes of data per slot;
//   LL128:  DEFAULT_LL128_BUFFSIZE = NCCL_LL128_ELEMS_PER_THREAD 120 x NCCL_LL128_MAX_NTHREADS 640 x NCCL_STEPS
//           8 x 8 bytes = 4915200 bytes, so 614400 bytes of lines per slot; each 128-byte line carries 120
//           bytes of data: 614400 x 120 / 128 = 576000 bytes of data per slot.
// LowerOptions::slice_bytes overrides the default (at most 2^62 is used: larger than any buffer, so slice
// arithmetic cannot overflow). Then the FIFO rule (plan.h) may shrink it, and the slice is rounded down to
// whole elements (at least one element).
#include <fmt/format.h>

#include <algorithm>
#include <climits>

#include "plan/lower_internal.h"

namespace braid {

namespace {

constexpr uint64_t kMaxSliceBytes = uint64_t{1} << 62;

int maxStepCount(const Algorithm& algorithm) {
  int max_count = 1;
  for (const RankProgram& rank : algorithm.ranks) {
    for (const Threadblock& tb : rank.threadblocks) {
      for (const Step& step : tb.steps) max_count = std::max(max_count, step.count);
    }
  }
  return max_count;
}

// The FIFO rule (plan.h): with a bounded FIFO of `fifo_depth` slots and m x k > fifo_depth slices posted per
// iteration (a step of m chunks, k slices per iteration), slices shrink by fifo_depth / (m x k) and the FIFO holds
// m x k of them. Returns the slice; sets `plan_fifo_depth`.
uint64_t applyFifoRule(const Algorithm& algorithm, uint64_t slice, uint32_t slices_per_iteration, int fifo_depth,
                       int& plan_fifo_depth) {
  plan_fifo_depth = fifo_depth;
  if (fifo_depth <= 0 || slice >= kMaxSliceBytes) return slice;
  const int64_t per_iteration = int64_t{maxStepCount(algorithm)} * slices_per_iteration;
  if (per_iteration <= fifo_depth) return slice;
  const int max_count = static_cast<int>(std::min<int64_t>(per_iteration, INT_MAX));
  plan_fifo_depth = max_count;
  const unsigned __int128 shrunk =
      static_cast<unsigned __int128>(slice) * static_cast<uint64_t>(fifo_depth) / static_cast<uint64_t>(max_count);
  return std::max<uint64_t>(1, static_cast<uint64_t>(shrunk));
}

}  // namespace

uint64_t defaultSliceBytes(Protocol protocol) {
  constexpr uint64_t kSteps = kNcclSteps;
  switch (protocol) {
    case Protocol::kSimple: return (uint64_t{4} << 20) / kSteps;
    case Protocol::kLL: return uint64_t{8} * 512 * kSteps * 16 / kSteps / 2;
    case Protocol::kLL128: return uint64_t{120} * 640 * kSteps * 8 / kSteps * 120 / 128;
  }
  return (uint64_t{4} << 20) / kSteps;
}

LowerOptions callLowerOptions(uint64_t size_bytes, bool in_place, int instances, uint64_t element_bytes) {
  LowerOptions options;
  options.size_bytes = size_bytes;
  options.in_place = in_place;
  options.instances = instances;
  options.element_bytes = element_bytes;
  options.slice_bytes = 0;  // defaultSliceBytes(protocol)
  options.fifo_depth = kNcclSteps;
  return options;
}

Result<Plan> lowerAlgorithm(const Algorithm& algorithm, const LowerOptions& options) {
  if (options.instances < 1) {
    return invalidArgument(
        fmt::format("lowering '{}': instances must be >= 1, got {}", algorithm.name, options.instances));
  }
  if (options.slices_per_iteration < 1 || options.slices_per_iteration > kMaxSlicesPerIteration) {
    return invalidArgument(fmt::format("lowering '{}': slices_per_iteration must be in 1..{}, got {}", algorithm.name,
                                       kMaxSlicesPerIteration, options.slices_per_iteration));
  }
  if (options.element_bytes < 1) {
    return invalidArgument(fmt::format("lowering '{}': element_bytes must be >= 1, got 0", algorithm.name));
  }
  if (options.in_place && !algorithm.in_place) {
    return invalidArgument(
        fmt::format("lowering '{}': in-place requested but the algorithm declares only "
                    "out-of-place use (inplace=0)",
                    algorithm.name));
  }
  if (!options.in_place && !algorithm.out_of_place) {
    return invalidArgument(
        fmt::format("lowering '{}': out-of-place requested but the algorithm declares only "
                    "in-place use (outofplace=0)",
                    algorithm.name));
  }
  BRAID_ASSIGN_OR_RETURN(const CollectiveSpec spec, algorithm.spec(options.in_place));
  const uint64_t unit = options.element_bytes * static_cast<uint64_t>(spec.sizeMultiplier());
  if (options.size_bytes % unit != 0) {
    return invalidArgument(fmt::format(
        "lowering '{}': size_bytes={} is not a multiple of element_bytes={} x {} ({}'s size multiplier: the "
        "per-rank piece must be whole elements)",
        algorithm.name, options.size_bytes, options.element_bytes, spec.sizeMultiplier(), collectiveName(spec.kind)));
  }
  if (static_cast<int64_t>(options.instances) * algorithm.num_channels > INT_MAX / 2) {
    return invalidArgument(fmt::format("lowering '{}': {} instances x {} channels is too many channels", algorithm.name,
                                       options.instances, algorithm.num_channels));
  }
  BRAID_RETURN_IF_ERROR(checkAlgorithmStructure(algorithm, spec));
  const uint64_t eb = options.element_bytes;
  plan::Geometry geometry = plan::makeGeometry(algorithm, spec, options.size_bytes / eb);
  const plan::StepIndex index(algorithm);
  BRAID_ASSIGN_OR_RETURN(const plan::DataFlow flow, plan::replayDataFlow(algorithm, index, geometry));
  (void)flow;  // the replay's pairing was used for its size checks

  Plan plan;
  plan.algorithm = algorithm.name;
  plan.collective = algorithm.collective;
  plan.num_ranks = algorithm.num_ranks;
  plan.size_bytes = options.size_bytes;
  plan.in_place = options.in_place;
  plan.protocol = options.protocol.value_or(algorithm.protocol);
  plan.instances = options.instances;
  plan.element_bytes = eb;
  uint64_t slice = options.slice_bytes > 0 ? options.slice_bytes : defaultSliceBytes(plan.protocol);
  plan.slices_per_iteration = options.slices_per_iteration;
  slice = applyFifoRule(algorithm, std::min(slice, kMaxSliceBytes), plan.slices_per_iteration, options.fifo_depth,
                        plan.fifo_depth);
  plan.slice_bytes = slice < eb ? eb : slice / eb * eb;
  plan.ranks.resize(algorithm.ranks.size());
  for (int r = 0; r < algorithm.num_ranks; ++r) {
    RankPlan& rank_plan = plan.ranks[r];
    rank_plan.rank = r;
    rank_plan.input_bytes = geometry.input_elements * eb;
    rank_plan.output_bytes = geometry.output_elements * eb;
    rank_plan.scratch_bytes = geometry.scratchElements(r) * eb;
    for (const PreCopy& copy : algorithm.ranks[r].precopies) {
      PlanCopy plan_copy;
      plan_copy.src = plan::resolve(geometry, r, geometry.range(r, BufferKind::kInput, copy.input_off, copy.count), eb);
      plan_copy.dst =
          plan::resolve(geometry, r, geometry.range(r, BufferKind::kOutput, copy.output_off, copy.count), eb);
      if (!plan::sameRange(plan_copy.src, plan_copy.dst)) rank_plan.precopies.push_back(plan_copy);
    }
  }
  plan::buildThreadblocks(algorithm, geometry, options.instances, eb, plan.slice_bytes, plan.ranks);
  if (plan.slices_per_iteration > 1) {
    for (RankPlan& rank_plan : plan.ranks) plan::layoutStaging(rank_plan, plan::iterationBytes(plan));
  }
  return plan;
}

}  // namespace braid
