#include "common/paths.h"

#include <cstdlib>

namespace braid {

std::vector<std::string> topologySearchDirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("BRAID_TOPOLOGY_DIR"); env != nullptr && env[0] != '\0') dirs.emplace_back(env);
#ifdef BRAID_INSTALL_TOPOLOGY_DIR
  dirs.emplace_back(BRAID_INSTALL_TOPOLOGY_DIR);
#endif
#ifdef BRAID_SOURCE_TOPOLOGY_DIR
  dirs.emplace_back(BRAID_SOURCE_TOPOLOGY_DIR);
#endif
  return dirs;
}

}  // namespace braid
