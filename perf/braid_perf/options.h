// braid_perf's command line: nccl-tests' flags (nccl-tests src/common.cu, README; ../shared/reference/nccl_plugins.md
// §6.2) plus Braid's -p (processes), --algo and --transport. docs/braid_perf.md documents every flag.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "braid/datatype.h"
#include "braid/status.h"

namespace braid::perf {

/// The collectives braid_perf measures, one per nccl-tests binary.
enum class Collective { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kBroadcast, kReduce };
inline constexpr Collective kAllCollectives[] = {Collective::kAllReduce,     Collective::kAllGather,
                                                 Collective::kReduceScatter, Collective::kAllToAll,
                                                 Collective::kBroadcast,     Collective::kReduce};

/// nccl-tests' binary stem: "all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce".
const char* collectiveName(Collective collective);
/// nccl-tests' program name for `collective`, "<stem>_perf" (all_reduce_perf, ..., alltoall_perf): what the
/// "# Collective test starting/concluded:" lines print, whatever name braid_perf was started with.
std::string testName(Collective collective);
/// Accepts the stems above, with or without "_perf", and "allreduce", "allgather", "reducescatter",
/// "all_to_all", "bcast" (any case). nullopt when unknown.
std::optional<Collective> parseCollective(std::string_view name);
/// Collectives that reduce (they take -o).
bool isReduction(Collective collective);
/// Collectives with a root (they take -r).
bool isRooted(Collective collective);

/// -d's parser: braid::parseDataType's names and aliases (nccl-tests names, "char", "int", "fp16", "float16",
/// "bf16", "fp32", "float32", "fp64", "float64", any case) without NCCL's enum names ("ncclFloat32"). nullopt
/// when unknown. Printed names are braid::dataTypeName's (nccl-tests' names).
std::optional<DataType> parseTypeName(std::string_view name);
/// -o's parser: "sum", "prod", "max", "min", "avg" (any case; braid::parseReduceOp without "ncclSum" ...).
/// Printed names are braid::reduceOpName's.
std::optional<ReduceOp> parseOpName(std::string_view name);

struct Options {
  Collective collective = Collective::kAllReduce;
  std::string program;  // as invoked, for the usage text: "all_reduce_perf", "braid_perf all_reduce"

  int threads = 1;    // -t: ranks per process, as threads
  int gpus = 1;       // -g: accepted for compatibility, must be 1
  int processes = 1;  // -p: processes forked by braid_perf (Braid; nccl-tests' -p is parallel_init)

  uint64_t min_bytes = 32ull << 20;  // -b
  uint64_t max_bytes = 32ull << 20;  // -e
  uint64_t step_bytes = 1ull << 20;  // -i (used when step_factor <= 1)
  uint64_t step_factor = 1;          // -f (> 1: multiplicative sweep)

  int iters = 20;        // -n: timed iterations per size and mode
  int warmup_iters = 1;  // -w: untimed iterations before them (per size and mode)
  int agg_iters = 1;     // -m: operations per timed iteration
  int run_cycles = 1;    // -N: sweeps (0 = forever)
  int check = 1;         // -c: checked iterations per size and mode (0: no check, #wrong is N/A)
  int blocking = 0;      // -z: 1 = barrier after every operation
  int average = 1;       // -a: combine per-rank times: 0 rank 0, 1 mean, 2 min, 3 max
  int timeout_s = 0;     // -T: seconds; 0 = BRAID_TIMEOUT (runtime) and no limit on braid_perf's own waits

  std::vector<DataType> types = {DataType::kFloat32};  // -d
  bool all_types = false;
  std::vector<ReduceOp> ops = {ReduceOp::kSum};  // -o
  bool all_ops = false;
  int root = 0;  // -r; -1 = every rank in turn ("all")

  std::string json_file;  // -J
  std::string algo;       // --algo FILE|DIR
  std::string transport;  // --transport threads|shm|tcp|ucx (empty: BRAID_TRANSPORT / auto)

  bool help = false;  // -h

  int ranks() const { return threads * gpus * processes; }
};

/// Parses argv. argv[0] picks the collective when its base name is "<collective>_perf" (a symlink to
/// braid_perf); otherwise the first argument must name it ("braid_perf all_reduce -b 8 ..."). Short options
/// take their value in the next argument or attached ("-b8"); long ones as "--minbytes 8" or "--minbytes=8".
/// Errors: kInvalidArgument naming the flag and the text ("-n abc: not an integer", "-g 2: braid_perf runs
/// CPU ranks, one per thread; -g must be 1", "unknown option --foo").
Result<Options> parseOptions(const std::vector<std::string>& argv);

/// The -h text for `program`.
std::string helpText(const std::string& program);

/// The sizes (bytes) of one sweep: min_bytes, then times step_factor (> 1) or plus step_bytes, up to
/// max_bytes inclusive (nccl-tests' loop). A sweep from 0 with a factor continues at 1.
std::vector<uint64_t> sweepSizes(const Options& options);

}  // namespace braid::perf
