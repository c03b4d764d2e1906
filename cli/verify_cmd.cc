// `braid verify FILE [--topology T] [--json]`: load an algorithm (MSCCL XML, Braid JSON, TACCL/SCCL
// JSON), print what it is, prove it implements its collective (braid::verify), and with a topology
// check that every transfer has a route. Exit 0 only when all of that holds.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "braid/algorithm.h"
#include "braid/topology.h"
#include "cli/commands.h"
#include "cli/topology_arg.h"
#include "common/text.h"

namespace braid::cli {
namespace {

using Json = nlohmann::ordered_json;

struct VerifyCmdOptions {
  std::string file;
  std::string topology;
  bool json = false;
};

struct TopologyCheck {
  std::string name;
  std::string path;
  int gpus = 0;
  bool gpu_count_matches = false;
  std::vector<Transfer> transfers;
  bool ok = false;
};

std::string windowText(const Algorithm& a) {
  if (a.max_bytes == kUnlimitedBytes) return fmt::format("{} bytes and up", a.min_bytes);
  return fmt::format("{} .. {} bytes (inclusive)", a.min_bytes, a.max_bytes);
}

std::string modesText(const Algorithm& a) {
  if (a.in_place && a.out_of_place) return "in-place and out-of-place";
  if (a.in_place) return "in-place";
  if (a.out_of_place) return "out-of-place";
  return "none (inplace=0, outofplace=0)";
}

Result<TopologyCheck> checkTopology(const Algorithm& a, const std::string& spec) {
  BRAID_ASSIGN_OR_RETURN(Topology topo, loadTopologyArgument(spec));
  TopologyCheck check;
  check.name = topo.name;
  check.path = topo.source;
  check.gpus = topo.numGpus();
  check.gpu_count_matches = check.gpus == a.num_ranks;
  check.transfers = algorithmTransfers(a, &topo);
  bool all_routed = true;
  for (const Transfer& t : check.transfers) all_routed = all_routed && t.route.has_value();
  check.ok = check.gpu_count_matches && all_routed;
  return check;
}

void printText(const std::string& file, const Algorithm& a, const VerifyReport& report,
               const std::optional<TopologyCheck>& topo) {
  std::cout << fmt::format("algorithm:    {} ({})\n", a.name.empty() ? "(unnamed)" : a.name, file);
  std::cout << fmt::format("collective:   {}{}\n", collectiveName(a.collective),
                           a.collective_name.empty() || a.collective_name == collectiveName(a.collective)
                               ? std::string()
                               : fmt::format(" (written \"{}\")", a.collective_name));
  if (a.collective == CollectiveKind::kBroadcast || a.collective == CollectiveKind::kReduce) {
    std::cout << fmt::format("root:         {}\n", a.root);
  }
  std::cout << fmt::format("ranks:        {}\n", a.num_ranks);
  std::cout << fmt::format("chunks:       {} per loop\n", a.num_chunks);
  std::cout << fmt::format("channels:     {}\n", a.num_channels);
  std::cout << fmt::format("threadblocks: {}\n", a.numThreadblocks());
  std::cout << fmt::format("steps:        {}\n", a.numSteps());
  std::cout << fmt::format("protocol:     {}\n", protocolName(a.protocol));
  std::cout << fmt::format("modes:        {}\n", modesText(a));
  std::cout << fmt::format("size window:  {}\n", windowText(a));
  if (!a.notes.empty()) {
    std::cout << "notes:\n";
    for (const std::string& n : a.notes) std::cout << "  - " << n << "\n";
  }
  if (topo) {
    std::cout << fmt::format("topology:     {} ({}), {} GPUs\n", topo->name, topo->path, topo->gpus);
    if (!topo->gpu_count_matches) {
      // Routes of ranks the topology does not have say nothing: the count is the finding.
      std::cout << fmt::format("  GPU count {} does not match the algorithm's {} ranks; transfers not listed\n",
                               topo->gpus, a.num_ranks);
    } else {
      std::cout << fmt::format("  transfers ({} rank pairs):\n", topo->transfers.size());
    }
    for (const Transfer& t : topo->transfers) {
      if (!topo->gpu_count_matches) break;
      if (t.route) {
        std::cout << fmt::format(
            "    {:>3} -> {:<3} {:>5} chunks  {} hop(s), slowest {} {:.1f} GB/s, alpha {:.2f} us\n", t.src, t.dst,
            t.chunks, t.route->links.size(), linkKindName(t.route->slowest_kind), t.route->bandwidth_gbps,
            t.route->alpha_us);
      } else {
        std::cout << fmt::format("    {:>3} -> {:<3} {:>5} chunks  NO ROUTE\n", t.src, t.dst, t.chunks);
      }
    }
  }
  if (report.ok) {
    std::string modes;
    for (const std::string& m : report.modes_checked) modes += (modes.empty() ? "" : ", ") + m;
    std::cout << fmt::format("verdict:      VERIFIED ({})\n", modes);
  } else {
    std::cout << fmt::format("verdict:      FAILED ({} issue(s))\n", report.total_issues);
    std::cout << report.toString();
    if (!report.toString().empty() && report.toString().back() != '\n') std::cout << "\n";
  }
  if (topo) std::cout << fmt::format("routes:       {}\n", topo->ok ? "every transfer has a route" : "FAILED");
}

void printJson(const std::string& file, const Algorithm& a, const VerifyReport& report,
               const std::optional<TopologyCheck>& topo, bool ok) {
  Json j;
  j["file"] = file;
  j["name"] = a.name;
  j["collective"] = collectiveName(a.collective);
  j["collective_name"] = a.collective_name;
  j["root"] = a.root;
  j["ranks"] = a.num_ranks;
  j["chunks"] = a.num_chunks;
  j["channels"] = a.num_channels;
  j["threadblocks"] = a.numThreadblocks();
  j["steps"] = a.numSteps();
  j["protocol"] = protocolName(a.protocol);
  j["in_place"] = a.in_place;
  j["out_of_place"] = a.out_of_place;
  j["min_bytes"] = a.min_bytes;
  j["max_bytes"] = a.max_bytes == kUnlimitedBytes ? Json(nullptr) : Json(a.max_bytes);
  j["notes"] = a.notes;
  j["verified"] = report.ok;
  j["modes_checked"] = report.modes_checked;
  j["total_issues"] = report.total_issues;
  Json issues = Json::array();
  for (const VerifyIssue& i : report.issues) {
    issues.push_back({{"kind", issueKindName(i.kind)},
                      {"rank", i.rank},
                      {"tb", i.tb},
                      {"step", i.step},
                      {"chunk", i.chunk},
                      {"message", i.message}});
  }
  j["issues"] = issues;
  if (topo) {
    Json t;
    t["name"] = topo->name;
    t["file"] = topo->path;
    t["gpus"] = topo->gpus;
    t["gpu_count_matches"] = topo->gpu_count_matches;
    Json transfers = Json::array();
    for (const Transfer& x : topo->transfers) {
      Json e{{"src", x.src}, {"dst", x.dst}, {"chunks", x.chunks}, {"routed", x.route.has_value()}};
      if (x.route) {
        e["hops"] = x.route->links.size();
        e["slowest_kind"] = linkKindName(x.route->slowest_kind);
        e["bandwidth_gbps"] = x.route->bandwidth_gbps;
        e["alpha_us"] = x.route->alpha_us;
      }
      transfers.push_back(e);
    }
    t["transfers"] = transfers;
    t["ok"] = topo->ok;
    j["topology"] = t;
  }
  j["ok"] = ok;
  std::cout << dumpJson(j, 2) << "\n";
}

int runVerify(const VerifyCmdOptions& opt) {
  Result<Algorithm> alg = loadAlgorithm(opt.file);
  if (!alg) {
    std::cerr << fmt::format("braid verify: {}\n", alg.status().message());
    return 1;
  }
  std::optional<TopologyCheck> topo;
  if (!opt.topology.empty()) {
    Result<TopologyCheck> check = checkTopology(*alg, opt.topology);
    if (!check) {
      std::cerr << fmt::format("braid verify: {}\n", check.status().message());
      return 1;
    }
    topo = std::move(*check);
  }
  const VerifyReport report = verify(*alg);
  const bool ok = report.ok && (!topo || topo->ok);
  if (opt.json) {
    printJson(opt.file, *alg, report, topo, ok);
  } else {
    printText(opt.file, *alg, report, topo);
  }
  return ok ? 0 : 1;
}

}  // namespace

void registerVerifyCommand(CLI::App& app, int* exit_code) {
  auto opt = std::make_shared<VerifyCmdOptions>();
  CLI::App* cmd = app.add_subcommand(
      "verify", "Prove that an algorithm (MSCCL XML, Braid JSON, TACCL/SCCL JSON) implements its collective");
  cmd->add_option("file", opt->file, "Algorithm file (format detected from its content)")->required();
  cmd->add_option("--topology", opt->topology,
                  "Also check every transfer has a route on this topology (file or shipped name, e.g. dgx1-v100)");
  cmd->add_flag("--json", opt->json, "Print a JSON object instead of text");
  cmd->callback([opt, exit_code] { *exit_code = runVerify(*opt); });
}

}  // namespace braid::cli
