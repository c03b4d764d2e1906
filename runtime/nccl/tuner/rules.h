// Tuner rules in the CSV format of NCCL's example tuner (nccl@2.28.9 ext-tuner/example/README.md, nccl_tuner.conf;
// nccl_plugins.md §2.5), one rule a line, `#` starts a comment line, blank lines ignored:
//
//   collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks[,numPipeOps[,regBuff]]
//
//   collective_type  broadcast | reduce | allgather | reducescatter | allreduce
//   min_bytes, max_bytes  inclusive nBytes range (NCCL's tuner convention: x nRanks for all-gather/reduce-scatter)
//   algorithm        tree | ring | collnet_direct | collnet_chain | nvls | nvls_tree | pat
//   protocol         ll | ll128 | simple
//   channels         1..64, or -1 to keep NCCL's choice
//   nNodes, nRanks, numPipeOps   a count to match, or -1 for any
//   regBuff          0 | 1 to match, or -1 for any
//
// Names are case-insensitive and fields may be padded with blanks. The first rule that matches a call wins: its
// cost-table entry is set to 0.0 (unless NCCL marked it -1, not allowed) and its channel count is applied.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "braid/status.h"

namespace braid::nccl_plugin {

struct TunerRule {
  int func = 0;  // ncclFunc_t 0..4
  uint64_t min_bytes = 0;
  uint64_t max_bytes = 0;
  int algo = 0;       // NCCL_ALGO_* 0..6
  int proto = 0;      // NCCL_PROTO_* 0..2
  int channels = -1;  // -1: keep NCCL's
  int nodes = -1;     // -1: any
  int ranks = -1;     // -1: any
  int pipe_ops = -1;  // -1: any
  int reg_buff = -1;  // -1: any
  int line = 0;       // line in the file it was read from (0: not read from a file)

  /// Whether the rule applies to one call (`call_reg_buff` 0 or 1; -1 when NCCL does not say, tuner v2 and v3,
  /// which matches any regBuff).
  bool matches(int call_func, uint64_t n_bytes, int call_nodes, int call_ranks, int call_pipe_ops,
               int call_reg_buff) const;
  /// Equal in every field but `line`.
  bool sameAs(const TunerRule& other) const;
};

struct TunerRules {
  std::vector<TunerRule> rules;       // in file order
  std::vector<std::string> warnings;  // one per skipped line: "<file>:<line>: field <n> (<name>): <why>"
};

/// Parses rules text. A malformed line is skipped with a warning naming file, line and field; never fails.
TunerRules parseTunerRules(std::string_view text, const std::string& filename);
/// Reads and parses a rules file. Errors: kNotFound / kIoError naming the file when it cannot be read.
Result<TunerRules> readTunerRulesFile(const std::string& path);
/// The rules as text parseTunerRules reads back to the same rules: a `#` header (each line of `comment` prefixed
/// with "# "), the format line, then one 10-field line per rule with NCCL's lower-case names.
std::string writeTunerRules(const std::vector<TunerRule>& rules, std::string_view comment = {});
/// The first rule matching a call, or nullptr.
const TunerRule* firstMatchingRule(const std::vector<TunerRule>& rules, int func, uint64_t n_bytes, int nodes,
                                   int ranks, int pipe_ops, int reg_buff);

/// The rules file's names: "allreduce", ..., "nvls_tree", ..., "ll128" (index -> name; "?" outside).
const char* ruleFuncName(int func);
const char* ruleAlgoName(int algo);
const char* ruleProtoName(int proto);
/// An algorithm or protocol index from its name in the rules file or as NCCL_ALGO / NCCL_PROTO spell it
/// ("Ring", "CollnetDirect", "NVLSTree", "LL128"; case-insensitive); nullopt for anything else.
std::optional<int> parseRuleAlgo(std::string_view name);
std::optional<int> parseRuleProto(std::string_view name);

}  // namespace braid::nccl_plugin
