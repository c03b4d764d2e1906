// braid_nccl_ranks: an nccl-tests-style driver of real NCCL with N rank processes on one GPU (perf/device/run.sh,
// docs/gpu.md "Device script").
//
// The launcher (this process without --rank) checks that CUDA sees a GPU, takes an ncclUniqueId and execs N copies
// of itself, one per rank, each with NCCL_HOSTID=<prefix><rank>: NCCL then treats the ranks as separate hosts and
// moves data between them through its network transport (its own socket transport, or the net plugin that
// NCCL_NET_PLUGIN names). The driver takes no position on the transport: NCCL_NET_PLUGIN, NCCL_NET,
// NCCL_TUNER_PLUGIN, LD_PRELOAD and every other variable reach the ranks unchanged.
//
// Each rank runs every collective of -c (all_reduce: float sum; all_gather; alltoall: grouped ncclSend/ncclRecv as
// nccl-tests does) out-of-place over the sizes -b, -b*f, ... <= -e, -w warm-up and -i timed calls per size, checks
// every element of its output against a value computed on the host from the position-dependent inputs, and reports
// (collective, size, seconds per call, wrong elements) to the launcher through a pipe. The launcher prints one
// nccl-tests-style table per collective: size = bytes nccl-tests calls the size (all_reduce: the buffer; all_gather:
// the gathered output; alltoall: each rank's send buffer), time = the slowest rank's mean µs per call, algbw =
// size / time (GB/s, 1e9 bytes), busbw = algbw × nccl-tests' factor (all_reduce 2(n-1)/n, all_gather and alltoall
// (n-1)/n), #wrong = wrong elements summed over ranks. A closing line per collective, "# result <coll>
// bytes=<largest> busbw=<at largest> avg_busbw=<mean over sizes> wrong=<total>", is for scripts.
//
// Inputs: rank r's send element i is ((131 r + 7 i) mod 251) - 125 (integers, so every sum of up to 64 ranks is
// exact in fp32 in any order); receive buffers start as NaN, so an element nothing wrote is counted wrong.
//
// Exit status: 0 all results right; 1 a wrong element, or a CUDA or NCCL call failed (the message names the call and
// the rank), or a rank died or the run passed --timeout; 2 bad arguments; 3 no usable GPU (CUDA reports no device or
// cannot start: the message gives CUDA's reason).
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <nccl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

extern char** environ;

namespace {

constexpr int kExitWrong = 1;
constexpr int kExitUsage = 2;
constexpr int kExitNoGpu = 3;

enum class Coll { kAllReduce, kAllGather, kAllToAll };

struct CollInfo {
  Coll coll;
  const char* name;
};
constexpr CollInfo kColls[] = {
    {Coll::kAllReduce, "all_reduce"}, {Coll::kAllGather, "all_gather"}, {Coll::kAllToAll, "alltoall"}};

struct Options {
  int ranks = 4;
  int device = 0;
  uint64_t min_bytes = 1024;
  uint64_t max_bytes = 64ull << 20;
  uint64_t factor = 2;
  int warmup = 5;
  int iterations = 20;
  int timeout_s = 600;
  std::vector<Coll> colls = {Coll::kAllReduce, Coll::kAllGather, Coll::kAllToAll};
  std::string hostid_prefix = "braid-host-";
  std::string braid_hostid_prefix;  // non-empty: BRAID_HOSTID of rank r is this and r
  std::string label;
  // Rank mode (set by the launcher only).
  int rank = -1;
  std::string id_hex;
  int report_fd = -1;
};

const char* collName(Coll c) {
  for (const CollInfo& info : kColls)
    if (info.coll == c) return info.name;
  return "?";
}

void usage(FILE* out) {
  std::fprintf(out,
               "usage: braid_nccl_ranks [-n RANKS] [-d DEVICE] [-b MINBYTES] [-e MAXBYTES] [-f FACTOR] [-w WARMUP]\n"
               "                        [-i ITERS] [-c all_reduce,all_gather,alltoall] [--timeout S]\n"
               "                        [--hostid-prefix P] [--braid-hostid-prefix P] [--label TEXT]\n"
               "  -n  rank processes on the one GPU (2..64, default 4)   -d  CUDA device (default 0)\n"
               "  -b/-e  smallest/largest size in bytes, K/M/G suffixes (default 1K / 64M)\n"
               "  -f  size factor (>= 2, default 2)   -w  warm-up calls (default 5)   -i  timed calls (default 20)\n"
               "  -c  collectives, comma-separated (default all three)\n"
               "  --timeout  seconds the whole run may take before the ranks are stopped (default 600)\n"
               "  --hostid-prefix  NCCL_HOSTID of rank r is PREFIX<r> (default braid-host-)\n"
               "  --braid-hostid-prefix  BRAID_HOSTID of rank r is PREFIX<r>, so that Braid (the NCCL-API shim) sees\n"
               "                   every rank as its own host too (default: BRAID_HOSTID passes unchanged)\n"
               "  --label  text printed in the header (e.g. the transport under test)\n"
               "exit: 0 ok, 1 wrong result or failed call, 2 bad arguments, 3 no usable GPU\n");
}

bool parseBytes(const std::string& text, uint64_t* out) {
  if (text.empty() || text[0] < '0' || text[0] > '9') return false;
  size_t used = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(text, &used);
  } catch (...) {
    return false;
  }
  const std::string unit = text.substr(used);
  uint64_t scale = unit.empty()  ? 1
                   : unit == "K" ? 1ull << 10
                   : unit == "M" ? 1ull << 20
                   : unit == "G" ? 1ull << 30
                                 : 0;
  if (scale == 0 || value > (1ull << 40) / scale) return false;
  *out = value * scale;
  return true;
}

bool parseInt(const std::string& text, int lo, int hi, int* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (*end != '\0' || value < lo || value > hi) return false;
  *out = static_cast<int>(value);
  return true;
}

/// Parses argv; on error prints what is wrong and returns false.
bool parseArgs(int argc, char** argv, Options* o, bool* help) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      *help = true;
      return true;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "braid_nccl_ranks: %s needs a value\n", flag.c_str());
      return false;
    }
    const std::string value = argv[++i];
    bool ok = true;
    if (flag == "-n") {
      ok = parseInt(value, 2, 64, &o->ranks);
    } else if (flag == "-d") {
      ok = parseInt(value, 0, 1024, &o->device);
    } else if (flag == "-b") {
      ok = parseBytes(value, &o->min_bytes) && o->min_bytes > 0;
    } else if (flag == "-e") {
      ok = parseBytes(value, &o->max_bytes) && o->max_bytes > 0;
    } else if (flag == "-f") {
      int f = 0;
      ok = parseInt(value, 2, 1024, &f);
      o->factor = static_cast<uint64_t>(f);
    } else if (flag == "-w") {
      ok = parseInt(value, 0, 100000, &o->warmup);
    } else if (flag == "-i") {
      ok = parseInt(value, 1, 100000, &o->iterations);
    } else if (flag == "--timeout") {
      ok = parseInt(value, 1, 86400, &o->timeout_s);
    } else if (flag == "-c") {
      o->colls.clear();
      std::stringstream list(value);
      std::string name;
      while (ok && std::getline(list, name, ',')) {
        ok = false;
        for (const CollInfo& info : kColls) {
          if (name == info.name) {
            if (std::find(o->colls.begin(), o->colls.end(), info.coll) == o->colls.end()) o->colls.push_back(info.coll);
            ok = true;
          }
        }
      }
      ok = ok && !o->colls.empty();
    } else if (flag == "--hostid-prefix") {
      o->hostid_prefix = value;
    } else if (flag == "--braid-hostid-prefix") {
      o->braid_hostid_prefix = value;
      ok = !value.empty();
    } else if (flag == "--label") {
      o->label = value;
    } else if (flag == "--rank") {
      ok = parseInt(value, 0, 63, &o->rank);
    } else if (flag == "--id") {
      o->id_hex = value;
      ok = value.size() == 2 * sizeof(ncclUniqueId) && value.find_first_not_of("0123456789abcdef") == std::string::npos;
    } else if (flag == "--report-fd") {
      ok = parseInt(value, 3, 1 << 20, &o->report_fd);
    } else {
      std::fprintf(stderr, "braid_nccl_ranks: unknown flag %s\n", flag.c_str());
      return false;
    }
    if (!ok) {
      std::fprintf(stderr, "braid_nccl_ranks: bad value for %s: '%s'\n", flag.c_str(), value.c_str());
      return false;
    }
  }
  if (o->min_bytes > o->max_bytes) {
    std::fprintf(stderr, "braid_nccl_ranks: -b (%llu) is larger than -e (%llu)\n",
                 static_cast<unsigned long long>(o->min_bytes), static_cast<unsigned long long>(o->max_bytes));
    return false;
  }
  if (o->rank >= o->ranks) {
    std::fprintf(stderr, "braid_nccl_ranks: --rank %d with -n %d\n", o->rank, o->ranks);
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------------------------
// What each rank sends and what it must receive.

float input(int rank, uint64_t i) { return static_cast<float>(static_cast<int>((131ull * rank + 7 * i) % 251) - 125); }

/// Elements of the operation at `bytes` (nccl-tests' count: of the all-reduce buffer, the gathered output, a rank's
/// alltoall send buffer), rounded down to a multiple of the rank count for all_gather and alltoall.
uint64_t countOf(Coll c, uint64_t bytes, int n) {
  uint64_t count = bytes / sizeof(float);
  if (c != Coll::kAllReduce) count -= count % static_cast<uint64_t>(n);
  return count;
}

/// Expected element i of rank r's output.
float expected(Coll c, int r, int n, uint64_t count, uint64_t i) {
  switch (c) {
    case Coll::kAllReduce: {
      float sum = 0;
      for (int p = 0; p < n; ++p) sum += input(p, i);
      return sum;
    }
    case Coll::kAllGather: {
      const uint64_t per = count / n;
      return input(static_cast<int>(i / per), i % per);
    }
    case Coll::kAllToAll: {
      const uint64_t per = count / n;
      return input(static_cast<int>(i / per), static_cast<uint64_t>(r) * per + i % per);
    }
  }
  return 0;
}

/// nccl-tests' bus-bandwidth factor.
double busFactor(Coll c, int n) { return c == Coll::kAllReduce ? 2.0 * (n - 1) / n : static_cast<double>(n - 1) / n; }

// ---------------------------------------------------------------------------------------------------------------
// A rank.

#define RANK_CUDA(call)                                                                                    \
  do {                                                                                                     \
    const cudaError_t e_ = (call);                                                                         \
    if (e_ != cudaSuccess) {                                                                               \
      std::fprintf(stderr, "braid_nccl_ranks: rank %d: %s: %s: %s\n", o.rank, #call, cudaGetErrorName(e_), \
                   cudaGetErrorString(e_));                                                                \
      return kExitWrong;                                                                                   \
    }                                                                                                      \
  } while (0)
// RANK_NCCL_RESULT(what, result): a failed NCCL result ends the rank, naming `what` (a string).
#define RANK_NCCL_RESULT(what, result)                                                                       \
  do {                                                                                                       \
    const ncclResult_t r_ = (result);                                                                        \
    if (r_ != ncclSuccess) {                                                                                 \
      std::fprintf(stderr, "braid_nccl_ranks: rank %d: %s: %s (%s)\n", o.rank, what, ncclGetErrorString(r_), \
                   ncclGetLastError(nullptr));                                                               \
      return kExitWrong;                                                                                     \
    }                                                                                                        \
  } while (0)
#define RANK_NCCL(call) RANK_NCCL_RESULT(#call, call)

ncclResult_t runOnce(Coll c, const float* send, float* recv, uint64_t count, int n, ncclComm_t comm,
                     cudaStream_t stream) {
  switch (c) {
    case Coll::kAllReduce: return ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, comm, stream);
    case Coll::kAllGather: return ncclAllGather(send, recv, count / n, ncclFloat32, comm, stream);
    case Coll::kAllToAll: {
      const uint64_t per = count / n;
      ncclResult_t result = ncclGroupStart();
      for (int p = 0; p < n && result == ncclSuccess; ++p) {
        result = ncclSend(send + p * per, per, ncclFloat32, p, comm, stream);
        if (result == ncclSuccess) result = ncclRecv(recv + p * per, per, ncclFloat32, p, comm, stream);
      }
      const ncclResult_t ended = ncclGroupEnd();
      return result != ncclSuccess ? result : ended;
    }
  }
  return ncclInvalidArgument;
}

std::vector<uint64_t> sizesOf(const Options& o) {
  std::vector<uint64_t> sizes;
  for (uint64_t s = o.min_bytes; s <= o.max_bytes; s *= o.factor) {
    sizes.push_back(s);
    if (s > o.max_bytes / o.factor) break;
  }
  return sizes;
}

int rankMain(const Options& o) {
  ncclUniqueId id;
  for (size_t i = 0; i < sizeof(id); ++i) {
    id.internal[i] = static_cast<char>(std::stoi(o.id_hex.substr(2 * i, 2), nullptr, 16));
  }
  const int n = o.ranks;
  RANK_CUDA(cudaSetDevice(o.device));
  ncclComm_t comm = nullptr;
  // Inside a group, as nccl-tests creates its communicators (NCCL initialises them at ncclGroupEnd).
  RANK_NCCL(ncclGroupStart());
  const ncclResult_t init = ncclCommInitRank(&comm, n, id, o.rank);
  if (init != ncclSuccess) ncclGroupEnd();
  RANK_NCCL_RESULT("ncclCommInitRank(&comm, n, id, o.rank)", init);
  RANK_NCCL(ncclGroupEnd());
  cudaStream_t stream;
  RANK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const std::vector<uint64_t> sizes = sizesOf(o);
  const uint64_t max_count = sizes.back() / sizeof(float);
  float* send = nullptr;
  float* recv = nullptr;
  RANK_CUDA(cudaMalloc(&send, std::max<uint64_t>(max_count, 1) * sizeof(float)));
  RANK_CUDA(cudaMalloc(&recv, std::max<uint64_t>(max_count, 1) * sizeof(float)));
  std::vector<float> host(max_count);
  for (uint64_t i = 0; i < max_count; ++i) host[i] = input(o.rank, i);
  std::vector<float> out(max_count);
  for (Coll c : o.colls) {
    for (uint64_t bytes : sizes) {
      const uint64_t count = countOf(c, bytes, n);
      if (count == 0) continue;
      // all_gather sends count / n elements: the first count / n of the same input sequence.
      const uint64_t send_count = c == Coll::kAllGather ? count / n : count;
      RANK_CUDA(cudaMemcpy(send, host.data(), send_count * sizeof(float), cudaMemcpyHostToDevice));
      RANK_CUDA(cudaMemset(recv, 0xff, count * sizeof(float)));  // NaN: unwritten elements read as wrong
      RANK_CUDA(cudaDeviceSynchronize());  // both done before NCCL's stream (non-blocking) touches the buffers
      for (int i = 0; i < o.warmup; ++i) RANK_NCCL(runOnce(c, send, recv, count, n, comm, stream));
      RANK_CUDA(cudaStreamSynchronize(stream));
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < o.iterations; ++i) RANK_NCCL(runOnce(c, send, recv, count, n, comm, stream));
      RANK_CUDA(cudaStreamSynchronize(stream));
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / o.iterations;
      ncclResult_t async = ncclSuccess;
      RANK_NCCL(ncclCommGetAsyncError(comm, &async));
      RANK_NCCL(async);
      RANK_CUDA(cudaMemcpy(out.data(), recv, count * sizeof(float), cudaMemcpyDeviceToHost));
      uint64_t wrong = 0;
      for (uint64_t i = 0; i < count; ++i) {
        const float want = expected(c, o.rank, n, count, i);
        if (!(out[i] == want)) {
          if (wrong == 0) {
            std::fprintf(stderr, "braid_nccl_ranks: rank %d: %s %llu B: element %llu is %g, expected %g\n", o.rank,
                         collName(c), static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(i),
                         out[i], want);
          }
          ++wrong;
        }
      }
      dprintf(o.report_fd, "%d %s %llu %llu %.9e %llu\n", o.rank, collName(c), static_cast<unsigned long long>(bytes),
              static_cast<unsigned long long>(count), seconds, static_cast<unsigned long long>(wrong));
    }
  }
  RANK_CUDA(cudaFree(send));
  RANK_CUDA(cudaFree(recv));
  RANK_NCCL(ncclCommFinalize(comm));
  RANK_NCCL(ncclCommDestroy(comm));
  return 0;
}

// ---------------------------------------------------------------------------------------------------------------
// The launcher.

struct Row {
  uint64_t count = 0;
  double max_seconds = 0;
  uint64_t wrong = 0;
  int ranks = 0;
};

std::string toHex(const ncclUniqueId& id) {
  std::string hex;
  char pair[3];
  for (size_t i = 0; i < sizeof(id); ++i) {
    std::snprintf(pair, sizeof(pair), "%02x", static_cast<unsigned char>(id.internal[i]));
    hex += pair;
  }
  return hex;
}

void stopAll(const std::vector<pid_t>& pids, const std::vector<bool>& done) {
  for (size_t r = 0; r < pids.size(); ++r)
    if (!done[r]) kill(pids[r], SIGKILL);
}

int launcherMain(const Options& o, char** argv) {
  int devices = 0;
  const cudaError_t counted = cudaGetDeviceCount(&devices);
  if (counted != cudaSuccess) {
    std::fprintf(stderr, "braid_nccl_ranks: no usable GPU: cudaGetDeviceCount: %s: %s\n", cudaGetErrorName(counted),
                 cudaGetErrorString(counted));
    return kExitNoGpu;
  }
  if (devices == 0) {
    std::fprintf(stderr, "braid_nccl_ranks: no usable GPU: cudaGetDeviceCount found 0 devices\n");
    return kExitNoGpu;
  }
  if (o.device >= devices) {
    std::fprintf(stderr, "braid_nccl_ranks: -d %d, but CUDA sees %d device(s)\n", o.device, devices);
    return kExitUsage;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, o.device) != cudaSuccess) std::snprintf(prop.name, sizeof(prop.name), "?");
  int version = 0;
  ncclGetVersion(&version);
  ncclUniqueId id;
  const ncclResult_t got = ncclGetUniqueId(&id);
  if (got != ncclSuccess) {
    std::fprintf(stderr, "braid_nccl_ranks: ncclGetUniqueId: %s (%s)\n", ncclGetErrorString(got),
                 ncclGetLastError(nullptr));
    return kExitWrong;
  }
  const std::string hex = toHex(id);

  // Each rank's argv and environment are built before any fork (the launcher has NCCL's bootstrap thread).
  std::vector<std::string> base_env;
  for (char** e = environ; *e != nullptr; ++e)
    if (std::strncmp(*e, "NCCL_HOSTID=", 12) != 0 &&
        (o.braid_hostid_prefix.empty() || std::strncmp(*e, "BRAID_HOSTID=", 13) != 0)) {
      base_env.emplace_back(*e);
    }
  std::vector<pid_t> pids(static_cast<size_t>(o.ranks), -1);
  std::vector<int> fds(static_cast<size_t>(o.ranks), -1);
  std::fflush(stdout);
  std::fflush(stderr);
  for (int r = 0; r < o.ranks; ++r) {
    int pipe_fds[2];  // close-on-exec: only rank r's write end, reopened in its child, crosses the exec
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
      std::perror("braid_nccl_ranks: pipe");
      return kExitWrong;
    }
    std::vector<std::string> args;
    for (int i = 0; argv[i] != nullptr; ++i) args.emplace_back(argv[i]);
    for (const std::string& extra : {std::string("--rank"), std::to_string(r), std::string("--id"), hex,
                                     std::string("--report-fd"), std::to_string(pipe_fds[1])})
      args.push_back(extra);
    std::vector<std::string> env = base_env;
    env.push_back("NCCL_HOSTID=" + o.hostid_prefix + std::to_string(r));
    if (!o.braid_hostid_prefix.empty()) env.push_back("BRAID_HOSTID=" + o.braid_hostid_prefix + std::to_string(r));
    std::vector<char*> arg_ptrs, env_ptrs;
    for (std::string& a : args) arg_ptrs.push_back(a.data());
    arg_ptrs.push_back(nullptr);
    for (std::string& e : env) env_ptrs.push_back(e.data());
    env_ptrs.push_back(nullptr);
    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("braid_nccl_ranks: fork");
      return kExitWrong;
    }
    if (pid == 0) {
      fcntl(pipe_fds[1], F_SETFD, 0);
      execve("/proc/self/exe", arg_ptrs.data(), env_ptrs.data());
      const char msg[] = "braid_nccl_ranks: execve /proc/self/exe failed\n";
      const ssize_t ignored = write(2, msg, sizeof(msg) - 1);
      (void)ignored;
      _exit(kExitWrong);
    }
    close(pipe_fds[1]);
    pids[r] = pid;
    fds[r] = pipe_fds[0];
  }

  // Read every rank's report until all pipes close; stop everyone when a rank fails or the time is up.
  std::vector<std::string> text(static_cast<size_t>(o.ranks));
  std::vector<bool> done(static_cast<size_t>(o.ranks), false);
  std::vector<int> codes(static_cast<size_t>(o.ranks), -1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.timeout_s);
  bool failed = false;
  bool timed_out = false;
  int open_fds = o.ranks;
  while (open_fds > 0 || std::find(done.begin(), done.end(), false) != done.end()) {
    std::vector<pollfd> polls;
    std::vector<int> which;
    for (int r = 0; r < o.ranks; ++r) {
      if (fds[r] >= 0) {
        polls.push_back({fds[r], POLLIN, 0});
        which.push_back(r);
      }
    }
    if (!polls.empty() && poll(polls.data(), polls.size(), 100) > 0) {
      for (size_t k = 0; k < polls.size(); ++k) {
        if (polls[k].revents == 0) continue;
        char buf[4096];
        const ssize_t got_bytes = read(polls[k].fd, buf, sizeof(buf));
        if (got_bytes > 0) {
          text[which[k]].append(buf, static_cast<size_t>(got_bytes));
        } else {
          close(polls[k].fd);
          fds[which[k]] = -1;
          --open_fds;
        }
      }
    } else if (polls.empty()) {
      usleep(20000);
    }
    for (int r = 0; r < o.ranks; ++r) {
      if (done[r]) continue;
      int status = 0;
      if (waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        done[r] = true;
        codes[r] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (codes[r] != 0 && !failed) {
          failed = true;
          std::fprintf(stderr, "braid_nccl_ranks: rank %d ended with status %d; stopping the other ranks\n", r,
                       codes[r]);
          stopAll(pids, done);
        }
      }
    }
    if (!failed && std::chrono::steady_clock::now() > deadline) {
      failed = timed_out = true;
      std::fprintf(stderr, "braid_nccl_ranks: the run passed --timeout %d s; stopping the ranks\n", o.timeout_s);
      stopAll(pids, done);
    }
  }

  // Aggregate: per (collective, size) the slowest rank's time and the sum of wrong elements.
  std::map<std::pair<int, uint64_t>, Row> rows;
  for (int r = 0; r < o.ranks; ++r) {
    std::istringstream lines(text[r]);
    std::string line;
    while (std::getline(lines, line)) {
      std::istringstream fields(line);
      int rank = -1;
      std::string name;
      unsigned long long bytes = 0, count = 0, wrong = 0;
      double seconds = 0;
      if (!(fields >> rank >> name >> bytes >> count >> seconds >> wrong)) continue;
      int index = -1;
      for (int k = 0; k < 3; ++k)
        if (name == kColls[k].name) index = k;
      if (index < 0) continue;
      Row& row = rows[{index, bytes}];
      row.count = count;
      row.max_seconds = std::max(row.max_seconds, seconds);
      row.wrong += wrong;
      row.ranks += 1;
    }
  }

  std::printf(
      "# braid_nccl_ranks: %d ranks on GPU %d (%s), NCCL %d.%d.%d, float32, out-of-place, %d warm-up + %d "
      "timed calls per size%s%s\n",
      o.ranks, o.device, prop.name, version / 10000, version / 100 % 100, version % 100, o.warmup, o.iterations,
      o.label.empty() ? "" : ", ", o.label.c_str());
  uint64_t total_wrong = 0;
  bool missing = false;
  const std::vector<uint64_t> sizes = sizesOf(o);
  for (Coll c : o.colls) {
    const int index = static_cast<int>(c);
    std::printf("#\n# %s%s\n", collName(c), c == Coll::kAllReduce ? " (sum)" : "");
    std::printf("# %12s %12s %6s %6s %10s %10s %10s %8s\n", "size(B)", "count", "type", "redop", "time(us)", "algbw",
                "busbw", "#wrong");
    double bus_sum = 0, last_bus = 0;
    uint64_t last_bytes = 0, coll_wrong = 0;
    int measured = 0;
    for (uint64_t bytes : sizes) {
      if (countOf(c, bytes, o.ranks) == 0) continue;
      auto it = rows.find({index, bytes});
      if (it == rows.end() || it->second.ranks != o.ranks) {
        missing = true;
        std::printf("  %12llu %12s %6s %6s %10s %10s %10s %8s\n", static_cast<unsigned long long>(bytes), "-", "float",
                    c == Coll::kAllReduce ? "sum" : "none", "-", "-", "-", "missing");
        continue;
      }
      const Row& row = it->second;
      const double algbw = static_cast<double>(row.count * sizeof(float)) / row.max_seconds / 1e9;
      const double busbw = algbw * busFactor(c, o.ranks);
      std::printf("  %12llu %12llu %6s %6s %10.2f %10.3f %10.3f %8llu\n", static_cast<unsigned long long>(bytes),
                  static_cast<unsigned long long>(row.count), "float", c == Coll::kAllReduce ? "sum" : "none",
                  row.max_seconds * 1e6, algbw, busbw, static_cast<unsigned long long>(row.wrong));
      bus_sum += busbw;
      last_bus = busbw;
      last_bytes = bytes;
      coll_wrong += row.wrong;
      ++measured;
    }
    total_wrong += coll_wrong;
    std::printf("# result %s bytes=%llu busbw=%.3f avg_busbw=%.3f wrong=%llu\n", collName(c),
                static_cast<unsigned long long>(last_bytes), last_bus, measured > 0 ? bus_sum / measured : 0.0,
                static_cast<unsigned long long>(coll_wrong));
  }
  if (failed) {
    std::printf("# FAILED: %s\n", timed_out ? "the run timed out" : "a rank failed (its message is above)");
    return kExitWrong;
  }
  if (missing) {
    std::printf("# FAILED: a rank did not report every size\n");
    return kExitWrong;
  }
  if (total_wrong > 0) {
    std::printf("# FAILED: %llu wrong element(s)\n", static_cast<unsigned long long>(total_wrong));
    return kExitWrong;
  }
  std::printf("# all results checked: 0 wrong\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  bool help = false;
  if (!parseArgs(argc, argv, &o, &help)) {
    std::fprintf(stderr, "(braid_nccl_ranks --help lists the flags)\n");
    return kExitUsage;
  }
  if (help) {
    usage(stdout);
    return 0;
  }
  if (o.rank >= 0) {
    if (o.id_hex.empty() || o.report_fd < 0) {
      std::fprintf(stderr, "braid_nccl_ranks: --rank needs --id and --report-fd (set by the launcher)\n");
      return kExitUsage;
    }
    return rankMain(o);
  }
  return launcherMain(o, argv);
}
