// The verifier's parts (src/ir/verify*.cc), private to braid_ir:
//
//   verify_structure.cc  static checks: structure (ids, peers, channels, counts, dependencies) and ranges;
//                        checkAlgorithmStructure() (include/braid/algorithm.h) is the same checks as a Status
//   verify_replay.cc     symbolic values (ValueArena) and the replay in FIFO order (Simulator): pairing,
//                        deadlocks, the postcondition
//   verify_races.cc      the Simulator's race detection: vector clocks over the threadblocks that can race
//   verify.cc            verify(): the static checks, then one or two replays per mode
//
// verify.cc's top comment gives the execution model and the race-detection scheme.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "braid/algorithm.h"
#include "braid/collective.h"

namespace braid::verifier {

// Limits that keep malformed inputs from exhausting memory; real algorithms are far below them.
inline constexpr int64_t kMaxStorageCells = kMaxVerifiedChunks;  // chunk cells over all ranks (algorithm.h)
inline constexpr int64_t kMaxClockCells = int64_t{1} << 26;      // vector-clock entries kept for race checks
inline constexpr int64_t kMaxChunkMoves = int64_t{1} << 28;      // sum of step counts replayed per mode

inline constexpr const char* kModeInPlace = "in-place";
inline constexpr const char* kModeOutOfPlace = "out-of-place";

// ---- symbolic values -------------------------------------------------------------------------
//
// A value is a node of a DAG kept in an arena: a leaf is one input chunk (r, i), an inner node is
// the reduction (multiset union) of two values. Copying a value copies its id and a reduction is
// O(1), so the replay costs O(steps x count) however large the reduced sets grow (a 1000-rank
// allreduce ends with 10^6 output chunks of 1000 elements each). Node ids grow with creation, so
// children always have smaller ids than their parent; flatten() uses that as a topological order.

inline constexpr int32_t kUndefined = -1;
inline uint64_t saturatingAdd(uint64_t a, uint64_t b) { return a + b < a ? UINT64_MAX : a + b; }

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
  std::vector<Counted> flatten(int32_t x);

  // True when value x is exactly the multiset `expected` (compared as the sorted sequence).
  bool equals(int32_t x, const ChunkValue& expected);

  std::string text(int32_t x);

  // Names the elements that occur more than once (double counting), or "" when none does.
  std::string duplicatesText(int32_t x);

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

/// A sorted multiset of chunk references as "{(r,i),(r,i)x2}".
std::string refsText(const std::vector<ChunkRef>& refs);

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
/// "rank R tb T step S (op)", the prefix of every finding about a step.
std::string stepWhere(int rank, int tb, int step, OpType type);

// ---- static checks (verify_structure.cc; the same for both modes) ------------------------------

/// Adds a kStructure issue per malformed element; true when there was none, so the program is well-formed
/// enough to replay.
bool checkStructure(const Algorithm& algorithm, const CollectiveSpec& spec, IssueSink& sink);
/// Adds a kStructure issue when the buffers of all ranks together exceed kMaxStorageCells chunks (the replay
/// keeps one cell per chunk); true when they do not. Needs algorithm.ranks.size() == spec.num_ranks.
bool checkStorageLimit(const Algorithm& algorithm, const CollectiveSpec& spec, IssueSink& sink);
/// Adds a kOutOfRange issue per range outside its declared buffer; true when there was none.
bool checkRanges(const Algorithm& algorithm, IssueSink& sink);

// ---- the replay (verify_replay.cc, races in verify_races.cc) ------------------------------------

using Clock = std::vector<int32_t>;

inline void joinInto(int32_t* into, const int32_t* other, size_t size) {
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

  void run();

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

  void setUp();

  // Races exist only between two threadblocks of one rank that touch one storage chunk, at least one
  // of them writing, or that share one end of a connection. Only those threadblocks (the rank's
  // candidates) get clock components: ordered by the rank's own program order and dependencies (local
  // clocks, never sent), and on the second pass by whatever path through other ranks (global clocks,
  // carried by messages) for the candidates the first pass could not order locally.
  void setUpRaceTracking();

  void disableRaceTracking(std::string message);

  int32_t* localClock(int g) { return local_clocks_.data() + local_offset_[g]; }
  int32_t* globalClock(int g) { return global_clocks_.data() + static_cast<size_t>(global_size_) * g; }

  bool depDone(int rank, const Dependency& dep) const { return pc_[tb_base_[rank] + dep.tb] > dep.step; }

  bool runnable(int g) const;

  // Whether the access of threadblock `earlier` at `epoch` happens before the current step of
  // threadblock `later` (same rank).
  bool ordered(int later, int earlier, int32_t epoch);

  void setEpoch(int g, int32_t epoch) {
    if (local_index_[g] >= 0) localClock(g)[local_index_[g]] = epoch;
    if (!global_index_.empty() && global_index_[g] >= 0) globalClock(g)[global_index_[g]] = epoch;
  }

  void reportRace(int rank, const Access& a, bool a_writes, const Access& b, bool b_writes);

  // The read of threadblock `gtb` in h.reads, if any. The first few are scanned; a cell read by many
  // threadblocks keeps the positions of the others in read_slot_ (validated, since a write clears reads).
  static constexpr size_t kScannedReads = 8;
  static uint64_t readKey(int hist, int gtb) {
    return (uint64_t{static_cast<uint32_t>(hist)} << 32) | static_cast<uint32_t>(gtb);
  }

  Access* findRead(int hist, CellHistory& h, int gtb);

  void noteRead(int rank, int hist, const Access& access);

  void noteWrite(int rank, int hist, const Access& access);

  // Connection FIFO order is only well defined when the threadblocks sharing one end are ordered.
  void noteConnectionUse(int32_t& last_gtb, int32_t& last_step, int g, int k, int rank, const char* what, int peer,
                         int channel);

  // Runs the next step of global threadblock g; returns whether it sent.
  bool execute(int g);

  bool reportDeadlocks();

  void reportLeftovers();

  void checkPostcondition();

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

}  // namespace braid::verifier
