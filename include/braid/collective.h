// CollectiveSpec: pre- and postconditions of a collective over (rank, chunk).
//
// Chunk units follow MSCCL (../shared/reference/taccl_msccl.md §2.3): each rank's input and output
// buffers are cut into equal chunks; `chunk_factor` c is the number of chunks per rank-sized piece.
//   collective      input chunks/rank  output chunks/rank  nchunksperloop
//   allgather       c                  n*c                 n*c
//   reducescatter   n*c                c                   n*c
//   allreduce       c                  c                   c
//   alltoall        n*c                n*c                 n*c
//   broadcast       c                  c                   c
//   reduce          c                  c                   c
// Values are symbolic: input chunk i of rank r holds the value {(r, i)}; a reduction holds the set
// of inputs it sums. An output is correct when it holds exactly the expected set.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "braid/status.h"

namespace braid {

enum class CollectiveKind { kAllGather, kReduceScatter, kAllReduce, kAllToAll, kBroadcast, kReduce, kCustom };

/// MSCCL names: "allgather", "reducescatter", "allreduce", "alltoall", "broadcast", "reduce", "custom".
const char* collectiveName(CollectiveKind kind);
/// Accepts the MSCCL names plus "reduce_scatter", "all_gather", "all_reduce", "all_to_all",
/// any letter case. nullopt when unknown.
std::optional<CollectiveKind> parseCollective(const std::string& name);

/// An input chunk of the precondition: chunk `index` of rank `rank`'s input buffer.
struct ChunkRef {
  int rank = 0;
  int index = 0;
  friend bool operator==(const ChunkRef& a, const ChunkRef& b) { return a.rank == b.rank && a.index == b.index; }
  friend bool operator<(const ChunkRef& a, const ChunkRef& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.index < b.index;
  }
};

/// A symbolic chunk value: the sorted set of input chunks reduced into it (one element = a copy).
using ChunkValue = std::vector<ChunkRef>;

struct CollectiveSpec {
  CollectiveKind kind = CollectiveKind::kAllGather;
  int num_ranks = 0;
  int chunk_factor = 1;  // c
  int root = 0;          // broadcast / reduce
  bool in_place = false;

  int inputChunks() const;    // per rank
  int outputChunks() const;   // per rank
  int chunksPerLoop() const;  // MSCCL nchunksperloop

  /// Expected value of output chunk `index` on `rank`; nullopt when unconstrained
  /// (e.g. non-root ranks of reduce).
  std::optional<ChunkValue> expectedOutput(int rank, int index) const;

  /// In-place aliasing: the output-buffer chunk that input chunk `index` of `rank` occupies, or -1
  /// when out of place. allgather: rank*c+index; allreduce/alltoall/broadcast/reduce: index;
  /// reducescatter: the input is the larger buffer, see outputAliasInInput.
  int inputAliasInOutput(int rank, int index) const;
  /// In-place reducescatter: the input-buffer chunk that output chunk `index` occupies
  /// (rank*c+index); -1 otherwise.
  int outputAliasInInput(int rank, int index) const;

  /// Multiplier MSCCL applies to the call's count to get the full buffer size (n for allgather,
  /// reducescatter, alltoall; 1 otherwise).
  int sizeMultiplier() const;
  /// Bus-bandwidth factor of nccl-tests (allreduce 2(n-1)/n, allgather/reducescatter/alltoall
  /// (n-1)/n, broadcast/reduce 1).
  double busBandwidthFactor() const;

  std::string toString() const;  // e.g. "allgather n=8 c=1 out-of-place"
};

/// Checks num_ranks >= 1, chunk_factor >= 1, 0 <= root < num_ranks, custom not allowed.
Status validateSpec(const CollectiveSpec& spec);

}  // namespace braid
