// The device-resident executor's host proxy (runtime/cuda/device_proxy.h) on its own, with the test playing both
// ranks' kernels on a 2-rank plan whose one connection crosses hosts: the messages of two launches arrive with
// their exact sizes through FIFOs of 2 slots, the counters carry on across launches; a proxy whose peer or kernel
// never comes times out naming the connection, the message and what it waited for (filling DeviceError and setting
// the abort flag); a kernel that gave up stops it; a failed peer transport is named; a plan without proxied
// connections needs nothing. The proxies beside the emulated kernel: device_program_emulation_test.cc.
#include "cuda/device_proxy.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "braid/plan.h"
#include "cuda/device_plan_check.h"
#include "cuda/device_plan_codec.h"
#include "transport/threads/threads_transport.h"

namespace braid {
namespace {

using cuda::DecodedDevicePlan;
using cuda::DeviceError;

// Rank 0 sends 100 bytes of input in slices of 40 (messages of 40, 40 and 20 bytes) to rank 1, FIFO of 2 slots.
Plan sendPlan(Protocol protocol) { return testing::twoRankSendPlan("send", protocol, 2); }

std::vector<DecodedDevicePlan> decodeAll(const Plan& plan, const std::vector<int>& hosts) {
  std::vector<DecodedDevicePlan> out;
  const std::vector<std::vector<uint8_t>> blobs = cuda::encodeDevicePlans(plan, hosts).value();
  for (const auto& blob : blobs) out.push_back(cuda::decodeDevicePlan(blob.data(), blob.size()).value());
  EXPECT_TRUE(cuda::validateDevicePlans(out).isOk());
  return out;
}

uint64_t load(const uint8_t* area, uint64_t offset) {
  return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(const_cast<uint8_t*>(area) + offset))
      .load(std::memory_order_acquire);
}
void store(uint8_t* area, uint64_t offset, uint64_t value) {
  std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(area + offset)).store(value, std::memory_order_release);
}

// Waits until the counter reaches `target`; false after 10 s.
bool waitFor(const uint8_t* area, uint64_t offset, uint64_t target) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (load(area, offset) < target) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

TEST(DeviceProxy, MovesEveryMessageOfTwoLaunchesThroughWrappingFifos) {
  const std::vector<DecodedDevicePlan> d = decodeAll(sendPlan(Protocol::kSimple), {0, 1});
  const cuda::DeviceConnection& out = d[0].connections[0];
  const cuda::DeviceConnection& in = d[1].connections[0];
  ASSERT_TRUE(out.proxied && in.proxied);
  const uint64_t slot = d[0].header.slot_bytes;
  const uint32_t depth = d[0].header.fifo_depth;
  ASSERT_EQ(depth, 2u);
  std::vector<uint64_t> area0(d[0].header.proxy_bytes / 8), area1(d[1].header.proxy_bytes / 8);
  uint8_t* p0 = reinterpret_cast<uint8_t*>(area0.data());
  uint8_t* p1 = reinterpret_cast<uint8_t*>(area1.data());
  std::vector<std::unique_ptr<DataTransport>> endpoints = createThreadsWorld(2);
  const uint64_t sizes[] = {40, 40, 20};
  for (uint64_t launch = 0; launch < 2; ++launch) {
    DeviceError e0, e1;
    Status s0, s1;
    std::string wrong;
    std::thread proxy0([&] { s0 = cuda::runDeviceProxy(d[0], p0, launch, *endpoints[0], 10, &e0); });
    std::thread proxy1([&] { s1 = cuda::runDeviceProxy(d[1], p1, launch, *endpoints[1], 10, &e1); });
    // Rank 0's kernel: message m into slot m % depth once the slot is free (head), then tail. Its bytes: m's number.
    std::thread kernel0([&] {
      for (uint64_t m = 0; m < 3; ++m) {
        const uint64_t seq = launch * 3 + m;
        if (seq + 1 > depth && !waitFor(p0, out.head_offset, seq + 1 - depth)) return;
        std::memset(p0 + out.fifo_offset + (seq % depth) * slot, static_cast<int>(seq + 1), sizes[m]);
        store(p0, out.tail_offset, seq + 1);
      }
    });
    // Rank 1's kernel: waits for tail, checks the slot, gives it back (head).
    for (uint64_t m = 0; m < 3 && wrong.empty(); ++m) {
      const uint64_t seq = launch * 3 + m;
      if (!waitFor(p1, in.tail_offset, seq + 1)) {
        wrong = "message " + std::to_string(seq) + " never arrived";
        break;
      }
      const uint8_t* bytes = p1 + in.fifo_offset + (seq % depth) * slot;
      for (uint64_t i = 0; i < sizes[m]; ++i) {
        if (bytes[i] != static_cast<uint8_t>(seq + 1))
          wrong = "message " + std::to_string(seq) + " byte " + std::to_string(i);
      }
      store(p1, in.head_offset, seq + 1);
    }
    kernel0.join();
    proxy0.join();
    proxy1.join();
    EXPECT_TRUE(s0.isOk()) << s0.toString();
    EXPECT_TRUE(s1.isOk()) << s1.toString();
    EXPECT_EQ(wrong, "");
    // Every message sent and received: the sender's credits and the receiver's tail stand at the launch's end.
    EXPECT_EQ(load(p0, out.head_offset), (launch + 1) * 3);
    EXPECT_EQ(load(p1, in.tail_offset), (launch + 1) * 3);
    EXPECT_EQ(e0.code + e1.code + e0.aborted + e1.aborted, 0u);
  }
}

// Only rank 1's proxy runs: its receive of message 0 never completes.
TEST(DeviceProxy, AReceiverWhosePeerNeverSendsTimesOutNamingTheMessage) {
  const std::vector<DecodedDevicePlan> d = decodeAll(sendPlan(Protocol::kLL), {0, 1});
  std::vector<uint64_t> area(d[1].header.proxy_bytes / 8);
  std::vector<std::unique_ptr<DataTransport>> endpoints = createThreadsWorld(2);
  DeviceError error;
  const auto start = std::chrono::steady_clock::now();
  const Status status =
      cuda::runDeviceProxy(d[1], reinterpret_cast<uint8_t*>(area.data()), 0, *endpoints[1], 0.2, &error);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(status.code(), StatusCode::kTimeout);
  EXPECT_NE(status.message().find("device proxy: rank 1: connection rank 0 -> rank 1 channel 0, message 0 of 3 "
                                  "(launch 0): waited more than 0.2 s for the message from rank 0"),
            std::string::npos)
      << status.toString();
  EXPECT_EQ(error.code, 2u);
  EXPECT_EQ(error.aborted, 1u);
  EXPECT_EQ(error.rank, 1);
  EXPECT_EQ(error.peer, 0);
  EXPECT_EQ(error.what, static_cast<int32_t>(cuda::DeviceWait::kData));
  EXPECT_GE(error.waited_ns, 200000000u);
  EXPECT_LT(took, 5.0);
}

// Rank 0's proxy runs launch 1, but its kernel never writes: it names its own kernel.
TEST(DeviceProxy, ASenderWhoseKernelNeverWritesTimesOutNamingItsKernel) {
  const std::vector<DecodedDevicePlan> d = decodeAll(sendPlan(Protocol::kSimple), {0, 1});
  std::vector<uint64_t> area(d[0].header.proxy_bytes / 8);
  std::vector<std::unique_ptr<DataTransport>> endpoints = createThreadsWorld(2);
  DeviceError error;
  const Status status =
      cuda::runDeviceProxy(d[0], reinterpret_cast<uint8_t*>(area.data()), 1, *endpoints[0], 0.2, &error);
  EXPECT_EQ(status.code(), StatusCode::kTimeout);
  EXPECT_NE(status.message().find("connection rank 0 -> rank 1 channel 0, message 0 of 3 (launch 1): waited more "
                                  "than 0.2 s for its kernel to write the message (tail)"),
            std::string::npos)
      << status.toString();
  EXPECT_EQ(error.what, static_cast<int32_t>(cuda::DeviceWait::kKernel));
  EXPECT_EQ(error.aborted, 1u);
}

TEST(DeviceProxy, StopsWhenItsKernelGaveUp) {
  const std::vector<DecodedDevicePlan> d = decodeAll(sendPlan(Protocol::kSimple), {0, 1});
  std::vector<uint64_t> area(d[1].header.proxy_bytes / 8);
  std::vector<std::unique_ptr<DataTransport>> endpoints = createThreadsWorld(2);
  DeviceError error;
  error.code = 1;
  error.aborted = 1;
  const Status status =
      cuda::runDeviceProxy(d[1], reinterpret_cast<uint8_t*>(area.data()), 0, *endpoints[1], 30, &error);
  EXPECT_EQ(status.code(), StatusCode::kRemoteError);
  EXPECT_NE(status.message().find("device proxy: rank 1: its kernel gave up"), std::string::npos) << status.toString();
  EXPECT_EQ(error.code, 1u);  // the kernel's report stays
}

TEST(DeviceProxy, AFailedPeerIsNamed) {
  const std::vector<DecodedDevicePlan> d = decodeAll(sendPlan(Protocol::kSimple), {0, 1});
  std::vector<uint64_t> area(d[1].header.proxy_bytes / 8);
  std::vector<std::unique_ptr<DataTransport>> endpoints = createThreadsWorld(2);
  endpoints[0]->abort(internalError("rank 0 went away"));
  DeviceError error;
  const Status status =
      cuda::runDeviceProxy(d[1], reinterpret_cast<uint8_t*>(area.data()), 0, *endpoints[1], 30, &error);
  EXPECT_EQ(status.code(), StatusCode::kRemoteError) << status.toString();
  EXPECT_NE(status.message().find("device proxy: rank 1: connection rank 0 -> rank 1 channel 0, message 0"),
            std::string::npos)
      << status.toString();
  EXPECT_EQ(error.aborted, 1u);
}

TEST(DeviceProxy, APlanWithoutProxiedConnectionsNeedsNothing) {
  const std::vector<DecodedDevicePlan> d = decodeAll(sendPlan(Protocol::kSimple), {});
  ASSERT_EQ(d[1].header.proxy_bytes, 0u);
  std::vector<std::unique_ptr<DataTransport>> endpoints = createThreadsWorld(2);
  EXPECT_TRUE(cuda::runDeviceProxy(d[1], nullptr, 0, *endpoints[1], 30, nullptr).isOk());
  // Proxied connections need the area and the DeviceError.
  const std::vector<DecodedDevicePlan> split = decodeAll(sendPlan(Protocol::kSimple), {0, 1});
  const Status status = cuda::runDeviceProxy(split[1], nullptr, 0, *endpoints[1], 30, nullptr);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("no proxy area"), std::string::npos) << status.toString();
}

}  // namespace
}  // namespace braid
