// Topology arguments (topology_arg.h).
#include "cli/topology_arg.h"

#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <set>
#include <system_error>

namespace braid::cli {

void noteShadowedTopology(const std::string& spec) {
  namespace fs = std::filesystem;
  static std::set<std::string> noted;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(spec, ec))) return;  // no file: the shipped name is used, nothing shadowed
  const Result<std::string> shipped = findShippedTopology(spec);
  if (!shipped) return;
  if (fs::equivalent(spec, *shipped, ec) && !ec) return;  // the shipped file itself (run from topologies/)
  if (!noted.insert(spec).second) return;
  const std::string shown = spec.find('/') == std::string::npos ? "./" + spec : spec;
  const std::string name = fs::path(spec).extension() == ".yaml" ? fs::path(spec).stem().string() : spec;
  std::cerr << fmt::format("note: using the file {}; the shipped topology {} ({}) is not used\n", shown, name,
                           *shipped);
}

Result<Topology> loadTopologyArgument(const std::string& spec) {
  noteShadowedTopology(spec);
  return loadTopologyOrShipped(spec);
}

}  // namespace braid::cli
