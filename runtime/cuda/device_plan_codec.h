// Producing, reading back and checking the device-resident executor's plan (device_plan.h) on the CPU. Part of
// braid_cuda_host: no CUDA needed, so every build encodes and validates the plans the kernel would run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "braid/plan.h"
#include "braid/status.h"
#include "cuda/device_plan.h"

namespace braid::cuda {

/// The blob of every rank of `plan` (index = rank), each ready to copy to its device as it is. The plan passes
/// validatePlan first. `host_of_rank[r]` is rank r's host (any integers; equal values: one host, whose ranks map
/// each other's regions); empty: every rank on one host. Every (sender, receiver, channel) with traffic becomes one
/// connection with the FIFO of plan.fifo_depth slots in the receiver's region, or, between ranks of different
/// hosts, a proxied connection with a FIFO, tail and head at each end, in that rank's proxy area (device_plan.h);
/// slots hold the largest message of the plan (Simple: its bytes rounded up to 16; LL: its 8-byte words as 16-byte
/// lines). Steps keep the plan's order, byte ranges and
/// dependencies; nops get the slice count of the steps they depend on (as the executor runs them); receive-reduce
/// steps whose src overlaps their dst are marked to go through the threadblock's staging range; every step gets
/// a topological position (DeviceStep::order).
/// Errors: validatePlan's kInvalidArgument; kUnsupported when two threadblocks of one rank drive the same end of a
/// connection (same peer and channel in the same direction; MSCCL's kernel has one per NCCL connection), naming
/// both; kInvalidArgument naming the steps of a dependency cycle; kUnsupported when a count does not fit the
/// 32-bit fields (steps, dependencies, slices) and for a plan of more than one slice per iteration
/// (Plan::slices_per_iteration; the device loop runs one); kInvalidArgument when host_of_rank is neither empty nor one
/// entry per rank.
Result<std::vector<std::vector<uint8_t>>> encodeDevicePlans(const Plan& plan,
                                                            const std::vector<int>& host_of_rank = {});
/// The blob of one rank (encodeDevicePlans' element `rank`). Errors as encodeDevicePlans; kInvalidArgument for a
/// rank outside the plan.
Result<std::vector<uint8_t>> encodeDevicePlan(const Plan& plan, int rank, const std::vector<int>& host_of_rank = {});

/// A blob read back: the header and copies of its tables.
struct DecodedDevicePlan {
  DevicePlanHeader header;
  std::vector<DeviceThreadblock> threadblocks;
  std::vector<DeviceStep> steps;
  std::vector<DeviceDependency> deps;
  std::vector<DeviceConnection> connections;
  std::vector<DevicePrecopy> precopies;
};

/// Reads a blob: magic, version, blob_bytes == size, every table inside the blob, aligned and as long as its count
/// says. Errors: kInvalidArgument "device plan: <field> ..." naming what is wrong.
Result<DecodedDevicePlan> decodeDevicePlan(const uint8_t* data, size_t size);
/// The blob of a decoded plan, laid out as encodeDevicePlans lays it out (decode then serialize gives the bytes
/// back).
std::vector<uint8_t> serializeDevicePlan(const DecodedDevicePlan& plan);

/// What the kernel relies on within one rank's plan: table indices in range; threadblocks' steps contiguous and
/// in order, iterations = their most slices; steps' byte ranges inside their buffers and on whole elements, their
/// slices the executor's count (nops: the most of their dependencies'); every dependency pointing backwards
/// (order below the step's, and each step's order above its predecessor's in the threadblock); staging inside
/// scratch and as large as the slice of every staged step; each connection end driven by the threadblock that
/// names it, with as many messages per launch as that threadblock's slices in its direction; this rank's region
/// parts (FIFOs of incoming connections, tail and head counters, progress counters, barrier) inside the region
/// and disjoint; the proxy area's parts (FIFO, tail and head of every proxied end) inside proxy_bytes and disjoint.
/// Errors: kInvalidArgument "device plan rank R: tb T step S: ..." naming the first finding.
Status validateDevicePlan(const DecodedDevicePlan& plan);
/// validateDevicePlan on every rank (plans[r] is rank r), then what ties the ranks together: one plan (ranks,
/// protocol, slice, slot size and FIFO depth equal everywhere), and every connection end matched by the peer's
/// opposite end with the same FIFO, tail and head offsets (the peer's FIFO inside the peer's region) and the same
/// sequence of message sizes (in the order each threadblock runs its slices); a connection is proxied on both ends
/// exactly when its ranks' hosts (DevicePlanHeader::host) differ, and then only the message count and sizes must
/// agree (each end has its own proxy area). Errors: kInvalidArgument naming the connection and both ranks.
Status validateDevicePlans(const std::vector<DecodedDevicePlan>& plans);

/// The data bytes of every message of connection end `c` of `plan` in one launch, in the order its threadblock
/// runs them (slices outside, steps inside). `c` is one of plan.connections of a plan validateDevicePlan accepts.
std::vector<uint64_t> deviceMessageBytes(const DecodedDevicePlan& plan, const DeviceConnection& c);

}  // namespace braid::cuda
