// Fuzz target: Braid algorithm JSON (readAlgorithmJson, src/ir/algorithm_json.cc), then what `braid verify` does
// with an algorithm that reads: the symbolic replay (for algorithms small enough) and both writers.
#include <cstddef>
#include <cstdint>

#include "braid/algorithm.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  braid::fuzz::quietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  braid::Result<braid::Algorithm> algorithm = braid::readAlgorithmJson(braid::fuzz::inputText(data, size), "fuzz.json");
  if (!algorithm.isOk()) return 0;
  braid::fuzz::exerciseAlgorithm(*algorithm);
  return 0;
}
