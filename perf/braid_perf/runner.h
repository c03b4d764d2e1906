// braid_perf's ranks: -p processes (forked, p > 1) of -t threads, one Braid communicator per thread through
// the C API (include/braid/braid.h), each running nccl-tests' sweep: for every type, op, root and size, both
// modes timed and checked (docs/braid_perf.md "Timing").
#pragma once

#include <string>
#include <vector>

#include "braid_perf/options.h"

namespace braid::perf {

struct RunSetup {
  Options options;
  std::vector<std::string> argv;  // for the JSON file
  std::string version;            // braid_perf's version
  std::string braid_line;         // the "# Braid: ..." header line, without "# "
  std::string transport;          // as requested ("auto" when unset)
  /// One process whose ranks share it: braidCommInitAll. Otherwise braidGetUniqueId (before any fork) and
  /// braidCommInitRank on every rank.
  bool init_all = true;
};

/// Runs the benchmark; rank 0 prints the table on stdout, every rank its own errors on stderr. Returns the exit
/// status: 0 when every call succeeded and every checked element was right, 1 otherwise.
int runBenchmark(const RunSetup& setup);

}  // namespace braid::perf
