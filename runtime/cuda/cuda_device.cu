// cudaUnavailableReason and defaultCudaDevice (include/braid/cuda.h): which device a rank uses, and why none can be.
#include <cuda_runtime_api.h>

#include <string>

#include "braid/cuda.h"
#include "cuda/cuda_check.h"

namespace braid {

std::string cudaUnavailableReason() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    return std::string("cudaGetDeviceCount: ") + cudaGetErrorName(error) + ": " + cudaGetErrorString(error);
  }
  return count > 0 ? "" : "no CUDA device";
}

Result<int> defaultCudaDevice(Bootstrap& bootstrap) {
  int count = 0;
  BRAID_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  if (count < 1) return unsupported("rank " + std::to_string(bootstrap.rank()) + ": no CUDA device");
  int local_index = 0;
  const std::vector<std::string>& hosts = bootstrap.hostNames();
  for (int r = 0; r < bootstrap.rank(); ++r) local_index += hosts[r] == hosts[bootstrap.rank()] ? 1 : 0;
  return local_index % count;
}

}  // namespace braid
