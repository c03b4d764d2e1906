// Logging and the C boundary of the plugins NCCL loads (runtime/nccl/README.md):
//   * messages go through the logger NCCL passed to init (NCCL_DEBUG / NCCL_DEBUG_SUBSYS filter them), or to
//     stderr through Braid's logger before NCCL gave one (and in the harness, which passes none);
//   * BRAID_DEBUG=INFO (or TRACE) turns Braid's own INFO lines on: they are sent to NCCL's logger at INFO level;
//   * guarded() runs a plugin entry point so that no C++ exception crosses into NCCL: one that escapes becomes
//     ncclInternalError with a WARN line naming the entry point.
#pragma once

#include <fmt/format.h>

#include <exception>
#include <string>
#include <string_view>

#include "abi/nccl_types.h"
#include "braid/status.h"

namespace braid::nccl_plugin {

/// Remembers NCCL's logger (the latest non-null one: every communicator passes the same function).
void setLogger(nccl_abi::Logger logger);

/// Writes one line through NCCL's logger under `subsys` ("NET/Braid ..." or "TUNER/Braid ..." prefix added by the
/// caller's text), or to stderr ("braid WARN: ...") without one. INFO and TRACE lines are written only when
/// BRAID_DEBUG asks for them or NCCL's logger is present (NCCL then filters them by NCCL_DEBUG).
void log(nccl_abi::DebugLevel level, nccl_abi::DebugSubsys subsys, std::string_view text);

/// Whether a line of `level` would be written (formatting can be skipped otherwise).
bool logWanted(nccl_abi::DebugLevel level);

/// The ncclResult_t for a Status, logging its message at WARN under `subsys` when it is an error (`what` names
/// the entry point: "isend", "getCollInfo", ...): "NET/Braid: isend: system error: ..." (TUNER/Braid under
/// kSubsysTuning).
int report(const Status& status, nccl_abi::DebugSubsys subsys, const char* what);

/// The tag every line of a plugin starts with: "TUNER/Braid" under kSubsysTuning, else "NET/Braid".
inline const char* pluginTag(nccl_abi::DebugSubsys subsys) {
  return subsys == nccl_abi::kSubsysTuning ? "TUNER/Braid" : "NET/Braid";
}

/// Runs `body` (returning int, an ncclResult_t) with every exception caught: std::exception -> WARN naming `what`
/// and its what(), anything else -> WARN ("NET/Braid: isend: internal error: ..."); both return ncclInternalError.
template <class Body>
int guarded(nccl_abi::DebugSubsys subsys, const char* what, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::exception& e) {
    try {
      log(nccl_abi::kLogWarn, subsys, fmt::format("{}: {}: internal error: {}", pluginTag(subsys), what, e.what()));
    } catch (...) {
    }
  } catch (...) {
    try {
      log(nccl_abi::kLogWarn, subsys,
          fmt::format("{}: {}: internal error (unknown exception)", pluginTag(subsys), what));
    } catch (...) {
    }
  }
  return nccl_abi::kInternalError;
}

}  // namespace braid::nccl_plugin

/// PLUGIN_LOG(kLogInfo, kSubsysNet, "fmt {}", args...): formats only when the line would be written.
#define BRAID_PLUGIN_LOG(level, subsys, ...)                                                                    \
  do {                                                                                                          \
    if (::braid::nccl_plugin::logWanted(::braid::nccl_abi::level)) {                                            \
      ::braid::nccl_plugin::log(::braid::nccl_abi::level, ::braid::nccl_abi::subsys, fmt::format(__VA_ARGS__)); \
    }                                                                                                           \
  } while (0)
