#include "braid_perf/options.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <limits>

#include "common/text.h"

namespace braid::perf {
namespace {

struct CollectiveNames {
  Collective collective;
  const char* name;
};
constexpr CollectiveNames kCollectiveNames[] = {
    {Collective::kAllReduce, "all_reduce"},         {Collective::kAllGather, "all_gather"},
    {Collective::kReduceScatter, "reduce_scatter"}, {Collective::kAllToAll, "alltoall"},
    {Collective::kBroadcast, "broadcast"},          {Collective::kReduce, "reduce"},
};

// -d and -o take the runtime's names and aliases (braid/datatype.h: parseDataType, parseReduceOp) but not NCCL's
// enum spellings ("ncclFloat32", "ncclSum"), which those parsers also accept.
bool isNcclEnumName(std::string_view name) { return lowerCase(std::string(name.substr(0, 4))) == "nccl"; }

// One row per flag: short letter (0 = long only), long name, whether it takes a value.
struct Flag {
  char short_name;
  const char* long_name;
  bool has_value;
};
constexpr Flag kFlags[] = {
    {'t', "nthreads", true},     {'g', "ngpus", true},     {'p', "nprocs", true},      {'b', "minbytes", true},
    {'e', "maxbytes", true},     {'i', "stepbytes", true}, {'f', "stepfactor", true},  {'n', "iters", true},
    {'w', "warmup_iters", true}, {'m', "agg_iters", true}, {'N', "run_cycles", true},  {'c', "check", true},
    {'o', "op", true},           {'d', "datatype", true},  {'r', "root", true},        {'z', "blocking", true},
    {'a', "average", true},      {'T', "timeout", true},   {'J', "output_file", true}, {0, "algo", true},
    {0, "transport", true},      {'h', "help", false},
};

std::string flagLabel(const Flag& flag) {
  return flag.short_name ? std::string("-") + flag.short_name : std::string("--") + flag.long_name;
}

Result<int64_t> parseInteger(const Flag& flag, const std::string& text, int64_t min_value, int64_t max_value) {
  if (text.empty()) return invalidArgument(flagLabel(flag) + " needs a value");
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0') {
    return invalidArgument(flagLabel(flag) + " " + text + ": not an integer");
  }
  if (value < min_value || value > max_value) {
    return invalidArgument(flagLabel(flag) + " " + text + ": must be in [" + std::to_string(min_value) + ", " +
                           std::to_string(max_value) + "]");
  }
  return static_cast<int64_t>(value);
}

Result<uint64_t> parseSize(const Flag& flag, const std::string& text) {
  std::optional<uint64_t> bytes = parseNcclTestsSize(text);
  if (!bytes) {
    return invalidArgument(flagLabel(flag) + " " + text +
                           ": not a size (digits with an optional K, M or G suffix, powers of 1024)");
  }
  return *bytes;
}

std::string baseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

Status applyFlag(const Flag& flag, const std::string& value, Options& options) {
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  const std::string label = flagLabel(flag);
  switch (flag.short_name) {
    case 't': {
      BRAID_ASSIGN_OR_RETURN(int64_t v, parseInteger(flag, value, 1, 1024));
      options.threads = static_cast<int>(v);
      return Status::ok();
    }
    case 'g': {
      BRAID_ASSIGN_OR_RETURN(int64_t v, parseInteger(flag, value, 1, kIntMax));
      if (v != 1)
        return invalidArgument(label + " " + value + ": braid_perf runs CPU ranks, one per thread; -g must be 1");
      options.gpus = 1;
      return Status::ok();
    }
    case 'p': {
      BRAID_ASSIGN_OR_RETURN(int64_t v, parseInteger(flag, value, 1, 1024));
      options.processes = static_cast<int>(v);
      return Status::ok();
    }
    case 'b': {
      BRAID_ASSIGN_OR_RETURN(options.min_bytes, parseSize(flag, value));
      return Status::ok();
    }
    case 'e': {
      BRAID_ASSIGN_OR_RETURN(options.max_bytes, parseSize(flag, value));
      return Status::ok();
    }
    case 'i': {
      BRAID_ASSIGN_OR_RETURN(options.step_bytes, parseSize(flag, value));
      if (options.step_bytes == 0) return invalidArgument(label + " 0: the step must be at least 1 byte");
      return Status::ok();
    }
    case 'f': {
      BRAID_ASSIGN_OR_RETURN(int64_t v, parseInteger(flag, value, 1, kIntMax));
      options.step_factor = static_cast<uint64_t>(v);
      return Status::ok();
    }
    case 'n': {
      BRAID_ASSIGN_OR_RETURN(int64_t v, parseInteger(flag, value, 1, kIntMax));
      options.iters = static_cast<int>(v);
      return Status::ok();
    }
    case 'w': {
      BRAID_ASSIGN_OR_RETURN(int64_t v, parseInteger(flag, value, 0, kIntMax));
      options.warmup_iters = static_cast<int>(v);
      return Status::ok();
    }
    case 'm': {
      BRAID_ASSIGN_OR_RETURN(int64_t v, parseInteger(flag, value, 1, kIntMax));
      options.agg_iters = static_cast<int>(v);
      return Status::ok();
    }
    case 'N': {
      BRAID_ASSIGN_OR_RETURN(int64_t v, parseInteger(flag, value, 0, kIntMax));
      options.run_cycles = static_cast<int>(v);
      return Status::ok();
    }
    case 'c': {
      BRAID_ASSIGN_OR_RETURN(int64_t v, parseInteger(flag, value, 0, kIntMax));
      options.check = static_cast<int>(v);
      return Status::ok();
    }
    case 'z': {
      BRAID_ASSIGN_OR_RETURN(int64_t v, parseInteger(flag, value, 0, 1));
      options.blocking = static_cast<int>(v);
      return Status::ok();
    }
    case 'a': {
      BRAID_ASSIGN_OR_RETURN(int64_t v, parseInteger(flag, value, 0, 3));
      options.average = static_cast<int>(v);
      return Status::ok();
    }
    case 'T': {
      BRAID_ASSIGN_OR_RETURN(int64_t v, parseInteger(flag, value, 0, kIntMax));
      options.timeout_s = static_cast<int>(v);
      return Status::ok();
    }
    case 'r': {
      if (lowerCase(value) == "all") {
        options.root = -1;
        return Status::ok();
      }
      BRAID_ASSIGN_OR_RETURN(int64_t v, parseInteger(flag, value, -1, kIntMax));
      options.root = static_cast<int>(v);
      return Status::ok();
    }
    case 'd': {
      if (lowerCase(value) == "all") {
        options.all_types = true;
        options.types.clear();
        // nccl-tests' test_typenames order (src/common.cu), which is also NCCL's and DataType's enum order.
        for (int t = 0; t < kNumDataTypes; ++t) options.types.push_back(static_cast<DataType>(t));
        return Status::ok();
      }
      std::optional<DataType> type = parseTypeName(value);
      if (!type) {
        return invalidArgument(label + " " + value +
                               ": unknown type (int8, uint8, int32, uint32, int64, uint64, half, float, double, "
                               "bfloat16 or all)");
      }
      options.all_types = false;
      options.types = {*type};
      return Status::ok();
    }
    case 'o': {
      const std::string name = lowerCase(value);
      if (name == "all") {
        options.all_ops = true;
        options.ops = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kAvg};
        return Status::ok();
      }
      if (name == "mulsum") {
        return invalidArgument(label +
                               " mulsum: Braid has no pre-multiplied sum (ncclRedOpCreatePreMulSum); use "
                               "sum, prod, max, min, avg or all");
      }
      std::optional<ReduceOp> op = parseOpName(name);
      if (!op) return invalidArgument(label + " " + value + ": unknown op (sum, prod, max, min, avg or all)");
      options.all_ops = false;
      options.ops = {*op};
      return Status::ok();
    }
    case 'J':
      if (value.empty()) return invalidArgument(label + ": an empty path names no file to write");
      options.json_file = value;
      return Status::ok();
    case 'h': options.help = true; return Status::ok();
    default: break;
  }
  const std::string long_name = flag.long_name;
  if (long_name == "algo") {
    std::error_code ec;
    if (value.empty() || !std::filesystem::exists(value, ec)) {
      return invalidArgument("--algo " + value + ": no such file or directory");
    }
    options.algo = value;
    return Status::ok();
  }
  if (long_name == "transport") {
    const std::string name = lowerCase(value);
    if (name != "threads" && name != "shm" && name != "tcp" && name != "ucx" && name != "auto") {
      return invalidArgument("--transport " + value + ": unknown transport (threads, shm, tcp, ucx or auto)");
    }
    options.transport = name;
    return Status::ok();
  }
  return internalError("flag " + label + " has no handler");
}

}  // namespace

const char* collectiveName(Collective collective) {
  for (const CollectiveNames& c : kCollectiveNames) {
    if (c.collective == collective) return c.name;
  }
  return "?";
}

std::string testName(Collective collective) { return std::string(collectiveName(collective)) + "_perf"; }

std::optional<Collective> parseCollective(std::string_view name) {
  std::string text = lowerCase(std::string(name));
  if (text.size() > 5 && text.compare(text.size() - 5, 5, "_perf") == 0) text.resize(text.size() - 5);
  for (const CollectiveNames& c : kCollectiveNames) {
    if (text == c.name) return c.collective;
  }
  if (text == "allreduce") return Collective::kAllReduce;
  if (text == "allgather") return Collective::kAllGather;
  if (text == "reducescatter") return Collective::kReduceScatter;
  if (text == "all_to_all" || text == "all2all") return Collective::kAllToAll;
  if (text == "bcast") return Collective::kBroadcast;
  return std::nullopt;
}

bool isReduction(Collective collective) {
  return collective == Collective::kAllReduce || collective == Collective::kReduceScatter ||
         collective == Collective::kReduce;
}

bool isRooted(Collective collective) {
  return collective == Collective::kBroadcast || collective == Collective::kReduce;
}

std::optional<DataType> parseTypeName(std::string_view name) {
  if (isNcclEnumName(name)) return std::nullopt;
  return parseDataType(std::string(name));
}

std::optional<ReduceOp> parseOpName(std::string_view name) {
  if (isNcclEnumName(name)) return std::nullopt;
  return parseReduceOp(std::string(name));
}

Result<Options> parseOptions(const std::vector<std::string>& argv) {
  Options options;
  size_t next = 1;
  const std::string invoked = argv.empty() ? std::string("braid_perf") : baseName(argv[0]);
  std::optional<Collective> collective;
  if (invoked.size() > 5 && invoked.compare(invoked.size() - 5, 5, "_perf") == 0) collective = parseCollective(invoked);
  if (collective) {
    options.program = invoked;
  } else {
    if (argv.size() < 2 || argv[1].empty() || argv[1][0] == '-') {
      // Help without a collective is still help.
      for (size_t i = 1; i < argv.size(); ++i) {
        if (argv[i] == "-h" || argv[i] == "--help") {
          options.help = true;
          options.program = invoked;
          return options;
        }
      }
      return invalidArgument(
          "name the collective first: " + invoked +
          " all_reduce|all_gather|reduce_scatter|alltoall|broadcast|reduce [flags] (or run it through a "
          "<collective>_perf symlink)");
    }
    collective = parseCollective(argv[1]);
    if (!collective) {
      return invalidArgument("unknown collective '" + argv[1] +
                             "' (all_reduce, all_gather, reduce_scatter, alltoall, broadcast, reduce)");
    }
    options.program = invoked + " " + collectiveName(*collective);
    next = 2;
  }
  options.collective = *collective;

  for (size_t i = next; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    const Flag* flag = nullptr;
    std::optional<std::string> value;
    if (arg.size() > 2 && arg[0] == '-' && arg[1] == '-') {
      std::string name = arg.substr(2);
      const size_t eq = name.find('=');
      if (eq != std::string::npos) {
        value = name.substr(eq + 1);
        name.resize(eq);
      }
      for (const Flag& f : kFlags) {
        if (name == f.long_name) flag = &f;
      }
      if (!flag) return invalidArgument("unknown option --" + name);
      if (!flag->has_value && value) return invalidArgument("--" + name + " takes no value");
    } else if (arg.size() >= 2 && arg[0] == '-' && arg[1] != '-') {
      for (const Flag& f : kFlags) {
        if (f.short_name == arg[1]) flag = &f;
      }
      if (!flag) return invalidArgument("unknown option " + arg.substr(0, 2));
      if (arg.size() > 2) {
        if (!flag->has_value) return invalidArgument(arg.substr(0, 2) + " takes no value ('" + arg + "')");
        value = arg.substr(2);
      }
    } else {
      return invalidArgument("unexpected argument '" + arg + "'");
    }
    if (flag->has_value && !value) {
      if (i + 1 >= argv.size()) return invalidArgument(flagLabel(*flag) + " needs a value");
      value = argv[++i];
    }
    BRAID_RETURN_IF_ERROR(applyFlag(*flag, value.value_or(""), options));
  }
  if (options.help) return options;

  if (options.min_bytes > options.max_bytes) {
    return invalidArgument("-b " + std::to_string(options.min_bytes) + " is above -e " +
                           std::to_string(options.max_bytes));
  }
  if (options.ranks() > 4096) {
    return invalidArgument("-p " + std::to_string(options.processes) + " x -t " + std::to_string(options.threads) +
                           " = " + std::to_string(options.ranks()) + " ranks: at most 4096");
  }
  // The threads transport connects the threads of one process: forked processes cannot use it.
  if (options.processes > 1 && options.transport == "threads") {
    return invalidArgument("-p " + std::to_string(options.processes) +
                           " with --transport threads: the threads transport connects ranks within one process; "
                           "use shm, tcp, ucx or auto with -p, or -t alone with threads");
  }
  if (isRooted(options.collective) && options.root >= options.ranks()) {
    return invalidArgument("-r " + std::to_string(options.root) + ": root must be below the rank count " +
                           std::to_string(options.ranks()));
  }
  return options;
}

std::string helpText(const std::string& program) {
  return "Usage: " + program +
         " [flags]        (or: braid_perf <collective> [flags])\n"
         "Braid's nccl-tests-style benchmark: times a collective on CPU ranks over a sweep of sizes, checks every\n"
         "result element, and prints nccl-tests' table (docs/braid_perf.md).\n"
         "Collectives: all_reduce, all_gather, reduce_scatter, alltoall, broadcast, reduce.\n"
         "\n"
         "  -t, --nthreads <n>       ranks per process, one thread each (default 1)\n"
         "  -p, --nprocs <n>         Braid: processes to fork, each with -t ranks; ranks = p x t; they meet\n"
         "                           through one unique id and use shared memory (default 1). Not nccl-tests'\n"
         "                           -p (--parallel_init): Braid's threads always initialize concurrently\n"
         "  -g, --ngpus <n>          GPUs per thread: accepted for compatibility, must be 1\n"
         "  -b, --minbytes <size>    smallest size, K/M/G = 2^10/2^20/2^30 (default 32M)\n"
         "  -e, --maxbytes <size>    largest size (default 32M)\n"
         "  -i, --stepbytes <size>   additive step when -f is not given (default 1M)\n"
         "  -f, --stepfactor <n>     multiplicative step (default: off)\n"
         "  -n, --iters <n>          timed iterations per size and mode (default 20)\n"
         "  -w, --warmup_iters <n>   untimed iterations before them, per size and mode (default 1)\n"
         "  -m, --agg_iters <n>      operations per timed iteration (default 1)\n"
         "  -N, --run_cycles <n>     sweeps, 0 = forever (default 1)\n"
         "  -c, --check <n>          checked operations per size and mode; 0 = no check, #wrong N/A (default 1)\n"
         "  -d, --datatype <type>    int8 uint8 int32 uint32 int64 uint64 half float double bfloat16, or all\n"
         "                           (default float)\n"
         "  -o, --op <op>            sum prod max min avg, or all (default sum; reductions only)\n"
         "  -r, --root <rank>        root of broadcast and reduce, or all (default 0)\n"
         "  -z, --blocking <0|1>     1: barrier after every operation (default 0)\n"
         "  -a, --average <0..3>     time reported: 0 rank 0, 1 mean over ranks, 2 min, 3 max (default 1)\n"
         "  -T, --timeout <s>        seconds any wait may take (sets BRAID_TIMEOUT); 0 = runtime default\n"
         "  -J, --output_file <f>    also write the results as JSON to <f>\n"
         "      --algo <file|dir>    force algorithms: MSCCL XML / Braid JSON files (sets BRAID_ALGO_DIR)\n"
         "      --transport <name>   threads, shm, tcp, ucx or auto (sets BRAID_TRANSPORT)\n"
         "  -h, --help               this text\n"
         "\n"
         "Exit status: 0 when every call succeeded and every element was right, 1 otherwise, 2 for bad flags.\n";
}

std::vector<uint64_t> sweepSizes(const Options& options) {
  std::vector<uint64_t> sizes;
  uint64_t size = options.min_bytes;
  while (size <= options.max_bytes) {
    sizes.push_back(size);
    uint64_t next;
    if (options.step_factor > 1) {
      if (size == 0) {
        next = 1;
      } else if (size > std::numeric_limits<uint64_t>::max() / options.step_factor) {
        break;
      } else {
        next = size * options.step_factor;
      }
    } else {
      if (size > std::numeric_limits<uint64_t>::max() - options.step_bytes) break;
      next = size + std::max<uint64_t>(options.step_bytes, 1);
    }
    size = next;
  }
  return sizes;
}

}  // namespace braid::perf
