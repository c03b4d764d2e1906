// Fuzz target: TACCL sketch JSON (readTacclSketch, src/topology/taccl_json.cc), then what `braid synth --sketch`
// does with it: convert it to a Braid sketch (synthesizer/sketch_io.cc), write that as YAML and check it against
// the shipped topologies with 1 and 2 NDv2 nodes.
#include <cstddef>
#include <cstdint>

#include "braid/sketch.h"
#include "braid/taccl.h"
#include "fuzz_support.h"
#include "sketch_support.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  braid::fuzz::quietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  braid::Result<braid::TacclSketch> taccl = braid::readTacclSketch(braid::fuzz::inputText(data, size), "fuzz.json");
  if (!taccl.isOk()) return 0;
  braid::Sketch sketch = braid::sketchFromTaccl(*taccl);
  braid::fuzz::exerciseSketch(sketch);
  return 0;
}
