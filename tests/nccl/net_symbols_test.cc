// libnccl-net-braid.so exports only NCCL's plugin symbols and does not need the solver (Z3).
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <regex>
#include <sstream>
#include <string>

#include "support/command.h"

namespace {

using braid::test::runCommand;

const std::string kLibrary = std::string(BRAID_NCCL_PLUGIN_DIR) + "/libnccl-net-braid.so";

TEST(NetSymbols, OnlyPluginSymbolsExported) {
  int status = 0;
  runCommand("command -v nm >/dev/null 2>&1", &status);
  if (status != 0) GTEST_SKIP() << "nm is not installed";
  const std::string out = runCommand("nm -D --defined-only " + kLibrary + " 2>&1", &status);
  ASSERT_EQ(status, 0) << out;
  std::istringstream lines(out);
  std::string line;
  int net = 0;
  const std::regex allowed(R"(^\S+ [A-Za-z] (ncclNetPlugin_v(6|7|8|9|10|11)|ncclTunerPlugin_v[0-9]+)$)");
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    EXPECT_TRUE(std::regex_match(line, allowed)) << "unexpected exported symbol: " << line;
    if (line.find("ncclNetPlugin_v") != std::string::npos) ++net;
  }
  EXPECT_EQ(net, 6);
}

TEST(NetSymbols, DoesNotNeedZ3) {
  int status = 0;
  runCommand("command -v readelf >/dev/null 2>&1", &status);
  if (status != 0) GTEST_SKIP() << "readelf is not installed";
  const std::string out = runCommand("readelf -d " + kLibrary + " 2>&1", &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("NEEDED"), std::string::npos);
  EXPECT_EQ(out.find("libz3"), std::string::npos) << out;
}

}  // namespace
