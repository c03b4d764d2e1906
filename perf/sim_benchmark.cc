// perf/sim_benchmark: how fast the simulator runs a 1024-rank ring all-reduce.
//
// Topology: 128 DGX H100 nodes (the shipped dgx-h100 template: 8 GPUs on NVSwitch, 8 NICs, PCIe switches,
// 2 sockets) on a two-level fat tree of 400 Gb/s links, 16 nodes per leaf, 8 spines. Algorithm:
// buildClassic(ring) all-reduce on 1024 ranks (rank order). For 1 MiB, 64 MiB and 1 GiB it prints the wall
// time of lowering (simulationPlan: the plan simulate() runs), of execute + simulated transport, and their
// total, the number of messages and events, and the simulated time and bus bandwidth. Exits 1 when any single
// size takes 10 s or more (or fails).
//
//   sim_benchmark [--nodes N] [--protocol Simple|LL|LL128]
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "braid/classic.h"
#include "braid/file_io.h"
#include "braid/plan.h"
#include "braid/simulate.h"
#include "braid/topology.h"

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The shipped dgx-h100 template, `nodes` copies on a fat tree.
braid::Result<braid::Topology> clusterTopology(int nodes) {
  BRAID_ASSIGN_OR_RETURN(std::string path, braid::findShippedTopology("dgx-h100-x2"));
  BRAID_ASSIGN_OR_RETURN(std::string text, braid::readFile(path));
  const std::string node_line = "nodes: {template: dgx-h100, count: 2}";
  const size_t at = text.find(node_line);
  const size_t net = text.find("network:");
  if (at == std::string::npos || net == std::string::npos) {
    return braid::invalidArgument(fmt::format("{}: expected '{}' and a network line", path, node_line));
  }
  text = text.substr(0, std::min(at, net)) + fmt::format("nodes: {{template: dgx-h100, count: {}}}\n", nodes) +
         "network: {kind: fat-tree, speed_gbit: 400, alpha: 1.3, nodes_per_leaf: 16, spines: 8}\n";
  BRAID_ASSIGN_OR_RETURN(braid::Topology topo, braid::readTopologyYaml(text, path + " (benchmark cluster)"));
  topo.name = fmt::format("dgx-h100-x{}-fat-tree", nodes);
  return topo;
}

}  // namespace

int main(int argc, char** argv) {
  int nodes = 128;
  braid::Protocol protocol = braid::Protocol::kSimple;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--nodes") == 0 && i + 1 < argc) {
      nodes = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--protocol") == 0 && i + 1 < argc) {
      const std::string p = argv[++i];
      protocol = p == "LL" ? braid::Protocol::kLL : p == "LL128" ? braid::Protocol::kLL128 : braid::Protocol::kSimple;
    } else {
      std::fprintf(stderr, "usage: %s [--nodes N] [--protocol Simple|LL|LL128]\n", argv[0]);
      return 2;
    }
  }
  constexpr double kLimitSeconds = 10.0;

  auto t0 = Clock::now();
  braid::Result<braid::Topology> topo = clusterTopology(nodes);
  if (!topo.isOk()) {
    std::fprintf(stderr, "%s\n", topo.status().toString().c_str());
    return 1;
  }
  const double topo_s = secondsSince(t0);
  const int n = topo->numGpus();

  t0 = Clock::now();
  braid::ClassicRequest request;
  request.algo = braid::ClassicAlgo::kRing;
  request.spec.kind = braid::CollectiveKind::kAllReduce;
  request.spec.num_ranks = n;
  request.spec.chunk_factor = 0;
  request.protocol = protocol;
  braid::Result<braid::Algorithm> alg = braid::buildClassic(request);
  if (!alg.isOk()) {
    std::fprintf(stderr, "%s\n", alg.status().toString().c_str());
    return 1;
  }
  const double build_s = secondsSince(t0);

  t0 = Clock::now();
  const braid::Status placed = braid::checkPlacement(*alg, *topo);
  if (!placed.isOk()) {
    std::fprintf(stderr, "%s\n", placed.toString().c_str());
    return 1;
  }
  const double place_s = secondsSince(t0);

  std::printf("sim_benchmark: ring all-reduce, %d ranks on %s (%zu vertices, %zu links), protocol %s\n", n,
              topo->name.c_str(), topo->vertices.size(), topo->links.size(), braid::protocolName(protocol));
  std::printf("setup: topology %.3f s, buildClassic %.3f s, checkPlacement %.3f s (routes of all %d ring pairs)\n",
              topo_s, build_s, place_s, n);
  std::printf("%12s %10s %12s %10s %12s %12s %14s %12s\n", "size", "lower_s", "execute_s", "total_s", "messages",
              "events", "sim_time_us", "busbw_GB/s");

  const braid::SimModel model = braid::SimModel::defaults();
  const int p = static_cast<int>(protocol);
  bool ok = true;
  for (uint64_t size : {uint64_t{1} << 20, uint64_t{64} << 20, uint64_t{1} << 30}) {
    const auto start = Clock::now();
    braid::SimOptions options;
    options.size_bytes = size;
    options.protocol = protocol;
    options.model = model;
    braid::Result<braid::Plan> plan = braid::simulationPlan(*alg, options);
    if (!plan.isOk()) {
      std::fprintf(stderr, "lower %llu: %s\n", static_cast<unsigned long long>(size), plan.status().toString().c_str());
      return 1;
    }
    const double lower_s = secondsSince(start);
    const auto exec_start = Clock::now();
    braid::SimModel plan_model = model;
    plan_model.fifo_depth = plan->fifo_depth;  // as simulate(): raised by the FIFO rule when it shrank the slices
    braid::SimTransport transport(*topo, plan_model);
    braid::Result<braid::ExecResult> exec = braid::execute(*plan, transport);
    const double exec_s = secondsSince(exec_start);
    const double total_s = secondsSince(start);
    if (!exec.isOk()) {
      std::fprintf(stderr, "execute %llu: %s\n", static_cast<unsigned long long>(size),
                   exec.status().toString().c_str());
      return 1;
    }
    const double time_us = model.launch_us[p] + exec->end_us - exec->start_us;
    const double busbw = static_cast<double>(size) / time_us / 1e3 * 2.0 * (n - 1) / n;
    std::printf("%12llu %10.3f %12.3f %10.3f %12lld %12lld %14.1f %12.2f\n", static_cast<unsigned long long>(size),
                lower_s, exec_s, total_s, transport.stats().messages, transport.stats().events, time_us, busbw);
    std::fflush(stdout);
    if (total_s >= kLimitSeconds) {
      std::fprintf(stderr, "size %llu took %.2f s >= %.0f s\n", static_cast<unsigned long long>(size), total_s,
                   kLimitSeconds);
      ok = false;
    }
  }
  return ok ? 0 : 1;
}
