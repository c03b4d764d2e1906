// Output destinations the commands check before any work (synth, tune): a file whose directory is missing fails
// at once, not after minutes of synthesis or modelling.
#pragma once

#include <optional>
#include <string>

namespace braid::cli {

/// The error for writing a file at `path` when its directory is missing ("cannot write P: directory D does not
/// exist") or is not a directory ("cannot write P: D is not a directory"); nullopt when the directory exists or
/// `path` names none (the working directory).
std::optional<std::string> outputDirectoryError(const std::string& path);

}  // namespace braid::cli
