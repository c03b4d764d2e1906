// `braid algo NAME --coll C [--root R] [--topology T | -n N [--ranks-per-node G]] [--inplace] [--proto P]
// [--channels K] [-o FILE]`:
// builds a classical algorithm (include/braid/classic.h), verifies it, and writes it as MSCCL XML
// (or Braid JSON when FILE ends in .json); without -o it prints a summary.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "braid/algorithm.h"
#include "braid/classic.h"
#include "braid/file_io.h"
#include "braid/topology.h"
#include "cli/commands.h"
#include "cli/output_path.h"
#include "cli/topology_arg.h"

namespace braid::cli {
namespace {

struct AlgoOptions {
  std::string name;
  std::string coll;
  std::string topology;
  std::optional<int> num_ranks;  // -n, when given
  int num_ranks_value = 0;       // what CLI11 parsed for -n
  int root = 0;                  // broadcast / reduce
  bool in_place = false;
  std::string proto = "Simple";
  int channels = 0;
  int ranks_per_node = 0;  // 2dh without a topology
  std::string output;
};

std::optional<Protocol> parseProtocol(const std::string& text) {
  for (Protocol p : {Protocol::kSimple, Protocol::kLL, Protocol::kLL128}) {
    std::string lower_name = protocolName(p);
    std::string lower_text = text;
    std::transform(lower_name.begin(), lower_name.end(), lower_name.begin(), ::tolower);
    std::transform(lower_text.begin(), lower_text.end(), lower_text.begin(), ::tolower);
    if (lower_name == lower_text) return p;
  }
  return std::nullopt;
}

bool endsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string summary(const Algorithm& a, const VerifyReport& report) {
  std::string text =
      fmt::format("{}: {} on {} ranks, {} chunks per loop, {} channel(s), protocol {}\n", a.name, a.collective_name,
                  a.num_ranks, a.num_chunks, a.num_channels, protocolName(a.protocol));
  if (a.collective == CollectiveKind::kBroadcast || a.collective == CollectiveKind::kReduce) {
    text += fmt::format("  root: {}\n", a.root);
  }
  text += fmt::format("  modes: {}{}\n", a.in_place ? "in-place " : "", a.out_of_place ? "out-of-place" : "");
  int max_steps = 0;
  int max_tbs = 0;
  int sends = 0;
  for (const RankProgram& p : a.ranks) {
    max_tbs = std::max(max_tbs, static_cast<int>(p.threadblocks.size()));
    for (const Threadblock& tb : p.threadblocks) {
      max_steps = std::max(max_steps, static_cast<int>(tb.steps.size()));
      for (const Step& s : tb.steps) sends += opSends(s.type) ? 1 : 0;
    }
  }
  text += fmt::format("  threadblocks: {} in all, at most {} per rank; steps: {} in all, at most {} per threadblock\n",
                      a.numThreadblocks(), max_tbs, a.numSteps(), max_steps);
  text += fmt::format("  sends: {} in all\n", sends);
  text += fmt::format("  verified: {}\n", report.ok ? "ok" : "FAILED");
  for (const std::string& note : a.notes) text += "  note: " + note + "\n";
  return text;
}

// Exit status 2: the command line asks for something that cannot be (usage error); 1: it failed.
constexpr int kUsageError = 2;
constexpr int kFailure = 1;

int runAlgo(const AlgoOptions& opt) {
  auto fail = [](int code, const std::string& message) {
    std::cerr << "braid algo: " << message << "\n";
    return code;
  };
  if (std::optional<std::string> error = samePathError({{"--topology", opt.topology, true}}, {{"-o", opt.output}})) {
    return fail(kUsageError, *error);
  }
  Result<ClassicAlgo> algo = parseClassicAlgo(opt.name);
  if (!algo) return fail(kUsageError, algo.status().message());
  std::optional<CollectiveKind> kind = parseCollective(opt.coll);
  if (!kind) {
    return fail(kUsageError,
                fmt::format("--coll: unknown collective '{}': expected allgather, reducescatter, allreduce, alltoall, "
                            "broadcast or reduce",
                            opt.coll));
  }
  const std::vector<CollectiveKind> applies = classicCollectives(*algo);
  if (std::find(applies.begin(), applies.end(), *kind) == applies.end()) {
    std::string names;
    for (CollectiveKind k : applies) names += fmt::format("{}{}", names.empty() ? "" : ", ", collectiveName(k));
    return fail(kUsageError, fmt::format("{} does not implement {}; it implements {}", classicAlgoName(*algo),
                                         collectiveName(*kind), names));
  }
  const bool rooted = *kind == CollectiveKind::kBroadcast || *kind == CollectiveKind::kReduce;
  if (opt.root != 0 && !rooted) {
    return fail(kUsageError, fmt::format("--root {}: only broadcast and reduce have a root, not {}", opt.root,
                                         collectiveName(*kind)));
  }
  std::optional<Protocol> proto = parseProtocol(opt.proto);
  if (!proto) {
    return fail(kUsageError, fmt::format("--proto: unknown protocol '{}': expected Simple, LL or LL128", opt.proto));
  }
  if (opt.channels < 0) return fail(kUsageError, fmt::format("--channels: {} is negative", opt.channels));
  if (opt.channels > kMaxAlgorithmChannels) {
    return fail(kUsageError, fmt::format("--channels: {} is not in 0..{} (MSCCL's MAXCHANNELS; 0 = the algorithm's "
                                         "choice)",
                                         opt.channels, kMaxAlgorithmChannels));
  }
  if (*algo == ClassicAlgo::kHierarchical && opt.topology.empty()) {
    return fail(kUsageError, "hierarchical needs --topology: it follows the topology's nodes");
  }
  if (opt.ranks_per_node != 0 && *algo != ClassicAlgo::kTwoDimHierarchical) {
    return fail(kUsageError, fmt::format("--ranks-per-node applies to 2dh only, not {} (hierarchical follows the "
                                         "topology's nodes)",
                                         classicAlgoName(*algo)));
  }
  if (opt.ranks_per_node < 0) {
    return fail(kUsageError, fmt::format("--ranks-per-node: {} is negative", opt.ranks_per_node));
  }
  if (*algo == ClassicAlgo::kTwoDimHierarchical && opt.topology.empty() && opt.ranks_per_node == 0) {
    return fail(kUsageError,
                "2dh needs the node shape: --topology (its nodes) or -n N with --ranks-per-node G (N a multiple of G)");
  }
  // An N-rank classic algorithm holds at least N chunks on each of N ranks; the verifier keeps at most 2^22 chunks
  // over all ranks, so beyond 2048 ranks nothing could be verified. 0, negative and too large counts get one message.
  constexpr int kMaxRanks = 2048;
  if (opt.num_ranks && (*opt.num_ranks < 1 || *opt.num_ranks > kMaxRanks)) {
    return fail(kUsageError, fmt::format("-n {}: the number of ranks must be in 1..{} (N ranks hold at least N x N "
                                         "chunks; the verifier keeps at most {})",
                                         *opt.num_ranks, kMaxRanks, kMaxVerifiedChunks));
  }
  if (opt.topology.empty() && !opt.num_ranks) {
    return fail(kUsageError, "give the number of ranks with -n N or a --topology");
  }
  if (opt.topology.empty() && opt.ranks_per_node > 0 && *opt.num_ranks % opt.ranks_per_node != 0) {
    return fail(kUsageError, fmt::format("--ranks-per-node {}: {} ranks do not split into nodes of {} rank(s) (N must "
                                         "be a multiple of G)",
                                         opt.ranks_per_node, *opt.num_ranks, opt.ranks_per_node));
  }

  if (std::optional<std::string> error = outputPathsError({opt.output})) return fail(kFailure, *error);

  std::optional<Topology> topology;
  if (!opt.topology.empty()) {
    Result<Topology> loaded = loadTopologyArgument(opt.topology);
    if (!loaded) return fail(kFailure, loaded.status().message());
    topology = std::move(*loaded);
    if (opt.num_ranks && *opt.num_ranks != topology->numGpus()) {
      return fail(kUsageError, fmt::format("-n {} does not match topology '{}' with {} GPUs", *opt.num_ranks,
                                           topology->name, topology->numGpus()));
    }
  }

  ClassicRequest request;
  request.algo = *algo;
  request.spec.kind = *kind;
  request.spec.num_ranks = topology ? topology->numGpus() : *opt.num_ranks;
  if (opt.root < 0 || opt.root >= request.spec.num_ranks) {
    return fail(kUsageError, fmt::format("--root {} is not a rank of {} (0..{})", opt.root, request.spec.num_ranks,
                                         request.spec.num_ranks - 1));
  }
  request.spec.root = opt.root;
  request.spec.chunk_factor = 0;
  request.spec.in_place = opt.in_place;
  request.topology = topology ? &*topology : nullptr;
  request.protocol = *proto;
  request.num_channels = opt.channels;
  request.ranks_per_node = opt.ranks_per_node;
  const AlgorithmFileFormat format =
      endsWith(opt.output, ".json") ? AlgorithmFileFormat::kBraidJson : AlgorithmFileFormat::kMscclXml;
  // What the request would build, refused before anything is built when it could not be verified or written.
  Result<ClassicShape> shape = classicShape(request);
  if (!shape) return fail(kFailure, shape.status().message());
  const std::string ranks_given = topology ? fmt::format("--topology {} ({} GPUs)", opt.topology, topology->numGpus())
                                           : fmt::format("-n {}", *opt.num_ranks);
  if (shape->chunk_cells > kMaxVerifiedChunks) {
    return fail(kUsageError, fmt::format("{}: {} {} would hold {} chunks over all ranks, more than the {} the verifier "
                                         "keeps; use fewer ranks",
                                         ranks_given, classicAlgoName(*algo), collectiveName(*kind), shape->chunk_cells,
                                         kMaxVerifiedChunks));
  }
  if (!opt.output.empty() && algorithmFileBytesAtLeast(shape->min_steps, format) > kMaxAlgorithmFileBytes) {
    return fail(kUsageError,
                fmt::format("{}: the {} of {} {} would be at least {:.1f} MiB ({} steps or more), more than the {} MiB "
                            "Braid reads back from an algorithm file; use fewer ranks",
                            ranks_given, format == AlgorithmFileFormat::kBraidJson ? "Braid JSON" : "MSCCL XML",
                            classicAlgoName(*algo), collectiveName(*kind),
                            static_cast<double>(algorithmFileBytesAtLeast(shape->min_steps, format)) / (1 << 20),
                            shape->min_steps, kMaxAlgorithmFileBytes >> 20));
  }
  Result<Algorithm> built = buildClassic(request);
  if (!built) return fail(kFailure, built.status().message());
  Algorithm& algorithm = *built;

  VerifyReport report = verify(algorithm);
  if (!report.ok) {
    return fail(kFailure, fmt::format("{} failed verification; not written:\n{}", algorithm.name, report.toString()));
  }
  if (topology) {
    Status placed = checkPlacement(algorithm, *topology);
    if (!placed) return fail(kFailure, placed.message() + "; not written");
  }
  if (opt.output.empty()) {
    std::cout << summary(algorithm, report);
    return 0;
  }
  Status written = writeAlgorithmFile(opt.output, algorithm, format);
  if (!written) return fail(kFailure, written.message());
  std::cout << fmt::format("wrote {} ({} on {} ranks, verified)\n", opt.output, algorithm.name, algorithm.num_ranks);
  return 0;
}

}  // namespace

void registerAlgoCommand(CLI::App& app, int* exit_code) {
  auto opt = std::make_shared<AlgoOptions>();
  CLI::App* cmd = app.add_subcommand(
      "algo",
      "Build a classical algorithm (ring, multiring, direct, recursive, tree, pairwise, hierarchical, 2dh), "
      "verify it and write it as MSCCL XML or Braid JSON");
  cmd->add_option("name", opt->name, "ring | multiring | direct | recursive | tree | pairwise | hierarchical | 2dh")
      ->required();
  cmd->add_option("--coll,-c", opt->coll, "allgather | reducescatter | allreduce | alltoall | broadcast | reduce")
      ->required();
  cmd->add_option("--root", opt->root, "root rank of broadcast and reduce (default 0)");
  cmd->add_option("--topology,-t", opt->topology, "topology file or shipped name (e.g. dgx1-v100)");
  CLI::Option* ranks = cmd->add_option("-n,--ranks", opt->num_ranks_value, "number of ranks when no topology is given");
  cmd->add_option("--ranks-per-node,-g", opt->ranks_per_node,
                  "2dh without --topology: ranks per node G (rank = node * G + local index; N a multiple of G)");
  cmd->add_flag("--inplace", opt->in_place, "build for in-place calls");
  cmd->add_option("--proto", opt->proto, "Simple | LL | LL128 (default Simple)");
  cmd->add_option("--channels", opt->channels, "channels (0 = the algorithm's choice)");
  cmd->add_option("-o,--output", opt->output, "output file: .json writes Braid JSON, anything else MSCCL XML")
      ->check(outputPathCheck());
  cmd->callback([opt, ranks, exit_code]() {
    if (ranks->count() > 0) opt->num_ranks = opt->num_ranks_value;
    *exit_code = runAlgo(*opt);
  });
}

}  // namespace braid::cli
