// The element-wise copy and reduction bodies of the CUDA kernels (runtime/cuda/kernels.cu) and of the device-resident
// executor (device_kernel.cu), written once as __host__ __device__ code so that the same launch logic runs on the
// CPU: planElementwise() computes the split and the launch shape the CUDA launcher uses, and emulateLaunch() runs
// the kernel body for every (block, thread) of that shape on the CPU, where tests compare it with runtime/reduce
// (include/braid/datatype.h, the reference). This header compiles with nvcc and with a plain C++ compiler.
//
// The split: an operation on `count` elements over up to four pointers (two outputs, two inputs) runs as a scalar
// head, 16-byte vectors and a scalar tail when every pointer has the same address modulo 16 and is aligned to
// its element; otherwise every element is a scalar (the head covers all of them). Head elements bring the
// pointers to a 16-byte boundary; the vectors are whole 16-byte packs; the tail is what is left. Threads walk
// each part in grid-stride loops, so any grid covers every element exactly once.
//
// Element semantics are runtime/reduce's (datatype.h): integer sums and products wrap (computed in the unsigned
// type of the same width, at least 32 bits), fp16 and bf16 give the value rounded once from the exact result
// (on the device: the native __hadd/__hmul and their packed forms, whose single IEEE rounding equals rounding an
// fp32 result because fp32 has at least 2p + 2 bits; on the host: runtime/reduce's fp32 computation), min/max
// keep the bits of the operand chosen by `a < b` (NCCL's rule). Float NaN payloads may differ between the device
// and the host (the device returns its canonical NaN); every other bit pattern is identical.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define BRAID_HD __host__ __device__ __forceinline__
#else
#define BRAID_HD inline
#endif
// Unrolling hints for the device pass only (the host compiler does not know the pragma).
#if defined(__CUDA_ARCH__)
#define BRAID_UNROLL _Pragma("unroll")
#else
#define BRAID_UNROLL
#endif

#if !defined(__CUDA_ARCH__)
#include "braid/datatype.h"
#endif

namespace braid::cuda {

/// Bytes of one vector access (ld.global.v4 / st.global.v4).
inline constexpr uint32_t kVectorBytes = 16;
/// Threads per block of the element-wise kernels.
inline constexpr uint32_t kElementwiseBlock = 512;

/// Tags of the 16-bit float element types (stored as their IEEE / bfloat16 bits).
struct Half {};
struct Bfloat16 {};

template <typename T>
struct ElementStorage {
  using type = T;
};
template <>
struct ElementStorage<Half> {
  using type = uint16_t;
};
template <>
struct ElementStorage<Bfloat16> {
  using type = uint16_t;
};
template <typename T>
using StorageOf = typename ElementStorage<T>::type;

/// What an element-wise operation computes: out = a (copy) or out = a (op) b.
enum class ElementOp : int { kCopy = 0, kSum = 1, kProd = 2, kMax = 3, kMin = 4 };

/// The unsigned type integer sums and products wrap in (runtime/reduce's WrapType).
template <typename T>
using WrapOf = std::conditional_t<(sizeof(T) < 4), uint32_t, std::make_unsigned_t<T>>;

/// out = a (op) b on one element of type T (stored bits for Half / Bfloat16).
template <typename T, ElementOp kOp>
BRAID_HD StorageOf<T> applyElement(StorageOf<T> a, StorageOf<T> b) {
  if constexpr (kOp == ElementOp::kCopy) {
    (void)b;
    return a;
  } else if constexpr (std::is_integral_v<T>) {
    if constexpr (kOp == ElementOp::kSum) return static_cast<T>(static_cast<WrapOf<T>>(a) + static_cast<WrapOf<T>>(b));
    if constexpr (kOp == ElementOp::kProd) return static_cast<T>(static_cast<WrapOf<T>>(a) * static_cast<WrapOf<T>>(b));
    if constexpr (kOp == ElementOp::kMax) return a < b ? b : a;
    if constexpr (kOp == ElementOp::kMin) return a < b ? a : b;
  } else if constexpr (std::is_floating_point_v<T>) {
    if constexpr (kOp == ElementOp::kSum) return a + b;
    if constexpr (kOp == ElementOp::kProd) return a * b;
    if constexpr (kOp == ElementOp::kMax) return a < b ? b : a;
    if constexpr (kOp == ElementOp::kMin) return a < b ? a : b;
  } else {
#if defined(__CUDA_ARCH__)
    if constexpr (std::is_same_v<T, Half>) {
      const __half x = __ushort_as_half(a);
      const __half y = __ushort_as_half(b);
      if constexpr (kOp == ElementOp::kSum) return __half_as_ushort(__hadd(x, y));
      if constexpr (kOp == ElementOp::kProd) return __half_as_ushort(__hmul(x, y));
      if constexpr (kOp == ElementOp::kMax) return __hlt(x, y) ? b : a;
      if constexpr (kOp == ElementOp::kMin) return __hlt(x, y) ? a : b;
    } else {
      const __nv_bfloat16 x = __ushort_as_bfloat16(a);
      const __nv_bfloat16 y = __ushort_as_bfloat16(b);
      if constexpr (kOp == ElementOp::kSum) return __bfloat16_as_ushort(__hadd(x, y));
      if constexpr (kOp == ElementOp::kProd) return __bfloat16_as_ushort(__hmul(x, y));
      if constexpr (kOp == ElementOp::kMax) return __hlt(x, y) ? b : a;
      if constexpr (kOp == ElementOp::kMin) return __hlt(x, y) ? a : b;
    }
#else
    const bool half = std::is_same_v<T, Half>;
    const float x = half ? halfToFloat(a) : bfloat16ToFloat(a);
    const float y = half ? halfToFloat(b) : bfloat16ToFloat(b);
    if constexpr (kOp == ElementOp::kMax) return x < y ? b : a;
    if constexpr (kOp == ElementOp::kMin) return x < y ? a : b;
    const float r = kOp == ElementOp::kSum ? x + y : x * y;
    return half ? floatToHalf(r) : floatToBfloat16(r);
#endif
  }
  return a;  // not reached: every (type, op) returns above
}

/// One 16-byte pack of elements of type T.
template <typename T>
struct alignas(16) Pack {
  static constexpr uint32_t kCount = kVectorBytes / sizeof(StorageOf<T>);
  StorageOf<T> v[kCount];
};

/// 16-byte loads and stores of a pack (ld.global.v4 / st.global.v4 on the device). Plain loads are enough for data
/// a peer wrote: the device-resident executor reads a slot only after an acquire of its flag and a block barrier,
/// which orders them after the peer's release.
template <typename T>
BRAID_HD Pack<T> loadPack(const void* p) {
  Pack<T> pack;
  static_assert(sizeof(Pack<T>) == 16);
#if defined(__CUDA_ARCH__)
  const uint4 raw = *static_cast<const uint4*>(p);
  memcpy(&pack, &raw, sizeof pack);
#else
  std::memcpy(&pack, p, sizeof pack);
#endif
  return pack;
}

template <typename T>
BRAID_HD void storePack(void* p, const Pack<T>& pack) {
#if defined(__CUDA_ARCH__)
  uint4 raw;
  memcpy(&raw, &pack, sizeof raw);
  *static_cast<uint4*>(p) = raw;
#else
  std::memcpy(p, &pack, sizeof pack);
#endif
}

/// out = a (op) b on a whole pack. On the device, fp16 and bf16 sums and products use the packed native forms
/// (__hadd2 / __hmul2 on pairs), which round every lane once as the scalar forms do.
template <typename T, ElementOp kOp>
BRAID_HD Pack<T> applyPack(const Pack<T>& a, const Pack<T>& b) {
  Pack<T> out;
#if defined(__CUDA_ARCH__)
  if constexpr ((std::is_same_v<T, Half> || std::is_same_v<T, Bfloat16>)&&(kOp == ElementOp::kSum ||
                                                                           kOp == ElementOp::kProd)) {
    using Pair = std::conditional_t<std::is_same_v<T, Half>, __half2, __nv_bfloat162>;
    Pair x[4], y[4], r[4];
    memcpy(x, &a, sizeof x);
    memcpy(y, &b, sizeof y);
    BRAID_UNROLL
    for (int k = 0; k < 4; ++k) r[k] = kOp == ElementOp::kSum ? __hadd2(x[k], y[k]) : __hmul2(x[k], y[k]);
    memcpy(&out, r, sizeof out);
  } else
#endif
  {
    BRAID_UNROLL
    for (uint32_t k = 0; k < Pack<T>::kCount; ++k) out.v[k] = applyElement<T, kOp>(a.v[k], b.v[k]);
  }
  return out;
}

/// The pointers of one element-wise operation: out0 = a (op) b, and the same value into out1 when it is not null
/// (the device-resident executor's receive-reduce-copy-send writes the local dst and the peer's slot at once). b
/// is read only by reductions, which need it; a reduction into place (reduceInto) passes a = out0. out0 may equal
/// a or b; no other overlap is allowed.
struct ElementwiseArgs {
  void* out0 = nullptr;
  void* out1 = nullptr;
  const void* a = nullptr;
  const void* b = nullptr;
};

/// How `count` elements split into a scalar head, 16-byte vectors and a scalar tail (see the top of the file).
struct ElementwiseSplit {
  uint64_t head = 0;     // elements before the first 16-byte boundary (all of them when not co-aligned)
  uint64_t vectors = 0;  // 16-byte packs after the head
  uint64_t tail = 0;     // elements after the packs
  friend bool operator==(const ElementwiseSplit&, const ElementwiseSplit&) = default;
};

/// The split of `count` elements of `elem_bytes` (1, 2, 4 or 8) over the non-null pointers of `args`.
BRAID_HD ElementwiseSplit splitElementwise(uint64_t count, uint32_t elem_bytes, const ElementwiseArgs& args) {
  ElementwiseSplit split;
  if (count == 0) return split;
  const uintptr_t pointers[4] = {reinterpret_cast<uintptr_t>(args.out0), reinterpret_cast<uintptr_t>(args.out1),
                                 reinterpret_cast<uintptr_t>(args.a), reinterpret_cast<uintptr_t>(args.b)};
  const uintptr_t phase = pointers[0] % kVectorBytes;
  bool vectorizable = phase % elem_bytes == 0;
  for (uintptr_t p : pointers) vectorizable = vectorizable && (p == 0 || p % kVectorBytes == phase);
  if (!vectorizable) {
    split.head = count;
    return split;
  }
  const uint64_t per_pack = kVectorBytes / elem_bytes;
  const uint64_t to_boundary = ((kVectorBytes - phase) % kVectorBytes) / elem_bytes;
  split.head = to_boundary < count ? to_boundary : count;
  const uint64_t rest = count - split.head;
  split.vectors = rest / per_pack;
  split.tail = rest % per_pack;
  return split;
}

/// A kernel launch: blocks x threads per block (grid 0: nothing to launch).
struct LaunchShape {
  uint32_t grid = 0;
  uint32_t block = 0;
  friend bool operator==(const LaunchShape&, const LaunchShape&) = default;
};

/// The grid of an element-wise kernel: enough blocks of kElementwiseBlock threads for one vector (or one scalar
/// of the head and tail) per thread, at most `max_grid` (the launcher passes the blocks resident at once, at most
/// 4 per SM; the grid-stride loops cover the rest), at least one when there is anything to do.
BRAID_HD LaunchShape elementwiseShape(const ElementwiseSplit& split, uint32_t max_grid) {
  const uint64_t total = split.head + split.vectors + split.tail;
  if (total == 0) return LaunchShape{};
  const uint64_t scalars = split.head > split.tail ? split.head : split.tail;
  const uint64_t work = split.vectors > scalars ? split.vectors : scalars;
  uint64_t grid = (work + kElementwiseBlock - 1) / kElementwiseBlock;
  if (grid > max_grid) grid = max_grid;
  if (grid < 1) grid = 1;
  return LaunchShape{static_cast<uint32_t>(grid), kElementwiseBlock};
}

/// One element-wise operation as launched: its pointers, element count, split and shape.
struct ElementwiseLaunch {
  ElementwiseArgs args;
  uint64_t count = 0;
  uint32_t elem_bytes = 1;
  ElementwiseSplit split;
  LaunchShape shape;
};

/// What the CUDA launcher and the CPU emulation both compute before a launch.
BRAID_HD ElementwiseLaunch planElementwise(const ElementwiseArgs& args, uint64_t count, uint32_t elem_bytes,
                                           uint32_t max_grid) {
  ElementwiseLaunch launch;
  launch.args = args;
  launch.count = count;
  launch.elem_bytes = elem_bytes;
  launch.split = splitElementwise(count, elem_bytes, args);
  launch.shape = elementwiseShape(launch.split, max_grid);
  return launch;
}

/// The work of thread `thread` of `threads` (grid-stride) on an element-wise operation: out0[i] (and out1[i]) =
/// a[i] (op) b[i] for the elements of the split that fall to it. For kCopy, b is not read.
template <typename T, ElementOp kOp>
BRAID_HD void elementwiseThread(const ElementwiseArgs& args, const ElementwiseSplit& split, uint64_t thread,
                                uint64_t threads) {
  using S = StorageOf<T>;
  S* out0 = static_cast<S*>(args.out0);
  S* out1 = static_cast<S*>(args.out1);
  const S* a = static_cast<const S*>(args.a);
  const S* b = static_cast<const S*>(args.b);
  const auto scalar = [&](uint64_t i) {
    const S value = kOp == ElementOp::kCopy ? a[i] : applyElement<T, kOp>(a[i], b[i]);
    out0[i] = value;
    if (out1 != nullptr) out1[i] = value;
  };
  for (uint64_t i = thread; i < split.head; i += threads) scalar(i);
  const uint64_t first = split.head;
  constexpr uint32_t kPer = Pack<T>::kCount;
  for (uint64_t v = thread; v < split.vectors; v += threads) {
    const uint64_t i = first + v * kPer;
    const Pack<T> x = loadPack<T>(a + i);
    const Pack<T> value = kOp == ElementOp::kCopy ? x : applyPack<T, kOp>(x, loadPack<T>(b + i));
    storePack<T>(out0 + i, value);
    if (out1 != nullptr) storePack<T>(out1 + i, value);
  }
  const uint64_t tail_first = first + split.vectors * kPer;
  for (uint64_t i = thread; i < split.tail; i += threads) scalar(tail_first + i);
}

/// The element size a copy of `bytes` bytes from src to dst runs in: the widest of 8, 4, 2 and 1 bytes that both
/// addresses and the size are multiples of (a copy is type-agnostic; wider elements mean fewer scalar accesses
/// where the pointers are not co-aligned for 16-byte vectors).
BRAID_HD uint32_t copyUnit(const void* dst, const void* src, uint64_t bytes) {
  const uint64_t bits = reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src) | bytes;
  return bits % 8 == 0 ? 8 : bits % 4 == 0 ? 4 : bits % 2 == 0 ? 2 : 1;
}

/// Calls fn.template operator()<T>() with the unsigned integer type of `unit` bytes (1, 2, 4 or 8).
template <typename Fn>
BRAID_HD void withCopyUnit(uint32_t unit, Fn&& fn) {
  switch (unit) {
    case 8: fn.template operator()<uint64_t>(); break;
    case 4: fn.template operator()<uint32_t>(); break;
    case 2: fn.template operator()<uint16_t>(); break;
    default: fn.template operator()<uint8_t>(); break;
  }
}

/// buf[i] = buf[i] / n (kAvg's last step, runtime/reduce's finishAverage): integers truncate toward zero (8-bit
/// values divide as int), floats divide once in their compute type (fp16/bf16: fp32, rounded once).
template <typename T>
BRAID_HD StorageOf<T> divideElement(StorageOf<T> value, int n) {
  if constexpr (std::is_integral_v<T>) {
    if constexpr (sizeof(T) < 4) {
      return static_cast<T>(static_cast<int>(value) / n);
    } else {
      return static_cast<T>(value / static_cast<T>(n));
    }
  } else if constexpr (std::is_floating_point_v<T>) {
    return value / static_cast<T>(n);
  } else {
#if defined(__CUDA_ARCH__)
    if constexpr (std::is_same_v<T, Half>) {
      return __half_as_ushort(__float2half_rn(__half2float(__ushort_as_half(value)) / static_cast<float>(n)));
    } else {
      return __bfloat16_as_ushort(
          __float2bfloat16_rn(__bfloat162float(__ushort_as_bfloat16(value)) / static_cast<float>(n)));
    }
#else
    if constexpr (std::is_same_v<T, Half>) return floatToHalf(halfToFloat(value) / static_cast<float>(n));
    return floatToBfloat16(bfloat16ToFloat(value) / static_cast<float>(n));
#endif
  }
}

/// The work of thread `thread` of `threads` on a division of `count` elements at `buf` by n (scalar grid-stride:
/// a division is compute-bound for integers and runs once per collective).
template <typename T>
BRAID_HD void divideThread(void* buf, uint64_t count, int n, uint64_t thread, uint64_t threads) {
  StorageOf<T>* p = static_cast<StorageOf<T>*>(buf);
  for (uint64_t i = thread; i < count; i += threads) p[i] = divideElement<T>(p[i], n);
}

/// The grid of a division of `count` elements: one element per thread, at most `max_grid` blocks.
BRAID_HD LaunchShape divideShape(uint64_t count, uint32_t max_grid) {
  ElementwiseSplit split;
  split.head = count;
  return elementwiseShape(split, max_grid);
}

/// Calls fn.template operator()<T>() with the element type of `type` (int8_t ... double, Half, Bfloat16).
template <typename Fn>
BRAID_HD void withElementType(int type, Fn&& fn) {
  switch (type) {
    case 0: fn.template operator()<int8_t>(); break;
    case 1: fn.template operator()<uint8_t>(); break;
    case 2: fn.template operator()<int32_t>(); break;
    case 3: fn.template operator()<uint32_t>(); break;
    case 4: fn.template operator()<int64_t>(); break;
    case 5: fn.template operator()<uint64_t>(); break;
    case 6: fn.template operator()<Half>(); break;
    case 7: fn.template operator()<float>(); break;
    case 8: fn.template operator()<double>(); break;
    case 9: fn.template operator()<Bfloat16>(); break;
    default: break;
  }
}

/// Calls fn.template operator()<kOp>() for a reduction operator (ReduceOp values: sum 0, prod 1, max 2, min 3,
/// avg 4 reduces as a sum).
template <typename Fn>
BRAID_HD void withReduceOp(int op, Fn&& fn) {
  switch (op) {
    case 0:
    case 4: fn.template operator()<ElementOp::kSum>(); break;
    case 1: fn.template operator()<ElementOp::kProd>(); break;
    case 2: fn.template operator()<ElementOp::kMax>(); break;
    case 3: fn.template operator()<ElementOp::kMin>(); break;
    default: break;
  }
}

#if !defined(__CUDA_ARCH__)
/// Runs `body(thread, threads)` for every thread of `shape` on the CPU, block by block: what the GPU runs in
/// parallel, in one order. The element-wise bodies write disjoint elements from each thread, so any order gives
/// the GPU's result.
template <typename Body>
void emulateLaunch(const LaunchShape& shape, Body&& body) {
  const uint64_t threads = uint64_t{shape.grid} * shape.block;
  for (uint64_t t = 0; t < threads; ++t) body(t, threads);
}
#endif

}  // namespace braid::cuda
