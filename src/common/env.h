// The registry of Braid's environment parameters (ARCHITECTURE.md §6): every BRAID_* variable the runtime
// reads has one entry here with its default and meaning; docs/env.md lists the same table.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "braid/status.h"

namespace braid {

struct EnvParam {
  const char* name;           // e.g. "BRAID_TIMEOUT"
  const char* default_value;  // as text; "" = unset
  const char* doc;
};

/// Every registered parameter, in docs/env.md order.
const std::vector<EnvParam>& envParams();

/// The variable's value, or its registered default when unset or empty. Reading a name that is not
/// registered is a programming error: it returns "" (and the registry test catches it).
std::string envString(const char* name);
/// Whether the variable is set to a non-empty value (envString then returns it rather than the default): for a
/// caller that says where a value came from. false for a name that is not registered.
bool envIsSet(const char* name);
/// Integer / floating-point values. Errors: kInvalidArgument "BRAID_X=abc: not an integer" (names the
/// variable and the text).
Result<int64_t> envInt(const char* name);
/// A number out of double's range reads as the nearest double: 1e400 as inf, 1e-400 as 0.
Result<double> envDouble(const char* name);

/// The longest timeout any wait of the runtime uses, seconds (1e8 s, about 3 years: in practice no timeout).
/// BRAID_TIMEOUT=inf, any larger value, and options' timeout_s above it mean this, so every deadline (a
/// steady_clock time point in nanoseconds) stays representable.
inline constexpr double kMaxTimeoutSeconds = 1e8;
/// BRAID_TIMEOUT in seconds (default 300): the limit of every blocking wait of the runtime (bootstrap and every
/// transport), clamped to kMaxTimeoutSeconds (`inf` included). Errors: kInvalidArgument naming the variable and
/// its text when it is not a positive number of seconds ("BRAID_TIMEOUT=-1: not a positive number of seconds
/// (or inf)"; 0, negative, nan and garbage alike).
Result<double> runtimeTimeoutSeconds();
/// The timeout of one wait, seconds: `option_s` > 0 (CommOptions / TransportOptions / BootstrapOptions
/// timeout_s) clamped to kMaxTimeoutSeconds, 0 = runtimeTimeoutSeconds(). Errors: runtimeTimeoutSeconds()'s;
/// kInvalidArgument "timeout_s = -1 is not a positive number of seconds" for a negative or NaN option.
Result<double> resolveTimeoutSeconds(double option_s);
/// `seconds` (clamped to [0, kMaxTimeoutSeconds]; NaN = 0) as a steady_clock duration, for deadlines
/// (now() + timeoutDuration(t) never overflows).
std::chrono::steady_clock::duration timeoutDuration(double seconds);
/// The most a blocking poll may spin, µs: a spinning poll checks neither peers nor the timeout, so this bounds
/// how late a dead peer or a timeout can be reported because of it.
inline constexpr double kMaxSpinMicroseconds = 1000;
/// BRAID_SPIN_US in microseconds (default 50): how long a blocking shared-memory or threads poll polls before
/// it sleeps. Not a number >= 0: 50, above kMaxSpinMicroseconds (inf included): kMaxSpinMicroseconds, each with
/// a warning on stderr (once).
double runtimeSpinMicroseconds();

}  // namespace braid
