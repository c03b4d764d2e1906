// Status and Result<T>: how every Braid library call reports failure.
//
// Codes 0..7 line up with ncclResult_t (nccl.h) so the NCCL plugins translate with one cast;
// Braid's own codes (>= 100) map to the nearest NCCL code through toNcclResultCode().
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace braid {

enum class StatusCode : int {
  kOk = 0,
  kUnhandledCudaError = 1,
  kSystemError = 2,
  kInternalError = 3,
  kInvalidArgument = 4,
  kInvalidUsage = 5,
  kRemoteError = 6,
  kInProgress = 7,
  // Braid-only codes.
  kParseError = 100,   // input file malformed: message names file, line and field
  kNotFound = 101,     // file, name or entity does not exist
  kInfeasible = 102,   // the solver proved that no algorithm satisfies the constraints
  kTimeout = 103,      // a blocking wait exceeded its limit
  kUnsupported = 104,  // well-formed input that Braid does not handle (says what and why)
};

/// Name of a code, e.g. "invalid argument".
const char* statusCodeName(StatusCode code);

/// The ncclResult_t value (0..7) a code is reported as at the NCCL boundary.
int toNcclResultCode(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return Status(); }
  bool isOk() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return isOk(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  /// "<code name>: <message>", or "ok".
  std::string toString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

/// Error for bad input: "<file>:<line>: <field>: <what>" (line 0 = whole file, field may be empty).
Status parseError(const std::string& file, int line, const std::string& field, const std::string& what);
Status invalidArgument(std::string message);
Status notFound(std::string message);
Status internalError(std::string message);
Status unsupported(std::string message);

/// Thrown by Result<T>::value() (and * / ->) on a Result that holds an error.
class BadResultAccess : public std::logic_error {
 public:
  explicit BadResultAccess(const Status& status)
      : std::logic_error("braid: Result::value() on an error: " + status.toString()) {}
};

/// A value or the Status explaining why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {
    if (status_.isOk()) status_ = Status(StatusCode::kInternalError, "Result built from an ok Status without a value");
  }
  bool isOk() const { return value_.has_value(); }
  explicit operator bool() const { return isOk(); }
  const Status& status() const { return status_; }
  /// The value. On an error Result this throws BadResultAccess (a std::logic_error naming the Status): reading
  /// a value that is not there is a programming error, reported loudly rather than as undefined behaviour.
  T& value() & { return checked(); }
  const T& value() const& { return checked(); }
  T&& value() && { return std::move(checked()); }
  T* operator->() { return &checked(); }
  const T* operator->() const { return &checked(); }
  T& operator*() & { return checked(); }
  const T& operator*() const& { return checked(); }

 private:
  T& checked() {
    if (!value_) throw BadResultAccess(status_);
    return *value_;
  }
  const T& checked() const {
    if (!value_) throw BadResultAccess(status_);
    return *value_;
  }
  std::optional<T> value_;
  Status status_;
};

}  // namespace braid

/// Propagate a non-ok Status from an expression returning Status.
#define BRAID_RETURN_IF_ERROR(expr)                  \
  do {                                               \
    ::braid::Status braid_status_ = (expr);          \
    if (!braid_status_.isOk()) return braid_status_; \
  } while (0)

#define BRAID_CONCAT_INNER_(a, b) a##b
#define BRAID_CONCAT_(a, b) BRAID_CONCAT_INNER_(a, b)
/// `BRAID_ASSIGN_OR_RETURN(auto x, f());` — unwrap a Result or return its Status.
#define BRAID_ASSIGN_OR_RETURN(lhs, expr)                                                                     \
  auto BRAID_CONCAT_(braid_result_, __LINE__) = (expr);                                                       \
  if (!BRAID_CONCAT_(braid_result_, __LINE__).isOk()) return BRAID_CONCAT_(braid_result_, __LINE__).status(); \
  lhs = std::move(BRAID_CONCAT_(braid_result_, __LINE__)).value()
