// The device-resident kernel for the integer types, and the copy-only kernel (device_kernel.cuh).
#include <type_traits>

#include "cuda/device_kernel.cuh"

namespace braid::cuda {

const void* deviceExecutorKernelIntegers(int type, int op) {
  if (type < 0) return reinterpret_cast<const void*>(&deviceExecutorKernel<uint8_t, ElementOp::kCopy>);
  const void* kernel = nullptr;
  withElementType(type, [&]<typename T>() {
    if constexpr (std::is_integral_v<T>) {
      withReduceOp(op, [&]<ElementOp kOp>() { kernel = reinterpret_cast<const void*>(&deviceExecutorKernel<T, kOp>); });
    }
  });
  return kernel;
}

const void* deviceExecutorKernelFor(int type, int op) {
  const void* kernel = deviceExecutorKernelIntegers(type, op);
  return kernel != nullptr ? kernel : deviceExecutorKernelFloats(type, op);
}

}  // namespace braid::cuda
