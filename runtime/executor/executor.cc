// The executor (include/braid/executor.h): runs a Plan's threadblocks over a Transport, event-driven.
//
// Execution model: MSCCL's kernel (Azure/msccl-executor-nccl src/device/msccl_kernel.cu; the same loop in
// the SCCL interpreter it grew from), ../shared/reference/taccl_msccl.md §2.3 and §3.2. Every step is cut
// into slices of at most plan.slice_bytes (0: one slice), on whole elements; slice j of a step of B bytes
// spans [j*S, min((j+1)*S, B)), and a zero-byte step has one zero-byte slice (one zero-byte message, which
// keeps the peers of a connection matched). A threadblock loops over iterations outside and its steps
// inside: iteration j runs slice j of every step that has one, in step order, one slice at a time. Lowering
// makes every plan step either one chunk, sliced from the chunk's start, or whole chunks that fit in one
// slice (runtime/plan/instances.cc), so iteration j of a step always holds slice j of each chunk it covers
// and what a later step reads in iteration j was written in iteration j or before. Dependencies are per
// iteration, as MSCCL's flags (iteration, step): slice j of a step waits until the threadblock it depends
// on has finished slice min(j, last) of the step named. A rank's threadblocks start once its precopies
// (PlanCopy) are done.
//
// Why not all slices of a step at once: with a connection FIFO of bounded depth (NCCL_STEPS slots; the
// simulated transport's fifo_depth) a step of more slices than slots must wait for its receiver, and when
// the receiver's receive comes after its own large send — every ring — no step could finish. Looping over
// slices outside, a threadblock never needs more than one slice of a step at a time; the FIFO lets senders
// run up to its depth ahead, which pipelines slices across hops.
//
// What one slice posts (S_j: slice j of a range; temp: the threadblock's staging, PlanThreadblock::temp):
//   kSend                  send src_j
//   kRecv                  recv dst_j
//   kRecvCopySend          recv dst_j -> send dst_j
//   kRecvReduceSend        recv temp -> temp += src_j -> send temp                     (stores nothing)
//   kRecvReduceCopy(Send)  src and dst disjoint:  recv dst_j -> dst_j += src_j [-> send dst_j]
//                          src == dst:            recv temp -> dst_j += temp [-> send dst_j]
//                          src overlaps dst:      recv temp -> temp += src_j -> copy temp to dst_j
//                                                 [and send temp]
//   kCopy / kReduce        one local request
//   kNop                   nothing: finishes as soon as it starts
// Local requests inside a fused step carry LocalRequest::fused. A slice finishes when all its requests
// completed.
//
// Iterations of k slices (Plan::slices_per_iteration, k > 1): an iteration covers k consecutive slices of each
// step, all k posted together; a fused step forwards each slice as it arrives, and a threadblock's sends of one
// iteration leave in slice order. Dependencies and the step order count iterations of k slices; lowering sizes
// staging for k slices. This is how NCCL's ring runs Simple: a chunk of CHUNKSTEPS slots as CHUNKSTEPS /
// SLICESTEPS slices that pipeline inside one primitive call (nccl src/device/prims_simple.h).
//
// Events: the executor keeps a table RequestId -> continuation (request_table.h; no heap allocation per
// request) and calls transport.poll(block = true) only when nothing else can be posted. A transport error
// is returned as it is. When nothing is outstanding and threadblocks still wait, their dependencies can
// never be met (a cycle): kInvalidArgument naming the waiting steps.
#include "braid/executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <string>
#include <vector>

#include "executor/request_table.h"

namespace braid {

namespace {

using exec::RequestTable;

// Continuation kinds: what finished.
enum Kind : uint32_t {
  kSendDone = 0,
  kRecvDone = 1,
  kReduceDone = 2,  // the reduction of a receive-reduce slice
  kCopyDone = 3,    // the staging copy of a receive-reduce step whose src overlaps its dst
  kLocalDone = 4,   // kCopy / kReduce slices
  kPrecopyDone = 5,
};

// The low word holds the kind (bits 0-7) and the slice of the running iteration it belongs to (bits 8-15).
uint64_t pack(uint32_t owner, Kind kind, uint32_t sub = 0) { return (uint64_t{owner} << 32) | (sub << 8) | kind; }

// Where a receive-reduce step receives (see the table at the top).
enum class Route : uint8_t { kDirect, kStagedSame, kStagedOverlap };

// A step as the executor keeps it: the PlanStep's fields, its slice count, and where its dependencies and
// waiters are, in one flat array (threadblock by threadblock). Two million steps do not stay in cache;
// starting a slice touches one 48-byte entry instead of a PlanStep and its vectors.
struct ExecStep {
  uint64_t bytes = 0;
  uint64_t src_offset = 0;
  uint64_t dst_offset = 0;
  uint32_t slices = 1;
  uint32_t deps_begin = 0;  // into Executor::deps_
  uint32_t deps_count = 0;
  uint32_t waiters_begin = 0;  // into Executor::waiters_: the steps that depend on this one
  uint32_t waiters_count = 0;
  OpType type : 8 = OpType::kNop;
  BufferKind src_buffer : 8 = BufferKind::kInput;
  BufferKind dst_buffer : 8 = BufferKind::kOutput;
};
static_assert(sizeof(ExecStep) == 48, "keep a step small: two million of them are walked per run");

// (threadblock index in Executor::tbs_, step)
struct StepRef {
  int32_t tb;
  int32_t step;
};

struct TbState {
  ExecStep cur;  // the running step (a copy: completions touch only this state)
  int rank = 0;
  int id = 0;  // PlanThreadblock::id
  int send_peer = -1;
  int recv_peer = -1;
  int channel = 0;
  BufferRef temp;  // staging (PlanThreadblock::temp)
  int num_steps = 0;
  uint32_t iterations = 0;  // the most slices of any of its steps
  int64_t first_step = 0;   // flat index of step 0
  // Position: the slice (iteration, step) running or waiting to run; done once every slice finished.
  uint32_t iter = 0;
  int step = 0;
  bool done = false;
  bool waiting = false;  // its dependencies are not met yet
  uint32_t outstanding = 0;
  Route route = Route::kDirect;
  uint64_t offset = 0;  // the running iteration of the step: bytes from the start of the step's ranges
  uint64_t length = 0;
  uint32_t subs = 1;        // slices in the running iteration (Plan::slices_per_iteration at most)
  uint32_t next_send = 0;   // the slice whose send is posted next (sends leave in slice order)
  uint32_t send_ready = 0;  // slices whose send may be posted (bit per slice)
  double start_us = 0;
};

class Executor {
 public:
  Executor(const Plan& plan, Transport& transport, bool record) : plan_(plan), transport_(transport), record_(record) {}

  Status init(const ExecOptions& options) {
    // Everything indexed below (ranks, threadblocks, dependencies, buffer ranges, staging) is checked here.
    BRAID_RETURN_IF_ERROR(validatePlan(plan_, options.local_ranks));
    const int n = plan_.num_ranks;
    ranks_ = options.local_ranks;
    if (ranks_.empty()) {
      for (int r = 0; r < n; ++r) ranks_.push_back(r);
    }
    slice_ = plan::executedSliceBytes(plan_);
    k_ = slice_ == 0 ? 1 : plan_.slices_per_iteration;  // validatePlan: 1..kMaxSlicesPerIteration
    rank_base_.assign(n + 1, -1);
    for (int r : ranks_) {
      const RankPlan& rank_plan = plan_.ranks[r];
      rank_base_[r] = static_cast<int>(tbs_.size());
      const int num_tbs = static_cast<int>(rank_plan.threadblocks.size());
      for (int t = 0; t < num_tbs; ++t) {
        const PlanThreadblock& tb = rank_plan.threadblocks[t];
        TbState state;
        state.rank = r;
        state.id = tb.id;
        state.send_peer = tb.send_peer;
        state.recv_peer = tb.recv_peer;
        state.channel = tb.channel;
        state.temp = tb.temp;
        state.num_steps = static_cast<int>(tb.steps.size());
        state.first_step = total_steps_;
        state.done = tb.steps.empty();
        total_steps_ += static_cast<int64_t>(tb.steps.size());
        tbs_.push_back(state);
      }
    }
    // The step table; dependencies as (tb index, step); per target step, the steps waiting on it (CSR).
    steps_.resize(total_steps_);
    std::vector<int64_t> count(total_steps_ + 1, 0);
    for (size_t g = 0; g < tbs_.size(); ++g) {
      TbState& state = tbs_[g];
      const PlanThreadblock& tb = plan_.ranks[state.rank].threadblocks[state.id];
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
        exec.slices = slicesOf(step);
        state.iterations = std::max(state.iterations, exec.slices);
        exec.deps_begin = static_cast<uint32_t>(deps_.size());
        exec.deps_count = static_cast<uint32_t>(step.deps.size());
        for (const Dependency& dep : step.deps) {
          deps_.push_back(StepRef{base + dep.tb, dep.step});
          ++count[tbs_[base + dep.tb].first_step + dep.step + 1];
        }
      }
    }
    propagateNopSlices();
    for (int64_t i = 0; i < total_steps_; ++i) count[i + 1] += count[i];
    if (count[total_steps_] >= UINT32_MAX) {
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
      for (int s = 0; s < state.num_steps; ++s) {
        const ExecStep& exec = steps_[state.first_step + s];
        for (uint32_t d = exec.deps_begin; d < exec.deps_begin + exec.deps_count; ++d) {
          const StepRef& dep = deps_[d];
          waiters_[count[tbs_[dep.tb].first_step + dep.step]++] = StepRef{static_cast<int32_t>(g), s};
        }
      }
    }
    if (record_) {
      timings_.resize(total_steps_);
      for (const TbState& state : tbs_) {
        for (int s = 0; s < state.num_steps; ++s) {
          timings_[state.first_step + s] = StepTiming{state.rank, state.id, s, 0, 0};
        }
      }
    }
    return Status::ok();
  }

  Result<ExecResult> run() {
    ExecResult result;
    result.start_us = transport_.nowUs();
    end_us_ = result.start_us;
    running_ = 0;
    for (const TbState& state : tbs_) running_ += state.done ? 0 : 1;
    precopies_left_.assign(plan_.num_ranks, 0);
    for (int r : ranks_) {
      const RankPlan& rank_plan = plan_.ranks[r];
      for (const PlanCopy& copy : rank_plan.precopies) {
        LocalRequest request;
        request.rank = r;
        request.src = copy.src;
        request.dst = copy.dst;
        BRAID_RETURN_IF_ERROR(post(transport_.postLocal(request), pack(static_cast<uint32_t>(r), kPrecopyDone)));
        ++precopies_left_[r];
      }
      if (precopies_left_[r] == 0) releaseRank(r);
    }
    std::vector<Completion> done;
    while (true) {
      while (!ready_.empty()) {
        const int g = ready_.front();
        ready_.pop_front();
        BRAID_RETURN_IF_ERROR(startSlice(g));
      }
      if (running_ == 0 && table_.size() == 0) break;
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
  // A nop moves no data but orders what follows it: in MSCCL's loop it runs in every iteration and waits, in
  // iteration j, for iteration j of the steps it depends on. So a nop has as many slices as the most of any
  // step it depends on (through chains of nops too), and slice j of a step behind it waits for slice j of the
  // data the nop stands for. With a single slice, slices beyond the first of a step behind a nop would run
  // before the data they depend on arrived.
  void propagateNopSlices() {
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t g = 0; g < tbs_.size(); ++g) {
        TbState& state = tbs_[g];
        for (int s = 0; s < state.num_steps; ++s) {
          ExecStep& exec = steps_[state.first_step + s];
          if (exec.type != OpType::kNop) continue;
          for (uint32_t d = exec.deps_begin; d < exec.deps_begin + exec.deps_count; ++d) {
            const StepRef& dep = deps_[d];
            const uint32_t dep_slices = steps_[tbs_[dep.tb].first_step + dep.step].slices;
            if (dep_slices > exec.slices) {
              exec.slices = dep_slices;
              state.iterations = std::max(state.iterations, exec.slices);
              changed = true;
            }
          }
        }
      }
    }
  }

  // validatePlan() bounds the count below 2^32.
  // Counted in iterations: k_ slices each.
  uint32_t slicesOf(const PlanStep& step) const {
    const uint64_t slices = plan::sliceCount(step.bytes, slice_);
    return static_cast<uint32_t>((slices + k_ - 1) / k_);
  }

  // All of rank r's threadblocks may start (its precopies are done).
  void releaseRank(int r) {
    const int base = rank_base_[r];
    const int num_tbs = static_cast<int>(plan_.ranks[r].threadblocks.size());
    for (int g = base; g < base + num_tbs; ++g) {
      if (!tbs_[g].done) arrive(g);
    }
  }

  // Whether threadblock `other` finished slice `iter` of its step `step` (it runs slices in (iteration,
  // step) order, so it has when its position is past that one).
  static bool passed(const TbState& other, uint32_t iter, int step) {
    return other.done || other.iter > iter || (other.iter == iter && other.step > step);
  }

  // Whether slice `iter` of threadblock g's current step may start: for every dependency, slice
  // min(iter, last) of the step named has finished.
  bool depsMet(int g) const {
    const TbState& state = tbs_[g];
    const ExecStep& step = steps_[state.first_step + state.step];
    for (uint32_t d = step.deps_begin; d < step.deps_begin + step.deps_count; ++d) {
      const StepRef& dep = deps_[d];
      const TbState& other = tbs_[dep.tb];
      const uint32_t last = steps_[other.first_step + dep.step].slices - 1;
      if (!passed(other, std::min(state.iter, last), dep.step)) return false;
    }
    return true;
  }

  // Threadblock g reached its position: start when its dependencies allow, else wait for them.
  void arrive(int g) {
    TbState& state = tbs_[g];
    if (depsMet(g)) {
      state.waiting = false;
      ready_.push_back(g);
    } else {
      state.waiting = true;
    }
  }

  Status post(const Result<RequestId>& id, uint64_t value) {
    if (!id.isOk()) return id.status();
    ++requests_;
    if (!table_.insert(*id, value)) {
      return internalError(fmt::format("transport '{}' returned request id {} twice", transport_.name(), *id));
    }
    return Status::ok();
  }

  Status postSend(int g, const BufferRef& src, uint32_t sub) {
    TbState& state = tbs_[g];
    SendRequest request;
    request.rank = state.rank;
    request.peer = state.send_peer;
    request.channel = state.channel;
    request.src = src;
    request.protocol = plan_.protocol;
    ++state.outstanding;
    return post(transport_.postSend(request), pack(static_cast<uint32_t>(g), kSendDone, sub));
  }

  Status postRecv(int g, const BufferRef& dst, uint32_t sub) {
    TbState& state = tbs_[g];
    RecvRequest request;
    request.rank = state.rank;
    request.peer = state.recv_peer;
    request.channel = state.channel;
    request.dst = dst;
    request.protocol = plan_.protocol;
    ++state.outstanding;
    return post(transport_.postRecv(request), pack(static_cast<uint32_t>(g), kRecvDone, sub));
  }

  Status postLocal(int g, const BufferRef& src, const BufferRef& dst, bool reduce, bool fused, Kind kind,
                   uint32_t sub) {
    TbState& state = tbs_[g];
    LocalRequest request;
    request.rank = state.rank;
    request.src = src;
    request.dst = dst;
    request.reduce = reduce;
    request.fused = fused;
    ++state.outstanding;
    return post(transport_.postLocal(request), pack(static_cast<uint32_t>(g), kind, sub));
  }

  // Slice `sub` of the running iteration: of a range / of the staging.
  uint64_t subOffset(uint32_t sub) const { return slice_ == 0 ? 0 : uint64_t{sub} * slice_; }
  uint64_t subLength(const TbState& state, uint32_t sub) const {
    return slice_ == 0 ? state.length : std::min(slice_, state.length - subOffset(sub));
  }
  BufferRef sliceOf(BufferKind buffer, uint64_t base, const TbState& state, uint32_t sub) const {
    return BufferRef{buffer, base + state.offset + subOffset(sub), subLength(state, sub)};
  }
  BufferRef srcSlice(const TbState& state, uint32_t sub) const {
    return sliceOf(state.cur.src_buffer, state.cur.src_offset, state, sub);
  }
  BufferRef dstSlice(const TbState& state, uint32_t sub) const {
    return sliceOf(state.cur.dst_buffer, state.cur.dst_offset, state, sub);
  }
  BufferRef tempSlice(const TbState& state, uint32_t sub) const {
    return BufferRef{state.temp.buffer, state.temp.offset + subOffset(sub), subLength(state, sub)};
  }
  // What slice `sub` of the running step sends.
  BufferRef sendSlice(const TbState& state, uint32_t sub) const {
    switch (state.cur.type) {
      case OpType::kSend: return srcSlice(state, sub);
      case OpType::kRecvReduceSend: return tempSlice(state, sub);
      case OpType::kRecvReduceCopySend:
        return state.route == Route::kStagedOverlap ? tempSlice(state, sub) : dstSlice(state, sub);
      default: return dstSlice(state, sub);
    }
  }
  // Slice `sub` may send: post the sends of the iteration in slice order, as far as they are ready.
  Status readySend(int g, uint32_t sub) {
    TbState& state = tbs_[g];
    state.send_ready |= uint32_t{1} << sub;
    while (state.next_send < state.subs && (state.send_ready & (uint32_t{1} << state.next_send)) != 0) {
      BRAID_RETURN_IF_ERROR(postSend(g, sendSlice(state, state.next_send), state.next_send));
      ++state.next_send;
    }
    return Status::ok();
  }

  Status startSlice(int g) {
    TbState& state = tbs_[g];
    const int64_t flat = state.first_step + state.step;
    state.cur = steps_[flat];
    const ExecStep& step = state.cur;
    const uint64_t group = slice_ == 0 ? step.bytes : plan::iterationBytes(plan_);
    state.offset = uint64_t{state.iter} * group;
    state.length = std::min(group, step.bytes - state.offset);
    state.subs = slice_ == 0 ? 1 : static_cast<uint32_t>(plan::sliceCount(state.length, slice_));
    state.next_send = 0;
    state.send_ready = 0;
    state.start_us = transport_.nowUs();
    if (record_ && state.iter == 0) timings_[flat].start_us = state.start_us;
    state.outstanding = 0;
    if (state.step + 1 < state.num_steps) __builtin_prefetch(&steps_[flat + 1]);
    switch (step.type) {
      case OpType::kNop: return finishSlice(g, state.start_us);
      case OpType::kCopy:
      case OpType::kReduce:
        for (uint32_t q = 0; q < state.subs; ++q) {
          BRAID_RETURN_IF_ERROR(postLocal(g, srcSlice(state, q), dstSlice(state, q), step.type == OpType::kReduce,
                                          /*fused=*/false, kLocalDone, q));
        }
        return Status::ok();
      case OpType::kSend:
        for (uint32_t q = 0; q < state.subs; ++q) BRAID_RETURN_IF_ERROR(readySend(g, q));
        return Status::ok();
      default: break;
    }
    state.route = Route::kDirect;
    if (step.type == OpType::kRecvReduceCopy || step.type == OpType::kRecvReduceCopySend) {
      const BufferRef src{step.src_buffer, step.src_offset, step.bytes};
      const BufferRef dst{step.dst_buffer, step.dst_offset, step.bytes};
      if (plan::sameRange(src, dst)) {
        state.route = Route::kStagedSame;
      } else if (plan::overlaps(src, dst)) {
        state.route = Route::kStagedOverlap;
      }
    }
    const bool staged = step.type == OpType::kRecvReduceSend || state.route != Route::kDirect;
    for (uint32_t q = 0; q < state.subs; ++q) {
      BRAID_RETURN_IF_ERROR(postRecv(g, staged ? tempSlice(state, q) : dstSlice(state, q), q));
    }
    return Status::ok();
  }

  // A request of threadblock g's running slice (or a precopy of rank g) completed at time_us.
  Status handle(uint64_t value, double time_us) {
    const uint32_t owner = static_cast<uint32_t>(value >> 32);
    const Kind kind = static_cast<Kind>(value & 0xFFu);
    const uint32_t q = static_cast<uint32_t>(value >> 8) & 0xFFu;
    end_us_ = std::max(end_us_, time_us);
    if (kind == kPrecopyDone) {
      if (--precopies_left_[owner] == 0) releaseRank(static_cast<int>(owner));
      return Status::ok();
    }
    const int g = static_cast<int>(owner);
    TbState& state = tbs_[g];
    const OpType type = state.cur.type;
    constexpr bool kReduce = true;
    constexpr bool kFused = true;
    if (kind == kRecvDone) {
      switch (type) {
        case OpType::kRecvCopySend: BRAID_RETURN_IF_ERROR(readySend(g, q)); break;
        case OpType::kRecvReduceSend:
          BRAID_RETURN_IF_ERROR(postLocal(g, srcSlice(state, q), tempSlice(state, q), kReduce, kFused, kReduceDone, q));
          break;
        case OpType::kRecvReduceCopy:
        case OpType::kRecvReduceCopySend:
          switch (state.route) {
            case Route::kDirect:
              BRAID_RETURN_IF_ERROR(
                  postLocal(g, srcSlice(state, q), dstSlice(state, q), kReduce, kFused, kReduceDone, q));
              break;
            case Route::kStagedSame:
              BRAID_RETURN_IF_ERROR(
                  postLocal(g, tempSlice(state, q), dstSlice(state, q), kReduce, kFused, kReduceDone, q));
              break;
            case Route::kStagedOverlap:
              BRAID_RETURN_IF_ERROR(
                  postLocal(g, srcSlice(state, q), tempSlice(state, q), kReduce, kFused, kReduceDone, q));
              break;
          }
          break;
        default: break;  // kRecv: the data is where it belongs
      }
    } else if (kind == kReduceDone) {
      if (type == OpType::kRecvReduceSend) {
        BRAID_RETURN_IF_ERROR(readySend(g, q));
      } else if (state.route == Route::kStagedOverlap) {
        BRAID_RETURN_IF_ERROR(postLocal(g, tempSlice(state, q), dstSlice(state, q), !kReduce, kFused, kCopyDone, q));
        if (type == OpType::kRecvReduceCopySend) BRAID_RETURN_IF_ERROR(readySend(g, q));
      } else if (type == OpType::kRecvReduceCopySend) {
        BRAID_RETURN_IF_ERROR(readySend(g, q));
      }
    }
    if (--state.outstanding == 0) return finishSlice(g, time_us);
    return Status::ok();
  }

  // Threadblock g's running slice finished: wake what waited on it, move to the next slice in
  // (iteration, step) order.
  Status finishSlice(int g, double time_us) {
    TbState& state = tbs_[g];
    const int64_t flat = state.first_step + state.step;
    end_us_ = std::max(end_us_, time_us);
    if (record_) timings_[flat].end_us = time_us;
    // Advance first: the waiters check this threadblock's position.
    const ExecStep& finished = state.cur;
    do {
      if (++state.step == state.num_steps) {
        state.step = 0;
        if (++state.iter == state.iterations) {
          state.done = true;
          --running_;
          break;
        }
      }
    } while (steps_[state.first_step + state.step].slices <= state.iter);
    for (uint32_t w = finished.waiters_begin; w < finished.waiters_begin + finished.waiters_count; ++w) {
      const StepRef& waiter = waiters_[w];
      const TbState& other = tbs_[waiter.tb];
      if (other.waiting && other.step == waiter.step && depsMet(waiter.tb)) {
        tbs_[waiter.tb].waiting = false;
        ready_.push_back(waiter.tb);
      }
    }
    if (!state.done) arrive(g);
    return Status::ok();
  }

  Status stuck() const {
    std::string waiting;
    int listed = 0;
    int stuck_tbs = 0;
    for (const TbState& state : tbs_) {
      if (state.done) continue;
      ++stuck_tbs;
      if (listed == 8) continue;
      ++listed;
      const PlanStep& step = plan_.ranks[state.rank].threadblocks[state.id].steps[state.step];
      std::string deps;
      const ExecStep& exec = steps_[state.first_step + state.step];
      for (uint32_t d = exec.deps_begin; d < exec.deps_begin + exec.deps_count; ++d) {
        const StepRef& dep = deps_[d];
        const TbState& other = tbs_[dep.tb];
        const uint32_t last = steps_[other.first_step + dep.step].slices - 1;
        if (!passed(other, std::min(state.iter, last), dep.step))
          deps += fmt::format(" tb {} step {}", other.id, dep.step);
      }
      waiting += fmt::format("{}rank {} tb {} step {} ({}, slice {}) waits for{}", listed > 1 ? "; " : "", state.rank,
                             state.id, state.step, opTypeName(step.type), state.iter,
                             deps.empty() ? " its rank's precopies" : deps);
    }
    if (stuck_tbs > listed) waiting += fmt::format("; and {} more", stuck_tbs - listed);
    return invalidArgument(
        fmt::format("plan '{}': {} threadblock(s) can never go on, their dependencies never finish: {}",
                    plan_.algorithm, stuck_tbs, waiting));
  }

  const Plan& plan_;
  Transport& transport_;
  bool record_;
  std::vector<int> ranks_;
  uint64_t slice_ = 0;
  uint32_t k_ = 1;              // slices per iteration (Plan::slices_per_iteration)
  std::vector<int> rank_base_;  // rank -> first index in tbs_ (-1: not local)
  std::vector<TbState> tbs_;
  std::vector<ExecStep> steps_;  // flat: threadblock by threadblock
  std::vector<StepRef> deps_;
  std::vector<StepRef> waiters_;
  int64_t total_steps_ = 0;
  int64_t running_ = 0;  // threadblocks not done
  std::vector<int> precopies_left_;
  std::deque<int> ready_;  // threadblocks whose current slice can start
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
