// The executor: runs a Plan's threadblocks over a Transport (ARCHITECTURE.md §5).
//
// Semantics (MSCCL runtime, ../shared/reference/taccl_msccl.md §2): each threadblock runs its steps in
// order; a step starts when the previous step of its threadblock and every step named in its deps have
// finished. Every step is cut into slices of at most plan.slice_bytes; a fused step (recv-copy-send,
// recv-reduce-copy-send, ...) forwards slice k as soon as slice k arrived, so data pipelines across hops.
// A send completes when the transport says so; the receiver's reduce/copy is a local request.
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

/// Runs `plan` to completion. Errors: whatever the transport reports (timeouts, dead peers, deadlocks).
Result<ExecResult> execute(const Plan& plan, Transport& transport, const ExecOptions& options = {},
                           bool record_steps = false);

}  // namespace braid
