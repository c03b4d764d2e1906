// The time limit as a wall-clock bound (include/braid/synthesize.h, synthesizer/watchdog.h): the watchdog interrupts
// a Z3 check that has no timeout of its own, repeats progress while it runs, and synthesize() returns (an algorithm
// or kTimeout "no algorithm within the time limit") on requests whose solver calls would otherwise run for minutes.
// The suites are named TimeLimit*: tests/CMakeLists.txt gives them a ctest TIMEOUT, so a hang fails the test
// there; nothing here measures time.

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <z3++.h>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "braid/sketch.h"
#include "braid/synthesize.h"
#include "braid/topology.h"
#include "support/hard_request.h"
#include "synthesizer/watchdog.h"

namespace braid {
namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// The pigeonhole formula PHP(n + 1, n) as plain clauses (every pigeon in a hole, no two pigeons in one hole): no
// resolution proof of it is shorter than exponential in n, so Z3's CDCL core needs hours for n = 14.
void addPigeonhole(z3::context& z, z3::solver& s, int holes) {
  std::vector<std::vector<z3::expr>> in(holes + 1);
  for (int p = 0; p <= holes; ++p) {
    z3::expr_vector some(z);
    for (int h = 0; h < holes; ++h) {
      in[p].push_back(z.bool_const(("p" + std::to_string(p) + "h" + std::to_string(h)).c_str()));
      some.push_back(in[p].back());
    }
    s.add(z3::mk_or(some));
  }
  for (int h = 0; h < holes; ++h)
    for (int p = 0; p <= holes; ++p)
      for (int q = p + 1; q <= holes; ++q) s.add(!in[p][h] || !in[q][h]);
}

TEST(TimeLimitWatchdog, InterruptsACheckWithoutTimeout) {
  z3::context z;
  z3::solver s(z);
  addPigeonhole(z, s, 14);
  std::vector<SynthesisProgress> seen;
  std::mutex mutex;
  synth::Watchdog watchdog(
      Clock::now(), after(1.0),
      [&](const SynthesisProgress& p) {
        std::lock_guard<std::mutex> lock(mutex);
        seen.push_back(p);
      },
      /*tick_s=*/0.05, /*heartbeat_s=*/0.2);
  watchdog.report({.stage = "routing", .detail = "first routing"});
  z3::check_result r;
  {
    synth::Watchdog::SolverGuard guard(&watchdog, z, watchdog.deadline());
    r = s.check();  // no timeout parameter: only the watchdog ends it
  }
  EXPECT_EQ(r, z3::unknown) << "Z3 decided PHP(15, 14) before the interrupt";
  EXPECT_GE(watchdog.interrupts(), 1);
  EXPECT_EQ(watchdog.stage(), "routing");
  std::lock_guard<std::mutex> lock(mutex);
  ASSERT_GE(seen.size(), 2u) << "no heartbeat while the check ran";
  EXPECT_EQ(seen[0].detail, "first routing");
  for (size_t i = 1; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].stage, "routing");
    EXPECT_NE(seen[i].detail.find("first routing (running"), std::string::npos) << seen[i].detail;
    EXPECT_GE(seen[i].elapsed_seconds, seen[i - 1].elapsed_seconds);
  }
}

TEST(TimeLimitWatchdog, GuardsWithoutWatchdogAndAfterUnregisteringDoNothing) {
  z3::context z;
  { synth::Watchdog::SolverGuard guard(nullptr, z, Clock::now()); }
  // A context registered with a past deadline and unregistered before the next tick is never interrupted, so a
  // later check on it decides normally.
  synth::Watchdog watchdog(Clock::now(), after(60), nullptr, /*tick_s=*/5.0);
  { synth::Watchdog::SolverGuard guard(&watchdog, z, Clock::now()); }
  z3::solver s(z);
  s.add(z.bool_const("a") && !z.bool_const("b"));
  EXPECT_EQ(s.check(), z3::sat);
  EXPECT_EQ(watchdog.interrupts(), 0);
}

// A result, or the clear error naming the limit and the stage.
void expectReturned(const Result<SynthesisResult>& result, double limit, const std::string& what) {
  if (result.isOk()) {
    EXPECT_FALSE(result->algorithm.name.empty()) << what;
    return;
  }
  EXPECT_EQ(result.status().code(), StatusCode::kTimeout) << what << ": " << result.status().toString();
  EXPECT_NE(result.status().message().find(fmt::format("no algorithm within the time limit of {:g} s (stage", limit)),
            std::string::npos)
      << what << ": " << result.status().message();
}

// pcie-2s4g all-to-all: the routing stage's linear relaxation, then a Z3 LRA check with a 1 s timeout, ran for
// minutes and synthesize() did not return.
TEST(TimeLimitSynthesis, Pcie2s4gAllToAllReturns) {
  Result<Topology> topology = loadTopologyOrShipped("pcie-2s4g");
  ASSERT_TRUE(topology.isOk()) << topology.status().toString();
  SynthesisRequest request;
  request.topology = &*topology;
  request.collective = CollectiveKind::kAllToAll;
  request.time_limit_s = 3;
  int reports = 0;
  request.progress = [&](const SynthesisProgress&) { ++reports; };
  Result<SynthesisResult> result = synthesize(request);
  expectReturned(result, 3, "pcie-2s4g alltoall");
  ASSERT_TRUE(result.isOk()) << result.status().toString();
  EXPECT_GT(reports, 0);
}

// A request far beyond a one-second budget: DGX-1 all-to-all with 12 chunks per pair and two hops of path slack
// (tens of thousands of route variables). It comes back with the best routing so far or the time-limit error.
TEST(TimeLimitSynthesis, HardRequestWithOneSecondReturns) {
  Result<Topology> topology = loadTopologyOrShipped("dgx1-v100");
  ASSERT_TRUE(topology.isOk()) << topology.status().toString();
  Result<SynthesisRequest> request = testing_support::hardAllToAllRequest(*topology);
  ASSERT_TRUE(request.isOk()) << request.status().toString();
  Result<SynthesisResult> result = synthesize(*request);
  expectReturned(result, 1, "dgx1-v100 alltoall chunkup 12 slack 2");
  if (!result.isOk()) std::printf("returned: %s\n", result.status().toString().c_str());
  if (result.isOk()) {
    for (const StageReport& stage : result->stages)
      std::printf("%s: %.2f s, %d variables, %s\n", stage.name.c_str(), stage.seconds, stage.variables,
                  stage.status.c_str());
    bool limited = false;
    for (const StageReport& stage : result->stages) limited |= stage.status.find("time limit") != std::string::npos;
    EXPECT_TRUE(limited) << "a 1 s budget proved the optimum of a problem this size";
  }
}

}  // namespace
}  // namespace braid
