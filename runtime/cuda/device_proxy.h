// The host proxy of the device-resident executor's proxied connections (device_plan.h): the part of one collective
// that crosses hosts. NCCL's model (its net transport, driven by a proxy thread) under MSCCL's kernel: the kernel
// drives every connection; a connection whose peer is on another host has, at each end, a FIFO of `depth` slots and
// tail/head counters in the rank's proxy area (host-pinned memory the kernel maps), and each rank's proxy moves the
// slots between the two ends over a CPU DataTransport (include/braid/transport.h: threads, tcp, ucx).
//
// For connection end with M messages per launch, launch L's messages are m = 0..M-1, counted L x M + m in the
// counters (they only grow across launches, as the kernel's):
//   sending end:   once tail >= L x M + m + 1 (the kernel wrote slot (L x M + m) % depth), post the send of that
//                  slot with the message's exact size (deviceMessageSlotBytes); when it completed, head = that + 1.
//   receiving end: once head >= L x M + m + 1 - depth (the kernel freed the slot), post the receive of message m
//                  into it; when it completed, tail = L x M + m + 1.
// Counters are written with release and read with acquire semantics; the transport's requests are BufferRefs into
// the proxy area, bound as the rank's scratch. Every proxied end of the launch progresses concurrently in one event
// loop (non-blocking posts and polls), so no connection waits behind another.
//
// Part of braid_cuda_host: no CUDA here; the executor (device_executor.cu) runs it on a thread of its own per
// launch, the tests (tests/cuda/device_emulator.h) beside the emulated kernel.
#pragma once

#include <cstdint>

#include "braid/status.h"
#include "braid/transport.h"
#include "cuda/device_plan_codec.h"
#include "cuda/device_program.h"

namespace braid::cuda {

/// Runs every proxied connection end of `plan` (one rank's blob, decoded; validateDevicePlans accepted it) for its
/// launch `launch` (launches of this plan before this one) until each end moved all its messages. `proxy` is the
/// rank's proxy area as the host addresses it (plan.header.proxy_bytes bytes; the kernel of the same launch uses it
/// at the same time), `transport` an endpoint driving plan.header.rank that carries nothing but proxy traffic (it
/// is bound here: scratch = the proxy area), `timeout_s` the longest a connection may go without progress, `error`
/// the kernel's DeviceError (host address): the proxy stops when its `aborted` flag is set, and sets it when it
/// fails. Returns at once when the plan has no proxied connection.
/// Errors: kTimeout "device proxy: rank R: connection rank S -> rank D channel C, message m of M (launch L): waited
/// more than T s for <what>" (DeviceError filled with code 2: what kData / kCredit naming the peer, or kKernel when
/// it waited for its own kernel); the transport's errors with the same prefix; kRemoteError when the kernel's
/// abort flag was set; kInvalidArgument for a null `proxy` or `error` where they are needed. Every failure aborts
/// `transport` (the peers' proxies stop) and sets the abort flag (the kernel's blocks stop).
Status runDeviceProxy(const DecodedDevicePlan& plan, uint8_t* proxy, uint64_t launch, DataTransport& transport,
                      double timeout_s, DeviceError* error);

}  // namespace braid::cuda
