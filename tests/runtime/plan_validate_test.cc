// validatePlan(): a lowered ring all-reduce passes; the same plan with one field corrupted at a time is rejected
// with a message that names the rank, threadblock, step and field; the executor refuses such a plan with the same
// message before it posts anything.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "braid/algorithm.h"
#include "braid/classic.h"
#include "braid/executor.h"
#include "braid/plan.h"
#include "runtime/mem_transport.h"

namespace braid {
namespace {

using testing::MemTransport;

// Ring all-reduce on 3 ranks, 3 chunks of 64 floats (256 bytes) each, slices of 64 bytes: every rank has
// receive-reduce-send steps (staged), 4 slices per step, and sends and receives on channel 0 between ring
// neighbours.
Plan ringPlan() {
  ClassicRequest request;
  request.algo = ClassicAlgo::kRing;
  request.spec.kind = CollectiveKind::kAllReduce;
  request.spec.num_ranks = 3;
  request.spec.chunk_factor = 0;
  Result<Algorithm> ring = buildClassic(request);
  EXPECT_TRUE(ring.isOk());
  ring->name = "ring";
  LowerOptions options;
  options.size_bytes = 3 * 64 * 4;
  options.element_bytes = 4;
  options.slice_bytes = 64;
  Result<Plan> plan = lowerAlgorithm(*ring, options);
  EXPECT_TRUE(plan.isOk()) << plan.status().toString();
  return *plan;
}

// The first step of rank `r` that satisfies `pred`, as (tb, step).
template <typename Pred>
std::pair<int, int> findStep(const Plan& plan, int r, Pred pred) {
  const RankPlan& rank = plan.ranks[r];
  for (size_t t = 0; t < rank.threadblocks.size(); ++t) {
    for (size_t s = 0; s < rank.threadblocks[t].steps.size(); ++s) {
      if (pred(rank.threadblocks[t].steps[s])) return {static_cast<int>(t), static_cast<int>(s)};
    }
  }
  ADD_FAILURE() << "no such step on rank " << r;
  return {0, 0};
}

std::string rejection(const Plan& plan, const std::vector<int>& ranks = {}) {
  const Status status = validatePlan(plan, ranks);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.toString();
  return status.message();
}

#define EXPECT_REJECTED(plan, text)                                                                    \
  do {                                                                                                 \
    const std::string message = rejection(plan);                                                       \
    EXPECT_NE(message.find(text), std::string::npos) << "expected '" << (text) << "' in: " << message; \
  } while (0)

TEST(PlanValidate, LoweredPlanPasses) {
  const Plan plan = ringPlan();
  EXPECT_TRUE(validatePlan(plan).isOk()) << validatePlan(plan).toString();
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(validatePlan(plan, {r}).isOk());
  // The staged steps are there (the temp checks below are not vacuous).
  EXPECT_GT(plan.ranks[0].temp_bytes, 0u);
}

TEST(PlanValidate, PlanAndRankFields) {
  const Plan good = ringPlan();
  Plan bad = good;
  bad.num_ranks = 4;
  EXPECT_REJECTED(bad, "plan 'ring': 3 rank plans for 4 ranks");
  bad = good;
  bad.element_bytes = 0;
  EXPECT_REJECTED(bad, "element_bytes is 0");
  bad = good;
  bad.instances = 0;
  EXPECT_REJECTED(bad, "instances must be >= 1, got 0");
  for (uint32_t k : {0u, kMaxSlicesPerIteration + 1}) {
    bad = good;
    bad.slices_per_iteration = k;
    EXPECT_REJECTED(bad, fmt::format("slices_per_iteration must be in 1..32, got {}", k));
  }
  bad = good;
  bad.ranks[1].rank = 2;
  EXPECT_REJECTED(bad, "ranks[1] is labelled rank 2");
  bad = good;
  bad.ranks[2].scratch_bytes = UINT64_MAX;
  EXPECT_REJECTED(bad, "rank 2: scratch_bytes 18446744073709551615 + temp_bytes");
  EXPECT_NE(rejection(good, {0, 0}).find("local rank 0 is listed twice"), std::string::npos);
  EXPECT_NE(rejection(good, {3}).find("local rank 3 is outside plan 'ring' of 3 ranks"), std::string::npos);
}

TEST(PlanValidate, ThreadblockFields) {
  const Plan good = ringPlan();
  Plan bad = good;
  bad.ranks[1].threadblocks[0].id = 5;
  EXPECT_REJECTED(bad, "rank 1: threadblock at position 0 has id 5");
  bad = good;
  bad.ranks[1].threadblocks[0].send_peer = 3;
  EXPECT_REJECTED(bad, "rank 1 tb 0: send peer 3 is not -1 or another rank in [0, 3)");
  bad = good;
  bad.ranks[1].threadblocks[0].recv_peer = 1;
  EXPECT_REJECTED(bad, "rank 1 tb 0: recv peer 1 is not -1 or another rank in [0, 3)");
  bad = good;
  bad.ranks[0].threadblocks[0].channel = -1;
  EXPECT_REJECTED(bad, "rank 0 tb 0: channel -1 is negative");
  // Staging must lie after the algorithm's scratch, inside the staging region.
  bad = good;
  PlanThreadblock& staged = bad.ranks[0].threadblocks[0];
  ASSERT_GT(staged.temp.bytes, 0u);
  staged.temp.offset = bad.ranks[0].scratch_bytes + bad.ranks[0].temp_bytes;
  EXPECT_REJECTED(bad, "rank 0 tb 0: staging s[");
  bad = good;
  bad.ranks[0].threadblocks[0].temp.buffer = BufferKind::kOutput;
  EXPECT_REJECTED(bad, "is outside the staging region");
  // Too small for a staged slice (64 bytes).
  bad = good;
  bad.ranks[0].threadblocks[0].temp.bytes = 4;
  EXPECT_REJECTED(bad, "needs 64 bytes of staging but the threadblock has 4");
  // Iterations of 3 slices stage 3 x 64 bytes; the plan lowered for one slice per iteration has 64.
  bad = good;
  bad.slices_per_iteration = 3;
  EXPECT_REJECTED(bad, "needs 192 bytes of staging but the threadblock has 64");
}

TEST(PlanValidate, StepFields) {
  const Plan good = ringPlan();
  const auto [st, ss] = findStep(good, 2, [](const PlanStep& s) { return s.type == OpType::kSend; });
  Plan bad = good;
  PlanStep* step = &bad.ranks[2].threadblocks[st].steps[ss];
  const std::string at = "rank 2 tb " + std::to_string(st) + " step " + std::to_string(ss) + " (s)";
  step->src.offset = bad.ranks[2].input_bytes;  // one past the end
  EXPECT_REJECTED(bad, at + ": src i[768..+256) is outside the 768-byte buffer");
  bad = good;
  step = &bad.ranks[2].threadblocks[st].steps[ss];
  step->src.offset += 2;  // inside, but not on a float
  EXPECT_REJECTED(bad, "is not on whole 4-byte elements");
  bad = good;
  step = &bad.ranks[2].threadblocks[st].steps[ss];
  step->src.bytes += 4;
  EXPECT_REJECTED(bad, at + ": moves 256 bytes but its src has 260");
  bad = good;
  step = &bad.ranks[2].threadblocks[st].steps[ss];
  step->type = static_cast<OpType>(42);
  EXPECT_REJECTED(bad, "step " + std::to_string(ss) + ": op type 42 is not an OpType");
  bad = good;
  step = &bad.ranks[2].threadblocks[st].steps[ss];
  step->deps = {Dependency{9, 0}};
  EXPECT_REJECTED(bad, at + ": dependency on tb 9 step 0 names no earlier step of rank 2");
  bad = good;
  step = &bad.ranks[2].threadblocks[st].steps[ss];
  step->deps = {Dependency{st, ss}};  // itself
  EXPECT_REJECTED(bad, "names no earlier step");
  // A receive on a threadblock without a recv peer.
  const auto [rt, rs] = findStep(good, 1, [](const PlanStep& s) { return opReceives(s.type); });
  bad = good;
  bad.ranks[1].threadblocks[rt].recv_peer = -1;
  EXPECT_REJECTED(bad, "rank 1 tb " + std::to_string(rt) + " step " + std::to_string(rs));
  EXPECT_REJECTED(bad, "receives but has no recv peer");
  // Precopies are ranges like any other.
  bad = good;
  bad.ranks[0].precopies.push_back(PlanCopy{BufferRef{BufferKind::kInput, 0, 8}, BufferRef{BufferKind::kOutput, 0, 4}});
  EXPECT_REJECTED(bad, "rank 0 copy 0: copies 8 bytes into a range of 4");
  bad = good;
  bad.ranks[0].precopies.push_back(
      PlanCopy{BufferRef{BufferKind::kScratch, 0, 8}, BufferRef{BufferKind::kOutput, 0, 8}});
  EXPECT_REJECTED(bad, "rank 0 copy 0: src s[0..+8) is outside the 0-byte buffer");
}

TEST(PlanValidate, TooManySlices) {
  Plan plan;
  plan.algorithm = "huge";
  plan.num_ranks = 1;
  plan.slice_bytes = 1;
  RankPlan rank;
  rank.input_bytes = rank.output_bytes = uint64_t{1} << 40;
  PlanThreadblock tb;
  PlanStep copy;
  copy.type = OpType::kCopy;
  copy.bytes = uint64_t{1} << 33;
  copy.src = BufferRef{BufferKind::kInput, 0, copy.bytes};
  copy.dst = BufferRef{BufferKind::kOutput, 0, copy.bytes};
  tb.steps.push_back(copy);
  rank.threadblocks.push_back(tb);
  plan.ranks.push_back(rank);
  EXPECT_REJECTED(plan, "rank 0 tb 0 step 0 (cpy): 8589934592 bytes in slices of 1 bytes are too many slices");
  plan.slice_bytes = 1 << 20;
  EXPECT_TRUE(validatePlan(plan).isOk());
}

// Sends and receives of one connection must move the same slices and bytes; only connections with both ends
// among the ranks checked are compared (a rank that builds its own part checks only that part).
TEST(PlanValidate, PairingPerConnection) {
  const Plan good = ringPlan();
  const auto [st, ss] = findStep(good, 0, [](const PlanStep& s) { return s.type == OpType::kSend; });
  Plan bad = good;
  bad.ranks[0].threadblocks[st].steps.erase(bad.ranks[0].threadblocks[st].steps.begin() + ss);
  for (PlanThreadblock& tb : bad.ranks[0].threadblocks) {
    for (PlanStep& step : tb.steps) step.deps.clear();  // keep the dependencies in range after the erase
  }
  const int to = good.ranks[0].threadblocks[st].send_peer;
  const std::string message = rejection(bad);
  // Every step of the ring moves one 256-byte chunk in 4 slices of 64 bytes; rank 0 now sends one step fewer.
  uint64_t sent = 0;
  for (const PlanThreadblock& tb : good.ranks[0].threadblocks) {
    if (tb.send_peer != to) continue;
    for (const PlanStep& step : tb.steps) sent += opSends(step.type) ? 1 : 0;
  }
  EXPECT_NE(message.find("rank 0 sends " + std::to_string(4 * (sent - 1)) + " slice(s) (" +
                         std::to_string(256 * (sent - 1)) + " bytes) to rank " + std::to_string(to) + " on channel 0"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("receives " + std::to_string(4 * sent) + " (" + std::to_string(256 * sent) + " bytes)"),
            std::string::npos)
      << message;
  EXPECT_TRUE(validatePlan(bad, {0}).isOk());  // rank `to` is not checked: nothing to pair with
  EXPECT_FALSE(validatePlan(bad, {0, to}).isOk());
  // Same slices, different bytes.
  bad = good;
  PlanStep& step = bad.ranks[0].threadblocks[st].steps[ss];
  step.bytes = step.src.bytes = 252;  // still 4 slices
  EXPECT_REJECTED(bad, "rank 0 sends");
}

TEST(PlanValidate, ExecutorRefusesWithTheSameMessage) {
  const Plan good = ringPlan();
  Plan bad = good;
  bad.ranks[1].threadblocks[0].send_peer = 7;
  MemTransport mem(good);
  Result<ExecResult> result = execute(bad, mem);
  ASSERT_FALSE(result.isOk());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(result.status().message(), validatePlan(bad).message());
  EXPECT_EQ(mem.counters().sends, 0);  // refused before anything was posted
  EXPECT_TRUE(execute(good, mem).isOk());
}

}  // namespace
}  // namespace braid
