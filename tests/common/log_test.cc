// The logger (src/common/log.h): line format, level filtering, setLogLevel, and BRAID_DEBUG parsed at first use
// (in a fresh process, since the level is read once per process).
#include "common/log.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace braid {
namespace {

// Restores the level in force when the test started.
class LogTest : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = logLevel(); }
  void TearDown() override { setLogLevel(saved_); }

 private:
  LogLevel saved_ = LogLevel::kWarn;
};

TEST_F(LogTest, LinesNameTheLevelAndTheRank) {
  setLogLevel(LogLevel::kInfo);
  ::testing::internal::CaptureStderr();
  BRAID_LOG(kWarn, "BRAID_ALGO_DIR {}: nothing for {} ranks", "/tmp/a", 3);
  BRAID_LOG_RANK(kInfo, 2, "allreduce {} B", 1024);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "braid WARN: BRAID_ALGO_DIR /tmp/a: nothing for 3 ranks\nbraid INFO rank 2: allreduce 1024 B\n");
}

TEST_F(LogTest, LevelsBelowTheOneInForceArePrintedOthersAreNot) {
  int formatted = 0;
  auto count = [&formatted] { return ++formatted; };
  setLogLevel(LogLevel::kWarn);
  ::testing::internal::CaptureStderr();
  BRAID_LOG(kWarn, "w{}", count());
  BRAID_LOG(kInfo, "i{}", count());
  BRAID_LOG(kTrace, "t{}", count());
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "braid WARN: w1\n");
  EXPECT_EQ(formatted, 1);  // the arguments of a disabled level are not evaluated
  setLogLevel(LogLevel::kNone);
  ::testing::internal::CaptureStderr();
  BRAID_LOG(kWarn, "w");
  BRAID_LOG_RANK(kWarn, 0, "w");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  setLogLevel(LogLevel::kTrace);
  EXPECT_TRUE(logEnabled(LogLevel::kTrace));
  EXPECT_FALSE(logEnabled(LogLevel::kNone));  // kNone is a level to set, never one to log at
  EXPECT_STREQ(logLevelName(LogLevel::kTrace), "TRACE");
}

// BRAID_DEBUG is read on first use: each case runs in a re-executed process (threadsafe death-test style) whose
// exit code is the level it read.
void expectParsedLevel(const char* value, LogLevel expected, const char* stderr_regex) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("BRAID_DEBUG", value, 1);
        std::exit(static_cast<int>(logLevel()));
      },
      ::testing::ExitedWithCode(static_cast<int>(expected)), stderr_regex)
      << "BRAID_DEBUG=" << value;
}

TEST(LogLevelFromEnv, ParsedCaseInsensitively) {
  expectParsedLevel("info", LogLevel::kInfo, "^$");
  expectParsedLevel("TRACE", LogLevel::kTrace, "^$");
  expectParsedLevel("Warn", LogLevel::kWarn, "^$");
  expectParsedLevel("OFF", LogLevel::kNone, "^$");
  expectParsedLevel("none", LogLevel::kNone, "^$");
}

TEST(LogLevelFromEnv, AnUnknownValueWarnsOnceAndMeansWarn) {
  expectParsedLevel("verbose", LogLevel::kWarn, "braid WARN: BRAID_DEBUG=verbose: not NONE, WARN, INFO or TRACE");
}

}  // namespace
}  // namespace braid
