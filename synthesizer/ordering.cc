// Stage 2 of TACCL's synthesizer (taccl_msccl.md §1.5, taccl/heuristic_ordering.py): with the routes fixed,
// order the transfers on every logical link by greedy list scheduling. Event driven: at each step only the
// transfers that can start at the earliest moment any transfer can start compete, ranked by TACCL's keys — the
// longest remaining path of the chunk beyond the link (hops, then α-β time), the earliest possible start
// (within rounding), the sender's own chunks before the chunks it relays on inter-node links (always first
// under enforce_ordering), then the chunk's orbit representative and id (symmetric transfers get symmetric
// orders). Each logical link serves one transfer at a time; each physical link a transfer crosses is busy for
// chunk_bytes / capacity from the transfer's start (the NVSwitch ports, PCIe switches and NICs that several
// logical links share).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <vector>

#include "synthesizer/model.h"

namespace braid::synth {
namespace {

// Relative tolerance for comparing times (µs): ties up to rounding count as ties.
bool sameTime(double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max({1.0, std::fabs(a), std::fabs(b)}); }

// Length of the longest path of a chunk's tree below a rank: hops first, then α-β time (µs).
struct PathLength {
  int hops = 0;
  double time_us = 0;
};

// True when `a` is the longer remaining path.
bool longer(const PathLength& a, const PathLength& b) {
  if (a.hops != b.hops) return a.hops > b.hops;
  if (!sameTime(a.time_us, b.time_us)) return a.time_us > b.time_us;
  return false;
}

}  // namespace

Schedule orderTransfers(const LogicalTopology& logical, const ChunkProblem& problem, const Routing& routing,
                        StageReport* report) {
  const auto wall_start = std::chrono::steady_clock::now();
  const int n = logical.num_ranks;
  const int num_links = static_cast<int>(logical.links.size());
  const double bytes = problem.chunk_bytes;
  Schedule s;
  s.link_order.assign(num_links, {});

  // The routed transfers, and for each (chunk, rank) the transfer that delivers the chunk there.
  std::vector<std::vector<int>> deliver(problem.chunks.size());
  int inconsistent = 0;  // parent entries whose link does not enter the rank (a routing bug)
  for (size_t c = 0; c < problem.chunks.size() && c < routing.parent.size(); ++c) {
    const std::vector<int>& parent = routing.parent[c];
    for (int r = 0; r < n && r < static_cast<int>(parent.size()); ++r) {
      const int l = parent[r];
      if (l < 0) continue;
      if (l >= num_links || logical.links[l].dst != r) {
        ++inconsistent;
        continue;
      }
      if (deliver[c].empty()) deliver[c].assign(n, -1);
      deliver[c][r] = static_cast<int>(s.transfers.size());
      s.transfers.push_back({.chunk = static_cast<int>(c), .link = l});
    }
  }
  const int num_transfers = static_cast<int>(s.transfers.size());

  // Chunk-tree structure: the transfer that brings the chunk to the link's source (-1 at the owner) and the
  // transfers that leave the link's destination with the chunk.
  std::vector<int> pred(num_transfers, -1);
  std::vector<std::vector<int>> children(num_transfers);
  std::vector<char> orphan(num_transfers, 0);  // the chunk never reaches the sender (a routing bug)
  for (int t = 0; t < num_transfers; ++t) {
    const Transfer& tr = s.transfers[t];
    const int src = logical.links[tr.link].src;
    if (src == problem.chunks[tr.chunk].owner) continue;
    const int p = deliver[tr.chunk][src];
    if (p < 0) {
      orphan[t] = 1;
      continue;
    }
    pred[t] = p;
    children[p].push_back(t);
  }

  // Remaining path below each transfer's destination, children before parents (Kahn order from the roots).
  std::vector<int> topo;
  topo.reserve(num_transfers);
  for (int t = 0; t < num_transfers; ++t) {
    if (pred[t] < 0 && !orphan[t]) topo.push_back(t);
  }
  for (size_t i = 0; i < topo.size(); ++i) {
    for (int ch : children[topo[i]]) topo.push_back(ch);
  }
  std::vector<PathLength> below(num_transfers);
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    PathLength best;
    for (int ch : children[*it]) {
      PathLength via{below[ch].hops + 1, below[ch].time_us + logical.links[s.transfers[ch].link].cost(bytes)};
      if (longer(via, best)) best = via;
    }
    below[*it] = best;
  }

  // Greedy list scheduling.
  std::vector<double> link_free(num_links, 0.0);
  std::vector<double> resource_free(logical.resource_gbps.size(), 0.0);
  std::vector<int> own_left(num_links, 0);  // enforce_ordering: own chunks not yet scheduled per link
  auto isOwn = [&](int t) {
    return problem.chunks[s.transfers[t].chunk].owner == logical.links[s.transfers[t].link].src;
  };
  auto representative = [&](int t) {
    const int c = s.transfers[t].chunk;
    return c < static_cast<int>(problem.orbit.size()) && problem.orbit[c].first >= 0 ? problem.orbit[c].first : c;
  };
  for (int t = 0; t < num_transfers; ++t) {
    if (logical.links[s.transfers[t].link].inter_node && isOwn(t)) ++own_left[s.transfers[t].link];
  }
  std::vector<double> ready_time(num_transfers, 0.0);
  std::vector<int> ready;  // transfers whose chunk is at (or on its way to) the sender
  std::vector<char> done(num_transfers, 0), in_ready(num_transfers, 0);
  for (int t : topo) {
    if (pred[t] < 0) ready.push_back(t), in_ready[t] = 1;
  }
  int scheduled = 0, stranded = 0;
  std::vector<double> est;
  auto earliestStart = [&](int t) {
    const LogicalLink& l = logical.links[s.transfers[t].link];
    double start = std::max(ready_time[t], link_free[l.id]);
    for (int e : l.resources) start = std::max(start, resource_free[e]);
    return start;
  };
  auto eligible = [&](int t) {
    const LogicalLink& l = logical.links[s.transfers[t].link];
    return !(logical.enforce_ordering && l.inter_node && own_left[l.id] > 0 && !isOwn(t));
  };
  // True when transfer a (possible start sa) goes before transfer b (possible start sb).
  auto before = [&](int a, double sa, int b, double sb) {
    if (longer(below[a], below[b])) return true;
    if (longer(below[b], below[a])) return false;
    if (!sameTime(sa, sb)) return sa < sb;
    const bool inter = logical.links[s.transfers[a].link].inter_node || logical.links[s.transfers[b].link].inter_node;
    if (inter && isOwn(a) != isOwn(b)) return isOwn(a);
    const int ra = representative(a), rb = representative(b);
    if (ra != rb) return ra < rb;
    if (s.transfers[a].chunk != s.transfers[b].chunk) return s.transfers[a].chunk < s.transfers[b].chunk;
    return s.transfers[a].link < s.transfers[b].link;
  };
  while (scheduled < num_transfers) {
    if (ready.empty()) {
      // Transfers whose chunk never reaches their sender (routing inconsistent): they go after the rest so
      // the schedule still lists every routed transfer; lowering/verify() reports the fault.
      double end = 0;
      for (const Transfer& tr : s.transfers) end = std::max(end, tr.end_us);
      for (int t = 0; t < num_transfers; ++t) {
        if (done[t]) continue;
        ready_time[t] = end;
        ready.push_back(t);
        in_ready[t] = 1;
        ++stranded;
      }
    }
    est.resize(ready.size());
    double earliest = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < ready.size(); ++i) {
      est[i] = eligible(ready[i]) ? earliestStart(ready[i]) : std::numeric_limits<double>::infinity();
      earliest = std::min(earliest, est[i]);
    }
    if (earliest == std::numeric_limits<double>::infinity()) {  // never: own chunks are ready from the start
      for (size_t i = 0; i < ready.size(); ++i) earliest = std::min(earliest, est[i] = earliestStart(ready[i]));
    }
    int pick = -1;
    const double horizon = earliest + 1e-9 * std::max(1.0, earliest);  // starts that tie with the earliest
    for (size_t i = 0; i < ready.size(); ++i) {
      if (!(est[i] <= horizon)) continue;
      if (pick < 0 || before(ready[i], est[i], ready[pick], est[pick])) pick = static_cast<int>(i);
    }
    const int t = ready[pick];
    const double start = est[pick];
    ready[pick] = ready.back();
    ready.pop_back();
    Transfer& tr = s.transfers[t];
    const LogicalLink& l = logical.links[tr.link];
    tr.start_us = start;
    tr.end_us = start + l.cost(bytes);
    link_free[l.id] = tr.end_us;
    for (int e : l.resources) resource_free[e] = start + bytes / (logical.resource_gbps[e] * 1e3);
    if (l.inter_node && isOwn(t)) --own_left[l.id];
    s.link_order[l.id].push_back(t);
    done[t] = 1;
    ++scheduled;
    for (int ch : children[t]) {
      if (done[ch] || in_ready[ch]) continue;
      ready_time[ch] = tr.end_us;
      ready.push_back(ch);
      in_ready[ch] = 1;
    }
  }

  for (int l = 0; l < num_links; ++l) {
    for (int t : s.link_order[l]) s.groups.push_back({t});
  }
  for (const Transfer& tr : s.transfers) s.makespan_us = std::max(s.makespan_us, tr.end_us);
  if (report) {
    report->name = "ordering";
    report->status = "greedy";
    if (inconsistent > 0 || stranded > 0) {
      report->status = fmt::format(
          "greedy (routing inconsistent: {} parent entries name a link that does not enter the rank, {} transfers "
          "send a chunk their sender never receives)",
          inconsistent, stranded);
    }
    report->variables = 0;
    report->constraints = 0;
    report->makespan_us = s.makespan_us;
    report->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  }
  return s;
}

}  // namespace braid::synth
