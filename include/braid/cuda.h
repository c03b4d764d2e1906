// Running plans on GPUs (runtime/cuda, runtime/transport/cuda; docs/gpu.md). Available in builds with CUDA
// (BRAID_HAVE_CUDA, target braid::braid_cuda); nothing here needs a GPU to build, and every call reports, rather
// than crashes on, a machine without one.
//
// Two ways to run any plan the CPU runtime runs (include/braid/plan.h), with the same semantics:
//
//   - Device-resident (DeviceExecutor): MSCCL's execution model. One kernel launch per collective on the caller's
//     stream; each CUDA block runs one threadblock of the plan step by step (slices outside, steps inside), moving
//     data through FIFO slots in the receiving GPU's memory, mapped with CUDA IPC (or directly, for ranks of one
//     process), with the Simple or LL protocol (flags in peer memory, as MSCCL and NCCL use them). Asynchronous
//     like an NCCL call: launch() returns once the kernel is enqueued. Given a proxy transport, also for ranks on
//     several hosts (hierarchical): the kernel still drives every connection, and one whose peer is on another
//     host has its FIFO in host-pinned memory of each end, moved across hosts by a proxy thread over a CPU
//     transport (NCCL's net transport and proxy; runtime/cuda/device_proxy.h).
//   - Host-driven (createCudaTransport + executeOnStream), for everything else: the CPU executor
//     (include/braid/executor.h) drives a CUDA transport whose copies and reductions are kernels on the rank's
//     stream and whose messages are ncclSend/ncclRecv on NCCL communicators. Ordered after earlier work on the
//     caller's stream and before later work on it, as NCCL's calls are; the host call returns when the
//     collective is done.
//
// Memory: RankMemory pointers are device pointers (cudaMalloc, or anything the device can address). Datatypes,
// operators and their element semantics are include/braid/datatype.h's; kAvg reduces as a sum, and
// averageOnStream divides where the result lives, as the communicator does on the CPU.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "braid/bootstrap.h"
#include "braid/datatype.h"
#include "braid/executor.h"
#include "braid/plan.h"
#include "braid/status.h"
#include "braid/transport.h"
#include "braid/transports.h"

// CUDA's own declaration of a stream (driver_types.h), so that this header needs no CUDA headers.
typedef struct CUstream_st* cudaStream_t;

namespace braid {

/// Why CUDA cannot run in this process: "" when at least one device is usable, otherwise the CUDA runtime's
/// error of cudaGetDeviceCount ("cudaGetDeviceCount: cudaErrorNoDevice: no CUDA-capable device is detected",
/// "... cudaErrorInsufficientDriver: ...") or "no CUDA device". Initialises the CUDA runtime: a process that
/// forks afterwards must not use CUDA in its children.
std::string cudaUnavailableReason();

/// The device a rank uses when none is given: its index among the ranks of its host (bootstrap host names),
/// modulo the devices visible to the process.
Result<int> defaultCudaDevice(Bootstrap& bootstrap);

struct CudaTransportOptions {
  TransportOptions base;  // timeout_s and fifo_depth as for the CPU transports (include/braid/transports.h)
  int device = -1;        // CUDA device of this rank; -1: defaultCudaDevice
};

/// The CUDA transport endpoint of this rank (bootstrap.rank()); collective over the bootstrap. Setup: selects the
/// device, creates a control transport over the CPU (threads, shm or tcp as createTransport(kAuto) picks) and
/// one two-rank NCCL communicator per ordered pair of ranks (runtime/transport/cuda/cuda_transport.h says why).
/// DataTransport contract (include/braid/transport.h) with device memory, except that local requests run as
/// kernels and complete when the kernel has finished, not at post time. Errors: kUnsupported in a build without
/// NCCL; kUnhandledCudaError / kSystemError naming the CUDA or NCCL call that failed (on every rank: setup steps
/// are agreed over the bootstrap); kInvalidArgument for bad options.
Result<std::unique_ptr<DataTransport>> createCudaTransport(Bootstrap& bootstrap,
                                                           const CudaTransportOptions& options = {});

/// Runs `plan` for the rank of `endpoint` (a createCudaTransport endpoint) on `memory` (device pointers):
/// the transport's streams first wait for the work enqueued on `stream` so far, the executor runs the plan, and
/// `stream` then waits for the transport's streams, so work enqueued on `stream` later sees the result. Returns
/// when the collective is done (the host waits; NCCL's calls return at enqueue). Errors: kInvalidArgument when
/// `endpoint` is not a CUDA transport; what bind() and execute() report.
Result<ExecResult> executeOnStream(const Plan& plan, DataTransport& endpoint, const RankMemory& memory,
                                   ReduceSpec reduce, cudaStream_t stream);

/// buf[i] /= num_ranks for `count` elements of `type` (kAvg's last step, finishAverage on the device), one
/// kernel on `stream`. Errors: kInvalidArgument for a null or misaligned pointer; kUnhandledCudaError.
Status averageOnStream(void* buf, uint64_t count, DataType type, int num_ranks, cudaStream_t stream);

struct DeviceExecutorOptions {
  int device = -1;       // CUDA device of this rank; -1: defaultCudaDevice
  double timeout_s = 0;  // how long a block of the kernel (or the proxy) waits for a peer or a dependency; 0:
                         // BRAID_TIMEOUT
  /// Needed when the bootstrap's ranks are on several hosts (bootstrap host names), else unused: an endpoint of a
  /// CPU data transport (createTransport over the same ranks: tcp or ucx across hosts) that drives this rank and
  /// carries nothing but this executor's proxy traffic. The executor binds its scratch to the proxy area of the
  /// plan it runs; the endpoint must outlive the executor, and is aborted when a proxy fails.
  DataTransport* proxy_transport = nullptr;
};

/// The device-resident executor of one rank (runtime/cuda/device_executor.cu). Every rank of the plan runs its own
/// DeviceExecutor. Ranks of one host reach each other's regions through CUDA IPC (ranks in one process use their
/// pointers directly; they need peer access between their devices, or one device). Ranks of different hosts
/// (with DeviceExecutorOptions::proxy_transport) meet through proxied connections, as NCCL's net transport: the
/// kernel writes and reads FIFO slots and counters in a proxy area of pinned host memory it maps (cudaHostAlloc,
/// mapped and portable; the FIFO depth and slot size of the plan), and a proxy thread of the executor sends a
/// slot once the kernel published it (tail) and receives into a slot once the kernel freed it (head), every
/// proxied connection of a launch at once, the launches in order (runtime/cuda/device_proxy.h, device_plan.h).
class DeviceExecutor {
 public:
  virtual ~DeviceExecutor() = default;

  /// Collective over the bootstrap given at creation, every rank with the same plan, in the same order: encodes
  /// this rank's part (runtime/cuda/device_plan_codec.h), copies it to the device, allocates this rank's region
  /// (connection FIFOs and counters) and scratch, exchanges CUDA IPC handles of the regions and maps the peers'.
  /// Ranks of other hosts: no IPC exchange with them; this rank's proxy area (zeroed once, here) when the plan has
  /// proxied connections. Returns the handle launch() takes. A plan encoding the same as one prepared before
  /// reuses it (no exchange). Errors: the encoder's (kUnsupported for plans the kernel cannot run,
  /// kInvalidArgument naming a cycle); kUnsupported when the plan has more threadblocks than can be resident on
  /// the device at once, or, for ranks that are threads of this process on one device, more together (on every
  /// rank: the check is agreed before anything is launched); kUnhandledCudaError naming the CUDA call.
  virtual Result<int> prepare(const Plan& plan) = 0;

  /// Enqueues one kernel on `stream` that runs the prepared plan `handle` on `memory` (device pointers; scratch
  /// may be null: the executor's own is used) with `reduce`; returns at once. The kernel numbers its launches
  /// itself (a counter in the rank's region), so a CUDA graph may capture it and replay it, in the same order on
  /// every rank as eager launches, except where ranks are on several hosts (kUnsupported while capturing). Every rank
  /// must launch its part; the kernels of all ranks must run at the same time (they wait on each other). A plan with
  /// proxied connections also queues the launch for the proxy thread, which runs it while the kernel runs. Errors:
  /// kInvalidArgument for an unknown handle or buffers smaller than the plan's; kUnhandledCudaError from the
  /// launch. Failures inside the kernel (a peer or dependency that did not arrive within the timeout) and of the
  /// proxy are reported by asyncError().
  virtual Status launch(int handle, const RankMemory& memory, ReduceSpec reduce, cudaStream_t stream) = 0;

  /// The first failure a kernel of this executor reported, ok when none: kTimeout "device-resident executor: rank
  /// R tb T step S (op), slice J: waited more than W s for <what>"; else the proxy's first failure: kTimeout
  /// "device proxy: rank R: connection rank S -> rank D channel C, message m of M (launch L): waited more than T s
  /// for <what>", the proxy transport's error with that prefix, or kRemoteError when the kernel had given up.
  virtual Status asyncError() = 0;

  /// Stops this rank at once (ncclCommAbort's job): sets the flag every waiting block and the proxy poll, so the
  /// running and queued kernels end within a poll instead of at the timeout, and makes destruction skip its
  /// collective barrier (the peers are told through the bootstrap's abort, which is the caller's). Results of the
  /// launches it cuts short are undefined; asyncError() returns kRemoteError "aborted" from then on unless an
  /// earlier failure is there. Not collective; safe to call more than once.
  virtual void abort() = 0;

  /// The device this executor's rank runs on.
  virtual int device() const = 0;
};

/// Creates the device-resident executor of bootstrap.rank(); collective over the bootstrap. The bootstrap must
/// outlive the executor; destroying it waits for the launches queued for the proxy thread, then for the device
/// and every rank. Errors: kUnsupported when ranks are on other hosts and options.proxy_transport is null (the
/// host-driven transport runs those); kInvalidArgument when the proxy transport does not drive this rank;
/// kUnhandledCudaError naming the CUDA call.
Result<std::unique_ptr<DeviceExecutor>> createDeviceExecutor(Bootstrap& bootstrap,
                                                             const DeviceExecutorOptions& options = {});

}  // namespace braid
