// The element-wise kernels' launch logic on the CPU (runtime/cuda/elementwise.h): for every datatype and operator,
// counts 0, 1, primes and around the 16-byte pack sizes, pointers co-aligned or not and off 16-byte boundaries, and
// grids smaller than the work (grid-stride loops), planElementwise() computes the split and the launch shape that
// kernels.cu launches, and emulateLaunch() runs elementwiseThread() for every thread of that shape. The result must
// equal runtime/reduce's reduce2 (the CPU reference, include/braid/datatype.h) byte for byte, and nothing outside
// the output range may change. The device's own arithmetic (native fp16/bf16 instructions) runs only on a GPU
// (tests/cuda/cuda_device_test.cc); what is checked here is the split of the work over blocks, threads, vectors
// and scalars.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "braid/datatype.h"
#include "cuda/elementwise.h"

namespace braid::cuda {
namespace {

const uint64_t kCounts[] = {0, 1, 2, 3, 5, 7, 8, 15, 16, 17, 31, 32, 33, 97, 127, 128, 129, 1009, 4099};
const uint32_t kGrids[] = {1, 3, 1024};

/// Element offsets (from a 64-byte boundary) of out0, a and b: co-aligned on and off 16-byte boundaries, and not
/// co-aligned (all scalar).
struct Offsets {
  uint64_t out0, a, b;
};
const Offsets kOffsets[] = {{0, 0, 0}, {1, 1, 1}, {3, 3, 3}, {0, 1, 0}, {2, 0, 5}, {7, 7, 7}};

/// A byte buffer with a 64-byte aligned origin and guard bytes around what a test uses.
class GuardedBuffer {
 public:
  static constexpr uint8_t kGuard = 0xA5;
  explicit GuardedBuffer(uint64_t bytes) : raw_(bytes + 256, kGuard) {
    const uintptr_t base = reinterpret_cast<uintptr_t>(raw_.data());
    origin_ = raw_.data() + ((64 - base % 64) % 64) + 64;
  }
  uint8_t* at(uint64_t byte_offset) { return origin_ + byte_offset; }
  /// The first byte outside [begin, begin + bytes) that is not a guard byte, or -1.
  long firstChangedOutside(const uint8_t* begin, uint64_t bytes) const {
    for (size_t i = 0; i < raw_.size(); ++i) {
      const uint8_t* p = raw_.data() + i;
      if (p >= begin && p < begin + bytes) continue;
      if (raw_[i] != kGuard) return static_cast<long>(i);
    }
    return -1;
  }

 private:
  std::vector<uint8_t> raw_;
  uint8_t* origin_;
};

/// Position-dependent elements of `type`: integers that wrap and change sign, floats of mixed signs and
/// magnitudes with zeros, infinities and a NaN among them.
void fill(void* p, DataType type, uint64_t count, uint64_t seed) {
  const size_t size = dataTypeSize(type);
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t k = i * 2654435761u + seed * 97 + 13;
    uint8_t bytes[8] = {};
    const double value = static_cast<double>(static_cast<int64_t>(k % 401) - 200) / 8.0;
    const double special = k % 53 == 0 ? INFINITY : k % 59 == 0 ? -INFINITY : k % 61 == 0 ? NAN : value;
    switch (type) {
      case DataType::kFloat16: {
        const uint16_t h = floatToHalf(static_cast<float>(k % 7 == 0 ? value * 300 : special));
        std::memcpy(bytes, &h, 2);
        break;
      }
      case DataType::kBfloat16: {
        const uint16_t b = floatToBfloat16(static_cast<float>(k % 7 == 0 ? value * 1e30 : special));
        std::memcpy(bytes, &b, 2);
        break;
      }
      case DataType::kFloat32: {
        const float f = static_cast<float>(k % 7 == 0 ? value * 1e30 : special);
        std::memcpy(bytes, &f, 4);
        break;
      }
      case DataType::kFloat64: {
        const double d = k % 7 == 0 ? value * 1e300 : special;
        std::memcpy(bytes, &d, 8);
        break;
      }
      default: std::memcpy(bytes, &k, 8); break;  // the low bytes of k: every bit pattern of the integer types
    }
    std::memcpy(static_cast<uint8_t*>(p) + i * size, bytes, size);
  }
}

std::string describe(DataType type, ReduceOp op, uint64_t count, const Offsets& o, uint32_t grid, bool in_place) {
  return std::string(dataTypeName(type)) + " " + reduceOpName(op) + " count " + std::to_string(count) + " offsets (" +
         std::to_string(o.out0) + ", " + std::to_string(o.a) + ", " + std::to_string(o.b) + ") max grid " +
         std::to_string(grid) + (in_place ? " in place" : "");
}

/// The split's invariants: it covers `count` elements once; with vectors, the pack start is 16-byte aligned and
/// head and tail are shorter than a pack; the grid is within [1, max_grid] and used only when there is work.
void checkPlan(const ElementwiseLaunch& launch, uint32_t max_grid, const std::string& what) {
  const ElementwiseSplit& s = launch.split;
  const uint64_t per_pack = kVectorBytes / launch.elem_bytes;
  EXPECT_EQ(s.head + s.vectors * per_pack + s.tail, launch.count) << what;
  if (s.vectors > 0) {
    EXPECT_LT(s.head, per_pack) << what;
    EXPECT_LT(s.tail, per_pack) << what;
    const uintptr_t first_pack = reinterpret_cast<uintptr_t>(launch.args.out0) + s.head * launch.elem_bytes;
    EXPECT_EQ(first_pack % kVectorBytes, 0u) << what;
  }
  if (launch.count == 0) {
    EXPECT_EQ(launch.shape.grid, 0u) << what;
  } else {
    EXPECT_GE(launch.shape.grid, 1u) << what;
    EXPECT_LE(launch.shape.grid, max_grid) << what;
    EXPECT_EQ(launch.shape.block, kElementwiseBlock) << what;
  }
}

/// Runs one reduction through the emulated launch and through reduce2, compares the output bytes and the guards.
void checkReduce(DataType type, ReduceOp op, uint64_t count, const Offsets& o, uint32_t max_grid, bool in_place) {
  const std::string what = describe(type, op, count, o, max_grid, in_place);
  const size_t size = dataTypeSize(type);
  const uint64_t bytes = count * size;
  GuardedBuffer out(bytes + 64), a(bytes + 64), b(bytes + 64);
  uint8_t* out0 = out.at(o.out0 * size);
  uint8_t* pa = in_place ? out0 : a.at(o.a * size);
  uint8_t* pb = b.at(o.b * size);
  fill(pa, type, count, 1);
  fill(pb, type, count, 2);
  if (!in_place) fill(out0, type, count, 3);  // overwritten: the result does not depend on out0's bytes
  std::vector<uint8_t> want(bytes + 1);
  reduce2(want.data(), pa, pb, count, type, op);
  const std::vector<uint8_t> a_before(pa, pa + bytes), b_before(pb, pb + bytes);
  ElementwiseArgs args;
  args.out0 = out0;
  args.a = pa;
  args.b = pb;
  const ElementwiseLaunch launch = planElementwise(args, count, static_cast<uint32_t>(size), max_grid);
  checkPlan(launch, max_grid, what);
  withElementType(static_cast<int>(type), [&]<typename T>() {
    withReduceOp(static_cast<int>(op), [&]<ElementOp kOp>() {
      emulateLaunch(launch.shape, [&](uint64_t thread, uint64_t threads) {
        elementwiseThread<T, kOp>(launch.args, launch.split, thread, threads);
      });
    });
  });
  EXPECT_EQ(std::memcmp(out0, want.data(), bytes), 0) << what;
  EXPECT_EQ(out.firstChangedOutside(out0, bytes), -1) << what;
  if (!in_place) {
    EXPECT_EQ(std::memcmp(pa, a_before.data(), bytes), 0) << what << ": a was written";
    EXPECT_EQ(a.firstChangedOutside(pa, bytes), -1) << what << ": written around a";
  }
  EXPECT_EQ(std::memcmp(pb, b_before.data(), bytes), 0) << what << ": b was written";
  EXPECT_EQ(b.firstChangedOutside(pb, bytes), -1) << what << ": written around b";
}

TEST(ElementwiseEmulation, ReduceEqualsCpuReferenceForEveryTypeAndOp) {
  for (int t = 0; t < kNumDataTypes; ++t) {
    for (int o = 0; o < kNumReduceOps; ++o) {
      for (uint64_t count : kCounts) {
        for (const Offsets& offsets : kOffsets) {
          for (uint32_t grid : kGrids) {
            checkReduce(static_cast<DataType>(t), static_cast<ReduceOp>(o), count, offsets, grid, false);
          }
        }
      }
    }
  }
}

// reduceInto (out0 == a), as the CUDA transport's local reduce and the device executor's receive-reduce run it.
TEST(ElementwiseEmulation, InPlaceReduceEqualsCpuReference) {
  for (int t = 0; t < kNumDataTypes; ++t) {
    for (int o = 0; o < kNumReduceOps; ++o) {
      for (uint64_t count : kCounts) {
        for (const Offsets& offsets : {Offsets{0, 0, 0}, Offsets{1, 1, 1}, Offsets{3, 3, 0}}) {
          checkReduce(static_cast<DataType>(t), static_cast<ReduceOp>(o), count, offsets, 3, true);
        }
      }
    }
  }
}

// Every element is written exactly once: out = out + 1 in place on uint8 counts every visit.
TEST(ElementwiseEmulation, EveryElementIsVisitedOnce) {
  for (uint64_t count : {uint64_t{1}, uint64_t{15}, uint64_t{16}, uint64_t{17}, uint64_t{65537}}) {
    for (uint64_t offset : {0, 1, 15}) {
      for (uint32_t grid : {1u, 2u, 5u, 1024u}) {
        GuardedBuffer out(count + 64), ones(count + 64);
        uint8_t* o = out.at(offset);
        uint8_t* b = ones.at(offset);
        std::fill(o, o + count, uint8_t{0});
        std::fill(b, b + count, uint8_t{1});
        ElementwiseArgs args;
        args.out0 = o;
        args.a = o;
        args.b = b;
        const ElementwiseLaunch launch = planElementwise(args, count, 1, grid);
        emulateLaunch(launch.shape, [&](uint64_t thread, uint64_t threads) {
          elementwiseThread<uint8_t, ElementOp::kSum>(launch.args, launch.split, thread, threads);
        });
        uint64_t wrong = 0;
        for (uint64_t i = 0; i < count; ++i) wrong += o[i] != 1;
        EXPECT_EQ(wrong, 0u) << "count " << count << " offset " << offset << " grid " << grid;
        EXPECT_EQ(out.firstChangedOutside(o, count), -1) << "count " << count;
      }
    }
  }
}

// The second output (the device executor's send slot) receives the same bytes as the first.
TEST(ElementwiseEmulation, SecondOutputGetsTheSameValues) {
  for (uint64_t count : {uint64_t{1}, uint64_t{33}, uint64_t{1009}}) {
    for (const Offsets& o : kOffsets) {
      const size_t size = 4;
      GuardedBuffer out(count * size + 64), out1(count * size + 64), a(count * size + 64), b(count * size + 64);
      ElementwiseArgs args;
      args.out0 = out.at(o.out0 * size);
      args.out1 = out1.at(o.out0 * size);
      args.a = a.at(o.a * size);
      args.b = b.at(o.b * size);
      fill(a.at(o.a * size), DataType::kFloat32, count, 4);
      fill(b.at(o.b * size), DataType::kFloat32, count, 5);
      std::vector<uint8_t> want(count * size);
      reduce2(want.data(), args.a, args.b, count, DataType::kFloat32, ReduceOp::kMax);
      const ElementwiseLaunch launch = planElementwise(args, count, size, 3);
      emulateLaunch(launch.shape, [&](uint64_t thread, uint64_t threads) {
        elementwiseThread<float, ElementOp::kMax>(launch.args, launch.split, thread, threads);
      });
      EXPECT_EQ(std::memcmp(args.out0, want.data(), count * size), 0) << count;
      EXPECT_EQ(std::memcmp(args.out1, want.data(), count * size), 0) << count;
    }
  }
}

// Copies in the unit kernels.cu picks (copyUnit): every byte offset, so units 1, 2, 4 and 8 and pointers that are
// and are not co-aligned all occur.
TEST(ElementwiseEmulation, CopyInEveryUnitCopiesExactly) {
  for (uint64_t bytes : {uint64_t{0}, uint64_t{1}, uint64_t{6}, uint64_t{16}, uint64_t{40}, uint64_t{4099}}) {
    for (uint64_t dst_offset = 0; dst_offset < 16; ++dst_offset) {
      for (uint64_t src_offset : {uint64_t{0}, uint64_t{4}, uint64_t{dst_offset}}) {
        GuardedBuffer dst(bytes + 64), src(bytes + 64);
        uint8_t* d = dst.at(dst_offset);
        uint8_t* s = src.at(src_offset);
        for (uint64_t i = 0; i < bytes; ++i) s[i] = static_cast<uint8_t>(i * 7 + 3);
        const uint32_t unit = copyUnit(d, s, bytes);
        ASSERT_EQ((reinterpret_cast<uintptr_t>(d) | reinterpret_cast<uintptr_t>(s) | bytes) % unit, 0u);
        ElementwiseArgs args;
        args.out0 = d;
        args.a = s;
        const ElementwiseLaunch launch = planElementwise(args, bytes / unit, unit, 2);
        checkPlan(launch, 2, "copy");
        withCopyUnit(unit, [&]<typename T>() {
          emulateLaunch(launch.shape, [&](uint64_t thread, uint64_t threads) {
            elementwiseThread<T, ElementOp::kCopy>(launch.args, launch.split, thread, threads);
          });
        });
        EXPECT_EQ(std::memcmp(d, s, bytes), 0) << bytes << " bytes at +" << dst_offset << " from +" << src_offset;
        EXPECT_EQ(dst.firstChangedOutside(d, bytes), -1) << bytes << " bytes at +" << dst_offset;
      }
    }
  }
}

// The average's division equals finishAverage for every type, rank counts below and above 127 and 255.
TEST(ElementwiseEmulation, DivideEqualsFinishAverage) {
  for (int t = 0; t < kNumDataTypes; ++t) {
    const DataType type = static_cast<DataType>(t);
    const size_t size = dataTypeSize(type);
    for (int n : {2, 3, 7, 200, 300}) {
      for (uint64_t count : {uint64_t{1}, uint64_t{17}, uint64_t{1009}}) {
        std::vector<uint8_t> got(count * size), want;
        fill(got.data(), type, count, static_cast<uint64_t>(n));
        want = got;
        finishAverage(want.data(), count, type, n);
        const LaunchShape shape = divideShape(count, 2);
        withElementType(t, [&]<typename T>() {
          emulateLaunch(shape, [&](uint64_t thread, uint64_t threads) {
            divideThread<T>(got.data(), count, n, thread, threads);
          });
        });
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0) << dataTypeName(type) << " / " << n;
      }
    }
  }
}

TEST(ElementwiseEmulation, SplitOfKnownPointers) {
  // 100 floats from a 16-byte boundary + 4: 3 head elements to the boundary, 24 packs of 4, 1 tail element.
  alignas(16) static float buffer[256];
  ElementwiseArgs args;
  args.out0 = buffer + 1;
  args.a = buffer + 129;
  args.b = buffer + 65;
  const ElementwiseSplit split = splitElementwise(100, 4, args);
  EXPECT_EQ(split, (ElementwiseSplit{3, 24, 1}));
  // Not co-aligned: all 100 as scalars; one block of 512 threads is enough.
  args.b = buffer + 66;
  EXPECT_EQ(splitElementwise(100, 4, args), (ElementwiseSplit{100, 0, 0}));
  EXPECT_EQ(elementwiseShape(splitElementwise(100, 4, args), 80), (LaunchShape{1, kElementwiseBlock}));
  // 2^20 packs on a grid capped at 80 blocks.
  EXPECT_EQ(elementwiseShape(ElementwiseSplit{0, 1u << 20, 0}, 80), (LaunchShape{80, kElementwiseBlock}));
  EXPECT_EQ(elementwiseShape(ElementwiseSplit{0, 0, 0}, 80), (LaunchShape{0, 0}));
}

}  // namespace
}  // namespace braid::cuda
