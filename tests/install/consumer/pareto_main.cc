// Links braid::braid_pareto: the synthesizer is reachable there. Computes the Pareto set of a 4-GPU NVLink ring
// built in code (synthesized and classical candidates, scored in the simulator) and checks an all-gather window
// starts at 0 and one ends unbounded; then installs it as the default through the C entry point.
#include <cstdio>

#include "braid/pareto.h"
#include "braid/topology.h"

int main() {
  braid::Topology ring;
  ring.name = "ring4";
  const int node = ring.addNode("node0");
  int gpu[4];
  for (int& g : gpu) g = ring.addVertex(braid::VertexKind::kGpu, node);
  for (int i = 0; i < 4; ++i) ring.addDuplexLink(gpu[i], gpu[(i + 1) % 4], braid::LinkKind::kNvlink, 20, 0.7);
  braid::Result<std::vector<braid::ParetoCandidate>> set = braid::synthesizeParetoSet(ring, "ring4");
  if (!set.isOk()) {
    std::printf("Pareto set failed: %s\n", set.status().toString().c_str());
    return 1;
  }
  bool starts = false, ends = false, synthesized = false;
  for (const braid::ParetoCandidate& c : *set) {
    std::printf("%s %s [%llu, %llu] (%s)\n", braid::collectiveName(c.algorithm.collective), c.algorithm.name.c_str(),
                static_cast<unsigned long long>(c.window_min), static_cast<unsigned long long>(c.window_max),
                c.source.c_str());
    if (c.algorithm.collective != braid::CollectiveKind::kAllGather) continue;
    starts |= c.window_min == 0;
    ends |= c.window_max == braid::kUnlimitedBytes;
    synthesized |= c.source.rfind("synthesized", 0) == 0;
  }
  if (!starts || !ends) return 1;
  std::printf("Pareto set of ring4: %zu candidates%s\n", set->size(), synthesized ? ", synthesized among them" : "");
  return braidEnableParetoSynthesis() == braidSuccess && braid::defaultParetoSynthesizer() ? 0 : 1;
}
