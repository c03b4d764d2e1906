#include "transport/local_memory.h"

#include <fmt/format.h>

#include <cstring>

namespace braid {

LocalMemory::LocalMemory(std::vector<int> local_ranks) : ranks_(std::move(local_ranks)), bound_(ranks_.size()) {}

bool LocalMemory::isLocal(int rank) const { return find(rank) != nullptr; }

const LocalMemory::Bound* LocalMemory::find(int rank) const {
  for (size_t i = 0; i < ranks_.size(); ++i)
    if (ranks_[i] == rank) return &bound_[i];
  return nullptr;
}

Status LocalMemory::bind(int rank, const RankMemory& memory, ReduceSpec reduce) {
  const Bound* found = find(rank);
  if (found == nullptr) return invalidArgument(fmt::format("bind: rank {} is not driven by this endpoint", rank));
  const struct {
    const char* name;
    const void* ptr;
    uint64_t bytes;
  } buffers[] = {{"input", memory.input, memory.input_bytes},
                 {"output", memory.output, memory.output_bytes},
                 {"scratch", memory.scratch, memory.scratch_bytes}};
  for (const auto& b : buffers) {
    if (b.ptr == nullptr && b.bytes != 0)
      return invalidArgument(fmt::format("bind: rank {}: {} buffer is null but has {} bytes", rank, b.name, b.bytes));
  }
  Bound& slot = bound_[static_cast<size_t>(found - bound_.data())];
  slot.bound = true;
  slot.memory = memory;
  slot.reduce = reduce;
  return Status::ok();
}

const ReduceSpec& LocalMemory::reduceSpec(int rank) const {
  static const ReduceSpec kNone;
  const Bound* found = find(rank);
  return found != nullptr ? found->reduce : kNone;
}

Result<uint8_t*> LocalMemory::resolve(int rank, const BufferRef& ref, const char* what) const {
  const Bound* found = find(rank);
  if (found == nullptr) return invalidArgument(fmt::format("{}: rank {} is not driven by this endpoint", what, rank));
  if (!found->bound) return invalidArgument(fmt::format("{}: rank {} has no memory bound", what, rank));
  void* base = nullptr;
  uint64_t size = 0;
  switch (ref.buffer) {
    case BufferKind::kInput:
      base = found->memory.input;
      size = found->memory.input_bytes;
      break;
    case BufferKind::kOutput:
      base = found->memory.output;
      size = found->memory.output_bytes;
      break;
    case BufferKind::kScratch:
      base = found->memory.scratch;
      size = found->memory.scratch_bytes;
      break;
  }
  if (ref.offset > size || ref.bytes > size - ref.offset) {
    return invalidArgument(fmt::format("rank {}: {} {}[{}, {}) is past the {} buffer of {} bytes", rank, what,
                                       bufferName(ref.buffer), ref.offset, ref.offset + ref.bytes,
                                       ref.buffer == BufferKind::kInput    ? "input"
                                       : ref.buffer == BufferKind::kOutput ? "output"
                                                                           : "scratch",
                                       size));
  }
  if (ref.bytes == 0) return static_cast<uint8_t*>(base);  // may be null for an empty buffer
  return static_cast<uint8_t*>(base) + ref.offset;
}

Result<LocalMemory::Resolved> LocalMemory::resolveLocal(const LocalRequest& request) const {
  if (request.src.bytes != request.dst.bytes) {
    return invalidArgument(
        fmt::format("local on rank {}: src has {} bytes, dst {}", request.rank, request.src.bytes, request.dst.bytes));
  }
  Resolved local;
  BRAID_ASSIGN_OR_RETURN(local.src, resolve(request.rank, request.src, "local src"));
  BRAID_ASSIGN_OR_RETURN(local.dst, resolve(request.rank, request.dst, "local dst"));
  local.bytes = request.src.bytes;
  local.reduce = request.reduce;
  local.spec = reduceSpec(request.rank);
  if (local.reduce && local.bytes % dataTypeSize(local.spec.type) != 0) {
    return invalidArgument(fmt::format("local reduce on rank {}: {} bytes is not whole {}-byte {} elements",
                                       request.rank, local.bytes, dataTypeSize(local.spec.type),
                                       dataTypeName(local.spec.type)));
  }
  return local;
}

void LocalMemory::runOnCpu(const Resolved& local) {
  if (local.bytes == 0) return;
  if (!local.reduce) {
    if (local.src != local.dst) std::memmove(local.dst, local.src, local.bytes);
    return;
  }
  reduceInto(local.dst, local.src, local.bytes / dataTypeSize(local.spec.type), local.spec.type, local.spec.op);
}

Status LocalMemory::run(const LocalRequest& request) {
  BRAID_ASSIGN_OR_RETURN(const Resolved local, resolveLocal(request));
  runOnCpu(local);
  return Status::ok();
}

}  // namespace braid
