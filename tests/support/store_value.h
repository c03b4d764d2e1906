// Test helper: one element of any datatype written from an integer (the suites' position-dependent data).
#pragma once

#include <cstdint>
#include <cstring>

#include "braid/datatype.h"

namespace braid::testing {

/// Stores integer `v` as one element of `type` at `p` (integers wrap to the type's width).
inline void storeValue(void* p, DataType type, int64_t v) {
  switch (type) {
    case DataType::kInt8:
    case DataType::kUint8: {
      const uint8_t x = static_cast<uint8_t>(v);
      std::memcpy(p, &x, 1);
      break;
    }
    case DataType::kInt32:
    case DataType::kUint32: {
      const uint32_t x = static_cast<uint32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case DataType::kInt64:
    case DataType::kUint64: {
      const uint64_t x = static_cast<uint64_t>(v);
      std::memcpy(p, &x, 8);
      break;
    }
    case DataType::kFloat16: {
      const uint16_t x = floatToHalf(static_cast<float>(v));
      std::memcpy(p, &x, 2);
      break;
    }
    case DataType::kBfloat16: {
      const uint16_t x = floatToBfloat16(static_cast<float>(v));
      std::memcpy(p, &x, 2);
      break;
    }
    case DataType::kFloat32: {
      const float x = static_cast<float>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case DataType::kFloat64: {
      const double x = static_cast<double>(v);
      std::memcpy(p, &x, 8);
      break;
    }
  }
}

}  // namespace braid::testing
