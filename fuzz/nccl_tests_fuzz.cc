// Fuzz target: nccl-tests output logs (parseNcclTestsLog, src/cost/nccl_tests_log.cc), the reader behind the
// simulator's calibration against measured tables and `braid tune --nccl-tests-log`.
#include <cstddef>
#include <cstdint>

#include "braid/nccl_tests_log.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  braid::fuzz::quietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto log = braid::parseNcclTestsLog(braid::fuzz::inputText(data, size), "fuzz-nccl-tests.txt");
  (void)log;
  return 0;
}
