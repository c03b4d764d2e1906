// Lowering: synthesized schedules -> an MSCCL program (the IR of include/braid/algorithm.h).
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
//     LowerRequest::pair_connections, a send connection and a receive connection that forward chunks from one
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
// ProgramBuilder (src/algos/builder.h) enforces MSCCL's structural rules, spills extra dependencies into nops
// and splits counts above 71.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "algos/builder.h"
#include "synthesizer/model.h"

namespace braid::synth {
namespace {

using algos::Loc;
using algos::ProgramBuilder;
using algos::StepRef;

constexpr int kMaxChannels = 32;       // NCCL MAXCHANNELS: the most channels an MSCCL algorithm may use
constexpr int kMaxTbsPerChannel = 32;  // Azure msccl-executor-nccl: threadblocks of a rank per channel
constexpr int kPhaseReduce = 0;        // reverse schedule (partial sums toward the owner)
constexpr int kPhaseGather = 1;        // forward schedule
constexpr double kInf = std::numeric_limits<double>::infinity();

// A chunk location on one rank before scratch is laid out: input/output offsets are final, a scratch
// location is a symbolic id (per rank) that gets an offset once the program is fixed.
struct SLoc {
  BufferKind buf = BufferKind::kInput;
  int idx = -1;
  friend bool operator==(const SLoc& a, const SLoc& b) { return a.buf == b.buf && a.idx == b.idx; }
};

SLoc inputLoc(int idx) { return SLoc{BufferKind::kInput, idx}; }
SLoc outputLoc(int idx) { return SLoc{BufferKind::kOutput, idx}; }
SLoc scratchLoc(int sym) { return SLoc{BufferKind::kScratch, sym}; }

// Total order of the steps of a rank (see the file comment).
struct Key {
  int phase = 0;
  double time = 0;
  int sub = 0;  // -1 copy before everything, 0 receive, 1 send, 2 copy after everything
  int id = 0;   // message id (or a unique id for copies)
  friend bool operator<(const Key& a, const Key& b) {
    return std::tie(a.phase, a.time, a.sub, a.id) < std::tie(b.phase, b.time, b.sub, b.id);
  }
};

// A unit of data of one phase: a chunk of that phase's problem, with its buffer indices.
struct Unit {
  int phase = 0;
  int chunk = -1;
  int owner = -1;
  int dest = -1;
  int piece = 0;
  int in_idx = 0;   // input chunk it is read from (at the owner; at every rank for reductions)
  int out_idx = 0;  // output chunk it ends in (at receivers; at the owner for reductions)
};

// One group of a schedule: chunks sent together over a real directed pair.
struct Message {
  int phase = 0;
  int from = -1;  // real sender
  int to = -1;    // real receiver
  int link = -1;  // logical link of the phase's topology
  std::vector<int> units;
  double start = 0;  // real times, made monotone along the pair
  double end = 0;
  int seq = 0;  // position among the messages of the pair (both phases, reduce first)
  int channel = 0;
};

struct Op {
  int rank = -1;
  OpType type = OpType::kNop;
  Key key;
  int recv_msg = -1;
  int send_msg = -1;
  std::vector<int> units;              // members (message ops); empty for copies
  std::vector<SLoc> src, dst;          // per member; empty when the op does not use it
  std::vector<std::vector<int>> deps;  // per member: ops that must finish first
};

// How the messages of one real pair spread over channels.
struct Spread {
  int channels = 1;
  bool round_robin = false;  // message k on channel base + k mod channels; otherwise by data chain
  int base = 0;              // first channel (moved up when a rank has too many threadblocks on a channel)
};

struct TbDesc {
  int send_peer = -1;
  int recv_peer = -1;
  int channel = 0;
};

class Lowering {
 public:
  explicit Lowering(const LowerRequest& request) : req_(request) {}

  Result<Algorithm> run() {
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

 private:
  // ---- request and schedules --------------------------------------------------------------------

  Status checkRequest() {
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
    if (has_forward_ && has_reverse_ &&
        (req_.forward_problem->num_ranks != n_ || req_.forward_problem->chunkup != c_)) {
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

  // Buffer indices of a chunk (collective.h layouts): see Unit.
  void indices(const Chunk& chunk, Unit* u) const {
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

  // Validates one schedule (in its all-gather view: link src -> dst) and turns its groups into messages.
  Status addPhase(int phase, const LogicalTopology& logical, const ChunkProblem& problem, const Schedule& schedule,
                  bool reversed) {
    const char* part = reversed ? "reverse" : "forward";
    auto fail = [&](const std::string& what) {
      return invalidArgument(fmt::format("lowering {}: {} schedule: {}", collectiveName(req_.collective), part, what));
    };
    const int num_chunks = static_cast<int>(problem.chunks.size());
    const int num_links = static_cast<int>(logical.links.size());
    const int base = static_cast<int>(units_.size());
    for (const Chunk& chunk : problem.chunks) {
      if (chunk.id != static_cast<int>(&chunk - problem.chunks.data()) || chunk.owner < 0 || chunk.owner >= n_ ||
          chunk.piece < 0 || chunk.piece >= c_ ||
          (problem.kind == CollectiveKind::kAllToAll &&
           (chunk.dest < 0 || chunk.dest >= n_ || chunk.dest == chunk.owner))) {
        return fail(fmt::format("chunk {} (owner {}, dest {}, piece {}) is malformed", chunk.id, chunk.owner,
                                chunk.dest, chunk.piece));
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
    auto chunkName = [&](int k) {
      const Chunk& ch = problem.chunks[k];
      return ch.dest >= 0 ? fmt::format("chunk {} (owner {}, dest {}, piece {})", k, ch.owner, ch.dest, ch.piece)
                          : fmt::format("chunk {} (owner {}, piece {})", k, ch.owner, ch.piece);
    };
    const auto& transfers = schedule.transfers;
    const int num_transfers = static_cast<int>(transfers.size());
    for (int t = 0; t < num_transfers; ++t) {
      const Transfer& x = transfers[t];
      if (x.chunk < 0 || x.chunk >= num_chunks) return fail(fmt::format("transfer {} names chunk {}", t, x.chunk));
      if (x.link < 0 || x.link >= num_links) return fail(fmt::format("transfer {} names link {}", t, x.link));
      if (!(x.end_us >= x.start_us) || !std::isfinite(x.start_us) || !std::isfinite(x.end_us)) {
        return fail(
            fmt::format("transfer {} of {} runs from {} to {} us", t, chunkName(x.chunk), x.start_us, x.end_us));
      }
    }
    // All-gather view: every chunk leaves its owner along a tree (a path for all-to-all).
    std::vector<std::vector<int>> received(num_chunks, std::vector<int>(n_, 0));
    for (int t = 0; t < num_transfers; ++t) {
      const Transfer& x = transfers[t];
      const LogicalLink& l = logical.links[x.link];
      const int owner = problem.chunks[x.chunk].owner;
      if (l.dst == owner) return fail(fmt::format("transfer {} sends {} back to its owner", t, chunkName(x.chunk)));
      if (++received[x.chunk][l.dst] > 1) {
        return fail(fmt::format("rank {} receives {} more than once", l.dst, chunkName(x.chunk)));
      }
    }
    for (int t = 0; t < num_transfers; ++t) {
      const Transfer& x = transfers[t];
      const LogicalLink& l = logical.links[x.link];
      if (l.src != problem.chunks[x.chunk].owner && received[x.chunk][l.src] == 0) {
        return fail(fmt::format("rank {} sends {} on link {} ({} -> {}) but never receives it", l.src,
                                chunkName(x.chunk), x.link, l.src, l.dst));
      }
    }
    for (const Chunk& chunk : problem.chunks) {
      for (int target : chunk.targets) {
        if (target < 0 || target >= n_ || received[chunk.id][target] != 1) {
          return fail(fmt::format("rank {} never receives {}", target, chunkName(chunk.id)));
        }
      }
      if (reversed) {  // reductions need every rank's contribution
        for (int r = 0; r < n_; ++r) {
          if (r != chunk.owner && received[chunk.id][r] != 1) {
            return fail(fmt::format("rank {} is not in the tree of {}: its input would not be reduced", r,
                                    chunkName(chunk.id)));
          }
        }
      }
    }
    // Link orders and groups.
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
    std::vector<int> group_of(num_transfers, -1);
    std::vector<std::vector<int>> groups = schedule.groups;
    for (int g = 0; g < static_cast<int>(groups.size()); ++g) {
      if (groups[g].empty()) return fail(fmt::format("group {} is empty", g));
      std::vector<int> pos;
      for (int t : groups[g]) {
        if (t < 0 || t >= num_transfers || group_of[t] >= 0) {
          return fail(fmt::format("group {} lists transfer {} that does not exist or is in another group", g, t));
        }
        if (transfers[t].link != transfers[groups[g][0]].link) {
          return fail(
              fmt::format("group {} mixes links {} and {}", g, transfers[groups[g][0]].link, transfers[t].link));
        }
        group_of[t] = g;
        pos.push_back(position[t]);
      }
      std::sort(pos.begin(), pos.end());
      if (pos.back() - pos.front() + 1 != static_cast<int>(pos.size())) {
        return fail(
            fmt::format("group {} is not a run of consecutive transfers of link {}", g, transfers[groups[g][0]].link));
      }
    }
    for (int t = 0; t < num_transfers; ++t) {
      if (group_of[t] < 0) {
        group_of[t] = static_cast<int>(groups.size());
        groups.push_back({t});
      }
    }
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

  // Sequence numbers per real pair; times made monotone along each pair (and end > start) so that the keys of
  // one connection follow its FIFO order.
  void orderPairs() {
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

  // ---- operations (independent of channels and threadblocks) -----------------------------------

  int addOp(Op op) {
    ops_.push_back(std::move(op));
    return static_cast<int>(ops_.size()) - 1;
  }

  int newScratch(int rank) { return scratch_syms_[rank]++; }

  Status buildOps() {
    scratch_syms_.assign(n_, 0);
    int unique = static_cast<int>(msgs_.size());
    const int num_units = static_cast<int>(units_.size());
    data_.resize(num_units);
    std::iota(data_.begin(), data_.end(), 0);
    // ready[u][r]: the op after which unit u's data is in place on rank r for the gather phase (-1: nothing to
    // wait for); loc_[u][r]: where it is.
    std::vector<std::vector<int>> ready(num_units, std::vector<int>(n_, -1));
    // Reduce phase: the partial sums.
    std::map<int, int> reduce_unit_of;  // owner * c + piece -> reduce-phase unit (all-reduce hand-over)
    if (has_reverse_) {
      std::vector<std::vector<std::vector<std::pair<int, int>>>> incoming(
          num_units, std::vector<std::vector<std::pair<int, int>>>(n_));  // (op, member)
      std::vector<int> recv_op(msgs_.size(), -1);
      for (int m = 0; m < static_cast<int>(msgs_.size()); ++m) {
        const Message& msg = msgs_[m];
        if (msg.phase != kPhaseReduce) continue;
        Op op;
        op.rank = msg.to;
        op.type = OpType::kRecvReduceCopy;
        op.key = Key{kPhaseReduce, msg.end, 0, m};
        op.recv_msg = m;
        op.units = msg.units;
        const size_t k = msg.units.size();
        op.src.resize(k);
        op.dst.resize(k);
        op.deps.resize(k);
        recv_op[m] = addOp(std::move(op));
        for (size_t i = 0; i < k; ++i) incoming[msg.units[i]][msg.to].push_back({recv_op[m], static_cast<int>(i)});
      }
      std::vector<std::vector<int>> final_op(num_units, std::vector<int>(n_, -1));
      std::vector<std::vector<SLoc>> acc(num_units, std::vector<SLoc>(n_));
      for (int u = 0; u < num_units; ++u) {
        const Unit& unit = units_[u];
        if (unit.phase != kPhaseReduce) continue;
        reduce_unit_of[unit.owner * c_ + unit.piece] = u;
        for (int v = 0; v < n_; ++v) {
          auto& list = incoming[u][v];
          std::sort(list.begin(), list.end(),
                    [&](const auto& a, const auto& b) { return ops_[a.first].key < ops_[b.first].key; });
          const SLoc in = inputLoc(unit.in_idx);
          const SLoc total = v == unit.owner ? outputLoc(unit.out_idx) : SLoc{};
          if (list.empty()) {
            acc[u][v] = in;
            if (v == unit.owner) {  // nothing to reduce with (one rank): the output is the input
              Op copy;
              copy.rank = v;
              copy.type = OpType::kCopy;
              copy.key = Key{kPhaseReduce, -kInf, -1, unique++};
              copy.src = {in};
              copy.dst = {total};
              copy.deps = {{}};
              final_op[u][v] = addOp(std::move(copy));
              acc[u][v] = total;
            }
            continue;
          }
          const SLoc sum = v == unit.owner ? total : scratchLoc(newScratch(v));
          int prev = -1;
          for (const auto& [op, i] : list) {
            ops_[op].src[i] = prev < 0 ? in : sum;
            ops_[op].dst[i] = sum;
            if (prev >= 0) ops_[op].deps[i] = {prev};
            prev = op;
          }
          final_op[u][v] = prev;
          acc[u][v] = sum;
        }
      }
      for (int m = 0; m < static_cast<int>(msgs_.size()); ++m) {
        const Message& msg = msgs_[m];
        if (msg.phase != kPhaseReduce) continue;
        Op op;
        op.rank = msg.from;
        op.type = OpType::kSend;
        op.key = Key{kPhaseReduce, msg.start, 1, m};
        op.send_msg = m;
        op.units = msg.units;
        for (int u : msg.units) {
          op.src.push_back(acc[u][msg.from]);
          op.deps.push_back(final_op[u][msg.from] >= 0 ? std::vector<int>{final_op[u][msg.from]} : std::vector<int>{});
        }
        addOp(std::move(op));
      }
      // All-reduce: the gather phase starts from the owner's finished reduction.
      if (has_forward_) {
        for (int u = 0; u < num_units; ++u) {
          if (units_[u].phase != kPhaseGather) continue;
          auto it = reduce_unit_of.find(units_[u].owner * c_ + units_[u].piece);
          if (it == reduce_unit_of.end()) {
            return internalError(
                fmt::format("lowering allreduce: the all-gather chunk of owner {} piece {} has no "
                            "reduce-scatter counterpart",
                            units_[u].owner, units_[u].piece));
          }
          ready[u][units_[u].owner] = final_op[it->second][units_[u].owner];
          data_[u] = it->second;
        }
      }
    }
    if (!has_forward_) return Status::ok();
    // Gather phase.
    const CollectiveKind kind = req_.collective;
    const bool a2a = kind == CollectiveKind::kAllToAll;
    std::vector<std::map<int, int>> relay_slot(n_);  // all-to-all relays: unit -> symbolic scratch
    auto locAt = [&](int u, int r) {
      const Unit& unit = units_[u];
      if (!a2a) return outputLoc(unit.out_idx);
      if (r == unit.owner) return inputLoc(unit.in_idx);
      if (r == unit.dest) return outputLoc(unit.out_idx);
      auto it = relay_slot[r].find(u);
      if (it == relay_slot[r].end()) it = relay_slot[r].emplace(u, newScratch(r)).first;
      return scratchLoc(it->second);
    };
    if (kind == CollectiveKind::kAllGather || kind == CollectiveKind::kBroadcast) {
      // The owner's own data moves into its output first; its sends read it there (one program for both modes:
      // in place the copy is the identity and its sends are ordered after it).
      std::vector<std::vector<int>> owned(n_);
      for (int u = 0; u < num_units; ++u) {
        if (units_[u].phase == kPhaseGather) owned[units_[u].owner].push_back(u);
      }
      for (int r = 0; r < n_; ++r) {
        if (owned[r].empty()) continue;
        std::sort(owned[r].begin(), owned[r].end(), [&](int a, int b) { return units_[a].piece < units_[b].piece; });
        Op copy;
        copy.rank = r;
        copy.type = OpType::kCopy;
        copy.key = Key{kPhaseGather, -kInf, -1, unique++};
        for (int u : owned[r]) {
          copy.src.push_back(inputLoc(units_[u].in_idx));
          copy.dst.push_back(outputLoc(units_[u].out_idx));
          copy.deps.emplace_back();
        }
        const int id = addOp(std::move(copy));
        for (int u : owned[r]) ready[u][r] = id;
      }
    }
    if (a2a) {  // the self block: input s*c.. -> output s*c..
      for (int r = 0; r < n_; ++r) {
        Op copy;
        copy.rank = r;
        copy.type = OpType::kCopy;
        copy.key = Key{kPhaseGather, kInf, 2, unique++};
        for (int j = 0; j < c_; ++j) {
          copy.src.push_back(inputLoc(r * c_ + j));
          copy.dst.push_back(outputLoc(r * c_ + j));
          copy.deps.emplace_back();
        }
        addOp(std::move(copy));
      }
    }
    // Receives in key order per rank so that relay scratch follows arrival order.
    std::vector<int> gather_msgs;
    for (int m = 0; m < static_cast<int>(msgs_.size()); ++m) {
      if (msgs_[m].phase == kPhaseGather) gather_msgs.push_back(m);
    }
    std::sort(gather_msgs.begin(), gather_msgs.end(),
              [&](int a, int b) { return std::tie(msgs_[a].end, a) < std::tie(msgs_[b].end, b); });
    for (int m : gather_msgs) {
      const Message& msg = msgs_[m];
      Op op;
      op.rank = msg.to;
      op.type = OpType::kRecv;
      op.key = Key{kPhaseGather, msg.end, 0, m};
      op.recv_msg = m;
      op.units = msg.units;
      for (int u : msg.units) {
        op.dst.push_back(locAt(u, msg.to));
        op.deps.emplace_back();
      }
      const int id = addOp(std::move(op));
      for (int u : msg.units) ready[u][msg.to] = id;
    }
    for (int m : gather_msgs) {
      const Message& msg = msgs_[m];
      Op op;
      op.rank = msg.from;
      op.type = OpType::kSend;
      op.key = Key{kPhaseGather, msg.start, 1, m};
      op.send_msg = m;
      op.units = msg.units;
      for (int u : msg.units) {
        op.src.push_back(locAt(u, msg.from));
        op.deps.push_back(ready[u][msg.from] >= 0 ? std::vector<int>{ready[u][msg.from]} : std::vector<int>{});
      }
      addOp(std::move(op));
    }
    return Status::ok();
  }

  // ---- one program for a channel assignment ------------------------------------------------------

  // The data chain of a message: the chunk of its first member (all-reduce: the reduce-scatter chunk).
  int chainOf(const Message& m) const { return units_[data_[m.units[0]]].chunk; }

  // True when the chains of the pair's messages load its `k` channels unevenly (chain mod k).
  bool chainsUneven(const std::pair<int, int>& pair, int k) const {
    const std::vector<int>& list = pair_msgs_.at(pair);
    std::vector<int> load(k, 0);
    for (int m : list) ++load[chainOf(msgs_[m]) % k];
    const int fair = (static_cast<int>(list.size()) + k - 1) / k;
    return *std::max_element(load.begin(), load.end()) > fair;
  }

  // One program for the current channel spread and solo receive connections. `split_into_paired` gets the
  // pairs (from, to) of messages that took several steps into a threadblock that also sends.
  Result<Algorithm> build(std::vector<std::vector<TbDesc>>* tbs_out, std::set<std::pair<int, int>>* split_into_paired) {
    for (Message& m : msgs_) {
      const Spread& sp = spread_.at({m.from, m.to});
      m.channel = sp.base + (sp.round_robin ? m.seq : chainOf(m)) % sp.channels;
    }
    if (req_.level_channels) {
      // Tree levels on separate channels: the depth of each (phase, chunk, rank) in its chunk's tree.
      std::map<std::tuple<int, int, int>, int> parent;
      auto addTree = [&](int phase, const LogicalTopology* lt, const Schedule* s) {
        if (!lt || !s) return;
        for (const Transfer& t : s->transfers) parent[{phase, t.chunk, lt->links[t.link].dst}] = lt->links[t.link].src;
      };
      addTree(kPhaseGather, req_.forward_logical, req_.forward);
      addTree(kPhaseReduce, req_.reverse_logical, req_.reverse);
      auto depth = [&](int phase, int chunk, int rank) {
        int d = 0;
        for (auto it = parent.find({phase, chunk, rank}); it != parent.end() && d < 64;
             it = parent.find({phase, chunk, it->second}))
          ++d;
        return d;
      };
      int max_ch = 0;
      for (const Message& m : msgs_) max_ch = std::max(max_ch, m.channel + 1);
      for (Message& m : msgs_) {
        const LogicalTopology* lt = m.phase == kPhaseGather ? req_.forward_logical : req_.reverse_logical;
        const int chunk = units_[data_[m.units[0]]].chunk;
        const int level = depth(m.phase, chunk, lt->links[m.link].src);
        m.channel = std::min(kMaxChannels - 1, m.channel + max_ch * level);
      }
    }
    std::vector<Op> ops = ops_;
    const int num_ops = static_cast<int>(ops.size());
    std::vector<int> alias(num_ops, -1);
    auto resolve = [&](int op) {
      while (alias[op] >= 0) op = alias[op];
      return op;
    };
    std::vector<std::vector<int>> rank_ops(n_);
    for (int o = 0; o < num_ops; ++o) rank_ops[ops[o].rank].push_back(o);
    for (auto& list : rank_ops) {
      std::sort(list.begin(), list.end(), [&](int a, int b) { return ops[a].key < ops[b].key; });
    }

    // Threadblocks: pair a receive connection with the send connection it forwards most chunks to.
    std::vector<std::vector<TbDesc>> tbs(n_);
    std::vector<int> op_tb(num_ops, -1);
    for (int r = 0; r < n_; ++r) {
      std::set<std::pair<int, int>> sends, recvs;       // (channel, peer)
      std::map<std::tuple<int, int, int>, int> weight;  // (channel, recv peer, send peer) -> forwarded chunks
      for (int o : rank_ops[r]) {
        const Op& op = ops[o];
        if (op.send_msg >= 0) {
          const Message& sm = msgs_[op.send_msg];
          sends.insert({sm.channel, sm.to});
          for (const auto& member : op.deps) {
            for (int d : member) {
              if (ops[d].recv_msg < 0) continue;
              const Message& rm = msgs_[ops[d].recv_msg];
              if (rm.channel == sm.channel) ++weight[{sm.channel, rm.from, sm.to}];
            }
          }
        }
        if (op.recv_msg >= 0) recvs.insert({msgs_[op.recv_msg].channel, msgs_[op.recv_msg].from});
      }
      std::vector<std::pair<int, std::tuple<int, int, int>>> candidates;
      if (req_.pair_connections) {
        for (const auto& [key, w] : weight) candidates.push_back({-w, key});
      }
      std::sort(candidates.begin(), candidates.end());
      std::set<std::pair<int, int>> paired_sends, paired_recvs;
      std::vector<TbDesc>& list = tbs[r];
      for (const auto& [neg, key] : candidates) {
        const auto [ch, q, p] = key;
        if (paired_sends.count({ch, p}) || paired_recvs.count({ch, q}) || solo_recv_.count({q, r})) continue;
        paired_sends.insert({ch, p});
        paired_recvs.insert({ch, q});
        list.push_back(TbDesc{p, q, ch});
      }
      // Above the executor's threadblocks per channel, unrelated send and receive connections share
      // threadblocks too (the same peer first, as MSCCL's all-pairs algorithms do).
      std::map<int, int> per_channel;
      std::map<int, std::vector<int>> lone_sends, lone_recvs;  // channel -> peers
      for (const auto& [ch, p] : sends) {
        ++per_channel[ch];
        if (!paired_sends.count({ch, p})) lone_sends[ch].push_back(p);
      }
      for (const auto& [ch, q] : recvs) {
        if (paired_recvs.count({ch, q})) continue;
        ++per_channel[ch];
        if (!solo_recv_.count({q, r})) lone_recvs[ch].push_back(q);
      }
      for (auto& [ch, count] : per_channel) {
        for (int same = 1; same >= 0; --same) {
          for (int p : lone_sends[ch]) {
            if (count <= kMaxTbsPerChannel) break;
            if (paired_sends.count({ch, p})) continue;
            for (int q : lone_recvs[ch]) {
              if (paired_recvs.count({ch, q}) || (same == 1 && q != p)) continue;
              paired_sends.insert({ch, p});
              paired_recvs.insert({ch, q});
              list.push_back(TbDesc{p, q, ch});
              --count;
              break;
            }
          }
        }
      }
      for (const auto& [ch, p] : sends) {
        if (!paired_sends.count({ch, p})) list.push_back(TbDesc{p, -1, ch});
      }
      for (const auto& [ch, q] : recvs) {
        if (!paired_recvs.count({ch, q})) list.push_back(TbDesc{-1, q, ch});
      }
      std::sort(list.begin(), list.end(), [](const TbDesc& a, const TbDesc& b) {
        auto peer = [](int p) { return p < 0 ? std::numeric_limits<int>::max() : p; };
        return std::tuple(a.channel, peer(a.send_peer), peer(a.recv_peer)) <
               std::tuple(b.channel, peer(b.send_peer), peer(b.recv_peer));
      });
      std::map<std::pair<int, int>, int> send_tb, recv_tb;
      for (int t = 0; t < static_cast<int>(list.size()); ++t) {
        if (list[t].send_peer >= 0) send_tb[{list[t].channel, list[t].send_peer}] = t;
        if (list[t].recv_peer >= 0) recv_tb[{list[t].channel, list[t].recv_peer}] = t;
      }
      std::vector<int> load(list.size(), 0);
      for (int o : rank_ops[r]) {
        const Op& op = ops[o];
        if (op.send_msg >= 0) op_tb[o] = send_tb.at({msgs_[op.send_msg].channel, msgs_[op.send_msg].to});
        if (op.recv_msg >= 0) op_tb[o] = recv_tb.at({msgs_[op.recv_msg].channel, msgs_[op.recv_msg].from});
        if (op_tb[o] >= 0) ++load[op_tb[o]];
      }
      // Copies: in the threadblock of their first dependant, else the least loaded one (a local one if none).
      for (int o : rank_ops[r]) {
        if (ops[o].type != OpType::kCopy) continue;
        int best = -1;
        for (int d : rank_ops[r]) {
          if (op_tb[d] < 0) continue;
          bool depends = false;
          for (const auto& member : ops[d].deps) depends = depends || std::count(member.begin(), member.end(), o) > 0;
          if (depends && (best < 0 || ops[d].key < ops[best].key)) best = d;
        }
        if (best >= 0) {
          op_tb[o] = op_tb[best];
        } else if (!list.empty()) {
          op_tb[o] = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
        } else {
          list.push_back(TbDesc{-1, -1, 0});
          load.push_back(0);
          op_tb[o] = 0;
        }
        ++load[op_tb[o]];
      }
    }

    // Fusion: a receive immediately followed in its threadblock by the send of exactly what it delivered. The
    // fused step finishes only when its send does (which, with a bounded FIFO, waits for the receiver), so every
    // other step waiting on the receive must come after the send in key order, or the order would no longer
    // be well-founded (a relay forwarding a chunk to a second peer earlier than to this one keeps them apart).
    std::vector<std::vector<int>> dependants(num_ops);
    for (int o = 0; o < num_ops; ++o) {
      for (const auto& member : ops[o].deps) {
        for (int d : member) {
          if (dependants[d].empty() || dependants[d].back() != o) dependants[d].push_back(o);
        }
      }
    }
    for (int r = 0; r < n_; ++r) {
      std::vector<int> last_in_tb(tbs[r].size(), -1);
      for (int o : rank_ops[r]) {
        const int t = op_tb[o];
        const int a = last_in_tb[t];
        last_in_tb[t] = o;
        if (a < 0 || alias[a] >= 0) continue;
        Op& A = ops[a];
        Op& B = ops[o];
        if (B.type != OpType::kSend || (A.type != OpType::kRecv && A.type != OpType::kRecvReduceCopy)) continue;
        if (A.units.size() != B.units.size() || A.dst != B.src) continue;
        bool same_data = true;  // (all-reduce: a gather unit is the same data as its reduce unit)
        for (size_t i = 0; i < A.units.size(); ++i) same_data = same_data && data_[A.units[i]] == data_[B.units[i]];
        if (!same_data) continue;
        bool only_a = true;
        for (const auto& member : B.deps) {
          for (int d : member) only_a = only_a && resolve(d) == a;
        }
        if (!only_a) continue;
        bool later = true;
        for (int d : dependants[a]) later = later && (d == o || B.key < ops[d].key);
        if (!later) continue;
        OpType fused;
        if (A.type == OpType::kRecv) {
          fused = OpType::kRecvCopySend;
        } else {
          const bool all_scratch =
              std::all_of(A.dst.begin(), A.dst.end(), [](const SLoc& l) { return l.buf == BufferKind::kScratch; });
          const bool none_scratch =
              std::none_of(A.dst.begin(), A.dst.end(), [](const SLoc& l) { return l.buf == BufferKind::kScratch; });
          if (!all_scratch && !none_scratch) continue;
          // A partial sum that only its send reads needs no storage; a finished reduction (output) does.
          fused = all_scratch ? OpType::kRecvReduceSend : OpType::kRecvReduceCopySend;
          if (all_scratch) A.dst.clear();
        }
        A.type = fused;
        A.send_msg = B.send_msg;
        alias[o] = a;
        last_in_tb[t] = a;
      }
    }

    // Every dependency must point to a strictly earlier key (see the file comment).
    for (int o = 0; o < num_ops; ++o) {
      if (alias[o] >= 0) continue;
      for (auto& member : ops[o].deps) {
        std::vector<int> resolved;
        for (int d : member) {
          const int t = resolve(d);
          if (t == o) continue;
          if (!(ops[t].key < ops[o].key)) {
            return internalError(fmt::format(
                "lowering {}: rank {}: a step at time {} us waits for one at {} us: the schedule is not causal",
                collectiveName(req_.collective), ops[o].rank, ops[o].key.time, ops[t].key.time));
          }
          resolved.push_back(t);
        }
        member = std::move(resolved);
      }
    }

    // Scratch offsets in order of first use per rank.
    std::vector<std::map<int, int>> scratch_off(n_);
    for (int r = 0; r < n_; ++r) {
      int next = 0;
      for (int o : rank_ops[r]) {
        if (alias[o] >= 0) continue;
        for (std::vector<SLoc>* list : {&ops[o].src, &ops[o].dst}) {
          for (SLoc& l : *list) {
            if (l.buf != BufferKind::kScratch) continue;
            auto it = scratch_off[r].find(l.idx);
            if (it == scratch_off[r].end()) it = scratch_off[r].emplace(l.idx, next++).first;
            l.idx = it->second;
          }
        }
      }
    }

    // Split points: a message breaks wherever a buffer range of any step touching it (or a message fused with
    // it) stops being contiguous.
    const int num_msgs = static_cast<int>(msgs_.size());
    std::vector<int> parent(num_msgs);
    std::iota(parent.begin(), parent.end(), 0);
    std::function<int(int)> find = [&](int x) { return parent[x] == x ? x : parent[x] = find(parent[x]); };
    for (int o = 0; o < num_ops; ++o) {
      if (alias[o] < 0 && ops[o].recv_msg >= 0 && ops[o].send_msg >= 0) {
        parent[find(ops[o].recv_msg)] = find(ops[o].send_msg);
      }
    }
    auto breaksOf = [&](const Op& op, std::set<int>* breaks) {
      for (const std::vector<SLoc>* list : {&op.src, &op.dst}) {
        for (size_t i = 1; i < list->size(); ++i) {
          if ((*list)[i].buf != (*list)[i - 1].buf || (*list)[i].idx != (*list)[i - 1].idx + 1) {
            breaks->insert(static_cast<int>(i));
          }
        }
      }
    };
    std::vector<std::set<int>> msg_breaks(num_msgs);
    for (int o = 0; o < num_ops; ++o) {
      if (alias[o] >= 0) continue;
      const int m = ops[o].recv_msg >= 0 ? ops[o].recv_msg : ops[o].send_msg;
      if (m >= 0) breaksOf(ops[o], &msg_breaks[find(m)]);
    }

    // Emission, per rank in key order (dependencies are always emitted first).
    CollectiveSpec spec;
    spec.kind = req_.collective;
    spec.num_ranks = n_;
    spec.chunk_factor = req_.collective == CollectiveKind::kAllReduce ? n_ * c_ : c_;
    spec.root = req_.root;
    spec.in_place = false;
    ProgramBuilder builder(spec, /*refs_in_place=*/false, /*scale=*/1);
    std::vector<StepRef> done(num_ops);
    for (int r = 0; r < n_; ++r) {
      for (const TbDesc& d : tbs[r]) builder.newTb(r, d.send_peer, d.recv_peer, d.channel);
      for (int o : rank_ops[r]) {
        if (alias[o] >= 0) continue;
        const Op& op = ops[o];
        const int size = static_cast<int>(std::max(op.src.size(), op.dst.size()));
        std::set<int> own;
        const int m = op.recv_msg >= 0 ? op.recv_msg : op.send_msg;
        if (m < 0) breaksOf(op, &own);
        const std::set<int>& breaks = m >= 0 ? msg_breaks[find(m)] : own;
        std::vector<int> cuts(breaks.begin(), breaks.end());
        cuts.push_back(size);
        if (op.recv_msg >= 0 && tbs[r][op_tb[o]].send_peer >= 0) {
          int steps = 0, from = 0;
          for (int end : cuts) {
            steps += (end - from + algos::kMaxStepCount - 1) / algos::kMaxStepCount;
            from = end;
          }
          if (steps > 1) split_into_paired->insert({msgs_[op.recv_msg].from, r});
        }
        int begin = 0;
        for (int end : cuts) {
          std::vector<StepRef> deps;
          for (int i = begin; i < end; ++i) {
            for (int d : op.deps[i]) {
              if (!done[d].valid()) {
                return internalError(fmt::format("lowering: rank {} step depends on one not yet emitted", r));
              }
              deps.push_back(done[d]);
            }
          }
          const Loc src = op.src.empty() ? Loc{} : Loc{op.src[begin].buf, op.src[begin].idx};
          const Loc dst = op.dst.empty() ? Loc{} : Loc{op.dst[begin].buf, op.dst[begin].idx};
          const int count = end - begin;
          const int t = op_tb[o];
          switch (op.type) {
            case OpType::kSend: done[o] = builder.send(r, t, src, count, deps); break;
            case OpType::kRecv: done[o] = builder.recv(r, t, dst, count, deps); break;
            case OpType::kRecvCopySend: done[o] = builder.recvCopySend(r, t, dst, count, deps); break;
            case OpType::kRecvReduceSend: done[o] = builder.recvReduceSend(r, t, src, count, deps); break;
            case OpType::kRecvReduceCopy: done[o] = builder.recvReduceCopy(r, t, src, dst, count, deps); break;
            case OpType::kRecvReduceCopySend: done[o] = builder.recvReduceCopySend(r, t, src, dst, count, deps); break;
            case OpType::kCopy: done[o] = builder.copy(r, t, src, dst, count, deps); break;
            default: return internalError("lowering: unexpected step type");
          }
          begin = end;
        }
      }
    }
    Algorithm algorithm;
    BRAID_RETURN_IF_ERROR(builder.finish(algorithm));
    *tbs_out = std::move(tbs);
    return algorithm;
  }

  Algorithm finishHeader(Algorithm algorithm, const std::vector<std::string>& notes) {
    const CollectiveKind k = req_.collective;
    algorithm.name = req_.name.empty() ? fmt::format("braid-synth-{}-n{}", collectiveName(k), n_) : req_.name;
    algorithm.collective = k;
    algorithm.collective_name = collectiveName(k);
    algorithm.protocol = req_.protocol;
    // One program serves both modes: in place the owner's copy is the identity and partial sums live in
    // scratch; MSCCL runtimes reject in-place all-to-all.
    algorithm.out_of_place = true;
    algorithm.in_place = k != CollectiveKind::kAllToAll;
    algorithm.min_bytes = 0;
    algorithm.max_bytes = kUnlimitedBytes;
    algorithm.root = (k == CollectiveKind::kBroadcast || k == CollectiveKind::kReduce) ? req_.root : 0;
    const bool reduces =
        k == CollectiveKind::kReduceScatter || k == CollectiveKind::kAllReduce || k == CollectiveKind::kReduce;
    algorithm.redop = reduces ? "sum" : "";
    for (const std::string& note : notes) {
      if (!note.empty()) algorithm.notes.push_back(note);
    }
    return algorithm;
  }

  const LowerRequest& req_;
  bool has_forward_ = false;
  bool has_reverse_ = false;
  int n_ = 0;
  int c_ = 1;
  std::vector<Unit> units_;
  std::vector<int> data_;  // unit -> the unit whose data it is (all-reduce: gather unit -> its reduce unit)
  std::vector<Message> msgs_;
  std::map<std::pair<int, int>, std::vector<int>> pair_msgs_;
  std::map<std::pair<int, int>, Spread> spread_;
  std::set<std::pair<int, int>> solo_recv_;  // (from, to): receive connections never paired with a send
  std::vector<Op> ops_;
  std::vector<int> scratch_syms_;
};

}  // namespace

Result<Algorithm> lowerSchedule(const LowerRequest& request) { return Lowering(request).run(); }

}  // namespace braid::synth
