// Deterministic synthesis (include/braid/synthesize.h budget_units, synthesizer/budget.h): the solvers' budget is in
// Z3 resource units, so the same request gives the same algorithm on a quiet machine and on one where two other
// CPU-bound programs run; the wall clock, when it ends a stage first, is reported in clock_cuts.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "braid/algorithm.h"
#include "braid/sketch.h"
#include "braid/synthesize.h"
#include "braid/topology.h"
#include "support/hard_request.h"

namespace braid {
namespace {

// Two threads that spin until destroyed: the "two other CPU-bound programs" (on a 2-core machine they leave the
// synthesis a third of the CPU).
class BusyMachine {
 public:
  BusyMachine() {
    for (int i = 0; i < 2; ++i) {
      threads_.emplace_back([this] {
        volatile uint64_t x = 0;
        while (!stop_.load(std::memory_order_relaxed)) x = x * 6364136223846793005ULL + 1;
      });
    }
  }
  ~BusyMachine() {
    stop_ = true;
    for (std::thread& t : threads_) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

struct Case {
  std::string topology;
  CollectiveKind collective;
  uint64_t budget;
};

SynthesisResult synthesizeCase(const Topology& topology, const Case& c) {
  SynthesisRequest request;
  request.topology = &topology;
  request.collective = c.collective;
  request.budget_units = c.budget;
  request.time_limit_s = 600;  // far above what the budget takes: the budget ends every search
  Result<SynthesisResult> result = synthesize(request);
  EXPECT_TRUE(result.isOk()) << result.status().message();
  return result.isOk() ? std::move(*result) : SynthesisResult{};
}

uint64_t unitsSpent(const SynthesisResult& result) {
  uint64_t sum = 0;
  for (const StageReport& s : result.stages) sum += s.solver_units;
  return sum;
}

// Cases whose searches end at their budget (routing or scheduling reports "budget"), so that the budget, not the end
// of the search, decides the result: routing's bisection (dgx1-v100 all-reduce, ndv2-x1 all-to-all) and
// scheduling's descent (dgx2-x2 and ndv2-x2 all-gather).
const std::vector<Case>& cases() {
  static const std::vector<Case> kCases = {
      {"dgx1-v100", CollectiveKind::kAllReduce, 500'000},
      {"ndv2-x1", CollectiveKind::kAllToAll, 1'000'000},
      {"dgx2-x2", CollectiveKind::kAllGather, 300'000},
      {"ndv2-x2", CollectiveKind::kAllGather, 100'000},
  };
  return kCases;
}

bool endedByBudget(const SynthesisResult& result) {
  for (const StageReport& s : result.stages)
    if (s.status.find("budget") != std::string::npos) return true;
  return false;
}

TEST(Determinism, SameAlgorithmOnAQuietAndABusyMachine) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.topology + " " + collectiveName(c.collective));
    Result<Topology> topology = loadTopologyOrShipped(c.topology);
    ASSERT_TRUE(topology.isOk()) << topology.status().message();
    const SynthesisResult quiet = synthesizeCase(*topology, c);
    SynthesisResult busy;
    {
      BusyMachine load;
      busy = synthesizeCase(*topology, c);
    }
    EXPECT_TRUE(endedByBudget(quiet));
    EXPECT_TRUE(quiet.clock_cuts.empty());
    EXPECT_TRUE(busy.clock_cuts.empty());
    EXPECT_GT(unitsSpent(quiet), 0u);
    EXPECT_EQ(unitsSpent(quiet), unitsSpent(busy));
    EXPECT_EQ(writeMscclXml(quiet.algorithm), writeMscclXml(busy.algorithm));
    ASSERT_EQ(quiet.stages.size(), busy.stages.size());
    for (size_t i = 0; i < quiet.stages.size(); ++i) {
      EXPECT_EQ(quiet.stages[i].status, busy.stages[i].status) << quiet.stages[i].name;
      EXPECT_EQ(quiet.stages[i].solver_units, busy.stages[i].solver_units) << quiet.stages[i].name;
    }
  }
}

TEST(Determinism, StagesSpendWithinTheBudget) {
  Result<Topology> topology = loadTopologyOrShipped("dgx1-v100");
  ASSERT_TRUE(topology.isOk());
  for (uint64_t budget : {200'000ULL, 1'000'000ULL}) {
    const SynthesisResult r = synthesizeCase(*topology, {"dgx1-v100", CollectiveKind::kAllReduce, budget});
    EXPECT_EQ(r.budget_units, budget);
    // Z3 stops a check a little past its limit (it polls the count): a check may overrun by a few percent.
    EXPECT_LE(unitsSpent(r), budget + budget / 10) << budget;
  }
}

TEST(Determinism, WallClockCutIsReported) {
  // A problem far larger than a second of solving (TimeLimitSynthesis.HardRequestWithOneSecondReturns), with a
  // budget far larger than a second allows: the wall clock ends routing.
  Result<Topology> topology = loadTopologyOrShipped("dgx1-v100");
  ASSERT_TRUE(topology.isOk());
  Result<SynthesisRequest> request = testing_support::hardAllToAllRequest(*topology);
  ASSERT_TRUE(request.isOk()) << request.status().message();
  request->budget_units = 1'000'000'000'000ULL;
  std::vector<std::string> cut_stages;
  request->clock_cuts_out = &cut_stages;
  Result<SynthesisResult> result = synthesize(*request);
  ASSERT_FALSE(cut_stages.empty()) << "clock_cuts_out is set whether synthesis succeeds or not";
  EXPECT_EQ(cut_stages.front(), "routing");
  if (!result.isOk()) {
    // No routing within the second: the wall clock ended the search, and synthesize() says so.
    EXPECT_EQ(result.status().code(), StatusCode::kTimeout) << result.status().message();
    EXPECT_NE(result.status().message().find("the wall-clock limit of 1 s ended routing"), std::string::npos)
        << result.status().message();
    return;
  }
  EXPECT_EQ(result->clock_cuts, cut_stages);
  ASSERT_FALSE(result->clock_cuts.empty());
  EXPECT_EQ(result->clock_cuts.front(), "routing");
  bool noted = false;
  for (const std::string& n : result->notes) noted |= n.find("another run may give another algorithm") != n.npos;
  EXPECT_TRUE(noted);
}

}  // namespace
}  // namespace braid
