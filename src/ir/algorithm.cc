// Algorithm helpers: the spec an algorithm claims, sizes, and the text form of a verification report.
//
// The chunk factor comes from MSCCL's nchunksperloop (../shared/reference/taccl_msccl.md §2.3): for
// allgather, reducescatter and alltoall the buffer that nchunksperloop cuts is n times the per-rank
// piece, so c = nchunksperloop / n; for the others c = nchunksperloop.
#include "braid/algorithm.h"

#include <fmt/format.h>

namespace braid {

std::string channelRangeMessage(int64_t nchannels) {
  return fmt::format("nchannels must be in 1..{} (MSCCL's MAXCHANNELS), got {}", kMaxAlgorithmChannels, nchannels);
}

Result<CollectiveSpec> Algorithm::spec(bool in_place_mode) const {
  if (collective == CollectiveKind::kCustom) {
    return unsupported(fmt::format("algorithm '{}': collective '{}' has no postcondition to verify against", name,
                                   collective_name.empty() ? "custom" : collective_name));
  }
  if (num_ranks < 1) return invalidArgument(fmt::format("algorithm '{}': ngpus must be >= 1, got {}", name, num_ranks));
  if (num_chunks < 1) {
    return invalidArgument(fmt::format("algorithm '{}': nchunksperloop must be >= 1, got {}", name, num_chunks));
  }
  CollectiveSpec spec;
  spec.kind = collective;
  spec.num_ranks = num_ranks;
  spec.root = root;
  spec.in_place = in_place_mode;
  const bool scattered = collective == CollectiveKind::kAllGather || collective == CollectiveKind::kReduceScatter ||
                         collective == CollectiveKind::kAllToAll;
  if (scattered) {
    if (num_chunks % num_ranks != 0) {
      return invalidArgument(fmt::format("algorithm '{}': {} needs nchunksperloop divisible by ngpus, got {} and {}",
                                         name, collectiveName(collective), num_chunks, num_ranks));
    }
    spec.chunk_factor = num_chunks / num_ranks;
  } else {
    spec.chunk_factor = num_chunks;
  }
  BRAID_RETURN_IF_ERROR(validateSpec(spec));
  return spec;
}

int Algorithm::numThreadblocks() const {
  int total = 0;
  for (const RankProgram& rank : ranks) total += static_cast<int>(rank.threadblocks.size());
  return total;
}

int Algorithm::numSteps() const {
  int total = 0;
  for (const RankProgram& rank : ranks) {
    for (const Threadblock& tb : rank.threadblocks) total += static_cast<int>(tb.steps.size());
  }
  return total;
}

std::string VerifyReport::toString() const {
  std::string text;
  for (const VerifyIssue& issue : issues) {
    if (!issue.mode.empty()) text += issue.mode + ": ";
    text += fmt::format("{}: {}\n", issueKindName(issue.kind), issue.message);
  }
  if (total_issues > static_cast<int>(issues.size())) {
    text += fmt::format("... {} more issue(s) not recorded\n", total_issues - static_cast<int>(issues.size()));
  }
  return text;
}

}  // namespace braid
