// braid_cuda_benchmark: the GPU numbers docs/gpu.md ("Device script") asks for, each against its yardstick,
// measured side by side in one run.
//
//   1. Kernel bandwidth at --bytes (default 256 MiB): cudaMemcpyAsync device to device (the yardstick: what the
//      driver's copy reaches on this HBM), runtime/cuda's copy kernel, and its reductions (fp32 sum, bf16 sum).
//      GB/s counts the bytes the kernel moves through memory (copy: read + write; reduction: two reads + a write),
//      GB = 1e9 bytes; the ratio to the memcpy's GB/s is printed.
//   2. All-reduce of --small bytes (default 1 KiB) fp32 on --ranks ranks (default 4): the device-resident executor
//      (ranks as threads of one process; one launch per collective, back to back on each rank's stream, timed from
//      the first launch to the last stream's end) against the host-driven CUDA transport (ranks as processes,
//      executeOnStream per call, the host waits for each), for ring and recursive doubling in LL and Simple; µs per
//      all-reduce and the ratio. With fewer GPUs than ranks, ranks share GPUs (the device-resident blocks of all
//      ranks then share one GPU's SMs; the host-driven ranks get NCCL_HOSTID each and talk through NCCL's network
//      transport over loopback, which makes that side slower than on separate GPUs). Beside them, reported without
//      a yardstick: the hierarchical path (the NCCL-API shim's BRAID_NCCL_ACROSS_HOSTS=hierarchical), the same ranks
//      as threads of one process named as 2 hosts (BootstrapOptions::host_id; the first half of the ranks on one,
//      the rest on the other): device-resident inside a host, proxied across the two over TCP on this machine
//      (createTransport's choice for ranks of different hosts, the executor's proxy thread per rank).
//
// Each part runs in forked children (CUDA does not survive a fork; the parent never starts it). Every all-reduce
// result is checked (n(n+1)/2 in every element). Exit status: 1 when a part fails (a CUDA or Braid error, or a wrong
// all-reduce result; when only the hierarchical path failed, the table still prints with `failed` in its column;
// the hierarchical part runs last, its waits limited to 10 s and the whole part to 40 s), 2 on bad flags.
#include <cuda_runtime_api.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "braid/bootstrap.h"
#include "braid/classic.h"
#include "braid/cuda.h"
#include "braid/plan.h"
#include "braid/transports.h"
#include "cuda/kernels.h"

namespace braid {
namespace {

struct Options {
  uint64_t bytes = 256ull << 20;
  uint64_t small = 1024;
  int ranks = 4;
  int iterations = 200;
};

#define CHECK_CUDA(call)                                                                          \
  do {                                                                                            \
    const cudaError_t e_ = (call);                                                                \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      return 1;                                                                                   \
    }                                                                                             \
  } while (0)
#define CHECK_OK(expr)                                                                                     \
  do {                                                                                                     \
    const auto& s_ = (expr);                                                                               \
    if (!s_.isOk()) {                                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, statusOf(s_).toString().c_str()); \
      return 1;                                                                                            \
    }                                                                                                      \
  } while (0)

const Status& statusOf(const Status& s) { return s; }
template <typename T>
const Status& statusOf(const Result<T>& r) {
  return r.status();
}

/// Runs body(rank) in n forked children; false when any failed.
template <typename Body>
bool forkRanks(int n, Body body) {
  std::fflush(stdout);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      const int code = body(r);
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(code);
    }
    pids.push_back(pid);
  }
  bool ok = true;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  return ok;
}

/// Seconds of `iterations` runs of `launch` on `stream`, timed by CUDA events.
template <typename Launch>
double timeOnStream(cudaStream_t stream, int iterations, Launch launch) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  launch();  // warm-up
  cudaEventRecord(start, stream);
  for (int i = 0; i < iterations; ++i) launch();
  cudaEventRecord(stop, stream);
  cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / 1e3 / iterations;
}

int kernelBandwidth(const Options& o) {
  CHECK_CUDA(cudaSetDevice(0));
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  void *a = nullptr, *b = nullptr, *c = nullptr;
  CHECK_CUDA(cudaMalloc(&a, o.bytes));
  CHECK_CUDA(cudaMalloc(&b, o.bytes));
  CHECK_CUDA(cudaMalloc(&c, o.bytes));
  CHECK_CUDA(cudaMemset(a, 1, o.bytes));
  CHECK_CUDA(cudaMemset(b, 2, o.bytes));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  const int iterations = 20;
  Status failed;
  const double memcpy_s =
      timeOnStream(stream, iterations, [&] { cudaMemcpyAsync(c, a, o.bytes, cudaMemcpyDeviceToDevice, stream); });
  const double copy_s = timeOnStream(stream, iterations, [&] {
    const Status s = cuda::launchCopy(c, a, o.bytes, stream);
    if (!s.isOk()) failed = s;
  });
  const double f32_s = timeOnStream(stream, iterations, [&] {
    const Status s = cuda::launchReduce(c, a, b, o.bytes / 4, DataType::kFloat32, ReduceOp::kSum, stream);
    if (!s.isOk()) failed = s;
  });
  const double bf16_s = timeOnStream(stream, iterations, [&] {
    const Status s = cuda::launchReduce(c, a, b, o.bytes / 2, DataType::kBfloat16, ReduceOp::kSum, stream);
    if (!s.isOk()) failed = s;
  });
  CHECK_OK(failed);
  CHECK_CUDA(cudaGetLastError());
  const double gb = static_cast<double>(o.bytes) / 1e9;
  const double memcpy_gbs = 2 * gb / memcpy_s;
  std::printf("# kernel bandwidth on %s, %llu bytes per buffer (GB/s of memory traffic; ratio to cudaMemcpyAsync)\n",
              prop.name, static_cast<unsigned long long>(o.bytes));
  std::printf("%-28s %10.1f GB/s  %6.3f\n", "cudaMemcpyAsync D2D", memcpy_gbs, 1.0);
  std::printf("%-28s %10.1f GB/s  %6.3f\n", "launchCopy", 2 * gb / copy_s, 2 * gb / copy_s / memcpy_gbs);
  std::printf("%-28s %10.1f GB/s  %6.3f\n", "launchReduce fp32 sum", 3 * gb / f32_s, 3 * gb / f32_s / memcpy_gbs);
  std::printf("%-28s %10.1f GB/s  %6.3f\n", "launchReduce bf16 sum", 3 * gb / bf16_s, 3 * gb / bf16_s / memcpy_gbs);
  return 0;
}

/// The all-reduce plans of part 2: (label, plan) for ring and recursive doubling in LL and Simple.
std::vector<std::pair<std::string, Plan>> smallPlans(const Options& o) {
  std::vector<std::pair<std::string, Plan>> plans;
  for (ClassicAlgo algo : {ClassicAlgo::kRing, ClassicAlgo::kRecursiveDoubling}) {
    for (Protocol protocol : {Protocol::kLL, Protocol::kSimple}) {
      ClassicRequest request;
      request.algo = algo;
      request.spec.kind = CollectiveKind::kAllReduce;
      request.spec.num_ranks = o.ranks;
      Result<Algorithm> algorithm = buildClassic(request);
      if (!algorithm.isOk()) continue;
      LowerOptions lower = callLowerOptions(o.small, false, 1, 4);
      lower.protocol = protocol;
      Result<Plan> plan = lowerAlgorithm(*algorithm, lower);
      if (plan.isOk()) {
        plans.emplace_back(std::string(classicAlgoName(algo)) + " " + protocolName(protocol), std::move(*plan));
      }
    }
  }
  return plans;
}

/// The shared page the forked ranks of one part use: the bootstrap id, and µs per all-reduce per plan from rank 0.
struct Shared {
  std::atomic<int> published{0};
  UniqueId id;
  double us[8] = {};
};

Shared* sharedPage() {
  void* memory = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return memory == MAP_FAILED ? nullptr : new (memory) Shared();
}

/// Rank r's input (value r + 1 everywhere) and the check of an all-reduce's result (n(n+1)/2 everywhere).
int checkSum(const std::vector<float>& out, int n, const char* what) {
  const float want = static_cast<float>(n * (n + 1) / 2);
  for (float v : out) {
    if (v != want) {
      std::fprintf(stderr, "%s: all-reduce result %g, expected %g\n", what, v, want);
      return 1;
    }
  }
  return 0;
}

/// The device-resident executor with the ranks as threads of this process. `hierarchical`: the ranks are named as
/// 2 hosts (ranks [0, ceil(n/2)) and the rest), each rank's executor proxies its connections to the other host
/// through its own endpoint of a TCP transport over the same bootstrap; its waits (kernel, proxy, transport) give up
/// after kHierarchicalWaitS.
constexpr double kHierarchicalWaitS = 10;
/// Seconds the hierarchical part may run in all (SIGALRM ends its child): a hang there leaves the other figures.
constexpr unsigned kHierarchicalPartS = 40;

int deviceResident(const Options& o, Shared* shared, bool hierarchical) {
  Result<UniqueId> id = createUniqueId("127.0.0.1:0");
  CHECK_OK(id);
  // The TCP transport of ranks on several hosts listens on BRAID_SOCKET_IFNAME's address: loopback here, unless
  // the caller chose an interface.
  if (hierarchical) setenv("BRAID_SOCKET_IFNAME", "lo", 0);
  int devices = 0;
  CHECK_CUDA(cudaGetDeviceCount(&devices));
  const auto plans = smallPlans(o);
  std::vector<int> failures(static_cast<size_t>(o.ranks), 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < o.ranks; ++r) {
    threads.emplace_back([&, r] {
      failures[r] = [&]() -> int {
        BootstrapOptions bootstrap_options;
        if (hierarchical)
          bootstrap_options.host_id = 2 * r < o.ranks ? "braid-benchmark-host-a" : "braid-benchmark-host-b";
        auto bootstrap = connectBootstrap(*id, r, o.ranks, bootstrap_options);
        CHECK_OK(bootstrap);
        std::unique_ptr<DataTransport> proxies;  // outlives the executor, whose proxy thread uses it
        DeviceExecutorOptions options;
        options.device = r % devices;
        if (hierarchical) {
          TransportOptions transport_options;
          transport_options.timeout_s = kHierarchicalWaitS;
          auto created = createTransport(TransportKind::kAuto, **bootstrap, transport_options);
          CHECK_OK(created);
          if (std::strcmp((*created)->name(), "tcp") != 0) {
            std::fprintf(stderr, "rank %d: the proxies' transport is %s, not tcp\n", r, (*created)->name());
            return 1;
          }
          proxies = std::move(created).value();
          options.proxy_transport = proxies.get();
          options.timeout_s = kHierarchicalWaitS;
        }
        auto executor = createDeviceExecutor(**bootstrap, options);
        CHECK_OK(executor);
        CHECK_CUDA(cudaSetDevice((*executor)->device()));
        cudaStream_t stream;
        CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        void *in = nullptr, *out = nullptr;
        CHECK_CUDA(cudaMalloc(&in, o.small));
        CHECK_CUDA(cudaMalloc(&out, o.small));
        const std::vector<float> values(o.small / 4, static_cast<float>(r + 1));
        CHECK_CUDA(cudaMemcpy(in, values.data(), o.small, cudaMemcpyHostToDevice));
        for (size_t p = 0; p < plans.size(); ++p) {
          Result<int> handle = (*executor)->prepare(plans[p].second);
          CHECK_OK(handle);
          const RankMemory memory{in, o.small, out, o.small, nullptr, 0};
          const ReduceSpec reduce{DataType::kFloat32, ReduceOp::kSum};
          for (int i = 0; i < 10; ++i) CHECK_OK((*executor)->launch(*handle, memory, reduce, stream));
          CHECK_CUDA(cudaStreamSynchronize(stream));
          CHECK_OK((*executor)->asyncError());
          CHECK_OK((*bootstrap)->barrier());
          const auto start = std::chrono::steady_clock::now();
          for (int i = 0; i < o.iterations; ++i) CHECK_OK((*executor)->launch(*handle, memory, reduce, stream));
          CHECK_CUDA(cudaStreamSynchronize(stream));
          CHECK_OK((*bootstrap)->barrier());  // the last rank's kernels are done too
          const double us =
              std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
              o.iterations;
          CHECK_OK((*executor)->asyncError());
          std::vector<float> result(o.small / 4);
          CHECK_CUDA(cudaMemcpy(result.data(), out, o.small, cudaMemcpyDeviceToHost));
          if (checkSum(result, o.ranks, plans[p].first.c_str()) != 0) return 1;
          if (r == 0) shared->us[p] = us;
        }
        return 0;
      }();
    });
  }
  for (std::thread& t : threads) t.join();
  for (int f : failures)
    if (f != 0) return 1;
  return 0;
}

int hostDriven(const Options& o, Shared* shared, int rank) {
  UniqueId id;
  if (rank == 0) {
    Result<UniqueId> created = createUniqueId("127.0.0.1:0");
    CHECK_OK(created);
    id = *created;
    shared->id = id;
    shared->published.store(1);
  } else {
    while (shared->published.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    id = shared->id;
  }
  auto bootstrap = connectBootstrap(id, rank, o.ranks);
  CHECK_OK(bootstrap);
  int devices = 0;
  CHECK_CUDA(cudaGetDeviceCount(&devices));
  if (devices < o.ranks) {
    setenv("NCCL_HOSTID", ("braid-benchmark-rank-" + std::to_string(rank)).c_str(), 1);
    setenv("NCCL_SOCKET_IFNAME", "lo", 0);
  }
  CudaTransportOptions options;
  options.device = rank % devices;
  auto endpoint = createCudaTransport(**bootstrap, options);
  CHECK_OK(endpoint);
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const auto plans = smallPlans(o);
  for (size_t p = 0; p < plans.size(); ++p) {
    const Plan& plan = plans[p].second;
    const RankPlan& rp = plan.ranks[rank];
    void *in = nullptr, *out = nullptr, *scratch = nullptr;
    CHECK_CUDA(cudaMalloc(&in, o.small));
    CHECK_CUDA(cudaMalloc(&out, o.small));
    CHECK_CUDA(cudaMalloc(&scratch, rp.scratch_bytes + rp.temp_bytes + 1));
    const std::vector<float> values(o.small / 4, static_cast<float>(rank + 1));
    CHECK_CUDA(cudaMemcpy(in, values.data(), o.small, cudaMemcpyHostToDevice));
    const RankMemory memory{in, o.small, out, o.small, scratch, rp.scratch_bytes + rp.temp_bytes};
    const ReduceSpec reduce{DataType::kFloat32, ReduceOp::kSum};
    for (int i = 0; i < 10; ++i) CHECK_OK(executeOnStream(plan, **endpoint, memory, reduce, stream));
    CHECK_OK((*bootstrap)->barrier());
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < o.iterations; ++i) CHECK_OK(executeOnStream(plan, **endpoint, memory, reduce, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    CHECK_OK((*bootstrap)->barrier());
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / o.iterations;
    std::vector<float> result(o.small / 4);
    CHECK_CUDA(cudaMemcpy(result.data(), out, o.small, cudaMemcpyDeviceToHost));
    if (checkSum(result, o.ranks, plans[p].first.c_str()) != 0) return 1;
    if (rank == 0) shared->us[p] = us;
    cudaFree(in);
    cudaFree(out);
    cudaFree(scratch);
  }
  return (*bootstrap)->barrier().isOk() ? 0 : 1;
}

bool parseBytes(const char* text, uint64_t* out) {
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (end == text || value <= 0) return false;
  const std::string unit = end;
  const double scale = unit.empty()  ? 1
                       : unit == "K" ? 1024.0
                       : unit == "M" ? 1048576.0
                       : unit == "G" ? 1073741824.0
                                     : 0;
  if (scale == 0) return false;
  *out = static_cast<uint64_t>(value * scale);
  return true;
}

}  // namespace
}  // namespace braid

int main(int argc, char** argv) {
  using namespace braid;
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    bool ok = value != nullptr;
    if (flag == "--bytes" && ok) {
      ok = parseBytes(value, &o.bytes);
    } else if (flag == "--small" && ok) {
      ok = parseBytes(value, &o.small) && o.small % 4 == 0;
    } else if (flag == "--ranks" && ok) {
      o.ranks = std::atoi(value);
      ok = o.ranks >= 2 && o.ranks <= 16;
    } else if (flag == "--iterations" && ok) {
      o.iterations = std::atoi(value);
      ok = o.iterations >= 1;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "usage: braid_cuda_benchmark [--bytes 256M] [--small 1K] [--ranks 4] [--iterations 200]\n");
      return 2;
    }
    ++i;
  }
  bool ok = forkRanks(1, [&](int) { return kernelBandwidth(o); });
  Shared* device = sharedPage();
  Shared* hierarchical = sharedPage();
  Shared* host = sharedPage();
  if (device == nullptr || hierarchical == nullptr || host == nullptr) return 1;
  ok = forkRanks(1, [&](int) { return deviceResident(o, device, false); }) && ok;
  ok = forkRanks(o.ranks, [&](int rank) { return hostDriven(o, host, rank); }) && ok;
  const bool hierarchical_ok = forkRanks(1, [&](int) {
    alarm(kHierarchicalPartS);
    return deviceResident(o, hierarchical, true);
  });
  if (!ok) {
    std::printf("# a part failed (its error is above): no all-reduce table\n");
    return 1;
  }
  const auto plans = smallPlans(o);
  std::printf(
      "# all-reduce %llu B fp32 x %d ranks, us per call (%d calls): device-resident vs host-driven; hierarchical = "
      "device-resident as 2 hosts of %d and %d ranks, proxies over tcp%s\n",
      static_cast<unsigned long long>(o.small), o.ranks, o.iterations, (o.ranks + 1) / 2, o.ranks / 2,
      hierarchical_ok ? "" : " (FAILED: its error is above)");
  for (size_t p = 0; p < plans.size(); ++p) {
    char hier[32];
    if (hierarchical_ok) {
      std::snprintf(hier, sizeof(hier), "%9.2f", hierarchical->us[p]);
    } else {
      std::snprintf(hier, sizeof(hier), "%9s", "failed");
    }
    std::printf("%-24s device-resident %9.2f us  hierarchical %s us  host-driven %9.2f us  host/device %7.2f\n",
                plans[p].first.c_str(), device->us[p], hier, host->us[p],
                device->us[p] > 0 ? host->us[p] / device->us[p] : 0.0);
  }
  return hierarchical_ok ? 0 : 1;
}
