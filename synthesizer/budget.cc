// Solver work in deterministic units (budget.h).
#include "synthesizer/budget.h"

#include <algorithm>

namespace braid::synth {

void ClockCuts::add(const std::string& stage) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (std::find(stages_.begin(), stages_.end(), stage) == stages_.end()) stages_.push_back(stage);
}

std::vector<std::string> ClockCuts::stages() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stages_;
}

uint64_t unitsCounted(z3::context& z) {
  // A solver's statistics carry its context's resource count; a fresh solver reads it without touching the others.
  z3::solver probe(z);
  const z3::stats stats = probe.statistics();
  for (unsigned i = 0; i < stats.size(); ++i) {
    if (stats.key(i) != "rlimit count") continue;
    return stats.is_uint(i) ? stats.uint_value(i) : static_cast<uint64_t>(std::max(0.0, stats.double_value(i)));
  }
  return 0;
}

void StageContext::clockCut(const std::string& stage) const {
  if (cuts) cuts->add(stage);
}

}  // namespace braid::synth
