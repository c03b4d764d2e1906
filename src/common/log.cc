#include "common/log.h"

#include <unistd.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <string>

#include "common/env.h"
#include "common/text.h"

namespace braid {
namespace {

std::atomic<int> g_level{-1};  // -1: not read yet

std::optional<LogLevel> parseLevel(const std::string& text) {
  const std::string v = lowerCase(text);
  if (v.empty() || v == "warn" || v == "version") return LogLevel::kWarn;
  if (v == "none" || v == "off") return LogLevel::kNone;
  if (v == "info") return LogLevel::kInfo;
  if (v == "trace") return LogLevel::kTrace;
  return std::nullopt;
}

void writeStderr(const std::string& line) {
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(STDERR_FILENO, line.data() + done, line.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

}  // namespace

const char* logLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kNone: return "NONE";
    case LogLevel::kWarn: return "WARN";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kTrace: return "TRACE";
  }
  return "WARN";
}

LogLevel logLevel() {
  int level = g_level.load(std::memory_order_acquire);
  if (level >= 0) return static_cast<LogLevel>(level);
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string text = envString("BRAID_DEBUG");
    const std::optional<LogLevel> parsed = parseLevel(text);
    int expected = -1;
    g_level.compare_exchange_strong(expected, static_cast<int>(parsed.value_or(LogLevel::kWarn)));
    if (!parsed) {
      writeStderr("braid WARN: BRAID_DEBUG=" + text + ": not NONE, WARN, INFO or TRACE; using WARN\n");
    }
  });
  return static_cast<LogLevel>(g_level.load(std::memory_order_acquire));
}

void setLogLevel(LogLevel level) { g_level.store(static_cast<int>(level), std::memory_order_release); }

void logLine(LogLevel level, std::string_view text) {
  if (!logEnabled(level)) return;
  std::string line = "braid ";
  line += logLevelName(level);
  line += ": ";
  line += text;
  if (line.back() != '\n') line += '\n';
  writeStderr(line);
}

void logLine(LogLevel level, int rank, std::string_view text) {
  if (!logEnabled(level)) return;
  std::string line = "braid ";
  line += logLevelName(level);
  line += " rank ";
  line += std::to_string(rank);
  line += ": ";
  line += text;
  if (line.back() != '\n') line += '\n';
  writeStderr(line);
}

}  // namespace braid
