// Which rank pairs an algorithm sends over, and whether a topology can carry them.
#include <fmt/format.h>

#include <map>
#include <optional>
#include <utility>

#include "braid/algorithm.h"

namespace braid {

std::vector<Transfer> algorithmTransfers(const Algorithm& algorithm, const Topology* topology) {
  std::map<std::pair<int, int>, long long> chunks;
  for (const RankProgram& p : algorithm.ranks) {
    for (const Threadblock& tb : p.threadblocks) {
      if (tb.send_peer < 0) continue;
      for (const Step& s : tb.steps) {
        if (opSends(s.type)) chunks[{p.rank, tb.send_peer}] += s.count;
      }
    }
  }
  const int gpus = topology ? topology->numGpus() : 0;
  // Pairs come sorted by source: one source's searches serve all its destinations.
  std::optional<RouteCache> routes;
  if (topology) routes.emplace(*topology, 1);
  std::vector<Transfer> out;
  out.reserve(chunks.size());
  for (const auto& [pair, n] : chunks) {
    Transfer t;
    t.src = pair.first;
    t.dst = pair.second;
    t.chunks = n;
    if (topology && t.src < gpus && t.dst < gpus) t.route = routes->route(t.src, t.dst);
    out.push_back(t);
  }
  return out;
}

Status checkPlacement(const Algorithm& algorithm, const Topology& topology) {
  if (topology.numGpus() != algorithm.num_ranks) {
    return invalidArgument(fmt::format("algorithm '{}' has {} ranks but topology '{}' has {} GPUs", algorithm.name,
                                       algorithm.num_ranks, topology.name, topology.numGpus()));
  }
  std::string missing;
  int count = 0;
  for (const Transfer& t : algorithmTransfers(algorithm, &topology)) {
    if (t.route) continue;
    if (++count <= 8) missing += fmt::format("{}{}->{}", missing.empty() ? "" : ", ", t.src, t.dst);
  }
  if (count == 0) return Status::ok();
  return invalidArgument(fmt::format("topology '{}' has no route for {} transfer(s) of '{}': {}{}", topology.name,
                                     count, algorithm.name, missing, count > 8 ? ", ..." : ""));
}

}  // namespace braid
