// Internals of the bootstrap shared by bootstrap.cc and bootstrap_env.cc.
#pragma once

#include <cstdint>
#include <string>

#include "braid/bootstrap.h"
#include "socket/socket.h"

namespace braid::bootstrap_internal {

/// Starts a root thread listening on `address` (port 0: any) for a rendezvous whose ranks present `nonce`,
/// and returns the id naming it. Errors: kSystemError naming the address when it cannot listen there.
Result<UniqueId> startRoot(net::SocketAddress address, uint64_t nonce);

/// How long reportCouldNotJoin tries to reach the root (it may not be listening yet), seconds.
inline constexpr double kCouldNotJoinWaitS = 5.0;

/// Tells the root of `id` that `rank` cannot join (its settings were refused: `why`, of which the first 63 bytes
/// travel), so that the root fails the rendezvous for every rank at once instead of leaving them waiting for it.
/// Best effort: gives up silently after kCouldNotJoinWaitS without a root, or on any error.
void reportCouldNotJoin(const UniqueId& id, int rank, const std::string& why);

/// The id naming a root at `address` (port set) for `nonce`; starts nothing.
UniqueId makeId(net::SocketAddress address, uint64_t nonce);

}  // namespace braid::bootstrap_internal
