// `braid bound --topology T --coll C [-b 1K] [-e 1G] [-f 2] [--json]`: lower bounds on a collective's time over
// an nccl-tests size sweep (include/braid/bounds.h collectiveBound): the bandwidth bound (the larger of the
// ForestColl cut bound and the route-constrained LP bound), the latency bound, their maximum, and the algbw/busbw
// ceilings they imply (nccl-tests factors, ../shared/reference/nccl_plugins.md §6.4).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "braid/bounds.h"
#include "braid/collective.h"
#include "braid/topology.h"
#include "cli/commands.h"
#include "cli/topology_arg.h"
#include "comm/pareto/compare.h"
#include "common/text.h"
#include "report/synth_report.h"

namespace braid::cli {
namespace {

constexpr int kUsageError = 2;
constexpr int kFailure = 1;

struct BoundOptions {
  std::string topology;
  std::string coll;
  std::string min_bytes = "1K";
  std::string max_bytes = "1G";
  int factor = 2;
  bool json = false;
};

// nccl-tests sizes: a whole number of bytes with an optional K, M or G suffix (2^10, 2^20, 2^30; either case).
std::optional<uint64_t> parseSize(const std::string& text) {
  if (text.empty()) return std::nullopt;
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits > 18 || text.size() - digits > 1) return std::nullopt;
  uint64_t value = std::stoull(text.substr(0, digits));
  if (digits < text.size()) {
    const char suffix = static_cast<char>(std::toupper(static_cast<unsigned char>(text[digits])));
    const int shift = suffix == 'K' ? 10 : suffix == 'M' ? 20 : suffix == 'G' ? 30 : -1;
    if (shift < 0 || value > (~uint64_t{0} >> shift)) return std::nullopt;
    value <<= shift;
  }
  return value;
}

// Vertex names of the cut, shortened: a node whose every vertex is in the cut becomes "node0/*", GPUs with
// consecutive ranks become "gpu0-7"; beyond 12 items the rest is counted.
std::string shortCut(const Topology& t, const std::vector<int>& cut) {
  std::vector<bool> in(t.vertices.size(), false);
  for (int v : cut) in[v] = true;
  std::vector<bool> whole(t.nodes.size(), true);
  std::vector<bool> any(t.nodes.size(), false);
  for (const Vertex& v : t.vertices) {
    if (v.node < 0) continue;
    any[v.node] = true;
    whole[v.node] = whole[v.node] && in[v.id];
  }
  std::vector<std::string> items;
  for (size_t q = 0; q < t.nodes.size(); ++q) {
    if (any[q] && whole[q]) items.push_back(t.nodes[q].name + "/*");
  }
  std::vector<int> ranks;
  for (int v : cut) {
    const Vertex& vx = t.vertices[v];
    if (vx.node >= 0 && whole[vx.node]) continue;
    if (vx.kind == VertexKind::kGpu) ranks.push_back(vx.rank);
  }
  std::sort(ranks.begin(), ranks.end());
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    items.push_back(j == i ? fmt::format("gpu{}", ranks[i]) : fmt::format("gpu{}-{}", ranks[i], ranks[j]));
    i = j + 1;
  }
  for (int v : cut) {
    const Vertex& vx = t.vertices[v];
    if ((vx.node >= 0 && whole[vx.node]) || vx.kind == VertexKind::kGpu) continue;
    items.push_back(vx.name);
  }
  std::string text;
  const size_t shown = std::min<size_t>(items.size(), 12);
  for (size_t i = 0; i < shown; ++i) text += (i ? ", " : "") + items[i];
  if (items.size() > shown) text += fmt::format(", ... (+{} more)", items.size() - shown);
  return text;
}

struct Row {
  uint64_t size = 0;
  CollectiveBound bound;
  double algbw = 0;
  double busbw = 0;
};

int runBound(const BoundOptions& opt) {
  auto fail = [](int code, const std::string& message) {
    std::cerr << "braid bound: " << message << "\n";
    return code;
  };
  std::optional<CollectiveKind> kind = parseCollective(opt.coll);
  if (!kind || (*kind != CollectiveKind::kAllGather && *kind != CollectiveKind::kReduceScatter &&
                *kind != CollectiveKind::kAllReduce && *kind != CollectiveKind::kAllToAll)) {
    return fail(kUsageError,
                fmt::format("--coll: '{}' is not one of allgather, reducescatter, allreduce, alltoall", opt.coll));
  }
  const std::optional<uint64_t> lo = parseSize(opt.min_bytes);
  if (!lo)
    return fail(kUsageError, fmt::format("-b: bad size '{}' (bytes, or a number with K, M or G)", opt.min_bytes));
  const std::optional<uint64_t> hi = parseSize(opt.max_bytes);
  if (!hi)
    return fail(kUsageError, fmt::format("-e: bad size '{}' (bytes, or a number with K, M or G)", opt.max_bytes));
  if (*lo == 0) return fail(kUsageError, "-b: the smallest size must be at least 1 byte");
  if (*lo > *hi) return fail(kUsageError, fmt::format("-b {} is larger than -e {}", opt.min_bytes, opt.max_bytes));
  if (opt.factor < 2)
    return fail(kUsageError, fmt::format("-f: the step factor must be 2 or more, got {}", opt.factor));

  Result<Topology> topology = loadTopologyArgument(opt.topology);
  if (!topology) return fail(kFailure, topology.status().message());
  const Topology& t = *topology;
  CollectiveSpec spec;
  spec.kind = *kind;
  spec.num_ranks = t.numGpus();
  const double bus_factor = spec.busBandwidthFactor();

  std::vector<uint64_t> sizes;
  for (uint64_t size = *lo; size <= *hi;) {
    sizes.push_back(size);
    if (size > *hi / static_cast<uint64_t>(opt.factor)) break;
    size *= static_cast<uint64_t>(opt.factor);
  }
  Result<std::vector<CollectiveBound>> bounds = collectiveBounds(t, *kind, sizes);
  if (!bounds) return fail(kFailure, bounds.status().message());
  std::vector<Row> rows;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const uint64_t size = sizes[i];
    const CollectiveBound* b = &bounds->at(i);
    Row row;
    row.size = size;
    row.bound = *b;
    // GB/s = bytes / us / 1e3; an instant bound (one GPU) has no ceiling.
    row.algbw = b->time_us > 0 ? static_cast<double>(size) / b->time_us / 1e3 : 0;
    row.busbw = row.algbw * bus_factor;
    rows.push_back(row);
  }
  const std::vector<int>& cut = rows.back().bound.cut;

  if (opt.json) {
    nlohmann::ordered_json out;
    out["topology"] = t.name;
    out["collective"] = collectiveName(*kind);
    out["rows"] = nlohmann::ordered_json::array();
    for (const Row& r : rows) {
      out["rows"].push_back({{"size_bytes", r.size},
                             {"bound_us", r.bound.time_us},
                             {"bandwidth_us", r.bound.bandwidth_us},
                             {"cut_us", r.bound.cut_us},
                             {"route_us", r.bound.route_us},
                             {"flow_us", r.bound.flow_us},
                             {"latency_us", r.bound.latency_us},
                             {"algbw_gbps", r.algbw},
                             {"busbw_gbps", r.busbw}});
    }
    out["bounds"] = boundLabelsJson(*kind, true);
    out["cut"] = nlohmann::ordered_json::array();
    for (int v : cut) out["cut"].push_back(t.vertices[v].name);
    std::cout << dumpJson(out, 2) << "\n";
    return 0;
  }
  std::cout << fmt::format("# braid bound: {} on {} ({} GPUs, {} node(s))\n", collectiveName(*kind), t.name,
                           t.numGpus(), t.numNodes());
  const bool a2a = *kind == CollectiveKind::kAllToAll;
  std::cout << fmt::format(
      "# lower bounds: bound = the routed bound = max(bandwidth, latency), bandwidth = max(cut, route{}); algbw = "
      "size / bound, busbw = algbw x {:.4g} (nccl-tests)\n",
      a2a ? ", flow" : "", bus_factor);
  if (a2a) {
    std::cout << fmt::format(
        "# flow = the all-to-all max-concurrent flow over the routes, GPUs relaying (allToAllFlow); 0 above {} "
        "GPUs (not computed)\n",
        kAllToAllFlowMaxGpus);
  }
  for (const std::string& line : boundLegend(*kind)) std::cout << "# " << line << "\n";
  const std::string flow_head = a2a ? fmt::format(" {:>13}", "flow_us") : "";
  const std::string flow_unit = a2a ? fmt::format(" {:>13}", "(us)") : "";
  std::cout << fmt::format("# {:>12} {:>13} {:>13} {:>13} {:>13}{} {:>11} {:>11} {:>11}\n", "size", "bound_us",
                           "bandwidth_us", "cut_us", "route_us", flow_head, "latency_us", "algbw", "busbw");
  std::cout << fmt::format("# {:>12} {:>13} {:>13} {:>13} {:>13}{} {:>11} {:>11} {:>11}\n", "(B)", "(us)", "(us)",
                           "(us)", "(us)", flow_unit, "(us)", "(GB/s)", "(GB/s)");
  for (const Row& r : rows) {
    const std::string flow = a2a ? fmt::format(" {:>13.3f}", r.bound.flow_us) : "";
    std::cout << fmt::format("  {:>12} {:>13.3f} {:>13.3f} {:>13.3f} {:>13.3f}{} {:>11.3f} {:>11.2f} {:>11.2f}\n",
                             r.size, r.bound.time_us, r.bound.bandwidth_us, r.bound.cut_us, r.bound.route_us, flow,
                             r.bound.latency_us, r.algbw, r.busbw);
  }
  // Every bandwidth bound scales with the size, so the same ones set it at every size (equal within 1e-9).
  const CollectiveBound& last = rows.back().bound;
  std::vector<std::string> binding;
  auto binds = [&](double v) { return std::abs(v - last.bandwidth_us) <= 1e-9 * std::max(1.0, last.bandwidth_us); };
  if (binds(last.cut_us)) binding.push_back("the cut bound");
  if (binds(last.route_us)) binding.push_back("the route bound");
  if (a2a && binds(last.flow_us)) binding.push_back("the max-concurrent flow");
  std::cout << "# bandwidth bound set by " << fmt::format("{}", fmt::join(binding, " and "))
            << (binding.size() > 1 ? " alike" : "") << "\n";
  std::cout << "# binding cut of the cut bound: "
            << (cut.empty() ? std::string("none (fewer than 2 GPUs)") : shortCut(t, cut)) << "\n";
  return 0;
}

}  // namespace

void registerBoundCommand(CLI::App& app, int* exit_code) {
  auto opt = std::make_shared<BoundOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bound",
      "Lower bounds on a collective's time over an nccl-tests size sweep: bandwidth bound (cut and route bounds), "
      "latency bound, and the algbw/busbw ceilings they imply");
  cmd->add_option("--topology,-t", opt->topology, "topology file or shipped name (e.g. dgx-a100-x1)")->required();
  cmd->add_option("--coll,-c", opt->coll, "allgather | reducescatter | allreduce | alltoall")->required();
  cmd->add_option("-b,--minbytes", opt->min_bytes, "smallest size, nccl-tests syntax: 1K = 1024 (default 1K)");
  cmd->add_option("-e,--maxbytes", opt->max_bytes, "largest size (default 1G)");
  cmd->add_option("-f,--stepfactor", opt->factor, "multiply the size by this between rows (default 2)");
  cmd->add_flag("--json", opt->json, "print JSON instead of the table");
  cmd->callback([opt, exit_code]() { *exit_code = runBound(*opt); });
}

}  // namespace braid::cli
