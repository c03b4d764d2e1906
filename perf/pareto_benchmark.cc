// Pareto-set benchmark: per shipped topology and collective, the set `braid synth --sizes 1K:1G` builds
// (include/braid/pareto.h: TACCL pipeline, tree packing and the classical algorithms, each with Simple, LL and
// LL128, next to NCCL's own choice simulated the same way), and per set: its windows, how many are left to NCCL,
// the ratio NCCL / Braid at 1 KiB and 256 MiB (Braid = the set's time: its fastest candidate, or NCCL's where NCCL
// serves), NCCL's ring / Braid at 1 KiB, and Braid / the cut bound at 256 MiB. Everything is simulated in one run.
// Checks, exiting 1 on a miss: at every measured size the set's time <= NCCL's choice (windows left to NCCL count as
// equal) and, in Braid's windows, NCCL's choice >= the margin x Braid's time; the windows cover 0 .. unlimited
// without gaps.
// Usage: pareto_benchmark [--topologies a,b] [--collectives allgather,...] [--sizes 1K:1G] [--time-limit S]
//                         [--min-speedup X (ParetoOptions::min_speedup; default defaultParetoMinSpeedup())]
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "braid/pareto.h"
#include "braid/topology.h"
#include "common/text.h"

namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, sep)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

/// The set's time at a point: NCCL's where NCCL serves, else Braid's.
double setUs(const braid::CollectiveParetoSet& set, const braid::ParetoPoint& p) {
  return set.windows[p.window].nccl && p.nccl_us ? *p.nccl_us : p.braid_us;
}

const braid::ParetoPoint* pointAt(const braid::CollectiveParetoSet& set, uint64_t requested) {
  const braid::ParetoPoint* best = nullptr;
  for (const braid::ParetoPoint& p : set.points) {
    if (p.size_bytes <= requested && (!best || p.size_bytes > best->size_bytes)) best = &p;
  }
  return best;
}

std::string ratio(std::optional<double> num, double den) {
  return num && den > 0 ? fmt::format("{:.2f}", *num / den) : "-";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> topologies = braid::shippedTopologyNames();
  std::vector<std::string> collectives = {"allgather", "reducescatter", "allreduce", "alltoall"};
  std::string range = "1K:1G";
  double time_limit = 30;
  double min_speedup = braid::defaultParetoMinSpeedup();
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) {
      std::cerr << "usage: pareto_benchmark [--topologies a,b] [--collectives allgather,...] [--sizes 1K:1G] "
                   "[--time-limit S] [--min-speedup X]\n";
      return 2;
    }
    const std::string value = argv[++i];
    if (arg == "--topologies") {
      topologies = split(value, ',');
    } else if (arg == "--collectives") {
      collectives = split(value, ',');
    } else if (arg == "--sizes") {
      range = value;
    } else if (arg == "--time-limit" || arg == "--min-speedup") {
      const std::optional<double> number = braid::parseDecimalNumber(value);
      const double least = arg == "--min-speedup" ? 1 : 0;
      const double most = arg == "--min-speedup" ? 1000 : 3600;
      if (!number || *number < least || (least == 0 && *number == 0) || *number > most) {
        std::cerr << "pareto_benchmark: " << arg << " " << value << " is not a decimal number in "
                  << (arg == "--min-speedup" ? "[1, 1000]" : "(0, 3600]") << "\n";
        return 2;
      }
      (arg == "--time-limit" ? time_limit : min_speedup) = *number;
    } else {
      std::cerr << "pareto_benchmark: unknown option " << arg << "\n";
      return 2;
    }
  }
  for (const std::string& c : collectives) {
    const std::optional<braid::CollectiveKind> kind = braid::parseCollective(c);
    if (!kind || (*kind != braid::CollectiveKind::kAllGather && *kind != braid::CollectiveKind::kReduceScatter &&
                  *kind != braid::CollectiveKind::kAllReduce && *kind != braid::CollectiveKind::kAllToAll)) {
      std::cerr << "pareto_benchmark: --collectives: '" << c
                << "' is not allgather, reducescatter, allreduce or alltoall\n";
      return 2;
    }
  }
  if (topologies.empty() || collectives.empty()) {
    std::cerr << "pareto_benchmark: no topology or no collective to run\n";
    return 2;
  }
  const std::vector<std::string> ends = split(range, ':');
  const std::optional<uint64_t> from = ends.size() == 2 ? braid::parseNcclTestsSize(ends[0]) : std::nullopt;
  const std::optional<uint64_t> to = ends.size() == 2 ? braid::parseNcclTestsSize(ends[1]) : std::nullopt;
  if (!from || !to || *from == 0 || *to < *from) {
    std::cerr << "pareto_benchmark: --sizes " << range << " is not FROM:TO\n";
    return 2;
  }
  std::vector<uint64_t> sizes;
  for (uint64_t s = *from; s <= *to; s *= 4) sizes.push_back(s);

  fmt::print(
      "# Braid Pareto-set benchmark: sizes {} x4, time limit {} s per synthesis; Braid = the set's time (its "
      "fastest candidate, or NCCL's choice in windows left to NCCL); Braid's simulator, float, out-of-place; Braid "
      "takes a size only at a predicted NCCL/Braid >= {} (--min-speedup)\n",
      range, time_limit, min_speedup);
  fmt::print(
      "# NCCL/Braid and ring/Braid > 1: the set is faster than NCCL's choice / NCCL's ring; Braid/cut: the "
      "set's time / ForestColl's hardware cut bound (< 1 only with NVLS' in-network reduction)\n");
  fmt::print("{:<12} {:<13} {:>5} {:>7} {:>7} {:>6} | {:>10} {:>9} | {:>11} {:>9} | {:>8}  {}\n", "topology",
             "collective", "ranks", "windows", "NCCL's", "wall s", "1K NCCL/B", "1K ring/B", "256M NCCL/B",
             "256M B/cut", "min N/B", "served at 256M");
  int failures = 0;
  for (const std::string& name : topologies) {
    braid::Result<braid::Topology> topo = braid::loadTopologyOrShipped(name);
    if (!topo) {
      fmt::print("{:<12} cannot load: {}\n", name, topo.status().message());
      ++failures;
      continue;
    }
    for (const std::string& coll_name : collectives) {
      const std::optional<braid::CollectiveKind> coll = braid::parseCollective(coll_name);
      if (!coll) {
        std::cerr << "pareto_benchmark: unknown collective " << coll_name << "\n";
        return 2;
      }
      braid::ParetoOptions options;
      options.sizes = sizes;
      options.time_limit_s = time_limit;
      options.min_speedup = min_speedup;
      const auto t0 = std::chrono::steady_clock::now();
      braid::Result<braid::CollectiveParetoSet> set = braid::synthesizeCollectiveParetoSet(*topo, name, *coll, options);
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!set) {
        fmt::print("{:<12} {:<13} FAILED: {}\n", name, coll_name, set.status().message());
        ++failures;
        continue;
      }
      int nccl_windows = 0;
      for (const braid::ParetoWindow& w : set->windows) nccl_windows += w.nccl ? 1 : 0;
      bool covered = !set->windows.empty() && set->windows.front().min_bytes == 0 &&
                     set->windows.back().max_bytes == braid::kUnlimitedBytes;
      for (size_t i = 1; i < set->windows.size(); ++i)
        covered &= set->windows[i].min_bytes == set->windows[i - 1].max_bytes + 1;
      double min_ratio = 1e300;
      bool short_of_margin = false;  // a Braid window where NCCL's choice is not min_speedup x slower
      for (const braid::ParetoPoint& p : set->points) {
        if (!p.nccl_us) continue;
        min_ratio = std::min(min_ratio, *p.nccl_us / setUs(*set, p));
        if (!set->windows[p.window].nccl && *p.nccl_us < p.braid_us * min_speedup * (1 - 1e-9)) short_of_margin = true;
      }
      const braid::ParetoPoint* small = pointAt(*set, 1 << 10);
      const braid::ParetoPoint* big = pointAt(*set, uint64_t{256} << 20);
      const bool slower = min_ratio < 1 - 1e-9;
      if (slower || short_of_margin || !covered) ++failures;
      fmt::print("{:<12} {:<13} {:>5} {:>7} {:>7} {:>6.1f} | {:>10} {:>9} | {:>11} {:>9} | {:>8}  {}{}{}\n", name,
                 coll_name, topo->numGpus(), set->windows.size(), nccl_windows, wall,
                 small ? ratio(small->nccl_us, setUs(*set, *small)) : "-",
                 small ? ratio(small->nccl_ring_us, setUs(*set, *small)) : "-",
                 big ? ratio(big->nccl_us, setUs(*set, *big)) : "-",
                 big && big->cut_bound_us > 0 ? fmt::format("{:.3f}", setUs(*set, *big) / big->cut_bound_us) : "-",
                 min_ratio < 1e300 ? fmt::format("{:.2f}", min_ratio) : "-",
                 big ? (set->windows[big->window].nccl ? "NCCL " + big->nccl_choice : big->braid_label) : "-",
                 covered ? "" : "  GAP", short_of_margin ? "  SHORT OF THE MARGIN" : "");
      std::fflush(stdout);
    }
  }
  fmt::print(
      "# {} failure(s): sets slower than NCCL's choice somewhere, Braid windows short of the margin, or windows with "
      "gaps\n",
      failures);
  return failures == 0 ? 0 : 1;
}
