// Element types and reduction operators of the runtime (NCCL's ncclDataType_t / ncclRedOp_t subset).
//
// Values line up with NCCL 2.28's nccl.h so the NCCL edge converts with a cast:
//   ncclInt8=0 ncclUint8=1 ncclInt32=2 ncclUint32=3 ncclInt64=4 ncclUint64=5 ncclFloat16=6 ncclFloat32=7
//   ncclFloat64=8 ncclBfloat16=9;  ncclSum=0 ncclProd=1 ncclMax=2 ncclMin=3 ncclAvg=4.
// Reductions follow NCCL's element semantics: integer sums and products wrap around (two's complement),
// fp16 and bf16 are computed in fp32 and rounded to nearest-even once per reduction of two values, min/max
// of floats propagate whichever operand compares per `a < b` (no NaN canonicalisation). Average is a sum
// divided by the rank count at the end (integers: truncating division, as NCCL's ncclDevSumPostDiv).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace braid {

enum class DataType : int {
  kInt8 = 0,
  kUint8 = 1,
  kInt32 = 2,
  kUint32 = 3,
  kInt64 = 4,
  kUint64 = 5,
  kFloat16 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
  kBfloat16 = 9,
};
inline constexpr int kNumDataTypes = 10;

enum class ReduceOp : int { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4 };
inline constexpr int kNumReduceOps = 5;

/// Bytes per element: 1, 2, 4 or 8.
size_t dataTypeSize(DataType type);
/// nccl-tests names: "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double",
/// "bfloat16".
const char* dataTypeName(DataType type);
/// Accepts the nccl-tests names and NCCL's aliases ("char", "int", "float16", "float32", "float64", "fp16",
/// "bf16", "fp32", "fp64", any case). nullopt when unknown.
std::optional<DataType> parseDataType(const std::string& name);
/// nccl-tests names: "sum", "prod", "max", "min", "avg".
const char* reduceOpName(ReduceOp op);
std::optional<ReduceOp> parseReduceOp(const std::string& name);

/// dst[i] = dst[i] (op) src[i] for i < count elements. kAvg reduces as kSum (finishAverage divides).
/// dst and src may be the same pointer; other overlaps are not allowed. Vectorizable loops.
void reduceInto(void* dst, const void* src, size_t count, DataType type, ReduceOp op);
/// dst[i] = a[i] (op) b[i]; dst may equal a or b.
void reduce2(void* dst, const void* a, const void* b, size_t count, DataType type, ReduceOp op);
/// buf[i] /= num_ranks (kAvg's final step): integers truncate toward zero, floats divide and round once.
void finishAverage(void* buf, size_t count, DataType type, int num_ranks);

/// fp16 / bf16 conversions (IEEE 754 binary16; bfloat16 = the top 16 bits of binary32), round to nearest
/// even, NaN kept NaN, overflow to infinity.
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bfloat16ToFloat(uint16_t b);
uint16_t floatToBfloat16(float f);

}  // namespace braid
