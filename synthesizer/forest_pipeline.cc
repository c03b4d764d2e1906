// Packed trees as the synthesizer's routing and schedule (forest.h): the pieces of every root are dealt to its tree
// groups in proportion to their multiplicities, each piece follows its group's edges, and the greedy ordering stage
// puts the transfers in order on logical and shared physical links.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <queue>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "synthesizer/forest.h"

namespace braid::synth {

ForestPipeline forestPipeline(const LogicalTopology& logical, const std::vector<PackedTree>& trees,
                              const ForestUnits& units, int pipeline, uint64_t size_bytes) {
  const int n = logical.num_ranks;
  ForestPipeline out;
  out.pipeline = pipeline;
  out.k = units.k;
  const int chunkup = static_cast<int>(units.k) * pipeline;
  out.problem = makeChunkProblem(CollectiveKind::kAllGather, logical, chunkup, /*root=*/0, size_bytes);
  std::map<std::pair<int, int>, int> chunk_of;  // (owner, piece) -> chunk id
  for (const Chunk& c : out.problem.chunks) chunk_of[{c.owner, c.piece}] = c.id;
  out.routing.parent.assign(out.problem.chunks.size(), std::vector<int>(n, -1));
  std::vector<int> next_piece(n, 0);
  for (const PackedTree& tree : trees) {
    const int pieces = static_cast<int>(tree.multiplicity) * pipeline;
    for (int p = 0; p < pieces; ++p) {
      const int chunk = chunk_of.at({tree.root, next_piece[tree.root]++});
      for (const auto& [parent, child] : tree.edges) out.routing.parent[chunk][child] = logical.find(parent, child);
    }
  }

  // The fluid schedule: logical link l sends at the rate of its tree units (capacity x rate / k), first come first
  // served by the time a chunk reached its sender (ties: lower piece, then lower owner); a chunk reaches the
  // receiver the route's α after its last byte left, and the link starts its next chunk meanwhile (cut-through).
  Schedule& s = out.schedule;
  const int num_links = static_cast<int>(logical.links.size());
  s.link_order.assign(num_links, {});
  std::vector<std::vector<int>> children(out.problem.chunks.size() * n);  // (chunk, rank) -> transfers leaving it
  std::vector<int> root_transfers;
  for (size_t c = 0; c < out.problem.chunks.size(); ++c) {
    for (int r = 0; r < n; ++r) {
      const int l = out.routing.parent[c][r];
      if (l < 0) continue;
      const int t = static_cast<int>(s.transfers.size());
      s.transfers.push_back({.chunk = static_cast<int>(c), .link = l});
      const int from = logical.links[l].src;
      if (from == out.problem.chunks[c].owner) {
        root_transfers.push_back(t);
      } else {
        children[c * n + from].push_back(t);
      }
    }
  }
  const double unit_gbps = units.rate_gbps / static_cast<double>(units.k);
  const double bytes = out.problem.chunk_bytes;
  std::vector<double> link_free(num_links, 0);
  using Ready = std::tuple<double, int, int, int>;  // (ready us, piece, owner, transfer)
  std::priority_queue<Ready, std::vector<Ready>, std::greater<>> ready;
  auto push = [&](int t, double when) {
    const Chunk& c = out.problem.chunks[s.transfers[t].chunk];
    ready.push({when, c.piece, c.owner, t});
  };
  for (int t : root_transfers) push(t, 0);
  while (!ready.empty()) {
    const auto [when, piece, owner, t] = ready.top();
    ready.pop();
    Transfer& x = s.transfers[t];
    const LogicalLink& link = logical.links[x.link];
    const int64_t link_units = units.capacity[static_cast<size_t>(link.src) * n + link.dst];
    const double gbps = std::max<double>(1, static_cast<double>(link_units)) * unit_gbps;
    x.start_us = std::max(when, link_free[x.link]);
    link_free[x.link] = x.start_us + bytes / (gbps * 1e3);
    x.end_us = link_free[x.link] + link.alpha_us;
    s.link_order[x.link].push_back(t);
    s.makespan_us = std::max(s.makespan_us, x.end_us);
    for (int child : children[static_cast<size_t>(x.chunk) * n + link.dst]) push(child, x.end_us);
  }
  for (int t = 0; t < static_cast<int>(s.transfers.size()); ++t) s.groups.push_back({t});
  out.routing.makespan_us = s.makespan_us;
  return out;
}

}  // namespace braid::synth

namespace braid::synth {
namespace {

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

Result<ForestRates> forestRateStage(const LogicalTopology& logical, const StageContext& ctx, const std::string& tag,
                                    std::vector<StageReport>* stages) {
  const auto start = std::chrono::steady_clock::now();
  const bool lp = logical.links.size() <= kMaxTreeRateLpLinks;
  ctx.report({.stage = "tree rate",
              .detail = lp ? fmt::format("linear program over {} logical links", logical.links.size())
                           : fmt::format("equal shares of {} logical links by max-flows", logical.links.size())});
  ForestRates rates;
  if (lp) {
    BRAID_ASSIGN_OR_RETURN(rates.split, forestRate(logical, std::max(0.1, ctx.secondsLeft())));
    BRAID_ASSIGN_OR_RETURN(rates.equal, forestEqualShareRate(logical, &rates.split, std::max(0.1, ctx.secondsLeft())));
  } else {
    BRAID_ASSIGN_OR_RETURN(rates.equal, forestEqualShareRate(logical, nullptr, std::max(0.1, ctx.secondsLeft())));
    rates.split = rates.equal;
  }
  stages->push_back(
      {.name = "tree rate" + tag,
       .seconds = secondsSince(start),
       .variables = rates.split.lp_columns,
       .constraints = rates.split.lp_rows,
       .status = lp ? fmt::format("optimal: {:.6g} GB/s per root; equal shares: {:.6g} GB/s over {}",
                                  rates.split.rate_gbps, rates.equal.rate_gbps, rates.equal.sharing)
                    : fmt::format("equal shares: {:.6g} GB/s per root over {} (the LP, which bounds them from above, "
                                  "is solved up to {} logical links only)",
                                  rates.equal.rate_gbps, rates.equal.sharing, kMaxTreeRateLpLinks)});
  return rates;
}

Result<ForestTrees> forestTreesStage(const LogicalTopology& logical, const ForestRate& rate, double tolerance,
                                     int fixed_k, const StageContext& ctx, const std::string& tag,
                                     std::vector<StageReport>* stages) {
  const int n = logical.num_ranks;
  auto start = std::chrono::steady_clock::now();
  ctx.report({.stage = "tree units", .detail = fmt::format("integer tree units at {:.6g} GB/s", rate.rate_gbps)});
  ForestTrees out;
  BRAID_ASSIGN_OR_RETURN(out.units, fixed_k > 0 ? forestUnits(logical, rate, fixed_k, tolerance, fixed_k)
                                                : forestUnits(logical, rate, /*max_k=*/32, tolerance));
  const std::string shares = rate.sharing.empty() ? "the LP's split" : "equal shares";
  stages->push_back({.name = "tree units" + tag,
                     .seconds = secondsSince(start),
                     .status = fmt::format("k = {} trees per root at {:.6g} GB/s ({:.4g}% of {}' rate)", out.units.k,
                                           out.units.rate_gbps, 100 * out.units.rate_gbps / rate.rate_gbps, shares)});

  start = std::chrono::steady_clock::now();
  ctx.report({.stage = "packing", .detail = fmt::format("{} trees per root on {} ranks", out.units.k, n)});
  const auto deadline = ctx.deadline;
  BRAID_ASSIGN_OR_RETURN(out.trees, packArborescences(n, out.units.capacity, out.units.k, [deadline] {
                           return std::chrono::steady_clock::now() < deadline;
                         }));
  stages->push_back({.name = "packing" + tag,
                     .seconds = secondsSince(start),
                     .status = fmt::format("{} tree groups", out.trees.size())});
  return out;
}

ForestPipeline forestScheduleStage(const LogicalTopology& logical, const ForestTrees& trees, int pieces,
                                   uint64_t size_bytes, const std::string& tag, std::vector<StageReport>* stages) {
  const auto start = std::chrono::steady_clock::now();
  int pipeline = std::max(1, pieces);
  while (pipeline > 1 && static_cast<int64_t>(logical.num_ranks) * trees.units.k * pipeline > 4096) pipeline /= 2;
  ForestPipeline out = forestPipeline(logical, trees.trees, trees.units, pipeline, size_bytes);
  stages->push_back({.name = "schedule" + tag,
                     .seconds = secondsSince(start),
                     .status = fmt::format("fluid, {} pieces per tree unit", pipeline),
                     .makespan_us = out.schedule.makespan_us});
  return out;
}

}  // namespace braid::synth
