// The verifier: replays an algorithm symbolically and proves that it implements its collective.
//
// Execution model (MSCCL, ../shared/reference/taccl_msccl.md §2.3 and §3.2; Azure/msccl-executor-nccl
// src/device/msccl_kernel.cu): every threadblock runs its steps in order; a step starts when the
// (threadblock, step) pairs it depends on have finished; sends are buffered, receives block until the
// data is there; messages of one connection (source rank, destination rank, channel) match in FIFO
// order. Values are symbolic (collective.h): input chunk i of rank r holds {(r, i)}, every other chunk
// starts undefined, and a reduction is the multiset union of its operands, so a chunk counted twice
// is visible in the result.
//
// Structure rules mirror what Azure/msccl-executor-nccl src/misc/msccl/msccl_parser.cc
// (mscclGetAlgoFromXmlFile) rejects: threadblock ids dense from 0 with no duplicates ("thread block %d
// is missing"), peers >= -1 and different from the own rank, a channel >= 0, a step that sends needs a
// send peer and one that receives needs a recv peer, offsets bounded by the declared i/o/s chunk counts.
// That parser does NOT reject two threadblocks of one rank that share a (send peer, channel) or
// (recv peer, channel) connection, and real msccl-tools output does so (realcases
// msccl/msccltools_allreduce_ndv2_ar1.xml, rank 3 tbs 6 and 8). Braid accepts it too, but requires the
// accesses of those threadblocks to one connection to be ordered by happens-before; otherwise the
// FIFO order is a race and is reported as one. Braid is stricter than the parser in three places, each
// a real runtime failure: channels must be < nchannels (the runtime only connects that many), counts
// must be >= 1 except on nop, and offset + count (not just the offset) must fit in the buffer.
//
// Races are found with vector clocks over threadblocks (Lamport happens-before: program order within a
// threadblock, explicit dependencies, and send -> matching receive, transitively); two accesses to one
// storage chunk of a rank, at least one a write, from different threadblocks, race when neither clock
// dominates the other (FastTrack-style epochs: Flanagan & Freund, PLDI 2009). As in FastTrack, every
// chunk that has a race gets at least one report (the first conflicting pair found); a pair hidden
// behind a later ordered write to the same chunk is not reported separately.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "braid/algorithm.h"

namespace braid {

namespace {

// Limits that keep malformed inputs from exhausting memory; real algorithms are far below them.
constexpr int64_t kMaxStorageCells = int64_t{1} << 22;  // chunk cells over all ranks
constexpr int64_t kMaxClockCells = int64_t{1} << 26;    // vector-clock entries kept for race checks
constexpr int64_t kMaxChunkMoves = int64_t{1} << 28;    // sum of step counts replayed per mode

const char* kModeInPlace = "in-place";
const char* kModeOutOfPlace = "out-of-place";

// ---- symbolic values -------------------------------------------------------------------------

struct Value {
  bool defined = false;
  std::vector<ChunkRef> refs;  // sorted multiset: an element that appears twice was counted twice
};

Value inputValue(int rank, int index) { return Value{true, {ChunkRef{rank, index}}}; }

Value reduceValues(const Value& a, const Value& b) {
  if (!a.defined || !b.defined) return Value{};
  Value out;
  out.defined = true;
  out.refs.resize(a.refs.size() + b.refs.size());
  std::merge(a.refs.begin(), a.refs.end(), b.refs.begin(), b.refs.end(), out.refs.begin());
  return out;
}

std::string refsText(const std::vector<ChunkRef>& refs) {
  std::string text = "{";
  for (size_t i = 0; i < refs.size();) {
    size_t j = i;
    while (j < refs.size() && refs[j] == refs[i]) ++j;
    if (i > 0) text += ",";
    text += fmt::format("({},{})", refs[i].rank, refs[i].index);
    if (j - i > 1) text += fmt::format("x{}", j - i);
    i = j;
  }
  return text + "}";
}

std::string valueText(const Value& v) { return v.defined ? refsText(v.refs) : "undefined"; }

// Names the elements that occur more than once (double counting), or "" when none does.
std::string duplicatesText(const Value& v) {
  std::string text;
  for (size_t i = 0; i + 1 < v.refs.size(); ++i) {
    if (v.refs[i] == v.refs[i + 1] && (i == 0 || !(v.refs[i - 1] == v.refs[i]))) {
      if (!text.empty()) text += ", ";
      text += fmt::format("({},{})", v.refs[i].rank, v.refs[i].index);
    }
  }
  return text;
}

// ---- issue collection ------------------------------------------------------------------------

class IssueSink {
 public:
  explicit IssueSink(int max_issues) : max_issues_(std::max(0, max_issues)) {}

  void add(IssueKind kind, int rank, int tb, int step, int chunk, std::string message, const std::string& mode) {
    ++total_;
    if (static_cast<int>(issues_.size()) >= max_issues_) return;
    VerifyIssue issue;
    issue.kind = kind;
    issue.rank = rank;
    issue.tb = tb;
    issue.step = step;
    issue.chunk = chunk;
    issue.message = std::move(message);
    issue.mode = mode;
    issues_.push_back(std::move(issue));
  }

  int total() const { return total_; }
  std::vector<VerifyIssue>& issues() { return issues_; }

 private:
  int max_issues_;
  int total_ = 0;
  std::vector<VerifyIssue> issues_;
};

std::string stepWhere(int rank, int tb, int step, OpType type) {
  return fmt::format("rank {} tb {} step {} ({})", rank, tb, step, opTypeName(type));
}

std::string bufferLongName(BufferKind b) {
  switch (b) {
    case BufferKind::kInput: return "input buffer (i_chunks";
    case BufferKind::kOutput: return "output buffer (o_chunks";
    case BufferKind::kScratch: return "scratch buffer (s_chunks";
  }
  return "?";
}

int declaredChunks(const RankProgram& program, BufferKind b) {
  switch (b) {
    case BufferKind::kInput: return program.input_chunks;
    case BufferKind::kOutput: return program.output_chunks;
    case BufferKind::kScratch: return program.scratch_chunks;
  }
  return 0;
}

// ---- static checks (the same for both modes) --------------------------------------------------

// Returns true when the program is well-formed enough to simulate.
bool checkStructure(const Algorithm& algorithm, const CollectiveSpec& spec, IssueSink& sink) {
  const int before = sink.total();
  auto structure = [&](int rank, int tb, int step, std::string message) {
    sink.add(IssueKind::kStructure, rank, tb, step, -1, std::move(message), "");
  };
  const int n = spec.num_ranks;
  if (algorithm.num_ranks != n) {
    structure(-1, -1, -1, fmt::format("algorithm has ngpus={} but the spec has {} ranks", algorithm.num_ranks, n));
  }
  if (static_cast<int64_t>(algorithm.ranks.size()) != n) {
    structure(-1, -1, -1, fmt::format("algorithm lists {} rank programs but has {} ranks", algorithm.ranks.size(), n));
    return false;
  }
  if (algorithm.num_channels < 1) {
    structure(-1, -1, -1, fmt::format("nchannels must be >= 1, got {}", algorithm.num_channels));
  }
  int64_t cells = 0;
  for (int r = 0; r < n; ++r) {
    const RankProgram& program = algorithm.ranks[r];
    if (program.rank != r) structure(r, -1, -1, fmt::format("ranks[{}] is labelled rank {}", r, program.rank));
    if (program.input_chunks != 0 && program.input_chunks != spec.inputChunks()) {
      structure(r, -1, -1,
                fmt::format("rank {}: i_chunks={} but {} has {} input chunks per rank (0 is accepted when the "
                            "input buffer is never used)",
                            r, program.input_chunks, spec.toString(), spec.inputChunks()));
    }
    if (program.output_chunks != 0 && program.output_chunks != spec.outputChunks()) {
      structure(r, -1, -1,
                fmt::format("rank {}: o_chunks={} but {} has {} output chunks per rank (0 is accepted when the "
                            "output buffer is never used)",
                            r, program.output_chunks, spec.toString(), spec.outputChunks()));
    }
    if (program.scratch_chunks < 0) {
      structure(r, -1, -1, fmt::format("rank {}: s_chunks must be >= 0, got {}", r, program.scratch_chunks));
    }
    cells += int64_t{spec.inputChunks()} + spec.outputChunks() + std::max(0, program.scratch_chunks);
    for (size_t p = 0; p < program.precopies.size(); ++p) {
      if (program.precopies[p].count < 1) {
        structure(r, -1, -1,
                  fmt::format("rank {} copy {}: count must be >= 1, got {}", r, p, program.precopies[p].count));
      }
    }
    const int num_tbs = static_cast<int>(program.threadblocks.size());
    for (int t = 0; t < num_tbs; ++t) {
      const Threadblock& tb = program.threadblocks[t];
      if (tb.id != t) {
        structure(r, t, -1,
                  fmt::format("rank {}: threadblock at position {} has id {}; ids must be 0..{} in order with no "
                              "gaps or duplicates",
                              r, t, tb.id, num_tbs - 1));
      }
      for (auto [peer, what] : {std::pair<int, const char*>{tb.send_peer, "send"}, {tb.recv_peer, "recv"}}) {
        if (peer < -1 || peer >= n) {
          structure(r, t, -1, fmt::format("rank {} tb {}: {} peer {} is outside [-1, {})", r, t, what, peer, n));
        } else if (peer == r) {
          structure(r, t, -1, fmt::format("rank {} tb {}: {} peer is the rank itself", r, t, what));
        }
      }
      if (tb.channel < 0 || (algorithm.num_channels >= 1 && tb.channel >= algorithm.num_channels)) {
        structure(r, t, -1,
                  fmt::format("rank {} tb {}: channel {} is outside [0, nchannels={})", r, t, tb.channel,
                              algorithm.num_channels));
      }
      const int num_steps = static_cast<int>(tb.steps.size());
      for (int s = 0; s < num_steps; ++s) {
        const Step& step = tb.steps[s];
        const std::string where = stepWhere(r, t, s, step.type);
        if (step.type == OpType::kNop ? step.count < 0 : step.count < 1) {
          structure(r, t, s, fmt::format("{}: count must be >= 1, got {}", where, step.count));
        }
        if (opSends(step.type) && tb.send_peer < 0) {
          structure(r, t, s, fmt::format("{}: sends but the threadblock has no send peer", where));
        }
        if (opReceives(step.type) && tb.recv_peer < 0) {
          structure(r, t, s, fmt::format("{}: receives but the threadblock has no recv peer", where));
        }
        for (const Dependency& dep : step.deps) {
          if (dep.tb < 0 || dep.tb >= num_tbs) {
            structure(r, t, s, fmt::format("{}: depends on tb {}, which does not exist on rank {}", where, dep.tb, r));
          } else if (dep.step < 0 || dep.step >= static_cast<int>(program.threadblocks[dep.tb].steps.size())) {
            structure(r, t, s,
                      fmt::format("{}: depends on tb {} step {}, which does not exist (tb {} has {} steps)", where,
                                  dep.tb, dep.step, dep.tb, program.threadblocks[dep.tb].steps.size()));
          } else if (dep.tb == t && dep.step >= s) {
            structure(r, t, s,
                      fmt::format("{}: depends on step {} of its own threadblock, which runs after it (deadlock)",
                                  where, dep.step));
          }
        }
      }
    }
  }
  if (cells > kMaxStorageCells) {
    structure(-1, -1, -1,
              fmt::format("buffers total {} chunks over all ranks, more than the verifier's limit of {}", cells,
                          kMaxStorageCells));
  }
  return sink.total() == before;
}

// Returns true when every range the program uses lies inside its buffer.
bool checkRanges(const Algorithm& algorithm, IssueSink& sink) {
  const int before = sink.total();
  auto check = [&](int rank, int tb, int step, const std::string& where, const char* role, BufferKind b, int offset,
                   int count, const RankProgram& program) {
    const int64_t size = declaredChunks(program, b);
    if (offset < 0 || int64_t{offset} + count > size) {
      sink.add(IssueKind::kOutOfRange, rank, tb, step, offset,
               fmt::format("{}: {} {}[{}..{}) is outside the {}={})", where, role, bufferName(b), offset,
                           int64_t{offset} + count, bufferLongName(b), size),
               "");
    }
  };
  for (const RankProgram& program : algorithm.ranks) {
    const int r = program.rank;
    for (size_t p = 0; p < program.precopies.size(); ++p) {
      const PreCopy& copy = program.precopies[p];
      const std::string where = fmt::format("rank {} copy {}", r, p);
      check(r, -1, -1, where, "src", BufferKind::kInput, copy.input_off, copy.count, program);
      check(r, -1, -1, where, "dst", BufferKind::kOutput, copy.output_off, copy.count, program);
    }
    for (size_t t = 0; t < program.threadblocks.size(); ++t) {
      const Threadblock& tb = program.threadblocks[t];
      for (size_t s = 0; s < tb.steps.size(); ++s) {
        const Step& step = tb.steps[s];
        const std::string where = stepWhere(r, static_cast<int>(t), static_cast<int>(s), step.type);
        if (opReadsSrc(step.type)) {
          check(r, static_cast<int>(t), static_cast<int>(s), where, "src", step.src_buf, step.src_off, step.count,
                program);
        }
        if (opWritesDst(step.type)) {
          check(r, static_cast<int>(t), static_cast<int>(s), where, "dst", step.dst_buf, step.dst_off, step.count,
                program);
        }
      }
    }
  }
  return sink.total() == before;
}

// ---- simulation --------------------------------------------------------------------------------

using Clock = std::vector<int32_t>;
using ClockPtr = std::shared_ptr<const Clock>;

void joinInto(Clock& into, const Clock& other) {
  for (size_t i = 0; i < into.size(); ++i) into[i] = std::max(into[i], other[i]);
}

// One access to a storage chunk, identified by global threadblock and epoch (step index + 1).
struct Access {
  int gtb = -1;
  int32_t epoch = 0;
  int tb = -1;
  int step = -1;
  BufferKind buf = BufferKind::kOutput;
  int index = -1;
};

struct CellHistory {
  Access last_write;
  std::vector<Access> reads;  // since last_write, at most one per threadblock
};

struct Message {
  std::vector<Value> data;
  int tb = -1;
  int step = -1;
  ClockPtr clock;
};

struct Connection {
  std::deque<Message> queue;
  Access last_send;  // buf/index unused
  Access last_recv;
};

class Simulator {
 public:
  Simulator(const Algorithm& algorithm, const CollectiveSpec& spec, IssueSink& sink, std::string mode)
      : algorithm_(algorithm), spec_(spec), sink_(sink), mode_(std::move(mode)) {}

  void run() {
    setUp();
    std::deque<int> work;
    std::vector<char> queued(gtb_rank_.size(), 1);
    for (size_t g = 0; g < gtb_rank_.size(); ++g) work.push_back(static_cast<int>(g));
    while (!work.empty()) {
      const int g = work.front();
      work.pop_front();
      queued[g] = 0;
      while (runnable(g)) {
        const int sent_to = execute(g);
        for (int waiter : dependents_[g]) {
          if (!queued[waiter]) queued[waiter] = 1, work.push_back(waiter);
        }
        if (sent_to >= 0) {
          auto it = receivers_.find(connKey(gtb_rank_[g], sent_to, channelOf(g)));
          if (it != receivers_.end()) {
            for (int waiter : it->second) {
              if (!queued[waiter]) queued[waiter] = 1, work.push_back(waiter);
            }
          }
        }
      }
    }
    const bool deadlocked = reportDeadlocks();
    reportLeftovers();
    if (!deadlocked) checkPostcondition();
  }

 private:
  // -- layout: one storage per rank; in place, the input and output views alias.
  struct Layout {
    int in_base = 0;
    int out_base = 0;
    int scratch_base = 0;
    int size = 0;
  };

  int cellOf(int rank, BufferKind b, int index) const {
    const Layout& l = layout_[rank];
    switch (b) {
      case BufferKind::kScratch: return l.scratch_base + index;
      case BufferKind::kInput:
        if (spec_.in_place) {
          const int alias = spec_.inputAliasInOutput(rank, index);
          if (alias >= 0) return l.out_base + alias;
        }
        return l.in_base + index;
      case BufferKind::kOutput:
        if (spec_.in_place) {
          const int alias = spec_.outputAliasInInput(rank, index);
          if (alias >= 0) return l.in_base + alias;
        }
        return l.out_base + index;
    }
    return 0;
  }

  // A connection: (source rank, destination rank, channel).
  using ConnKey = std::tuple<int, int, int>;
  static ConnKey connKey(int src, int dst, int channel) { return {src, dst, channel}; }

  const Threadblock& tbOf(int g) const { return algorithm_.ranks[gtb_rank_[g]].threadblocks[gtb_local_[g]]; }
  int channelOf(int g) const { return tbOf(g).channel; }

  void setUp() {
    const int n = spec_.num_ranks;
    const int in = spec_.inputChunks();
    const int out = spec_.outputChunks();
    layout_.resize(n);
    storage_.resize(n);
    history_.resize(n);
    tb_base_.resize(n);
    for (int r = 0; r < n; ++r) {
      const RankProgram& program = algorithm_.ranks[r];
      Layout& l = layout_[r];
      if (!spec_.in_place) {
        l.in_base = 0;
        l.out_base = in;
        l.scratch_base = in + out;
      } else if (spec_.kind == CollectiveKind::kReduceScatter) {
        l.in_base = 0;
        l.out_base = 0;  // every output chunk aliases into the input
        l.scratch_base = in;
      } else {
        l.in_base = 0;  // every input chunk aliases into the output
        l.out_base = 0;
        l.scratch_base = out;
      }
      l.size = l.scratch_base + std::max(0, program.scratch_chunks);
      storage_[r].assign(l.size, Value{});
      history_[r].assign(l.size, CellHistory{});
      for (int i = 0; i < in; ++i) storage_[r][cellOf(r, BufferKind::kInput, i)] = inputValue(r, i);
      for (const PreCopy& copy : program.precopies) {
        std::vector<Value> values;
        for (int k = 0; k < copy.count; ++k)
          values.push_back(storage_[r][cellOf(r, BufferKind::kInput, copy.input_off + k)]);
        for (int k = 0; k < copy.count; ++k)
          storage_[r][cellOf(r, BufferKind::kOutput, copy.output_off + k)] = values[k];
      }
      tb_base_[r] = static_cast<int>(gtb_rank_.size());
      for (size_t t = 0; t < program.threadblocks.size(); ++t) {
        gtb_rank_.push_back(r);
        gtb_local_.push_back(static_cast<int>(t));
      }
    }
    const size_t num_gtb = gtb_rank_.size();
    pc_.assign(num_gtb, 0);
    dependents_.assign(num_gtb, {});
    snapshots_.assign(num_gtb, {});
    int64_t snapshot_count = 0;
    int64_t send_count = 0;
    for (size_t g = 0; g < num_gtb; ++g) {
      const Threadblock& tb = tbOf(static_cast<int>(g));
      snapshots_[g].resize(tb.steps.size());
      const int r = gtb_rank_[g];
      if (tb.recv_peer >= 0) receivers_[connKey(tb.recv_peer, r, tb.channel)].push_back(static_cast<int>(g));
      for (const Step& step : tb.steps) {
        if (opSends(step.type)) ++send_count;
        for (const Dependency& dep : step.deps) {
          auto& list = dependents_[tb_base_[r] + dep.tb];
          if (list.empty() || list.back() != static_cast<int>(g)) list.push_back(static_cast<int>(g));
        }
      }
    }
    for (std::vector<int>& list : dependents_) {
      std::sort(list.begin(), list.end());
      list.erase(std::unique(list.begin(), list.end()), list.end());
    }
    is_target_.assign(num_gtb, {});
    for (size_t g = 0; g < num_gtb; ++g) is_target_[g].assign(tbOf(static_cast<int>(g)).steps.size(), 0);
    for (size_t g = 0; g < num_gtb; ++g) {
      const int r = gtb_rank_[g];
      for (const Step& step : tbOf(static_cast<int>(g)).steps) {
        for (const Dependency& dep : step.deps) {
          char& flag = is_target_[tb_base_[r] + dep.tb][dep.step];
          if (!flag) flag = 1, ++snapshot_count;
        }
      }
    }
    track_races_ =
        static_cast<int64_t>(num_gtb) * (static_cast<int64_t>(num_gtb) + snapshot_count + send_count) <= kMaxClockCells;
    if (track_races_) {
      clocks_.assign(num_gtb, Clock(num_gtb, 0));
    } else {
      sink_.add(IssueKind::kUnverifiable, -1, -1, -1, -1,
                fmt::format("race check skipped: {} threadblocks and {} sends need more than {} vector-clock entries",
                            num_gtb, send_count, kMaxClockCells),
                mode_);
    }
  }

  bool depDone(int rank, const Dependency& dep) const { return pc_[tb_base_[rank] + dep.tb] > dep.step; }

  bool runnable(int g) const {
    const Threadblock& tb = tbOf(g);
    const int k = pc_[g];
    if (k >= static_cast<int>(tb.steps.size())) return false;
    const Step& step = tb.steps[k];
    const int r = gtb_rank_[g];
    for (const Dependency& dep : step.deps) {
      if (!depDone(r, dep)) return false;
    }
    if (opReceives(step.type)) {
      auto it = connections_.find(connKey(tb.recv_peer, r, tb.channel));
      if (it == connections_.end() || it->second.queue.empty()) return false;
    }
    return true;
  }

  bool ordered(const Clock& clock, const Access& earlier) const {
    return earlier.gtb < 0 || clock[earlier.gtb] >= earlier.epoch;
  }

  void reportRace(int rank, const Access& a, bool a_writes, const Access& b, bool b_writes) {
    std::pair<int, int> first{a.gtb, a.step};
    std::pair<int, int> second{b.gtb, b.step};
    if (second < first) std::swap(first, second);
    if (!reported_races_.insert({rank, first.first, first.second, second.first, second.second}).second) return;
    sink_.add(IssueKind::kRace, rank, b.tb, b.step, b.index,
              fmt::format("rank {}: tb {} step {} {} {}[{}] and tb {} step {} {} {}[{}] (the same chunk) with no "
                          "ordering between them",
                          rank, a.tb, a.step, a_writes ? "writes" : "reads", bufferName(a.buf), a.index, b.tb, b.step,
                          b_writes ? "writes" : "reads", bufferName(b.buf), b.index),
              mode_);
  }

  void noteRead(int rank, int cell, const Access& access, const Clock& clock) {
    CellHistory& h = history_[rank][cell];
    if (h.last_write.gtb >= 0 && h.last_write.gtb != access.gtb && !ordered(clock, h.last_write)) {
      reportRace(rank, h.last_write, true, access, false);
    }
    for (Access& read : h.reads) {
      if (read.gtb == access.gtb) {
        read = access;
        return;
      }
    }
    h.reads.push_back(access);
  }

  void noteWrite(int rank, int cell, const Access& access, const Clock& clock) {
    CellHistory& h = history_[rank][cell];
    if (h.last_write.gtb >= 0 && h.last_write.gtb != access.gtb && !ordered(clock, h.last_write)) {
      reportRace(rank, h.last_write, true, access, true);
    }
    for (const Access& read : h.reads) {
      if (read.gtb != access.gtb && !ordered(clock, read)) reportRace(rank, read, false, access, true);
    }
    h.reads.clear();
    h.last_write = access;
  }

  // Connection FIFO order is only well defined when the threadblocks sharing one end are ordered.
  void noteConnectionUse(Access& last, const Access& now, const Clock& clock, int rank, const char* what, int peer,
                         int channel) {
    if (track_races_ && last.gtb >= 0 && last.gtb != now.gtb && !ordered(clock, last)) {
      sink_.add(IssueKind::kRace, rank, now.tb, now.step, -1,
                fmt::format("rank {}: tb {} step {} and tb {} step {} both {} rank {} on channel {} with no ordering "
                            "between them, so the FIFO order of their messages is undefined",
                            rank, last.tb, last.step, now.tb, now.step, what, peer, channel),
                mode_);
    }
    last = now;
  }

  // Runs the next step of global threadblock g; returns the rank it sent to, or -1.
  int execute(int g) {
    const int r = gtb_rank_[g];
    const int t = gtb_local_[g];
    const Threadblock& tb = tbOf(g);
    const int k = pc_[g];
    const Step& step = tb.steps[k];
    const std::string where = stepWhere(r, t, k, step.type);

    Clock* clock = nullptr;
    if (track_races_) {
      clock = &clocks_[g];
      for (const Dependency& dep : step.deps) {
        const ClockPtr& snap = snapshots_[tb_base_[r] + dep.tb][dep.step];
        if (snap) joinInto(*clock, *snap);
      }
    }

    std::vector<Value> received;
    if (opReceives(step.type)) {
      Connection& conn = connections_[connKey(tb.recv_peer, r, tb.channel)];
      Message message = std::move(conn.queue.front());
      conn.queue.pop_front();
      if (clock && message.clock) joinInto(*clock, *message.clock);
      if (static_cast<int>(message.data.size()) != step.count) {
        sink_.add(IssueKind::kPeerMismatch, r, t, k, -1,
                  fmt::format("{}: receives {} chunk(s) but the matching send, rank {} tb {} step {}, sent {}", where,
                              step.count, tb.recv_peer, message.tb, message.step, message.data.size()),
                  mode_);
        message.data.resize(step.count);  // missing chunks arrive undefined
      }
      received = std::move(message.data);
      if (clock) {
        (*clock)[g] = k + 1;
        noteConnectionUse(conn.last_recv, Access{g, k + 1, t, k}, *clock, r, "receive from", tb.recv_peer, tb.channel);
      }
    }
    if (clock) (*clock)[g] = k + 1;

    const Access access{g, k + 1, t, k};
    auto readRange = [&](BufferKind b, int offset) {
      std::vector<Value> values;
      values.reserve(step.count);
      for (int i = 0; i < step.count; ++i) {
        const int cell = cellOf(r, b, offset + i);
        if (clock) noteRead(r, cell, Access{g, k + 1, t, k, b, offset + i}, *clock);
        values.push_back(storage_[r][cell]);
      }
      return values;
    };
    auto writeRange = [&](BufferKind b, int offset, std::vector<Value>& values) {
      for (int i = 0; i < step.count; ++i) {
        const int cell = cellOf(r, b, offset + i);
        if (clock) noteWrite(r, cell, Access{g, k + 1, t, k, b, offset + i}, *clock);
        storage_[r][cell] = std::move(values[i]);
      }
    };
    auto combine = [&](const std::vector<Value>& a, const std::vector<Value>& b) {
      std::vector<Value> out(step.count);
      for (int i = 0; i < step.count; ++i) out[i] = reduceValues(a[i], b[i]);
      return out;
    };

    std::vector<Value> outgoing;
    bool sends = false;
    switch (step.type) {
      case OpType::kSend:
        outgoing = readRange(step.src_buf, step.src_off);
        sends = true;
        break;
      case OpType::kRecv: writeRange(step.dst_buf, step.dst_off, received); break;
      case OpType::kRecvCopySend: {
        outgoing = received;
        sends = true;
        writeRange(step.dst_buf, step.dst_off, received);
        break;
      }
      case OpType::kRecvReduceSend:
        outgoing = combine(readRange(step.src_buf, step.src_off), received);
        sends = true;
        break;
      case OpType::kRecvReduceCopy: {
        std::vector<Value> result = combine(readRange(step.src_buf, step.src_off), received);
        writeRange(step.dst_buf, step.dst_off, result);
        break;
      }
      case OpType::kRecvReduceCopySend: {
        std::vector<Value> result = combine(readRange(step.src_buf, step.src_off), received);
        outgoing = result;
        sends = true;
        writeRange(step.dst_buf, step.dst_off, result);
        break;
      }
      case OpType::kCopy: {
        std::vector<Value> values = readRange(step.src_buf, step.src_off);
        writeRange(step.dst_buf, step.dst_off, values);
        break;
      }
      case OpType::kReduce: {
        std::vector<Value> result =
            combine(readRange(step.dst_buf, step.dst_off), readRange(step.src_buf, step.src_off));
        writeRange(step.dst_buf, step.dst_off, result);
        break;
      }
      case OpType::kNop: break;
    }

    int sent_to = -1;
    if (sends) {
      Connection& conn = connections_[connKey(r, tb.send_peer, tb.channel)];
      if (clock) noteConnectionUse(conn.last_send, access, *clock, r, "send to", tb.send_peer, tb.channel);
      Message message;
      message.data = std::move(outgoing);
      message.tb = t;
      message.step = k;
      if (clock) message.clock = std::make_shared<const Clock>(*clock);
      conn.queue.push_back(std::move(message));
      sent_to = tb.send_peer;
    }
    if (clock && is_target_[g][k]) snapshots_[g][k] = std::make_shared<const Clock>(*clock);
    ++pc_[g];
    return sent_to;
  }

  bool reportDeadlocks() {
    bool any = false;
    for (size_t g = 0; g < gtb_rank_.size(); ++g) {
      const Threadblock& tb = tbOf(static_cast<int>(g));
      const int k = pc_[g];
      if (k >= static_cast<int>(tb.steps.size())) continue;
      any = true;
      const int r = gtb_rank_[g];
      const Step& step = tb.steps[k];
      std::string reason;
      for (const Dependency& dep : step.deps) {
        if (!depDone(r, dep)) {
          reason = fmt::format("waits for tb {} step {}, which never finishes", dep.tb, dep.step);
          break;
        }
      }
      if (reason.empty()) {
        reason = fmt::format("waits for data from rank {} on channel {} that never arrives", tb.recv_peer, tb.channel);
      }
      sink_.add(IssueKind::kDeadlock, r, gtb_local_[g], k, -1,
                fmt::format("{}: stuck: {} ({} of {} steps of this threadblock finished)",
                            stepWhere(r, gtb_local_[g], k, step.type), reason, k, tb.steps.size()),
                mode_);
    }
    return any;
  }

  void reportLeftovers() {
    for (const auto& [key, conn] : connections_) {  // std::map: ordered by (src, dst, channel)
      const auto& [src, dst, channel] = key;
      for (const Message& message : conn.queue) {
        const Step& step = algorithm_.ranks[src].threadblocks[message.tb].steps[message.step];
        sink_.add(
            IssueKind::kPeerMismatch, src, message.tb, message.step, -1,
            fmt::format("{}: sends {} chunk(s) to rank {} on channel {} that no step of rank {} receives",
                        stepWhere(src, message.tb, message.step, step.type), message.data.size(), dst, channel, dst),
            mode_);
      }
    }
  }

  void checkPostcondition() {
    const int n = spec_.num_ranks;
    for (int r = 0; r < n; ++r) {
      for (int j = 0; j < spec_.outputChunks(); ++j) {
        const std::optional<ChunkValue> expected = spec_.expectedOutput(r, j);
        if (!expected) continue;
        const Value& actual = storage_[r][cellOf(r, BufferKind::kOutput, j)];
        if (actual.defined && actual.refs == *expected) continue;
        std::string message =
            fmt::format("rank {} output chunk {}: expected {} got {}", r, j, refsText(*expected), valueText(actual));
        const std::string twice = duplicatesText(actual);
        if (!twice.empty()) message += fmt::format(" ({} reduced more than once)", twice);
        sink_.add(IssueKind::kPostcondition, r, -1, -1, j, std::move(message), mode_);
      }
      if (!spec_.in_place) {
        // NCCL's sendbuff is const: an out-of-place call must leave the input as it found it.
        for (int i = 0; i < spec_.inputChunks(); ++i) {
          const Value& actual = storage_[r][cellOf(r, BufferKind::kInput, i)];
          if (actual.defined && actual.refs.size() == 1 && actual.refs[0] == ChunkRef{r, i}) continue;
          sink_.add(IssueKind::kPostcondition, r, -1, -1, -1,
                    fmt::format("rank {} input chunk {}: an out-of-place call must not modify its input: expected "
                                "{{({},{})}} got {}",
                                r, i, r, i, valueText(actual)),
                    mode_);
        }
      }
    }
  }

  const Algorithm& algorithm_;
  const CollectiveSpec& spec_;
  IssueSink& sink_;
  std::string mode_;

  std::vector<Layout> layout_;
  std::vector<std::vector<Value>> storage_;
  std::vector<std::vector<CellHistory>> history_;
  std::vector<int> tb_base_;                       // rank -> first global threadblock
  std::vector<int> gtb_rank_;                      // global threadblock -> rank
  std::vector<int> gtb_local_;                     // global threadblock -> threadblock id on its rank
  std::vector<int> pc_;                            // next step of each global threadblock
  std::vector<std::vector<int>> dependents_;       // global tb -> global tbs with a dependency on it
  std::map<ConnKey, std::vector<int>> receivers_;  // connection -> threadblocks that receive on it
  std::map<ConnKey, Connection> connections_;
  bool track_races_ = false;
  std::vector<Clock> clocks_;
  std::vector<std::vector<char>> is_target_;
  std::vector<std::vector<ClockPtr>> snapshots_;
  std::set<std::tuple<int, int, int, int, int>> reported_races_;
};

const char* modeName(bool in_place) { return in_place ? kModeInPlace : kModeOutOfPlace; }

// Static checks, then the replay; returns false when a problem makes checking another mode pointless.
bool verifyInto(const Algorithm& algorithm, const CollectiveSpec& spec, IssueSink& sink, bool run_static) {
  if (run_static) {
    if (!checkStructure(algorithm, spec, sink)) return false;
    if (!checkRanges(algorithm, sink)) return false;
  }
  int64_t moves = 0;
  for (const RankProgram& program : algorithm.ranks) {
    for (const Threadblock& tb : program.threadblocks) {
      for (const Step& step : tb.steps) moves += step.type == OpType::kNop ? 1 : step.count;
    }
  }
  if (moves > kMaxChunkMoves) {
    sink.add(IssueKind::kUnverifiable, -1, -1, -1, -1,
             fmt::format("not replayed: the steps move {} chunks in all, more than the verifier's limit of {}", moves,
                         kMaxChunkMoves),
             modeName(spec.in_place));
    return false;
  }
  Simulator(algorithm, spec, sink, modeName(spec.in_place)).run();
  return true;
}

VerifyReport finish(IssueSink& sink, std::vector<std::string> modes) {
  VerifyReport report;
  report.modes_checked = std::move(modes);
  report.total_issues = sink.total();
  report.issues = std::move(sink.issues());
  report.ok = report.total_issues == 0;
  return report;
}

}  // namespace

VerifyReport verify(const Algorithm& algorithm, const CollectiveSpec& spec) {
  IssueSink sink(VerifyOptions{}.max_issues);
  const Status valid = validateSpec(spec);
  if (!valid.isOk()) {
    sink.add(IssueKind::kStructure, -1, -1, -1, -1, fmt::format("invalid spec: {}", valid.message()), "");
    return finish(sink, {});
  }
  verifyInto(algorithm, spec, sink, /*run_static=*/true);
  return finish(sink, {modeName(spec.in_place)});
}

VerifyReport verify(const Algorithm& algorithm, const VerifyOptions& options) {
  IssueSink sink(options.max_issues);
  if (algorithm.collective == CollectiveKind::kCustom) {
    sink.add(IssueKind::kUnverifiable, -1, -1, -1, -1,
             fmt::format("algorithm '{}' implements collective '{}', which has no postcondition; nothing was proved",
                         algorithm.name, algorithm.collective_name.empty() ? "custom" : algorithm.collective_name),
             "");
    return finish(sink, {});
  }
  std::vector<bool> modes;
  if (algorithm.out_of_place) modes.push_back(false);
  if (algorithm.in_place) modes.push_back(true);
  if (modes.empty()) {
    sink.add(IssueKind::kStructure, -1, -1, -1, -1,
             fmt::format("algorithm '{}' declares neither in-place nor out-of-place use", algorithm.name), "");
    return finish(sink, {});
  }
  if (!options.all_modes) modes.resize(1);
  std::vector<std::string> checked;
  bool static_done = false;
  for (bool in_place : modes) {
    Result<CollectiveSpec> spec = algorithm.spec(in_place);
    if (!spec.isOk()) {
      sink.add(IssueKind::kStructure, -1, -1, -1, -1, spec.status().message(), "");
      break;  // the same failure would repeat in the other mode
    }
    checked.push_back(modeName(in_place));
    if (!verifyInto(algorithm, *spec, sink, /*run_static=*/!static_done)) break;
    static_done = true;
  }
  return finish(sink, checked);
}

}  // namespace braid
