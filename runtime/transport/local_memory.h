// LocalMemory: the bound RankMemory of an endpoint's ranks, range checks, and local copies/reductions —
// shared by every data transport (include/braid/transport.h, DataTransport contract).
#pragma once

#include <cstdint>
#include <vector>

#include "braid/transport.h"

namespace braid {

class LocalMemory {
 public:
  explicit LocalMemory(std::vector<int> local_ranks);

  const std::vector<int>& ranks() const { return ranks_; }
  bool isLocal(int rank) const;
  /// DataTransport::bind. kInvalidArgument when `rank` is not local, or a buffer pointer is null while its
  /// size is not 0.
  Status bind(int rank, const RankMemory& memory, ReduceSpec reduce);
  /// The bytes `ref` names on `rank`. Errors: kInvalidArgument "rank 3: recv dst output[4096, 8192) is past the
  /// output buffer of 6144 bytes" (`what` names the request field), or when `rank` is not bound.
  Result<uint8_t*> resolve(int rank, const BufferRef& ref, const char* what) const;
  /// A local request with its checks passed: pointers into bound memory, its bytes, and the reduction to apply
  /// (reduce false: a copy).
  struct Resolved {
    uint8_t* src = nullptr;
    uint8_t* dst = nullptr;
    uint64_t bytes = 0;
    bool reduce = false;
    ReduceSpec spec;
  };
  /// The checks of a local request (equal sizes, both ranges in bound memory, a reduction on whole elements) and
  /// its pointers. Errors: kInvalidArgument naming the rank and what is wrong.
  Result<Resolved> resolveLocal(const LocalRequest& request) const;
  /// Runs a resolved local request on the calling thread: memmove (copy) or reduceInto (reduce).
  static void runOnCpu(const Resolved& local);
  /// resolveLocal, then runOnCpu.
  Status run(const LocalRequest& request);
  const ReduceSpec& reduceSpec(int rank) const;

 private:
  struct Bound {
    bool bound = false;
    RankMemory memory;
    ReduceSpec reduce;
  };
  const Bound* find(int rank) const;
  std::vector<int> ranks_;
  std::vector<Bound> bound_;  // same order as ranks_
};

}  // namespace braid
