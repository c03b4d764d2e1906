// The program every block of the device-resident executor runs (MSCCL's execution model; device_plan.h has the plan
// it reads and the connection protocol), written once as __host__ __device__ code over a few primitives (thread
// indices, block barriers, acquire/release counters, 16-byte LL lines, a clock). On the device they are CUDA's
// (device_kernel.cuh wraps the program in the kernel); on the host they are std::atomic_ref and std::barrier over
// host threads, one group of threads per block (HostBlock), so tests run every threadblock of every rank of a plan
// on the CPU through this same code and compare the result with the CPU reference. Compiles with nvcc and with a
// plain C++ compiler.
//
// A block: (0) takes the launch's number from the rank's launch counter (the region's barrier counter: every block
// adds one when it starts and, with precopies, one at the grid barrier, so launch L's values lie in [L k, (L+1) k)
// with k = grid x (1 or 2)); the kernel's arguments never carry it, so a CUDA graph that replays the same arguments
// numbers its launches right; (1) with precopies, every block of the grid copies its share of each, then all meet at
// the grid barrier (the same counter reaching (L+1) k); (2) loops over slice iterations j and its steps s,
// skipping steps with no slice j: waits for the dependencies (progress counters of other blocks), for the
// incoming message (Simple: the tail counter; LL: the flags of every line; a proxied connection: the tail counter
// in both protocols, device_plan.h) and for a free slot of the outgoing connection (the head counter), runs the
// step's element-wise work on the slice (elementwise.h at block level; LL line by line), then gives the incoming
// slot back (head), publishes the outgoing message (Simple and proxied: tail) and its own progress. Every wait is
// bounded by the launch's timeout: a block that gives up records why in DeviceError (host-mapped on the device) and
// sets its abort flag, and every other block then stops waiting too.
//
// Operand order follows the CPU executor (runtime/executor/executor.cc), which matters for min/max ties: a
// receive-reduce computes received (op) src, except when src and dst are the same range, where the executor
// reduces dst (op) received.
#pragma once

#include <cstdint>
#include <cstring>

#include "cuda/device_plan.h"
#include "cuda/elementwise.h"

#if !defined(__CUDA_ARCH__)
#include <atomic>
#include <barrier>
#include <chrono>
#include <thread>
#endif

namespace braid::cuda {

/// Threads per block of the device-resident kernel (MSCCL's 512 data threads).
inline constexpr uint32_t kDeviceBlock = 512;

/// What a block waited for when it gave up (DeviceError::what).
/// kKernel: a proxy (device_proxy.h) waited for its own rank's kernel (a message to send, a slot to receive into).
enum class DeviceWait : int32_t { kNone = 0, kDependency = 1, kData = 2, kCredit = 3, kBarrier = 4, kKernel = 5 };

/// A kernel's failure, in host-mapped pinned memory (DeviceExecutor::asyncError reads it). The first block to fail
/// fills it (code 0 -> 1 by compare-and-swap) and sets `aborted`; later failures leave it. A proxy that gives up
/// fills it the same way with code 2 (tb: the connection's threadblock, step -1, slice: the message's index in its
/// launch).
struct DeviceError {
  uint32_t code = 0;     // 0: none; 1: a block's wait timed out; 2: a proxy's wait timed out
  uint32_t aborted = 0;  // blocks stop waiting once it is set
  int32_t rank = -1;
  int32_t tb = -1;
  int32_t step = -1;
  int32_t peer = -1;
  int32_t what = 0;  // DeviceWait
  uint32_t slice = 0;
  uint64_t waited_ns = 0;
};

/// The arguments of one launch.
struct DeviceLaunch {
  const uint8_t* plan = nullptr;      // the rank's blob
  uint8_t* const* regions = nullptr;  // every rank's region as this process maps it (ranks of other hosts: unused)
  uint8_t* proxy = nullptr;           // this rank's proxy area as the kernel maps it (null: no proxied connection)
  uint8_t* buffers[3] = {};           // input, output, scratch (DeviceBuffer order)
  uint64_t launch = 0;                // launches of this plan before this one: set by runBlock from the rank's launch
                                      // counter (what the caller passes is not read)
  uint64_t timeout_ns = 0;            // longest wait of any block
  DeviceError* error = nullptr;
};

#if !defined(__CUDA_ARCH__)
/// One block emulated on the host: `threads` host threads, thread `thread` of it, meeting at `barrier`; `flag` is
/// the block's shared word for barriers that combine a value. Set for the calling thread by HostBlockScope.
struct HostBlock {
  uint32_t block = 0;
  uint32_t blocks = 1;
  uint32_t thread = 0;
  uint32_t threads = 1;
  std::barrier<>* barrier = nullptr;
  std::atomic<int>* flag = nullptr;
  std::atomic<uint64_t>* word = nullptr;  // the block's shared word for a value thread 0 hands to the others
};
inline thread_local const HostBlock* t_host_block = nullptr;
/// Makes `block` the calling thread's block for its lifetime.
class HostBlockScope {
 public:
  explicit HostBlockScope(const HostBlock* block) : previous_(t_host_block) { t_host_block = block; }
  ~HostBlockScope() { t_host_block = previous_; }

 private:
  const HostBlock* previous_;
};
#endif

namespace program {

// ---- primitives ------------------------------------------------------------------------------------------------

BRAID_HD uint32_t threadIndex() {
#if defined(__CUDA_ARCH__)
  return threadIdx.x;
#else
  return t_host_block->thread;
#endif
}
BRAID_HD uint32_t blockThreads() {
#if defined(__CUDA_ARCH__)
  return blockDim.x;
#else
  return t_host_block->threads;
#endif
}
BRAID_HD uint32_t blockIndex() {
#if defined(__CUDA_ARCH__)
  return blockIdx.x;
#else
  return t_host_block->block;
#endif
}
BRAID_HD uint32_t gridBlocks() {
#if defined(__CUDA_ARCH__)
  return gridDim.x;
#else
  return t_host_block->blocks;
#endif
}
/// __syncthreads.
BRAID_HD void syncBlock() {
#if defined(__CUDA_ARCH__)
  __syncthreads();
#else
  if (t_host_block->threads > 1) t_host_block->barrier->arrive_and_wait();
#endif
}
/// __syncthreads_or: a barrier; true on every thread when any thread passed true.
BRAID_HD bool syncBlockOr(bool value) {
#if defined(__CUDA_ARCH__)
  return __syncthreads_or(value ? 1 : 0) != 0;
#else
  const HostBlock& b = *t_host_block;
  if (b.threads == 1) return value;
  if (b.thread == 0) b.flag->store(0);
  b.barrier->arrive_and_wait();
  if (value) b.flag->store(1);
  b.barrier->arrive_and_wait();
  const bool any = b.flag->load() != 0;
  b.barrier->arrive_and_wait();
  return any;
#endif
}
/// What thread 0 decided, on every thread of the block (a barrier).
BRAID_HD bool blockAgrees(bool thread0_ok) {
#if defined(__CUDA_ARCH__)
  __shared__ int ok;
  if (threadIdx.x == 0) ok = thread0_ok ? 1 : 0;
  __syncthreads();
  const bool result = ok != 0;
  __syncthreads();
  return result;
#else
  return syncBlockOr(t_host_block->thread == 0 && !thread0_ok) == false;
#endif
}
/// What thread 0 passed, on every thread of the block (a barrier).
BRAID_HD uint64_t blockBroadcast(uint64_t thread0_value) {
#if defined(__CUDA_ARCH__)
  __shared__ unsigned long long value;
  if (threadIdx.x == 0) value = thread0_value;
  __syncthreads();
  const uint64_t result = value;
  __syncthreads();
  return result;
#else
  const HostBlock& b = *t_host_block;
  if (b.threads == 1) return thread0_value;
  if (b.thread == 0) b.word->store(thread0_value);
  b.barrier->arrive_and_wait();
  const uint64_t result = b.word->load();
  b.barrier->arrive_and_wait();
  return result;
#endif
}
/// A counter another block (system: another GPU or process) writes: acquire load; release store.
BRAID_HD uint64_t loadAcquire(const uint64_t* p, bool system) {
#if defined(__CUDA_ARCH__)
  uint64_t v;
  if (system) {
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  } else {
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  }
  return v;
#else
  (void)system;
  return std::atomic_ref<uint64_t>(*const_cast<uint64_t*>(p)).load(std::memory_order_acquire);
#endif
}
BRAID_HD void storeRelease(uint64_t* p, uint64_t v, bool system) {
#if defined(__CUDA_ARCH__)
  if (system) {
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  } else {
    asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  }
#else
  (void)system;
  std::atomic_ref<uint64_t>(*p).store(v, std::memory_order_release);
#endif
}
/// Orders this thread's earlier writes (and, cumulatively, what it observed) before its later ones, for every
/// observer in the system (__threadfence_system) or on this device (__threadfence).
BRAID_HD void fence(bool system) {
#if defined(__CUDA_ARCH__)
  if (system) {
    __threadfence_system();
  } else {
    __threadfence();
  }
#else
  (void)system;
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}
/// The launch counter (the grid barrier's): add one (acquire-release); returns the value before.
BRAID_HD uint64_t addOne(uint64_t* p) {
#if defined(__CUDA_ARCH__)
  return atomicAdd(reinterpret_cast<unsigned long long*>(p), 1ull);
#else
  return std::atomic_ref<uint64_t>(*p).fetch_add(1, std::memory_order_acq_rel);
#endif
}
/// An LL line: {data low, flag, data high, flag}. Each 8-byte half is written and read whole, so a half whose
/// flag matches carries its data.
BRAID_HD void loadLine(const uint8_t* p, uint32_t* w) {
#if defined(__CUDA_ARCH__)
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
               : "l"(p)
               : "memory");
#else
  for (int half = 0; half < 2; ++half) {
    const uint64_t v = std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(const_cast<uint8_t*>(p) + 8 * half))
                           .load(std::memory_order_acquire);
    w[2 * half] = static_cast<uint32_t>(v);
    w[2 * half + 1] = static_cast<uint32_t>(v >> 32);
  }
#endif
}
BRAID_HD void storeLine(uint8_t* p, uint64_t data, uint32_t flag) {
#if defined(__CUDA_ARCH__)
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(static_cast<uint32_t>(data)),
               "r"(flag), "r"(static_cast<uint32_t>(data >> 32)), "r"(flag)
               : "memory");
#else
  for (int half = 0; half < 2; ++half) {
    const uint64_t word = ((data >> (32 * half)) & 0xFFFFFFFFull) | (uint64_t{flag} << 32);
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(p + 8 * half)).store(word, std::memory_order_release);
  }
#endif
}
BRAID_HD uint64_t nowNs() {
#if defined(__CUDA_ARCH__)
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#else
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
#endif
}
/// A spinning thread's pause: nothing on the device; on the host, the core goes to the threads it waits for.
BRAID_HD void pause() {
#if !defined(__CUDA_ARCH__)
  std::this_thread::yield();
#endif
}
BRAID_HD bool aborted(const DeviceError* e) {
#if defined(__CUDA_ARCH__)
  return *static_cast<const volatile uint32_t*>(&e->aborted) != 0;
#else
  return std::atomic_ref<uint32_t>(const_cast<uint32_t&>(e->aborted)).load(std::memory_order_acquire) != 0;
#endif
}
BRAID_HD bool claimError(DeviceError* e) {
#if defined(__CUDA_ARCH__)
  return atomicCAS(&e->code, 0u, 1u) == 0u;
#else
  uint32_t expected = 0;
  return std::atomic_ref<uint32_t>(e->code).compare_exchange_strong(expected, 1u);
#endif
}
BRAID_HD void setAborted(DeviceError* e) {
#if defined(__CUDA_ARCH__)
  __threadfence_system();
  atomicExch(&e->aborted, 1u);
#else
  std::atomic_ref<uint32_t>(e->aborted).store(1u, std::memory_order_release);
#endif
}

// ---- the program -----------------------------------------------------------------------------------------------

/// `n` (<= 8) bytes at p as the low bytes of a word (the rest zero), and back.
BRAID_HD uint64_t load8(const uint8_t* p, uint32_t n) {
  uint64_t v = 0;
  if (n == 8 && reinterpret_cast<uintptr_t>(p) % 8 == 0) return *reinterpret_cast<const uint64_t*>(p);
  for (uint32_t i = 0; i < n; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}
BRAID_HD void store8(uint8_t* p, uint64_t v, uint32_t n) {
  if (n == 8 && reinterpret_cast<uintptr_t>(p) % 8 == 0) {
    *reinterpret_cast<uint64_t*>(p) = v;
    return;
  }
  for (uint32_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

/// The block's state: where it is, for waits and error reports.
struct Block {
  const DeviceLaunch* launch;
  const DevicePlanHeader* header;
  int32_t tb;
  int32_t step;
  uint32_t slice;
};

/// Records a failed wait (first failure of the launch wins) and sets the abort flag.
BRAID_HD void reportFailure(const Block& b, DeviceWait what, int32_t peer, uint64_t waited_ns) {
  DeviceError* e = b.launch->error;
  if (claimError(e)) {
    e->rank = b.header->rank;
    e->tb = b.tb;
    e->step = b.step;
    e->peer = peer;
    e->what = static_cast<int32_t>(what);
    e->slice = b.slice;
    e->waited_ns = waited_ns;
  }
  setAborted(e);
}

/// Bookkeeping of a spinning wait: true while it may go on; false (after reporting) on timeout or abort.
struct Spin {
  uint64_t start = 0;
  uint32_t count = 0;
  BRAID_HD bool keepGoing(const Block& b, DeviceWait what, int32_t peer) {
    pause();
    if (++count % 1024 != 0) return true;
    if (aborted(b.launch->error)) return false;
    const uint64_t now = nowNs();
    if (start == 0) start = now;
    if (now - start <= b.launch->timeout_ns) return true;
    reportFailure(b, what, peer, now - start);
    return false;
  }
};

/// Waits until *counter >= target; false when it gave up.
BRAID_HD bool waitCounter(const Block& b, const uint64_t* counter, uint64_t target, bool system, DeviceWait what,
                          int32_t peer) {
  Spin spin;
  while (loadAcquire(counter, system) < target) {
    if (!spin.keepGoing(b, what, peer)) return false;
  }
  return true;
}

/// out0 (and out1) = a (op) b over `bytes` bytes, by the threads of this block.
template <typename T, ElementOp kOp>
BRAID_HD void blockElementwise(void* out0, void* out1, const void* a, const void* b, uint64_t bytes) {
  ElementwiseArgs args;
  args.out0 = out0;
  args.out1 = out1;
  args.a = a;
  args.b = b;
  const uint64_t count = bytes / sizeof(StorageOf<T>);
  const ElementwiseSplit split = splitElementwise(count, sizeof(StorageOf<T>), args);
  elementwiseThread<T, kOp>(args, split, threadIndex(), blockThreads());
}

/// The 8 data bytes `x` (n of them valid) reduced element-wise with n bytes at `src` (received (op) src, or
/// src (op) received when `src_first`).
template <typename T, ElementOp kOp>
BRAID_HD uint64_t reduce8(uint64_t x, const uint8_t* src, uint32_t n, bool src_first) {
  using S = StorageOf<T>;
  uint8_t xb[8];
  memcpy(xb, &x, 8);
  for (uint32_t e = 0; e + sizeof(S) <= n; e += sizeof(S)) {
    S a, s;
    memcpy(&a, xb + e, sizeof(S));
    memcpy(&s, src + e, sizeof(S));
    const S r = src_first ? applyElement<T, kOp>(s, a) : applyElement<T, kOp>(a, s);
    memcpy(xb + e, &r, sizeof(S));
  }
  uint64_t out;
  memcpy(&out, xb, 8);
  return out;
}

BRAID_HD bool opReceives(DeviceOp op) {
  return op == DeviceOp::kRecv || op == DeviceOp::kRecvCopySend || op == DeviceOp::kRecvReduceSend ||
         op == DeviceOp::kRecvReduceCopy || op == DeviceOp::kRecvReduceCopySend;
}
BRAID_HD bool opSends(DeviceOp op) {
  return op == DeviceOp::kSend || op == DeviceOp::kRecvCopySend || op == DeviceOp::kRecvReduceSend ||
         op == DeviceOp::kRecvReduceCopySend;
}
BRAID_HD bool opReduces(DeviceOp op) {
  return op == DeviceOp::kRecvReduceSend || op == DeviceOp::kRecvReduceCopy || op == DeviceOp::kRecvReduceCopySend;
}
BRAID_HD bool opStores(DeviceOp op) {
  return op == DeviceOp::kRecv || op == DeviceOp::kRecvCopySend || op == DeviceOp::kRecvReduceCopy ||
         op == DeviceOp::kRecvReduceCopySend;
}

/// What one slice touches.
struct SliceIo {
  const uint8_t* src = nullptr;  // the step's src range at the slice
  uint8_t* dst = nullptr;        // the step's dst range at the slice
  uint8_t* temp = nullptr;       // the threadblock's staging (kStepStaged)
  const uint8_t* in = nullptr;   // incoming slot
  uint8_t* out = nullptr;        // outgoing slot (the peer's memory)
  uint64_t bytes = 0;
  uint32_t in_flag = 0;  // LL flags of the incoming and outgoing message
  uint32_t out_flag = 0;
  bool src_first = false;  // src and dst are the same range
  bool staged = false;
};

/// One slice of a step with the Simple protocol (data already in the incoming slot, outgoing slot free).
template <typename T, ElementOp kOp>
BRAID_HD void simpleSlice(DeviceOp op, const SliceIo& io) {
  constexpr ElementOp kCopy = ElementOp::kCopy;
  switch (op) {
    case DeviceOp::kSend: blockElementwise<T, kCopy>(io.out, nullptr, io.src, nullptr, io.bytes); break;
    case DeviceOp::kRecv: blockElementwise<T, kCopy>(io.dst, nullptr, io.in, nullptr, io.bytes); break;
    case DeviceOp::kRecvCopySend: blockElementwise<T, kCopy>(io.dst, io.out, io.in, nullptr, io.bytes); break;
    case DeviceOp::kRecvReduceSend: blockElementwise<T, kOp>(io.out, nullptr, io.in, io.src, io.bytes); break;
    case DeviceOp::kRecvReduceCopy:
    case DeviceOp::kRecvReduceCopySend: {
      uint8_t* out1 = op == DeviceOp::kRecvReduceCopySend ? io.out : nullptr;
      if (io.staged) {  // src overlaps dst: the result goes to staging first
        blockElementwise<T, kOp>(io.temp, nullptr, io.in, io.src, io.bytes);
        syncBlock();
        blockElementwise<T, kCopy>(io.dst, out1, io.temp, nullptr, io.bytes);
      } else if (io.src_first) {
        blockElementwise<T, kOp>(io.dst, out1, io.src, io.in, io.bytes);
      } else {
        blockElementwise<T, kOp>(io.dst, out1, io.in, io.src, io.bytes);
      }
      break;
    }
    case DeviceOp::kCopy: blockElementwise<T, kCopy>(io.dst, nullptr, io.src, nullptr, io.bytes); break;
    case DeviceOp::kReduce: blockElementwise<T, kOp>(io.dst, nullptr, io.dst, io.src, io.bytes); break;
    case DeviceOp::kNop: break;
  }
}

/// One slice of a step with the LL protocol: every thread takes lines tid, tid + threads, ...; a received line is
/// valid once both its flags equal io.in_flag; sent lines carry io.out_flag. A message of zero bytes is one line.
/// Returns false (on every thread of the block) when a line did not arrive in time.
template <typename T, ElementOp kOp>
BRAID_HD bool llSlice(const Block& b, DeviceOp op, const SliceIo& io, int32_t recv_peer) {
  const bool receives = opReceives(op);
  const bool sends = opSends(op);
  const bool reduces = opReduces(op);
  const bool stores = opStores(op);
  const uint64_t lines = io.bytes == 0 ? 1 : (io.bytes + kLLDataBytes - 1) / kLLDataBytes;
  const auto valid = [&](uint64_t k) -> uint32_t {
    const uint64_t at = k * kLLDataBytes;
    return io.bytes > at ? static_cast<uint32_t>(io.bytes - at < kLLDataBytes ? io.bytes - at : kLLDataBytes) : 0;
  };
  bool ok = true;
  for (uint64_t k = threadIndex(); k < lines; k += blockThreads()) {
    const uint64_t at = k * kLLDataBytes;
    const uint32_t n = valid(k);
    uint64_t value = 0;
    if (receives) {
      uint32_t w[4];
      Spin spin;
      while (true) {
        loadLine(io.in + k * kLLLineBytes, w);
        if (w[1] == io.in_flag && w[3] == io.in_flag) break;
        if (!spin.keepGoing(b, DeviceWait::kData, recv_peer)) {
          ok = false;
          break;
        }
      }
      if (!ok) break;
      value = uint64_t{w[0]} | (uint64_t{w[2]} << 32);
      if (reduces) value = reduce8<T, kOp>(value, io.src + at, n, io.src_first);
    } else {
      value = load8(io.src + at, n);
    }
    if (io.staged) {
      store8(io.temp + at, value, n);  // the second pass stores and sends it
      continue;
    }
    if (stores) store8(io.dst + at, value, n);
    if (sends) storeLine(io.out + k * kLLLineBytes, value, io.out_flag);
  }
  if (syncBlockOr(!ok)) return false;
  if (io.staged) {
    for (uint64_t k = threadIndex(); k < lines; k += blockThreads()) {
      const uint64_t at = k * kLLDataBytes;
      const uint32_t n = valid(k);
      const uint64_t value = load8(io.temp + at, n);
      store8(io.dst + at, value, n);
      if (sends) storeLine(io.out + k * kLLLineBytes, value, io.out_flag);
    }
    syncBlock();
  }
  return true;
}

/// What one launch adds to the rank's launch counter: one per block when it starts, one more at the grid barrier.
BRAID_HD uint64_t countsPerLaunch(const DevicePlanHeader& h) {
  return uint64_t{gridBlocks()} * (h.num_precopies > 0 ? 2 : 1);
}

/// The precopies, by every thread of the grid, then the grid barrier. False when the barrier timed out.
BRAID_HD bool runPrecopies(const DeviceLaunch& launch, const DevicePlanView& plan, Block& b) {
  const DevicePlanHeader& h = *plan.header;
  const uint64_t thread = uint64_t{blockIndex()} * blockThreads() + threadIndex();
  const uint64_t threads = uint64_t{gridBlocks()} * blockThreads();
  for (uint32_t p = 0; p < h.num_precopies; ++p) {
    const DevicePrecopy& copy = plan.precopies[p];
    const uint8_t* src = launch.buffers[static_cast<int>(copy.src_buffer)] + copy.src_offset;
    uint8_t* dst = launch.buffers[static_cast<int>(copy.dst_buffer)] + copy.dst_offset;
    if (src == dst || copy.bytes == 0) continue;
    const uint32_t unit = copyUnit(dst, src, copy.bytes);
    ElementwiseArgs args;
    args.out0 = dst;
    args.a = src;
    withCopyUnit(unit, [&]<typename U>() {
      const ElementwiseSplit split = splitElementwise(copy.bytes / unit, unit, args);
      elementwiseThread<U, ElementOp::kCopy>(args, split, thread, threads);
    });
  }
  syncBlock();
  bool ok = true;
  if (threadIndex() == 0) {
    uint64_t* counter = reinterpret_cast<uint64_t*>(launch.regions[h.rank] + h.barrier_offset);
    fence(false);
    (void)addOne(counter);
    ok = waitCounter(b, counter, (launch.launch + 1) * countsPerLaunch(h), /*system=*/false, DeviceWait::kBarrier, -1);
  }
  return blockAgrees(ok);
}

/// One threadblock of the plan, all its slices (see the top of the file).
template <typename T, ElementOp kOp>
BRAID_HD void runThreadblock(const DeviceLaunch& launch, const DevicePlanView& plan, Block& b) {
  const DevicePlanHeader& h = *plan.header;
  const DeviceThreadblock& tb = plan.threadblocks[b.tb];
  uint8_t* own = launch.regions[h.rank];
  uint64_t* progress = reinterpret_cast<uint64_t*>(own + h.progress_offset);
  const uint64_t span = uint64_t{tb.iterations} * tb.num_steps;
  const uint64_t base = launch.launch * span;
  const bool ll = h.protocol == DeviceProtocol::kLL;
  // The connections this block drives and their message counters (first message of this launch). A proxied
  // connection has its FIFO, tail and head in this rank's proxy area, at both ends, and uses tail in LL too.
  const DeviceConnection* in = tb.recv_connection >= 0 ? &plan.connections[tb.recv_connection] : nullptr;
  const DeviceConnection* out = tb.send_connection >= 0 ? &plan.connections[tb.send_connection] : nullptr;
  const bool in_proxied = in != nullptr && in->proxied != 0;
  const bool out_proxied = out != nullptr && out->proxied != 0;
  const bool in_tail_wait = !ll || in_proxied;     // the receiver waits for tail before it reads the slot
  const bool out_tail_store = !ll || out_proxied;  // the sender publishes tail after it wrote the slot
  uint64_t in_seq = in != nullptr ? launch.launch * in->messages : 0;
  uint64_t out_seq = out != nullptr ? launch.launch * out->messages : 0;
  uint8_t* in_base = in_proxied ? launch.proxy : own;                                                   // FIFO and tail
  uint8_t* in_peer = in == nullptr ? nullptr : in_proxied ? launch.proxy : launch.regions[in->sender];  // head
  uint8_t* out_peer = out == nullptr ? nullptr : out_proxied ? launch.proxy : launch.regions[out->receiver];
  uint8_t* out_base = out_proxied ? launch.proxy : own;  // head
  uint8_t* in_fifo = in != nullptr ? in_base + in->fifo_offset : nullptr;
  uint64_t* in_tail = in != nullptr ? reinterpret_cast<uint64_t*>(in_base + in->tail_offset) : nullptr;
  uint64_t* in_head = in != nullptr ? reinterpret_cast<uint64_t*>(in_peer + in->head_offset) : nullptr;
  uint8_t* out_fifo = out != nullptr ? out_peer + out->fifo_offset : nullptr;
  uint64_t* out_tail = out != nullptr ? reinterpret_cast<uint64_t*>(out_peer + out->tail_offset) : nullptr;
  uint64_t* out_head = out != nullptr ? reinterpret_cast<uint64_t*>(out_base + out->head_offset) : nullptr;
  for (uint32_t j = 0; j < tb.iterations; ++j) {
    for (uint32_t s = 0; s < tb.num_steps; ++s) {
      const DeviceStep& step = plan.steps[tb.first_step + s];
      if (step.slices <= j) continue;
      b.step = static_cast<int32_t>(s);
      b.slice = j;
      const bool receives = opReceives(step.op);
      const bool sends = opSends(step.op);
      // Dependencies, the incoming message (Simple) and a free outgoing slot, all by thread 0.
      bool ok = true;
      if (threadIndex() == 0) {
        for (uint32_t d = 0; ok && d < step.dep_count; ++d) {
          const DeviceDependency& dep = plan.deps[step.dep_begin + d];
          const DeviceThreadblock& other = plan.threadblocks[dep.tb];
          const uint32_t last = plan.steps[other.first_step + dep.step].slices - 1;
          const uint64_t position = uint64_t{j < last ? j : last} * other.num_steps + dep.step + 1;
          const uint64_t other_span = uint64_t{other.iterations} * other.num_steps;
          ok = waitCounter(b, progress + dep.tb, launch.launch * other_span + position, false, DeviceWait::kDependency,
                           -1);
        }
        if (ok && receives && in_tail_wait) {
          ok = waitCounter(b, in_tail, in_seq + 1, true, DeviceWait::kData, in->sender);
        }
        if (ok && sends && out_seq + 1 > h.fifo_depth) {
          ok = waitCounter(b, out_head, out_seq + 1 - h.fifo_depth, true, DeviceWait::kCredit, out->receiver);
        }
      }
      if (!blockAgrees(ok)) return;
      if (receives && in_tail_wait) fence(true);  // every thread's later loads see the peer's data
      SliceIo io;
      const uint64_t offset = uint64_t{j} * h.slice_bytes;
      io.bytes = deviceSliceBytes(step.bytes, h.slice_bytes, j);
      io.src = launch.buffers[static_cast<int>(step.src_buffer)] + step.src_offset + offset;
      io.dst = launch.buffers[static_cast<int>(step.dst_buffer)] + step.dst_offset + offset;
      io.temp = launch.buffers[static_cast<int>(DeviceBuffer::kScratch)] + tb.temp_offset;
      io.staged = (step.flags & kStepStaged) != 0;
      // Only a receive-reduce-copy(-send) stores into dst; src == dst there reduces dst (op) received.
      io.src_first = (step.op == DeviceOp::kRecvReduceCopy || step.op == DeviceOp::kRecvReduceCopySend) &&
                     step.src_buffer == step.dst_buffer && step.src_offset == step.dst_offset;
      if (receives) {
        io.in = in_fifo + (in_seq % h.fifo_depth) * h.slot_bytes;
        io.in_flag = static_cast<uint32_t>(in_seq + 1);
      }
      if (sends) {
        io.out = out_fifo + (out_seq % h.fifo_depth) * h.slot_bytes;
        io.out_flag = static_cast<uint32_t>(out_seq + 1);
      }
      if (ll && (receives || sends)) {  // local copies and reductions are the same in both protocols
        if (!llSlice<T, kOp>(b, step.op, io, in != nullptr ? in->sender : -1)) return;
      } else {
        simpleSlice<T, kOp>(step.op, io);
        syncBlock();
      }
      // Give the incoming slot back, publish the outgoing message (Simple, proxied) and this block's progress.
      if (threadIndex() == 0) {
        if (sends && out_tail_store) {
          fence(true);
          storeRelease(out_tail, out_seq + 1, true);
        }
        if (receives) storeRelease(in_head, in_seq + 1, true);
        fence(false);
        storeRelease(progress + b.tb, base + uint64_t{j} * tb.num_steps + s + 1, false);
      }
      in_seq += receives ? 1 : 0;
      out_seq += sends ? 1 : 0;
    }
  }
  if (threadIndex() == 0) storeRelease(progress + b.tb, base + span, false);
}

/// What one block of the launch runs: the precopies with the grid barrier, then its threadblock (blocks beyond
/// the plan's threadblocks, in a grid of one for a rank without any, only take part in the precopies).
template <typename T, ElementOp kOp>
BRAID_HD void runBlock(const DeviceLaunch& arguments) {
  const DevicePlanView plan = viewDevicePlan(arguments.plan);
  // The launch's number: launches of a plan on one rank run one after another (the stream orders them), so every
  // value this launch's blocks take lies in [L k, (L+1) k).
  uint64_t taken = 0;
  if (threadIndex() == 0) {
    taken = addOne(reinterpret_cast<uint64_t*>(arguments.regions[plan.header->rank] + plan.header->barrier_offset));
  }
  DeviceLaunch launch = arguments;
  launch.launch = blockBroadcast(taken) / countsPerLaunch(*plan.header);
  Block b{&launch, plan.header, static_cast<int32_t>(blockIndex()), -1, 0};
  if (plan.header->num_precopies > 0 && !runPrecopies(launch, plan, b)) return;
  if (blockIndex() < plan.header->num_threadblocks) runThreadblock<T, kOp>(launch, plan, b);
}

}  // namespace program
}  // namespace braid::cuda
