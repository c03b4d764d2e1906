// The TCP data transport (runtime/transport/tcp/) in forked processes: the DataTransport contract request
// by request, then classical plans run by the executor on 2, 3 and 4 ranks against naive references, and a
// rank killed in the middle of a large all-reduce.
#include "transport/tcp/tcp_transport.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "braid/classic.h"
#include "braid/executor.h"
#include "braid/plan.h"
#include "multirank.h"
#include "transport/factory.h"
#include "transport/transport_check.h"

namespace braid {
namespace {

using testing::forkedBootstrap;
using testing::ForkResult;
using testing::ForkShared;
using testing::runForked;

constexpr double kTimeout = 20;

/// A bootstrap and a TCP endpoint for child `rank`.
struct Endpoint {
  std::unique_ptr<Bootstrap> bootstrap;
  std::unique_ptr<DataTransport> transport;
};

Result<Endpoint> makeEndpoint(ForkShared<UniqueId>& shared, int rank, int n, double timeout_s) {
  Endpoint e;
  BRAID_ASSIGN_OR_RETURN(e.bootstrap, forkedBootstrap(shared, rank, n, kTimeout));
  TransportOptions options;
  options.timeout_s = timeout_s;
  BRAID_ASSIGN_OR_RETURN(e.transport, createTcpTransport(*e.bootstrap, options));
  return e;
}

/// Polls (blocking) until `id` completed; other completions are collected in `seen`.
Status waitFor(Transport& t, RequestId id, std::vector<RequestId>* seen) {
  for (auto& got : *seen)
    if (got == id) return Status::ok();
  while (true) {
    std::vector<Completion> done;
    BRAID_RETURN_IF_ERROR(t.poll(&done, true));
    bool found = false;
    for (const Completion& c : done) {
      seen->push_back(c.id);
      found = found || c.id == id;
    }
    if (found) return Status::ok();
  }
}

BufferRef ref(BufferKind kind, uint64_t offset, uint64_t bytes) { return BufferRef{kind, offset, bytes}; }

/// Rank r's test bytes (`bytes` a multiple of 8): 64-bit words that depend on the rank and the position.
std::vector<uint8_t> patternBytes(int r, size_t bytes) {
  std::vector<uint8_t> data(bytes);
  for (size_t w = 0; w < bytes / 8; ++w) {
    const uint64_t value = (w + 1) * 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(r + 1) << 52);
    std::memcpy(data.data() + 8 * w, &value, 8);
  }
  return data;
}

// ------------------------------------------------------------------------------------------ the contract

TEST(TcpTransport, RequestsMatchPerChannelInOrderAndNeverDeadlock) {
  ForkShared<UniqueId> shared;
  const ForkResult result = runForked(
      2,
      [&](int rank) {
        auto made = makeEndpoint(shared, rank, 2, kTimeout);
        BRAID_CHILD_CHECK_OK(made);
        DataTransport& t = *made->transport;
        BRAID_CHILD_CHECK(std::string(t.name()) == "tcp");
        BRAID_CHILD_CHECK(t.localRanks() == std::vector<int>{rank});
        const int peer = 1 - rank;
        // Buffers: input holds 64 MiB to send, output as much to receive (more than the socket buffers hold:
        // tcp_rmem allows 32 MiB at most by default).
        const uint64_t big = 64u << 20;
        std::vector<uint8_t> input = patternBytes(rank, big + 4096), output(big + 4096), scratch(4096);
        const std::vector<uint8_t> from_peer = patternBytes(peer, big + 4096);
        RankMemory memory{input.data(), input.size(), output.data(), output.size(), scratch.data(), scratch.size()};
        BRAID_CHILD_CHECK(t.bind(1 - rank, memory, {}).code() == StatusCode::kInvalidArgument);  // not local
        BRAID_CHILD_CHECK_OK(t.bind(rank, memory, ReduceSpec{DataType::kUint8, ReduceOp::kSum}));
        std::vector<RequestId> seen;

        // Out of range and bad peers are refused at post time, naming the buffer.
        auto past = t.postSend(SendRequest{rank, peer, 0, ref(BufferKind::kInput, input.size() - 1, 2)});
        BRAID_CHILD_CHECK(past.status().code() == StatusCode::kInvalidArgument);
        BRAID_CHILD_CHECK(past.status().message().find("input") != std::string::npos);
        BRAID_CHILD_CHECK(t.postRecv(RecvRequest{rank, rank, 0, ref(BufferKind::kOutput, 0, 1)}).status().code() ==
                          StatusCode::kInvalidArgument);

        // Both ranks send 64 MiB to each other before either posts its receive: sends complete once written
        // (the peer drains into its unexpected buffer), so nothing deadlocks.
        auto send_big = t.postSend(SendRequest{rank, peer, 3, ref(BufferKind::kInput, 0, big)});
        BRAID_CHILD_CHECK_OK(send_big);
        BRAID_CHILD_CHECK_OK(waitFor(t, *send_big, &seen));
        // Small messages on two channels, sent 1a 2a 1b 2b; received channel 2 first, then channel 1.
        const uint64_t base = big;
        for (int k = 0; k < 4; ++k) {
          const int channel = 1 + (k % 2);
          auto s = t.postSend(SendRequest{rank, peer, channel, ref(BufferKind::kInput, base + 16 * k, 16)});
          BRAID_CHILD_CHECK_OK(s);
        }
        auto zero = t.postSend(SendRequest{rank, peer, 7, ref(BufferKind::kInput, 0, 0)});
        BRAID_CHILD_CHECK_OK(zero);
        std::vector<RequestId> recvs;
        for (const int k : {1, 3, 0, 2}) {  // channel 2's messages (k = 1, 3), then channel 1's (k = 0, 2)
          const int channel = 1 + (k % 2);
          auto r = t.postRecv(RecvRequest{rank, peer, channel, ref(BufferKind::kOutput, base + 16 * k, 16)});
          BRAID_CHILD_CHECK_OK(r);
          recvs.push_back(*r);
        }
        auto r_zero = t.postRecv(RecvRequest{rank, peer, 7, ref(BufferKind::kOutput, 0, 0)});
        BRAID_CHILD_CHECK_OK(r_zero);
        auto r_big = t.postRecv(RecvRequest{rank, peer, 3, ref(BufferKind::kOutput, 0, big)});
        BRAID_CHILD_CHECK_OK(r_big);
        for (RequestId id : recvs) BRAID_CHILD_CHECK_OK(waitFor(t, id, &seen));
        BRAID_CHILD_CHECK_OK(waitFor(t, *r_zero, &seen));
        BRAID_CHILD_CHECK_OK(waitFor(t, *r_big, &seen));
        // What the peer sent: its input pattern.
        BRAID_CHILD_CHECK(std::memcmp(output.data(), from_peer.data(), big + 64) == 0);
        // Receives posted before the sends: read straight into dst (a large and a small one).
        auto early = t.postRecv(RecvRequest{rank, peer, 4, ref(BufferKind::kOutput, 0, 1 << 20)});
        BRAID_CHILD_CHECK_OK(early);
        BRAID_CHILD_CHECK_OK(made->bootstrap->barrier());
        auto late_send = t.postSend(SendRequest{rank, peer, 4, ref(BufferKind::kInput, 4096, 1 << 20)});
        BRAID_CHILD_CHECK_OK(late_send);
        BRAID_CHILD_CHECK_OK(waitFor(t, *early, &seen));
        BRAID_CHILD_CHECK_OK(waitFor(t, *late_send, &seen));
        BRAID_CHILD_CHECK(std::memcmp(output.data(), from_peer.data() + 4096, 1 << 20) == 0);
        // Local requests run at post time and complete at the next poll: copy, then a uint8 sum.
        scratch[0] = 5;
        scratch[1] = 250;
        scratch[2] = 9;
        scratch[3] = 10;
        auto copy = t.postLocal(LocalRequest{rank, ref(BufferKind::kScratch, 0, 2), ref(BufferKind::kScratch, 8, 2)});
        BRAID_CHILD_CHECK_OK(copy);
        BRAID_CHILD_CHECK(scratch[8] == 5 && scratch[9] == 250);
        auto sum = t.postLocal(
            LocalRequest{rank, ref(BufferKind::kScratch, 2, 2), ref(BufferKind::kScratch, 8, 2), /*reduce=*/true});
        BRAID_CHILD_CHECK_OK(sum);
        BRAID_CHILD_CHECK(scratch[8] == 14 && scratch[9] == 4);  // 250 + 10 wraps to 4
        BRAID_CHILD_CHECK_OK(waitFor(t, *copy, &seen));
        BRAID_CHILD_CHECK_OK(waitFor(t, *sum, &seen));
        // A size mismatch between a send and its receive is kInvalidArgument naming both sizes.
        BRAID_CHILD_CHECK_OK(t.postSend(SendRequest{rank, peer, 5, ref(BufferKind::kInput, 0, 12)}));
        auto mismatched = t.postRecv(RecvRequest{rank, peer, 5, ref(BufferKind::kOutput, 0, 8)});
        Status mismatch = mismatched.status();
        std::vector<Completion> done;
        for (int i = 0; i < 100 && mismatch.isOk(); ++i) mismatch = t.poll(&done, true);
        std::fprintf(stderr, "%s\n", mismatch.toString().c_str());
        BRAID_CHILD_CHECK(mismatch.code() == StatusCode::kInvalidArgument);
        BRAID_CHILD_CHECK(mismatch.message().find("12 bytes") != std::string::npos);
        BRAID_CHILD_CHECK(mismatch.message().find("8 bytes") != std::string::npos);
        return 0;
      },
      60);
  EXPECT_TRUE(result.allOk()) << result.summary();
}

TEST(TcpTransport, TimeoutNamesWhatIsAwaited) {
  ForkShared<UniqueId> shared;
  const ForkResult result = runForked(
      2,
      [&](int rank) {
        auto made = makeEndpoint(shared, rank, 2, 0.5);
        BRAID_CHILD_CHECK_OK(made);
        DataTransport& t = *made->transport;
        std::vector<uint8_t> buffer(64);
        BRAID_CHILD_CHECK_OK(t.bind(rank, RankMemory{buffer.data(), 64, buffer.data(), 64, nullptr, 0}, {}));
        if (rank == 1) {
          sleep(2);  // posts nothing
          return 0;
        }
        BRAID_CHILD_CHECK_OK(t.postRecv(RecvRequest{0, 1, 6, ref(BufferKind::kOutput, 0, 8)}));
        std::vector<Completion> done;
        double waited = 0;
        const Status timed_out = testing::timedPoll(t, &done, &waited);
        std::fprintf(stderr, "%s (%.2f s)\n", timed_out.toString().c_str(), waited);
        BRAID_CHILD_CHECK(timed_out.code() == StatusCode::kTimeout);
        BRAID_CHILD_CHECK(timed_out.message().find("rank 0: tcp") == 0);
        BRAID_CHILD_CHECK(timed_out.message().find("receive from rank 1 on channel 6") != std::string::npos);
        BRAID_CHILD_CHECK(waited >= 0.45 && waited < 1.5);
        return 0;
      },
      30);
  EXPECT_TRUE(result.allOk()) << result.summary();
}

TEST(TcpTransport, AbortAndCleanClose) {
  ForkShared<UniqueId> shared;
  const ForkResult result = runForked(
      3,
      [&](int rank) {
        auto made = makeEndpoint(shared, rank, 3, kTimeout);
        BRAID_CHILD_CHECK_OK(made);
        DataTransport& t = *made->transport;
        std::vector<uint8_t> buffer(64);
        BRAID_CHILD_CHECK_OK(t.bind(rank, RankMemory{buffer.data(), 64, buffer.data(), 64, nullptr, 0}, {}));
        BRAID_CHILD_CHECK_OK(made->bootstrap->barrier());
        if (rank == 2) {
          made->transport.reset();  // a normal close: no error for the others until they need rank 2
          usleep(500 * 1000);
          return 0;
        }
        if (rank == 1) {
          usleep(200 * 1000);  // rank 0 is blocked in poll by then
          t.abort(Status(StatusCode::kInternalError, "disk on fire"));
          BRAID_CHILD_CHECK(t.postSend(SendRequest{1, 0, 0, ref(BufferKind::kInput, 0, 1)}).status().message() ==
                            "disk on fire");
          usleep(300 * 1000);
          return 0;
        }
        auto r = t.postRecv(RecvRequest{0, 1, 0, ref(BufferKind::kOutput, 0, 8)});
        BRAID_CHILD_CHECK_OK(r);
        std::vector<Completion> done;
        double waited = 0;
        const Status aborted = testing::timedPoll(t, &done, &waited);
        std::fprintf(stderr, "%s (%.2f s)\n", aborted.toString().c_str(), waited);
        BRAID_CHILD_CHECK(aborted.code() == StatusCode::kRemoteError);
        BRAID_CHILD_CHECK(aborted.message().find("rank 1 (host") != std::string::npos);
        BRAID_CHILD_CHECK(aborted.message().find("disk on fire") != std::string::npos);
        BRAID_CHILD_CHECK(waited < 2);
        // Sticky: later calls fail the same way.
        BRAID_CHILD_CHECK(t.postRecv(RecvRequest{0, 2, 0, ref(BufferKind::kOutput, 0, 8)}).status().code() ==
                          StatusCode::kRemoteError);
        return 0;
      },
      30);
  EXPECT_TRUE(result.allOk()) << result.summary();
}

TEST(TcpTransport, ReceiveFromAClosedPeerFails) {
  ForkShared<UniqueId> shared;
  const ForkResult result = runForked(
      2,
      [&](int rank) {
        auto made = makeEndpoint(shared, rank, 2, kTimeout);
        BRAID_CHILD_CHECK_OK(made);
        DataTransport& t = *made->transport;
        std::vector<uint8_t> buffer(64);
        BRAID_CHILD_CHECK_OK(t.bind(rank, RankMemory{buffer.data(), 64, buffer.data(), 64, nullptr, 0}, {}));
        if (rank == 1) {
          BRAID_CHILD_CHECK_OK(t.postSend(SendRequest{1, 0, 0, ref(BufferKind::kInput, 0, 8)}));
          std::vector<Completion> done;
          BRAID_CHILD_CHECK_OK(t.poll(&done, true));
          made->transport.reset();
          usleep(300 * 1000);
          return 0;
        }
        // The message sent before the close is still received; the next receive fails.
        std::vector<RequestId> seen;
        auto first = t.postRecv(RecvRequest{0, 1, 0, ref(BufferKind::kOutput, 0, 8)});
        BRAID_CHILD_CHECK_OK(first);
        BRAID_CHILD_CHECK_OK(waitFor(t, *first, &seen));
        usleep(100 * 1000);
        auto second = t.postRecv(RecvRequest{0, 1, 0, ref(BufferKind::kOutput, 0, 8)});
        Status status = second.status();
        std::vector<Completion> done;
        if (status.isOk()) status = t.poll(&done, true);
        std::fprintf(stderr, "%s\n", status.toString().c_str());
        BRAID_CHILD_CHECK(status.code() == StatusCode::kRemoteError);
        BRAID_CHILD_CHECK(status.message().find("closed its endpoint") != std::string::npos);
        return 0;
      },
      30);
  EXPECT_TRUE(result.allOk()) << result.summary();
}

// --------------------------------------------------------------------------------- plans on real data

/// Rank r's input element i: depends on rank and position; sums of up to 4 ranks stay exact in float.
float inputValue(int r, uint64_t i) {
  const uint32_t h = static_cast<uint32_t>(i * 2654435761u) >> 20;  // 0..4095
  return static_cast<float>(h + 8192u * static_cast<uint32_t>(r));
}

struct Case {
  ClassicAlgo algo;
  CollectiveKind kind;
  bool in_place;
};

/// Runs one collective of `count` elements (per rank for all-gather, per peer for all-to-all) through the
/// executor and checks every output element against the naive reference. "" or what went wrong.
std::string runCase(DataTransport& t, int rank, int n, const Case& c, uint64_t count) {
  ClassicRequest request;
  request.algo = c.algo;
  request.spec.kind = c.kind;
  request.spec.num_ranks = n;
  request.spec.chunk_factor = 0;
  request.spec.in_place = c.in_place;
  Result<Algorithm> algorithm = buildClassic(request);
  if (!algorithm.isOk()) return "buildClassic: " + algorithm.status().toString();
  const uint64_t elements_in = c.kind == CollectiveKind::kAllReduce   ? count
                               : c.kind == CollectiveKind::kAllGather ? count
                                                                      : count * n;
  const uint64_t elements_out = c.kind == CollectiveKind::kAllReduce ? count : count * n;
  LowerOptions lower;
  lower.size_bytes = std::max(elements_in, elements_out) * sizeof(float);
  lower.in_place = c.in_place;
  lower.element_bytes = sizeof(float);
  Result<Plan> plan = lowerAlgorithm(*algorithm, lower);
  if (!plan.isOk()) return "lowerAlgorithm: " + plan.status().toString();
  const RankPlan& mine = plan->ranks[rank];
  std::vector<float> input(elements_in), output(elements_out, -1.0f);
  std::vector<uint8_t> scratch(mine.scratch_bytes + mine.temp_bytes);
  for (uint64_t i = 0; i < elements_in; ++i) input[i] = inputValue(rank, i);
  RankMemory memory{input.data(),   elements_in * sizeof(float),
                    output.data(),  elements_out * sizeof(float),
                    scratch.data(), scratch.size()};
  if (c.in_place) {  // all-reduce in place: the data starts in the output buffer
    std::copy(input.begin(), input.end(), output.begin());
    memory.input = output.data();
  }
  if (Status s = t.bind(rank, memory, ReduceSpec{DataType::kFloat32, ReduceOp::kSum}); !s.isOk()) {
    return "bind: " + s.toString();
  }
  ExecOptions options;
  options.local_ranks = {rank};
  Result<ExecResult> ran = execute(*plan, t, options);
  if (!ran.isOk()) return "execute: " + ran.status().toString();
  for (uint64_t o = 0; o < elements_out; ++o) {
    float expected = 0;
    if (c.kind == CollectiveKind::kAllReduce) {
      for (int r = 0; r < n; ++r) expected += inputValue(r, o);
    } else if (c.kind == CollectiveKind::kAllGather) {
      expected = inputValue(static_cast<int>(o / count), o % count);
    } else {  // all-to-all: block r of my output is block `rank` of rank r's input
      const uint64_t from = o / count;
      expected = inputValue(static_cast<int>(from), rank * count + o % count);
    }
    if (output[o] != expected) {
      return fmt::format("output[{}] = {}, expected {}", o, output[o], expected);
    }
  }
  return "";
}

void runPlans(int n) {
  const std::vector<Case> cases = {
      {ClassicAlgo::kRing, CollectiveKind::kAllReduce, false},
      {ClassicAlgo::kRing, CollectiveKind::kAllReduce, true},
      {ClassicAlgo::kRecursiveDoubling, CollectiveKind::kAllReduce, false},
      {ClassicAlgo::kRing, CollectiveKind::kAllGather, false},
      {ClassicAlgo::kRecursiveDoubling, CollectiveKind::kAllGather, false},
      {ClassicAlgo::kDirect, CollectiveKind::kAllToAll, false},
      {ClassicAlgo::kPairwise, CollectiveKind::kAllToAll, false},
  };
  // BRAID_TEST_SMALL=1 (the sanitizer builds in CI): the largest count still spans several slices.
  const char* small = std::getenv("BRAID_TEST_SMALL");
  const uint64_t large = small != nullptr && std::string(small) == "1" ? 300007 : 1000003;
  const std::vector<uint64_t> counts = {0, 1, 7, large};
  ForkShared<UniqueId> shared;
  const ForkResult result = runForked(
      n,
      [&](int rank) {
        auto made = makeEndpoint(shared, rank, n, kTimeout);
        BRAID_CHILD_CHECK_OK(made);
        int failures = 0;
        for (const Case& c : cases) {
          for (const uint64_t count : counts) {
            const std::string error = runCase(*made->transport, rank, n, c, count);
            if (error.empty()) continue;
            std::fprintf(stderr, "rank %d: %s %s%s, %llu elements: %s\n", rank, classicAlgoName(c.algo),
                         collectiveName(c.kind), c.in_place ? " in place" : "", static_cast<unsigned long long>(count),
                         error.c_str());
            ++failures;
            if (error.rfind("execute", 0) == 0) return 1;  // the endpoint is unusable after a transport error
          }
        }
        return failures == 0 ? 0 : 1;
      },
      120);
  EXPECT_TRUE(result.allOk()) << result.summary();
}

TEST(TcpTransport, PlansOnTwoRanks) { runPlans(2); }
TEST(TcpTransport, PlansOnThreeRanks) { runPlans(3); }
TEST(TcpTransport, PlansOnFourRanks) { runPlans(4); }

TEST(TcpTransport, PlansOnThreadsOfOneProcess) {
  // One endpoint per thread, as braid_perf -t runs ranks: endpoints share nothing.
  constexpr int n = 3;
  Result<UniqueId> id = createUniqueId("127.0.0.1:0");
  ASSERT_TRUE(id.isOk()) << id.status().toString();
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) {
    threads.emplace_back([&, rank] {
      BootstrapOptions options;
      options.timeout_s = kTimeout;
      Result<std::unique_ptr<Bootstrap>> b = connectBootstrap(*id, rank, n, options);
      if (!b.isOk()) {
        errors[rank] = b.status().toString();
        return;
      }
      TransportOptions transport_options;
      transport_options.timeout_s = kTimeout;
      Result<std::unique_ptr<DataTransport>> t = createTcpTransport(**b, transport_options);
      if (!t.isOk()) {
        errors[rank] = t.status().toString();
        return;
      }
      for (const Case& c : {Case{ClassicAlgo::kRing, CollectiveKind::kAllReduce, false},
                            Case{ClassicAlgo::kDirect, CollectiveKind::kAllToAll, false}}) {
        for (const uint64_t count : {uint64_t{7}, uint64_t{300007}}) {
          const std::string error = runCase(**t, rank, n, c, count);
          if (!error.empty()) errors[rank] += fmt::format("{} {}: {}; ", classicAlgoName(c.algo), count, error);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < n; ++rank) EXPECT_EQ(errors[rank], "") << "rank " << rank;
}

// ------------------------------------------------------------------------------------------ a killed rank

TEST(TcpTransport, KilledRankFailsEveryOtherRank) {
  constexpr int n = 4;
  constexpr int victim = 2;
  constexpr double timeout_s = 20;
  constexpr uint64_t count = 8u << 20;  // 32 MiB of floats per rank
  ForkShared<UniqueId> shared;
  const ForkResult result = runForked(
      n,
      [&](int rank) {
        auto made = makeEndpoint(shared, rank, n, timeout_s);
        BRAID_CHILD_CHECK_OK(made);
        ClassicRequest request;
        request.algo = ClassicAlgo::kRing;
        request.spec.kind = CollectiveKind::kAllReduce;
        request.spec.num_ranks = n;
        request.spec.chunk_factor = 0;
        auto algorithm = buildClassic(request);
        BRAID_CHILD_CHECK_OK(algorithm);
        LowerOptions lower;
        lower.size_bytes = count * sizeof(float);
        lower.element_bytes = sizeof(float);
        auto plan = lowerAlgorithm(*algorithm, lower);
        BRAID_CHILD_CHECK_OK(plan);
        const RankPlan& mine = plan->ranks[rank];
        std::vector<float> input(count, 1.0f), output(count);
        std::vector<uint8_t> scratch(mine.scratch_bytes + mine.temp_bytes);
        BRAID_CHILD_CHECK_OK(made->transport->bind(rank,
                                                   RankMemory{input.data(), count * sizeof(float), output.data(),
                                                              count * sizeof(float), scratch.data(), scratch.size()},
                                                   ReduceSpec{DataType::kFloat32, ReduceOp::kSum}));
        // The victim dies at about half of its sends.
        long sends = 0;
        for (const PlanThreadblock& tb : mine.threadblocks)
          for (const PlanStep& step : tb.steps)
            if (opSends(step.type))
              sends += static_cast<long>((step.bytes + plan->slice_bytes - 1) / plan->slice_bytes);
        testing::KillingTransport dying(*made->transport, rank == victim ? static_cast<int>(sends / 2) : -1);
        ExecOptions options;
        options.local_ranks = {rank};
        const auto start = std::chrono::steady_clock::now();
        Result<ExecResult> ran = execute(*plan, dying, options);
        const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        BRAID_CHILD_CHECK(!ran.isOk());
        made->transport->abort(ran.status());  // as the communicator does: tell the others
        std::fprintf(stderr, "rank %d after %.2f s (victim's sends: %ld): %s\n", rank, took, sends / 2,
                     ran.status().toString().c_str());
        BRAID_CHILD_CHECK(ran.status().code() == StatusCode::kRemoteError);
        BRAID_CHILD_CHECK(took < timeout_s / 2);  // noticed, not timed out
        return 0;
      },
      60);
  ASSERT_EQ(result.ranks.size(), static_cast<size_t>(n));
  EXPECT_EQ(result.ranks[victim].signal, SIGKILL) << result.summary();
  for (int r = 0; r < n; ++r) {
    if (r != victim) EXPECT_TRUE(result.ranks[r].ok()) << "rank " << r << "\n" << result.summary();
  }
}

}  // namespace
}  // namespace braid
