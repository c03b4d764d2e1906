// Output destinations checked up front (output_path.h).
#include "cli/output_path.h"

#include <fmt/format.h>

#include <filesystem>
#include <system_error>

#include "braid/file_io.h"
#include "braid/synthesize.h"
#include "braid/topology.h"

namespace braid::cli {

namespace fs = std::filesystem;

CLI::Validator outputPathCheck() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        return value.empty() ? std::string("an empty path names no file to write") : std::string();
      },
      "", "output path");
}

std::optional<std::string> outputPathsError(const std::vector<std::string>& paths) {
  for (const std::string& path : paths) {
    if (path.empty() || path == "-") continue;
    if (Status writable = checkOutputPath(path); !writable) return writable.message();
  }
  return std::nullopt;
}

namespace {

/// How a path takes part in the comparison.
enum class PathState { kSkipped, kExisting, kAbsent };

PathState stateOf(const std::string& path) {
  if (path.empty() || path == "-") return PathState::kSkipped;
  // /dev/stdout, /dev/fd/N: written in place at the descriptor's offset (writeFileAtomic), never replaced.
  if (inheritedDescriptor(path) >= 0) return PathState::kSkipped;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);  // follows symbolic links
  if (status.type() == fs::file_type::not_found) return PathState::kAbsent;
  if (ec) return PathState::kSkipped;  // e.g. a directory on the way cannot be searched: the write reports it
  return fs::is_regular_file(status) ? PathState::kExisting : PathState::kSkipped;
}

/// An absent path made absolute and resolved as far as it exists (symbolic links in its directories, "..").
/// A dangling symbolic link is followed to the path it names (relative links against the link's directory,
/// at most 40 links), as a write through it creates that file.
fs::path resolvedAbsent(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  if (ec) return fs::path(path).lexically_normal();
  for (int hops = 0; hops < 40; ++hops) {
    std::error_code canon_ec;
    fs::path canon = fs::weakly_canonical(p, canon_ec);  // resolves the existing directories above it
    p = canon_ec ? p.lexically_normal() : canon;
    std::error_code link_ec;
    if (!fs::is_symlink(fs::symlink_status(p, link_ec))) break;  // also when it does not exist (link_ec set)
    const fs::path link = fs::read_symlink(p, link_ec);
    if (link_ec) break;
    p = link.is_absolute() ? link : p.parent_path() / link;
  }
  return p;
}

bool sameFile(const std::string& a, PathState state_a, const std::string& b, PathState state_b) {
  if (state_a == PathState::kSkipped || state_b == PathState::kSkipped || state_a != state_b) return false;
  if (state_a == PathState::kAbsent) return resolvedAbsent(a) == resolvedAbsent(b);
  std::error_code ec;
  const bool same = fs::equivalent(a, b, ec);
  return same && !ec;
}

}  // namespace

std::optional<std::string> samePathError(const std::vector<PathOption>& inputs,
                                         const std::vector<PathOption>& outputs) {
  for (size_t o = 0; o < outputs.size(); ++o) {
    const PathOption& out = outputs[o];
    const PathState out_state = stateOf(out.path);
    if (out_state == PathState::kSkipped) continue;
    for (const PathOption& in : inputs) {
      std::string in_path = in.path;
      std::string shipped_note;
      PathState in_state = stateOf(in_path);
      if (in_state == PathState::kAbsent && in.shipped_topology) {
        // A name such as pcie-2s4g reads the shipped file it resolves to (loadTopologyOrShipped).
        Result<std::string> shipped = findShippedTopology(in.path);
        if (!shipped) continue;
        in_path = *shipped;
        shipped_note = fmt::format(" (the shipped file {})", in_path);
        in_state = stateOf(in_path);
      }
      if (in_state != PathState::kExisting) continue;
      if (sameFile(out.path, out_state, in_path, in_state)) {
        return fmt::format(
            "{} {} and {} {}{} are the same file: the output would replace the input; write it to "
            "another path",
            out.option, out.path, in.option, in.path, shipped_note);
      }
    }
    for (size_t p = 0; p < o; ++p) {
      const PathOption& other = outputs[p];
      if (sameFile(out.path, out_state, other.path, stateOf(other.path))) {
        return fmt::format("{} {} and {} {} are the same file: each output needs a file of its own", other.option,
                           other.path, out.option, out.path);
      }
    }
  }
  return std::nullopt;
}

std::optional<std::string> timeLimitError(double seconds) {
  // `!(a <= b)` refuses NaN as well.
  if (seconds > 0 && seconds <= kMaxSynthesisTimeLimitSeconds) return std::nullopt;
  return fmt::format("--time-limit: {} must be a positive number of seconds, at most {:g} (about 11 days)", seconds,
                     kMaxSynthesisTimeLimitSeconds);
}

}  // namespace braid::cli
