#include "common/nonce.h"

#include <unistd.h>

#include <chrono>
#include <random>

namespace braid {

uint64_t randomNonce() {
  std::random_device device;
  uint64_t nonce = (uint64_t{device()} << 32) ^ device();
  nonce ^= static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) * 0x9E3779B97F4A7C15ull;
  nonce ^= static_cast<uint64_t>(getpid()) << 17;
  return nonce == 0 ? 1 : nonce;
}

}  // namespace braid
