// netns_alltoall: one rank of the emulated-host all-to-all measurement (perf/netns/run.sh, docs/congestion.md
// "Measured on emulated hosts"). Each rank runs in its own network namespace; run.sh starts one per host with
// BRAID_RANK, BRAID_WORLD_SIZE, BRAID_ROOT and BRAID_SOCKET_IFNAME set, BRAID_TRANSPORT=tcp and the congestion
// policy under test (BRAID_CC_POLICY).
//
// For every size S (bytes per peer) it runs `--warmup` untimed and `--iters` timed all-to-alls (allToAllv with S
// bytes to every peer: the communicator's direct exchange, one send and one receive threadblock per peer, posted
// at once, each rank starting at the next rank). Every iteration starts after a barrier (an 8-byte all-reduce),
// sends data that depends on (iteration, sender, receiver, position) and checks every received byte. A rank's time
// is from the barrier to the end of its all-to-all; the iteration's completion time is the largest over the ranks.
//
// Rank 0 prints one line per timed iteration and one per size, for run.sh to collect:
//   SAMPLE <label> <size> <iteration> <completion_us>
//   CHECK <label> <size> <wrong_bytes>
// Exit status: 0 when every call succeeded and every byte was right, 1 otherwise, 2 on bad flags.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "braid/bootstrap.h"
#include "braid/comm.h"
#include "netns_flags.h"

namespace {

using braid::netns::blockWord;

const char* kUsage =
    "usage: netns_alltoall [--sizes 1M,4M,16M] [--iters 20] [--warmup 2] [--label NAME]\n"
    "  BRAID_RANK, BRAID_WORLD_SIZE, BRAID_ROOT (host:port) as for braidCommInitEnv; BRAID_TRANSPORT picks the\n"
    "  transport (run.sh: tcp). Sizes are bytes per peer (K/M/G suffixes), multiples of 8.\n";

int fail(int rank, const char* what, const braid::Status& status) {
  std::fprintf(stderr, "netns_alltoall rank %d: %s: %s\n", rank, what, status.toString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  braid::netns::Flags flags;
  if (!braid::netns::parseFlags(argc, argv, &flags, [](const std::string&, const std::string&) { return false; })) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  auto bootstrap = braid::bootstrapFromEnvironment();
  if (!bootstrap.isOk()) return fail(-1, "bootstrap", bootstrap.status());
  auto created = braid::Communicator::create(std::move(*bootstrap));
  if (!created.isOk()) return fail(-1, "communicator", created.status());
  braid::Communicator& comm = **created;
  const int rank = comm.rank();
  const int n = comm.size();
  uint64_t max_size = 0;
  for (uint64_t s : flags.sizes) max_size = std::max(max_size, s);
  const uint64_t max_words = max_size / 8;
  std::vector<uint64_t> send(max_words * n), recv(max_words * n);
  std::vector<size_t> counts(n), displs(n);
  uint64_t token = 0, token_out = 0;
  int status = 0;

  for (const uint64_t size : flags.sizes) {
    const uint64_t words = size / 8;
    for (int p = 0; p < n; ++p) {
      counts[p] = words;
      displs[p] = words * p;
    }
    std::vector<double> times(flags.iters, 0.0);
    uint64_t wrong = 0;
    for (int it = -flags.warmup; it < flags.iters; ++it) {
      const int tag = it + flags.warmup;  // data differs in every iteration, warm-up included
      for (int p = 0; p < n; ++p) {
        for (uint64_t w = 0; w < words; ++w) send[displs[p] + w] = blockWord(tag, rank, p, w);
      }
      std::memset(recv.data(), 0, words * n * 8);
      braid::Status s = comm.allReduce(&token, &token_out, 1, braid::DataType::kUint64, braid::ReduceOp::kMax);
      if (!s.isOk()) return fail(rank, "barrier", s);
      const auto start = std::chrono::steady_clock::now();
      s = comm.allToAllv(send.data(), counts.data(), displs.data(), recv.data(), counts.data(), displs.data(),
                         braid::DataType::kUint64);
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
      if (!s.isOk()) return fail(rank, "alltoallv", s);
      for (int p = 0; p < n; ++p) {
        for (uint64_t w = 0; w < words; ++w) wrong += recv[displs[p] + w] != blockWord(tag, p, rank, w) ? 8 : 0;
      }
      if (it >= 0) times[it] = us;
    }
    // Completion time of an iteration: the slowest rank's; wrong bytes summed over the ranks.
    std::vector<double> slowest(flags.iters);
    braid::Status s =
        comm.allReduce(times.data(), slowest.data(), times.size(), braid::DataType::kFloat64, braid::ReduceOp::kMax);
    if (!s.isOk()) return fail(rank, "gather times", s);
    uint64_t wrong_all = 0;
    s = comm.allReduce(&wrong, &wrong_all, 1, braid::DataType::kUint64, braid::ReduceOp::kSum);
    if (!s.isOk()) return fail(rank, "gather checks", s);
    if (wrong_all != 0) status = 1;
    if (rank == 0) {
      for (int it = 0; it < flags.iters; ++it) {
        std::printf("SAMPLE %s %llu %d %.1f\n", flags.label.c_str(), static_cast<unsigned long long>(size), it,
                    slowest[it]);
      }
      std::printf("CHECK %s %llu %llu\n", flags.label.c_str(), static_cast<unsigned long long>(size),
                  static_cast<unsigned long long>(wrong_all));
      std::fflush(stdout);
    }
  }
  return status;
}
