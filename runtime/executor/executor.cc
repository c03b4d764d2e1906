// The executor (include/braid/executor.h): runs a Plan's threadblocks over a Transport, event-driven.
//
// Execution model (MSCCL, ../shared/reference/taccl_msccl.md §2.3, §3.2): every threadblock runs its steps
// in order; a step starts when the previous step of its threadblock and every step in its deps finished.
// A rank's threadblocks start once its precopies (PlanCopy) are done. Every step is cut into slices of at
// most plan.slice_bytes (0: one slice), on whole elements (plan.element_bytes); slice k of a step of B bytes
// spans [k*S, min((k+1)*S, B)), so sender and receiver of a connection cut a step identically and their
// messages pair up in FIFO order. A zero-byte step still sends one zero-byte message, which keeps the peers
// of a connection matched.
//
// What each step posts, per slice k (S_k: slice k of a range; temp: the threadblock's staging range,
// PlanThreadblock::temp):
//   kSend                  send src_k
//   kRecv                  recv dst_k
//   kRecvCopySend          recv dst_k -> send dst_k
//   kRecvReduceSend        recv temp_k -> temp_k += src_k -> send temp_k            (stores nothing)
//   kRecvReduceCopy(Send)  src and dst disjoint:  recv dst_k -> dst_k += src_k [-> send dst_k]
//                          src == dst:            recv temp_k -> dst_k += temp_k [-> send dst_k]
//                          src overlaps dst:      recv temp_k -> temp_k += src_k -> copy temp_k to dst_k
//                                                 [and send temp_k]
//   kCopy / kReduce        one local request over the whole step
//   kNop                   nothing: finishes as soon as it starts
// Every slice of a step is posted when the step starts; a fused step forwards slice k as soon as slice k
// arrived (and was reduced) and slices 0..k-1 were forwarded — sends keep slice order, since the receiver
// matches them in FIFO order — which pipelines data across hops. Local requests inside a fused step carry
// LocalRequest::fused. A step finishes when all its requests completed.
//
// Events: the executor keeps a table RequestId -> continuation (request_table.h; no heap allocation per
// request) and calls transport.poll(block = true) only when nothing else can be posted. A transport error
// is returned as it is. When nothing is outstanding and steps remain, their dependencies can never be met
// (a cycle): kInvalidArgument naming the waiting steps.
#include "braid/executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <string>
#include <vector>

#include "executor/request_table.h"
#include "plan/lower_internal.h"

namespace braid {

namespace {

using exec::RequestTable;

// Continuation kinds: what finished.
enum Kind : uint32_t {
  kSendDone = 0,
  kRecvDone = 1,
  kReduceDone = 2,  // the reduction of a receive-reduce step
  kCopyDone = 3,    // the staging copy of a receive-reduce step whose src overlaps its dst
  kLocalDone = 4,   // kCopy / kReduce steps
  kPrecopyDone = 5,
};
constexpr uint32_t kMaxSlices = uint32_t{1} << 29;

uint64_t pack(uint32_t owner, Kind kind, uint32_t slice) {
  return (uint64_t{owner} << 32) | (uint64_t{kind} << 29) | slice;
}

// Where a receive-reduce step receives (see the table at the top).
enum class Route : uint8_t { kDirect, kStagedSame, kStagedOverlap };

// A step as the executor keeps it: the PlanStep's fields in 40 bytes, with its dependency counter and its
// waiters inline, in one flat array (threadblock by threadblock). Two million steps do not stay in cache;
// starting and finishing a step then touches one line of this array instead of a PlanStep, a counter
// array and a waiter index.
struct ExecStep {
  uint64_t bytes = 0;
  uint64_t src_offset = 0;
  uint64_t dst_offset = 0;
  int32_t pending = 0;         // dependencies not finished yet
  uint32_t waiters_begin = 0;  // into Executor::waiters_: the steps that depend on this one
  uint32_t waiters_count = 0;
  OpType type = OpType::kNop;
  BufferKind src_buffer = BufferKind::kInput;
  BufferKind dst_buffer = BufferKind::kOutput;
  BufferRef src() const { return BufferRef{src_buffer, src_offset, bytes}; }
  BufferRef dst() const { return BufferRef{dst_buffer, dst_offset, bytes}; }
};

struct TbState {
  ExecStep cur;  // the running step (a copy: completions touch only this state)
  int rank = 0;
  int id = 0;  // PlanThreadblock::id
  int send_peer = -1;
  int recv_peer = -1;
  int channel = 0;
  BufferRef temp;  // staging (PlanThreadblock::temp)
  int pc = 0;      // current (running or next) step
  int num_steps = 0;
  int64_t first_step = 0;  // flat index of step 0
  uint32_t outstanding = 0;
  uint64_t slice = 0;  // slice size of the running step
  uint32_t slices = 0;
  uint32_t next_send = 0;  // fused steps: the next slice to forward
  Route route = Route::kDirect;
  std::vector<uint8_t> forwardable;  // fused steps: slice k arrived (and was reduced); reused across steps
  double start_us = 0;
};

class Executor {
 public:
  Executor(const Plan& plan, Transport& transport, bool record) : plan_(plan), transport_(transport), record_(record) {}

  Status init(const ExecOptions& options) {
    const int n = plan_.num_ranks;
    if (static_cast<int>(plan_.ranks.size()) != n) {
      return invalidArgument(
          fmt::format("plan '{}': {} rank plans for {} ranks", plan_.algorithm, plan_.ranks.size(), n));
    }
    if (plan_.element_bytes < 1) return invalidArgument(fmt::format("plan '{}': element_bytes is 0", plan_.algorithm));
    std::vector<int> ranks = options.local_ranks;
    if (ranks.empty()) {
      for (int r = 0; r < n; ++r) ranks.push_back(r);
    }
    std::vector<char> seen(n, 0);
    for (int r : ranks) {
      if (r < 0 || r >= n) {
        return invalidArgument(fmt::format("local rank {} is outside plan '{}' of {} ranks", r, plan_.algorithm, n));
      }
      if (seen[r]) return invalidArgument(fmt::format("local rank {} is listed twice", r));
      seen[r] = 1;
    }
    ranks_ = ranks;
    slice_ = plan_.slice_bytes == 0
                 ? 0
                 : std::max(plan_.element_bytes, plan_.slice_bytes / plan_.element_bytes * plan_.element_bytes);
    rank_base_.assign(n + 1, -1);
    for (int r : ranks_) {
      const RankPlan& rank_plan = plan_.ranks[r];
      if (rank_plan.rank != r) {
        return invalidArgument(
            fmt::format("plan '{}': ranks[{}] is labelled rank {}", plan_.algorithm, r, rank_plan.rank));
      }
      rank_base_[r] = static_cast<int>(tbs_.size());
      const int num_tbs = static_cast<int>(rank_plan.threadblocks.size());
      for (int t = 0; t < num_tbs; ++t) {
        const PlanThreadblock& tb = rank_plan.threadblocks[t];
        BRAID_RETURN_IF_ERROR(checkThreadblock(r, t, tb, num_tbs));
        TbState state;
        state.rank = r;
        state.id = tb.id;
        state.send_peer = tb.send_peer;
        state.recv_peer = tb.recv_peer;
        state.channel = tb.channel;
        state.temp = tb.temp;
        state.num_steps = static_cast<int>(tb.steps.size());
        state.first_step = total_steps_;
        total_steps_ += static_cast<int64_t>(tb.steps.size());
        tbs_.push_back(std::move(state));
      }
    }
    // The step table, with dependency counters and, per target step, the steps waiting on it.
    steps_.resize(total_steps_);
    std::vector<int64_t> count(total_steps_ + 1, 0);
    for (size_t g = 0; g < tbs_.size(); ++g) {
      const TbState& state = tbs_[g];
      const PlanThreadblock& tb = plan_.ranks[state.rank].threadblocks[g - rank_base_[state.rank]];
      const int base = rank_base_[state.rank];
      for (size_t s = 0; s < tb.steps.size(); ++s) {
        const PlanStep& step = tb.steps[s];
        ExecStep& exec = steps_[state.first_step + s];
        exec.type = step.type;
        exec.bytes = step.bytes;
        exec.src_buffer = step.src.buffer;
        exec.src_offset = step.src.offset;
        exec.dst_buffer = step.dst.buffer;
        exec.dst_offset = step.dst.offset;
        exec.pending = static_cast<int32_t>(step.deps.size());
        for (const Dependency& dep : step.deps) ++count[tbs_[base + dep.tb].first_step + dep.step + 1];
      }
    }
    for (int64_t i = 0; i < total_steps_; ++i) count[i + 1] += count[i];
    if (count[total_steps_] > UINT32_MAX) {
      return invalidArgument(
          fmt::format("plan '{}': {} dependencies is too many", plan_.algorithm, count[total_steps_]));
    }
    for (int64_t i = 0; i < total_steps_; ++i) {
      steps_[i].waiters_begin = static_cast<uint32_t>(count[i]);
      steps_[i].waiters_count = static_cast<uint32_t>(count[i + 1] - count[i]);
    }
    waiters_.resize(count[total_steps_]);
    for (size_t g = 0; g < tbs_.size(); ++g) {
      const TbState& state = tbs_[g];
      const PlanThreadblock& tb = plan_.ranks[state.rank].threadblocks[g - rank_base_[state.rank]];
      const int base = rank_base_[state.rank];
      for (size_t s = 0; s < tb.steps.size(); ++s) {
        for (const Dependency& dep : tb.steps[s].deps) {
          waiters_[count[tbs_[base + dep.tb].first_step + dep.step]++] =
              Waiter{static_cast<int32_t>(g), static_cast<int32_t>(s)};
        }
      }
    }
    if (record_) timings_.resize(total_steps_);
    return Status::ok();
  }

  Result<ExecResult> run() {
    ExecResult result;
    result.start_us = transport_.nowUs();
    end_us_ = result.start_us;
    remaining_ = total_steps_;
    precopies_left_.assign(plan_.num_ranks, 0);
    for (int r : ranks_) {
      const RankPlan& rank_plan = plan_.ranks[r];
      for (const PlanCopy& copy : rank_plan.precopies) {
        LocalRequest request;
        request.rank = r;
        request.src = copy.src;
        request.dst = copy.dst;
        BRAID_RETURN_IF_ERROR(post(transport_.postLocal(request), pack(static_cast<uint32_t>(r), kPrecopyDone, 0)));
        ++precopies_left_[r];
      }
      if (precopies_left_[r] == 0) releaseRank(r);
    }
    std::vector<Completion> done;
    while (true) {
      while (!ready_.empty()) {
        const int g = ready_.front();
        ready_.pop_front();
        BRAID_RETURN_IF_ERROR(startStep(g));
      }
      if (remaining_ == 0 && table_.size() == 0) break;
      if (table_.size() == 0) return stuck();
      done.clear();
      BRAID_RETURN_IF_ERROR(transport_.poll(&done, /*block=*/true));
      for (const Completion& completion : done) {
        const uint64_t value = table_.take(completion.id);
        if (value == RequestTable::kEmpty) {
          return internalError(fmt::format(
              "transport '{}' completed request {}, which the executor did not post or which completed before",
              transport_.name(), completion.id));
        }
        BRAID_RETURN_IF_ERROR(handle(value, completion.time_us));
      }
    }
    result.end_us = end_us_;
    result.requests = requests_;
    if (record_) result.steps = std::move(timings_);
    return result;
  }

 private:
  struct Waiter {
    int32_t tb;  // index into tbs_
    int32_t step;
  };

  Status checkThreadblock(int r, int t, const PlanThreadblock& tb, int num_tbs) const {
    auto where = [&](size_t s) { return fmt::format("plan '{}': rank {} tb {} step {}", plan_.algorithm, r, t, s); };
    if (tb.id != t) {
      return invalidArgument(
          fmt::format("plan '{}': rank {}: threadblock at position {} has id {}", plan_.algorithm, r, t, tb.id));
    }
    if (tb.temp.buffer != BufferKind::kScratch && tb.temp.bytes > 0) {
      return invalidArgument(
          fmt::format("plan '{}': rank {} tb {}: staging must be in the scratch buffer", plan_.algorithm, r, t));
    }
    for (size_t s = 0; s < tb.steps.size(); ++s) {
      const PlanStep& step = tb.steps[s];
      if (opSends(step.type) && (tb.send_peer < 0 || tb.send_peer >= plan_.num_ranks)) {
        return invalidArgument(fmt::format("{}: sends but the send peer is {}", where(s), tb.send_peer));
      }
      if (opReceives(step.type) && (tb.recv_peer < 0 || tb.recv_peer >= plan_.num_ranks)) {
        return invalidArgument(fmt::format("{}: receives but the recv peer is {}", where(s), tb.recv_peer));
      }
      const bool uses_src = opReadsSrc(step.type);
      const bool uses_dst = opWritesDst(step.type);
      if ((uses_src && step.src.bytes != step.bytes) || (uses_dst && step.dst.bytes != step.bytes)) {
        return invalidArgument(fmt::format("{}: moves {} bytes but its src has {} and its dst {}", where(s), step.bytes,
                                           uses_src ? step.src.bytes : step.bytes,
                                           uses_dst ? step.dst.bytes : step.bytes));
      }
      if (plan::needsStaging(step) && tb.temp.bytes < step.bytes) {
        return invalidArgument(fmt::format("{}: needs {} bytes of staging but the threadblock has {}", where(s),
                                           step.bytes, tb.temp.bytes));
      }
      if (slice_ > 0 && step.type != OpType::kCopy && step.type != OpType::kReduce &&
          (step.bytes + slice_ - 1) / slice_ >= kMaxSlices) {
        return invalidArgument(
            fmt::format("{}: {} bytes in slices of {} bytes are too many slices", where(s), step.bytes, slice_));
      }
      for (const Dependency& dep : step.deps) {
        if (dep.tb < 0 || dep.tb >= num_tbs || dep.step < 0 ||
            dep.step >= static_cast<int>(plan_.ranks[r].threadblocks[dep.tb].steps.size()) ||
            (dep.tb == t && dep.step >= static_cast<int>(s))) {
          return invalidArgument(fmt::format("{}: dependency on tb {} step {} names no earlier step of rank {}",
                                             where(s), dep.tb, dep.step, r));
        }
      }
    }
    return Status::ok();
  }

  // All of rank r's threadblocks may start (its precopies are done).
  void releaseRank(int r) {
    const int base = rank_base_[r];
    const int num_tbs = static_cast<int>(plan_.ranks[r].threadblocks.size());
    for (int g = base; g < base + num_tbs; ++g) {
      if (tbs_[g].num_steps > 0 && steps_[tbs_[g].first_step].pending == 0) ready_.push_back(g);
    }
  }

  bool rankReleased(int r) const { return precopies_left_[r] == 0; }

  Status post(const Result<RequestId>& id, uint64_t value) {
    if (!id.isOk()) return id.status();
    ++requests_;
    if (!table_.insert(*id, value)) {
      return internalError(fmt::format("transport '{}' returned request id {} twice", transport_.name(), *id));
    }
    return Status::ok();
  }

  static BufferRef sliceOf(BufferKind buffer, uint64_t offset, uint64_t bytes, uint32_t k, uint64_t slice) {
    const uint64_t begin = uint64_t{k} * slice;
    return BufferRef{buffer, offset + begin, std::min(slice, bytes - begin)};
  }

  Status postSend(int g, const BufferRef& src, uint32_t k) {
    const TbState& state = tbs_[g];
    SendRequest request;
    request.rank = state.rank;
    request.peer = state.send_peer;
    request.channel = state.channel;
    request.src = src;
    request.protocol = plan_.protocol;
    ++tbs_[g].outstanding;
    return post(transport_.postSend(request), pack(static_cast<uint32_t>(g), kSendDone, k));
  }

  Status postRecv(int g, const BufferRef& dst, uint32_t k) {
    const TbState& state = tbs_[g];
    RecvRequest request;
    request.rank = state.rank;
    request.peer = state.recv_peer;
    request.channel = state.channel;
    request.dst = dst;
    request.protocol = plan_.protocol;
    ++tbs_[g].outstanding;
    return post(transport_.postRecv(request), pack(static_cast<uint32_t>(g), kRecvDone, k));
  }

  Status postLocal(int g, const BufferRef& src, const BufferRef& dst, bool reduce, bool fused, Kind kind, uint32_t k) {
    LocalRequest request;
    request.rank = tbs_[g].rank;
    request.src = src;
    request.dst = dst;
    request.reduce = reduce;
    request.fused = fused;
    ++tbs_[g].outstanding;
    return post(transport_.postLocal(request), pack(static_cast<uint32_t>(g), kind, k));
  }

  Status startStep(int g) {
    TbState& state = tbs_[g];
    const int64_t flat = state.first_step + state.pc;
    state.cur = steps_[flat];
    if (state.pc + 1 < state.num_steps) {
      // The next step of this threadblock starts after a round trip through the transport; with thousands of
      // threadblocks its line would have left the cache by then, so fetch it now.
      __builtin_prefetch(&steps_[flat + 1]);
    }
    const ExecStep& step = state.cur;
    state.start_us = transport_.nowUs();
    state.outstanding = 0;
    switch (step.type) {
      case OpType::kNop: return finishStep(g, state.start_us);
      case OpType::kCopy:
      case OpType::kReduce:
        return postLocal(g, step.src(), step.dst(), step.type == OpType::kReduce, /*fused=*/false, kLocalDone, 0);
      default: break;
    }
    const uint64_t slice = slice_ == 0 || step.bytes == 0 ? std::max<uint64_t>(step.bytes, 1) : slice_;
    state.slice = slice;
    const uint32_t slices = step.bytes == 0 ? 1 : static_cast<uint32_t>((step.bytes + slice - 1) / slice);
    state.slices = slices;
    state.next_send = 0;
    if (opSends(step.type) && step.type != OpType::kSend) state.forwardable.assign(slices, 0);
    state.route = Route::kDirect;
    if (step.type == OpType::kRecvReduceCopy || step.type == OpType::kRecvReduceCopySend) {
      if (plan::sameRange(step.src(), step.dst())) {
        state.route = Route::kStagedSame;
      } else if (plan::overlaps(step.src(), step.dst())) {
        state.route = Route::kStagedOverlap;
      }
    }
    if (step.type == OpType::kSend) {
      for (uint32_t k = 0; k < slices; ++k) {
        BRAID_RETURN_IF_ERROR(postSend(g, sliceOf(step.src_buffer, step.src_offset, step.bytes, k, slice), k));
      }
      return Status::ok();
    }
    const bool staged = step.type == OpType::kRecvReduceSend || state.route != Route::kDirect;
    const BufferKind into = staged ? state.temp.buffer : step.dst_buffer;
    const uint64_t at = staged ? state.temp.offset : step.dst_offset;
    for (uint32_t k = 0; k < slices; ++k) {
      BRAID_RETURN_IF_ERROR(postRecv(g, sliceOf(into, at, step.bytes, k, slice), k));
    }
    return Status::ok();
  }

  // A request of threadblock g's running step (or a precopy) completed at time_us.
  Status handle(uint64_t value, double time_us) {
    const uint32_t owner = static_cast<uint32_t>(value >> 32);
    const Kind kind = static_cast<Kind>((value >> 29) & 7);
    const uint32_t k = static_cast<uint32_t>(value & (kMaxSlices - 1));
    end_us_ = std::max(end_us_, time_us);
    if (kind == kPrecopyDone) {
      if (--precopies_left_[owner] == 0) releaseRank(static_cast<int>(owner));
      return Status::ok();
    }
    const int g = static_cast<int>(owner);
    TbState& state = tbs_[g];
    const ExecStep& step = state.cur;
    const uint64_t bytes = step.bytes;
    const uint64_t slice = state.slice;
    auto src = [&] { return sliceOf(step.src_buffer, step.src_offset, bytes, k, slice); };
    auto dst = [&] { return sliceOf(step.dst_buffer, step.dst_offset, bytes, k, slice); };
    auto temp = [&] { return sliceOf(state.temp.buffer, state.temp.offset, bytes, k, slice); };
    constexpr bool kReduce = true;
    constexpr bool kFused = true;
    if (kind == kRecvDone) {
      switch (step.type) {
        case OpType::kRecvCopySend: BRAID_RETURN_IF_ERROR(forward(g, k)); break;
        case OpType::kRecvReduceSend:
          BRAID_RETURN_IF_ERROR(postLocal(g, src(), temp(), kReduce, kFused, kReduceDone, k));
          break;
        case OpType::kRecvReduceCopy:
        case OpType::kRecvReduceCopySend:
          switch (state.route) {
            case Route::kDirect:
              BRAID_RETURN_IF_ERROR(postLocal(g, src(), dst(), kReduce, kFused, kReduceDone, k));
              break;
            case Route::kStagedSame:
              BRAID_RETURN_IF_ERROR(postLocal(g, temp(), dst(), kReduce, kFused, kReduceDone, k));
              break;
            case Route::kStagedOverlap:
              BRAID_RETURN_IF_ERROR(postLocal(g, src(), temp(), kReduce, kFused, kReduceDone, k));
              break;
          }
          break;
        default: break;  // kRecv: the data is where it belongs
      }
    } else if (kind == kReduceDone) {
      if (state.route == Route::kStagedOverlap) {
        BRAID_RETURN_IF_ERROR(postLocal(g, temp(), dst(), !kReduce, kFused, kCopyDone, k));
      }
      if (opSends(step.type)) BRAID_RETURN_IF_ERROR(forward(g, k));
    }
    if (--state.outstanding == 0) return finishStep(g, time_us);
    return Status::ok();
  }

  // Slice k of fused step g may be forwarded: send every forwardable slice from next_send on, in order.
  // Forwarded data is in dst (kRecvCopySend; receive-reduce steps that received into dst or reduced into
  // it) or in the staging range (kRecvReduceSend; src overlapping dst).
  Status forward(int g, uint32_t k) {
    TbState& state = tbs_[g];
    const ExecStep& step = state.cur;
    state.forwardable[k] = 1;
    const bool from_temp = step.type == OpType::kRecvReduceSend || state.route == Route::kStagedOverlap;
    const BufferKind buffer = from_temp ? state.temp.buffer : step.dst_buffer;
    const uint64_t offset = from_temp ? state.temp.offset : step.dst_offset;
    while (state.next_send < state.slices && state.forwardable[state.next_send]) {
      BRAID_RETURN_IF_ERROR(
          postSend(g, sliceOf(buffer, offset, step.bytes, state.next_send, state.slice), state.next_send));
      ++state.next_send;
    }
    return Status::ok();
  }

  Status finishStep(int g, double time_us) {
    TbState& state = tbs_[g];
    const int64_t flat = state.first_step + state.pc;
    end_us_ = std::max(end_us_, time_us);
    if (record_) timings_[flat] = StepTiming{state.rank, state.id, state.pc, state.start_us, time_us};
    --remaining_;
    const ExecStep& step = state.cur;  // its waiter list is the table's
    for (uint32_t w = step.waiters_begin; w < step.waiters_begin + step.waiters_count; ++w) {
      const Waiter& waiter = waiters_[w];
      TbState& other = tbs_[waiter.tb];
      // The waiting step is ready when this was its last dependency and its threadblock reached it (pc stops
      // at a step until it can start; step 0 is reached when the rank's precopies are done).
      if (--steps_[other.first_step + waiter.step].pending == 0 && other.pc == waiter.step &&
          (waiter.step > 0 || rankReleased(other.rank))) {
        ready_.push_back(waiter.tb);
      }
    }
    ++state.pc;
    if (state.pc < state.num_steps && steps_[flat + 1].pending == 0) ready_.push_back(g);
    return Status::ok();
  }

  Status stuck() const {
    std::string waiting;
    int listed = 0;
    for (const TbState& state : tbs_) {
      if (state.pc >= state.num_steps) continue;
      if (listed++ == 8) {
        waiting += ", ...";
        break;
      }
      const PlanStep& step = plan_.ranks[state.rank].threadblocks[state.id].steps[state.pc];
      std::string deps;
      for (const Dependency& dep : step.deps) {
        const TbState& other = tbs_[rank_base_[state.rank] + dep.tb];
        if (other.pc <= dep.step) deps += fmt::format(" tb {} step {}", dep.tb, dep.step);
      }
      waiting += fmt::format("{}rank {} tb {} step {} ({}) waits for{}", listed > 1 ? "; " : "", state.rank, state.id,
                             state.pc, opTypeName(step.type), deps.empty() ? " its rank's precopies" : deps);
    }
    return invalidArgument(fmt::format("plan '{}': {} step(s) can never start, their dependencies never finish: {}",
                                       plan_.algorithm, remaining_, waiting));
  }

  const Plan& plan_;
  Transport& transport_;
  bool record_;
  std::vector<int> ranks_;
  uint64_t slice_ = 0;
  std::vector<int> rank_base_;  // rank -> first index in tbs_ (-1: not local)
  std::vector<TbState> tbs_;
  std::vector<ExecStep> steps_;  // flat: threadblock by threadblock
  std::vector<Waiter> waiters_;
  int64_t total_steps_ = 0;
  int64_t remaining_ = 0;
  std::vector<int> precopies_left_;
  std::deque<int> ready_;  // threadblocks whose current step can start
  RequestTable table_;
  long long requests_ = 0;
  double end_us_ = 0;
  std::vector<StepTiming> timings_;
};

}  // namespace

Result<ExecResult> execute(const Plan& plan, Transport& transport, const ExecOptions& options, bool record_steps) {
  Executor executor(plan, transport, record_steps);
  BRAID_RETURN_IF_ERROR(executor.init(options));
  return executor.run();
}

}  // namespace braid
