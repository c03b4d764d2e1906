#include "braid_perf/runner.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <thread>

#include "braid/braid.h"
#include "braid_perf/data_check.h"
#include "braid_perf/layout.h"
#include "braid_perf/report.h"
#include "braid_perf/shared_sync.h"

namespace braid::perf {
namespace {

using Clock = std::chrono::steady_clock;

// "Intel(R) Xeon(R) ..." from /proc/cpuinfo, for the device lines.
std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos && colon + 2 <= line.size()) return line.substr(colon + 2);
    }
  }
  return "";
}

const char* callName(Collective collective) {
  switch (collective) {
    case Collective::kAllReduce: return "braidAllReduce";
    case Collective::kAllGather: return "braidAllGather";
    case Collective::kReduceScatter: return "braidReduceScatter";
    case Collective::kAllToAll: return "braidAllToAll";
    case Collective::kBroadcast: return "braidBroadcast";
    case Collective::kReduce: return "braidReduce";
  }
  return "?";
}

braidResult_t callOnce(Collective collective, const CallBuffers& buffers, uint64_t count, DataType type, ReduceOp op,
                       int root, braidComm_t comm) {
  const auto t = static_cast<braidDataType_t>(type);
  const auto o = static_cast<braidRedOp_t>(op);
  const size_t n = static_cast<size_t>(count);
  switch (collective) {
    case Collective::kAllReduce: return braidAllReduce(buffers.send, buffers.recv, n, t, o, comm, nullptr);
    case Collective::kAllGather: return braidAllGather(buffers.send, buffers.recv, n, t, comm, nullptr);
    case Collective::kReduceScatter: return braidReduceScatter(buffers.send, buffers.recv, n, t, o, comm, nullptr);
    case Collective::kAllToAll: return braidAllToAll(buffers.send, buffers.recv, n, t, comm, nullptr);
    case Collective::kBroadcast: return braidBroadcast(buffers.send, buffers.recv, n, t, root, comm, nullptr);
    case Collective::kReduce: return braidReduce(buffers.send, buffers.recv, n, t, o, root, comm, nullptr);
  }
  return braidInternalError;
}

struct AlignedBuffer {
  explicit AlignedBuffer(size_t bytes) : size(bytes) {
    data = static_cast<char*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096));
    if (data) std::memset(data, 0, bytes);  // first touch outside the timed loops
  }
  ~AlignedBuffer() { std::free(data); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  char* data = nullptr;
  size_t size = 0;
};

// One rank: its communicator, buffers and the sweep.
class Rank {
 public:
  Rank(const RunSetup& setup, SharedState* shared, int rank, braidComm_t comm, const braidUniqueId* id)
      : setup_(setup),
        options_(setup.options),
        shared_(shared),
        rank_(rank),
        nranks_(setup.options.ranks()),
        comm_(comm),
        id_(id),
        wait_s_(setup.options.timeout_s) {}

  int run() {
    RankSlot& slot = shared_->slot(rank_);
    slot.pid = getpid();
    if (gethostname(slot.host, sizeof(slot.host) - 1) != 0) std::snprintf(slot.host, sizeof(slot.host), "localhost");
    if (!comm_) {
      const braidResult_t rc = braidCommInitRank(&comm_, nranks_, *id_, rank_);
      if (rc != braidSuccess) {
        const char* last = comm_ ? braidGetLastError(comm_) : "";
        report(fmt::format("braidCommInitRank({} ranks) failed: {}{}{}", nranks_, braidGetErrorString(rc),
                           *last ? ": " : "", last));
        comm_ = nullptr;
        shared_->abort();
        return 1;
      }
    }
    const int code = sweep();
    if (comm_) {
      if (code == 0 || !failed_) {
        braidCommDestroy(comm_);
      } else {
        braidCommAbort(comm_);
      }
      comm_ = nullptr;
    }
    return code;
  }

 private:
  void report(const std::string& message) {
    std::fprintf(stderr, "braid_perf: rank %d (pid %d): %s\n", rank_, static_cast<int>(getpid()), message.c_str());
    std::fflush(stderr);
  }

  // A failed Braid call: report it, tell the peers (braidCommAbort) and the other ranks' barriers.
  void failCall(const std::string& what, braidResult_t rc) {
    report(fmt::format("{} failed: {}: {}", what, braidGetErrorString(rc), braidGetLastError(comm_)));
    failed_ = true;
    shared_->abort();
    braidCommAbort(comm_);
    comm_ = nullptr;
  }

  // braid_perf's own synchronisation failed (another rank failed, or -T passed).
  void failSync(const Status& status) {
    if (status.code() != StatusCode::kRemoteError) report("synchronisation: " + status.message());
    failed_ = true;
    shared_->abort();
  }

  void print(const std::string& text) {
    if (rank_ != 0) return;
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
  }

  std::vector<DeviceLine> devices() {
    const std::string model = cpuModel();
    const std::string info = model.empty() ? "CPU" : "CPU (" + model + ")";
    std::vector<DeviceLine> lines;
    for (int r = 0; r < nranks_; ++r) {
      const RankSlot& s = shared_->slot(r);
      lines.push_back({r, s.pid, s.host, info});
    }
    return lines;
  }

  std::string describe(Collective c, const RowLayout& layout, DataType type, ReduceOp op, int root, bool in_place) {
    std::string what = fmt::format("{}(count {}, {}", callName(c), layout.count, dataTypeName(type));
    if (isReduction(c)) what += std::string(", ") + reduceOpName(op);
    if (isRooted(c)) what += fmt::format(", root {}", root);
    what += in_place ? ", in place)" : ", out of place)";
    return what;
  }

  // One mode of one row: warm-up, timed loop, check. False when something failed (already reported).
  bool runMode(const RowLayout& layout, DataType type, ReduceOp op, int root, bool in_place, ModeResult& result,
               int& ranks_wrong) {
    const Collective c = options_.collective;
    const CallBuffers buffers = callBuffers(c, layout, rank_, in_place, send_->data, recv_->data);
    const std::string what = describe(c, layout, type, op, root, in_place);
    // The timed calls run on whatever the buffers hold: zeros at first, then the previous check's data and guard
    // bytes (all ordinary numbers; poison NaN only where a call never writes). Values do not change the time of
    // a CPU reduction except subnormals, which none of these are.
    for (int i = 0; i < options_.warmup_iters; ++i) {
      const braidResult_t rc = callOnce(c, buffers, layout.count, type, op, root, comm_);
      if (rc != braidSuccess) return failCall(what, rc), false;
    }
    if (Status s = shared_->barrier(wait_s_); !s.isOk()) return failSync(s), false;
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < options_.iters; ++i) {
      for (int a = 0; a < options_.agg_iters; ++a) {
        const braidResult_t rc = callOnce(c, buffers, layout.count, type, op, root, comm_);
        if (rc != braidSuccess) return failCall(what, rc), false;
        if (options_.blocking) {
          if (Status s = shared_->barrier(wait_s_); !s.isOk()) return failSync(s), false;
        }
      }
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count() /
                           (static_cast<double>(options_.iters) * options_.agg_iters);
    Result<std::vector<double>> times = shared_->exchange(rank_, seconds, wait_s_);
    if (!times.isOk()) return failSync(times.status()), false;
    double t = 0;
    switch (options_.average) {
      case 0: t = (*times)[0]; break;
      case 1:
        for (double v : *times) t += v;
        t /= static_cast<double>(times->size());
        break;
      case 2: t = *std::min_element(times->begin(), times->end()); break;
      case 3: t = *std::max_element(times->begin(), times->end()); break;
    }
    result.time_us = t * 1e6;
    result.algbw = algBandwidth(c, layout, nranks_, t);
    result.busbw = result.algbw * busFactor(c, nranks_);
    result.checked = options_.check > 0 && (!in_place || checksInPlace(c));
    result.wrong = 0;
    ranks_wrong = 0;
    for (int k = 0; result.checked && k < options_.check; ++k) {
      const Pattern pattern(c, type, op, nranks_, root, ++seed_);
      prepareCheck(pattern, layout, rank_, in_place, send_->data, recv_->data);
      // Every rank's buffers are ready before any call can touch a peer's.
      if (Status s = shared_->barrier(wait_s_); !s.isOk()) return failSync(s), false;
      const braidResult_t rc = callOnce(c, buffers, layout.count, type, op, root, comm_);
      if (rc != braidSuccess) return failCall(what, rc), false;
      const int64_t wrong = countWrong(pattern, layout, rank_, in_place, send_->data, recv_->data);
      Result<std::vector<int64_t>> all = shared_->exchangeCount(rank_, wrong, wait_s_);
      if (!all.isOk()) return failSync(all.status()), false;
      result.wrong = 0;
      ranks_wrong = 0;
      for (int64_t w : *all) {
        result.wrong += w;
        ranks_wrong += w > 0;
      }
      if (wrong > 0) {
        report(fmt::format("{}: {} wrong elements on this rank", what, wrong));
      }
      if (result.wrong > 0) break;
    }
    return true;
  }

  int sweep() {
    if (Status s = shared_->barrier(wait_s_); !s.isOk()) return failSync(s), 1;
    const std::vector<DeviceLine> device_lines = devices();
    std::unique_ptr<JsonReport> json;
    if (rank_ == 0) {
      print(formatPreamble(options_, setup_.version, setup_.braid_line, device_lines));
      if (!options_.json_file.empty()) {
        json = std::make_unique<JsonReport>(options_, setup_.argv, setup_.version, device_lines, setup_.transport);
        print("# Writing JSON output to " + options_.json_file + "\n");
      }
    }
    const size_t bytes = options_.max_bytes + kGuardBytes;
    send_ = std::make_unique<AlignedBuffer>(bytes);
    recv_ = std::make_unique<AlignedBuffer>(bytes);
    if (!send_->data || !recv_->data) {
      report(fmt::format("cannot allocate 2 x {} bytes of buffers", bytes));
      failed_ = true;
      shared_->abort();
      return 1;
    }
    print(formatColumnHeader());

    const Collective c = options_.collective;
    std::vector<ReduceOp> ops = options_.ops;
    if (!isReduction(c)) ops = {ReduceOp::kSum};
    std::vector<int> roots = {-1};
    if (isRooted(c)) {
      roots.clear();
      if (options_.root >= 0) {
        roots.push_back(options_.root);
      } else {
        for (int r = 0; r < nranks_; ++r) roots.push_back(r);
      }
    }
    double bw_sum = 0;
    int bw_count = 0;
    int out_of_bounds = 0;
    for (int cycle = 0; options_.run_cycles == 0 || cycle < options_.run_cycles; ++cycle) {
      for (DataType type : options_.types) {
        for (ReduceOp op : ops) {
          for (int root : roots) {
            for (const RowLayout& layout : sweepLayouts(options_, type, nranks_)) {
              RowResult row;
              row.bytes = layout.rowBytes();
              row.count = layout.count;
              row.type = dataTypeName(type);
              row.op = isReduction(c) ? reduceOpName(op) : "none";
              row.root = isRooted(c) ? root : -1;
              int wrong_ranks = 0;
              if (!runMode(layout, type, op, std::max(root, 0), false, row.out_of_place, wrong_ranks)) break;
              out_of_bounds += wrong_ranks;
              if (!runMode(layout, type, op, std::max(root, 0), true, row.in_place, wrong_ranks)) break;
              out_of_bounds += wrong_ranks;
              bw_sum += row.out_of_place.busbw + row.in_place.busbw;
              bw_count += 2;
              print(formatRow(row));
              if (json) json->addRow(row);
            }
            if (failed_) break;
          }
          if (failed_) break;
        }
        if (failed_) break;
      }
      if (failed_) break;
    }
    const double avg_bw = bw_count ? bw_sum / bw_count : 0.0;
    if (failed_) {
      if (json) {
        json->finish(out_of_bounds, avg_bw, {"rank 0 stopped: a Braid call or a peer failed (see stderr)"});
        (void)json->write(options_.json_file);
      }
      return 1;
    }
    print(formatFooter(out_of_bounds, avg_bw, testName(options_.collective)));
    if (json) {
      json->finish(out_of_bounds, avg_bw, {});
      if (Status s = json->write(options_.json_file); !s.isOk()) {
        report(s.message());
        return 1;
      }
    }
    return out_of_bounds > 0 ? 1 : 0;
  }

  const RunSetup& setup_;
  const Options& options_;
  SharedState* shared_;
  int rank_;
  int nranks_;
  braidComm_t comm_;
  const braidUniqueId* id_;
  double wait_s_;
  bool failed_ = false;
  uint64_t seed_ = 0;  // the same sequence on every rank
  std::unique_ptr<AlignedBuffer> send_, recv_;
};

// The -t ranks of process `process` as threads; comms[i] already created (braidCommInitAll) or null (each
// thread calls braidCommInitRank with `id`). Returns the worst exit status.
int runThreads(const RunSetup& setup, SharedState* shared, int process, const std::vector<braidComm_t>& comms,
               const braidUniqueId* id) {
  const int threads = setup.options.threads;
  std::vector<int> codes(threads, 0);
  std::vector<std::thread> workers;
  for (int i = 0; i < threads; ++i) {
    const int rank = process * threads + i;
    braidComm_t comm = comms.empty() ? nullptr : comms[i];
    workers.emplace_back([&, i, rank, comm] {
      Rank r(setup, shared, rank, comm, id);
      codes[i] = r.run();
    });
  }
  for (std::thread& w : workers) w.join();
  return *std::max_element(codes.begin(), codes.end());
}

int runForked(const RunSetup& setup, SharedState* shared, const braidUniqueId& id) {
  const Options& o = setup.options;
  std::vector<pid_t> pids;
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent = getpid();
  for (int p = 0; p < o.processes; ++p) {
    const pid_t pid = fork();
    if (pid < 0) {
      std::fprintf(stderr, "braid_perf: fork of process %d failed: %s\n", p, std::strerror(errno));
      shared->abort();
      for (pid_t child : pids) kill(child, SIGKILL);
      for (pid_t child : pids) waitpid(child, nullptr, 0);
      return 1;
    }
    if (pid == 0) {
      // The ranks die with braid_perf (killed by a job script or a timeout), as ranks do with mpirun; the check
      // after prctl covers a parent that died before it.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
      const int code = runThreads(setup, shared, p, {}, &id);
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(code);
    }
    pids.push_back(pid);
  }
  // Wait for every process; after the first failure, tell the others (their barriers fail) and stop the ones
  // still running after a grace period.
  const double grace_s = o.timeout_s > 0 ? o.timeout_s : 30.0;
  std::vector<bool> running(pids.size(), true);
  size_t remaining = pids.size();
  int code = 0;
  bool killed = false;
  Clock::time_point failed_at;
  while (remaining > 0) {
    bool progressed = false;
    for (size_t p = 0; p < pids.size(); ++p) {
      if (!running[p]) continue;
      int status = 0;
      const pid_t done = waitpid(pids[p], &status, WNOHANG);
      if (done == 0) continue;
      running[p] = false;
      --remaining;
      progressed = true;
      const bool ok = done == pids[p] && WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (ok) continue;
      if (done == pids[p] && WIFSIGNALED(status) && !killed) {
        std::fprintf(stderr, "braid_perf: process %zu (pid %d) ended by signal %d (%s)\n", p, static_cast<int>(pids[p]),
                     WTERMSIG(status), strsignal(WTERMSIG(status)));
      }
      if (code == 0) {
        code = 1;
        failed_at = Clock::now();
        shared->abort();
      }
    }
    if (remaining == 0) break;
    if (code != 0 && !killed && std::chrono::duration<double>(Clock::now() - failed_at).count() > grace_s) {
      for (size_t p = 0; p < pids.size(); ++p) {
        if (!running[p]) continue;
        std::fprintf(stderr, "braid_perf: stopping process %zu (pid %d), still running %.0f s after a failure\n", p,
                     static_cast<int>(pids[p]), grace_s);
        kill(pids[p], SIGKILL);
      }
      killed = true;
    }
    if (!progressed) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return code;
}

}  // namespace

int runBenchmark(const RunSetup& setup) {
  const Options& o = setup.options;
  Result<SharedState*> state = SharedState::create(o.ranks());
  if (!state.isOk()) {
    std::fprintf(stderr, "braid_perf: %s\n", state.status().message().c_str());
    return 1;
  }
  SharedState* shared = *state;
  int code = 0;
  if (o.processes == 1 && setup.init_all) {
    std::vector<braidComm_t> comms(static_cast<size_t>(o.threads), nullptr);
    const braidResult_t rc = braidCommInitAll(comms.data(), o.threads, nullptr);
    if (rc != braidSuccess) {
      std::fprintf(stderr, "braid_perf: braidCommInitAll(%d ranks) failed: %s\n", o.threads, braidGetErrorString(rc));
      code = 1;
    } else {
      code = runThreads(setup, shared, 0, comms, nullptr);
    }
  } else {
    braidUniqueId id;
    const braidResult_t rc = braidGetUniqueId(&id);
    if (rc != braidSuccess) {
      std::fprintf(stderr, "braid_perf: braidGetUniqueId failed: %s\n", braidGetErrorString(rc));
      code = 1;
    } else if (o.processes == 1) {
      code = runThreads(setup, shared, 0, {}, &id);
    } else {
      code = runForked(setup, shared, id);
    }
  }
  SharedState::destroy(shared);
  return code;
}

}  // namespace braid::perf
