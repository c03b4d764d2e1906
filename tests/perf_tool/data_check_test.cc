// braid_perf's data check: the expected values against closed forms, exactness in every type, and the whole
// check against a naive reference implementation of each collective written here (inputs read back from the
// ranks' buffers, folded in exact integer arithmetic): a correct result counts 0 wrong, any damage counts.
#include "braid_perf/data_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <vector>

namespace braid::perf {
namespace {

constexpr DataType kTypes[] = {DataType::kInt8,    DataType::kUint8,   DataType::kInt32,   DataType::kUint32,
                               DataType::kInt64,   DataType::kUint64,  DataType::kFloat16, DataType::kFloat32,
                               DataType::kFloat64, DataType::kBfloat16};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kAvg};

bool isFloat(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kBfloat16 || t == DataType::kFloat32 || t == DataType::kFloat64;
}
bool isSignedType(DataType t) {
  return t == DataType::kInt8 || t == DataType::kInt32 || t == DataType::kInt64 || isFloat(t);
}
// The exact integer range the pattern must stay in.
int64_t limitOf(DataType t) {
  switch (t) {
    case DataType::kInt8: return 127;
    case DataType::kUint8: return 255;
    case DataType::kFloat16: return 2048;
    case DataType::kBfloat16: return 256;
    case DataType::kFloat32: return int64_t{1} << 24;
    default: return int64_t{1} << 53;
  }
}

// The test's own decoding of an element to a double (integers by their C++ value).
double readValue(DataType t, const void* buffer, uint64_t i) {
  switch (t) {
    case DataType::kInt8: return static_cast<const int8_t*>(buffer)[i];
    case DataType::kUint8: return static_cast<const uint8_t*>(buffer)[i];
    case DataType::kInt32: return static_cast<const int32_t*>(buffer)[i];
    case DataType::kUint32: return static_cast<const uint32_t*>(buffer)[i];
    case DataType::kInt64: return static_cast<double>(static_cast<const int64_t*>(buffer)[i]);
    case DataType::kUint64: return static_cast<double>(static_cast<const uint64_t*>(buffer)[i]);
    case DataType::kFloat16: {
      uint16_t h = static_cast<const uint16_t*>(buffer)[i];
      return halfToDouble(h);
    }
    case DataType::kBfloat16: {
      uint32_t bits = static_cast<uint32_t>(static_cast<const uint16_t*>(buffer)[i]) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    case DataType::kFloat32: return static_cast<const float*>(buffer)[i];
    case DataType::kFloat64: return static_cast<const double*>(buffer)[i];
  }
  return 0;
}

// `value` stored as an element of type t and read back.
double asStored(DataType t, int64_t value) {
  std::vector<char> cell(8);
  storeElement(t, cell.data(), 0, value);
  return readValue(t, cell.data(), 0);
}

TEST(PerfDataCheckTest, HalfAndBfloat16Encodings) {
  EXPECT_EQ(halfFromInteger(0), 0x0000);
  EXPECT_EQ(halfFromInteger(1), 0x3C00);
  EXPECT_EQ(halfFromInteger(-3), 0xC200);
  EXPECT_EQ(halfFromInteger(2048), 0x6800);
  EXPECT_EQ(halfFromInteger(1000), 0x63D0);  // 1000 = 1.953125 x 2^9: exponent 24, mantissa 0x3D0
  EXPECT_EQ(halfToDouble(0x3C00), 1.0);
  EXPECT_EQ(halfToDouble(0xC200), -3.0);
  EXPECT_EQ(halfToDouble(0x0001), std::ldexp(1.0, -24));
  EXPECT_TRUE(std::isinf(halfToDouble(0x7C00)));
  EXPECT_TRUE(std::isnan(halfToDouble(0xFFFF)));
  EXPECT_EQ(bfloat16FromInteger(1), 0x3F80);
  EXPECT_EQ(bfloat16FromInteger(-2), 0xC000);
  EXPECT_EQ(bfloat16FromInteger(256), 0x4380);
  EXPECT_EQ(bfloat16ToDouble(0x4380), 256.0);
  for (int64_t v = -2048; v <= 2048; ++v) ASSERT_EQ(halfToDouble(halfFromInteger(v)), static_cast<double>(v)) << v;
  for (int64_t v = -256; v <= 256; ++v) ASSERT_EQ(bfloat16ToDouble(bfloat16FromInteger(v)), static_cast<double>(v));
}

TEST(PerfDataCheckTest, ReducedValuesMatchClosedForms) {
  for (DataType t : kTypes) {
    for (int n : {1, 2, 3, 4, 7, 16, 64}) {
      for (ReduceOp op : kOps) {
        const Pattern p(Collective::kAllReduce, t, op, n, 0, 42);
        const uint64_t m = p.hashModulus();
        ASSERT_EQ(p.reducedTable().size(), m);
        for (uint64_t u = 0; u < m; ++u) {
          int64_t want = 0;
          if (op == ReduceOp::kProd) {
            // The three factors, wherever they sit.
            want = (1 + static_cast<int64_t>(u % 3)) * ((u / 3) % 2 ? -1 : 2) * ((u / 6) % 2 ? 2 : 1);
          } else if (op == ReduceOp::kAvg) {
            want = 1 + static_cast<int64_t>(u);
          } else {
            // Values (u + r) mod m - s for r < n.
            const int64_t s = isSignedType(t) ? static_cast<int64_t>(m - 1) / 2 : 0;
            const int64_t mm = static_cast<int64_t>(m), uu = static_cast<int64_t>(u), nn = n;
            if (op == ReduceOp::kSum) {
              const int64_t cycles = nn / mm, rest = nn % mm;
              int64_t sum = cycles * mm * (mm - 1) / 2;
              if (uu + rest <= mm) {
                sum += rest * uu + rest * (rest - 1) / 2;
              } else {
                const int64_t wrap = uu + rest - mm;  // values u..m-1 then 0..wrap-1
                sum += (uu + mm - 1) * (mm - uu) / 2 + wrap * (wrap - 1) / 2;
              }
              want = sum - nn * s;
            } else {
              const bool wraps = uu + nn - 1 >= mm;
              if (op == ReduceOp::kMax) want = (wraps ? mm - 1 : uu + nn - 1) - s;
              if (op == ReduceOp::kMin) want = (wraps ? 0 : uu) - s;
            }
          }
          // Compared as the type holds them (integer types wrap).
          ASSERT_EQ(asStored(t, p.reducedTable()[u]), asStored(t, want))
              << dataTypeName(t) << " " << reduceOpName(op) << " n=" << n << " u=" << u;
        }
      }
    }
  }
}

TEST(PerfDataCheckTest, InputsAreExactAndSumsStayExact) {
  for (DataType t : kTypes) {
    for (int n : {1, 2, 3, 8, 64}) {
      for (ReduceOp op : kOps) {
        const Pattern p(Collective::kAllReduce, t, op, n, 0, 7);
        for (uint64_t j = 0; j < 200; ++j) {
          int64_t abs_sum = 0;
          for (int r = 0; r < n; ++r) {
            const int64_t v = p.input(r, j);
            abs_sum += v < 0 ? -v : v;
            std::vector<char> cell(8);
            storeElement(t, cell.data(), 0, v);
            ASSERT_TRUE(elementEquals(t, cell.data(), 0, v)) << dataTypeName(t) << " " << v;
            if (!isSignedType(t) && op != ReduceOp::kProd) {
              ASSERT_GE(v, 0);
            }
          }
          // Every partial sum of any order is an integer of at most this size: exact in floating types.
          if (isFloat(t) && (op == ReduceOp::kSum || op == ReduceOp::kAvg)) {
            ASSERT_LE(abs_sum, limitOf(t)) << dataTypeName(t) << " n=" << n;
          }
          // In range for the 8-bit integers.
          for (int r = 0; r < n; ++r) {
            if (t == DataType::kInt8 && op != ReduceOp::kProd) {
              ASSERT_LE(std::abs(p.input(r, j)), 127);
            }
            if (t == DataType::kUint8 && op != ReduceOp::kProd) {
              ASSERT_LE(p.input(r, j), 255);
            }
          }
        }
      }
    }
  }
}

TEST(PerfDataCheckTest, PatternsDependOnRankAndPosition) {
  for (DataType t : kTypes) {
    for (ReduceOp op : kOps) {
      const Pattern p(Collective::kAllReduce, t, op, 4, 0, 1);
      std::set<int64_t> outputs;
      bool ranks_differ = false;
      for (uint64_t j = 0; j < 64; ++j) {
        outputs.insert(p.expected(0, j, 64));
        if (p.input(0, j) != p.input(1, j)) ranks_differ = true;
      }
      EXPECT_GE(outputs.size(), 2u) << dataTypeName(t) << " " << reduceOpName(op);
      EXPECT_TRUE(ranks_differ) << dataTypeName(t) << " " << reduceOpName(op);
    }
    const Pattern g(Collective::kAllGather, t, ReduceOp::kSum, 4, 0, 1);
    std::set<int64_t> values;
    for (int r = 0; r < 4; ++r) {
      for (uint64_t j = 0; j < 16; ++j) values.insert(g.input(r, j));
    }
    EXPECT_GE(values.size(), 20u) << dataTypeName(t);
    // Another seed, other values.
    const Pattern g2(Collective::kAllGather, t, ReduceOp::kSum, 4, 0, 2);
    int same = 0;
    for (uint64_t j = 0; j < 64; ++j) same += g.input(1, j) == g2.input(1, j);
    EXPECT_LT(same, 16) << dataTypeName(t);
  }
}

// One simulated call: every rank's buffers prepared, the collective computed here from the inputs as the ranks'
// buffers hold them, written to the outputs.
struct Sim {
  Collective collective;
  DataType type;
  ReduceOp op;
  int n;
  int root;
  bool in_place;
  RowLayout layout;
  Pattern pattern;
  std::vector<std::vector<char>> send, recv;

  Sim(Collective c, DataType t, ReduceOp o, int nranks, int root_rank, bool inplace, uint64_t size)
      : collective(c),
        type(t),
        op(o),
        n(nranks),
        root(root_rank),
        in_place(inplace),
        layout(rowLayout(c, size, t, nranks)),
        pattern(c, t, o, nranks, root_rank, 99),
        send(nranks, std::vector<char>(size + kGuardBytes)),
        recv(nranks, std::vector<char>(size + kGuardBytes)) {
    for (int r = 0; r < n; ++r) prepareCheck(pattern, layout, r, in_place, send[r].data(), recv[r].data());
  }
  CallBuffers buffers(int r) { return callBuffers(collective, layout, r, in_place, send[r].data(), recv[r].data()); }
  // Inputs as exact integers: integer types by their bits (sign- or zero-extended), floating ones by value.
  int64_t in(int r, uint64_t j) {
    const void* b = buffers(r).send;
    switch (type) {
      case DataType::kInt8: return static_cast<const int8_t*>(b)[j];
      case DataType::kUint8: return static_cast<const uint8_t*>(b)[j];
      case DataType::kInt32: return static_cast<const int32_t*>(b)[j];
      case DataType::kUint32: return static_cast<const uint32_t*>(b)[j];
      case DataType::kInt64: return static_cast<const int64_t*>(b)[j];
      case DataType::kUint64: return static_cast<int64_t>(static_cast<const uint64_t*>(b)[j]);
      default: return static_cast<int64_t>(readValue(type, b, j));
    }
  }

  // The reduction of `values` as NCCL defines it: integers wrap (modular sums and products), compare with their
  // signedness, and average by truncating division of the wrapped sum; floating values are exact integers here.
  int64_t fold(const std::vector<int64_t>& values) {
    const bool is_unsigned64 = type == DataType::kUint64;
    uint64_t acc = static_cast<uint64_t>(values[0]);
    for (size_t i = 1; i < values.size(); ++i) {
      const uint64_t v = static_cast<uint64_t>(values[i]);
      switch (op) {
        case ReduceOp::kSum:
        case ReduceOp::kAvg: acc += v; break;
        case ReduceOp::kProd: acc *= v; break;
        case ReduceOp::kMax:
          acc = is_unsigned64 ? std::max(acc, v)
                              : static_cast<uint64_t>(std::max(static_cast<int64_t>(acc), static_cast<int64_t>(v)));
          break;
        case ReduceOp::kMin:
          acc = is_unsigned64 ? std::min(acc, v)
                              : static_cast<uint64_t>(std::min(static_cast<int64_t>(acc), static_cast<int64_t>(v)));
          break;
      }
    }
    if (op != ReduceOp::kAvg) return static_cast<int64_t>(acc);
    if (isFloat(type)) return static_cast<int64_t>(static_cast<double>(static_cast<int64_t>(acc)) / n);
    // Integers: the sum wraps to the type, then divides toward zero.
    std::vector<char> cell(8);
    storeElement(type, cell.data(), 0, static_cast<int64_t>(acc));
    if (is_unsigned64) return static_cast<int64_t>(*reinterpret_cast<const uint64_t*>(cell.data()) / n);
    return static_cast<int64_t>(readValue(type, cell.data(), 0)) / n;
  }

  void run() {
    const uint64_t c = layout.count;
    std::vector<std::vector<int64_t>> out(n);
    for (int q = 0; q < n; ++q) {
      if (collective == Collective::kReduce && q != root) continue;
      for (uint64_t k = 0; k < layout.recv_elems; ++k) {
        std::vector<int64_t> vals;
        switch (collective) {
          case Collective::kAllReduce:
          case Collective::kReduce:
            for (int r = 0; r < n; ++r) vals.push_back(in(r, k));
            out[q].push_back(fold(vals));
            break;
          case Collective::kReduceScatter:
            for (int r = 0; r < n; ++r) vals.push_back(in(r, q * c + k));
            out[q].push_back(fold(vals));
            break;
          case Collective::kAllGather: out[q].push_back(in(static_cast<int>(k / c), k % c)); break;
          case Collective::kAllToAll: out[q].push_back(in(static_cast<int>(k / c), q * c + k % c)); break;
          case Collective::kBroadcast: out[q].push_back(in(root, k)); break;
        }
      }
    }
    for (int q = 0; q < n; ++q) {
      for (uint64_t k = 0; k < out[q].size(); ++k) {
        storeElement(type, buffers(q).recv, k, out[q][k]);
      }
    }
  }
  int64_t wrong(int r) { return countWrong(pattern, layout, r, in_place, send[r].data(), recv[r].data()); }
};

std::vector<ReduceOp> opsOf(Collective c) {
  if (isReduction(c)) return {std::begin(kOps), std::end(kOps)};
  return {ReduceOp::kSum};
}

TEST(PerfDataCheckTest, CorrectResultsCountNothingWrong) {
  for (Collective c : kAllCollectives) {
    for (DataType t : kTypes) {
      for (ReduceOp op : opsOf(c)) {
        for (int n : {1, 2, 3, 5}) {
          for (bool in_place : {false, true}) {
            const int root = n - 1;
            Sim sim(c, t, op, n, root, in_place, 1000);
            sim.run();
            for (int r = 0; r < n; ++r) {
              ASSERT_EQ(sim.wrong(r), 0) << collectiveName(c) << " " << dataTypeName(t) << " " << reduceOpName(op)
                                         << " n=" << n << (in_place ? " in place" : "") << " rank " << r;
            }
          }
        }
      }
    }
  }
}

TEST(PerfDataCheckTest, DamageIsCounted) {
  for (Collective c : kAllCollectives) {
    for (DataType t : {DataType::kInt8, DataType::kFloat16, DataType::kFloat32, DataType::kUint64}) {
      for (bool in_place : {false, true}) {
        const int n = 3;
        const int owner = c == Collective::kReduce ? 1 : 0;  // a rank with an output
        {
          // A call that did nothing: out-of-place outputs stay poison.
          Sim sim(c, t, ReduceOp::kSum, n, 1, in_place, 4096);
          const int64_t wrong = sim.wrong(owner);
          const bool input_already_there = in_place && n == 1;
          if (!input_already_there) {
            EXPECT_GT(wrong, 0) << collectiveName(c) << " " << dataTypeName(t);
          }
          if (isFloat(t) && !in_place) {
            EXPECT_EQ(wrong, static_cast<int64_t>(sim.layout.recv_elems));
          }
        }
        Sim sim(c, t, ReduceOp::kSum, n, 1, in_place, 4096);
        sim.run();
        ASSERT_EQ(sim.wrong(owner), 0);
        // One element off by one.
        void* out = sim.buffers(owner).recv;
        const uint64_t k = sim.layout.recv_elems / 2;
        storeElement(t, out, k, sim.pattern.expected(owner, k, sim.layout.count) + 1);
        EXPECT_EQ(sim.wrong(owner), 1) << collectiveName(c) << " " << dataTypeName(t);
        storeElement(t, out, k, sim.pattern.expected(owner, k, sim.layout.count));
        EXPECT_EQ(sim.wrong(owner), 0);
        // A write past the end of the writable region.
        char* base = sim.recv[owner].data();
        const uint64_t end = in_place ? sim.layout.rowBytes() : sim.layout.recv_elems * sim.layout.elem_bytes;
        base[end + 3] = 0;
        EXPECT_EQ(sim.wrong(owner), 1);
        base[end + 3] = static_cast<char>(kGuardByte);
        if (!in_place) {
          // A changed send buffer.
          sim.send[owner][0] ^= 1;
          EXPECT_EQ(sim.wrong(owner), 1);
          sim.send[owner][0] ^= 1;
        }
        if (c == Collective::kReduce) {
          // A non-root rank's receive buffer must not be written.
          storeElement(t, sim.buffers(0).recv, 0, in_place ? sim.pattern.input(0, 0) + 1 : 5);
          EXPECT_EQ(sim.wrong(0), 1);
        }
      }
    }
  }
}

TEST(PerfDataCheckTest, MisplacedBlocksAreCounted) {
  // all_gather with rank 1's and rank 2's blocks swapped on rank 0.
  Sim sim(Collective::kAllGather, DataType::kFloat32, ReduceOp::kSum, 3, 0, false, 3 * 64 * 4);
  sim.run();
  const uint64_t c = sim.layout.count;
  float* out = static_cast<float*>(sim.buffers(0).recv);
  std::swap_ranges(out + c, out + 2 * c, out + 2 * c);
  EXPECT_GT(sim.wrong(0), static_cast<int64_t>(c));  // nearly every element of both blocks
  // all_reduce with the output shifted by one element.
  Sim ar(Collective::kAllReduce, DataType::kInt32, ReduceOp::kSum, 2, 0, false, 4096);
  ar.run();
  int32_t* o = static_cast<int32_t*>(ar.buffers(1).recv);
  std::rotate(o, o + 1, o + ar.layout.recv_elems);
  EXPECT_GT(ar.wrong(1), static_cast<int64_t>(ar.layout.recv_elems) / 2);
}

// The count of wrong elements of rank r, computed element by element from Pattern::input / expected and
// elementEquals (the per-element definition; large buffers are checked block-wise in countWrong).
int64_t referenceWrong(Sim& sim, int r) {
  const CallBuffers b = sim.buffers(r);
  int64_t wrong = 0;
  if (!sim.in_place) {
    for (uint64_t j = 0; j < sim.layout.send_elems; ++j) {
      wrong += !elementEquals(sim.type, b.send, j, sim.pattern.input(r, j));
    }
  }
  if (sim.pattern.hasOutput(r)) {
    for (uint64_t k = 0; k < sim.layout.recv_elems; ++k) {
      wrong += !elementEquals(sim.type, b.recv, k, sim.pattern.expected(r, k, sim.layout.count));
    }
  }
  return wrong;
}

// Damages `count` elements of rank r's output at seeded positions: random bits, an element's expected value plus
// one, and (floating types) a zero written as -0 where the value is 0 (equal by value: not wrong).
void damage(Sim& sim, int r, int count, uint64_t seed) {
  void* out = sim.buffers(r).recv;
  const uint64_t elems = sim.layout.recv_elems;
  uint64_t x = seed;
  for (int i = 0; i < count; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const uint64_t k = (x >> 17) % elems;
    const int64_t want = sim.pattern.expected(r, k, sim.layout.count);
    switch (i % 3) {
      case 0: std::memset(static_cast<char*>(out) + k * sim.layout.elem_bytes, static_cast<int>(x >> 56), 1); break;
      case 1: storeElement(sim.type, out, k, want + 1); break;
      default:
        if (isFloat(sim.type) && want == 0) {
          char* at = static_cast<char*>(out) + k * sim.layout.elem_bytes;
          at[sim.layout.elem_bytes - 1] = static_cast<char>(0x80);  // the sign bit of +0
        }
    }
  }
}

// Buffers large enough for countWrong's and prepareCheck's block-wise loops (16 x the hash modulus and more, every
// type, op, in-place mode and rank count 1, 3, 4; data movement at 1.1 M elements per block): the fill holds
// Pattern::input element by element, a correct result counts nothing wrong, and damaged results count exactly what
// the per-element definition counts.
TEST(PerfDataCheckTest, LargeBuffersCountExactlyWhatElementwiseChecksCount) {
  for (Collective c : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kReduce}) {
    for (DataType t : {DataType::kInt8, DataType::kUint8, DataType::kFloat16, DataType::kBfloat16, DataType::kFloat32,
                       DataType::kInt64}) {
      for (ReduceOp op : kOps) {
        for (int n : {1, 3, 4}) {
          for (bool in_place : {false, true}) {
            Sim sim(c, t, op, n, n - 1, in_place, uint64_t{5000} * n * dataTypeSize(t));
            sim.run();
            for (int r = 0; r < n; ++r) {
              ASSERT_EQ(sim.wrong(r), 0) << collectiveName(c) << " " << dataTypeName(t) << " " << reduceOpName(op)
                                         << " n=" << n << (in_place ? " in place" : "") << " rank " << r;
            }
            const int r = n - 1;
            damage(sim, r, 50, static_cast<uint64_t>(n) * 31 + static_cast<uint64_t>(op));
            if (!in_place) sim.send[r][7 * dataTypeSize(t)] ^= 4;
            ASSERT_EQ(sim.wrong(r), referenceWrong(sim, r))
                << collectiveName(c) << " " << dataTypeName(t) << " " << reduceOpName(op) << " n=" << n
                << (in_place ? " in place" : "");
          }
        }
      }
    }
  }
  for (Collective c : {Collective::kAllGather, Collective::kAllToAll, Collective::kBroadcast}) {
    for (DataType t : {DataType::kFloat16, DataType::kFloat32}) {
      for (bool in_place : {false, true}) {
        const int n = 2;
        const uint64_t per_block = 1100000;
        const uint64_t bytes = (c == Collective::kBroadcast ? 1 : n) * per_block * dataTypeSize(t);
        Sim sim(c, t, ReduceOp::kSum, n, 1, in_place, bytes);
        sim.run();
        for (int r = 0; r < n; ++r) ASSERT_EQ(sim.wrong(r), 0) << collectiveName(c) << " " << dataTypeName(t);
        damage(sim, 0, 200, 7);
        EXPECT_EQ(sim.wrong(0), referenceWrong(sim, 0)) << collectiveName(c) << " " << dataTypeName(t);
        EXPECT_GT(sim.wrong(0), 50) << collectiveName(c) << " " << dataTypeName(t);
      }
    }
  }
}

}  // namespace
}  // namespace braid::perf
