// braid::Communicator: a group of ranks that runs collectives on CPU memory over a data transport
// (ARCHITECTURE.md §5). The C API (include/braid/braid.h) wraps it in NCCL's shape.
//
// Each rank owns one Communicator and calls every collective in the same order as the other ranks, from
// one thread at a time (ranks of one process use one thread each, as with NCCL's one-communicator-per-
// thread use). Calls are blocking: when one returns, the receive buffer holds the result.
//
// Algorithm selection (per call; the choice is cached per (collective, bytes, in-place)):
//   1. CommOptions::algorithms (forced, e.g. braid_perf --algo), then BRAID_ALGO_DIR's MSCCL XML / Braid
//      JSON files: the first whose collective, rank count, [min_bytes, max_bytes) window and in-place mode
//      match (files in name order);
//   2. the Pareto set for CommOptions::topology / BRAID_TOPO when its GPU count equals the rank count: the
//      candidate the simulator predicts fastest at this size. Rank 0 computes the set with the Pareto synthesizer
//      (CommOptions::pareto_synthesizer, else the process-wide default; braid::enableParetoSynthesis() in
//      include/braid/pareto.h, target braid::braid_pareto, installs the synthesizer-backed one) and sends it to
//      the other ranks. Without one, rank 0 warns once and selection goes on with sources 1 and 3;
//   3. a classical algorithm for the size (comm/README.md gives the rule); all-to-all: the direct exchange or Tutel's
//      2DH, as CommOptions::alltoall / BRAID_ALLTOALL and the simulator decide (a forced mode comes before 2.).
// BRAID_DEBUG=INFO logs each choice once on stderr: "braid INFO rank 0: allreduce 1048576 B out-of-place ->
// ring (classical)".
//
// Sizes: `count` is in elements as in NCCL (all-gather: elements each rank sends; reduce-scatter: elements
// each rank receives; all-to-all: elements per peer). Counts that do not split into an algorithm's chunks
// run through a tail path (comm/README.md): never a wrong result, never a write past a user buffer.
//
// Errors: kInvalidArgument (null buffer with count > 0, root out of range, overlapping buffers that are not
// the in-place layout), kTimeout / kRemoteError from the transport (a dead or failed peer). After an error
// the communicator is unusable: later calls return the same error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "braid/algorithm.h"
#include "braid/bootstrap.h"
#include "braid/datatype.h"
#include "braid/status.h"
#include "braid/topology.h"

namespace braid {

/// One member of a Pareto set: an algorithm and the window of sizes where it is predicted fastest.
struct ParetoCandidate {
  Algorithm algorithm;
  std::string source;  // "synthesized <topology>", "pareto <topology>: classical <name>", ...
  int instances = 1;
  /// Sizes (nccl-tests bytes, plan.h) this candidate serves: [window_min, window_max], inclusive.
  uint64_t window_min = 0;
  uint64_t window_max = kUnlimitedBytes;
};

/// Computes the Pareto set for `topology` (loaded from `topology_name`, a file or shipped name). Called on
/// rank 0 only, once per communicator; the set travels to the other ranks over the bootstrap as Braid JSON, so
/// the other ranks need no synthesizer. Every candidate must be for topology.numGpus() ranks. An error (or an
/// exception) leaves the set empty with a warning; the communicator is still created.
using ParetoSynthesizer =
    std::function<Result<std::vector<ParetoCandidate>>(const Topology& topology, const std::string& topology_name)>;

/// The process-wide Pareto synthesizer communicators use when CommOptions::pareto_synthesizer is empty; none
/// by default (braid::enableParetoSynthesis() in include/braid/pareto.h installs the synthesizer-backed one).
/// Thread-safe; communicators created afterwards see the new value.
void setDefaultParetoSynthesizer(ParetoSynthesizer synthesizer);
ParetoSynthesizer defaultParetoSynthesizer();

struct CommOptions {
  std::string transport;              // "auto", "threads", "shm", "tcp", "ucx"; empty: BRAID_TRANSPORT
  std::string algo_dir;               // empty: BRAID_ALGO_DIR
  std::string topology;               // file or shipped name; empty: BRAID_TOPO
  std::vector<Algorithm> algorithms;  // forced candidates, searched before everything else
  bool allow_fallback = true;         // false: a call no forced algorithm matches is kNotFound
  double timeout_s = 0;               // 0: BRAID_TIMEOUT
  /// Computes the Pareto set for `topology` on rank 0; empty: defaultParetoSynthesizer().
  ParetoSynthesizer pareto_synthesizer;
  /// All-to-all(v): "auto" (2DH where the simulator predicts it faster on the topology, else flat), "flat" or "2dh"
  /// (Tutel's two-dimensional hierarchical exchange); empty: BRAID_ALLTOALL. Must be the same on every rank.
  std::string alltoall;
  /// Ranks per node for 2DH (rank = node * ranks_per_node + local index, as Tutel's LOCAL_SIZE); 0:
  /// BRAID_RANKS_PER_NODE, else the hosts the bootstrap sees. The topology's nodes, when it has the rank count's
  /// GPUs, come first (a different value here is an error).
  int ranks_per_node = 0;
};

/// Which algorithm a call runs and why.
struct AlgorithmChoice {
  std::string algorithm;  // Algorithm::name
  std::string source;     // "forced", "BRAID_ALGO_DIR <file>", "synthesized <topology>", "classical"
  int instances = 1;
};

class Communicator {
 public:
  /// Collective over `bootstrap`: every rank calls it. Sets up the transport, loads BRAID_ALGO_DIR and, with a
  /// topology, the Pareto set rank 0 computes (every rank ends up with the same catalog, checked by digest).
  static Result<std::unique_ptr<Communicator>> create(std::unique_ptr<Bootstrap> bootstrap,
                                                      const CommOptions& options = {});
  /// Convenience: connectBootstrap(id, rank, size) then create().
  static Result<std::unique_ptr<Communicator>> create(const UniqueId& id, int rank, int size,
                                                      const CommOptions& options = {});
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* transportName() const = 0;

  virtual Status allReduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op) = 0;
  virtual Status allGather(const void* send, void* recv, size_t send_count, DataType type) = 0;
  virtual Status reduceScatter(const void* send, void* recv, size_t recv_count, DataType type, ReduceOp op) = 0;
  /// `count` elements to each peer: send and recv hold size() * count elements.
  virtual Status allToAll(const void* send, void* recv, size_t count, DataType type) = 0;
  /// MPI_Alltoallv's shape: send_counts[p] elements from send + send_displs[p] to peer p; recv_counts[p]
  /// elements from peer p land at recv + recv_displs[p] (displacements in elements; zero counts, a rank that sends or
  /// receives nothing, any order of the blocks). recv_counts[p] must equal what p sends here: with the call check
  /// (BRAID_CALL_CHECK, default on for all-to-all-v) every rank returns kInvalidArgument naming both ranks of a pair
  /// that disagrees before any data moves. Runs as the flat direct exchange or as 2DH (CommOptions::alltoall;
  /// comm/README.md): 2DH exchanges the block sizes inside each node first.
  virtual Status allToAllv(const void* send, const size_t* send_counts, const size_t* send_displs, void* recv,
                           const size_t* recv_counts, const size_t* recv_displs, DataType type) = 0;
  /// `send` is read on the root only; every rank's `recv` receives it (send == recv: in place).
  virtual Status broadcast(const void* send, void* recv, size_t count, DataType type, int root) = 0;
  /// The reduction lands in the root's `recv`; other ranks' `recv` is not written.
  virtual Status reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root) = 0;

  /// The algorithm a call of `collective` over `bytes` (nccl-tests size, plan.h) would run.
  virtual Result<AlgorithmChoice> choose(CollectiveKind collective, uint64_t bytes, bool in_place) = 0;
  /// Tells the peers this rank is failing; pending and later calls of every rank return an error.
  virtual void abort(const std::string& why) = 0;
};

/// All algorithms (MSCCL XML, Braid JSON) in `dir`, in file-name order, each with its file path.
/// Errors: the first file that fails to load or verify (kParseError naming file, line, field).
struct LoadedAlgorithm {
  Algorithm algorithm;
  std::string file;
};
Result<std::vector<LoadedAlgorithm>> loadAlgorithmDir(const std::string& dir);
/// The paths of the files loadAlgorithmDir reads in `dir` (regular files ending in .xml / .json, any case), sorted.
/// Errors: kNotFound when `dir` does not exist, kInvalidArgument when it is not a directory ("<dir>: not a
/// directory"), kSystemError when it cannot be listed.
Result<std::vector<std::string>> listAlgorithmDir(const std::string& dir);

}  // namespace braid
