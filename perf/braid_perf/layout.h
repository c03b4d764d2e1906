// Sizes, buffer layouts and bandwidths of one braid_perf row, by nccl-tests' rules
// (../shared/reference/nccl_plugins.md §6.3-6.4; nccl-tests src/<collective>.cu *GetCollByteCount, *GetBw).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "braid_perf/options.h"

namespace braid::perf {

/// One row: a size of the sweep turned into the call's count and the per-rank buffers.
///   all_reduce, broadcast, reduce: count = size / element bytes; send = recv = count elements.
///   all_gather:     count = per-rank elements = (size / element bytes / n) rounded down to a multiple of
///                   16 bytes; send = count, recv = n x count.
///   reduce_scatter: count as all_gather; send = n x count, recv = count.
///   alltoall:       count (elements per peer) as all_gather; send = recv = n x count.
/// The row's "size" column is max(send, recv) bytes, its "count" column `count`.
struct RowLayout {
  uint64_t count = 0;       // elements passed to the Braid call
  uint64_t send_elems = 0;  // per rank
  uint64_t recv_elems = 0;  // per rank
  size_t elem_bytes = 0;

  uint64_t rowBytes() const { return (send_elems > recv_elems ? send_elems : recv_elems) * elem_bytes; }
  /// In place, the call works on one buffer of rowBytes(): elements [sendOffset, +send_elems) are the
  /// input and [recvOffset, +recv_elems) the output. all_gather: input at rank x count; reduce_scatter:
  /// output at rank x count; others: both at 0 (the same buffer).
  uint64_t inPlaceSendOffset(Collective collective, int rank) const;
  uint64_t inPlaceRecvOffset(Collective collective, int rank) const;
};

RowLayout rowLayout(Collective collective, uint64_t size_bytes, DataType type, int nranks);

/// The rows of one sweep (sweepSizes(options)) for `type` on `nranks`: rowLayout of each size in order, where
/// only the first of the sizes that round down to a zero-byte row is kept (-b 0 prints one zero-size row).
std::vector<RowLayout> sweepLayouts(const Options& options, DataType type, int nranks);

/// Whether the in-place mode's data are checked: every collective's but all-to-all's, whose in-place #wrong
/// nccl-tests prints as N/A ("We don't support in-place alltoall", nccl-tests src/alltoall.cu). The call
/// still runs and is timed.
bool checksInPlace(Collective collective);

/// algbw in GB/s (1e9 bytes per second) of one operation of `seconds`: bytes moved per rank as nccl-tests
/// counts them (all_reduce, broadcast, reduce: count x element bytes; all_gather, reduce_scatter, alltoall:
/// count x element bytes x n) over the time. 0 when seconds <= 0.
double algBandwidth(Collective collective, const RowLayout& layout, int nranks, double seconds);
/// busbw / algbw: all_reduce 2(n-1)/n; all_gather, reduce_scatter, alltoall (n-1)/n; broadcast, reduce 1
/// (nccl-tests doc/PERFORMANCE.md).
double busFactor(Collective collective, int nranks);

}  // namespace braid::perf
