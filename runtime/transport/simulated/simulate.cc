// simulate(): lower an algorithm for one size and run the plan with the executor over a SimTransport
// (include/braid/simulate.h). What is simulated is what the executor runs.
#include "braid/simulate.h"

#include <fmt/format.h>

namespace braid {

Result<Plan> simulationPlan(const Algorithm& algorithm, const SimOptions& options) {
  const Protocol protocol = options.protocol.value_or(algorithm.protocol);
  const int p = static_cast<int>(protocol);
  if (p < 0 || p >= kNumProtocols) return invalidArgument(fmt::format("simulate: {}: bad protocol", algorithm.name));
  // An algorithm that declares one mode only runs in that mode.
  bool in_place = options.in_place;
  if (algorithm.in_place != algorithm.out_of_place) in_place = algorithm.in_place;
  LowerOptions lower = callLowerOptions(options.size_bytes, in_place, options.instances, /*element_bytes=*/1);
  lower.protocol = protocol;
  // The model's slices and FIFO (SimModel::defaults(): lowering's own defaults; SimModel::ideal(): one slice
  // per step, kUnlimitedBytes, which lowering caps at 2^62). Lowering applies the FIFO rule.
  lower.slice_bytes = options.model.slice_bytes[p];
  lower.fifo_depth = options.model.fifo_depth;
  lower.slices_per_iteration = options.slices_per_iteration;
  return lowerAlgorithm(algorithm, lower);
}

Result<SimResult> simulate(const Algorithm& algorithm, const Topology& topology, const SimOptions& options) {
  BRAID_RETURN_IF_ERROR(checkPlacement(algorithm, topology));
  BRAID_ASSIGN_OR_RETURN(Plan plan, simulationPlan(algorithm, options));
  const int p = static_cast<int>(plan.protocol);
  SimModel model = options.model;
  model.fifo_depth = plan.fifo_depth;  // raised by the FIFO rule when it shrank the slices

  SimTransport transport(topology, model, options.record_timeline);
  BRAID_ASSIGN_OR_RETURN(ExecResult exec, execute(plan, transport));

  SimResult result;
  result.protocol = plan.protocol;
  result.time_us = model.launch_us[p] + (exec.end_us - exec.start_us);
  result.stats = transport.stats();
  if (options.record_timeline) result.timeline = transport.timeline();
  return result;
}

Result<SimResult> simulate(const Runnable& what, SimOptions options) {
  if (what.algorithm == nullptr || what.topology == nullptr) {
    return invalidArgument("simulate: the runnable names no algorithm or no topology");
  }
  if (options.protocol.value_or(what.algorithm->protocol) == Protocol::kSimple) {
    const int simple = static_cast<int>(Protocol::kSimple);
    if (what.simple_slice_bytes > 0) options.model.slice_bytes[simple] = what.simple_slice_bytes;
    if (what.simple_slices_per_iteration > 0) options.slices_per_iteration = what.simple_slices_per_iteration;
    if (what.simple_fifo_slices > 0) options.model.fifo_depth = what.simple_fifo_slices;
  }
  if (what.nccl_p2p) options.model.net_step_us = options.model.p2p_net_step_us;
  Result<SimResult> result = simulate(*what.algorithm, *what.topology, options);
  if (!result) {
    return Status(result.status().code(), fmt::format("simulating {} at {} bytes: {}",
                                                      what.algorithm->name.empty() ? "(unnamed)" : what.algorithm->name,
                                                      options.size_bytes, result.status().message()));
  }
  return result;
}

}  // namespace braid
