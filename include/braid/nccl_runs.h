// NCCL's algorithms built once per topology and collective, and what NCCL runs for a size as far as Braid can
// simulate it (the cost layer: no solver, no simulator). Used by the comparison with NCCL (comm/pareto/compare.h)
// and by the NCCL tuner plugin (runtime/nccl/tuner), which simulate what these build.
// Units: bytes, microseconds.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "braid/algorithm.h"
#include "braid/collective.h"
#include "braid/nccl_model.h"
#include "braid/status.h"
#include "braid/topology.h"

namespace braid {

/// The fastest enabled protocol of `algo` in NCCL's prediction, if any.
std::optional<Protocol> bestProtocol(const NcclPrediction& prediction, NcclAlgo algo);

/// An algorithm and the topology it runs on (NVLS runs on a topology with the switch as a pseudo-rank).
struct Runnable {
  const Algorithm* algorithm = nullptr;
  const Topology* topology = nullptr;
  int gpu_ranks = -1;  // ranks >= this are NVSwitch pseudo-ranks (NVLS emulation); -1: all ranks are GPUs
  /// The Simple protocol's slice to simulate with, bytes; 0: the simulator model's (SimModel::slice_bytes). NCCL's
  /// all-to-all sets its p2p chunk (ncclP2pSliceBytes).
  uint64_t simple_slice_bytes = 0;
  /// NCCL's point-to-point program (its all-to-all): simulated with SimModel::p2p_net_step_us as net_step_us.
  bool nccl_p2p = false;
  /// In Simple, the slices one iteration of the program's loop covers, all in flight together
  /// (LowerOptions::slices_per_iteration); 0: one. NCCL's ring sets CHUNKSTEPS / SLICESTEPS (ncclRunnable).
  uint32_t simple_slices_per_iteration = 0;
  /// In Simple, the slices a connection's FIFO holds (SimModel::fifo_depth); 0: the model's (NCCL_STEPS slots of
  /// one slice each). NCCL's ring sets NCCL_STEPS / SLICESTEPS, its 4 MiB buffer in its own slices.
  int simple_fifo_slices = 0;
};

/// How NCCL's ring iterates in Simple (nccl@2.28.9 src/include/collectives.h, src/enqueue.cc): a chunk of
/// ALLREDUCE_CHUNKSTEPS = NCCL_STEPS / 2 = 4 slots of its per-connection buffer (4 MiB / NCCL_STEPS = 512 KiB each)
/// per loop iteration, moved as CHUNKSTEPS / SLICESTEPS = 2 slices of SLICESTEPS = NCCL_STEPS / 4 = 2 slots that
/// pipeline inside one primitive call; all-gather and reduce-scatter use the same step counts. Only Ring in Simple
/// does this (enqueue.cc sets chunkSteps = sliceSteps = 1 for every other algorithm and protocol): trees iterate
/// one slot, as the simulator's default slice does.
inline constexpr uint64_t kNcclRingSimpleSliceBytes = uint64_t{2} * ((uint64_t{4} << 20) / 8);
inline constexpr uint32_t kNcclRingSimpleSlicesPerChunk = 2;
inline constexpr int kNcclRingSimpleFifoSlices = 8 / 2;

/// `algorithm` on `topology` as NCCL runs `algo`: for NcclAlgo::kRing, Simple iterates NCCL's way
/// (kNcclRingSimpleSliceBytes, kNcclRingSimpleSlicesPerChunk, kNcclRingSimpleFifoSlices); other algorithms run the
/// simulator's defaults. All-to-all's p2p program is NcclBaselines::runnable's.
Runnable ncclRunnable(const Algorithm* algorithm, const Topology* topology, NcclAlgo algo);

/// NCCL's point-to-point chunk sizes, the defaults of NCCL_P2P_NET_CHUNKSIZE, NCCL_P2P_NVL_CHUNKSIZE and
/// NCCL_P2P_PCI_CHUNKSIZE (nccl@2.28.9 src/init.cc; anchors_algorithms.md §6): one step of a p2p connection, of which
/// NCCL_STEPS = 8 are in flight.
inline constexpr uint64_t kNcclP2pNetChunkBytes = uint64_t{128} << 10;
inline constexpr uint64_t kNcclP2pNvlChunkBytes = uint64_t{512} << 10;
inline constexpr uint64_t kNcclP2pPciChunkBytes = uint64_t{128} << 10;

/// The slice NCCL's all-to-all is simulated with (Simple): the network chunk when its pairs span several nodes, the
/// NVLink chunk when every pair of the one node is NVLink-connected, the PCI chunk otherwise. One plan has one slice
/// size, so in a multi-node all-to-all the NVLink pairs also move 128 KiB steps (NCCL: 512 KiB); PXN's NVLink hop does
/// carry network-sized chunks in NCCL too.
uint64_t ncclP2pSliceBytes(const Topology& topology);

/// What NCCL runs for one size, as far as Braid can simulate it.
struct NcclRun {
  NcclAlgo algo = NcclAlgo::kRing;
  Protocol protocol = Protocol::kSimple;
  int nvls_rounds = 0;  // > 0: the NVLS emulation (ncclNvlsProgram) with this many rounds
  std::string label;    // "Ring/LL128", or "p2p/Simple" for all-to-all
  std::string note;     // set when NCCL's choice had to be replaced
};

/// NCCL's algorithms for one topology and collective, each built once (ncclBaselineAlgorithm, ncclNvlsProgram).
/// Holds references: `topology` and `system` must outlive it.
class NcclBaselines {
 public:
  NcclBaselines(const Topology& topology, const NcclSystem& system, CollectiveKind collective, bool in_place);

  /// NCCL's algorithm `algo` with `protocol`. nullptr when the IR cannot express it (kUnsupported, remembered);
  /// other build errors are returned ("NCCL <algo>/<proto> for <coll> on <topology>: <why>").
  Result<const Algorithm*> tryBaseline(NcclAlgo algo, Protocol protocol);
  /// As tryBaseline, but an inexpressible algorithm is an error too.
  Result<const Algorithm*> baseline(NcclAlgo algo, Protocol protocol);
  /// The NVLS emulation with `rounds` rounds; nullptr when the topology does not allow it (remembered).
  Result<const NvlsProgram*> tryNvls(int rounds);
  /// The rounds the NVLS emulation runs an all-reduce of `bytes` with: 1 to 4 rounds per NVLS channel, about
  /// 1 MiB per GPU share and round (as runtime/calibration runs NVLS), i.e. channels x clamp(ceil(bytes /
  /// (ranks_per_node x channels x 1 MiB)), 1, 4).
  int nvlsRounds(uint64_t bytes) const;

  /// What NCCL runs for `bytes` given its model's prediction (nullopt: the model does not cover the collective,
  /// i.e. all-to-all, which runs as grouped send/recv with `p2p_protocol`). NVLS all-reduce runs the emulation
  /// with 1 to 4 rounds per channel (about 1 MiB per GPU share and round, as runtime/calibration runs it); a
  /// choice that cannot be built runs NCCL's ring with its best protocol and NcclRun::note says why.
  Result<NcclRun> choose(const std::optional<NcclPrediction>& prediction, uint64_t bytes, Protocol p2p_protocol);
  /// The algorithm and topology a choice runs on; all-to-all with NCCL's p2p chunk as its Simple slice.
  Result<Runnable> runnable(const NcclRun& run);

  /// Notes gathered while choosing (each once), e.g. how NVLS is emulated.
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  void addNote(const std::string& note);

  const Topology& topology_;
  const NcclSystem& system_;
  CollectiveKind collective_;
  bool in_place_;
  std::map<std::pair<int, int>, Algorithm> baselines_;
  std::set<std::pair<int, int>> inexpressible_;
  std::map<int, NvlsProgram> nvls_;
  bool nvls_refused_ = false;
  std::string nvls_refusal_;
  std::vector<std::string> notes_;
  uint64_t p2p_slice_bytes_ = 0;  // ncclP2pSliceBytes(topology_), once
};

}  // namespace braid
