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
  BRAID_ASSIGN_OR_RETURN(Plan plan, lowerAlgorithm(algorithm, lower));

  SimTransport transport(topology, options.model, options.record_timeline);
  BRAID_ASSIGN_OR_RETURN(ExecResult exec, execute(plan, transport));

  SimResult result;
  result.protocol = protocol;
  result.time_us = options.model.launch_us[p] + (exec.end_us - exec.start_us);
  result.stats = transport.stats();
  if (options.record_timeline) result.timeline = transport.timeline();
  return result;
}

}  // namespace braid
