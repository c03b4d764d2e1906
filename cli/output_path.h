// Output destinations (and the solver time limit) the commands check before any work: an empty output path is a usage
// error, a file whose directory is missing fails at once, not after minutes of synthesis, simulation or modelling,
// and no output may name an input or another output of the same command (every command that writes files).
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

namespace braid::cli {

/// A CLI11 check for an option that names a file to write: an empty value is a usage error (exit status 2) naming
/// the option, at parse time before any work ("--output: an empty path names no file to write"). Every output
/// option of every command carries it.
CLI::Validator outputPathCheck();

/// The error for the first of `paths` that cannot be written now (checkOutputPath: "cannot write P: directory D does
/// not exist", "P: too many levels of symbolic links", ...): a failure, exit status 1, checked before the command
/// reads its inputs or does any work. Empty paths (an option not given) and "-" (standard output) are skipped.
std::optional<std::string> outputPathsError(const std::vector<std::string>& paths);

/// A file a command reads or writes, with the option or argument that names it ("-o", "--json", "FILE").
struct PathOption {
  std::string option;
  std::string path;
  /// An input that may be a shipped topology name (loadTopologyOrShipped): when `path` names no existing file, it
  /// is compared as the shipped file that findShippedTopology resolves it to.
  bool shipped_topology = false;
};

/// The usage error (exit status 2) for a command whose output would replace one of its inputs or another of its
/// outputs: "-o in.xml and FILE in.xml are the same file: the output would replace the input" or "-o X and --json X
/// are the same file: each output needs a file of its own"; nullopt when every output is a file of its own.
/// A shipped topology name among the inputs (shipped_topology set, no such local file) stands for the file it
/// resolves to: "-o X and --topology pcie-2s4g (the shipped file X) are the same file: ...".
/// Skipped: empty paths and "-" (standard output), names of open descriptors (/dev/stdout, /dev/fd/N:
/// inheritedDescriptor), inputs that name no existing file (a missing file the command reports itself), and
/// existing paths that are not regular files (/dev/null, a FIFO), which are written directly, never replaced.
/// Two paths are the same file when both exist and are one file (std::filesystem::equivalent: through symbolic
/// links, hard links, "./" and ".."), or when neither exists yet and their absolute, weakly canonical forms are
/// equal ("out.xml" and "./dir/../out.xml"), a dangling symbolic link standing for the path it names.
std::optional<std::string> samePathError(const std::vector<PathOption>& inputs, const std::vector<PathOption>& outputs);

/// The usage error for a `--time-limit` of `seconds` that is not a finite number from just above 0 to
/// kMaxSynthesisTimeLimitSeconds (1e6 s): "--time-limit: inf must be a positive number of seconds, at most 1e+06
/// (about 11 days)"; nullopt when it is one.
std::optional<std::string> timeLimitError(double seconds);

}  // namespace braid::cli
