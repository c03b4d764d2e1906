// Fuzz target: `nvidia-smi topo -m` text (importNvidiaSmiTopo, src/topology/nvidia_smi.cc), then what
// `braid topo import` does with the imported topology: validate it, describe it, write it as JSON, YAML and SVG.
#include <cstddef>
#include <cstdint>

#include "braid/importers.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  braid::fuzz::quietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  braid::Result<braid::Topology> topology =
      braid::importNvidiaSmiTopo(braid::fuzz::inputText(data, size), "fuzz-smi.txt");
  if (!topology.isOk()) return 0;
  braid::fuzz::exerciseTopology(*topology);
  return 0;
}
