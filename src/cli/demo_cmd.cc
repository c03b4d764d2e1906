// `braid demo`: the README's main job on a bundled default topology. Until the synthesizer lands it
// shows the topology, builds the classical NVLink multi-ring and pairwise algorithms for it, verifies them and writes
// them as MSCCL XML.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <string>

#include "braid/algorithm.h"
#include "braid/classic.h"
#include "braid/file_io.h"
#include "braid/topology.h"
#include "cli/commands.h"

namespace braid::cli {
namespace {

struct DemoOptions {
  std::string topology = "dgx1-v100";
  std::string out_dir = "braid-out";
};

int runDemo(const DemoOptions& opt) {
  Result<Topology> topo = loadTopologyOrShipped(opt.topology);
  if (!topo) {
    std::cerr << "braid demo: " << topo.status().message() << "\n";
    return 1;
  }
  std::cout << describeTopology(*topo) << "\n";

  std::error_code ec;
  std::filesystem::create_directories(opt.out_dir, ec);
  if (ec) {
    std::cerr << fmt::format("braid demo: cannot create {}: {}\n", opt.out_dir, ec.message());
    return 1;
  }
  const int n = topo->numGpus();
  int failures = 0;
  struct Job {
    ClassicAlgo algo;
    CollectiveKind coll;
  };
  for (const Job& job : {Job{ClassicAlgo::kMultiRing, CollectiveKind::kAllGather},
                         Job{ClassicAlgo::kMultiRing, CollectiveKind::kReduceScatter},
                         Job{ClassicAlgo::kMultiRing, CollectiveKind::kAllReduce},
                         Job{ClassicAlgo::kPairwise, CollectiveKind::kAllToAll}}) {
    ClassicRequest req;
    req.algo = job.algo;
    req.spec.kind = job.coll;
    req.spec.num_ranks = n;
    req.topology = &*topo;
    Result<Algorithm> algo = buildClassic(req);
    if (!algo) {
      std::cerr << fmt::format("braid demo: {} {}: {}\n", classicAlgoName(job.algo), collectiveName(job.coll),
                               algo.status().message());
      ++failures;
      continue;
    }
    VerifyReport report = verify(*algo);
    const std::string file =
        (std::filesystem::path(opt.out_dir) /
         fmt::format("{}_{}_{}.xml", topo->name, collectiveName(job.coll), classicAlgoName(job.algo)))
            .string();
    if (!report.ok) {
      std::cerr << fmt::format("braid demo: {} FAILED verification:\n{}\n", algo->name, report.toString());
      ++failures;
      continue;
    }
    Status st = writeFileAtomic(file, writeMscclXml(*algo));
    if (!st) {
      std::cerr << "braid demo: " << st.message() << "\n";
      ++failures;
      continue;
    }
    std::cout << fmt::format("{:<14} {:<10} ranks={} chunks={} channels={} threadblocks={} steps={}  VERIFIED -> {}\n",
                             collectiveName(job.coll), classicAlgoName(job.algo), algo->num_ranks, algo->num_chunks,
                             algo->num_channels, algo->numThreadblocks(), algo->numSteps(), file);
    for (const std::string& note : algo->notes) std::cout << "    note: " << note << "\n";
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace

void registerDemoCommand(CLI::App& app, int* exit_code) {
  auto opt = std::make_shared<DemoOptions>();
  CLI::App* cmd = app.add_subcommand(
      "demo", "Main job on a bundled topology: show it, build and verify its algorithms, write MSCCL XML");
  cmd->add_option("--topology", opt->topology, "Topology file or shipped name")->capture_default_str();
  cmd->add_option("-o,--out-dir", opt->out_dir, "Directory for the MSCCL XML files")->capture_default_str();
  cmd->callback([opt, exit_code] { *exit_code = runDemo(*opt); });
}

}  // namespace braid::cli
