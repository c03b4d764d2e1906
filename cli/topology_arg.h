// A topology argument (--topology T, topo's FILE): a file, or the name of a shipped topology, loaded as every
// command loads it.
#pragma once

#include <string>

#include "braid/topology.h"

namespace braid::cli {

/// loadTopologyOrShipped(spec): an existing file first, else the shipped topology of that name. When `spec` names
/// both an existing file and a shipped topology (a file dgx1-v100 or dgx1-v100.yaml in the working directory), the
/// file is used and stderr says so, once per process and name: "note: using the file ./dgx1-v100; the shipped
/// topology dgx1-v100 (topologies/dgx1-v100.yaml) is not used". Nothing is said when the file is the shipped file.
Result<Topology> loadTopologyArgument(const std::string& spec);

/// The note of loadTopologyArgument alone, for a command that loads the file another way (a TACCL profile joined by
/// a sketch): printed once when `spec` names an existing file and, as well, a shipped topology.
void noteShadowedTopology(const std::string& spec);

}  // namespace braid::cli
