#include "braid_perf/layout.h"

namespace braid::perf {

RowLayout rowLayout(Collective collective, uint64_t size_bytes, DataType type, int nranks) {
  RowLayout layout;
  layout.elem_bytes = dataTypeSize(type);
  const uint64_t elems = size_bytes / layout.elem_bytes;
  const uint64_t n = static_cast<uint64_t>(nranks > 0 ? nranks : 1);
  // Per-rank part rounded down to whole 16-byte lines: 16 / element bytes elements.
  const uint64_t line_elems = 16 / layout.elem_bytes;
  const uint64_t part = (elems / n) / line_elems * line_elems;
  switch (collective) {
    case Collective::kAllReduce:
    case Collective::kBroadcast:
    case Collective::kReduce:
      layout.count = elems;
      layout.send_elems = elems;
      layout.recv_elems = elems;
      break;
    case Collective::kAllGather:
      layout.count = part;
      layout.send_elems = part;
      layout.recv_elems = part * n;
      break;
    case Collective::kReduceScatter:
      layout.count = part;
      layout.send_elems = part * n;
      layout.recv_elems = part;
      break;
    case Collective::kAllToAll:
      layout.count = part;
      layout.send_elems = part * n;
      layout.recv_elems = part * n;
      break;
  }
  return layout;
}

std::vector<RowLayout> sweepLayouts(const Options& options, DataType type, int nranks) {
  std::vector<RowLayout> rows;
  bool zero_row = false;
  for (uint64_t size : sweepSizes(options)) {
    const RowLayout layout = rowLayout(options.collective, size, type, nranks);
    if (layout.rowBytes() == 0) {
      if (zero_row) continue;
      zero_row = true;
    }
    rows.push_back(layout);
  }
  return rows;
}

bool checksInPlace(Collective collective) { return collective != Collective::kAllToAll; }

uint64_t RowLayout::inPlaceSendOffset(Collective collective, int rank) const {
  return collective == Collective::kAllGather ? static_cast<uint64_t>(rank) * count : 0;
}

uint64_t RowLayout::inPlaceRecvOffset(Collective collective, int rank) const {
  return collective == Collective::kReduceScatter ? static_cast<uint64_t>(rank) * count : 0;
}

double algBandwidth(Collective collective, const RowLayout& layout, int nranks, double seconds) {
  if (seconds <= 0) return 0;
  double bytes = static_cast<double>(layout.count) * static_cast<double>(layout.elem_bytes);
  if (collective == Collective::kAllGather || collective == Collective::kReduceScatter ||
      collective == Collective::kAllToAll) {
    bytes *= nranks;
  }
  return bytes / 1.0e9 / seconds;
}

double busFactor(Collective collective, int nranks) {
  const double n = nranks;
  switch (collective) {
    case Collective::kAllReduce: return 2.0 * (n - 1) / n;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll: return (n - 1) / n;
    case Collective::kBroadcast:
    case Collective::kReduce: return 1.0;
  }
  return 1.0;
}

}  // namespace braid::perf
