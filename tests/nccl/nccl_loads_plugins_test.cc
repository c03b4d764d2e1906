// NCCL itself opens Braid's plugins by name: a forked child dlopens the installed libnccl.so.2, points
// NCCL_NET_PLUGIN / NCCL_TUNER_PLUGIN at the two libraries and initialises a one-rank communicator with
// NCCL_DEBUG=INFO; the test then looks for NCCL's lines naming the Braid plugins. NCCL loads its plugins only after
// CUDA is up, so on a machine without a GPU (or without its driver) ncclCommInitRank fails first: the test then
// skips and prints NCCL's own reason (ncclGetLastError), and the proof waits for the GPU script
// (perf/device/run.sh, docs/nccl.md).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

const std::string kPluginDir = BRAID_NCCL_PLUGIN_DIR;

// What the child reports: NCCL's init result and last error text, one line each.
struct ChildReport {
  bool ran = false;
  bool found_nccl = false;
  int init_result = -1;
  std::string error;
  std::string log;
};

// The child: everything NCCL needs from the environment, then ncclGetUniqueId + ncclCommInitRank(1 rank).
[[noreturn]] void childMain(int out_fd, const std::string& log_path) {
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "INIT,NET,TUNING", 1);
  setenv("NCCL_DEBUG_FILE", log_path.c_str(), 1);
  setenv("NCCL_NET_PLUGIN", (kPluginDir + "/libnccl-net-braid.so").c_str(), 1);
  setenv("NCCL_TUNER_PLUGIN", (kPluginDir + "/libnccl-tuner-braid.so").c_str(), 1);
  setenv("BRAID_NET_IF", "lo", 1);
  std::string report = "nonccl\n";
  void* nccl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (nccl == nullptr) nccl = dlopen("/usr/local/cuda/lib64/libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (nccl != nullptr) {
    using GetUniqueId = int (*)(void*);
    using LastError = const char* (*)(void*);
    auto get_id = reinterpret_cast<GetUniqueId>(dlsym(nccl, "ncclGetUniqueId"));
    auto last_error = reinterpret_cast<LastError>(dlsym(nccl, "ncclGetLastError"));
    void* init_sym = dlsym(nccl, "ncclCommInitRank");
    struct UniqueId {
      char bytes[128];
    } id{};
    int rc = get_id != nullptr ? get_id(&id) : -1;
    if (rc == 0 && init_sym != nullptr) {
      auto init = reinterpret_cast<int (*)(void**, int, UniqueId, int)>(init_sym);
      void* comm = nullptr;
      rc = init(&comm, 1, id, 0);
    }
    const char* text = last_error != nullptr ? last_error(nullptr) : "";
    report = "nccl\n" + std::to_string(rc) + "\n" + std::string(text != nullptr ? text : "") + "\n";
  }
  const ssize_t ignored = write(out_fd, report.data(), report.size());
  (void)ignored;
  _exit(0);  // no NCCL teardown: a one-rank probe
}

ChildReport probe(const std::string& dir) {
  ChildReport r;
  int fds[2];
  if (pipe(fds) != 0) return r;
  const std::string log_path = dir + "/nccl.log";
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    childMain(fds[1], log_path);
  }
  close(fds[1]);
  // NCCL may wait on a missing driver; 60 s bound the probe.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      close(fds[0]);
      r.error = "the NCCL probe did not finish within 60 s";
      return r;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::string out;
  char buf[4096];
  ssize_t got;
  while ((got = read(fds[0], buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(got));
  close(fds[0]);
  std::istringstream lines(out);
  std::string first, code;
  std::getline(lines, first);
  r.ran = !first.empty();
  r.found_nccl = first == "nccl";
  if (r.found_nccl) {
    std::getline(lines, code);
    std::getline(lines, r.error);
    r.init_result = code.empty() ? -1 : std::atoi(code.c_str());
  }
  std::ifstream log(log_path);
  std::stringstream text;
  text << log.rdbuf();
  r.log = text.str();
  return r;
}

TEST(NcclLoadsPlugins, NcclOpensBothPluginsByPath) {
  if (kSanitized) GTEST_SKIP() << "not under a sanitizer: libnccl and the CUDA runtime are not instrumented";
  char dir_template[] = "/tmp/braid-nccl-probe-XXXXXX";
  const char* dir = mkdtemp(dir_template);
  ASSERT_NE(dir, nullptr);
  const ChildReport r = probe(dir);
  std::remove((std::string(dir) + "/nccl.log").c_str());
  rmdir(dir);
  ASSERT_TRUE(r.ran) << r.error;
  if (!r.found_nccl) GTEST_SKIP() << "libnccl.so.2 is not installed (looked in the loader path and /usr/local/cuda)";
  if (r.init_result != 0) {
    GTEST_SKIP() << "NCCL cannot initialise a communicator on this machine (ncclCommInitRank returned " << r.init_result
                 << ": \"" << r.error
                 << "\"); NCCL loads net and tuner plugins only after CUDA is up, so the proof that NCCL opens "
                    "them by name waits for a GPU (perf/device/run.sh)";
  }
  EXPECT_NE(r.log.find("Braid"), std::string::npos) << "NCCL's INFO lines do not name the Braid plugins:\n" << r.log;
  EXPECT_NE(r.log.find("NET/Braid"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("TUNER/Braid"), std::string::npos) << r.log;
}

}  // namespace
