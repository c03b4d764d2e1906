// Emitter: synthesized schedules -> an MSCCL program (the IR of include/braid/algorithm.h).
//
// Method (TACCL, Shah et al., NSDI'23, as summarised in ../shared/reference/taccl_msccl.md §1.6-1.7; MSCCL XML
// semantics and limits §2.3):
//   - Every contiguity group of a schedule becomes one message on the real directed pair of ranks it uses. The
//     forward schedule (all-gather, broadcast, all-to-all and the all-gather half of all-reduce) keeps its
//     direction and times; the reverse schedule (reduce-scatter, reduce, the first half of all-reduce) is an
//     all-gather / broadcast schedule on the transposed logical topology run backwards: its link (a -> b)
//     carries partial sums b -> a over the real interval [T - end, T - start], T its makespan, and a rank
//     reduces what its tree children send (chained receive-reduce-copies into a scratch slot, never into the
//     input) before sending the partial sum to its parent; the owner reduces into its output.
//   - Each rank's steps are ordered by one key, (phase, real time, receive-before-send, message): sends at the
//     start of their message, receives at its end, the reduce phase of an all-reduce before its gather phase.
//     Every dependency (program order, cross-threadblock dependency, a receive waiting for its send, a send
//     waiting for FIFO room, i.e. for the receiver to reach an earlier message of the connection) then points
//     to a strictly smaller key, so the program cannot deadlock; a dependency that would not is a schedule
//     inconsistency and an error. With a bounded FIFO this holds while a message needs no more slots than the
//     FIFO has: messages cut into several steps get receive-only threadblocks (so even one slot suffices for
//     them), and a group of k chunks larger than a slice needs k of NCCL's 8 slots (TACCL groups <= 6).
//   - Threadblocks: one per (send peer, channel) and one per (recv peer, channel) of a rank. With
//     EmitRequest::pair_connections, a send connection and a receive connection that forward chunks from one
//     to the other share a threadblock (greedy by the number of forwarded chunks); off by default (model.h says
//     why). Where a receive is immediately followed in its threadblock by the send of
//     exactly the data it delivers, the two fuse into rcs / rrs / rrcs (MSCCLang's fusion, §2.2). Above the
//     Azure executor's 32 threadblocks of a rank per channel (§2.3 limits) unrelated connections share
//     threadblocks too (same peer first), and what still does not fit moves to the next channel.
//   - A message is one step of cnt chunks where its chunks are contiguous at both ends (members sorted by
//     (owner, dest, piece) so that offsets ascend), otherwise one step per contiguous run; every message
//     joined to it by a fused step splits the same way so that FIFO matching holds.
//   - A threadblock above max_steps_per_tb steps spreads the messages of its pairs over K channels (both ends
//     agree): by data chain (chunk id mod K, so a chunk forwarded over several pairs stays on one channel and
//     its steps still fuse, like MSCCL instances), or round-robin (message k on channel k mod K) where the
//     chains load the channels unevenly; K grows up to the pair's message count and MSCCL's 32 channels.
// ProgramBuilder (include/braid/program_builder.h) enforces MSCCL's structural rules, spills extra dependencies into
// nops and splits counts above 71.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "synthesizer/emitter.h"

namespace braid::synth::emit {

Result<Algorithm> Emitter::run() {
  BRAID_RETURN_IF_ERROR(checkRequest());
  if (has_reverse_)
    BRAID_RETURN_IF_ERROR(
        addPhase(kPhaseReduce, *req_.reverse_logical, *req_.reverse_problem, *req_.reverse, /*reversed=*/true));
  if (has_forward_)
    BRAID_RETURN_IF_ERROR(
        addPhase(kPhaseGather, *req_.forward_logical, *req_.forward_problem, *req_.forward, /*reversed=*/false));
  orderPairs();
  BRAID_RETURN_IF_ERROR(buildOps());

  // Channels per real pair: K = 1 until a threadblock is over the step limit. Message channels follow the
  // data (chain) so that a chunk forwarded along several pairs stays on one channel and its receive and
  // send can still fuse; a pair whose chains do not spread evenly over its K channels deals its messages
  // round-robin instead (seq mode).
  for (const auto& [pair, list] : pair_msgs_) spread_[pair] = Spread{};
  const int limit = req_.max_steps_per_tb;
  for (;;) {
    std::vector<std::vector<TbDesc>> tbs;
    std::set<std::pair<int, int>> split_into_paired;
    BRAID_ASSIGN_OR_RETURN(Algorithm algorithm, build(&tbs, &split_into_paired));
    // A message cut into several steps needs its receiver to take the first before the second fits in a
    // one-slot FIFO; a receiving threadblock that also sends could be blocked on its own send then. Such
    // receive connections get threadblocks of their own (they only wait for their sender).
    const size_t solo_before = solo_recv_.size();
    solo_recv_.insert(split_into_paired.begin(), split_into_paired.end());
    if (solo_recv_.size() != solo_before) continue;
    // The Azure executor runs at most 32 threadblocks of a rank per channel: connections of the threadblocks
    // beyond that move up one channel (both ends follow the pair's base).
    bool moved = false;
    std::string crowded;
    for (int r = 0; r < n_; ++r) {
      std::map<int, int> seen;
      for (const TbDesc& d : tbs[r]) {
        if (++seen[d.channel] <= kMaxTbsPerChannel) continue;
        for (const std::pair<int, int>& pair : {std::pair{r, d.send_peer}, std::pair{d.recv_peer, r}}) {
          auto it = spread_.find(pair);
          if (it == spread_.end()) continue;
          if (it->second.base + it->second.channels < kMaxChannels) {
            ++it->second.base;
            moved = true;
          } else if (crowded.empty()) {
            crowded = fmt::format(
                "rank {} has more than {} threadblocks on channel {} (the Azure executor's "
                "limit) and no channel is left to move them to",
                r, kMaxTbsPerChannel, d.channel);
          }
        }
      }
    }
    if (moved) continue;
    if (limit <= 0) return finishHeader(std::move(algorithm), {crowded});
    std::map<std::pair<int, int>, int> wanted;  // pair -> channels an over-limit threadblock asks for
    int longest = 0;
    for (int r = 0; r < n_; ++r) {
      for (size_t t = 0; t < algorithm.ranks[r].threadblocks.size(); ++t) {
        const int steps = static_cast<int>(algorithm.ranks[r].threadblocks[t].steps.size());
        longest = std::max(longest, steps);
        if (steps <= limit) continue;
        const TbDesc& d = tbs[r][t];
        for (const std::pair<int, int>& pair : {std::pair{r, d.send_peer}, std::pair{d.recv_peer, r}}) {
          auto it = spread_.find(pair);
          if (it == spread_.end()) continue;
          const int k = it->second.channels;
          wanted[pair] = std::max(wanted[pair], std::max(k + 1, (k * steps + limit - 1) / limit));
        }
      }
    }
    if (longest <= limit) return finishHeader(std::move(algorithm), {crowded});
    bool progress = false;
    for (const auto& [pair, want] : wanted) {
      Spread& sp = spread_[pair];
      const int cap = std::min(kMaxChannels - sp.base, static_cast<int>(pair_msgs_[pair].size()));
      if (!sp.round_robin && sp.channels >= 2 && chainsUneven(pair, sp.channels)) {
        sp.round_robin = true;
      } else if (sp.channels < cap) {
        sp.channels = std::min(cap, want);
      } else if (!sp.round_robin) {
        sp.round_robin = true;
      } else {
        continue;
      }
      progress = true;
    }
    if (!progress) {
      return finishHeader(
          std::move(algorithm),
          {crowded,
           fmt::format("the longest threadblock has {} steps, above the limit of {} (max_steps_per_tb); its "
                       "connections already use as many channels as they have messages or {} (MSCCL's maximum)",
                       longest, limit, kMaxChannels)});
    }
  }
}

Status Emitter::checkRequest() {
  const CollectiveKind k = req_.collective;
  switch (k) {
    case CollectiveKind::kAllGather:
    case CollectiveKind::kAllToAll:
    case CollectiveKind::kBroadcast: has_forward_ = true; break;
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kReduce: has_reverse_ = true; break;
    case CollectiveKind::kAllReduce: has_forward_ = has_reverse_ = true; break;
    case CollectiveKind::kCustom: return unsupported("lowering: custom collectives have no data movement to lower");
  }
  const CollectiveKind pattern = k == CollectiveKind::kAllToAll ? k
                                 : (k == CollectiveKind::kBroadcast || k == CollectiveKind::kReduce)
                                     ? CollectiveKind::kBroadcast
                                     : CollectiveKind::kAllGather;
  auto checkPart = [&](const char* part, const LogicalTopology* logical, const ChunkProblem* problem,
                       const Schedule* schedule) -> Status {
    if (!logical || !problem || !schedule) {
      return invalidArgument(
          fmt::format("lowering {}: the {} schedule, its logical topology and its chunk "
                      "problem are all required",
                      collectiveName(k), part));
    }
    if (problem->kind != pattern) {
      return invalidArgument(fmt::format("lowering {}: the {} chunk problem moves data as {}, expected {}",
                                         collectiveName(k), part, collectiveName(problem->kind),
                                         collectiveName(pattern)));
    }
    if (problem->num_ranks < 1 || logical->num_ranks != problem->num_ranks) {
      return invalidArgument(fmt::format("lowering {}: the {} chunk problem has {} ranks, its logical topology {}",
                                         collectiveName(k), part, problem->num_ranks, logical->num_ranks));
    }
    if (problem->chunkup < 1) {
      return invalidArgument(
          fmt::format("lowering {}: the {} chunk problem has chunkup {}", collectiveName(k), part, problem->chunkup));
    }
    if (pattern == CollectiveKind::kBroadcast && problem->root != req_.root) {
      return invalidArgument(fmt::format("lowering {}: the {} chunk problem is rooted at rank {}, the request at {}",
                                         collectiveName(k), part, problem->root, req_.root));
    }
    return Status::ok();
  };
  if (has_forward_) {
    BRAID_RETURN_IF_ERROR(checkPart("forward", req_.forward_logical, req_.forward_problem, req_.forward));
  }
  if (has_reverse_) {
    BRAID_RETURN_IF_ERROR(checkPart("reverse", req_.reverse_logical, req_.reverse_problem, req_.reverse));
  }
  const ChunkProblem& first = has_reverse_ ? *req_.reverse_problem : *req_.forward_problem;
  n_ = first.num_ranks;
  c_ = first.chunkup;
  if (has_forward_ && has_reverse_ && (req_.forward_problem->num_ranks != n_ || req_.forward_problem->chunkup != c_)) {
    return invalidArgument(fmt::format(
        "lowering allreduce: the reduce-scatter part has {} ranks and chunkup {}, the all-gather part {} and {}", n_,
        c_, req_.forward_problem->num_ranks, req_.forward_problem->chunkup));
  }
  if ((k == CollectiveKind::kBroadcast || k == CollectiveKind::kReduce) && (req_.root < 0 || req_.root >= n_)) {
    return invalidArgument(
        fmt::format("lowering {}: root {} is not a rank (0..{})", collectiveName(k), req_.root, n_ - 1));
  }
  return Status::ok();
}

void Emitter::indices(const Chunk& chunk, Unit* u) const {
  switch (req_.collective) {
    case CollectiveKind::kAllGather:
      u->in_idx = chunk.piece;
      u->out_idx = chunk.owner * c_ + chunk.piece;
      break;
    case CollectiveKind::kReduceScatter:
      u->in_idx = chunk.owner * c_ + chunk.piece;
      u->out_idx = chunk.piece;
      break;
    case CollectiveKind::kAllReduce: u->in_idx = u->out_idx = chunk.owner * c_ + chunk.piece; break;
    case CollectiveKind::kAllToAll:
      u->in_idx = chunk.dest * c_ + chunk.piece;
      u->out_idx = chunk.owner * c_ + chunk.piece;
      break;
    default: u->in_idx = u->out_idx = chunk.piece; break;  // broadcast, reduce
  }
}

namespace {

std::string chunkName(const ChunkProblem& problem, int k) {
  const Chunk& ch = problem.chunks[k];
  return ch.dest >= 0 ? fmt::format("chunk {} (owner {}, dest {}, piece {})", k, ch.owner, ch.dest, ch.piece)
                      : fmt::format("chunk {} (owner {}, piece {})", k, ch.owner, ch.piece);
}

}  // namespace

Status Emitter::phaseError(bool reversed, const std::string& what) const {
  return invalidArgument(fmt::format("lowering {}: {} schedule: {}", collectiveName(req_.collective),
                                     reversed ? "reverse" : "forward", what));
}

Status Emitter::addPhase(int phase, const LogicalTopology& logical, const ChunkProblem& problem,
                         const Schedule& schedule, bool reversed) {
  const int base = static_cast<int>(units_.size());
  for (const Chunk& chunk : problem.chunks) {
    if (chunk.id != static_cast<int>(&chunk - problem.chunks.data()) || chunk.owner < 0 || chunk.owner >= n_ ||
        chunk.piece < 0 || chunk.piece >= c_ ||
        (problem.kind == CollectiveKind::kAllToAll &&
         (chunk.dest < 0 || chunk.dest >= n_ || chunk.dest == chunk.owner))) {
      return phaseError(reversed, fmt::format("chunk {} (owner {}, dest {}, piece {}) is malformed", chunk.id,
                                              chunk.owner, chunk.dest, chunk.piece));
    }
    Unit u;
    u.phase = phase;
    u.chunk = chunk.id;
    u.owner = chunk.owner;
    u.dest = chunk.dest;
    u.piece = chunk.piece;
    indices(chunk, &u);
    units_.push_back(u);
  }
  BRAID_RETURN_IF_ERROR(checkTransfers(logical, problem, schedule, reversed));
  std::vector<int> group_of;
  BRAID_ASSIGN_OR_RETURN(std::vector<std::vector<int>> groups,
                         messageGroups(static_cast<int>(logical.links.size()), schedule, reversed, &group_of));
  const auto& transfers = schedule.transfers;
  double horizon = schedule.makespan_us;
  for (const Transfer& x : transfers) horizon = std::max(horizon, x.end_us);
  // Messages, per link in send order (reversed: the reverse of the link order).
  for (int l = 0; l < static_cast<int>(schedule.link_order.size()); ++l) {
    std::vector<int> order_groups;
    for (int t : schedule.link_order[l]) {
      if (order_groups.empty() || order_groups.back() != group_of[t]) order_groups.push_back(group_of[t]);
    }
    if (reversed) std::reverse(order_groups.begin(), order_groups.end());
    const LogicalLink& link = logical.links[l];
    for (int g : order_groups) {
      Message m;
      m.phase = phase;
      m.link = l;
      m.from = reversed ? link.dst : link.src;
      m.to = reversed ? link.src : link.dst;
      double lo = kInf, hi = -kInf;
      for (int t : groups[g]) {
        m.units.push_back(base + transfers[t].chunk);
        lo = std::min(lo, transfers[t].start_us);
        hi = std::max(hi, transfers[t].end_us);
      }
      m.start = reversed ? horizon - hi : lo;
      m.end = reversed ? horizon - lo : hi;
      std::sort(m.units.begin(), m.units.end(), [&](int a, int b) {
        return std::tie(units_[a].owner, units_[a].dest, units_[a].piece) <
               std::tie(units_[b].owner, units_[b].dest, units_[b].piece);
      });
      msgs_.push_back(std::move(m));
    }
  }
  return Status::ok();
}

Status Emitter::checkTransfers(const LogicalTopology& logical, const ChunkProblem& problem, const Schedule& schedule,
                               bool reversed) const {
  auto fail = [&](const std::string& what) { return phaseError(reversed, what); };
  const int num_chunks = static_cast<int>(problem.chunks.size());
  const int num_links = static_cast<int>(logical.links.size());
  const auto& transfers = schedule.transfers;
  const int num_transfers = static_cast<int>(transfers.size());
  for (int t = 0; t < num_transfers; ++t) {
    const Transfer& x = transfers[t];
    if (x.chunk < 0 || x.chunk >= num_chunks) return fail(fmt::format("transfer {} names chunk {}", t, x.chunk));
    if (x.link < 0 || x.link >= num_links) return fail(fmt::format("transfer {} names link {}", t, x.link));
    if (!(x.end_us >= x.start_us) || !std::isfinite(x.start_us) || !std::isfinite(x.end_us)) {
      return fail(
          fmt::format("transfer {} of {} runs from {} to {} us", t, chunkName(problem, x.chunk), x.start_us, x.end_us));
    }
  }
  // All-gather view: every chunk leaves its owner along a tree (a path for all-to-all).
  std::vector<std::vector<int>> received(num_chunks, std::vector<int>(n_, 0));
  for (int t = 0; t < num_transfers; ++t) {
    const Transfer& x = transfers[t];
    const LogicalLink& l = logical.links[x.link];
    const int owner = problem.chunks[x.chunk].owner;
    if (l.dst == owner) {
      return fail(fmt::format("transfer {} sends {} back to its owner", t, chunkName(problem, x.chunk)));
    }
    if (++received[x.chunk][l.dst] > 1) {
      return fail(fmt::format("rank {} receives {} more than once", l.dst, chunkName(problem, x.chunk)));
    }
  }
  for (int t = 0; t < num_transfers; ++t) {
    const Transfer& x = transfers[t];
    const LogicalLink& l = logical.links[x.link];
    if (l.src != problem.chunks[x.chunk].owner && received[x.chunk][l.src] == 0) {
      return fail(fmt::format("rank {} sends {} on link {} ({} -> {}) but never receives it", l.src,
                              chunkName(problem, x.chunk), x.link, l.src, l.dst));
    }
  }
  for (const Chunk& chunk : problem.chunks) {
    for (int target : chunk.targets) {
      if (target < 0 || target >= n_ || received[chunk.id][target] != 1) {
        return fail(fmt::format("rank {} never receives {}", target, chunkName(problem, chunk.id)));
      }
    }
    if (reversed) {  // reductions need every rank's contribution
      for (int r = 0; r < n_; ++r) {
        if (r != chunk.owner && received[chunk.id][r] != 1) {
          return fail(fmt::format("rank {} is not in the tree of {}: its input would not be reduced", r,
                                  chunkName(problem, chunk.id)));
        }
      }
    }
  }
  return Status::ok();
}

Result<std::vector<std::vector<int>>> Emitter::messageGroups(int num_links, const Schedule& schedule, bool reversed,
                                                             std::vector<int>* group_of) const {
  auto fail = [&](const std::string& what) { return phaseError(reversed, what); };
  const auto& transfers = schedule.transfers;
  const int num_transfers = static_cast<int>(transfers.size());
  std::vector<int> position(num_transfers, -1);
  if (static_cast<int>(schedule.link_order.size()) > num_links) return fail("link_order lists more links than exist");
  for (int l = 0; l < static_cast<int>(schedule.link_order.size()); ++l) {
    const auto& order = schedule.link_order[l];
    for (int i = 0; i < static_cast<int>(order.size()); ++i) {
      const int t = order[i];
      if (t < 0 || t >= num_transfers || transfers[t].link != l || position[t] >= 0) {
        return fail(fmt::format("link_order of link {} lists transfer {} that is not on it or listed twice", l, t));
      }
      position[t] = i;
    }
  }
  for (int t = 0; t < num_transfers; ++t) {
    if (position[t] < 0) return fail(fmt::format("transfer {} is in no link_order", t));
  }
  group_of->assign(num_transfers, -1);
  std::vector<std::vector<int>> groups = schedule.groups;
  for (int g = 0; g < static_cast<int>(groups.size()); ++g) {
    if (groups[g].empty()) return fail(fmt::format("group {} is empty", g));
    std::vector<int> pos;
    for (int t : groups[g]) {
      if (t < 0 || t >= num_transfers || (*group_of)[t] >= 0) {
        return fail(fmt::format("group {} lists transfer {} that does not exist or is in another group", g, t));
      }
      if (transfers[t].link != transfers[groups[g][0]].link) {
        return fail(fmt::format("group {} mixes links {} and {}", g, transfers[groups[g][0]].link, transfers[t].link));
      }
      (*group_of)[t] = g;
      pos.push_back(position[t]);
    }
    std::sort(pos.begin(), pos.end());
    if (pos.back() - pos.front() + 1 != static_cast<int>(pos.size())) {
      return fail(
          fmt::format("group {} is not a run of consecutive transfers of link {}", g, transfers[groups[g][0]].link));
    }
  }
  for (int t = 0; t < num_transfers; ++t) {
    if ((*group_of)[t] < 0) {
      (*group_of)[t] = static_cast<int>(groups.size());
      groups.push_back({t});
    }
  }
  return groups;
}

void Emitter::orderPairs() {
  for (int m = 0; m < static_cast<int>(msgs_.size()); ++m) pair_msgs_[{msgs_[m].from, msgs_[m].to}].push_back(m);
  for (auto& [pair, list] : pair_msgs_) {
    double prev_start = -kInf, prev_end = -kInf;
    int prev_phase = -1;
    for (int i = 0; i < static_cast<int>(list.size()); ++i) {
      Message& m = msgs_[list[i]];
      m.seq = i;
      if (m.phase != prev_phase) prev_start = prev_end = -kInf;
      prev_phase = m.phase;
      m.start = std::max(m.start, prev_start);
      m.end = std::max({m.end, prev_end, std::nextafter(m.start, kInf)});
      prev_start = m.start;
      prev_end = m.end;
    }
  }
}

}  // namespace braid::synth::emit

namespace braid::synth {

Result<Algorithm> emitProgram(const EmitRequest& request) { return emit::Emitter(request).run(); }

}  // namespace braid::synth
