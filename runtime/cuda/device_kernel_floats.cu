// The device-resident kernel for fp16, bf16, fp32 and fp64 (device_kernel.cuh).
#include <type_traits>

#include "cuda/device_kernel.cuh"

namespace braid::cuda {

const void* deviceExecutorKernelFloats(int type, int op) {
  const void* kernel = nullptr;
  withElementType(type, [&]<typename T>() {
    if constexpr (!std::is_integral_v<T>) {
      withReduceOp(op, [&]<ElementOp kOp>() { kernel = reinterpret_cast<const void*>(&deviceExecutorKernel<T, kOp>); });
    }
  });
  return kernel;
}

}  // namespace braid::cuda
