// Element types, reduction operators and the reduction loops of the runtime (include/braid/datatype.h).
//
// Every loop is a template instantiated per (type, operator) with a branch-free body, so the compiler
// vectorizes it (this file is compiled with -O3, runtime/CMakeLists.txt). dst may alias a source exactly;
// the compiler versions the loops with a runtime overlap check.
//
// Integer sums and products are done in the unsigned type of the same width (wrap-around without signed
// overflow, which is undefined behaviour in C++); the conversion back to the signed type is two's complement
// (C++20). fp16 and bf16 are widened to fp32, combined in fp32 and rounded to nearest-even once: rounding
// an fp32 result of +, *, / of two narrower values to the narrow format equals rounding the exact result
// directly, because fp32's 24 bits are at least 2p + 2 for p = 11 (fp16) and p = 8 (bf16) (S. A. Figueroa,
// "When is double rounding innocuous?", SIGNUM Newsletter 30(3), 1995). Min/max pick one operand's bits.
#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstring>
#include <string>
#include <type_traits>

#include "braid/datatype.h"
#include "reduce/reduce_internal.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace braid {
namespace {

inline uint32_t floatBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

inline float bitsFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Branch-free select (`cond` ? yes : no) on bit masks: nested ?: on computed values keeps control flow in
// the loop and GCC then leaves it scalar; masks vectorize.
inline uint32_t select(bool cond, uint32_t yes, uint32_t no) {
  const uint32_t mask = 0u - static_cast<uint32_t>(cond);
  return (yes & mask) | (no & ~mask);
}

// binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits. binary32: 1, 8 (bias 127), 23.
// Normal halves map to floats by moving the exponent/mantissa up 13 bits and rebiasing by 127 - 15 = 112;
// subnormal halves are m * 2^-24 (exact in float); exponent 31 is inf/NaN (mantissa kept, NaN stays NaN).
inline float halfToFloatInline(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7FFFu;
  const uint32_t normal = (em << 13) + (112u << 23);
  const uint32_t special = (em << 13) | 0x7F800000u;
  const uint32_t subnormal = floatBits(static_cast<float>(static_cast<int32_t>(em)) * 0x1p-24f);
  const uint32_t magnitude = select(em >= 0x7C00u, special, select(em >= 0x0400u, normal, subnormal));
  return bitsFloat(sign | magnitude);
}

// Round to nearest even, overflow to infinity, NaN to a quiet NaN of the same sign.
//  - |f| >= 65520 (0x477FF000, halfway between the largest half 65504 and 2^16; the tie goes up to even,
//    i.e. to infinity): infinity.
//  - |f| >= 2^-14 (0x38800000, the smallest normal half): drop 13 mantissa bits with round-half-even
//    (add 0xFFF plus the lowest kept bit; a carry into the exponent is the correct result) and rebias.
//  - below: the half is the integer round(|f| * 2^24). Adding 0.5 makes the fp32 addition round |f| to a
//    multiple of 2^-24 (the ulp of [0.5, 1)) in nearest-even, and bits(0.5 + k * 2^-24) - bits(0.5) = k
//    (k = 1024 gives 0x0400, the smallest normal, also correct).
inline uint16_t floatToHalfInline(float f) {
  const uint32_t x = floatBits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t a = x & 0x7FFFFFFFu;
  const uint32_t nan = 0x7E00u | ((a >> 13) & 0x3FFu);
  const uint32_t normal = (a + 0xFFFu + ((a >> 13) & 1u) - (112u << 23)) >> 13;
  const uint32_t subnormal = floatBits(bitsFloat(a) + 0.5f) - 0x3F000000u;
  const uint32_t magnitude =
      select(a > 0x7F800000u, nan, select(a >= 0x477FF000u, 0x7C00u, select(a >= 0x38800000u, normal, subnormal)));
  return static_cast<uint16_t>(sign | magnitude);
}

inline float bfloat16ToFloatInline(uint16_t b) { return bitsFloat(static_cast<uint32_t>(b) << 16); }

// bfloat16 is the top half of binary32: round the low 16 bits half-to-even (overflow carries into the
// exponent and reaches infinity by itself); NaN keeps its top bits with the quiet bit set.
inline uint16_t floatToBfloat16Inline(float f) {
  const uint32_t x = floatBits(f);
  const uint32_t rounded = (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16;
  const uint32_t nan = (x >> 16) | 0x0040u;
  return static_cast<uint16_t>(select((x & 0x7FFFFFFFu) > 0x7F800000u, nan, rounded));
}

// Tags of the 16-bit float types (stored as uint16_t, computed in float).
struct Half {};
struct Bf16 {};

template <typename T>
struct Traits {  // integers and fp32/fp64: stored and computed as T
  using Storage = T;
  using Compute = T;
  static Compute load(T v) { return v; }
  static T store(Compute v) { return v; }
};
template <>
struct Traits<Half> {
  using Storage = uint16_t;
  using Compute = float;
  static float load(uint16_t v) { return halfToFloatInline(v); }
  static uint16_t store(float v) { return floatToHalfInline(v); }
};
template <>
struct Traits<Bf16> {
  using Storage = uint16_t;
  using Compute = float;
  static float load(uint16_t v) { return bfloat16ToFloatInline(v); }
  static uint16_t store(float v) { return floatToBfloat16Inline(v); }
};

// The unsigned type integer sums and products wrap in; at least 32 bits so that uint8 * uint8 is not
// promoted to a signed int product.
template <typename T>
using WrapType = std::conditional_t<(sizeof(T) < 4), uint32_t, std::make_unsigned_t<T>>;

// Op::apply<T>(a, b) on stored values of element type T.
struct SumOp {
  template <typename T, typename S = typename Traits<T>::Storage>
  static S apply(S a, S b) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<S>(static_cast<WrapType<T>>(a) + static_cast<WrapType<T>>(b));
    } else {
      return Traits<T>::store(Traits<T>::load(a) + Traits<T>::load(b));
    }
  }
};
struct ProdOp {
  template <typename T, typename S = typename Traits<T>::Storage>
  static S apply(S a, S b) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<S>(static_cast<WrapType<T>>(a) * static_cast<WrapType<T>>(b));
    } else {
      return Traits<T>::store(Traits<T>::load(a) * Traits<T>::load(b));
    }
  }
};
struct MaxOp {  // NCCL's (a < b) ? b : a, compared as values, the chosen operand's bits kept
  template <typename T, typename S = typename Traits<T>::Storage>
  static S apply(S a, S b) {
    return Traits<T>::load(a) < Traits<T>::load(b) ? b : a;
  }
};
struct MinOp {  // NCCL's (a < b) ? a : b
  template <typename T, typename S = typename Traits<T>::Storage>
  static S apply(S a, S b) {
    return Traits<T>::load(a) < Traits<T>::load(b) ? a : b;
  }
};

template <typename T, typename Op>
void loop2(void* dst, const void* a, const void* b, size_t count) {
  using S = typename Traits<T>::Storage;
  S* d = static_cast<S*>(dst);
  const S* x = static_cast<const S*>(a);
  const S* y = static_cast<const S*>(b);
  for (size_t i = 0; i < count; ++i) d[i] = Op::template apply<T>(x[i], y[i]);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define BRAID_REDUCE_X86 1
// The same loops compiled for AVX2 (256-bit vectors), chosen at run time when the CPU has it: the build
// targets baseline x86-64 (SSE2). fp16 additionally uses F16C's conversions (vcvtph2ps / vcvtps2ph with
// round-to-nearest-even), which give the same bits as halfToFloatInline / floatToHalfInline: exact
// widening, RNE, overflow to infinity, NaN quieted with its top payload bits kept.
bool detectAvx2F16c() {
  __builtin_cpu_init();  // may run before libgcc's own initialization (static initializers)
  // F16C from CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports does not know "f16c".
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  return __builtin_cpu_supports("avx2") && f16c;
}
std::atomic<bool> g_use_avx2{detectAvx2F16c()};
bool haveAvx2F16c() { return g_use_avx2.load(std::memory_order_relaxed); }

template <typename T, typename Op>
__attribute__((target("avx2,f16c"))) void loop2Avx2(void* dst, const void* a, const void* b, size_t count) {
  using S = typename Traits<T>::Storage;
  S* d = static_cast<S*>(dst);
  const S* x = static_cast<const S*>(a);
  const S* y = static_cast<const S*>(b);
  size_t i = 0;
  if constexpr (std::is_same_v<T, Half>) {
    for (; i + 8 <= count; i += 8) {
      const __m128i hx = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i));
      const __m128i hy = _mm_loadu_si128(reinterpret_cast<const __m128i*>(y + i));
      const __m256 fx = _mm256_cvtph_ps(hx);
      const __m256 fy = _mm256_cvtph_ps(hy);
      __m128i out;
      if constexpr (std::is_same_v<Op, SumOp>) {
        out = _mm256_cvtps_ph(_mm256_add_ps(fx, fy), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      } else if constexpr (std::is_same_v<Op, ProdOp>) {
        out = _mm256_cvtps_ph(_mm256_mul_ps(fx, fy), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      } else {
        // x < y (ordered: false with a NaN, as C++ <), narrowed to 16-bit lanes; max takes y there, min x.
        const __m256i less = _mm256_castps_si256(_mm256_cmp_ps(fx, fy, _CMP_LT_OQ));
        const __m128i less16 = _mm_packs_epi32(_mm256_castsi256_si128(less), _mm256_extracti128_si256(less, 1));
        out = std::is_same_v<Op, MaxOp> ? _mm_blendv_epi8(hx, hy, less16) : _mm_blendv_epi8(hy, hx, less16);
      }
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), out);
    }
  }
  for (; i < count; ++i) d[i] = Op::template apply<T>(x[i], y[i]);
}
#endif

template <typename T, typename Op>
void runLoop2(void* dst, const void* a, const void* b, size_t count) {
#ifdef BRAID_REDUCE_X86
  if (haveAvx2F16c()) return loop2Avx2<T, Op>(dst, a, b, count);
#endif
  loop2<T, Op>(dst, a, b, count);
}

template <typename T>
void dispatchOp(void* dst, const void* a, const void* b, size_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return runLoop2<T, SumOp>(dst, a, b, count);
    case ReduceOp::kProd: return runLoop2<T, ProdOp>(dst, a, b, count);
    case ReduceOp::kMax: return runLoop2<T, MaxOp>(dst, a, b, count);
    case ReduceOp::kMin: return runLoop2<T, MinOp>(dst, a, b, count);
  }
}

template <typename T>
void divideAll(void* buf, size_t count, int num_ranks) {
  auto* p = static_cast<typename Traits<T>::Storage*>(buf);
  if constexpr (std::is_integral_v<T>) {
    // Truncating division toward zero (C++ integer division). 8-bit values divide as int so that a rank
    // count above 127/255 is not truncated to the narrow type.
    if constexpr (sizeof(T) < 4) {
      for (size_t i = 0; i < count; ++i) p[i] = static_cast<T>(static_cast<int>(p[i]) / num_ranks);
    } else {
      const T n = static_cast<T>(num_ranks);
      for (size_t i = 0; i < count; ++i) p[i] = static_cast<T>(p[i] / n);
    }
  } else {
    using C = typename Traits<T>::Compute;
    const C n = static_cast<C>(num_ranks);
    for (size_t i = 0; i < count; ++i) p[i] = Traits<T>::store(Traits<T>::load(p[i]) / n);
  }
}

std::string lower(const std::string& text) {
  std::string out = text;
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

size_t dataTypeSize(DataType type) {
  switch (type) {
    case DataType::kInt8:
    case DataType::kUint8: return 1;
    case DataType::kFloat16:
    case DataType::kBfloat16: return 2;
    case DataType::kInt32:
    case DataType::kUint32:
    case DataType::kFloat32: return 4;
    case DataType::kInt64:
    case DataType::kUint64:
    case DataType::kFloat64: return 8;
  }
  return 1;
}

const char* dataTypeName(DataType type) {
  switch (type) {
    case DataType::kInt8: return "int8";
    case DataType::kUint8: return "uint8";
    case DataType::kInt32: return "int32";
    case DataType::kUint32: return "uint32";
    case DataType::kInt64: return "int64";
    case DataType::kUint64: return "uint64";
    case DataType::kFloat16: return "half";
    case DataType::kFloat32: return "float";
    case DataType::kFloat64: return "double";
    case DataType::kBfloat16: return "bfloat16";
  }
  return "?";
}

std::optional<DataType> parseDataType(const std::string& name) {
  std::string key = lower(name);
  if (key.rfind("nccl", 0) == 0) key = key.substr(4);  // ncclFloat32, ncclBfloat16, ...
  static const struct {
    const char* name;
    DataType type;
  } kNames[] = {
      {"int8", DataType::kInt8},       {"char", DataType::kInt8},     {"uint8", DataType::kUint8},
      {"int32", DataType::kInt32},     {"int", DataType::kInt32},     {"uint32", DataType::kUint32},
      {"int64", DataType::kInt64},     {"uint64", DataType::kUint64}, {"half", DataType::kFloat16},
      {"float16", DataType::kFloat16}, {"fp16", DataType::kFloat16},  {"float", DataType::kFloat32},
      {"float32", DataType::kFloat32}, {"fp32", DataType::kFloat32},  {"double", DataType::kFloat64},
      {"float64", DataType::kFloat64}, {"fp64", DataType::kFloat64},  {"bfloat16", DataType::kBfloat16},
      {"bf16", DataType::kBfloat16},
  };
  for (const auto& entry : kNames) {
    if (key == entry.name) return entry.type;
  }
  return std::nullopt;
}

const char* reduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kProd: return "prod";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kAvg: return "avg";
  }
  return "?";
}

std::optional<ReduceOp> parseReduceOp(const std::string& name) {
  std::string key = lower(name);
  if (key.rfind("nccl", 0) == 0) key = key.substr(4);  // ncclSum, ...
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kAvg}) {
    if (key == reduceOpName(op)) return op;
  }
  return std::nullopt;
}

void reduce2(void* dst, const void* a, const void* b, size_t count, DataType type, ReduceOp op) {
  if (count == 0) return;
  switch (type) {
    case DataType::kInt8: return dispatchOp<int8_t>(dst, a, b, count, op);
    case DataType::kUint8: return dispatchOp<uint8_t>(dst, a, b, count, op);
    case DataType::kInt32: return dispatchOp<int32_t>(dst, a, b, count, op);
    case DataType::kUint32: return dispatchOp<uint32_t>(dst, a, b, count, op);
    case DataType::kInt64: return dispatchOp<int64_t>(dst, a, b, count, op);
    case DataType::kUint64: return dispatchOp<uint64_t>(dst, a, b, count, op);
    case DataType::kFloat16: return dispatchOp<Half>(dst, a, b, count, op);
    case DataType::kFloat32: return dispatchOp<float>(dst, a, b, count, op);
    case DataType::kFloat64: return dispatchOp<double>(dst, a, b, count, op);
    case DataType::kBfloat16: return dispatchOp<Bf16>(dst, a, b, count, op);
  }
}

void reduceInto(void* dst, const void* src, size_t count, DataType type, ReduceOp op) {
  reduce2(dst, dst, src, count, type, op);
}

void finishAverage(void* buf, size_t count, DataType type, int num_ranks) {
  if (count == 0 || num_ranks <= 1) return;  // dividing by 1 changes nothing; <= 0 is not a rank count
  switch (type) {
    case DataType::kInt8: return divideAll<int8_t>(buf, count, num_ranks);
    case DataType::kUint8: return divideAll<uint8_t>(buf, count, num_ranks);
    case DataType::kInt32: return divideAll<int32_t>(buf, count, num_ranks);
    case DataType::kUint32: return divideAll<uint32_t>(buf, count, num_ranks);
    case DataType::kInt64: return divideAll<int64_t>(buf, count, num_ranks);
    case DataType::kUint64: return divideAll<uint64_t>(buf, count, num_ranks);
    case DataType::kFloat16: return divideAll<Half>(buf, count, num_ranks);
    case DataType::kFloat32: return divideAll<float>(buf, count, num_ranks);
    case DataType::kFloat64: return divideAll<double>(buf, count, num_ranks);
    case DataType::kBfloat16: return divideAll<Bf16>(buf, count, num_ranks);
  }
}

namespace detail {
bool useSimdReduceLoops(bool on) {
#ifdef BRAID_REDUCE_X86
  const bool have = detectAvx2F16c();
  g_use_avx2.store(on && have);
  return on && have;
#else
  (void)on;
  return false;
#endif
}
}  // namespace detail

float halfToFloat(uint16_t h) { return halfToFloatInline(h); }
uint16_t floatToHalf(float f) { return floatToHalfInline(f); }
float bfloat16ToFloat(uint16_t b) { return bfloat16ToFloatInline(b); }
uint16_t floatToBfloat16(float f) { return floatToBfloat16Inline(f); }

}  // namespace braid
