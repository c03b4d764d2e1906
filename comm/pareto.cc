#include "comm/pareto.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>

#include "braid/classic.h"
#include "braid/simulate.h"
#include "braid/synthesize.h"
#include "common/env.h"
#include "common/text.h"

namespace braid::comm {
namespace {

constexpr int kParetoTag = 0x5041;  // "PA"

bool debugInfo() { return lowerCase(envString("BRAID_DEBUG")) == "info"; }

std::vector<uint64_t> paretoSizes() {
  std::vector<uint64_t> sizes;
  for (uint64_t s = 1 << 10; s <= (uint64_t{256} << 20); s *= 16) sizes.push_back(s);
  return sizes;
}

struct Scored {
  Candidate candidate;
  std::vector<double> time_us;  // per paretoSizes() entry; infinity when it cannot run there
};

std::vector<Candidate> computeParetoSet(const Topology& topology, const std::string& topology_name) {
  const int n = topology.numGpus();
  const std::vector<uint64_t> sizes = paretoSizes();
  std::vector<Candidate> kept;
  for (CollectiveKind kind : {CollectiveKind::kAllGather, CollectiveKind::kReduceScatter, CollectiveKind::kAllReduce,
                              CollectiveKind::kAllToAll}) {
    std::vector<Scored> scored;
    SynthesisRequest request;
    request.topology = &topology;
    request.collective = kind;
    request.time_limit_s = 30;
    Result<SynthesisResult> synthesized = synthesize(request);
    if (synthesized.isOk()) {
      Scored s;
      s.candidate.algorithm = synthesized->algorithm;
      s.candidate.source = "synthesized " + topology_name;
      scored.push_back(std::move(s));
    } else if (debugInfo()) {
      std::fprintf(stderr, "braid INFO: no synthesized %s for %s: %s\n", collectiveName(kind), topology_name.c_str(),
                   synthesized.status().toString().c_str());
    }
    for (ClassicAlgo algo :
         {ClassicAlgo::kRing, ClassicAlgo::kRecursiveDoubling, ClassicAlgo::kDirect, ClassicAlgo::kDoubleBinaryTree}) {
      const auto applies = classicCollectives(algo);
      if (std::find(applies.begin(), applies.end(), kind) == applies.end()) continue;
      ClassicRequest classic;
      classic.algo = algo;
      classic.spec.kind = kind;
      classic.spec.num_ranks = n;
      classic.spec.chunk_factor = 0;
      classic.topology = &topology;
      Result<Algorithm> built = buildClassic(classic);
      if (!built.isOk()) continue;
      Scored s;
      s.candidate.algorithm = std::move(built).value();
      s.candidate.source = fmt::format("pareto {}: classical {}", topology_name, classicAlgoName(algo));
      scored.push_back(std::move(s));
    }
    for (Scored& s : scored) {
      for (uint64_t size : sizes) {
        SimOptions options;
        options.size_bytes = size - size % (static_cast<uint64_t>(n) * 4);
        options.in_place = false;
        Result<SimResult> sim = simulate(s.candidate.algorithm, topology, options);
        s.time_us.push_back(sim.isOk() ? sim->time_us : std::numeric_limits<double>::infinity());
      }
    }
    // Winner per size, then windows.
    std::vector<int> winner(sizes.size(), -1);
    for (size_t i = 0; i < sizes.size(); ++i) {
      double best = std::numeric_limits<double>::infinity();
      for (size_t c = 0; c < scored.size(); ++c) {
        if (scored[c].time_us[i] < best) {
          best = scored[c].time_us[i];
          winner[i] = static_cast<int>(c);
        }
      }
    }
    size_t i = 0;
    while (i < sizes.size()) {
      if (winner[i] < 0) {
        ++i;
        continue;
      }
      size_t j = i;
      while (j + 1 < sizes.size() && winner[j + 1] == winner[i]) ++j;
      Candidate c = scored[winner[i]].candidate;
      c.window_min =
          i == 0 ? 0
                 : static_cast<uint64_t>(std::sqrt(static_cast<double>(sizes[i - 1]) * static_cast<double>(sizes[i])));
      c.window_max =
          j + 1 == sizes.size()
              ? kUnlimitedBytes
              : static_cast<uint64_t>(std::sqrt(static_cast<double>(sizes[j]) * static_cast<double>(sizes[j + 1]))) - 1;
      kept.push_back(std::move(c));
      i = j + 1;
    }
  }
  return kept;
}

std::string serialize(const std::vector<Candidate>& set) {
  nlohmann::json out = nlohmann::json::array();
  for (const Candidate& c : set) {
    out.push_back({{"source", c.source},
                   {"instances", c.instances},
                   {"window_min", c.window_min},
                   {"window_max", c.window_max},
                   {"algorithm", writeAlgorithmJson(c.algorithm)}});
  }
  return out.dump();
}

Result<std::vector<Candidate>> deserialize(const std::string& text) {
  std::vector<Candidate> set;
  nlohmann::json in = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (in.is_discarded() || !in.is_array()) return internalError("Pareto set from rank 0 is not a JSON array");
  for (const auto& item : in) {
    Candidate c;
    c.source = item.value("source", "");
    c.instances = item.value("instances", 1);
    c.window_min = item.value("window_min", uint64_t{0});
    c.window_max = item.value("window_max", kUnlimitedBytes);
    BRAID_ASSIGN_OR_RETURN(c.algorithm, readAlgorithmJson(item.value("algorithm", ""), "<pareto set from rank 0>"));
    set.push_back(std::move(c));
  }
  return set;
}

}  // namespace

Status addParetoSet(AlgorithmCatalog& catalog, const Topology& topology, const std::string& topology_name,
                    Bootstrap& bootstrap) {
  std::vector<Candidate> set;
  if (bootstrap.rank() == 0) {
    set = computeParetoSet(topology, topology_name);
    const std::string text = serialize(set);
    const uint64_t length = text.size();
    for (int peer = 1; peer < bootstrap.size(); ++peer) {
      BRAID_RETURN_IF_ERROR(bootstrap.send(peer, kParetoTag, &length, sizeof(length)));
      BRAID_RETURN_IF_ERROR(bootstrap.send(peer, kParetoTag, text.data(), text.size()));
    }
    if (debugInfo()) {
      for (const Candidate& c : set) {
        std::fprintf(stderr, "braid INFO rank 0: Pareto set: %s %s [%llu, %llu] B (%s)\n",
                     collectiveName(c.algorithm.collective), c.algorithm.name.c_str(),
                     static_cast<unsigned long long>(c.window_min), static_cast<unsigned long long>(c.window_max),
                     c.source.c_str());
      }
    }
  } else {
    uint64_t length = 0;
    BRAID_RETURN_IF_ERROR(bootstrap.recv(0, kParetoTag, &length, sizeof(length)));
    std::string text(length, '\0');
    BRAID_RETURN_IF_ERROR(bootstrap.recv(0, kParetoTag, text.data(), text.size()));
    BRAID_ASSIGN_OR_RETURN(set, deserialize(text));
  }
  for (Candidate& c : set) catalog.addSynthesized(std::move(c));
  return Status::ok();
}

}  // namespace braid::comm
