#include "braid_perf/data_check.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <type_traits>

namespace braid::perf {
namespace {

// splitmix64's output function (Steele, Lea, Flood, "Fast splittable pseudorandom number generators",
// OOPSLA 2014; constants as in Vigna's public-domain splitmix64.c): a well-mixed 64-bit hash of x.
inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A value in [0, m) from the high 32 bits of a hash (m < 2^32), without a division (Lemire, "Fast random integer
// generation in an interval", ACM TOMACS 2019).
inline uint64_t fastRange(uint64_t hash, uint64_t m) { return ((hash >> 32) * m) >> 32; }

// splitmix64's stream: the j-th output for a seed.
inline uint64_t streamHash(uint64_t seed, uint64_t j) { return mix64(seed + j * 0x9e3779b97f4a7c15ull); }

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

namespace {

// Element access per type, so that the fill and check loops run without a per-element switch. Raw is the element's
// bits and encode(v) the bits store(v) writes: the loops over streams (below) write and compare those.
template <typename T>
struct IntCodec {
  using Raw = std::make_unsigned_t<T>;
  static Raw encode(int64_t v) { return static_cast<Raw>(static_cast<T>(v)); }
  static void store(void* b, uint64_t i, int64_t v) { static_cast<T*>(b)[i] = static_cast<T>(v); }
  static bool equals(const void* b, uint64_t i, int64_t v) { return static_cast<const T*>(b)[i] == static_cast<T>(v); }
};
template <typename T>
struct FloatCodec {
  using Raw = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  static Raw encode(int64_t v) { return std::bit_cast<Raw>(static_cast<T>(v)); }
  static void store(void* b, uint64_t i, int64_t v) { static_cast<T*>(b)[i] = static_cast<T>(v); }
  static bool equals(const void* b, uint64_t i, int64_t v) {
    return static_cast<double>(static_cast<const T*>(b)[i]) == static_cast<double>(v);
  }
};
struct HalfCodec {
  using Raw = uint16_t;
  static Raw encode(int64_t v) { return halfFromInteger(v); }
  static void store(void* b, uint64_t i, int64_t v) { static_cast<uint16_t*>(b)[i] = halfFromInteger(v); }
  static bool equals(const void* b, uint64_t i, int64_t v) {
    return halfToDouble(static_cast<const uint16_t*>(b)[i]) == static_cast<double>(v);
  }
};
struct Bfloat16Codec {
  using Raw = uint16_t;
  static Raw encode(int64_t v) { return bfloat16FromInteger(v); }
  static void store(void* b, uint64_t i, int64_t v) { static_cast<uint16_t*>(b)[i] = bfloat16FromInteger(v); }
  static bool equals(const void* b, uint64_t i, int64_t v) {
    return bfloat16ToDouble(static_cast<const uint16_t*>(b)[i]) == static_cast<double>(v);
  }
};

template <typename F>
auto withCodec(DataType type, F&& f) {
  switch (type) {
    case DataType::kInt8: return f(IntCodec<int8_t>{});
    case DataType::kUint8: return f(IntCodec<uint8_t>{});
    case DataType::kInt32: return f(IntCodec<int32_t>{});
    case DataType::kUint32: return f(IntCodec<uint32_t>{});
    case DataType::kInt64: return f(IntCodec<int64_t>{});
    case DataType::kUint64: return f(IntCodec<uint64_t>{});
    case DataType::kFloat16: return f(HalfCodec{});
    case DataType::kBfloat16: return f(Bfloat16Codec{});
    case DataType::kFloat32: return f(FloatCodec<float>{});
    case DataType::kFloat64: return f(FloatCodec<double>{});
  }
  return f(IntCodec<uint8_t>{});
}

}  // namespace

void storeElement(DataType type, void* buffer, uint64_t index, int64_t value) {
  withCodec(type, [&](auto codec) { decltype(codec)::store(buffer, index, value); });
}

bool elementEquals(DataType type, const void* buffer, uint64_t index, int64_t value) {
  return withCodec(type, [&](auto codec) { return decltype(codec)::equals(buffer, index, value); });
}

Pattern::Pattern(Collective collective, DataType type, ReduceOp op, int nranks, int root, uint64_t seed)
    : collective_(collective), type_(type), op_(op), nranks_(nranks), root_(root), seed_(mix64(seed)) {
  const int64_t n = nranks > 0 ? nranks : 1;
  const int64_t limit = exactLimit(type);
  if (!isReduction(collective)) {
    salts_.resize(static_cast<size_t>(n));
    for (int64_t r = 0; r < n; ++r) salts_[r] = mix64(0x5bd1e995ull + static_cast<uint64_t>(r));
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

uint64_t Pattern::hashOf(uint64_t j) const { return fastRange(streamHash(seed_, j), modulus_); }

int64_t Pattern::reductionInput(uint64_t u, int rank, uint64_t j_mod_n) const {
  const uint64_t n = static_cast<uint64_t>(nranks_ > 0 ? nranks_ : 1);
  const uint64_t r = static_cast<uint64_t>(rank);
  switch (op_) {
    case ReduceOp::kSum:
    case ReduceOp::kMax:
    case ReduceOp::kMin: {
      uint64_t v = u + (r < modulus_ ? r : r % modulus_);
      if (v >= modulus_) v -= modulus_;
      return static_cast<int64_t>(v) - shift_;
    }
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
  const uint64_t n = static_cast<uint64_t>(nranks_ > 0 ? nranks_ : 1);
  return input(rank, j, j % n);
}

int64_t Pattern::input(int rank, uint64_t j, uint64_t j_mod_n) const {
  if (!isReduction(collective_)) {
    // One stream per rank: the seed salted with a hash of the rank.
    return static_cast<int64_t>(fastRange(streamHash(seed_ ^ salts_[rank], j), modulus_)) - shift_;
  }
  return reductionInput(hashOf(j), rank, j_mod_n);
}

Pattern::Stream Pattern::inputStream(int rank) const {
  Stream stream;
  stream.rank = rank;
  stream.modulus = modulus_;
  if (!isReduction(collective_)) {
    stream.seed = seed_ ^ salts_[static_cast<size_t>(rank)];
    stream.values.resize(modulus_);
    for (uint64_t u = 0; u < modulus_; ++u) stream.values[u] = static_cast<int64_t>(u) - shift_;
    return stream;
  }
  const int n = nranks_ > 0 ? nranks_ : 1;
  stream.seed = seed_;
  // prod and avg depend on d = (rank - j) mod n through d = 0, 1, 2 or more (reductionInput).
  stream.rows = op_ == ReduceOp::kProd || op_ == ReduceOp::kAvg ? std::min(n, 4) : 1;
  stream.values.resize(static_cast<size_t>(stream.rows) * modulus_);
  for (int row = 0; row < stream.rows; ++row) {
    const uint64_t j_mod_n = static_cast<uint64_t>((rank - row + n) % n);
    for (uint64_t u = 0; u < modulus_; ++u) {
      stream.values[static_cast<uint64_t>(row) * modulus_ + u] = reductionInput(u, rank, j_mod_n);
    }
  }
  return stream;
}

Pattern::Stream Pattern::reducedStream() const {
  Stream stream;
  stream.seed = seed_;
  stream.modulus = modulus_;
  stream.values = table_;
  return stream;
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

// Element counts from which the loops go through a Stream: its tables (at most 4 rows of the modulus) cost at most
// a quarter of the element work.
bool streamPays(const Pattern& pattern, uint64_t count) { return count >= 16 * pattern.hashModulus(); }

constexpr size_t kBlock = 1024;  // elements hashed per block

// u(j) = fastRange(streamHash(seed, j), modulus) for j = j0 .. j0 + len - 1 into index[0 .. len). The loop is
// compiled three times and chosen at run time (hashBlock): baseline x86-64 (scalar: three 64-bit multiplies per
// element, about 1.4 ns), AVX2 (about 1.1 ns) and AVX-512 DQ (vpmullq: 8 elements at a time, about 0.3 ns); GCC
// vectorizes it at -O2 only when asked (its -O2 cost model keeps it scalar). Integer arithmetic: every variant gives
// the same u.
#define BRAID_HASH_BLOCK_BODY                                                       \
  for (size_t i = 0; i < len; ++i) {                                                \
    index[i] = static_cast<uint32_t>(fastRange(streamHash(seed, j0 + i), modulus)); \
  }
void hashBlockBaseline(uint64_t seed, uint64_t modulus, uint64_t j0, size_t len, uint32_t* index){BRAID_HASH_BLOCK_BODY}
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#if defined(__clang__)
#define BRAID_HASH_TARGET(isa) __attribute__((target(isa)))
#else
#define BRAID_HASH_TARGET(isa) __attribute__((target(isa), optimize("-ftree-vectorize", "-fvect-cost-model=dynamic")))
#endif
BRAID_HASH_TARGET("avx2") void hashBlockAvx2(uint64_t seed, uint64_t modulus, uint64_t j0, size_t len, uint32_t* index){
    BRAID_HASH_BLOCK_BODY} BRAID_HASH_TARGET("avx512f,avx512dq,avx512vl") void hashBlockAvx512(uint64_t seed,
                                                                                               uint64_t modulus,
                                                                                               uint64_t j0, size_t len,
                                                                                               uint32_t* index) {
  BRAID_HASH_BLOCK_BODY
}
#undef BRAID_HASH_TARGET
#endif
#undef BRAID_HASH_BLOCK_BODY

using HashBlockFn = void (*)(uint64_t seed, uint64_t modulus, uint64_t j0, size_t len, uint32_t* index);

HashBlockFn hashBlock() {
  static const HashBlockFn chosen = [] {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
      return &hashBlockAvx512;
    }
    if (__builtin_cpu_supports("avx2")) return &hashBlockAvx2;
#endif
    return &hashBlockBaseline;
  }();
  return chosen;
}

// Calls visit(k0, len, index) for consecutive blocks of elements [first, first + count) of `stream`: element
// first + k0 + i has the value stream.values[index[i]]. The hashes of a block are computed in one loop of their own.
template <typename Visit>
void forEachBlock(const Pattern::Stream& stream, uint64_t n, uint64_t first, uint64_t count, Visit&& visit) {
  uint32_t index[kBlock];
  uint64_t d = (static_cast<uint64_t>(stream.rank) + n - first % n) % n;  // (rank - j) mod n
  const uint64_t last_row = static_cast<uint64_t>(stream.rows - 1);
  const HashBlockFn hash = hashBlock();
  for (uint64_t k0 = 0; k0 < count; k0 += kBlock) {
    const size_t len = static_cast<size_t>(std::min<uint64_t>(kBlock, count - k0));
    hash(stream.seed, stream.modulus, first + k0, len, index);
    if (last_row > 0) {
      for (size_t i = 0; i < len; ++i) {
        index[i] += static_cast<uint32_t>(std::min(d, last_row) * stream.modulus);
        d = d == 0 ? n - 1 : d - 1;
      }
    }
    visit(k0, len, index);
  }
}

// A stream's values in the element's bits; `exact` when each of them is equal, by C::equals, to its value, so that
// equal bits decide a match (unequal bits are compared by value: -0 and +0 floating values are equal).
template <typename C>
struct EncodedValues {
  std::vector<typename C::Raw> raw;
  bool exact = true;
  explicit EncodedValues(const std::vector<int64_t>& values) : raw(values.size()) {
    for (size_t i = 0; i < values.size(); ++i) {
      raw[i] = C::encode(values[i]);
      exact = exact && C::equals(&raw[i], 0, values[i]);
    }
  }
};

// Elements of `buffer` (`count` of them) that differ from elements [first, first + count) of `stream`.
template <typename C>
int64_t wrongAgainstStream(const Pattern::Stream& stream, uint64_t n, uint64_t first, const void* buffer,
                           uint64_t count) {
  const EncodedValues<C> encoded(stream.values);
  const auto* data = static_cast<const typename C::Raw*>(buffer);
  int64_t wrong = 0;
  forEachBlock(stream, n, first, count, [&](uint64_t k0, size_t len, const uint32_t* index) {
    for (size_t i = 0; i < len; ++i) {
      if (encoded.exact && data[k0 + i] == encoded.raw[index[i]]) continue;
      wrong += !C::equals(buffer, k0 + i, stream.values[index[i]]);
    }
  });
  return wrong;
}

}  // namespace

void prepareCheck(const Pattern& pattern, const RowLayout& layout, int rank, bool in_place, void* send_base,
                  void* recv_base) {
  const Collective collective = pattern.collective();
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
  const uint64_t n = static_cast<uint64_t>(pattern.nranks() > 0 ? pattern.nranks() : 1);
  withCodec(pattern.type(), [&](auto codec) {
    using C = decltype(codec);
    if (streamPays(pattern, layout.send_elems)) {
      const Pattern::Stream stream = pattern.inputStream(rank);
      const EncodedValues<C> encoded(stream.values);
      auto* out = static_cast<typename C::Raw*>(input);
      forEachBlock(stream, n, 0, layout.send_elems, [&](uint64_t k0, size_t len, const uint32_t* index) {
        for (size_t i = 0; i < len; ++i) out[k0 + i] = encoded.raw[index[i]];
      });
      return;
    }
    uint64_t j_mod_n = 0;
    for (uint64_t j = 0; j < layout.send_elems; ++j) {
      C::store(input, j, pattern.input(rank, j, j_mod_n));
      if (++j_mod_n == n) j_mod_n = 0;
    }
  });
}

namespace {

// Elements of `buffer` (`count` of them) that differ from rank `source`'s input from element `first` on.
template <typename C>
int64_t wrongAgainstInput(const Pattern& pattern, int source, uint64_t first, const void* buffer, uint64_t count) {
  const uint64_t n = static_cast<uint64_t>(pattern.nranks() > 0 ? pattern.nranks() : 1);
  if (streamPays(pattern, count)) return wrongAgainstStream<C>(pattern.inputStream(source), n, first, buffer, count);
  uint64_t j_mod_n = first % n;
  int64_t wrong = 0;
  for (uint64_t k = 0; k < count; ++k) {
    wrong += !C::equals(buffer, k, pattern.input(source, first + k, j_mod_n));
    if (++j_mod_n == n) j_mod_n = 0;
  }
  return wrong;
}

// Elements of rank's output that differ from the expected ones.
template <typename C>
int64_t wrongOutput(const Pattern& pattern, const RowLayout& layout, int rank, const void* output) {
  const uint64_t count = layout.count;
  const std::vector<int64_t>& table = pattern.reducedTable();
  int64_t wrong = 0;
  switch (pattern.collective()) {
    case Collective::kAllReduce:
    case Collective::kReduce:
    case Collective::kReduceScatter: {
      const uint64_t first = pattern.collective() == Collective::kReduceScatter ? rank * count : 0;
      if (streamPays(pattern, layout.recv_elems)) {
        return wrongAgainstStream<C>(pattern.reducedStream(), 1, first, output, layout.recv_elems);
      }
      for (uint64_t k = 0; k < layout.recv_elems; ++k) {
        wrong += !C::equals(output, k, table[pattern.hashOf(first + k)]);
      }
      return wrong;
    }
    case Collective::kAllGather:
    case Collective::kAllToAll: {
      // Block p comes from rank p: its input block 0 (all-gather) or its block for this rank (all-to-all).
      const uint64_t first = pattern.collective() == Collective::kAllToAll ? rank * count : 0;
      const char* out = static_cast<const char*>(output);
      for (int p = 0; p < pattern.nranks(); ++p) {
        wrong += wrongAgainstInput<C>(pattern, p, first, out + p * count * layout.elem_bytes, count);
      }
      return wrong;
    }
    case Collective::kBroadcast: return wrongAgainstInput<C>(pattern, pattern.root(), 0, output, layout.recv_elems);
  }
  return wrong;
}

}  // namespace

int64_t countWrong(const Pattern& pattern, const RowLayout& layout, int rank, bool in_place, const void* send_base,
                   const void* recv_base) {
  const Collective collective = pattern.collective();
  const char* recv = static_cast<const char*>(recv_base);
  const void* output = recv + (in_place ? layout.inPlaceRecvOffset(collective, rank) * layout.elem_bytes : 0);
  return withCodec(pattern.type(), [&](auto codec) {
    using C = decltype(codec);
    int64_t wrong = 0;
    if (!in_place) {
      // The send buffer is read-only for the call.
      wrong += wrongAgainstInput<C>(pattern, rank, 0, send_base, layout.send_elems);
      wrong += changedGuardElements(static_cast<const char*>(send_base) + layout.send_elems * layout.elem_bytes,
                                    layout.elem_bytes);
    }
    if (pattern.hasOutput(rank)) {
      wrong += wrongOutput<C>(pattern, layout, rank, output);
    } else if (in_place) {
      // Reduce on a non-root rank in place: the buffer still holds this rank's input.
      wrong += wrongAgainstInput<C>(pattern, rank, 0, output, layout.recv_elems);
    } else {
      // Reduce on a non-root rank: the receive buffer is not written (still poison).
      const unsigned char* bytes = reinterpret_cast<const unsigned char*>(output);
      for (uint64_t k = 0; k < layout.recv_elems; ++k) {
        for (size_t b = 0; b < layout.elem_bytes; ++b) {
          if (bytes[k * layout.elem_bytes + b] != kPoisonByte) {
            ++wrong;
            break;
          }
        }
      }
    }
    wrong += changedGuardElements(recv + writableBytes(layout, in_place), layout.elem_bytes);
    return wrong;
  });
}

}  // namespace braid::perf
