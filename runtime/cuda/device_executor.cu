// The device-resident executor's host side (DeviceExecutor, include/braid/cuda.h): preparing a plan (encode,
// validate, allocate the region, scratch and blob, exchange CUDA IPC handles and map the peers' regions) and
// launching device_kernel.cuh's kernel on the caller's stream.
//
// Regions: one cudaMalloc per (plan, rank), zeroed once; a peer in another process maps it with
// cudaIpcOpenMemHandle (cudaIpcMemLazyEnablePeerAccess), a peer in this process uses the pointer itself (with
// peer access between the two devices when they differ). The kernel reaches every rank's region through a device
// array of these pointers. Counters in regions only grow, and each launch's values start where the previous
// launch's ended (device_plan.h), so nothing is reset between launches; a launch that fails on the host leaves its
// plan unusable (the ranks' launch counts would differ).
//
// Ranks on several hosts (DeviceExecutorOptions::proxy_transport): CUDA IPC handles are exchanged among the ranks
// of this host only; connections to ranks of other hosts are proxied (device_plan.h). Each prepared plan with
// proxied connections gets a proxy area (cudaHostAlloc, mapped and portable, zeroed at prepare) that the kernel
// reaches through DeviceLaunch::proxy, and every launch of it is queued for the executor's proxy thread, which
// runs device_proxy.h's runDeviceProxy for the launches in order over the proxy transport, so the kernel and its
// proxy run at the same time (NCCL's proxy thread). A proxy failure sets the kernel's abort flag and is kept for
// asyncError().
#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "braid/cuda.h"
#include "common/env.h"
#include "cuda/cuda_check.h"
#include "cuda/device_kernel.cuh"
#include "cuda/device_plan_codec.h"
#include "cuda/device_proxy.h"

namespace braid {
namespace {

using cuda::concat;
using cuda::cudaStatus;

constexpr const char* kName = "device-resident executor";

/// Every rank learns whether every rank's step worked: `mine` when it failed, kRemoteError naming the first rank
/// whose step failed, or the bootstrap's error.
Status agree(Bootstrap& bootstrap, const Status& mine, const char* stage) {
  std::vector<int32_t> ok(static_cast<size_t>(bootstrap.size()), 0);
  ok[static_cast<size_t>(bootstrap.rank())] = mine.isOk() ? 1 : 0;
  BRAID_RETURN_IF_ERROR(bootstrap.allGather(ok.data(), sizeof(int32_t)));
  if (!mine.isOk()) return mine;
  for (int r = 0; r < bootstrap.size(); ++r) {
    if (ok[static_cast<size_t>(r)] == 0) {
      return Status(StatusCode::kRemoteError, concat(kName, ": rank ", r, " could not ", stage));
    }
  }
  return Status::ok();
}

/// What every rank tells the others about its region of a plan.
// A non-blocking stream for the executor's own copies at preparation, destroyed with it.
struct SetupStream {
  cudaStream_t stream = nullptr;
  cudaError_t create() { return cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); }
  ~SetupStream() {
    if (stream != nullptr) (void)cudaStreamDestroy(stream);
  }
};

struct RegionInfo {
  int64_t pid = 0;
  int32_t device = 0;
  uint32_t blocks = 0;   // the rank's grid: its plan's threadblocks (at least 1)
  uint64_t pointer = 0;  // the region in the owner's address space
  cudaIpcMemHandle_t handle{};
};

/// FNV-1a over the bytes: every rank prepares the same plan (checked over the bootstrap).
uint64_t fingerprint(const std::string& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

const char* waitName(int32_t what) {
  switch (static_cast<cuda::DeviceWait>(what)) {
    case cuda::DeviceWait::kDependency: return "a dependency";
    case cuda::DeviceWait::kData: return "a message";
    case cuda::DeviceWait::kCredit: return "a free slot of its outgoing connection";
    case cuda::DeviceWait::kBarrier: return "the other blocks after the precopies";
    case cuda::DeviceWait::kKernel: return "this rank's kernel";
    case cuda::DeviceWait::kNone: break;
  }
  return "?";
}

class DeviceExecutorImpl final : public DeviceExecutor {
 public:
  DeviceExecutorImpl(Bootstrap& bootstrap, const DeviceExecutorOptions& options)
      : bootstrap_(bootstrap), options_(options) {}
  ~DeviceExecutorImpl() override;

  Status init();
  Result<int> prepare(const Plan& plan) override;
  Status launch(int handle, const RankMemory& memory, ReduceSpec reduce, cudaStream_t stream) override;
  Status asyncError() override;
  void abort() override;
  int device() const override { return device_; }

 private:
  struct Prepared {
    cuda::DevicePlanHeader header;
    std::shared_ptr<const cuda::DecodedDevicePlan> decoded;  // this rank's, for its proxy
    uint8_t* blob = nullptr;                                 // device
    uint8_t* region = nullptr;                               // device, this rank's
    uint8_t** regions = nullptr;      // device array of every rank's region (null for ranks of other hosts)
    uint8_t* scratch = nullptr;       // device, scratch + staging
    uint8_t* proxy_host = nullptr;    // the proxy area (pinned host memory), null without proxied connections
    uint8_t* proxy_device = nullptr;  // the same as the kernel maps it
    std::vector<void*> opened;        // peers' regions mapped through IPC
    uint64_t used[3] = {};            // bytes of input, output, scratch the plan touches
    uint32_t grid = 1;                // this rank's blocks: the plan's threadblocks, at least 1
    // Blocks of this plan's ranks of this host, process and device, this rank's included: their kernels run at once
    // on the device and wait for each other, so all must be resident together. Ranks of other processes sharing
    // the device are left out: the driver time-slices processes' kernels (no MPS), and each runs alone.
    uint32_t device_grid = 1;
    std::string device_ranks;  // those ranks, for the error ("1, 2 and 3")
    bool reduces = false;
    bool failed = false;
    uint64_t launches = 0;
  };

  Status useDevice() const {
    return cudaStatus(cudaSetDevice(device_), concat(kName, ": cudaSetDevice(", device_, ")"));
  }
  Status allocate(const cuda::DecodedDevicePlan& mine, const std::vector<uint8_t>& blob, Prepared* p);
  Status mapPeers(Prepared* p);
  Result<uint32_t> residentBlocks(const void* kernel);
  /// The fewest blocks any of the kernel's instantiations keeps resident: what prepare() checks a plan against, so
  /// that a plan too large is refused there, by every rank (agreed), and not at one rank's launch.
  Result<uint32_t> fewestResidentBlocks();
  /// kUnsupported when `p`'s grid, or the grids of this process's ranks on its device together, exceed `resident`.
  Status checkResident(const Prepared& p, uint32_t resident) const;
  void release(Prepared* p);
  void proxyLoop();

  /// One launch for the proxy thread.
  struct ProxyJob {
    std::shared_ptr<const cuda::DecodedDevicePlan> plan;
    uint8_t* proxy = nullptr;
    uint64_t launch = 0;
  };

  Bootstrap& bootstrap_;
  const DeviceExecutorOptions options_;
  std::vector<int> host_of_rank_;  // index of the first rank with the same host name
  bool spans_hosts_ = false;
  int device_ = -1;
  double timeout_s_ = 0;
  cuda::DeviceError* error_host_ = nullptr;
  cuda::DeviceError* error_device_ = nullptr;
  std::vector<Prepared> plans_;
  std::map<std::string, int> by_encoding_;
  std::map<const void*, uint32_t> resident_;  // kernel -> blocks of kDeviceBlock threads resident at once
  // The proxy thread (started when a plan with proxied connections is first launched) and its queue.
  std::thread proxy_thread_;
  std::mutex proxy_mutex_;
  std::condition_variable proxy_cv_;
  std::deque<ProxyJob> proxy_jobs_;
  bool proxy_stopping_ = false;
  Status proxy_error_;                // its first failure
  std::atomic<bool> aborted_{false};  // abort() was called
};

Status DeviceExecutorImpl::init() {
  const std::vector<std::string>& hosts = bootstrap_.hostNames();
  Status status;
  for (int r = 0; r < bootstrap_.size(); ++r) {
    int first = 0;
    while (hosts[static_cast<size_t>(first)] != hosts[static_cast<size_t>(r)]) ++first;
    host_of_rank_.push_back(first);
    if (hosts[static_cast<size_t>(r)] != hosts[static_cast<size_t>(bootstrap_.rank())] && !spans_hosts_) {
      spans_hosts_ = true;
      if (options_.proxy_transport == nullptr) {
        status = unsupported(concat(kName, ": rank ", r, " is on host '", hosts[r], "' and rank ", bootstrap_.rank(),
                                    " on '", hosts[bootstrap_.rank()],
                                    "'; ranks on several hosts need DeviceExecutorOptions::proxy_transport (or the "
                                    "CUDA transport runs them)"));
      }
    }
  }
  if (status.isOk() && options_.proxy_transport != nullptr) {
    const std::vector<int>& local = options_.proxy_transport->localRanks();
    if (std::find(local.begin(), local.end(), bootstrap_.rank()) == local.end()) {
      status = invalidArgument(concat(kName, ": the proxy transport does not drive rank ", bootstrap_.rank()));
    }
  }
  Result<double> timeout = resolveTimeoutSeconds(options_.timeout_s);
  if (status.isOk()) status = timeout.status();
  if (timeout.isOk()) timeout_s_ = *timeout;
  if (status.isOk()) {
    if (options_.device >= 0) {
      device_ = options_.device;
    } else {
      Result<int> chosen = defaultCudaDevice(bootstrap_);
      status = chosen.status();
      if (chosen.isOk()) device_ = *chosen;
    }
  }
  if (status.isOk()) status = useDevice();
  if (status.isOk()) {
    void* host = nullptr;
    status = cudaStatus(cudaHostAlloc(&host, sizeof(cuda::DeviceError), cudaHostAllocMapped),
                        concat(kName, ": cudaHostAlloc"));
    if (status.isOk()) {
      error_host_ = new (host) cuda::DeviceError();
      void* device = nullptr;
      status = cudaStatus(cudaHostGetDevicePointer(&device, host, 0), concat(kName, ": cudaHostGetDevicePointer"));
      error_device_ = static_cast<cuda::DeviceError*>(device);
    }
  }
  return agree(bootstrap_, status, "select its device");
}

DeviceExecutorImpl::~DeviceExecutorImpl() {
  // The proxy thread first finishes the launches queued (each ends when its messages moved, or fails within the
  // timeout and stops its kernel): the kernels below can only end once their proxies ran.
  if (proxy_thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(proxy_mutex_);
      proxy_stopping_ = true;
    }
    proxy_cv_.notify_all();
    proxy_thread_.join();
  }
  if (device_ < 0) return;
  (void)useDevice();
  // Peers write into this rank's region (credits) until their kernels end: wait for this device, then for every
  // rank, before anything is freed. After abort() the peers are being stopped too: no barrier.
  (void)cudaDeviceSynchronize();
  if (!aborted_.load(std::memory_order_acquire)) (void)bootstrap_.barrier();
  for (Prepared& p : plans_) release(&p);
  if (error_host_ != nullptr) (void)cudaFreeHost(error_host_);
}

void DeviceExecutorImpl::release(Prepared* p) {
  for (void* opened : p->opened) (void)cudaIpcCloseMemHandle(opened);
  p->opened.clear();
  for (void* memory : {static_cast<void*>(p->blob), static_cast<void*>(p->region), static_cast<void*>(p->regions),
                       static_cast<void*>(p->scratch)}) {
    if (memory != nullptr) (void)cudaFree(memory);
  }
  if (p->proxy_host != nullptr) (void)cudaFreeHost(p->proxy_host);
  p->blob = p->region = p->scratch = p->proxy_host = p->proxy_device = nullptr;
  p->regions = nullptr;
}

void DeviceExecutorImpl::proxyLoop() {
  while (true) {
    ProxyJob job;
    {
      std::unique_lock<std::mutex> lock(proxy_mutex_);
      proxy_cv_.wait(lock, [&] { return proxy_stopping_ || !proxy_jobs_.empty(); });
      if (proxy_jobs_.empty()) return;  // stopping, nothing left
      job = std::move(proxy_jobs_.front());
      proxy_jobs_.pop_front();
    }
    const Status status =
        cuda::runDeviceProxy(*job.plan, job.proxy, job.launch, *options_.proxy_transport, timeout_s_, error_host_);
    if (!status.isOk()) {
      std::lock_guard<std::mutex> lock(proxy_mutex_);
      if (proxy_error_.isOk()) proxy_error_ = status;
    }
  }
}

Status DeviceExecutorImpl::allocate(const cuda::DecodedDevicePlan& mine, const std::vector<uint8_t>& blob,
                                    Prepared* p) {
  const cuda::DevicePlanHeader& h = mine.header;
  BRAID_CUDA_RETURN_IF_ERROR(cudaMalloc(&p->blob, blob.size()));
  SetupStream setup;
  BRAID_CUDA_RETURN_IF_ERROR(setup.create());
  BRAID_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(p->blob, blob.data(), blob.size(), cudaMemcpyHostToDevice, setup.stream));
  BRAID_CUDA_RETURN_IF_ERROR(cudaMalloc(&p->region, h.region_bytes));
  BRAID_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(p->region, 0, h.region_bytes, setup.stream));
  if (h.scratch_bytes > 0) BRAID_CUDA_RETURN_IF_ERROR(cudaMalloc(&p->scratch, h.scratch_bytes));
  BRAID_CUDA_RETURN_IF_ERROR(cudaMalloc(&p->regions, sizeof(uint8_t*) * static_cast<size_t>(h.num_ranks)));
  if (h.proxy_bytes > 0) {
    void* host = nullptr;
    BRAID_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&host, h.proxy_bytes, cudaHostAllocMapped | cudaHostAllocPortable));
    p->proxy_host = static_cast<uint8_t*>(host);
    std::memset(host, 0, h.proxy_bytes);
    void* device = nullptr;
    BRAID_CUDA_RETURN_IF_ERROR(cudaHostGetDevicePointer(&device, host, 0));
    p->proxy_device = static_cast<uint8_t*>(device);
  }
  // The blob and the zeroed region are in place before any peer maps it.
  BRAID_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(setup.stream));
  return Status::ok();
}

// Every rank's region of this host as this process reaches it: its own, IPC mappings of other processes' regions,
// and the pointers of regions of this process (with peer access across devices). Ranks of other hosts are reached
// only through the proxies: their entries stay null.
Status DeviceExecutorImpl::mapPeers(Prepared* p) {
  const int n = bootstrap_.size();
  const int rank = bootstrap_.rank();
  std::vector<RegionInfo> infos(static_cast<size_t>(n));
  RegionInfo& mine = infos[static_cast<size_t>(rank)];
  mine.pid = static_cast<int64_t>(getpid());
  mine.device = device_;
  mine.pointer = reinterpret_cast<uint64_t>(p->region);
  mine.blocks = p->grid;
  Status status = cudaStatus(cudaIpcGetMemHandle(&mine.handle, p->region), concat(kName, ": cudaIpcGetMemHandle"));
  BRAID_RETURN_IF_ERROR(agree(bootstrap_, status, "export its region"));
  BRAID_RETURN_IF_ERROR(bootstrap_.allGather(infos.data(), sizeof(RegionInfo)));
  std::vector<uint8_t*> regions(static_cast<size_t>(n), nullptr);
  p->device_grid = 0;
  std::vector<int> sharing;
  for (int q = 0; q < n; ++q) {
    const RegionInfo& info = infos[static_cast<size_t>(q)];
    if (host_of_rank_[static_cast<size_t>(q)] == host_of_rank_[static_cast<size_t>(rank)] && info.pid == mine.pid &&
        info.device == device_) {
      p->device_grid += std::max<uint32_t>(1, info.blocks);
      sharing.push_back(q);
    }
  }
  for (size_t i = 0; i < sharing.size(); ++i) {
    p->device_ranks += (i == 0 ? "" : i + 1 == sharing.size() ? " and " : ", ") + std::to_string(sharing[i]);
  }
  if (sharing.size() > 1) {
    Result<uint32_t> resident = fewestResidentBlocks();
    if (!resident.isOk()) {
      status = resident.status();
    } else {
      status = checkResident(*p, *resident);
    }
  }
  for (int q = 0; q < n && status.isOk(); ++q) {
    const RegionInfo& info = infos[static_cast<size_t>(q)];
    if (q == rank) {
      regions[q] = p->region;
    } else if (host_of_rank_[static_cast<size_t>(q)] != host_of_rank_[static_cast<size_t>(rank)]) {
      continue;
    } else if (info.pid == mine.pid) {
      if (info.device != device_) {
        int can = 0;
        status =
            cudaStatus(cudaDeviceCanAccessPeer(&can, device_, info.device), concat(kName, ": cudaDeviceCanAccessPeer"));
        if (status.isOk() && can == 0) {
          status = unsupported(concat(kName, ": ranks ", rank, " and ", q, " of one process are on devices ", device_,
                                      " and ", info.device, ", which cannot access each other's memory"));
        }
        if (status.isOk()) {
          const cudaError_t enabled = cudaDeviceEnablePeerAccess(info.device, 0);
          if (enabled == cudaErrorPeerAccessAlreadyEnabled) {
            (void)cudaGetLastError();
          } else {
            status = cudaStatus(enabled, concat(kName, ": cudaDeviceEnablePeerAccess(", info.device, ")"));
          }
        }
      }
      regions[q] = reinterpret_cast<uint8_t*>(info.pointer);
    } else {
      void* mapped = nullptr;
      status = cudaStatus(cudaIpcOpenMemHandle(&mapped, info.handle, cudaIpcMemLazyEnablePeerAccess),
                          concat(kName, ": cudaIpcOpenMemHandle of rank ", q, "'s region"));
      if (status.isOk()) {
        p->opened.push_back(mapped);
        regions[q] = static_cast<uint8_t*>(mapped);
      }
    }
  }
  // On a stream of its own, waited for: the kernels run on the callers' streams, which need not be ordered after
  // any other, and waiting for the whole device would also wait for other communicators' kernels, which may wait
  // for a peer that is itself in this (collective) preparation.
  SetupStream setup;
  if (status.isOk()) status = cudaStatus(setup.create(), concat(kName, ": cudaStreamCreateWithFlags"));
  if (status.isOk()) {
    status = cudaStatus(cudaMemcpyAsync(p->regions, regions.data(), sizeof(uint8_t*) * regions.size(),
                                        cudaMemcpyHostToDevice, setup.stream),
                        concat(kName, ": cudaMemcpyAsync of the region table"));
  }
  if (status.isOk()) status = cudaStatus(cudaStreamSynchronize(setup.stream), concat(kName, ": cudaStreamSynchronize"));
  return agree(bootstrap_, status, "map the regions of its peers");
}

Result<int> DeviceExecutorImpl::prepare(const Plan& plan) {
  BRAID_RETURN_IF_ERROR(useDevice());
  BRAID_ASSIGN_OR_RETURN(std::vector<std::vector<uint8_t>> blobs, cuda::encodeDevicePlans(plan, host_of_rank_));
  if (static_cast<int>(blobs.size()) != bootstrap_.size()) {
    return invalidArgument(concat(kName, ": plan '", plan.algorithm, "' has ", blobs.size(),
                                  " ranks, the executor's "
                                  "bootstrap ",
                                  bootstrap_.size()));
  }
  std::vector<cuda::DecodedDevicePlan> decoded;
  std::string key;
  for (const std::vector<uint8_t>& blob : blobs) {
    BRAID_ASSIGN_OR_RETURN(cuda::DecodedDevicePlan d, cuda::decodeDevicePlan(blob.data(), blob.size()));
    decoded.push_back(std::move(d));
    key.append(reinterpret_cast<const char*>(blob.data()), blob.size());
  }
  BRAID_RETURN_IF_ERROR(cuda::validateDevicePlans(decoded));
  // Every rank prepares the same plan: otherwise one would reuse a plan while another exchanges handles.
  std::vector<uint64_t> prints(static_cast<size_t>(bootstrap_.size()), 0);
  prints[static_cast<size_t>(bootstrap_.rank())] = fingerprint(key);
  BRAID_RETURN_IF_ERROR(bootstrap_.allGather(prints.data(), sizeof(uint64_t)));
  for (int r = 0; r < bootstrap_.size(); ++r) {
    if (prints[static_cast<size_t>(r)] != prints[static_cast<size_t>(bootstrap_.rank())]) {
      return invalidArgument(concat(kName, ": rank ", r, " prepares another plan than rank ", bootstrap_.rank(),
                                    " (plan '", plan.algorithm, "')"));
    }
  }
  if (auto found = by_encoding_.find(key); found != by_encoding_.end()) return found->second;
  const cuda::DecodedDevicePlan& mine = decoded[static_cast<size_t>(bootstrap_.rank())];
  Prepared p;
  p.header = mine.header;
  p.grid = std::max<uint32_t>(1, mine.header.num_threadblocks);
  p.decoded = std::make_shared<const cuda::DecodedDevicePlan>(mine);
  Status fits = Status::ok();
  {
    Result<uint32_t> resident = fewestResidentBlocks();
    if (!resident.isOk()) {
      fits = resident.status();
    } else {
      fits = checkResident(p, *resident);
    }
  }
  const Status allocated = fits.isOk() ? allocate(mine, blobs[static_cast<size_t>(bootstrap_.rank())], &p) : fits;
  Status status = agree(bootstrap_, allocated, "allocate its plan");
  if (status.isOk()) status = mapPeers(&p);
  if (!status.isOk()) {
    release(&p);
    return status;
  }
  for (const cuda::DeviceStep& step : mine.steps) {
    const auto op = step.op;
    p.reduces = p.reduces || op == cuda::DeviceOp::kRecvReduceSend || op == cuda::DeviceOp::kRecvReduceCopy ||
                op == cuda::DeviceOp::kRecvReduceCopySend || op == cuda::DeviceOp::kReduce;
    const bool src = op == cuda::DeviceOp::kSend || op == cuda::DeviceOp::kRecvReduceSend ||
                     op == cuda::DeviceOp::kRecvReduceCopy || op == cuda::DeviceOp::kRecvReduceCopySend ||
                     op == cuda::DeviceOp::kCopy || op == cuda::DeviceOp::kReduce;
    const bool dst = op == cuda::DeviceOp::kRecv || op == cuda::DeviceOp::kRecvCopySend ||
                     op == cuda::DeviceOp::kRecvReduceCopy || op == cuda::DeviceOp::kRecvReduceCopySend ||
                     op == cuda::DeviceOp::kCopy || op == cuda::DeviceOp::kReduce;
    uint64_t* src_used = &p.used[static_cast<int>(step.src_buffer)];
    uint64_t* dst_used = &p.used[static_cast<int>(step.dst_buffer)];
    if (src) *src_used = std::max(*src_used, step.src_offset + step.bytes);
    if (dst) *dst_used = std::max(*dst_used, step.dst_offset + step.bytes);
  }
  for (const cuda::DevicePrecopy& copy : mine.precopies) {
    uint64_t* src_used = &p.used[static_cast<int>(copy.src_buffer)];
    uint64_t* dst_used = &p.used[static_cast<int>(copy.dst_buffer)];
    *src_used = std::max(*src_used, copy.src_offset + copy.bytes);
    *dst_used = std::max(*dst_used, copy.dst_offset + copy.bytes);
  }
  for (const cuda::DeviceThreadblock& tb : mine.threadblocks) {
    if (tb.temp_bytes > 0) p.used[2] = std::max(p.used[2], tb.temp_offset + tb.temp_bytes);
  }
  plans_.push_back(p);
  const int handle = static_cast<int>(plans_.size()) - 1;
  by_encoding_[key] = handle;
  return handle;
}

Status DeviceExecutorImpl::checkResident(const Prepared& p, uint32_t resident) const {
  if (p.grid > resident) {
    return unsupported(concat(kName, ": rank ", p.header.rank, ": the plan has ", p.grid, " threadblocks, but device ",
                              device_, " holds at most ", resident, " blocks of ", cuda::kDeviceBlock,
                              " threads at once (every block waits for others: all must be resident)"));
  }
  if (p.device_grid > resident) {
    return unsupported(concat(kName, ": ranks ", p.device_ranks, " of this process share device ", device_,
                              ": their plans have ", p.device_grid, " threadblocks together, but the device holds",
                              " at most ", resident, " blocks of ", cuda::kDeviceBlock,
                              " threads at once (their kernels wait for each other: all must be resident)"));
  }
  return Status::ok();
}

Result<uint32_t> DeviceExecutorImpl::fewestResidentBlocks() {
  uint32_t fewest = UINT32_MAX;
  for (int type = -1; type < kNumDataTypes; ++type) {
    for (int op = 0; op < (type < 0 ? 1 : kNumReduceOps); ++op) {
      const void* kernel = cuda::deviceExecutorKernelFor(type, op);
      if (kernel == nullptr) continue;
      BRAID_ASSIGN_OR_RETURN(const uint32_t blocks, residentBlocks(kernel));
      fewest = std::min(fewest, blocks);
    }
  }
  return fewest;
}

Result<uint32_t> DeviceExecutorImpl::residentBlocks(const void* kernel) {
  if (auto found = resident_.find(kernel); found != resident_.end()) return found->second;
  int per_sm = 0;
  int sms = 0;
  BRAID_CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, cuda::kDeviceBlock, 0));
  BRAID_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device_));
  const uint32_t blocks = static_cast<uint32_t>(std::max(0, per_sm) * std::max(0, sms));
  resident_[kernel] = blocks;
  return blocks;
}

Status DeviceExecutorImpl::launch(int handle, const RankMemory& memory, ReduceSpec reduce, cudaStream_t stream) {
  if (handle < 0 || handle >= static_cast<int>(plans_.size())) {
    return invalidArgument(concat(kName, ": no prepared plan ", handle));
  }
  Prepared& p = plans_[static_cast<size_t>(handle)];
  if (p.failed) {
    return Status(StatusCode::kInvalidUsage,
                  concat(kName, ": plan ", handle, " failed to launch before; its ranks are no longer in step"));
  }
  BRAID_RETURN_IF_ERROR(useDevice());
  const struct {
    const char* name;
    void* pointer;
    uint64_t bytes;
    uint64_t used;
  } buffers[] = {{"input", memory.input, memory.input_bytes, p.used[0]},
                 {"output", memory.output, memory.output_bytes, p.used[1]}};
  for (const auto& b : buffers) {
    if (b.used > 0 && (b.pointer == nullptr || b.bytes < b.used)) {
      return invalidArgument(concat(kName, ": rank ", p.header.rank, ": the plan uses ", b.used, " bytes of the ",
                                    b.name, " buffer, which has ", b.bytes, b.pointer == nullptr ? " (null)" : ""));
    }
  }
  uint8_t* scratch = p.scratch;
  if (memory.scratch != nullptr) {
    if (memory.scratch_bytes < p.header.scratch_bytes) {
      return invalidArgument(concat(kName, ": rank ", p.header.rank, ": scratch of ", memory.scratch_bytes,
                                    " bytes; the plan needs ", p.header.scratch_bytes));
    }
    scratch = static_cast<uint8_t*>(memory.scratch);
  }
  if (p.reduces && dataTypeSize(reduce.type) != p.header.element_bytes) {
    return invalidArgument(concat(kName, ": rank ", p.header.rank, ": the plan was lowered for ",
                                  p.header.element_bytes, "-byte elements and reduces ", dataTypeName(reduce.type)));
  }
  const void* kernel = p.reduces
                           ? cuda::deviceExecutorKernelFor(static_cast<int>(reduce.type), static_cast<int>(reduce.op))
                           : cuda::deviceExecutorKernelFor(-1, 0);
  if (kernel == nullptr) {
    return invalidArgument(concat(kName, ": no kernel for datatype ", static_cast<int>(reduce.type), " and operator ",
                                  static_cast<int>(reduce.op)));
  }
  const uint32_t grid = p.grid;
  BRAID_ASSIGN_OR_RETURN(const uint32_t resident, residentBlocks(kernel));
  BRAID_RETURN_IF_ERROR(checkResident(p, resident));
  if (spans_hosts_) {
    // The proxies run once per launch on the host: a graph replaying the kernel would run it without them.
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    BRAID_RETURN_IF_ERROR(
        cudaStatus(cudaStreamIsCapturing(stream, &capture), concat(kName, ": cudaStreamIsCapturing")));
    if (capture != cudaStreamCaptureStatusNone) {
      return unsupported(concat(kName, ": rank ", p.header.rank,
                                ": ranks on several hosts (proxied connections) cannot be captured into a CUDA graph"));
    }
  }
  if (p.header.proxy_bytes > 0 && options_.proxy_transport == nullptr) {
    return Status(StatusCode::kInternalError, concat(kName, ": plan ", handle,
                                                     " has proxied connections but the "
                                                     "executor has no proxy transport"));
  }
  cuda::DeviceLaunch args;
  args.plan = p.blob;
  args.regions = p.regions;
  args.proxy = p.proxy_device;
  args.buffers[0] = static_cast<uint8_t*>(memory.input);
  args.buffers[1] = static_cast<uint8_t*>(memory.output);
  args.buffers[2] = scratch;
  args.launch = p.launches;
  args.timeout_ns = static_cast<uint64_t>(std::min(timeout_s_, 1e9) * 1e9);
  args.error = error_device_;
  void* params[] = {&args};
  const Status launched = cudaStatus(cudaLaunchKernel(kernel, dim3(grid), dim3(cuda::kDeviceBlock), params, 0, stream),
                                     concat(kName, ": rank ", p.header.rank, ": cudaLaunchKernel"));
  if (!launched.isOk()) {
    p.failed = true;
    return launched;
  }
  if (p.header.proxy_bytes > 0) {
    {
      std::lock_guard<std::mutex> lock(proxy_mutex_);
      proxy_jobs_.push_back(ProxyJob{p.decoded, p.proxy_host, p.launches});
    }
    if (!proxy_thread_.joinable()) proxy_thread_ = std::thread([this] { proxyLoop(); });
    proxy_cv_.notify_one();
  }
  ++p.launches;
  return Status::ok();
}

void DeviceExecutorImpl::abort() {
  aborted_.store(true, std::memory_order_release);
  // The host writes mapped pinned memory the kernels and the proxy poll (as the proxy does when it gives up).
  if (error_host_ != nullptr) std::atomic_ref<uint32_t>(error_host_->aborted).store(1u, std::memory_order_release);
}

Status DeviceExecutorImpl::asyncError() {
  const volatile cuda::DeviceError* e = error_host_;
  if (aborted_.load(std::memory_order_acquire) && (e == nullptr || e->code == 0)) {
    std::lock_guard<std::mutex> lock(proxy_mutex_);
    if (proxy_error_.isOk()) return Status(StatusCode::kRemoteError, concat(kName, ": aborted"));
  }
  {
    std::lock_guard<std::mutex> lock(proxy_mutex_);
    // A proxy's own failure (a kernel's is reported below from DeviceError, code 1).
    if (!proxy_error_.isOk() && (e == nullptr || e->code != 1)) return proxy_error_;
  }
  if (e == nullptr || e->code == 0) return Status::ok();
  if (e->code == 2) {  // a proxy gave up; its Status (above) has the details once its thread stored it
    const std::string about =
        e->what == static_cast<int32_t>(cuda::DeviceWait::kKernel) ? "" : concat(" (rank ", e->peer, ")");
    return Status(StatusCode::kTimeout, concat(kName, ": rank ", e->rank, ": the proxy of tb ", e->tb, ", message ",
                                               e->slice, ": waited more than ", static_cast<double>(e->waited_ns) / 1e9,
                                               " s (BRAID_TIMEOUT) for ", waitName(e->what), about));
  }
  std::string peer = e->peer >= 0 ? concat(" from rank ", e->peer) : "";
  if (e->what == static_cast<int32_t>(cuda::DeviceWait::kCredit) && e->peer >= 0) peer = concat(" to rank ", e->peer);
  return Status(StatusCode::kTimeout, concat(kName, ": rank ", e->rank, " tb ", e->tb, " step ", e->step, ", slice ",
                                             e->slice, ": waited more than ", static_cast<double>(e->waited_ns) / 1e9,
                                             " s (BRAID_TIMEOUT) for ", waitName(e->what), peer));
}

}  // namespace

Result<std::unique_ptr<DeviceExecutor>> createDeviceExecutor(Bootstrap& bootstrap,
                                                             const DeviceExecutorOptions& options) {
  auto executor = std::make_unique<DeviceExecutorImpl>(bootstrap, options);
  BRAID_RETURN_IF_ERROR(executor->init());
  return std::unique_ptr<DeviceExecutor>(std::move(executor));
}

}  // namespace braid
