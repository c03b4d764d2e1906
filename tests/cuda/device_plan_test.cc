// The device-resident executor's plan encoding (runtime/cuda/device_plan_codec.h) on the CPU: every classical
// algorithm on 2-8 ranks and every corpus MSCCL/TACCL XML that verifies, lowered at small, uneven and multi-slice
// sizes in Simple and LL, encodes for every rank, decodes and serializes back to the same bytes, holds the plan's
// fields, and passes validateDevicePlans (tests/cuda/device_plan_check.h). Layouts of a hand-built plan are checked
// against numbers worked out by hand; corrupted blobs are refused naming the field; plans the kernel cannot run
// (a dependency cycle, two threadblocks on one connection end) are refused at encoding. Ranks on several hosts: the
// same algorithms split into 2 and 3 hosts encode and validate with their cross-host connections proxied, the
// hand-built plan's proxy areas hold the numbers worked out by hand, and corrupted proxied fields are refused.
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

TEST(DevicePlan, ClassicalAlgorithmsAcrossHostsEncodeAndValidate) {
  int checked = 0;
  for (int n : {4, 6, 8}) {
    for (int hosts : {2, 3}) {
      for (const Algorithm& algorithm : testing::classicalTestAlgorithms(n)) {
        const Status status = testing::checkDeviceEncodings(algorithm, {1, 7, 300007}, {1, 2}, hosts);
        EXPECT_TRUE(status.isOk()) << n << " ranks on " << hosts << " hosts: " << status.toString();
        ++checked;
      }
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
  Plan plan = testing::twoRankSendPlan("hand", protocol, 8);
  RankPlan& r1 = plan.ranks[1];
  r1.scratch_bytes = 100;
  PlanThreadblock copy;
  copy.id = 1;
  copy.steps.push_back(PlanStep{OpType::kNop, {}, {}, 0, {Dependency{0, 0}}});
  copy.steps.push_back(PlanStep{OpType::kCopy, {BufferKind::kOutput, 0, 100}, {BufferKind::kScratch, 0, 100}, 100, {}});
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

// The hand-built plan with its ranks on two hosts: the one connection is proxied, and each end has FIFO, tail and
// head in its own proxy area; the regions keep only the progress counters and the barrier.
TEST(DevicePlan, HandPlanAcrossHostsLayoutIsWhatWasWorkedOut) {
  const Plan plan = handPlan(Protocol::kSimple);
  ASSERT_TRUE(testing::checkDeviceEncoding(plan, {0, 1}).isOk());
  std::vector<DecodedDevicePlan> d;
  const std::vector<std::vector<uint8_t>> blobs = cuda::encodeDevicePlans(plan, {0, 1}).value();
  for (const auto& blob : blobs) {
    d.push_back(cuda::decodeDevicePlan(blob.data(), blob.size()).value());
  }
  ASSERT_EQ(d.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(d[r].header.host, r);
    ASSERT_EQ(d[r].connections.size(), 1u);
    const cuda::DeviceConnection& c = d[r].connections[0];
    EXPECT_EQ(c.proxied, 1) << r;
    EXPECT_EQ(c.sending, r == 0 ? 1 : 0);
    EXPECT_EQ(c.messages, 3u);
    // Slots of 48 bytes, 8 of them: FIFO [0, 384), tail at 384, head at 512 (its own 128-byte part), 640 bytes.
    EXPECT_EQ(c.fifo_offset, 0u) << r;
    EXPECT_EQ(c.tail_offset, 384u) << r;
    EXPECT_EQ(c.head_offset, 512u) << r;
    EXPECT_EQ(d[r].header.proxy_bytes, 640u) << r;
  }
  // Rank 0's region: no head any more; progress at 0 (1 tb), barrier at 128, 256 bytes. Rank 1's: no FIFO or tail;
  // progress at 0 (2 tbs), barrier at 128, 256 bytes.
  EXPECT_EQ(d[0].header.progress_offset, 0u);
  EXPECT_EQ(d[0].header.barrier_offset, 128u);
  EXPECT_EQ(d[0].header.region_bytes, 256u);
  EXPECT_EQ(d[1].header.progress_offset, 0u);
  EXPECT_EQ(d[1].header.barrier_offset, 128u);
  EXPECT_EQ(d[1].header.region_bytes, 256u);
  // LL: slots of 5 lines, 80 bytes: FIFO [0, 640), tail at 640, head at 768, 896 bytes.
  const std::vector<uint8_t> ll = cuda::encodeDevicePlan(handPlan(Protocol::kLL), 1, {0, 1}).value();
  const DecodedDevicePlan ll1 = cuda::decodeDevicePlan(ll.data(), ll.size()).value();
  EXPECT_EQ(ll1.connections[0].tail_offset, 640u);
  EXPECT_EQ(ll1.connections[0].head_offset, 768u);
  EXPECT_EQ(ll1.header.proxy_bytes, 896u);
  // Two ranks with the same host value (any integer) are one host: nothing proxied, the layout of one host.
  const std::vector<DecodedDevicePlan> one = encodeAll(plan);
  const std::vector<std::vector<uint8_t>> same_host = cuda::encodeDevicePlans(plan, {7, 7}).value();
  for (const auto& blob : same_host) {
    const DecodedDevicePlan same = cuda::decodeDevicePlan(blob.data(), blob.size()).value();
    EXPECT_EQ(same.header.host, 7);
    EXPECT_EQ(same.header.proxy_bytes, 0u);
    EXPECT_EQ(same.connections[0].proxied, 0);
    EXPECT_EQ(same.header.region_bytes, one[same.header.rank].header.region_bytes);
    EXPECT_EQ(same.connections[0].fifo_offset, one[same.header.rank].connections[0].fifo_offset);
  }
  const Status wrong = cuda::encodeDevicePlans(plan, {0, 1, 2}).status();
  EXPECT_EQ(wrong.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.message().find("3 host entries for 2 ranks"), std::string::npos) << wrong.toString();
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

// Corruptions of the proxied fields of the 4-rank ring on two hosts (ranks 0, 1 and 2, 3): rank 1 sends to rank 2
// and rank 3 to rank 0 through proxies.
TEST(DevicePlan, CorruptedProxiedFieldsAreRefusedNamingTheField) {
  const Algorithm ring = testing::classicAlgorithm(ClassicAlgo::kRing, CollectiveKind::kAllReduce, 4);
  LowerOptions options = callLowerOptions(4 * 100003, false, 1, 4);
  const Plan plan = lowerAlgorithm(ring, options).value();
  const std::vector<int> hosts = {0, 0, 1, 1};
  ASSERT_TRUE(testing::checkDeviceEncoding(plan, hosts).isOk());
  std::vector<DecodedDevicePlan> good;
  const std::vector<std::vector<uint8_t>> blobs = cuda::encodeDevicePlans(plan, hosts).value();
  for (const auto& blob : blobs) {
    good.push_back(cuda::decodeDevicePlan(blob.data(), blob.size()).value());
  }
  const std::vector<DecodedDevicePlan> one_host = encodeAll(plan);
  // Rank 2's end of rank 1 -> rank 2 (proxied, receiving) and rank 1's (proxied, sending).
  auto proxiedEnd = [](DecodedDevicePlan& p, bool sending) -> cuda::DeviceConnection& {
    for (cuda::DeviceConnection& c : p.connections)
      if (c.proxied && (c.sending != 0) == sending) return c;
    return p.connections[0];
  };
  int proxied = 0;
  for (const DecodedDevicePlan& p : good) {
    for (const cuda::DeviceConnection& c : p.connections) proxied += c.proxied;
  }
  ASSERT_GT(proxied, 0);
  const Corruption corruptions[] = {
      {"proxied value", false, [&](auto& p) { proxiedEnd(p[2], false).proxied = 2; }, "proxied is 2, not 0 or 1"},
      {"proxy area", false, [&](auto& p) { p[2].header.proxy_bytes = 128; }, "outside the 128-byte proxy area"},
      {"proxy overlap", false,
       [&](auto& p) { proxiedEnd(p[1], true).head_offset = proxiedEnd(p[1], true).tail_offset; }, "of the proxy area"},
      {"proxy FIFO alignment", false, [&](auto& p) { proxiedEnd(p[2], false).fifo_offset += 8; },
       "proxied FIFO at byte"},
      {"proxy area size", false, [&](auto& p) { p[1].header.proxy_bytes += 8; }, "proxy_bytes"},
      {"same host", false, [&](auto& p) { p[2].header.host = 0; }, "proxied exactly when the hosts differ"},
      {"proxied messages", false, [&](auto& p) { proxiedEnd(p[1], true).messages += 1; }, "is not this threadblock's"},
  };
  for (const Corruption& c : corruptions) {
    std::vector<DecodedDevicePlan> bad = good;
    c.apply(bad);
    const Status status = cuda::validateDevicePlans(bad);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << c.name << ": " << status.toString();
    EXPECT_NE(status.message().find(c.expect), std::string::npos) << c.name << ": " << status.toString();
  }
  // One host's encoding with rank 3 said to be on another host: its connections would have to be proxied.
  std::vector<DecodedDevicePlan> moved = one_host;
  moved[3].header.host = 1;
  const Status status = cuda::validateDevicePlans(moved);
  EXPECT_NE(status.message().find("proxied is 0 but rank"), std::string::npos) << status.toString();
  // One end proxied, the other not: rank 2's proxied receiving end taken from a one-host encoding of itself.
  std::vector<DecodedDevicePlan> half = good;
  half[2].header.host = 0;
  half[2].connections = one_host[2].connections;
  half[2].header.region_bytes = one_host[2].header.region_bytes;
  half[2].header.progress_offset = one_host[2].header.progress_offset;
  half[2].header.barrier_offset = one_host[2].header.barrier_offset;
  half[2].header.proxy_bytes = 0;
  const Status one_sided = cuda::validateDevicePlans(half);
  EXPECT_NE(one_sided.message().find("proxied is 1 on the sender and 0 on the receiver"), std::string::npos)
      << one_sided.toString();
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
  EXPECT_NE(decodeError(bad).find("version 9, this build reads version 2"), std::string::npos);
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

TEST(DevicePlan, SeveralSlicesPerIterationAreUnsupported) {
  // The device loop runs one slice per iteration; a plan lowered for NCCL's ring iteration (2 slices) is refused.
  Plan plan = handPlan(Protocol::kSimple);
  plan.slices_per_iteration = 2;
  for (RankPlan& rank : plan.ranks) {  // staging for two slices, so validatePlan accepts it
    rank.temp_bytes *= 2;
    uint64_t offset = rank.scratch_bytes;
    for (PlanThreadblock& tb : rank.threadblocks) {
      tb.temp.offset = offset;
      tb.temp.bytes *= 2;
      offset += tb.temp.bytes;
    }
  }
  ASSERT_TRUE(validatePlan(plan).isOk()) << validatePlan(plan).toString();
  const Status status = cuda::encodeDevicePlans(plan).status();
  EXPECT_EQ(status.code(), StatusCode::kUnsupported);
  EXPECT_NE(status.message().find("2 slices per iteration"), std::string::npos) << status.toString();
}

}  // namespace
}  // namespace braid
