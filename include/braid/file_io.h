// Whole-file reading and all-or-nothing writing.
#pragma once

#include <cstdint>
#include <string>

#include "braid/status.h"

namespace braid {

/// The most bytes readFile reads by default: far above any topology, algorithm or log Braid reads (the largest
/// MSCCL XML of a 1024-rank algorithm is tens of MiB), and a bound on what a wrong path (/dev/zero) can allocate.
inline constexpr uint64_t kMaxInputFileBytes = uint64_t{256} << 20;

/// Reads a whole file: a regular file, or a device or pipe until its end (process substitution, /dev/stdin).
/// Errors naming the path: kNotFound when it does not exist, kInvalidArgument for a directory or more than
/// `max_bytes` (checked before reading a regular file, after max_bytes for a device or pipe, so /dev/zero fails
/// rather than filling memory), kSystemError when it cannot be opened or read.
Result<std::string> readFile(const std::string& path, uint64_t max_bytes = kMaxInputFileBytes);
/// Writes `content` to `path` whole or not at all: a temporary file beside it, fsync, rename (keeping the
/// permissions of a file it replaces). A symbolic link is written through (its target is replaced, the link
/// stays); a device, FIFO or socket (e.g. /dev/stdout) is written directly, never replaced. Errors:
/// kInvalidArgument for an empty name or a directory, kSystemError naming the path for I/O failures.
/// A SIGTERM, SIGINT or SIGHUP that ends the process while the temporary file exists removes it (a handler
/// installed on the first call where the signal's disposition is the default; a program's own handler or an
/// ignored signal is left alone), so an interrupted write leaves the target as it was and nothing beside it.
Status writeFileAtomic(const std::string& path, const std::string& content);

}  // namespace braid
