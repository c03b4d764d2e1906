// Test helper: requests for the classical algorithms (include/braid/classic.h), the few fields tests set.
#pragma once

#include "braid/classic.h"

namespace braid::testing {

/// The root the suites give a rooted collective on n ranks: n / 2 for broadcast and reduce (a root that is neither
/// the first nor the last rank), 0 for the others.
inline int middleRoot(CollectiveKind kind, int n) {
  return kind == CollectiveKind::kBroadcast || kind == CollectiveKind::kReduce ? n / 2 : 0;
}

/// The request for `algo` running `kind` on n ranks, in place or out of place, rooted at `root`; everything else
/// the builder's choice.
inline ClassicRequest classicRequest(ClassicAlgo algo, CollectiveKind kind, int n, bool in_place = false,
                                     int root = 0) {
  ClassicRequest request;
  request.algo = algo;
  request.spec.kind = kind;
  request.spec.num_ranks = n;
  request.spec.in_place = in_place;
  request.spec.root = root;
  return request;
}

/// classicRequest(algo, kind, n), built; a build that fails throws (Result::value), failing the calling test with
/// the status.
inline Algorithm classicAlgorithm(ClassicAlgo algo, CollectiveKind kind, int n) {
  return buildClassic(classicRequest(algo, kind, n)).value();
}

}  // namespace braid::testing
