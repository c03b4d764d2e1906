// Creating a data transport endpoint (include/braid/transport.h, DataTransport) over a bootstrap: the transport
// kinds of the CPU runtime and their options.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "braid/bootstrap.h"
#include "braid/plan.h"
#include "braid/transport.h"

namespace braid {

enum class TransportKind { kAuto, kThreads, kShm, kTcp, kUcx };

/// "auto", "threads", "shm", "tcp", "ucx".
const char* transportKindName(TransportKind kind);
std::optional<TransportKind> parseTransportKind(const std::string& name);

/// A FIFO depth no plan reaches: sends always complete into the transport's buffers (threads transport).
inline constexpr int kUnboundedFifoDepth = 1 << 30;

struct TransportOptions {
  double timeout_s = 0;           // 0: BRAID_TIMEOUT; < 0, NaN: kInvalidArgument; at most 1e8 s (common/env.h)
  int fifo_depth = kNcclSteps;    // messages buffered per connection ahead of the receiver (plan.h)
  uint64_t slot_bytes = 1 << 20;  // shm: bytes per FIFO slot; larger messages travel in several slots
  double spin_us = -1;            // shm, threads: µs of polling before a blocking poll sleeps; < 0:
                                  // BRAID_SPIN_US (endpointSpinMicroseconds, runtime/transport/endpoint_common.h)
};

/// The endpoint of this rank (bootstrap.rank()) for `kind`. The threads transport gets kUnboundedFifoDepth
/// (its staging grows on demand). kAuto: threads when every rank has this
/// process id, else shm when every rank has this host name, else tcp. Collective over the bootstrap: every
/// rank calls it with the same kind. Errors: kUnsupported for ucx in a build without UCX; whatever the
/// transport's setup reports (naming the peer).
Result<std::unique_ptr<DataTransport>> createTransport(TransportKind kind, Bootstrap& bootstrap,
                                                       const TransportOptions& options = {});

}  // namespace braid
