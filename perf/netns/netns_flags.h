// What the two emulated-host drivers (netns_alltoall: the TCP transport through the communicator;
// netns_plugin_alltoall: the NCCL net plugin as NCCL's proxy drives it) share: their flags and the data they send.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "common/text.h"

namespace braid::netns {

/// --sizes (bytes per peer, multiples of 8), --iters, --warmup, --label; the drivers add their own flags through
/// `extra` (called with flag and value; returns false for a flag it does not know or a bad value).
struct Flags {
  std::vector<uint64_t> sizes = {1 << 20, 4 << 20, 16 << 20};
  int iters = 20;
  int warmup = 2;
  std::string label = "run";
};

template <typename Extra>
bool parseFlags(int argc, char** argv, Flags* flags, Extra extra) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return false;
    const std::string value = argv[++i];
    if (arg == "--sizes") {
      flags->sizes.clear();
      size_t start = 0;
      while (start <= value.size()) {
        const size_t comma = value.find(',', start);
        const std::string item = value.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        const std::optional<uint64_t> size = parseNcclTestsSize(item);
        if (!size || *size == 0 || *size % 8 != 0) return false;
        flags->sizes.push_back(*size);
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    } else if (arg == "--iters" || arg == "--warmup") {
      char* end = nullptr;
      const long n = std::strtol(value.c_str(), &end, 10);
      if (*end != '\0' || n < 0 || n > 100000 || (arg == "--iters" && n == 0)) return false;
      (arg == "--iters" ? flags->iters : flags->warmup) = static_cast<int>(n);
    } else if (arg == "--label") {
      flags->label = value;
    } else if (!extra(arg, value)) {
      return false;
    }
  }
  return true;
}

/// Word w of the block rank `from` sends rank `to` in iteration `iter` (splitmix64 of the four).
inline uint64_t blockWord(int iter, int from, int to, uint64_t w) {
  uint64_t x = w * 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(iter) << 48) ^ (static_cast<uint64_t>(from) << 32) ^
               (static_cast<uint64_t>(to) << 16);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace braid::netns
