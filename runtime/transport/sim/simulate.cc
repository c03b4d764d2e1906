// simulate(): lower an algorithm for one size and run the plan with the executor over a SimTransport
// (include/braid/simulate.h). What is simulated is what the executor runs.
#include "braid/simulate.h"

#include <fmt/format.h>

#include <algorithm>

namespace braid {

Result<SimResult> simulate(const Algorithm& algorithm, const Topology& topology, const SimOptions& options) {
  BRAID_RETURN_IF_ERROR(checkPlacement(algorithm, topology));
  const Protocol protocol = options.protocol.value_or(algorithm.protocol);
  const int p = static_cast<int>(protocol);
  if (p < 0 || p >= kNumProtocols) return invalidArgument(fmt::format("simulate: {}: bad protocol", algorithm.name));

  LowerOptions lower;
  lower.size_bytes = options.size_bytes;
  // An algorithm that declares one mode only runs in that mode.
  if (algorithm.in_place && !algorithm.out_of_place) {
    lower.in_place = true;
  } else if (!algorithm.in_place && algorithm.out_of_place) {
    lower.in_place = false;
  } else {
    lower.in_place = options.in_place;
  }
  lower.protocol = protocol;
  lower.instances = options.instances;
  // 0: lowering's protocol default. kUnlimitedBytes (SimModel::ideal: one slice per step) is passed as 2^62,
  // larger than any buffer, so that slice arithmetic (bytes + slice - 1) cannot overflow.
  lower.slice_bytes = std::min<uint64_t>(options.model.slice_bytes[p], uint64_t{1} << 62);
  // A step of `count` chunks posts up to `count` slices per iteration of the executor's slice loop to one peer
  // before the next step runs. As MSCCL sizes its per-iteration chunk so that the largest step fits the
  // connection's FIFO, when count exceeds fifo_depth the slices shrink by fifo_depth / count and the FIFO holds
  // `count` of them: the same bytes in flight, and no credit deadlock between peers that send before receiving.
  SimModel model = options.model;
  int max_count = 1;
  for (const RankProgram& rank : algorithm.ranks) {
    for (const Threadblock& tb : rank.threadblocks) {
      for (const Step& step : tb.steps) max_count = std::max(max_count, step.count);
    }
  }
  if (max_count > model.fifo_depth && model.fifo_depth > 0 && lower.slice_bytes < (uint64_t{1} << 62)) {
    lower.slice_bytes = std::max<uint64_t>(
        1, lower.slice_bytes * static_cast<uint64_t>(model.fifo_depth) / static_cast<uint64_t>(max_count));
    model.fifo_depth = max_count;
  }
  BRAID_ASSIGN_OR_RETURN(Plan plan, lowerAlgorithm(algorithm, lower));

  SimTransport transport(topology, model, options.record_timeline);
  BRAID_ASSIGN_OR_RETURN(ExecResult exec, execute(plan, transport));

  SimResult result;
  result.protocol = protocol;
  result.time_us = model.launch_us[p] + (exec.end_us - exec.start_us);
  result.stats = transport.stats();
  if (options.record_timeline) result.timeline = transport.timeline();
  return result;
}

}  // namespace braid
