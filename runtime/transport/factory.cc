#include "transport/factory.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

#include "common/env.h"
#include "common/text.h"

namespace braid {

namespace {

struct KindName {
  TransportKind kind;
  const char* name;
};
constexpr KindName kKindNames[] = {{TransportKind::kAuto, "auto"},
                                   {TransportKind::kThreads, "threads"},
                                   {TransportKind::kShm, "shm"},
                                   {TransportKind::kTcp, "tcp"},
                                   {TransportKind::kUcx, "ucx"}};

}  // namespace

const char* transportKindName(TransportKind kind) {
  for (const KindName& entry : kKindNames) {
    if (entry.kind == kind) return entry.name;
  }
  return "?";
}

std::optional<TransportKind> parseTransportKind(const std::string& name) {
  const std::string lower = lowerCase(name);
  for (const KindName& entry : kKindNames) {
    if (lower == entry.name) return entry.kind;
  }
  return std::nullopt;
}

Result<std::unique_ptr<DataTransport>> createTransport(TransportKind kind, Bootstrap& bootstrap,
                                                       const TransportOptions& given) {
  // One resolution of the timeout for every transport (common/env.h): a bad BRAID_TIMEOUT fails here on every
  // rank alike, before any rank waits for a peer.
  TransportOptions options = given;
  Result<double> timeout_s = resolveTimeoutSeconds(given.timeout_s);
  if (!timeout_s.isOk()) {
    return invalidArgument(fmt::format("rank {}: {} transport: {}", bootstrap.rank(), transportKindName(kind),
                                       timeout_s.status().message()));
  }
  options.timeout_s = *timeout_s;
  if (kind == TransportKind::kAuto) {
    bool one_process = true;
    bool one_host = true;
    for (int r = 0; r < bootstrap.size(); ++r) {
      one_process = one_process && bootstrap.processIds()[r] == bootstrap.processIds()[bootstrap.rank()] &&
                    bootstrap.hostNames()[r] == bootstrap.hostNames()[bootstrap.rank()];
      one_host = one_host && bootstrap.hostNames()[r] == bootstrap.hostNames()[bootstrap.rank()];
    }
    kind = one_process ? TransportKind::kThreads : one_host ? TransportKind::kShm : TransportKind::kTcp;
  }
  switch (kind) {
    case TransportKind::kThreads: {
      // Staging in the threads transport is allocated on demand, so the communicator lets every send complete
      // into it: algorithms that send more messages on one connection before receiving than NCCL_STEPS = 8
      // slots (ring all-to-all above 9 ranks, recursive doubling's late rounds with chunks above a slice) would
      // otherwise wait forever for their receiver. The cost is a second copy when the receiver is behind.
      TransportOptions threads_options = options;
      threads_options.fifo_depth = std::max(options.fifo_depth, kUnboundedFifoDepth);
      return createThreadsTransport(bootstrap, threads_options);
    }
    case TransportKind::kShm: return createShmTransport(bootstrap, options);
    case TransportKind::kTcp: return createTcpTransport(bootstrap, options);
    case TransportKind::kUcx: return createUcxTransport(bootstrap, options);
    case TransportKind::kAuto: break;
  }
  return internalError("createTransport: unresolved transport kind");
}

}  // namespace braid
