// The per-transport constructors behind createTransport (include/braid/transports.h). Private to
// runtime/transport.
#pragma once

#include <memory>

#include "braid/bootstrap.h"
#include "braid/transport.h"
#include "braid/transports.h"

namespace braid {

/// Per-transport constructors (runtime/transport/<name>/), same contract as createTransport.
Result<std::unique_ptr<DataTransport>> createThreadsTransport(Bootstrap& bootstrap, const TransportOptions& options);
Result<std::unique_ptr<DataTransport>> createShmTransport(Bootstrap& bootstrap, const TransportOptions& options);
Result<std::unique_ptr<DataTransport>> createTcpTransport(Bootstrap& bootstrap, const TransportOptions& options);
/// Defined in every build; returns kUnsupported without UCX.
Result<std::unique_ptr<DataTransport>> createUcxTransport(Bootstrap& bootstrap, const TransportOptions& options);

}  // namespace braid
