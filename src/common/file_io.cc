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

Status writeFileAtomic(const std::string& path, const std::string& content) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmpl = (dir / ("." + target.filename().string() + ".tmpXXXXXX")).string();
  int fd = mkstemp(tmpl.data());
  if (fd < 0)
    return Status(StatusCode::kSystemError, fmt::format("{}: cannot create a temporary file in {}: {}", path,
                                                        dir.string(), std::strerror(errno)));
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmpl.c_str());
      return Status(StatusCode::kSystemError, fmt::format("{}: write failed: {}", path, std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int err = errno;
    ::unlink(tmpl.c_str());
    return Status(StatusCode::kSystemError, fmt::format("{}: flush failed: {}", path, std::strerror(err)));
  }
  ::chmod(tmpl.c_str(), 0644);
  if (::rename(tmpl.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmpl.c_str());
    return Status(StatusCode::kSystemError, fmt::format("{}: cannot rename into place: {}", path, std::strerror(err)));
  }
  return Status::ok();
}

}  // namespace braid
