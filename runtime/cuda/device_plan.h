// The device-resident executor's plan: one rank's part of a lowered Plan (include/braid/plan.h) as one contiguous,
// versioned blob of plain structs that the kernel (device_kernel.cu) reads from device memory. Produced on the CPU
// by encodeDevicePlan (device_plan_codec.h), which also decodes and validates it; this header is the layout only
// and compiles with nvcc and a plain C++ compiler alike.
//
// Execution model (MSCCL's kernel, ../shared/reference/taccl_msccl.md §3.2, and runtime/README.md "Executor"): one
// CUDA block per threadblock of the rank's plan; a block loops over slice iterations outside and its steps inside,
// so iteration j runs slice j of every step that has one (DeviceStep::slices; a nop has as many slices as the
// steps it stands for). Slice j of a step waits, for each dependency, until the threadblock named has finished
// slice min(j, last) of the step named: every block publishes its position in that order as a progress counter.
//
// Connections. Every (sender, receiver, channel) of the plan with traffic is one connection, driven on each rank
// by exactly one threadblock (its send or recv peer and channel). Its FIFO of `depth` slots lives in the receiver's
// region (see below); message m of the connection (m counts from 0 at the first launch of the plan and never
// restarts: launch L's first message is L x messages) goes to slot m % depth. Simple: the sender waits until
// head >= m + 1 - depth (credits, written by the receiver into the sender's region), writes the slot, fences and
// stores tail = m + 1 into the receiver's region; the receiver waits for tail >= m + 1, reads the slot and stores
// head = m + 1. LL: the slot is 16-byte lines {data0, flag, data1, flag} of 8 data bytes each, stored with one
// 16-byte write; a line is valid when both flags equal (m + 1) mod 2^32, so the receiver needs no tail and no
// fence (NCCL's LL); credits travel as in Simple.
//
// The region of a rank: one device allocation per (plan, rank) that peers map (CUDA IPC, or the pointer itself for
// ranks of one process). Layout, each part 128-byte aligned: the FIFOs of its incoming connections, their tail
// counters, the head counters of its outgoing connections, one progress counter per threadblock, and the grid
// barrier counter. Counters are 64-bit and start at 0 (the region is zeroed once, when the plan is prepared).
//
// Proxied connections (ranks on different hosts; NCCL's net transport with its proxy thread, MSCCL's kernel
// driving it). A connection whose sender and receiver are on different hosts (DevicePlanHeader::host) is marked
// `proxied` on both ends, and each end keeps its own FIFO of `depth` slots, tail and head counter in its rank's
// *proxy area* (host-pinned memory the kernel maps; DevicePlanHeader::proxy_bytes; layout, each part 128-byte
// aligned: the FIFOs of its proxied ends, sending then receiving in (sender, receiver, channel) order, their tail
// counters, their head counters) instead of in the regions. The kernel runs such a connection as a local one whose
// other end is the rank's host proxy (device_proxy.h), with Simple's counters in both protocols: the sending block
// writes slot m % depth, fences (system scope) and stores tail = m + 1 (LL too, after its lines); its proxy sends
// the slot's message once tail >= m + 1 and stores head = m + 1 when the send completed. The receiving rank's
// proxy receives message m into slot m % depth once head >= m + 1 - depth and stores tail = m + 1 when it arrived;
// the receiving block waits for tail (LL too; its lines keep their flags), reads the slot and stores head.
#pragma once

#include <cstdint>

namespace braid::cuda {

inline constexpr uint32_t kDevicePlanMagic = 0x50445242;  // "BRDP" little-endian
inline constexpr uint32_t kDevicePlanVersion = 2;
/// Alignment of every table in the blob and of every part of a region, bytes.
inline constexpr uint64_t kDevicePlanAlign = 128;
/// Bytes of an LL line and the data bytes it carries.
inline constexpr uint64_t kLLLineBytes = 16;
inline constexpr uint64_t kLLDataBytes = 8;

/// Step types: OpType's values (include/braid/algorithm.h).
enum class DeviceOp : uint8_t {
  kSend = 0,
  kRecv = 1,
  kRecvCopySend = 2,
  kRecvReduceSend = 3,
  kRecvReduceCopy = 4,
  kRecvReduceCopySend = 5,
  kCopy = 6,
  kReduce = 7,
  kNop = 8,
};
/// BufferKind's values.
enum class DeviceBuffer : uint8_t { kInput = 0, kOutput = 1, kScratch = 2 };
/// The protocol the kernel runs: LL128 plans run as Simple (same slices, Simple's slots and flags).
enum class DeviceProtocol : uint8_t { kSimple = 0, kLL = 1 };

/// DeviceStep::flags.
inline constexpr uint8_t kStepStaged = 1;  // receive-reduce whose src overlaps its dst: through the staging range

struct DevicePlanHeader {
  uint32_t magic = kDevicePlanMagic;
  uint32_t version = kDevicePlanVersion;
  uint64_t blob_bytes = 0;  // the whole blob, header included
  int32_t rank = 0;
  int32_t num_ranks = 0;
  uint32_t num_threadblocks = 0;
  uint32_t num_steps = 0;  // all threadblocks'
  uint32_t num_deps = 0;
  uint32_t num_connections = 0;
  uint32_t num_precopies = 0;
  DeviceProtocol protocol = DeviceProtocol::kSimple;
  uint8_t reserved0[3] = {};
  uint64_t element_bytes = 1;
  uint64_t slice_bytes = 0;  // the executed slice (plan::executedSliceBytes); 0: one slice per step
  uint32_t fifo_depth = 0;   // slots per connection
  int32_t host = 0;          // this rank's host: ranks with the same value share one (CUDA IPC); others are proxied
  uint64_t input_bytes = 0;
  uint64_t output_bytes = 0;
  uint64_t scratch_bytes = 0;  // the algorithm's scratch plus the staging after it (RankPlan temp_bytes)
  uint64_t slot_bytes = 0;     // bytes of one FIFO slot: slice_bytes (Simple), lines of slice_bytes (LL)
  // Tables: byte offsets from the start of the blob, each kDevicePlanAlign-aligned.
  uint64_t threadblocks_offset = 0;
  uint64_t steps_offset = 0;
  uint64_t deps_offset = 0;
  uint64_t connections_offset = 0;
  uint64_t precopies_offset = 0;
  // This rank's region.
  uint64_t region_bytes = 0;
  uint64_t progress_offset = 0;  // num_threadblocks 64-bit counters
  uint64_t barrier_offset = 0;   // one 64-bit counter
  // This rank's proxy area (host-pinned, device-mapped): the FIFOs and counters of its proxied connection ends.
  uint64_t proxy_bytes = 0;  // 0: no proxied connection
};

struct DeviceThreadblock {
  uint32_t first_step = 0;  // into the step table
  uint32_t num_steps = 0;
  uint32_t iterations = 0;       // slice iterations: the most slices of any of its steps
  int32_t send_connection = -1;  // into the connection table, -1: sends nothing
  int32_t recv_connection = -1;
  int32_t send_peer = -1;
  int32_t recv_peer = -1;
  int32_t channel = 0;
  uint64_t temp_offset = 0;  // staging in scratch (kStepStaged steps), bytes
  uint64_t temp_bytes = 0;
};

struct DeviceStep {
  DeviceOp op = DeviceOp::kNop;
  DeviceBuffer src_buffer = DeviceBuffer::kInput;
  DeviceBuffer dst_buffer = DeviceBuffer::kOutput;
  uint8_t flags = 0;
  uint32_t slices = 1;     // slices it runs (nops: the most of the steps they depend on, through nops)
  uint32_t dep_begin = 0;  // into the dependency table
  uint32_t dep_count = 0;
  uint32_t order = 0;  // a topological position: every dependency and the threadblock's previous step are lower
  uint32_t reserved = 0;
  uint64_t src_offset = 0;
  uint64_t dst_offset = 0;
  uint64_t bytes = 0;
};

struct DeviceDependency {
  uint32_t tb = 0;
  uint32_t step = 0;  // index within that threadblock
};

struct DeviceConnection {
  int32_t sender = 0;
  int32_t receiver = 0;
  int32_t channel = 0;
  uint32_t tb = 0;      // the threadblock of this rank that drives this end
  uint8_t sending = 0;  // 1: this rank is the sender
  uint8_t proxied = 0;  // 1: the peer is on another host; the offsets below are in this rank's proxy area
  uint8_t reserved[6] = {};
  uint64_t messages = 0;     // messages per launch
  uint64_t fifo_offset = 0;  // in the receiver's region (proxied: this rank's proxy area)
  uint64_t tail_offset = 0;  // in the receiver's region, Simple only (proxied: this rank's proxy area, both protocols)
  uint64_t head_offset = 0;  // in the sender's region (proxied: this rank's proxy area)
};

struct DevicePrecopy {
  DeviceBuffer src_buffer = DeviceBuffer::kInput;
  DeviceBuffer dst_buffer = DeviceBuffer::kOutput;
  uint8_t reserved[6] = {};
  uint64_t src_offset = 0;
  uint64_t dst_offset = 0;
  uint64_t bytes = 0;
};

/// The tables of a blob at `base` (host or device memory), as the kernel indexes them.
struct DevicePlanView {
  const DevicePlanHeader* header = nullptr;
  const DeviceThreadblock* threadblocks = nullptr;
  const DeviceStep* steps = nullptr;
  const DeviceDependency* deps = nullptr;
  const DeviceConnection* connections = nullptr;
  const DevicePrecopy* precopies = nullptr;
};

#if defined(__CUDACC__)
__host__ __device__
#endif
    inline DevicePlanView
    viewDevicePlan(const void* base) {
  const uint8_t* bytes = static_cast<const uint8_t*>(base);
  DevicePlanView view;
  view.header = reinterpret_cast<const DevicePlanHeader*>(bytes);
  view.threadblocks = reinterpret_cast<const DeviceThreadblock*>(bytes + view.header->threadblocks_offset);
  view.steps = reinterpret_cast<const DeviceStep*>(bytes + view.header->steps_offset);
  view.deps = reinterpret_cast<const DeviceDependency*>(bytes + view.header->deps_offset);
  view.connections = reinterpret_cast<const DeviceConnection*>(bytes + view.header->connections_offset);
  view.precopies = reinterpret_cast<const DevicePrecopy*>(bytes + view.header->precopies_offset);
  return view;
}

/// Bytes of message `slice` of a step of `bytes` bytes cut in slices of `slice_bytes` (0: one slice).
#if defined(__CUDACC__)
__host__ __device__
#endif
    inline uint64_t
    deviceSliceBytes(uint64_t bytes, uint64_t slice_bytes, uint64_t slice) {
  if (slice_bytes == 0) return bytes;
  const uint64_t offset = slice * slice_bytes;
  if (offset >= bytes) return 0;
  return bytes - offset < slice_bytes ? bytes - offset : slice_bytes;
}

/// Bytes of its slot that a message of `bytes` data bytes fills, what a proxy moves for it: Simple, the bytes
/// themselves; LL, its 16-byte lines of 8 data bytes each (a zero-byte message is one line).
#if defined(__CUDACC__)
__host__ __device__
#endif
    inline uint64_t
    deviceMessageSlotBytes(DeviceProtocol protocol, uint64_t bytes) {
  if (protocol != DeviceProtocol::kLL) return bytes;
  const uint64_t lines = bytes == 0 ? 1 : (bytes + kLLDataBytes - 1) / kLLDataBytes;
  return lines * kLLLineBytes;
}

}  // namespace braid::cuda
