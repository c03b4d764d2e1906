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
// arrived (and was reduced), which pipelines data across hops. Local requests inside a fused step carry
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

struct TbState {
  const PlanThreadblock* tb = nullptr;
  int rank = 0;
  int pc = 0;              // current (running or next) step
  int64_t first_step = 0;  // flat index of step 0
  uint32_t outstanding = 0;
  uint64_t slice = 0;  // slice size of the running step
  Route route = Route::kDirect;
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
        state.tb = &tb;
        state.rank = r;
        state.first_step = total_steps_;
        total_steps_ += static_cast<int64_t>(tb.steps.size());
        tbs_.push_back(state);
      }
    }
    // Dependency counters per step and, per target step, the steps waiting on it.
    pending_.assign(total_steps_, 0);
    std::vector<int64_t> count(total_steps_ + 1, 0);
    for (const TbState& state : tbs_) {
      const int base = rank_base_[state.rank];
      for (size_t s = 0; s < state.tb->steps.size(); ++s) {
        for (const Dependency& dep : state.tb->steps[s].deps) {
          ++count[tbs_[base + dep.tb].first_step + dep.step + 1];
          ++pending_[state.first_step + s];
        }
      }
    }
    for (int64_t i = 0; i < total_steps_; ++i) count[i + 1] += count[i];
    waiters_.resize(count[total_steps_]);
    waiter_start_ = count;
    for (size_t g = 0; g < tbs_.size(); ++g) {
      const TbState& state = tbs_[g];
      const int base = rank_base_[state.rank];
      for (size_t s = 0; s < state.tb->steps.size(); ++s) {
        for (const Dependency& dep : state.tb->steps[s].deps) {
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
          return internalError(
              fmt::format("transport '{}' completed request {}, which the executor did not post "
                          "or which completed before",
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
    for (size_t s = 0; s < tb.steps.size(); ++s) {
      const PlanStep& step = tb.steps[s];
      if (opSends(step.type) && (tb.send_peer < 0 || tb.send_peer >= plan_.num_ranks)) {
        return invalidArgument(fmt::format("{}: sends but the send peer is {}", where(s), tb.send_peer));
      }
      if (opReceives(step.type) && (tb.recv_peer < 0 || tb.recv_peer >= plan_.num_ranks)) {
        return invalidArgument(fmt::format("{}: receives but the recv peer is {}", where(s), tb.recv_peer));
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
      if (!tbs_[g].tb->steps.empty() && pending_[tbs_[g].first_step] == 0) ready_.push_back(g);
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

  BufferRef sliceOf(const BufferRef& base, uint64_t bytes, uint32_t k, uint64_t slice) const {
    const uint64_t begin = uint64_t{k} * slice;
    return BufferRef{base.buffer, base.offset + begin, std::min(slice, bytes - begin)};
  }

  Status postSend(const TbState& state, int g, const BufferRef& src, uint32_t k) {
    SendRequest request;
    request.rank = state.rank;
    request.peer = state.tb->send_peer;
    request.channel = state.tb->channel;
    request.src = src;
    request.protocol = plan_.protocol;
    ++tbs_[g].outstanding;
    return post(transport_.postSend(request), pack(static_cast<uint32_t>(g), kSendDone, k));
  }

  Status postRecv(const TbState& state, int g, const BufferRef& dst, uint32_t k) {
    RecvRequest request;
    request.rank = state.rank;
    request.peer = state.tb->recv_peer;
    request.channel = state.tb->channel;
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

  BufferRef tempOf(const TbState& state, const PlanStep& step) const {
    return BufferRef{state.tb->temp.buffer, state.tb->temp.offset, step.bytes};
  }

  Status startStep(int g) {
    TbState& state = tbs_[g];
    const PlanStep& step = state.tb->steps[state.pc];
    state.start_us = transport_.nowUs();
    state.outstanding = 0;
    switch (step.type) {
      case OpType::kNop: return finishStep(g, state.start_us);
      case OpType::kCopy:
      case OpType::kReduce:
        return postLocal(g, step.src, step.dst, step.type == OpType::kReduce, /*fused=*/false, kLocalDone, 0);
      default: break;
    }
    const uint64_t slice = slice_ == 0 || step.bytes == 0 ? std::max<uint64_t>(step.bytes, 1) : slice_;
    state.slice = slice;
    const uint32_t slices = step.bytes == 0 ? 1 : static_cast<uint32_t>((step.bytes + slice - 1) / slice);
    state.route = Route::kDirect;
    if (step.type == OpType::kRecvReduceCopy || step.type == OpType::kRecvReduceCopySend) {
      if (plan::sameRange(step.src, step.dst)) {
        state.route = Route::kStagedSame;
      } else if (plan::overlaps(step.src, step.dst)) {
        state.route = Route::kStagedOverlap;
      }
    }
    if (step.type == OpType::kSend) {
      for (uint32_t k = 0; k < slices; ++k)
        BRAID_RETURN_IF_ERROR(postSend(state, g, sliceOf(step.src, step.bytes, k, slice), k));
      return Status::ok();
    }
    const bool staged = step.type == OpType::kRecvReduceSend || state.route != Route::kDirect;
    const BufferRef into = staged ? tempOf(state, step) : step.dst;
    for (uint32_t k = 0; k < slices; ++k)
      BRAID_RETURN_IF_ERROR(postRecv(state, g, sliceOf(into, step.bytes, k, slice), k));
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
    const PlanStep& step = state.tb->steps[state.pc];
    const uint64_t bytes = step.bytes;
    const uint64_t slice = state.slice;
    auto src = [&] { return sliceOf(step.src, bytes, k, slice); };
    auto dst = [&] { return sliceOf(step.dst, bytes, k, slice); };
    auto temp = [&] { return sliceOf(tempOf(state, step), bytes, k, slice); };
    constexpr bool kReduce = true;
    constexpr bool kFused = true;
    if (kind == kRecvDone) {
      switch (step.type) {
        case OpType::kRecvCopySend: BRAID_RETURN_IF_ERROR(postSend(state, g, dst(), k)); break;
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
      if (step.type == OpType::kRecvReduceSend) {
        BRAID_RETURN_IF_ERROR(postSend(state, g, temp(), k));
      } else if (state.route == Route::kStagedOverlap) {
        BRAID_RETURN_IF_ERROR(postLocal(g, temp(), dst(), !kReduce, kFused, kCopyDone, k));
        if (step.type == OpType::kRecvReduceCopySend) BRAID_RETURN_IF_ERROR(postSend(state, g, temp(), k));
      } else if (step.type == OpType::kRecvReduceCopySend) {
        BRAID_RETURN_IF_ERROR(postSend(state, g, dst(), k));
      }
    }
    if (--state.outstanding == 0) return finishStep(g, time_us);
    return Status::ok();
  }

  Status finishStep(int g, double time_us) {
    TbState& state = tbs_[g];
    const int64_t flat = state.first_step + state.pc;
    end_us_ = std::max(end_us_, time_us);
    if (record_) timings_[flat] = StepTiming{state.rank, state.tb->id, state.pc, state.start_us, time_us};
    --remaining_;
    for (int64_t w = waiter_start_[flat]; w < waiter_start_[flat + 1]; ++w) {
      const Waiter& waiter = waiters_[w];
      const int64_t target = tbs_[waiter.tb].first_step + waiter.step;
      // The waiting step is ready when this was its last dependency and its threadblock reached it (pc stops
      // at a step until it can start; step 0 is reached when the rank's precopies are done).
      const TbState& other = tbs_[waiter.tb];
      if (--pending_[target] == 0 && other.pc == waiter.step && (waiter.step > 0 || rankReleased(other.rank))) {
        ready_.push_back(waiter.tb);
      }
    }
    ++state.pc;
    if (state.pc < static_cast<int>(state.tb->steps.size()) && pending_[flat + 1] == 0) ready_.push_back(g);
    return Status::ok();
  }

  Status stuck() const {
    std::string waiting;
    int listed = 0;
    for (const TbState& state : tbs_) {
      if (state.pc >= static_cast<int>(state.tb->steps.size())) continue;
      if (listed++ == 8) {
        waiting += ", ...";
        break;
      }
      const PlanStep& step = state.tb->steps[state.pc];
      std::string deps;
      for (const Dependency& dep : step.deps) {
        const TbState& other = tbs_[rank_base_[state.rank] + dep.tb];
        if (other.pc <= dep.step) deps += fmt::format(" tb {} step {}", dep.tb, dep.step);
      }
      waiting +=
          fmt::format("{}rank {} tb {} step {} ({}) waits for{}", listed > 1 ? "; " : "", state.rank, state.tb->id,
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
  int64_t total_steps_ = 0;
  int64_t remaining_ = 0;
  std::vector<int32_t> pending_;  // flat step -> dependencies not finished yet
  std::vector<int64_t> waiter_start_;
  std::vector<Waiter> waiters_;  // flat step -> steps that depend on it (CSR)
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
