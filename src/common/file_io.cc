#include "braid/file_io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace braid {

Result<std::string> readFile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return notFound(fmt::format("{}: no such file", path));
  if (std::filesystem::is_directory(path, ec))
    return invalidArgument(fmt::format("{}: is a directory, not a file", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(StatusCode::kSystemError, fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status(StatusCode::kSystemError, fmt::format("{}: read failed", path));
  return ss.str();
}

namespace {

// Writes all of `content` to an open descriptor; errno-style failure message or empty.
std::string writeAll(int fd, const std::string& content) {
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return std::strerror(errno);
    }
    done += static_cast<size_t>(n);
  }
  return {};
}

}  // namespace

Status writeFileAtomic(const std::string& path, const std::string& content) {
  namespace fs = std::filesystem;
  if (path.empty()) return Status(StatusCode::kInvalidArgument, "output file name is empty");
  std::error_code ec;
  fs::path target(path);
  const fs::file_status st = fs::status(target, ec);  // follows symbolic links
  if (fs::exists(st) && !fs::is_regular_file(st)) {
    if (fs::is_directory(st)) return Status(StatusCode::kInvalidArgument, fmt::format("{}: is a directory", path));
    // A device, FIFO or socket (/dev/stdout, a pipe): write to it directly; renaming over it would replace it.
    int fd = ::open(path.c_str(), O_WRONLY);
    if (fd < 0) return Status(StatusCode::kSystemError, fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
    std::string err = writeAll(fd, content);
    if (::close(fd) != 0 && err.empty()) err = std::strerror(errno);
    if (!err.empty()) return Status(StatusCode::kSystemError, fmt::format("{}: write failed: {}", path, err));
    return Status::ok();
  }
  // A symbolic link to a regular (or not yet existing) file is written through: the file it names is replaced,
  // the link stays.
  for (int hops = 0; fs::is_symlink(fs::symlink_status(target, ec)); ++hops) {
    const fs::path link = fs::read_symlink(target, ec);
    if (ec || hops >= 40) {
      return Status(StatusCode::kSystemError,
                    fmt::format("{}: cannot resolve the link: {}", path, ec ? ec.message() : "too many levels"));
    }
    target = link.is_absolute() ? link : target.parent_path() / link;
  }
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmpl = (dir / ("." + target.filename().string() + ".tmpXXXXXX")).string();
  int fd = mkstemp(tmpl.data());
  if (fd < 0)
    return Status(StatusCode::kSystemError, fmt::format("{}: cannot create a temporary file in {}: {}", path,
                                                        dir.string(), std::strerror(errno)));
  const std::string err = writeAll(fd, content);
  if (!err.empty()) {
    ::close(fd);
    ::unlink(tmpl.c_str());
    return Status(StatusCode::kSystemError, fmt::format("{}: write failed: {}", path, err));
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int e = errno;
    ::unlink(tmpl.c_str());
    return Status(StatusCode::kSystemError, fmt::format("{}: flush failed: {}", path, std::strerror(e)));
  }
  // Keep the permissions of a file being replaced; new files get 0644.
  const mode_t mode = fs::exists(st) ? static_cast<mode_t>(st.permissions() & fs::perms::mask) : 0644;
  ::chmod(tmpl.c_str(), mode);
  if (::rename(tmpl.c_str(), target.c_str()) != 0) {
    int e = errno;
    ::unlink(tmpl.c_str());
    return Status(StatusCode::kSystemError, fmt::format("{}: cannot rename into place: {}", path, std::strerror(e)));
  }
  return Status::ok();
}

}  // namespace braid
