// The synthesizer-backed Pareto set (include/braid/pareto.h): synthesized and classical candidates per collective,
// each with each protocol, scored with the simulator next to NCCL's own choice; the fastest at each size kept with
// its window, windows where NCCL is faster marked as NCCL's.
#include "braid/pareto.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <utility>

#include "braid/classic.h"
#include "braid/classic_blocks.h"
#include "braid/sim_accuracy.h"
#include "braid/simulate.h"
#include "braid/synthesize.h"
#include "comm/pareto/compare.h"
#include "common/log.h"
#include "common/text.h"

namespace braid {
namespace {

/// 1 KiB, 4 KiB, ..., 1 GiB.
std::vector<uint64_t> defaultSizes() {
  std::vector<uint64_t> sizes;
  for (uint64_t s = 1 << 10; s <= (uint64_t{1} << 30); s *= 4) sizes.push_back(s);
  return sizes;
}

void say(const ParetoOptions& options, const std::string& line) {
  if (options.progress) options.progress(line);
}

/// kTimeout naming `stage` once options.deadline has passed; ok otherwise (and without a deadline).
Status checkDeadline(const ParetoOptions& options, CollectiveKind kind, const std::string& stage) {
  if (!options.deadline || std::chrono::steady_clock::now() < *options.deadline) return Status::ok();
  return Status(StatusCode::kTimeout,
                fmt::format("Pareto set for {}: the deadline passed before {}", collectiveName(kind), stage));
}

/// options.time_limit_s, cut to the seconds left before options.deadline.
double timeLimitLeft(const ParetoOptions& options) {
  if (!options.deadline) return options.time_limit_s;
  const double left = std::chrono::duration<double>(*options.deadline - std::chrono::steady_clock::now()).count();
  return std::min(options.time_limit_s, std::max(left, 1e-3));
}

/// The synthesized algorithms (TACCL pipeline; the forest method: tree packing for all-gather, reduce-scatter and
/// all-reduce, the max-concurrent flow for all-to-all) when
/// synthesis succeeds, and the classical ones that apply for `kind`.
Result<std::vector<ParetoCandidate>> candidatesFor(CollectiveKind kind, const Topology& topology,
                                                   const std::string& topology_name, const ParetoOptions& options,
                                                   CollectiveParetoSet* set) {
  std::vector<std::string>* notes = &set->notes;
  std::vector<ParetoCandidate> out;
  // SCCL's search for single nodes only (its model: one lane of the fastest GPU link as the unit), both objectives.
  struct Method {
    SynthesisMethod method;
    ScclObjective objective = ScclObjective::kLatency;
  };
  std::vector<Method> methods = {{SynthesisMethod::kTaccl}, {SynthesisMethod::kForest}};
  if (scclMethodBuilds(kind) && topology.numNodes() <= 1) {
    methods.push_back({SynthesisMethod::kSccl, ScclObjective::kLatency});
    methods.push_back({SynthesisMethod::kSccl, ScclObjective::kBandwidth});
  }
  for (const auto& [method, objective] : methods) {
    if (method == SynthesisMethod::kForest && !forestMethodBuilds(kind, topology.numGpus())) continue;
    const std::string what =
        method == SynthesisMethod::kTaccl ? "synthesized"
        : method == SynthesisMethod::kSccl
            ? (objective == ScclObjective::kLatency ? "sccl least-steps" : "sccl least-rounds-per-chunk")
        : kind == CollectiveKind::kAllToAll ? "max-concurrent flow"
                                            : "tree packing";
    BRAID_RETURN_IF_ERROR(checkDeadline(options, kind, what));
    const double time_limit_s = timeLimitLeft(options);
    say(options, fmt::format("{}: {} (time limit {:g} s)", collectiveName(kind), what, time_limit_s));
    SynthesisRequest request;
    request.topology = &topology;
    request.collective = kind;
    request.method = method;
    request.sccl_objective = objective;
    request.time_limit_s = time_limit_s;
    request.budget_units = options.budget_units;
    if (method == SynthesisMethod::kForest) {
      // The tree method's candidates (pieces, tree counts) are chosen by the simulator at its costing size.
      request.score = simulatedScore(topology);
      request.score_name = kSimulatedScoreName;
    }
    std::vector<std::string> cut_stages;  // also when the synthesis fails: the set may differ on another run
    request.clock_cuts_out = &cut_stages;
    Result<SynthesisResult> synthesized = synthesize(request);
    for (const std::string& stage : cut_stages) set->clock_cuts.push_back(what + ": " + stage);
    if (synthesized.isOk()) {
      ParetoCandidate c;
      c.algorithm = std::move(synthesized->algorithm);
      c.source = what + " " + topology_name;
      out.push_back(std::move(c));
    } else {
      notes->push_back(fmt::format("no {} {}: {}", what, collectiveName(kind), synthesized.status().message()));
      BRAID_LOG(kInfo, "no {} {} for {}: {}", synthesisMethodName(method), collectiveName(kind), topology_name,
                synthesized.status().toString());
    }
  }
  // 2dh (Tutel's hierarchical all-to-all) where the topology has two levels: several nodes of several GPUs.
  Result<algos::NodeGrid> grid = algos::nodeGrid(topology, topology.numGpus(), nullptr);
  const bool two_levels = grid.isOk() && grid->nodes > 1 && grid->gpus_per_node > 1;
  for (ClassicAlgo algo : {ClassicAlgo::kRing, ClassicAlgo::kRecursiveDoubling, ClassicAlgo::kDirect,
                           ClassicAlgo::kDoubleBinaryTree, ClassicAlgo::kTwoDimHierarchical}) {
    const auto applies = classicCollectives(algo);
    if (std::find(applies.begin(), applies.end(), kind) == applies.end()) continue;
    if (algo == ClassicAlgo::kTwoDimHierarchical && !two_levels) continue;
    ClassicRequest classic;
    classic.algo = algo;
    classic.spec.kind = kind;
    classic.spec.num_ranks = topology.numGpus();
    classic.spec.chunk_factor = 0;
    classic.topology = &topology;
    Result<Algorithm> built = buildClassic(classic);
    if (!built.isOk()) continue;
    ParetoCandidate c;
    c.algorithm = std::move(built).value();
    c.source = fmt::format("pareto {}: classical {}", topology_name, classicAlgoName(algo));
    out.push_back(std::move(c));
  }
  return out;
}

/// A candidate run with one protocol and a number of MSCCL instances, simulated at every measured size (infinity
/// where it cannot run or was not simulated).
struct Variant {
  size_t candidate = 0;
  Protocol protocol = Protocol::kSimple;
  int instances = 1;
  std::vector<double> us;
};

/// MSCCL instance counts tried with Simple besides one (msccl-tools `instances`: every threadblock copied, each
/// copy on its own part of every chunk). The copies' channels must fit MSCCL's MAXCHANNELS (kMaxAlgorithmChannels).
constexpr int kInstanceCounts[] = {2, 4, 8};

/// An instance count is kept only if it is this much faster than the counts below it at the largest size.
constexpr double kInstanceGain = 0.99;

/// `simple` run with `instances` instances, simulated from the largest size down: at the largest size it must take
/// at most kInstanceGain x the best of `simple` and `fewer` (the instance counts below it), below it merely less,
/// and below two sizes in a row where it is not faster, none is simulated. More instances split every chunk and
/// add threadblocks, which pays only where pipelining, not latency, sets the time. Empty when the largest size
/// gains too little: no larger instance count is tried then.
std::optional<Variant> instanceVariant(const ParetoCandidate& candidate, const Variant& simple,
                                       const std::vector<const Variant*>& fewer, int instances,
                                       const Topology& topology, const std::vector<uint64_t>& sizes) {
  Variant v;
  v.candidate = simple.candidate;
  v.protocol = Protocol::kSimple;
  v.instances = instances;
  v.us.assign(sizes.size(), std::numeric_limits<double>::infinity());
  const uint64_t n = static_cast<uint64_t>(std::max(1, topology.numGpus()));
  int behind = 0;
  bool faster_anywhere = false;
  for (size_t i = sizes.size(); i-- > 0 && behind < 2;) {
    double best = simple.us[i];
    for (const Variant* f : fewer) best = std::min(best, f->us[i]);
    const uint64_t bytes = std::max<uint64_t>(n * 4, sizes[i] - sizes[i] % (n * 4));
    Result<SimResult> sim = simulateRunnable(Runnable{&candidate.algorithm, &topology, -1}, bytes, Protocol::kSimple,
                                             false, instances, false);
    if (!sim.isOk()) break;
    v.us[i] = sim->time_us;
    if (i + 1 == sizes.size() && v.us[i] > kInstanceGain * best) return std::nullopt;
    const bool faster = v.us[i] < best;
    faster_anywhere = faster_anywhere || faster;
    behind = faster ? 0 : behind + 1;
  }
  if (!faster_anywhere) return std::nullopt;
  return v;
}

Result<std::vector<Variant>> scoreVariants(const std::vector<ParetoCandidate>& candidates, const Topology& topology,
                                           const std::vector<uint64_t>& sizes, const ParetoOptions& options,
                                           CollectiveKind kind) {
  const auto scorer = simulatedScore(topology);
  std::vector<Variant> out;
  // Progress counts the candidate x protocol passes ("(k of candidates x 3)"); the instance variants that follow a
  // candidate's passes depend on its times and are reported without a count.
  size_t pass = 0;
  for (size_t c = 0; c < candidates.size(); ++c) {
    for (Protocol protocol : {Protocol::kSimple, Protocol::kLL, Protocol::kLL128}) {
      BRAID_RETURN_IF_ERROR(checkDeadline(
          options, kind, fmt::format("simulating {} / {}", candidates[c].source, protocolName(protocol))));
      say(options, fmt::format("simulating {} / {} ({} of {})", candidates[c].source, protocolName(protocol), ++pass,
                               candidates.size() * 3));
      Variant v;
      v.candidate = c;
      v.protocol = protocol;
      Algorithm algorithm = candidates[c].algorithm;
      algorithm.protocol = protocol;
      // LL moves 8 data bytes in 16 and LL128 120 in 128, so once a protocol has been 1.5x slower than the same
      // candidate with Simple at two sizes in a row, bandwidth decides and it is not simulated at larger sizes
      // (LL's simulation is the slowest: one flag check per 8 bytes).
      const Variant* simple =
          protocol == Protocol::kSimple ? nullptr : &out[out.size() - (protocol == Protocol::kLL ? 1 : 2)];
      int behind = 0;
      for (size_t i = 0; i < sizes.size(); ++i) {
        if (behind >= 2) {
          v.us.push_back(std::numeric_limits<double>::infinity());
          continue;
        }
        Result<double> us = scorer(algorithm, sizes[i]);
        v.us.push_back(us.isOk() ? *us : std::numeric_limits<double>::infinity());
        behind = simple && v.us.back() >= 1.5 * simple->us[i] ? behind + 1 : 0;
      }
      out.push_back(std::move(v));
    }
    // Simple with more MSCCL instances, while each count is faster than the counts below it somewhere.
    const size_t simple = out.size() - 3;
    std::vector<const Variant*> fewer;
    std::vector<Variant> more;
    for (int k : kInstanceCounts) {
      if (static_cast<long long>(candidates[c].algorithm.num_channels) * k > kMaxAlgorithmChannels) break;
      BRAID_RETURN_IF_ERROR(checkDeadline(
          options, kind, fmt::format("simulating {} / Simple with {} instances", candidates[c].source, k)));
      say(options, fmt::format("simulating {} / Simple with {} instances", candidates[c].source, k));
      std::optional<Variant> v = instanceVariant(candidates[c], out[simple], fewer, k, topology, sizes);
      if (!v) break;
      more.push_back(std::move(*v));
      fewer.clear();
      for (const Variant& m : more) fewer.push_back(&m);
    }
    for (Variant& m : more) out.push_back(std::move(m));
  }
  return out;
}

uint64_t geometricMidpoint(uint64_t a, uint64_t b) {
  return static_cast<uint64_t>(std::sqrt(static_cast<double>(a) * static_cast<double>(b)));
}

/// Relative difference below which NCCL's time and min_speedup x Braid's best are a tie (Braid keeps the size).
constexpr double kTieTolerance = 1e-9;

/// The fastest variant at each measured size (the first listed on ties), and whether the size is NCCL's (that
/// variant not predicted min_speedup x faster than NCCL's choice).
struct Winner {
  int variant = -1;
  bool nccl = false;
  /// A window is a run of sizes with one server and one Braid candidate: a run left to NCCL is split where Braid's
  /// fastest changes, since that candidate is what a Braid communicator (no NCCL to hand over to) runs there.
  bool operator==(const Winner& o) const { return nccl == o.nccl && variant == o.variant; }
};

std::vector<Winner> winners(const std::vector<Variant>& variants, const Comparison& reference, double min_speedup) {
  std::vector<Winner> out(reference.sizes.size());
  for (size_t i = 0; i < reference.sizes.size(); ++i) {
    double best = std::numeric_limits<double>::infinity();
    for (size_t v = 0; v < variants.size(); ++v) {
      if (variants[v].us[i] < best) {
        best = variants[v].us[i];
        out[i].variant = static_cast<int>(v);
      }
    }
    // Braid keeps the size when NCCL takes min_speedup x its time or more (up to rounding: equal simulations may
    // differ in the last bits).
    const std::optional<double>& nccl = reference.sizes[i].nccl_us;
    out[i].nccl = nccl && *nccl < best * min_speedup * (1 - kTieTolerance);
  }
  return out;
}

/// `ratio` rounded down to 3 decimals ("1.038" for 1.03889): never shown above a margin it is below.
std::string flooredRatio(double ratio) { return fmt::format("{:.3f}", std::floor(ratio * 1000) / 1000); }

/// The note naming the sizes where Braid's fastest candidate was predicted faster than NCCL's choice, visibly (by
/// 0.05 % or more), but by less than the margin.
std::optional<std::string> marginNote(const std::vector<Variant>& variants, const Comparison& reference,
                                      const std::vector<Winner>& won, double min_speedup) {
  std::vector<std::string> kept;
  for (size_t i = 0; i < won.size(); ++i) {
    const std::optional<double>& nccl = reference.sizes[i].nccl_us;
    if (!won[i].nccl || won[i].variant < 0 || !nccl) continue;
    const double speedup = *nccl / variants[won[i].variant].us[i];
    if (speedup >= 1.0005)
      kept.push_back(fmt::format("{} ({}x)", ncclTestsSizeText(reference.sizes[i].size_bytes), flooredRatio(speedup)));
  }
  if (kept.empty()) return std::nullopt;
  return fmt::format("left to NCCL though Braid's fastest is predicted faster, by less than the margin of {}x: {}",
                     min_speedup, fmt::join(kept, ", "));
}

/// Per protocol, the sizes Braid serves where its protocol lies outside the simulator's validated band
/// (validatedBandFor): there the predicted speedup, margin included, may be the simulator's optimism.
std::vector<std::string> unvalidatedWindowNotes(CollectiveKind collective, const std::vector<Variant>& variants,
                                                const Comparison& reference, const std::vector<Winner>& won) {
  std::vector<std::string> out;
  for (Protocol protocol : {Protocol::kSimple, Protocol::kLL, Protocol::kLL128}) {
    const SimCalibration* band = validatedBandFor(collective, protocol);
    std::vector<std::string> sizes;
    for (size_t i = 0; i < won.size(); ++i) {
      const std::optional<double>& nccl = reference.sizes[i].nccl_us;
      if (won[i].nccl || won[i].variant < 0 || !nccl) continue;
      const Variant& v = variants[won[i].variant];
      const uint64_t bytes = reference.sizes[i].size_bytes;
      if (v.protocol != protocol || (band != nullptr && insideValidatedBand(*band, bytes))) continue;
      sizes.push_back(fmt::format("{} ({}x)", ncclTestsSizeText(bytes), flooredRatio(*nccl / v.us[i])));
    }
    if (sizes.empty()) continue;
    out.push_back(fmt::format(
        "Braid's {} windows at {} rest on the simulator outside its validated band ({}): measure them before relying "
        "on them (docs/simulator.md, Calibration)",
        protocolName(protocol), fmt::join(sizes, ", "),
        band != nullptr ? band->outside : "no published measurement of NCCL in it"));
  }
  return out;
}

/// Per NCCL choice, the sizes Braid serves where NCCL's choice lies outside the simulator's validated band for it:
/// there NCCL's simulated time, and so Braid's predicted edge, is only as good as the simulator's model of NCCL.
std::vector<std::string> unvalidatedNcclNotes(CollectiveKind collective, const std::vector<Variant>& variants,
                                              const Comparison& reference, const std::vector<Winner>& won) {
  std::vector<std::string> choices;
  std::vector<std::vector<std::string>> sizes;
  for (size_t i = 0; i < won.size(); ++i) {
    const SizeComparison& row = reference.sizes[i];
    if (won[i].nccl || won[i].variant < 0 || !row.nccl_us) continue;
    const SimCalibration* band = ncclChoiceBand(collective, row.nccl_choice);
    if (band != nullptr && insideValidatedBand(*band, row.size_bytes)) continue;
    auto at = std::find(choices.begin(), choices.end(), row.nccl_choice);
    if (at == choices.end()) {
      choices.push_back(row.nccl_choice);
      sizes.emplace_back();
      at = choices.end() - 1;
    }
    sizes[at - choices.begin()].push_back(fmt::format("{} ({}x)", ncclTestsSizeText(row.size_bytes),
                                                      flooredRatio(*row.nccl_us / variants[won[i].variant].us[i])));
  }
  std::vector<std::string> out;
  for (size_t c = 0; c < choices.size(); ++c) {
    const SimCalibration* band = ncclChoiceBand(collective, choices[c]);
    out.push_back(fmt::format(
        "NCCL's {} at {} (where Braid serves) is outside the simulator's validated band for it ({}): the edge there "
        "rests on the simulator's model of NCCL",
        choices[c], fmt::join(sizes[c], ", "),
        band != nullptr ? band->outside : "no published measurement of it to calibrate against"));
  }
  return out;
}

std::string variantLabel(const ParetoCandidate& candidate, const Variant& v) {
  if (v.instances > 1)
    return fmt::format("{} / {} x{} instances", candidate.source, protocolName(v.protocol), v.instances);
  return fmt::format("{} / {}", candidate.source, protocolName(v.protocol));
}

}  // namespace

Result<CollectiveParetoSet> synthesizeCollectiveParetoSet(const Topology& topology, const std::string& topology_name,
                                                          CollectiveKind collective, const ParetoOptions& options) {
  if (topology.numGpus() <= 0)
    return invalidArgument(fmt::format("Pareto set: topology {} has no GPUs", topology_name));
  if (topology.numGpus() == 1) {
    return invalidArgument(
        fmt::format("Pareto set: topology {} has one GPU: a collective of one rank is a local copy "
                    "(NCCL copies the buffer itself), with no algorithm to choose",
                    topology_name));
  }
  if (collective != CollectiveKind::kAllGather && collective != CollectiveKind::kReduceScatter &&
      collective != CollectiveKind::kAllReduce && collective != CollectiveKind::kAllToAll) {
    return invalidArgument(fmt::format("Pareto set: {} is not allgather, reducescatter, allreduce or alltoall",
                                       collectiveName(collective)));
  }
  const double min_speedup = options.min_speedup.value_or(defaultParetoMinSpeedup());
  if (!std::isfinite(min_speedup) || min_speedup < 1) {
    return invalidArgument(
        fmt::format("Pareto set: min_speedup {} is not a finite number >= 1 (the predicted "
                    "speedup over NCCL's choice Braid needs to take a size)",
                    min_speedup));
  }
  std::vector<uint64_t> requested = options.sizes.empty() ? defaultSizes() : options.sizes;
  std::sort(requested.begin(), requested.end());
  requested.erase(std::unique(requested.begin(), requested.end()), requested.end());

  CollectiveParetoSet set;
  set.collective = collective;
  set.min_speedup = min_speedup;
  BRAID_ASSIGN_OR_RETURN(std::vector<ParetoCandidate> candidates,
                         candidatesFor(collective, topology, topology_name, options, &set));
  if (!set.clock_cuts.empty()) {
    set.notes.push_back(
        fmt::format("the wall-clock limit of {:g} s ended {} before the budget: another run may give "
                    "another set",
                    options.time_limit_s, fmt::join(set.clock_cuts, ", ")));
  }
  if (candidates.empty()) {
    return unsupported(
        fmt::format("Pareto set: no {} candidate could be built for {}", collectiveName(collective), topology_name));
  }
  // NCCL's choice and the bounds per size, once (they do not depend on the candidate).
  BRAID_RETURN_IF_ERROR(checkDeadline(options, collective, "NCCL's reference"));
  say(options,
      fmt::format("{}: NCCL's choice and the bounds at {} sizes", collectiveName(collective), requested.size()));
  BRAID_ASSIGN_OR_RETURN(Comparison reference,
                         compareAlgorithm(candidates.front().algorithm, topology, collective, requested));
  for (const std::string& n : reference.notes) set.notes.push_back(n);
  std::vector<uint64_t> sizes;
  for (const SizeComparison& row : reference.sizes) sizes.push_back(row.size_bytes);
  say(options, fmt::format("{}: {} candidates x 3 protocols simulated at {} sizes", collectiveName(collective),
                           candidates.size(), sizes.size()));
  BRAID_ASSIGN_OR_RETURN(const std::vector<Variant> variants,
                         scoreVariants(candidates, topology, sizes, options, collective));
  const std::vector<Winner> won = winners(variants, reference, min_speedup);
  if (std::optional<std::string> note = marginNote(variants, reference, won, min_speedup)) set.notes.push_back(*note);
  for (std::string& note : unvalidatedWindowNotes(collective, variants, reference, won))
    set.notes.push_back(std::move(note));
  for (std::string& note : unvalidatedNcclNotes(collective, variants, reference, won))
    set.notes.push_back(std::move(note));

  size_t i = 0;
  while (i < sizes.size()) {
    size_t j = i;
    while (j + 1 < sizes.size() && won[j + 1] == won[i]) ++j;
    ParetoWindow w;
    w.min_bytes = i == 0 ? 0 : geometricMidpoint(sizes[i - 1], sizes[i]);
    w.max_bytes = j + 1 == sizes.size() ? kUnlimitedBytes : geometricMidpoint(sizes[j], sizes[j + 1]) - 1;
    w.nccl = won[i].nccl;
    if (won[i].variant >= 0) {
      const Variant& v = variants[won[i].variant];
      w.candidate = candidates[v.candidate];
      w.candidate.algorithm.protocol = v.protocol;
      w.candidate.instances = v.instances;
      w.candidate.source = variantLabel(candidates[v.candidate], v);
    }
    w.candidate.window_min = w.candidate.algorithm.min_bytes = w.min_bytes;
    w.candidate.window_max = w.candidate.algorithm.max_bytes = w.max_bytes;
    for (size_t k = i; k <= j; ++k) {
      const SizeComparison& row = reference.sizes[k];
      ParetoPoint p;
      p.size_bytes = sizes[k];
      p.window = static_cast<int>(set.windows.size());
      p.braid_us = won[k].variant >= 0 ? variants[won[k].variant].us[k] : std::numeric_limits<double>::infinity();
      p.braid_label = won[k].variant >= 0
                          ? variantLabel(candidates[variants[won[k].variant].candidate], variants[won[k].variant])
                          : "-";
      p.nccl_us = row.nccl_us;
      p.nccl_choice = row.nccl_choice;
      p.nccl_ring_us = row.nccl_ring_us;
      p.cut_bound_us = row.bound_cut_us;
      set.points.push_back(std::move(p));
    }
    set.windows.push_back(std::move(w));
    i = j + 1;
  }
  return set;
}

double defaultParetoMinSpeedup() { return 1 + worstValidatedPointToPointOptimism(); }

Result<std::vector<ParetoCandidate>> synthesizeParetoSet(const Topology& topology, const std::string& topology_name) {
  if (topology.numGpus() <= 0)
    return invalidArgument(fmt::format("Pareto set: topology {} has no GPUs", topology_name));
  std::vector<ParetoCandidate> kept;
  for (CollectiveKind kind : {CollectiveKind::kAllGather, CollectiveKind::kReduceScatter, CollectiveKind::kAllReduce,
                              CollectiveKind::kAllToAll}) {
    Result<CollectiveParetoSet> set = synthesizeCollectiveParetoSet(topology, topology_name, kind);
    if (!set.isOk()) {
      BRAID_LOG(kInfo, "no Pareto set for {} on {}: {}", collectiveName(kind), topology_name, set.status().toString());
      continue;
    }
    for (ParetoWindow& w : set->windows) {
      if (w.candidate.algorithm.num_ranks > 0) kept.push_back(std::move(w.candidate));
    }
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
