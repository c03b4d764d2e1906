// The BRAID_* registry (src/common/env.h) and docs/env.md list the same variables with the same defaults.
#include "common/env.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace braid {
namespace {

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
  EXPECT_DOUBLE_EQ(runtimeTimeoutSeconds(), 300.0);
  setenv("BRAID_TIMEOUT", "2.5", 1);
  EXPECT_DOUBLE_EQ(runtimeTimeoutSeconds(), 2.5);
  setenv("BRAID_TIMEOUT", "abc", 1);
  Result<double> bad = envDouble("BRAID_TIMEOUT");
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().message(), "BRAID_TIMEOUT=abc: not a number");
  EXPECT_DOUBLE_EQ(runtimeTimeoutSeconds(), 300.0);  // a malformed value falls back to the default
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
}

}  // namespace
}  // namespace braid
