// The device-resident executor's kernel: one CUDA block of kDeviceBlock threads per threadblock of the rank's plan,
// each running device_program.h's program. Included by the device_kernel_*.cu files, which instantiate it per
// (element type, operator) in a few translation units so that nvcc compiles them in parallel; device_executor.cu
// launches them through deviceExecutorKernelFor.
#pragma once

#include <cuda_runtime.h>

#include "cuda/device_program.h"

namespace braid::cuda {

template <typename T, ElementOp kOp>
__global__ void __launch_bounds__(kDeviceBlock) deviceExecutorKernel(DeviceLaunch launch) {
  program::runBlock<T, kOp>(launch);
}

/// The kernel for (element type, operator) as cudaLaunchKernel takes it: datatype and ReduceOp values, or type -1
/// for plans that only copy (moved as bytes). Null for unknown values. deviceExecutorKernelIntegers (with the
/// copy-only kernel) and deviceExecutorKernelFloats are its halves, one per translation unit.
const void* deviceExecutorKernelFor(int type, int op);
const void* deviceExecutorKernelIntegers(int type, int op);
const void* deviceExecutorKernelFloats(int type, int op);

}  // namespace braid::cuda
