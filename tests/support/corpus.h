// Test helper: where the realcases corpus is, and the skip every corpus test starts with.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <vector>

namespace braid::testing {

/// ../shared/realcases beside the source tree (BRAID_SHARED_DIR is set by tests/CMakeLists.txt).
inline std::filesystem::path realcasesDir() { return std::filesystem::path(BRAID_SHARED_DIR) / "realcases"; }

/// The corpus's MSCCL and TACCL programs: every .xml in realcases/msccl and realcases/taccl/outputs_xml, sorted
/// (a folder that is absent adds none).
inline std::vector<std::filesystem::path> corpusXmlFiles() {
  std::vector<std::filesystem::path> files;
  for (const char* dir : {"msccl", "taccl/outputs_xml"}) {
    const std::filesystem::path path = realcasesDir() / dir;
    if (!std::filesystem::is_directory(path)) continue;
    for (const auto& entry : std::filesystem::directory_iterator(path)) {
      if (entry.path().extension() == ".xml") files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace braid::testing

/// Skips the current test, with the path in the message, when the corpus is absent.
#define BRAID_SKIP_WITHOUT_REALCASES()                                                                \
  do {                                                                                                \
    if (!std::filesystem::is_directory(::braid::testing::realcasesDir())) {                           \
      GTEST_SKIP() << ::braid::testing::realcasesDir().string() << " is absent: corpus test skipped"; \
    }                                                                                                 \
  } while (0)
