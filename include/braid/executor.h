// The executor: runs a Plan's threadblocks over a Transport (ARCHITECTURE.md §5).
//
// Semantics (MSCCL runtime, ../shared/reference/taccl_msccl.md §2.3, §3.2): every step is cut into slices
// of at most plan.slice_bytes, and each threadblock loops over slice iterations outside and its steps inside,
// as MSCCL's kernel does: iteration j runs slice j of every step that has one, one slice at a time. Slice j
// of a step starts when slice j of the step before it in the loop finished and, for each dependency, slice
// j (or the last slice, if it has fewer) of the step named. A fused step (recv-copy-send,
// recv-reduce-copy-send, ...) forwards its slice as soon as it arrived, so data pipelines across hops while
// a connection's FIFO (the transport's) lets senders run ahead. A send completes when the transport says
// so; the receiver's reduce/copy is a local request. runtime/README.md has the details.
#pragma once

#include <vector>

#include "braid/plan.h"
#include "braid/status.h"
#include "braid/transport.h"

namespace braid {

struct ExecOptions {
  std::vector<int> local_ranks;  // ranks this executor drives; empty = all ranks of the plan
};

/// Per-step timing, for timelines and tests (virtual-clock microseconds with the simulated transport).
struct StepTiming {
  int rank = 0;
  int tb = 0;
  int step = 0;
  double start_us = 0;
  double end_us = 0;
};

struct ExecResult {
  double start_us = 0;
  double end_us = 0;  // when the last local step finished
  long long requests = 0;
  std::vector<StepTiming> steps;  // filled when record_steps is set
};

/// Runs `plan` to completion. The plan's parts for the local ranks pass validatePlan(plan, local_ranks)
/// first (plan.h; O(their steps)). Errors: validatePlan's kInvalidArgument; kInvalidArgument naming the
/// waiting steps for dependencies that can never be met; whatever the transport reports (timeouts, dead
/// peers, deadlocks).
Result<ExecResult> execute(const Plan& plan, Transport& transport, const ExecOptions& options = {},
                           bool record_steps = false);

}  // namespace braid
