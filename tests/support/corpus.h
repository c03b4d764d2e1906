// Test helper: where the realcases corpus is, and the skip every corpus test starts with.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>

namespace braid::testing {

/// ../shared/realcases beside the source tree (BRAID_SHARED_DIR is set by tests/CMakeLists.txt).
inline std::filesystem::path realcasesDir() { return std::filesystem::path(BRAID_SHARED_DIR) / "realcases"; }

}  // namespace braid::testing

/// Skips the current test, with the path in the message, when the corpus is absent.
#define BRAID_SKIP_WITHOUT_REALCASES()                                                                \
  do {                                                                                                \
    if (!std::filesystem::is_directory(::braid::testing::realcasesDir())) {                           \
      GTEST_SKIP() << ::braid::testing::realcasesDir().string() << " is absent: corpus test skipped"; \
    }                                                                                                 \
  } while (0)
