// --algo: what the header says of the algorithms a file or directory forces (docs/braid_perf.md "Output").
#pragma once

#include <string>
#include <vector>

#include "braid/algorithm.h"
#include "braid_perf/options.h"

namespace braid::perf {

/// An algorithm --algo names, with the file it came from (the user's path).
struct AlgoFile {
  Algorithm algorithm;
  std::string file;
};

/// The "algorithms:" text of the "# Braid:" header for --algo `given` whose files hold `loaded`, on a run of
/// `options.collective` with `options.ranks()` ranks and root `options.root`. A communicator runs a file's algorithm
/// where its collective, rank count, size window, in-place mode (and root) match the call, and its own choice
/// elsewhere (comm/selection.cc), so the text says which:
///   "forced from F" when one matching algorithm covers every size in both modes;
///   "F where it matches (sizes 0 B..1 MiB, in-place only), else Braid's selection" when it covers part;
///   "Braid's selection (F: allgather for 4 ranks, never this all_reduce with 8 ranks)" when none applies.
/// Several matching algorithms are listed one after the other, each with its window and modes.
std::string algoHeaderText(const std::string& given, const std::vector<AlgoFile>& loaded, const Options& options);

/// Bytes as the header prints them: "0 B", "4 KiB", "1 MiB" when exact, else "12345 B"; "unlimited" for
/// kUnlimitedBytes.
std::string headerBytes(uint64_t bytes);
/// A size window [min_bytes, max_bytes] as the header prints it, both ends in one unit: the largest of B, KiB, MiB,
/// GiB, TiB that both are whole multiples of ("260 KiB..2 MiB", "266240 B..2078719 B", "0 MiB..1 MiB"); an end of
/// kUnlimitedBytes is "unlimited" and does not constrain the unit ("64 KiB..unlimited").
std::string headerByteRange(uint64_t min_bytes, uint64_t max_bytes);

}  // namespace braid::perf
