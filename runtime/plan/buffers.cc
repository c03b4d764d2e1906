// Lowering pass 3: chunk ranges to byte ranges (BufferRef), in-place aliasing, and the executor's staging.
//
// In-place calls use one user buffer for input and output (MSCCL's conventions, CollectiveSpec::
// inputAliasInOutput / outputAliasInInput; Azure/msccl-executor-nccl selects an in-place algorithm when
// send == recv for all-reduce/all-to-all/broadcast/reduce, send == recv + rank*count for all-gather and
// recv == send + rank*count for reduce-scatter, ../shared/reference/taccl_msccl.md §3.2). A plan never names
// the aliased buffer: in-place all-gather input refs become refs to the rank's slice of the output
// (offset + rank * input bytes), in-place reduce-scatter output refs become refs to the rank's slice of
// the input (offset + rank * output bytes), and the other collectives' input refs become output refs at
// the same offset. So the executor never copies what aliases, and transports never see the alias.
//
// Staging: a receive-reduce step must not overwrite what it reduces with before the reduction, so when it
// has nowhere of its own to receive into — kRecvReduceSend stores nothing, a kRecvReduceCopy(Send) whose
// src overlaps its dst — the executor receives into the threadblock's staging range (PlanThreadblock::temp).
// There is no buffer kind for it: staging lives in the scratch buffer after the algorithm's own scratch
// (offsets >= RankPlan::scratch_bytes), one range per threadblock as large as its largest staged slice (the
// executor runs one slice of a threadblock at a time), and transports allocate scratch_bytes + temp_bytes.
#include <algorithm>

#include "plan/lower_internal.h"

namespace braid::plan {

BufferRef resolve(const Geometry& geometry, int rank, const ElemRange& range, uint64_t element_bytes) {
  BufferKind buffer = range.buffer;
  uint64_t begin = range.begin;
  const CollectiveSpec& spec = geometry.spec;
  if (spec.in_place) {
    if (spec.kind == CollectiveKind::kReduceScatter) {
      if (buffer == BufferKind::kOutput) {
        buffer = BufferKind::kInput;
        begin += static_cast<uint64_t>(rank) * geometry.output_elements;
      }
    } else if (buffer == BufferKind::kInput) {
      buffer = BufferKind::kOutput;
      if (spec.kind == CollectiveKind::kAllGather) begin += static_cast<uint64_t>(rank) * geometry.input_elements;
    }
  }
  return BufferRef{buffer, begin * element_bytes, range.size() * element_bytes};
}

bool overlaps(const BufferRef& a, const BufferRef& b) {
  return a.buffer == b.buffer && a.bytes > 0 && b.bytes > 0 && a.offset < b.offset + b.bytes &&
         b.offset < a.offset + a.bytes;
}

bool sameRange(const BufferRef& a, const BufferRef& b) {
  return a.buffer == b.buffer && a.offset == b.offset && a.bytes == b.bytes;
}

bool needsStaging(const PlanStep& step) {
  switch (step.type) {
    case OpType::kRecvReduceSend: return true;
    case OpType::kRecvReduceCopy:
    case OpType::kRecvReduceCopySend: return overlaps(step.src, step.dst);
    default: return false;
  }
}

void layoutStaging(RankPlan& rank_plan, uint64_t slice_bytes) {
  uint64_t offset = rank_plan.scratch_bytes;
  for (PlanThreadblock& tb : rank_plan.threadblocks) {
    uint64_t need = 0;
    for (const PlanStep& step : tb.steps) {
      if (needsStaging(step)) need = std::max(need, stagedSliceBytes(step, slice_bytes));
    }
    tb.temp = BufferRef{BufferKind::kScratch, offset, need};
    offset += need;
  }
  rank_plan.temp_bytes = offset - rank_plan.scratch_bytes;
}

}  // namespace braid::plan
