/* Synthesizing a Pareto set at communicator init (target braid::braid_pareto, which brings in the synthesizer and
 * Z3). A program that only loads algorithms synthesized offline (BRAID_ALGO_DIR) or runs the classical ones links
 * braid::braid_comm alone and does not need this.
 *
 * Once enabled, a communicator whose topology (BRAID_TOPO / CommOptions::topology) has as many GPUs as it has
 * ranks gets the Pareto set rank 0 computes (include/braid/comm.h, selection source 2; comm/README.md).
 * Without it, such a communicator warns once on rank 0 and selects from BRAID_ALGO_DIR and the classical rule.
 */
#ifndef BRAID_PARETO_H_
#define BRAID_PARETO_H_

#include "braid/braid.h"

#ifdef __cplusplus
#include <string>
#include <vector>

#include "braid/comm.h"

namespace braid {

/// The synthesizer-backed ParetoSynthesizer. For each of all-gather, reduce-scatter, all-reduce and all-to-all:
/// synthesize() with the derived sketch (30 s at most) and, except for all-to-all, with SynthesisMethod::kForest
/// (tree packing, 30 s at most), plus the classical algorithms that apply on the topology
/// (ring over its NVLink rings, recursive doubling, direct, double binary tree); each candidate is simulated
/// (simulate.h) at 1 KiB, 16 KiB, ..., 256 MiB, and every candidate fastest at some size is kept with the window
/// of sizes where it is (boundaries at the geometric midpoint of neighbouring measured sizes; the smallest and
/// largest windows are open). A collective that fails to synthesize (infeasible, time limit) keeps its classical
/// candidates, with a BRAID_DEBUG=INFO note. Deterministic for a given topology.
Result<std::vector<ParetoCandidate>> synthesizeParetoSet(const Topology& topology, const std::string& topology_name);

/// synthesizeParetoSet as a ParetoSynthesizer (for CommOptions::pareto_synthesizer).
ParetoSynthesizer paretoSynthesizer();

/// Installs paretoSynthesizer() as the process-wide default (setDefaultParetoSynthesizer): every communicator
/// created afterwards without its own CommOptions::pareto_synthesizer uses it. Idempotent and thread-safe.
void enableParetoSynthesis();

}  // namespace braid

extern "C" {
#endif

/* enableParetoSynthesis() for C API users: call it before braidCommInit*. Always braidSuccess. */
braidResult_t braidEnableParetoSynthesis(void);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // BRAID_PARETO_H_
