#include "common/paths.h"

#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

#include "common/env.h"

namespace braid {

std::vector<std::string> topologySearchDirs() {
  std::vector<std::string> dirs;
  if (std::string env = envString("BRAID_TOPOLOGY_DIR"); !env.empty()) dirs.push_back(std::move(env));
  // Relative to the running executable (<prefix>/bin/braid -> <prefix>/share/braid/topologies), so an
  // installation moved or installed with `cmake --install --prefix` still finds its data.
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) dirs.push_back((exe.parent_path().parent_path() / "share" / "braid" / "topologies").string());
#ifdef BRAID_INSTALL_TOPOLOGY_DIR
  dirs.emplace_back(BRAID_INSTALL_TOPOLOGY_DIR);
#endif
#ifdef BRAID_SOURCE_TOPOLOGY_DIR
  dirs.emplace_back(BRAID_SOURCE_TOPOLOGY_DIR);
#endif
  return dirs;
}

}  // namespace braid
