// Where Braid finds its data files (shipped topologies).
#pragma once

#include <string>
#include <vector>

namespace braid {

/// Directories searched for shipped topologies, in order: $BRAID_TOPOLOGY_DIR (when set and non-empty), <exe
/// dir>/../share/braid/topologies, the install location (<prefix>/share/braid/topologies) and the source tree's
/// topologies/ folder.
std::vector<std::string> topologySearchDirs();

}  // namespace braid
