// Broadcast and reduce of the classical algorithms (ring chains, direct star, binomial tree) lowered and
// executed over MemTransport with real data, every root of n = 3, 5, 8, both modes, against a reference
// computed here from the definitions: broadcast leaves the root's input on every rank, reduce leaves the
// element-wise sum of all inputs on the root and nothing anywhere else.
//
// Data: input element i of rank r holds f(r, i) = r*1000003 + i*7919 + 1 (uint32), every element of every
// rank distinct; sums wrap around (MemTransport's reduction). Unwritten memory starts as kPoison, so a
// non-root reduce output that was written, or a broadcast element that never arrived, shows.
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

constexpr uint32_t kPoison = 0xDEADBEEFu;

uint32_t f(int rank, uint64_t index) {
  return static_cast<uint32_t>(rank) * 1000003u + static_cast<uint32_t>(index) * 7919u + 1u;
}

struct Case {
  ClassicAlgo algo = ClassicAlgo::kRing;
  int channels = 0;
  CollectiveKind kind = CollectiveKind::kBroadcast;
  int n = 0;
  int root = 0;
  bool in_place = false;
  uint64_t count = 0;  // elements of 4 bytes per rank (the whole buffer: broadcast/reduce)
  uint64_t slice_bytes = 0;
  int fifo_depth = 0;
  int instances = 1;

  std::string toString() const {
    return fmt::format("{} channels={} {} n={} root={} {} count={} slice={} fifo={} instances={}",
                       classicAlgoName(algo), channels, collectiveName(kind), n, root,
                       in_place ? "in-place" : "out-of-place", count, slice_bytes, fifo_depth, instances);
  }
};

// Lowers and runs `algorithm` for case `c` (its kind, n, root, mode, count, slices); returns "" when every
// element is as the reference says, else the first mismatches (or the error).
std::string runAlgorithm(const Algorithm& algorithm, const Case& c) {
  LowerOptions lower;
  lower.size_bytes = c.count * 4;
  lower.in_place = c.in_place;
  lower.element_bytes = 4;
  lower.slice_bytes = c.slice_bytes;
  lower.instances = c.instances;
  Result<Plan> plan = lowerAlgorithm(algorithm, lower);
  if (!plan.isOk()) return "lower: " + plan.status().toString();
  MemTransport mem(*plan, /*seed=*/c.count + 17 * c.root + 1, /*move_data=*/true, c.fifo_depth);
  // In place the input is the output buffer (broadcast and reduce alias element i to element i).
  const BufferKind input = c.in_place ? BufferKind::kOutput : BufferKind::kInput;
  for (int r = 0; r < c.n; ++r) {
    for (BufferKind b : {BufferKind::kInput, BufferKind::kOutput, BufferKind::kScratch}) {
      for (uint64_t w = 0; w < mem.buffer(r, b).size() / 4; ++w) mem.setWord(r, b, w, kPoison);
    }
    if (mem.buffer(r, input).size() < c.count * 4) return fmt::format("rank {}: input buffer too small", r);
    for (uint64_t i = 0; i < c.count; ++i) mem.setWord(r, input, i, f(r, i));
  }
  Result<ExecResult> result = execute(*plan, mem);
  if (!result.isOk()) return "execute: " + result.status().toString();

  std::string wrong;
  int mismatches = 0;
  auto check = [&](int r, BufferKind b, uint64_t i, uint32_t want, const char* what) {
    const uint32_t got = mem.word(r, b, i);
    if (got == want) return;
    if (mismatches++ < 4) {
      wrong += fmt::format("rank {} {}[{}] = {:#x}, expected {:#x} ({})\n", r, bufferName(b), i, got, want, what);
    }
  };
  for (int r = 0; r < c.n; ++r) {
    if (mem.buffer(r, BufferKind::kOutput).size() < c.count * 4) return fmt::format("rank {}: output too small", r);
    for (uint64_t i = 0; i < c.count; ++i) {
      if (c.kind == CollectiveKind::kBroadcast) {
        check(r, BufferKind::kOutput, i, f(c.root, i), "the root's input");
      } else if (r == c.root) {
        uint32_t sum = 0;  // the naive reference: add every rank's element, wrapping as uint32 does
        for (int q = 0; q < c.n; ++q) sum += f(q, i);
        check(r, BufferKind::kOutput, i, sum, "sum over all ranks");
      } else {
        // Not the root: out of place the output is not touched, in place the buffer keeps the input.
        check(r, BufferKind::kOutput, i, c.in_place ? f(r, i) : kPoison, "untouched");
      }
      if (!c.in_place) check(r, BufferKind::kInput, i, f(r, i), "sendbuff is const");
    }
  }
  if (mismatches > 4) wrong += fmt::format("... {} wrong elements in all\n", mismatches);
  return wrong;
}

Result<Algorithm> buildCase(const Case& c) {
  ClassicRequest request;
  request.algo = c.algo;
  request.spec.kind = c.kind;
  request.spec.num_ranks = c.n;
  request.spec.root = c.root;
  request.spec.in_place = c.in_place;
  request.spec.chunk_factor = 0;
  request.num_channels = c.channels;
  return buildClassic(request);
}

std::string runCase(const Case& c) {
  Result<Algorithm> algorithm = buildCase(c);
  if (!algorithm.isOk()) return "build: " + algorithm.status().toString();
  return runAlgorithm(*algorithm, c);
}

struct Config {
  ClassicAlgo algo;
  int channels;
};

const std::vector<Config> kConfigs = {
    {ClassicAlgo::kRing, 0},   {ClassicAlgo::kRing, 2},   {ClassicAlgo::kMultiRing, 0},
    {ClassicAlgo::kDirect, 0}, {ClassicAlgo::kDirect, 2}, {ClassicAlgo::kRecursiveDoubling, 0},
};

// Runs every config x collective x n x root x mode x count with the given slices/FIFO; returns the runs.
int matrix(const std::vector<uint64_t>& counts, uint64_t slice_bytes, int fifo_depth, int instances = 1) {
  int runs = 0;
  for (const Config& config : kConfigs) {
    for (CollectiveKind kind : {CollectiveKind::kBroadcast, CollectiveKind::kReduce}) {
      for (int n : {3, 5, 8}) {
        for (int root = 0; root < n; ++root) {
          for (bool in_place : {false, true}) {
            for (uint64_t count : counts) {
              Case c;
              c.algo = config.algo;
              c.channels = config.channels;
              c.kind = kind;
              c.n = n;
              c.root = root;
              c.in_place = in_place;
              c.count = count;
              c.slice_bytes = slice_bytes;
              c.fifo_depth = fifo_depth;
              c.instances = instances;
              EXPECT_EQ(runCase(c), "") << c.toString();
              ++runs;
            }
          }
        }
      }
    }
  }
  return runs;
}

// 6 configs x 2 collectives x (3 + 5 + 8 = 16 roots) x 2 modes x 3 counts = 1152 runs.
TEST(ExecutorRooted, EveryRootBothModes) { EXPECT_EQ(matrix({1, 7, 1003}, 0, 0), 1152); }

// Slices of 16 bytes (4 elements): a 1003-element step is 251 slices that pipeline across the chain's
// hops and the tree's levels, through connection FIFOs of one slot (the tightest) and of NCCL's 8.
TEST(ExecutorRooted, PipelinedSlicesThroughBoundedFifos) {
  EXPECT_EQ(matrix({1003}, 16, 1), 384);  // 6 x 2 x 16 x 2
  EXPECT_EQ(matrix({7, 1003}, 16, 8), 768);
}

// Two instances split every chunk in two parts on channels of their own.
TEST(ExecutorRooted, TwoInstances) { EXPECT_EQ(matrix({7, 1003}, 64, 0, 2), 768); }

// The reference can fail: a reduce whose root drops all but one arrival, a broadcast that never stores on one rank.
TEST(ExecutorRooted, WrongProgramsAreCaught) {
  Case c;
  c.algo = ClassicAlgo::kDirect;
  c.kind = CollectiveKind::kReduce;
  c.n = 4;
  c.root = 1;
  c.count = 10;
  Result<Algorithm> reduce = buildCase(c);
  ASSERT_TRUE(reduce.isOk());
  ASSERT_EQ(runCase(c), "");
  // The root's last reduction becomes a plain receive: the output holds only that peer's input.
  Algorithm dropped = *reduce;
  Step& last = dropped.ranks[1].threadblocks.back().steps.back();
  ASSERT_EQ(last.type, OpType::kRecvReduceCopy);
  last.type = OpType::kRecv;
  last.src_off = -1;
  EXPECT_NE(runAlgorithm(dropped, c).find("sum over all ranks"), std::string::npos);

  c.algo = ClassicAlgo::kRing;
  c.kind = CollectiveKind::kBroadcast;
  Result<Algorithm> bcast = buildCase(c);
  ASSERT_TRUE(bcast.isOk());
  ASSERT_EQ(runCase(c), "");
  // The chain's last rank (rank 0: 1 -> 2 -> 3 -> 0) receives into scratch: its output keeps the poison.
  Algorithm lost = *bcast;
  Step& recv = lost.ranks[0].threadblocks[0].steps[0];
  ASSERT_EQ(recv.type, OpType::kRecv);
  recv.dst_buf = BufferKind::kScratch;
  recv.dst_off = 0;
  lost.ranks[0].scratch_chunks = 1;
  const std::string wrong = runAlgorithm(lost, c);
  EXPECT_NE(wrong.find("rank 0 o[0] = 0xdeadbeef"), std::string::npos) << wrong;
  EXPECT_EQ(wrong.find("rank 1"), std::string::npos) << wrong;
}

}  // namespace
}  // namespace braid
