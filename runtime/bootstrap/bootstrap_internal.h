// Internals of the bootstrap shared by bootstrap.cc and bootstrap_env.cc.
#pragma once

#include <cstdint>

#include "braid/bootstrap.h"
#include "socket/socket.h"

namespace braid::bootstrap_internal {

/// Starts a root thread listening on `address` (port 0: any) for a rendezvous whose ranks present `nonce`,
/// and returns the id naming it. Errors: kSystemError naming the address when it cannot listen there.
Result<UniqueId> startRoot(net::SocketAddress address, uint64_t nonce);

/// The id naming a root at `address` (port set) for `nonce`; starts nothing.
UniqueId makeId(net::SocketAddress address, uint64_t nonce);

}  // namespace braid::bootstrap_internal
