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

  // Sequence numbers per real pair; times made monotone along each pair (and end > start) so that the keys of
  // one connection follow its FIFO order.
  void orderPairs();

  // ---- operations (independent of channels and threadblocks) -----------------------------------

  int addOp(Op op);

  int newScratch(int rank) { return scratch_syms_[rank]++; }

  Status buildOps();

  // ---- one program for a channel assignment ------------------------------------------------------

  // The data chain of a message: the chunk of its first member (all-reduce: the reduce-scatter chunk).
  int chainOf(const Message& m) const { return units_[data_[m.units[0]]].chunk; }

  // True when the chains of the pair's messages load its `k` channels unevenly (chain mod k).
  bool chainsUneven(const std::pair<int, int>& pair, int k) const;

  // One program for the current channel spread and solo receive connections. `split_into_paired` gets the
  // pairs (from, to) of messages that took several steps into a threadblock that also sends.
  Result<Algorithm> build(std::vector<std::vector<TbDesc>>* tbs_out, std::set<std::pair<int, int>>* split_into_paired);

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
