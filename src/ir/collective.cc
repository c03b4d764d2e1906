// CollectiveSpec: chunk counts, expected outputs and in-place aliasing of the six MSCCL collectives.
//
// Chunk layout and aliasing follow MSCCL (../shared/reference/taccl_msccl.md §2.3 and §3.2: the Azure
// executor calls a collective in place when send == recv for allreduce/reduce/broadcast/alltoall,
// send == recv + rank·count·size for allgather and recv == send + rank·count·size for reducescatter).
// Bus-bandwidth factors are those of nccl-tests (doc/PERFORMANCE.md; ../shared/realcases/README.md §5).
#include "braid/collective.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>

namespace braid {

namespace {

bool isScattered(CollectiveKind kind) {
  return kind == CollectiveKind::kAllGather || kind == CollectiveKind::kReduceScatter ||
         kind == CollectiveKind::kAllToAll;
}

ChunkValue allRanks(int num_ranks, int index) {
  ChunkValue value;
  value.reserve(num_ranks);
  for (int s = 0; s < num_ranks; ++s) value.push_back({s, index});
  return value;
}

}  // namespace

const char* collectiveName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllGather: return "allgather";
    case CollectiveKind::kReduceScatter: return "reducescatter";
    case CollectiveKind::kAllReduce: return "allreduce";
    case CollectiveKind::kAllToAll: return "alltoall";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kReduce: return "reduce";
    case CollectiveKind::kCustom: return "custom";
  }
  return "?";
}

std::optional<CollectiveKind> parseCollective(const std::string& name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return std::tolower(ch); });
  if (lower == "allgather" || lower == "all_gather") return CollectiveKind::kAllGather;
  if (lower == "reducescatter" || lower == "reduce_scatter") return CollectiveKind::kReduceScatter;
  if (lower == "allreduce" || lower == "all_reduce") return CollectiveKind::kAllReduce;
  if (lower == "alltoall" || lower == "all_to_all") return CollectiveKind::kAllToAll;
  if (lower == "broadcast") return CollectiveKind::kBroadcast;
  if (lower == "reduce") return CollectiveKind::kReduce;
  if (lower == "custom") return CollectiveKind::kCustom;
  return std::nullopt;
}

int CollectiveSpec::inputChunks() const {
  switch (kind) {
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllToAll: return num_ranks * chunk_factor;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kReduce: return chunk_factor;
    case CollectiveKind::kCustom: return 0;
  }
  return 0;
}

int CollectiveSpec::outputChunks() const {
  switch (kind) {
    case CollectiveKind::kAllGather:
    case CollectiveKind::kAllToAll: return num_ranks * chunk_factor;
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kReduce: return chunk_factor;
    case CollectiveKind::kCustom: return 0;
  }
  return 0;
}

int CollectiveSpec::chunksPerLoop() const {
  if (kind == CollectiveKind::kCustom) return 0;
  return isScattered(kind) ? num_ranks * chunk_factor : chunk_factor;
}

std::optional<ChunkValue> CollectiveSpec::expectedOutput(int rank, int index) const {
  if (rank < 0 || rank >= num_ranks || index < 0 || index >= outputChunks()) return std::nullopt;
  const int c = chunk_factor;
  switch (kind) {
    case CollectiveKind::kAllGather: return ChunkValue{{index / c, index % c}};
    case CollectiveKind::kReduceScatter: return allRanks(num_ranks, rank * c + index);
    case CollectiveKind::kAllReduce: return allRanks(num_ranks, index);
    case CollectiveKind::kAllToAll: return ChunkValue{{index / c, rank * c + index % c}};
    case CollectiveKind::kBroadcast: return ChunkValue{{root, index}};
    case CollectiveKind::kReduce:
      if (rank != root) return std::nullopt;
      return allRanks(num_ranks, index);
    case CollectiveKind::kCustom: return std::nullopt;
  }
  return std::nullopt;
}

int CollectiveSpec::inputAliasInOutput(int rank, int index) const {
  if (!in_place || index < 0 || index >= inputChunks()) return -1;
  switch (kind) {
    case CollectiveKind::kAllGather: return rank * chunk_factor + index;
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kAllToAll:
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kReduce: return index;
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kCustom: return -1;
  }
  return -1;
}

int CollectiveSpec::outputAliasInInput(int rank, int index) const {
  if (!in_place || kind != CollectiveKind::kReduceScatter || index < 0 || index >= outputChunks()) return -1;
  return rank * chunk_factor + index;
}

int CollectiveSpec::sizeMultiplier() const { return isScattered(kind) ? num_ranks : 1; }

double CollectiveSpec::busBandwidthFactor() const {
  if (num_ranks <= 0) return 0.0;
  const double n = num_ranks;
  switch (kind) {
    case CollectiveKind::kAllReduce: return 2.0 * (n - 1.0) / n;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllToAll: return (n - 1.0) / n;
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kReduce: return 1.0;
    case CollectiveKind::kCustom: return 0.0;
  }
  return 0.0;
}

std::string CollectiveSpec::toString() const {
  std::string text = fmt::format("{} n={} c={}", collectiveName(kind), num_ranks, chunk_factor);
  if (kind == CollectiveKind::kBroadcast || kind == CollectiveKind::kReduce) text += fmt::format(" root={}", root);
  text += in_place ? " in-place" : " out-of-place";
  return text;
}

Status validateSpec(const CollectiveSpec& spec) {
  if (spec.kind == CollectiveKind::kCustom) {
    return invalidArgument("collective 'custom' has no pre- or postcondition to build a spec from");
  }
  if (spec.num_ranks < 1) return invalidArgument(fmt::format("num_ranks must be >= 1, got {}", spec.num_ranks));
  if (spec.chunk_factor < 1) {
    return invalidArgument(fmt::format("chunk_factor must be >= 1, got {}", spec.chunk_factor));
  }
  if (spec.root < 0 || spec.root >= spec.num_ranks) {
    return invalidArgument(fmt::format("root must be in [0, {}), got {}", spec.num_ranks, spec.root));
  }
  const int64_t per_loop = static_cast<int64_t>(spec.num_ranks) * spec.chunk_factor;
  if (per_loop > std::numeric_limits<int>::max()) {
    return invalidArgument(
        fmt::format("num_ranks {} x chunk_factor {} overflows the chunk count", spec.num_ranks, spec.chunk_factor));
  }
  return Status::ok();
}

}  // namespace braid
