// The emitter's model (emit.cc: request and schedules -> messages and the channel search; emit_ops.cc: operations;
// emit_program.cc: one MSCCL program per channel assignment). The method is described at the top of emit.cc.
// Private to synthesizer/.
#pragma once

#include <fmt/format.h>

#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "braid/program_builder.h"
#include "synthesizer/model.h"

namespace braid::synth::emit {

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

inline SLoc inputLoc(int idx) { return SLoc{BufferKind::kInput, idx}; }
inline SLoc outputLoc(int idx) { return SLoc{BufferKind::kOutput, idx}; }
inline SLoc scratchLoc(int sym) { return SLoc{BufferKind::kScratch, sym}; }

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

// The working state of one program (Emitter::build): a copy of the operations that fusion rewrites, each rank's
// operations in key order, and the threadblocks.
struct Draft {
  std::vector<Op> ops;
  std::vector<int> alias;                  // op -> the op it was fused into; -1: none
  std::vector<std::vector<int>> rank_ops;  // per rank: its op ids in key order
  std::vector<std::vector<TbDesc>> tbs;    // per rank: its threadblocks
  std::vector<int> op_tb;                  // op -> its threadblock (index into tbs[rank]); -1: none yet

  // The op that `op` ends up in after fusion.
  int resolve(int op) const {
    while (alias[op] >= 0) op = alias[op];
    return op;
  }
};

class Emitter {
 public:
  explicit Emitter(const EmitRequest& request) : req_(request) {}

  Result<Algorithm> run();

 private:
  // ---- request and schedules --------------------------------------------------------------------

  Status checkRequest();

  // Buffer indices of a chunk (collective.h layouts): see Unit.
  void indices(const Chunk& chunk, Unit* u) const;

  // Validates one schedule (in its all-gather view: link src -> dst) and turns its groups into messages.
  Status addPhase(int phase, const LogicalTopology& logical, const ChunkProblem& problem, const Schedule& schedule,
                  bool reversed);

  // kInvalidArgument "lowering <collective>: <forward|reverse> schedule: <what>".
  Status phaseError(bool reversed, const std::string& what) const;

  // addPhase's checks of the transfers: chunks and links exist, times are finite and ordered, and every chunk
  // travels along a tree from its owner that reaches its targets (reversed: every rank).
  Status checkTransfers(const LogicalTopology& logical, const ChunkProblem& problem, const Schedule& schedule,
                        bool reversed) const;

  // addPhase's link orders and groups: checks them and returns the groups, every transfer outside the schedule's
  // groups in one of its own; `group_of` gets each transfer's group.
  Result<std::vector<std::vector<int>>> messageGroups(int num_links, const Schedule& schedule, bool reversed,
                                                      std::vector<int>* group_of) const;

  // Sequence numbers per real pair; times made monotone along each pair (and end > start) so that the keys of
  // one connection follow its FIFO order.
  void orderPairs();

  // ---- operations (independent of channels and threadblocks) -----------------------------------

  int addOp(Op op);

  int newScratch(int rank) { return scratch_syms_[rank]++; }

  Status buildOps();

  // buildOps' reduce phase: receive-reduce-copies chained into partial sums and the sends of those sums; for
  // all-reduce, ready[u][owner] of each gather unit u becomes the op that finishes its reduction. `unique`
  // numbers the copies' keys.
  Status buildReduceOps(std::vector<std::vector<int>>* ready, int* unique);

  // buildOps' gather phase: the owners' copies, all-to-all's self block, then every receive and every send
  // (each send waits for ready[unit][sender]).
  void buildGatherOps(std::vector<std::vector<int>>* ready, int* unique);

  // ---- one program for a channel assignment ------------------------------------------------------

  // The data chain of a message: the chunk of its first member (all-reduce: the reduce-scatter chunk).
  int chainOf(const Message& m) const { return units_[data_[m.units[0]]].chunk; }

  // True when the chains of the pair's messages load its `k` channels unevenly (chain mod k).
  bool chainsUneven(const std::pair<int, int>& pair, int k) const;

  // One program for the current channel spread and solo receive connections. `split_into_paired` gets the
  // pairs (from, to) of messages that took several steps into a threadblock that also sends.
  Result<Algorithm> build(std::vector<std::vector<TbDesc>>* tbs_out, std::set<std::pair<int, int>>* split_into_paired);

  // build's steps, in order. Message channels from spread_ (and tree levels with level_channels).
  void assignChannels();

  // The operations copied, unfused, each rank's in key order, no threadblocks yet.
  Draft startDraft() const;

  // Rank r's threadblocks: a receive connection paired with the send connection it forwards most chunks to
  // (pair_connections), unrelated connections sharing threadblocks above kMaxTbsPerChannel, the rest alone.
  std::vector<TbDesc> rankThreadblocks(int r, const Draft& draft) const;

  // Rank r's operations into its threadblocks (copies: their first dependant's, else the least loaded).
  void placeOps(int r, Draft* draft) const;

  // Fuses a receive with the send that immediately follows it in its threadblock and sends exactly what it
  // delivered (rcs / rrs / rrcs).
  void fuse(Draft* draft) const;

  // Dependencies through fusion aliases; an error when one does not point to a strictly earlier key.
  Status resolveDependencies(Draft* draft) const;

  // Scratch offsets in order of first use per rank.
  void layoutScratch(Draft* draft) const;

  // Per message: the member positions where a buffer range of a step touching it, or of a message fused with
  // it, stops being contiguous (the message is cut there).
  std::vector<std::set<int>> messageBreaks(const Draft& draft) const;

  // The MSCCL program of the draft through ProgramBuilder; see build for `split_into_paired`.
  Result<Algorithm> emitSteps(const Draft& draft, const std::vector<std::set<int>>& msg_breaks,
                              std::set<std::pair<int, int>>* split_into_paired) const;

  Algorithm finishHeader(Algorithm algorithm, const std::vector<std::string>& notes);

  const EmitRequest& req_;
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

}  // namespace braid::synth::emit
