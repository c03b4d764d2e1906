// Lowering tests: byte ranges computed by hand for small hand-written programs (uneven chunks, in-place
// aliases, instances, scratch sizing, staging), byte agreement on both ends of every connection for the
// classical algorithms, slice sizes, and the errors of bad options and bad programs.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "braid/algorithm.h"
#include "braid/classic.h"
#include "braid/plan.h"
#include "support/ir_steps.h"

namespace braid {
namespace {

constexpr BufferKind kI = BufferKind::kInput;
constexpr BufferKind kO = BufferKind::kOutput;
constexpr BufferKind kS = BufferKind::kScratch;

using testing::recv;
using testing::send;
using testing::step;
using testing::tb;

// An algorithm shell: n ranks with the collective's chunk counts; programs are filled by the test.
Algorithm shell(CollectiveKind kind, int n, int num_chunks, bool in_place, bool out_of_place) {
  Algorithm a;
  a.name = "hand";
  a.collective = kind;
  a.num_ranks = n;
  a.num_chunks = num_chunks;
  a.in_place = in_place;
  a.out_of_place = out_of_place;
  const CollectiveSpec spec = a.spec(in_place).value();
  for (int r = 0; r < n; ++r) {
    RankProgram p;
    p.rank = r;
    p.input_chunks = spec.inputChunks();
    p.output_chunks = spec.outputChunks();
    a.ranks.push_back(p);
  }
  return a;
}

void expectRef(const BufferRef& ref, BufferKind buffer, uint64_t offset, uint64_t bytes) {
  EXPECT_EQ(ref.buffer, buffer);
  EXPECT_EQ(ref.offset, offset);
  EXPECT_EQ(ref.bytes, bytes);
}

Plan lowered(const Algorithm& a, uint64_t size_bytes, bool in_place = false, int instances = 1) {
  LowerOptions o;
  o.size_bytes = size_bytes;
  o.in_place = in_place;
  o.instances = instances;
  o.element_bytes = 4;
  Result<Plan> plan = lowerAlgorithm(a, o);
  EXPECT_TRUE(plan.isOk()) << plan.status().toString();
  return plan.isOk() ? *plan : Plan{};
}

// All-reduce of 10 elements in 3 chunks: chunk i spans [floor(10i/3), floor(10(i+1)/3)) = [0,3), [3,6),
// [6,10), i.e. 3, 3 and 4 elements = 12, 12 and 16 bytes at byte offsets 0, 12 and 24.
TEST(Lower, UnevenChunksGetFloorBoundaries) {
  Algorithm a = shell(CollectiveKind::kAllReduce, 2, 3, false, true);
  for (int r = 0; r < 2; ++r) {
    a.ranks[r].threadblocks.push_back(tb(0, 1 - r, 1 - r,
                                         {send(kI, 0), send(kI, 1), send(kI, 2), send(kI, 1, 2), recv(kO, 0),
                                          recv(kO, 1), recv(kO, 2), recv(kO, 1, 2)}));
  }
  const Plan plan = lowered(a, 40);
  ASSERT_EQ(plan.ranks.size(), 2u);
  EXPECT_EQ(plan.ranks[0].input_bytes, 40u);
  EXPECT_EQ(plan.ranks[0].output_bytes, 40u);
  EXPECT_EQ(plan.ranks[0].scratch_bytes, 0u);
  EXPECT_EQ(plan.element_bytes, 4u);
  const auto& steps = plan.ranks[1].threadblocks[0].steps;
  ASSERT_EQ(steps.size(), 8u);
  expectRef(steps[0].src, kI, 0, 12);
  expectRef(steps[1].src, kI, 12, 12);
  expectRef(steps[2].src, kI, 24, 16);
  expectRef(steps[3].src, kI, 12, 28);  // chunks 1..2: elements [3, 10)
  expectRef(steps[4].dst, kO, 0, 12);
  expectRef(steps[6].dst, kO, 24, 16);
  expectRef(steps[7].dst, kO, 12, 28);
  EXPECT_EQ(steps[2].bytes, 16u);
  EXPECT_EQ(steps[7].bytes, 28u);
}

// All-gather n=2, 3 elements per rank (size 24 bytes): input 12 bytes, output 24. In place, rank r's input
// is output bytes [12r, 12r + 12): the send reads the output there, the copy of the own chunk into the
// output is the identity and becomes a nop (its dependants keep their target), no step names the input.
TEST(Lower, InPlaceAllGatherReadsTheOutputSlice) {
  Algorithm a = shell(CollectiveKind::kAllGather, 2, 2, true, true);
  for (int r = 0; r < 2; ++r) {
    a.ranks[r].threadblocks.push_back(
        tb(0, 1 - r, 1 - r, {step(OpType::kCopy, kI, 0, kO, r), send(kI, 0), recv(kO, 1 - r)}));
    a.ranks[r].precopies.push_back(PreCopy{0, r, 1});
  }
  const Plan in_place = lowered(a, 24, true);
  ASSERT_EQ(in_place.ranks.size(), 2u);
  EXPECT_TRUE(in_place.in_place);
  const RankPlan& r1 = in_place.ranks[1];
  EXPECT_EQ(r1.input_bytes, 12u);
  EXPECT_EQ(r1.output_bytes, 24u);
  EXPECT_TRUE(r1.precopies.empty());  // i[0] -> o[1] is the same memory in place
  const auto& steps = r1.threadblocks[0].steps;
  EXPECT_EQ(steps[0].type, OpType::kNop);
  EXPECT_EQ(steps[0].bytes, 0u);
  expectRef(steps[1].src, kO, 12, 12);
  expectRef(steps[2].dst, kO, 0, 12);
  for (const RankPlan& rank : in_place.ranks) {
    for (const PlanStep& s : rank.threadblocks[0].steps) {
      if (opReadsSrc(s.type)) {
        EXPECT_NE(s.src.buffer, kI);
      }
      if (opWritesDst(s.type)) {
        EXPECT_NE(s.dst.buffer, kI);
      }
    }
  }
  const Plan out_of_place = lowered(a, 24, false);
  const RankPlan& o1 = out_of_place.ranks[1];
  ASSERT_EQ(o1.precopies.size(), 1u);
  expectRef(o1.precopies[0].src, kI, 0, 12);
  expectRef(o1.precopies[0].dst, kO, 12, 12);
  EXPECT_EQ(o1.threadblocks[0].steps[0].type, OpType::kCopy);
  expectRef(o1.threadblocks[0].steps[1].src, kI, 0, 12);
}

// Reduce-scatter n=2, 5 elements per rank out (size 40): input 40 bytes, output 20. In place, rank r's
// output is input bytes [20r, 20r + 20). Rank 1's rrc reduces its share i[1] into o[0], which in place is
// the same memory: the step receives into staging, one step of 20 bytes, right after the (empty) scratch.
TEST(Lower, InPlaceReduceScatterWritesTheInputSliceThroughStaging) {
  Algorithm a = shell(CollectiveKind::kReduceScatter, 2, 2, true, true);
  for (int r = 0; r < 2; ++r) {
    a.ranks[r].threadblocks.push_back(
        tb(0, 1 - r, 1 - r, {send(kI, 1 - r), step(OpType::kRecvReduceCopy, kI, r, kO, 0)}));
  }
  const Plan in_place = lowered(a, 40, true);
  ASSERT_EQ(in_place.ranks.size(), 2u);
  const RankPlan& r1 = in_place.ranks[1];
  EXPECT_EQ(r1.input_bytes, 40u);
  EXPECT_EQ(r1.output_bytes, 20u);
  const PlanStep& rrc = r1.threadblocks[0].steps[1];
  expectRef(rrc.src, kI, 20, 20);
  expectRef(rrc.dst, kI, 20, 20);
  expectRef(r1.threadblocks[0].temp, kS, 0, 20);
  EXPECT_EQ(r1.temp_bytes, 20u);
  // Out of place the destination is the output buffer, disjoint from src: no staging.
  const Plan out_of_place = lowered(a, 40, false);
  expectRef(out_of_place.ranks[1].threadblocks[0].steps[1].dst, kO, 0, 20);
  EXPECT_EQ(out_of_place.ranks[1].temp_bytes, 0u);
  EXPECT_EQ(out_of_place.ranks[1].threadblocks[0].temp.bytes, 0u);
}

// kRecvReduceSend stores nothing, so it always stages; the staging of a threadblock is its largest such
// step, and the threadblocks' staging ranges follow the scratch one after another.
TEST(Lower, StagingFollowsScratchPerThreadblock) {
  // All-reduce n=2 over 3 chunks of 10 elements (12, 12, 16 bytes), two channels. Rank 1 tb1 receives
  // chunk 1 from rank 0 on channel 1, reduces it with its own i[1] and sends the sum back, where rank 0
  // stores it in scratch chunk 0.
  Algorithm a = shell(CollectiveKind::kAllReduce, 2, 3, false, true);
  a.num_channels = 2;
  a.ranks[0].scratch_chunks = 1;
  a.ranks[0].threadblocks = {tb(0, 1, -1, {send(kI, 0), send(kI, 2)}), tb(1, 1, 1, {send(kI, 1), recv(kS, 0)}, 1)};
  a.ranks[1].threadblocks = {tb(0, -1, 0, {recv(kO, 0), recv(kO, 2)}),
                             tb(1, 0, 0, {step(OpType::kRecvReduceSend, kI, 1, kO, -1)}, 1)};
  const Plan plan = lowered(a, 40);
  ASSERT_EQ(plan.ranks.size(), 2u);
  EXPECT_EQ(plan.ranks[0].scratch_bytes, 12u);  // one chunk of 3 elements landed in s[0]
  EXPECT_EQ(plan.ranks[0].temp_bytes, 0u);
  expectRef(plan.ranks[0].threadblocks[1].steps[1].dst, kS, 0, 12);
  expectRef(plan.ranks[0].threadblocks[1].temp, kS, 12, 0);
  EXPECT_EQ(plan.ranks[1].scratch_bytes, 0u);
  expectRef(plan.ranks[1].threadblocks[0].temp, kS, 0, 0);
  expectRef(plan.ranks[1].threadblocks[1].temp, kS, 0, 12);
  EXPECT_EQ(plan.ranks[1].temp_bytes, 12u);
}

// Scratch chunks take the size of what lands in them; one never written is empty. Chunk sizes of 10
// elements in 3 chunks: 3, 3, 4.
TEST(Lower, ScratchChunksAreSizedByTheDataFlow) {
  Algorithm a = shell(CollectiveKind::kAllReduce, 2, 3, false, true);
  for (int r = 0; r < 2; ++r) {
    a.ranks[r].scratch_chunks = 3;
    // s[0] gets chunk 2 (4 elements), s[1] nothing, s[2] chunk 0 (3 elements).
    a.ranks[r].threadblocks.push_back(tb(0, 1 - r, 1 - r,
                                         {send(kI, 2), send(kI, 0), recv(kS, 0), recv(kS, 2),
                                          step(OpType::kCopy, kS, 0, kO, 2), step(OpType::kCopy, kS, 2, kO, 0)}));
  }
  const Plan plan = lowered(a, 40);
  ASSERT_EQ(plan.ranks.size(), 2u);
  EXPECT_EQ(plan.ranks[0].scratch_bytes, 28u);  // 16 + 0 + 12
  const auto& steps = plan.ranks[0].threadblocks[0].steps;
  expectRef(steps[2].dst, kS, 0, 16);
  expectRef(steps[3].dst, kS, 16, 12);
  expectRef(steps[4].src, kS, 0, 16);
  expectRef(steps[4].dst, kO, 24, 16);
}

// A scratch chunk reused for chunks of different sizes works when the size splits evenly, and is refused
// as kUnsupported (naming the chunk) when it does not.
TEST(Lower, ScratchReuseWithUnevenChunksIsRefused) {
  Algorithm a = shell(CollectiveKind::kAllReduce, 2, 3, false, true);
  for (int r = 0; r < 2; ++r) {
    a.ranks[r].scratch_chunks = 1;
    a.ranks[r].threadblocks.push_back(tb(0, 1 - r, 1 - r,
                                         {send(kI, 0), send(kI, 2), recv(kS, 0), step(OpType::kCopy, kS, 0, kO, 0),
                                          recv(kS, 0), step(OpType::kCopy, kS, 0, kO, 2)}));
  }
  const Plan even = lowered(a, 36);  // 9 elements: 3, 3, 3
  EXPECT_EQ(even.ranks[0].scratch_bytes, 12u);
  LowerOptions o;
  o.size_bytes = 40;  // 10 elements: 3, 3, 4
  o.element_bytes = 4;
  Result<Plan> uneven = lowerAlgorithm(a, o);
  ASSERT_FALSE(uneven.isOk());
  EXPECT_EQ(uneven.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(uneven.status().message().find("s[0]"), std::string::npos) << uneven.status().message();
  EXPECT_NE(uneven.status().message().find("nchunksperloop=3"), std::string::npos) << uneven.status().message();
}

// Two instances of an all-gather over 2 chunks per rank with 5 elements per rank (size 40). Input chunks:
// [0,2) and [2,5); output (10 elements, 4 chunks): [0,2), [2,5), [5,7), [7,10). Copy i takes part i of
// every chunk, part i of E elements = [floor(iE/2), floor((i+1)E/2)):
//   input chunk 0: [0,1) | [1,2)    input chunk 1: [2,3) | [3,5)
//   output chunk 2: [5,6) | [6,7)   output chunk 3: [7,8) | [8,10)
// The count-2 steps become one step per chunk; tb t of copy i is tb i*2 + t on channel c + i*1; a dependency
// on IR step 1 (the receive, pieces 2 and 3) becomes one on piece 3 of the same copy.
TEST(Lower, InstancesSplitEveryChunkAndMapDependencies) {
  Algorithm a = shell(CollectiveKind::kAllGather, 2, 4, false, true);
  for (int r = 0; r < 2; ++r) {
    a.ranks[r].threadblocks.push_back(tb(0, 1 - r, 1 - r, {send(kI, 0, 2), recv(kO, 2 * (1 - r), 2)}));
    Step wait = step(OpType::kNop, kI, -1, kO, -1, 0, {Dependency{0, 1}});
    a.ranks[r].threadblocks.push_back(tb(1, -1, -1, {wait}));
  }
  const Plan plan = lowered(a, 40, false, 2);
  ASSERT_EQ(plan.ranks.size(), 2u);
  EXPECT_EQ(plan.instances, 2);
  const RankPlan& r0 = plan.ranks[0];
  ASSERT_EQ(r0.threadblocks.size(), 4u);
  EXPECT_EQ(r0.threadblocks[2].id, 2);
  EXPECT_EQ(r0.threadblocks[0].channel, 0);
  EXPECT_EQ(r0.threadblocks[2].channel, 1);
  EXPECT_EQ(r0.threadblocks[2].send_peer, 1);
  const auto& c0 = r0.threadblocks[0].steps;
  const auto& c1 = r0.threadblocks[2].steps;
  ASSERT_EQ(c0.size(), 4u);
  ASSERT_EQ(c1.size(), 4u);
  expectRef(c0[0].src, kI, 0, 4);
  expectRef(c0[1].src, kI, 8, 4);
  expectRef(c1[0].src, kI, 4, 4);
  expectRef(c1[1].src, kI, 12, 8);
  expectRef(c0[2].dst, kO, 20, 4);
  expectRef(c0[3].dst, kO, 28, 4);
  expectRef(c1[2].dst, kO, 24, 4);
  expectRef(c1[3].dst, kO, 32, 8);
  ASSERT_EQ(r0.threadblocks[1].steps[0].deps.size(), 1u);
  EXPECT_EQ(r0.threadblocks[1].steps[0].deps[0], (Dependency{0, 3}));
  EXPECT_EQ(r0.threadblocks[3].steps[0].deps[0], (Dependency{2, 3}));
  // Together the copies move every byte exactly once: 5 elements = 20 bytes sent per rank.
  uint64_t sent = 0;
  for (const PlanThreadblock& t : r0.threadblocks) {
    for (const PlanStep& s : t.steps) sent += opSends(s.type) ? s.bytes : 0;
  }
  EXPECT_EQ(sent, 20u);
}

// A step over several chunks becomes groups of whole chunks that fit in one slice together, a chunk larger
// than a slice on its own (the executor slices it); dependencies point at the last group. All-reduce n=2,
// 4 chunks of 40 elements = 160 bytes each (size 640 bytes).
//   slice 400: groups of 2 chunks (320 <= 400 < 480): [0,2) [2,4)
//   slice 100: every chunk alone
//   default (512 KiB): one step
// The receive-reduce-send on the other side stages one slice: min(step bytes, slice).
TEST(Lower, MultiChunkStepsBecomeGroupsThatFitInASlice) {
  Algorithm a = shell(CollectiveKind::kAllReduce, 2, 4, false, true);
  a.ranks[0].threadblocks = {tb(0, 1, -1, {send(kI, 0, 4)}),
                             tb(1, -1, -1, {step(OpType::kNop, kI, -1, kO, -1, 0, {Dependency{0, 0}})})};
  a.ranks[1].threadblocks = {tb(0, -1, 0, {step(OpType::kRecvReduceCopy, kI, 0, kI, 0, 4)})};
  auto lower = [&](uint64_t slice) {
    LowerOptions o;
    o.size_bytes = 640;
    o.element_bytes = 4;
    o.slice_bytes = slice;
    Result<Plan> plan = lowerAlgorithm(a, o);
    EXPECT_TRUE(plan.isOk()) << plan.status().toString();
    return *plan;
  };
  const Plan groups = lower(400);
  const auto& sends = groups.ranks[0].threadblocks[0].steps;
  ASSERT_EQ(sends.size(), 2u);
  expectRef(sends[0].src, kI, 0, 320);
  expectRef(sends[1].src, kI, 320, 320);
  EXPECT_EQ(groups.ranks[0].threadblocks[1].steps[0].deps[0], (Dependency{0, 1}));
  const auto& rrc = groups.ranks[1].threadblocks[0].steps;
  ASSERT_EQ(rrc.size(), 2u);
  expectRef(rrc[1].dst, kI, 320, 320);
  expectRef(groups.ranks[1].threadblocks[0].temp, kS, 0, 320);  // src == dst: staged, one group at a time
  const Plan single = lower(100);
  ASSERT_EQ(single.ranks[0].threadblocks[0].steps.size(), 4u);
  expectRef(single.ranks[0].threadblocks[0].steps[3].src, kI, 480, 160);
  EXPECT_EQ(single.ranks[0].threadblocks[1].steps[0].deps[0], (Dependency{0, 3}));
  expectRef(single.ranks[1].threadblocks[0].temp, kS, 0, 100);  // slices of 100 bytes
  const Plan whole = lower(0);
  ASSERT_EQ(whole.ranks[0].threadblocks[0].steps.size(), 1u);
  expectRef(whole.ranks[0].threadblocks[0].steps[0].src, kI, 0, 640);
}

// The sending steps of a connection, in order, have the bytes of its receiving steps, in order: checked
// for every connection of the classical algorithms at uneven sizes, with and without instances.
TEST(Lower, BothEndsOfEveryConnectionAgreeOnBytes) {
  int connections = 0;
  for (ClassicAlgo algo : {ClassicAlgo::kRing, ClassicAlgo::kDirect, ClassicAlgo::kRecursiveDoubling,
                           ClassicAlgo::kDoubleBinaryTree, ClassicAlgo::kPairwise, ClassicAlgo::kMultiRing}) {
    for (CollectiveKind kind : classicCollectives(algo)) {
      for (int n : {3, 5, 6}) {
        ClassicRequest request;
        request.algo = algo;
        request.spec.kind = kind;
        request.spec.num_ranks = n;
        request.spec.chunk_factor = 0;
        Result<Algorithm> a = buildClassic(request);
        ASSERT_TRUE(a.isOk()) << a.status().toString();
        for (int instances : {1, 2}) {
          const CollectiveSpec spec = a->spec(false).value();
          const Plan plan = lowered(*a, 4 * 1003 * static_cast<uint64_t>(spec.sizeMultiplier()), false, instances);
          // (src, dst, channel) -> bytes of each message, from the sender's and from the receiver's side.
          std::map<std::tuple<int, int, int>, std::vector<uint64_t>> sent, received;
          for (const RankPlan& rank : plan.ranks) {
            for (const PlanThreadblock& t : rank.threadblocks) {
              for (const PlanStep& s : t.steps) {
                if (opSends(s.type)) sent[{rank.rank, t.send_peer, t.channel}].push_back(s.bytes);
                if (opReceives(s.type)) received[{t.recv_peer, rank.rank, t.channel}].push_back(s.bytes);
              }
            }
          }
          EXPECT_EQ(sent, received) << a->name << " instances " << instances;
          connections += static_cast<int>(sent.size());
        }
      }
    }
  }
  EXPECT_GT(connections, 500);
}

// Default slices: one slot of NCCL's FIFO (NCCL_STEPS = 8 slots per connection buffer).
//   Simple: 4 MiB / 8 = 524288 bytes.
//   LL: 8 lines/thread x 512 threads x 8 steps x 16 B = 524288 B of lines; / 8 = 65536 B per slot, half data: 32768.
//   LL128: 120 x 640 x 8 x 8 B = 4915200 B; / 8 = 614400 B per slot; 120 of each 128 bytes data: 576000.
TEST(Lower, SliceSizes) {
  EXPECT_EQ(defaultSliceBytes(Protocol::kSimple), 524288u);
  EXPECT_EQ(defaultSliceBytes(Protocol::kLL), 32768u);
  EXPECT_EQ(defaultSliceBytes(Protocol::kLL128), 576000u);
  Algorithm a = shell(CollectiveKind::kAllReduce, 2, 1, false, true);
  a.protocol = Protocol::kLL;
  for (int r = 0; r < 2; ++r) a.ranks[r].threadblocks.push_back(tb(0, 1 - r, 1 - r, {send(kI, 0), recv(kO, 0)}));
  LowerOptions o;
  o.size_bytes = 96;
  o.element_bytes = 8;
  Result<Plan> plan = lowerAlgorithm(a, o);
  ASSERT_TRUE(plan.isOk());
  EXPECT_EQ(plan->protocol, Protocol::kLL);
  EXPECT_EQ(plan->slice_bytes, 32768u);
  o.protocol = Protocol::kLL128;
  EXPECT_EQ(lowerAlgorithm(a, o)->slice_bytes, 576000u);
  o.slice_bytes = 100;  // whole 8-byte elements: 96
  EXPECT_EQ(lowerAlgorithm(a, o)->slice_bytes, 96u);
  o.slice_bytes = 3;  // at least one element
  EXPECT_EQ(lowerAlgorithm(a, o)->slice_bytes, 8u);
}

// The FIFO rule: a step over m = 10 chunks > fifo_depth = 8 shrinks the slice by 8/10 and the plan's FIFO
// holds 10 slices. Simple: 524288 x 8 / 10 = 419430.4 -> 419430 bytes, rounded down to 4-byte elements:
// 419428. A bounded FIFO of 10 or more, or an unbounded one (0), leaves 524288 and the given depth.
TEST(Lower, FifoRuleShrinksSlicesForStepsOverMoreChunksThanSlots) {
  Algorithm a = shell(CollectiveKind::kAllReduce, 2, 10, false, true);
  a.ranks[0].threadblocks = {tb(0, 1, -1, {send(kI, 0, 10)})};
  a.ranks[1].threadblocks = {tb(0, -1, 0, {step(OpType::kRecvReduceCopy, kI, 0, kO, 0, 10)})};
  auto lower = [&](int fifo_depth) {
    LowerOptions o = callLowerOptions(40 << 20, false, 1, 4);
    o.fifo_depth = fifo_depth;
    Result<Plan> plan = lowerAlgorithm(a, o);
    EXPECT_TRUE(plan.isOk()) << plan.status().toString();
    return *plan;
  };
  const Plan shrunk = lower(kNcclSteps);
  EXPECT_EQ(shrunk.slice_bytes, 419428u);
  EXPECT_EQ(shrunk.fifo_depth, 10);
  // Chunks of 4 MiB are larger than a slice: one plan step per chunk.
  EXPECT_EQ(shrunk.ranks[0].threadblocks[0].steps.size(), 10u);
  for (int depth : {10, 0}) {
    const Plan kept = lower(depth);
    EXPECT_EQ(kept.slice_bytes, 524288u) << depth;
    EXPECT_EQ(kept.fifo_depth, depth);
  }
  // The options the Communicator lowers with are lowering's defaults.
  const LowerOptions call = callLowerOptions(1024, true, 2, 8);
  EXPECT_EQ(call.size_bytes, 1024u);
  EXPECT_TRUE(call.in_place);
  EXPECT_EQ(call.instances, 2);
  EXPECT_EQ(call.element_bytes, 8u);
  EXPECT_EQ(call.slice_bytes, 0u);
  EXPECT_EQ(call.fifo_depth, kNcclSteps);
  EXPECT_FALSE(call.protocol.has_value());
}

// With k slices per iteration a step of m chunks posts m x k slices per iteration: m = 10, k = 2 against 8 slots
// shrinks the slice by 8/20 (524288 x 8 / 20 = 209715.2 -> 209712 on 4-byte elements) and the FIFO holds 20; m = 1,
// k = 2 keeps 524288 and 8 slots. Staging then holds k slices.
TEST(Lower, FifoRuleCountsTheSlicesOfAnIteration) {
  Algorithm a = shell(CollectiveKind::kAllReduce, 2, 10, false, true);
  a.ranks[0].threadblocks = {tb(0, 1, -1, {send(kI, 0, 10)})};
  a.ranks[1].threadblocks = {tb(0, -1, 0, {step(OpType::kRecvReduceCopy, kI, 0, kO, 0, 10)})};
  LowerOptions o = callLowerOptions(40 << 20, false, 1, 4);
  o.slices_per_iteration = 2;
  Result<Plan> plan = lowerAlgorithm(a, o);
  ASSERT_TRUE(plan.isOk()) << plan.status().toString();
  EXPECT_EQ(plan->slice_bytes, 209712u);
  EXPECT_EQ(plan->fifo_depth, 20);
  EXPECT_EQ(plan->slices_per_iteration, 2u);

  Algorithm one = shell(CollectiveKind::kAllReduce, 2, 1, false, true);
  one.ranks[0].threadblocks = {tb(0, 1, -1, {send(kI, 0)})};
  one.ranks[1].threadblocks = {tb(0, -1, 0, {step(OpType::kRecvReduceCopy, kI, 0, kO, 0)})};
  Result<Plan> kept = lowerAlgorithm(one, o);
  ASSERT_TRUE(kept.isOk()) << kept.status().toString();
  EXPECT_EQ(kept->slice_bytes, 524288u);
  EXPECT_EQ(kept->fifo_depth, kNcclSteps);
}

TEST(Lower, BadOptionsAreRejected) {
  Algorithm a = shell(CollectiveKind::kAllGather, 2, 2, false, true);
  for (int r = 0; r < 2; ++r) a.ranks[r].threadblocks.push_back(tb(0, 1 - r, 1 - r, {send(kI, 0), recv(kO, 1 - r)}));
  LowerOptions o;
  o.size_bytes = 16;
  o.element_bytes = 4;
  EXPECT_TRUE(lowerAlgorithm(a, o).isOk());
  auto code = [&](LowerOptions bad) { return lowerAlgorithm(a, bad).status().code(); };
  LowerOptions bad = o;
  bad.instances = 0;
  EXPECT_EQ(code(bad), StatusCode::kInvalidArgument);
  bad = o;
  bad.element_bytes = 0;
  EXPECT_EQ(code(bad), StatusCode::kInvalidArgument);
  for (uint32_t k : {0u, kMaxSlicesPerIteration + 1}) {
    bad = o;
    bad.slices_per_iteration = k;
    EXPECT_EQ(code(bad), StatusCode::kInvalidArgument) << k;
    EXPECT_NE(lowerAlgorithm(a, bad).status().message().find("slices_per_iteration must be in 1..32"),
              std::string::npos);
  }
  bad = o;
  bad.size_bytes = 12;  // all-gather of 2 ranks x 4-byte elements needs a multiple of 8
  EXPECT_EQ(code(bad), StatusCode::kInvalidArgument);
  EXPECT_NE(lowerAlgorithm(a, bad).status().message().find("size_bytes=12"), std::string::npos);
  bad = o;
  bad.in_place = true;  // declared out-of-place only
  EXPECT_EQ(code(bad), StatusCode::kInvalidArgument);
  EXPECT_NE(lowerAlgorithm(a, bad).status().message().find("in-place"), std::string::npos);
  Algorithm only_in_place = a;
  only_in_place.in_place = true;
  only_in_place.out_of_place = false;
  EXPECT_EQ(lowerAlgorithm(only_in_place, o).status().code(), StatusCode::kInvalidArgument);
  Algorithm custom = a;
  custom.collective = CollectiveKind::kCustom;
  EXPECT_EQ(lowerAlgorithm(custom, o).status().code(), StatusCode::kUnsupported);
}

TEST(Lower, BadProgramsAreRejectedNamingTheStep) {
  Algorithm good = shell(CollectiveKind::kAllGather, 2, 2, false, true);
  for (int r = 0; r < 2; ++r) {
    good.ranks[r].threadblocks.push_back(tb(0, 1 - r, 1 - r, {send(kI, 0), recv(kO, 1 - r)}));
  }
  LowerOptions o;
  o.size_bytes = 16;
  o.element_bytes = 4;
  auto message = [&](const Algorithm& a) {
    Result<Plan> plan = lowerAlgorithm(a, o);
    EXPECT_FALSE(plan.isOk());
    EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
    return plan.status().message();
  };
  Algorithm out_of_range = good;
  out_of_range.ranks[1].threadblocks[0].steps[1].dst_off = 2;  // o has 2 chunks
  EXPECT_NE(message(out_of_range).find("rank 1 tb 0 step 1 (r): dst o[2..3)"), std::string::npos)
      << message(out_of_range);
  Algorithm deadlock = good;
  for (int r = 0; r < 2; ++r)
    std::swap(deadlock.ranks[r].threadblocks[0].steps[0], deadlock.ranks[r].threadblocks[0].steps[1]);
  EXPECT_NE(message(deadlock).find("deadlock"), std::string::npos) << message(deadlock);
  Algorithm unmatched = good;
  unmatched.ranks[0].threadblocks[0].steps.push_back(send(kI, 0));
  EXPECT_NE(message(unmatched).find("rank 0 tb 0 step 2 sends 1 chunk(s) that no step receives"), std::string::npos)
      << message(unmatched);
  Algorithm count_mismatch = good;
  count_mismatch.ranks[1].threadblocks[0].steps[1] = recv(kO, 0, 2);
  EXPECT_NE(message(count_mismatch)
                .find("rank 1 tb 0 step 1 (r): receives 2 chunk(s) but the matching send (rank 0 tb 0 step 0) sent 1"),
            std::string::npos)
      << message(count_mismatch);
  Algorithm bad_dep = good;
  bad_dep.ranks[0].threadblocks[0].steps[1].deps = {Dependency{3, 0}};
  // Lowering's structure check is the IR's (checkAlgorithmStructure), worded as verify() words it.
  EXPECT_NE(message(bad_dep).find("rank 0 tb 0 step 1 (r): depends on tb 3, which does not exist on rank 0"),
            std::string::npos)
      << message(bad_dep);
  Algorithm bad_channel = good;
  bad_channel.ranks[0].threadblocks[0].channel = 1;  // nchannels = 1
  EXPECT_NE(message(bad_channel).find("channel 1"), std::string::npos) << message(bad_channel);
}

}  // namespace
}  // namespace braid
