// RequestTable: outstanding transport requests -> the executor's continuation for each, without a heap
// allocation per request (open addressing with linear probing and backward-shift deletion; Knuth, TAOCP
// vol. 3, §6.4, Algorithm R). Request ids are whatever the transport hands out; they are mixed with a
// Fibonacci hash so sequential and strided ids spread alike.
#pragma once

#include <cstdint>
#include <vector>

#include "braid/transport.h"

namespace braid::exec {

class RequestTable {
 public:
  static constexpr uint64_t kEmpty = UINT64_MAX;  // never a stored value

  RequestTable() { rebuild(64); }

  size_t size() const { return size_; }

  /// False when `id` is already present (a transport handing out an id twice).
  bool insert(RequestId id, uint64_t value) {
    if ((size_ + 1) * 2 > slots_.size()) rebuild(slots_.size() * 2);
    size_t i = home(id);
    while (slots_[i].value != kEmpty) {
      if (slots_[i].key == id) return false;
      i = (i + 1) & mask_;
    }
    slots_[i] = Slot{id, value};
    ++size_;
    return true;
  }

  /// Removes `id` and returns its value, or kEmpty when it is not present.
  uint64_t take(RequestId id) {
    size_t i = home(id);
    while (slots_[i].value != kEmpty && slots_[i].key != id) i = (i + 1) & mask_;
    if (slots_[i].value == kEmpty) return kEmpty;
    const uint64_t value = slots_[i].value;
    // Backward shift: move later members of the probe run into the hole when their home allows it.
    size_t hole = i;
    size_t j = i;
    while (true) {
      j = (j + 1) & mask_;
      if (slots_[j].value == kEmpty) break;
      const size_t h = home(slots_[j].key);
      // Slot j may fill the hole when its home is not cyclically inside (hole, j].
      const bool inside = hole <= j ? (hole < h && h <= j) : (hole < h || h <= j);
      if (!inside) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole] = Slot{0, kEmpty};
    --size_;
    return value;
  }

 private:
  struct Slot {
    RequestId key = 0;
    uint64_t value = kEmpty;
  };

  size_t home(RequestId id) const { return static_cast<size_t>((id * 0x9E3779B97F4A7C15ull) >> shift_); }

  void rebuild(size_t capacity) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    int bits = 0;
    while ((size_t{1} << bits) < capacity) ++bits;
    shift_ = 64 - bits;
    size_ = 0;
    for (const Slot& slot : old) {
      if (slot.value != kEmpty) insert(slot.key, slot.value);
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
};

}  // namespace braid::exec
