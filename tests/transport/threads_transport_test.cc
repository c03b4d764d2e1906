// What only the threads transport (runtime/transport/threads/) has: worlds without a bootstrap
// (createThreadsWorld) running every classical algorithm x collective over typed data, compared with
// references computed here; its FIFO of fifo_depth staged messages and zero-copy matching; spinning polls; a
// mismatch or abort failing the whole world at once; endpoints destroyed in any order; the bootstrap path (two
// worlds at once, ranks of another process refused). The DataTransport contract itself is
// conformance_test.cc's.
//
// Data: element i of rank q has the logical value value(type, q, i):
//   float / half:  ((31 i + 17 q) mod 17) - 8, small integers, so sums over <= 8 ranks are exact in any order;
//   int32:         a hash of (q, i) over the whole int32 range (for max);
//   int8:          ((13 i + 7 q) mod 256) - 128 (for min).
// References (nccl-tests layouts, m = elements per rank block):
//   all-reduce     out[j] = op_q value(q, j)
//   all-gather     out[j] = value(j / m, j mod m)
//   reduce-scatter out[j] = op_q value(q, r m + j)
//   all-to-all     out[j] = value(j / m, r m + j mod m)
// Outputs start as 0xFF bytes (NaN for floats), so an element never written shows.
#include "transport/threads/threads_transport.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "braid/classic.h"
#include "braid/datatype.h"
#include "braid/executor.h"
#include "braid/plan.h"
#include "common/env.h"
#include "transport/endpoint_common.h"
#include "transport/factory.h"

namespace braid {
namespace {

using Seconds = std::chrono::duration<double>;
using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) { return Seconds(Clock::now() - start).count(); }

// ---------------------------------------------------------------------------------------------------
// Typed data.

double value(DataType type, int q, uint64_t i) {
  switch (type) {
    case DataType::kInt32:
      return static_cast<double>(
          static_cast<int32_t>(static_cast<uint32_t>(q) * 2654435761u ^ static_cast<uint32_t>(i) * 40503u));
    case DataType::kInt8:
      return static_cast<double>(static_cast<int64_t>((i * 13 + static_cast<uint64_t>(q) * 7) % 256) - 128);
    default: return static_cast<double>(static_cast<int64_t>((i * 31 + static_cast<uint64_t>(q) * 17) % 17) - 8);
  }
}

void encode(DataType type, double v, uint8_t* at) {
  switch (type) {
    case DataType::kFloat32: {
      const float f = static_cast<float>(v);
      std::memcpy(at, &f, 4);
      return;
    }
    case DataType::kFloat16: {
      const uint16_t h = floatToHalf(static_cast<float>(v));
      std::memcpy(at, &h, 2);
      return;
    }
    case DataType::kInt32: {
      const int32_t x = static_cast<int32_t>(v);
      std::memcpy(at, &x, 4);
      return;
    }
    case DataType::kInt8: {
      const int8_t x = static_cast<int8_t>(v);
      std::memcpy(at, &x, 1);
      return;
    }
    default: FAIL() << "test encodes no " << dataTypeName(type);
  }
}

double decode(DataType type, const uint8_t* at) {
  switch (type) {
    case DataType::kFloat32: {
      float f;
      std::memcpy(&f, at, 4);
      return f;
    }
    case DataType::kFloat16: {
      uint16_t h;
      std::memcpy(&h, at, 2);
      return halfToFloat(h);
    }
    case DataType::kInt32: {
      int32_t x;
      std::memcpy(&x, at, 4);
      return x;
    }
    case DataType::kInt8: {
      int8_t x;
      std::memcpy(&x, at, 1);
      return x;
    }
    default: return NAN;
  }
}

double combine(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::kSum: return a + b;
    case ReduceOp::kProd: return a * b;
    case ReduceOp::kMax: return std::max(a, b);
    case ReduceOp::kMin: return std::min(a, b);
    case ReduceOp::kAvg: return a + b;
  }
  return NAN;
}

// ---------------------------------------------------------------------------------------------------
// One collective on every rank.

struct Job {
  std::string what;
  Plan plan;
  CollectiveKind kind = CollectiveKind::kAllReduce;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  bool in_place = false;
  uint64_t in_elems = 0;
  uint64_t out_elems = 0;
  std::vector<std::vector<uint8_t>> input, output, scratch;  // per rank (in place: input unused)
  std::vector<RankMemory> memory;
  std::vector<Status> status;
};

Result<Algorithm> classic(ClassicAlgo algo, CollectiveKind kind, int n, bool in_place) {
  ClassicRequest request;
  request.algo = algo;
  request.spec.kind = kind;
  request.spec.num_ranks = n;
  request.spec.chunk_factor = 0;
  request.spec.in_place = in_place;
  return buildClassic(request);
}

// `count` is the nccl-tests count: all-gather's per-rank input, reduce-scatter's per-rank output, all-to-all's
// block per peer, all-reduce's buffer.
std::unique_ptr<Job> makeJob(ClassicAlgo algo, CollectiveKind kind, int n, uint64_t count, DataType type, ReduceOp op,
                             bool in_place = false) {
  auto job = std::make_unique<Job>();
  job->what = fmt::format("{} {} n={} count={} {} {}{}", classicAlgoName(algo), collectiveName(kind), n, count,
                          dataTypeName(type), reduceOpName(op), in_place ? " in-place" : "");
  Result<Algorithm> algorithm = classic(algo, kind, n, in_place);
  EXPECT_TRUE(algorithm.isOk()) << job->what << ": " << algorithm.status().toString();
  if (!algorithm.isOk()) return nullptr;
  Result<CollectiveSpec> spec = algorithm->spec(in_place);
  EXPECT_TRUE(spec.isOk()) << job->what << ": " << spec.status().toString();
  if (!spec.isOk()) return nullptr;
  const size_t element = dataTypeSize(type);
  LowerOptions lower;
  lower.size_bytes = count * element * static_cast<uint64_t>(spec->sizeMultiplier());
  lower.in_place = in_place;
  lower.element_bytes = element;
  Result<Plan> plan = lowerAlgorithm(*algorithm, lower);
  EXPECT_TRUE(plan.isOk()) << job->what << ": " << plan.status().toString();
  if (!plan.isOk()) return nullptr;
  job->plan = std::move(*plan);
  job->kind = kind;
  job->type = type;
  job->op = op;
  job->in_place = in_place;
  const uint64_t un = static_cast<uint64_t>(n);
  switch (kind) {
    case CollectiveKind::kAllGather: job->in_elems = count, job->out_elems = count * un; break;
    case CollectiveKind::kReduceScatter: job->in_elems = count * un, job->out_elems = count; break;
    case CollectiveKind::kAllToAll: job->in_elems = job->out_elems = count * un; break;
    default: job->in_elems = job->out_elems = count; break;
  }
  EXPECT_EQ(job->plan.ranks[0].output_bytes, job->out_elems * element) << job->what;
  job->input.resize(static_cast<size_t>(n));
  job->output.resize(static_cast<size_t>(n));
  job->scratch.resize(static_cast<size_t>(n));
  job->memory.resize(static_cast<size_t>(n));
  job->status.assign(static_cast<size_t>(n), internalError("not run"));
  for (int r = 0; r < n; ++r) {
    const RankPlan& rp = job->plan.ranks[static_cast<size_t>(r)];
    auto& in = job->input[static_cast<size_t>(r)];
    auto& out = job->output[static_cast<size_t>(r)];
    auto& scratch = job->scratch[static_cast<size_t>(r)];
    out.assign(job->out_elems * element, 0xFF);
    scratch.assign(rp.scratch_bytes + rp.temp_bytes, 0xFF);
    RankMemory& mem = job->memory[static_cast<size_t>(r)];
    mem.output = out.data();
    mem.output_bytes = out.size();
    mem.scratch = scratch.data();
    mem.scratch_bytes = scratch.size();
    uint8_t* input_at = nullptr;
    if (!in_place) {
      in.assign(job->in_elems * element, 0);
      input_at = in.data();
      mem.input = in.data();
      mem.input_bytes = in.size();
    } else if (kind == CollectiveKind::kAllGather) {  // the input is this rank's block of the output
      input_at = out.data() + static_cast<uint64_t>(r) * count * element;
      mem.input = input_at;
      mem.input_bytes = count * element;
    } else {  // all-reduce / all-to-all: one buffer
      input_at = out.data();
      mem.input = out.data();
      mem.input_bytes = out.size();
    }
    for (uint64_t i = 0; i < job->in_elems; ++i) encode(type, value(type, r, i), input_at + i * element);
  }
  return job;
}

// What output element j of rank r must hold.
double expected(const Job& job, int r, uint64_t j) {
  const int n = job.plan.num_ranks;
  auto reduceAt = [&](uint64_t index) {
    double acc = value(job.type, 0, index);
    for (int q = 1; q < n; ++q) acc = combine(job.op, acc, value(job.type, q, index));
    return acc;
  };
  switch (job.kind) {
    case CollectiveKind::kAllReduce: return reduceAt(j);
    case CollectiveKind::kAllGather: return value(job.type, static_cast<int>(j / job.in_elems), j % job.in_elems);
    case CollectiveKind::kReduceScatter: return reduceAt(static_cast<uint64_t>(r) * job.out_elems + j);
    case CollectiveKind::kAllToAll: {
      const uint64_t m = job.out_elems / static_cast<uint64_t>(n);
      return value(job.type, static_cast<int>(j / m), static_cast<uint64_t>(r) * m + j % m);
    }
    default: return NAN;
  }
}

std::string check(const Job& job) {
  std::string wrong;
  int bad = 0;
  const size_t element = dataTypeSize(job.type);
  for (int r = 0; r < job.plan.num_ranks; ++r) {
    if (!job.status[static_cast<size_t>(r)].isOk()) {
      wrong += fmt::format("rank {}: {}\n", r, job.status[static_cast<size_t>(r)].toString());
      continue;
    }
    const auto& out = job.output[static_cast<size_t>(r)];
    for (uint64_t j = 0; j < job.out_elems; ++j) {
      const double got = decode(job.type, out.data() + j * element);
      const double want = expected(job, r, j);
      if (got != want && bad++ < 4) wrong += fmt::format("rank {} output[{}] = {}, expected {}\n", r, j, got, want);
    }
    if (!job.in_place) {  // NCCL's sendbuff is const
      for (uint64_t i = 0; i < job.in_elems; ++i) {
        if (decode(job.type, job.input[static_cast<size_t>(r)].data() + i * element) != value(job.type, r, i) &&
            bad++ < 4) {
          wrong += fmt::format("rank {} input[{}] was modified\n", r, i);
        }
      }
    }
  }
  if (bad > 4) wrong += fmt::format("... {} wrong elements in all\n", bad);
  return wrong;
}

// Runs the jobs back to back, one thread per rank, without any synchronization between collectives. A rank
// whose collective fails aborts its endpoint and stops (so the others fail fast instead of timing out).
void runJobs(const std::vector<std::unique_ptr<DataTransport>>& endpoints, const std::vector<Job*>& jobs) {
  std::vector<std::thread> threads;
  for (size_t r = 0; r < endpoints.size(); ++r) {
    threads.emplace_back([&, r] {
      const int rank = static_cast<int>(r);
      DataTransport& endpoint = *endpoints[r];
      for (Job* job : jobs) {
        Status status = endpoint.bind(rank, job->memory[r], ReduceSpec{job->type, job->op});
        if (status.isOk()) {
          ExecOptions options;
          options.local_ranks = {rank};
          Result<ExecResult> result = execute(job->plan, endpoint, options);
          status = result.isOk() ? Status::ok() : result.status();
        }
        job->status[r] = status;
        if (!status.isOk()) {
          endpoint.abort(status);
          return;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
}

TransportOptions testOptions(double timeout_s = 30) {
  TransportOptions options;
  options.timeout_s = timeout_s;
  return options;
}

struct AlgoKind {
  ClassicAlgo algo;
  CollectiveKind kind;
};
const std::vector<AlgoKind> kAlgoKinds = {
    {ClassicAlgo::kRing, CollectiveKind::kAllReduce},
    {ClassicAlgo::kRecursiveDoubling, CollectiveKind::kAllReduce},
    {ClassicAlgo::kDirect, CollectiveKind::kAllReduce},
    {ClassicAlgo::kDoubleBinaryTree, CollectiveKind::kAllReduce},
    {ClassicAlgo::kRing, CollectiveKind::kAllGather},
    {ClassicAlgo::kRecursiveDoubling, CollectiveKind::kAllGather},
    {ClassicAlgo::kDirect, CollectiveKind::kAllGather},
    {ClassicAlgo::kRing, CollectiveKind::kReduceScatter},
    {ClassicAlgo::kRecursiveDoubling, CollectiveKind::kReduceScatter},
    {ClassicAlgo::kDirect, CollectiveKind::kReduceScatter},
    {ClassicAlgo::kDirect, CollectiveKind::kAllToAll},
    {ClassicAlgo::kPairwise, CollectiveKind::kAllToAll},
    {ClassicAlgo::kRing, CollectiveKind::kAllToAll},
};

class ThreadsCollectives : public ::testing::TestWithParam<int> {};

// Every classical algorithm x collective at counts 0, 1, 7 with float sum and int32 max, all back to back on
// one set of endpoints, then fp16 sum / int8 min and in-place runs, then large fp32 counts.
TEST_P(ThreadsCollectives, ClassicalAlgorithmsBackToBack) {
  const int n = GetParam();
  auto endpoints = createThreadsWorld(n, testOptions());
  ASSERT_EQ(endpoints.size(), static_cast<size_t>(n));
  std::vector<std::unique_ptr<Job>> owned;
  for (const AlgoKind& ak : kAlgoKinds) {
    for (uint64_t count : {0, 1, 7}) {
      owned.push_back(makeJob(ak.algo, ak.kind, n, count, DataType::kFloat32, ReduceOp::kSum));
      owned.push_back(makeJob(ak.algo, ak.kind, n, count, DataType::kInt32, ReduceOp::kMax));
    }
    owned.push_back(makeJob(ak.algo, ak.kind, n, 9, DataType::kFloat16, ReduceOp::kSum));
    owned.push_back(makeJob(ak.algo, ak.kind, n, 5, DataType::kInt8, ReduceOp::kMin));
  }
  owned.push_back(makeJob(ClassicAlgo::kRing, CollectiveKind::kAllReduce, n, 1001, DataType::kFloat32, ReduceOp::kSum,
                          /*in_place=*/true));
  owned.push_back(makeJob(ClassicAlgo::kRing, CollectiveKind::kAllGather, n, 333, DataType::kInt32, ReduceOp::kSum,
                          /*in_place=*/true));
  std::vector<Job*> jobs;
  for (auto& job : owned) {
    ASSERT_NE(job, nullptr);
    jobs.push_back(job.get());
  }
  runJobs(endpoints, jobs);
  for (Job* job : jobs) EXPECT_EQ(check(*job), "") << job->what;

  // Large fp32 counts (1000003 is prime: chunks and slices are uneven) on the same endpoints.
  std::vector<std::unique_ptr<Job>> large;
  for (ClassicAlgo algo :
       {ClassicAlgo::kRing, ClassicAlgo::kRecursiveDoubling, ClassicAlgo::kDirect, ClassicAlgo::kDoubleBinaryTree}) {
    large.push_back(makeJob(algo, CollectiveKind::kAllReduce, n, 1000003, DataType::kFloat32, ReduceOp::kSum));
  }
  large.push_back(
      makeJob(ClassicAlgo::kRing, CollectiveKind::kReduceScatter, n, 1000003 / n, DataType::kFloat32, ReduceOp::kSum));
  large.push_back(
      makeJob(ClassicAlgo::kRing, CollectiveKind::kAllGather, n, 1000003 / n, DataType::kFloat32, ReduceOp::kSum));
  std::vector<Job*> large_jobs;
  for (auto& job : large) {
    ASSERT_NE(job, nullptr);
    large_jobs.push_back(job.get());
  }
  runJobs(endpoints, large_jobs);
  for (Job* job : large_jobs) EXPECT_EQ(check(*job), "") << job->what;
}

INSTANTIATE_TEST_SUITE_P(Ranks, ThreadsCollectives, ::testing::Values(2, 3, 5, 8));

// ---------------------------------------------------------------------------------------------------
// Raw requests.

struct RawRank {
  std::vector<uint8_t> input, output, scratch;
  RankMemory memory() {
    return RankMemory{input.data(), input.size(), output.data(), output.size(), scratch.data(), scratch.size()};
  }
};

std::vector<RawRank> bindAll(const std::vector<std::unique_ptr<DataTransport>>& endpoints, size_t bytes) {
  std::vector<RawRank> ranks(endpoints.size());
  for (size_t r = 0; r < endpoints.size(); ++r) {
    ranks[r].input.assign(bytes, 0);
    ranks[r].output.assign(bytes, 0);
    ranks[r].scratch.assign(bytes, 0);
    for (size_t b = 0; b < bytes; ++b) ranks[r].input[b] = static_cast<uint8_t>(r * 50 + b);
    EXPECT_TRUE(endpoints[r]->bind(static_cast<int>(r), ranks[r].memory(), ReduceSpec{}).isOk());
  }
  return ranks;
}

SendRequest sendOf(int rank, int peer, int channel, uint64_t offset, uint64_t bytes) {
  SendRequest s;
  s.rank = rank;
  s.peer = peer;
  s.channel = channel;
  s.src = BufferRef{BufferKind::kInput, offset, bytes};
  return s;
}
RecvRequest recvOf(int rank, int peer, int channel, uint64_t offset, uint64_t bytes) {
  RecvRequest r;
  r.rank = rank;
  r.peer = peer;
  r.channel = channel;
  r.dst = BufferRef{BufferKind::kOutput, offset, bytes};
  return r;
}

std::vector<RequestId> idsOf(const std::vector<Completion>& done) {
  std::vector<RequestId> ids;
  for (const Completion& c : done) ids.push_back(c.id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

TEST(ThreadsTransport, FifoDepthBuffersSendsAheadOfTheReceiver) {
  TransportOptions options = testOptions(5);
  options.fifo_depth = 2;
  auto ep = createThreadsWorld(2, options);
  auto ranks = bindAll(ep, 64);
  // Three sends of 4 bytes on channel 0: two fit in the FIFO and complete at once, the third waits.
  std::vector<RequestId> sends;
  for (int k = 0; k < 3; ++k) {
    Result<RequestId> id = ep[0]->postSend(sendOf(0, 1, 0, 4 * k, 4));
    ASSERT_TRUE(id.isOk()) << id.status().toString();
    sends.push_back(*id);
  }
  // The executor may overwrite a completed send's bytes: the staged copies must not change.
  std::vector<Completion> done;
  ASSERT_TRUE(ep[0]->poll(&done, false).isOk());
  EXPECT_EQ(idsOf(done), (std::vector<RequestId>{sends[0], sends[1]}));
  std::memset(ranks[0].input.data(), 0xEE, 8);
  done.clear();
  ASSERT_TRUE(ep[0]->poll(&done, false).isOk());
  EXPECT_TRUE(done.empty());
  // One receive frees a slot: the third send moves in and completes.
  Result<RequestId> r0 = ep[1]->postRecv(recvOf(1, 0, 0, 0, 4));
  ASSERT_TRUE(r0.isOk());
  ASSERT_TRUE(ep[0]->poll(&done, true).isOk());
  EXPECT_EQ(idsOf(done), (std::vector<RequestId>{sends[2]}));
  std::memset(ranks[0].input.data() + 8, 0xEE, 4);  // overwrite the third send's source too
  Result<RequestId> r1 = ep[1]->postRecv(recvOf(1, 0, 0, 4, 4));
  Result<RequestId> r2 = ep[1]->postRecv(recvOf(1, 0, 0, 8, 4));
  ASSERT_TRUE(r1.isOk() && r2.isOk());
  done.clear();
  ASSERT_TRUE(ep[1]->poll(&done, true).isOk());
  EXPECT_EQ(idsOf(done), (std::vector<RequestId>{*r0, *r1, *r2}));
  for (int b = 0; b < 12; ++b) EXPECT_EQ(ranks[1].output[b], static_cast<uint8_t>(b)) << "byte " << b;  // in order
}

TEST(ThreadsTransport, ReceivePostedFirstGetsTheBytesDirectly) {
  auto ep = createThreadsWorld(3, testOptions(5));
  auto ranks = bindAll(ep, 32);
  Result<RequestId> recv = ep[2]->postRecv(recvOf(2, 1, 3, 8, 16));
  ASSERT_TRUE(recv.isOk());
  std::thread sender([&] {
    Result<RequestId> send = ep[1]->postSend(sendOf(1, 2, 3, 0, 16));
    ASSERT_TRUE(send.isOk());
    std::vector<Completion> done;
    ASSERT_TRUE(ep[1]->poll(&done, true).isOk());
    EXPECT_EQ(idsOf(done), (std::vector<RequestId>{*send}));
  });
  std::vector<Completion> done;
  ASSERT_TRUE(ep[2]->poll(&done, true).isOk());
  sender.join();
  EXPECT_EQ(idsOf(done), (std::vector<RequestId>{*recv}));
  for (int b = 0; b < 16; ++b) EXPECT_EQ(ranks[2].output[8 + b], static_cast<uint8_t>(50 + b));
  EXPECT_EQ(ranks[2].output[7], 0);
  EXPECT_EQ(ranks[2].output[24], 0);
}

// endpointSpinMicroseconds: the option when >= 0, else BRAID_SPIN_US (default 50, malformed -> 50); 0 once the ranks
// outnumber the cores this process may run on.
TEST(EndpointSpin, OptionThenEnvironmentThenCoreCount) {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  ASSERT_EQ(sched_getaffinity(0, sizeof(cpus), &cpus), 0);
  const int cores = CPU_COUNT(&cpus);
  const auto expect = [](double got, double us, const char* what) { EXPECT_EQ(got, us) << what; };
  TransportOptions options;
  options.spin_us = 30;
  expect(endpointSpinMicroseconds(options, 1), 30, "1 rank");
  expect(endpointSpinMicroseconds(options, cores), 30, "a rank per core");
  expect(endpointSpinMicroseconds(options, cores + 1), 0, "more ranks than cores");
  options.spin_us = 0;
  EXPECT_EQ(endpointSpinMicroseconds(options, 1), 0);
  options.spin_us = -1;
  const char* saved = std::getenv("BRAID_SPIN_US");
  const std::string restore = saved != nullptr ? saved : "";
  unsetenv("BRAID_SPIN_US");
  expect(endpointSpinMicroseconds(options, 1), 50, "BRAID_SPIN_US unset");
  setenv("BRAID_SPIN_US", "7", 1);
  expect(endpointSpinMicroseconds(options, 1), 7, "BRAID_SPIN_US=7");
  expect(endpointSpinMicroseconds(options, cores + 1), 0, "BRAID_SPIN_US=7, more ranks than cores");
  setenv("BRAID_SPIN_US", "0", 1);
  EXPECT_EQ(endpointSpinMicroseconds(options, 1), 0);
  setenv("BRAID_SPIN_US", "1e9", 1);  // above kMaxSpinMicroseconds: clamped (with a warning)
  expect(endpointSpinMicroseconds(options, 1), 1000, "BRAID_SPIN_US=1e9");
  setenv("BRAID_SPIN_US", "inf", 1);
  expect(endpointSpinMicroseconds(options, 1), 1000, "BRAID_SPIN_US=inf");
  options.spin_us = 5000;
  expect(endpointSpinMicroseconds(options, 1), 1000, "spin_us = 5000");
  options.spin_us = -1;
  setenv("BRAID_SPIN_US", "fast", 1);
  expect(endpointSpinMicroseconds(options, 1), 50, "BRAID_SPIN_US=fast");
  if (saved != nullptr) {
    setenv("BRAID_SPIN_US", restore.c_str(), 1);
  } else {
    unsetenv("BRAID_SPIN_US");
  }
}

// SpinGovernor: a spin that finds nothing makes the next 1, 2, 4 ... blocking polls sleep at once (done() is not
// called for them); a spin that finds something resets the backoff; record() treats a find after more than
// twice the budget (a descheduled thread) as a failure. Counted in calls, not timed.
TEST(EndpointSpin, GovernorBacksOffAfterFailedSpins) {
  SpinGovernor governor(20.0);
  int calls = 0;
  const auto never = [&] {
    ++calls;
    return false;
  };
  const auto at_once = [&] {
    ++calls;
    return true;
  };
  // Pattern of the spins: a failed spin, then `skip` polls that must not call done().
  const auto expectSkipped = [&](int skip) {
    for (int k = 0; k < skip; ++k) {
      calls = 0;
      EXPECT_FALSE(governor.spin(at_once)) << "poll " << k << " of " << skip << " skipped";
      EXPECT_EQ(calls, 0);
    }
  };
  EXPECT_TRUE(governor.spin(at_once));
  EXPECT_EQ(calls, 1);
  for (int skip : {1, 2, 4, 8}) {
    calls = 0;
    EXPECT_FALSE(governor.spin(never));
    EXPECT_GT(calls, 1);  // it polled until its 20 µs ran out
    EXPECT_EQ(governor.skipped(), skip);
    expectSkipped(skip);
  }
  calls = 0;
  EXPECT_TRUE(governor.spin(at_once));  // success: the backoff starts over at 1
  EXPECT_FALSE(governor.spin(never));
  EXPECT_EQ(governor.skipped(), 1);
  expectSkipped(1);
  // A find that took more than 2 x 20 µs of wall time counts as failed; one within it does not.
  governor.record(true, 41);
  EXPECT_EQ(governor.skipped(), 2);
  expectSkipped(2);
  governor.record(true, 40);
  EXPECT_EQ(governor.skipped(), 0);
  // The backoff stops doubling at kMaxSkippedSpins.
  for (int k = 0; k < 12; ++k) governor.record(false, 20);
  EXPECT_EQ(governor.skipped(), SpinGovernor::kMaxSkippedSpins);
  // Spinning off: never calls done().
  SpinGovernor off(0.0);
  calls = 0;
  EXPECT_FALSE(off.spin(at_once));
  EXPECT_EQ(calls, 0);
}

// Ping-pong through spinning blocking polls (the largest budget, 1 ms): every reply carries the right token.
TEST(ThreadsTransport, SpinningPollReturnsOnArrival) {
  TransportOptions options = testOptions(30);
  options.spin_us = kMaxSpinMicroseconds;
  auto ep = createThreadsWorld(2, options);
  auto ranks = bindAll(ep, 8);
  constexpr int kRounds = 200;
  const auto start = Clock::now();
  std::thread echo([&] {
    for (int k = 0; k < kRounds; ++k) {
      Result<RequestId> recv = ep[1]->postRecv(recvOf(1, 0, 0, 0, 4));
      ASSERT_TRUE(recv.isOk());
      std::vector<Completion> done;
      while (done.empty()) ASSERT_TRUE(ep[1]->poll(&done, true).isOk());
      std::memcpy(ranks[1].input.data(), ranks[1].output.data(), 4);
      Result<RequestId> send = ep[1]->postSend(sendOf(1, 0, 0, 0, 4));
      ASSERT_TRUE(send.isOk());
      done.clear();
      while (done.empty()) ASSERT_TRUE(ep[1]->poll(&done, true).isOk());
    }
  });
  for (int k = 0; k < kRounds; ++k) {
    const uint32_t token = 1000u + static_cast<uint32_t>(k);
    std::memcpy(ranks[0].input.data(), &token, 4);
    Result<RequestId> recv = ep[0]->postRecv(recvOf(0, 1, 0, 0, 4));
    Result<RequestId> send = ep[0]->postSend(sendOf(0, 1, 0, 0, 4));
    ASSERT_TRUE(recv.isOk() && send.isOk());
    std::vector<Completion> done;
    while (done.size() < 2) ASSERT_TRUE(ep[0]->poll(&done, true).isOk());
    uint32_t back = 0;
    std::memcpy(&back, ranks[0].output.data(), 4);
    ASSERT_EQ(back, token) << "round " << k;
  }
  echo.join();
  EXPECT_LT(secondsSince(start), 10.0);
}

TEST(ThreadsTransport, ChannelsAndDirectionsAreSeparateFifos) {
  auto ep = createThreadsWorld(2, testOptions(5));
  auto ranks = bindAll(ep, 16);
  // Rank 0 sends bytes [0,4) on channel 1 then [4,8) on channel 0; rank 1 receives channel 0 first.
  ASSERT_TRUE(ep[0]->postSend(sendOf(0, 1, 1, 0, 4)).isOk());
  ASSERT_TRUE(ep[0]->postSend(sendOf(0, 1, 0, 4, 4)).isOk());
  ASSERT_TRUE(ep[1]->postSend(sendOf(1, 0, 0, 0, 2)).isOk());  // the other direction, same channel
  ASSERT_TRUE(ep[1]->postRecv(recvOf(1, 0, 0, 0, 4)).isOk());
  ASSERT_TRUE(ep[1]->postRecv(recvOf(1, 0, 1, 4, 4)).isOk());
  ASSERT_TRUE(ep[0]->postRecv(recvOf(0, 1, 0, 0, 2)).isOk());
  std::vector<Completion> done;
  while (done.size() < 3) ASSERT_TRUE(ep[1]->poll(&done, true).isOk());  // its send and two receives
  for (int b = 0; b < 4; ++b) {
    EXPECT_EQ(ranks[1].output[b], static_cast<uint8_t>(4 + b));
    EXPECT_EQ(ranks[1].output[4 + b], static_cast<uint8_t>(b));
  }
  done.clear();
  while (done.size() < 3) ASSERT_TRUE(ep[0]->poll(&done, true).isOk());
  EXPECT_EQ(ranks[0].output[0], 50);
  EXPECT_EQ(ranks[0].output[1], 51);
}

TEST(ThreadsTransport, UnbufferedSendCompletesWhenTheReceiveIsPosted) {
  TransportOptions options = testOptions(5);
  options.fifo_depth = 0;
  auto ep = createThreadsWorld(2, options);
  auto ranks = bindAll(ep, 8);
  Result<RequestId> send = ep[0]->postSend(sendOf(0, 1, 0, 0, 8));
  ASSERT_TRUE(send.isOk());
  std::vector<Completion> done;
  ASSERT_TRUE(ep[0]->poll(&done, false).isOk());
  EXPECT_TRUE(done.empty());
  ASSERT_TRUE(ep[1]->postRecv(recvOf(1, 0, 0, 0, 8)).isOk());
  ASSERT_TRUE(ep[0]->poll(&done, true).isOk());
  EXPECT_EQ(idsOf(done), (std::vector<RequestId>{*send}));
  EXPECT_EQ(ranks[1].output, ranks[0].input);
}

TEST(ThreadsTransport, SizeMismatchNamesBothRanks) {
  auto ep = createThreadsWorld(2, testOptions(5));
  auto ranks = bindAll(ep, 16);
  ASSERT_TRUE(ep[0]->postSend(sendOf(0, 1, 2, 0, 8)).isOk());  // staged
  Result<RequestId> recv = ep[1]->postRecv(recvOf(1, 0, 2, 0, 4));
  ASSERT_FALSE(recv.isOk());
  EXPECT_EQ(recv.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(recv.status().message().find("rank 0 -> rank 1 channel 2"), std::string::npos) << recv.status().message();
  EXPECT_NE(recv.status().message().find("8 bytes"), std::string::npos);
  EXPECT_NE(recv.status().message().find("4 bytes"), std::string::npos);
  // The sender learns at once.
  std::vector<Completion> done;
  const auto start = Clock::now();
  Status st = ep[0]->poll(&done, false);
  st = done.empty() ? ep[0]->poll(&done, true) : st;
  while (st.isOk()) st = ep[0]->poll(&done, true);
  EXPECT_LT(secondsSince(start), 2.0);
  EXPECT_EQ(st.code(), StatusCode::kRemoteError);
  EXPECT_NE(st.message().find("rank 1 failed"), std::string::npos) << st.message();
}

// ---------------------------------------------------------------------------------------------------
// Timeouts, abort, endpoints that go away.

TEST(ThreadsTransport, RankThatNeverPostsMakesTheOthersTimeOut) {
  const int n = 3;
  auto endpoints = createThreadsWorld(n, testOptions(1));
  auto job = makeJob(ClassicAlgo::kRing, CollectiveKind::kAllReduce, n, 4096, DataType::kFloat32, ReduceOp::kSum);
  ASSERT_NE(job, nullptr);
  std::vector<Status> status(n);
  std::vector<double> elapsed(n, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < n - 1; ++r) {  // rank 2 never posts anything
    threads.emplace_back([&, r] {
      const auto start = Clock::now();
      EXPECT_TRUE(endpoints[r]->bind(r, job->memory[r], ReduceSpec{job->type, job->op}).isOk());
      ExecOptions options;
      options.local_ranks = {r};
      Result<ExecResult> result = execute(job->plan, *endpoints[r], options);
      status[r] = result.isOk() ? Status::ok() : result.status();
      elapsed[r] = secondsSince(start);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < n - 1; ++r) {
    EXPECT_EQ(status[r].code(), StatusCode::kTimeout) << "rank " << r << ": " << status[r].toString();
    EXPECT_NE(status[r].message().find(fmt::format("threads: rank {}: no completion for 1.0 s", r)), std::string::npos)
        << status[r].message();
    EXPECT_GE(elapsed[r], 0.9);
    EXPECT_LT(elapsed[r], 4.0);
  }
  // Rank 1 receives from rank 0 in a ring 0 -> 1 -> 2 -> 0; rank 0 waits on rank 2.
  EXPECT_NE(status[0].message().find("receive from rank 2 on channel"), std::string::npos) << status[0].message();
}

TEST(ThreadsTransport, AbortWakesEveryRankWithRemoteError) {
  const int n = 4;
  auto endpoints = createThreadsWorld(n, testOptions(60));
  auto job = makeJob(ClassicAlgo::kRing, CollectiveKind::kAllReduce, n, 1 << 18, DataType::kFloat32, ReduceOp::kSum);
  ASSERT_NE(job, nullptr);
  std::vector<Status> status(n);
  std::vector<double> elapsed(n, 0);
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      if (r == 1) {  // fails before posting anything
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        endpoints[r]->abort(internalError("injected failure"));
        return;
      }
      EXPECT_TRUE(endpoints[r]->bind(r, job->memory[r], ReduceSpec{job->type, job->op}).isOk());
      ExecOptions options;
      options.local_ranks = {r};
      Result<ExecResult> result = execute(job->plan, *endpoints[r], options);
      status[r] = result.isOk() ? Status::ok() : result.status();
      elapsed[r] = secondsSince(start);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r : {0, 2, 3}) {
    EXPECT_EQ(status[r].code(), StatusCode::kRemoteError) << "rank " << r << ": " << status[r].toString();
    EXPECT_NE(status[r].message().find("rank 1 failed: internal error: injected failure"), std::string::npos)
        << status[r].message();
    EXPECT_LT(elapsed[r], 5.0) << "rank " << r << " waited for the timeout instead";
  }
  // The aborted endpoint reports its own reason; the others keep reporting the remote failure.
  Result<RequestId> later = endpoints[1]->postSend(sendOf(1, 0, 0, 0, 4));
  ASSERT_FALSE(later.isOk());
  EXPECT_EQ(later.status().code(), StatusCode::kInternalError);
  EXPECT_EQ(later.status().message(), "injected failure");
  std::vector<Completion> done;
  EXPECT_EQ(endpoints[3]->poll(&done, true).code(), StatusCode::kRemoteError);
}

TEST(ThreadsTransport, EndpointsMayBeDestroyedInAnyOrder) {
  auto ep = createThreadsWorld(3, testOptions(60));
  auto ranks = bindAll(ep, 16);
  // A finished exchange leaves nothing outstanding: destroying the sender first is fine.
  ASSERT_TRUE(ep[0]->postSend(sendOf(0, 1, 0, 0, 8)).isOk());
  ep[0].reset();
  ASSERT_TRUE(ep[1]->postRecv(recvOf(1, 0, 0, 0, 8)).isOk());
  std::vector<Completion> done;
  ASSERT_TRUE(ep[1]->poll(&done, true).isOk());
  EXPECT_EQ(std::vector<uint8_t>(ranks[1].output.begin(), ranks[1].output.begin() + 8),
            std::vector<uint8_t>(ranks[0].input.begin(), ranks[0].input.begin() + 8));
  // Destroying an endpoint with a receive outstanding fails the others at once.
  ASSERT_TRUE(ep[2]->postRecv(recvOf(2, 1, 0, 0, 4)).isOk());
  ep[2].reset();
  const auto start = Clock::now();
  done.clear();
  Status st = ep[1]->poll(&done, true);
  EXPECT_EQ(st.code(), StatusCode::kRemoteError);
  EXPECT_NE(st.message().find("rank 2 failed"), std::string::npos) << st.message();
  EXPECT_LT(secondsSince(start), 5.0);
  ep[1].reset();
}

// ---------------------------------------------------------------------------------------------------
// Over a bootstrap: an in-process test bootstrap (shared memory between the rank threads).

class LocalWorld {
 public:
  explicit LocalWorld(int n) : n_(n), gather_(64 * 1024) {}
  int size() const { return n_; }
  Status barrier() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t generation = generation_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return Status::ok();
    }
    if (!cv_.wait_for(lock, std::chrono::seconds(10), [&] { return generation_ != generation; })) {
      return Status(StatusCode::kTimeout, "test bootstrap barrier");
    }
    return Status::ok();
  }
  Status allGather(int rank, void* data, size_t bytes) {
    if (bytes * static_cast<size_t>(n_) > gather_.size()) return invalidArgument("test bootstrap: too large");
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::memcpy(gather_.data() + rank * bytes, static_cast<uint8_t*>(data) + rank * bytes, bytes);
    }
    BRAID_RETURN_IF_ERROR(barrier());
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::memcpy(data, gather_.data(), bytes * static_cast<size_t>(n_));
    }
    return barrier();
  }
  Status send(int from, int to, int tag, const void* data, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto* p = static_cast<const uint8_t*>(data);
    mail_[{from, to, tag}].emplace_back(p, p + bytes);
    cv_.notify_all();
    return Status::ok();
  }
  Status recv(int to, int from, int tag, void* data, size_t bytes) {
    std::unique_lock<std::mutex> lock(mu_);
    auto& box = mail_[{from, to, tag}];
    if (!cv_.wait_for(lock, std::chrono::seconds(10), [&] { return !box.empty(); })) {
      return Status(StatusCode::kTimeout, "test bootstrap recv");
    }
    if (box.front().size() != bytes) return invalidArgument("test bootstrap: size");
    std::memcpy(data, box.front().data(), bytes);
    box.pop_front();
    return Status::ok();
  }

 private:
  const int n_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  std::vector<uint8_t> gather_;
  std::map<std::tuple<int, int, int>, std::deque<std::vector<uint8_t>>> mail_;
};

class LocalBootstrap : public Bootstrap {
 public:
  LocalBootstrap(LocalWorld& world, int rank, std::vector<int64_t> pids)
      : world_(world), rank_(rank), hosts_(static_cast<size_t>(world.size()), "localhost"), pids_(std::move(pids)) {}
  int rank() const override { return rank_; }
  int size() const override { return world_.size(); }
  const std::vector<std::string>& hostNames() const override { return hosts_; }
  const std::vector<int64_t>& processIds() const override { return pids_; }
  Status allGather(void* data, size_t bytes_per_rank) override { return world_.allGather(rank_, data, bytes_per_rank); }
  Status barrier() override { return world_.barrier(); }
  Status send(int peer, int tag, const void* data, size_t bytes) override {
    return world_.send(rank_, peer, tag, data, bytes);
  }
  Status recv(int peer, int tag, void* data, size_t bytes) override {
    return world_.recv(rank_, peer, tag, data, bytes);
  }
  Status checkPeers() override { return Status::ok(); }
  void abort(const std::string&) override {}

 private:
  LocalWorld& world_;
  int rank_;
  std::vector<std::string> hosts_;
  std::vector<int64_t> pids_;
};

TEST(ThreadsTransport, CreatedOverABootstrapTwoWorldsAtOnce) {
  // Two independent 3-rank worlds set up concurrently in this process must not mix.
  const int n = 3;
  const std::vector<int64_t> pids(n, static_cast<int64_t>(::getpid()));
  LocalWorld world_a(n), world_b(n);
  std::vector<std::unique_ptr<DataTransport>> a(n), b(n);
  std::vector<Status> status(2 * n);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2 * n; ++r) {
    threads.emplace_back([&, r] {
      LocalBootstrap bootstrap(r < n ? world_a : world_b, r % n, pids);
      Result<std::unique_ptr<DataTransport>> endpoint =
          createTransport(TransportKind::kAuto, bootstrap, testOptions(20));
      status[r] = endpoint.isOk() ? Status::ok() : endpoint.status();
      if (endpoint.isOk()) (r < n ? a : b)[r % n] = std::move(*endpoint);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < 2 * n; ++r) ASSERT_TRUE(status[r].isOk()) << status[r].toString();
  EXPECT_STREQ(a[0]->name(), "threads");
  auto job_a = makeJob(ClassicAlgo::kRing, CollectiveKind::kAllReduce, n, 1000, DataType::kFloat32, ReduceOp::kSum);
  auto job_b = makeJob(ClassicAlgo::kDirect, CollectiveKind::kAllGather, n, 100, DataType::kInt32, ReduceOp::kMax);
  ASSERT_TRUE(job_a && job_b);
  std::thread run_a([&] { runJobs(a, {job_a.get()}); });
  runJobs(b, {job_b.get()});
  run_a.join();
  EXPECT_EQ(check(*job_a), "");
  EXPECT_EQ(check(*job_b), "");
}

TEST(ThreadsTransport, RefusesRanksOfAnotherProcess) {
  LocalWorld world(2);
  std::vector<int64_t> pids = {static_cast<int64_t>(::getpid()), static_cast<int64_t>(::getpid()) + 1};
  LocalBootstrap bootstrap(world, 0, pids);
  Result<std::unique_ptr<DataTransport>> endpoint = createThreadsTransport(bootstrap, testOptions(5));
  ASSERT_FALSE(endpoint.isOk());
  EXPECT_EQ(endpoint.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(endpoint.status().message().find("rank 1 is process"), std::string::npos) << endpoint.status().message();
}

}  // namespace
}  // namespace braid
