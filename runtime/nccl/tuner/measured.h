// Tuner rules from nccl-tests logs measured on the user's cluster (`braid tune --nccl-tests-log`, docs/nccl.md
// "Rules from measurements"): one log per NCCL_ALGO / NCCL_PROTO setting (and optionally one with NCCL's own choice,
// the baseline), the fastest measured setting per size, and one rule per run of sizes with the same winner.
//
// A size where NCCL's own choice was measured at least as fast as every forced setting gets no rule (NCCL keeps
// deciding there). Windows hand over at the geometric midpoint of neighbouring measured sizes; the first starts at 0
// and the last ends at 2^64 - 1, as in `braid tune`'s model rules. Times are nccl-tests' (the mean of the
// out-of-place and in-place columns a row has, µs); sizes are nccl-tests' sizes, which are NCCL's tuner nBytes
// (nccl_plugins.md §2.2).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "braid/collective.h"
#include "braid/nccl_tests_log.h"
#include "braid/status.h"
#include "tuner/rules.h"

namespace braid::nccl_plugin {

/// One measured log and the setting it ran with.
struct MeasuredLog {
  std::string path;
  NcclTestsLog log;
  int func = -1;              // NCCL collective index (0..4) of log.collective
  bool nccl_default = false;  // measured with NCCL's own choice (no NCCL_ALGO / NCCL_PROTO)
  int algo = -1, proto = -1;  // the forced setting (rules-file indices); -1 with nccl_default
  std::string label() const;  // "Ring/LL128" or "NCCL default"
};

/// Reads `spec` = FILE, FILE=ALGO/PROTO or FILE=default (NCCL's own choice). Without a label the setting comes
/// from the log's NCCL_ALGO / NCCL_PROTO INFO lines, which must name both; ALGO and PROTO are NCCL_ALGO /
/// NCCL_PROTO values or the rules file's names. `collective` (`braid tune --coll`, parsed with parseCollective) is
/// the collective of a log whose text and file name do not say, and must equal the collective of a log that says
/// (kInvalidArgument "--coll alltoall contradicts the collective of FILE: it measured all_reduce"). Errors: a log that
/// cannot be read or parsed is kNotFound, kSystemError or kParseError (readFile, parseNcclTestsLog; never
/// kInvalidArgument); kInvalidArgument naming the file for a log whose setting or collective is unknown, a bad label,
/// or a collective NCCL's tuner does not choose for (alltoall, sendrecv, ...).
Result<MeasuredLog> readMeasuredLog(const std::string& spec, std::optional<CollectiveKind> collective = std::nullopt);

/// The decision at one measured size.
struct MeasuredChoice {
  int func = 0;
  uint64_t bytes = 0;
  int algo = -1, proto = -1;  // the fastest forced setting; -1 when NCCL's own choice is at least as fast
  double us = 0;              // its time
  std::string runner_up;      // the second fastest setting measured at this size ("" when none)
  double runner_up_us = 0;
  std::optional<double> default_us;  // NCCL's own choice at this size, when measured
};

struct MeasuredTable {
  std::vector<MeasuredChoice> choices;  // per collective, by size
  std::vector<TunerRule> rules;
  int ranks = -1, nodes = -1;  // what the rules match (-1: any)
};

/// The size where a window over size `a` hands over to one over size `b` (a < b): the last size of the first window,
/// floor(sqrt(a x b)) clamped to [a, b - 1], the geometric midpoint. Measured rules and the model's rules
/// (`braid tune`) meet there.
uint64_t geometricHandOver(uint64_t a, uint64_t b);

/// Builds the table and rules. `ranks` > 0 is the rules' nRanks for logs that do not list their ranks and must equal
/// the rank count of every log that does (kInvalidArgument "--ranks 8 contradicts the 16 ranks in FILE" otherwise);
/// `nodes` > 0 is the rules' nNodes for logs that do not list their hosts and must equal the host count of every log
/// that does ("--nodes 5 contradicts the 2 hosts in FILE"). Logs of one collective that disagree on rank or host
/// count, or two logs of the same setting and collective, are kInvalidArgument naming both files.
/// A collective whose logs are all NCCL's own choice gets no rules.
Result<MeasuredTable> rulesFromMeasurements(const std::vector<MeasuredLog>& logs, int ranks = -1, int nodes = -1);

}  // namespace braid::nccl_plugin
