// Random 64-bit nonces that tell one rendezvous, segment or listener from another.
#pragma once

#include <cstdint>

namespace braid {

/// A fresh nonzero nonce: std::random_device mixed with the steady clock and the process id, so two processes
/// started in the same microsecond still differ.
uint64_t randomNonce();

}  // namespace braid
