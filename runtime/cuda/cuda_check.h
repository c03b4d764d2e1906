// CUDA runtime errors as Braid Status values (kUnhandledCudaError, NCCL's ncclUnhandledCudaError), naming the call
// that failed and CUDA's text. Private to runtime/cuda and runtime/transport/cuda; no fmt (.cu files include it).
#pragma once

#include <cuda_runtime_api.h>

#include <sstream>
#include <string>

#include "braid/status.h"

namespace braid::cuda {

/// ok for cudaSuccess; otherwise kUnhandledCudaError "<what>: <cudaGetErrorName>: <cudaGetErrorString>".
inline Status cudaStatus(cudaError_t error, const std::string& what) {
  if (error == cudaSuccess) return Status::ok();
  return Status(StatusCode::kUnhandledCudaError,
                what + ": " + cudaGetErrorName(error) + ": " + cudaGetErrorString(error));
}

/// The arguments written one after another (operator<<): messages in .cu files, which cannot use fmt.
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

}  // namespace braid::cuda

/// Returns the Status of a failed CUDA runtime call, naming the call.
#define BRAID_CUDA_RETURN_IF_ERROR(call) BRAID_RETURN_IF_ERROR(::braid::cuda::cudaStatus((call), #call))
