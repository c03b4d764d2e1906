// The element-wise kernels (kernels.h). Each __global__ function is a thin shell over elementwise.h: the split and
// the launch shape come from planElementwise(), the per-thread work from elementwiseThread(), so what runs here
// is what tests/cuda/elementwise_emulation_test.cc runs on the CPU.
#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/cuda_check.h"
#include "cuda/elementwise.h"
#include "cuda/kernels.h"

namespace braid::cuda {
namespace {

template <typename T, ElementOp kOp>
__global__ void __launch_bounds__(kElementwiseBlock) elementwiseKernel(ElementwiseArgs args, ElementwiseSplit split) {
  elementwiseThread<T, kOp>(args, split, uint64_t{blockIdx.x} * blockDim.x + threadIdx.x,
                            uint64_t{gridDim.x} * blockDim.x);
}

template <typename T>
__global__ void __launch_bounds__(kElementwiseBlock) divideKernel(void* buf, uint64_t count, int n) {
  divideThread<T>(buf, count, n, uint64_t{blockIdx.x} * blockDim.x + threadIdx.x, uint64_t{gridDim.x} * blockDim.x);
}

std::string pointerText(const void* p) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", p);
  return text;
}

Status checkAligned(const void* p, size_t element, const char* name, DataType type) {
  if (reinterpret_cast<uintptr_t>(p) % element == 0) return Status::ok();
  return invalidArgument(std::string("cuda kernels: ") + name + " pointer " + pointerText(p) +
                         " is not aligned to the " + std::to_string(element) + "-byte " + dataTypeName(type) +
                         " element");
}

/// Blocks of `kernel` (kElementwiseBlock threads) that are resident at once on the current device: the SMs times
/// the blocks per SM its registers and shared memory allow (cudaOccupancyMaxActiveBlocksPerMultiprocessor), at
/// least one per SM and at most 4 (the grid-stride loops cover the rest). Cached per (kernel, device).
Result<uint32_t> residentGrid(const void* kernel) {
  static std::mutex mutex;
  static std::map<std::pair<const void*, int>, uint32_t> cache;
  int device = 0;
  BRAID_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mutex);
  uint32_t& grid = cache[{kernel, device}];
  if (grid == 0) {
    int sms = 0;
    BRAID_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    int per_sm = 0;
    BRAID_CUDA_RETURN_IF_ERROR(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, static_cast<int>(kElementwiseBlock), 0));
    grid = static_cast<uint32_t>(std::max(sms, 1) * std::clamp(per_sm, 1, 4));
  }
  return grid;
}

/// Launches `kernel` with `params` and returns the launch's own status. cudaLaunchKernel reports this launch only;
/// cudaGetLastError after `<<<>>>` would also return an earlier call's error still recorded for the thread (an
/// event query's cudaErrorNotReady, for one).
Status launchKernel(const void* kernel, LaunchShape shape, void** params, cudaStream_t stream, const char* what) {
  return cudaStatus(cudaLaunchKernel(kernel, dim3(shape.grid), dim3(shape.block), params, 0, stream), what);
}

template <typename T, ElementOp kOp>
Status launchElementwise(const ElementwiseArgs& args, uint64_t count, cudaStream_t stream) {
  const void* kernel = reinterpret_cast<const void*>(&elementwiseKernel<T, kOp>);
  BRAID_ASSIGN_OR_RETURN(const uint32_t max_grid, residentGrid(kernel));
  ElementwiseLaunch launch = planElementwise(args, count, sizeof(StorageOf<T>), max_grid);
  if (launch.shape.grid == 0) return Status::ok();
  void* params[] = {&launch.args, &launch.split};
  return launchKernel(kernel, launch.shape, params, stream, "cuda kernels: element-wise launch");
}

}  // namespace

Status launchReduce(void* dst, const void* a, const void* b, uint64_t count, DataType type, ReduceOp op,
                    cudaStream_t stream) {
  if (count == 0) return Status::ok();
  if (dst == nullptr || a == nullptr || b == nullptr) {
    return invalidArgument("cuda kernels: reduce of " + std::to_string(count) + " " + dataTypeName(type) +
                           " elements with a null pointer");
  }
  const size_t element = dataTypeSize(type);
  BRAID_RETURN_IF_ERROR(checkAligned(dst, element, "dst", type));
  BRAID_RETURN_IF_ERROR(checkAligned(a, element, "a", type));
  BRAID_RETURN_IF_ERROR(checkAligned(b, element, "b", type));
  ElementwiseArgs args;
  args.out0 = dst;
  args.a = a;
  args.b = b;
  Status status = internalError("cuda kernels: no reduction for type " + std::to_string(static_cast<int>(type)) +
                                " op " + std::to_string(static_cast<int>(op)));
  withElementType(static_cast<int>(type), [&]<typename T>() {
    withReduceOp(static_cast<int>(op),
                 [&]<ElementOp kOp>() { status = launchElementwise<T, kOp>(args, count, stream); });
  });
  return status;
}

Status launchCopy(void* dst, const void* src, uint64_t bytes, cudaStream_t stream) {
  if (bytes == 0 || dst == src) return Status::ok();
  if (dst == nullptr || src == nullptr) {
    return invalidArgument("cuda kernels: copy of " + std::to_string(bytes) + " bytes with a null pointer");
  }
  ElementwiseArgs args;
  args.out0 = dst;
  args.a = src;
  const uint32_t unit = copyUnit(dst, src, bytes);
  Status status;
  withCopyUnit(unit,
               [&]<typename T>() { status = launchElementwise<T, ElementOp::kCopy>(args, bytes / unit, stream); });
  return status;
}

Status launchDivide(void* buf, uint64_t count, DataType type, int n, cudaStream_t stream) {
  if (count == 0 || n <= 1) return Status::ok();
  if (buf == nullptr) {
    return invalidArgument("cuda kernels: division of " + std::to_string(count) + " " + dataTypeName(type) +
                           " elements at a null pointer");
  }
  BRAID_RETURN_IF_ERROR(checkAligned(buf, dataTypeSize(type), "buf", type));
  Status status;
  withElementType(static_cast<int>(type), [&]<typename T>() {
    const void* kernel = reinterpret_cast<const void*>(&divideKernel<T>);
    Result<uint32_t> max_grid = residentGrid(kernel);
    if (!max_grid.isOk()) {
      status = max_grid.status();
      return;
    }
    const LaunchShape shape = divideShape(count, *max_grid);
    void* params[] = {&buf, &count, &n};
    status = launchKernel(kernel, shape, params, stream, "cuda kernels: division launch");
  });
  return status;
}

}  // namespace braid::cuda
