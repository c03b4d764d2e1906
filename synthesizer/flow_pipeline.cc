// The all-to-all max-concurrent flow as the synthesizer's routing and schedule (forest.h flowPipeline): the pieces
// of every block are dealt to its flow paths, each piece follows its path, and a fluid first-come-first-served
// schedule orders the transfers on every logical link.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <queue>
#include <tuple>
#include <vector>

#include "synthesizer/forest.h"

namespace braid::synth {
namespace {

/// How many of `pieces` each path gets: floor(pieces x fraction), then one more to the largest remainders (ties:
/// the earlier path) until the counts sum to `pieces`.
std::vector<int> dealPieces(const std::vector<AllToAllFlow::Path>& paths, int pieces) {
  std::vector<int> count(paths.size(), 0);
  std::vector<std::pair<double, int>> remainder;  // (-remainder, path): ascending = largest remainder first
  int dealt = 0;
  for (size_t i = 0; i < paths.size(); ++i) {
    const double exact = paths[i].fraction * pieces;
    count[i] = static_cast<int>(std::floor(exact + 1e-9));
    dealt += count[i];
    remainder.push_back({-(exact - count[i]), static_cast<int>(i)});
  }
  std::sort(remainder.begin(), remainder.end());
  for (size_t i = 0; dealt < pieces; i = (i + 1) % remainder.size()) {
    ++count[remainder[i].second];
    ++dealt;
  }
  while (dealt > pieces) {  // rounding pushed a floor up: take from the smallest remainders
    for (auto it = remainder.rbegin(); it != remainder.rend() && dealt > pieces; ++it) {
      if (count[it->second] > 0) {
        --count[it->second];
        --dealt;
      }
    }
  }
  return count;
}

}  // namespace

Result<FlowPipeline> flowPipeline(const LogicalTopology& logical, const AllToAllFlow& flow, int pieces,
                                  uint64_t size_bytes) {
  const int n = logical.num_ranks;
  if (pieces < 1) return invalidArgument(fmt::format("all-to-all flow pipeline: {} pieces per block", pieces));
  if (flow.num_ranks != n || flow.paths.size() != static_cast<size_t>(n) * n) {
    return invalidArgument(
        fmt::format("all-to-all flow pipeline: the flow has {} ranks, the logical topology {}", flow.num_ranks, n));
  }
  FlowPipeline out;
  out.problem = makeChunkProblem(CollectiveKind::kAllToAll, logical, pieces, /*root=*/0, size_bytes);
  const std::vector<Chunk>& chunks = out.problem.chunks;
  out.routing.parent.assign(chunks.size(), std::vector<int>(n, -1));
  // Chunks come (owner, dest, piece) in order from makeChunkProblem; a block's pieces are consecutive.
  std::vector<std::vector<int>> hops(chunks.size());  // chunk -> logical links in path order
  for (size_t first = 0; first < chunks.size(); first += pieces) {
    const int s = chunks[first].owner, d = chunks[first].dest;
    const std::vector<AllToAllFlow::Path>& paths = flow.paths[static_cast<size_t>(s) * n + d];
    if (paths.empty()) return internalError(fmt::format("all-to-all flow pipeline: no path {} -> {}", s, d));
    const std::vector<int> count = dealPieces(paths, pieces);
    size_t chunk = first;
    for (size_t i = 0; i < paths.size(); ++i) {
      const std::vector<int>& ranks = paths[i].ranks;
      for (int j = 0; j < count[i]; ++j, ++chunk) {
        for (size_t h = 0; h + 1 < ranks.size(); ++h) {
          const int l = logical.find(ranks[h], ranks[h + 1]);
          if (l < 0) {
            return internalError(fmt::format("all-to-all flow pipeline: no logical link {} -> {} on the path {} -> {}",
                                             ranks[h], ranks[h + 1], s, d));
          }
          out.routing.parent[chunk][ranks[h + 1]] = l;
          hops[chunk].push_back(l);
        }
      }
    }
  }

  // Rates: every logical link ends its bytes when the most loaded physical link ends its own.
  const int num_links = static_cast<int>(logical.links.size());
  const double bytes = out.problem.chunk_bytes;
  std::vector<double> link_bytes(num_links, 0);
  for (const std::vector<int>& path : hops) {
    for (int l : path) link_bytes[l] += bytes;
  }
  std::vector<double> resource_bytes(logical.resource_gbps.size(), 0);
  for (int l = 0; l < num_links; ++l) {
    for (int e : logical.links[l].resources) resource_bytes[e] += link_bytes[l];
  }
  double fluid_us = 0;
  for (size_t e = 0; e < resource_bytes.size(); ++e) {
    if (resource_bytes[e] > 0) fluid_us = std::max(fluid_us, resource_bytes[e] / (logical.resource_gbps[e] * 1e3));
  }
  out.fluid_us = fluid_us;

  Schedule& s = out.schedule;
  s.link_order.assign(num_links, {});
  std::vector<std::vector<int>> transfer_of(chunks.size());  // chunk -> transfers in path order
  for (size_t c = 0; c < chunks.size(); ++c) {
    for (int l : hops[c]) {
      transfer_of[c].push_back(static_cast<int>(s.transfers.size()));
      s.transfers.push_back({.chunk = static_cast<int>(c), .link = l});
    }
  }
  std::vector<double> link_free(num_links, 0);
  using Ready = std::tuple<double, int, int, int, int, int>;  // (ready us, piece, owner, dest, chunk, hop)
  std::priority_queue<Ready, std::vector<Ready>, std::greater<>> ready;
  for (size_t c = 0; c < chunks.size(); ++c) {
    if (!hops[c].empty()) ready.push({0.0, chunks[c].piece, chunks[c].owner, chunks[c].dest, static_cast<int>(c), 0});
  }
  while (!ready.empty()) {
    const auto [when, piece, owner, dest, c, hop] = ready.top();
    ready.pop();
    Transfer& x = s.transfers[transfer_of[c][hop]];
    const LogicalLink& link = logical.links[x.link];
    const double rate = fluid_us > 0 ? link_bytes[x.link] / fluid_us : link.gbps * 1e3;  // bytes per us
    x.start_us = std::max(when, link_free[x.link]);
    link_free[x.link] = x.start_us + bytes / rate;
    x.end_us = link_free[x.link] + link.alpha_us;
    s.link_order[x.link].push_back(transfer_of[c][hop]);
    s.makespan_us = std::max(s.makespan_us, x.end_us);
    if (hop + 1 < static_cast<int>(hops[c].size())) ready.push({x.end_us, piece, owner, dest, c, hop + 1});
  }
  for (int t = 0; t < static_cast<int>(s.transfers.size()); ++t) s.groups.push_back({t});
  out.routing.makespan_us = s.makespan_us;
  return out;
}

}  // namespace braid::synth
