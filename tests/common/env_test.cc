// The BRAID_* registry (src/common/env.h) and docs/env.md list the same variables with the same defaults, and
// every BRAID_* variable the sources read is in the registry and read through it.
#include "common/env.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace braid {
namespace {

std::string readText(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::set<std::string> registeredNames() {
  std::set<std::string> names;
  for (const EnvParam& p : envParams()) names.insert(p.name);
  return names;
}

// One read of a BRAID_* variable named by a string literal in the sources.
struct EnvRead {
  std::string file;  // relative to the source tree
  int line = 0;
  std::string reader;  // getenv, envString, envIsSet, envInt, envDouble
  std::string name;
};

// Every literal read in the library, runtime, CLI and benchmark sources (tests set their own knobs and are not
// scanned).
const std::vector<EnvRead>& sourceReads() {
  static const std::vector<EnvRead> reads = [] {
    const std::filesystem::path root(BRAID_SOURCE_DIR);
    const std::regex read_re(R"re(\b(getenv|envString|envIsSet|envInt|envDouble)\(\s*"(BRAID_[A-Za-z0-9_]*)")re");
    std::vector<EnvRead> found;
    for (const char* folder : {"src", "synthesizer", "runtime", "comm", "cli", "perf", "include"}) {
      if (!std::filesystem::is_directory(root / folder)) continue;
      for (const auto& entry : std::filesystem::recursive_directory_iterator(root / folder)) {
        const std::string ext = entry.path().extension().string();
        if (!entry.is_regular_file() || (ext != ".cc" && ext != ".h" && ext != ".cu" && ext != ".cuh")) continue;
        std::istringstream lines(readText(entry.path()));
        std::string text;
        for (int line = 1; std::getline(lines, text); ++line) {
          if (text.find("\"BRAID_") == std::string::npos) continue;  // std::regex is slow; most lines have none
          for (std::sregex_iterator it(text.begin(), text.end(), read_re), end; it != end; ++it) {
            found.push_back({std::filesystem::relative(entry.path(), root).string(), line, (*it)[1], (*it)[2]});
          }
        }
      }
    }
    return found;
  }();
  return reads;
}

TEST(Env, EveryVariableTheSourcesReadIsRegistered) {
  const std::vector<EnvRead>& reads = sourceReads();
  // The scan finds the reads it is meant to find (a regex that matched nothing would pass vacuously).
  bool found_socket_ifname = false;
  for (const EnvRead& r : reads) found_socket_ifname |= r.name == "BRAID_SOCKET_IFNAME";
  EXPECT_TRUE(found_socket_ifname) << "the scan found no read of BRAID_SOCKET_IFNAME under " << BRAID_SOURCE_DIR;
  const std::set<std::string> registered = registeredNames();
  for (const EnvRead& r : reads) {
    EXPECT_TRUE(registered.count(r.name))
        << r.file << ":" << r.line << ": " << r.name << " is read but not registered in src/common/env.cc";
  }
}

TEST(Env, SourcesReadBraidVariablesThroughTheRegistry) {
  for (const EnvRead& r : sourceReads()) {
    EXPECT_NE(r.reader, "getenv") << r.file << ":" << r.line << ": reads " << r.name
                                  << " with getenv; use envString/envInt/envDouble (src/common/env.h)";
  }
}

TEST(Env, DocsListExactlyTheRegisteredVariablesInOrder) {
  const std::string text = readText(std::filesystem::path(BRAID_SOURCE_DIR) / "docs/env.md");
  ASSERT_FALSE(text.empty()) << "cannot read docs/env.md";
  const std::regex row_re(R"re(^\| `(BRAID_[A-Za-z0-9_]*)` \|)re");
  std::vector<std::string> documented;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row_re)) documented.push_back(m[1]);
  }
  std::vector<std::string> registered;
  for (const EnvParam& p : envParams()) registered.push_back(p.name);
  EXPECT_EQ(documented, registered) << "docs/env.md's table and envParams() (src/common/env.cc) differ";
}

TEST(Env, DocsListEveryRegisteredVariableWithItsDefault) {
  std::ifstream in(std::string(BRAID_SOURCE_DIR) + "/docs/env.md");
  ASSERT_TRUE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  for (const EnvParam& p : envParams()) {
    const std::string row = std::string("| `") + p.name + "` | " +
                            (p.default_value[0] ? std::string("`") + p.default_value + "`" : std::string("unset")) +
                            " |";
    EXPECT_NE(text.str().find(row), std::string::npos) << "docs/env.md lacks the row for " << p.name;
  }
}

TEST(Env, ValuesDefaultsAndErrors) {
  unsetenv("BRAID_TIMEOUT");
  EXPECT_EQ(envString("BRAID_TIMEOUT"), "300");
  EXPECT_DOUBLE_EQ(runtimeTimeoutSeconds().value(), 300.0);
  setenv("BRAID_TIMEOUT", "2.5", 1);
  EXPECT_DOUBLE_EQ(runtimeTimeoutSeconds().value(), 2.5);
  setenv("BRAID_TIMEOUT", "abc", 1);
  Result<double> bad = envDouble("BRAID_TIMEOUT");
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().message(), "BRAID_TIMEOUT=abc: not a number");
  // Not a positive number of seconds: an error naming the variable and its text.
  for (const char* text : {"abc", "-1", "0", "nan", "5s", "-1e400", "1e-400"}) {
    setenv("BRAID_TIMEOUT", text, 1);
    Result<double> refused = runtimeTimeoutSeconds();
    ASSERT_FALSE(refused.isOk()) << text;
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(refused.status().message(),
              std::string("BRAID_TIMEOUT=") + text + ": not a positive number of seconds (or inf)");
  }
  // inf and huge values mean the documented maximum, so deadlines stay representable.
  // 1e400 overflows a double (strtod: HUGE_VAL and ERANGE): it is inf too.
  for (const char* text : {"inf", "1e10", "1e300", "1e400"}) {
    setenv("BRAID_TIMEOUT", text, 1);
    EXPECT_DOUBLE_EQ(runtimeTimeoutSeconds().value(), kMaxTimeoutSeconds) << text;
  }
  EXPECT_DOUBLE_EQ(resolveTimeoutSeconds(7).value(), 7.0);
  EXPECT_DOUBLE_EQ(resolveTimeoutSeconds(1e12).value(), kMaxTimeoutSeconds);
  EXPECT_FALSE(resolveTimeoutSeconds(-2).isOk());
  EXPECT_FALSE(resolveTimeoutSeconds(std::nan("")).isOk());
  setenv("BRAID_TIMEOUT", "1e10", 1);
  EXPECT_DOUBLE_EQ(resolveTimeoutSeconds(0).value(), kMaxTimeoutSeconds);
  const auto now = std::chrono::steady_clock::now();
  EXPECT_GT(now + timeoutDuration(1e10), now + std::chrono::hours(24 * 365));  // no overflow into the past
  EXPECT_EQ(timeoutDuration(-1).count(), 0);
  unsetenv("BRAID_TIMEOUT");
  setenv("BRAID_RANK", "3", 1);
  Result<int64_t> rank = envInt("BRAID_RANK");
  ASSERT_TRUE(rank.isOk());
  EXPECT_EQ(*rank, 3);
  setenv("BRAID_RANK", "3x", 1);
  EXPECT_FALSE(envInt("BRAID_RANK").isOk());
  unsetenv("BRAID_RANK");
  EXPECT_FALSE(envInt("BRAID_RANK").isOk());  // unset and no default
  EXPECT_EQ(envString("BRAID_NOT_REGISTERED"), "");
  // envIsSet: set to a non-empty value, the case where envString returns the variable rather than its default.
  unsetenv("BRAID_TUNER");
  EXPECT_FALSE(envIsSet("BRAID_TUNER"));
  setenv("BRAID_TUNER", "", 1);
  EXPECT_FALSE(envIsSet("BRAID_TUNER"));
  EXPECT_EQ(envString("BRAID_TUNER"), "validated");
  setenv("BRAID_TUNER", "model", 1);
  EXPECT_TRUE(envIsSet("BRAID_TUNER"));
  unsetenv("BRAID_TUNER");
  setenv("BRAID_NOT_REGISTERED", "1", 1);
  EXPECT_FALSE(envIsSet("BRAID_NOT_REGISTERED"));
  unsetenv("BRAID_NOT_REGISTERED");
}

}  // namespace
}  // namespace braid
