// Whole-file reading and all-or-nothing writing.
#pragma once

#include <cstdint>
#include <string>

#include "braid/status.h"

namespace braid {

/// The most bytes readFile reads by default: far above any topology, sketch or log Braid reads, and a bound on
/// what a wrong path can allocate. Algorithm files share it (kMaxAlgorithmFileBytes, include/braid/algorithm.h):
/// Braid refuses to write an algorithm it could not read back (a direct all-to-all on 1024 ranks, ~300 MB of XML).
inline constexpr uint64_t kMaxInputFileBytes = uint64_t{256} << 20;

/// Reads a whole file: a regular file, or a pipe until its end (process substitution, /dev/stdin from a pipe).
/// Errors naming the path: kNotFound when it does not exist; kInvalidArgument for a directory, for a device or
/// socket (/dev/zero, a terminal: refused before it is opened, so an endless device fails at once), or for more
/// than `max_bytes` (checked from a regular file's size before reading, and for a pipe or a growing file after
/// max_bytes + 1 bytes, never more); kSystemError when it cannot be opened or read.
Result<std::string> readFile(const std::string& path, uint64_t max_bytes = kMaxInputFileBytes);
/// Writes `content` to `path` whole or not at all: a temporary file beside it, fsync, rename (keeping the
/// permissions of a file it replaces). A symbolic link is written through (its target is replaced, the link
/// stays); a device, FIFO or socket is written directly, never replaced. A name of one of the process's open
/// descriptors (inheritedDescriptor: /dev/stdout, /dev/fd/3, ...) is written to that descriptor in place, at its
/// offset, as a shell redirection would: `{ echo A; braid ... -o /dev/stdout; } > f` keeps A in f. Errors:
/// kInvalidArgument for an empty name or a directory, kSystemError naming the path for I/O failures.
/// A SIGTERM, SIGINT or SIGHUP that ends the process while the temporary file exists removes it (a handler
/// installed on the first call where the signal's disposition is the default; a program's own handler or an
/// ignored signal is left alone), so an interrupted write leaves the target as it was and nothing beside it.
Status writeFileAtomic(const std::string& path, const std::string& content);

/// The descriptor number that `path` names when it is one of the process's own open descriptors: /dev/stdin (0),
/// /dev/stdout (1), /dev/stderr (2), /dev/fd/N, /proc/self/fd/N, /proc/thread-self/fd/N or /proc/<own pid>/fd/N
/// (N a decimal number), spelled directly, with "." and ".." or "//", or reached through symbolic links (at most 40).
/// -1 for any other path. Purely a name check: whether N is open is found when it is written.
int inheritedDescriptor(const std::string& path);

}  // namespace braid
