// Synthesis benchmark: per shipped topology and collective, synthesizes Braid's algorithm
// (include/braid/synthesize.h, derived sketch), then simulates it next to NCCL's own choice, NCCL's ring and the
// lower bound at 1 KiB, 1 MiB and 256 MiB (comm/pareto/compare.h), all in one run, and prints synthesis seconds,
// predicted times and the ratios. It checks the limits on this machine and exits 1 when one fails:
//   synthesis time: dgx1-v100 all-gather < 10 s; dgx2-x2 all-gather, all-reduce, all-to-all < 60 s each;
//                   ndv2-x4 all-gather < 60 s;
//   quality at 256 MiB: dgx1-v100 all-gather <= 1.05 x the lower bound; ndv2-x2 all-gather and all-reduce >= 1.5x
//                   faster than NCCL's ring; ndv2-x4 all-gather and all-reduce >= 1.2x;
//   wall clock: every synthesis returns (an algorithm, or "no algorithm within the time limit") within the time
//                   limit + 5 s. Each row says what came back: optimal (every solver stage proved its optimum, or the
//                   1 % gap), best-so-far (a stage stopped at its budget or the time limit with its best), none
//                   (kTimeout); "clock" after it when the wall clock, not the budget, ended a stage (the row may then
//                   differ between runs: SynthesisResult::clock_cuts).
// Usage: synth_benchmark [--all] [--topologies a,b,...] [--collectives allgather,...] [--time-limit S]
//                        [--budget UNITS] [--sizes 1K,1M,256M] [--method taccl|forest|sccl|both|all] [--xml-dir DIR]
//   --budget: the solvers' budget in Z3 resource units (SynthesisRequest::budget_units; default from the limit).
//   --xml-dir: writes each algorithm as DIR/<topology>-<collective>-<method>.xml (MSCCL XML), to compare runs.
//   --method: the synthesis method (include/braid/synthesize.h SynthesisMethod; default taccl); both = a row per
//          method, side by side (the forest method skips what it does not build: braid::forestMethodBuilds). The limits
//          above apply to taccl rows. sccl = two rows, sccl-L (least steps) and sccl-B (least rounds per chunk), on
//          single nodes, the chunk column reading steps/rounds/chunks, checked against SCCL's: DGX-1 all-gather in 2
//          steps < 1 s and at 7/6 rounds per chunk (SCCL: 0.2 s and 33-56 s), DGX-2 all-gather both < 5 s (SCCL:
//          nothing in 10 min); all = taccl, forest and sccl.
//   --all: every shipped topology (braid::shippedTopologyNames, include/braid/topology.h) x
//          allgather, reducescatter, allreduce, alltoall.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "braid/algorithm.h"
#include "braid/file_io.h"
#include "braid/synthesize.h"
#include "braid/topology.h"
#include "comm/pareto/compare.h"

namespace {

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

struct Limit {
  std::string topology;
  std::string collective;
  double max_seconds = 0;          // 0 = no time limit check
  double max_ratio_to_bound = 0;   // at 256 MiB; 0 = none
  double min_speedup_vs_ring = 0;  // at 256 MiB; 0 = none
};

const std::vector<Limit>& limits() {
  static const std::vector<Limit> l = {
      {"dgx1-v100", "allgather", 10, 1.05, 0}, {"dgx2-x2", "allgather", 60, 0, 0},
      {"dgx2-x2", "allreduce", 60, 0, 0},      {"dgx2-x2", "alltoall", 60, 0, 0},
      {"ndv2-x4", "allgather", 60, 0, 1.2},    {"ndv2-x4", "allreduce", 0, 0, 1.2},
      {"ndv2-x2", "allgather", 0, 0, 1.5},     {"ndv2-x2", "allreduce", 0, 0, 1.5},
  };
  return l;
}

constexpr double kWallSlackSeconds = 5;  // a synthesis may overrun its time limit by this much

/// "best-so-far" when a stage stopped at its budget or the time limit with its best, else "optimal"; " clock"
/// appended when the wall clock ended a stage.
std::string resultStatus(const braid::SynthesisResult& result) {
  const std::string clock = result.clock_cuts.empty() ? "" : " clock";
  for (const braid::StageReport& stage : result.stages) {
    const std::string& s = stage.status;
    if (s.find("time limit") != std::string::npos || s.find("no time left") != std::string::npos ||
        s.find("budget") != std::string::npos)
      return "best-so-far" + clock;
  }
  return "optimal" + clock;
}

std::string fmtOpt(const std::optional<double>& v, const char* spec = "{:.2f}") {
  return v ? fmt::format(fmt::runtime(spec), *v) : std::string("-");
}

}  // namespace

/// One row kind: a method, and for kSccl its objective.
struct MethodRow {
  braid::SynthesisMethod method;
  braid::ScclObjective objective = braid::ScclObjective::kLatency;
};

/// The SCCL limits (issue 13; SCCL's own times, PPoPP'21 and msccl-tools SYNTHESIS.md, in the comment at the
/// top): DGX-1 all-gather least-steps in 2 steps < 1 s and least rounds per chunk at 7/6; DGX-2 all-gather both
/// objectives < 5 s.
void scclVerdicts(const std::string& topology, const std::string& coll, braid::ScclObjective objective,
                  const braid::SynthesisResult& result, std::vector<std::string>* verdicts, int* failures) {
  if (coll != "allgather") return;
  const auto& extra = result.algorithm.provenance.extra;
  const int steps = std::stoi(extra.at("sccl_steps")), rounds = std::stoi(extra.at("sccl_rounds")),
            chunks = std::stoi(extra.at("sccl_chunks"));
  auto verdict = [&](bool ok, const std::string& what) {
    verdicts->push_back(fmt::format("{} {} {}", ok ? "PASS" : "FAIL", topology, what));
    *failures += ok ? 0 : 1;
  };
  const bool latency = objective == braid::ScclObjective::kLatency;
  if (topology == "dgx1-v100" && latency) {
    verdict(steps == 2 && result.seconds < 1, fmt::format("sccl least-steps all-gather: {} steps in {:.2f} s (2 "
                                                          "steps in < 1 s)",
                                                          steps, result.seconds));
  }
  if (topology == "dgx1-v100" && !latency) {
    verdict(rounds * 6 <= chunks * 7,
            fmt::format("sccl least-rounds-per-chunk all-gather: {}/{}/{}, R/C = {:.4g} "
                        "(7/6 or less) in {:.2f} s",
                        steps, rounds, chunks, static_cast<double>(rounds) / chunks, result.seconds));
  }
  if (topology == "dgx2-x1") {
    verdict(result.seconds < 5,
            fmt::format("sccl {} all-gather: {}/{}/{} in {:.2f} s (< 5 s)",
                        latency ? "least-steps" : "least-rounds-per-chunk", steps, rounds, chunks, result.seconds));
  }
}

int main(int argc, char** argv) {
  std::vector<std::string> topologies = {"dgx1-v100", "dgx-a100-x1", "dgx-a100-x2", "dgx-h100-x1", "dgx-h100-x2",
                                         "ndv2-x1",   "ndv2-x2",     "ndv2-x4",     "dgx2-x1",     "dgx2-x2",
                                         "pcie-2s4g", "dgx-a100-x4", "dgx-h100-x4"};
  std::vector<std::string> collectives = {"allgather", "allreduce", "alltoall"};
  std::vector<std::string> size_texts = {"1K", "1M", "256M"};
  double time_limit = 60;
  uint64_t budget = 0;
  std::string xml_dir;
  std::vector<MethodRow> methods = {{braid::SynthesisMethod::kTaccl}};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "synth_benchmark: " << arg << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--all") {
      topologies = braid::shippedTopologyNames();
      collectives = {"allgather", "reducescatter", "allreduce", "alltoall"};
      if (topologies.empty()) {
        std::cerr << "synth_benchmark: no shipped topologies found (BRAID_TOPOLOGY_DIR)\n";
        return 2;
      }
    } else if (arg == "--topologies") {
      topologies = split(value());
    } else if (arg == "--collectives") {
      collectives = split(value());
    } else if (arg == "--sizes") {
      size_texts = split(value());
    } else if (arg == "--time-limit") {
      time_limit = std::stod(value());
    } else if (arg == "--budget") {
      budget = std::stoull(value());
    } else if (arg == "--xml-dir") {
      xml_dir = value();
    } else if (arg == "--method") {
      const std::string m = value();
      const MethodRow sccl_l{braid::SynthesisMethod::kSccl, braid::ScclObjective::kLatency};
      const MethodRow sccl_b{braid::SynthesisMethod::kSccl, braid::ScclObjective::kBandwidth};
      if (m == "both") {
        methods = {{braid::SynthesisMethod::kTaccl}, {braid::SynthesisMethod::kForest}};
      } else if (m == "all") {
        methods = {{braid::SynthesisMethod::kTaccl}, {braid::SynthesisMethod::kForest}, sccl_l, sccl_b};
      } else if (m == "sccl") {
        methods = {sccl_l, sccl_b};
      } else if (std::optional<braid::SynthesisMethod> parsed = braid::parseSynthesisMethod(m)) {
        methods = {{*parsed}};
      } else {
        std::cerr << "synth_benchmark: --method " << m << " is not taccl, forest, sccl, both or all\n";
        return 2;
      }
    } else {
      std::cerr << "usage: synth_benchmark [--all] [--topologies a,b] [--collectives allgather,allreduce,alltoall] "
                   "[--time-limit S] [--budget UNITS] [--sizes 1K,1M,256M] [--method taccl|forest|sccl|both|all] "
                   "[--xml-dir DIR]\n";
      return 2;
    }
  }
  std::vector<uint64_t> sizes;
  for (const std::string& s : size_texts) {
    std::optional<uint64_t> v = braid::parseNcclTestsSize(s);
    if (!v) {
      std::cerr << "synth_benchmark: bad size " << s << "\n";
      return 2;
    }
    sizes.push_back(*v);
  }

  int failures = 0, over_wall = 0, none = 0;
  double worst_wall = 0;
  std::vector<std::string> verdicts;
  fmt::print(
      "# Braid synthesis benchmark: derived sketch, time limit {} s per synthesis; times in us (Braid's "
      "simulator, float, out-of-place)\n",
      time_limit);
  fmt::print(
      "# vs NCCL / vs ring = NCCL time / Braid time (> 1: Braid faster); /cut, /routed = Braid time / that bound\n");
  for (const std::string& line : braid::boundLegend(braid::CollectiveKind::kAllReduce)) {
    fmt::print("# {}\n", line);
  }
  fmt::print(
      "# wall s = synthesize()'s wall-clock time; status: optimal, best-so-far (a budget or the time limit hit; "
      "\"clock\": the wall clock ended a stage), none\n");
  fmt::print("{:<12} {:<13} {:<6} {:>5} {:>7} {:<11} {:>6}", "topology", "collective", "method", "ranks", "wall s",
             "status", "chunk");
  for (const std::string& s : size_texts) {
    fmt::print(" | {:>6} {:>10} {:>8} {:>8} {:>7} {:>7}", s, "Braid us", "vs NCCL", "vs ring", "/cut", "/routed");
  }
  fmt::print("\n");
  for (const std::string& name : topologies) {
    braid::Result<braid::Topology> topo = braid::loadTopologyOrShipped(name);
    if (!topo) {
      fmt::print("{:<12} cannot load: {}\n", name, topo.status().message());
      ++failures;
      continue;
    }
    for (const std::string& coll_name : collectives) {
      for (const auto& [method, objective] : methods) {
        std::optional<braid::CollectiveKind> coll = braid::parseCollective(coll_name);
        if (!coll) {
          std::cerr << "synth_benchmark: unknown collective " << coll_name << "\n";
          return 2;
        }
        const bool forest = method == braid::SynthesisMethod::kForest;
        if (forest && !braid::forestMethodBuilds(*coll, topo->numGpus())) continue;
        const bool sccl = method == braid::SynthesisMethod::kSccl;
        if (sccl && (!braid::scclMethodBuilds(*coll) || topo->numNodes() > 1)) continue;
        const std::string method_name = sccl ? (objective == braid::ScclObjective::kLatency ? "sccl-L" : "sccl-B")
                                             : std::string(braid::synthesisMethodName(method));
        braid::SynthesisRequest req;
        req.method = method;
        req.sccl_objective = objective;
        req.topology = &*topo;
        req.collective = *coll;
        req.time_limit_s = time_limit;
        req.budget_units = budget;
        if (forest) {
          req.score = braid::simulatedScore(*topo);
          req.score_name = braid::kSimulatedScoreName;
        }
        const auto t0 = std::chrono::steady_clock::now();
        braid::Result<braid::SynthesisResult> result = braid::synthesize(req);
        const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        worst_wall = std::max(worst_wall, wall);
        if (wall > time_limit + kWallSlackSeconds) {
          verdicts.push_back(fmt::format("FAIL {} {} returned after {:.2f} s > time limit {} s + {} s", name, coll_name,
                                         wall, time_limit, kWallSlackSeconds));
          ++failures;
          ++over_wall;
        }
        if (!result) {
          const bool timed_out = result.status().code() == braid::StatusCode::kTimeout;
          fmt::print("{:<12} {:<13} {:<6} {:>5} {:>7.2f} {:<11} {}\n", name, coll_name, method_name, topo->numGpus(),
                     wall, timed_out ? "none" : "FAILED", result.status().message());
          std::fflush(stdout);
          if (timed_out) {
            ++none;
          } else {
            ++failures;
          }
          continue;
        }
        if (!xml_dir.empty()) {
          const std::string path = fmt::format("{}/{}-{}-{}.xml", xml_dir, name, coll_name, method_name);
          if (braid::Status w = braid::writeFileAtomic(path, braid::writeMscclXml(result->algorithm)); !w) {
            std::cerr << "synth_benchmark: " << w.message() << "\n";
            return 1;
          }
        }
        braid::Result<braid::Comparison> cmp = braid::compareAlgorithm(result->algorithm, *topo, *coll, sizes);
        if (!cmp) {
          fmt::print("{:<12} {:<13} {:>5} compare FAILED: {}\n", name, coll_name, topo->numGpus(),
                     cmp.status().message());
          ++failures;
          continue;
        }
        auto& extra = result->algorithm.provenance.extra;
        const std::string chunks =
            sccl ? fmt::format("{}/{}/{}", extra["sccl_steps"], extra["sccl_rounds"], extra["sccl_chunks"])
                 : extra["chunkup"];
        fmt::print("{:<12} {:<13} {:<6} {:>5} {:>7.2f} {:<11} {:>6}", name, coll_name, method_name, topo->numGpus(),
                   wall, resultStatus(*result), chunks);
        for (const braid::SizeComparison& row : cmp->sizes) {
          fmt::print(" | {:>6} {:>10.2f} {:>8} {:>8} {:>7.3f} {:>7.3f}", "", row.predicted_us,
                     fmtOpt(row.speedup_vs_nccl), fmtOpt(row.speedup_vs_ring), row.ratio_to_cut_bound,
                     row.ratio_to_bound);
        }
        fmt::print("\n");
        std::fflush(stdout);
        if (sccl) scclVerdicts(name, coll_name, objective, *result, &verdicts, &failures);
        for (const Limit& limit : limits()) {
          if (forest || sccl) break;
          if (limit.topology != name || limit.collective != coll_name) continue;
          if (limit.max_seconds > 0) {
            const bool ok = result->seconds < limit.max_seconds;
            verdicts.push_back(fmt::format("{} {} {} synthesis {:.2f} s < {} s", ok ? "PASS" : "FAIL", name, coll_name,
                                           result->seconds, limit.max_seconds));
            failures += ok ? 0 : 1;
          }
          const braid::SizeComparison* big = nullptr;
          for (const auto& row : cmp->sizes) {
            if (row.requested_bytes == (uint64_t{256} << 20)) big = &row;
          }
          if (!big) continue;
          if (limit.max_ratio_to_bound > 0) {
            const bool ok = big->ratio_to_bound <= limit.max_ratio_to_bound;
            verdicts.push_back(fmt::format("{} {} {} at 256 MiB: {:.3f} x the lower bound <= {}", ok ? "PASS" : "FAIL",
                                           name, coll_name, big->ratio_to_bound, limit.max_ratio_to_bound));
            failures += ok ? 0 : 1;
          }
          if (limit.min_speedup_vs_ring > 0) {
            const bool ok = big->speedup_vs_ring && *big->speedup_vs_ring >= limit.min_speedup_vs_ring;
            verdicts.push_back(fmt::format("{} {} {} at 256 MiB: {}x faster than NCCL's ring >= {}x",
                                           ok ? "PASS" : "FAIL", name, coll_name, fmtOpt(big->speedup_vs_ring),
                                           limit.min_speedup_vs_ring));
            failures += ok ? 0 : 1;
          }
        }
      }
    }
  }
  verdicts.push_back(fmt::format("{} every synthesis returned within the time limit {} s + {} s (slowest {:.2f} s){}",
                                 over_wall == 0 ? "PASS" : "FAIL", time_limit, kWallSlackSeconds, worst_wall,
                                 none ? fmt::format("; {} returned no algorithm", none) : std::string()));
  for (const std::string& v : verdicts) fmt::print("# {}\n", v);
  fmt::print("# {} failure(s)\n", failures);
  return failures == 0 ? 0 : 1;
}
