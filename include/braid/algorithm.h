// The algorithm IR: per rank, threadblocks of ordered steps on chunks of the input, output and
// scratch buffers — exactly what MSCCL XML expresses (../shared/reference/taccl_msccl.md §2.3).
//
// Offsets and counts are in chunks of size (full buffer bytes) / num_chunks. A threadblock has at
// most one send peer and one recv peer and runs on one channel; sends and receives between a
// pair of ranks on one channel match in FIFO order. Cross-threadblock dependencies name a
// (threadblock, step) on the same rank that must finish first.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "braid/collective.h"
#include "braid/file_io.h"
#include "braid/status.h"
#include "braid/topology.h"

namespace braid {

enum class BufferKind { kInput, kOutput, kScratch };
enum class Protocol { kSimple, kLL, kLL128 };

/// MSCCL step types. Semantics (dst/src are chunk ranges of `count` chunks):
///   kSend:               send src to the send peer
///   kRecv:               receive from the recv peer into dst
///   kRecvCopySend:       receive into dst and forward the same data to the send peer
///   kRecvReduceSend:     receive, reduce with src, send the result (nothing stored)
///   kRecvReduceCopy:     receive, reduce with src, store in dst
///   kRecvReduceCopySend: receive, reduce with src, store in dst and send
///   kCopy:               local copy src -> dst
///   kReduce:             local dst <- dst (+) src
///   kNop:                no data; carries a dependency only
enum class OpType {
  kSend,
  kRecv,
  kRecvCopySend,
  kRecvReduceSend,
  kRecvReduceCopy,
  kRecvReduceCopySend,
  kCopy,
  kReduce,
  kNop
};

const char* bufferName(BufferKind b);  // "i", "o", "s"
const char* protocolName(Protocol p);  // "Simple", "LL", "LL128"
const char* opTypeName(OpType t);
/// Inverse of opTypeName (exact MSCCL spelling); nullopt for anything else.
std::optional<OpType> parseOpType(
    std::string_view name);  // MSCCL short names: "s", "r", "rcs", "rrs", "rrc", "rrcs", "cpy", "re", "nop"
bool opSends(OpType t);
bool opReceives(OpType t);
bool opReadsSrc(OpType t);   // reads the src range locally
bool opWritesDst(OpType t);  // writes the dst range locally

struct Dependency {
  int tb = -1;    // threadblock id on the same rank
  int step = -1;  // step index in that threadblock
  friend bool operator==(const Dependency& a, const Dependency& b) { return a.tb == b.tb && a.step == b.step; }
};

struct Step {
  OpType type = OpType::kNop;
  BufferKind src_buf = BufferKind::kInput;
  int src_off = -1;  // -1: unused by this op
  BufferKind dst_buf = BufferKind::kOutput;
  int dst_off = -1;
  int count = 1;
  std::vector<Dependency> deps;  // steps that must finish before this one starts
  bool has_dep = false;          // some other threadblock waits on this step (MSCCL hasdep)
};

struct Threadblock {
  int id = 0;
  int send_peer = -1;
  int recv_peer = -1;
  int channel = 0;
  std::vector<Step> steps;
};

/// TACCL `<copy i_off o_off/>`: copy input chunk to output chunk before any step runs.
struct PreCopy {
  int input_off = 0;
  int output_off = 0;
  int count = 1;
};

struct RankProgram {
  int rank = 0;
  int input_chunks = 0;
  int output_chunks = 0;
  int scratch_chunks = 0;
  std::vector<PreCopy> precopies;
  std::vector<Threadblock> threadblocks;  // threadblocks[i].id == i
};

/// Where an algorithm came from and what it is predicted to cost (Braid JSON only).
struct Provenance {
  std::string generator;  // e.g. "braid algo ring", "msccl xml", "taccl"
  std::string topology;   // topology name or file
  std::string sketch;
  std::string solver;
  std::string created;                      // ISO 8601 time
  double lower_bound_us = -1;               // -1 = unknown
  std::map<uint64_t, double> predicted_us;  // message bytes -> predicted time
  std::map<std::string, std::string> extra;
};

inline constexpr uint64_t kUnlimitedBytes = std::numeric_limits<uint64_t>::max();

/// The most channels an algorithm may use (nchannels): MSCCL's MAXCHANNELS, the channels an MSCCL runtime
/// connects at most (Azure/msccl-executor-nccl; ../shared/reference/taccl_msccl.md §2.3 "Limits"). A larger
/// nchannels is a structure error of verify() and checkAlgorithmStructure().
inline constexpr int kMaxAlgorithmChannels = 32;

/// The most chunks verify() keeps over all ranks' buffers (input + output + scratch chunks, summed over the ranks):
/// an algorithm above it is reported unverifiable, not replayed.
inline constexpr int64_t kMaxVerifiedChunks = int64_t{1} << 22;

/// "nchannels must be in 1..32 (MSCCL's MAXCHANNELS), got N": how verify() and the algorithm readers (which refuse
/// nchannels below 1) report an nchannels outside 1..kMaxAlgorithmChannels.
std::string channelRangeMessage(int64_t nchannels);

struct Algorithm {
  std::string name;
  CollectiveKind collective = CollectiveKind::kAllGather;
  std::string collective_name;  // as written in the source file (e.g. "reduce_scatter", "custom")
  int num_ranks = 0;            // ngpus
  int num_chunks = 1;           // nchunksperloop
  int num_channels = 1;         // nchannels
  Protocol protocol = Protocol::kSimple;
  bool in_place = false;                 // usable for in-place calls
  bool out_of_place = true;              // usable for out-of-place calls
  uint64_t min_bytes = 0;                // inclusive
  uint64_t max_bytes = kUnlimitedBytes;  // inclusive; kUnlimitedBytes = no upper limit
  int root = 0;                          // broadcast / reduce
  std::string redop;                     // as written (TACCL "nop"), informational
  std::vector<RankProgram> ranks;        // ranks[r].rank == r
  Provenance provenance;
  /// What a reader assumed or defaulted (missing attributes, ...), one sentence each.
  std::vector<std::string> notes;

  /// The spec this algorithm claims to implement in one mode. chunk_factor is derived from
  /// num_chunks. Fails for custom collectives and chunk counts that do not divide.
  Result<CollectiveSpec> spec(bool in_place_mode) const;
  int numThreadblocks() const;
  int numSteps() const;
};

// ---- verification -------------------------------------------------------------------------

enum class IssueKind {
  kStructure,      // malformed program: bad peer, ids, channel, dependency target
  kOutOfRange,     // offset+count outside the buffer
  kPeerMismatch,   // sends and receives of a connection do not pair up (count, leftovers)
  kDeadlock,       // threadblocks wait on each other or on data that never comes
  kRace,           // conflicting accesses to one chunk with no ordering between them
  kPostcondition,  // an output chunk does not hold its expected value
  kUnverifiable,   // e.g. custom collective: no postcondition to prove
};
const char* issueKindName(IssueKind kind);

struct VerifyIssue {
  IssueKind kind = IssueKind::kStructure;
  int rank = -1;
  int tb = -1;
  int step = -1;
  int chunk = -1;  // output chunk index for postcondition failures
  std::string message;
  /// Mode the issue was found in: "in-place", "out-of-place", or empty when it holds for both.
  std::string mode;
};

struct VerifyOptions {
  /// Check both declared modes (in-place and out-of-place) when the algorithm declares both.
  bool all_modes = true;
  /// Stop recording issues after this many (the count is still reported).
  int max_issues = 200;
};

struct VerifyReport {
  bool ok = false;
  std::vector<std::string> modes_checked;  // "in-place", "out-of-place"
  std::vector<VerifyIssue> issues;
  int total_issues = 0;
  /// One line per issue, prefixed by mode; empty when ok.
  std::string toString() const;
};

/// Replays the algorithm symbolically against `spec` and proves the postcondition; detects
/// deadlocks, races, out-of-range offsets and unmatched sends/receives. Names every (rank, chunk)
/// whose postcondition fails.
VerifyReport verify(const Algorithm& algorithm, const CollectiveSpec& spec);
/// Verifies every mode the algorithm declares (in-place and/or out-of-place) against its own
/// collective. Custom collectives give a kUnverifiable issue (ok = false).
VerifyReport verify(const Algorithm& algorithm, const VerifyOptions& options = {});

/// The structural checks of verify(), without the replay: what anything that indexes an algorithm's
/// buffers, threadblocks and steps (lowering, src/ir's consumers) needs first. One program per rank of
/// `spec`, ranks[r].rank == r, nchannels in 1..kMaxAlgorithmChannels, i_chunks/o_chunks 0 or the spec's, s_chunks >= 0;
/// threadblock ids 0..T-1 in order, peers in [-1, n) and not the rank itself, channel in
/// [0, nchannels); count >= 1 (>= 0 on nop); a step that sends (receives) has a send (recv) peer;
/// every dependency names an earlier step of the rank (not a later one of its own threadblock); every
/// range [offset, offset + count) and every precopy lies inside its declared buffer. Deadlocks,
/// send/receive pairing, races and the postcondition are verify()'s replay.
/// Errors: kInvalidArgument "algorithm '<name>': <the first finding, worded as verify() words it>".
Status checkAlgorithmStructure(const Algorithm& algorithm, const CollectiveSpec& spec);

// ---- placement on a topology ---------------------------------------------------------------

/// One sending connection (rank src -> rank dst) of an algorithm.
struct Transfer {
  int src = 0;
  int dst = 0;
  long long chunks = 0;        // chunks sent over it per loop, all channels together
  std::optional<Route> route;  // the topology's route; nullopt without a topology, or when none exists
};

/// The algorithm's sending connections in (src, dst) order. With a topology, each gets
/// Topology::route(src, dst) (ranks outside the topology get none).
std::vector<Transfer> algorithmTransfers(const Algorithm& algorithm, const Topology* topology = nullptr);

/// Ok when the topology has algorithm.num_ranks GPUs and every transfer has a route; otherwise
/// kInvalidArgument naming the GPU counts or the first pairs without a route.
Status checkPlacement(const Algorithm& algorithm, const Topology& topology);

// ---- MSCCL instances -----------------------------------------------------------------------

/// The algorithm run as `instances` MSCCL instances (msccl-tools `instances`, ../shared/reference/taccl_msccl.md
/// §2.3), written out as one plain algorithm: every chunk j becomes the k = `instances` chunks j*k .. j*k+k-1
/// (nchunksperloop and every rank's buffers k times larger), and every threadblock t on channel c is copied
/// k times, copy i (threadblock t + i*T, channel c + i*C for T threadblocks and C channels) working on chunks
/// j*k+i. A step over `count` > 1 chunks becomes `count` one-chunk steps in order (its chunks are no longer
/// adjacent); a dependency on it waits for the last of them. The result is what lowerAlgorithm builds for the
/// original with LowerOptions::instances = k, so an MSCCL runtime that knows nothing of instances runs the
/// same program. instances = 1 returns the algorithm unchanged. Errors: kInvalidArgument when instances < 1,
/// when C*k or T*k overflows an int, or when the algorithm fails checkAlgorithmStructure.
Result<Algorithm> replicateInstances(const Algorithm& algorithm, int instances);

// ---- serialization ------------------------------------------------------------------------

enum class MscclFlavour {
  kBoth,       // every attribute both runtimes require; coll="reducescatter" (Azure's name)
  kAzure,      // Azure/msccl-executor-nccl
  kMicrosoft,  // microsoft/msccl (old runtime): coll="reduce_scatter"
};

/// Reads MSCCL XML (both flavours, TACCL-EF with <copy>). Missing optional attributes get
/// defaults recorded in Algorithm::notes. Errors name the file, line and attribute.
Result<Algorithm> readMscclXml(const std::string& text, const std::string& filename);
Result<Algorithm> loadMscclXml(const std::string& path);
std::string writeMscclXml(const Algorithm& algorithm, MscclFlavour flavour = MscclFlavour::kBoth);

/// Braid JSON (docs/formats/algorithm.md): the IR plus provenance.
Result<Algorithm> readAlgorithmJson(const std::string& text, const std::string& filename);
std::string writeAlgorithmJson(const Algorithm& algorithm);

/// TACCL/SCCL algorithm JSON (msccl-tools serialization.py: sccl_type/msccl_type "algorithm" with
/// input_map, output_map and steps of [chunk, src, dst, ...] sends) converted to the IR: one
/// threadblock per (rank, peer, direction), sends in step order, a chunk forwarded only after it
/// arrived. Buffer indices follow msccl-tools ncclize (sorted addresses). Errors name file, line
/// and JSON path.
Result<Algorithm> readTacclAlgorithmJson(const std::string& text, const std::string& filename);

/// The largest algorithm file Braid reads (loadAlgorithm, loadMscclXml) and writes (writeAlgorithmFile), in bytes:
/// one limit, so that every file Braid writes reads back.
inline constexpr uint64_t kMaxAlgorithmFileBytes = kMaxInputFileBytes;

/// Loads MSCCL XML, Braid JSON or TACCL/SCCL algorithm JSON, choosing by content. Files above
/// kMaxAlgorithmFileBytes are refused (readFile's error, naming the path).
Result<Algorithm> loadAlgorithm(const std::string& path);

enum class AlgorithmFileFormat {
  kMscclXml,  // writeMscclXml(algorithm, MscclFlavour::kBoth)
  kBraidJson  // writeAlgorithmJson(algorithm)
};

/// The fewest bytes `steps` steps take in `format` (MSCCL XML, Braid JSON): steps times the size of the shortest
/// step the writer can emit (one-digit offsets, no dependencies), measured on the writer itself. A lower bound of
/// the file's size that needs no rendering: an algorithm whose bound is above kMaxAlgorithmFileBytes is refused
/// before its text is built (a Braid JSON of millions of steps takes gigabytes of memory while it is rendered).
uint64_t algorithmFileBytesAtLeast(uint64_t steps, AlgorithmFileFormat format);

/// `algorithm` rendered in `format` (writeMscclXml(algorithm, MscclFlavour::kBoth) or writeAlgorithmJson), checked
/// against kMaxAlgorithmFileBytes: kInvalidArgument naming `path` when it is larger ("P: the MSCCL XML of A would be
/// N MiB, more than the 256 MiB Braid reads back; use fewer ranks or chunks"), refused before rendering when
/// algorithmFileBytesAtLeast already says so ("... would be at least N MiB ..."). Lets a command that writes several
/// files render and check them all before it writes any.
Result<std::string> renderAlgorithmFile(const std::string& path, const Algorithm& algorithm,
                                        AlgorithmFileFormat format);

/// Writes `algorithm` to `path` in `format`, whole or not at all (writeFileAtomic). Errors: renderAlgorithmFile's
/// (nothing written); writeFileAtomic's errors.
Status writeAlgorithmFile(const std::string& path, const Algorithm& algorithm, AlgorithmFileFormat format);

}  // namespace braid
