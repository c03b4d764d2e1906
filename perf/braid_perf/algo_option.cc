#include "braid_perf/algo_option.h"

#include <fmt/format.h>

#include <filesystem>

#include "braid/collective.h"

namespace braid::perf {

namespace {

CollectiveKind kindOf(Collective c) {
  switch (c) {
    case Collective::kAllReduce: return CollectiveKind::kAllReduce;
    case Collective::kAllGather: return CollectiveKind::kAllGather;
    case Collective::kReduceScatter: return CollectiveKind::kReduceScatter;
    case Collective::kAllToAll: return CollectiveKind::kAllToAll;
    case Collective::kBroadcast: return CollectiveKind::kBroadcast;
    case Collective::kReduce: return CollectiveKind::kReduce;
  }
  return CollectiveKind::kCustom;
}

// The file as the header names it: the --algo path itself for a file, the file's name inside a --algo directory.
std::string shownName(const std::string& given, const std::string& file) {
  if (file == given) return given;
  return std::filesystem::path(file).filename().string();
}

}  // namespace

std::string headerBytes(uint64_t bytes) {
  if (bytes == kUnlimitedBytes) return "unlimited";
  static const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes >= 1024) {
    uint64_t v = bytes;
    int unit = -1;
    while (unit < 3 && v >= 1024 && v % 1024 == 0) {
      v /= 1024;
      ++unit;
    }
    if (unit >= 0) return fmt::format("{} {}", v, kUnits[unit]);
  }
  return fmt::format("{} B", bytes);
}

std::string headerByteRange(uint64_t min_bytes, uint64_t max_bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  const bool unlimited = max_bytes == kUnlimitedBytes;
  // The largest unit both ends are whole multiples of (0 is one of every unit; an unlimited end has no unit).
  int unit = 0;
  uint64_t scale = 1;
  while (unit < 4 && min_bytes % (scale * 1024) == 0 && (unlimited || max_bytes % (scale * 1024) == 0) &&
         (min_bytes != 0 || (!unlimited && max_bytes != 0))) {
    scale *= 1024;
    ++unit;
  }
  const std::string hi = unlimited ? "unlimited" : fmt::format("{} {}", max_bytes / scale, kUnits[unit]);
  return fmt::format("{} {}..{}", min_bytes / scale, kUnits[unit], hi);
}

std::string algoHeaderText(const std::string& given, const std::vector<AlgoFile>& loaded, const Options& options) {
  const CollectiveKind kind = kindOf(options.collective);
  const int ranks = options.ranks();
  const bool rooted = isRooted(options.collective);
  std::vector<std::string> applies;
  bool covers_all = false;
  std::string why_not;  // the first file that never applies, and why
  for (const AlgoFile& f : loaded) {
    const Algorithm& a = f.algorithm;
    const std::string name = shownName(given, f.file);
    const bool root_differs = rooted && options.root >= 0 && a.root != options.root;
    if (a.collective != kind || a.num_ranks != ranks || root_differs || (!a.in_place && !a.out_of_place)) {
      if (why_not.empty()) {
        why_not =
            fmt::format("{}: {} for {} ranks{}, never this {} with {} ranks{}", name, collectiveName(a.collective),
                        a.num_ranks, rooted ? fmt::format(" root {}", a.root) : "", collectiveName(options.collective),
                        ranks, rooted && options.root >= 0 ? fmt::format(" root {}", options.root) : "");
      }
      continue;
    }
    const bool every_size = a.min_bytes == 0 && a.max_bytes == kUnlimitedBytes;
    const bool both_modes = a.in_place && a.out_of_place;
    if (every_size && both_modes && loaded.size() == 1) covers_all = true;
    std::vector<std::string> where;
    if (!every_size) where.push_back("sizes " + headerByteRange(a.min_bytes, a.max_bytes));
    if (!both_modes) where.push_back(a.in_place ? "in-place only" : "out-of-place only");
    if (rooted && options.root < 0) where.push_back(fmt::format("root {} only", a.root));
    applies.push_back(where.empty() ? name : fmt::format("{} ({})", name, fmt::join(where, ", ")));
  }
  if (covers_all && (!rooted || options.root >= 0)) return "forced from " + given;
  if (applies.empty()) {
    if (why_not.empty()) return fmt::format("Braid's selection ({}: no algorithm)", given);
    return fmt::format("Braid's selection ({})", why_not);
  }
  return fmt::format("{} where {} match{}, else Braid's selection", fmt::join(applies, "; "),
                     applies.size() == 1 ? "it" : "they", applies.size() == 1 ? "es" : "");
}

}  // namespace braid::perf
