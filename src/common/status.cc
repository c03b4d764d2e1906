#include "braid/status.h"

#include <fmt/format.h>

namespace braid {

const char* statusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kUnhandledCudaError: return "unhandled CUDA error";
    case StatusCode::kSystemError: return "system error";
    case StatusCode::kInternalError: return "internal error";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kInvalidUsage: return "invalid usage";
    case StatusCode::kRemoteError: return "remote error";
    case StatusCode::kInProgress: return "in progress";
    case StatusCode::kParseError: return "parse error";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kInfeasible: return "infeasible";
    case StatusCode::kTimeout: return "timeout";
    case StatusCode::kUnsupported: return "unsupported";
  }
  return "unknown status";
}

int toNcclResultCode(StatusCode code) {
  const int v = static_cast<int>(code);
  if (v >= 0 && v <= 7) return v;
  switch (code) {
    case StatusCode::kParseError:
    case StatusCode::kNotFound:
    case StatusCode::kUnsupported: return static_cast<int>(StatusCode::kInvalidArgument);
    case StatusCode::kInfeasible: return static_cast<int>(StatusCode::kInvalidUsage);
    case StatusCode::kTimeout: return static_cast<int>(StatusCode::kRemoteError);
    default: return static_cast<int>(StatusCode::kInternalError);
  }
}

std::string Status::toString() const {
  if (isOk()) return "ok";
  return fmt::format("{}: {}", statusCodeName(code_), message_);
}

Status parseError(const std::string& file, int line, const std::string& field, const std::string& what) {
  std::string where = file.empty() ? std::string("<input>") : file;
  if (line > 0) where += fmt::format(":{}", line);
  if (!field.empty()) return Status(StatusCode::kParseError, fmt::format("{}: {}: {}", where, field, what));
  return Status(StatusCode::kParseError, fmt::format("{}: {}", where, what));
}

Status invalidArgument(std::string message) { return Status(StatusCode::kInvalidArgument, std::move(message)); }
Status notFound(std::string message) { return Status(StatusCode::kNotFound, std::move(message)); }
Status internalError(std::string message) { return Status(StatusCode::kInternalError, std::move(message)); }
Status unsupported(std::string message) { return Status(StatusCode::kUnsupported, std::move(message)); }

}  // namespace braid
