// The device-resident executor's block program (runtime/cuda/device_program.h, what the kernel runs) on the CPU:
// every block of every rank as host threads over host memory laid out as on the device (tests/cuda/
// device_emulator.h). Classical algorithms on 2-5 ranks and the corpus MSCCL/TACCL XMLs, Simple and LL, slices small
// enough that connections wrap their FIFO of 8 slots many times, two launches on the same regions (counters carry
// on), every datatype and operator on a ring all-reduce, blocks of 1 and 3 threads; every output byte equals the
// collective's reference. A rank that never starts makes its peers give up after the timeout, naming what they
// waited for. Ranks split over 2 and 3 hosts: connections between hosts are proxied (device_plan.h) and every
// rank's proxy (device_proxy.h) runs beside its blocks over the threads transport or TCP; the results are the same
// references, a rank whose proxy never runs makes its peers time out naming the wait. What this does not check:
// CUDA's own instructions and memory model (fences, 16-byte stores, host-mapped memory), which need a GPU
// (tests/cuda/cuda_device_test.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "braid/algorithm.h"
#include "braid/classic.h"
#include "cuda/device_emulator.h"
#include "cuda/device_plan_check.h"
#include "support/classic_requests.h"
#include "support/corpus.h"

namespace braid {
namespace {

// Lowers `algorithm` for `count` elements of `type` per rank piece (times the size multiplier), in `protocol`,
// with slices of `slice_bytes`.
Result<Plan> lowerFor(const Algorithm& algorithm, uint64_t count, bool in_place, DataType type, Protocol protocol,
                      uint64_t slice_bytes, int instances = 1) {
  BRAID_ASSIGN_OR_RETURN(CollectiveSpec spec, algorithm.spec(in_place));
  LowerOptions options = callLowerOptions(count * dataTypeSize(type) * static_cast<uint64_t>(spec.sizeMultiplier()),
                                          in_place, instances, dataTypeSize(type));
  options.protocol = protocol;
  options.slice_bytes = slice_bytes;
  return lowerAlgorithm(algorithm, options);
}

Status emulate(const Algorithm& algorithm, uint64_t count, bool in_place, Protocol protocol, uint64_t slice_bytes,
               const testing::EmulationOptions& options, int instances = 1) {
  Result<Plan> plan = lowerFor(algorithm, count, in_place, options.type, protocol, slice_bytes, instances);
  if (!plan.isOk() && plan.status().code() == StatusCode::kUnsupported) return Status::ok();  // uneven: lowering's
  BRAID_RETURN_IF_ERROR(plan.status());
  const Status status = testing::emulateDevicePlan(*plan, options);
  if (status.isOk()) return status;
  return Status(status.code(), fmt::format("{} count {} {} {} slice {} {} {}: {}", algorithm.name, count,
                                           in_place ? "in place" : "out of place", protocolName(protocol), slice_bytes,
                                           dataTypeName(options.type), reduceOpName(options.op), status.message()));
}

TEST(DeviceProgramEmulation, ClassicalAlgorithmsMatchTheReference) {
  int runs = 0;
  for (int n : {2, 3, 4, 5}) {
    for (const Algorithm& algorithm : testing::classicalTestAlgorithms(n)) {
      testing::EmulationOptions options;
      options.root = algorithm.root;
      options.threads_per_block = n <= 3 ? 3 : 1;
      for (bool in_place : {false, true}) {
        if (in_place ? !algorithm.in_place : !algorithm.out_of_place) continue;
        for (Protocol protocol : {Protocol::kSimple, Protocol::kLL}) {
          // One element; an uneven count; 301 elements in 64-byte slices: many messages per connection, past the
          // 8 FIFO slots.
          for (uint64_t count : {1, 7, 301}) {
            const Status status = emulate(algorithm, count, in_place, protocol, count == 301 ? 64 : 0, options);
            EXPECT_TRUE(status.isOk()) << n << " ranks: " << status.toString();
            ++runs;
          }
        }
      }
    }
  }
  EXPECT_GT(runs, 300);
}

TEST(DeviceProgramEmulation, EveryDatatypeAndOperatorOnARing) {
  const Algorithm ring = testing::classicAlgorithm(ClassicAlgo::kRing, CollectiveKind::kAllReduce, 3);
  for (int t = 0; t < kNumDataTypes; ++t) {
    for (int o = 0; o < kNumReduceOps; ++o) {
      for (Protocol protocol : {Protocol::kSimple, Protocol::kLL}) {
        testing::EmulationOptions options;
        options.type = static_cast<DataType>(t);
        options.op = static_cast<ReduceOp>(o);
        options.threads_per_block = 2;
        const Status status = emulate(ring, 45, false, protocol, 48, options);
        EXPECT_TRUE(status.isOk()) << status.toString();
      }
    }
  }
}

// Two instances of a ring all-reduce: two threadblocks per connection direction on different channels.
TEST(DeviceProgramEmulation, InstancesRunOnTheirOwnChannels) {
  const Algorithm ring = testing::classicAlgorithm(ClassicAlgo::kRing, CollectiveKind::kAllReduce, 4);
  testing::EmulationOptions options;
  options.threads_per_block = 2;
  for (Protocol protocol : {Protocol::kSimple, Protocol::kLL}) {
    EXPECT_TRUE(emulate(ring, 1003, false, protocol, 256, options, 2).isOk());
  }
}

// Calls fn(file, algorithm, even) for every corpus program that loads, verifies and is not a custom collective;
// `even` is its smallest element count that every rank's part divides (chunks / gcd(chunks, size multiplier)).
template <class Fn>
void forEachCorpusAlgorithm(Fn&& fn) {
  for (const std::filesystem::path& file : testing::corpusXmlFiles()) {
    Result<Algorithm> algorithm = loadAlgorithm(file.string());
    if (!algorithm.isOk() || !verify(*algorithm).ok) continue;
    if (algorithm->collective == CollectiveKind::kCustom) continue;
    const CollectiveSpec spec = algorithm->spec(!algorithm->out_of_place).value();
    const uint64_t multiplier = static_cast<uint64_t>(spec.sizeMultiplier());
    const uint64_t chunks = static_cast<uint64_t>(algorithm->num_chunks);
    fn(file, *algorithm, chunks / std::gcd<uint64_t>(chunks, multiplier));
  }
}

// The corpus's verified MSCCL and TACCL programs (dependencies across threadblocks, nops, precopies, many
// channels) at their smallest even size and at 3 times it, in 16-byte slices with LL and Simple.
TEST(DeviceProgramEmulation, CorpusAlgorithmsMatchTheReference) {
  BRAID_SKIP_WITHOUT_REALCASES();
  int runs = 0;
  forEachCorpusAlgorithm([&](const std::filesystem::path& file, const Algorithm& algorithm, uint64_t even) {
    testing::EmulationOptions options;
    options.root = algorithm.root;
    options.launches = 2;
    for (Protocol protocol : {Protocol::kSimple, Protocol::kLL}) {
      for (uint64_t count : {even, 3 * even}) {
        const Status status = emulate(algorithm, count, !algorithm.out_of_place, protocol, 16, options);
        EXPECT_TRUE(status.isOk()) << file.filename() << ": " << status.toString();
        ++runs;
      }
    }
  });
  EXPECT_GE(runs, 40);
}

// A CUDA graph replays its kernels with the arguments captured once: every launch passes launch number 0 here, and
// the blocks number their launches from the rank's launch counter. Three launches on the same regions of the
// classical algorithms (4 ranks, Simple and LL, FIFOs wrapping) and of the corpus programs (precopies and their grid
// barrier among them) must all match the reference; numbering them by the arguments would reuse launch 0's message
// numbers and wait forever (a timeout) from the second launch on.
TEST(DeviceProgramEmulation, ReplayedArgumentsNumberLaunchesFromTheDevice) {
  testing::EmulationOptions options;
  options.launches = 3;
  options.replayed_arguments = true;
  options.timeout_s = 5;
  int runs = 0;
  for (const Algorithm& algorithm : testing::classicalTestAlgorithms(4)) {
    options.root = algorithm.root;
    for (Protocol protocol : {Protocol::kSimple, Protocol::kLL}) {
      const Status status = emulate(algorithm, 301, !algorithm.out_of_place, protocol, 64, options);
      EXPECT_TRUE(status.isOk()) << algorithm.name << ": " << status.toString();
      ++runs;
    }
  }
  EXPECT_GT(runs, 10);
  if (!std::filesystem::is_directory(testing::realcasesDir())) return;  // the corpus part needs ../shared
  int corpus = 0;
  forEachCorpusAlgorithm([&](const std::filesystem::path& file, const Algorithm& algorithm, uint64_t even) {
    options.root = algorithm.root;
    const Status status = emulate(algorithm, even, !algorithm.out_of_place, Protocol::kSimple, 16, options);
    EXPECT_TRUE(status.isOk()) << file.filename() << ": " << status.toString();
    ++corpus;
  });
  EXPECT_GE(corpus, 10);
}

// Rank r's host when n ranks are split into hosts of `per_host` consecutive ranks.
std::vector<int> hostsOf(int n, int per_host) {
  std::vector<int> hosts;
  for (int r = 0; r < n; ++r) hosts.push_back(r / per_host);
  return hosts;
}

// Every classical algorithm with its ranks split over hosts: 4 ranks as 2 x 2, 6 as 3 x 2 and 2 x 3, 8 as 2 x 4, and
// 4 ranks alternating between 2 hosts (every ring neighbour on the other host); Simple and LL; 301 elements in
// 64-byte slices (many messages per connection, FIFOs of 8 slots wrapping) and, on 4 ranks, one element (messages
// of 0 bytes); two launches on the same regions and proxy areas; the proxies over the threads transport.
TEST(DeviceProgramEmulation, ProxiedClassicalAlgorithmsMatchTheReference) {
  struct Split {
    int n;
    std::vector<int> hosts;
  };
  const Split splits[] = {
      {4, hostsOf(4, 2)}, {6, hostsOf(6, 2)}, {6, hostsOf(6, 3)}, {8, hostsOf(8, 4)}, {4, {0, 1, 0, 1}}};
  int runs = 0;
  for (const Split& split : splits) {
    for (const Algorithm& algorithm : testing::classicalTestAlgorithms(split.n)) {
      testing::EmulationOptions options;
      options.root = algorithm.root;
      options.host_of_rank = split.hosts;
      // One mode per algorithm (out of place where built): the modes differ in buffers, not in connections.
      const bool in_place = !algorithm.out_of_place;
      for (Protocol protocol : {Protocol::kSimple, Protocol::kLL}) {
        for (uint64_t count : {1, 301}) {
          if (count == 1 && split.n > 4) continue;
          const Status status = emulate(algorithm, count, in_place, protocol, count == 301 ? 64 : 0, options);
          EXPECT_TRUE(status.isOk()) << split.n << " ranks, rank 1 on host " << split.hosts[1] << ": "
                                     << status.toString();
          ++runs;
        }
      }
    }
  }
  RecordProperty("runs", runs);
  EXPECT_GT(runs, 100);
}

// The corpus programs with their ranks split into two hosts of consecutive ranks (three for 6 and more ranks'
// programs when the count divides), in 16-byte slices with LL and Simple, two launches.
TEST(DeviceProgramEmulation, ProxiedCorpusAlgorithmsMatchTheReference) {
  BRAID_SKIP_WITHOUT_REALCASES();
  int runs = 0;
  forEachCorpusAlgorithm([&](const std::filesystem::path& file, const Algorithm& algorithm, uint64_t even) {
    const int n = algorithm.num_ranks;
    testing::EmulationOptions options;
    options.root = algorithm.root;
    options.host_of_rank = hostsOf(n, n % 3 == 0 && n >= 6 ? n / 3 : (n + 1) / 2);
    for (Protocol protocol : {Protocol::kSimple, Protocol::kLL}) {
      const Status status = emulate(algorithm, even, !algorithm.out_of_place, protocol, 16, options);
      EXPECT_TRUE(status.isOk()) << file.filename() << ": " << status.toString();
      ++runs;
    }
  });
  RecordProperty("runs", runs);
  EXPECT_GE(runs, 20);
}

// The proxies over TCP (loopback, an in-process bootstrap per rank): a ring all-reduce and a direct all-to-all on 4
// ranks as 2 x 2, and a double binary tree all-reduce on 6 ranks as 2 x 3, Simple and LL, FIFOs wrapping, three
// launches.
TEST(DeviceProgramEmulation, ProxiesOverTcpMatchTheReference) {
  struct Case {
    ClassicAlgo algo;
    CollectiveKind kind;
    int n;
    int per_host;
  };
  for (const Case& c : {Case{ClassicAlgo::kRing, CollectiveKind::kAllReduce, 4, 2},
                        Case{ClassicAlgo::kDirect, CollectiveKind::kAllToAll, 4, 2},
                        Case{ClassicAlgo::kDoubleBinaryTree, CollectiveKind::kAllReduce, 6, 3}}) {
    const Algorithm algorithm = testing::classicAlgorithm(c.algo, c.kind, c.n);
    for (Protocol protocol : {Protocol::kSimple, Protocol::kLL}) {
      testing::EmulationOptions options;
      options.host_of_rank = hostsOf(c.n, c.per_host);
      options.tcp_proxies = true;
      options.launches = 3;
      const Status status = emulate(algorithm, 301, false, protocol, 64, options);
      EXPECT_TRUE(status.isOk()) << algorithm.name << ": " << status.toString();
    }
  }
}

// 4 ranks of a ring all-reduce as 2 x 2: rank 3's blocks run but its proxy never does. Its peers give up within
// the timeout (plus the time to stop), and the first failure names a message (kData) or a slot (kCredit) and the
// peer it waited for — or, when the machine is loaded enough that a proxy's wait for its own kernel (kKernel: the
// kernel itself waits on the missing proxy, one connection upstream) expires first, that wait and its peer.
TEST(DeviceProgramEmulation, AMissingProxyIsATimeoutNamingTheWait) {
  const Algorithm ring = testing::classicAlgorithm(ClassicAlgo::kRing, CollectiveKind::kAllReduce, 4);
  for (Protocol protocol : {Protocol::kSimple, Protocol::kLL}) {
    const Plan plan = lowerFor(ring, 300, false, DataType::kFloat32, protocol, 64).value();
    testing::EmulationOptions options;
    options.host_of_rank = hostsOf(4, 2);
    options.without_proxy = {3};
    options.timeout_s = 0.3;
    options.launches = 1;
    cuda::DeviceError error;
    const auto start = std::chrono::steady_clock::now();
    const Status status = testing::emulateDevicePlan(plan, options, &error);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(status.code(), StatusCode::kTimeout) << status.toString();
    EXPECT_TRUE(error.code == 1 || error.code == 2) << error.code;
    EXPECT_TRUE(error.what == static_cast<int32_t>(cuda::DeviceWait::kData) ||
                error.what == static_cast<int32_t>(cuda::DeviceWait::kCredit) ||
                (error.code == 2 && error.what == static_cast<int32_t>(cuda::DeviceWait::kKernel)))
        << error.what << " " << status.toString();
    EXPECT_TRUE(error.peer >= 0 && error.peer < 4 && error.peer != error.rank) << error.peer;
    EXPECT_GE(error.waited_ns, 300000000u);
    EXPECT_LT(took, 10.0);
  }
}

// Rank 2 of a 3-rank ring never starts: ranks 0 and 1 give up after the timeout and the first failure names a
// rank, a threadblock, a step and what it waited for.
TEST(DeviceProgramEmulation, AMissingRankIsATimeoutNamingTheWait) {
  const Algorithm ring = testing::classicAlgorithm(ClassicAlgo::kRing, CollectiveKind::kAllReduce, 3);
  const Plan plan = lowerFor(ring, 300, false, DataType::kFloat32, Protocol::kSimple, 64).value();
  testing::EmulationOptions options;
  options.ranks = {0, 1};
  options.timeout_s = 0.3;
  options.launches = 1;
  cuda::DeviceError error;
  const Status status = testing::emulateDevicePlan(plan, options, &error);
  EXPECT_EQ(status.code(), StatusCode::kTimeout) << status.toString();
  EXPECT_EQ(error.code, 1u);
  EXPECT_TRUE(error.rank == 0 || error.rank == 1) << error.rank;
  EXPECT_TRUE(error.what == static_cast<int32_t>(cuda::DeviceWait::kData) ||
              error.what == static_cast<int32_t>(cuda::DeviceWait::kCredit))
      << error.what;
  EXPECT_GE(error.waited_ns, 300000000u);
}

}  // namespace
}  // namespace braid
