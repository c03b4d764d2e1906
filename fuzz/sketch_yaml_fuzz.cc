// Fuzz target: Braid sketch YAML (readSketchYaml, synthesizer/sketch_io.cc), then what `braid synth --sketch` does
// with it: write it back as YAML and check it against the shipped topologies with 1 and 2 NDv2 nodes.
#include <cstddef>
#include <cstdint>

#include "braid/sketch.h"
#include "fuzz_support.h"
#include "sketch_support.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  braid::fuzz::quietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  braid::Result<braid::Sketch> sketch = braid::readSketchYaml(braid::fuzz::inputText(data, size), "fuzz-sketch.yaml");
  if (!sketch.isOk()) return 0;
  braid::fuzz::exerciseSketch(*sketch);
  return 0;
}
