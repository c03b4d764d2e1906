// BRAID_CHECK: invariants of library code. A failed check is a bug in Braid, never bad input (bad input gets a
// kInvalidArgument / kParseError naming the file, line and field). It does not abort: Braid's libraries run inside
// other programs' processes (NCCL's plugins), so a failed check returns kInternalError from the enclosing function
// (which must return Status or Result<T>), naming the file, line and condition.
#pragma once

#include <fmt/format.h>

#include "braid/status.h"

/// BRAID_CHECK(cond, "what {}", args...): when `cond` is false, returns kInternalError
/// "file.cc:123: invariant `cond` failed: what ..." from the enclosing function.
#define BRAID_CHECK(cond, ...)                                                                                       \
  do {                                                                                                               \
    if (!(cond)) {                                                                                                   \
      return ::braid::internalError(                                                                                 \
          ::fmt::format("{}:{}: invariant `{}` failed: {}", __FILE__, __LINE__, #cond, ::fmt::format(__VA_ARGS__))); \
    }                                                                                                                \
  } while (0)
