// `braid topo import|show|draw`: turn any supported machine description into Braid YAML, print a
// topology, draw it as SVG.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "braid/file_io.h"
#include "braid/importers.h"
#include "braid/taccl.h"
#include "braid/topology.h"
#include "cli/commands.h"
#include "cli/output_path.h"
#include "cli/topology_arg.h"

namespace braid::cli {
namespace {

struct TopoOptions {
  std::string file;
  std::string out;
  std::string sketch;
  bool json = false;
};

int fail(const char* cmd, const Status& status) {
  std::cerr << fmt::format("braid topo {}: {}\n", cmd, status.message());
  return 1;
}

/// Checked before anything is read: status 2 (usage error) when the output names an input file, 1 when it cannot be
/// written (outputPathsError).
std::optional<int> clash(const char* cmd, const std::vector<PathOption>& inputs, const std::string& out) {
  if (std::optional<std::string> error = samePathError(inputs, {{"-o", out}})) {
    std::cerr << fmt::format("braid topo {}: {}\n", cmd, *error);
    return 2;
  }
  if (std::optional<std::string> error = outputPathsError({out})) {
    std::cerr << fmt::format("braid topo {}: {}\n", cmd, *error);
    return 1;
  }
  return std::nullopt;
}

int runImport(const TopoOptions& opt) {
  // Without a sketch the input may also be a shipped name (converted as its YAML is read).
  const bool may_be_shipped = opt.sketch.empty();
  if (std::optional<int> code =
          clash("import", {{"FILE", opt.file, may_be_shipped}, {"--sketch", opt.sketch}}, opt.out))
    return *code;
  Result<Topology> topo = Status(StatusCode::kInternalError, "not loaded");
  if (!opt.sketch.empty()) {
    // A sketch only makes sense with a TACCL topology profile: it says how many nodes and how they connect.
    Result<TacclSketch> sketch = loadTacclSketch(opt.sketch);
    if (!sketch) return fail("import", sketch.status());
    Result<std::string> text = readFile(opt.file);
    if (!text) return fail("import", text.status());
    const size_t first = text->find_first_not_of(" \t\r\n");
    if (first == std::string::npos || (*text)[first] != '{') {
      return fail("import",
                  invalidArgument(fmt::format("{}: --sketch needs a TACCL topology profile (JSON)", opt.file)));
    }
    topo = importTacclProfile(*text, opt.file, &*sketch);
  } else {
    topo = loadTopologyArgument(opt.file);
  }
  if (!topo) return fail("import", topo.status());
  for (const std::string& note : topo->notes) std::cerr << "note: " << note << "\n";
  Status valid = validateTopology(*topo);
  if (!valid) return fail("import", valid);
  Status written = writeFileAtomic(opt.out, writeTopologyYaml(*topo));
  if (!written) return fail("import", written);
  std::cout << fmt::format("wrote {}: {} GPUs in {} node(s), {} vertices, {} links\n", opt.out, topo->numGpus(),
                           topo->numNodes(), topo->vertices.size(), topo->links.size());
  return 0;
}

int runShow(const TopoOptions& opt) {
  Result<Topology> topo = loadTopologyArgument(opt.file);
  if (!topo) return fail("show", topo.status());
  std::cout << (opt.json ? topologyToJson(*topo) : describeTopology(*topo));
  return 0;
}

int runDraw(const TopoOptions& opt) {
  if (std::optional<int> code = clash("draw", {{"FILE", opt.file, true}}, opt.out)) return *code;
  Result<Topology> topo = loadTopologyArgument(opt.file);
  if (!topo) return fail("draw", topo.status());
  Status written = writeFileAtomic(opt.out, drawTopologySvg(*topo));
  if (!written) return fail("draw", written);
  std::cout << fmt::format("wrote {} ({} GPUs, {} node(s))\n", opt.out, topo->numGpus(), topo->numNodes());
  return 0;
}

}  // namespace

void registerTopoCommands(CLI::App& app, int* exit_code) {
  CLI::App* topo = app.add_subcommand("topo", "Import, show and draw machine topologies");
  topo->require_subcommand(1);
  auto opt = std::make_shared<TopoOptions>();

  CLI::App* import = topo->add_subcommand(
      "import", "Convert NCCL topology XML, nvidia-smi topo -m text, a TACCL profile or Braid YAML to Braid YAML");
  import->add_option("file", opt->file, "Input file (format detected from its content), or a shipped name")->required();
  import->add_option("-o,--output", opt->out, "Braid YAML file to write")->required()->check(outputPathCheck());
  import->add_option("--sketch", opt->sketch,
                     "TACCL communication sketch (JSON) for a TACCL profile: number of nodes "
                     "and how they connect");
  import->callback([opt, exit_code] { *exit_code = runImport(*opt);
});

CLI::App* show = topo->add_subcommand("show", "Print a topology: counts, link classes, GPU x GPU route matrix");
show->add_option("file", opt->file, "Topology file, or a shipped name such as dgx1-v100")->required();
show->add_flag("--json", opt->json, "Print JSON instead of text");
show->callback([opt, exit_code] { *exit_code = runShow(*opt); });

CLI::App* draw = topo->add_subcommand("draw", "Draw a topology as SVG");
draw->add_option("file", opt->file, "Topology file, or a shipped name such as dgx-a100-x2")->required();
draw->add_option("-o,--output", opt->out, "SVG file to write")->required()->check(outputPathCheck());
draw->callback([opt, exit_code] { *exit_code = runDraw(*opt); });
}  // namespace braid::cli

}  // namespace braid::cli
