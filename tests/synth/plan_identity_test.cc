// The plan simulated is the plan executed: for every MSCCL/TACCL XML of the realcases corpus and for the algorithm
// synthesize() makes for every shipped topology and collective, the plan simulate() runs (simulationPlan with
// SimModel::defaults()) and the plan the Communicator runs for an int8 call of the same size and mode
// (lowerAlgorithm with callLowerOptions, what CommImpl::plan lowers with) are equal field by field at 1 KiB,
// 1 MiB and 256 MiB, or both are refused with the same status. It lives with the synthesizer tests because it
// links the synthesizer, the runtime and braid_comm.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "braid/algorithm.h"
#include "braid/classic.h"
#include "braid/plan.h"
#include "braid/simulate.h"
#include "braid/synthesize.h"
#include "braid/topology.h"
#include "support/corpus.h"

namespace braid {
namespace {

constexpr uint64_t kSizes[] = {uint64_t{1} << 10, uint64_t{1} << 20, uint64_t{256} << 20};

struct Tally {
  int compared = 0;   // (algorithm, mode, size, instances) with two plans
  int refused = 0;    // both paths refused the size (e.g. chunks that do not split it evenly)
  int fifo_rule = 0;  // plans whose slices the FIFO rule shrank (Plan::fifo_depth raised)
};

// Where two plans first differ, "" when they are equal.
std::string firstDifference(const Plan& a, const Plan& b) {
  if (a.algorithm != b.algorithm || a.collective != b.collective || a.num_ranks != b.num_ranks ||
      a.size_bytes != b.size_bytes || a.in_place != b.in_place || a.protocol != b.protocol ||
      a.instances != b.instances || a.element_bytes != b.element_bytes) {
    return "plan header";
  }
  if (a.slice_bytes != b.slice_bytes) return fmt::format("slice_bytes {} vs {}", a.slice_bytes, b.slice_bytes);
  if (a.fifo_depth != b.fifo_depth) return fmt::format("fifo_depth {} vs {}", a.fifo_depth, b.fifo_depth);
  if (a.ranks.size() != b.ranks.size()) return "rank count";
  for (size_t r = 0; r < a.ranks.size(); ++r) {
    const RankPlan& x = a.ranks[r];
    const RankPlan& y = b.ranks[r];
    if (x.input_bytes != y.input_bytes || x.output_bytes != y.output_bytes || x.scratch_bytes != y.scratch_bytes ||
        x.temp_bytes != y.temp_bytes || !(x.precopies == y.precopies)) {
      return fmt::format("rank {} buffers or precopies", r);
    }
    if (x.threadblocks.size() != y.threadblocks.size()) return fmt::format("rank {} threadblock count", r);
    for (size_t t = 0; t < x.threadblocks.size(); ++t) {
      if (!(x.threadblocks[t] == y.threadblocks[t])) return fmt::format("rank {} tb {}", r, t);
    }
  }
  return a == b ? "" : "operator== disagrees with the field walk";
}

void expectSamePlans(const Algorithm& algorithm, int instances, Tally& tally) {
  for (bool in_place : {false, true}) {
    if (in_place ? !algorithm.in_place : !algorithm.out_of_place) continue;
    for (uint64_t size : kSizes) {
      SCOPED_TRACE(
          fmt::format("{} {} {} B x{}", algorithm.name, in_place ? "in-place" : "out-of-place", size, instances));
      SimOptions sim;  // SimModel::defaults()
      sim.size_bytes = size;
      sim.in_place = in_place;
      sim.instances = instances;
      const Result<Plan> simulated = simulationPlan(algorithm, sim);
      const Result<Plan> executed =
          lowerAlgorithm(algorithm, callLowerOptions(size, in_place, instances, /*element_bytes=*/1));
      ASSERT_EQ(simulated.isOk(), executed.isOk())
          << (simulated.isOk() ? executed.status() : simulated.status()).toString();
      if (!simulated.isOk()) {
        EXPECT_EQ(simulated.status().toString(), executed.status().toString());
        ++tally.refused;
        continue;
      }
      EXPECT_TRUE(*simulated == *executed) << firstDifference(*simulated, *executed);
      EXPECT_TRUE(validatePlan(*executed).isOk()) << validatePlan(*executed).toString();
      ++tally.compared;
      if (executed->fifo_depth > kNcclSteps) ++tally.fifo_rule;
    }
  }
}

TEST(PlanIdentity, CorpusAlgorithms) {
  BRAID_SKIP_WITHOUT_REALCASES();
  std::vector<std::filesystem::path> files;
  for (const char* dir : {"msccl", "taccl/outputs_xml"}) {
    const auto path = braid::testing::realcasesDir() / dir;
    if (!std::filesystem::is_directory(path)) continue;
    for (const auto& entry : std::filesystem::directory_iterator(path)) {
      if (entry.path().extension() == ".xml") files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 17u);
  Tally tally;
  size_t unloadable = 0;
  for (const auto& file : files) {
    SCOPED_TRACE(file.filename().string());
    Result<Algorithm> algorithm = loadAlgorithm(file.string());
    if (!algorithm.isOk()) {  // tests/corpus/msccl_verdict_test.cc pins which files load and why the others do not
      ++unloadable;
      continue;
    }
    for (int instances : {1, 2}) expectSamePlans(*algorithm, instances, tally);
  }
  std::printf(
      "corpus: %zu files (%zu do not load), %d plan pairs equal, %d sizes refused by both, %d plans under the FIFO "
      "rule\n",
      files.size(), unloadable, tally.compared, tally.refused, tally.fifo_rule);
  EXPECT_LE(unloadable, files.size() / 4);
  EXPECT_GT(tally.compared, 100);
  // No corpus algorithm has a step over more chunks than NCCL_STEPS: ClassicalAlgorithms covers the FIFO rule.
}

// The classical algorithms the Communicator falls back to (2dh: 4 nodes of 4), on 16 ranks, both modes: recursive
// doubling and ring all-to-all exchange steps over more chunks than NCCL_STEPS, where the FIFO rule shrinks the slices.
TEST(PlanIdentity, ClassicalAlgorithms) {
  Tally tally;
  for (ClassicAlgo algo :
       {ClassicAlgo::kRing, ClassicAlgo::kMultiRing, ClassicAlgo::kDirect, ClassicAlgo::kRecursiveDoubling,
        ClassicAlgo::kDoubleBinaryTree, ClassicAlgo::kPairwise, ClassicAlgo::kTwoDimHierarchical}) {
    for (CollectiveKind kind : classicCollectives(algo)) {
      for (bool in_place : {false, true}) {
        ClassicRequest request;
        request.algo = algo;
        request.spec.kind = kind;
        request.spec.num_ranks = 16;
        request.spec.in_place = in_place;
        if (algo == ClassicAlgo::kTwoDimHierarchical) request.ranks_per_node = 4;
        Result<Algorithm> algorithm = buildClassic(request);
        ASSERT_TRUE(algorithm.isOk()) << classicAlgoName(algo) << " " << collectiveName(kind) << ": "
                                      << algorithm.status().toString();
        expectSamePlans(*algorithm, 1, tally);
      }
    }
  }
  std::printf("classical: %d plan pairs equal, %d sizes refused by both, %d plans under the FIFO rule\n",
              tally.compared, tally.refused, tally.fifo_rule);
  EXPECT_GT(tally.compared, 50);
  EXPECT_GT(tally.fifo_rule, 0);
}

// Every shipped topology x all-gather, reduce-scatter, all-reduce, all-to-all, with the derived sketch; the 52
// syntheses take about 11-16 s on 2 cores.
TEST(PlanIdentity, SynthesizedForEveryShippedTopology) {
  std::vector<std::string> names;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::filesystem::path(BRAID_SOURCE_DIR) / "topologies")) {
    if (entry.path().extension() == ".yaml") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  ASSERT_EQ(names.size(), 13u);
  Tally tally;
  const auto start = std::chrono::steady_clock::now();
  for (const std::string& name : names) {
    Result<Topology> topology = loadTopologyOrShipped(name);
    ASSERT_TRUE(topology.isOk()) << name << ": " << topology.status().toString();
    for (CollectiveKind kind : {CollectiveKind::kAllGather, CollectiveKind::kReduceScatter, CollectiveKind::kAllReduce,
                                CollectiveKind::kAllToAll}) {
      SynthesisRequest request;
      request.topology = &*topology;
      request.collective = kind;
      request.time_limit_s = 10;  // a plan is a plan: the solver's best within the budget will do
      Result<SynthesisResult> result = synthesize(request);
      ASSERT_TRUE(result.isOk()) << name << " " << collectiveName(kind) << ": " << result.status().toString();
      result->algorithm.name = fmt::format("{} ({})", result->algorithm.name, name);
      expectSamePlans(result->algorithm, 1, tally);
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "synthesized: %zu topologies x 4 collectives, %d plan pairs equal, %d sizes refused by both, %d plans "
      "under the FIFO rule, %.1f s\n",
      names.size(), tally.compared, tally.refused, tally.fifo_rule, seconds);
  EXPECT_GE(tally.compared, 13 * 4 * 3);
}

}  // namespace
}  // namespace braid
