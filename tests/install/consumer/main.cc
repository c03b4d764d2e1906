// Builds a ring all-gather for 5 ranks through the installed API and verifies it, then synthesizes an all-gather
// for a 4-GPU ring topology (the synthesizer library with Z3), then runs an all-reduce on 3 ranks (threads of this
// process) through the C API.
#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

#include "braid/algorithm.h"
#include "braid/braid.h"
#include "braid/classic.h"
#include "braid/synthesize.h"
#include "braid/topology.h"

int main() {
  braid::ClassicRequest req;
  req.algo = braid::ClassicAlgo::kRing;
  req.spec.kind = braid::CollectiveKind::kAllGather;
  req.spec.num_ranks = 5;
  braid::Result<braid::Algorithm> algo = braid::buildClassic(req);
  if (!algo) {
    std::printf("build failed: %s\n", algo.status().toString().c_str());
    return 1;
  }
  braid::VerifyReport report = braid::verify(*algo);
  std::printf("%s ranks=%d verified=%d\n", algo->name.c_str(), algo->num_ranks, report.ok ? 1 : 0);
  if (!report.ok) return 1;

  braid::Topology ring;
  ring.name = "ring4";
  const int node = ring.addNode("node0");
  int gpu[4];
  for (int& g : gpu) g = ring.addVertex(braid::VertexKind::kGpu, node);
  for (int i = 0; i < 4; ++i) ring.addDuplexLink(gpu[i], gpu[(i + 1) % 4], braid::LinkKind::kNvlink, 20, 0.7);
  braid::SynthesisRequest synth;
  synth.topology = &ring;
  synth.collective = braid::CollectiveKind::kAllGather;
  synth.time_limit_s = 10;
  braid::Result<braid::SynthesisResult> result = braid::synthesize(synth);
  if (!result) {
    std::printf("synthesis failed: %s\n", result.status().toString().c_str());
    return 1;
  }
  std::printf("%s ranks=%d synthesized\n", result->algorithm.name.c_str(), result->algorithm.num_ranks);

  braidComm_t comms[3] = {};
  if (braidCommInitAll(comms, 3, nullptr) != braidSuccess) return 1;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      std::vector<double> x(1000, r + 1.0);  // 1 + 2 + 3 = 6 everywhere
      if (braidAllReduce(x.data(), x.data(), x.size(), braidDouble, braidSum, comms[r], nullptr) != braidSuccess)
        ++wrong;
      for (double v : x) wrong += v != 6.0;
    });
  }
  for (auto& t : threads) t.join();
  for (braidComm_t c : comms) braidCommDestroy(c);
  std::printf("allreduce on 3 ranks: %s\n", wrong == 0 ? "ok" : "wrong");
  return wrong == 0 ? 0 : 1;
}
