// The one logger of Braid's library code: levels from BRAID_DEBUG (parsed once), one line per message on
// stderr, written with one write() so lines of concurrent ranks do not interleave.
//
//   BRAID_LOG(kWarn, "BRAID_ALGO_DIR {}: nothing for {} ranks", dir, n);   ->  "braid WARN: BRAID_ALGO_DIR ..."
//   BRAID_LOG_RANK(kInfo, 3, "allreduce {} B -> {}", size, name);          ->  "braid INFO rank 3: allreduce ..."
//
// BRAID_DEBUG (docs/env.md, NCCL_DEBUG's spelling): NONE (or OFF) silences everything, WARN (the default) prints
// warnings, INFO adds the algorithm choices and transport setup, TRACE adds per-call detail. Case-insensitive; any
// other value warns once and means WARN.
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace braid {

enum class LogLevel { kNone = 0, kWarn = 1, kInfo = 2, kTrace = 3 };

/// "NONE", "WARN", "INFO", "TRACE".
const char* logLevelName(LogLevel level);
/// The level in force: BRAID_DEBUG read on first use, or what setLogLevel() set.
LogLevel logLevel();
/// Overrides BRAID_DEBUG for the rest of the process (tests, programs with their own flag).
void setLogLevel(LogLevel level);
inline bool logEnabled(LogLevel level) { return level != LogLevel::kNone && level <= logLevel(); }
/// Writes "braid <LEVEL>: <text>\n" to stderr when `level` is enabled.
void logLine(LogLevel level, std::string_view text);
/// Writes "braid <LEVEL> rank <rank>: <text>\n" to stderr when `level` is enabled (messages of one rank).
void logLine(LogLevel level, int rank, std::string_view text);

}  // namespace braid

/// BRAID_LOG(kInfo, "fmt {}", args...): formats only when the level is enabled.
#define BRAID_LOG(level, ...)                                                 \
  do {                                                                        \
    if (::braid::logEnabled(::braid::LogLevel::level)) {                      \
      ::braid::logLine(::braid::LogLevel::level, ::fmt::format(__VA_ARGS__)); \
    }                                                                         \
  } while (0)

/// BRAID_LOG_RANK(kInfo, rank, "fmt {}", args...): as BRAID_LOG, the line prefixed with the rank that logs it.
#define BRAID_LOG_RANK(level, rank, ...)                                              \
  do {                                                                                \
    if (::braid::logEnabled(::braid::LogLevel::level)) {                              \
      ::braid::logLine(::braid::LogLevel::level, (rank), ::fmt::format(__VA_ARGS__)); \
    }                                                                                 \
  } while (0)
