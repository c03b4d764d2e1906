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

/// Reads a whole text file: a regular file, or a pipe until its end (process substitution, /dev/stdin from a pipe).
/// Every format Braid reads is text (YAML, XML, JSON, `nvidia-smi topo -m` matrices, nccl-tests logs, rules).
/// Errors naming the path: kNotFound when it does not exist ("P: no such file"); kInvalidArgument for a directory,
/// for a device or socket (/dev/zero, a terminal: refused before it is opened, so an endless device fails at once),
/// for a path through a loop of symbolic links ("P: too many levels of symbolic links"), or for more than
/// `max_bytes` (checked from a regular file's size before reading, and for a pipe or a growing file after
/// max_bytes + 1 bytes, never more); kParseError for a file that holds a NUL byte ("P: not a text file (NUL byte at
/// offset N)", found in the 64 KiB block that holds it, so a binary file is refused after its first block, not read
/// whole) and for one that is empty or white space only ("P: empty file"); kSystemError when it cannot be opened or
/// read.
Result<std::string> readFile(const std::string& path, uint64_t max_bytes = kMaxInputFileBytes);

/// "P: too many levels of symbolic links": the one message for an input or output path that runs into a loop of
/// symbolic links (ELOOP), as readFile and checkOutputPath report it.
std::string symlinkLoopMessage(const std::string& path);

/// Whether a file can be written at `path` now: what a command checks of each output before any work, so that a
/// missing directory fails at once rather than after a long run (the write itself, writeFileAtomic, can still fail
/// later). Ok for an existing file (replaced: its directory must be writable), device or FIFO (written directly), a
/// name of an open descriptor (inheritedDescriptor), and a new file in an existing, writable directory (through a
/// dangling symbolic link: the file it names). kInvalidArgument naming the path otherwise: "an empty path names no file
/// to write", "P: too many levels of symbolic links", "cannot write P: it is a directory", "cannot write P: directory D
/// does not exist", "cannot write P: D is not a directory", "cannot write P: directory D is not writable (Permission
/// denied)"; D is the path's directory as written ("." for a bare file name).
Status checkOutputPath(const std::string& path);
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
