// simulate(): lower an algorithm for one size and run the plan with the executor over a SimTransport
// (include/braid/simulate.h). What is simulated is what the executor runs.
#include "braid/simulate.h"

#include <fmt/format.h>

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
  lower.slice_bytes = options.model.slice_bytes[p];  // 0: lowering's protocol default
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
