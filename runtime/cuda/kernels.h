// The element-wise kernels of runtime/cuda (kernels.cu): copy, reduce and the average's division for the 10
// datatypes and 5 operators of include/braid/datatype.h, each one kernel launch on a stream. What each thread does
// and the launch shape are elementwise.h's (planElementwise, elementwiseThread), which tests run on the CPU.
// Private to runtime/cuda and runtime/transport/cuda.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "braid/datatype.h"
#include "braid/status.h"

namespace braid::cuda {

/// dst[i] = a[i] (op) b[i] for i < count elements of `type` (kAvg reduces as a sum), one kernel on `stream`. dst
/// may equal a or b; no other overlap. Errors: kInvalidArgument for a null pointer with count > 0 or a pointer not
/// aligned to the element size (naming it); kUnhandledCudaError from the launch.
Status launchReduce(void* dst, const void* a, const void* b, uint64_t count, DataType type, ReduceOp op,
                    cudaStream_t stream);

/// dst[0, bytes) = src[0, bytes), one kernel on `stream`, in the widest unit (8, 4, 2 or 1 bytes) both pointers
/// and the size allow, with 16-byte vectors where the pointers are co-aligned. dst == src is a no-op; other
/// overlaps are not allowed. Errors: kInvalidArgument for null pointers with bytes > 0; kUnhandledCudaError.
Status launchCopy(void* dst, const void* src, uint64_t bytes, cudaStream_t stream);

/// buf[i] /= n for i < count elements of `type` (the average's last step; runtime/reduce's finishAverage), one
/// kernel on `stream`; nothing for n <= 1 or count 0. Errors as launchReduce.
Status launchDivide(void* buf, uint64_t count, DataType type, int n, cudaStream_t stream);

}  // namespace braid::cuda
