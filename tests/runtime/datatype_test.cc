// Element types and reductions (include/braid/datatype.h, runtime/reduce/reduce.cc).
//
// References are written here independently of the library: fp16/bf16 bit patterns derived by hand from
// IEEE 754 binary16 (1 sign, 5 exponent bits biased by 15, 10 mantissa bits) and bfloat16 (the top 16 bits
// of binary32); a nearest-value table of every finite 16-bit pattern (values computed with ldexp, ties to
// the even mantissa) for exhaustive rounding checks; integer wrap-around in uint64 arithmetic truncated to
// the type's width; float sums and products in double, rounded to float once (double rounding through
// binary64 is innocuous for + and x of binary32 values, 53 >= 2 x 24 + 2: Figueroa 1995).
#include "braid/datatype.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "../../runtime/reduce/reduce_internal.h"

namespace braid {
namespace {

uint32_t bitsOf(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
float floatOf(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// ---------------------------------------------------------------------------------------------------
// fp16 by hand.

TEST(Half, HandDerivedToHalf) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3C00);   // exponent 15 (bias), mantissa 0
  EXPECT_EQ(floatToHalf(-2.0f), 0xC000);  // sign, exponent 16
  EXPECT_EQ(floatToHalf(0.5f), 0x3800);
  EXPECT_EQ(floatToHalf(0.0f), 0x0000);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7BFF);  // largest finite: (2 - 2^-10) * 2^15
  EXPECT_EQ(floatToHalf(-65504.0f), 0xFBFF);
  EXPECT_EQ(floatToHalf(65519.996f), 0x7BFF);  // just below the midpoint 65520 to 2^16
  EXPECT_EQ(floatToHalf(65520.0f), 0x7C00);    // the tie: 0x7BFF is odd, so up to infinity
  EXPECT_EQ(floatToHalf(65536.0f), 0x7C00);
  EXPECT_EQ(floatToHalf(1e10f), 0x7C00);
  EXPECT_EQ(floatToHalf(-1e10f), 0xFC00);
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(floatToHalf(-std::numeric_limits<float>::infinity()), 0xFC00);
  // Subnormals: m * 2^-24.
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(floatToHalf(std::ldexp(1023.0f, -24)), 0x03FF);         // largest subnormal
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -14)), 0x0400);            // smallest normal
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0x0000);            // tie between 0 and 2^-24: even is 0
  EXPECT_EQ(floatToHalf(std::ldexp(3.0f, -25)), 0x0002);            // tie between 1 and 2 (x 2^-24): 2
  EXPECT_EQ(floatToHalf(std::ldexp(5.0f, -25)), 0x0002);            // tie between 2 and 3: 2
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25) * 1.0001f), 0x0001);  // above the tie
  EXPECT_EQ(floatToHalf(std::ldexp(2047.0f, -25)), 0x0400);         // 1023.5 x 2^-24: tie, 0x3FF odd -> 0x400
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -26)), 0x0000);            // below half the smallest subnormal
  EXPECT_EQ(floatToHalf(-std::ldexp(3.0f, -24)), 0x8003);
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);
  // Normal ties: the spacing at [1, 2) is 2^-10.
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // 1 + half an ulp: even (0x3C00)
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(3.0f, -11)), 0x3C02);  // 1.5 ulp: between 0x3C01 and 0x3C02 -> even
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3C01);  // above the tie
  EXPECT_EQ(floatToHalf(2049.0f), 0x6800);  // spacing 2 at 2048: tie -> 2048
  EXPECT_EQ(floatToHalf(2051.0f), 0x6802);  // tie between 2050 (0x6801) and 2052 (0x6802)
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -14) * (2.0f - std::ldexp(1.0f, -11))), 0x0800);  // carry to exponent
  // NaN stays NaN (exponent all ones, mantissa not zero), sign kept.
  const uint16_t qnan = floatToHalf(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(qnan & 0x7C00, 0x7C00);
  EXPECT_NE(qnan & 0x03FF, 0);
  const uint16_t snan = floatToHalf(floatOf(0x7F800001u));  // payload only in the low bits: truncation gives inf
  EXPECT_EQ(snan & 0x7C00, 0x7C00);
  EXPECT_NE(snan & 0x03FF, 0);
  EXPECT_EQ(floatToHalf(floatOf(0xFFC00000u)) & 0x8000, 0x8000);
}

TEST(Half, HandDerivedToFloat) {
  EXPECT_EQ(halfToFloat(0x3C00), 1.0f);
  EXPECT_EQ(halfToFloat(0xC000), -2.0f);
  EXPECT_EQ(halfToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(halfToFloat(0x3555), 0.333251953125f);  // (1 + 341/1024) / 4
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(halfToFloat(0x8001), -std::ldexp(1.0f, -24));
  EXPECT_EQ(halfToFloat(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(halfToFloat(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(bitsOf(halfToFloat(0x8000)), 0x80000000u);
  EXPECT_EQ(halfToFloat(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(halfToFloat(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(halfToFloat(0x7E00)));
  EXPECT_TRUE(std::isnan(halfToFloat(0x7C01)));  // signaling NaN
  EXPECT_TRUE(std::isnan(halfToFloat(0xFFFF)));
}

// ---------------------------------------------------------------------------------------------------
// bfloat16 by hand.

TEST(Bfloat16, HandDerived) {
  EXPECT_EQ(floatToBfloat16(1.0f), 0x3F80);
  EXPECT_EQ(floatToBfloat16(-2.0f), 0xC000);
  EXPECT_EQ(floatToBfloat16(0.0f), 0x0000);
  EXPECT_EQ(floatToBfloat16(-0.0f), 0x8000);
  // Spacing at [1, 2) is 2^-7.
  EXPECT_EQ(floatToBfloat16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);                          // tie -> even
  EXPECT_EQ(floatToBfloat16(1.0f + std::ldexp(3.0f, -8)), 0x3F82);                          // tie -> even
  EXPECT_EQ(floatToBfloat16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3F81);  // above
  EXPECT_EQ(floatToBfloat16(floatOf(0x3F80FFFFu)), 0x3F81);
  EXPECT_EQ(floatToBfloat16(floatOf(0x7F7FFFFFu)), 0x7F80);  // FLT_MAX rounds up to infinity
  EXPECT_EQ(floatToBfloat16(floatOf(0x7F7F8000u)), 0x7F80);  // tie, 0x7F7F odd -> infinity
  EXPECT_EQ(floatToBfloat16(floatOf(0x7F7E8000u)), 0x7F7E);  // tie, even stays
  EXPECT_EQ(floatToBfloat16(floatOf(0x7F7F7FFFu)), 0x7F7F);  // largest finite bf16
  EXPECT_EQ(floatToBfloat16(floatOf(0x00018000u)), 0x0002);  // subnormal tie -> even
  EXPECT_EQ(floatToBfloat16(floatOf(0x80010000u)), 0x8001);
  EXPECT_EQ(floatToBfloat16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(floatToBfloat16(-std::numeric_limits<float>::infinity()), 0xFF80);
  EXPECT_EQ(floatToBfloat16(floatOf(0x7FC00000u)), 0x7FC0);
  const uint16_t snan = floatToBfloat16(floatOf(0x7F800001u));  // truncation would give infinity
  EXPECT_EQ(snan & 0x7F80, 0x7F80);
  EXPECT_NE(snan & 0x007F, 0);
  const uint16_t big_payload = floatToBfloat16(floatOf(0x7FFFFFFFu));  // rounding must not carry into the sign
  EXPECT_EQ(big_payload & 0x8000, 0);
  EXPECT_NE(big_payload & 0x007F, 0);
  EXPECT_EQ(bfloat16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(bfloat16ToFloat(0xC0A0), -5.0f);
  EXPECT_EQ(bfloat16ToFloat(0x7F80), std::numeric_limits<float>::infinity());
  EXPECT_EQ(bitsOf(bfloat16ToFloat(0x0001)), 0x00010000u);
  EXPECT_TRUE(std::isnan(bfloat16ToFloat(0x7FC1)));
}

// ---------------------------------------------------------------------------------------------------
// Nearest-value reference: every finite 16-bit pattern of a format with `mbits` mantissa bits and `ebits`
// exponent bits, valued with ldexp; rounding picks the nearest, ties the even pattern (lowest mantissa bit
// 0), overflow at or beyond max + ulp/2 (the midpoint to the next power of two; max's mantissa is odd).
class NearestTable {
 public:
  NearestTable(int ebits, int mbits) {
    const int bias = (1 << (ebits - 1)) - 1;
    const int max_exp = (1 << ebits) - 1;
    for (int e = 0; e < max_exp; ++e) {
      for (int m = 0; m < (1 << mbits); ++m) {
        const double value = e == 0 ? std::ldexp(m, 1 - bias - mbits) : std::ldexp((1 << mbits) + m, e - bias - mbits);
        entries_.push_back({value, static_cast<uint16_t>((e << mbits) | m)});
      }
    }
    inf_bits_ = static_cast<uint16_t>(max_exp << mbits);
    overflow_ = std::ldexp(1.0, max_exp - bias) - std::ldexp(1.0, max_exp - 1 - bias - mbits - 1);  // max + ulp/2
  }
  uint16_t round(double v) const {
    const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
    const double a = std::fabs(v);
    if (a >= overflow_) return sign | inf_bits_;
    auto it =
        std::lower_bound(entries_.begin(), entries_.end(), a, [](const Entry& e, double x) { return e.value < x; });
    if (it == entries_.end()) return sign | entries_.back().bits;
    if (it->value == a || it == entries_.begin()) return sign | it->bits;
    const Entry& hi = *it;
    const Entry& lo = *(it - 1);
    const double dlo = a - lo.value, dhi = hi.value - a;
    if (dlo < dhi) return sign | lo.bits;
    if (dhi < dlo) return sign | hi.bits;
    return sign | ((lo.bits & 1) == 0 ? lo.bits : hi.bits);
  }
  double value(uint16_t bits) const {  // finite patterns only
    const double v = entries_[bits & 0x7FFF].value;
    return (bits & 0x8000) ? -v : v;
  }
  size_t finiteCount() const { return entries_.size(); }
  // The midpoint between finite positive patterns i and i + 1.
  double midpoint(size_t i) const { return (entries_[i].value + entries_[i + 1].value) / 2; }

 private:
  struct Entry {
    double value;
    uint16_t bits;
  };
  std::vector<Entry> entries_;
  uint16_t inf_bits_ = 0;
  double overflow_ = 0;
};

const NearestTable& halfTable() {
  static const NearestTable table(5, 10);
  return table;
}
const NearestTable& bf16Table() {
  static const NearestTable table(8, 7);
  return table;
}

TEST(Half, ExhaustiveAgainstNearestTable) {
  const NearestTable& table = halfTable();
  ASSERT_EQ(table.finiteCount(), 31u * 1024u);
  int wrong = 0;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const bool nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0;
    const float f = halfToFloat(static_cast<uint16_t>(h));
    if (nan) {
      wrong += !std::isnan(f);
      continue;
    }
    if ((h & 0x7FFF) < 0x7C00) wrong += f != static_cast<float>(table.value(static_cast<uint16_t>(h)));
    wrong += floatToHalf(f) != h;  // every half round-trips exactly
  }
  EXPECT_EQ(wrong, 0);
  // Every midpoint between neighbours (exact in float: 12 significant bits), and one float ulp either side.
  for (size_t i = 0; i + 1 < table.finiteCount(); ++i) {
    const float mid = static_cast<float>(table.midpoint(i));
    ASSERT_EQ(static_cast<double>(mid), table.midpoint(i));
    for (float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f), -mid}) {
      if (floatToHalf(f) != table.round(f) && wrong++ < 5) {
        ADD_FAILURE() << fmt::format("floatToHalf({:a}) = {:#06x}, nearest is {:#06x}", f, floatToHalf(f),
                                     table.round(f));
      }
    }
  }
  // Random floats over the whole range of exponents.
  std::mt19937 rng(7);
  for (int k = 0; k < 200000; ++k) {
    // Both signs, exponents 2^-30 .. 2^17: zero, subnormal, normal and overflowing halves.
    const uint32_t r = static_cast<uint32_t>(rng());
    const float f = floatOf((r & 0x807FFFFFu) | ((97u + (r >> 23) % 48u) << 23));
    if (floatToHalf(f) != table.round(f) && wrong++ < 5) {
      ADD_FAILURE() << fmt::format("floatToHalf({:a}) = {:#06x}, nearest is {:#06x}", f, floatToHalf(f),
                                   table.round(f));
    }
  }
  EXPECT_EQ(wrong, 0);
}

TEST(Bfloat16, ExhaustiveAgainstNearestTable) {
  const NearestTable& table = bf16Table();
  int wrong = 0;
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float f = bfloat16ToFloat(static_cast<uint16_t>(b));
    const uint16_t back = floatToBfloat16(f);
    if ((b & 0x7F80) == 0x7F80 && (b & 0x7F) != 0) {  // NaN: stays NaN, sign kept, quiet ones unchanged
      const bool nan_back = (back & 0x7F80) == 0x7F80 && (back & 0x7F) != 0;
      wrong += !std::isnan(f) || !nan_back || (back & 0x8000) != (b & 0x8000) || ((b & 0x40) != 0 && back != b);
      continue;
    }
    if ((b & 0x7FFF) < 0x7F80) wrong += static_cast<double>(f) != table.value(static_cast<uint16_t>(b));
    wrong += back != b;  // every non-NaN bf16 round-trips exactly
  }
  EXPECT_EQ(wrong, 0);
  std::mt19937 rng(11);
  for (int k = 0; k < 200000; ++k) {
    const float f = floatOf(static_cast<uint32_t>(rng()));
    if (std::isnan(f)) continue;
    if (floatToBfloat16(f) != table.round(f) && wrong++ < 5) {
      ADD_FAILURE() << fmt::format("floatToBfloat16({:a}) = {:#06x}, nearest is {:#06x}", f, floatToBfloat16(f),
                                   table.round(f));
    }
  }
  for (size_t i = 0; i + 1 < table.finiteCount(); i += 3) {
    const float mid = static_cast<float>(table.midpoint(i));
    if (mid == 0.0f) continue;
    for (float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e38f)}) {
      if (std::isinf(f)) continue;
      if (floatToBfloat16(f) != table.round(f) && wrong++ < 5) {
        ADD_FAILURE() << fmt::format("floatToBfloat16({:a}) = {:#06x}, nearest is {:#06x}", f, floatToBfloat16(f),
                                     table.round(f));
      }
    }
  }
  EXPECT_EQ(wrong, 0);
}

// ---------------------------------------------------------------------------------------------------
// Names and sizes.

TEST(DataTypeNames, SizesNamesAndAliases) {
  const size_t sizes[kNumDataTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
  const char* names[kNumDataTypes] = {"int8",   "uint8", "int32", "uint32", "int64",
                                      "uint64", "half",  "float", "double", "bfloat16"};
  for (int t = 0; t < kNumDataTypes; ++t) {
    const DataType type = static_cast<DataType>(t);
    EXPECT_EQ(dataTypeSize(type), sizes[t]) << names[t];
    EXPECT_STREQ(dataTypeName(type), names[t]);
    EXPECT_EQ(parseDataType(names[t]), type);
  }
  EXPECT_EQ(parseDataType("char"), DataType::kInt8);
  EXPECT_EQ(parseDataType("int"), DataType::kInt32);
  EXPECT_EQ(parseDataType("float16"), DataType::kFloat16);
  EXPECT_EQ(parseDataType("FP16"), DataType::kFloat16);
  EXPECT_EQ(parseDataType("bf16"), DataType::kBfloat16);
  EXPECT_EQ(parseDataType("BFloat16"), DataType::kBfloat16);
  EXPECT_EQ(parseDataType("fp32"), DataType::kFloat32);
  EXPECT_EQ(parseDataType("Float32"), DataType::kFloat32);
  EXPECT_EQ(parseDataType("float64"), DataType::kFloat64);
  EXPECT_EQ(parseDataType("fp64"), DataType::kFloat64);
  EXPECT_EQ(parseDataType("ncclFloat32"), DataType::kFloat32);
  EXPECT_EQ(parseDataType("UINT64"), DataType::kUint64);
  EXPECT_EQ(parseDataType("float8"), std::nullopt);
  EXPECT_EQ(parseDataType(""), std::nullopt);
  EXPECT_EQ(parseDataType("int16"), std::nullopt);
  const char* ops[kNumReduceOps] = {"sum", "prod", "max", "min", "avg"};
  for (int o = 0; o < kNumReduceOps; ++o) {
    EXPECT_STREQ(reduceOpName(static_cast<ReduceOp>(o)), ops[o]);
    EXPECT_EQ(parseReduceOp(ops[o]), static_cast<ReduceOp>(o));
  }
  EXPECT_EQ(parseReduceOp("SUM"), ReduceOp::kSum);
  EXPECT_EQ(parseReduceOp("ncclAvg"), ReduceOp::kAvg);
  EXPECT_EQ(parseReduceOp("mean"), std::nullopt);
  EXPECT_EQ(parseReduceOp(""), std::nullopt);
}

// ---------------------------------------------------------------------------------------------------
// Reductions of every type and op against a naive reference.

// Element i of a buffer as raw bits (zero-extended), and back.
uint64_t load(const std::vector<uint8_t>& buf, size_t i, size_t size) {
  uint64_t v = 0;
  std::memcpy(&v, buf.data() + i * size, size);  // little-endian
  return v;
}

int64_t signExtend(uint64_t bits, size_t size) {
  const int shift = 64 - 8 * static_cast<int>(size);
  return static_cast<int64_t>(bits << shift) >> shift;
}

bool isNanBits(DataType type, uint64_t bits) {
  switch (type) {
    case DataType::kFloat16: return (bits & 0x7C00) == 0x7C00 && (bits & 0x3FF) != 0;
    case DataType::kBfloat16: return (bits & 0x7F80) == 0x7F80 && (bits & 0x7F) != 0;
    case DataType::kFloat32: return std::isnan(floatOf(static_cast<uint32_t>(bits)));
    case DataType::kFloat64: {
      double d;
      std::memcpy(&d, &bits, 8);
      return std::isnan(d);
    }
    default: return false;
  }
}

double asDouble(DataType type, uint64_t bits) {
  if (isNanBits(type, bits)) return std::numeric_limits<double>::quiet_NaN();
  switch (type) {
    case DataType::kFloat16:
      if ((bits & 0x7FFF) == 0x7C00) return (bits & 0x8000) ? -INFINITY : INFINITY;
      return halfTable().value(static_cast<uint16_t>(bits));
    case DataType::kBfloat16:
      if ((bits & 0x7FFF) == 0x7F80) return (bits & 0x8000) ? -INFINITY : INFINITY;
      return bf16Table().value(static_cast<uint16_t>(bits));
    case DataType::kFloat32: return floatOf(static_cast<uint32_t>(bits));
    case DataType::kFloat64: {
      double d;
      std::memcpy(&d, &bits, 8);
      return d;
    }
    default: return 0;
  }
}

uint64_t fromDouble(DataType type, double v) {
  if (std::isnan(v)) {  // any NaN of the type (results compare as "both NaN")
    if (type == DataType::kFloat16) return 0x7E00;
    if (type == DataType::kBfloat16) return 0x7FC0;
    if (type == DataType::kFloat32) return 0x7FC00000u;
    return 0x7FF8000000000000ull;
  }
  switch (type) {
    case DataType::kFloat16: return halfTable().round(v);
    case DataType::kBfloat16: return bf16Table().round(v);
    case DataType::kFloat32: return bitsOf(static_cast<float>(v));
    case DataType::kFloat64: {
      uint64_t bits;
      std::memcpy(&bits, &v, 8);
      return bits;
    }
    default: return 0;
  }
}

bool isFloat(DataType type) {
  return type == DataType::kFloat16 || type == DataType::kBfloat16 || type == DataType::kFloat32 ||
         type == DataType::kFloat64;
}
bool isSigned(DataType type) { return type == DataType::kInt8 || type == DataType::kInt32 || type == DataType::kInt64; }

// The reference result bits of a (op) b. Products of two fp16/bf16/fp32 values and their sums are exact in
// double (at most 2 x 24 significant bits; exponents of these tests' inputs differ by less than 29), so the
// reference rounds once from the exact value. For fp64 sums and products the double result itself is the
// reference (one rounding).
uint64_t reference(DataType type, ReduceOp op, uint64_t a, uint64_t b) {
  const size_t size = dataTypeSize(type);
  const uint64_t mask = size == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * size)) - 1;
  if (!isFloat(type)) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: return (a + b) & mask;
      case ReduceOp::kProd: return (a * b) & mask;
      case ReduceOp::kMax:
      case ReduceOp::kMin: {
        const bool less = isSigned(type) ? signExtend(a, size) < signExtend(b, size) : a < b;
        return op == ReduceOp::kMax ? (less ? b : a) : (less ? a : b);
      }
    }
  }
  const double x = asDouble(type, a), y = asDouble(type, b);
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return fromDouble(type, x + y);
    case ReduceOp::kProd: return fromDouble(type, x * y);
    case ReduceOp::kMax: return x < y ? b : a;
    case ReduceOp::kMin: return x < y ? a : b;
  }
  return 0;
}

// Random element bits: integers anywhere (edge values included); floats in a moderate range of both signs
// with a sprinkle of zeros, infinities and NaNs.
uint64_t randomElement(DataType type, std::mt19937_64& rng) {
  const uint64_t r = rng();
  const int pick = static_cast<int>(r % 16);
  switch (type) {
    case DataType::kFloat16: {
      if (pick == 0) return 0x7C00;              // inf
      if (pick == 1) return 0x7E00 | (r >> 60);  // NaN
      if (pick == 2) return 0x8000;              // -0
      if (pick == 3) return (r >> 8) & 0x83FF;   // subnormal
      // Exponent 8..22 (values 2^-7 .. 2^7): sums and products stay exact in double.
      return (r >> 32 & 0x8000) | ((8 + (r >> 20) % 15) << 10) | ((r >> 40) & 0x3FF);
    }
    case DataType::kBfloat16: {
      if (pick == 0) return 0xFF80;
      if (pick == 1) return 0x7FC0 | (r >> 60);
      if (pick == 2) return 0x0000;
      if (pick == 3) return (r >> 8) & 0x807F;
      return (r >> 32 & 0x8000) | ((110 + (r >> 20) % 30) << 7) | ((r >> 40) & 0x7F);
    }
    case DataType::kFloat32: {
      if (pick == 0) return 0x7F800000u;
      if (pick == 1) return 0x7FC00000u;
      if (pick == 2) return 0x80000000u;
      if (pick == 3) return (r >> 8) & 0x807FFFFFu;  // subnormal
      return (r >> 32 & 0x80000000u) | ((110 + (r >> 20) % 30) << 23) | ((r >> 40) & 0x7FFFFF);
    }
    case DataType::kFloat64: {
      if (pick == 0) return 0xFFF0000000000000ull;
      if (pick == 1) return 0x7FF8000000000000ull;
      uint64_t bits = (r & 0x800FFFFFFFFFFFFFull) | ((1000 + (rng() % 40)) << 52);
      return bits;
    }
    default: {
      const size_t size = dataTypeSize(type);
      const uint64_t mask = size == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * size)) - 1;
      if (pick == 0) return mask;                           // -1 / max unsigned
      if (pick == 1) return uint64_t{1} << (8 * size - 1);  // most negative / 2^(w-1)
      if (pick == 2) return (uint64_t{1} << (8 * size - 1)) - 1;
      return r & mask;
    }
  }
}

void store(std::vector<uint8_t>& buf, size_t i, size_t size, uint64_t v) {
  std::memcpy(buf.data() + i * size, &v, size);
}

// Compares every element of `got` with reference(a, b); NaN results compare as "both NaN".
std::string checkAll(DataType type, ReduceOp op, const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
                     const std::vector<uint8_t>& got, size_t count) {
  const size_t size = dataTypeSize(type);
  std::string wrong;
  int bad = 0;
  for (size_t i = 0; i < count; ++i) {
    const uint64_t x = load(a, i, size), y = load(b, i, size), z = load(got, i, size);
    const uint64_t want = reference(type, op, x, y);
    const bool ok = isNanBits(type, want) ? isNanBits(type, z) : z == want;
    if (!ok && bad++ < 4) {
      wrong += fmt::format("{} {} [{}]: {:#x} op {:#x} = {:#x}, expected {:#x}\n", dataTypeName(type), reduceOpName(op),
                           i, x, y, z, want);
    }
  }
  return wrong;
}

class ReduceAllTypes : public ::testing::TestWithParam<bool> {  // param: SIMD (AVX2/F16C) loops on
 protected:
  void SetUp() override { simd_ = detail::useSimdReduceLoops(GetParam()); }
  void TearDown() override { detail::useSimdReduceLoops(true); }
  bool simd_ = false;
};

TEST_P(ReduceAllTypes, EveryTypeAndOpAgainstNaiveReference) {
  if (GetParam() && !simd_) GTEST_SKIP() << "no AVX2/F16C on this CPU";
  std::mt19937_64 rng(1234);
  for (int t = 0; t < kNumDataTypes; ++t) {
    const DataType type = static_cast<DataType>(t);
    const size_t size = dataTypeSize(type);
    for (int o = 0; o < kNumReduceOps; ++o) {
      const ReduceOp op = static_cast<ReduceOp>(o);
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{17}, size_t{1003}}) {
        std::vector<uint8_t> a(count * size + 1), b(count * size + 1);
        for (size_t i = 0; i < count; ++i) {
          store(a, i, size, randomElement(type, rng));
          store(b, i, size, randomElement(type, rng));
        }
        const std::string what = fmt::format("{} {} count {}", dataTypeName(type), reduceOpName(op), count);
        // reduce2 into a third buffer; the guard byte past the end must stay.
        std::vector<uint8_t> out(count * size + 1, 0xA5);
        reduce2(out.data(), a.data(), b.data(), count, type, op);
        EXPECT_EQ(checkAll(type, op, a, b, out, count), "") << what << " reduce2";
        EXPECT_EQ(out.back(), 0xA5) << what << ": wrote past the end";
        // reduce2 with dst == a and dst == b, and reduceInto (dst == a).
        std::vector<uint8_t> in_a = a;
        reduce2(in_a.data(), in_a.data(), b.data(), count, type, op);
        EXPECT_EQ(checkAll(type, op, a, b, in_a, count), "") << what << " reduce2 dst=a";
        std::vector<uint8_t> in_b = b;
        reduce2(in_b.data(), a.data(), in_b.data(), count, type, op);
        EXPECT_EQ(checkAll(type, op, a, b, in_b, count), "") << what << " reduce2 dst=b";
        std::vector<uint8_t> into = a;
        reduceInto(into.data(), b.data(), count, type, op);
        EXPECT_EQ(checkAll(type, op, a, b, into, count), "") << what << " reduceInto";
        // dst == src: x op x.
        std::vector<uint8_t> self = a;
        reduceInto(self.data(), self.data(), count, type, op);
        EXPECT_EQ(checkAll(type, op, a, a, self, count), "") << what << " reduceInto self";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Loops, ReduceAllTypes, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "Simd" : "Baseline"; });

TEST(Reduce, IntegerWrapAround) {
  int8_t i8[4] = {127, -128, -128, 100};
  const int8_t i8b[4] = {1, -1, -1, 100};
  reduceInto(i8, i8b, 2, DataType::kInt8, ReduceOp::kSum);
  EXPECT_EQ(i8[0], -128);
  EXPECT_EQ(i8[1], 127);
  reduceInto(i8 + 2, i8b + 2, 2, DataType::kInt8, ReduceOp::kProd);
  EXPECT_EQ(i8[2], -128);  // -128 * -1 = 128 wraps to -128
  EXPECT_EQ(i8[3], 16);    // 10000 mod 256 = 16
  uint8_t u8[2] = {200, 255};
  const uint8_t u8b[2] = {2, 255};
  reduceInto(u8, u8b, 2, DataType::kUint8, ReduceOp::kProd);
  EXPECT_EQ(u8[0], 144);  // 400 - 256
  EXPECT_EQ(u8[1], 1);    // 65025 mod 256
  int32_t i32[2] = {std::numeric_limits<int32_t>::max(), 65536};
  const int32_t i32b[2] = {1, 65536};
  reduceInto(i32, i32b, 1, DataType::kInt32, ReduceOp::kSum);
  reduceInto(i32 + 1, i32b + 1, 1, DataType::kInt32, ReduceOp::kProd);
  EXPECT_EQ(i32[0], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(i32[1], 0);  // 2^32 wraps to 0
  int64_t i64[1] = {std::numeric_limits<int64_t>::min()};
  const int64_t i64b[1] = {-1};
  reduceInto(i64, i64b, 1, DataType::kInt64, ReduceOp::kProd);
  EXPECT_EQ(i64[0], std::numeric_limits<int64_t>::min());
  uint32_t u32[1] = {0xFFFFFFFFu};
  const uint32_t u32b[1] = {2};
  reduceInto(u32, u32b, 1, DataType::kUint32, ReduceOp::kSum);
  EXPECT_EQ(u32[0], 1u);
  int32_t mx[3] = {-5, 3, 7};
  const int32_t my[3] = {-6, 4, 7};
  reduceInto(mx, my, 3, DataType::kInt32, ReduceOp::kMax);
  EXPECT_EQ(mx[0], -5);
  EXPECT_EQ(mx[1], 4);
  uint64_t ux[1] = {0x8000000000000000ull};
  const uint64_t uy[1] = {1};
  reduceInto(ux, uy, 1, DataType::kUint64, ReduceOp::kMin);  // unsigned compare
  EXPECT_EQ(ux[0], 1u);
}

TEST(Reduce, FloatMinMaxNanFollowsLessThan) {
  // The four cases repeat over 64 elements so that vector bodies see them too, with both sets of loops.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float xs[4] = {nan, 1.0f, -0.0f, 0.0f};
  const float ys[4] = {1.0f, nan, 0.0f, -0.0f};
  const uint16_t hxs[4] = {0x7E01, 0x3C00, 0x8000, 0x0000};  // NaN, 1, -0, +0 in fp16
  const uint16_t hys[4] = {0x3C00, 0x7E01, 0x0000, 0x8000};
  for (bool simd : {true, false}) {
    detail::useSimdReduceLoops(simd);
    std::vector<float> x(64), y(64), mx(64), mn(64);
    std::vector<uint16_t> hx(64), hy(64), hmax(64), hmin(64);
    for (int i = 0; i < 64; ++i) {
      x[i] = xs[i % 4];
      y[i] = ys[i % 4];
      hx[i] = hxs[i % 4];
      hy[i] = hys[i % 4];
    }
    reduce2(mx.data(), x.data(), y.data(), 64, DataType::kFloat32, ReduceOp::kMax);
    reduce2(mn.data(), x.data(), y.data(), 64, DataType::kFloat32, ReduceOp::kMin);
    reduce2(hmax.data(), hx.data(), hy.data(), 64, DataType::kFloat16, ReduceOp::kMax);
    reduce2(hmin.data(), hx.data(), hy.data(), 64, DataType::kFloat16, ReduceOp::kMin);
    for (int i = 0; i < 64; i += 4) {
      const std::string at = fmt::format("element {} simd {}", i, simd);
      EXPECT_TRUE(std::isnan(mx[i])) << at;             // max(NaN, 1): NaN < 1 is false -> a
      EXPECT_EQ(mx[i + 1], 1.0f) << at;                 // max(1, NaN): 1 < NaN is false -> a
      EXPECT_EQ(bitsOf(mx[i + 2]), 0x80000000u) << at;  // max(-0, 0): -0 < 0 is false -> a (-0)
      EXPECT_EQ(bitsOf(mx[i + 3]), 0x00000000u) << at;  // max(0, -0) -> a (+0)
      EXPECT_EQ(mn[i], 1.0f) << at;                     // min(NaN, 1): a < b false -> b
      EXPECT_TRUE(std::isnan(mn[i + 1])) << at;         // min(1, NaN) -> b
      EXPECT_EQ(bitsOf(mn[i + 2]), 0x00000000u) << at;  // min(-0, 0) -> b (+0)
      EXPECT_EQ(bitsOf(mn[i + 3]), 0x80000000u) << at;  // min(0, -0) -> b (-0)
      // fp16: the same rule on the widened values, the chosen operand's bits kept (NaN payload included).
      EXPECT_EQ(hmax[i], 0x7E01) << at;
      EXPECT_EQ(hmax[i + 1], 0x3C00) << at;
      EXPECT_EQ(hmax[i + 2], 0x8000) << at;
      EXPECT_EQ(hmax[i + 3], 0x0000) << at;
      EXPECT_EQ(hmin[i], 0x3C00) << at;
      EXPECT_EQ(hmin[i + 1], 0x7E01) << at;
      EXPECT_EQ(hmin[i + 2], 0x0000) << at;
      EXPECT_EQ(hmin[i + 3], 0x8000) << at;
    }
  }
  detail::useSimdReduceLoops(true);
}

TEST(Reduce, HalfSumRoundsOnce) {
  // 2048 + 1 in fp16: exact 2049 is a tie between 2048 and 2050: even -> 2048 (0x6800). 2050 + 1 -> 2052.
  const uint16_t a[3] = {0x6800, 0x6801, 0x3C00};
  const uint16_t b[3] = {0x3C00, 0x3C00, 0x1400};  // 1, 1, 2^-10 (one ulp at 1)
  uint16_t out[3];
  reduce2(out, a, b, 3, DataType::kFloat16, ReduceOp::kSum);
  EXPECT_EQ(out[0], 0x6800);
  EXPECT_EQ(out[1], 0x6802);
  EXPECT_EQ(out[2], 0x3C01);
  // 65504 + 16 = 65520: the overflow tie goes to infinity; 65504 + 8 stays.
  const uint16_t big[2] = {0x7BFF, 0x7BFF}, add[2] = {0x4C00, 0x4800};  // 16, 8
  reduce2(out, big, add, 2, DataType::kFloat16, ReduceOp::kSum);
  EXPECT_EQ(out[0], 0x7C00);
  EXPECT_EQ(out[1], 0x7BFF);
}

TEST(Reduce, FinishAverage) {
  int32_t i32[4] = {-7, 7, 9, -1};
  finishAverage(i32, 4, DataType::kInt32, 2);
  EXPECT_EQ(i32[0], -3);  // truncation toward zero
  EXPECT_EQ(i32[1], 3);
  EXPECT_EQ(i32[2], 4);
  EXPECT_EQ(i32[3], 0);
  int8_t i8[2] = {-128, 127};
  finishAverage(i8, 2, DataType::kInt8, 3);
  EXPECT_EQ(i8[0], -42);
  EXPECT_EQ(i8[1], 42);
  uint8_t u8[2] = {255, 255};
  finishAverage(u8, 1, DataType::kUint8, 4);
  finishAverage(u8 + 1, 1, DataType::kUint8, 300);  // more ranks than the type holds
  EXPECT_EQ(u8[0], 63);
  EXPECT_EQ(u8[1], 0);
  uint64_t u64[1] = {~uint64_t{0}};
  finishAverage(u64, 1, DataType::kUint64, 5);
  EXPECT_EQ(u64[0], 3689348814741910323ull);  // (2^64 - 1) / 5
  int64_t i64[1] = {-9};
  finishAverage(i64, 1, DataType::kInt64, 4);
  EXPECT_EQ(i64[0], -2);
  float f[2] = {1.0f, 10.0f};
  finishAverage(f, 2, DataType::kFloat32, 3);
  EXPECT_EQ(f[0], static_cast<float>(1.0 / 3.0));
  EXPECT_EQ(f[1], static_cast<float>(10.0 / 3.0));
  double d[1] = {1.0};
  finishAverage(d, 1, DataType::kFloat64, 3);
  EXPECT_EQ(d[0], 1.0 / 3.0);
  uint16_t h[2] = {0x3C00, 0x7C00};
  finishAverage(h, 2, DataType::kFloat16, 3);
  EXPECT_EQ(h[0], 0x3555);  // 1/3: 0.33325 (0x3555) is nearer than 0.33350 (0x3556)
  EXPECT_EQ(h[1], 0x7C00);  // inf / 3
  uint16_t bf[1] = {0x3F80};
  finishAverage(bf, 1, DataType::kBfloat16, 3);
  EXPECT_EQ(bf[0], 0x3EAB);  // 1/3 = 0x3EAAAAAB in fp32: low half 0xAAAB > 0x8000 rounds up
  float one[1] = {5.0f};
  finishAverage(one, 1, DataType::kFloat32, 1);
  EXPECT_EQ(one[0], 5.0f);
}

TEST(Reduce, AverageOfRanks) {
  // avg over 4 ranks: reduce as sum (kAvg), then divide once.
  std::vector<std::vector<float>> ranks = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}, {10, 11, 13}};
  std::vector<float> acc = ranks[0];
  for (size_t r = 1; r < ranks.size(); ++r)
    reduceInto(acc.data(), ranks[r].data(), 3, DataType::kFloat32, ReduceOp::kAvg);
  finishAverage(acc.data(), 3, DataType::kFloat32, 4);
  EXPECT_EQ(acc[0], 5.5f);
  EXPECT_EQ(acc[1], 6.5f);
  EXPECT_EQ(acc[2], 7.75f);
  std::vector<int32_t> ints = {-3, 0}, more = {-2, 1};
  reduceInto(ints.data(), more.data(), 2, DataType::kInt32, ReduceOp::kAvg);
  finishAverage(ints.data(), 2, DataType::kInt32, 2);
  EXPECT_EQ(ints[0], -2);  // -5 / 2 truncates toward zero
  EXPECT_EQ(ints[1], 0);
}

}  // namespace
}  // namespace braid
