#include "braid/file_io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "common/file_io_internal.h"

namespace braid {

namespace {

std::string sizeText(uint64_t bytes) {
  return bytes % (uint64_t{1} << 20) == 0 ? fmt::format("{} MiB", bytes >> 20) : fmt::format("{} bytes", bytes);
}

}  // namespace

Result<std::string> readFile(const std::string& path, uint64_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ELOOP) return invalidArgument(symlinkLoopMessage(path));
    if (err == ENOENT || err == ENOTDIR) return notFound(fmt::format("{}: no such file", path));
    return Status(StatusCode::kSystemError, fmt::format("{}: cannot open: {}", path, std::strerror(err)));
  }
  if (S_ISDIR(st.st_mode)) return invalidArgument(fmt::format("{}: is a directory, not a file", path));
  // A device (/dev/zero, /dev/urandom, a terminal) or socket holds no file to read: refused before it is opened.
  if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) {
    return invalidArgument(fmt::format(
        "{}: a device or socket, not a regular file or pipe: Braid reads inputs from files and pipes", path));
  }
  // O_NONBLOCK: open(2) of a FIFO without a writer would wait for one forever. Opened this way it returns at once,
  // and a FIFO without a writer reads as end of file (an empty input). The flag is cleared after the open, so the
  // reads of a pipe whose writer is still writing wait for its data as usual.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return Status(StatusCode::kSystemError, fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  if (const int flags = ::fcntl(fd, F_GETFL); flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    return Status(StatusCode::kSystemError, fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  }
  const std::string too_large =
      fmt::format("{}: larger than {}, the most Braid reads from one input file", path, sizeText(max_bytes));
  std::string text;
  const bool have_stat = ::fstat(fd, &st) == 0;
  const bool is_pipe = have_stat && S_ISFIFO(st.st_mode);
  if (have_stat && S_ISREG(st.st_mode)) {
    if (static_cast<uint64_t>(st.st_size) > max_bytes) return invalidArgument(too_large);
    text.reserve(static_cast<size_t>(st.st_size));
  }
  // A pipe has no size (`yes |` never ends), and a file may grow: both are read up to max_bytes + 1 bytes, one
  // more than allowed.
  char buffer[1 << 16];
  for (;;) {
    const uint64_t left = max_bytes - text.size();  // text.size() <= max_bytes here
    const size_t want = left >= sizeof buffer ? sizeof buffer : static_cast<size_t>(left) + 1;
    const ssize_t n = ::read(fd, buffer, want);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status(StatusCode::kSystemError, fmt::format("{}: read failed: {}", path, std::strerror(errno)));
    }
    if (n == 0) break;
    // Every input Braid reads is text: a NUL byte (a binary file, a sparse or zero-filled image, UTF-16) stops
    // the read at the block that holds it, before a parser sees a byte.
    if (const void* nul = std::memchr(buffer, '\0', static_cast<size_t>(n)); nul != nullptr) {
      const uint64_t offset = text.size() + static_cast<uint64_t>(static_cast<const char*>(nul) - buffer);
      return parseError(path, 0, "", fmt::format("not a text file (NUL byte at offset {})", offset));
    }
    text.append(buffer, static_cast<size_t>(n));
    if (text.size() > max_bytes) return invalidArgument(too_large);
  }
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    return parseError(
        path, 0, "", is_pipe && text.empty() ? "empty file (a pipe with no writer, or none that wrote)" : "empty file");
  }
  return text;
}

std::string symlinkLoopMessage(const std::string& path) {
  return fmt::format("{}: too many levels of symbolic links", path);
}

namespace {

// ---- temporary files removed when a signal ends the process ------------------------------------------------
//
// A writer registers its temporary file's path in a slot while the file exists. SIGTERM, SIGINT and SIGHUP
// (where their disposition is still the default) run onSignal, which unlinks every registered path and re-raises
// the signal with the default action, so the process still dies of it and the target is left as it was (absent,
// or the previous file). The slots are lock-free atomics and fixed buffers, all the handler touches is
// async-signal-safe (atomic loads, unlink, sigaction, raise). Writers beyond kSlots at once go unregistered.

constexpr size_t kSlots = 64;
constexpr int kFree = 0;
constexpr int kFilling = 1;
constexpr int kRegistered = 2;
constexpr std::array<int, 3> kCleanupSignals = {SIGTERM, SIGINT, SIGHUP};

std::array<std::atomic<int>, kSlots> slot_state{};
std::array<std::array<char, PATH_MAX>, kSlots> slot_path{};

extern "C" void onSignal(int sig) {
  const int saved_errno = errno;
  for (size_t i = 0; i < kSlots; ++i) {
    if (slot_state[i].load(std::memory_order_acquire) == kRegistered) ::unlink(slot_path[i].data());
  }
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  errno = saved_errno;
  ::raise(sig);  // blocked until the handler returns, then the default action ends the process
}

void installHandlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int sig : kCleanupSignals) {
      struct sigaction old {};
      if (::sigaction(sig, nullptr, &old) != 0) continue;
      // An ignored signal stays ignored and a program's own handler stays its own.
      if ((old.sa_flags & SA_SIGINFO) != 0 || old.sa_handler != SIG_DFL) continue;
      struct sigaction act {};
      act.sa_handler = onSignal;
      sigemptyset(&act.sa_mask);
      for (int other : kCleanupSignals) sigaddset(&act.sa_mask, other);
      act.sa_flags = SA_RESTART;
      ::sigaction(sig, &act, nullptr);
    }
  });
}

/// Slot of `path`, or -1 when every slot is taken or the path is too long.
int registerTemp(const std::string& path) {
  if (path.size() >= PATH_MAX) return -1;
  for (size_t i = 0; i < kSlots; ++i) {
    int expected = kFree;
    if (!slot_state[i].compare_exchange_strong(expected, kFilling, std::memory_order_acq_rel)) continue;
    std::memcpy(slot_path[i].data(), path.c_str(), path.size() + 1);
    slot_state[i].store(kRegistered, std::memory_order_release);
    return static_cast<int>(i);
  }
  return -1;
}

void unregisterTemp(int slot) {
  if (slot >= 0) slot_state[static_cast<size_t>(slot)].store(kFree, std::memory_order_release);
}

/// Blocks the cleanup signals in this thread while alive, so a temporary file is never created unregistered.
class SignalBlock {
 public:
  SignalBlock() {
    sigset_t set;
    sigemptyset(&set);
    for (int sig : kCleanupSignals) sigaddset(&set, sig);
    ::pthread_sigmask(SIG_BLOCK, &set, &old_);
  }
  ~SignalBlock() { ::pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  SignalBlock(const SignalBlock&) = delete;
  SignalBlock& operator=(const SignalBlock&) = delete;

 private:
  sigset_t old_;
};

// Writes all of `content` to an open descriptor; errno-style failure message or empty. `mid_write`, when set,
// runs once after the first half is written.
std::string writeAll(int fd, const std::string& content, const std::function<void()>& mid_write = {}) {
  size_t done = 0;
  const size_t half = content.size() / 2;
  bool hooked = !mid_write;
  while (done < content.size()) {
    const size_t want = hooked ? content.size() - done : half - done;
    if (want > 0) {
      ssize_t n = ::write(fd, content.data() + done, want);
      if (n < 0) {
        if (errno == EINTR) continue;
        return std::strerror(errno);
      }
      done += static_cast<size_t>(n);
    }
    if (!hooked && done >= half) {
      hooked = true;
      mid_write();
    }
  }
  return {};
}

/// The file a write to `path` replaces or creates: `path` with the symbolic links of its last component followed
/// (relative ones against the link's directory), the link itself staying. A loop of links (more than 40) or a link
/// that cannot be read is an error naming `path`.
Result<std::filesystem::path> writeTarget(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path target(path);
  for (int hops = 0; fs::is_symlink(fs::symlink_status(target, ec)); ++hops) {
    if (hops >= 40) return invalidArgument(symlinkLoopMessage(path));
    const fs::path link = fs::read_symlink(target, ec);
    if (ec) return Status(StatusCode::kSystemError, fmt::format("{}: cannot resolve the link: {}", path, ec.message()));
    target = link.is_absolute() ? link : target.parent_path() / link;
  }
  return target;
}

/// N for "/dev/fd/N" and the other spellings of inheritedDescriptor, on an absolute, lexically normal path.
int descriptorOfName(const std::string& p) {
  if (p == "/dev/stdin") return 0;
  if (p == "/dev/stdout") return 1;
  if (p == "/dev/stderr") return 2;
  std::string number;
  for (const std::string& prefix : {std::string("/dev/fd/"), std::string("/proc/self/fd/"),
                                    std::string("/proc/thread-self/fd/"), fmt::format("/proc/{}/fd/", ::getpid())}) {
    if (p.size() > prefix.size() && p.compare(0, prefix.size(), prefix) == 0) {
      number = p.substr(prefix.size());
      break;
    }
  }
  if (number.empty() || number.size() > 9) return -1;
  for (char c : number) {
    if (c < '0' || c > '9') return -1;
  }
  return std::stoi(number);
}

}  // namespace

int inheritedDescriptor(const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) return -1;
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  if (ec) return -1;
  // Each hop is checked before it is followed: the kernel's links under /proc/<pid>/fd/ read as the file the
  // descriptor has open (a redirected /dev/stdout reads as the regular file it writes), which is not the name.
  for (int hops = 0; hops <= 40; ++hops) {
    p = p.lexically_normal();
    if (const int fd = descriptorOfName(p.string()); fd >= 0) return fd;
    if (!fs::is_symlink(fs::symlink_status(p, ec))) return -1;
    const fs::path link = fs::read_symlink(p, ec);
    if (ec) return -1;
    p = link.is_absolute() ? link : p.parent_path() / link;
  }
  return -1;
}

namespace detail {

Status writeFileAtomicHooked(const std::string& path, const std::string& content,
                             const std::function<void(const std::string& temp_path)>& mid_write) {
  namespace fs = std::filesystem;
  if (path.empty()) return Status(StatusCode::kInvalidArgument, "output file name is empty");
  if (const int inherited = inheritedDescriptor(path); inherited >= 0) {
    // One of the process's descriptors (/dev/stdout redirected to a file): written in place at the descriptor's
    // offset. Opening the name again, or renaming over the file it resolves to, would replace what the shell
    // wrote before and after.
    const std::string err = writeAll(inherited, content);
    if (!err.empty()) return Status(StatusCode::kSystemError, fmt::format("{}: write failed: {}", path, err));
    return Status::ok();
  }
  std::error_code ec;
  fs::path target(path);
  const fs::file_status st = fs::status(target, ec);  // follows symbolic links
  if (fs::exists(st) && !fs::is_regular_file(st)) {
    if (fs::is_directory(st)) return Status(StatusCode::kInvalidArgument, fmt::format("{}: is a directory", path));
    // A device, FIFO or socket (/dev/stdout, a pipe): write to it directly; renaming over it would replace it.
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return Status(StatusCode::kSystemError, fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
    std::string err = writeAll(fd, content);
    if (::close(fd) != 0 && err.empty()) err = std::strerror(errno);
    if (!err.empty()) return Status(StatusCode::kSystemError, fmt::format("{}: write failed: {}", path, err));
    return Status::ok();
  }
  // A symbolic link to a regular (or not yet existing) file is written through: the file it names is replaced,
  // the link stays.
  BRAID_ASSIGN_OR_RETURN(target, writeTarget(path));
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmpl = (dir / ("." + target.filename().string() + ".tmpXXXXXX")).string();
  installHandlers();
  int fd = -1;
  int slot = -1;
  {
    const SignalBlock block;  // the file is registered before a cleanup signal can end the process
    fd = mkstemp(tmpl.data());
    if (fd >= 0) slot = registerTemp(tmpl);
  }
  if (fd < 0)
    return Status(StatusCode::kSystemError, fmt::format("{}: cannot create a temporary file in {}: {}", path,
                                                        dir.string(), std::strerror(errno)));
  auto discard = [&](const std::string& message) {
    ::unlink(tmpl.c_str());
    unregisterTemp(slot);
    return Status(StatusCode::kSystemError, message);
  };
  const std::string err =
      writeAll(fd, content, mid_write ? std::function<void()>([&] { mid_write(tmpl); }) : std::function<void()>());
  if (!err.empty()) {
    ::close(fd);
    return discard(fmt::format("{}: write failed: {}", path, err));
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int e = errno;
    return discard(fmt::format("{}: flush failed: {}", path, std::strerror(e)));
  }
  // Keep the permissions of a file being replaced; new files get 0644.
  const mode_t mode = fs::exists(st) ? static_cast<mode_t>(st.permissions() & fs::perms::mask) : 0644;
  ::chmod(tmpl.c_str(), mode);
  if (::rename(tmpl.c_str(), target.c_str()) != 0) {
    int e = errno;
    return discard(fmt::format("{}: cannot rename into place: {}", path, std::strerror(e)));
  }
  unregisterTemp(slot);  // renamed: a signal now finds nothing under the temporary name
  return Status::ok();
}

}  // namespace detail

Status writeFileAtomic(const std::string& path, const std::string& content) {
  return detail::writeFileAtomicHooked(path, content, {});
}

Status checkOutputPath(const std::string& path) {
  if (path.empty()) return invalidArgument("an empty path names no file to write");
  if (inheritedDescriptor(path) >= 0) return Status::ok();  // written in place (writeFileAtomic)
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return invalidArgument(fmt::format("cannot write {}: it is a directory", path));
    if (!S_ISREG(st.st_mode)) return Status::ok();  // a device or FIFO, written directly
  } else if (errno == ELOOP) {
    return invalidArgument(symlinkLoopMessage(path));
  }
  // A file is replaced, or created, in its directory (through a symbolic link: where the link points), by way of a
  // temporary file beside it.
  BRAID_ASSIGN_OR_RETURN(const std::filesystem::path target, writeTarget(path));
  const std::string dir = target.has_parent_path() ? target.parent_path().string() : std::string(".");
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno == ELOOP) return invalidArgument(symlinkLoopMessage(path));
    return invalidArgument(fmt::format("cannot write {}: directory {} does not exist", path, dir));
  }
  if (!S_ISDIR(st.st_mode)) return invalidArgument(fmt::format("cannot write {}: {} is not a directory", path, dir));
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return invalidArgument(
        fmt::format("cannot write {}: directory {} is not writable ({})", path, dir, std::strerror(errno)));
  }
  return Status::ok();
}

}  // namespace braid
