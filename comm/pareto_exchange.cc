#include "comm/pareto_exchange.h"

#include <fmt/format.h>

#include <exception>
#include <mutex>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/log.h"

namespace braid {
namespace {

constexpr int kParetoTag = 0x5041;  // "PA"

std::mutex& defaultMutex() {
  static std::mutex mutex;
  return mutex;
}

ParetoSynthesizer& defaultSlot() {
  static ParetoSynthesizer synthesizer;
  return synthesizer;
}

std::string serialize(const std::vector<ParetoCandidate>& set) {
  nlohmann::json out = nlohmann::json::array();
  for (const ParetoCandidate& c : set) {
    out.push_back({{"source", c.source},
                   {"instances", c.instances},
                   {"window_min", c.window_min},
                   {"window_max", c.window_max},
                   {"algorithm", writeAlgorithmJson(c.algorithm)}});
  }
  return out.dump();
}

Result<std::vector<ParetoCandidate>> deserialize(const std::string& text) {
  std::vector<ParetoCandidate> set;
  nlohmann::json in = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (in.is_discarded() || !in.is_array()) return internalError("Pareto set from rank 0 is not a JSON array");
  for (const auto& item : in) {
    ParetoCandidate c;
    c.source = item.value("source", "");
    c.instances = item.value("instances", 1);
    c.window_min = item.value("window_min", uint64_t{0});
    c.window_max = item.value("window_max", kUnlimitedBytes);
    BRAID_ASSIGN_OR_RETURN(c.algorithm, readAlgorithmJson(item.value("algorithm", ""), "<pareto set from rank 0>"));
    set.push_back(std::move(c));
  }
  return set;
}

/// Rank 0's set: what the synthesizer computes, or nothing (with a warning) when there is none or it fails.
std::vector<ParetoCandidate> computeOnRankZero(const Topology& topology, const std::string& topology_name,
                                               const ParetoSynthesizer& synthesizer) {
  if (!synthesizer) {
    BRAID_LOG(kWarn,
              "topology {} is set (BRAID_TOPO / CommOptions::topology) but this program does not link "
              "braid::braid_pareto (or did not call braid::enableParetoSynthesis()): no Pareto set; algorithms come "
              "from BRAID_ALGO_DIR and the classical rule",
              topology_name);
    return {};
  }
  Result<std::vector<ParetoCandidate>> set = internalError("no result");
  try {
    set = synthesizer(topology, topology_name);
  } catch (const std::exception& e) {
    set = internalError(fmt::format("exception: {}", e.what()));
  }
  if (!set.isOk()) {
    BRAID_LOG(kWarn, "Pareto set for {}: {}; algorithms come from BRAID_ALGO_DIR and the classical rule", topology_name,
              set.status().message());
    return {};
  }
  std::vector<ParetoCandidate> usable;
  for (ParetoCandidate& c : *set) {
    if (c.algorithm.num_ranks != topology.numGpus()) {
      BRAID_LOG(kWarn, "Pareto set for {}: {} is for {} ranks, not {}; dropped", topology_name, c.algorithm.name,
                c.algorithm.num_ranks, topology.numGpus());
      continue;
    }
    usable.push_back(std::move(c));
  }
  for (const ParetoCandidate& c : usable) {
    BRAID_LOG(kInfo, "rank 0: Pareto set: {} {} [{}, {}] B ({})", collectiveName(c.algorithm.collective),
              c.algorithm.name, c.window_min, c.window_max, c.source);
  }
  return usable;
}

}  // namespace

void setDefaultParetoSynthesizer(ParetoSynthesizer synthesizer) {
  std::lock_guard<std::mutex> lock(defaultMutex());
  defaultSlot() = std::move(synthesizer);
}

ParetoSynthesizer defaultParetoSynthesizer() {
  std::lock_guard<std::mutex> lock(defaultMutex());
  return defaultSlot();
}

namespace comm {

Status addParetoSet(AlgorithmCatalog& catalog, const Topology& topology, const std::string& topology_name,
                    Bootstrap& bootstrap, const ParetoSynthesizer& synthesizer) {
  std::vector<ParetoCandidate> set;
  if (bootstrap.rank() == 0) {
    set = computeOnRankZero(topology, topology_name, synthesizer ? synthesizer : defaultParetoSynthesizer());
    const std::string text = serialize(set);
    const uint64_t length = text.size();
    for (int peer = 1; peer < bootstrap.size(); ++peer) {
      BRAID_RETURN_IF_ERROR(bootstrap.send(peer, kParetoTag, &length, sizeof(length)));
      BRAID_RETURN_IF_ERROR(bootstrap.send(peer, kParetoTag, text.data(), text.size()));
    }
  } else {
    uint64_t length = 0;
    BRAID_RETURN_IF_ERROR(bootstrap.recv(0, kParetoTag, &length, sizeof(length)));
    std::string text(length, '\0');
    BRAID_RETURN_IF_ERROR(bootstrap.recv(0, kParetoTag, text.data(), text.size()));
    BRAID_ASSIGN_OR_RETURN(set, deserialize(text));
  }
  for (ParetoCandidate& c : set) catalog.addSynthesized(std::move(c));
  return Status::ok();
}

}  // namespace comm
}  // namespace braid
