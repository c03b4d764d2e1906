// braidGetVersion reports the project version that CMakeLists.txt declares (project(braid VERSION X.Y.Z)), in
// NCCL's encoding major*10000 + minor*100 + patch.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "braid/braid.h"

namespace braid {
namespace {

TEST(CApi, VersionIsTheProjectVersion) {
  std::ifstream in(std::string(BRAID_SOURCE_DIR) + "/CMakeLists.txt");
  ASSERT_TRUE(in.good()) << "cannot read " << BRAID_SOURCE_DIR << "/CMakeLists.txt";
  std::stringstream text;
  text << in.rdbuf();
  const std::string cmake = text.str();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(cmake, m, std::regex(R"(project\(braid\s+VERSION\s+(\d+)\.(\d+)\.(\d+))")))
      << "no project(braid VERSION X.Y.Z) in CMakeLists.txt";
  const int expected = std::stoi(m[1]) * 10000 + std::stoi(m[2]) * 100 + std::stoi(m[3]);
  int version = -1;
  ASSERT_EQ(braidGetVersion(&version), braidSuccess);
  EXPECT_EQ(version, expected) << "CMakeLists.txt declares " << m[1] << "." << m[2] << "." << m[3];
  EXPECT_EQ(braidGetVersion(nullptr), braidInvalidArgument);
}

}  // namespace
}  // namespace braid
