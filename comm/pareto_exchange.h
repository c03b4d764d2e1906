// The Pareto set for a topology in the catalog (include/braid/comm.h, selection source 2): rank 0 computes it with
// a ParetoSynthesizer, every other rank receives it over the bootstrap.
#pragma once

#include <string>

#include "braid/bootstrap.h"
#include "braid/comm.h"
#include "braid/topology.h"
#include "comm/selection.h"

namespace braid::comm {

/// Rank 0 runs `synthesizer` (CommOptions::pareto_synthesizer; when empty, defaultParetoSynthesizer()) for
/// `topology` and sends the set to every other rank over the bootstrap as Braid JSON, so every rank holds the same
/// candidates; the other ranks never call a synthesizer. Without a synthesizer rank 0 logs one warning (the program
/// does not link braid::braid_pareto) and sends an empty set; a synthesizer error or exception also leaves the set
/// empty, with a warning. Only bootstrap errors and a set rank 0 sent that does not parse are returned.
Status addParetoSet(AlgorithmCatalog& catalog, const Topology& topology, const std::string& topology_name,
                    Bootstrap& bootstrap, const ParetoSynthesizer& synthesizer);

}  // namespace braid::comm
