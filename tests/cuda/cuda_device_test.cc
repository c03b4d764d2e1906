// runtime/cuda on a GPU: the element-wise kernels against runtime/reduce (every datatype and operator, counts 0, 1,
// primes and a large one, pointers off 16-byte boundaries), the device-resident executor with ranks as threads of
// one process and as processes (CUDA IPC) and with ranks on two (named) hosts through proxies, against the
// collectives' reference (tests/cuda/device_emulator.h), its timeout report, and the CUDA transport through
// executeOnStream on a stream. Every body runs in a forked child (CUDA must not start in the test process, which
// forks); on a machine without a usable GPU every test skips, naming CUDA's reason (cudaGetDeviceCount's error), and in
// a build without CUDA it skips saying so.
#include <gtest/gtest.h>

#ifdef BRAID_HAVE_CUDA

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "braid/bootstrap.h"
#include "braid/classic.h"
#include "braid/cuda.h"
#include "cuda/device_emulator.h"
#include "cuda/kernels.h"
#include "support/cuda_probe.h"
#include "transport/multirank.h"

namespace braid {
namespace {

using testing::ForkResult;
using testing::runForked;

/// Equal bytes, or both NaN where `type` is a float type (the device returns its canonical NaN).
bool sameElements(const uint8_t* got, const uint8_t* want, uint64_t count, DataType type) {
  const size_t size = dataTypeSize(type);
  for (uint64_t i = 0; i < count; ++i) {
    if (std::memcmp(got + i * size, want + i * size, size) == 0) continue;
    uint16_t g16 = 0, w16 = 0;
    float g = 0, w = 0;
    switch (type) {
      case DataType::kFloat16:
        std::memcpy(&g16, got + i * size, 2);
        std::memcpy(&w16, want + i * size, 2);
        g = halfToFloat(g16), w = halfToFloat(w16);
        break;
      case DataType::kBfloat16:
        std::memcpy(&g16, got + i * size, 2);
        std::memcpy(&w16, want + i * size, 2);
        g = bfloat16ToFloat(g16), w = bfloat16ToFloat(w16);
        break;
      case DataType::kFloat32:
        std::memcpy(&g, got + i * size, 4);
        std::memcpy(&w, want + i * size, 4);
        break;
      case DataType::kFloat64: {
        double gd, wd;
        std::memcpy(&gd, got + i * size, 8);
        std::memcpy(&wd, want + i * size, 8);
        if (std::isnan(gd) && std::isnan(wd)) continue;
        return false;
      }
      default: return false;
    }
    if (!(std::isnan(g) && std::isnan(w))) return false;
  }
  return true;
}

/// Position-dependent bytes of every pattern (integers wrap, floats of all kinds including inf and NaN).
std::vector<uint8_t> patternBytes(uint64_t bytes, uint64_t seed) {
  std::vector<uint8_t> data(bytes);
  for (uint64_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>((i * 2654435761u + seed * 97) >> 7);
  return data;
}

TEST(CudaKernels, ReduceCopyAndDivideEqualTheCpuReference) {
  BRAID_SKIP_WITHOUT_GPU();
  const ForkResult result = runForked(
      1,
      [](int) -> int {
        BRAID_CHILD_CHECK(cudaSetDevice(0) == cudaSuccess);
        cudaStream_t stream = nullptr;
        BRAID_CHILD_CHECK(cudaStreamCreate(&stream) == cudaSuccess);
        const uint64_t kMax = (1u << 20) + 7;
        void *out_base = nullptr, *a_base = nullptr, *b_base = nullptr;
        BRAID_CHILD_CHECK(cudaMalloc(&out_base, kMax * 8 + 64) == cudaSuccess);
        BRAID_CHILD_CHECK(cudaMalloc(&a_base, kMax * 8 + 64) == cudaSuccess);
        BRAID_CHILD_CHECK(cudaMalloc(&b_base, kMax * 8 + 64) == cudaSuccess);
        uint8_t* d_out = static_cast<uint8_t*>(out_base);
        uint8_t* d_a = static_cast<uint8_t*>(a_base);
        uint8_t* d_b = static_cast<uint8_t*>(b_base);
        for (int t = 0; t < kNumDataTypes; ++t) {
          const DataType type = static_cast<DataType>(t);
          const size_t size = dataTypeSize(type);
          for (int o = 0; o < kNumReduceOps; ++o) {
            const ReduceOp op = static_cast<ReduceOp>(o);
            for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{17}, uint64_t{4099}, kMax}) {
              for (uint64_t offset : {uint64_t{0}, uint64_t{1}, uint64_t{3}}) {
                const uint64_t bytes = count * size;
                const std::vector<uint8_t> a = patternBytes(bytes, 1), b = patternBytes(bytes, 2);
                std::vector<uint8_t> want(bytes), got(bytes);
                reduce2(want.data(), a.data(), b.data(), count, type, op);
                uint8_t* out = d_out + offset * size;
                uint8_t* pa = d_a + offset * size;
                uint8_t* pb = d_b + (offset == 1 ? 2 : offset) * size;  // one case not co-aligned
                BRAID_CHILD_CHECK(cudaMemcpy(pa, a.data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess);
                BRAID_CHILD_CHECK(cudaMemcpy(pb, b.data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess);
                BRAID_CHILD_CHECK_OK(cuda::launchReduce(out, pa, pb, count, type, op, stream));
                BRAID_CHILD_CHECK(cudaStreamSynchronize(stream) == cudaSuccess);
                BRAID_CHILD_CHECK(cudaMemcpy(got.data(), out, bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
                if (!sameElements(got.data(), want.data(), count, type)) {
                  std::fprintf(stderr, "%s %s count %llu offset %llu differs\n", dataTypeName(type), reduceOpName(op),
                               static_cast<unsigned long long>(count), static_cast<unsigned long long>(offset));
                  return 1;
                }
              }
            }
          }
          // The average's division.
          const uint64_t count = 4099;
          std::vector<uint8_t> data = patternBytes(count * size, 3), want = data, got(count * size);
          finishAverage(want.data(), count, type, 7);
          BRAID_CHILD_CHECK(cudaMemcpy(d_out, data.data(), data.size(), cudaMemcpyHostToDevice) == cudaSuccess);
          BRAID_CHILD_CHECK_OK(averageOnStream(d_out, count, type, 7, stream));
          BRAID_CHILD_CHECK(cudaStreamSynchronize(stream) == cudaSuccess);
          BRAID_CHILD_CHECK(cudaMemcpy(got.data(), d_out, got.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
          BRAID_CHILD_CHECK(sameElements(got.data(), want.data(), count, type));
        }
        // Copies at every byte offset.
        for (uint64_t bytes : {uint64_t{1}, uint64_t{4099}, uint64_t{1} << 22}) {
          const std::vector<uint8_t> src = patternBytes(bytes, 4);
          for (uint64_t offset = 0; offset < 16; ++offset) {
            std::vector<uint8_t> got(bytes);
            BRAID_CHILD_CHECK(cudaMemcpy(d_a + 3, src.data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess);
            BRAID_CHILD_CHECK_OK(cuda::launchCopy(d_out + offset, d_a + 3, bytes, stream));
            BRAID_CHILD_CHECK(cudaStreamSynchronize(stream) == cudaSuccess);
            BRAID_CHILD_CHECK(cudaMemcpy(got.data(), d_out + offset, bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
            BRAID_CHILD_CHECK(got == src);
          }
        }
        return 0;
      },
      /*timeout_s=*/300);
  EXPECT_TRUE(result.allOk()) << result.summary();
}

/// One rank of the device-resident executor on its own bootstrap: prepares and launches `plans` (twice each) on
/// device buffers, checks every result against the reference. 0 on success.
int runDeviceRank(Bootstrap& bootstrap, const std::vector<Plan>& plans, const testing::EmulationOptions& options,
                  DataTransport* proxy_transport = nullptr) {
  const int r = bootstrap.rank();
  DeviceExecutorOptions executor_options;
  executor_options.timeout_s = 30;
  executor_options.proxy_transport = proxy_transport;
  auto executor = createDeviceExecutor(bootstrap, executor_options);
  BRAID_CHILD_CHECK_OK(executor);
  cudaStream_t stream = nullptr;
  BRAID_CHILD_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  for (const Plan& plan : plans) {
    Result<int> handle = (*executor)->prepare(plan);
    BRAID_CHILD_CHECK_OK(handle);
    const RankPlan& rp = plan.ranks[r];
    // The inputs of every rank, as placeInput makes them, for the reference.
    for (int launch = 0; launch < 2; ++launch) {
      std::vector<uint8_t> input(rp.input_bytes + 16, 0xA5), output(rp.output_bytes + 16, 0xA5);
      std::vector<std::vector<uint8_t>> inputs(static_cast<size_t>(plan.num_ranks));
      for (int q = 0; q < plan.num_ranks; ++q) {
        std::vector<uint8_t> scratch_in(plan.ranks[q].input_bytes + 16), scratch_out(plan.ranks[q].output_bytes + 16);
        inputs[q] = testing::placeInput(plan, q, options, launch, scratch_in.data(), scratch_out.data());
      }
      testing::placeInput(plan, r, options, launch, input.data(), output.data());
      void *d_in = nullptr, *d_out = nullptr;
      BRAID_CHILD_CHECK(cudaMalloc(&d_in, input.size()) == cudaSuccess);
      BRAID_CHILD_CHECK(cudaMalloc(&d_out, output.size()) == cudaSuccess);
      BRAID_CHILD_CHECK(cudaMemcpy(d_in, input.data(), input.size(), cudaMemcpyHostToDevice) == cudaSuccess);
      BRAID_CHILD_CHECK(cudaMemcpy(d_out, output.data(), output.size(), cudaMemcpyHostToDevice) == cudaSuccess);
      RankMemory memory{d_in, input.size(), d_out, output.size(), nullptr, 0};
      BRAID_CHILD_CHECK_OK((*executor)->launch(*handle, memory, ReduceSpec{options.type, options.op}, stream));
      BRAID_CHILD_CHECK(cudaStreamSynchronize(stream) == cudaSuccess);
      BRAID_CHILD_CHECK_OK((*executor)->asyncError());
      BRAID_CHILD_CHECK(cudaMemcpy(input.data(), d_in, input.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
      BRAID_CHILD_CHECK(cudaMemcpy(output.data(), d_out, output.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
      cudaFree(d_in);
      cudaFree(d_out);
      std::vector<uint8_t> want;
      const uint8_t* got = nullptr;
      if (testing::expectedResult(plan, inputs, r, options, &want, &got, input.data(), output.data()) &&
          std::memcmp(got, want.data(), want.size()) != 0) {
        std::fprintf(stderr, "rank %d: plan '%s' launch %d: wrong result\n", r, plan.algorithm.c_str(), launch);
        return 1;
      }
      BRAID_CHILD_CHECK_OK(bootstrap.barrier());
    }
  }
  return 0;
}

/// Ring and recursive-doubling all-reduce, ring all-gather, pairwise all-to-all and ring reduce-scatter on n ranks,
/// Simple and LL, at 7 and 1000003 fp32 elements per rank piece.
std::vector<Plan> devicePlans(int n) {
  std::vector<Plan> plans;
  for (auto [algo, kind] : {std::pair{ClassicAlgo::kRing, CollectiveKind::kAllReduce},
                            std::pair{ClassicAlgo::kRecursiveDoubling, CollectiveKind::kAllReduce},
                            std::pair{ClassicAlgo::kRing, CollectiveKind::kAllGather},
                            std::pair{ClassicAlgo::kPairwise, CollectiveKind::kAllToAll},
                            std::pair{ClassicAlgo::kRing, CollectiveKind::kReduceScatter}}) {
    ClassicRequest request;
    request.algo = algo;
    request.spec.kind = kind;
    request.spec.num_ranks = n;
    const Algorithm algorithm = buildClassic(request).value();
    const uint64_t multiplier = static_cast<uint64_t>(algorithm.spec(false).value().sizeMultiplier());
    for (Protocol protocol : {Protocol::kSimple, Protocol::kLL}) {
      for (uint64_t count : {uint64_t{7}, uint64_t{1000003}}) {
        LowerOptions options = callLowerOptions(count * 4 * multiplier, false, 1, 4);
        options.protocol = protocol;
        plans.push_back(lowerAlgorithm(algorithm, options).value());
      }
    }
  }
  return plans;
}

TEST(CudaDeviceExecutor, RanksAsThreadsOfOneProcess) {
  BRAID_SKIP_WITHOUT_GPU();
  const int n = 4;
  const ForkResult result = runForked(
      1,
      [&](int) -> int {
        Result<UniqueId> id = createUniqueId("127.0.0.1:0");
        BRAID_CHILD_CHECK_OK(id);
        const std::vector<Plan> plans = devicePlans(n);
        std::vector<int> failures(n, 0);
        std::vector<std::thread> threads;
        for (int r = 0; r < n; ++r) {
          threads.emplace_back([&, r] {
            auto bootstrap = connectBootstrap(*id, r, n);
            failures[r] = bootstrap.isOk() ? runDeviceRank(**bootstrap, plans, testing::EmulationOptions{}) : 1;
          });
        }
        for (std::thread& t : threads) t.join();
        for (int f : failures) BRAID_CHILD_CHECK(f == 0);
        return 0;
      },
      /*timeout_s=*/300);
  EXPECT_TRUE(result.allOk()) << result.summary();
}

/// A bootstrap whose ranks claim the host names `hosts` (the rest is `inner`'s): ranks of one process that the
/// executor treats as ranks of several hosts.
class NamedHostsBootstrap : public Bootstrap {
 public:
  NamedHostsBootstrap(std::unique_ptr<Bootstrap> inner, std::vector<std::string> hosts)
      : inner_(std::move(inner)), hosts_(std::move(hosts)) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const std::vector<std::string>& hostNames() const override { return hosts_; }
  const std::vector<int64_t>& processIds() const override { return inner_->processIds(); }
  Status allGather(void* data, size_t bytes) override { return inner_->allGather(data, bytes); }
  Status barrier() override { return inner_->barrier(); }
  Status send(int peer, int tag, const void* data, size_t bytes) override {
    return inner_->send(peer, tag, data, bytes);
  }
  Status recv(int peer, int tag, void* data, size_t bytes) override { return inner_->recv(peer, tag, data, bytes); }
  Status checkPeers() override { return inner_->checkPeers(); }
  void abort(const std::string& why) override { inner_->abort(why); }

 private:
  std::unique_ptr<Bootstrap> inner_;
  std::vector<std::string> hosts_;
};

// 4 ranks as threads of one process, named as 2 hosts of 2: connections between the hosts are proxied (host-mapped
// proxy areas, the executor's proxy thread over the threads transport), the others through the regions.
TEST(CudaDeviceExecutor, RanksOnTwoHostsThroughProxies) {
  BRAID_SKIP_WITHOUT_GPU();
  const int n = 4;
  const ForkResult result = runForked(
      1,
      [&](int) -> int {
        Result<UniqueId> id = createUniqueId("127.0.0.1:0");
        BRAID_CHILD_CHECK_OK(id);
        const std::vector<Plan> plans = devicePlans(n);
        TransportOptions transport_options;
        transport_options.timeout_s = 30;
        std::vector<std::unique_ptr<DataTransport>> proxies = createThreadsWorld(n, transport_options);
        std::vector<int> failures(n, 0);
        std::vector<std::thread> threads;
        for (int r = 0; r < n; ++r) {
          threads.emplace_back([&, r] {
            auto bootstrap = connectBootstrap(*id, r, n);
            if (!bootstrap.isOk()) {
              failures[r] = 1;
              return;
            }
            NamedHostsBootstrap named(std::move(bootstrap).value(), {"host-a", "host-a", "host-b", "host-b"});
            failures[r] = runDeviceRank(named, plans, testing::EmulationOptions{}, proxies[r].get());
          });
        }
        for (std::thread& t : threads) t.join();
        for (int f : failures) BRAID_CHILD_CHECK(f == 0);
        return 0;
      },
      /*timeout_s=*/300);
  EXPECT_TRUE(result.allOk()) << result.summary();
}

// One rank of a CUDA-graph run: the plan's launch captured once, the graph replayed `replays` times with new inputs
// copied into the same buffers, then one eager launch; every result against the reference. The kernel numbers its
// launches from the device, so the replays and the eager launch after them must line up with the peers'.
int runCapturedRank(Bootstrap& bootstrap, const Plan& plan, int replays) {
  const int r = bootstrap.rank();
  const testing::EmulationOptions options;
  DeviceExecutorOptions executor_options;
  executor_options.timeout_s = 30;
  auto executor = createDeviceExecutor(bootstrap, executor_options);
  BRAID_CHILD_CHECK_OK(executor);
  cudaStream_t stream = nullptr;
  BRAID_CHILD_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  Result<int> handle = (*executor)->prepare(plan);
  BRAID_CHILD_CHECK_OK(handle);
  const RankPlan& rp = plan.ranks[r];
  std::vector<uint8_t> input(rp.input_bytes + 16), output(rp.output_bytes + 16);
  void *d_in = nullptr, *d_out = nullptr;
  BRAID_CHILD_CHECK(cudaMalloc(&d_in, input.size()) == cudaSuccess);
  BRAID_CHILD_CHECK(cudaMalloc(&d_out, output.size()) == cudaSuccess);
  const RankMemory memory{d_in, input.size(), d_out, output.size(), nullptr, 0};
  const ReduceSpec reduce{options.type, options.op};
  cudaGraphExec_t graph = nullptr;
  for (int launch = 0; launch <= replays; ++launch) {
    std::vector<std::vector<uint8_t>> inputs(static_cast<size_t>(plan.num_ranks));
    for (int q = 0; q < plan.num_ranks; ++q) {
      std::vector<uint8_t> in(plan.ranks[q].input_bytes + 16), out(plan.ranks[q].output_bytes + 16);
      inputs[q] = testing::placeInput(plan, q, options, launch, in.data(), out.data());
    }
    std::fill(input.begin(), input.end(), 0xA5);
    std::fill(output.begin(), output.end(), 0xA5);
    testing::placeInput(plan, r, options, launch, input.data(), output.data());
    BRAID_CHILD_CHECK(cudaMemcpy(d_in, input.data(), input.size(), cudaMemcpyHostToDevice) == cudaSuccess);
    BRAID_CHILD_CHECK(cudaMemcpy(d_out, output.data(), output.size(), cudaMemcpyHostToDevice) == cudaSuccess);
    if (launch == replays) {  // after the replays, an eager launch
      BRAID_CHILD_CHECK_OK((*executor)->launch(*handle, memory, reduce, stream));
    } else {
      if (graph == nullptr) {
        cudaGraph_t captured = nullptr;
        BRAID_CHILD_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
        const Status launched = (*executor)->launch(*handle, memory, reduce, stream);
        BRAID_CHILD_CHECK(cudaStreamEndCapture(stream, &captured) == cudaSuccess);
        BRAID_CHILD_CHECK_OK(launched);
        BRAID_CHILD_CHECK(cudaGraphInstantiate(&graph, captured, 0) == cudaSuccess);
        cudaGraphDestroy(captured);
      }
      BRAID_CHILD_CHECK(cudaGraphLaunch(graph, stream) == cudaSuccess);
    }
    BRAID_CHILD_CHECK(cudaStreamSynchronize(stream) == cudaSuccess);
    BRAID_CHILD_CHECK_OK((*executor)->asyncError());
    BRAID_CHILD_CHECK(cudaMemcpy(input.data(), d_in, input.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
    BRAID_CHILD_CHECK(cudaMemcpy(output.data(), d_out, output.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
    std::vector<uint8_t> want;
    const uint8_t* got = nullptr;
    if (testing::expectedResult(plan, inputs, r, options, &want, &got, input.data(), output.data()) &&
        std::memcmp(got, want.data(), want.size()) != 0) {
      std::fprintf(stderr, "rank %d: plan '%s' launch %d (%s): wrong result\n", r, plan.algorithm.c_str(), launch,
                   launch == replays ? "eager" : "graph replay");
      return 1;
    }
    BRAID_CHILD_CHECK_OK(bootstrap.barrier());
  }
  if (graph != nullptr) cudaGraphExecDestroy(graph);
  cudaFree(d_in);
  cudaFree(d_out);
  cudaStreamDestroy(stream);
  return 0;
}

// A launch captured into a CUDA graph and replayed three times, then an eager one, on 2 ranks as threads of one
// process (ring all-reduce, Simple and LL): the results of every replay and of the eager launch are right.
TEST(CudaDeviceExecutor, CapturedLaunchesReplayInOrder) {
  BRAID_SKIP_WITHOUT_GPU();
  const int n = 2;
  const ForkResult result = runForked(
      1,
      [&](int) -> int {
        ClassicRequest request;
        request.algo = ClassicAlgo::kRing;
        request.spec.kind = CollectiveKind::kAllReduce;
        request.spec.num_ranks = n;
        const Algorithm ring = buildClassic(request).value();
        for (Protocol protocol : {Protocol::kSimple, Protocol::kLL}) {
          LowerOptions lower = callLowerOptions(4 * 4099 * n, false, 1, 4);
          lower.protocol = protocol;
          const Plan plan = lowerAlgorithm(ring, lower).value();
          Result<UniqueId> id = createUniqueId("127.0.0.1:0");
          BRAID_CHILD_CHECK_OK(id);
          std::vector<int> failures(n, 0);
          std::vector<std::thread> threads;
          for (int r = 0; r < n; ++r) {
            threads.emplace_back([&, r] {
              auto bootstrap = connectBootstrap(*id, r, n);
              failures[r] = bootstrap.isOk() ? runCapturedRank(**bootstrap, plan, 3) : 1;
            });
          }
          for (std::thread& t : threads) t.join();
          for (int f : failures) BRAID_CHILD_CHECK(f == 0);
        }
        return 0;
      },
      /*timeout_s=*/120);
  EXPECT_TRUE(result.allOk()) << result.summary();
}

TEST(CudaDeviceExecutor, RanksAsProcessesThroughCudaIpc) {
  BRAID_SKIP_WITHOUT_GPU();
  const int n = 3;
  testing::ForkShared<UniqueId> id;
  const ForkResult result = runForked(
      n,
      [&](int r) -> int {
        auto bootstrap = testing::forkedBootstrap(id, r, n, 30);
        BRAID_CHILD_CHECK_OK(bootstrap);
        return runDeviceRank(**bootstrap, devicePlans(n), testing::EmulationOptions{});
      },
      /*timeout_s=*/300);
  EXPECT_TRUE(result.allOk()) << result.summary();
}

// Rank 1 prepares but never launches: rank 0's kernel gives up after the executor's timeout and asyncError names
// rank 0, a threadblock, a step and the peer it waited for.
TEST(CudaDeviceExecutor, AMissingPeerIsATimeoutNamingTheWait) {
  BRAID_SKIP_WITHOUT_GPU();
  const ForkResult result = runForked(
      1,
      [](int) -> int {
        Result<UniqueId> id = createUniqueId("127.0.0.1:0");
        BRAID_CHILD_CHECK_OK(id);
        std::vector<int> failures(2, 0);
        std::vector<std::thread> threads;
        for (int r = 0; r < 2; ++r) {
          threads.emplace_back([&, r] {
            failures[r] = [&]() -> int {
              auto bootstrap = connectBootstrap(*id, r, 2);
              BRAID_CHILD_CHECK_OK(bootstrap);
              DeviceExecutorOptions options;
              options.timeout_s = 0.5;
              auto executor = createDeviceExecutor(**bootstrap, options);
              BRAID_CHILD_CHECK_OK(executor);
              const Plan plan = devicePlans(2)[0];
              Result<int> handle = (*executor)->prepare(plan);
              BRAID_CHILD_CHECK_OK(handle);
              if (r == 0) {
                void *d_in = nullptr, *d_out = nullptr;
                BRAID_CHILD_CHECK(cudaMalloc(&d_in, plan.ranks[0].input_bytes) == cudaSuccess);
                BRAID_CHILD_CHECK(cudaMalloc(&d_out, plan.ranks[0].output_bytes) == cudaSuccess);
                RankMemory memory{d_in, plan.ranks[0].input_bytes, d_out, plan.ranks[0].output_bytes, nullptr, 0};
                BRAID_CHILD_CHECK_OK((*executor)->launch(*handle, memory, ReduceSpec{DataType::kFloat32}, nullptr));
                BRAID_CHILD_CHECK(cudaDeviceSynchronize() == cudaSuccess);
                const Status error = (*executor)->asyncError();
                if (error.code() != StatusCode::kTimeout || error.message().find("rank 0 tb") == std::string::npos ||
                    error.message().find("rank 1") == std::string::npos) {
                  std::fprintf(stderr, "asyncError: %s\n", error.toString().c_str());
                  return 1;
                }
              }
              return 0;
            }();
          });
        }
        for (std::thread& t : threads) t.join();
        return failures[0] + failures[1];
      },
      /*timeout_s=*/120);
  EXPECT_TRUE(result.allOk()) << result.summary();
}

// The host-driven path on a stream: inputs uploaded on the caller's stream, executeOnStream, results downloaded on
// the same stream; 2 rank processes (one GPU: NCCL_HOSTID per process).
TEST(CudaTransport, ExecuteOnStreamOrdersTheCollectiveOnTheCallersStream) {
  BRAID_SKIP_WITHOUT_GPU();
  const int n = 2;
  testing::ForkShared<UniqueId> id;
  const ForkResult result = runForked(
      n,
      [&](int r) -> int {
        auto bootstrap = testing::forkedBootstrap(id, r, n, 30);
        BRAID_CHILD_CHECK_OK(bootstrap);
        if (testing::cudaDevicesForTests() < n) {
          setenv("NCCL_HOSTID", ("braid-test-rank-" + std::to_string(r)).c_str(), 1);
          setenv("NCCL_SOCKET_IFNAME", "lo", 0);
        }
        CudaTransportOptions options;
        options.base.timeout_s = 60;
        options.device = r % std::max(1, testing::cudaDevicesForTests());
        auto endpoint = createCudaTransport(**bootstrap, options);
        BRAID_CHILD_CHECK_OK(endpoint);
        const testing::EmulationOptions data;
        for (const Plan& plan : devicePlans(n)) {
          const RankPlan& rp = plan.ranks[r];
          std::vector<uint8_t> input(rp.input_bytes), output(rp.output_bytes, 0xA5);
          std::vector<std::vector<uint8_t>> inputs(n);
          for (int q = 0; q < n; ++q) {
            std::vector<uint8_t> in(plan.ranks[q].input_bytes + 16), out(plan.ranks[q].output_bytes + 16);
            inputs[q] = testing::placeInput(plan, q, data, 0, in.data(), out.data());
          }
          testing::placeInput(plan, r, data, 0, input.data(), output.data());
          void *d_in = nullptr, *d_out = nullptr, *d_scratch = nullptr;
          const uint64_t scratch = rp.scratch_bytes + rp.temp_bytes;
          BRAID_CHILD_CHECK(cudaMalloc(&d_in, input.size() + 1) == cudaSuccess);
          BRAID_CHILD_CHECK(cudaMalloc(&d_out, output.size() + 1) == cudaSuccess);
          BRAID_CHILD_CHECK(cudaMalloc(&d_scratch, scratch + 1) == cudaSuccess);
          cudaStream_t stream = nullptr;
          BRAID_CHILD_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
          BRAID_CHILD_CHECK(cudaMemcpyAsync(d_in, input.data(), input.size(), cudaMemcpyHostToDevice, stream) ==
                            cudaSuccess);
          RankMemory memory{d_in, input.size(), d_out, output.size(), d_scratch, scratch};
          BRAID_CHILD_CHECK_OK(executeOnStream(plan, **endpoint, memory, ReduceSpec{DataType::kFloat32}, stream));
          BRAID_CHILD_CHECK(cudaMemcpyAsync(output.data(), d_out, output.size(), cudaMemcpyDeviceToHost, stream) ==
                            cudaSuccess);
          BRAID_CHILD_CHECK(cudaStreamSynchronize(stream) == cudaSuccess);
          std::vector<uint8_t> want;
          const uint8_t* got = nullptr;
          if (testing::expectedResult(plan, inputs, r, data, &want, &got, input.data(), output.data())) {
            BRAID_CHILD_CHECK(std::memcmp(got, want.data(), want.size()) == 0);
          }
          cudaFree(d_in);
          cudaFree(d_out);
          cudaFree(d_scratch);
          cudaStreamDestroy(stream);
        }
        return (*bootstrap)->barrier().isOk() ? 0 : 1;
      },
      /*timeout_s=*/300);
  EXPECT_TRUE(result.allOk()) << result.summary();
}

}  // namespace
}  // namespace braid

#else  // BRAID_HAVE_CUDA

TEST(CudaKernels, ReduceCopyAndDivideEqualTheCpuReference) {
  GTEST_SKIP() << "built without CUDA (BRAID_WITH_CUDA=OFF, or nvcc not found): the kernels were not compiled";
}

#endif  // BRAID_HAVE_CUDA
