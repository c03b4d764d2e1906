// Builds a ring all-gather for 5 ranks through the installed API and verifies it.
#include <cstdio>

#include "braid/algorithm.h"
#include "braid/classic.h"

int main() {
  braid::ClassicRequest req;
  req.algo = braid::ClassicAlgo::kRing;
  req.spec.kind = braid::CollectiveKind::kAllGather;
  req.spec.num_ranks = 5;
  braid::Result<braid::Algorithm> algo = braid::buildClassic(req);
  if (!algo) {
    std::printf("build failed: %s\n", algo.status().toString().c_str());
    return 1;
  }
  braid::VerifyReport report = braid::verify(*algo);
  std::printf("%s ranks=%d verified=%d\n", algo->name.c_str(), algo->num_ranks, report.ok ? 1 : 0);
  return report.ok ? 0 : 1;
}
