// The NCCL-API shim's decisions (shim/README.md, docs/nccl.md "NCCL-API shim"), without CUDA or NCCL headers so
// that the tests run them on any machine:
//   * ShimAlgorithms: the algorithms of BRAID_ALGO_DIR (a folder of MSCCL XML / Braid JSON: the files the
//     communicator reads, listAlgorithmDir, but a file that does not load is skipped) and MSCCL_XML_FILES (MSCCL's list
//     of XML files), or of a Pareto set for BRAID_TOPOLOGY (the companion's text, shim/pareto_abi.h), matched as the
//     communicator matches (comm/selection.h AlgorithmCatalog: collective, rank count, [min, max] window in bytes,
//     in-place mode, root), and their plans (lowerAlgorithm for the size and datatype, cached);
//   * decide(): Braid or NCCL for one call, with the reason when NCCL;
//   * logText(): the BRAID_DEBUG=INFO line of a decision;
//   * chooseExecutor(): what runs Braid on a communicator (device-resident executor, its hierarchical form across
//     hosts, or the host-driven CUDA transport) from the ranks' host names and BRAID_NCCL_ACROSS_HOSTS.
// Numbering: datatypes and reduction ops are NCCL's ncclDataType_t / ncclRedOp_t values (nccl.h 2.28: int8 0 ..
// bfloat16 9 equal Braid's DataType; float8e4m3 10, float8e5m2 11; sum 0 .. avg 4, ncclNumOps 5; values from
// ncclRedOpCreatePreMulSum are >= 5).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "braid/comm.h"
#include "braid/datatype.h"
#include "braid/plan.h"
#include "braid/status.h"
#include "braid/transports.h"

namespace braid::comm {
class AlgorithmCatalog;
}

namespace braid::nccl_shim {

/// The NCCL entry points that carry data (kBcast: ncclBcast, the in-place broadcast).
enum class ShimCall { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kBcast, kReduce, kAllToAll, kSend, kRecv };

/// "ncclAllReduce", "ncclAllGather", ..., "ncclBcast"
const char* entryName(ShimCall call);

/// ncclNumOps: NCCL's built-in reduction ops are 0..4; larger values are ops made by ncclRedOpCreatePreMulSum.
inline constexpr int kNcclNumOps = 5;

/// Braid's datatype for an ncclDataType_t value; nullopt for the ones Braid lacks (fp8) and invalid values.
std::optional<DataType> braidDataType(int nccl_type);
/// "float", "half", "bfloat16", "float8e4m3", ..., "datatype 42" (nccl-tests names where Braid has them).
std::string ncclTypeName(int nccl_type);
/// "sum", "prod", "max", "min", "avg", "op 7".
std::string ncclOpName(int nccl_op);

/// "0 B", "1 KiB", "3 MiB", "1536 B": the largest of KiB, MiB, GiB, TiB that divides the count, else bytes.
std::string formatBytes(uint64_t bytes);

/// MSCCL_XML_FILES: file names separated by ',' or ':' (empty entries skipped; surrounding blanks trimmed).
std::vector<std::string> splitFileList(std::string_view text);

/// One data call as the application made it.
struct CallArgs {
  ShimCall call = ShimCall::kAllReduce;
  const void* send = nullptr;
  const void* recv = nullptr;
  uint64_t count = 0;  // NCCL's count: all-gather: elements each rank sends; reduce-scatter: each receives;
                       // all-to-all: per peer; send / recv: the message
  int nccl_type = 0;
  int nccl_op = -1;  // reducing collectives only; -1 otherwise
  int root = -1;     // broadcast and reduce; the peer for send / recv
};

/// What the shim knows about the call's communicator.
class ShimAlgorithms;

struct CommView {
  bool known = false;        // created through the shim's init entry points and recorded
  int rank = -1;             // this process's rank in it (known only)
  int nranks = 0;            // its size (known only)
  std::string forward_only;  // non-empty: why Braid does not run on it (non-blocking, setup failed, ...)
  /// BRAID_TOPOLOGY's Pareto set as rank 0 of this communicator sent it (the same on every rank); null: none.
  ShimAlgorithms* pareto = nullptr;
};

/// Where a call goes.
struct Decision {
  const ParetoCandidate* candidate = nullptr;  // Braid's algorithm; null: NCCL
  const Plan* plan = nullptr;                  // the candidate lowered for the call (with candidate)
  std::string reason;                          // why NCCL (empty with a candidate)
  uint64_t bytes = 0;                          // nccl-tests bytes (plan.h); 0 when not computed
  bool in_place = false;
  /// All-reduce, broadcast and reduce whose count the candidate's chunks do not split: `plan` runs the first
  /// count - tail_count elements (the largest prefix they split), NCCL the last tail_count, after it on the same
  /// stream (the communicator's tail path, comm/README.md, with NCCL as the fallback). 0 otherwise.
  uint64_t tail_count = 0;
  bool braid() const { return candidate != nullptr; }
};

class ShimAlgorithms {
 public:
  /// Loads the files of `algo_dir` (empty: none; listAlgorithmDir: every .xml / .json, name order) and of
  /// `msccl_files` (MSCCL_XML_FILES syntax), each loaded and verified on its own. Directory candidates come first.
  /// Never fails: a file that does not load or verify is skipped with one line in warnings() ("BRAID_ALGO_DIR:
  /// /d/set.json skipped: <first line of the reason>"); a folder that does not exist, is not one or cannot be
  /// listed is one line; when a variable is set and nothing loads, a last line says every call goes to NCCL. The
  /// same files give the same algorithms and lines on every rank.
  static std::unique_ptr<ShimAlgorithms> load(const std::string& algo_dir, const std::string& msccl_files);
  /// The algorithms of a Pareto set as the companion returns it (shim/pareto_abi.h: JSON, one MSCCL XML algorithm
  /// per window Braid serves), each loaded and verified, with origin "BRAID_TOPOLOGY" and the window's source as its
  /// file ("synthesized dgx-a100-x1 / LL"); the algorithm's minBytes / maxBytes are the window. Windows left to NCCL
  /// load nothing (those sizes go to NCCL) and give one line in notes(); so does each collective the set skipped.
  /// Never fails: text that is not such a set is one line in warnings() ("BRAID_TOPOLOGY: the Pareto set is not
  /// braid-nccl-pareto-set/1 JSON: ..."), a window whose algorithm does not load or verify is skipped with one line.
  /// The same text gives the same algorithms and lines.
  static std::unique_ptr<ShimAlgorithms> fromParetoSet(const std::string& text);

  ShimAlgorithms();
  ~ShimAlgorithms();

  /// Number of algorithms loaded; whether any is for `nranks` ranks.
  size_t size() const { return loaded_.size(); }
  bool servesRanks(int nranks) const;
  /// What load() could not use, one line each (without the "shim: " prefix), in load order.
  const std::vector<std::string>& warnings() const { return warnings_; }
  /// What a Pareto set leaves to NCCL (windows, skipped collectives), one line each (fromParetoSet only).
  const std::vector<std::string>& notes() const { return notes_; }
  /// "2 algorithms (BRAID_ALGO_DIR /x: allreduce 4 ranks ring, ...)": what was loaded, for the log.
  std::string summary() const;

  /// The first candidate for the call (AlgorithmCatalog::choose without the fallback), or kNotFound.
  /// Thread-safe.
  Result<const ParetoCandidate*> match(CollectiveKind collective, int nranks, uint64_t bytes, bool in_place, int root);
  /// `candidate` lowered for `bytes` (callLowerOptions: as the communicator and simulate() lower), cached per
  /// (candidate, bytes, mode, element size), at most 256 plans. kUnsupported when the count does not split into
  /// the algorithm's chunks. Thread-safe; a returned plan lives as long as this object.
  Result<const Plan*> plan(const ParetoCandidate& candidate, uint64_t bytes, bool in_place, uint64_t element_bytes);

 private:
  struct Loaded {
    LoadedAlgorithm algorithm;
    std::string origin;  // "BRAID_ALGO_DIR", "MSCCL_XML_FILES" or "BRAID_TOPOLOGY"
  };
  comm::AlgorithmCatalog& catalog(int nranks);

  std::vector<Loaded> loaded_;
  std::vector<std::string> warnings_;
  std::vector<std::string> notes_;
  std::mutex mu_;
  std::map<int, std::unique_ptr<comm::AlgorithmCatalog>> catalogs_;
  std::map<std::tuple<const ParetoCandidate*, uint64_t, bool, uint64_t>, std::unique_ptr<Plan>> plans_;
  std::vector<std::unique_ptr<Plan>> retired_;  // plans handed out before the cache was dropped
};

/// The Braid collective of a data call; nullopt for send / recv.
std::optional<CollectiveKind> collectiveOf(ShimCall call);

/// Braid or NCCL for `args` on `comm`, `group_depth` being the calling thread's ncclGroupStart nesting. Rules, in
/// order (each NCCL answer names its rule): point-to-point calls, calls inside a group, a communicator the shim
/// does not track or that is forward-only, no algorithm loaded (neither `algorithms` nor comm.pareto), a datatype
/// Braid lacks, an op that is not NCCL's built-in (PreMulSum), count 0, a null buffer, a root out of range, buffers
/// that overlap outside NCCL's in-place layout, then match() (no algorithm for the rank count, size window and
/// mode: `algorithms` first, then comm.pareto, as the communicator searches BRAID_ALGO_DIR before the Pareto set)
/// and plan() (a count that does not split into the matched algorithm's chunks) go to NCCL; otherwise Braid with the
/// candidate and its plan. In-place per NCCL's
/// layouts: all-gather send == recv + rank * count, reduce-scatter recv == send + rank * count (elements),
/// otherwise send == recv. Bytes per nccl-tests (plan.h).
Decision decide(ShimAlgorithms* algorithms, const CallArgs& args, const CommView& comm, int group_depth);

/// The BRAID_DEBUG=INFO line of a decision: "shim: ncclAllReduce count 256 float sum in-place 4 ranks 1 KiB ->
/// braid ring (BRAID_ALGO_DIR /d/ring.xml, window [0 B, unlimited])" or "... -> NCCL (no Braid algorithm for 4
/// ranks at 1 KiB in-place)".
std::string logText(const CallArgs& args, const CommView& comm, const Decision& decision);

/// BRAID_NCCL_ACROSS_HOSTS: what runs a communicator whose ranks are on several hosts. kHostDriven (the default):
/// the host-driven CUDA transport (createCudaTransport: NCCL ncclSend/ncclRecv between ranks); kHierarchical: the
/// device-resident executor, device-resident inside each host and proxied across hosts over a CPU transport
/// (DeviceExecutorOptions::proxy_transport).
enum class AcrossHosts { kHostDriven, kHierarchical };

/// "host-driven", "hierarchical".
const char* acrossHostsName(AcrossHosts mode);

/// BRAID_NCCL_ACROSS_HOSTS's value (case-insensitive; `text` as envString gives it, the default when unset).
/// Errors: kInvalidArgument "BRAID_NCCL_ACROSS_HOSTS=<text>: not host-driven or hierarchical".
Result<AcrossHosts> parseAcrossHosts(const std::string& text);

/// The CPU transport that carries the hierarchical path's proxies, from BRAID_TRANSPORT's value `setting`: auto
/// and tcp give kTcp (createTransport's auto choice for ranks on several hosts), ucx gives kUcx. Errors:
/// kInvalidArgument naming BRAID_TRANSPORT and the value for threads and shm (they do not cross hosts) and for a
/// name that is not a transport.
Result<TransportKind> proxyTransportKind(const std::string& setting);

/// What runs Braid on one communicator.
enum class ExecutorKind {
  kDeviceResident,  // every rank on one host: the device-resident executor (CUDA IPC inside the host)
  kHierarchical,    // several hosts, BRAID_NCCL_ACROSS_HOSTS=hierarchical: the executor with proxied connections
  kHostDriven,      // several hosts, BRAID_NCCL_ACROSS_HOSTS=host-driven: the host-driven CUDA transport
};

struct ExecutorChoice {
  ExecutorKind kind = ExecutorKind::kDeviceResident;
  int hosts = 1;                              // distinct host names among the ranks
  TransportKind proxy = TransportKind::kTcp;  // kHierarchical: the proxies' transport
};

/// The choice for a communicator whose rank r is on host `hosts[r]` (the bootstrap's host names): one distinct
/// name gives kDeviceResident whatever `mode` says; more give kHierarchical or kHostDriven after `mode`, with
/// `proxy` as the proxies' transport. An empty `hosts` counts as one host.
ExecutorChoice chooseExecutor(const std::vector<std::string>& hosts, AcrossHosts mode, TransportKind proxy);

/// The communicator line's name of a choice: "device-resident executor", "device-resident executor, hierarchical:
/// 2 hosts, proxies over tcp", "host-driven CUDA transport".
std::string executorText(const ExecutorChoice& choice);

}  // namespace braid::nccl_shim
