// The Pareto set synthesized for a topology (include/braid/comm.h, selection source 2).
#pragma once

#include <string>

#include "braid/bootstrap.h"
#include "braid/topology.h"
#include "comm/selection.h"

namespace braid::comm {

/// Rank 0 synthesizes all-gather, reduce-scatter, all-reduce and all-to-all for `topology` (synthesize(),
/// derived sketches), builds the classical algorithms that apply (ring over NVLink rings, recursive
/// doubling, direct, double binary tree), simulates every candidate at 1 KiB .. 256 MiB (x16 steps) with the
/// simulator (simulate.h), and keeps each candidate that is fastest at some size, with the window of sizes
/// where it is (boundaries at the geometric midpoint between measured sizes; the smallest and largest
/// windows are open). The set travels to every other rank over the bootstrap as Braid JSON, so every rank
/// holds the same candidates. Synthesis failures (infeasible sketch, time limit) drop that candidate with a
/// BRAID_DEBUG=INFO note; only bootstrap errors are returned.
Status addParetoSet(AlgorithmCatalog& catalog, const Topology& topology, const std::string& topology_name,
                    Bootstrap& bootstrap);

}  // namespace braid::comm
