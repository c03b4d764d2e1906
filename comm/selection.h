// Algorithm selection for the communicator (include/braid/comm.h gives the order of sources).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "braid/algorithm.h"
#include "braid/classic.h"
#include "braid/comm.h"
#include "braid/topology.h"
#include "comm/alltoall_choice.h"

namespace braid::comm {

/// An algorithm the communicator may run, with where it came from ("forced", "BRAID_ALGO_DIR <file>",
/// "synthesized <topology>", "classical") and the window of sizes it serves: the Pareto set's window for its
/// candidates; forced / directory candidates use the algorithm's own window.
using Candidate = ParetoCandidate;

/// The classical algorithm the communicator runs when nothing else matches, for CPU transports. The rule
/// (comm/README.md): all-reduce, all-gather and reduce-scatter below 256 KiB use recursive doubling / halving
/// (log2 n rounds: latency-bound sizes), at and above it the ring (bandwidth-optimal, Patarasuk & Yuan 2009);
/// all-to-all is direct (every pair at once); broadcast and reduce use the binomial tree below 256 KiB
/// (log2 n rounds) and ring chains pipelined by slices from it.
ClassicAlgo classicalRule(CollectiveKind collective, int num_ranks, uint64_t bytes);

class AlgorithmCatalog {
 public:
  AlgorithmCatalog(int num_ranks, std::shared_ptr<const Topology> topology);

  void addForced(const Algorithm& algorithm);
  /// A file's algorithm; its source reads "<origin> <file>" (the variable that named it: BRAID_ALGO_DIR, or
  /// MSCCL_XML_FILES in the NCCL-API shim).
  void addDirectory(const LoadedAlgorithm& loaded, const std::string& origin = "BRAID_ALGO_DIR");
  void addSynthesized(Candidate candidate);
  const std::vector<Candidate>& synthesized() const { return synthesized_; }
  /// The flat / 2DH choice of all-to-all(v): all-to-all's classical candidate follows it, and in a forced mode it
  /// comes before the Pareto set. A catalog without one runs the direct all-to-all.
  void setAllToAllChooser(std::unique_ptr<AllToAllChooser> chooser);
  AllToAllChooser& allToAll();

  /// The candidate for a call. `root` matters for broadcast / reduce. With allow_fallback = false only
  /// forced / directory candidates are searched (kNotFound when none matches). Thread-compatible: one
  /// communicator uses its catalog from one thread.
  Result<const Candidate*> choose(CollectiveKind collective, uint64_t bytes, bool in_place, int root,
                                  bool allow_fallback);
  /// The classical fallback for a call, ignoring every other source (the tail path runs it). All-to-all: the direct
  /// exchange or 2dh, as the all-to-all chooser decides for bytes / num_ranks per peer.
  Result<const Candidate*> classical(CollectiveKind collective, uint64_t bytes, bool in_place, int root);
  /// A stable digest of the forced / directory / synthesized candidates (names, collectives, windows): every
  /// rank must hold the same catalog.
  std::string digest() const;

 private:
  std::unique_ptr<AllToAllChooser> alltoall_;
  bool matches(const Candidate& candidate, CollectiveKind collective, uint64_t bytes, bool in_place, int root) const;
  int num_ranks_;
  std::shared_ptr<const Topology> topology_;
  std::vector<Candidate> forced_;
  std::vector<Candidate> directory_;
  std::vector<Candidate> synthesized_;
  std::map<std::tuple<int, int, bool, int>, std::unique_ptr<Candidate>> classical_;  // (algo, coll, in_place, root)
};

}  // namespace braid::comm
