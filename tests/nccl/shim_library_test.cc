// libbraid_nccl.so as a library: it exports exactly the NCCL entry points it defines, needs neither libnccl nor Z3,
// and, preloaded into a program built against nccl.h and linked with the real libnccl (shim_app.c), changes no
// return code while logging where each call went (BRAID_DEBUG=INFO). Skipped, naming why, in a build without the
// shim (no CUDA or nccl.h) or where the program cannot start. Its companion libbraid_nccl_pareto.so (every build)
// exports one versioned function and is where Z3 is needed.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "braid/algorithm.h"
#include "braid/classic.h"
#include "support/command.h"

namespace {

namespace fs = std::filesystem;

const std::string kLibrary = BRAID_SHIM_LIBRARY;  // "" when not built
const std::string kApp = BRAID_SHIM_APP;          // "" when not built
const std::string kCompanion = BRAID_PARETO_COMPANION;

using braid::test::runCommand;

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(line);
  return out;
}

std::string readFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(ShimLibrary, ExportsOnlyItsNcclEntryPoints) {
  if (kLibrary.empty()) GTEST_SKIP() << "libbraid_nccl.so is not built (needs CUDA and nccl.h)";
  int status = 0;
  runCommand("command -v nm >/dev/null 2>&1", &status);
  if (status != 0) GTEST_SKIP() << "nm is not installed";
  const std::string out = runCommand("nm -D --defined-only " + kLibrary + " 2>&1", &status);
  ASSERT_EQ(status, 0) << out;
  const std::set<std::string> expected = {"ncclGetVersion",
                                          "ncclGetUniqueId",
                                          "ncclGetErrorString",
                                          "ncclGetLastError",
                                          "ncclCommGetAsyncError",
                                          "ncclCommInitRank",
                                          "ncclCommInitRankConfig",
                                          "ncclCommInitAll",
                                          "ncclCommSplit",
                                          "ncclCommFinalize",
                                          "ncclCommDestroy",
                                          "ncclCommAbort",
                                          "ncclGroupStart",
                                          "ncclGroupEnd",
                                          "ncclAllReduce",
                                          "ncclAllGather",
                                          "ncclReduceScatter",
                                          "ncclBroadcast",
                                          "ncclBcast",
                                          "ncclReduce",
                                          "ncclAlltoAll",
                                          "ncclSend",
                                          "ncclRecv"};
  std::set<std::string> exported;
  const std::regex symbol(R"(^\S+ [A-Za-z] (\S+)$)");
  for (const std::string& line : lines(out)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, symbol)) << line;
    exported.insert(m[1]);
  }
  EXPECT_EQ(exported, expected);
}

TEST(ShimLibrary, NeedsNeitherNcclNorZ3) {
  if (kLibrary.empty()) GTEST_SKIP() << "libbraid_nccl.so is not built (needs CUDA and nccl.h)";
  int status = 0;
  runCommand("command -v readelf >/dev/null 2>&1", &status);
  if (status != 0) GTEST_SKIP() << "readelf is not installed";
  const std::string out = runCommand("readelf -d " + kLibrary + " 2>&1", &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("NEEDED"), std::string::npos);
  EXPECT_EQ(out.find("libnccl"), std::string::npos) << out;
  EXPECT_EQ(out.find("libz3"), std::string::npos) << out;
}

TEST(ShimLibrary, CompanionExportsOneVersionedFunction) {
  int status = 0;
  runCommand("command -v nm >/dev/null 2>&1", &status);
  if (status != 0) GTEST_SKIP() << "nm is not installed";
  const std::string out = runCommand("nm -D --defined-only " + kCompanion + " 2>&1", &status);
  ASSERT_EQ(status, 0) << out;
  std::set<std::string> exported;
  const std::regex symbol(R"(^\S+ [A-Za-z] (\S+)$)");
  for (const std::string& line : lines(out)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, symbol)) << line;
    exported.insert(m[1]);
  }
  // The function with its version as the default, and the version node itself (an absolute symbol).
  const std::set<std::string> expected = {"braidNcclParetoSet_v1@@BRAID_NCCL_PARETO_1", "BRAID_NCCL_PARETO_1"};
  EXPECT_EQ(exported, expected) << out;
}

// Z3 is the companion's dependency (the check above for libbraid_nccl.so is not vacuous), never libnccl or CUDA's.
TEST(ShimLibrary, CompanionNeedsZ3ButNotNcclOrCuda) {
  int status = 0;
  runCommand("command -v readelf >/dev/null 2>&1", &status);
  if (status != 0) GTEST_SKIP() << "readelf is not installed";
  const std::string out = runCommand("readelf -d " + kCompanion + " 2>&1", &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("libz3"), std::string::npos) << out;
  EXPECT_EQ(out.find("libnccl"), std::string::npos) << out;
  EXPECT_EQ(out.find("libcuda"), std::string::npos) << out;
  EXPECT_EQ(out.find("libbraid_nccl.so"), std::string::npos) << out;
}

// Runs shim_app without and with the shim: the same return codes, and one shim line per intercepted call.
TEST(ShimLibrary, PreloadedCallsReachNccl) {
  if (kLibrary.empty() || kApp.empty()) GTEST_SKIP() << "libbraid_nccl.so or shim_app is not built";
  const fs::path dir = fs::temp_directory_path() / ("braid_shim_preload_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "algos");
  // A 2-rank ring all-reduce, as `braid algo ring -c allreduce -n 2 -o ring.xml` writes it.
  braid::ClassicRequest request;
  request.spec.kind = braid::CollectiveKind::kAllReduce;
  request.spec.num_ranks = 2;
  request.spec.chunk_factor = 0;
  braid::Result<braid::Algorithm> ring = braid::buildClassic(request);
  ASSERT_TRUE(ring.isOk()) << ring.status().toString();
  std::ofstream(dir / "algos" / "ring.xml") << braid::writeMscclXml(*ring);

  int plain_status = 0;
  const std::string plain = runCommand(kApp + " 2>" + (dir / "plain.err").string(), &plain_status);
  if (plain_status != 0 || plain.find("ncclGetVersion 0") == std::string::npos) {
    fs::remove_all(dir);
    GTEST_SKIP() << "shim_app does not run with the real libnccl here (status " << plain_status << "): " << plain
                 << readFile(dir / "plain.err");
  }
  int status = 0;
  const std::string preloaded =
      runCommand("env LD_PRELOAD=" + kLibrary + " BRAID_DEBUG=INFO BRAID_TOPOLOGY=dgx1-v100 BRAID_ALGO_DIR=" +
                     (dir / "algos").string() + " MSCCL_XML_FILES=" + (dir / "algos" / "ring.xml").string() + " " +
                     kApp + " 2>" + (dir / "shim.err").string(),
                 &status);
  const std::string log = readFile(dir / "shim.err");
  fs::remove_all(dir);
  ASSERT_EQ(status, 0) << preloaded << log;
  EXPECT_EQ(preloaded, plain) << log;  // every return code as without the shim

  // The algorithms were loaded, and every call the program made has exactly one line naming where it went.
  EXPECT_NE(log.find("shim: 2 algorithms: BRAID_ALGO_DIR allreduce 2 ranks ring_allreduce_n2"), std::string::npos)
      << log;
  EXPECT_NE(log.find("; MSCCL_XML_FILES allreduce 2 ranks ring_allreduce_n2"), std::string::npos) << log;
  // BRAID_TOPOLOGY is read and its topology loaded; no communicator of 8 ranks was made, so the companion was not
  // needed (shim_pareto_fake_test.sh runs the exchange).
  EXPECT_NE(log.find("shim: BRAID_TOPOLOGY=dgx1-v100 (8 GPUs): rank 0 of each 8-rank communicator synthesizes its "
                     "Pareto set (allreduce,allgather,reducescatter,alltoall) within 60 s"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("Pareto set for 8 ranks synthesized"), std::string::npos) << log;
  const std::vector<std::string> log_lines = lines(log);
  for (const std::string& call : lines(plain)) {
    const std::string entry = call.substr(0, call.find(' '));
    int found = 0;
    for (const std::string& line : log_lines) {
      const size_t at = line.find("shim: " + entry + " ");
      if (at == std::string::npos) continue;
      ++found;
      EXPECT_NE(line.find("-> NCCL", at), std::string::npos) << line;
    }
    EXPECT_EQ(found, 1) << entry << " in\n" << log;
  }
}

// In a process that has not loaded libnccl, dlsym(RTLD_NEXT) finds nothing: the shim loads libnccl.so.2 itself and
// its ncclGetVersion returns what libnccl's own returns. Runs in a forked child, whose exit status says what it saw.
TEST(ShimLibrary, LoadsLibncclWhenNothingPrecedesIt) {
  if (kLibrary.empty()) GTEST_SKIP() << "libbraid_nccl.so is not built (needs CUDA and nccl.h)";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD) != nullptr) _exit(77);  // this process has it already
    void* shim = dlopen(kLibrary.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (shim == nullptr) _exit(10);
    using GetVersion = int (*)(int*);
    auto via_shim = reinterpret_cast<GetVersion>(dlsym(shim, "ncclGetVersion"));
    if (via_shim == nullptr) _exit(11);
    int version = 0;
    if (via_shim(&version) != 0) _exit(12);
    void* nccl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);  // loaded by the shim
    if (nccl == nullptr) _exit(13);
    auto direct = reinterpret_cast<GetVersion>(dlsym(nccl, "ncclGetVersion"));
    int expected = -1;
    if (direct == nullptr || direct(&expected) != 0) _exit(14);
    _exit(version == expected && version > 0 ? 0 : 15);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died: status " << status;
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "libnccl.so.2 was loaded in this process before the test";
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "10: dlopen of the shim failed, 11: no ncclGetVersion, 12: it failed, 13: "
         "libnccl.so.2 not loaded by the shim, 14: libnccl's own failed, 15: versions differ";
}

}  // namespace
