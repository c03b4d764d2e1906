#include "common/plugin_log.h"

#include <atomic>

#include "common/log.h"

namespace braid::nccl_plugin {
namespace {

std::atomic<nccl_abi::Logger> g_logger{nullptr};

LogLevel braidLevel(nccl_abi::DebugLevel level) {
  switch (level) {
    case nccl_abi::kLogNone: return LogLevel::kNone;
    case nccl_abi::kLogVersion:
    case nccl_abi::kLogInfo: return LogLevel::kInfo;
    case nccl_abi::kLogTrace: return LogLevel::kTrace;
    case nccl_abi::kLogWarn:
    case nccl_abi::kLogAbort: return LogLevel::kWarn;
  }
  return LogLevel::kWarn;
}

}  // namespace

void setLogger(nccl_abi::Logger logger) {
  if (logger != nullptr) g_logger.store(logger);
}

bool logWanted(nccl_abi::DebugLevel level) {
  if (level == nccl_abi::kLogNone) return false;
  if (level == nccl_abi::kLogWarn || level == nccl_abi::kLogAbort) return true;
  // NCCL filters what reaches its logger by NCCL_DEBUG; without it Braid's BRAID_DEBUG decides.
  return g_logger.load() != nullptr || logEnabled(braidLevel(level));
}

void log(nccl_abi::DebugLevel level, nccl_abi::DebugSubsys subsys, std::string_view text) {
  if (!logWanted(level)) return;
  nccl_abi::Logger logger = g_logger.load();
  if (logger != nullptr) {
    const std::string line(text);
    logger(level, subsys, __FILE__, __LINE__, "%s", line.c_str());
    return;
  }
  logLine(braidLevel(level), text);
}

int report(const Status& status, nccl_abi::DebugSubsys subsys, const char* what) {
  if (status.isOk()) return nccl_abi::kSuccess;
  // Every line of a plugin starts with its tag ("NET/Braid:", "TUNER/Braid:"); messages that carry it already keep
  // theirs.
  const char* tag = pluginTag(subsys);
  std::string message = status.toString();
  const std::string own = std::string(tag) + ": ";
  for (size_t at = message.find(own); at != std::string::npos; at = message.find(own)) message.erase(at, own.size());
  log(nccl_abi::kLogWarn, subsys, fmt::format("{}: {}: {}", tag, what, message));
  return toNcclResultCode(status.code());
}

}  // namespace braid::nccl_plugin
