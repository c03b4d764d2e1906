// synthesize(): the pipeline driver (TACCL's solve + combine, taccl_msccl.md §1.1, §1.6) — sketch, logical
// topology, chunks, routing (Z3), ordering (greedy), scheduling with contiguity (Z3), emitting the MSCCL program,
// verify().
#include "braid/synthesize.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <glpk.h>
#include <z3.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "synthesizer/budget.h"
#include "synthesizer/forest.h"
#include "synthesizer/model.h"
#include "synthesizer/sccl.h"
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
  uint64_t units_spent = 0;  // Z3 resource units of routing and scheduling
};

// Routing -> ordering -> scheduling for one movement pattern. `units` (Z3 resource units) and `share` (the fraction
// of the time left) are what this pipeline may use: routing gets 60 % of each, scheduling the rest.
Result<Pipeline> runPipeline(const synth::LogicalTopology& logical, CollectiveKind pattern, const Sketch& sketch,
                             int root, uint64_t size, uint64_t units, double share, synth::StageContext ctx,
                             const std::string& tag, double time_limit_s, SynthesisResult* result) {
  Pipeline p;
  p.problem = synth::makeChunkProblem(pattern, logical, sketch.chunkup, root, size);
  const auto now = Clock::now();
  const double left = ctx.secondsLeft() * share;
  synth::StageContext routing_ctx = ctx;
  routing_ctx.deadline = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(0.6 * left));
  routing_ctx.units = units / 10 * 6;
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
  sched_ctx.units = units - std::min(units, routing_report.solver_units);
  StageReport sched_report;
  BRAID_RETURN_IF_ERROR(
      synth::scheduleExact(logical, p.problem, &p.schedule, /*max_contig=*/6, sched_ctx, &sched_report));
  sched_report.name = "scheduling" + tag;
  result->stages.push_back(sched_report);
  p.units_spent = routing_report.solver_units + sched_report.solver_units;
  return p;
}

}  // namespace

bool forestMethodBuilds(CollectiveKind collective, int num_gpus) {
  switch (collective) {
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllReduce: return true;
    case CollectiveKind::kAllToAll: return num_gpus <= kAllToAllFlowMaxGpus;
    default: return false;
  }
}

bool scclMethodBuilds(CollectiveKind collective) {
  return collective == CollectiveKind::kAllGather || collective == CollectiveKind::kReduceScatter ||
         collective == CollectiveKind::kAllReduce;
}

const char* synthesisMethodName(SynthesisMethod method) {
  switch (method) {
    case SynthesisMethod::kForest: return "forest";
    case SynthesisMethod::kSccl: return "sccl";
    default: return "taccl";
  }
}

std::optional<SynthesisMethod> parseSynthesisMethod(const std::string& name) {
  if (name == "taccl") return SynthesisMethod::kTaccl;
  if (name == "forest") return SynthesisMethod::kForest;
  if (name == "sccl") return SynthesisMethod::kSccl;
  return std::nullopt;
}

namespace {

constexpr const char* kTooLargeToVerify = "too large to verify";

// What both methods share once the request is checked: the collective's movements and the costing size.
struct Setup {
  const Topology* topology = nullptr;
  CollectiveKind coll = CollectiveKind::kAllGather;
  CollectiveKind pattern = CollectiveKind::kAllGather;  // how data moves: all-gather, broadcast or all-to-all
  bool forest = false;
  bool sccl = false;
  bool need_forward = false;  // a gather/broadcast/all-to-all movement
  bool need_reverse = false;  // a reduction movement (the reverse schedule)
  uint64_t size = 0;
};

// The movements a method built, for the emitter.
struct Movements {
  const synth::LogicalTopology* forward_logical = nullptr;
  const synth::LogicalTopology* reverse_logical = nullptr;
  const Pipeline* fwd = nullptr;
  const Pipeline* rev = nullptr;
  int chunkup = 1;
  std::string name;
  bool level_channels = false;
  int symmetry_group_size = 1;
};

Status checkRequest(const SynthesisRequest& request) {
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
  if (!(request.time_limit_s > 0) || !(request.time_limit_s <= kMaxSynthesisTimeLimitSeconds)) {
    return Status(StatusCode::kInvalidArgument, fmt::format("the time limit {} s must be positive and at most {:g} s",
                                                            request.time_limit_s, kMaxSynthesisTimeLimitSeconds));
  }
  if (request.method == SynthesisMethod::kSccl) {
    if (!scclMethodBuilds(coll)) {
      return Status(
          StatusCode::kUnsupported,
          fmt::format("the sccl method builds allgather, reducescatter and allreduce, not {}", collectiveName(coll)));
    }
    const bool steps_ok = request.sccl_steps >= 0 && request.sccl_steps <= synth::kScclMaxSteps;
    const bool rounds_ok = request.sccl_rounds == 0 || (request.sccl_rounds >= std::max(1, request.sccl_steps) &&
                                                        request.sccl_rounds <= synth::kScclMaxRounds);
    const bool chunks_ok = request.sccl_chunks >= 0 && request.sccl_chunks <= synth::kScclMaxChunks;
    if (!steps_ok || !rounds_ok || !chunks_ok) {
      return Status(StatusCode::kInvalidArgument,
                    fmt::format("sccl options: steps {} must be in 1..{}, rounds {} in steps..{}, chunks {} in 1..{} "
                                "(0 = searched)",
                                request.sccl_steps, synth::kScclMaxSteps, request.sccl_rounds, synth::kScclMaxRounds,
                                request.sccl_chunks, synth::kScclMaxChunks));
    }
    return Status::ok();
  }
  if (request.method != SynthesisMethod::kForest) return Status::ok();
  if (coll != CollectiveKind::kAllGather && coll != CollectiveKind::kReduceScatter &&
      coll != CollectiveKind::kAllReduce && coll != CollectiveKind::kAllToAll) {
    return Status(StatusCode::kUnsupported,
                  fmt::format("the forest method builds allgather, reducescatter, allreduce and alltoall, not {}",
                              collectiveName(coll)));
  }
  if (coll == CollectiveKind::kAllToAll && n > kAllToAllFlowMaxGpus) {
    return Status(StatusCode::kUnsupported,
                  fmt::format("the forest method's all-to-all solves its flow LP up to {} GPUs; {} has {} (use "
                              "--method taccl)",
                              kAllToAllFlowMaxGpus, topology.name, n));
  }
  const bool tolerance_ok =
      request.forest_tolerance == -1 || (request.forest_tolerance >= 0 && request.forest_tolerance < 1);
  if (!tolerance_ok || request.forest_pieces < 0 || request.forest_pieces > 64) {
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("forest options: tolerance {} must be in [0, 1) (-1 = chosen), pieces {} in 1..64 "
                              "(0 = chosen)",
                              request.forest_tolerance, request.forest_pieces));
  }
  return Status::ok();
}

// The sketch (TACCL method), the movements and the costing size; notes go to `result`.
Result<Setup> prepare(const SynthesisRequest& request, SynthesisResult* result) {
  Setup setup;
  setup.topology = request.topology;
  setup.coll = request.collective;
  setup.forest = request.method == SynthesisMethod::kForest;
  setup.sccl = request.method == SynthesisMethod::kSccl;
  const CollectiveKind coll = setup.coll;
  if (setup.forest || setup.sccl) {
    result->sketch.source = setup.forest ? "none (forest method)" : "none (sccl method)";
  } else if (request.has_sketch) {
    result->sketch = request.sketch;
  } else {
    BRAID_ASSIGN_OR_RETURN(result->sketch, deriveSketch(*request.topology, coll));
  }
  const Sketch& sketch = result->sketch;
  for (const std::string& note : sketch.notes) result->notes.push_back("sketch: " + note);
  setup.pattern = coll == CollectiveKind::kAllToAll ? CollectiveKind::kAllToAll
                  : (coll == CollectiveKind::kBroadcast || coll == CollectiveKind::kReduce)
                      ? CollectiveKind::kBroadcast
                      : CollectiveKind::kAllGather;
  setup.need_forward = coll != CollectiveKind::kReduceScatter && coll != CollectiveKind::kReduce;
  setup.need_reverse =
      coll == CollectiveKind::kReduceScatter || coll == CollectiveKind::kAllReduce || coll == CollectiveKind::kReduce;
  uint64_t size = request.size_bytes ? request.size_bytes : sketch.size_bytes;
  if (size == 0 && setup.forest) {
    size = uint64_t{256} << 20;
    result->notes.push_back("costs taken at 256 MiB (the forest method's default costing size)");
  } else if (size == 0 && setup.sccl) {
    size = uint64_t{1} << 20;
    result->notes.push_back("costs taken at 1 MiB (the sccl method's default costing size)");
  } else if (size == 0) {
    const uint64_t n = static_cast<uint64_t>(request.topology->numGpus());
    const uint64_t chunks =
        setup.pattern == CollectiveKind::kBroadcast ? static_cast<uint64_t>(sketch.chunkup) : n * sketch.chunkup;
    size = chunks << 20;
    result->notes.push_back(fmt::format("costs taken at {} bytes (1 MiB per chunk, TACCL's profile convention)", size));
  }
  setup.size = size;
  result->costing_size_bytes = size;
  result->method = request.method;
  return setup;
}

// Emits the MSCCL program, verifies it and fills the spec, the model makespan and the provenance. An algorithm
// beyond the verifier's limits is kUnsupported with kTooLargeToVerify in the message.
Status finishAlgorithm(const SynthesisRequest& request, const Setup& setup, const Movements& m,
                       const synth::StageContext& ctx, SynthesisResult* result) {
  const auto emit_start = Clock::now();
  const CollectiveKind coll = setup.coll;
  synth::EmitRequest emit;
  emit.collective = coll;
  emit.protocol = request.protocol;
  emit.root = request.root;
  emit.name = m.name;
  emit.level_channels = m.level_channels;
  if (setup.need_forward) {
    emit.forward_logical = m.forward_logical;
    emit.forward_problem = &m.fwd->problem;
    emit.forward = &m.fwd->schedule;
  }
  if (setup.need_reverse) {
    emit.reverse_logical = m.reverse_logical;
    emit.reverse_problem = &m.rev->problem;
    emit.reverse = &m.rev->schedule;
  }
  ctx.report({.stage = "emit", .detail = "building the MSCCL program"});
  BRAID_ASSIGN_OR_RETURN(result->algorithm, synth::emitProgram(emit));
  StageReport emit_report;
  emit_report.name = "emit";
  emit_report.seconds = std::chrono::duration<double>(Clock::now() - emit_start).count();
  emit_report.status = fmt::format("{} threadblocks, {} steps, {} channel(s)", result->algorithm.numThreadblocks(),
                                   result->algorithm.numSteps(), result->algorithm.num_channels);
  result->stages.push_back(emit_report);

  ctx.report({.stage = "verify", .detail = "proving the postcondition"});
  VerifyReport report = verify(result->algorithm);
  const bool unverifiable =
      !report.issues.empty() && std::all_of(report.issues.begin(), report.issues.end(),
                                            [](const VerifyIssue& i) { return i.kind == IssueKind::kUnverifiable; });
  if (!report.ok && unverifiable) {
    return Status(StatusCode::kUnsupported,
                  fmt::format("the synthesized {} ({} threadblocks, {} steps) is {} within the verifier's limits:\n{}",
                              collectiveName(coll), result->algorithm.numThreadblocks(), result->algorithm.numSteps(),
                              kTooLargeToVerify, report.toString()));
  }
  if (!report.ok) {
    return internalError(fmt::format("synthesized {} failed verification (a synthesizer bug):\n{}",
                                     collectiveName(coll), report.toString()));
  }
  BRAID_ASSIGN_OR_RETURN(result->spec, result->algorithm.spec(!result->algorithm.out_of_place));

  result->makespan_us =
      (setup.need_forward ? m.fwd->schedule.makespan_us : 0) + (setup.need_reverse ? m.rev->schedule.makespan_us : 0);
  const Topology& topology = *setup.topology;
  Provenance& prov = result->algorithm.provenance;
  prov.generator = setup.forest ? "braid synth --method forest"
                   : setup.sccl ? "braid synth --method sccl"
                                : "braid synth";
  prov.topology = topology.source.empty() ? topology.name : topology.source;
  prov.sketch = result->sketch.source;
  prov.solver = setup.forest ? fmt::format("glpk {} + boost.graph max-flow", glp_version()) : z3Version();
  prov.created = isoNow();
  prov.extra["chunkup"] = std::to_string(m.chunkup);
  result->chunkup = m.chunkup;
  prov.extra["costing_size_bytes"] = std::to_string(setup.size);
  prov.extra["model_makespan_us"] = fmt::format("{:.6g}", result->makespan_us);
  prov.extra["symmetry_group_size"] = std::to_string(m.symmetry_group_size);
  return Status::ok();
}

// finishAlgorithm's error for an algorithm beyond the verifier's limits (the caller may try a smaller one).
bool tooLargeToVerify(const Status& status) {
  return status.code() == StatusCode::kUnsupported && status.message().find(kTooLargeToVerify) != std::string::npos;
}

bool anyInterNode(const synth::LogicalTopology& logical) {
  return std::any_of(logical.links.begin(), logical.links.end(),
                     [](const synth::LogicalLink& l) { return l.inter_node; });
}

// The TACCL pipeline: routing, ordering and scheduling per movement, then one emitted program.
Status synthesizeTaccl(const SynthesisRequest& request, const Setup& setup, const synth::StageContext& ctx,
                       SynthesisResult* result) {
  const Topology& topology = *setup.topology;
  const Sketch& sketch = result->sketch;
  synth::LogicalTopology forward, reverse;
  BRAID_ASSIGN_OR_RETURN(forward, synth::buildLogicalTopology(topology, sketch, false, &result->notes));
  Pipeline fwd, rev;
  bool reuse = false;
  if (setup.need_reverse) {
    BRAID_ASSIGN_OR_RETURN(reverse, synth::buildLogicalTopology(topology, sketch, true, nullptr));
    reuse = mirrors(forward, reverse);
  }
  const bool two_solves = setup.need_forward && setup.need_reverse && !reuse;
  if (setup.need_forward || reuse) {
    BRAID_ASSIGN_OR_RETURN(fwd, runPipeline(forward, setup.pattern, sketch, request.root, setup.size,
                                            two_solves ? ctx.units / 2 : ctx.units, two_solves ? 0.5 : 1.0, ctx, "",
                                            request.time_limit_s, result));
  }
  if (setup.need_reverse) {
    if (reuse) {
      rev = fwd;
      result->notes.push_back(
          "reduce-scatter: the transposed logical topology mirrors the forward one, so the all-gather schedule "
          "run backwards is reused");
    } else {
      BRAID_ASSIGN_OR_RETURN(rev, runPipeline(reverse, setup.pattern, sketch, request.root, setup.size,
                                              ctx.units - std::min(ctx.units, fwd.units_spent), 1.0, ctx, " (reversed)",
                                              request.time_limit_s, result));
    }
  }
  Movements m;
  m.forward_logical = &forward;
  m.reverse_logical = reuse ? &forward : &reverse;
  m.fwd = &fwd;
  m.rev = &rev;
  m.chunkup = sketch.chunkup;
  m.name = fmt::format("braid-{}-{}-c{}", collectiveName(setup.coll), topology.name, sketch.chunkup);
  m.level_channels = anyInterNode(forward);
  m.symmetry_group_size = static_cast<int>(forward.symmetry.size());
  return finishAlgorithm(request, setup, m, ctx, result);
}

Status forestTimeout(const Status& status, double time_limit_s, const std::string& stage) {
  if (status.code() != StatusCode::kTimeout) return status;
  return Status(StatusCode::kTimeout, fmt::format("no algorithm within the time limit of {:g} s (tree packing{}): {}",
                                                  time_limit_s, stage, status.message()));
}

// One movement of the tree-packing method: its logical topology, rates and the tree stages' reports.
struct ForestPart {
  const synth::LogicalTopology* logical = nullptr;
  std::string tag;
  synth::ForestRates rates;
};

// The candidates the forest method builds: bandwidth split x tolerance x pieces (SynthesisRequest says which).
struct ForestChoices {
  std::vector<bool> equal_shares;  // true = equal-share rates, false = the LP's split
  std::vector<double> tolerances;
  std::vector<int> pieces;
  bool first_success = true;  // no scoring: the first candidate that verifies is kept
};

ForestChoices forestChoices(const SynthesisRequest& request, const std::vector<ForestPart>& parts) {
  ForestChoices c;
  const bool scored = static_cast<bool>(request.score);
  const bool pieces_fixed = request.forest_pieces > 0;
  c.first_success = !scored || pieces_fixed;
  bool split_better = false, equal_close = true;
  for (const ForestPart& p : parts) {
    split_better |= p.rates.split.rate_gbps > p.rates.equal.rate_gbps * (1 + 1e-6);
    equal_close &= p.rates.equal.rate_gbps >= p.rates.split.rate_gbps * (1 - 0.03);
  }
  if (scored && !c.first_success) {
    c.equal_shares = split_better ? std::vector<bool>{true, false} : std::vector<bool>{true};
  } else {
    c.equal_shares = {equal_close};
  }
  if (request.forest_tolerance >= 0) {
    c.tolerances = {request.forest_tolerance};
  } else if (scored && !c.first_success) {
    c.tolerances = {0.03, 0.1};
  } else {
    c.tolerances = {0.03};
  }
  if (!c.first_success) {
    c.pieces = {1, 2, 4, 8, 16, 32};
  } else {
    for (int p = pieces_fixed ? request.forest_pieces : 4; p >= 1; p /= 2) c.pieces.push_back(p);
  }
  return c;
}

// The complete logical topologies of the methods that use every routed pair (forest, sccl): forward, and for a
// reduction the transposed one, `reuse` when the transposed mirrors the forward (the forward movement then serves
// both).
struct CompleteLogical {
  synth::LogicalTopology forward, reverse;
  bool reuse = false;
};

Result<CompleteLogical> completeLogical(const Setup& setup) {
  CompleteLogical out;
  BRAID_ASSIGN_OR_RETURN(out.forward, synth::buildCompleteLogicalTopology(*setup.topology, false));
  if (setup.need_reverse) {
    BRAID_ASSIGN_OR_RETURN(out.reverse, synth::buildCompleteLogicalTopology(*setup.topology, true));
    out.reuse = mirrors(out.forward, out.reverse);
  }
  return out;
}

// The tree-packing method: rates once per movement, then every candidate (ForestChoices) emitted and verified;
// with a scorer the lowest score is kept, otherwise the first that verifies.
Status synthesizeForest(const SynthesisRequest& request, const Setup& setup, const synth::StageContext& ctx,
                        SynthesisResult* result) {
  const Topology& topology = *setup.topology;
  BRAID_ASSIGN_OR_RETURN(CompleteLogical logical, completeLogical(setup));
  auto& [forward, reverse, reuse] = logical;
  // parts[0] is built first and chooses k; an all-reduce whose transposed topology differs adds parts[1] with that
  // k imposed (both parts cut the buffer alike). A mirrored reduce-scatter runs parts[0]'s trees backwards.
  std::vector<ForestPart> parts;
  if (setup.need_forward || reuse) {
    parts.push_back({&forward, "", {}});
  } else {
    parts.push_back({&reverse, " (reversed)", {}});
  }
  if (setup.need_forward && setup.need_reverse && !reuse) parts.push_back({&reverse, " (reversed)", {}});
  if (reuse) {
    result->notes.push_back(
        "reduce-scatter: the transposed logical topology mirrors the forward one, so the all-gather trees run "
        "backwards are reused");
  }
  for (ForestPart& p : parts) {
    Result<synth::ForestRates> rates = synth::forestRateStage(*p.logical, ctx, p.tag, &result->stages);
    if (!rates.isOk()) return forestTimeout(rates.status(), request.time_limit_s, p.tag);
    p.rates = std::move(*rates);
  }
  const ForestChoices choices = forestChoices(request, parts);

  std::optional<SynthesisResult> best;
  double best_score = 0;
  std::string best_label;
  std::vector<std::string> tried;  // "k=K pieces=P <split>: score" per candidate
  std::set<std::tuple<bool, int64_t, int>> seen;
  Status first_error = Status::ok();
  bool out_of_time = false;
  Clock::duration last_candidate{0};
  for (bool equal : choices.equal_shares) {
    for (double tolerance : choices.tolerances) {
      if (out_of_time || (best && choices.first_success)) break;
      std::vector<StageReport> tree_stages;
      std::vector<synth::ForestTrees> trees;
      int k = 0;
      for (const ForestPart& p : parts) {
        const synth::ForestRate& rate = equal ? p.rates.equal : p.rates.split;
        Result<synth::ForestTrees> t =
            synth::forestTreesStage(*p.logical, rate, tolerance, k, ctx, p.tag, &tree_stages);
        if (!t.isOk()) return forestTimeout(t.status(), request.time_limit_s, p.tag);
        k = static_cast<int>(t->units.k);
        trees.push_back(std::move(*t));
      }
      for (int pieces : choices.pieces) {
        if (best && choices.first_success) break;
        // A candidate that would end past the deadline (judged by the last one's time) is not started.
        // That depends on the machine's speed and load: a wall-clock cut.
        if (best && Clock::now() + last_candidate >= ctx.deadline) {
          out_of_time = true;
          ctx.clockCut("tree candidates");
          break;
        }
        const auto candidate_start = Clock::now();
        SynthesisResult candidate = *result;
        candidate.stages.insert(candidate.stages.end(), tree_stages.begin(), tree_stages.end());
        std::vector<Pipeline> built;
        for (size_t i = 0; i < parts.size(); ++i) {
          synth::ForestPipeline fp = synth::forestScheduleStage(*parts[i].logical, trees[i], pieces, setup.size,
                                                                parts[i].tag, &candidate.stages);
          built.push_back({std::move(fp.problem), std::move(fp.routing), std::move(fp.schedule)});
        }
        const int chunkup = built[0].problem.chunkup;
        const int used_pieces = chunkup / k;
        if (!seen.insert({equal, k, used_pieces}).second) continue;
        const std::string label = fmt::format("k={} pieces={}{}", k, used_pieces, equal ? "" : " (LP split)");
        Movements m;
        m.forward_logical = &forward;
        m.reverse_logical = reuse ? &forward : &reverse;
        const Pipeline* fwd = setup.need_forward || reuse ? &built[0] : nullptr;
        const Pipeline* rev = nullptr;
        if (setup.need_reverse) rev = reuse ? &built[0] : &built.back();
        m.fwd = fwd;
        m.rev = rev;
        m.chunkup = chunkup;
        m.name = fmt::format("braid-forest-{}-{}-c{}", collectiveName(setup.coll), topology.name, chunkup);
        m.level_channels = anyInterNode(forward);
        Status finished = finishAlgorithm(request, setup, m, ctx, &candidate);
        if (!finished.isOk()) {
          if (!tooLargeToVerify(finished)) return finished;
          if (first_error.isOk()) first_error = finished;
          std::string why = finished.message().substr(0, finished.message().find('\n'));
          if (!why.empty() && why.back() == ':') why.pop_back();
          tried.push_back(fmt::format("{}: {}", label, why));
          continue;
        }
        if (choices.first_success) {
          if (!tried.empty()) {
            candidate.notes.push_back(
                fmt::format("forest: {} piece(s) per tree unit; not built: {}", used_pieces, fmt::join(tried, "; ")));
          }
          best = std::move(candidate);
          break;
        }
        Result<double> score = request.score(candidate.algorithm, setup.size);
        last_candidate = Clock::now() - candidate_start;
        if (!score.isOk()) {
          if (first_error.isOk()) first_error = score.status();
          tried.push_back(fmt::format("{}: not scored ({})", label, score.status().message()));
          continue;
        }
        tried.push_back(fmt::format("{}: {:.2f}", label, *score));
        if (!best || *score < best_score) {
          best_score = *score;
          best_label = label;
          best = std::move(candidate);
        }
      }
    }
  }
  if (!best) return first_error.isOk() ? internalError("the forest method built no candidate") : first_error;
  if (!choices.first_success) {
    best->notes.push_back(fmt::format("forest: {} candidates scored by {} at {} bytes{} ({}); kept {}", tried.size(),
                                      request.score_name.empty() ? "the caller's scorer" : request.score_name,
                                      setup.size, out_of_time ? ", stopped at the time limit" : "",
                                      fmt::join(tried, "; "), best_label));
  }
  *result = std::move(*best);
  return Status::ok();
}

// The all-to-all of the max-concurrent flow: the LP once, then one pipeline per pieces candidate; with a scorer
// every candidate is emitted, verified and scored (the lowest kept), otherwise the one whose fluid schedule ends
// first (ties: fewer pieces) is emitted.
Status synthesizeFlow(const SynthesisRequest& request, const Setup& setup, const synth::StageContext& ctx,
                      SynthesisResult* result) {
  const Topology& topology = *setup.topology;
  const int n = topology.numGpus();
  BRAID_ASSIGN_OR_RETURN(synth::LogicalTopology logical, synth::buildCompleteLogicalTopology(topology, false));
  ctx.report(
      {.stage = "flow", .detail = fmt::format("max-concurrent-flow LP over {} rank pairs", logical.links.size())});
  Result<AllToAllFlow> flow = allToAllFlow(topology, std::max(0.1, ctx.secondsLeft()));
  if (!flow.isOk()) return forestTimeout(flow.status(), request.time_limit_s, " (flow)");
  int relayed = 0;
  for (const auto& paths : flow->paths) {
    for (const AllToAllFlow::Path& p : paths) relayed += p.ranks.size() > 2 ? 1 : 0;
  }
  const double optimum_us = flow->us_per_byte * static_cast<double>(setup.size);
  result->stages.push_back(
      {.name = "flow",
       .seconds = flow->seconds,
       .variables = flow->lp_columns,
       .constraints = flow->lp_rows,
       .status = fmt::format("optimal: {:.6g} us at {} bytes; {} relayed paths", optimum_us, setup.size, relayed),
       .makespan_us = optimum_us});
  // Pieces per block: at most 8192 chunks in all (n (n-1) pieces).
  std::vector<int> pieces;
  const int64_t blocks = static_cast<int64_t>(n) * (n - 1);
  for (int p : {1, 2, 3, 4, 6, 8, 12, 16}) {
    if (request.forest_pieces > 0 && p != request.forest_pieces) continue;
    if (p == 1 || blocks * p <= 8192) pieces.push_back(p);
  }
  if (pieces.empty()) pieces.push_back(request.forest_pieces);
  struct Candidate {
    int pieces = 1;
    Pipeline pipeline;
    double fluid_us = 0;
  };
  std::vector<Candidate> candidates;
  const auto schedule_start = Clock::now();
  for (int p : pieces) {
    BRAID_ASSIGN_OR_RETURN(synth::FlowPipeline fp, synth::flowPipeline(logical, *flow, p, setup.size));
    candidates.push_back({p, {std::move(fp.problem), std::move(fp.routing), std::move(fp.schedule)}, fp.fluid_us});
  }
  std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return a.pipeline.schedule.makespan_us < b.pipeline.schedule.makespan_us;
  });
  std::vector<std::string> modelled;
  for (const Candidate& c : candidates) {
    modelled.push_back(fmt::format("{} pieces: {:.6g} us ({:.4g}x the flow)", c.pieces, c.pipeline.schedule.makespan_us,
                                   c.fluid_us / optimum_us));
  }
  result->stages.push_back({.name = "schedule",
                            .seconds = std::chrono::duration<double>(Clock::now() - schedule_start).count(),
                            .status = fmt::format("fluid; {}", fmt::join(modelled, ", ")),
                            .makespan_us = candidates.front().pipeline.schedule.makespan_us});
  const bool scored = static_cast<bool>(request.score) && candidates.size() > 1;
  std::optional<SynthesisResult> best;
  double best_score = 0;
  std::vector<std::string> tried;
  Status first_error = Status::ok();
  for (const Candidate& c : candidates) {
    if (best && !scored) break;
    if (best && Clock::now() >= ctx.deadline) {
      ctx.clockCut("flow candidates");
      break;
    }
    SynthesisResult candidate = *result;
    Movements m;
    m.forward_logical = &logical;
    m.fwd = &c.pipeline;
    m.chunkup = c.pieces;
    m.name = fmt::format("braid-flow-alltoall-{}-c{}", topology.name, c.pieces);
    m.level_channels = anyInterNode(logical);
    Status finished = finishAlgorithm(request, setup, m, ctx, &candidate);
    if (!finished.isOk()) {
      if (!tooLargeToVerify(finished)) return finished;
      if (first_error.isOk()) first_error = finished;
      tried.push_back(fmt::format("pieces={}: too large to verify", c.pieces));
      continue;
    }
    if (!scored) {
      best = std::move(candidate);
      break;
    }
    Result<double> score = request.score(candidate.algorithm, setup.size);
    if (!score.isOk()) {
      if (first_error.isOk()) first_error = score.status();
      tried.push_back(fmt::format("pieces={}: not scored ({})", c.pieces, score.status().message()));
      continue;
    }
    tried.push_back(fmt::format("pieces={}: {:.2f}", c.pieces, *score));
    if (!best || *score < best_score) {
      best_score = *score;
      best = std::move(candidate);
    }
  }
  if (!best) return first_error.isOk() ? internalError("the flow method built no candidate") : first_error;
  if (!tried.empty()) {
    best->notes.push_back(
        fmt::format("flow: {} ({}); kept {} pieces per block",
                    scored ? "candidates scored by " +
                                 (request.score_name.empty() ? std::string("the caller's scorer") : request.score_name)
                           : std::string("candidates"),
                    fmt::join(tried, "; "), best->chunkup));
  }
  best->notes.push_back(
      fmt::format("flow: the all-to-all max-concurrent flow optimum is {:.6g} us at {} bytes", optimum_us, setup.size));
  *result = std::move(*best);
  return Status::ok();
}

// SCCL's least-steps all-gather (synthesizer/sccl.h) on the complete logical topology; reduce-scatter on the
// transposed one run backwards (the forward solution reused when the two mirror each other), all-reduce both.
Status synthesizeSccl(const SynthesisRequest& request, const Setup& setup, const synth::StageContext& ctx,
                      SynthesisResult* result) {
  const Topology& topology = *setup.topology;
  BRAID_ASSIGN_OR_RETURN(CompleteLogical logical, completeLogical(setup));
  auto& [forward, reverse, reuse] = logical;
  synth::ScclRequest sccl{request.sccl_steps, request.sccl_rounds, request.sccl_chunks, request.sccl_objective};
  std::vector<synth::ScclSolution> solved;
  std::vector<const synth::LogicalTopology*> on;
  if (setup.need_forward || reuse) on.push_back(&forward);
  if (setup.need_reverse && !reuse) on.push_back(&reverse);
  for (const synth::LogicalTopology* logical : on) {
    StageReport report;
    report.name = logical == &reverse ? "sccl (reversed)" : "sccl";
    Result<synth::ScclSolution> s = synth::scclAllGather(*logical, sccl, setup.size, ctx, &report);
    result->stages.push_back(report);
    if (!s.isOk()) {
      if (setup.coll == CollectiveKind::kAllGather) return s.status();
      return Status(
          s.status().code(),
          fmt::format("{}, {}: {}", collectiveName(setup.coll),
                      logical == &reverse ? "the all-gather of the transposed links (run backwards)" : "its all-gather",
                      s.status().message()));
    }
    // Both movements of an all-reduce cut the buffer alike: the second is solved with the first one's chunks.
    sccl.chunks = s->chunks;
    solved.push_back(std::move(*s));
  }
  std::vector<Pipeline> pipelines;
  for (synth::ScclSolution& s : solved) {
    pipelines.push_back({std::move(s.problem), std::move(s.routing), std::move(s.schedule), s.units});
  }
  const synth::ScclSolution& first = solved.front();
  Movements m;
  m.forward_logical = &forward;
  m.reverse_logical = reuse ? &forward : &reverse;
  if (setup.need_forward) m.fwd = &pipelines.front();
  if (setup.need_reverse) m.rev = reuse ? &pipelines.front() : &pipelines.back();
  m.chunkup = first.chunks;
  m.name = fmt::format("braid-sccl-{}-{}-s{}-r{}-c{}", collectiveName(setup.coll), topology.name, first.steps,
                       first.rounds, first.chunks);
  m.level_channels = anyInterNode(forward);
  BRAID_RETURN_IF_ERROR(finishAlgorithm(request, setup, m, ctx, result));
  if (topology.numNodes() > 1) {
    result->notes.push_back(
        "sccl: SCCL's search is meant for single nodes (its unit is one lane of the fastest GPU link); across nodes "
        "the forest and taccl methods scale further");
  }
  for (const synth::ScclSolution& s : solved) {
    result->notes.push_back(fmt::format("sccl: ({} steps, {} rounds, {} chunks), rounds per step {}: R/C = {:.4g}",
                                        s.steps, s.rounds, s.chunks, fmt::join(s.rounds_per_step, "+"),
                                        static_cast<double>(s.rounds) / s.chunks));
  }
  Provenance& prov = result->algorithm.provenance;
  prov.extra["sccl_steps"] = std::to_string(first.steps);
  prov.extra["sccl_rounds"] = std::to_string(first.rounds);
  prov.extra["sccl_chunks"] = std::to_string(first.chunks);
  return Status::ok();
}

}  // namespace

Result<SynthesisResult> synthesize(const SynthesisRequest& request) {
  const auto start = Clock::now();
  BRAID_RETURN_IF_ERROR(checkRequest(request));
  SynthesisResult result;
  BRAID_ASSIGN_OR_RETURN(Setup setup, prepare(request, &result));

  synth::StageContext ctx;
  ctx.start = start;
  ctx.deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                             std::min(request.time_limit_s, kMaxSynthesisTimeLimitSeconds)));
  ctx.progress = request.progress;
  ctx.notes = &result.notes;
  result.budget_units = request.budget_units > 0
                            ? request.budget_units
                            : static_cast<uint64_t>(std::min(request.time_limit_s * synth::kUnitsPerSecond, 1e18));
  ctx.units = result.budget_units;
  synth::ClockCuts cuts;
  ctx.cuts = &cuts;
  // Interrupts every Z3 check still running at its stage's deadline and repeats the last progress line while one
  // runs; stopped (joined) when synthesize() returns.
  synth::Watchdog watchdog(start, ctx.deadline, request.progress, /*tick_s=*/0.1, /*heartbeat_s=*/0.5);
  ctx.watchdog = &watchdog;
  Status ran;
  if (setup.forest && setup.coll == CollectiveKind::kAllToAll) {
    ran = synthesizeFlow(request, setup, ctx, &result);
  } else if (setup.forest) {
    ran = synthesizeForest(request, setup, ctx, &result);
  } else if (setup.sccl) {
    ran = synthesizeSccl(request, setup, ctx, &result);
  } else {
    ran = synthesizeTaccl(request, setup, ctx, &result);
  }
  result.clock_cuts = cuts.stages();
  if (request.clock_cuts_out != nullptr) *request.clock_cuts_out = result.clock_cuts;
  if (!ran.isOk()) {
    if (result.clock_cuts.empty()) return ran;
    return Status(ran.code(), fmt::format("{} (the wall-clock limit of {:g} s ended {} before the budget of {} "
                                          "resource units: another run may find one)",
                                          ran.message(), request.time_limit_s, fmt::join(result.clock_cuts, ", "),
                                          result.budget_units));
  }
  if (!result.clock_cuts.empty()) {
    result.notes.push_back(fmt::format(
        "the wall-clock limit of {:g} s ended {} before the budget of {} resource units: another run may give another "
        "algorithm (a larger --time-limit, or a smaller --budget, makes the result reproducible)",
        request.time_limit_s, fmt::join(result.clock_cuts, ", "), result.budget_units));
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  result.algorithm.provenance.extra["synthesis_seconds"] = fmt::format("{:.3f}", result.seconds);
  return result;
}

}  // namespace braid
