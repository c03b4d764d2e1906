// Solver work in deterministic units, private to synthesizer/.
//
// Every Z3 check runs under two limits: Z3's resource limit (rlimit: Z3 counts resource units as it works, the same
// count for the same problem on any machine and under any load) and the wall-clock time left in its stage (a
// timeout, and the watchdog's interrupt). The request's budget is in resource units, so a search that stops at its
// budget stops at the same point on a quiet or a busy machine and produces the same algorithm. A check that the wall
// clock ended first (its units not used up) makes the result depend on the machine: it is recorded in ClockCuts,
// and synthesize() tells the caller.
#pragma once

#include <z3++.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "synthesizer/model.h"

namespace braid::synth {

/// Z3 resource units per second of the request's time limit when the request gives no budget of its own.
inline constexpr uint64_t kUnitsPerSecond = kSynthesisUnitsPerSecond;

/// The stages that a wall-clock limit ended early, in order, without repeats. Thread-safe.
class ClockCuts {
 public:
  void add(const std::string& stage);
  std::vector<std::string> stages() const;

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> stages_;
};

/// Resource units counted so far by Z3 context `z` (Z3's "rlimit count": cumulative over the context's checks).
uint64_t unitsCounted(z3::context& z);

/// Runs `solver`.check(assumptions) (a z3::solver or z3::optimize) with rlimit = min(`units`, `*left`) and the
/// wall-clock time left in `ctx` as its timeout. Subtracts the units it spent from `*left`. A check ended by the wall
/// clock rather than by its units (unknown with units to spare, or no time left to start it: then it is not run and
/// returns unknown) is recorded in ctx.cuts under `stage`. Throws what Z3 throws (z3::exception "canceled" once the
/// watchdog has interrupted the context).
template <class Solver, class... Assumptions>
z3::check_result checkWithin(Solver& solver, const StageContext& ctx, const std::string& stage, uint64_t units,
                             uint64_t* left, Assumptions&... assumptions) {
  const uint64_t limit = std::min(units, *left);
  if (limit == 0) return z3::unknown;
  const double seconds = ctx.secondsLeft();
  if (seconds <= 0) {
    ctx.clockCut(stage);
    return z3::unknown;
  }
  z3::context& z = solver.ctx();
  z3::params p(z);
  p.set("rlimit", static_cast<unsigned>(std::min<uint64_t>(limit, 4'000'000'000ULL)));
  p.set("timeout", static_cast<unsigned>(std::min(seconds * 1000 + 1, 4.0e9)));
  solver.set(p);
  const uint64_t before = unitsCounted(z);
  const z3::check_result r = solver.check(assumptions...);
  const uint64_t spent = unitsCounted(z) - before;
  *left -= std::min(spent, *left);
  if (r == z3::unknown && spent < limit) ctx.clockCut(stage);
  return r;
}

}  // namespace braid::synth
