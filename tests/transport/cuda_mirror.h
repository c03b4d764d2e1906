// Test support: the CUDA transport (runtime/transport/cuda) in the transport conformance suite, whose checks read
// and write host memory. MirroredCudaTransport keeps a device copy of every buffer bound to it: bind() uploads the
// host buffers, a send uploads its source range before it is posted, a completed receive downloads its destination
// range, and a local request uploads its ranges, runs on the device, waits for its kernel and downloads its
// destination, so that, as on the CPU transports, its effect is visible when postLocal returns. Everything between
// (staging, NCCL, kernels, announcements, matching) is the CUDA transport itself on device memory.
//
// Several ranks on fewer GPUs than ranks (the lent device machine has one): each forked rank process gets its own
// NCCL_HOSTID, so that NCCL treats the processes as hosts of their own and connects them through its network
// transport (over loopback: NCCL_SOCKET_IFNAME=lo unless set) instead of refusing two ranks on one GPU. Ranks that
// are threads of one process cannot do that: those tests skip unless every rank has its own GPU.
//
#pragma once

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "braid/cuda.h"
#include "braid/transport.h"
#include "support/cuda_probe.h"

namespace braid::testing {

class MirroredCudaTransport final : public DataTransport {
 public:
  explicit MirroredCudaTransport(std::unique_ptr<DataTransport> inner) : inner_(std::move(inner)) {}
  ~MirroredCudaTransport() override {
    inner_.reset();  // before the buffers it may still reference
    freeDevice();
  }

  const char* name() const override { return inner_->name(); }
  const std::vector<int>& localRanks() const override { return inner_->localRanks(); }
  double nowUs() const override { return inner_->nowUs(); }
  void abort(const Status& why) override { inner_->abort(why); }

  Status bind(int rank, const RankMemory& memory, ReduceSpec reduce) override {
    if (localRanks() != std::vector<int>{rank}) return inner_->bind(rank, memory, reduce);  // its error
    freeDevice();
    host_ = memory;
    device_ = memory;
    for (auto [host, bytes, device] : {std::tuple{memory.input, memory.input_bytes, &device_.input},
                                       std::tuple{memory.output, memory.output_bytes, &device_.output},
                                       std::tuple{memory.scratch, memory.scratch_bytes, &device_.scratch}}) {
      *device = nullptr;
      if (bytes == 0) continue;
      if (cudaMalloc(device, bytes) != cudaSuccess) return internalError("mirror: cudaMalloc failed");
      if (host != nullptr && cudaMemcpy(*device, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
        return internalError("mirror: upload at bind failed");
      }
    }
    return inner_->bind(rank, device_, reduce);
  }

  Result<RequestId> postSend(const SendRequest& request) override {
    BRAID_RETURN_IF_ERROR(upload(request.src));
    return inner_->postSend(request);
  }

  Result<RequestId> postRecv(const RecvRequest& request) override {
    BRAID_ASSIGN_OR_RETURN(const RequestId id, inner_->postRecv(request));
    receives_[id] = request.dst;
    return id;
  }

  Result<RequestId> postLocal(const LocalRequest& request) override {
    BRAID_RETURN_IF_ERROR(upload(request.src));
    BRAID_RETURN_IF_ERROR(upload(request.dst));
    BRAID_ASSIGN_OR_RETURN(const RequestId id, inner_->postLocal(request));
    // Wait for the kernel, keeping every other completion for the caller's next poll.
    std::vector<Completion> done;
    bool finished = false;
    while (!finished) {
      done.clear();
      BRAID_RETURN_IF_ERROR(inner_->poll(&done, /*block=*/true));
      for (const Completion& c : done) {
        if (c.id == id) {
          finished = true;
          BRAID_RETURN_IF_ERROR(download(request.dst));
        } else {
          BRAID_RETURN_IF_ERROR(onCompletion(c));
        }
      }
    }
    kept_.push_back(Completion{id, nowUs()});
    return id;
  }

  Status poll(std::vector<Completion>* done, bool block) override {
    if (!kept_.empty()) {
      done->insert(done->end(), kept_.begin(), kept_.end());
      kept_.clear();
      block = false;
    }
    std::vector<Completion> now;
    BRAID_RETURN_IF_ERROR(inner_->poll(&now, block));
    for (const Completion& c : now) BRAID_RETURN_IF_ERROR(onCompletion(c));
    done->insert(done->end(), kept_.begin(), kept_.end());
    kept_.clear();
    return Status::ok();
  }

 private:
  // The host and device pointers of a range, when it lies inside its bound buffer (else the transport reports it).
  bool locate(const BufferRef& ref, uint8_t** host, uint8_t** device) const {
    const RankMemory* both[2] = {&host_, &device_};
    uint8_t* out[2] = {};
    for (int i = 0; i < 2; ++i) {
      const RankMemory& m = *both[i];
      void* base = ref.buffer == BufferKind::kInput    ? m.input
                   : ref.buffer == BufferKind::kOutput ? m.output
                                                       : m.scratch;
      const uint64_t size = ref.buffer == BufferKind::kInput    ? m.input_bytes
                            : ref.buffer == BufferKind::kOutput ? m.output_bytes
                                                                : m.scratch_bytes;
      if (base == nullptr || ref.offset > size || ref.bytes > size - ref.offset) return false;
      out[i] = static_cast<uint8_t*>(base) + ref.offset;
    }
    *host = out[0];
    *device = out[1];
    return true;
  }
  // Copies the range host -> device (`to_device`) or device -> host; nothing for an empty or unmirrored range.
  Status transfer(const BufferRef& ref, bool to_device) {
    uint8_t *host, *device;
    if (ref.bytes == 0 || !locate(ref, &host, &device)) return Status::ok();
    const cudaError_t rc = to_device ? cudaMemcpy(device, host, ref.bytes, cudaMemcpyHostToDevice)
                                     : cudaMemcpy(host, device, ref.bytes, cudaMemcpyDeviceToHost);
    if (rc != cudaSuccess) return internalError(to_device ? "mirror: upload failed" : "mirror: download failed");
    return Status::ok();
  }
  Status upload(const BufferRef& ref) { return transfer(ref, true); }
  Status download(const BufferRef& ref) { return transfer(ref, false); }
  Status onCompletion(const Completion& c) {
    if (auto r = receives_.find(c.id); r != receives_.end()) {
      BRAID_RETURN_IF_ERROR(download(r->second));
      receives_.erase(r);
    }
    kept_.push_back(c);
    return Status::ok();
  }
  void freeDevice() {
    for (void* p : {device_.input, device_.output, device_.scratch})
      if (p != nullptr) (void)cudaFree(p);
    device_ = RankMemory{};
  }

  std::unique_ptr<DataTransport> inner_;
  RankMemory host_;
  RankMemory device_;
  std::map<RequestId, BufferRef> receives_;
  std::vector<Completion> kept_;
};

/// The suite's constructor for the CUDA transport: a GPU per rank where there are enough (device rank % count),
/// else NCCL_HOSTID per rank process (see the top of the file), then the transport, mirrored.
inline Result<std::unique_ptr<DataTransport>> createMirroredCudaTransport(Bootstrap& bootstrap,
                                                                          const TransportOptions& options) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1) {
    return Status(StatusCode::kUnhandledCudaError, "cuda: no device: " + cudaUnavailableReason());
  }
  if (devices < bootstrap.size()) {
    setenv("NCCL_HOSTID", ("braid-conformance-rank-" + std::to_string(bootstrap.rank())).c_str(), 1);
    setenv("NCCL_SOCKET_IFNAME", "lo", 0);
  }
  CudaTransportOptions cuda;
  cuda.base = options;
  cuda.device = bootstrap.rank() % devices;
  BRAID_ASSIGN_OR_RETURN(std::unique_ptr<DataTransport> inner, createCudaTransport(bootstrap, cuda));
  return std::unique_ptr<DataTransport>(std::make_unique<MirroredCudaTransport>(std::move(inner)));
}

}  // namespace braid::testing
