// Output destinations checked up front (output_path.h).
#include "cli/output_path.h"

#include <fmt/format.h>

#include <filesystem>
#include <system_error>

namespace braid::cli {

std::optional<std::string> outputDirectoryError(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (parent.empty()) return std::nullopt;
  std::error_code ec;
  if (std::filesystem::is_directory(parent, ec)) return std::nullopt;
  if (std::filesystem::exists(parent, ec)) {
    return fmt::format("cannot write {}: {} is not a directory", path, parent.string());
  }
  return fmt::format("cannot write {}: directory {} does not exist", path, parent.string());
}

}  // namespace braid::cli
