// Fuzz target: TACCL topology profile JSON (importTacclProfile, src/topology/taccl_json.cc), alone or with a TACCL
// sketch. An input holding a line "#sketch" is split there: the profile before it, the sketch after it (a sketch
// that does not read means no sketch). The imported topology is then validated, described and written.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "braid/importers.h"
#include "braid/taccl.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  braid::fuzz::quietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string profile = braid::fuzz::inputText(data, size);
  std::optional<braid::TacclSketch> sketch;
  const std::string marker = "\n#sketch\n";
  if (size_t at = profile.find(marker); at != std::string::npos) {
    braid::Result<braid::TacclSketch> read = braid::readTacclSketch(profile.substr(at + marker.size()), "fuzz-sk.json");
    if (read.isOk()) sketch = std::move(*read);
    profile.resize(at);
  }
  braid::Result<braid::Topology> topology =
      braid::importTacclProfile(profile, "fuzz-profile.json", sketch ? &*sketch : nullptr);
  if (!topology.isOk()) return 0;
  braid::fuzz::exerciseTopology(*topology);
  return 0;
}
