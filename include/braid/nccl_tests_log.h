// nccl-tests output logs (NVIDIA/nccl-tests, src/common.cu's table; nccl_plugins.md §6.4), as users paste them:
// the table of one run (`all_reduce_perf -b 8 -e 1G -f 2 ...`) with whatever header and NCCL INFO lines came with it.
//
// A data row is
//   size count type [redop [root]] { time algbw busbw #wrong }  (out-of-place, then in-place)
// size in bytes (nccl-tests' convention: the whole output for all-gather, the whole input for reduce-scatter; the
// number NCCL's tuner sees as nBytes), count in elements, time in µs, algbw and busbw in GB/s; `#wrong` is an error
// count, "N/A" (in-place all-to-all) or, in nccl-tests before 2.10, a floating-point maximum error. The reader
// takes the logs found in the field: header lines that lost their '#', rows without redop/root (older versions),
// rows whose last columns were trimmed (the in-place group, or `#wrong`), and a table printed twice (kept once).
// Lines that are not table rows (NCCL INFO, "NCCL version", the "# Rank ..." device list, the "Avg bus bandwidth"
// footer) are read for the log's metadata or skipped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "braid/status.h"

namespace braid {

/// One row: size, count, type, redop ("" when the row has none), root (-1 when absent), then the out-of-place and
/// in-place time (µs) / algbw / busbw (GB/s). A group the row lacks is NaN (has_out_of_place / has_in_place false).
struct NcclTestsRow {
  uint64_t size_bytes = 0;
  uint64_t count = 0;
  std::string type;
  std::string redop;
  int64_t root = -1;
  bool has_out_of_place = false;
  bool has_in_place = false;
  double oop_time_us = 0, oop_algbw = 0, oop_busbw = 0;
  double ip_time_us = 0, ip_algbw = 0, ip_busbw = 0;
  int line = 0;  // 1-based line of the row in its log

  /// The row's time in µs: the mean of the groups it has (out-of-place and in-place), as both run the same
  /// algorithm on the same sizes.
  double timeUs() const;
};

/// One line of nccl-tests' device list, "#  Rank  3 Group  0 Pid 6899 on node-A device  3 [0000:5d:00] NVIDIA H100
/// 80GB HBM3" (nccl-tests 2.13+ prints the PCI bus id as domain:bus:device, older versions as "[0x5d]", the bus).
struct NcclTestsRankLine {
  int rank = 0;
  std::string host;
  int device = -1;   // CUDA device index (-1 when the line has none)
  std::string bus;   // the text inside the brackets ("0000:5d:00", "0x5d"); "" when absent
  std::string name;  // the device name after the brackets ("NVIDIA H100 80GB HBM3"); "" when absent
  int line = 0;      // 1-based line in its log
};

/// A whole log: its rows and what its other lines tell.
struct NcclTestsLog {
  std::vector<NcclTestsRow> rows;  // in file order, one per size
  /// The collective in nccl-tests' binary naming ("all_reduce", "all_gather", "reduce_scatter", "alltoall",
  /// "broadcast", "reduce", "sendrecv", "hypercube", "scatter", "gather"), from a "Collective test starting:
  /// <name>_perf" line or the file name; empty when neither says.
  std::string collective;
  int ranks = 0;                              // distinct ranks on "#  Rank N ... on HOST" lines (0: none in the log)
  int nodes = 0;                              // distinct hosts on those lines (0: none)
  std::vector<NcclTestsRankLine> rank_lines;  // the device list, first line per rank, in rank order (empty: none)
  /// NCCL_ALGO / NCCL_PROTO as NCCL_DEBUG=INFO reports them ("NCCL_ALGO set by environment to Ring"); empty when
  /// the log does not say.
  std::string nccl_algo;
  std::string nccl_proto;
  std::string nccl_version;  // "2.26.2+cuda12.8" from "NCCL version ..." ("" when absent)
};

/// Parses nccl-tests output. `filename` names the log in errors and is where the collective comes from when no
/// line says it. Errors (kParseError, "<file>:<line>: ..."): a row that starts with a size and a count but whose
/// other fields are not a table row's (naming the field); a log without any row.
Result<NcclTestsLog> parseNcclTestsLog(const std::string& text, const std::string& filename);

/// How the device lists of two logs differ, each a sentence naming both files, the rank and the lines; empty when
/// they agree or a log has no list. Only ranks listed in both logs are compared (rank counts are the caller's).
struct RankTableDifferences {
  std::string hosts;    // the sets of host names differ ("A.txt ran on node-A, node-B, B.txt on node-C")
  std::string devices;  // a rank's device name differs (different GPU models)
  std::string bus_ids;  // a rank's PCI bus differs ("[0x5d]" and "[0000:5d:00]" are one bus)
};
RankTableDifferences compareRankTables(const NcclTestsLog& a, const std::string& a_path, const NcclTestsLog& b,
                                       const std::string& b_path);

/// Reads and parses a log file (kNotFound / kIoError naming the file, or parseNcclTestsLog's errors).
Result<NcclTestsLog> readNcclTestsLog(const std::string& path);

/// nccl-tests' name of a collective ("all_reduce", ...) from a binary or file name that contains one
/// ("all_reduce_perf", "h20-2node-alltoall_perf.txt"); nullopt when none does.
std::optional<std::string> ncclTestsCollectiveIn(const std::string& name);

/// nccl-tests' bus-bandwidth factor (nccl-tests doc/PERFORMANCE.md): all_reduce 2(n-1)/n; all_gather,
/// reduce_scatter and alltoall (n-1)/n; broadcast, reduce and the rest 1. nullopt for an unknown collective or
/// n < 1.
std::optional<double> ncclTestsBusFactor(const std::string& collective, int ranks);

}  // namespace braid
