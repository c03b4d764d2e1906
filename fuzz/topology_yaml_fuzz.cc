// Fuzz target: Braid topology YAML (readTopologyYaml, src/topology/yaml_io.cc), then what `braid topo show` and
// `topo import` do with a topology that reads: validate it, describe it, write it as JSON, YAML and SVG.
#include <cstddef>
#include <cstdint>

#include "braid/topology.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  braid::fuzz::quietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  braid::Result<braid::Topology> topology = braid::readTopologyYaml(braid::fuzz::inputText(data, size), "fuzz.yaml");
  if (!topology.isOk()) return 0;
  braid::fuzz::exerciseTopology(*topology);
  return 0;
}
