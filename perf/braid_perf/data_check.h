// braid_perf's data check: position-dependent inputs and the output every element must hold, computed here
// without the runtime's reduction code (nccl-tests checks the same way: every rank fills its send buffer with
// values that depend on the rank and the element index, and compares every output element with an expected
// value; nccl-tests src/common.cu CheckData).
//
// Every value is a small integer, exact in every element type, so sums, products, minima, maxima and
// averages are exact in any order of reduction and the expected value is one number:
//   sum      rank r, element j: (u(j) + r) mod m - s, with u(j) a hash of (seed, j) into [0, m), m <= 251 chosen so
//            that n (m - 1) stays within the type's exact integers (bf16 256, half 2048, float 2^24; int8 127,
//            uint8 255) and s = (m - 1) / 2 for signed and floating types (negative values too), 0 for unsigned.
//   min/max  as sum with m = 251.
//   prod     1, except three factors owned by ranks j, j+1, j+2 (mod n): 1 + u mod 3, -1 or 2, 2 or 1
//            (u = hash mod 12); the product is the product of the three factors whatever n is.
//   avg      a(j) + e, a(j) = 1 + hash mod c with n c within the exact integers, e = +1 on rank j mod n, -1 on
//            rank j+1 mod n: the sum is n a(j), the average a(j).
//   data movement (all_gather, alltoall, broadcast): a hash of (seed, rank, j) mod 251 (8-bit and bf16), 2039
//            (half) or 65521 (wider), shifted to negative values for signed and floating types.
// Integer types wrap as NCCL's (two's complement); the expected value wraps the same way.
//
// Beyond nccl-tests, the check also counts as wrong: changed bytes in a 64-byte guard after the region the call
// may write, a changed out-of-place send buffer, and (reduce) a written receive buffer on a non-root rank
// (include/braid/comm.h: "other ranks' recv is not written").
#pragma once

#include <cstdint>
#include <vector>

#include "braid_perf/layout.h"
#include "braid_perf/options.h"

namespace braid::perf {

inline constexpr size_t kGuardBytes = 64;
inline constexpr unsigned char kPoisonByte = 0xFF;  // NaN in every floating type
inline constexpr unsigned char kGuardByte = 0xA5;

class Pattern {
 public:
  /// `root` matters for broadcast and reduce only.
  Pattern(Collective collective, DataType type, ReduceOp op, int nranks, int root, uint64_t seed);

  /// Element j of rank r's input (its send buffer of RowLayout::send_elems elements), as an exact integer.
  int64_t input(int rank, uint64_t j) const;
  /// The same with j mod nranks given (the fill and check loops keep it without a division).
  int64_t input(int rank, uint64_t j, uint64_t j_mod_n) const;
  /// Whether `rank` has an output (reduce: the root only).
  bool hasOutput(int rank) const;
  /// Element k of rank's output (RowLayout::recv_elems elements), `count` = RowLayout::count. For integer types
  /// the value is already wrapped to the type.
  int64_t expected(int rank, uint64_t k, uint64_t count) const;

  /// Values element by element, as the fill and check loops run over many elements: element j of a stream is
  /// values[min(d, rows - 1) * modulus + u], u = hashOf-style hash of (seed, j) into [0, modulus), d = (rank - j)
  /// mod nranks (rows > 1 only for prod and avg inputs, which depend on j mod nranks).
  struct Stream {
    uint64_t seed = 0;
    uint64_t modulus = 1;
    int rank = 0;
    int rows = 1;
    std::vector<int64_t> values;  // rows x modulus
  };
  /// Rank's input as a Stream: its element j is input(rank, j).
  Stream inputStream(int rank) const;
  /// The reduced values (all-reduce, reduce, reduce-scatter) as a Stream: its element j is the reduced value of
  /// input element j.
  Stream reducedStream() const;

  /// The table behind expected() for reductions: index u -> the reduced value of every element whose hash is
  /// u (computed by folding the inputs of all ranks). Exposed for tests.
  const std::vector<int64_t>& reducedTable() const { return table_; }
  /// The modulus of u for reductions (table size).
  uint64_t hashModulus() const { return modulus_; }
  /// u(j) for reductions.
  uint64_t hashOf(uint64_t j) const;

  Collective collective() const { return collective_; }
  DataType type() const { return type_; }
  ReduceOp op() const { return op_; }
  int nranks() const { return nranks_; }
  int root() const { return root_; }

 private:
  int64_t reductionInput(uint64_t u, int rank, uint64_t j_mod_n) const;

  Collective collective_;
  DataType type_;
  ReduceOp op_;
  int nranks_;
  int root_;
  uint64_t seed_;
  uint64_t modulus_ = 1;  // m (sum, min/max, movement), 12 (prod), c (avg)
  int64_t shift_ = 0;     // s
  bool avg_zero_ = false;
  std::vector<int64_t> table_;
  std::vector<uint64_t> salts_;  // per rank, data movement
};

/// Writes `value` (an exact integer of the type's range, wrapped for integer types) as element `index`.
void storeElement(DataType type, void* buffer, uint64_t index, int64_t value);
/// Whether element `index` equals `value` (integers: bit for bit after wrapping; floating types: numerically,
/// so NaN never matches).
bool elementEquals(DataType type, const void* buffer, uint64_t index, int64_t value);
/// Wraps an integer to the type (int8: -128..127, uint8: 0..255, ...); floating types unchanged.
int64_t wrapToType(DataType type, int64_t value);
/// IEEE binary16 and bfloat16 bits of an integer they represent exactly, and back (written here, not taken from the
/// runtime, so the check does not share its conversions).
uint16_t halfFromInteger(int64_t value);
double halfToDouble(uint16_t bits);
uint16_t bfloat16FromInteger(int64_t value);
double bfloat16ToDouble(uint16_t bits);

/// Pointers a call uses: out of place, `send_base` and `recv_base`; in place, both inside `recv_base` at the
/// layout's in-place offsets.
struct CallBuffers {
  const void* send;
  void* recv;
};
CallBuffers callBuffers(Collective collective, const RowLayout& layout, int rank, bool in_place, void* send_base,
                        void* recv_base);

/// Fills rank's buffers for a checked call: the region the call may write is poisoned (0xFF), the input written
/// (in place: at the layout's input offset), guards of kGuardBytes set after each region. Both bases must hold
/// rowBytes() + kGuardBytes bytes.
void prepareCheck(const Pattern& pattern, const RowLayout& layout, int rank, bool in_place, void* send_base,
                  void* recv_base);
/// Elements of rank's buffers that differ from what prepareCheck() and a correct call leave: the output, the
/// unchanged out-of-place input, guard bytes (each changed guard element counts once).
int64_t countWrong(const Pattern& pattern, const RowLayout& layout, int rank, bool in_place, const void* send_base,
                   const void* recv_base);

}  // namespace braid::perf
