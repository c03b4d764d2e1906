// perf/moe_benchmark: MoE all-to-all on DGX H100 clusters in Braid's simulator — the flat exchange (Braid's
// `direct`: every rank sends every peer its block at once, along Topology::route), Tutel's 2DH (`2dh`,
// include/braid/classic.h) and NCCL 2.28's own all-to-all (grouped send/recv with NVB and PXN relays,
// ncclBaselineAlgorithm, simulated as NcclBaselines runs NCCL's p2p program: its p2p chunk as slice and the fitted
// per-step handshake p2p_net_step_us), side by side at each size per peer, with the ratios 2DH / flat and 2DH / NCCL.
//
// Clusters: the shipped dgx-h100 node template (8 H100 on NVSwitch, 8 NDR NICs, PCIe switches, 2 sockets), N nodes,
// on a `rail` network (rail-only: NIC i of every node on rail switch i, as the shipped dgx-h100-x2/x4) or a
// `fat-tree` (16 nodes per leaf, 8 spines, every NIC reaches every NIC). Sizes are bytes per peer (nccl-tests'
// size / ranks). A cell whose simulation would run past --max-seconds (judged from the previous size's wall time,
// scaled linearly in size) is printed as "-" with the reason below the table. The wall time grows about linearly
// with the size only from a few hundred KiB per peer; below that it is nearly constant (one message per pair either
// way), so the prediction is pessimistic there: a larger --max-seconds runs those cells.
//
//   moe_benchmark [--nodes 2,4,16,64] [--network rail|fat-tree|both] [--sizes 1K:64M] [--max-seconds 120]
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "braid/classic.h"
#include "braid/file_io.h"
#include "braid/nccl_model.h"
#include "braid/nccl_runs.h"
#include "braid/simulate.h"
#include "braid/topology.h"
#include "common/text.h"

namespace {

using Clock = std::chrono::steady_clock;
double secondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The shipped dgx-h100 template, `nodes` copies on `network` ("rail" or "fat-tree").
braid::Result<braid::Topology> cluster(int nodes, const std::string& network) {
  BRAID_ASSIGN_OR_RETURN(std::string path, braid::findShippedTopology("dgx-h100-x2"));
  BRAID_ASSIGN_OR_RETURN(std::string text, braid::readFile(path));
  const size_t at = text.find("nodes: {template: dgx-h100, count: 2}");
  if (at == std::string::npos) return braid::invalidArgument(path + ": no 'nodes: {template: dgx-h100, count: 2}'");
  const std::string net =
      network == "rail" ? "network: {kind: rail, speed_gbit: 400, alpha: 1.3}\n"
                        : "network: {kind: fat-tree, speed_gbit: 400, alpha: 1.3, nodes_per_leaf: 16, spines: 8}\n";
  text = text.substr(0, at) + fmt::format("nodes: {{template: dgx-h100, count: {}}}\n", nodes) + net;
  BRAID_ASSIGN_OR_RETURN(braid::Topology topo, braid::readTopologyYaml(text, path + " (moe_benchmark cluster)"));
  topo.name = fmt::format("dgx-h100-x{}-{}", nodes, network);
  return topo;
}

struct Candidate {
  std::string label;
  braid::Runnable what;    // the algorithm, its topology, and how its program iterates
  double last_wall_s = 0;  // wall time of its last simulation
  uint64_t last_size = 0;
};

std::vector<uint64_t> parseSizes(const std::string& text) {
  std::vector<uint64_t> out;
  const size_t colon = text.find(':');
  const auto lo = braid::parseNcclTestsSize(text.substr(0, colon));
  const auto hi = colon == std::string::npos ? lo : braid::parseNcclTestsSize(text.substr(colon + 1));
  if (!lo || !hi || *lo == 0 || *hi < *lo) return out;
  for (uint64_t s = *lo; s <= *hi; s *= 4) out.push_back(s);
  return out;
}

std::vector<int> parseNodes(const std::string& text) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const int n = std::atoi(text.substr(pos, comma - pos).c_str());
    if (n < 1) return {};
    out.push_back(n);
    pos = comma + 1;
  }
  return out;
}

// Runs one cluster: builds the three algorithms, simulates each size, prints the table. False on an error.
bool runCluster(int nodes, const std::string& network, const std::vector<uint64_t>& sizes, double max_seconds) {
  braid::Result<braid::Topology> topo = cluster(nodes, network);
  if (!topo.isOk()) {
    std::fprintf(stderr, "%s\n", topo.status().toString().c_str());
    return false;
  }
  const int n = topo->numGpus();
  std::vector<braid::Algorithm> classics;  // flat, 2dh: run as Braid's executor runs them
  for (braid::ClassicAlgo algo : {braid::ClassicAlgo::kDirect, braid::ClassicAlgo::kTwoDimHierarchical}) {
    braid::ClassicRequest request;
    request.algo = algo;
    request.spec.kind = braid::CollectiveKind::kAllToAll;
    request.spec.num_ranks = n;
    request.topology = &*topo;
    braid::Result<braid::Algorithm> a = braid::buildClassic(request);
    if (!a.isOk()) {
      std::fprintf(stderr, "%s: %s\n", braid::classicAlgoName(algo), a.status().toString().c_str());
      return false;
    }
    classics.push_back(std::move(*a));
  }
  std::vector<Candidate> candidates;
  candidates.push_back({"flat", braid::Runnable{&classics[0], &*topo, -1}});
  candidates.push_back({"2dh", braid::Runnable{&classics[1], &*topo, -1}});
  // NCCL's all-to-all as compare and calibrate simulate it: its p2p program (NcclBaselines::runnable).
  braid::Result<braid::NcclSystem> system = braid::ncclSystem(*topo);
  if (!system.isOk()) {
    std::fprintf(stderr, "NCCL's view of %s: %s\n", topo->name.c_str(), system.status().toString().c_str());
    return false;
  }
  braid::NcclBaselines nccl(*topo, *system, braid::CollectiveKind::kAllToAll, false);
  braid::Result<braid::Runnable> p2p = [&]() -> braid::Result<braid::Runnable> {
    BRAID_ASSIGN_OR_RETURN(braid::NcclRun run, nccl.choose(std::nullopt, 0, braid::Protocol::kSimple));
    return nccl.runnable(run);
  }();
  if (!p2p.isOk()) {
    std::fprintf(stderr, "NCCL all-to-all: %s\n", p2p.status().toString().c_str());
    return false;
  }
  candidates.push_back({"nccl", *p2p});
  std::printf("\n%s: %d ranks (%d nodes x 8), Simple protocol, SimModel::defaults()\n", topo->name.c_str(), n, nodes);
  std::printf("%10s %12s %12s %12s %10s %10s %12s\n", "per_peer", "flat_us", "2dh_us", "nccl_us", "flat/2dh",
              "nccl/2dh", "2dh_busbw");
  std::vector<std::string> skipped;
  for (uint64_t per_peer : sizes) {
    std::map<std::string, double> us;
    for (Candidate& c : candidates) {
      const double predicted = c.last_size == 0 ? 0 : c.last_wall_s * static_cast<double>(per_peer) / c.last_size;
      if (predicted > max_seconds) {
        skipped.push_back(
            fmt::format("{} at {} B per peer: the previous size took {:.1f} s, this one would take "
                        "about {:.0f} s (> --max-seconds {:g})",
                        c.label, per_peer, c.last_wall_s, predicted, max_seconds));
        continue;
      }
      braid::SimOptions options;
      options.size_bytes = per_peer * static_cast<uint64_t>(n);
      const auto start = Clock::now();
      braid::Result<braid::SimResult> r = braid::simulate(c.what, options);
      c.last_wall_s = secondsSince(start);
      c.last_size = per_peer;
      if (!r.isOk()) {
        std::fprintf(stderr, "%s at %llu B per peer: %s\n", c.label.c_str(), static_cast<unsigned long long>(per_peer),
                     r.status().toString().c_str());
        return false;
      }
      us[c.label] = r->time_us;
    }
    auto cell = [&](const std::string& label) {
      return us.count(label) ? fmt::format("{:12.2f}", us[label]) : fmt::format("{:>12}", "-");
    };
    auto ratio = [&](const std::string& a, const std::string& b) {
      return us.count(a) && us.count(b) ? fmt::format("{:10.2f}", us[a] / us[b]) : fmt::format("{:>10}", "-");
    };
    // busbw as nccl-tests computes it for all-to-all: size / time x (n-1)/n, size = per_peer x n.
    const std::string busbw =
        us.count("2dh") ? fmt::format("{:12.2f}", static_cast<double>(per_peer) * n / us["2dh"] / 1e3 * (n - 1) / n)
                        : fmt::format("{:>12}", "-");
    std::printf("%10llu %s %s %s %s %s %s\n", static_cast<unsigned long long>(per_peer), cell("flat").c_str(),
                cell("2dh").c_str(), cell("nccl").c_str(), ratio("flat", "2dh").c_str(), ratio("nccl", "2dh").c_str(),
                busbw.c_str());
    std::fflush(stdout);
  }
  for (const std::string& s : skipped) std::printf("  skipped: %s\n", s.c_str());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string nodes_text = "2,4,16,64", network = "both", sizes_text = "1K:64M";
  double max_seconds = 120;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--nodes" && has_value) {
      nodes_text = argv[++i];
    } else if (arg == "--network" && has_value) {
      network = argv[++i];
    } else if (arg == "--sizes" && has_value) {
      sizes_text = argv[++i];
    } else if (arg == "--max-seconds" && has_value) {
      max_seconds = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: %s [--nodes 2,4,16,64] [--network rail|fat-tree|both] [--sizes 1K:64M] "
                   "[--max-seconds 120]\n",
                   argv[0]);
      return 2;
    }
  }
  const std::vector<int> nodes = parseNodes(nodes_text);
  const std::vector<uint64_t> sizes = parseSizes(sizes_text);
  if (nodes.empty() || sizes.empty() || !(max_seconds > 0) ||
      (network != "rail" && network != "fat-tree" && network != "both")) {
    std::fprintf(stderr, "moe_benchmark: bad --nodes, --sizes (FROM:TO, x4 steps), --network or --max-seconds\n");
    return 2;
  }
  std::printf("moe_benchmark: all-to-all per peer size, flat (Braid direct) vs 2DH (Tutel) vs NCCL 2.28 (p2p, PXN)\n");
  bool ok = true;
  for (const std::string& net :
       network == "both" ? std::vector<std::string>{"rail", "fat-tree"} : std::vector<std::string>{network}) {
    for (int n : nodes) ok = runCluster(n, net, sizes, max_seconds) && ok;
  }
  return ok ? 0 : 1;
}
