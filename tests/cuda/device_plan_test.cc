// The device-resident executor's plan encoding (runtime/cuda/device_plan_codec.h) on the CPU: every classical
// algorithm on 2-8 ranks and every corpus MSCCL/TACCL XML that verifies, lowered at small, uneven and multi-slice
// sizes in Simple and LL, encodes for every rank, decodes and serializes back to the same bytes, holds the plan's
// fields, and passes validateDevicePlans (tests/cuda/device_plan_check.h). Layouts of a hand-built plan are checked
// against numbers worked out by hand; corrupted blobs are refused naming the field; plans the kernel cannot run
// (a dependency cycle, two threadblocks on one connection end) are refused at encoding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "braid/algorithm.h"
#include "braid/classic.h"
#include "cuda/device_plan_check.h"
#include "support/classic_requests.h"
#include "support/corpus.h"

namespace braid {
namespace {

using cuda::DecodedDevicePlan;

TEST(DevicePlan, ClassicalAlgorithmsEncodeAndValidate) {
  int checked = 0;
  for (int n : {2, 3, 4, 5, 8}) {
    for (const Algorithm& algorithm : testing::classicalTestAlgorithms(n)) {
      // 1 element, an uneven count, and one that spans several Simple and LL slices.
      const Status status = testing::checkDeviceEncodings(algorithm, {1, 7, 300007}, {1, 2});
      EXPECT_TRUE(status.isOk()) << n << " ranks: " << status.toString();
      ++checked;
    }
  }
  EXPECT_GT(checked, 60);
}

TEST(DevicePlan, CorpusAlgorithmsEncodeAndValidate) {
  BRAID_SKIP_WITHOUT_REALCASES();
  int checked = 0;
  for (const std::filesystem::path& file : testing::corpusXmlFiles()) {
    Result<Algorithm> algorithm = loadAlgorithm(file.string());
    if (!algorithm.isOk() || !verify(*algorithm).ok) continue;
    const uint64_t chunks = static_cast<uint64_t>(algorithm->num_chunks);
    const Status status = testing::checkDeviceEncodings(*algorithm, {chunks, 3 * chunks, 1 + chunks * 4096});
    EXPECT_TRUE(status.isOk()) << file.filename() << ": " << status.toString();
    ++checked;
  }
  EXPECT_GE(checked, 12);
}

// A hand-built plan on 2 ranks: rank 0 sends 100 bytes of input in slices of 40 to rank 1, whose tb 0 receives them
// into its output; rank 1's tb 1 waits (a nop) for the receive and then copies the output to scratch.
Plan handPlan(Protocol protocol) {
  Plan plan;
  plan.algorithm = "hand";
  plan.collective = CollectiveKind::kAllGather;
  plan.num_ranks = 2;
  plan.size_bytes = 100;
  plan.protocol = protocol;
  plan.slice_bytes = 40;
  plan.element_bytes = 4;
  plan.fifo_depth = 8;
  plan.ranks.resize(2);
  for (int r = 0; r < 2; ++r) {
    plan.ranks[r].rank = r;
    plan.ranks[r].input_bytes = 100;
    plan.ranks[r].output_bytes = 100;
  }
  RankPlan& r0 = plan.ranks[0];
  PlanThreadblock send;
  send.id = 0;
  send.send_peer = 1;
  send.steps.push_back(PlanStep{OpType::kSend, {BufferKind::kInput, 0, 100}, {}, 100, {}});
  r0.threadblocks.push_back(send);
  RankPlan& r1 = plan.ranks[1];
  r1.scratch_bytes = 100;
  PlanThreadblock recv;
  recv.id = 0;
  recv.recv_peer = 0;
  recv.steps.push_back(PlanStep{OpType::kRecv, {}, {BufferKind::kOutput, 0, 100}, 100, {}});
  PlanThreadblock copy;
  copy.id = 1;
  copy.steps.push_back(PlanStep{OpType::kNop, {}, {}, 0, {Dependency{0, 0}}});
  copy.steps.push_back(PlanStep{OpType::kCopy, {BufferKind::kOutput, 0, 100}, {BufferKind::kScratch, 0, 100}, 100, {}});
  r1.threadblocks.push_back(recv);
  r1.threadblocks.push_back(copy);
  return plan;
}

std::vector<DecodedDevicePlan> encodeAll(const Plan& plan) {
  std::vector<DecodedDevicePlan> out;
  Result<std::vector<std::vector<uint8_t>>> blobs = cuda::encodeDevicePlans(plan);
  EXPECT_TRUE(blobs.isOk()) << blobs.status().toString();
  if (!blobs.isOk()) return out;
  for (const auto& blob : *blobs) out.push_back(cuda::decodeDevicePlan(blob.data(), blob.size()).value());
  return out;
}

TEST(DevicePlan, HandPlanLayoutIsWhatWasWorkedOut) {
  const Plan plan = handPlan(Protocol::kSimple);
  ASSERT_TRUE(testing::checkDeviceEncoding(plan).isOk());
  const std::vector<DecodedDevicePlan> d = encodeAll(plan);
  ASSERT_EQ(d.size(), 2u);
  // Messages of 40, 40 and 20 bytes; the slot holds the largest, 40 bytes rounded up to 16: 48; 8 slots: 384.
  EXPECT_EQ(d[0].header.slot_bytes, 48u);
  EXPECT_EQ(d[0].header.slice_bytes, 40u);
  // Rank 1 receives: FIFO [0, 384), tail at 384, no heads, progress counters at 512 (2 tbs), barrier at 640.
  EXPECT_EQ(d[1].header.progress_offset, 512u);
  EXPECT_EQ(d[1].header.barrier_offset, 640u);
  EXPECT_EQ(d[1].header.region_bytes, 768u);
  ASSERT_EQ(d[1].connections.size(), 1u);
  const cuda::DeviceConnection& in = d[1].connections[0];
  EXPECT_EQ(in.sending, 0);
  EXPECT_EQ(in.messages, 3u);
  EXPECT_EQ(in.fifo_offset, 0u);
  EXPECT_EQ(in.tail_offset, 384u);
  // Rank 0 sends: its head counter at 0, progress at 128 (1 tb), barrier at 256.
  EXPECT_EQ(d[0].header.progress_offset, 128u);
  EXPECT_EQ(d[0].header.barrier_offset, 256u);
  EXPECT_EQ(d[0].header.region_bytes, 384u);
  ASSERT_EQ(d[0].connections.size(), 1u);
  EXPECT_EQ(d[0].connections[0].head_offset, 0u);
  EXPECT_EQ(d[0].connections[0].fifo_offset, 0u);  // in rank 1's region
  EXPECT_EQ(d[0].connections[0].tail_offset, 384u);
  EXPECT_EQ(d[0].threadblocks[0].send_connection, 0);
  EXPECT_EQ(d[0].threadblocks[0].iterations, 3u);
  // The nop stands for the 3-slice receive; the copy after it is one slice of 100 bytes... in slices of 40: 3.
  EXPECT_EQ(d[1].steps[1].slices, 3u);
  EXPECT_EQ(d[1].steps[2].slices, 3u);
  EXPECT_LT(d[1].steps[0].order, d[1].steps[1].order);
  EXPECT_LT(d[1].steps[1].order, d[1].steps[2].order);
  // LL: the largest message, 40 bytes, is 5 lines of 16 bytes.
  const std::vector<DecodedDevicePlan> ll = encodeAll(handPlan(Protocol::kLL));
  EXPECT_EQ(ll[0].header.slot_bytes, 80u);
  EXPECT_EQ(ll[0].header.protocol, cuda::DeviceProtocol::kLL);
  EXPECT_EQ(ll[1].connections[0].tail_offset, 640u);  // FIFO of 8 x 80 bytes
}

// One corruption of a valid encoding (of the 4-rank ring, or of the hand-built plan, whose rank 1 has a
// dependency) and the words the validator must use for it.
struct Corruption {
  const char* name;
  bool hand_plan;
  std::function<void(std::vector<DecodedDevicePlan>&)> apply;
  const char* expect;
};

TEST(DevicePlan, CorruptedPlansAreRefusedNamingTheField) {
  const Algorithm ring = testing::classicAlgorithm(ClassicAlgo::kRing, CollectiveKind::kAllReduce, 4);
  LowerOptions options = callLowerOptions(4 * 100003, false, 1, 4);
  const Plan plan = lowerAlgorithm(ring, options).value();
  ASSERT_TRUE(testing::checkDeviceEncoding(plan).isOk());
  const std::vector<DecodedDevicePlan> good = encodeAll(plan);
  const std::vector<DecodedDevicePlan> hand = encodeAll(handPlan(Protocol::kSimple));
  ASSERT_EQ(hand.size(), 2u);
  ASSERT_EQ(hand[1].deps.size(), 1u);
  // Rank 1's first receiving connection.
  auto sendConnection = [](DecodedDevicePlan& p) -> cuda::DeviceConnection& {
    for (cuda::DeviceConnection& c : p.connections)
      if (c.sending) return c;
    return p.connections[0];
  };
  auto writingStep = [](DecodedDevicePlan& p) -> cuda::DeviceStep& {
    for (cuda::DeviceStep& s : p.steps)
      if (s.op == cuda::DeviceOp::kRecv || s.op == cuda::DeviceOp::kRecvReduceCopySend) return s;
    return p.steps[0];
  };
  auto recvConnection = [](DecodedDevicePlan& p) -> cuda::DeviceConnection& {
    for (cuda::DeviceConnection& c : p.connections)
      if (!c.sending) return c;
    return p.connections[0];
  };
  const Corruption corruptions[] = {
      {"forward dependency", true, [&](auto& p) { p[1].steps[1].order = p[1].steps[0].order; },
       "does not point backwards"},
      {"dependency target", true, [&](auto& p) { p[1].deps[0].step = 1000; }, "names no step"},
      {"nop slices", true, [&](auto& p) { p[1].steps[1].slices = 1; }, "the executor runs"},
      {"messages", false, [&](auto& p) { recvConnection(p[1]).messages += 1; }, "is not this threadblock's"},
      {"dst outside", false, [&](auto& p) { writingStep(p[1]).dst_offset = p[1].header.output_bytes; },
       "is outside the"},
      {"slices", false, [&](auto& p) { p[1].steps[0].slices += 1; }, "the executor runs"},
      {"iterations", false, [&](auto& p) { p[1].threadblocks[0].iterations += 1; }, "iterations but its steps"},
      {"FIFO offset", false, [&](auto& p) { sendConnection(p[0]).fifo_offset += 128; }, "the sender has"},
      {"overlap", false, [&](auto& p) { p[1].header.progress_offset = recvConnection(p[1]).tail_offset; }, "overlaps"},
      {"region", false, [&](auto& p) { p[1].header.region_bytes = 64; }, "outside the 64-byte region"},
      {"connection tb", false, [&](auto& p) { recvConnection(p[1]).tb = 1 - recvConnection(p[1]).tb; }, "connection"},
      {"rank", false, [&](auto& p) { p[2].header.rank = 3; }, "entry 2 is rank 3"},
      {"slot", false, [&](auto& p) { p[3].header.slot_bytes += 16; }, "rank 3 has protocol"},
      {"unknown op", false, [&](auto& p) { p[1].steps[0].op = static_cast<cuda::DeviceOp>(42); }, "is not a step type"},
  };
  for (const Corruption& c : corruptions) {
    std::vector<DecodedDevicePlan> bad = c.hand_plan ? hand : good;
    c.apply(bad);
    const Status status = cuda::validateDevicePlans(bad);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << c.name << ": " << status.toString();
    EXPECT_NE(status.message().find(c.expect), std::string::npos) << c.name << ": " << status.toString();
  }
  // A message shorter on the sender than on the receiver: rank 0's first send step loses 4 bytes.
  std::vector<DecodedDevicePlan> shorter = good;
  for (cuda::DeviceStep& s : shorter[0].steps) {
    if (s.op == cuda::DeviceOp::kSend) {
      s.bytes -= 4;
      break;
    }
  }
  const Status mismatch = cuda::validateDevicePlans(shorter);
  EXPECT_NE(mismatch.message().find("bytes on the sender"), std::string::npos) << mismatch.toString();
}

TEST(DevicePlan, CorruptedBlobsAreRefusedWhenDecoded) {
  const std::vector<uint8_t> blob = cuda::encodeDevicePlan(handPlan(Protocol::kSimple), 1).value();
  ASSERT_TRUE(cuda::decodeDevicePlan(blob.data(), blob.size()).isOk());
  auto decodeError = [](std::vector<uint8_t> bytes) {
    return cuda::decodeDevicePlan(bytes.data(), bytes.size()).status().message();
  };
  std::vector<uint8_t> bad = blob;
  bad[0] ^= 1;
  EXPECT_NE(decodeError(bad).find("magic"), std::string::npos);
  bad = blob;
  bad[4] = 9;
  EXPECT_NE(decodeError(bad).find("version 9, this build reads version 1"), std::string::npos);
  bad = blob;
  bad.resize(blob.size() - 128);
  EXPECT_NE(decodeError(bad).find("blob_bytes"), std::string::npos);
  cuda::DevicePlanHeader header;
  std::memcpy(&header, blob.data(), sizeof header);
  header.steps_offset += 8;
  bad = blob;
  std::memcpy(bad.data(), &header, sizeof header);
  EXPECT_NE(decodeError(bad).find("step table at byte"), std::string::npos);
  header.steps_offset = blob.size();
  header.num_steps = 1;
  std::memcpy(bad.data(), &header, sizeof header);
  EXPECT_NE(decodeError(bad).find("runs past"), std::string::npos);
  EXPECT_EQ(cuda::decodeDevicePlan(blob.data(), 10).status().code(), StatusCode::kInvalidArgument);
}

TEST(DevicePlan, DependencyCycleIsRefused) {
  Plan plan = handPlan(Protocol::kSimple);
  // Rank 1: tb 0's receive now waits for tb 1's copy, which waits (through the nop) for the receive.
  plan.ranks[1].threadblocks[0].steps[0].deps.push_back(Dependency{1, 1});
  const Result<std::vector<uint8_t>> blob = cuda::encodeDevicePlan(plan, 1);
  EXPECT_EQ(blob.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(blob.status().message().find("form a cycle"), std::string::npos) << blob.status().toString();
  EXPECT_NE(blob.status().message().find("tb 0 step 0"), std::string::npos) << blob.status().toString();
}

TEST(DevicePlan, TwoThreadblocksOnOneConnectionEndAreUnsupported) {
  Plan plan = handPlan(Protocol::kSimple);
  // Rank 0 sends the first 40 bytes from tb 0 and the rest from a second threadblock on the same channel.
  PlanThreadblock second = plan.ranks[0].threadblocks[0];
  second.id = 1;
  second.steps[0] = PlanStep{OpType::kSend, {BufferKind::kInput, 40, 60}, {}, 60, {}};
  plan.ranks[0].threadblocks[0].steps[0] = PlanStep{OpType::kSend, {BufferKind::kInput, 0, 40}, {}, 40, {}};
  plan.ranks[0].threadblocks.push_back(second);
  plan.ranks[1].threadblocks[0].steps[0] = PlanStep{OpType::kRecv, {}, {BufferKind::kOutput, 0, 40}, 40, {}};
  plan.ranks[1].threadblocks[0].steps.push_back(PlanStep{OpType::kRecv, {}, {BufferKind::kOutput, 40, 60}, 60, {}});
  ASSERT_TRUE(validatePlan(plan).isOk());
  const Status status = cuda::encodeDevicePlans(plan).status();
  EXPECT_EQ(status.code(), StatusCode::kUnsupported);
  EXPECT_NE(status.message().find("tb 0 and tb 1 both sends to rank 1 on channel 0"), std::string::npos)
      << status.toString();
}

}  // namespace
}  // namespace braid
