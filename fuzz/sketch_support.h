// What the sketch fuzz targets do with a sketch that reads: write it as Braid sketch YAML and check it against the
// shipped NDv2 topologies of 1 and 2 nodes (loaded once).
#pragma once

#include <vector>

#include "braid/sketch.h"
#include "braid/topology.h"

namespace braid::fuzz {

inline const std::vector<Topology>& sketchTopologies() {
  static const std::vector<Topology> topologies = [] {
    std::vector<Topology> loaded;
    for (const char* name : {"ndv2-x1", "ndv2-x2"}) {
      Result<Topology> topology = loadTopologyOrShipped(name);
      if (topology.isOk()) loaded.push_back(std::move(*topology));
    }
    return loaded;
  }();
  return topologies;
}

inline void exerciseSketch(const Sketch& sketch) {
  (void)writeSketchYaml(sketch);
  for (const Topology& topology : sketchTopologies()) (void)checkSketch(sketch, topology);
}

}  // namespace braid::fuzz
