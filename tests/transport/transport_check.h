// Test support for data transports in forked processes: bootstrapping a child, running one classical
// collective's plan on this rank through an endpoint, and checking the result against a naive reference;
// small helpers to wait for requests and a transport wrapper that kills its process mid-collective.
//
// Data: input element i of rank q is inputValue(q, i), a small integer (-30..30) stored as fp32, so sums over
// any number of ranks in any order are exact and a float-sum all-reduce can be compared bit for bit. The
// reference is computed here, element by element, from the collective's definition (nccl-tests layouts):
//   all-reduce    out[j] = sum_q in_q[j]
//   all-gather    out[q*m + i] = in_q[i]                (m = elements per rank)
//   all-to-all    out[q*m + i] = in_q[r*m + i]          (m = elements per block)
// Output and scratch start as NaN, so an element never written is wrong.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "braid/bootstrap.h"
#include "braid/classic.h"
#include "braid/executor.h"
#include "braid/plan.h"
#include "braid/transport.h"
#include "transport/factory.h"
#include "transport/multirank.h"

namespace braid::testing {

/// A transport constructor of runtime/transport/factory.h (createShmTransport, createUcxTransport, ...).
using CreateTransportFn = Result<std::unique_ptr<DataTransport>> (*)(Bootstrap&, const TransportOptions&);

/// In a child: rank 0 creates the id (its root thread lives in that child) and publishes it; every rank
/// connects.
inline Result<std::unique_ptr<Bootstrap>> childBootstrap(ForkShared<UniqueId>& shared, int rank, int n,
                                                         double timeout_s) {
  UniqueId id;
  if (rank == 0) {
    BRAID_ASSIGN_OR_RETURN(id, createUniqueId("127.0.0.1:0"));
    shared.publish(id);
  } else if (!shared.wait(&id, timeout_s)) {
    return Status(StatusCode::kTimeout, fmt::format("rank {}: no bootstrap id published", rank));
  }
  BootstrapOptions options;
  options.timeout_s = timeout_s;
  return connectBootstrap(id, rank, n, options);
}

inline float inputValue(int rank, uint64_t i) {
  return static_cast<float>(static_cast<int64_t>((i * 7 + static_cast<uint64_t>(rank) * 13) % 61) - 30);
}

struct CollectiveCase {
  ClassicAlgo algo = ClassicAlgo::kRing;
  CollectiveKind kind = CollectiveKind::kAllReduce;
  uint64_t count = 0;  // nccl-tests count: all-gather per rank, all-to-all per block, all-reduce the buffer
  bool in_place = false;
  int instances = 1;

  std::string describe() const {
    return fmt::format("{} {} count={} {} instances={}", classicAlgoName(algo), collectiveName(kind), count,
                       in_place ? "in-place" : "out-of-place", instances);
  }
};

/// The plan of `c` for n ranks (lowered for fp32).
inline Result<Plan> casePlan(const CollectiveCase& c, int n) {
  ClassicRequest request;
  request.algo = c.algo;
  request.spec.kind = c.kind;
  request.spec.num_ranks = n;
  request.spec.chunk_factor = 0;
  request.spec.in_place = c.in_place;
  BRAID_ASSIGN_OR_RETURN(Algorithm algorithm, buildClassic(request));
  BRAID_ASSIGN_OR_RETURN(CollectiveSpec spec, algorithm.spec(c.in_place));
  LowerOptions lower;
  lower.size_bytes = c.count * 4 * static_cast<uint64_t>(spec.sizeMultiplier());
  lower.in_place = c.in_place;
  lower.instances = c.instances;
  lower.element_bytes = 4;
  return lowerAlgorithm(algorithm, lower);
}

/// Runs `c` as `rank` of n through `endpoint` and checks every output element. kInternalError listing the
/// first wrong elements on a mismatch; the transport's or executor's error otherwise.
inline Status runCase(DataTransport& endpoint, int rank, int n, const CollectiveCase& c) {
  BRAID_ASSIGN_OR_RETURN(Plan plan, casePlan(c, n));
  const RankPlan& mine = plan.ranks[static_cast<size_t>(rank)];
  const uint64_t out_elems = mine.output_bytes / 4;
  const uint64_t in_elems = c.kind == CollectiveKind::kAllGather ? out_elems / static_cast<uint64_t>(n) : out_elems;
  const float poison = std::nanf("");
  std::vector<float> output(out_elems, poison);
  std::vector<float> input(c.in_place ? 0 : mine.input_bytes / 4, poison);
  std::vector<uint8_t> scratch(mine.scratch_bytes + mine.temp_bytes, 0xFF);
  // In place, the input lives in the output: all-gather's at this rank's block, the others' at the start.
  float* in = c.in_place ? output.data() + (c.kind == CollectiveKind::kAllGather ? rank * in_elems : 0) : input.data();
  for (uint64_t i = 0; i < in_elems; ++i) in[i] = inputValue(rank, i);
  RankMemory memory;
  memory.output = output.data();
  memory.output_bytes = mine.output_bytes;
  memory.input = c.in_place ? static_cast<void*>(output.data()) : static_cast<void*>(input.data());
  memory.input_bytes = c.in_place ? 0 : mine.input_bytes;
  memory.scratch = scratch.data();
  memory.scratch_bytes = scratch.size();
  BRAID_RETURN_IF_ERROR(endpoint.bind(rank, memory, ReduceSpec{DataType::kFloat32, ReduceOp::kSum}));
  ExecOptions options;
  options.local_ranks = {rank};
  BRAID_ASSIGN_OR_RETURN(ExecResult result, execute(plan, endpoint, options));
  (void)result;
  std::string wrong;
  int wrong_count = 0;
  for (uint64_t j = 0; j < out_elems; ++j) {
    float want = 0;
    switch (c.kind) {
      case CollectiveKind::kAllReduce:
        for (int q = 0; q < n; ++q) want += inputValue(q, j);
        break;
      case CollectiveKind::kAllGather: want = inputValue(static_cast<int>(j / in_elems), j % in_elems); break;
      case CollectiveKind::kAllToAll: {
        const uint64_t m = out_elems / static_cast<uint64_t>(n);
        want = inputValue(static_cast<int>(j / m), static_cast<uint64_t>(rank) * m + j % m);
        break;
      }
      default: return unsupported("plan_check.h checks all-reduce, all-gather and all-to-all");
    }
    if (std::memcmp(&output[j], &want, 4) != 0 && wrong_count++ < 4) {
      wrong += fmt::format(" output[{}] = {}, expected {};", j, output[j], want);
    }
  }
  if (!c.in_place) {
    for (uint64_t i = 0; i < in_elems; ++i) {
      if (input[i] != inputValue(rank, i) && wrong_count++ < 4) wrong += fmt::format(" input[{}] was modified;", i);
    }
  }
  if (wrong_count > 0) {
    return internalError(fmt::format("rank {}: {}: {} wrong element(s):{}", rank, c.describe(), wrong_count, wrong));
  }
  return Status::ok();
}

/// The cases every data transport runs: ring and recursive all-reduce, ring and recursive all-gather,
/// pairwise and direct all-to-all, at counts 0, 1, 7 and 1000003 (300007 with BRAID_TEST_SMALL=1), both modes where the
/// algorithm has them, and ring all-reduce with 2 instances (more channels).
inline std::vector<CollectiveCase> standardCases() {
  // BRAID_TEST_SMALL=1 (sanitizer builds): the large count still spans several slices.
  const char* small = std::getenv("BRAID_TEST_SMALL");
  const uint64_t large = small != nullptr && std::string(small) == "1" ? 300007 : 1000003;
  std::vector<CollectiveCase> cases;
  const struct {
    ClassicAlgo algo;
    CollectiveKind kind;
  } algos[] = {{ClassicAlgo::kRing, CollectiveKind::kAllReduce},
               {ClassicAlgo::kRecursiveDoubling, CollectiveKind::kAllReduce},
               {ClassicAlgo::kRing, CollectiveKind::kAllGather},
               {ClassicAlgo::kRecursiveDoubling, CollectiveKind::kAllGather},
               {ClassicAlgo::kPairwise, CollectiveKind::kAllToAll},
               {ClassicAlgo::kDirect, CollectiveKind::kAllToAll}};
  for (const auto& a : algos) {
    for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{7}, large}) {
      // Large counts once per algorithm (out of place); small ones in both modes.
      for (bool in_place : {false, true}) {
        if (in_place && count == large) continue;
        cases.push_back(CollectiveCase{a.algo, a.kind, count, in_place, 1});
      }
    }
  }
  cases.push_back(CollectiveCase{ClassicAlgo::kRing, CollectiveKind::kAllReduce, 100003, false, 2});
  return cases;
}

/// Runs every case of standardCases() in the modes its algorithm declares (the same on every rank); prints
/// failures to stderr and returns the number of failed cases (it stops at the first: the endpoint's matching
/// state is unknown after an error).
inline int runStandardCases(DataTransport& endpoint, int rank, int n) {
  for (const CollectiveCase& c : standardCases()) {
    ClassicRequest request;
    request.algo = c.algo;
    request.spec.kind = c.kind;
    request.spec.num_ranks = n;
    request.spec.in_place = c.in_place;
    Result<Algorithm> algorithm = buildClassic(request);
    if (algorithm.isOk() && !(c.in_place ? algorithm->in_place : algorithm->out_of_place)) continue;
    const Status status = algorithm.isOk() ? runCase(endpoint, rank, n, c) : algorithm.status();
    if (!status.isOk()) {
      std::fprintf(stderr, "rank %d: %s: %s\n", rank, c.describe().c_str(), status.toString().c_str());
      endpoint.abort(status);  // the other ranks stop at once instead of waiting for their timeout
      return 1;
    }
  }
  return 0;
}

// Prints `status` when it is an error and returns 1; 0 when ok.
inline int report(int rank, const char* what, const Status& status) {
  if (status.isOk()) return 0;
  std::fprintf(stderr, "rank %d: %s: %s\n", rank, what, status.toString().c_str());
  return 1;
}

// Polls (blocking) until `id` completes; the poll's error otherwise.
inline Status waitFor(Transport& transport, RequestId id) {
  std::vector<Completion> done;
  while (true) {
    done.clear();
    BRAID_RETURN_IF_ERROR(transport.poll(&done, /*block=*/true));
    for (const Completion& c : done)
      if (c.id == id) return Status::ok();
  }
}

// Polls (blocking) until `id` completed; every completion seen is collected in `seen` (which is looked up first).
inline Status waitCollecting(Transport& transport, RequestId id, std::vector<RequestId>* seen) {
  for (RequestId got : *seen)
    if (got == id) return Status::ok();
  std::vector<Completion> done;
  while (true) {
    done.clear();
    BRAID_RETURN_IF_ERROR(transport.poll(&done, /*block=*/true));
    bool found = false;
    for (const Completion& c : done) {
      seen->push_back(c.id);
      found = found || c.id == id;
    }
    if (found) return Status::ok();
  }
}

// One blocking poll, timed: its status, and in *waited_s the seconds it took.
inline Status timedPoll(Transport& transport, std::vector<Completion>* done, double* waited_s) {
  const auto start = std::chrono::steady_clock::now();
  const Status status = transport.poll(done, /*block=*/true);
  *waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return status;
}

// waitFor, timed: its status, and in *waited_s the seconds it took.
inline Status timedWaitFor(Transport& transport, RequestId id, double* waited_s) {
  const auto start = std::chrono::steady_clock::now();
  const Status status = waitFor(transport, id);
  *waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return status;
}

// Polls until every id of `ids` completed.
inline Status waitForAll(Transport& transport, std::vector<RequestId> ids) {
  std::vector<Completion> done;
  while (!ids.empty()) {
    done.clear();
    BRAID_RETURN_IF_ERROR(transport.poll(&done, /*block=*/true));
    for (const Completion& c : done) std::erase(ids, c.id);
  }
  return Status::ok();
}

// Forwards to an endpoint; SIGKILLs this process when the `kill_at`-th send is posted.
class KillingTransport : public Transport {
 public:
  KillingTransport(Transport& inner, int kill_at) : inner_(inner), kill_at_(kill_at) {}
  const char* name() const override { return inner_.name(); }
  Result<RequestId> postSend(const SendRequest& request) override {
    if (++sends_ == kill_at_) testing::killSelf();
    return inner_.postSend(request);
  }
  Result<RequestId> postRecv(const RecvRequest& request) override { return inner_.postRecv(request); }
  Result<RequestId> postLocal(const LocalRequest& request) override { return inner_.postLocal(request); }
  Status poll(std::vector<Completion>* done, bool block) override { return inner_.poll(done, block); }
  double nowUs() const override { return inner_.nowUs(); }

 private:
  Transport& inner_;
  int kill_at_;
  int sends_ = 0;
};

/// One transport of the conformance suite (conformance_test.cc).
struct TransportUnderTest {
  const char* name = "";  // DataTransport::name()
  CreateTransportFn create = nullptr;
  bool ranks_are_threads = false;  // every rank must be a thread of one process (threads)
  uint64_t idle_send_bytes = 0;    // forkIdleSender's message: completes before the receiver reads it
  void (*prepare)() = nullptr;     // called in the test process before any rank starts (environment)
  const char* label = nullptr;     // the test name's suffix when one transport runs in several settings (else name)
  /// Why this transport cannot run on this machine ("" when it can): the suite's tests skip naming it.
  const std::string& (*unavailable)() = nullptr;
  /// Why n ranks that are threads of one process cannot run ("" when they can; null: they always can).
  std::string (*threads_unavailable)(int n) = nullptr;
};

/// Skips the running test when `t` cannot run on this machine, naming the reason.
#define BRAID_SKIP_UNLESS_AVAILABLE(t)                                                             \
  do {                                                                                             \
    if ((t).unavailable != nullptr && !(t).unavailable().empty()) {                                \
      GTEST_SKIP() << (t).name << " transport: " << (t).unavailable() << "; its tests need a GPU"; \
    }                                                                                              \
  } while (0)

/// GoogleTest prints a parameter by its label, else its name.
inline void PrintTo(const TransportUnderTest& t, std::ostream* os) { *os << (t.label != nullptr ? t.label : t.name); }

/// What a rank does with its bootstrap and endpoint; 0 = success.
using RankBody = std::function<int(int rank, Bootstrap&, DataTransport&)>;

/// In a child: bootstrap, endpoint through `create` with `options`, then body(bootstrap, endpoint); errors of
/// the first two are reported as failures of the child.
inline int withEndpoint(ForkShared<UniqueId>& id, int rank, int n, CreateTransportFn create,
                        const TransportOptions& options, const std::function<int(Bootstrap&, DataTransport&)>& body) {
  auto bootstrap = childBootstrap(id, rank, n, /*timeout_s=*/20);
  if (!bootstrap.isOk()) return report(rank, "bootstrap", bootstrap.status());
  auto endpoint = create(**bootstrap, options);
  if (!endpoint.isOk()) return report(rank, "create transport", endpoint.status());
  return body(**bootstrap, **endpoint);
}

/// In this process: n threads, each with its own bootstrap (over 127.0.0.1) and endpoint through `create`,
/// running body(rank, ...). Returns how many ranks failed.
inline int runRankThreads(int n, CreateTransportFn create, const TransportOptions& options, const RankBody& body) {
  Result<UniqueId> id = createUniqueId("127.0.0.1:0");
  if (!id.isOk()) return report(0, "createUniqueId", id.status());
  std::vector<int> failures(static_cast<size_t>(n), 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      BootstrapOptions boot_options;
      boot_options.timeout_s = 20;
      auto bootstrap = connectBootstrap(*id, r, n, boot_options);
      if (!bootstrap.isOk()) {
        failures[static_cast<size_t>(r)] = report(r, "bootstrap", bootstrap.status());
        return;
      }
      auto endpoint = create(**bootstrap, options);
      if (!endpoint.isOk()) {
        failures[static_cast<size_t>(r)] = report(r, "create transport", endpoint.status());
        return;
      }
      failures[static_cast<size_t>(r)] = body(r, **bootstrap, **endpoint) == 0 ? 0 : 1;
    });
  }
  for (auto& t : threads) t.join();
  int failed = 0;
  for (int f : failures) failed += f;
  return failed;
}

/// n ranks of `t` with `options`: one forked process per rank, or, when the transport needs it or
/// `as_threads`, n threads of one forked process (then the result has one entry, failed when any rank failed).
inline ForkResult runRanks(const TransportUnderTest& t, int n, const TransportOptions& options, const RankBody& body,
                           double timeout_s, bool as_threads = false) {
  if (t.prepare != nullptr) t.prepare();
  if (t.ranks_are_threads || as_threads) {
    return runForked(
        1, [&](int) -> int { return runRankThreads(n, t.create, options, body); }, timeout_s);
  }
  ForkShared<UniqueId> id;
  return runForked(
      n,
      [&](int rank) -> int {
        return withEndpoint(id, rank, n, t.create, options, [&](Bootstrap& bootstrap, DataTransport& endpoint) {
          return body(rank, bootstrap, endpoint);
        });
      },
      timeout_s);
}

/// Every standard case on n ranks, one endpoint each (reused across cases).
inline ForkResult forkCollectives(const TransportUnderTest& t, int n) {
  TransportOptions options;
  options.timeout_s = 30;
  return runRanks(
      t, n, options,
      [&](int rank, Bootstrap&, DataTransport& endpoint) {
        if (endpoint.localRanks() != std::vector<int>{rank} || std::string(endpoint.name()) != t.name) {
          std::fprintf(stderr, "rank %d: localRanks() is not {%d} or name() is not %s\n", rank, rank, t.name);
          return 1;
        }
        return runStandardCases(endpoint, rank, n);
      },
      /*timeout_s=*/120);
}

/// Rank 0 sends `sent` bytes to rank 1 on channel 0 and sees the send complete; then rank 1 receives `received`
/// bytes: its receive must fail with kInvalidArgument containing every text of `expected_texts`.
inline ForkResult forkSizeMismatch(const TransportUnderTest& t, uint64_t sent, uint64_t received,
                                   const std::vector<std::string>& expected_texts) {
  TransportOptions options;
  options.timeout_s = 20;
  return runRanks(
      t, 2, options,
      [&](int rank, Bootstrap& bootstrap, DataTransport& endpoint) {
        std::vector<uint8_t> buffer(128, 1);
        RankMemory memory{buffer.data(), 64, buffer.data() + 64, 64, nullptr, 0};
        if (report(rank, "bind", endpoint.bind(rank, memory, ReduceSpec{}))) return 1;
        if (rank == 0) {
          auto posted = endpoint.postSend(SendRequest{0, 1, 0, BufferRef{BufferKind::kInput, 0, sent}, {}});
          if (!posted.isOk()) return report(rank, "postSend", posted.status());
          if (report(rank, "send", waitFor(endpoint, *posted))) return 1;
          if (report(rank, "barrier", bootstrap.barrier())) return 1;
        } else {
          if (report(rank, "barrier", bootstrap.barrier())) return 1;  // the send completed: one matcher, here
          auto posted = endpoint.postRecv(RecvRequest{1, 0, 0, BufferRef{BufferKind::kOutput, 0, received}, {}});
          const Status status = posted.isOk() ? waitFor(endpoint, *posted) : posted.status();
          bool named = status.code() == StatusCode::kInvalidArgument;
          for (const std::string& text : expected_texts)
            named = named && status.message().find(text) != std::string::npos;
          if (!named) {
            std::fprintf(stderr, "rank 1 got %s\n", status.toString().c_str());
            return 1;
          }
        }
        return report(rank, "barrier", bootstrap.barrier());
      },
      /*timeout_s=*/60);
}

/// Binds `buffer` as `rank`'s output (no input, no scratch, no reduction).
inline Status bindOutput(DataTransport& t, int rank, std::vector<uint8_t>& buffer) {
  return t.bind(rank, RankMemory{nullptr, 0, buffer.data(), buffer.size(), nullptr, 0}, ReduceSpec{});
}

/// Rank 1 waits for a message rank 0 never sends, with a 0.3 s timeout: kTimeout after 0.3..3 s,
/// "<name>: rank 1: no completion for ..." naming "from rank 0 on channel 5".
inline ForkResult forkTimeout(const TransportUnderTest& t) {
  TransportOptions options;
  options.timeout_s = 0.3;
  const std::string prefix = fmt::format("{}: rank 1: no completion for", t.name);
  return runRanks(
      t, 2, options,
      [&](int rank, Bootstrap& bootstrap, DataTransport& endpoint) {
        std::vector<uint8_t> buffer(16);
        if (report(rank, "bind", bindOutput(endpoint, rank, buffer))) return 1;
        if (rank == 1) {
          auto posted = endpoint.postRecv(RecvRequest{1, 0, 5, BufferRef{BufferKind::kOutput, 0, 16}, {}});
          if (!posted.isOk()) return report(rank, "postRecv", posted.status());
          double waited = 0;
          const Status status = timedWaitFor(endpoint, *posted, &waited);
          if (status.code() != StatusCode::kTimeout || status.message().rfind(prefix, 0) != 0 ||
              status.message().find("from rank 0 on channel 5") == std::string::npos || waited < 0.29 || waited > 3) {
            std::fprintf(stderr, "after %.2f s: %s\n", waited, status.toString().c_str());
            return 1;
          }
        }
        return report(rank, "barrier", bootstrap.barrier());
      },
      /*timeout_s=*/60);
}

/// Rank 1 aborts while rank 0 sleeps in a blocking poll for its message: rank 0 gets kRemoteError naming
/// rank 1 and the reason within a second (timeout 30 s), and keeps failing so (sticky); rank 1's later calls
/// return the abort's reason.
inline ForkResult forkAbort(const TransportUnderTest& t) {
  TransportOptions options;
  options.timeout_s = 30;
  ForkShared<int> seen;  // rank 0 saw the abort: rank 1 (which must stay alive until then) may go
  return runRanks(
      t, 2, options,
      [&](int rank, Bootstrap&, DataTransport& endpoint) {
        std::vector<uint8_t> buffer(16);
        if (report(rank, "bind", bindOutput(endpoint, rank, buffer))) return 1;
        if (rank == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));  // rank 0 is asleep in poll by now
          endpoint.abort(Status(StatusCode::kInternalError, "test abort"));
          const Status later =
              endpoint.postRecv(RecvRequest{1, 0, 0, BufferRef{BufferKind::kOutput, 0, 1}, {}}).status();
          if (later.message() != "test abort") return report(rank, "after abort", later);
          int done = 0;
          return seen.wait(&done, 10) ? 0 : report(rank, "waiting for rank 0", internalError("it never saw the abort"));
        }
        auto posted = endpoint.postRecv(RecvRequest{0, 1, 0, BufferRef{BufferKind::kOutput, 0, 16}, {}});
        if (!posted.isOk()) return report(rank, "postRecv", posted.status());
        double waited = 0;
        const Status status = timedWaitFor(endpoint, *posted, &waited);
        seen.publish(1);
        if (status.code() != StatusCode::kRemoteError || status.message().find("rank 1") == std::string::npos ||
            status.message().find("test abort") == std::string::npos || waited > 1.0 ||
            status.message().find("rank 0: rank 0: ") != std::string::npos) {  // the rank is named once
          std::fprintf(stderr, "after %.2f s: %s\n", waited, status.toString().c_str());
          return 1;
        }
        const Status later = endpoint.postSend(SendRequest{0, 1, 0, BufferRef{BufferKind::kOutput, 0, 1}, {}}).status();
        if (later.code() != StatusCode::kRemoteError) return report(rank, "a send after the peer aborted", later);
        return 0;
      },
      /*timeout_s=*/60);
}

/// Rank `victim` of n (processes) is SIGKILLed at its `kill_at`-th send of a ring all-reduce of `count`
/// floats; every other rank's execute() must return kRemoteError naming "rank <victim>" (timeout 30 s), then
/// abort.
inline ForkResult forkKilledRank(const TransportUnderTest& t, int n, int victim, uint64_t count, int kill_at) {
  TransportOptions options;
  options.timeout_s = 30;
  return runRanks(
      t, n, options,
      [&](int rank, Bootstrap&, DataTransport& endpoint) {
        const CollectiveCase c{ClassicAlgo::kRing, CollectiveKind::kAllReduce, count, false, 1};
        Result<Plan> plan = casePlan(c, n);
        if (!plan.isOk()) return report(rank, "plan", plan.status());
        const RankPlan& mine = plan->ranks[static_cast<size_t>(rank)];
        std::vector<uint8_t> input(mine.input_bytes, 0), output(mine.output_bytes),
            scratch(mine.scratch_bytes + mine.temp_bytes);
        RankMemory memory{input.data(), input.size(), output.data(), output.size(), scratch.data(), scratch.size()};
        if (report(rank, "bind", endpoint.bind(rank, memory, ReduceSpec{DataType::kFloat32, ReduceOp::kSum}))) {
          return 1;
        }
        KillingTransport killing(endpoint, rank == victim ? kill_at : -1);
        Result<ExecResult> run = execute(*plan, killing, ExecOptions{{rank}});
        if (rank == victim) {
          std::fprintf(stderr, "rank %d was not killed (fewer than %d sends?)\n", rank, kill_at);
          return 3;
        }
        const Status status = run.status();
        if (run.isOk() || status.code() != StatusCode::kRemoteError ||
            status.message().find(fmt::format("rank {}", victim)) == std::string::npos) {
          std::fprintf(stderr, "rank %d: %s\n", rank, run.isOk() ? "execute succeeded" : status.toString().c_str());
          return 1;
        }
        endpoint.abort(status);  // as a communicator would
        return 0;
      },
      /*timeout_s=*/60);
}

/// forkKilledRank with rank 2 of 4 SIGKILLed in the middle of a 16 MiB ring all-reduce (at its 20th of 48 sends):
/// the victim dies by SIGKILL and every other rank's execute() returns kRemoteError naming rank 2, within 15 s
/// although the timeout is 30 s.
inline void expectKilledRankFailsPeers(const TransportUnderTest& t) {
  const ForkResult result = forkKilledRank(t, 4, 2, 4 << 20, 20);
  ASSERT_EQ(result.ranks.size(), 4u) << result.summary();
  EXPECT_EQ(result.ranks[2].signal, 9) << result.summary();
  for (int r : {0, 1, 3}) EXPECT_TRUE(result.ranks[r].ok()) << result.summary();
  EXPECT_LT(result.elapsed_s, 15) << result.summary();
}

/// Rank 0's send of `bytes` to rank 1 completes before rank 1 posts its receive; rank 0 then stays out of
/// the transport (in bootstrap barriers) while rank 1 receives: the message must still arrive intact (a
/// transport whose send completed before its bytes left must move them without being called).
inline ForkResult forkIdleSender(const TransportUnderTest& t, const TransportOptions& options, uint64_t bytes) {
  return runRanks(
      t, 2, options,
      [&](int rank, Bootstrap& bootstrap, DataTransport& endpoint) {
        std::vector<uint8_t> input(bytes), output(bytes, 0);
        for (uint64_t i = 0; i < bytes; ++i) input[i] = static_cast<uint8_t>(i * 13 + 1);
        RankMemory memory{input.data(), bytes, output.data(), bytes, nullptr, 0};
        if (report(rank, "bind", endpoint.bind(rank, memory, ReduceSpec{}))) return 1;
        if (rank == 0) {
          auto posted = endpoint.postSend(SendRequest{0, 1, 0, BufferRef{BufferKind::kInput, 0, bytes}, {}});
          if (!posted.isOk()) return report(rank, "postSend", posted.status());
          if (report(rank, "send", waitFor(endpoint, *posted))) return 1;
          std::fill(input.begin(), input.end(), 0);  // the send's bytes were copied already
          if (report(rank, "barrier", bootstrap.barrier())) return 1;
          return report(rank, "barrier 2", bootstrap.barrier());
        }
        if (report(rank, "barrier", bootstrap.barrier())) return 1;
        auto posted = endpoint.postRecv(RecvRequest{1, 0, 0, BufferRef{BufferKind::kOutput, 0, bytes}, {}});
        if (!posted.isOk()) return report(rank, "postRecv", posted.status());
        if (report(rank, "recv", waitFor(endpoint, *posted))) return 1;
        for (uint64_t i = 0; i < bytes; ++i) {
          if (output[i] != static_cast<uint8_t>(i * 13 + 1)) {
            std::fprintf(stderr, "output[%llu] = %d\n", static_cast<unsigned long long>(i), output[i]);
            return 1;
          }
        }
        return report(rank, "barrier 2", bootstrap.barrier());
      },
      /*timeout_s=*/60);
}

/// One message of forkSendAheadExchange: `bytes` at `offset` of rank 0's input, into the same range of rank 1's
/// output, on `channel`.
struct ExchangeMessage {
  int channel = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

/// Byte i of rank 0's input in forkSendAheadExchange.
inline uint8_t exchangeByte(uint64_t i) { return static_cast<uint8_t>(i * 31 + 7); }

/// Two ranks; both buffers end where the last message ends. Rank 0 sends messages[0, early) to rank 1 and waits
/// until they complete while rank 1 has posted no receive (it waits at a barrier), zeroes their source bytes,
/// then sends the rest; rank 1 then posts every receive in order, and every byte of its output must be rank 0's
/// original input (exchangeByte). Then `after(rank, bootstrap, endpoint)` (checks of the transport's own) and a
/// final barrier on both ranks, so no endpoint goes away while its last sends are in flight.
inline ForkResult forkSendAheadExchange(const TransportUnderTest& t, const TransportOptions& options,
                                        const std::vector<ExchangeMessage>& messages, size_t early,
                                        const RankBody& after) {
  uint64_t end = 0;
  for (const ExchangeMessage& m : messages) end = std::max(end, m.offset + m.bytes);
  return runRanks(
      t, 2, options,
      [&](int rank, Bootstrap& bootstrap, DataTransport& endpoint) {
        std::vector<uint8_t> input(end), output(end, 0);
        for (uint64_t i = 0; i < end; ++i) input[i] = rank == 0 ? exchangeByte(i) : 0;
        RankMemory memory{input.data(), end, output.data(), end, nullptr, 0};
        if (report(rank, "bind", endpoint.bind(rank, memory, ReduceSpec{}))) return 1;
        const auto post = [&](const ExchangeMessage& m) {
          return rank == 0 ? endpoint.postSend(
                                 SendRequest{0, 1, m.channel, BufferRef{BufferKind::kInput, m.offset, m.bytes}, {}})
                           : endpoint.postRecv(
                                 RecvRequest{1, 0, m.channel, BufferRef{BufferKind::kOutput, m.offset, m.bytes}, {}});
        };
        std::vector<RequestId> ids;
        if (rank == 0) {
          for (size_t m = 0; m < early; ++m) {
            auto posted = post(messages[m]);
            if (!posted.isOk()) return report(rank, "early send", posted.status());
            ids.push_back(*posted);
          }
          if (report(rank, "early sends", waitForAll(endpoint, ids))) return 1;  // no receive is posted yet
          for (size_t m = 0; m < early; ++m) {
            std::fill_n(input.begin() + static_cast<std::ptrdiff_t>(messages[m].offset), messages[m].bytes, 0);
          }
          ids.clear();
        }
        if (report(rank, "barrier", bootstrap.barrier())) return 1;
        for (size_t m = rank == 0 ? early : 0; m < messages.size(); ++m) {
          auto posted = post(messages[m]);
          if (!posted.isOk()) return report(rank, rank == 0 ? "postSend" : "postRecv", posted.status());
          ids.push_back(*posted);
        }
        if (report(rank, "the rest", waitForAll(endpoint, ids))) return 1;
        for (uint64_t i = 0; rank == 1 && i < end; ++i) {
          if (output[i] != exchangeByte(i)) {
            std::fprintf(stderr, "output[%llu] = %d, expected %d\n", static_cast<unsigned long long>(i), output[i],
                         exchangeByte(i));
            return 1;
          }
        }
        if (after(rank, bootstrap, endpoint) != 0) return 1;
        return report(rank, "final barrier", bootstrap.barrier());
      },
      /*timeout_s=*/60);
}

/// Benchmark (disabled tests): n ranks run a ring all-reduce of `bytes` fp32 sum `warmup` times, then
/// `iters` timed times between bootstrap barriers; rank 0 prints
///   "<name> ring all-reduce <bytes> B x <n> ranks: <us> us, algbw <x> GB/s, busbw <y> GB/s"
/// with nccl-tests' definitions: algbw = bytes / time, busbw = algbw x 2 (n - 1) / n (GB = 1e9 bytes).
inline ForkResult forkRingAllReduceBusBw(const TransportUnderTest& t, int n, uint64_t bytes, int warmup, int iters) {
  TransportOptions options;
  options.timeout_s = 120;
  return runRanks(
      t, n, options,
      [&](int rank, Bootstrap& bootstrap, DataTransport& endpoint) {
        const CollectiveCase c{ClassicAlgo::kRing, CollectiveKind::kAllReduce, bytes / 4, false, 1};
        Result<Plan> plan = casePlan(c, n);
        if (!plan.isOk()) return report(rank, "plan", plan.status());
        const RankPlan& mine = plan->ranks[static_cast<size_t>(rank)];
        std::vector<float> input(mine.input_bytes / 4), output(mine.output_bytes / 4);
        for (size_t i = 0; i < input.size(); ++i) input[i] = inputValue(rank, i);
        std::vector<uint8_t> scratch(mine.scratch_bytes + mine.temp_bytes);
        RankMemory memory{input.data(),      mine.input_bytes, output.data(),
                          mine.output_bytes, scratch.data(),   scratch.size()};
        if (report(rank, "bind", endpoint.bind(rank, memory, ReduceSpec{DataType::kFloat32, ReduceOp::kSum}))) {
          return 1;
        }
        for (int i = 0; i < warmup; ++i) {
          if (report(rank, "warmup", execute(*plan, endpoint, ExecOptions{{rank}}).status())) return 1;
        }
        if (report(rank, "barrier", bootstrap.barrier())) return 1;
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < iters; ++i) {
          if (report(rank, "run", execute(*plan, endpoint, ExecOptions{{rank}}).status())) return 1;
        }
        if (report(rank, "barrier", bootstrap.barrier())) return 1;
        const double us =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / iters;
        for (size_t j = 0; j < output.size(); ++j) {
          float want = 0;
          for (int q = 0; q < n; ++q) want += inputValue(q, j);
          if (output[j] != want) {
            std::fprintf(stderr, "rank %d: output[%zu] = %g, expected %g\n", rank, j, output[j], want);
            return 1;
          }
        }
        if (rank == 0) {
          const double algbw = static_cast<double>(bytes) / us / 1e3;
          std::printf("%s ring all-reduce %llu B x %d ranks: %.0f us, algbw %.2f GB/s, busbw %.2f GB/s\n", t.name,
                      static_cast<unsigned long long>(bytes), n, us, algbw, algbw * 2.0 * (n - 1) / n);
        }
        return 0;
      },
      /*timeout_s=*/600);
}

}  // namespace braid::testing
