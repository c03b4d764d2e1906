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
// Races are found with vector clocks (Lamport happens-before: program order within a threadblock,
// explicit dependencies, and send -> matching receive, transitively); two accesses to one storage chunk
// of a rank, at least one a write, from different threadblocks, race when neither clock dominates the
// other (FastTrack-style epochs: Flanagan & Freund, PLDI 2009). As in FastTrack, every chunk that has a
// race gets at least one report (the first conflicting pair found); a pair hidden behind a later ordered
// write to the same chunk is not reported separately.
//
// Only the clock components that a check can read are kept, which is what makes 1000-rank rings,
// recursive doubling and pairwise all-to-all cheap. A check compares an access with an earlier one by
// another threadblock of the same rank on a chunk both touch, one of them writing (or on a connection
// end both use), so only those threadblocks, the rank's candidates, need components. The replay runs
// first with rank-local clocks over the rank's candidates, propagated along program order and
// dependencies only (a subset of happens-before, so "ordered" there is final). If some check was not
// ordered that way, the replay runs again with global clocks over just the threadblocks those checks
// named, carried by every threadblock and message as well; the checked pairs are the same both times
// (the schedule does not depend on clocks), so both passes together decide every check exactly as full
// vector clocks over all threadblocks would. Values are ids in a DAG of reductions (see ValueArena), so
// a step costs O(count) however many elements its chunks hold.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
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
//
// A value is a node of a DAG kept in an arena: a leaf is one input chunk (r, i), an inner node is
// the reduction (multiset union) of two values. Copying a value copies its id and a reduction is
// O(1), so the replay costs O(steps x count) however large the reduced sets grow (a 1000-rank
// allreduce ends with 10^6 output chunks of 1000 elements each). Node ids grow with creation, so
// children always have smaller ids than their parent; flatten() uses that as a topological order.

constexpr int32_t kUndefined = -1;

uint64_t saturatingAdd(uint64_t a, uint64_t b) { return a + b < a ? UINT64_MAX : a + b; }

// An element of a value and how often it occurs (more than once: counted twice).
using Counted = std::pair<ChunkRef, uint64_t>;

class ValueArena {
 public:
  int32_t leaf(int rank, int index) {
    nodes_.push_back(Node{rank, index, 1});
    return static_cast<int32_t>(nodes_.size() - 1);
  }

  int32_t reduce(int32_t x, int32_t y) {
    if (x == kUndefined || y == kUndefined) return kUndefined;
    nodes_.push_back(Node{x, y, saturatingAdd(nodes_[x].size, nodes_[y].size)});
    return static_cast<int32_t>(nodes_.size() - 1);
  }

  uint64_t size(int32_t x) const { return nodes_[x].size; }
  bool isLeaf(int32_t x) const { return nodes_[x].size == 1; }  // a reduction has at least two elements
  ChunkRef leafRef(int32_t x) const { return ChunkRef{nodes_[x].a, nodes_[x].b}; }

  // The multiset of a defined value, sorted by element. Linear in the nodes reachable from x (not in
  // its size): multiplicities are pushed from x down to the leaves in decreasing id order.
  std::vector<Counted> flatten(int32_t x) {
    if (isLeaf(x)) return {Counted{leafRef(x), 1}};
    if (mult_.size() < nodes_.size()) {
      mult_.resize(nodes_.size(), 0);
      seen_.resize(nodes_.size(), 0);
    }
    if (++stamp_ == 0) {
      std::fill(seen_.begin(), seen_.end(), 0);
      stamp_ = 1;
    }
    std::vector<int32_t> inner;
    std::vector<int32_t> leaves;
    std::vector<int32_t> stack{x};
    seen_[x] = stamp_;
    bool tree = true;  // no node reachable twice: every element occurs once per path, no sort needed
    while (!stack.empty()) {
      const int32_t y = stack.back();
      stack.pop_back();
      if (isLeaf(y)) {
        leaves.push_back(y);
        continue;
      }
      inner.push_back(y);
      for (int32_t child : {nodes_[y].a, nodes_[y].b}) {
        if (seen_[child] != stamp_) {
          seen_[child] = stamp_;
          stack.push_back(child);
        } else {
          tree = false;
        }
      }
    }
    std::vector<Counted> out;
    out.reserve(leaves.size());
    if (tree) {
      for (int32_t y : leaves) out.push_back(Counted{leafRef(y), 1});
    } else {
      std::sort(inner.begin(), inner.end(), std::greater<>());
      mult_[x] = 1;
      for (int32_t y : inner) {
        mult_[nodes_[y].a] = saturatingAdd(mult_[nodes_[y].a], mult_[y]);
        mult_[nodes_[y].b] = saturatingAdd(mult_[nodes_[y].b], mult_[y]);
        mult_[y] = 0;
      }
      for (int32_t y : leaves) {
        out.push_back(Counted{leafRef(y), mult_[y]});
        mult_[y] = 0;
      }
    }
    std::sort(out.begin(), out.end(), [](const Counted& a, const Counted& b) { return a.first < b.first; });
    size_t kept = 0;  // one leaf per input chunk in practice; merge equal elements all the same
    for (size_t i = 0; i < out.size(); ++i) {
      if (kept > 0 && out[kept - 1].first == out[i].first) {
        out[kept - 1].second = saturatingAdd(out[kept - 1].second, out[i].second);
      } else {
        out[kept++] = out[i];
      }
    }
    out.resize(kept);
    return out;
  }

  // True when value x is exactly the multiset `expected` (compared as the sorted sequence).
  bool equals(int32_t x, const ChunkValue& expected) {
    if (x == kUndefined || size(x) != expected.size()) return false;
    if (isLeaf(x)) return expected[0] == leafRef(x);
    size_t i = 0;
    for (const auto& [ref, count] : flatten(x)) {
      for (uint64_t c = 0; c < count; ++c, ++i) {
        if (!(expected[i] == ref)) return false;
      }
    }
    return true;
  }

  std::string text(int32_t x) {
    if (x == kUndefined) return "undefined";
    std::string text = "{";
    for (const auto& [ref, count] : flatten(x)) {
      if (text.size() > 1) text += ",";
      text += fmt::format("({},{})", ref.rank, ref.index);
      if (count > 1) text += fmt::format("x{}", count);
    }
    return text + "}";
  }

  // Names the elements that occur more than once (double counting), or "" when none does.
  std::string duplicatesText(int32_t x) {
    std::string text;
    if (x == kUndefined) return text;
    for (const auto& [ref, count] : flatten(x)) {
      if (count < 2) continue;
      if (!text.empty()) text += ", ";
      text += fmt::format("({},{})", ref.rank, ref.index);
    }
    return text;
  }

 private:
  struct Node {
    int32_t a;      // leaf: rank; reduction: first operand
    int32_t b;      // leaf: index; reduction: second operand
    uint64_t size;  // number of elements counted with multiplicity (saturating)
  };
  std::vector<Node> nodes_;
  std::vector<uint64_t> mult_;
  std::vector<uint32_t> seen_;
  uint32_t stamp_ = 0;
};

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
  int maxIssues() const { return max_issues_; }
  std::vector<VerifyIssue>& issues() { return issues_; }

  // Adds everything `other` collected, as if it had been added here.
  void absorb(IssueSink& other) {
    for (VerifyIssue& issue : other.issues_) {
      ++total_;
      if (static_cast<int>(issues_.size()) < max_issues_) issues_.push_back(std::move(issue));
    }
    total_ += other.total_ - static_cast<int>(other.issues_.size());
  }

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
        auto where = [&] { return stepWhere(r, t, s, step.type); };  // formatted only on a finding
        if (step.type == OpType::kNop ? step.count < 0 : step.count < 1) {
          structure(r, t, s, fmt::format("{}: count must be >= 1, got {}", where(), step.count));
        }
        if (opSends(step.type) && tb.send_peer < 0) {
          structure(r, t, s, fmt::format("{}: sends but the threadblock has no send peer", where()));
        }
        if (opReceives(step.type) && tb.recv_peer < 0) {
          structure(r, t, s, fmt::format("{}: receives but the threadblock has no recv peer", where()));
        }
        for (const Dependency& dep : step.deps) {
          if (dep.tb < 0 || dep.tb >= num_tbs) {
            structure(r, t, s,
                      fmt::format("{}: depends on tb {}, which does not exist on rank {}", where(), dep.tb, r));
          } else if (dep.step < 0 || dep.step >= static_cast<int>(program.threadblocks[dep.tb].steps.size())) {
            structure(r, t, s,
                      fmt::format("{}: depends on tb {} step {}, which does not exist (tb {} has {} steps)", where(),
                                  dep.tb, dep.step, dep.tb, program.threadblocks[dep.tb].steps.size()));
          } else if (dep.tb == t && dep.step >= s) {
            structure(r, t, s,
                      fmt::format("{}: depends on step {} of its own threadblock, which runs after it (deadlock)",
                                  where(), dep.step));
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
  auto check = [&](int rank, int tb, int step, const auto& where, const char* role, BufferKind b, int offset, int count,
                   const RankProgram& program) {
    const int64_t size = declaredChunks(program, b);
    if (offset < 0 || int64_t{offset} + count > size) {
      sink.add(IssueKind::kOutOfRange, rank, tb, step, offset,
               fmt::format("{}: {} {}[{}..{}) is outside the {}={})", where(), role, bufferName(b), offset,
                           int64_t{offset} + count, bufferLongName(b), size),
               "");
    }
  };
  for (const RankProgram& program : algorithm.ranks) {
    const int r = program.rank;
    for (size_t p = 0; p < program.precopies.size(); ++p) {
      const PreCopy& copy = program.precopies[p];
      auto where = [&] { return fmt::format("rank {} copy {}", r, p); };
      check(r, -1, -1, where, "src", BufferKind::kInput, copy.input_off, copy.count, program);
      check(r, -1, -1, where, "dst", BufferKind::kOutput, copy.output_off, copy.count, program);
    }
    for (size_t t = 0; t < program.threadblocks.size(); ++t) {
      const Threadblock& tb = program.threadblocks[t];
      for (size_t s = 0; s < tb.steps.size(); ++s) {
        const Step& step = tb.steps[s];
        auto where = [&] { return stepWhere(r, static_cast<int>(t), static_cast<int>(s), step.type); };
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

void joinInto(int32_t* into, const int32_t* other, size_t size) {
  for (size_t i = 0; i < size; ++i) into[i] = std::max(into[i], other[i]);
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

// A message in flight; slots of a pool, linked in FIFO order per connection (or in the free list).
struct Message {
  int32_t next = -1;
  int32_t tb = -1;
  int32_t step = -1;
  std::vector<int32_t> data;  // value ids; the capacity stays with the slot for the next message
  Clock clock;                // the sender's global clock (empty when no global components are kept)
};

struct Connection {
  int32_t head = -1;  // oldest message in flight
  int32_t tail = -1;
  int32_t last_send_gtb = -1;  // the threadblock that last sent / received on it, and its step
  int32_t last_send_step = -1;
  int32_t last_recv_gtb = -1;
  int32_t last_recv_step = -1;
};

// Compressed adjacency lists: the items of list i are items[start[i] .. start[i + 1]).
struct Lists {
  std::vector<int64_t> start{0};
  std::vector<int32_t> items;
  const int32_t* begin(size_t i) const { return items.data() + start[i]; }
  const int32_t* end(size_t i) const { return items.data() + start[i + 1]; }
};

class Simulator {
 public:
  // `global` is null on the first pass, which orders the accesses of one rank by that rank's own
  // dependency chains only and records which threadblocks it could not order that way; the second
  // pass also keeps clock components for those threadblocks (`global`), carried by every message.
  Simulator(const Algorithm& algorithm, const CollectiveSpec& spec, IssueSink& sink, std::string mode,
            const std::vector<int>* global)
      : algorithm_(algorithm), spec_(spec), sink_(sink), mode_(std::move(mode)), global_(global) {}

  void run() {
    setUp();
    std::deque<int> work;
    std::vector<char> queued(gtb_rank_.size(), 1);
    for (size_t g = 0; g < gtb_rank_.size(); ++g) work.push_back(static_cast<int>(g));
    while (!work.empty()) {
      const int g = work.front();
      work.pop_front();
      queued[g] = 0;
      // Waking a threadblock that is already queued does nothing and nothing leaves the queue while g
      // runs, so its dependents and receivers need waking once per run of g, not once per step.
      bool woke_dependents = false;
      bool woke_receivers = false;
      while (runnable(g)) {
        const bool sent = execute(g);
        if (!woke_dependents) {
          woke_dependents = true;
          for (const int32_t* w = dependents_.begin(g); w != dependents_.end(g); ++w) {
            if (!queued[*w]) queued[*w] = 1, work.push_back(*w);
          }
        }
        if (sent && !woke_receivers) {
          woke_receivers = true;
          for (const int32_t* w = receivers_.begin(send_conn_[g]); w != receivers_.end(send_conn_[g]); ++w) {
            if (!queued[*w]) queued[*w] = 1, work.push_back(*w);
          }
        }
      }
    }
    const bool deadlocked = reportDeadlocks();
    reportLeftovers();
    if (!deadlocked) checkPostcondition();
  }

  // Threadblocks (global ids, sorted) whose accesses the first pass could not order through their
  // own rank's dependency chains; empty when every conflict was decided.
  std::vector<int> unresolved() const {
    std::vector<int> out;
    for (size_t g = 0; g < unresolved_.size(); ++g) {
      if (unresolved_[g]) out.push_back(static_cast<int>(g));
    }
    return out;
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

  const Threadblock& tbOf(int g) const { return algorithm_.ranks[gtb_rank_[g]].threadblocks[gtb_local_[g]]; }

  // Calls fn(cell, writes) for every storage chunk step `step` of rank r touches, as execute() does.
  template <typename Fn>
  void forEachAccess(int r, const Step& step, Fn&& fn) const {
    auto range = [&](BufferKind b, int offset, bool writes) {
      for (int i = 0; i < step.count; ++i) fn(cellOf(r, b, offset + i), writes);
    };
    if (opReadsSrc(step.type)) range(step.src_buf, step.src_off, false);
    if (step.type == OpType::kReduce) range(step.dst_buf, step.dst_off, false);
    if (opWritesDst(step.type)) range(step.dst_buf, step.dst_off, true);
  }

  void setUp() {
    const int n = spec_.num_ranks;
    const int in = spec_.inputChunks();
    const int out = spec_.outputChunks();
    layout_.resize(n);
    storage_.resize(n);
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
      storage_[r].assign(l.size, kUndefined);
      for (int i = 0; i < in; ++i) storage_[r][cellOf(r, BufferKind::kInput, i)] = values_.leaf(r, i);
      for (const PreCopy& copy : program.precopies) {
        std::vector<int32_t> values;
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
    step_base_.assign(num_gtb + 1, 0);
    std::vector<ConnKey> keys;
    std::vector<int64_t> dep_count(num_gtb + 1, 0);
    for (size_t g = 0; g < num_gtb; ++g) {
      const Threadblock& tb = tbOf(static_cast<int>(g));
      const int r = gtb_rank_[g];
      step_base_[g + 1] = step_base_[g] + static_cast<int64_t>(tb.steps.size());
      if (tb.send_peer >= 0) keys.emplace_back(r, tb.send_peer, tb.channel);
      if (tb.recv_peer >= 0) keys.emplace_back(tb.recv_peer, r, tb.channel);
      for (const Step& step : tb.steps) {
        if (opSends(step.type)) ++send_count_;
        for (const Dependency& dep : step.deps) ++dep_count[tb_base_[r] + dep.tb + 1];
      }
    }
    // dependents_: global tb -> the global tbs that depend on one of its steps, sorted, no repeats.
    for (size_t g = 0; g < num_gtb; ++g) dep_count[g + 1] += dep_count[g];
    std::vector<int32_t> raw(dep_count[num_gtb]);
    std::vector<int64_t> fill(dep_count.begin(), dep_count.end() - 1);
    for (size_t g = 0; g < num_gtb; ++g) {
      const int r = gtb_rank_[g];
      for (const Step& step : tbOf(static_cast<int>(g)).steps) {
        for (const Dependency& dep : step.deps) raw[fill[tb_base_[r] + dep.tb]++] = static_cast<int32_t>(g);
      }
    }
    dependents_.start.assign(num_gtb + 1, 0);
    for (size_t g = 0; g < num_gtb; ++g) {
      auto first = raw.begin() + dep_count[g];
      auto last = raw.begin() + dep_count[g + 1];
      std::sort(first, last);
      last = std::unique(first, last);
      dependents_.items.insert(dependents_.items.end(), first, last);
      dependents_.start[g + 1] = static_cast<int64_t>(dependents_.items.size());
    }
    raw = {};
    // Connections get ids in (source, destination, channel) order.
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    conn_keys_ = std::move(keys);
    connections_.resize(conn_keys_.size());
    send_conn_.assign(num_gtb, -1);
    recv_conn_.assign(num_gtb, -1);
    auto connId = [&](int src, int dst, int channel) {
      return static_cast<int32_t>(std::lower_bound(conn_keys_.begin(), conn_keys_.end(), ConnKey{src, dst, channel}) -
                                  conn_keys_.begin());
    };
    receivers_.start.assign(conn_keys_.size() + 1, 0);
    for (size_t g = 0; g < num_gtb; ++g) {
      const Threadblock& tb = tbOf(static_cast<int>(g));
      const int r = gtb_rank_[g];
      if (tb.send_peer >= 0) send_conn_[g] = connId(r, tb.send_peer, tb.channel);
      if (tb.recv_peer >= 0) {
        recv_conn_[g] = connId(tb.recv_peer, r, tb.channel);
        ++receivers_.start[recv_conn_[g] + 1];
      }
    }
    // receivers_: connection -> the threadblocks that receive on it, in global id order.
    for (size_t c = 0; c < conn_keys_.size(); ++c) receivers_.start[c + 1] += receivers_.start[c];
    receivers_.items.resize(receivers_.start.back());
    fill.assign(receivers_.start.begin(), receivers_.start.end() - 1);
    for (size_t g = 0; g < num_gtb; ++g) {
      if (recv_conn_[g] >= 0) receivers_.items[fill[recv_conn_[g]]++] = static_cast<int32_t>(g);
    }
    // Dependency targets: the steps whose clocks are kept for the steps that wait on them.
    snap_slot_.assign(step_base_[num_gtb], -1);
    target_count_ = 0;
    for (size_t g = 0; g < num_gtb; ++g) {
      const int r = gtb_rank_[g];
      for (const Step& step : tbOf(static_cast<int>(g)).steps) {
        for (const Dependency& dep : step.deps) {
          int32_t& slot = snap_slot_[step_base_[tb_base_[r] + dep.tb] + dep.step];
          if (slot < 0) slot = static_cast<int32_t>(target_count_++);
        }
      }
    }
    setUpRaceTracking();
  }

  // Races exist only between two threadblocks of one rank that touch one storage chunk, at least one
  // of them writing, or that share one end of a connection. Only those threadblocks (the rank's
  // candidates) get clock components: ordered by the rank's own program order and dependencies (local
  // clocks, never sent), and on the second pass by whatever path through other ranks (global clocks,
  // carried by messages) for the candidates the first pass could not order locally.
  void setUpRaceTracking() {
    const int n = spec_.num_ranks;
    const size_t num_gtb = gtb_rank_.size();
    track_races_ = true;
    local_index_.assign(num_gtb, -1);
    local_size_.assign(n, 0);
    hist_index_.assign(n, {});
    int64_t local_cells = 0;
    int64_t local_candidates = 0;
    std::vector<int32_t> first;                   // cell -> first threadblock that touches it
    std::vector<uint8_t> shared;                  // cell -> bit 0: touched by two threadblocks, bit 1: written
    std::vector<std::tuple<int, int, int>> ends;  // (peer, channel, tb) per connection end used
    for (int r = 0; r < n; ++r) {
      const RankProgram& program = algorithm_.ranks[r];
      const int num_tbs = static_cast<int>(program.threadblocks.size());
      first.assign(layout_[r].size, -1);
      shared.assign(layout_[r].size, 0);
      for (int t = 0; t < num_tbs; ++t) {
        for (const Step& step : program.threadblocks[t].steps) {
          forEachAccess(r, step, [&](int cell, bool writes) {
            if (first[cell] < 0) {
              first[cell] = t;
            } else if (first[cell] != t) {
              shared[cell] |= 1;
            }
            if (writes) shared[cell] |= 2;
          });
        }
      }
      std::vector<char> candidate(num_tbs, 0);
      if (std::find(shared.begin(), shared.end(), 3) != shared.end()) {
        hist_index_[r].assign(layout_[r].size, -1);
        for (int cell = 0; cell < layout_[r].size; ++cell) {
          if (shared[cell] == 3) hist_index_[r][cell] = static_cast<int32_t>(history_.size()), history_.emplace_back();
        }
        for (int t = 0; t < num_tbs; ++t) {
          for (const Step& step : program.threadblocks[t].steps) {
            forEachAccess(r, step, [&](int cell, bool) {
              if (hist_index_[r][cell] >= 0) candidate[t] = 1;
            });
          }
        }
      }
      // Threadblocks that send on one connection, then those that receive on one.
      for (bool sending : {true, false}) {
        ends.clear();
        for (int t = 0; t < num_tbs; ++t) {
          const Threadblock& tb = program.threadblocks[t];
          const bool uses = std::any_of(tb.steps.begin(), tb.steps.end(), [&](const Step& step) {
            return sending ? opSends(step.type) : opReceives(step.type);
          });
          if (uses) ends.emplace_back(sending ? tb.send_peer : tb.recv_peer, tb.channel, t);
        }
        std::sort(ends.begin(), ends.end());
        for (size_t i = 0; i + 1 < ends.size(); ++i) {
          if (std::get<0>(ends[i]) == std::get<0>(ends[i + 1]) && std::get<1>(ends[i]) == std::get<1>(ends[i + 1])) {
            candidate[std::get<2>(ends[i])] = 1;
            candidate[std::get<2>(ends[i + 1])] = 1;
          }
        }
      }
      int k = 0;
      for (int t = 0; t < num_tbs; ++t) {
        if (candidate[t]) local_index_[tb_base_[r] + t] = k++;
      }
      local_size_[r] = k;
      if (k > 0) {
        int64_t targets = 0;
        for (int64_t s = step_base_[tb_base_[r]]; s < step_base_[tb_base_[r] + num_tbs]; ++s)
          targets += snap_slot_[s] >= 0;
        local_candidates += k;
        local_cells += int64_t{k} * (num_tbs + targets);
      }
    }
    if (local_cells > kMaxClockCells) {
      disableRaceTracking(fmt::format(
          "race check not done: {} threadblocks share a chunk or a connection with another threadblock of their "
          "rank, and ordering them needs more than the verifier's limit of {} vector-clock entries; races were "
          "not looked for",
          local_candidates, kMaxClockCells));
      return;
    }
    if (global_ && !global_->empty()) {
      global_size_ = static_cast<int>(global_->size());
      const int64_t global_cells =
          int64_t{global_size_} * (static_cast<int64_t>(num_gtb) + target_count_ + send_count_);
      if (global_cells > kMaxClockCells) {
        disableRaceTracking(fmt::format(
            "race check not done: {} threadblocks touch chunks that another threadblock of their rank touches and "
            "are not ordered by their rank's own dependencies; ordering them through the other ranks over {} "
            "threadblocks and {} sends needs more than the verifier's limit of {} vector-clock entries; races were "
            "not looked for",
            global_size_, num_gtb, send_count_, kMaxClockCells));
        return;
      }
      global_index_.assign(num_gtb, -1);
      for (int i = 0; i < global_size_; ++i) global_index_[(*global_)[i]] = i;
      global_clocks_.assign(static_cast<size_t>(global_size_) * num_gtb, 0);
      global_snaps_.assign(static_cast<size_t>(global_size_) * target_count_, 0);
    }
    unresolved_.assign(num_gtb, 0);
    // Local clocks and snapshots, laid out one after another; empty for ranks without candidates.
    local_offset_.assign(num_gtb, 0);
    local_snap_offset_.assign(target_count_, 0);
    size_t clocks = 0;
    size_t snaps = 0;
    for (size_t g = 0; g < num_gtb; ++g) {
      const int k = local_size_[gtb_rank_[g]];
      local_offset_[g] = clocks;
      clocks += k;
      for (int64_t s = step_base_[g]; s < step_base_[g + 1]; ++s) {
        if (snap_slot_[s] >= 0) local_snap_offset_[snap_slot_[s]] = snaps, snaps += k;
      }
    }
    local_clocks_.assign(clocks, 0);
    local_snaps_.assign(snaps, 0);
  }

  void disableRaceTracking(std::string message) {
    track_races_ = false;
    history_.clear();
    hist_index_.assign(spec_.num_ranks, {});
    sink_.add(IssueKind::kUnverifiable, -1, -1, -1, -1, std::move(message), mode_);
  }

  int32_t* localClock(int g) { return local_clocks_.data() + local_offset_[g]; }
  int32_t* globalClock(int g) { return global_clocks_.data() + static_cast<size_t>(global_size_) * g; }

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
    if (opReceives(step.type) && connections_[recv_conn_[g]].head < 0) return false;
    return true;
  }

  // Whether the access of threadblock `earlier` at `epoch` happens before the current step of
  // threadblock `later` (same rank).
  bool ordered(int later, int earlier, int32_t epoch) {
    if (earlier < 0) return true;
    const int local = local_index_[earlier];
    if (local >= 0 && localClock(later)[local] >= epoch) return true;
    if (!global_index_.empty() && global_index_[earlier] >= 0) {
      return globalClock(later)[global_index_[earlier]] >= epoch;
    }
    if (!global_) unresolved_[earlier] = 1;  // first pass: decided by the second one
    return false;
  }

  void setEpoch(int g, int32_t epoch) {
    if (local_index_[g] >= 0) localClock(g)[local_index_[g]] = epoch;
    if (!global_index_.empty() && global_index_[g] >= 0) globalClock(g)[global_index_[g]] = epoch;
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

  // The read of threadblock `gtb` in h.reads, if any. The first few are scanned; a cell read by many
  // threadblocks keeps the positions of the others in read_slot_ (validated, since a write clears reads).
  static constexpr size_t kScannedReads = 8;
  static uint64_t readKey(int hist, int gtb) {
    return (uint64_t{static_cast<uint32_t>(hist)} << 32) | static_cast<uint32_t>(gtb);
  }

  Access* findRead(int hist, CellHistory& h, int gtb) {
    const size_t scanned = std::min(h.reads.size(), kScannedReads);
    for (size_t i = 0; i < scanned; ++i) {
      if (h.reads[i].gtb == gtb) return &h.reads[i];
    }
    if (h.reads.size() <= kScannedReads) return nullptr;
    auto it = read_slot_.find(readKey(hist, gtb));
    if (it != read_slot_.end() && it->second < h.reads.size() && h.reads[it->second].gtb == gtb) {
      return &h.reads[it->second];
    }
    return nullptr;
  }

  void noteRead(int rank, int hist, const Access& access) {
    CellHistory& h = history_[hist];
    const Access& w = h.last_write;
    if (w.gtb >= 0 && w.gtb != access.gtb && !ordered(access.gtb, w.gtb, w.epoch)) {
      reportRace(rank, w, true, access, false);
    }
    if (Access* mine = findRead(hist, h, access.gtb)) {
      *mine = access;
      return;
    }
    if (h.reads.size() >= kScannedReads) read_slot_[readKey(hist, access.gtb)] = h.reads.size();
    h.reads.push_back(access);
  }

  void noteWrite(int rank, int hist, const Access& access) {
    CellHistory& h = history_[hist];
    const Access& w = h.last_write;
    if (w.gtb >= 0 && w.gtb != access.gtb && !ordered(access.gtb, w.gtb, w.epoch)) {
      reportRace(rank, w, true, access, true);
    }
    for (const Access& read : h.reads) {
      if (read.gtb != access.gtb && !ordered(access.gtb, read.gtb, read.epoch)) {
        reportRace(rank, read, false, access, true);
      }
    }
    h.reads.clear();
    h.last_write = access;
  }

  // Connection FIFO order is only well defined when the threadblocks sharing one end are ordered.
  void noteConnectionUse(int32_t& last_gtb, int32_t& last_step, int g, int k, int rank, const char* what, int peer,
                         int channel) {
    if (last_gtb >= 0 && last_gtb != g && !ordered(g, last_gtb, last_step + 1)) {
      sink_.add(IssueKind::kRace, rank, gtb_local_[g], k, -1,
                fmt::format("rank {}: tb {} step {} and tb {} step {} both {} rank {} on channel {} with no ordering "
                            "between them, so the FIFO order of their messages is undefined",
                            rank, gtb_local_[last_gtb], last_step, gtb_local_[g], k, what, peer, channel),
                mode_);
    }
    last_gtb = g;
    last_step = k;
  }

  // Runs the next step of global threadblock g; returns whether it sent.
  bool execute(int g) {
    const int r = gtb_rank_[g];
    const int t = gtb_local_[g];
    const Threadblock& tb = tbOf(g);
    const int k = pc_[g];
    const Step& step = tb.steps[k];
    const int count = step.count;

    const bool track = track_races_;
    const bool track_global = track && global_size_ > 0;
    const size_t local_size = local_size_[r];
    if (track) {
      for (const Dependency& dep : step.deps) {
        const int32_t slot = snap_slot_[step_base_[tb_base_[r] + dep.tb] + dep.step];
        joinInto(localClock(g), local_snaps_.data() + local_snap_offset_[slot], local_size);
        if (track_global) {
          joinInto(globalClock(g), global_snaps_.data() + static_cast<size_t>(global_size_) * slot, global_size_);
        }
      }
    }

    if (opReceives(step.type)) {
      Connection& conn = connections_[recv_conn_[g]];
      const int32_t id = conn.head;
      Message& message = messages_[id];
      conn.head = message.next;
      if (conn.head < 0) conn.tail = -1;
      if (track_global) joinInto(globalClock(g), message.clock.data(), global_size_);
      if (static_cast<int>(message.data.size()) != count) {
        sink_.add(IssueKind::kPeerMismatch, r, t, k, -1,
                  fmt::format("{}: receives {} chunk(s) but the matching send, rank {} tb {} step {}, sent {}",
                              stepWhere(r, t, k, step.type), count, tb.recv_peer, message.tb, message.step,
                              message.data.size()),
                  mode_);
      }
      received_.assign(count, kUndefined);  // missing chunks arrive undefined
      std::copy_n(message.data.begin(), std::min<size_t>(count, message.data.size()), received_.begin());
      message.next = free_message_;
      free_message_ = id;
      if (track) {
        setEpoch(g, k + 1);
        noteConnectionUse(conn.last_recv_gtb, conn.last_recv_step, g, k, r, "receive from", tb.recv_peer, tb.channel);
      }
    }
    if (track) setEpoch(g, k + 1);

    const std::vector<int32_t>& hist = hist_index_[r];
    std::vector<int32_t>& cells = storage_[r];
    auto readRange = [&](BufferKind b, int offset, std::vector<int32_t>& values) {
      values.resize(count);
      for (int i = 0; i < count; ++i) {
        const int cell = cellOf(r, b, offset + i);
        if (track && !hist.empty() && hist[cell] >= 0) noteRead(r, hist[cell], Access{g, k + 1, t, k, b, offset + i});
        values[i] = cells[cell];
      }
    };
    auto writeRange = [&](BufferKind b, int offset, const std::vector<int32_t>& values) {
      for (int i = 0; i < count; ++i) {
        const int cell = cellOf(r, b, offset + i);
        if (track && !hist.empty() && hist[cell] >= 0) noteWrite(r, hist[cell], Access{g, k + 1, t, k, b, offset + i});
        cells[cell] = values[i];
      }
    };
    auto combine = [&](const std::vector<int32_t>& a, const std::vector<int32_t>& b, std::vector<int32_t>& out) {
      out.resize(count);
      for (int i = 0; i < count; ++i) out[i] = values_.reduce(a[i], b[i]);
    };

    const std::vector<int32_t>* outgoing = nullptr;
    switch (step.type) {
      case OpType::kSend:
        readRange(step.src_buf, step.src_off, src_);
        outgoing = &src_;
        break;
      case OpType::kRecv: writeRange(step.dst_buf, step.dst_off, received_); break;
      case OpType::kRecvCopySend:
        writeRange(step.dst_buf, step.dst_off, received_);
        outgoing = &received_;
        break;
      case OpType::kRecvReduceSend:
        readRange(step.src_buf, step.src_off, src_);
        combine(src_, received_, result_);
        outgoing = &result_;
        break;
      case OpType::kRecvReduceCopy:
        readRange(step.src_buf, step.src_off, src_);
        combine(src_, received_, result_);
        writeRange(step.dst_buf, step.dst_off, result_);
        break;
      case OpType::kRecvReduceCopySend:
        readRange(step.src_buf, step.src_off, src_);
        combine(src_, received_, result_);
        writeRange(step.dst_buf, step.dst_off, result_);
        outgoing = &result_;
        break;
      case OpType::kCopy:
        readRange(step.src_buf, step.src_off, src_);
        writeRange(step.dst_buf, step.dst_off, src_);
        break;
      case OpType::kReduce:
        // src is read before dst, the order the verifier has always reported conflicting reads in.
        readRange(step.src_buf, step.src_off, src_);
        readRange(step.dst_buf, step.dst_off, dst_);
        combine(dst_, src_, result_);
        writeRange(step.dst_buf, step.dst_off, result_);
        break;
      case OpType::kNop: break;
    }

    if (outgoing) {
      Connection& conn = connections_[send_conn_[g]];
      if (track)
        noteConnectionUse(conn.last_send_gtb, conn.last_send_step, g, k, r, "send to", tb.send_peer, tb.channel);
      int32_t id = free_message_;
      if (id >= 0) {
        free_message_ = messages_[id].next;
      } else {
        id = static_cast<int32_t>(messages_.size());
        messages_.emplace_back();
      }
      Message& message = messages_[id];
      message.next = -1;
      message.tb = t;
      message.step = k;
      message.data.assign(outgoing->begin(), outgoing->end());
      if (track_global) message.clock.assign(globalClock(g), globalClock(g) + global_size_);
      if (conn.tail >= 0) {
        messages_[conn.tail].next = id;
      } else {
        conn.head = id;
      }
      conn.tail = id;
    }
    const int32_t slot = snap_slot_[step_base_[g] + k];
    if (track && slot >= 0) {
      std::copy_n(localClock(g), local_size, local_snaps_.data() + local_snap_offset_[slot]);
      if (track_global) {
        std::copy_n(globalClock(g), global_size_, global_snaps_.data() + static_cast<size_t>(global_size_) * slot);
      }
    }
    ++pc_[g];
    return outgoing != nullptr;
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
    for (size_t c = 0; c < connections_.size(); ++c) {  // ids follow (src, dst, channel) order
      const auto& [src, dst, channel] = conn_keys_[c];
      for (int32_t id = connections_[c].head; id >= 0; id = messages_[id].next) {
        const Message& message = messages_[id];
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
    // An allreduce expects the same value of output chunk j on every rank: build it once per chunk and
    // remember the value that matched it, which a ring or tree copies to every rank unchanged.
    const bool same_on_every_rank = spec_.kind == CollectiveKind::kAllReduce;
    std::vector<std::optional<ChunkValue>> expected_by_chunk;
    std::vector<int32_t> matched_by_chunk;
    if (same_on_every_rank) matched_by_chunk.assign(spec_.outputChunks(), kUndefined);
    for (int r = 0; r < n; ++r) {
      for (int j = 0; j < spec_.outputChunks(); ++j) {
        std::optional<ChunkValue> own;
        const std::optional<ChunkValue>* expected = &own;
        if (same_on_every_rank) {
          if (r == 0) expected_by_chunk.push_back(spec_.expectedOutput(r, j));
          expected = &expected_by_chunk[j];
        } else {
          own = spec_.expectedOutput(r, j);
        }
        if (!*expected) continue;
        const int32_t actual = storage_[r][cellOf(r, BufferKind::kOutput, j)];
        if (actual != kUndefined && same_on_every_rank && matched_by_chunk[j] == actual) continue;
        if (values_.equals(actual, **expected)) {
          if (same_on_every_rank) matched_by_chunk[j] = actual;
          continue;
        }
        std::string message = fmt::format("rank {} output chunk {}: expected {} got {}", r, j, refsText(**expected),
                                          values_.text(actual));
        const std::string twice = values_.duplicatesText(actual);
        if (!twice.empty()) message += fmt::format(" ({} reduced more than once)", twice);
        sink_.add(IssueKind::kPostcondition, r, -1, -1, j, std::move(message), mode_);
      }
      if (!spec_.in_place) {
        // NCCL's sendbuff is const: an out-of-place call must leave the input as it found it.
        for (int i = 0; i < spec_.inputChunks(); ++i) {
          const int32_t actual = storage_[r][cellOf(r, BufferKind::kInput, i)];
          if (actual != kUndefined && values_.isLeaf(actual) && values_.leafRef(actual) == ChunkRef{r, i}) continue;
          sink_.add(IssueKind::kPostcondition, r, -1, -1, -1,
                    fmt::format("rank {} input chunk {}: an out-of-place call must not modify its input: expected "
                                "{{({},{})}} got {}",
                                r, i, r, i, values_.text(actual)),
                    mode_);
        }
      }
    }
  }

  const Algorithm& algorithm_;
  const CollectiveSpec& spec_;
  IssueSink& sink_;
  std::string mode_;
  const std::vector<int>* global_;

  ValueArena values_;
  std::vector<Layout> layout_;
  std::vector<std::vector<int32_t>> storage_;  // rank -> cell -> value id
  std::vector<int> tb_base_;                   // rank -> first global threadblock
  std::vector<int> gtb_rank_;                  // global threadblock -> rank
  std::vector<int> gtb_local_;                 // global threadblock -> threadblock id on its rank
  std::vector<int64_t> step_base_;             // global threadblock -> index of its first step over all
  std::vector<int> pc_;                        // next step of each global threadblock
  Lists dependents_;                           // global tb -> global tbs with a dependency on it
  std::vector<ConnKey> conn_keys_;             // connection id -> (src, dst, channel), sorted
  std::vector<Connection> connections_;
  Lists receivers_;                 // connection id -> threadblocks that receive on it
  std::vector<int32_t> send_conn_;  // global tb -> connection it sends on, or -1
  std::vector<int32_t> recv_conn_;  // global tb -> connection it receives on, or -1
  std::vector<Message> messages_;   // pool of message slots
  int32_t free_message_ = -1;
  std::vector<int32_t> received_, src_, dst_, result_;  // per-step scratch
  std::vector<int32_t> snap_slot_;                      // step (over all) -> its snapshot slot, or -1
  int64_t target_count_ = 0;                            // steps some dependency names
  int64_t send_count_ = 0;

  bool track_races_ = false;
  std::vector<std::vector<int32_t>> hist_index_;  // rank -> cell -> history_ index, or -1 (no conflict possible)
  std::vector<CellHistory> history_;
  std::unordered_map<uint64_t, size_t> read_slot_;
  std::vector<int> local_size_;            // rank -> number of its candidates
  std::vector<int> local_index_;           // global tb -> component in its rank's local clocks, or -1
  std::vector<size_t> local_offset_;       // global tb -> its local clock in local_clocks_
  std::vector<int32_t> local_clocks_;      // every threadblock's clock over its rank's candidates
  std::vector<size_t> local_snap_offset_;  // snapshot slot -> its local clock in local_snaps_
  std::vector<int32_t> local_snaps_;       // local clock after each dependency target
  int global_size_ = 0;                    // second pass: candidates ordered through other ranks
  std::vector<int> global_index_;          // global tb -> global component, or -1 (empty on the first pass)
  std::vector<int32_t> global_clocks_;     // global_size_ entries per global tb
  std::vector<int32_t> global_snaps_;      // global_size_ entries per snapshot slot
  std::vector<char> unresolved_;           // first pass: global tb -> an access of it was not ordered locally
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
  // First pass: conflicts decided by each rank's own dependency chains. Only when some were not (they
  // may still be ordered through other ranks, or race) is the replay repeated with global clocks for
  // the threadblocks involved; the first pass's findings are then dropped.
  IssueSink first_sink(sink.maxIssues());
  std::vector<int> unresolved;
  {
    Simulator first(algorithm, spec, first_sink, modeName(spec.in_place), nullptr);
    first.run();
    unresolved = first.unresolved();
  }
  if (unresolved.empty()) {
    sink.absorb(first_sink);
  } else {
    Simulator(algorithm, spec, sink, modeName(spec.in_place), &unresolved).run();
  }
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
