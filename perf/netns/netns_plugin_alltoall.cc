// netns_plugin_alltoall: one rank of the emulated-host all-to-all over Braid's NCCL net plugin
// (libnccl-net-braid.so), driven the way NCCL's proxy drives a net plugin for a grouped send/recv all-to-all; run by
// perf/netns/run.sh as its --driver (docs/congestion.md "Measured on emulated hosts").
//
// The plugin is dlopen'ed (NETNS_NET_PLUGIN, else lib/libnccl-net-braid.so beside this program's bin/) and its
// newest table, ncclNetPlugin_v11, is used. Every rank opens one listen comm per peer, the handles go round over
// Braid's bootstrap (BRAID_RANK, BRAID_WORLD_SIZE, BRAID_ROOT: only the handles, barriers and the results travel
// there), and every rank connects a send comm to each peer and accepts a receive comm from each, retrying the
// non-blocking calls as NCCL does. The interface is NCCL_SOCKET_IFNAME, or BRAID_SOCKET_IFNAME when that is unset
// (run.sh sets the latter to eth0).
//
// An all-to-all of S bytes per peer moves each peer's block in chunks of --chunk bytes (default 512 KiB: NCCL's
// Simple step, NCCL_BUFFSIZE 4 MiB / NCCL_STEPS 8) with at most --window chunks (default 8, NCCL_STEPS) in flight
// per peer and direction (NETNS_CHUNK and NETNS_WINDOW set the defaults: run.sh's policies are environments),
// re-posting as chunks complete; peers are served starting from the next rank, as NCCL's p2p schedule staggers them.
// The plugin's congestion policy is its own (BRAID_CC_POLICY and the other BRAID_CC_* variables, read at init:
// adaptive receivers admit senders, runtime/nccl/net/admission.h); the driver only posts as NCCL's proxy does.
// Every iteration starts after a bootstrap barrier, sends data that depends on (iteration, sender, receiver, position)
// and checks every received byte. A rank's time runs from the barrier to its last completion; an iteration's completion
// time is the slowest rank's.
//
// Rank 0 prints, as netns_alltoall does:
//   SAMPLE <label> <size> <iteration> <completion_us>
//   CHECK <label> <size> <wrong_bytes>
// Exit status: 0 when every call succeeded and every byte was right, 1 otherwise, 2 on bad flags.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "braid/bootstrap.h"
#include "common/env.h"
#include "nccl/abi/net_abi.h"
#include "netns_flags.h"

namespace {

namespace abi = braid::nccl_abi;
using braid::netns::blockWord;

const char* kUsage =
    "usage: netns_plugin_alltoall [--sizes 1M,4M,16M] [--iters 20] [--warmup 2] [--label NAME] [--chunk 512K]\n"
    "                             [--window 8]\n"
    "  BRAID_RANK, BRAID_WORLD_SIZE, BRAID_ROOT (host:port) for the bootstrap; NETNS_NET_PLUGIN: the plugin's path;\n"
    "  NETNS_CHUNK, NETNS_WINDOW: defaults of --chunk and --window.\n"
    "  Sizes are bytes per peer (K/M/G suffixes), multiples of 8; --chunk a multiple of 8, --window 1..32.\n";

struct Options {
  uint64_t chunk = 512 << 10;
  int window = 8;
};

int fail(int rank, const std::string& what) {
  std::fprintf(stderr, "netns_plugin_alltoall rank %d: %s\n", rank, what.c_str());
  return 1;
}

std::string defaultPluginPath() {
  char exe[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  std::string dir = n > 0 ? std::string(exe, static_cast<size_t>(n)) : std::string("./netns_plugin_alltoall");
  dir = dir.substr(0, dir.find_last_of('/'));
  return dir + "/../lib/libnccl-net-braid.so";
}

/// One direction of one peer's block: its comm, memory handle and chunk bookkeeping.
struct Flow {
  void* comm = nullptr;
  void* mhandle = nullptr;
  uint64_t posted = 0;  // bytes posted so far
  uint64_t done = 0;    // bytes completed so far
  std::vector<void*> requests;
  std::vector<uint64_t> request_bytes;
};

class PluginAllToAll {
 public:
  PluginAllToAll(const abi::NetV11* net, braid::Bootstrap& bootstrap, Options options)
      : net_(net), boot_(bootstrap), options_(options), rank_(bootstrap.rank()), n_(bootstrap.size()) {}

  ~PluginAllToAll() {
    for (int p = 0; p < n_; ++p) {
      if (p == rank_) continue;
      if (sends_[p].mhandle != nullptr) net_->deregMr(sends_[p].comm, sends_[p].mhandle);
      if (recvs_[p].mhandle != nullptr) net_->deregMr(recvs_[p].comm, recvs_[p].mhandle);
      if (sends_[p].comm != nullptr) net_->closeSend(sends_[p].comm);
      if (recvs_[p].comm != nullptr) net_->closeRecv(recvs_[p].comm);
      if (listens_[p] != nullptr) net_->closeListen(listens_[p]);
    }
    if (ctx_ != nullptr) net_->finalize(ctx_);
  }

  /// Listens, exchanges handles, connects and accepts every pair; registers the buffers of `bytes_per_peer`.
  std::string connect(uint64_t bytes_per_peer) {
    if (net_->init(&ctx_, 1, nullptr, nullptr, nullptr) != 0) return "plugin init failed";
    sends_.resize(n_);
    recvs_.resize(n_);
    listens_.assign(n_, nullptr);
    // handles[r * n + p]: the handle rank r listens on for peer p.
    std::vector<char> handles(static_cast<size_t>(n_) * n_ * abi::kNetHandleMaxSize, 0);
    for (int p = 0; p < n_; ++p) {
      if (p == rank_) continue;
      char* mine = handles.data() + (static_cast<size_t>(rank_) * n_ + p) * abi::kNetHandleMaxSize;
      if (net_->listen(ctx_, 0, mine, &listens_[p]) != 0) return "listen failed";
    }
    const size_t per_rank = static_cast<size_t>(n_) * abi::kNetHandleMaxSize;
    braid::Status s = boot_.allGather(handles.data(), per_rank);
    if (!s.isOk()) return "handle exchange: " + s.toString();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (int left = 2 * (n_ - 1); left > 0;) {
      left = 0;
      for (int p = 0; p < n_; ++p) {
        if (p == rank_) continue;
        if (sends_[p].comm == nullptr) {
          char* theirs = handles.data() + (static_cast<size_t>(p) * n_ + rank_) * abi::kNetHandleMaxSize;
          if (net_->connect(ctx_, 0, theirs, &sends_[p].comm, nullptr) != 0) return "connect failed";
        }
        if (recvs_[p].comm == nullptr && net_->accept(listens_[p], &recvs_[p].comm, nullptr) != 0) {
          return "accept failed";
        }
        left += (sends_[p].comm == nullptr) + (recvs_[p].comm == nullptr);
      }
      if (left > 0 && std::chrono::steady_clock::now() > deadline) return "connections not up within 60 s";
    }
    send_.assign(bytes_per_peer / 8 * n_, 0);
    recv_.assign(bytes_per_peer / 8 * n_, 0);
    for (int p = 0; p < n_; ++p) {
      if (p == rank_) continue;
      if (net_->regMr(sends_[p].comm, send_.data(), send_.size() * 8, abi::kPtrHost, &sends_[p].mhandle) != 0 ||
          net_->regMr(recvs_[p].comm, recv_.data(), recv_.size() * 8, abi::kPtrHost, &recvs_[p].mhandle) != 0) {
        return "regMr failed";
      }
    }
    return "";
  }

  uint64_t* sendBlock(int peer, uint64_t bytes) { return send_.data() + bytes / 8 * peer; }
  const uint64_t* recvBlock(int peer, uint64_t bytes) const { return recv_.data() + bytes / 8 * peer; }
  void clearReceived(uint64_t bytes) { std::memset(recv_.data(), 0, bytes * n_); }

  /// One all-to-all of `bytes` per peer; "" when every chunk completed with its full size.
  std::string run(uint64_t bytes) {
    for (int p = 0; p < n_; ++p) {
      if (p == rank_) continue;
      for (Flow* f : {&sends_[p], &recvs_[p]}) {
        f->posted = f->done = 0;
        f->requests.assign(options_.window, nullptr);
        f->request_bytes.assign(options_.window, 0);
      }
    }
    for (bool busy = true; busy;) {
      busy = false;
      for (int k = 1; k < n_; ++k) {
        const int p = (rank_ + k) % n_;
        for (bool sending : {true, false}) {
          Flow& f = sending ? sends_[p] : recvs_[p];
          char* block = reinterpret_cast<char*>(sending ? send_.data() : recv_.data()) + bytes * p;
          const std::string error = progress(f, sending, block, bytes);
          if (!error.empty())
            return (sending ? "send to rank " : "receive from rank ") + std::to_string(p) + ": " + error;
          busy = busy || f.done < bytes;
        }
      }
    }
    return "";
  }

 private:
  /// Posts and tests the chunks of one flow whose peer block (of `bytes`) starts at `block`.
  std::string progress(Flow& f, bool sending, char* block, uint64_t bytes) {
    for (int w = 0; w < options_.window; ++w) {
      if (f.requests[w] == nullptr && f.posted < bytes) {
        const uint64_t len = std::min<uint64_t>(options_.chunk, bytes - f.posted);
        void* data = block + f.posted;
        int rc;
        if (sending) {
          rc = net_->isend(f.comm, data, len, 0, f.mhandle, nullptr, &f.requests[w]);
        } else {
          size_t size = len;
          int tag = 0;
          rc = net_->irecv(f.comm, 1, &data, &size, &tag, &f.mhandle, nullptr, &f.requests[w]);
        }
        if (rc != 0) return sending ? "isend failed" : "irecv failed";
        if (f.requests[w] != nullptr) {
          f.request_bytes[w] = len;
          f.posted += len;
        }
      }
      if (f.requests[w] != nullptr) {
        int finished = 0, size = 0;
        if (net_->test(f.requests[w], &finished, &size) != 0) return "test failed";
        if (finished) {
          if (static_cast<uint64_t>(size) != f.request_bytes[w]) {
            return "a chunk of " + std::to_string(f.request_bytes[w]) + " bytes completed with " + std::to_string(size);
          }
          f.done += f.request_bytes[w];
          f.requests[w] = nullptr;
        }
      }
    }
    return "";
  }

  const abi::NetV11* net_;
  braid::Bootstrap& boot_;
  Options options_;
  int rank_;
  int n_;
  void* ctx_ = nullptr;
  std::vector<Flow> sends_, recvs_;
  std::vector<void*> listens_;
  std::vector<uint64_t> send_, recv_;
};

bool parseCount(const std::string& value, uint64_t* out) {
  const std::optional<uint64_t> v = braid::parseNcclTestsSize(value);
  if (!v || *v == 0 || *v % 8 != 0) return false;
  *out = *v;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  braid::netns::Flags flags;
  Options options;
  // NETNS_CHUNK / NETNS_WINDOW set the defaults, so run.sh's policies (environments) can compare chunkings.
  const char* chunk_env = std::getenv("NETNS_CHUNK");
  const char* window_env = std::getenv("NETNS_WINDOW");
  const auto window_ok = [&](const std::string& value) {
    char* end = nullptr;
    const long n = std::strtol(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || n < 1 || n > abi::kNetMaxRequests) return false;
    options.window = static_cast<int>(n);
    return true;
  };
  if ((chunk_env != nullptr && !parseCount(chunk_env, &options.chunk)) ||
      (window_env != nullptr && !window_ok(window_env))) {
    std::fprintf(stderr, "netns_plugin_alltoall: bad NETNS_CHUNK or NETNS_WINDOW\n%s", kUsage);
    return 2;
  }
  const bool ok = braid::netns::parseFlags(argc, argv, &flags, [&](const std::string& flag, const std::string& value) {
    if (flag == "--chunk") return parseCount(value, &options.chunk);
    if (flag == "--window") return window_ok(value);
    return false;
  });
  if (!ok) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string socket_if = braid::envString("BRAID_SOCKET_IFNAME");
  if (std::getenv("NCCL_SOCKET_IFNAME") == nullptr && !socket_if.empty()) {
    setenv("NCCL_SOCKET_IFNAME", socket_if.c_str(), 1);
  }
  const char* plugin_env = std::getenv("NETNS_NET_PLUGIN");
  const std::string plugin = plugin_env != nullptr ? plugin_env : defaultPluginPath();
  void* lib = dlopen(plugin.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return fail(-1, "dlopen " + plugin + ": " + dlerror());
  const auto* net = static_cast<const abi::NetV11*>(dlsym(lib, "ncclNetPlugin_v11"));
  if (net == nullptr) return fail(-1, plugin + " has no ncclNetPlugin_v11");

  auto bootstrap = braid::bootstrapFromEnvironment();
  if (!bootstrap.isOk()) return fail(-1, "bootstrap: " + bootstrap.status().toString());
  braid::Bootstrap& boot = **bootstrap;
  const int rank = boot.rank();
  const int n = boot.size();
  uint64_t max_size = 0;
  for (uint64_t s : flags.sizes) max_size = std::max(max_size, s);
  int status = 0;
  {
    PluginAllToAll a2a(net, boot, options);
    const std::string error = a2a.connect(max_size);
    if (!error.empty()) return fail(rank, error);
    for (const uint64_t size : flags.sizes) {
      const uint64_t words = size / 8;
      std::vector<double> times(flags.iters, 0.0);
      uint64_t wrong = 0;
      for (int it = -flags.warmup; it < flags.iters; ++it) {
        const int tag = it + flags.warmup;  // data differs in every iteration, warm-up included
        for (int p = 0; p < n; ++p) {
          uint64_t* block = a2a.sendBlock(p, size);
          for (uint64_t w = 0; w < words; ++w) block[w] = blockWord(tag, rank, p, w);
        }
        a2a.clearReceived(size);
        braid::Status s = boot.barrier();
        if (!s.isOk()) return fail(rank, "barrier: " + s.toString());
        const auto start = std::chrono::steady_clock::now();
        const std::string run_error = a2a.run(size);
        const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
        if (!run_error.empty()) return fail(rank, run_error);
        for (int p = 0; p < n; ++p) {
          if (p == rank) continue;
          const uint64_t* block = a2a.recvBlock(p, size);
          for (uint64_t w = 0; w < words; ++w) wrong += block[w] != blockWord(tag, p, rank, w) ? 8 : 0;
        }
        if (it >= 0) times[it] = us;
      }
      // Completion time of an iteration: the slowest rank's; wrong bytes summed over the ranks.
      std::vector<double> all(static_cast<size_t>(flags.iters + 1) * n);
      std::copy(times.begin(), times.end(), all.begin() + static_cast<size_t>(flags.iters + 1) * rank);
      all[static_cast<size_t>(flags.iters + 1) * rank + flags.iters] = static_cast<double>(wrong);
      braid::Status s = boot.allGather(all.data(), sizeof(double) * (flags.iters + 1));
      if (!s.isOk()) return fail(rank, "gather results: " + s.toString());
      double wrong_all = 0;
      std::vector<double> slowest(flags.iters, 0.0);
      for (int r = 0; r < n; ++r) {
        const double* row = all.data() + static_cast<size_t>(flags.iters + 1) * r;
        for (int it = 0; it < flags.iters; ++it) slowest[it] = std::max(slowest[it], row[it]);
        wrong_all += row[flags.iters];
      }
      if (wrong_all != 0) status = 1;
      if (rank == 0) {
        for (int it = 0; it < flags.iters; ++it) {
          std::printf("SAMPLE %s %llu %d %.1f\n", flags.label.c_str(), static_cast<unsigned long long>(size), it,
                      slowest[it]);
        }
        std::printf("CHECK %s %llu %.0f\n", flags.label.c_str(), static_cast<unsigned long long>(size), wrong_all);
        std::fflush(stdout);
      }
    }
    braid::Status s = boot.barrier();  // nobody closes a comm while a peer still receives on it
    if (!s.isOk()) return fail(rank, "final barrier: " + s.toString());
  }
  return status;
}
