// A synthesis request far larger than a second of solving: dgx1-v100 all-to-all with the derived sketch at chunkup
// 12 and path slack 2 (its routing model has 23,112 variables). Shared by the time-limit and determinism tests.
#pragma once

#include "braid/sketch.h"
#include "braid/synthesize.h"
#include "braid/topology.h"

namespace braid::testing_support {

/// `topology` must be dgx1-v100 and outlive the request; time limit 1 s, the default budget.
inline Result<SynthesisRequest> hardAllToAllRequest(const Topology& topology) {
  BRAID_ASSIGN_OR_RETURN(Sketch sketch, deriveSketch(topology, CollectiveKind::kAllToAll));
  sketch.chunkup = 12;
  sketch.path_slack = 2;
  SynthesisRequest request;
  request.topology = &topology;
  request.collective = CollectiveKind::kAllToAll;
  request.sketch = sketch;
  request.has_sketch = true;
  request.time_limit_s = 1;
  return request;
}

}  // namespace braid::testing_support
