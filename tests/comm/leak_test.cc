// Resources over many communicators and many calls, per transport (threads, shm, tcp, and ucx when built): 1000
// communicator init/destroy cycles of 2 ranks (threads of this process, one bootstrap each) and 10000 collectives
// on one communicator must not grow this process's resident memory, open file descriptors, threads or /dev/shm
// segments. Each test prints the figures before and after. BRAID_TEST_SMALL=1 (sanitizer builds): 100 cycles and
// 1000 collectives; under ASan/TSan memory is left to LeakSanitizer (kSanitizedAllocator).
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "comm/comm_test_util.h"
#include "transport/multirank.h"

namespace braid {
namespace {

bool smallRun() {
  const char* small = std::getenv("BRAID_TEST_SMALL");
  return small != nullptr && std::string(small) == "1";
}

// Entries of a directory, "." and ".." left out; those starting with `prefix` when given. -1 when it cannot be read.
int countEntries(const char* dir, const std::string& prefix = "") {
  DIR* d = opendir(dir);
  if (d == nullptr) return -1;
  int count = 0;
  while (dirent* entry = readdir(d)) {
    if (entry->d_name[0] == '.') continue;
    if (prefix.empty() || std::strncmp(entry->d_name, prefix.c_str(), prefix.size()) == 0) ++count;
  }
  closedir(d);
  return count;
}

// VmRSS of this process, KiB (/proc/self/status).
long residentKiB() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

struct Resources {
  long rss_kib = 0;
  int fds = 0;
  int threads = 0;
  int shm_segments = 0;  // /dev/shm entries of communicators whose rank 0 lives in this process

  // `settle`: first wait (up to 1 s) for threads that finished their work (a bootstrap root after its
  // rendezvous, a joined progress thread) to leave /proc/self/task.
  static Resources now(bool settle) {
    for (int i = 0; settle && i < 100 && testing::processThreadCount() > 1; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    Resources r;
    r.rss_kib = residentKiB();
    r.fds = countEntries("/proc/self/fd");
    r.threads = testing::processThreadCount();
    r.shm_segments = countEntries("/dev/shm", "braid-shm-" + std::to_string(getpid()) + "-");
    return r;
  }
};

// Whether this build runs under ASan or TSan: their allocators hold freed memory back (ASan's quarantine, TSan's
// shadow), so resident memory grows without a leak; LeakSanitizer checks memory there instead.
constexpr bool kSanitizedAllocator =
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    true;
#else
    false;
#endif

// Prints both and checks that nothing grew: descriptors, threads and segments exactly, memory by at most
// `rss_slack_kib` (allocator caches and fragmentation; a leak of 4 KiB per cycle over 1000 cycles is 4 MiB) except
// under a sanitizer's allocator (kSanitizedAllocator), where it is printed only.
void expectNoGrowth(const char* what, const std::string& transport, int iterations, const Resources& before,
                    const Resources& after, long rss_slack_kib) {
  std::printf("%s, %s, %d iterations: RSS %ld -> %ld KiB, fds %d -> %d, threads %d -> %d, /dev/shm segments %d -> %d\n",
              what, transport.c_str(), iterations, before.rss_kib, after.rss_kib, before.fds, after.fds, before.threads,
              after.threads, before.shm_segments, after.shm_segments);
  if (!kSanitizedAllocator) {
    EXPECT_LE(after.rss_kib - before.rss_kib, rss_slack_kib) << what << " on " << transport << ": memory grew";
  }
  EXPECT_LE(after.fds, before.fds) << what << " on " << transport << ": file descriptors grew";
  EXPECT_LE(after.threads, before.threads) << what << " on " << transport << ": threads grew";
  EXPECT_LE(after.shm_segments, before.shm_segments) << what << " on " << transport << ": /dev/shm segments grew";
}

CommOptions optionsFor(const std::string& transport) {
  CommOptions options;
  options.transport = transport;
  options.timeout_s = 60;
  return options;
}

bool skipTransport(const std::string& transport) {
#ifndef BRAID_HAVE_UCX
  if (transport == "ucx") return true;
#endif
  if (transport == "ucx") setenv("UCX_TLS", "tcp,self", 0);
  return false;
}

// One init / all-reduce / destroy cycle of 2 ranks.
// Both ranks finish their calls before either destroys its communicator (a UCX endpoint closed while its peer
// in the same process still completes its last receive fails that peer's connection, "Endpoint timeout").
Status cycle(const CommOptions& options) {
  std::barrier done(2);
  return testing::runRanks(2, options, [&](Communicator& comm) -> Status {
    std::vector<float> buf(64, static_cast<float>(comm.rank() + 1));
    const Status status = comm.allReduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum);
    done.arrive_and_wait();
    BRAID_RETURN_IF_ERROR(status);
    return buf[63] == 3.0f ? Status::ok() : internalError("wrong all-reduce result");
  });
}

class Leaks : public ::testing::TestWithParam<const char*> {};

TEST_P(Leaks, InitDestroyCyclesDoNotGrow) {
  const std::string transport = GetParam();
  if (skipTransport(transport)) GTEST_SKIP() << "built without UCX";
  const CommOptions options = optionsFor(transport);
  const int cycles = smallRun() ? 100 : 1000;
  // Warm-up: the allocator's arenas, UCX's and the loader's one-time state.
  for (int i = 0; i < 20; ++i) {
    const Status status = cycle(options);
    ASSERT_TRUE(status.isOk()) << "warm-up cycle " << i << ": " << status.toString();
  }
  const Resources before = Resources::now(/*settle=*/true);
  for (int i = 0; i < cycles; ++i) {
    const Status status = cycle(options);
    ASSERT_TRUE(status.isOk()) << "cycle " << i << ": " << status.toString();
  }
  expectNoGrowth("init/destroy", transport, cycles, before, Resources::now(/*settle=*/true), 4096);
}

TEST_P(Leaks, CollectivesDoNotGrow) {
  const std::string transport = GetParam();
  if (skipTransport(transport)) GTEST_SKIP() << "built without UCX";
  const int calls = smallRun() ? 1000 : 10000;
  Resources before, after;
  std::barrier done(2);
  const Status status = testing::runRanks(2, optionsFor(transport), [&](Communicator& comm) -> Status {
    const int r = comm.rank();
    std::vector<float> a(4096), b(8192);
    std::vector<size_t> counts(2, 100), displs = {0, 100};
    // Every collective in turn, sizes cycling through 1..4096 elements (several plans and algorithms).
    auto call = [&](int i) -> Status {
      const size_t count = size_t{1} << (i % 13);
      switch (i % 7) {
        case 0: return comm.allReduce(a.data(), a.data(), count, DataType::kFloat32, ReduceOp::kSum);
        case 1: return comm.allGather(a.data(), b.data(), count, DataType::kFloat32);
        case 2: return comm.reduceScatter(b.data(), a.data(), count, DataType::kFloat32, ReduceOp::kMax);
        case 3: return comm.allToAll(b.data(), b.data(), count, DataType::kFloat32);
        case 4: return comm.broadcast(a.data(), a.data(), count, DataType::kFloat32, i % 2);
        case 5: return comm.reduce(a.data(), b.data(), count, DataType::kFloat32, ReduceOp::kSum, 1 - i % 2);
        default:
          return comm.allToAllv(a.data(), counts.data(), displs.data(), b.data(), counts.data(), displs.data(),
                                DataType::kFloat32);
      }
    };
    const int warmup = 7 * 13 * 2;  // every (collective, size) pair twice: the plan caches are full
    for (int i = 0; i < warmup; ++i) BRAID_RETURN_IF_ERROR(call(i));
    // Rank 0 measures while rank 1 waits in the all-reduce after it: both ranks' threads and endpoints exist.
    std::vector<float> check(1, 0.0f);
    BRAID_RETURN_IF_ERROR(comm.allReduce(check.data(), check.data(), 1, DataType::kFloat32, ReduceOp::kSum));
    if (r == 0) before = Resources::now(/*settle=*/false);
    BRAID_RETURN_IF_ERROR(comm.allReduce(check.data(), check.data(), 1, DataType::kFloat32, ReduceOp::kSum));
    for (int i = 0; i < calls; ++i) {
      const Status s = call(i);
      if (!s.isOk()) return Status(s.code(), fmt::format("call {}: {}", i, s.message()));
    }
    BRAID_RETURN_IF_ERROR(comm.allReduce(check.data(), check.data(), 1, DataType::kFloat32, ReduceOp::kSum));
    if (r == 0) after = Resources::now(/*settle=*/false);
    const Status last = comm.allReduce(check.data(), check.data(), 1, DataType::kFloat32, ReduceOp::kSum);
    done.arrive_and_wait();  // as in cycle()
    BRAID_RETURN_IF_ERROR(last);
    return Status::ok();
  });
  ASSERT_TRUE(status.isOk()) << status.toString();
  expectNoGrowth("collectives", transport, calls, before, after, 2048);
}

INSTANTIATE_TEST_SUITE_P(Transports, Leaks, ::testing::Values("threads", "shm", "tcp", "ucx"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

}  // namespace
}  // namespace braid
