// braid_perf: Braid's nccl-tests-style benchmark (docs/braid_perf.md). Run it as all_reduce_perf (a symlink;
// the collective comes from argv[0]) or as `braid_perf all_reduce ...`.
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "braid/algorithm.h"
#include "braid/comm.h"
#include "braid/pareto.h"
#include "braid_perf/algo_option.h"
#include "braid_perf/options.h"
#include "braid_perf/report.h"
#include "braid_perf/runner.h"
#include "common/env.h"

namespace {

namespace fs = std::filesystem;

// The temporary --algo directory and its one file, for removal when SIGINT, SIGTERM or SIGHUP ends the process.
// Fixed buffers written before the handler is installed; the handler calls only async-signal-safe functions
// (getpid, unlink, rmdir, sigaction, raise). Only the process that created the directory removes it.
char signal_dir[PATH_MAX];
char signal_file[PATH_MAX];
pid_t signal_owner = 0;

extern "C" void removeAlgoDirOnSignal(int sig) {
  const int saved_errno = errno;
  if (::getpid() == signal_owner) {
    ::unlink(signal_file);
    ::rmdir(signal_dir);
  }
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  errno = saved_errno;
  ::raise(sig);  // delivered once the handler returns: the process dies of the signal, as without the handler
}

// Installs removeAlgoDirOnSignal for `dir` and `file` (both shorter than PATH_MAX). A signal that is ignored
// (nohup) or already has a handler keeps its disposition.
void removeOnSignal(const std::string& dir, const std::string& file) {
  if (dir.size() >= PATH_MAX || file.size() >= PATH_MAX) return;
  std::memcpy(signal_dir, dir.c_str(), dir.size() + 1);
  std::memcpy(signal_file, file.c_str(), file.size() + 1);
  signal_owner = ::getpid();
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0) continue;
    if ((old.sa_flags & SA_SIGINFO) != 0 || old.sa_handler != SIG_DFL) continue;
    struct sigaction act {};
    act.sa_handler = removeAlgoDirOnSignal;
    sigemptyset(&act.sa_mask);
    sigaddset(&act.sa_mask, SIGINT);
    sigaddset(&act.sa_mask, SIGTERM);
    sigaddset(&act.sa_mask, SIGHUP);
    act.sa_flags = SA_RESTART;
    ::sigaction(sig, &act, nullptr);
  }
}

// --algo FILE: the file alone in a fresh temporary directory, which becomes BRAID_ALGO_DIR; removed at exit and
// when SIGINT, SIGTERM or SIGHUP ends the process.
class AlgoDir {
 public:
  ~AlgoDir() {
    if (!temp_.empty()) {
      std::error_code ec;
      fs::remove_all(temp_, ec);
    }
  }
  // The directory to use for `path` (a directory as is, a file copied into a temporary one). Empty on error,
  // with `error` set.
  std::string prepare(const std::string& path, std::string& error) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) return fs::absolute(path, ec).string();
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/braid_perf_algo.XXXXXX";
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    if (!mkdtemp(buffer.data())) {
      error = "--algo " + path + ": cannot create a temporary directory in " + pattern;
      return "";
    }
    temp_ = buffer.data();
    const fs::path target = fs::path(temp_) / fs::path(path).filename();
    removeOnSignal(temp_, target.string());
    fs::copy_file(path, target, ec);
    if (ec) {
      error = "--algo " + path + ": " + ec.message();
      return "";
    }
    return temp_;
  }

 private:
  std::string temp_;
};

// The algorithms of --algo `path` (a file, or every .xml / .json file of a directory) loaded and verified as
// loadAlgorithmDir does for BRAID_ALGO_DIR; errors name the user's file.
braid::Status loadAlgoOption(const std::string& path, std::vector<braid::perf::AlgoFile>* out) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    braid::Result<std::vector<braid::LoadedAlgorithm>> loaded = braid::loadAlgorithmDir(path);
    if (!loaded.isOk()) return loaded.status();
    for (braid::LoadedAlgorithm& a : *loaded) out->push_back({std::move(a.algorithm), a.file});
    return braid::Status::ok();
  }
  braid::Result<braid::Algorithm> algorithm = braid::loadAlgorithm(path);
  if (!algorithm.isOk()) return algorithm.status();
  const braid::VerifyReport report = braid::verify(*algorithm);
  if (!report.ok) {
    return braid::Status(braid::StatusCode::kInvalidArgument,
                         path + ": algorithm '" + algorithm->name + "' does not verify: " + report.toString());
  }
  out->push_back({std::move(algorithm).value(), path});
  return braid::Status::ok();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  braid::Result<braid::perf::Options> parsed = braid::perf::parseOptions(args);
  const std::string invoked = args.empty() ? "braid_perf" : fs::path(args[0]).filename().string();
  if (!parsed.isOk()) {
    std::fprintf(stderr, "%s: %s\nTry '%s -h' for help.\n", invoked.c_str(), parsed.status().message().c_str(),
                 invoked.c_str());
    return 2;
  }
  braid::perf::Options options = parsed.value();
  if (options.help) {
    std::fputs(braid::perf::helpText(options.program).c_str(), stdout);
    return 0;
  }
  // A -J file that cannot be written fails now, not after the whole sweep: an empty path is a bad flag (2), a path
  // that cannot be written an output error (1), as in the braid CLI.
  if (!options.json_file.empty()) {
    if (const braid::Status writable = braid::perf::checkJsonPath(options.json_file); !writable.isOk()) {
      std::fprintf(stderr, "%s: %s\n", invoked.c_str(), writable.message().c_str());
      return writable.code() == braid::StatusCode::kInvalidUsage ? 2 : 1;
    }
  }
  // A peer that dies mid-transfer must give an error, not kill this process.
  signal(SIGPIPE, SIG_IGN);
  // BRAID_TOPO: communicators synthesize the topology's Pareto set at init (rank 0, braid_pareto).
  braid::enableParetoSynthesis();

  braid::perf::RunSetup setup;
  setup.argv = args;
  setup.version = BRAID_PERF_VERSION;
  if (!options.transport.empty()) setenv("BRAID_TRANSPORT", options.transport.c_str(), 1);
  if (options.timeout_s > 0) setenv("BRAID_TIMEOUT", std::to_string(options.timeout_s).c_str(), 1);
  // --algo is loaded and verified here, as every rank's communicator will load it, so that a file that does not
  // load or verify is reported once, under the user's path (not the temporary copy's), before any rank starts.
  std::vector<braid::perf::AlgoFile> algo_files;
  if (!options.algo.empty()) {
    braid::Status loaded = loadAlgoOption(options.algo, &algo_files);
    if (!loaded.isOk()) {
      std::fprintf(stderr, "%s: --algo: %s\n", invoked.c_str(), loaded.message().c_str());
      return 1;
    }
  }
  // Files none of whose algorithms is for this rank count are left out of BRAID_ALGO_DIR: the header says why they
  // never run, and the communicator's warning would name the temporary copy.
  const bool algo_for_ranks = std::any_of(algo_files.begin(), algo_files.end(), [&](const braid::perf::AlgoFile& f) {
    return f.algorithm.num_ranks == options.ranks();
  });
  AlgoDir algo_dir;
  if (!options.algo.empty() && algo_for_ranks) {
    std::string error;
    const std::string dir = algo_dir.prepare(options.algo, error);
    if (dir.empty()) {
      std::fprintf(stderr, "%s: %s\n", invoked.c_str(), error.c_str());
      return 2;
    }
    setenv("BRAID_ALGO_DIR", dir.c_str(), 1);
  } else if (!options.algo.empty()) {
    unsetenv("BRAID_ALGO_DIR");  // --algo replaces a BRAID_ALGO_DIR from the environment either way
  }
  setup.transport = braid::envString("BRAID_TRANSPORT");
  const std::string algo_env = braid::envString("BRAID_ALGO_DIR");
  std::string algorithms = "Braid's selection";
  if (!options.algo.empty()) {
    algorithms = braid::perf::algoHeaderText(options.algo, algo_files, options);
  } else if (!algo_env.empty()) {
    algorithms = "BRAID_ALGO_DIR " + algo_env + ", then Braid's selection";
  }
  std::string transport_text = setup.transport;
  if (setup.transport == "auto") {
    transport_text =
        options.processes > 1 ? "auto (shared memory between processes, threads within one)" : "auto (threads)";
  }
  setup.braid_line = "Braid: nProcs " + std::to_string(options.processes) + " nRanks " +
                     std::to_string(options.ranks()) + " (CPU ranks) transport " + transport_text +
                     " algorithms: " + algorithms;
  // One process with the threads transport: ncclCommInitAll's shape. Any other transport, or several processes:
  // a unique id and braidCommInitRank on every rank.
  setup.init_all = options.processes == 1 && (setup.transport == "auto" || setup.transport == "threads");
  setup.options = options;
  return braid::perf::runBenchmark(setup);
}
