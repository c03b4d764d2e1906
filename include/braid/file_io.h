// Whole-file reading and all-or-nothing writing.
#pragma once

#include <string>

#include "braid/status.h"

namespace braid {

/// Reads a whole file. kNotFound when it does not exist, kSystemError when it cannot be read.
Result<std::string> readFile(const std::string& path);
/// Writes `content` to `path` whole or not at all: a temporary file beside it, fsync, rename (keeping the
/// permissions of a file it replaces). A symbolic link is written through (its target is replaced, the link
/// stays); a device, FIFO or socket (e.g. /dev/stdout) is written directly, never replaced. Errors:
/// kInvalidArgument for an empty name or a directory, kSystemError naming the path for I/O failures.
Status writeFileAtomic(const std::string& path, const std::string& content);

}  // namespace braid
