// writeFileAtomic: whole-or-nothing writes that never replace what is not a regular file.
#include "braid/file_io.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/file_io_internal.h"

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

TEST_F(FileIoTest, NamesOfOpenDescriptors) {
  EXPECT_EQ(inheritedDescriptor("/dev/stdin"), 0);
  EXPECT_EQ(inheritedDescriptor("/dev/stdout"), 1);
  EXPECT_EQ(inheritedDescriptor("/dev//stderr"), 2);
  EXPECT_EQ(inheritedDescriptor("/dev/fd/7"), 7);
  EXPECT_EQ(inheritedDescriptor("/dev/fd/../fd/12"), 12);
  EXPECT_EQ(inheritedDescriptor("/proc/self/fd/3"), 3);
  EXPECT_EQ(inheritedDescriptor("/proc/thread-self/fd/4"), 4);
  EXPECT_EQ(inheritedDescriptor("/proc/" + std::to_string(::getpid()) + "/fd/5"), 5);
  EXPECT_EQ(inheritedDescriptor("/proc/1/fd/5"), ::getpid() == 1 ? 5 : -1);  // another process's descriptor
  EXPECT_EQ(inheritedDescriptor("/dev/fd/x"), -1);
  EXPECT_EQ(inheritedDescriptor("/dev/fd/"), -1);
  EXPECT_EQ(inheritedDescriptor("/dev/stdoutx"), -1);
  EXPECT_EQ(inheritedDescriptor("/dev/null"), -1);
  EXPECT_EQ(inheritedDescriptor(""), -1);
  EXPECT_EQ(inheritedDescriptor((dir_ / "a.txt").string()), -1);
  // Through a chain of symbolic links, relative ones resolved against the link's directory.
  fs::create_symlink("/dev/fd/9", dir_ / "abs");
  fs::create_symlink("abs", dir_ / "rel");
  EXPECT_EQ(inheritedDescriptor((dir_ / "rel").string()), 9);
  fs::create_symlink("loop2", dir_ / "loop1");
  fs::create_symlink("loop1", dir_ / "loop2");
  EXPECT_EQ(inheritedDescriptor((dir_ / "loop1").string()), -1);
}

// `{ echo HEAD; braid ... -o /dev/stdout; echo TAIL; } > f`: the output lands between what the shell wrote, at the
// descriptor's offset, and the file is not replaced.
TEST_F(FileIoTest, OpenDescriptorsAreWrittenInPlace) {
  const fs::path f = dir_ / "combined.txt";
  const int fd = ::open(f.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  struct stat before {};
  ASSERT_EQ(::fstat(fd, &before), 0);
  ASSERT_EQ(::write(fd, "HEAD\n", 5), 5);
  ASSERT_TRUE(writeFileAtomic("/dev/fd/" + std::to_string(fd), "one\n").isOk());
  ASSERT_TRUE(writeFileAtomic("/proc/self/fd/" + std::to_string(fd), "two\n").isOk());
  fs::create_symlink("/dev/fd/" + std::to_string(fd), dir_ / "link");
  ASSERT_TRUE(writeFileAtomic((dir_ / "link").string(), "three\n").isOk());
  ASSERT_EQ(::write(fd, "TAIL\n", 5), 5);
  ::close(fd);
  EXPECT_EQ(readFile(f.string()).value(), "HEAD\none\ntwo\nthree\nTAIL\n");
  struct stat after {};
  ASSERT_EQ(::stat(f.c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino);  // the same file, not a replacement
  // A descriptor opened for appending (`>> f`) keeps what the file held.
  const int app = ::open(f.c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(app, 0);
  ASSERT_TRUE(writeFileAtomic("/dev/fd/" + std::to_string(app), "four\n").isOk());
  ::close(app);
  EXPECT_EQ(readFile(f.string()).value(), "HEAD\none\ntwo\nthree\nTAIL\nfour\n");
  // A descriptor that is not open: an error naming the path.
  const Status closed = writeFileAtomic("/dev/fd/" + std::to_string(fd), "x");
  EXPECT_EQ(closed.code(), StatusCode::kSystemError);
  EXPECT_NE(closed.message().find("/dev/fd/" + std::to_string(fd)), std::string::npos);
}

// Every input is text: a NUL byte, an empty or white-space file and a loop of symbolic links each have one message.
TEST_F(FileIoTest, RefusesWhatIsNotText) {
  const fs::path nul = dir_ / "nul.yaml";
  std::ofstream(nul) << std::string("ab\ncd") << '\0' << "ef";
  const Result<std::string> binary = readFile(nul.string());
  ASSERT_FALSE(binary.isOk());
  EXPECT_EQ(binary.status().code(), StatusCode::kParseError);
  EXPECT_EQ(binary.status().message(), nul.string() + ": not a text file (NUL byte at offset 5)");
  // A NUL past the first 64 KiB block is found in its own block, at its offset in the file.
  const fs::path late = dir_ / "late.txt";
  std::ofstream(late) << std::string(70000, 'x') << '\0';
  EXPECT_EQ(readFile(late.string()).status().message(), late.string() + ": not a text file (NUL byte at offset 70000)");
  for (const char* text : {"", " \n\t\r\n"}) {
    const fs::path empty = dir_ / "empty.txt";
    std::ofstream(empty) << text;
    const Result<std::string> read = readFile(empty.string());
    ASSERT_FALSE(read.isOk());
    EXPECT_EQ(read.status().message(), empty.string() + ": empty file");
  }
  fs::create_symlink(dir_ / "b", dir_ / "a");
  fs::create_symlink(dir_ / "a", dir_ / "b");
  EXPECT_EQ(readFile((dir_ / "a").string()).status().message(),
            (dir_ / "a").string() + ": too many levels of symbolic links");
}

// checkOutputPath: what a command checks of an output before any work.
TEST_F(FileIoTest, ChecksOutputPaths) {
  EXPECT_TRUE(checkOutputPath((dir_ / "new.txt").string()).isOk());
  EXPECT_TRUE(checkOutputPath("/dev/null").isOk());
  EXPECT_TRUE(checkOutputPath("/dev/stdout").isOk());
  EXPECT_EQ(checkOutputPath("").message(), "an empty path names no file to write");
  const std::string missing = (dir_ / "no" / "x.txt").string();
  EXPECT_EQ(checkOutputPath(missing).message(),
            "cannot write " + missing + ": directory " + (dir_ / "no").string() + " does not exist");
  std::ofstream(dir_ / "file") << "x";
  const std::string below_file = (dir_ / "file" / "x.txt").string();
  EXPECT_EQ(checkOutputPath(below_file).message(),
            "cannot write " + below_file + ": " + (dir_ / "file").string() + " is not a directory");
  EXPECT_EQ(checkOutputPath(dir_.string()).message(), "cannot write " + dir_.string() + ": it is a directory");
  fs::create_symlink(dir_ / "b", dir_ / "a");
  fs::create_symlink(dir_ / "a", dir_ / "b");
  EXPECT_EQ(checkOutputPath((dir_ / "a").string()).message(),
            (dir_ / "a").string() + ": too many levels of symbolic links");
  // A dangling link: the file it names is created, in that file's directory.
  fs::create_symlink(dir_ / "gone" / "t.txt", dir_ / "dangling");
  EXPECT_NE(checkOutputPath((dir_ / "dangling").string()).message().find((dir_ / "gone").string() + " does not exist"),
            std::string::npos);
  // writeFileAtomic through a loop of links says the same.
  EXPECT_EQ(writeFileAtomic((dir_ / "a").string(), "x").message(),
            (dir_ / "a").string() + ": too many levels of symbolic links");
}

TEST_F(FileIoTest, BadTargets) {
  EXPECT_EQ(writeFileAtomic("", "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(writeFileAtomic(dir_.string(), "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(writeFileAtomic((dir_ / "no" / "such" / "dir.txt").string(), "x").code(), StatusCode::kSystemError);
}

TEST_F(FileIoTest, ReadsUpToTheLimit) {
  const fs::path f = dir_ / "big.txt";
  std::ofstream(f) << std::string(4096, 'x');
  EXPECT_EQ(readFile(f.string(), 4096).value().size(), 4096u);
  const Result<std::string> over = readFile(f.string(), 4095);
  ASSERT_FALSE(over.isOk());
  EXPECT_EQ(over.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(over.status().message(), f.string() + ": larger than 4095 bytes, the most Braid reads from one input file");
  // A sparse file far above the default limit fails from its size, before anything is read.
  const fs::path huge = dir_ / "huge.bin";
  std::ofstream(huge).close();
  fs::resize_file(huge, kMaxInputFileBytes + 1);
  const Result<std::string> too_big = readFile(huge.string());
  ASSERT_FALSE(too_big.isOk());
  EXPECT_EQ(too_big.status().message(),
            huge.string() + ": larger than 256 MiB, the most Braid reads from one input file");
}

// A device is refused before anything is read: /dev/zero fails at once however large the limit.
TEST_F(FileIoTest, DevicesAreRefusedBeforeReading) {
  for (const char* device : {"/dev/zero", "/dev/null"}) {
    if (!fs::exists(device)) continue;
    const Result<std::string> read = readFile(device);
    ASSERT_FALSE(read.isOk()) << device;
    EXPECT_EQ(read.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(read.status().message(), std::string(device) +
                                           ": a device or socket, not a regular file or pipe: Braid reads inputs "
                                           "from files and pipes");
  }
}

// A pipe longer than the limit is read up to one byte past it and no further: of 4096 + 100 bytes with a limit of
// 4096, 4097 are taken and 99 stay in the pipe.
TEST_F(FileIoTest, PipesAreReadOneBytePastTheLimitAtMost) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const std::string text(4096 + 100, 'p');  // less than a pipe's buffer: written whole before reading
  ASSERT_EQ(::write(fds[1], text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fds[1]);
  const Result<std::string> read = readFile("/dev/fd/" + std::to_string(fds[0]), 4096);
  ASSERT_FALSE(read.isOk());
  EXPECT_EQ(read.status().message(),
            "/dev/fd/" + std::to_string(fds[0]) + ": larger than 4096 bytes, the most Braid reads from one input file");
  char rest[256];
  ssize_t left = 0;
  for (ssize_t n; (n = ::read(fds[0], rest, sizeof rest)) > 0;) left += n;
  ::close(fds[0]);
  EXPECT_EQ(left, 99);
}

// A named pipe with no writer: open(2) would wait for one forever; readFile answers at once with an empty input.
// Run in a child process bounded by an alarm, so a regression fails the test instead of hanging it.
TEST_F(FileIoTest, FifoWithoutWriterIsEmptyAtOnce) {
  const fs::path fifo = dir_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::alarm(5);
    const Result<std::string> read = readFile(fifo.string());
    const bool want = !read.isOk() && read.status().message() == fifo.string() +
                                                                     ": empty file (a pipe with no writer, or none "
                                                                     "that wrote)";
    ::_exit(want ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "readFile of a FIFO without a writer did not return (signal "
                                 << (WIFSIGNALED(status) ? WTERMSIG(status) : 0) << ")";
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST_F(FileIoTest, ReadsPipes) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::thread writer([&] {
    const std::string text(100000, 'p');
    EXPECT_EQ(::write(fds[1], text.data(), text.size()), static_cast<ssize_t>(text.size()));
    ::close(fds[1]);
  });
  const Result<std::string> read = readFile("/dev/fd/" + std::to_string(fds[0]));
  writer.join();
  ::close(fds[0]);
  ASSERT_TRUE(read.isOk()) << read.status().toString();
  EXPECT_EQ(read->size(), 100000u);
}

// A signal that ends the process in the middle of writeFileAtomic removes the temporary file and leaves the target
// as it was; the process still dies of the signal. Each writer of `writers` threads in a child process stops half
// way through (the test hook) and reports its temporary file; then the child gets `sig`.
void expectSignalLeavesNothing(const fs::path& dir, int sig, int writers, bool target_exists) {
  std::vector<fs::path> targets;
  for (int w = 0; w < writers; ++w) {
    targets.push_back(dir / ("out" + std::to_string(w) + ".yaml"));
    if (target_exists) std::ofstream(targets.back()) << "previous";
  }
  int report[2];
  ASSERT_EQ(::pipe(report), 0);
  std::fflush(nullptr);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(report[0]);
    std::vector<std::thread> threads;
    for (int w = 0; w < writers; ++w) {
      threads.emplace_back([&, w] {
        const std::string content(1 << 20, static_cast<char>('a' + w));
        // Never returns: the hook waits for the signal that ends the process, so there is no status to check.
        static_cast<void>(detail::writeFileAtomicHooked(targets[w].string(), content, [&](const std::string& temp) {
          const std::string line = temp + "\n";
          if (::write(report[1], line.data(), line.size()) < 0) ::_exit(3);
          for (;;) ::pause();  // the signal ends the process here
        }));
      });
    }
    for (std::thread& t : threads) t.join();
    ::_exit(2);  // not reached: every writer waits for the signal
  }
  ::close(report[1]);
  std::vector<std::string> temps;
  std::string pending;
  char buffer[4096];
  while (static_cast<int>(temps.size()) < writers) {
    const ssize_t n = ::read(report[0], buffer, sizeof buffer);
    if (n <= 0) break;
    pending.append(buffer, static_cast<size_t>(n));
    for (size_t nl; (nl = pending.find('\n')) != std::string::npos; pending.erase(0, nl + 1)) {
      temps.push_back(pending.substr(0, nl));
    }
  }
  ::close(report[0]);
  ASSERT_EQ(static_cast<int>(temps.size()), writers);
  for (const std::string& t : temps) {
    EXPECT_TRUE(fs::exists(t)) << t;
    EXPECT_EQ(fs::path(t).parent_path(), dir);
  }
  ASSERT_EQ(::kill(child, sig), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child status " << status;
  EXPECT_EQ(WTERMSIG(status), sig);
  for (const std::string& t : temps) EXPECT_FALSE(fs::exists(t)) << t << " left behind by signal " << sig;
  for (const fs::path& target : targets) {
    if (target_exists) {
      EXPECT_EQ(readFile(target.string()).value(), "previous");
    } else {
      EXPECT_FALSE(fs::exists(target));
    }
  }
  size_t entries = std::distance(fs::directory_iterator(dir), fs::directory_iterator());
  EXPECT_EQ(entries, target_exists ? targets.size() : 0u);
}

// Whether `sig` is not ignored in this process (writeFileAtomic leaves an ignored signal ignored).
bool notIgnored(int sig) {
  struct sigaction old {};
  return ::sigaction(sig, nullptr, &old) == 0 && ((old.sa_flags & SA_SIGINFO) != 0 || old.sa_handler != SIG_IGN);
}

TEST_F(FileIoTest, SignalDuringWriteRemovesTheTemporaryFile) {
  int tested = 0;
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
    if (!notIgnored(sig)) continue;  // an ignored signal (nohup, a background job) is left alone
    SCOPED_TRACE(strsignal(sig));
    expectSignalLeavesNothing(dir_, sig, 1, false);
    expectSignalLeavesNothing(dir_, sig, 1, true);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    ++tested;
  }
  if (tested == 0) GTEST_SKIP() << "SIGTERM, SIGINT and SIGHUP are all ignored here";
}

TEST_F(FileIoTest, SignalDuringConcurrentWritesRemovesEveryTemporaryFile) {
  if (!notIgnored(SIGTERM)) GTEST_SKIP() << "SIGTERM is ignored here";
  expectSignalLeavesNothing(dir_, SIGTERM, 4, false);
}

}  // namespace
}  // namespace braid
