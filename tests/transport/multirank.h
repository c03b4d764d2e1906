// Test support: forked multi-process tests (one process per rank) for transports, bootstrap and
// communicators.
//
//   braid::testing::ForkShared<braid::UniqueId> id;          // before forking: shared by parent and children
//   ForkResult result = runForked(4, [&](int rank) -> int {  // in each child
//     ... return 0 on success, any other value on failure ...
//   }, /*timeout_s=*/20);
//   EXPECT_TRUE(result.allOk()) << result.summary();
//
// runForked forks n children; child r runs body(r) and _exit()s with its return value (a C++ exception
// becomes exit code 120, with its what() on stderr), so a child never returns into GoogleTest. Each child's
// stdout and stderr go to a pipe the parent collects, so a failing rank's messages appear in summary(). The
// parent waits until every child exited or `timeout_s` passed, then kills stragglers with SIGKILL and reports
// them as timed out. Children get PR_SET_PDEATHSIG = SIGKILL: a killed test process leaves no orphans.
//
// Killing a rank in the middle of a run: ForkOptions::kill_rank / kill_after_s has the parent SIGKILL that
// child at a given time, or the child calls killSelf() at the exact point of its choice (e.g. after posting
// half of a large all-reduce). Its outcome then reads "killed by signal 9".
//
// Fork safety: fork only copies the calling thread, so the parent must have no other threads when forking
// (a mutex held by another thread would stay locked in the child, and ThreadSanitizer refuses new threads in
// the child of a multi-threaded fork). runForked waits up to one second for exiting threads (a finished
// bootstrap root thread) before it forks and fails the run naming the thread count otherwise.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "braid/bootstrap.h"

/// In a runForked body: return 1 (after printing the condition, file and line on stderr) unless `cond`.
#define BRAID_CHILD_CHECK(cond)                                                     \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      return 1;                                                                     \
    }                                                                               \
  } while (0)
/// In a runForked body: return 1 (printing the status) unless the Status / Result expression is ok.
#define BRAID_CHILD_CHECK_OK(expr)                                                     \
  do {                                                                                 \
    const auto& braid_child_value_ = (expr);                                           \
    if (!braid_child_value_.isOk()) {                                                  \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr,               \
                   ::braid::testing::statusOf(braid_child_value_).toString().c_str()); \
      return 1;                                                                        \
    }                                                                                  \
  } while (0)

namespace braid::testing {

inline const Status& statusOf(const Status& status) { return status; }
template <typename T>
const Status& statusOf(const Result<T>& result) {
  return result.status();
}

/// How one child ended.
struct RankOutcome {
  int rank = 0;
  pid_t pid = -1;
  bool exited = false;  // exited normally with exit_code
  int exit_code = -1;
  int signal = 0;          // killed by this signal (0: not killed)
  bool timed_out = false;  // still running at the deadline: the parent killed it
  std::string output;      // everything the child wrote to stdout/stderr

  bool ok() const { return exited && exit_code == 0 && !timed_out; }
  /// "exit 0", "exit 3", "killed by signal 9", "timed out (killed)", "fork failed".
  std::string describe() const {
    if (timed_out) return "timed out (killed)";
    if (exited) return "exit " + std::to_string(exit_code);
    if (signal != 0) return "killed by signal " + std::to_string(signal);
    return pid < 0 ? "fork failed" : "unknown";
  }
};

struct ForkResult {
  std::vector<RankOutcome> ranks;  // ranks[r] is child r
  double elapsed_s = 0;            // from the first fork until the last child was reaped
  std::string error;               // a failure of the harness itself (fork, pipe, threads at fork)

  bool allOk() const {
    if (!error.empty() || ranks.empty()) return false;
    for (const RankOutcome& r : ranks)
      if (!r.ok()) return false;
    return true;
  }
  /// One line per rank ("rank 2 (pid 1234): exit 1") followed by the output of ranks that did not exit 0.
  std::string summary() const {
    std::string text = error.empty() ? "" : "harness: " + error + "\n";
    for (const RankOutcome& r : ranks) {
      text += "rank " + std::to_string(r.rank) + " (pid " + std::to_string(r.pid) + "): " + r.describe() + "\n";
    }
    for (const RankOutcome& r : ranks) {
      if (!r.ok() && !r.output.empty()) text += "--- rank " + std::to_string(r.rank) + " output ---\n" + r.output;
    }
    return text;
  }
};

struct ForkOptions {
  int kill_rank = -1;       // >= 0: the parent SIGKILLs this child kill_after_s seconds after forking it
  double kill_after_s = 0;  //
};

/// Number of threads of this process (/proc/self/task entries).
inline int processThreadCount() {
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  int count = 0;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  closedir(dir);
  return count;
}

/// In a child: dies at once with SIGKILL (no destructors, no flushing: like a crashed process).
[[noreturn]] inline void killSelf() {
  std::fflush(stdout);
  std::fflush(stderr);
  raise(SIGKILL);
  _exit(121);  // not reached
}

/// Runs body(rank) in n forked children and waits for them (see the top of this file).
inline ForkResult runForked(int n, const std::function<int(int rank)>& body, double timeout_s,
                            const ForkOptions& options = {}) {
  ForkResult result;
  using Clock = std::chrono::steady_clock;
  for (int attempt = 0; processThreadCount() > 1 && attempt < 100; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (const int threads = processThreadCount(); threads > 1) {
    result.error = "the test process has " + std::to_string(threads) + " threads: forking it is unsafe";
    return result;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  const Clock::time_point start = Clock::now();
  const pid_t parent = getpid();
  result.ranks.resize(n);
  std::vector<int> pipes(n, -1);
  for (int r = 0; r < n; ++r) {
    RankOutcome& outcome = result.ranks[r];
    outcome.rank = r;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
      result.error = std::string("pipe: ") + std::strerror(errno);
      break;
    }
    const pid_t pid = fork();
    if (pid < 0) {
      result.error = std::string("fork: ") + std::strerror(errno);
      close(fds[0]);
      close(fds[1]);
      break;
    }
    if (pid == 0) {
      // Child: never returns into the caller.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(122);
      for (int other : pipes)
        if (other >= 0) close(other);
      close(fds[0]);
      dup2(fds[1], STDOUT_FILENO);
      dup2(fds[1], STDERR_FILENO);
      close(fds[1]);
      int code = 0;
      try {
        code = body(r);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: exception: %s\n", r, e.what());
        code = 120;
      } catch (...) {
        std::fprintf(stderr, "rank %d: unknown exception\n", r);
        code = 120;
      }
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(code);
    }
    close(fds[1]);
    fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
    outcome.pid = pid;
    pipes[r] = fds[0];
  }
  const Clock::time_point deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  const Clock::time_point kill_time =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.kill_after_s));
  bool kill_sent = false;
  auto drain = [&](int r) {
    char buffer[4096];
    while (pipes[r] >= 0) {
      const ssize_t got = read(pipes[r], buffer, sizeof(buffer));
      if (got > 0) {
        result.ranks[r].output.append(buffer, static_cast<size_t>(got));
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        close(pipes[r]);
        pipes[r] = -1;
      } else if (errno == EAGAIN) {
        break;
      }
    }
  };
  int running = 0;
  std::vector<bool> reaped(n, true);
  for (int r = 0; r < n; ++r) {
    if (result.ranks[r].pid > 0) {
      reaped[r] = false;
      ++running;
    }
  }
  while (running > 0) {
    const Clock::time_point now = Clock::now();
    if (!kill_sent && options.kill_rank >= 0 && options.kill_rank < n && now >= kill_time) {
      if (!reaped[options.kill_rank]) kill(result.ranks[options.kill_rank].pid, SIGKILL);
      kill_sent = true;
    }
    if (now >= deadline) {
      for (int r = 0; r < n; ++r) {
        if (reaped[r]) continue;
        kill(result.ranks[r].pid, SIGKILL);
        result.ranks[r].timed_out = true;
      }
    }
    std::vector<pollfd> fds;
    for (int r = 0; r < n; ++r)
      if (pipes[r] >= 0) fds.push_back(pollfd{pipes[r], POLLIN, 0});
    poll(fds.data(), fds.size(), 5);
    for (int r = 0; r < n; ++r) drain(r);
    for (int r = 0; r < n; ++r) {
      if (reaped[r]) continue;
      int status = 0;
      const pid_t done = waitpid(result.ranks[r].pid, &status, WNOHANG);
      if (done != result.ranks[r].pid) continue;
      reaped[r] = true;
      --running;
      if (WIFEXITED(status)) {
        result.ranks[r].exited = true;
        result.ranks[r].exit_code = WEXITSTATUS(status);
      } else if (WIFSIGNALED(status)) {
        result.ranks[r].signal = WTERMSIG(status);
      }
    }
  }
  for (int r = 0; r < n; ++r) {
    if (pipes[r] < 0) continue;
    fcntl(pipes[r], F_SETFL, fcntl(pipes[r], F_GETFL) & ~O_NONBLOCK);  // children are gone: read to EOF
    drain(r);
    if (pipes[r] >= 0) close(pipes[r]);
  }
  result.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

/// A value shared between the parent and its forked children (an anonymous MAP_SHARED page created before
/// runForked): one child publishes it (e.g. rank 0 its bootstrap UniqueId), the others wait for it. T must
/// be trivially copyable.
template <typename T>
class ForkShared {
  static_assert(std::is_trivially_copyable_v<T>, "ForkShared<T> needs a trivially copyable T");

 public:
  ForkShared() {
    void* memory = mmap(nullptr, sizeof(Block), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (memory != MAP_FAILED) block_ = new (memory) Block();
  }
  ~ForkShared() {
    if (block_ != nullptr) munmap(block_, sizeof(Block));
  }
  ForkShared(const ForkShared&) = delete;
  ForkShared& operator=(const ForkShared&) = delete;

  /// Forgets a published value (between runs).
  void reset() {
    if (block_ != nullptr) block_->published.store(0, std::memory_order_release);
  }
  void publish(const T& value) {
    if (block_ == nullptr) return;
    std::memcpy(&block_->value, &value, sizeof(T));
    block_->published.store(1, std::memory_order_release);
  }
  /// Waits (polling every millisecond) up to timeout_s; false when nothing was published by then.
  bool wait(T* value, double timeout_s) const {
    if (block_ == nullptr) return false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (block_->published.load(std::memory_order_acquire) == 0) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::memcpy(value, &block_->value, sizeof(T));
    return true;
  }

 private:
  struct Block {
    std::atomic<int> published{0};
    T value;
  };
  Block* block_ = nullptr;
};

/// In child `rank` of runForked: rank 0 creates a UniqueId whose root listens on 127.0.0.1 (in rank 0's
/// process) and publishes it in `shared`; every rank then connects. `shared` must be created (and reset())
/// in the parent before runForked. Errors: kTimeout when rank 0 published nothing within timeout_s; whatever
/// createUniqueId / connectBootstrap report.
inline Result<std::unique_ptr<Bootstrap>> forkedBootstrap(ForkShared<UniqueId>& shared, int rank, int size,
                                                          double timeout_s) {
  UniqueId id;
  if (rank == 0) {
    Result<UniqueId> created = createUniqueId("127.0.0.1:0");
    if (!created.isOk()) return created.status();
    id = *created;
    shared.publish(id);
  } else if (!shared.wait(&id, timeout_s)) {
    return Status(StatusCode::kTimeout, "rank " + std::to_string(rank) + ": rank 0 published no UniqueId");
  }
  BootstrapOptions options;
  options.timeout_s = timeout_s;
  return connectBootstrap(id, rank, size, options);
}

}  // namespace braid::testing
