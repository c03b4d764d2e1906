// synthesize(): the pipeline driver (TACCL's solve + combine, taccl_msccl.md §1.1, §1.6) — sketch, logical
// topology, chunks, routing (Z3), ordering (greedy), scheduling with contiguity (Z3), emitting the MSCCL program,
// verify().
#include "braid/synthesize.h"

#include <fmt/format.h>
#include <glpk.h>
#include <z3.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <string>
#include <vector>

#include "synthesizer/forest.h"
#include "synthesizer/model.h"
#include "synthesizer/watchdog.h"

namespace braid {
namespace {

using Clock = std::chrono::steady_clock;

std::string isoNow() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string z3Version() {
  unsigned major = 0, minor = 0, build = 0, revision = 0;
  Z3_get_version(&major, &minor, &build, &revision);
  return fmt::format("z3 {}.{}.{}", major, minor, build);
}

bool closeRel(double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max({1.0, std::fabs(a), std::fabs(b)}); }

// True when the transposed logical topology is the mirror image of the forward one (same links, costs and
// resource capacities), so the all-gather schedule run backwards is also a valid reduce-scatter schedule on
// it and no second solve is needed.
bool mirrors(const synth::LogicalTopology& fwd, const synth::LogicalTopology& rev) {
  if (fwd.links.size() != rev.links.size() || fwd.symmetry != rev.symmetry) return false;
  for (size_t i = 0; i < fwd.links.size(); ++i) {
    const synth::LogicalLink& a = fwd.links[i];
    const synth::LogicalLink& b = rev.links[i];
    if (a.src != b.src || a.dst != b.dst || a.inter_node != b.inter_node || !closeRel(a.gbps, b.gbps) ||
        !closeRel(a.alpha_us, b.alpha_us) || a.resources.size() != b.resources.size()) {
      return false;
    }
    std::vector<double> ca, cb;
    for (int e : a.resources) ca.push_back(fwd.resource_gbps[e]);
    for (int e : b.resources) cb.push_back(rev.resource_gbps[e]);
    std::sort(ca.begin(), ca.end());
    std::sort(cb.begin(), cb.end());
    for (size_t k = 0; k < ca.size(); ++k) {
      if (!closeRel(ca[k], cb[k])) return false;
    }
    if (a.inter_node && fwd.relay_allowed[i] != rev.relay_allowed[i]) return false;
  }
  return true;
}

struct Pipeline {
  synth::ChunkProblem problem;
  synth::Routing routing;
  synth::Schedule schedule;
};

// Routing -> ordering -> scheduling for one movement pattern. `share` is the fraction of the time left that
// this pipeline may use.
Result<Pipeline> runPipeline(const synth::LogicalTopology& logical, CollectiveKind pattern, const Sketch& sketch,
                             int root, uint64_t size, double share, synth::StageContext ctx, const std::string& tag,
                             double time_limit_s, SynthesisResult* result) {
  Pipeline p;
  p.problem = synth::makeChunkProblem(pattern, logical, sketch.chunkup, root, size);
  const auto now = Clock::now();
  const double left = ctx.secondsLeft() * share;
  synth::StageContext routing_ctx = ctx;
  routing_ctx.deadline = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(0.6 * left));
  StageReport routing_report;
  Result<synth::Routing> routed =
      synth::routeChunks(logical, p.problem, sketch.path_slack, routing_ctx, &routing_report);
  if (!routed && routed.status().code() == StatusCode::kTimeout) {
    return Status(StatusCode::kTimeout,
                  fmt::format("no algorithm within the time limit of {:g} s (stage routing{}): {}", time_limit_s, tag,
                              routed.status().message()));
  }
  BRAID_ASSIGN_OR_RETURN(p.routing, std::move(routed));
  routing_report.name = "routing" + tag;
  result->stages.push_back(routing_report);

  StageReport ordering_report;
  const auto order_start = Clock::now();
  p.schedule = synth::orderTransfers(logical, p.problem, p.routing, &ordering_report);
  ordering_report.name = "ordering" + tag;
  ordering_report.seconds = std::chrono::duration<double>(Clock::now() - order_start).count();
  ordering_report.makespan_us = p.schedule.makespan_us;
  result->stages.push_back(ordering_report);
  ctx.report({.stage = "ordering",
              .detail = fmt::format("{} transfers ordered greedily", p.schedule.transfers.size()),
              .best_makespan_us = p.schedule.makespan_us});

  synth::StageContext sched_ctx = ctx;
  sched_ctx.deadline = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(left));
  StageReport sched_report;
  BRAID_RETURN_IF_ERROR(
      synth::scheduleExact(logical, p.problem, &p.schedule, /*max_contig=*/6, sched_ctx, &sched_report));
  sched_report.name = "scheduling" + tag;
  result->stages.push_back(sched_report);
  return p;
}

// The tree-packing construction for one movement (all-gather trees, or reduce-scatter's on the transposed logical
// topology) as a Pipeline.
// `k` (in/out): 0 = choose the trees per root and return the choice; > 0 = impose it.
Result<Pipeline> runForest(const synth::LogicalTopology& logical, uint64_t size, const SynthesisRequest& request,
                           const synth::StageContext& ctx, const std::string& tag, SynthesisResult* result, int* k) {
  const double time_limit_s = request.time_limit_s;
  Result<synth::ForestPipeline> solved =
      synth::solveForest(logical, size, request.forest_tolerance, request.forest_pieces, ctx, tag, &result->stages, *k);
  if (!solved && solved.status().code() == StatusCode::kTimeout) {
    return Status(StatusCode::kTimeout, fmt::format("no algorithm within the time limit of {:g} s (tree packing{}): {}",
                                                    time_limit_s, tag, solved.status().message()));
  }
  BRAID_RETURN_IF_ERROR(solved.status());
  *k = static_cast<int>(solved->k);
  Pipeline p;
  p.problem = std::move(solved->problem);
  p.routing = std::move(solved->routing);
  p.schedule = std::move(solved->schedule);
  return p;
}

}  // namespace

const char* synthesisMethodName(SynthesisMethod method) {
  return method == SynthesisMethod::kForest ? "forest" : "taccl";
}

std::optional<SynthesisMethod> parseSynthesisMethod(const std::string& name) {
  if (name == "taccl") return SynthesisMethod::kTaccl;
  if (name == "forest") return SynthesisMethod::kForest;
  return std::nullopt;
}

namespace {

constexpr const char* kTooLargeToVerify = "too large to verify";

Result<SynthesisResult> synthesizeOnce(const SynthesisRequest& request) {
  const auto start = Clock::now();
  if (!request.topology) return Status(StatusCode::kInvalidArgument, "synthesize: no topology given");
  const Topology& topology = *request.topology;
  const CollectiveKind coll = request.collective;
  if (coll == CollectiveKind::kCustom) {
    return Status(StatusCode::kUnsupported, "synthesize: custom collectives have no postcondition to synthesize for");
  }
  const int n = topology.numGpus();
  if (n < 2) {
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("topology {} has {} GPU(s); synthesis needs at least 2", topology.name, n));
  }
  if ((coll == CollectiveKind::kBroadcast || coll == CollectiveKind::kReduce) &&
      (request.root < 0 || request.root >= n)) {
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("root {} is not a rank of {} ({} GPUs)", request.root, topology.name, n));
  }
  if (!(request.time_limit_s > 0)) {
    return Status(StatusCode::kInvalidArgument, "the time limit must be positive (seconds)");
  }
  const bool forest = request.method == SynthesisMethod::kForest;
  if (forest && coll != CollectiveKind::kAllGather && coll != CollectiveKind::kReduceScatter &&
      coll != CollectiveKind::kAllReduce) {
    return Status(
        StatusCode::kUnsupported,
        fmt::format("the forest method builds allgather, reducescatter and allreduce, not {}", collectiveName(coll)));
  }

  if (forest && (!(request.forest_tolerance >= 0 && request.forest_tolerance < 1) || request.forest_pieces < 1 ||
                 request.forest_pieces > 64)) {
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("forest options: tolerance {} must be in [0, 1), pieces {} in 1..64",
                              request.forest_tolerance, request.forest_pieces));
  }

  SynthesisResult result;
  if (forest) {
    result.sketch.source = "none (forest method)";
  } else if (request.has_sketch) {
    result.sketch = request.sketch;
  } else {
    BRAID_ASSIGN_OR_RETURN(result.sketch, deriveSketch(topology, coll));
  }
  const Sketch& sketch = result.sketch;
  for (const std::string& note : sketch.notes) result.notes.push_back("sketch: " + note);

  const CollectiveKind pattern = coll == CollectiveKind::kAllToAll ? CollectiveKind::kAllToAll
                                 : (coll == CollectiveKind::kBroadcast || coll == CollectiveKind::kReduce)
                                     ? CollectiveKind::kBroadcast
                                     : CollectiveKind::kAllGather;
  const bool need_forward = coll != CollectiveKind::kReduceScatter && coll != CollectiveKind::kReduce;
  const bool need_reverse =
      coll == CollectiveKind::kReduceScatter || coll == CollectiveKind::kAllReduce || coll == CollectiveKind::kReduce;

  uint64_t size = request.size_bytes ? request.size_bytes : sketch.size_bytes;
  if (size == 0 && forest) {
    size = uint64_t{256} << 20;
    result.notes.push_back("costs taken at 256 MiB (the forest method's default costing size)");
  } else if (size == 0) {
    const uint64_t chunks = pattern == CollectiveKind::kBroadcast ? static_cast<uint64_t>(sketch.chunkup)
                                                                  : static_cast<uint64_t>(n) * sketch.chunkup;
    size = chunks << 20;
    result.notes.push_back(fmt::format("costs taken at {} bytes (1 MiB per chunk, TACCL's profile convention)", size));
  }
  result.costing_size_bytes = size;
  result.method = request.method;

  synth::StageContext ctx;
  ctx.start = start;
  ctx.deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(request.time_limit_s));
  ctx.progress = request.progress;
  ctx.notes = &result.notes;
  // Interrupts every Z3 check still running at its stage's deadline and repeats the last progress line while one
  // runs; stopped (joined) when synthesize() returns.
  synth::Watchdog watchdog(start, ctx.deadline, request.progress);
  ctx.watchdog = &watchdog;

  synth::LogicalTopology forward, reverse;
  if (forest) {
    BRAID_ASSIGN_OR_RETURN(forward, synth::buildCompleteLogicalTopology(topology, false));
  } else {
    BRAID_ASSIGN_OR_RETURN(forward, synth::buildLogicalTopology(topology, sketch, false, &result.notes));
  }
  Pipeline fwd, rev;
  bool reuse = false;
  int forest_k = 0;  // trees per root of the forest's first part, imposed on its second
  if (need_reverse) {
    if (forest) {
      BRAID_ASSIGN_OR_RETURN(reverse, synth::buildCompleteLogicalTopology(topology, true));
    } else {
      BRAID_ASSIGN_OR_RETURN(reverse, synth::buildLogicalTopology(topology, sketch, true, nullptr));
    }
    reuse = mirrors(forward, reverse);
  }
  const bool two_solves = need_forward && need_reverse && !reuse;
  if (need_forward || reuse) {
    if (forest) {
      BRAID_ASSIGN_OR_RETURN(fwd, runForest(forward, size, request, ctx, "", &result, &forest_k));
    } else {
      BRAID_ASSIGN_OR_RETURN(fwd, runPipeline(forward, pattern, sketch, request.root, size, two_solves ? 0.5 : 1.0, ctx,
                                              "", request.time_limit_s, &result));
    }
  }
  if (need_reverse) {
    if (reuse) {
      rev = fwd;
      result.notes.push_back(
          "reduce-scatter: the transposed logical topology mirrors the forward one, so the all-gather schedule "
          "run backwards is reused");
    } else if (forest) {
      BRAID_ASSIGN_OR_RETURN(rev, runForest(reverse, size, request, ctx, " (reversed)", &result, &forest_k));
    } else {
      BRAID_ASSIGN_OR_RETURN(rev, runPipeline(reverse, pattern, sketch, request.root, size, 1.0, ctx, " (reversed)",
                                              request.time_limit_s, &result));
    }
  }

  const auto emit_start = Clock::now();
  synth::EmitRequest emit;
  emit.collective = coll;
  emit.protocol = request.protocol;
  emit.root = request.root;
  const int chunkup = need_forward ? fwd.problem.chunkup : rev.problem.chunkup;
  emit.name = forest ? fmt::format("braid-forest-{}-{}-c{}", collectiveName(coll), topology.name, chunkup)
                     : fmt::format("braid-{}-{}-c{}", collectiveName(coll), topology.name, sketch.chunkup);
  emit.level_channels =
      std::any_of(forward.links.begin(), forward.links.end(), [](const synth::LogicalLink& l) { return l.inter_node; });
  if (need_forward) {
    emit.forward_logical = &forward;
    emit.forward_problem = &fwd.problem;
    emit.forward = &fwd.schedule;
  }
  if (need_reverse) {
    emit.reverse_logical = reuse ? &forward : &reverse;
    emit.reverse_problem = &rev.problem;
    emit.reverse = &rev.schedule;
  }
  ctx.report({.stage = "emit", .detail = "building the MSCCL program"});
  BRAID_ASSIGN_OR_RETURN(result.algorithm, synth::emitProgram(emit));
  StageReport emit_report;
  emit_report.name = "emit";
  emit_report.seconds = std::chrono::duration<double>(Clock::now() - emit_start).count();
  emit_report.status = fmt::format("{} threadblocks, {} steps, {} channel(s)", result.algorithm.numThreadblocks(),
                                   result.algorithm.numSteps(), result.algorithm.num_channels);
  result.stages.push_back(emit_report);

  ctx.report({.stage = "verify", .detail = "proving the postcondition"});
  VerifyReport report = verify(result.algorithm);
  const bool unverifiable =
      !report.issues.empty() && std::all_of(report.issues.begin(), report.issues.end(),
                                            [](const VerifyIssue& i) { return i.kind == IssueKind::kUnverifiable; });
  if (!report.ok && unverifiable) {
    return Status(StatusCode::kUnsupported,
                  fmt::format("the synthesized {} ({} threadblocks, {} steps) is {} within the verifier's limits:\n{}",
                              collectiveName(coll), result.algorithm.numThreadblocks(), result.algorithm.numSteps(),
                              kTooLargeToVerify, report.toString()));
  }
  if (!report.ok) {
    return internalError(fmt::format("synthesized {} failed verification (a synthesizer bug):\n{}",
                                     collectiveName(coll), report.toString()));
  }
  BRAID_ASSIGN_OR_RETURN(result.spec, result.algorithm.spec(!result.algorithm.out_of_place));

  result.makespan_us = (need_forward ? fwd.schedule.makespan_us : 0) + (need_reverse ? rev.schedule.makespan_us : 0);
  Provenance& prov = result.algorithm.provenance;
  prov.generator = forest ? "braid synth --method forest" : "braid synth";
  prov.topology = topology.source.empty() ? topology.name : topology.source;
  prov.sketch = sketch.source;
  prov.solver = forest ? fmt::format("glpk {} + boost.graph max-flow", glp_version()) : z3Version();
  prov.created = isoNow();
  prov.extra["chunkup"] = std::to_string(chunkup);
  result.chunkup = chunkup;
  prov.extra["costing_size_bytes"] = std::to_string(size);
  prov.extra["model_makespan_us"] = fmt::format("{:.6g}", result.makespan_us);
  prov.extra["symmetry_group_size"] = std::to_string(forward.symmetry.size());
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  prov.extra["synthesis_seconds"] = fmt::format("{:.3f}", result.seconds);
  return result;
}

}  // namespace

Result<SynthesisResult> synthesize(const SynthesisRequest& request) {
  const auto start = Clock::now();
  Result<SynthesisResult> result = synthesizeOnce(request);
  // The tree-packing method's size grows with its pieces per tree: fewer pieces give fewer steps for the verifier.
  SynthesisRequest retry = request;
  while (!result.isOk() && request.method == SynthesisMethod::kForest && retry.forest_pieces > 1 &&
         result.status().code() == StatusCode::kUnsupported &&
         result.status().message().find(kTooLargeToVerify) != std::string::npos) {
    retry.forest_pieces /= 2;
    retry.time_limit_s = request.time_limit_s - std::chrono::duration<double>(Clock::now() - start).count();
    if (!(retry.time_limit_s > 0)) break;
    std::string why = result.status().message().substr(0, result.status().message().find('\n'));
    if (!why.empty() && why.back() == ':') why.pop_back();
    result = synthesizeOnce(retry);
    if (result.isOk()) {
      result->notes.push_back(fmt::format("forest: {} piece(s) per tree instead of {}: with {}, {}",
                                          retry.forest_pieces, request.forest_pieces, retry.forest_pieces * 2, why));
      result->seconds = std::chrono::duration<double>(Clock::now() - start).count();
    }
  }
  return result;
}

}  // namespace braid
