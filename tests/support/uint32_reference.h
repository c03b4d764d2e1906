// The data of the executor tests over the in-memory transport (tests/runtime/mem_transport.h) and their naive
// reference: input element i of rank r holds inputWord(r, i) = r*1000003 + i*7919 + 1 (uint32, wrapping), so
// every element is distinct; reductions are wrap-around uint32 sums (the only reduction MemTransport implements).
#pragma once

#include <cstdint>
#include <optional>

#include "braid/collective.h"

namespace braid::testing {

inline uint32_t inputWord(int rank, uint64_t index) {
  return static_cast<uint32_t>(rank) * 1000003u + static_cast<uint32_t>(index) * 7919u + 1u;
}

/// What output element j of rank r must hold after `spec` (nullopt: unconstrained), from the collective's
/// definition; `in_elems` / `out_elems`: elements of one rank's input / output.
inline std::optional<uint32_t> referenceWord(const CollectiveSpec& spec, uint64_t in_elems, uint64_t out_elems, int r,
                                             uint64_t j) {
  const int n = spec.num_ranks;
  auto sum = [&](uint64_t index) {
    uint32_t total = 0;
    for (int q = 0; q < n; ++q) total += inputWord(q, index);
    return total;
  };
  switch (spec.kind) {
    case CollectiveKind::kAllGather: return inputWord(static_cast<int>(j / in_elems), j % in_elems);  // n blocks
    case CollectiveKind::kReduceScatter: return sum(r * out_elems + j);
    case CollectiveKind::kAllReduce: return sum(j);
    case CollectiveKind::kAllToAll: {
      const uint64_t m = out_elems / n;  // block from rank q = q's input block r
      return inputWord(static_cast<int>(j / m), r * m + j % m);
    }
    case CollectiveKind::kBroadcast: return inputWord(spec.root, j);
    case CollectiveKind::kReduce: return r == spec.root ? std::optional<uint32_t>(sum(j)) : std::nullopt;
    case CollectiveKind::kCustom: return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace braid::testing
