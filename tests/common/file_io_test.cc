// writeFileAtomic: whole-or-nothing writes that never replace what is not a regular file.
#include "braid/file_io.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

namespace braid {
namespace {

namespace fs = std::filesystem;

class FileIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fs::path("braid_file_io_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(FileIoTest, WritesAndReplacesKeepingPermissions) {
  const fs::path f = dir_ / "a.txt";
  ASSERT_TRUE(writeFileAtomic(f.string(), "one").isOk());
  EXPECT_EQ(readFile(f.string()).value(), "one");
  ::chmod(f.c_str(), 0600);
  ASSERT_TRUE(writeFileAtomic(f.string(), "two").isOk());
  EXPECT_EQ(readFile(f.string()).value(), "two");
  EXPECT_EQ(fs::status(f).permissions() & fs::perms::mask, fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);  // no temporary left
}

TEST_F(FileIoTest, SymbolicLinksAreWrittenThrough) {
  const fs::path target = dir_ / "target.txt";
  const fs::path link = dir_ / "link.txt";
  fs::create_symlink("target.txt", link);  // dangling until written
  ASSERT_TRUE(writeFileAtomic(link.string(), "via link").isOk());
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link)));
  EXPECT_EQ(readFile(target.string()).value(), "via link");
  ASSERT_TRUE(writeFileAtomic(link.string(), "again").isOk());
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link)));
  EXPECT_EQ(readFile(target.string()).value(), "again");
}

TEST_F(FileIoTest, DevicesAndFifosAreNotReplaced) {
  ASSERT_TRUE(writeFileAtomic("/dev/null", "discarded").isOk());
  EXPECT_TRUE(fs::is_character_file(fs::status("/dev/null")));
  if (fs::exists("/dev/full")) {
    const Status st = writeFileAtomic("/dev/full", "x");
    EXPECT_EQ(st.code(), StatusCode::kSystemError);
    EXPECT_NE(st.message().find("/dev/full"), std::string::npos);
    EXPECT_TRUE(fs::is_character_file(fs::status("/dev/full")));
  }
}

TEST_F(FileIoTest, BadTargets) {
  EXPECT_EQ(writeFileAtomic("", "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(writeFileAtomic(dir_.string(), "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(writeFileAtomic((dir_ / "no" / "such" / "dir.txt").string(), "x").code(), StatusCode::kSystemError);
}

}  // namespace
}  // namespace braid
