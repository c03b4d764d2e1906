#include "braid_perf/data_check.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

namespace braid::perf {
namespace {

// splitmix64's output function (Steele, Lea, Flood, "Fast splittable pseudorandom number generators",
// OOPSLA 2014; constants as in Vigna's public-domain splitmix64.c): a well-mixed 64-bit hash of x.
uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

bool isFloating(DataType type) {
  return type == DataType::kFloat16 || type == DataType::kBfloat16 || type == DataType::kFloat32 ||
         type == DataType::kFloat64;
}

bool isSigned(DataType type) {
  return type == DataType::kInt8 || type == DataType::kInt32 || type == DataType::kInt64 || isFloating(type);
}

// Largest L such that every integer in [-L, L] (unsigned: [0, L]) is exact and in range.
int64_t exactLimit(DataType type) {
  switch (type) {
    case DataType::kInt8: return 127;
    case DataType::kUint8: return 255;
    case DataType::kFloat16: return 2048;
    case DataType::kBfloat16: return 256;
    case DataType::kFloat32: return int64_t{1} << 24;
    case DataType::kFloat64: return int64_t{1} << 53;
    default: return int64_t{1} << 30;  // 32- and 64-bit integers: far above any sum braid_perf forms
  }
}

uint64_t movementModulus(DataType type) {
  switch (type) {
    case DataType::kInt8:
    case DataType::kUint8:
    case DataType::kBfloat16: return 251;
    case DataType::kFloat16: return 2039;
    default: return 65521;
  }
}

}  // namespace

int64_t wrapToType(DataType type, int64_t value) {
  switch (type) {
    case DataType::kInt8: return static_cast<int8_t>(value);
    case DataType::kUint8: return static_cast<uint8_t>(value);
    case DataType::kInt32: return static_cast<int32_t>(value);
    case DataType::kUint32: return static_cast<uint32_t>(value);
    default: return value;
  }
}

uint16_t halfFromInteger(int64_t value) {
  if (value == 0) return 0;
  const uint16_t sign = value < 0 ? 0x8000 : 0;
  uint64_t a = static_cast<uint64_t>(value < 0 ? -value : value);
  const int e = std::bit_width(a) - 1;  // a = 1.f x 2^e
  if (e > 15) return sign | 0x7C00;     // beyond binary16: infinity
  uint64_t mantissa = e <= 10 ? (a << (10 - e)) : (a >> (e - 10));
  return static_cast<uint16_t>(sign | ((e + 15) << 10) | (mantissa & 0x3FF));
}

double halfToDouble(uint16_t bits) {
  const int sign = bits >> 15;
  const int exponent = (bits >> 10) & 0x1F;
  const int mantissa = bits & 0x3FF;
  double value;
  if (exponent == 0) {
    value = std::ldexp(static_cast<double>(mantissa), -24);
  } else if (exponent == 31) {
    value = mantissa ? std::nan("") : INFINITY;
  } else {
    value = std::ldexp(static_cast<double>(1024 + mantissa), exponent - 25);
  }
  return sign ? -value : value;
}

uint16_t bfloat16FromInteger(int64_t value) {
  const float f = static_cast<float>(value);
  return static_cast<uint16_t>(std::bit_cast<uint32_t>(f) >> 16);
}

double bfloat16ToDouble(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

void storeElement(DataType type, void* buffer, uint64_t index, int64_t value) {
  switch (type) {
    case DataType::kInt8: static_cast<int8_t*>(buffer)[index] = static_cast<int8_t>(value); return;
    case DataType::kUint8: static_cast<uint8_t*>(buffer)[index] = static_cast<uint8_t>(value); return;
    case DataType::kInt32: static_cast<int32_t*>(buffer)[index] = static_cast<int32_t>(value); return;
    case DataType::kUint32: static_cast<uint32_t*>(buffer)[index] = static_cast<uint32_t>(value); return;
    case DataType::kInt64: static_cast<int64_t*>(buffer)[index] = value; return;
    case DataType::kUint64: static_cast<uint64_t*>(buffer)[index] = static_cast<uint64_t>(value); return;
    case DataType::kFloat16: static_cast<uint16_t*>(buffer)[index] = halfFromInteger(value); return;
    case DataType::kBfloat16: static_cast<uint16_t*>(buffer)[index] = bfloat16FromInteger(value); return;
    case DataType::kFloat32: static_cast<float*>(buffer)[index] = static_cast<float>(value); return;
    case DataType::kFloat64: static_cast<double*>(buffer)[index] = static_cast<double>(value); return;
  }
}

bool elementEquals(DataType type, const void* buffer, uint64_t index, int64_t value) {
  switch (type) {
    case DataType::kInt8: return static_cast<const int8_t*>(buffer)[index] == static_cast<int8_t>(value);
    case DataType::kUint8: return static_cast<const uint8_t*>(buffer)[index] == static_cast<uint8_t>(value);
    case DataType::kInt32: return static_cast<const int32_t*>(buffer)[index] == static_cast<int32_t>(value);
    case DataType::kUint32: return static_cast<const uint32_t*>(buffer)[index] == static_cast<uint32_t>(value);
    case DataType::kInt64: return static_cast<const int64_t*>(buffer)[index] == value;
    case DataType::kUint64: return static_cast<const uint64_t*>(buffer)[index] == static_cast<uint64_t>(value);
    case DataType::kFloat16:
      return halfToDouble(static_cast<const uint16_t*>(buffer)[index]) == static_cast<double>(value);
    case DataType::kBfloat16:
      return bfloat16ToDouble(static_cast<const uint16_t*>(buffer)[index]) == static_cast<double>(value);
    case DataType::kFloat32: return static_cast<const float*>(buffer)[index] == static_cast<double>(value);
    case DataType::kFloat64: return static_cast<const double*>(buffer)[index] == static_cast<double>(value);
  }
  return false;
}

Pattern::Pattern(Collective collective, DataType type, ReduceOp op, int nranks, int root, uint64_t seed)
    : collective_(collective), type_(type), op_(op), nranks_(nranks), root_(root), seed_(mix64(seed)) {
  const int64_t n = nranks > 0 ? nranks : 1;
  const int64_t limit = exactLimit(type);
  if (!isReduction(collective)) {
    modulus_ = movementModulus(type);
    shift_ = isSigned(type) ? static_cast<int64_t>(modulus_ - 1) / 2 : 0;
    return;
  }
  switch (op) {
    case ReduceOp::kSum:
      modulus_ = static_cast<uint64_t>(std::clamp<int64_t>(limit / n + 1, 1, 251));
      shift_ = isSigned(type) ? static_cast<int64_t>(modulus_ - 1) / 2 : 0;
      break;
    case ReduceOp::kMax:
    case ReduceOp::kMin:
      modulus_ = 251;
      shift_ = isSigned(type) ? 125 : 0;
      break;
    case ReduceOp::kProd: modulus_ = 12; break;
    case ReduceOp::kAvg:
      // More ranks than exact integers (bf16 beyond 256 ranks): averages of -1, 0, +1, i.e. 0.
      avg_zero_ = limit / n == 0;
      modulus_ = static_cast<uint64_t>(std::clamp<int64_t>(limit / n, 1, 250));
      break;
  }
  // The reduced value for every u, by folding the inputs of all ranks in exact integer arithmetic. The fold
  // uses element position 0 mod n: the set of values the ranks hold for a given u does not depend on it.
  table_.resize(modulus_);
  for (uint64_t u = 0; u < modulus_; ++u) {
    int64_t acc = reductionInput(u, 0, 0);
    for (int r = 1; r < nranks; ++r) {
      const int64_t v = reductionInput(u, r, 0);
      switch (op) {
        case ReduceOp::kSum:
        case ReduceOp::kAvg: acc += v; break;
        case ReduceOp::kProd: acc *= v; break;
        case ReduceOp::kMax: acc = std::max(acc, v); break;
        case ReduceOp::kMin: acc = std::min(acc, v); break;
      }
    }
    if (op == ReduceOp::kAvg) acc = wrapToType(type, acc) / n;  // truncating, as NCCL's integer average
    table_[u] = wrapToType(type, acc);
  }
}

uint64_t Pattern::hashOf(uint64_t j) const { return mix64(seed_ ^ mix64(j)) % modulus_; }

int64_t Pattern::reductionInput(uint64_t u, int rank, uint64_t j_mod_n) const {
  const uint64_t n = static_cast<uint64_t>(nranks_ > 0 ? nranks_ : 1);
  const uint64_t r = static_cast<uint64_t>(rank);
  switch (op_) {
    case ReduceOp::kSum:
    case ReduceOp::kMax:
    case ReduceOp::kMin: return static_cast<int64_t>((u + r) % modulus_) - shift_;
    case ReduceOp::kProd: {
      int64_t v = 1;
      if (r == j_mod_n % n) v *= 1 + static_cast<int64_t>(u % 3);
      if (r == (j_mod_n + 1) % n) v *= (u / 3) % 2 ? -1 : 2;
      if (r == (j_mod_n + 2) % n) v *= (u / 6) % 2 ? 2 : 1;
      return v;
    }
    case ReduceOp::kAvg: {
      const int64_t a = avg_zero_ ? 0 : 1 + static_cast<int64_t>(u);
      if (n == 1) return a;
      if (r == j_mod_n % n) return a + 1;
      if (r == (j_mod_n + 1) % n) return a - 1;
      return a;
    }
  }
  return 0;
}

int64_t Pattern::input(int rank, uint64_t j) const {
  if (!isReduction(collective_)) {
    const uint64_t h = mix64(seed_ ^ mix64(j) ^ mix64(0x5bd1e995ull + static_cast<uint64_t>(rank)));
    return static_cast<int64_t>(h % modulus_) - shift_;
  }
  const uint64_t n = static_cast<uint64_t>(nranks_ > 0 ? nranks_ : 1);
  return reductionInput(hashOf(j), rank, j % n);
}

bool Pattern::hasOutput(int rank) const { return collective_ != Collective::kReduce || rank == root_; }

int64_t Pattern::expected(int rank, uint64_t k, uint64_t count) const {
  const uint64_t q = static_cast<uint64_t>(rank);
  switch (collective_) {
    case Collective::kAllReduce:
    case Collective::kReduce: return table_[hashOf(k)];
    case Collective::kReduceScatter: return table_[hashOf(q * count + k)];
    case Collective::kAllGather: return count ? input(static_cast<int>(k / count), k % count) : 0;
    case Collective::kAllToAll: return count ? input(static_cast<int>(k / count), q * count + k % count) : 0;
    case Collective::kBroadcast: return input(root_, k);
  }
  return 0;
}

CallBuffers callBuffers(Collective collective, const RowLayout& layout, int rank, bool in_place, void* send_base,
                        void* recv_base) {
  if (!in_place) return {send_base, recv_base};
  char* base = static_cast<char*>(recv_base);
  return {base + layout.inPlaceSendOffset(collective, rank) * layout.elem_bytes,
          base + layout.inPlaceRecvOffset(collective, rank) * layout.elem_bytes};
}

namespace {

// Bytes of the region the call may write: out of place the receive buffer, in place the whole buffer.
uint64_t writableBytes(const RowLayout& layout, bool in_place) {
  return in_place ? layout.rowBytes() : layout.recv_elems * layout.elem_bytes;
}

int64_t changedGuardElements(const void* region_end, size_t elem_bytes) {
  const unsigned char* guard = static_cast<const unsigned char*>(region_end);
  int64_t wrong = 0;
  for (size_t e = 0; e < kGuardBytes; e += elem_bytes) {
    for (size_t b = e; b < e + elem_bytes && b < kGuardBytes; ++b) {
      if (guard[b] != kGuardByte) {
        ++wrong;
        break;
      }
    }
  }
  return wrong;
}

}  // namespace

void prepareCheck(const Pattern& pattern, const RowLayout& layout, int rank, bool in_place, void* send_base,
                  void* recv_base) {
  const Collective collective = pattern.collective();
  const DataType type = pattern.type();
  const uint64_t writable = writableBytes(layout, in_place);
  char* recv = static_cast<char*>(recv_base);
  std::memset(recv, kPoisonByte, writable);
  std::memset(recv + writable, kGuardByte, kGuardBytes);
  void* input;
  if (in_place) {
    input = recv + layout.inPlaceSendOffset(collective, rank) * layout.elem_bytes;
  } else {
    input = send_base;
    std::memset(static_cast<char*>(send_base) + layout.send_elems * layout.elem_bytes, kGuardByte, kGuardBytes);
  }
  // Broadcast in place: only the root's buffer holds the input; the others' must be written by the call.
  if (in_place && collective == Collective::kBroadcast && rank != pattern.root()) return;
  for (uint64_t j = 0; j < layout.send_elems; ++j) storeElement(type, input, j, pattern.input(rank, j));
}

int64_t countWrong(const Pattern& pattern, const RowLayout& layout, int rank, bool in_place, const void* send_base,
                   const void* recv_base) {
  const Collective collective = pattern.collective();
  const DataType type = pattern.type();
  const char* recv = static_cast<const char*>(recv_base);
  int64_t wrong = 0;
  if (!in_place) {
    for (uint64_t j = 0; j < layout.send_elems; ++j) {
      if (!elementEquals(type, send_base, j, pattern.input(rank, j))) ++wrong;
    }
    wrong += changedGuardElements(static_cast<const char*>(send_base) + layout.send_elems * layout.elem_bytes,
                                  layout.elem_bytes);
  }
  const void* output = recv + (in_place ? layout.inPlaceRecvOffset(collective, rank) * layout.elem_bytes : 0);
  if (pattern.hasOutput(rank)) {
    for (uint64_t k = 0; k < layout.recv_elems; ++k) {
      if (!elementEquals(type, output, k, pattern.expected(rank, k, layout.count))) ++wrong;
    }
  } else if (in_place) {
    // Reduce on a non-root rank in place: the buffer still holds this rank's input.
    for (uint64_t k = 0; k < layout.recv_elems; ++k) {
      if (!elementEquals(type, output, k, pattern.input(rank, k))) ++wrong;
    }
  } else {
    // Reduce on a non-root rank: the receive buffer is not written (still poison).
    for (uint64_t k = 0; k < layout.recv_elems; ++k) {
      const unsigned char* e = reinterpret_cast<const unsigned char*>(output) + k * layout.elem_bytes;
      for (size_t b = 0; b < layout.elem_bytes; ++b) {
        if (e[b] != kPoisonByte) {
          ++wrong;
          break;
        }
      }
    }
  }
  wrong += changedGuardElements(recv + writableBytes(layout, in_place), layout.elem_bytes);
  return wrong;
}

}  // namespace braid::perf
