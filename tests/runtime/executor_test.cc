// Executor tests: every classical algorithm and every real MSCCL/TACCL XML that verifies, lowered and run
// through MemTransport (real data, completions in shuffled order), every output element compared with a
// reference computed here from the collective's definition.
//
// Data: input element i of rank r holds f(r, i) = r*1000003 + i*7919 + 1 (uint32, wrapping), so every
// element of every rank is distinct and a chunk that lands in the wrong place, twice or not at all shows.
// Reductions are wrap-around uint32 sums (MemTransport). Unwritten memory starts as kPoison.
#include "braid/executor.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "braid/algorithm.h"
#include "braid/classic.h"
#include "braid/plan.h"
#include "braid/topology.h"
#include "runtime/mem_transport.h"
#include "support/corpus.h"
#include "support/uint32_reference.h"

namespace braid {
namespace {

using testing::MemTransport;

constexpr uint32_t kPoison = 0xDEADBEEFu;

uint32_t f(int rank, uint64_t index) { return testing::inputWord(rank, index); }

struct RunOptions {
  uint64_t count = 0;  // NCCL count: elements per rank-sized piece (see sizeBytes)
  bool in_place = false;
  int instances = 1;
  uint64_t slice_bytes = 0;
  uint32_t slices_per_iteration = 1;
  uint64_t seed = 1;
  int fifo_depth = 0;  // MemTransport's: 0 unbounded
};

// nccl-tests size for `count` 4-byte elements: all-gather's count is the per-rank input, reduce-scatter's
// the per-rank output, all-to-all's the block per peer; the rest use the whole buffer.
uint64_t sizeBytes(const CollectiveSpec& spec, uint64_t count) { return count * 4 * spec.sizeMultiplier(); }

struct RunOutcome {
  Status status;      // lowering or execution error
  std::string wrong;  // first mismatches, empty when every element is right
  Plan plan;
  MemTransport::Counters counters;
  ExecResult result;
};

// Where element i of rank r's input / output lives: in place, through the collective's alias.
struct Layout {
  CollectiveSpec spec;
  uint64_t in_elems = 0;
  uint64_t out_elems = 0;
  std::pair<BufferKind, uint64_t> input(int r, uint64_t i) const {
    if (!spec.in_place) return {BufferKind::kInput, i};
    if (spec.kind == CollectiveKind::kReduceScatter) return {BufferKind::kInput, i};
    if (spec.kind == CollectiveKind::kAllGather) return {BufferKind::kOutput, r * in_elems + i};
    return {BufferKind::kOutput, i};
  }
  std::pair<BufferKind, uint64_t> output(int r, uint64_t j) const {
    if (spec.in_place && spec.kind == CollectiveKind::kReduceScatter) return {BufferKind::kInput, r * out_elems + j};
    return {BufferKind::kOutput, j};
  }
};

// The reference (tests/support/uint32_reference.h): what output element j of rank r must hold, or nullopt when
// unconstrained.
std::optional<uint32_t> expected(const CollectiveSpec& spec, uint64_t in_elems, uint64_t out_elems, int r, uint64_t j) {
  return testing::referenceWord(spec, in_elems, out_elems, r, j);
}

RunOutcome run(const Algorithm& algorithm, const RunOptions& options) {
  RunOutcome outcome;
  Result<CollectiveSpec> spec = algorithm.spec(options.in_place);
  if (!spec.isOk()) {
    outcome.status = spec.status();
    return outcome;
  }
  LowerOptions lower;
  lower.size_bytes = sizeBytes(*spec, options.count);
  lower.in_place = options.in_place;
  lower.instances = options.instances;
  lower.slice_bytes = options.slice_bytes;
  lower.slices_per_iteration = options.slices_per_iteration;
  lower.element_bytes = 4;
  Result<Plan> plan = lowerAlgorithm(algorithm, lower);
  if (!plan.isOk()) {
    outcome.status = plan.status();
    return outcome;
  }
  outcome.plan = *plan;
  const int n = algorithm.num_ranks;
  Layout layout{*spec, plan->ranks[0].input_bytes / 4, plan->ranks[0].output_bytes / 4};
  MemTransport mem(*plan, options.seed, /*move_data=*/true, options.fifo_depth);
  for (int r = 0; r < n; ++r) {
    for (BufferKind b : {BufferKind::kInput, BufferKind::kOutput, BufferKind::kScratch}) {
      for (uint64_t w = 0; w < mem.buffer(r, b).size() / 4; ++w) mem.setWord(r, b, w, kPoison);
    }
    for (uint64_t i = 0; i < layout.in_elems; ++i) {
      const auto [b, at] = layout.input(r, i);
      mem.setWord(r, b, at, f(r, i));
    }
  }
  Result<ExecResult> result = execute(*plan, mem);
  outcome.counters = mem.counters();
  if (!result.isOk()) {
    outcome.status = result.status();
    return outcome;
  }
  outcome.result = *result;
  int wrong = 0;
  auto note = [&](const std::string& text) {
    if (wrong++ < 4) outcome.wrong += text + "\n";
  };
  for (int r = 0; r < n; ++r) {
    for (uint64_t j = 0; j < layout.out_elems; ++j) {
      const std::optional<uint32_t> want = expected(*spec, layout.in_elems, layout.out_elems, r, j);
      if (!want) continue;
      const auto [b, at] = layout.output(r, j);
      const uint32_t got = mem.word(r, b, at);
      if (got != *want) note(fmt::format("rank {} output[{}] = {:#x}, expected {:#x}", r, j, got, *want));
    }
    if (!options.in_place) {  // NCCL's sendbuff is const
      for (uint64_t i = 0; i < layout.in_elems; ++i) {
        if (mem.word(r, BufferKind::kInput, i) != f(r, i)) note(fmt::format("rank {} input[{}] was modified", r, i));
      }
    }
  }
  if (wrong > 4) outcome.wrong += fmt::format("... {} wrong elements in all\n", wrong);
  return outcome;
}

std::string describe(const Algorithm& algorithm, const RunOptions& o) {
  return fmt::format("{} ({}) count={} {} instances={} slice={} x{} seed={}", algorithm.name,
                     collectiveName(algorithm.collective), o.count, o.in_place ? "in-place" : "out-of-place",
                     o.instances, o.slice_bytes, o.slices_per_iteration, o.seed);
}

// Runs `algorithm` for each count in both declared modes; returns the number of runs.
int expectCorrect(const Algorithm& algorithm, const std::vector<uint64_t>& counts, RunOptions base = {}) {
  int runs = 0;
  for (bool in_place : {false, true}) {
    if (in_place ? !algorithm.in_place : !algorithm.out_of_place) continue;
    for (uint64_t count : counts) {
      RunOptions o = base;
      o.count = count;
      o.in_place = in_place;
      const RunOutcome outcome = run(algorithm, o);
      EXPECT_TRUE(outcome.status.isOk()) << describe(algorithm, o) << ": " << outcome.status.toString();
      EXPECT_EQ(outcome.wrong, "") << describe(algorithm, o);
      ++runs;
    }
  }
  return runs;
}

const std::vector<uint64_t> kCounts = {0, 1, 7, 1003};

Result<Algorithm> classic(ClassicAlgo algo, CollectiveKind kind, int n, bool in_place, const Topology* topology) {
  ClassicRequest request;
  request.algo = algo;
  request.spec.kind = kind;
  request.spec.num_ranks = n;
  request.spec.chunk_factor = 0;
  request.spec.in_place = in_place;
  request.topology = topology;
  return buildClassic(request);
}

// Every collective the algorithm applies to, for each n, both modes, every count.
int classicMatrix(ClassicAlgo algo, const std::vector<int>& ns, const Topology* topology = nullptr,
                  RunOptions base = {}, const std::vector<uint64_t>& counts = kCounts,
                  const std::vector<CollectiveKind>& only = {}) {
  int runs = 0;
  for (CollectiveKind kind : classicCollectives(algo)) {
    if (!only.empty() && std::find(only.begin(), only.end(), kind) == only.end()) continue;
    for (int n : ns) {
      for (bool in_place : {false, true}) {
        Result<Algorithm> algorithm = classic(algo, kind, n, in_place, topology);
        if (!algorithm.isOk()) {
          // The only refusal the builders make for these inputs: MSCCL has no in-place all-to-all.
          EXPECT_TRUE(in_place && kind == CollectiveKind::kAllToAll)
              << classicAlgoName(algo) << " " << collectiveName(kind) << " n=" << n << ": "
              << algorithm.status().toString();
          continue;
        }
        // Each mode once: an algorithm valid in both modes is built the same way for either request.
        if (algorithm->in_place && algorithm->out_of_place && in_place) continue;
        runs += expectCorrect(*algorithm, counts, base);
      }
    }
  }
  return runs;
}

TEST(ExecutorClassic, Ring) { EXPECT_GT(classicMatrix(ClassicAlgo::kRing, {1, 2, 3, 5, 8, 16}), 150); }

TEST(ExecutorClassic, RingOnNvlinkRings) {
  Result<Topology> dgx1 = loadTopologyOrShipped("dgx1-v100");
  ASSERT_TRUE(dgx1.isOk()) << dgx1.status().toString();
  EXPECT_GT(classicMatrix(ClassicAlgo::kRing, {8}, &*dgx1), 20);
}

TEST(ExecutorClassic, MultiRing) {
  Result<Topology> dgx1 = loadTopologyOrShipped("dgx1-v100");
  ASSERT_TRUE(dgx1.isOk()) << dgx1.status().toString();
  EXPECT_GT(classicMatrix(ClassicAlgo::kMultiRing, {8}, &*dgx1), 20);
  EXPECT_GT(classicMatrix(ClassicAlgo::kMultiRing, {1, 2, 3, 5}), 60);  // rank order and reversed
}

TEST(ExecutorClassic, Direct) { EXPECT_GT(classicMatrix(ClassicAlgo::kDirect, {1, 2, 3, 5, 8, 16}), 150); }

TEST(ExecutorClassic, RecursiveDoublingAndHalving) {
  EXPECT_GT(classicMatrix(ClassicAlgo::kRecursiveDoubling, {1, 2, 3, 5, 8, 16}), 100);
}

TEST(ExecutorClassic, DoubleBinaryTree) {
  EXPECT_GT(classicMatrix(ClassicAlgo::kDoubleBinaryTree, {1, 2, 3, 5, 8, 16}), 40);
}

TEST(ExecutorClassic, Pairwise) { EXPECT_GT(classicMatrix(ClassicAlgo::kPairwise, {1, 2, 3, 5, 8, 16}), 20); }

TEST(ExecutorClassic, Hierarchical) {
  for (const char* name : {"ndv2-x2", "dgx-a100-x2"}) {
    Result<Topology> topology = loadTopologyOrShipped(name);
    ASSERT_TRUE(topology.isOk()) << topology.status().toString();
    SCOPED_TRACE(name);
    EXPECT_GT(classicMatrix(ClassicAlgo::kHierarchical, {topology->numGpus()}, &*topology), 20);
  }
}

// Slices of 64 bytes (16 elements) are smaller than the chunks of 1003-element counts, so every fused
// step pipelines several slices; with 2 instances every chunk is also split in two.
TEST(ExecutorClassic, SmallSlicesAndInstances) {
  Result<Topology> dgx1 = loadTopologyOrShipped("dgx1-v100");
  ASSERT_TRUE(dgx1.isOk());
  for (int instances : {1, 2}) {
    RunOptions base;
    base.slice_bytes = 64;
    base.instances = instances;
    SCOPED_TRACE(fmt::format("instances {}", instances));
    EXPECT_GT(classicMatrix(ClassicAlgo::kRing, {2, 3, 5}, nullptr, base), 40);
    EXPECT_GT(classicMatrix(ClassicAlgo::kDirect, {3, 5}, nullptr, base), 20);
    EXPECT_GT(classicMatrix(ClassicAlgo::kRecursiveDoubling, {3, 8}, nullptr, base), 15);
    EXPECT_GT(classicMatrix(ClassicAlgo::kDoubleBinaryTree, {5, 8}, nullptr, base), 5);
    EXPECT_GT(classicMatrix(ClassicAlgo::kPairwise, {5}, nullptr, base), 3);
    EXPECT_GT(classicMatrix(ClassicAlgo::kMultiRing, {8}, &*dgx1, base), 10);
  }
  RunOptions three;
  three.instances = 3;
  three.slice_bytes = 12;  // 3 elements
  EXPECT_GT(classicMatrix(ClassicAlgo::kRing, {3, 5}, nullptr, three), 20);
}

// Bounded connection FIFOs while every step has dozens of slices. A threadblock runs one slice at a time,
// looping over slices outside and steps inside as MSCCL does, so rings whose ranks all send before they
// receive make progress with a FIFO of a single message. A step over several chunks larger than a slice
// moves one message per chunk per iteration (as MSCCL does once a chunk fills its buffer), so exchanges
// that send m chunks before receiving need m slots: with NCCL's 8 (NCCL_STEPS) every algorithm here on up to
// 8 ranks runs (recursive doubling's largest exchange is 4 chunks, ring all-to-all's n-1 = 7).
TEST(ExecutorClassic, BoundedFifo) {
  Result<Topology> dgx1 = loadTopologyOrShipped("dgx1-v100");
  ASSERT_TRUE(dgx1.isOk());
  const std::vector<uint64_t> counts = {0, 7, 1003};
  RunOptions one;
  one.slice_bytes = 16;
  one.fifo_depth = 1;
  const std::vector<CollectiveKind> rings = {CollectiveKind::kAllGather, CollectiveKind::kReduceScatter,
                                             CollectiveKind::kAllReduce};
  EXPECT_GT(classicMatrix(ClassicAlgo::kRing, {2, 3, 5, 8}, nullptr, one, counts, rings), 40);
  EXPECT_GT(classicMatrix(ClassicAlgo::kMultiRing, {8}, &*dgx1, one, counts, rings), 10);
  EXPECT_GT(classicMatrix(ClassicAlgo::kDoubleBinaryTree, {5, 8}, nullptr, one, counts), 5);
  EXPECT_GT(classicMatrix(ClassicAlgo::kDirect, {3, 5}, nullptr, one, counts, rings), 10);
  EXPECT_GT(classicMatrix(ClassicAlgo::kRecursiveDoubling, {2, 3}, nullptr, one, counts), 10);  // 1 chunk each
  one.instances = 2;
  EXPECT_GT(classicMatrix(ClassicAlgo::kRing, {3, 5}, nullptr, one, counts, rings), 20);
  RunOptions nccl;
  nccl.slice_bytes = 16;
  nccl.fifo_depth = 8;
  for (ClassicAlgo algo :
       {ClassicAlgo::kRing, ClassicAlgo::kDirect, ClassicAlgo::kRecursiveDoubling, ClassicAlgo::kPairwise}) {
    EXPECT_GT(classicMatrix(algo, {3, 5, 8}, nullptr, nccl, counts), 10) << classicAlgoName(algo);
  }
  EXPECT_GT(classicMatrix(ClassicAlgo::kMultiRing, {8}, &*dgx1, nccl, counts), 10);
}

// Iterations of k slices (NCCL's ring in Simple runs 2): all k of a step's slices are posted together, a fused
// step forwards each slice as it arrives, in any completion order (seeded), and staging holds k slices. Slices of 16
// bytes (4 elements) against chunks of up to 1003 elements give k-slice iterations, short last iterations and
// steps of fewer than k slices. With a FIFO of k x (largest step count) slots every ring runs.
TEST(ExecutorClassic, SeveralSlicesPerIteration) {
  for (uint32_t k : {2u, 3u, 5u}) {
    SCOPED_TRACE(fmt::format("{} slices per iteration", k));
    RunOptions base;
    base.slice_bytes = 16;
    base.slices_per_iteration = k;
    for (uint64_t seed : {1u, 7u}) {
      base.seed = seed;
      EXPECT_GT(classicMatrix(ClassicAlgo::kRing, {2, 3, 5}, nullptr, base), 40);
      EXPECT_GT(classicMatrix(ClassicAlgo::kDirect, {3, 5}, nullptr, base), 20);
      EXPECT_GT(classicMatrix(ClassicAlgo::kRecursiveDoubling, {3, 8}, nullptr, base), 15);
      EXPECT_GT(classicMatrix(ClassicAlgo::kDoubleBinaryTree, {5, 8}, nullptr, base), 5);
      EXPECT_GT(classicMatrix(ClassicAlgo::kPairwise, {5}, nullptr, base), 3);
    }
    RunOptions fifo = base;
    fifo.fifo_depth = static_cast<int>(k);
    const std::vector<CollectiveKind> rings = {CollectiveKind::kAllGather, CollectiveKind::kReduceScatter,
                                               CollectiveKind::kAllReduce};
    EXPECT_GT(classicMatrix(ClassicAlgo::kRing, {2, 3, 5, 8}, nullptr, fifo, kCounts, rings), 40);
    fifo.instances = 2;
    EXPECT_GT(classicMatrix(ClassicAlgo::kRing, {3, 5}, nullptr, fifo, kCounts, rings), 20);
  }
}

// The same messages whatever the iteration: one per slice of every sending step, and staging sized for the
// iteration (validatePlan checks it before the executor runs).
TEST(Executor, SlicesPerIterationKeepOneMessagePerSlice) {
  Result<Algorithm> ring = classic(ClassicAlgo::kRing, CollectiveKind::kAllReduce, 4, false, nullptr);
  ASSERT_TRUE(ring.isOk());
  RunOptions one;
  one.count = 1003;
  one.slice_bytes = 64;
  const RunOutcome base = run(*ring, one);
  ASSERT_TRUE(base.status.isOk()) << base.status.toString();
  for (uint32_t k : {2u, 4u, 8u}) {
    RunOptions o = one;
    o.slices_per_iteration = k;
    const RunOutcome outcome = run(*ring, o);
    ASSERT_TRUE(outcome.status.isOk()) << outcome.status.toString();
    EXPECT_EQ(outcome.wrong, "");
    EXPECT_EQ(outcome.counters.sends, base.counters.sends) << k;
    EXPECT_EQ(outcome.plan.slices_per_iteration, k);
    EXPECT_EQ(outcome.plan.slice_bytes, 64u) << "one chunk per step: k slices fit NCCL's 8 slots";
    for (const RankPlan& rank : outcome.plan.ranks) {
      uint64_t want = 0;  // per threadblock: its largest staged step, up to k slices of it
      for (const PlanThreadblock& tb : rank.threadblocks) {
        uint64_t need = 0;
        for (const PlanStep& step : tb.steps) {
          if (plan::needsStaging(step)) need = std::max<uint64_t>(need, std::min<uint64_t>(step.bytes, 64 * k));
        }
        want += need;
      }
      EXPECT_EQ(rank.temp_bytes, want) << "rank " << rank.rank << " k " << k;
      EXPECT_GT(rank.temp_bytes, 64u) << "the ring's receive-reduce-send steps are staged";
    }
  }
  // 32 slices per iteration against 8 slots: the FIFO rule cuts the slice to 64 x 8 / 32 = 16 bytes and the FIFO
  // holds 32; the result stays right.
  RunOptions many = one;
  many.slices_per_iteration = 32;
  const RunOutcome outcome = run(*ring, many);
  ASSERT_TRUE(outcome.status.isOk()) << outcome.status.toString();
  EXPECT_EQ(outcome.wrong, "");
  EXPECT_EQ(outcome.plan.slice_bytes, 16u);
  EXPECT_EQ(outcome.plan.fifo_depth, 32);
}

// The seeded completion order changes from seed to seed; the result may not.
TEST(ExecutorClassic, AnyCompletionOrder) {
  Result<Algorithm> tree = classic(ClassicAlgo::kDoubleBinaryTree, CollectiveKind::kAllReduce, 7, false, nullptr);
  Result<Algorithm> ring = classic(ClassicAlgo::kRing, CollectiveKind::kAllToAll, 5, false, nullptr);
  ASSERT_TRUE(tree.isOk() && ring.isOk());
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    RunOptions o;
    o.seed = seed;
    o.slice_bytes = 16;
    expectCorrect(*tree, {37}, o);
    expectCorrect(*ring, {11}, o);
  }
}

// A plan sent through every step once per slice: the number of messages is the sum over sending steps of
// ceil(bytes / slice), at least one (a zero-byte step still sends a zero-byte message).
TEST(Executor, OneMessagePerSliceAndZeroByteMessages) {
  Result<Algorithm> ring = classic(ClassicAlgo::kRing, CollectiveKind::kAllReduce, 4, false, nullptr);
  ASSERT_TRUE(ring.isOk());
  for (uint64_t count : {0, 3, 1003}) {
    RunOptions o;
    o.count = count;
    o.slice_bytes = 64;
    const RunOutcome outcome = run(*ring, o);
    ASSERT_TRUE(outcome.status.isOk()) << outcome.status.toString();
    EXPECT_EQ(outcome.wrong, "");
    long long messages = 0;
    long long steps = 0;
    for (const RankPlan& rank : outcome.plan.ranks) {
      for (const PlanThreadblock& tb : rank.threadblocks) {
        for (const PlanStep& step : tb.steps) {
          ++steps;
          if (opSends(step.type)) messages += std::max<long long>(1, (step.bytes + 63) / 64);
        }
      }
    }
    EXPECT_EQ(outcome.counters.sends, messages) << "count " << count;
    EXPECT_EQ(outcome.counters.recvs, messages) << "count " << count;
    // Ring all-reduce on n = 4, per rank: send, n-2 rrs, rrcs, n-2 rcs, recv = 2n-1 = 7 steps, of which
    // 2(n-1) = 6 send.
    EXPECT_EQ(steps, 4 * 7);
    if (count == 0) {
      EXPECT_EQ(messages, 4 * 6);
    }
    // Every receive-reduce slice is reduced by one fused local request, none unfused.
    EXPECT_EQ(outcome.counters.fused_locals, outcome.counters.locals);
  }
}

// Timings. With one slice per step the steps of a threadblock run one after another, and a step starts after
// its dependencies ended. With many slices per step, iteration j runs slice j of every step, so a step
// starts after the first slice of the step before it and of its dependencies, which started earlier.
TEST(Executor, RecordsStepTimingsInOrder) {
  Result<Algorithm> tree = classic(ClassicAlgo::kDoubleBinaryTree, CollectiveKind::kAllReduce, 6, false, nullptr);
  ASSERT_TRUE(tree.isOk());
  for (uint64_t slice : {uint64_t{0}, uint64_t{32}}) {
    SCOPED_TRACE(fmt::format("slice {}", slice));
    LowerOptions lower;
    lower.size_bytes = 4 * 240;
    lower.element_bytes = 4;
    lower.slice_bytes = slice == 0 ? 4 * 240 : slice;  // 960: every step in one slice
    Result<Plan> plan = lowerAlgorithm(*tree, lower);
    ASSERT_TRUE(plan.isOk()) << plan.status().toString();
    MemTransport mem(*plan, 7);
    Result<ExecResult> result = execute(*plan, mem, {}, /*record_steps=*/true);
    ASSERT_TRUE(result.isOk()) << result.status().toString();
    size_t total = 0;
    std::map<std::tuple<int, int, int>, StepTiming> by_step;
    for (const RankPlan& rank : plan->ranks) {
      for (const PlanThreadblock& tb : rank.threadblocks) total += tb.steps.size();
    }
    ASSERT_EQ(result->steps.size(), total);
    for (const StepTiming& timing : result->steps) {
      EXPECT_LE(timing.start_us, timing.end_us);
      EXPECT_LE(result->start_us, timing.start_us);
      EXPECT_LE(timing.end_us, result->end_us);
      by_step[{timing.rank, timing.tb, timing.step}] = timing;
    }
    ASSERT_EQ(by_step.size(), total);
    int deps_checked = 0;
    int overlapping = 0;  // steps that started before the step before them ended
    for (const RankPlan& rank : plan->ranks) {
      for (const PlanThreadblock& tb : rank.threadblocks) {
        for (size_t s = 0; s < tb.steps.size(); ++s) {
          const StepTiming& me = by_step[{rank.rank, tb.id, static_cast<int>(s)}];
          if (s > 0) {
            const StepTiming& before = by_step[{rank.rank, tb.id, static_cast<int>(s) - 1}];
            if (slice == 0) {
              EXPECT_LE(before.end_us, me.start_us);
            }
            EXPECT_LE(before.start_us, me.start_us);
            overlapping += before.end_us > me.start_us;
          }
          for (const Dependency& dep : tb.steps[s].deps) {
            const StepTiming& target = by_step[{rank.rank, dep.tb, dep.step}];
            if (slice == 0) {
              EXPECT_LE(target.end_us, me.start_us);
            }
            EXPECT_LE(target.start_us, me.start_us);
            ++deps_checked;
          }
        }
      }
    }
    EXPECT_GT(deps_checked, 0);  // the tree has cross-threadblock dependencies
    if (slice == 0) {
      EXPECT_EQ(overlapping, 0);
    }
    if (slice != 0) {
      EXPECT_GT(overlapping, 0);  // slices of consecutive steps interleave
    }
    EXPECT_GT(result->requests, 0);
  }
}

// A plan written by hand: both ranks receive first, so nothing can ever complete.
Plan twoRankPlan(OpType first0, OpType first1) {
  Plan plan;
  plan.algorithm = "hand";
  plan.collective = CollectiveKind::kAllReduce;
  plan.num_ranks = 2;
  plan.element_bytes = 4;
  plan.slice_bytes = 16;
  for (int r = 0; r < 2; ++r) {
    RankPlan rank;
    rank.rank = r;
    rank.input_bytes = rank.output_bytes = 64;
    PlanThreadblock tb;
    tb.send_peer = tb.recv_peer = 1 - r;
    PlanStep a;
    a.type = r == 0 ? first0 : first1;
    a.src = a.dst = BufferRef{BufferKind::kOutput, 0, 64};
    a.bytes = 64;
    PlanStep b = a;
    b.type = a.type == OpType::kRecv ? OpType::kSend : OpType::kRecv;
    tb.steps = {a, b};
    rank.threadblocks.push_back(tb);
    plan.ranks.push_back(rank);
  }
  return plan;
}

TEST(Executor, TransportDeadlockIsReportedWithTheWaitingRanks) {
  const Plan both_recv = twoRankPlan(OpType::kRecv, OpType::kRecv);
  MemTransport mem(both_recv);
  Result<ExecResult> result = execute(both_recv, mem);
  ASSERT_FALSE(result.isOk());
  EXPECT_EQ(result.status().code(), StatusCode::kInternalError);
  EXPECT_NE(result.status().message().find("deadlock"), std::string::npos) << result.status().message();
  // One slice at a time: each rank waits for the first of its 4 slices.
  EXPECT_NE(result.status().message().find("rank 0 waits for 1 message(s) from rank 1"), std::string::npos)
      << result.status().message();

  const Plan fine = twoRankPlan(OpType::kSend, OpType::kRecv);
  MemTransport ok(fine);
  EXPECT_TRUE(execute(fine, ok).isOk());
}

TEST(Executor, DependencyCycleIsReported) {
  Plan plan = twoRankPlan(OpType::kSend, OpType::kRecv);
  for (RankPlan& rank : plan.ranks) {
    PlanThreadblock other;
    other.id = 1;
    other.steps.push_back(PlanStep{});  // nop waiting for tb 0 step 0
    other.steps[0].deps = {Dependency{0, 0}};
    rank.threadblocks.push_back(other);
    rank.threadblocks[0].steps[0].deps = {Dependency{1, 0}};
  }
  MemTransport mem(plan);
  Result<ExecResult> result = execute(plan, mem);
  ASSERT_FALSE(result.isOk());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find("rank 0 tb 0 step 0 (s, slice 0) waits for tb 1 step 0"), std::string::npos)
      << result.status().message();
}

TEST(Executor, BadPlansAndOptionsAreRejected) {
  const Plan plan = twoRankPlan(OpType::kSend, OpType::kRecv);
  MemTransport mem(plan);
  ExecOptions outside;
  outside.local_ranks = {0, 2};
  EXPECT_EQ(execute(plan, mem, outside).status().code(), StatusCode::kInvalidArgument);
  ExecOptions twice;
  twice.local_ranks = {1, 1};
  EXPECT_EQ(execute(plan, mem, twice).status().code(), StatusCode::kInvalidArgument);
  Plan bad_dep = plan;
  bad_dep.ranks[0].threadblocks[0].steps[1].deps = {Dependency{0, 1}};  // itself
  EXPECT_EQ(execute(bad_dep, mem).status().code(), StatusCode::kInvalidArgument);
  Plan no_peer = plan;
  no_peer.ranks[1].threadblocks[0].recv_peer = -1;
  EXPECT_EQ(execute(no_peer, mem).status().code(), StatusCode::kInvalidArgument);
}

// Driving only rank 0 of a two-rank ring: rank 1's side never posts, and the transport says who waits.
TEST(Executor, LocalRanksDriveOnlyThoseRanks) {
  Result<Algorithm> ring = classic(ClassicAlgo::kRing, CollectiveKind::kAllGather, 2, false, nullptr);
  ASSERT_TRUE(ring.isOk());
  LowerOptions lower;
  lower.size_bytes = 64;
  lower.element_bytes = 4;
  Result<Plan> plan = lowerAlgorithm(*ring, lower);
  ASSERT_TRUE(plan.isOk());
  MemTransport mem(*plan);
  ExecOptions options;
  options.local_ranks = {0};
  Result<ExecResult> result = execute(*plan, mem, options);
  ASSERT_FALSE(result.isOk());
  EXPECT_NE(result.status().message().find("rank 0 waits for 1 message(s) from rank 1"), std::string::npos)
      << result.status().message();
  EXPECT_EQ(mem.counters().sends, 1);  // rank 0's own chunk; rank 1 never sent
  EXPECT_EQ(mem.counters().recvs, 1);
}

// A transport that fails after a number of posts: the executor returns its error as it is.
class FailingTransport : public MemTransport {
 public:
  FailingTransport(const Plan& plan, int allowed) : MemTransport(plan), allowed_(allowed) {}
  Result<RequestId> postSend(const SendRequest& request) override {
    if (--allowed_ < 0) return Status(StatusCode::kRemoteError, "peer 3 is gone");
    return MemTransport::postSend(request);
  }
  Status poll(std::vector<Completion>* done, bool block) override {
    if (allowed_ < -100) return Status(StatusCode::kTimeout, "poll timed out");
    return MemTransport::poll(done, block);
  }

 private:
  int allowed_;
};

TEST(Executor, TransportErrorsPropagate) {
  Result<Algorithm> ring = classic(ClassicAlgo::kRing, CollectiveKind::kAllReduce, 4, false, nullptr);
  ASSERT_TRUE(ring.isOk());
  LowerOptions lower;
  lower.size_bytes = 4 * 64;
  lower.element_bytes = 4;
  Result<Plan> plan = lowerAlgorithm(*ring, lower);
  ASSERT_TRUE(plan.isOk());
  FailingTransport failing(*plan, 5);
  Result<ExecResult> result = execute(*plan, failing);
  ASSERT_FALSE(result.isOk());
  EXPECT_EQ(result.status().code(), StatusCode::kRemoteError);
  EXPECT_EQ(result.status().message(), "peer 3 is gone");
}

// Every MSCCL and TACCL XML of the corpus that verify() accepts runs correctly, through connection FIFOs of
// NCCL's 8 slots, in each mode it declares,
// for counts that split evenly into its chunks (a multiple of nchunksperloop / multiplier) and for uneven
// counts, which may be refused only as kUnsupported (chunks of different sizes would have to meet).
TEST(ExecutorCorpus, VerifiedXmlAlgorithmsRunCorrectly) {
  BRAID_SKIP_WITHOUT_REALCASES();
  const std::vector<std::filesystem::path> files = braid::testing::corpusXmlFiles();
  ASSERT_GE(files.size(), 17u);
  int verified = 0;
  int runs = 0;
  int refused = 0;  // uneven counts whose chunks would have to change size
  for (const auto& file : files) {
    SCOPED_TRACE(file.filename().string());
    Result<Algorithm> algorithm = loadAlgorithm(file.string());
    if (!algorithm.isOk() || !verify(*algorithm).ok) continue;  // the corpus tests say why
    ++verified;
    const CollectiveSpec spec = algorithm->spec(algorithm->out_of_place ? false : true).value();
    const uint64_t mult = spec.sizeMultiplier();
    const uint64_t even = algorithm->num_chunks / std::gcd<uint64_t>(algorithm->num_chunks, mult);
    for (bool in_place : {false, true}) {
      if (in_place ? !algorithm->in_place : !algorithm->out_of_place) continue;
      for (uint64_t count : {uint64_t{0}, even, 3 * even, uint64_t{1}, uint64_t{7}, even + 5}) {
        for (int instances : {1, 2}) {
          RunOptions o;
          o.count = count;
          o.in_place = in_place;
          o.instances = instances;
          o.slice_bytes = count > even ? 32 : 0;
          o.fifo_depth = 8;  // NCCL_STEPS
          const RunOutcome outcome = run(*algorithm, o);
          const bool even_split = count * mult % algorithm->num_chunks == 0;
          if (!outcome.status.isOk() && !even_split && outcome.status.code() == StatusCode::kUnsupported) {
            ++refused;
            continue;
          }
          EXPECT_TRUE(outcome.status.isOk()) << describe(*algorithm, o) << ": " << outcome.status.toString();
          EXPECT_EQ(outcome.wrong, "") << describe(*algorithm, o);
          ++runs;
        }
      }
    }
  }
  EXPECT_GE(verified, 12);
  EXPECT_GT(runs, 100);
  std::printf("corpus: %d algorithms verify, %d runs correct, %d uneven sizes refused\n", verified, runs, refused);
}

// Request counts of a ring all-reduce of zero bytes on many ranks through MemTransport without data: per rank
// the ring posts 2(n-1) sends, 2(n-1) receives and n-1 fused reductions (n-2 receive-reduce-sends and one
// receive-reduce-copy-send), so 5n(n-1) requests in all. (Speed at 1024 ranks is perf/sim_benchmark's job.)
TEST(ExecutorScale, RingAllReduce128Ranks) {
  const int n = 128;
  Result<Algorithm> ring = classic(ClassicAlgo::kRing, CollectiveKind::kAllReduce, n, false, nullptr);
  ASSERT_TRUE(ring.isOk());
  LowerOptions lower;
  lower.element_bytes = 4;
  Result<Plan> plan = lowerAlgorithm(*ring, lower);
  ASSERT_TRUE(plan.isOk()) << plan.status().toString();
  MemTransport mem(*plan, 1, /*move_data=*/false);
  Result<ExecResult> result = execute(*plan, mem);
  ASSERT_TRUE(result.isOk()) << result.status().toString();
  EXPECT_EQ(result->requests, 5LL * n * (n - 1));
  EXPECT_EQ(mem.counters().sends, 2LL * n * (n - 1));
  EXPECT_EQ(mem.counters().fused_locals, 1LL * n * (n - 1));
}

}  // namespace
}  // namespace braid
