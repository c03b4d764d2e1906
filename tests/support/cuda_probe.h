// Test helper: whether CUDA can run on this machine, asked of a forked child once per test process (the test process
// itself must not initialise CUDA: it forks children that use it later, and CUDA does not survive a fork).
#pragma once

#include <cuda_runtime_api.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "braid/cuda.h"

namespace braid::testing {

/// Why the CUDA tests cannot run on this machine ("" when a device is usable), asked once of a forked child.
inline const std::string& cudaSkipReason() {
  static const std::string reason = [] {
    int fds[2];
    if (pipe(fds) != 0) return std::string("pipe failed");
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      const std::string why = cudaUnavailableReason();
      const ssize_t ignored = write(fds[1], why.data(), why.size());
      (void)ignored;
      _exit(0);
    }
    close(fds[1]);
    std::string why;
    char buffer[512];
    ssize_t got;
    while ((got = read(fds[0], buffer, sizeof buffer)) > 0) why.append(buffer, static_cast<size_t>(got));
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::string("the CUDA probe process crashed");
    return why;
  }();
  return reason;
}

/// GPUs visible to a process (asked of a forked child, as cudaSkipReason); 0 without any.
inline int cudaDevicesForTests() {
  static const int count = [] {
    if (!cudaSkipReason().empty()) return 0;
    int fds[2];
    if (pipe(fds) != 0) return 0;
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      int n = 0;
      if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
      const ssize_t ignored = write(fds[1], &n, sizeof n);
      (void)ignored;
      _exit(0);
    }
    close(fds[1]);
    int n = 0;
    if (read(fds[0], &n, sizeof n) != sizeof n) n = 0;
    close(fds[0]);
    waitpid(pid, nullptr, 0);
    return n;
  }();
  return count;
}

}  // namespace braid::testing

/// Skips the running test on a machine where CUDA cannot run, naming CUDA's reason.
#define BRAID_SKIP_WITHOUT_GPU()                                                                          \
  do {                                                                                                    \
    if (!::braid::testing::cudaSkipReason().empty()) {                                                    \
      GTEST_SKIP() << "no usable GPU: " << ::braid::testing::cudaSkipReason() << "; this test needs one"; \
    }                                                                                                     \
  } while (0)
