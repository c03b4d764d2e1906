// Fuzz target: nccl-tests output logs (parseNcclTestsOutput, perf/calibration/calibration.cc), the reader behind
// the simulator's calibration against measured tables.
#include <cstddef>
#include <cstdint>

#include "calibration/calibration.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  braid::fuzz::quietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto rows = braid::calibration::parseNcclTestsOutput(braid::fuzz::inputText(data, size), "fuzz-nccl-tests.txt");
  (void)rows;
  return 0;
}
