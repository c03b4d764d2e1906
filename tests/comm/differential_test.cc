// Differential tests: every classical algorithm, and every algorithm synthesized (TACCL pipeline and tree packing) for
// the shipped 8- and 16-GPU topologies, runs through the Communicator on the threads transport with real data and
// equals a naive reference (comm_test_util.h) for every datatype and op, in every mode the algorithm declares,
// for counts 0, 1, 7, 1000003 and 10556587, on 3, 5, 8 and 16 ranks (3 and 5: classical only — no shipped
// topology has 3 or 5 GPUs).
//
// Coverage per algorithm (BRAID_TEST_SMALL=1 keeps only the first part, for sanitizer builds): counts 0, 1 and
// 7 with the full datatype x op matrix; count 1000003 in every
// declared mode and count 10556587 in one mode, each with one (datatype, op) pair that rotates over the
// algorithms of a suite so that every datatype and every op runs at the large counts too (the data path does
// not depend on the datatype except through the element size, which the rotation also covers). All-gather,
// reduce-scatter and all-to-all take `count` as the size of the whole buffer: each rank piece holds
// ceil(count / n) elements, so uneven counts stay uneven. A guard zone after every receive buffer must stay
// untouched (nothing written past a user buffer).
//
// Every algorithm is also encoded for the device-resident executor (runtime/cuda/device_plan_codec.h) at three
// sizes, in each of its modes, in its protocol and in LL, and the encoding of every rank must decode, hold the
// plan's fields and pass validateDevicePlans (tests/cuda/device_plan_check.h): what the CUDA kernel would read,
// checked on the CPU for every algorithm of this suite.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "braid/classic.h"
#include "braid/synthesize.h"
#include "braid/topology.h"
#include "comm/comm_test_util.h"
#include "cuda/device_plan_check.h"
#include "support/classic_requests.h"

namespace braid {
namespace {

using testing::runRanks;

struct Suite {
  std::string name;
  int num_ranks = 0;
  std::vector<Algorithm> algorithms;
};

std::vector<bool> modes(const Algorithm& a) {
  std::vector<bool> out;
  if (a.out_of_place) out.push_back(false);
  if (a.in_place) out.push_back(true);
  return out;
}

// The runs of algorithm number `index` of a suite (see the top of the file).
std::vector<testing::Run> runsFor(const Algorithm& alg, int index) {
  using testing::reduces;
  using testing::Run;
  std::vector<Run> runs;
  const std::vector<ReduceOp> ops =
      reduces(alg.collective)
          ? std::vector<ReduceOp>{ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kAvg}
          : std::vector<ReduceOp>{ReduceOp::kSum};
  for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{7}}) {
    for (bool in_place : modes(alg)) {
      for (int t = 0; t < kNumDataTypes; ++t) {
        for (ReduceOp op : ops) runs.push_back(Run{count, in_place, static_cast<DataType>(t), op});
      }
    }
  }
  // BRAID_TEST_SMALL=1 (sanitizer builds, scripts/sanitize.sh): counts 0, 1 and 7 only.
  if (const char* small = std::getenv("BRAID_TEST_SMALL"); small != nullptr && std::string(small) == "1") return runs;
  const DataType big_type = static_cast<DataType>(index % kNumDataTypes);
  const ReduceOp big_op = ops[static_cast<size_t>(index) % ops.size()];
  for (bool in_place : modes(alg)) runs.push_back(Run{1000003, in_place, big_type, big_op});
  const auto m = modes(alg);
  runs.push_back(Run{10556587, m[static_cast<size_t>(index) % m.size()], big_type, big_op});
  return runs;
}

void runSuite(const Suite& suite) {
  ASSERT_FALSE(suite.algorithms.empty()) << suite.name;
  for (size_t a = 0; a < suite.algorithms.size(); ++a) {
    const Algorithm& alg = suite.algorithms[a];
    // BRAID_TEST_ONLY=<substring of an algorithm name> runs only those (for debugging one algorithm).
    if (const char* only = std::getenv("BRAID_TEST_ONLY"); only != nullptr && alg.name.find(only) == std::string::npos)
      continue;
    CommOptions options;
    options.transport = "threads";
    options.algorithms = {alg};
    options.allow_fallback = false;
    options.timeout_s = 60;
    const std::vector<testing::Run> runs = runsFor(alg, static_cast<int>(a));
    const auto start = std::chrono::steady_clock::now();
    const Status encoded = testing::checkDeviceEncodings(alg, {1, 7, 1000003});
    EXPECT_TRUE(encoded.isOk()) << suite.name << " algorithm " << a << ": device plan: " << encoded.toString();
    const Status status = runRanks(suite.num_ranks, options, [&](Communicator& comm) -> Status {
      // The forced algorithm is what runs.
      const bool in_place = !alg.out_of_place;
      Result<AlgorithmChoice> choice = comm.choose(alg.collective, 1 << 20, in_place);
      if (alg.collective != CollectiveKind::kBroadcast && alg.collective != CollectiveKind::kReduce) {
        if (!choice.isOk()) return choice.status();
        if (choice->algorithm != alg.name || choice->source != "forced")
          return internalError(
              fmt::format("chose '{}' ({}), not the forced '{}'", choice->algorithm, choice->source, alg.name));
      }
      for (const testing::Run& run : runs)
        BRAID_RETURN_IF_ERROR(testing::checkCollective(comm, alg.collective, alg.root, alg.name, run));
      return Status::ok();
    });
    EXPECT_TRUE(status.isOk()) << suite.name << " algorithm " << a << " '" << alg.name << "': " << status.toString();
    if (std::getenv("BRAID_TEST_VERBOSE") != nullptr) {
      std::printf("%s: %s (%s) %zu calls %.2f s\n", suite.name.c_str(), alg.name.c_str(),
                  collectiveName(alg.collective), runs.size(),
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  }
}

// What an algorithm does, without its name and provenance: the same program built for two topologies is run
// once.
std::string programKey(const Algorithm& a) {
  Algorithm copy = a;
  copy.name.clear();
  copy.provenance = Provenance{};
  copy.notes.clear();
  return writeAlgorithmJson(copy);
}

// Classical algorithms for n ranks: every ClassicAlgo x collective that builds, in each mode it is built for,
// with and without the topology (ring order follows NVLink with one), deduplicated by their JSON.
std::vector<Algorithm> classicalAlgorithms(int n, const Topology* topology) {
  std::vector<Algorithm> out;
  std::set<std::string> seen;
  for (ClassicAlgo algo :
       {ClassicAlgo::kRing, ClassicAlgo::kMultiRing, ClassicAlgo::kDirect, ClassicAlgo::kRecursiveDoubling,
        ClassicAlgo::kDoubleBinaryTree, ClassicAlgo::kPairwise, ClassicAlgo::kHierarchical}) {
    for (CollectiveKind kind : classicCollectives(algo)) {
      for (bool in_place : {false, true}) {
        ClassicRequest request = testing::classicRequest(algo, kind, n, in_place, testing::middleRoot(kind, n));
        request.spec.chunk_factor = 0;
        request.topology = topology;
        Result<Algorithm> built = buildClassic(request);
        if (!built.isOk()) continue;  // e.g. hierarchical without nodes
        if (!seen.insert(programKey(*built)).second) continue;
        out.push_back(std::move(built).value());
      }
    }
  }
  // Tutel's 2DH all-to-all (declares both modes) on one node shape per rank count: nodes of g ranks, g the smallest
  // divisor of n with g * g >= n (3: 1 x 3, 5: 1 x 5, 8: 2 x 4, 16: 4 x 4). tests/comm/alltoallv_test.cc runs
  // more shapes through the communicator.
  if (topology == nullptr) {
    int g = 1;
    while (g * g < n || n % g != 0) ++g;
    ClassicRequest request = testing::classicRequest(ClassicAlgo::kTwoDimHierarchical, CollectiveKind::kAllToAll, n);
    request.spec.chunk_factor = 0;
    request.ranks_per_node = g;
    Result<Algorithm> built = buildClassic(request);
    if (built.isOk() && seen.insert(programKey(*built)).second) out.push_back(std::move(built).value());
  }
  return out;
}

std::vector<std::string> shippedTopologies(int gpus) {
  std::vector<std::string> out;
  for (const char* name :
       {"dgx1-v100", "dgx-a100-x1", "dgx-h100-x1", "ndv2-x1", "dgx2-x1", "dgx-a100-x2", "dgx-h100-x2", "ndv2-x2"}) {
    Result<Topology> t = loadTopologyOrShipped(name);
    if (t.isOk() && t->numGpus() == gpus) out.push_back(name);
  }
  return out;
}

TEST(Differential, Classical3Ranks) { runSuite(Suite{"classical n=3", 3, classicalAlgorithms(3, nullptr)}); }
TEST(Differential, Classical5Ranks) { runSuite(Suite{"classical n=5", 5, classicalAlgorithms(5, nullptr)}); }

void classicalOnTopologies(int gpus) {
  const auto names = shippedTopologies(gpus);
  ASSERT_GE(names.size(), 4u) << "shipped " << gpus << "-GPU topologies";
  std::vector<Algorithm> all = classicalAlgorithms(gpus, nullptr);
  std::set<std::string> seen;
  for (const Algorithm& a : all) seen.insert(programKey(a));
  for (const std::string& name : names) {
    Result<Topology> topology = loadTopologyOrShipped(name);
    ASSERT_TRUE(topology.isOk());
    for (Algorithm& a : classicalAlgorithms(gpus, &*topology)) {
      if (seen.insert(programKey(a)).second) all.push_back(std::move(a));
    }
  }
  runSuite(Suite{fmt::format("classical n={}", gpus), gpus, all});
}

TEST(Differential, Classical8Ranks) { classicalOnTopologies(8); }
TEST(Differential, Classical16Ranks) { classicalOnTopologies(16); }

void synthesizedOnTopologies(int gpus, SynthesisMethod method = SynthesisMethod::kTaccl) {
  const auto names = shippedTopologies(gpus);
  ASSERT_GE(names.size(), 4u);
  std::vector<Algorithm> all;
  for (const std::string& name : names) {
    Result<Topology> topology = loadTopologyOrShipped(name);
    ASSERT_TRUE(topology.isOk());
    for (CollectiveKind kind : {CollectiveKind::kAllGather, CollectiveKind::kReduceScatter, CollectiveKind::kAllReduce,
                                CollectiveKind::kAllToAll}) {
      SynthesisRequest request;
      request.topology = &*topology;
      request.method = method;
      request.collective = kind;
      request.time_limit_s = 20;
      Result<SynthesisResult> result = synthesize(request);
      ASSERT_TRUE(result.isOk()) << name << " " << collectiveName(kind) << ": " << result.status().toString();
      result->algorithm.name = fmt::format("{} ({})", result->algorithm.name, name);
      all.push_back(std::move(result->algorithm));
    }
  }
  runSuite(Suite{fmt::format("synthesized ({}) n={}", synthesisMethodName(method), gpus), gpus, all});
}

TEST(Differential, Synthesized8Ranks) { synthesizedOnTopologies(8); }
TEST(Differential, Synthesized16Ranks) { synthesizedOnTopologies(16); }
TEST(Differential, SynthesizedForest8Ranks) { synthesizedOnTopologies(8, SynthesisMethod::kForest); }
TEST(Differential, SynthesizedForest16Ranks) { synthesizedOnTopologies(16, SynthesisMethod::kForest); }

// SCCL's search on the single-node topologies: every collective least-steps, all-reduce (both of its movements)
// also least rounds per chunk.
void scclOnTopologies(int gpus) {
  std::vector<Algorithm> all;
  for (const std::string& name : shippedTopologies(gpus)) {
    Result<Topology> topology = loadTopologyOrShipped(name);
    ASSERT_TRUE(topology.isOk());
    if (topology->numNodes() > 1) continue;
    for (CollectiveKind kind :
         {CollectiveKind::kAllGather, CollectiveKind::kReduceScatter, CollectiveKind::kAllReduce}) {
      for (ScclObjective objective : {ScclObjective::kLatency, ScclObjective::kBandwidth}) {
        if (objective == ScclObjective::kBandwidth && kind != CollectiveKind::kAllReduce) continue;
        SynthesisRequest request;
        request.topology = &*topology;
        request.method = SynthesisMethod::kSccl;
        request.sccl_objective = objective;
        request.collective = kind;
        // The search is bounded by solver units (what DGX-1's 3/7/6 needs, ~15 M, and some), not by the clock: a
        // loaded machine takes longer but finds the same algorithm.
        request.budget_units = 30'000'000;
        request.time_limit_s = 300;
        Result<SynthesisResult> result = synthesize(request);
        ASSERT_TRUE(result.isOk()) << name << " " << collectiveName(kind) << ": " << result.status().toString();
        result->algorithm.name = fmt::format("{} ({})", result->algorithm.name, name);
        all.push_back(std::move(result->algorithm));
      }
    }
  }
  ASSERT_GE(all.size(), 4u);
  runSuite(Suite{fmt::format("synthesized (sccl) n={}", gpus), gpus, all});
}

TEST(Differential, SynthesizedSccl8Ranks) { scclOnTopologies(8); }
TEST(Differential, SynthesizedSccl16Ranks) { scclOnTopologies(16); }

}  // namespace
}  // namespace braid
