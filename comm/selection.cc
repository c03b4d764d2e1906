#include "comm/selection.h"

#include <fmt/format.h>

namespace braid::comm {

ClassicAlgo classicalRule(CollectiveKind collective, int num_ranks, uint64_t bytes) {
  constexpr uint64_t kLatencyBound = 256 << 10;
  switch (collective) {
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kBroadcast:  // kRecursiveDoubling: the binomial tree
    case CollectiveKind::kReduce:
      return bytes < kLatencyBound && num_ranks > 2 ? ClassicAlgo::kRecursiveDoubling : ClassicAlgo::kRing;
    case CollectiveKind::kAllToAll: return ClassicAlgo::kDirect;
    default: return ClassicAlgo::kRing;
  }
}

AlgorithmCatalog::AlgorithmCatalog(int num_ranks, std::shared_ptr<const Topology> topology)
    : num_ranks_(num_ranks), topology_(std::move(topology)) {}

void AlgorithmCatalog::addForced(const Algorithm& algorithm) {
  Candidate c;
  c.algorithm = algorithm;
  c.source = "forced";
  c.window_min = algorithm.min_bytes;
  c.window_max = algorithm.max_bytes;
  forced_.push_back(std::move(c));
}

void AlgorithmCatalog::addDirectory(const LoadedAlgorithm& loaded, const std::string& origin) {
  Candidate c;
  c.algorithm = loaded.algorithm;
  c.source = origin + " " + loaded.file;
  c.window_min = loaded.algorithm.min_bytes;
  c.window_max = loaded.algorithm.max_bytes;
  directory_.push_back(std::move(c));
}

void AlgorithmCatalog::addSynthesized(Candidate candidate) { synthesized_.push_back(std::move(candidate)); }

void AlgorithmCatalog::setAllToAllChooser(std::unique_ptr<AllToAllChooser> chooser) { alltoall_ = std::move(chooser); }

AllToAllChooser& AlgorithmCatalog::allToAll() {
  if (!alltoall_) {
    NodeShape unknown;
    unknown.source = "no node shape given to the catalog";
    alltoall_ = std::make_unique<AllToAllChooser>(num_ranks_, AllToAllMode::kAuto, "auto", unknown, nullptr, -1);
  }
  return *alltoall_;
}

bool AlgorithmCatalog::matches(const Candidate& c, CollectiveKind collective, uint64_t bytes, bool in_place,
                               int root) const {
  const Algorithm& a = c.algorithm;
  if (a.collective != collective || a.num_ranks != num_ranks_) return false;
  if (bytes < c.window_min || bytes > c.window_max) return false;
  if (in_place ? !a.in_place : !a.out_of_place) return false;
  if ((collective == CollectiveKind::kBroadcast || collective == CollectiveKind::kReduce) && a.root != root)
    return false;
  return true;
}

Result<const Candidate*> AlgorithmCatalog::classical(CollectiveKind collective, uint64_t bytes, bool in_place,
                                                     int root) {
  ClassicAlgo algo = classicalRule(collective, num_ranks_, bytes);
  const bool two_dim = collective == CollectiveKind::kAllToAll &&
                       allToAll().decide(bytes / static_cast<uint64_t>(std::max(num_ranks_, 1))).two_dim;
  if (two_dim) algo = ClassicAlgo::kTwoDimHierarchical;
  const auto key = std::make_tuple(static_cast<int>(algo), static_cast<int>(collective), in_place, root);
  auto it = classical_.find(key);
  if (it != classical_.end()) return it->second.get();
  ClassicRequest request;
  request.algo = algo;
  request.spec.kind = collective;
  request.spec.num_ranks = num_ranks_;
  request.spec.in_place = in_place;
  request.spec.root = root;
  request.spec.chunk_factor = 0;
  if (two_dim) request.ranks_per_node = allToAll().shape().ranks_per_node;
  if (topology_ && topology_->numGpus() == num_ranks_) request.topology = topology_.get();
  Result<Algorithm> built = buildClassic(request);
  if (!built.isOk() && request.topology != nullptr) {  // e.g. no NVLink ring: rank order
    request.topology = nullptr;
    built = buildClassic(request);
  }
  if (!built.isOk()) {
    return Status(built.status().code(), fmt::format("classical {} for {} on {} ranks: {}", classicAlgoName(algo),
                                                     collectiveName(collective), num_ranks_, built.status().message()));
  }
  auto candidate = std::make_unique<Candidate>();
  candidate->algorithm = std::move(built).value();
  candidate->source = "classical";
  const Candidate* out = candidate.get();
  classical_.emplace(key, std::move(candidate));
  return out;
}

Result<const Candidate*> AlgorithmCatalog::choose(CollectiveKind collective, uint64_t bytes, bool in_place, int root,
                                                  bool allow_fallback) {
  for (const auto* list : {&forced_, &directory_}) {
    for (const Candidate& c : *list)
      if (matches(c, collective, bytes, in_place, root)) return &c;
  }
  // A forced flat / 2DH all-to-all comes before the Pareto set.
  if (collective == CollectiveKind::kAllToAll && allow_fallback && allToAll().mode() != AllToAllMode::kAuto)
    return classical(collective, bytes, in_place, root);
  if (!allow_fallback) {
    return notFound(fmt::format("no forced algorithm for {} on {} ranks at {} bytes {}", collectiveName(collective),
                                num_ranks_, bytes, in_place ? "in-place" : "out-of-place"));
  }
  for (const Candidate& c : synthesized_)
    if (matches(c, collective, bytes, in_place, root)) return &c;
  return classical(collective, bytes, in_place, root);
}

std::string AlgorithmCatalog::digest() const {
  std::string text = alltoall_ ? alltoall_->digest() : std::string();
  for (const auto* list : {&forced_, &directory_, &synthesized_}) {
    for (const Candidate& c : *list) {
      text += fmt::format("{}|{}|{}|{}|{}|{}|{};", c.algorithm.name, collectiveName(c.algorithm.collective),
                          c.algorithm.num_ranks, c.window_min, c.window_max, c.algorithm.numSteps(), c.instances);
    }
  }
  return text;
}

}  // namespace braid::comm
