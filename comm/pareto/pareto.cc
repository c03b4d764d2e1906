// The synthesizer-backed Pareto set (include/braid/pareto.h): synthesized and classical candidates per collective,
// scored with the simulator, the fastest at each size kept with its window.
#include "braid/pareto.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "braid/classic.h"
#include "braid/simulate.h"
#include "braid/synthesize.h"
#include "common/log.h"

namespace braid {
namespace {

constexpr double kSynthesisSeconds = 30;  // per collective

/// 1 KiB, 16 KiB, ..., 256 MiB.
std::vector<uint64_t> paretoSizes() {
  std::vector<uint64_t> sizes;
  for (uint64_t s = 1 << 10; s <= (uint64_t{256} << 20); s *= 16) sizes.push_back(s);
  return sizes;
}

/// Simulated time of `algorithm` at `size` bytes, rounded down to whole float elements per rank (one element at
/// least), out-of-place.
Result<double> simulatedUs(const Algorithm& algorithm, const Topology& topology, uint64_t size) {
  const uint64_t n = static_cast<uint64_t>(topology.numGpus());
  SimOptions options;
  options.size_bytes = std::max<uint64_t>(n * 4, size - size % (n * 4));
  options.in_place = false;
  BRAID_ASSIGN_OR_RETURN(SimResult sim, simulate(algorithm, topology, options));
  return sim.time_us;
}

struct Scored {
  ParetoCandidate candidate;
  std::vector<double> time_us;  // per paretoSizes() entry; infinity where it cannot run
};

/// The synthesized algorithms (TACCL pipeline; tree packing for all-gather, reduce-scatter and all-reduce) when
/// synthesis succeeds, and the classical ones that apply for `kind`.
std::vector<Scored> candidatesFor(CollectiveKind kind, const Topology& topology, const std::string& topology_name) {
  std::vector<Scored> out;
  for (SynthesisMethod method : {SynthesisMethod::kTaccl, SynthesisMethod::kForest}) {
    if (method == SynthesisMethod::kForest && kind != CollectiveKind::kAllGather &&
        kind != CollectiveKind::kReduceScatter && kind != CollectiveKind::kAllReduce) {
      continue;
    }
    SynthesisRequest request;
    request.topology = &topology;
    request.collective = kind;
    request.method = method;
    request.time_limit_s = kSynthesisSeconds;
    if (method == SynthesisMethod::kForest) {
      // The tree method's candidates (pieces, tree counts) are chosen by the simulator at its costing size.
      request.score = [&topology](const Algorithm& algorithm, uint64_t size) {
        return simulatedUs(algorithm, topology, size);
      };
      request.score_name = "Braid's simulator (us, float, out-of-place)";
    }
    Result<SynthesisResult> synthesized = synthesize(request);
    if (synthesized.isOk()) {
      Scored s;
      s.candidate.algorithm = synthesized->algorithm;
      s.candidate.source =
          method == SynthesisMethod::kForest ? "tree packing " + topology_name : "synthesized " + topology_name;
      out.push_back(std::move(s));
    } else {
      BRAID_LOG(kInfo, "no {} {} for {}: {}", synthesisMethodName(method), collectiveName(kind), topology_name,
                synthesized.status().toString());
    }
  }
  for (ClassicAlgo algo :
       {ClassicAlgo::kRing, ClassicAlgo::kRecursiveDoubling, ClassicAlgo::kDirect, ClassicAlgo::kDoubleBinaryTree}) {
    const auto applies = classicCollectives(algo);
    if (std::find(applies.begin(), applies.end(), kind) == applies.end()) continue;
    ClassicRequest classic;
    classic.algo = algo;
    classic.spec.kind = kind;
    classic.spec.num_ranks = topology.numGpus();
    classic.spec.chunk_factor = 0;
    classic.topology = &topology;
    Result<Algorithm> built = buildClassic(classic);
    if (!built.isOk()) continue;
    Scored s;
    s.candidate.algorithm = std::move(built).value();
    s.candidate.source = fmt::format("pareto {}: classical {}", topology_name, classicAlgoName(algo));
    out.push_back(std::move(s));
  }
  return out;
}

/// Simulated time of every candidate at every size (sizes rounded down to whole float elements per rank).
void score(std::vector<Scored>& scored, const Topology& topology, const std::vector<uint64_t>& sizes) {
  for (Scored& s : scored) {
    for (uint64_t size : sizes) {
      Result<double> us = simulatedUs(s.candidate.algorithm, topology, size);
      s.time_us.push_back(us.isOk() ? *us : std::numeric_limits<double>::infinity());
    }
  }
}

uint64_t geometricMidpoint(uint64_t a, uint64_t b) {
  return static_cast<uint64_t>(std::sqrt(static_cast<double>(a) * static_cast<double>(b)));
}

/// The fastest candidate at each size, runs of one winner merged into one window.
std::vector<ParetoCandidate> keepWinners(const std::vector<Scored>& scored, const std::vector<uint64_t>& sizes) {
  std::vector<int> winner(sizes.size(), -1);
  for (size_t i = 0; i < sizes.size(); ++i) {
    double best = std::numeric_limits<double>::infinity();
    for (size_t c = 0; c < scored.size(); ++c) {
      if (scored[c].time_us[i] < best) {
        best = scored[c].time_us[i];
        winner[i] = static_cast<int>(c);
      }
    }
  }
  std::vector<ParetoCandidate> kept;
  size_t i = 0;
  while (i < sizes.size()) {
    if (winner[i] < 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j + 1 < sizes.size() && winner[j + 1] == winner[i]) ++j;
    ParetoCandidate c = scored[winner[i]].candidate;
    c.window_min = i == 0 ? 0 : geometricMidpoint(sizes[i - 1], sizes[i]);
    c.window_max = j + 1 == sizes.size() ? kUnlimitedBytes : geometricMidpoint(sizes[j], sizes[j + 1]) - 1;
    kept.push_back(std::move(c));
    i = j + 1;
  }
  return kept;
}

}  // namespace

Result<std::vector<ParetoCandidate>> synthesizeParetoSet(const Topology& topology, const std::string& topology_name) {
  if (topology.numGpus() <= 0)
    return invalidArgument(fmt::format("Pareto set: topology {} has no GPUs", topology_name));
  const std::vector<uint64_t> sizes = paretoSizes();
  std::vector<ParetoCandidate> kept;
  for (CollectiveKind kind : {CollectiveKind::kAllGather, CollectiveKind::kReduceScatter, CollectiveKind::kAllReduce,
                              CollectiveKind::kAllToAll}) {
    std::vector<Scored> scored = candidatesFor(kind, topology, topology_name);
    score(scored, topology, sizes);
    for (ParetoCandidate& c : keepWinners(scored, sizes)) kept.push_back(std::move(c));
  }
  return kept;
}

ParetoSynthesizer paretoSynthesizer() { return synthesizeParetoSet; }

void enableParetoSynthesis() { setDefaultParetoSynthesizer(paretoSynthesizer()); }

}  // namespace braid

extern "C" braidResult_t braidEnableParetoSynthesis(void) {
  braid::enableParetoSynthesis();
  return braidSuccess;
}
