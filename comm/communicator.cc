// The Communicator (include/braid/comm.h): buffers and counts of a call -> a plan -> the executor over the
// data transport. comm/README.md describes the call path, the tail path and the caches.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string_view>

#include "braid/comm.h"
#include "braid/executor.h"
#include "braid/plan.h"
#include "braid/transports.h"
#include "comm/alltoall_choice.h"
#include "comm/alltoallv_plan.h"
#include "comm/pareto_exchange.h"
#include "comm/selection.h"
#include "common/env.h"
#include "common/log.h"
#include "common/text.h"

namespace braid {
namespace {

using comm::AlgorithmCatalog;
using comm::Candidate;

bool rangesOverlap(const void* a, uint64_t a_bytes, const void* b, uint64_t b_bytes) {
  if (a_bytes == 0 || b_bytes == 0) return false;
  const auto pa = reinterpret_cast<uintptr_t>(a);
  const auto pb = reinterpret_cast<uintptr_t>(b);
  return pa < pb + b_bytes && pb < pa + a_bytes;
}

// All-gather, reduce-scatter and all-to-all buffers are n rank pieces; the others are one element-wise buffer.
bool isPieced(CollectiveKind kind) {
  return kind == CollectiveKind::kAllGather || kind == CollectiveKind::kReduceScatter ||
         kind == CollectiveKind::kAllToAll;
}

// One collective call, in bytes.
struct Call {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  uint64_t count = 0;      // elements, as passed (per rank / per peer, see comm.h)
  uint64_t size = 0;       // nccl-tests size (plan.h)
  uint64_t in_bytes = 0;   // this rank's send buffer bytes
  uint64_t out_bytes = 0;  // this rank's receive buffer bytes
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  bool in_place = false;
  bool overflow = false;  // count x element size (x ranks) does not fit 64 bits
};

// 2^48 bytes (256 TiB): above any buffer of today's machines; larger byte counts are a caller's count error.
constexpr uint64_t kMaxCallBytes = uint64_t{1} << 48;

// a * b * c in bytes, flagging overflow.
uint64_t bytesOf(uint64_t a, uint64_t b, uint64_t c, bool* overflow) {
  uint64_t ab = 0;
  uint64_t abc = 0;
  if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, &abc)) {
    *overflow = true;
    return 0;
  }
  return abc;
}

// Which calls the call check covers (BRAID_CALL_CHECK, src/common/env.cc).
enum class CallCheck { kRooted, kAll, kOff };

Result<CallCheck> parseCallCheck(const std::string& value) {
  if (value == "rooted") return CallCheck::kRooted;
  if (value == "all") return CallCheck::kAll;
  if (value == "off") return CallCheck::kOff;
  return invalidArgument(fmt::format("BRAID_CALL_CHECK={}: not one of rooted, all, off", value));
}

// The call check (comm/README.md): before any data moves, every rank sends every other rank one record of its
// call on kCallCheckChannel and receives one from each, so every rank sees every rank's call and all reach the
// same verdict. Fixed size, whatever the call, so a record always matches its receive.
constexpr uint32_t kCallRecordMagic = 0x4252434b;  // "BRCK"
constexpr int32_t kAllToAllvKind = 100;            // CallRecord::kind of allToAllv (not a CollectiveKind)
constexpr int32_t kVerdictKind = 101;              // the second round of allToAllv: a pair's disagreement

struct CallRecord {
  uint32_t magic = kCallRecordMagic;
  int32_t kind = 0;      // CollectiveKind, kAllToAllvKind or kVerdictKind
  uint64_t count = 0;    // elements as passed; allToAllv: the writer's total send bytes (not compared); verdict: 1
                         // when a pair disagrees
  int32_t type = 0;      // DataType
  int32_t op = -1;       // ReduceOp of reducing collectives, else -1
  int32_t root = -1;     // broadcast and reduce, else -1; verdict: the sending rank of the pair
  int32_t peer = -1;     // verdict: the receiving rank of the pair
  uint64_t sends = 0;    // allToAllv: bytes the writer sends to the record's receiver
  uint64_t expects = 0;  // allToAllv: bytes the writer expects from the record's receiver
};
static_assert(sizeof(CallRecord) == 48);

const char* callName(int32_t kind) {
  if (kind == kAllToAllvKind) return "alltoallv";
  return collectiveName(static_cast<CollectiveKind>(kind));
}

// "rank 1 called broadcast with root 1, rank 0 with root 0" (the first field in which `other` differs from
// `first`), or "" when they agree.
std::string describeDisagreement(int first_rank, const CallRecord& first, int other_rank, const CallRecord& other) {
  const char* name = callName(other.kind);
  if (other.kind != first.kind)
    return fmt::format("rank {} called {}, rank {} {}", other_rank, name, first_rank, callName(first.kind));
  if (other.type != first.type) {
    return fmt::format("rank {} called {} with datatype {}, rank {} with datatype {}", other_rank, name,
                       dataTypeName(static_cast<DataType>(other.type)), first_rank,
                       dataTypeName(static_cast<DataType>(first.type)));
  }
  if (other.count != first.count && first.kind != kAllToAllvKind) {
    return fmt::format("rank {} called {} with count {}, rank {} with count {}", other_rank, name, other.count,
                       first_rank, first.count);
  }
  if (other.root != first.root) {
    return fmt::format("rank {} called {} with root {}, rank {} with root {}", other_rank, name, other.root, first_rank,
                       first.root);
  }
  if (other.op != first.op) {
    return fmt::format("rank {} called {} with op {}, rank {} with op {}", other_rank, name,
                       reduceOpName(static_cast<ReduceOp>(other.op)), first_rank,
                       reduceOpName(static_cast<ReduceOp>(first.op)));
  }
  return "";
}

class CommImpl final : public Communicator {
 public:
  CommImpl(std::unique_ptr<Bootstrap> bootstrap, std::unique_ptr<DataTransport> transport,
           std::unique_ptr<AlgorithmCatalog> catalog, bool allow_fallback, CallCheck call_check)
      : bootstrap_(std::move(bootstrap)),
        transport_(std::move(transport)),
        catalog_(std::move(catalog)),
        allow_fallback_(allow_fallback),
        call_check_(call_check),
        rank_(bootstrap_->rank()),
        size_(bootstrap_->size()),
        debug_(logEnabled(LogLevel::kInfo)) {}

  // Not collective (ncclCommDestroy is called for several communicators from one thread): each transport
  // delivers what its completed sends still hold before it closes.
  ~CommImpl() override = default;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* transportName() const override { return transport_->name(); }

  Status allReduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op) override {
    Call c = base(CollectiveKind::kAllReduce, send, recv, count, type, op);
    c.size = c.in_bytes = c.out_bytes = bytesOf(count, dataTypeSize(type), 1, &c.overflow);
    c.in_place = send == recv;
    return run(c);
  }

  Status allGather(const void* send, void* recv, size_t send_count, DataType type) override {
    Call c = base(CollectiveKind::kAllGather, send, recv, send_count, type, ReduceOp::kSum);
    c.in_bytes = bytesOf(send_count, dataTypeSize(type), 1, &c.overflow);
    c.size = c.out_bytes = bytesOf(send_count, dataTypeSize(type), size_, &c.overflow);
    c.in_place = send == static_cast<const uint8_t*>(recv) + c.in_bytes * rank_;
    return run(c);
  }

  Status reduceScatter(const void* send, void* recv, size_t recv_count, DataType type, ReduceOp op) override {
    Call c = base(CollectiveKind::kReduceScatter, send, recv, recv_count, type, op);
    c.out_bytes = bytesOf(recv_count, dataTypeSize(type), 1, &c.overflow);
    c.size = c.in_bytes = bytesOf(recv_count, dataTypeSize(type), size_, &c.overflow);
    c.in_place = recv == static_cast<const uint8_t*>(send) + c.out_bytes * rank_;
    return run(c);
  }

  Status allToAll(const void* send, void* recv, size_t count, DataType type) override {
    Call c = base(CollectiveKind::kAllToAll, send, recv, count, type, ReduceOp::kSum);
    c.size = c.in_bytes = c.out_bytes = bytesOf(count, dataTypeSize(type), size_, &c.overflow);
    c.in_place = send == recv;
    return run(c);
  }

  Status broadcast(const void* send, void* recv, size_t count, DataType type, int root) override {
    Call c = base(CollectiveKind::kBroadcast, send, recv, count, type, ReduceOp::kSum);
    c.root = root;
    c.size = c.out_bytes = bytesOf(count, dataTypeSize(type), 1, &c.overflow);
    c.in_bytes = rank_ == root ? c.size : 0;
    c.in_place = send == recv || (rank_ != root && send == nullptr);
    return run(c);
  }

  Status reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root) override {
    Call c = base(CollectiveKind::kReduce, send, recv, count, type, op);
    c.root = root;
    c.size = c.in_bytes = bytesOf(count, dataTypeSize(type), 1, &c.overflow);
    c.out_bytes = rank_ == root ? c.size : 0;
    c.in_place = send == recv;
    return run(c);
  }

  Status allToAllv(const void* send, const size_t* send_counts, const size_t* send_displs, void* recv,
                   const size_t* recv_counts, const size_t* recv_displs, DataType type) override;

  Result<AlgorithmChoice> choose(CollectiveKind collective, uint64_t bytes, bool in_place) override {
    BRAID_ASSIGN_OR_RETURN(const Candidate* c, catalog_->choose(collective, bytes, in_place, 0, allow_fallback_));
    return AlgorithmChoice{c->algorithm.name, c->source, c->instances};
  }

  void abort(const std::string& why) override {
    if (failed_.isOk()) failed_ = Status(StatusCode::kRemoteError, fmt::format("rank {} aborted: {}", rank_, why));
    transport_->abort(failed_);
    bootstrap_->abort(why);
  }

 private:
  Status allToAllvCheck(const comm::AllToAllvCall& call, DataType type, uint64_t total, uint64_t* all_totals);
  Status exchangeNodeCounts(const comm::AllToAllvCall& call, const comm::NodeShape& shape,
                            std::vector<uint64_t>* from_node_peers);

  Call base(CollectiveKind kind, const void* send, void* recv, size_t count, DataType type, ReduceOp op) const {
    Call c;
    c.kind = kind;
    c.send = send;
    c.recv = recv;
    c.count = count;
    c.type = type;
    c.op = op;
    return c;
  }

  Status check(const Call& c) const {
    const char* name = collectiveName(c.kind);
    if (c.overflow) {
      return invalidArgument(fmt::format("{} on rank {}: count {} of {} is too large (its byte size overflows 64 bits)",
                                         name, rank_, c.count, dataTypeName(c.type)));
    }
    if (c.size > kMaxCallBytes) {
      return invalidArgument(fmt::format("{} on rank {}: count {} of {} is {} bytes, more than any buffer can hold",
                                         name, rank_, c.count, dataTypeName(c.type), c.size));
    }
    if (static_cast<int>(c.type) < 0 || static_cast<int>(c.type) >= kNumDataTypes)
      return invalidArgument(fmt::format("{}: invalid datatype {}", name, static_cast<int>(c.type)));
    if (static_cast<int>(c.op) < 0 || static_cast<int>(c.op) >= kNumReduceOps)
      return invalidArgument(fmt::format("{}: invalid reduction op {}", name, static_cast<int>(c.op)));
    if ((c.kind == CollectiveKind::kBroadcast || c.kind == CollectiveKind::kReduce) && (c.root < 0 || c.root >= size_))
      return invalidArgument(fmt::format("{}: root {} is not a rank of this communicator of {}", name, c.root, size_));
    if (c.in_bytes > 0 && c.send == nullptr)
      return invalidArgument(fmt::format("{} on rank {}: send buffer is null with count {}", name, rank_, c.count));
    if (c.out_bytes > 0 && c.recv == nullptr)
      return invalidArgument(fmt::format("{} on rank {}: receive buffer is null with count {}", name, rank_, c.count));
    if (!c.in_place && rangesOverlap(c.send, c.in_bytes, c.recv, c.out_bytes)) {
      return invalidArgument(fmt::format(
          "{} on rank {}: send and receive buffers overlap but are not the in-place layout (NCCL's: all-gather "
          "send = recv + rank*sendcount, reduce-scatter recv = send + rank*recvcount, else send == recv); with "
          "count {} they span {} and {} bytes",
          name, rank_, c.count, c.in_bytes, c.out_bytes));
    }
    return Status::ok();
  }

  Status run(Call& c) {
    if (!failed_.isOk()) return failed_;
    BRAID_RETURN_IF_ERROR(check(c));
    BRAID_RETURN_IF_ERROR(checkCall(c));
    if (c.size == 0) return Status::ok();  // every rank has count 0: nothing moves (as NCCL)
    Status status = runChosen(c);
    if (!status.isOk()) fail(status);
    return status;
  }

  // The record of call `c` (every rank writes the same one for the same call).
  static CallRecord recordOf(const Call& c) {
    CallRecord record;
    record.kind = static_cast<int32_t>(c.kind);
    record.count = c.count;
    record.type = static_cast<int32_t>(c.type);
    const bool reduces = c.kind == CollectiveKind::kAllReduce || c.kind == CollectiveKind::kReduceScatter ||
                         c.kind == CollectiveKind::kReduce;
    if (reduces) record.op = static_cast<int32_t>(c.op);
    if (c.kind == CollectiveKind::kBroadcast || c.kind == CollectiveKind::kReduce) record.root = c.root;
    return record;
  }

  Status checkCall(const Call& c) {
    const bool rooted = c.kind == CollectiveKind::kBroadcast || c.kind == CollectiveKind::kReduce;
    if (call_check_ == CallCheck::kOff || (call_check_ == CallCheck::kRooted && !rooted)) return Status::ok();
    const CallRecord mine = recordOf(c);
    BRAID_RETURN_IF_ERROR(exchangeRecords([&](int) { return mine; }));
    return agreement(collectiveName(c.kind));
  }

  // One round of the call check: record(p) goes to every peer p, and check_in_[q] receives peer q's record to this
  // rank (check_in_[rank_] = record(rank_)). A transport error fails the communicator (as any call's); nothing else
  // is left outstanding: every rank posts n-1 sends and n-1 receives of one record each.
  Status exchangeRecords(const std::function<CallRecord(int peer)>& record) {
    const size_t n = static_cast<size_t>(size_);
    check_in_.resize(n);
    check_out_.resize(n);
    for (int p = 0; p < size_; ++p) check_out_[p] = record(p);
    check_in_[rank_] = check_out_[rank_];
    std::vector<int> peers;
    std::vector<CallRecord> out;
    for (int k = 1; k < size_; ++k) {
      peers.push_back((rank_ + k) % size_);
      out.push_back(check_out_[peers.back()]);
    }
    std::vector<CallRecord> in(peers.size());
    BRAID_RETURN_IF_ERROR(exchangeControl(peers, sizeof(CallRecord), out.data(), in.data()));
    for (size_t i = 0; i < peers.size(); ++i) {
      const int p = peers[i];
      check_in_[p] = in[i];
      if (check_in_[p].magic != kCallRecordMagic) {
        const Status garbled(StatusCode::kInternalError,
                             fmt::format("rank {}: the call check record from rank {} is garbled", rank_, p));
        fail(garbled);
        return garbled;
      }
    }
    return Status::ok();
  }

  // One round of fixed-size control messages on kCallCheckChannel (plan.h: no plan's channel): message i of `out`
  // (`bytes` each) goes to peers[i], and message i of `in` comes from peers[i]. Every rank of the round names the
  // same pairs, so nothing is left in a connection. A transport error fails the communicator.
  Status exchangeControl(const std::vector<int>& peers, size_t bytes, const void* out, void* in) {
    const size_t k = peers.size();
    if (k == 0) return Status::ok();
    // Scratch holds [in messages | out messages].
    check_memory_.resize(2 * k * bytes);
    std::memcpy(check_memory_.data() + k * bytes, out, k * bytes);
    Status status = [&]() -> Status {
      RankMemory memory;
      memory.scratch = check_memory_.data();
      memory.scratch_bytes = check_memory_.size();
      BRAID_RETURN_IF_ERROR(transport_->bind(rank_, memory, ReduceSpec{}));
      for (size_t i = 0; i < k; ++i) {
        BRAID_RETURN_IF_ERROR(transport_
                                  ->postRecv(RecvRequest{rank_, peers[i], kCallCheckChannel,
                                                         BufferRef{BufferKind::kScratch, i * bytes, bytes}})
                                  .status());
      }
      for (size_t i = 0; i < k; ++i) {
        BRAID_RETURN_IF_ERROR(transport_
                                  ->postSend(SendRequest{rank_, peers[i], kCallCheckChannel,
                                                         BufferRef{BufferKind::kScratch, (k + i) * bytes, bytes}})
                                  .status());
      }
      size_t left = 2 * k;
      while (left > 0) {
        check_done_.clear();
        BRAID_RETURN_IF_ERROR(transport_->poll(&check_done_, /*block=*/true));
        left -= std::min(left, check_done_.size());
      }
      return Status::ok();
    }();
    if (!status.isOk()) {
      fail(status);
      return status;
    }
    std::memcpy(in, check_memory_.data(), k * bytes);
    return Status::ok();
  }

  // After exchangeRecords: kInvalidArgument naming the first rank whose call differs from rank 0's (the same
  // message on every rank), ok when all agree. Nothing is left behind: the communicator stays usable.
  Status agreement(const char* name) const {
    for (int p = 1; p < size_; ++p) {
      const std::string differs = describeDisagreement(0, check_in_[0], p, check_in_[p]);
      if (!differs.empty()) {
        return invalidArgument(
            fmt::format("{} on rank {}: the ranks' calls do not match: {}; no rank ran it", name, rank_, differs));
      }
    }
    return Status::ok();
  }

  void fail(const Status& status) {
    failed_ = status;
    transport_->abort(status);
    bootstrap_->abort(status.message());
  }

  // BRAID_DEBUG=INFO: rank 0 logs each (collective, size, mode, root) once. Every rank makes the same choice (the
  // catalogs are compared at init and the choice depends only on the call), so other ranks' lines would repeat it.
  void logChoice(const Call& c, const Candidate& chosen, const std::string& how) {
    if (!debug_ || rank_ != 0) return;
    const auto key = std::make_tuple(static_cast<int>(c.kind), c.size, c.in_place, c.root);
    if (!logged_.insert(key).second) return;
    BRAID_LOG_RANK(kInfo, rank_, "{} {} B {} -> {} ({}){}", collectiveName(c.kind), c.size,
                   c.in_place ? "in-place" : "out-of-place", chosen.algorithm.name, chosen.source, how);
  }

  // Lowers `candidate` for `size` bytes (cached). kUnsupported when the count does not split into its chunks.
  Result<const Plan*> plan(const Candidate& candidate, uint64_t size, bool in_place, DataType type) {
    const auto key = std::make_tuple(&candidate, size, in_place, dataTypeSize(type));
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second.get();
    // The options simulate() derives too (plan.h), so the plan run here is the plan simulated.
    const LowerOptions options = callLowerOptions(size, in_place, candidate.instances, dataTypeSize(type));
    BRAID_ASSIGN_OR_RETURN(Plan lowered, lowerAlgorithm(candidate.algorithm, options));
    if (plans_.size() >= 256) plans_.clear();
    auto stored = std::make_unique<Plan>(std::move(lowered));
    const Plan* out = stored.get();
    plans_.emplace(key, std::move(stored));
    return out;
  }

  uint8_t* scratch(uint64_t bytes, int slot) {
    std::vector<uint8_t>& buffer = scratch_[slot];
    if (buffer.size() < bytes) buffer.resize(bytes);
    return buffer.data();
  }

  // Runs one lowered plan on the given memory (all pointers of this rank; sizes from the plan).
  Status execute(const Plan& p, const void* input, void* output, const Call& c) {
    const RankPlan& mine = p.ranks[rank_];
    RankMemory memory;
    memory.input = const_cast<void*>(input);
    memory.input_bytes = input != nullptr ? mine.input_bytes : 0;
    memory.output = output;
    memory.output_bytes = output != nullptr ? mine.output_bytes : 0;
    const uint64_t scratch_bytes = mine.scratch_bytes + mine.temp_bytes;
    memory.scratch = scratch_bytes > 0 ? scratch(scratch_bytes, 0) : nullptr;
    memory.scratch_bytes = scratch_bytes;
    ReduceSpec reduce{c.type, c.op == ReduceOp::kAvg ? ReduceOp::kSum : c.op};
    BRAID_RETURN_IF_ERROR(transport_->bind(rank_, memory, reduce));
    ExecOptions options;
    options.local_ranks = {rank_};
    Result<ExecResult> result = braid::execute(p, *transport_, options);
    return result.isOk() ? Status::ok() : result.status();
  }

  // The pointers a plan gets for this call: non-root broadcast ranks read nothing (input = output), non-root
  // reduce ranks write a scratch output (their recv buffer is not touched, as NCCL's).
  Status runPlan(const Plan& p, const Call& c, const void* send, void* recv) {
    const void* input = send;
    void* output = recv;
    // A non-root broadcast rank reads no input (in place its input is its output); a non-root reduce rank's
    // result is not wanted, its plan writes a scratch output.
    if (c.kind == CollectiveKind::kBroadcast && rank_ != c.root) input = c.in_place ? recv : send;
    if (c.kind == CollectiveKind::kReduce && rank_ != c.root && !c.in_place)
      output = scratch(p.ranks[rank_].output_bytes, 1);
    return execute(p, input, output, c);
  }

  Status runChosen(Call& c) {
    BRAID_ASSIGN_OR_RETURN(const Candidate* chosen,
                           catalog_->choose(c.kind, c.size, c.in_place, c.root, allow_fallback_));
    Result<const Plan*> lowered = plan(*chosen, c.size, c.in_place, c.type);
    if (lowered.isOk()) {
      logChoice(c, *chosen, "");
      BRAID_RETURN_IF_ERROR(runPlan(**lowered, c, c.send, c.recv));
    } else if (lowered.status().code() == StatusCode::kUnsupported) {
      BRAID_RETURN_IF_ERROR(runTail(c, *chosen));
    } else {
      return lowered.status();
    }
    return finish(c);
  }

  // kAvg: the plans summed; divide where the result lives.
  Status finish(const Call& c) {
    if (c.op != ReduceOp::kAvg) return Status::ok();
    if (c.kind == CollectiveKind::kAllReduce || c.kind == CollectiveKind::kReduceScatter ||
        (c.kind == CollectiveKind::kReduce && rank_ == c.root)) {
      finishAverage(c.recv, c.out_bytes / dataTypeSize(c.type), c.type, size_);
    }
    return Status::ok();
  }

  // Elements per piece the algorithm's chunks divide: all-reduce / broadcast / reduce buffers have
  // num_chunks chunks; all-gather / reduce-scatter / all-to-all rank pieces num_chunks / n.
  uint64_t chunkGranule(const Candidate& chosen) const {
    const uint64_t chunks = static_cast<uint64_t>(std::max(1, chosen.algorithm.num_chunks)) *
                            static_cast<uint64_t>(std::max(1, chosen.instances));
    const bool pieced = isPieced(chosen.algorithm.collective);
    return pieced ? std::max<uint64_t>(1, chunks / static_cast<uint64_t>(size_)) : chunks;
  }

  // The tail path (comm/README.md): counts whose chunks of different sizes would meet in the algorithm.
  // Element-wise collectives run the largest prefix that splits evenly with the chosen algorithm and the rest
  // with the classical fallback, in place in the user's buffers. Pieced collectives (all-gather,
  // reduce-scatter, all-to-all) run the chosen algorithm on a count padded to whole chunks in staging buffers
  // and copy the result out.
  Status runTail(const Call& c, const Candidate& chosen) {
    const uint64_t esz = dataTypeSize(c.type);
    const uint64_t granule = chunkGranule(chosen);
    const uint64_t main = c.count - c.count % granule;
    if (!isPieced(c.kind)) {
      const uint64_t tail = c.count - main;
      logChoice(c, chosen, fmt::format(", tail path: {} + {} elements", main, tail));
      if (main > 0) {
        BRAID_ASSIGN_OR_RETURN(const Plan* head_plan, plan(chosen, main * esz, c.in_place, c.type));
        BRAID_RETURN_IF_ERROR(runPlan(*head_plan, c, c.send, c.recv));
      }
      if (tail > 0) {
        BRAID_ASSIGN_OR_RETURN(const Candidate* fallback, catalog_->classical(c.kind, tail * esz, c.in_place, c.root));
        BRAID_ASSIGN_OR_RETURN(const Plan* tail_plan, plan(*fallback, tail * esz, c.in_place, c.type));
        const void* send = c.send != nullptr ? static_cast<const uint8_t*>(c.send) + main * esz : nullptr;
        void* recv = c.recv != nullptr ? static_cast<uint8_t*>(c.recv) + main * esz : nullptr;
        BRAID_RETURN_IF_ERROR(runPlan(*tail_plan, c, send, recv));
      }
      return Status::ok();
    }
    // Pieced: pad every rank piece from count to padded elements.
    const uint64_t padded = main == c.count ? c.count : main + granule;
    const uint64_t n = static_cast<uint64_t>(size_);
    logChoice(c, chosen, fmt::format(", tail path: padded {} -> {} elements per piece", c.count, padded));
    const bool out_of_place = chosen.algorithm.out_of_place;
    BRAID_ASSIGN_OR_RETURN(const Plan* padded_plan, plan(chosen, padded * esz * n, !out_of_place, c.type));
    const uint64_t in_pieces = c.kind == CollectiveKind::kAllGather ? 1 : n;
    const uint64_t out_pieces = c.kind == CollectiveKind::kReduceScatter ? 1 : n;
    std::vector<uint8_t>& in_stage = scratch_[3];
    std::vector<uint8_t>& out_stage = scratch_[4];
    in_stage.assign(in_pieces * padded * esz, 0);
    out_stage.assign(out_pieces * padded * esz, 0);
    const uint8_t* send = static_cast<const uint8_t*>(c.send);
    for (uint64_t p = 0; p < in_pieces; ++p)
      std::memcpy(in_stage.data() + p * padded * esz, send + p * c.count * esz, c.count * esz);
    if (out_of_place) {
      BRAID_RETURN_IF_ERROR(runPlan(*padded_plan, c, in_stage.data(), out_stage.data()));
    } else {
      // In-place only: the input occupies its in-place position in the larger buffer.
      if (c.kind == CollectiveKind::kAllGather) {
        std::memcpy(out_stage.data() + static_cast<uint64_t>(rank_) * padded * esz, in_stage.data(), padded * esz);
        BRAID_RETURN_IF_ERROR(runPlan(*padded_plan, c, out_stage.data() + rank_ * padded * esz, out_stage.data()));
      } else if (c.kind == CollectiveKind::kReduceScatter) {
        BRAID_RETURN_IF_ERROR(runPlan(*padded_plan, c, in_stage.data(), in_stage.data() + rank_ * padded * esz));
        std::memcpy(out_stage.data(), in_stage.data() + rank_ * padded * esz, padded * esz);
      } else {
        std::memcpy(out_stage.data(), in_stage.data(), in_stage.size());
        BRAID_RETURN_IF_ERROR(runPlan(*padded_plan, c, out_stage.data(), out_stage.data()));
      }
    }
    uint8_t* recv = static_cast<uint8_t*>(c.recv);
    for (uint64_t p = 0; p < out_pieces; ++p)
      std::memmove(recv + p * c.count * esz, out_stage.data() + p * padded * esz, c.count * esz);
    return Status::ok();
  }

  std::unique_ptr<Bootstrap> bootstrap_;
  std::unique_ptr<DataTransport> transport_;
  std::unique_ptr<AlgorithmCatalog> catalog_;
  bool allow_fallback_ = true;
  CallCheck call_check_ = CallCheck::kRooted;
  int rank_ = 0;
  int size_ = 0;
  bool debug_ = false;
  Status failed_;
  std::map<std::tuple<const Candidate*, uint64_t, bool, size_t>, std::unique_ptr<Plan>> plans_;
  std::map<int, std::vector<uint8_t>> scratch_;  // 0: plan scratch, 1: reduce non-root output, 2-4: staging
  std::set<std::tuple<int, uint64_t, bool, int>> logged_;
  std::map<std::vector<uint64_t>, std::unique_ptr<Plan>> alltoallv_plans_;
  std::vector<CallRecord> check_in_;   // the call check: every rank's record to this rank
  std::vector<CallRecord> check_out_;  // this rank's record to every rank
  std::vector<uint8_t> check_memory_;  // the transport's view of both
  std::vector<Completion> check_done_;
};

// All-to-all-v (comm/README.md, "All-to-all-v"): the call check (with the pairs' byte counts), the choice between
// the flat exchange and 2DH (AllToAllChooser, on the mean bytes per pair when the choice depends on the size), for
// 2DH an intra-node exchange of the block sizes, then a plan built by hand (alltoallv_plan.h), cached per shape.
Status CommImpl::allToAllv(const void* send, const size_t* send_counts, const size_t* send_displs, void* recv,
                           const size_t* recv_counts, const size_t* recv_displs, DataType type) {
  if (!failed_.isOk()) return failed_;
  if (static_cast<int>(type) < 0 || static_cast<int>(type) >= kNumDataTypes)
    return invalidArgument(fmt::format("alltoallv: invalid datatype {}", static_cast<int>(type)));
  if (send_counts == nullptr || send_displs == nullptr || recv_counts == nullptr || recv_displs == nullptr)
    return invalidArgument(fmt::format("alltoallv on rank {}: counts and displacements must not be null", rank_));
  const uint64_t esz = dataTypeSize(type);
  comm::AllToAllvCall call;
  call.rank = rank_;
  call.num_ranks = size_;
  call.element_bytes = esz;
  bool overflow = false;
  uint64_t total = 0;  // bytes this rank sends, itself included
  for (int p = 0; p < size_; ++p) {
    call.send_bytes.push_back(bytesOf(send_counts[p], esz, 1, &overflow));
    call.send_offset.push_back(bytesOf(send_displs[p], esz, 1, &overflow));
    call.recv_bytes.push_back(bytesOf(recv_counts[p], esz, 1, &overflow));
    call.recv_offset.push_back(bytesOf(recv_displs[p], esz, 1, &overflow));
    call.input_bytes =
        std::max<uint64_t>(call.input_bytes, bytesOf(send_displs[p] + send_counts[p], esz, 1, &overflow));
    call.output_bytes =
        std::max<uint64_t>(call.output_bytes, bytesOf(recv_displs[p] + recv_counts[p], esz, 1, &overflow));
    overflow = overflow || send_displs[p] + send_counts[p] < send_counts[p] ||
               recv_displs[p] + recv_counts[p] < recv_counts[p];
    total += call.send_bytes.back();
  }
  if (overflow || call.input_bytes > kMaxCallBytes || call.output_bytes > kMaxCallBytes || total > kMaxCallBytes) {
    return invalidArgument(
        fmt::format("alltoallv on rank {}: counts and displacements give more bytes than any buffer holds", rank_));
  }
  if (call.input_bytes > 0 && send == nullptr)
    return invalidArgument(fmt::format("alltoallv on rank {}: send buffer is null", rank_));
  if (call.output_bytes > 0 && recv == nullptr)
    return invalidArgument(fmt::format("alltoallv on rank {}: receive buffer is null", rank_));
  if (send_counts[rank_] != recv_counts[rank_]) {
    return invalidArgument(fmt::format("alltoallv on rank {}: sends {} elements to itself but expects {}", rank_,
                                       send_counts[rank_], recv_counts[rank_]));
  }
  if (rangesOverlap(send, call.input_bytes, recv, call.output_bytes))
    return invalidArgument(fmt::format("alltoallv on rank {}: send and receive buffers overlap", rank_));
  comm::AllToAllChooser& chooser = catalog_->allToAll();
  // The call check, then the pairs' byte counts: a second round tells every rank of any pair that disagrees. The
  // first round also carries every rank's total, from which every rank computes the same mean bytes per pair.
  uint64_t all_totals = 0;
  if (call_check_ != CallCheck::kOff) {
    BRAID_RETURN_IF_ERROR(allToAllvCheck(call, type, total, &all_totals));
  } else if (chooser.needsSize()) {
    CallRecord record;
    record.kind = kAllToAllvKind;
    record.count = total;
    BRAID_RETURN_IF_ERROR(exchangeRecords([&](int) { return record; }));
    for (int p = 0; p < size_; ++p) all_totals += check_in_[p].count;
  }
  const uint64_t pairs = static_cast<uint64_t>(size_) * static_cast<uint64_t>(size_);
  const comm::AllToAllDecision& decision = chooser.decide(all_totals / pairs);
  const comm::NodeShape& shape = chooser.shape();
  const bool two_dim = decision.two_dim && shape.twoLevels();
  std::vector<uint64_t> key;
  key.reserve(4 * size_ + 2);
  key.push_back(two_dim ? 1 : 0);
  key.push_back(esz);
  for (int p = 0; p < size_; ++p) {
    key.insert(key.end(), {send_counts[p], send_displs[p], recv_counts[p], recv_displs[p]});
  }
  std::vector<uint64_t> from_node_peers;
  if (two_dim) {
    BRAID_RETURN_IF_ERROR(exchangeNodeCounts(call, shape, &from_node_peers));
    key.insert(key.end(), from_node_peers.begin(), from_node_peers.end());
  }
  auto it = alltoallv_plans_.find(key);
  if (it == alltoallv_plans_.end()) {
    Result<Plan> built = two_dim ? comm::twoDimAllToAllvPlan(call, shape.nodes, shape.ranks_per_node, from_node_peers)
                                 : comm::flatAllToAllvPlan(call);
    if (!built.isOk()) {
      fail(built.status());  // the peers run their part: tell them, rather than let them wait for this rank
      return built.status();
    }
    if (alltoallv_plans_.size() >= 64) alltoallv_plans_.clear();
    it = alltoallv_plans_.emplace(std::move(key), std::make_unique<Plan>(std::move(built).value())).first;
  }
  Call c;
  c.kind = CollectiveKind::kAllToAll;
  c.type = type;
  Status status = execute(*it->second, send, recv, c);
  if (!status.isOk()) fail(status);
  return status;
}

// The call check of an all-to-all-v: every rank's record to p carries the bytes it sends p and expects from p, and
// its total; a second round tells every rank of a pair whose counts disagree, and every rank fails naming both.
// `all_totals`: the sum of every rank's total.
Status CommImpl::allToAllvCheck(const comm::AllToAllvCall& call, DataType type, uint64_t total, uint64_t* all_totals) {
  CallRecord base;
  base.kind = kAllToAllvKind;
  base.type = static_cast<int32_t>(type);
  base.count = total;
  BRAID_RETURN_IF_ERROR(exchangeRecords([&](int p) {
    CallRecord record = base;
    record.sends = call.send_bytes[p];
    record.expects = call.recv_bytes[p];
    return record;
  }));
  BRAID_RETURN_IF_ERROR(agreement("alltoallv"));
  *all_totals = 0;
  for (int p = 0; p < size_; ++p) *all_totals += check_in_[p].count;
  CallRecord mine;
  mine.kind = kVerdictKind;
  for (int q = 0; q < size_ && mine.count == 0; ++q) {
    if (q != rank_ && check_in_[q].sends != check_out_[q].expects) {
      mine.count = 1;
      mine.root = q;
      mine.peer = rank_;
      mine.sends = check_in_[q].sends;
      mine.expects = check_out_[q].expects;
    }
  }
  BRAID_RETURN_IF_ERROR(exchangeRecords([&](int) { return mine; }));
  for (int p = 0; p < size_; ++p) {
    const CallRecord& v = check_in_[p];
    if (v.kind == kVerdictKind && v.count != 0) {
      return invalidArgument(fmt::format(
          "alltoallv on rank {}: rank {} sends {} bytes to rank {}, rank {} expects {} bytes from rank {}; no rank "
          "ran it",
          rank_, v.root, v.sends, v.peer, v.peer, v.expects, v.root));
    }
  }
  return Status::ok();
}

// 2DH's exchange of block sizes inside the node: node peer (q, j') learns, for every node q', the bytes this rank
// sends it in phase 1 for (q', j'); from_node_peers[j' * m + q'] receives what (q, j') sends this rank for (q', j).
Status CommImpl::exchangeNodeCounts(const comm::AllToAllvCall& call, const comm::NodeShape& shape,
                                    std::vector<uint64_t>* from_node_peers) {
  const int m = shape.nodes;
  const int g = shape.ranks_per_node;
  const int q = rank_ / g;
  const int j = rank_ % g;
  std::vector<int> peers;
  std::vector<uint64_t> out;
  for (int jj = 0; jj < g; ++jj) {
    if (jj == j) continue;
    peers.push_back(q * g + jj);
    for (int qq = 0; qq < m; ++qq) out.push_back(call.send_bytes[qq * g + jj]);
  }
  std::vector<uint64_t> in(out.size());
  BRAID_RETURN_IF_ERROR(exchangeControl(peers, m * sizeof(uint64_t), out.data(), in.data()));
  from_node_peers->assign(static_cast<size_t>(m) * g, 0);
  for (size_t i = 0; i < peers.size(); ++i) {
    const int jj = peers[i] % g;
    for (int qq = 0; qq < m; ++qq) (*from_node_peers)[jj * m + qq] = in[i * m + qq];
  }
  return Status::ok();
}

// The all-to-all(v) chooser of a communicator: the mode (CommOptions::alltoall, else BRAID_ALLTOALL), the node
// shape (the topology's nodes, else CommOptions::ranks_per_node / BRAID_RANKS_PER_NODE, else the hosts), and the
// topology to simulate on (`topology`: the communicator's when its GPU count is the rank count, else null).
Result<std::unique_ptr<comm::AllToAllChooser>> allToAllChooser(const CommOptions& options, const Bootstrap& bootstrap,
                                                               std::shared_ptr<const Topology> topology) {
  const int n = bootstrap.size();
  const std::string mode_setting = options.alltoall.empty() ? "BRAID_ALLTOALL" : "CommOptions::alltoall";
  BRAID_ASSIGN_OR_RETURN(
      comm::AllToAllMode mode,
      comm::parseAllToAllMode(options.alltoall.empty() ? envString("BRAID_ALLTOALL") : options.alltoall, mode_setting));
  int ranks_per_node = options.ranks_per_node;
  std::string rpn_setting = fmt::format("CommOptions::ranks_per_node = {}", ranks_per_node);
  if (ranks_per_node < 0) return invalidArgument(fmt::format("{}: not a count of ranks", rpn_setting));
  if (ranks_per_node == 0 && !envString("BRAID_RANKS_PER_NODE").empty()) {
    Result<int64_t> value = envInt("BRAID_RANKS_PER_NODE");
    if (!value.isOk() || *value < 1 || *value > n) {
      return invalidArgument(fmt::format("BRAID_RANKS_PER_NODE={}: not a count of ranks between 1 and {}",
                                         envString("BRAID_RANKS_PER_NODE"), n));
    }
    ranks_per_node = static_cast<int>(*value);
    rpn_setting = fmt::format("BRAID_RANKS_PER_NODE={}", ranks_per_node);
  }
  BRAID_ASSIGN_OR_RETURN(comm::NodeShape shape,
                         comm::resolveNodeShape(n, topology.get(), ranks_per_node, rpn_setting, bootstrap.hostNames()));
  if (mode == comm::AllToAllMode::kTwoDim && !shape.known()) {
    return invalidArgument(fmt::format("{}=2dh needs the ranks' node shape, and {}; set BRAID_RANKS_PER_NODE",
                                       mode_setting, shape.source));
  }
  return std::make_unique<comm::AllToAllChooser>(n, mode, mode_setting, std::move(shape), std::move(topology),
                                                 bootstrap.rank() == 0 ? 0 : -1);
}

// Every rank must hold the same catalog (same BRAID_ALGO_DIR contents, same synthesized set, same all-to-all
// choice): rank 0's digest is compared with everyone's, its all-to-all part (the leading "alltoall=...;" of
// AlgorithmCatalog::digest()) apart, so that the error names the settings that feed the part that differs.
Status checkSameCatalog(Bootstrap& bootstrap, const std::string& digest) {
  const auto fnv = [](std::string_view text) {
    uint64_t hash = 1469598103934665603ull;  // FNV-1a 64
    for (unsigned char ch : text) hash = (hash ^ ch) * 1099511628211ull;
    return hash;
  };
  const size_t split = digest.rfind("alltoall=", 0) == 0 ? digest.find(';') + 1 : 0;
  const std::string_view alltoall = std::string_view(digest).substr(0, split);
  std::vector<uint64_t> all(2 * bootstrap.size());
  all[2 * bootstrap.rank()] = fnv(alltoall);
  all[2 * bootstrap.rank() + 1] = fnv(std::string_view(digest).substr(split));
  BRAID_RETURN_IF_ERROR(bootstrap.allGather(all.data(), 2 * sizeof(uint64_t)));
  for (int r = 0; r < bootstrap.size(); ++r) {
    if (all[2 * r] != all[0]) {
      return Status(StatusCode::kInvalidUsage,
                    fmt::format("rank {} chooses all-to-all algorithms differently than rank 0 (rank {} holds '{}'; "
                                "BRAID_ALLTOALL / BRAID_RANKS_PER_NODE / BRAID_TOPO, or CommOptions::alltoall / "
                                "ranks_per_node / topology, must be the same on every rank)",
                                r, bootstrap.rank(), alltoall));
    }
    if (all[2 * r + 1] != all[1]) {
      return Status(StatusCode::kInvalidUsage,
                    fmt::format("rank {} holds different algorithms than rank 0 (BRAID_ALGO_DIR / BRAID_TOPO / forced "
                                "algorithms must be the same on every rank)",
                                r));
    }
  }
  return Status::ok();
}

// Every rank's text of a setting that must be the same on every rank, gathered before the setting is used (at most
// 23 bytes each; a longer text is compared by its first 23). Every rank takes part whatever its own text, so that a
// rank whose text does not parse fails naming it and the others name that rank.
Result<std::vector<std::string>> gatherSetting(Bootstrap& bootstrap, const std::string& text) {
  struct Entry {
    char text[24];
  };
  std::vector<Entry> all(bootstrap.size());
  Entry& mine = all[bootstrap.rank()];
  std::memset(mine.text, 0, sizeof(mine.text));
  std::memcpy(mine.text, text.data(), std::min(text.size(), sizeof(mine.text) - 1));
  BRAID_RETURN_IF_ERROR(bootstrap.allGather(all.data(), sizeof(Entry)));
  std::vector<std::string> out;
  out.reserve(all.size());
  for (const Entry& e : all) out.emplace_back(e.text, strnlen(e.text, sizeof(e.text)));
  return out;
}

// kInvalidUsage naming the first rank whose text of `setting` is not `same` as this rank's `mine`.
Status checkSameSetting(const Bootstrap& bootstrap, const std::string& setting, const std::string& mine,
                        const std::vector<std::string>& all, const std::function<bool(const std::string&)>& same,
                        const std::string& why) {
  for (int r = 0; r < bootstrap.size(); ++r) {
    if (same(all[r])) continue;
    return Status(StatusCode::kInvalidUsage,
                  fmt::format("rank {}: {} differs between ranks: rank {} has '{}', rank {} has '{}' ({})",
                              bootstrap.rank(), setting, r, all[r], bootstrap.rank(), mine, why));
  }
  return Status::ok();
}

// Every rank must use the same transport: each rank's BRAID_TRANSPORT (or CommOptions::transport) setting is
// exchanged before the transport is created (which exchanges messages whose shape depends on it). Errors:
// kInvalidArgument naming this rank's unknown value; kInvalidUsage naming the rank that differs and both values.
Result<TransportKind> agreeOnTransport(Bootstrap& bootstrap, const std::string& setting, const std::string& name) {
  const std::optional<TransportKind> kind = parseTransportKind(name);
  BRAID_ASSIGN_OR_RETURN(const std::vector<std::string> all, gatherSetting(bootstrap, name));
  if (!kind) {
    return invalidArgument(fmt::format("rank {}: {}={}: unknown transport (auto, threads, shm, tcp, ucx)",
                                       bootstrap.rank(), setting, name));
  }
  BRAID_RETURN_IF_ERROR(checkSameSetting(
      bootstrap, setting, name, all, [&](const std::string& theirs) { return parseTransportKind(theirs) == kind; },
      "every rank must choose the same transport"));
  return *kind;
}

// Every rank must check the same calls: a rank that checks a call sends and receives the call records of that call
// (kCallCheckChannel), so ranks that differ wait for each other's records until the timeout. Errors as
// agreeOnTransport's.
Result<CallCheck> agreeOnCallCheck(Bootstrap& bootstrap) {
  const std::string text = envString("BRAID_CALL_CHECK");
  const Result<CallCheck> mine = parseCallCheck(text);
  BRAID_ASSIGN_OR_RETURN(const std::vector<std::string> all, gatherSetting(bootstrap, text));
  if (!mine.isOk()) return invalidArgument(fmt::format("rank {}: {}", bootstrap.rank(), mine.status().message()));
  BRAID_RETURN_IF_ERROR(checkSameSetting(
      bootstrap, "BRAID_CALL_CHECK", text, all,
      [&](const std::string& theirs) {
        const Result<CallCheck> parsed = parseCallCheck(theirs);
        return parsed.isOk() && *parsed == *mine;
      },
      "it must be the same on every rank"));
  return *mine;
}

}  // namespace

Result<std::vector<std::string>> listAlgorithmDir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(dir, ec);
  if (!fs::exists(status)) return notFound(fmt::format("{}: no such directory", dir));
  if (!fs::is_directory(status)) return invalidArgument(fmt::format("{}: not a directory", dir));
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_regular_file()) continue;
    const std::string ext = lowerCase(entry.path().extension().string());
    if (ext == ".xml" || ext == ".json") files.push_back(entry.path().string());
  }
  if (ec) return Status(StatusCode::kSystemError, fmt::format("{}: {}", dir, ec.message()));
  std::sort(files.begin(), files.end());
  return files;
}

Result<std::vector<LoadedAlgorithm>> loadAlgorithmDir(const std::string& dir) {
  BRAID_ASSIGN_OR_RETURN(std::vector<std::string> files, listAlgorithmDir(dir));
  std::vector<LoadedAlgorithm> out;
  for (const std::string& file : files) {
    BRAID_ASSIGN_OR_RETURN(Algorithm algorithm, loadAlgorithm(file));
    const VerifyReport report = verify(algorithm);
    if (!report.ok) {
      return Status(StatusCode::kInvalidArgument,
                    fmt::format("{}: algorithm '{}' does not verify: {}", file, algorithm.name, report.toString()));
    }
    out.push_back(LoadedAlgorithm{std::move(algorithm), file});
  }
  return out;
}

Result<std::unique_ptr<Communicator>> Communicator::create(std::unique_ptr<Bootstrap> bootstrap,
                                                           const CommOptions& options) {
  if (!bootstrap) return invalidArgument("Communicator::create: no bootstrap");
  const int n = bootstrap->size();
  // Transport.
  const std::string transport_name = options.transport.empty() ? envString("BRAID_TRANSPORT") : options.transport;
  BRAID_ASSIGN_OR_RETURN(
      const TransportKind kind,
      agreeOnTransport(*bootstrap, options.transport.empty() ? "BRAID_TRANSPORT" : "CommOptions::transport",
                       transport_name));
  BRAID_ASSIGN_OR_RETURN(const CallCheck call_check, agreeOnCallCheck(*bootstrap));
  TransportOptions transport_options;
  transport_options.timeout_s = options.timeout_s;
  BRAID_ASSIGN_OR_RETURN(std::unique_ptr<DataTransport> transport,
                         createTransport(kind, *bootstrap, transport_options));
  // Algorithms.
  std::shared_ptr<const Topology> topology;
  const std::string topo_name = options.topology.empty() ? envString("BRAID_TOPO") : options.topology;
  if (!topo_name.empty()) {
    BRAID_ASSIGN_OR_RETURN(Topology loaded, loadTopologyOrShipped(topo_name));
    topology = std::make_shared<const Topology>(std::move(loaded));
  }
  auto catalog = std::make_unique<AlgorithmCatalog>(n, topology);
  for (const Algorithm& a : options.algorithms) catalog->addForced(a);
  const std::string dir = options.algo_dir.empty() ? envString("BRAID_ALGO_DIR") : options.algo_dir;
  if (!dir.empty()) {
    BRAID_ASSIGN_OR_RETURN(std::vector<LoadedAlgorithm> loaded, loadAlgorithmDir(dir));
    size_t usable = 0;
    for (const LoadedAlgorithm& a : loaded) {
      usable += a.algorithm.num_ranks == n ? 1 : 0;
      catalog->addDirectory(a);
    }
    if (usable == 0 && bootstrap->rank() == 0) {
      BRAID_LOG(kWarn,
                "BRAID_ALGO_DIR {}: none of its {} algorithm file(s) is for {} ranks; Braid chooses its own "
                "algorithms",
                dir, loaded.size(), n);
    }
  }
  BRAID_ASSIGN_OR_RETURN(
      std::unique_ptr<comm::AllToAllChooser> alltoall,
      allToAllChooser(options, *bootstrap, topology && topology->numGpus() == n ? topology : nullptr));
  catalog->setAllToAllChooser(std::move(alltoall));
  if (topology && topology->numGpus() == n && options.allow_fallback) {
    BRAID_RETURN_IF_ERROR(comm::addParetoSet(*catalog, *topology, topo_name, *bootstrap, options.pareto_synthesizer));
  }
  BRAID_RETURN_IF_ERROR(checkSameCatalog(*bootstrap, catalog->digest()));
  if (bootstrap->rank() == 0) {
    BRAID_LOG_RANK(kInfo, 0, "{} ranks over {} transport; {} forced, {}, {} synthesized", n, transport->name(),
                   options.algorithms.size(), dir.empty() ? "no BRAID_ALGO_DIR" : "BRAID_ALGO_DIR " + dir,
                   catalog->synthesized().size());
  }
  return std::unique_ptr<Communicator>(
      new CommImpl(std::move(bootstrap), std::move(transport), std::move(catalog), options.allow_fallback, call_check));
}

Result<std::unique_ptr<Communicator>> Communicator::create(const UniqueId& id, int rank, int size,
                                                           const CommOptions& options) {
  BootstrapOptions bootstrap_options;
  bootstrap_options.timeout_s = options.timeout_s;
  BRAID_ASSIGN_OR_RETURN(std::unique_ptr<Bootstrap> bootstrap, connectBootstrap(id, rank, size, bootstrap_options));
  return create(std::move(bootstrap), options);
}

}  // namespace braid
