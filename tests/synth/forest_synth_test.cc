// The tree-packing method end to end (SynthesisMethod::kForest): its rate against the bounds computed by other
// means (src/cost: the cut bound by Dinkelbach iteration over min cuts, the route LP over GPU pairs), the algorithms
// it returns, determinism, and its errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "braid/bounds.h"
#include "braid/simulate.h"
#include "braid/synthesize.h"
#include "braid/topology.h"
#include "synthesizer/forest.h"

namespace braid {
namespace {

Topology shipped(const std::string& name) {
  Result<Topology> t = loadTopologyOrShipped(name);
  EXPECT_TRUE(t.isOk()) << name << ": " << t.status().toString();
  return t.isOk() ? *t : Topology{};
}

// A forest-method request for `kind` on `t`.
SynthesisRequest forestRequest(const Topology& t, CollectiveKind kind) {
  SynthesisRequest request;
  request.topology = &t;
  request.collective = kind;
  request.method = SynthesisMethod::kForest;
  return request;
}

// All-gather time at the optimal tree rate for `size` bytes (nccl-tests size: size / n per rank), microseconds.
double forestAllGatherUs(const Topology& t, uint64_t size, bool transposed = false) {
  Result<synth::LogicalTopology> logical = synth::buildCompleteLogicalTopology(t, transposed);
  EXPECT_TRUE(logical.isOk());
  Result<synth::ForestRate> rate = synth::forestRate(*logical, 60);
  EXPECT_TRUE(rate.isOk()) << rate.status().toString();
  return static_cast<double>(size) / t.numGpus() / (rate->rate_gbps * 1e3);
}

TEST(ForestSynth, DgxH100RateIsNvlinkOverSevenPeers) {
  // 18 NVLinks x 20.6 GB/s into the NVSwitch per GPU; every GPU takes in 7 shares: 370.8 / 7 GB/s per root.
  const Topology t = shipped("dgx-h100-x1");
  const uint64_t size = uint64_t{256} << 20;
  EXPECT_NEAR(forestAllGatherUs(t, size), size / 8.0 / (370.8 / 7 * 1e3), 1e-6);
}

TEST(ForestSynth, RateMeetsTheBoundsWhereTheyBindAndNeverBeatsThem) {
  const uint64_t size = uint64_t{256} << 20;
  // Topologies where the cut or the route LP is reached exactly by trees along routes (values of src/cost).
  for (const char* name :
       {"dgx1-v100", "dgx-a100-x2", "pcie-2s4g", "ndv2-x2", "dgx2-x1", "dgx-h100-x1", "dgx-h100-x4", "ndv2-x4"}) {
    const Topology t = shipped(name);
    Result<CollectiveBound> bound = collectiveBound(t, CollectiveKind::kAllGather, size);
    ASSERT_TRUE(bound.isOk()) << name;
    const double forest_us = forestAllGatherUs(t, size);
    EXPECT_GE(forest_us, bound->bandwidth_us * (1 - 1e-6)) << name;  // no algorithm beats a valid bound
    EXPECT_NEAR(forest_us, bound->bandwidth_us, 1e-6 * bound->bandwidth_us) << name;
    Result<CollectiveBound> rs = collectiveBound(t, CollectiveKind::kReduceScatter, size);
    ASSERT_TRUE(rs.isOk());
    EXPECT_NEAR(forestAllGatherUs(t, size, /*transposed=*/true), rs->bandwidth_us, 1e-6 * rs->bandwidth_us) << name;
  }
}

TEST(ForestSynth, EveryCollectiveVerifiesOnShippedTopologies) {
  for (const char* name : {"dgx1-v100", "dgx-a100-x2", "pcie-2s4g"}) {
    const Topology t = shipped(name);
    for (CollectiveKind kind :
         {CollectiveKind::kAllGather, CollectiveKind::kReduceScatter, CollectiveKind::kAllReduce}) {
      Result<SynthesisResult> result = synthesize(forestRequest(t, kind));
      ASSERT_TRUE(result.isOk()) << name << " " << collectiveName(kind) << ": " << result.status().toString();
      EXPECT_TRUE(verify(result->algorithm).ok);
      EXPECT_EQ(result->algorithm.num_ranks, t.numGpus());
      EXPECT_EQ(result->algorithm.provenance.generator, "braid synth --method forest");
      bool packed = false;
      for (const StageReport& stage : result->stages) packed |= stage.name.rfind("packing", 0) == 0;
      EXPECT_TRUE(packed) << name;
    }
  }
}

TEST(ForestSynth, AllReduceWhoseTwoPartsWantDifferentTreeCounts) {
  // Uneven PCIe directions: the all-gather trees (downlinks) and the reduce-scatter trees (uplinks) have different
  // rates; the reduce-scatter part takes the all-gather part's k so that both cut the buffer alike.
  Topology t;
  t.name = "uneven-pcie";
  const int node = t.addNode("node0");
  const int sw = t.addVertex(VertexKind::kPcieSwitch, node, "sw0");
  const double up[4] = {24, 24, 16, 24}, down[4] = {12, 24, 24, 24};
  for (int g = 0; g < 4; ++g) {
    const int v = t.addVertex(VertexKind::kGpu, node);
    t.addLink(v, sw, LinkKind::kPcie, up[g], 1.0);
    t.addLink(sw, v, LinkKind::kPcie, down[g], 1.0);
  }
  Result<SynthesisResult> result = synthesize(forestRequest(t, CollectiveKind::kAllReduce));
  ASSERT_TRUE(result.isOk()) << result.status().toString();
  EXPECT_TRUE(verify(result->algorithm).ok);
}

TEST(ForestSynth, SameInputsGiveTheSameAlgorithm) {
  const Topology t = shipped("dgx-a100-x2");
  std::string first;
  for (int run = 0; run < 2; ++run) {
    Result<SynthesisResult> result = synthesize(forestRequest(t, CollectiveKind::kAllReduce));
    ASSERT_TRUE(result.isOk()) << result.status().toString();
    result->algorithm.provenance = Provenance{};
    const std::string xml = writeMscclXml(result->algorithm);
    if (run == 0) {
      first = xml;
    } else {
      EXPECT_EQ(xml, first);
    }
  }
}

// The all-to-all of the max-concurrent flow: on a DGX-1 half the GPU pairs lack an NVLink, so the flow relays them
// through NVLink neighbours; the algorithm verifies, its fluid model ends near the optimum, and Braid's simulator
// runs it within 5 % of the flow's optimum (the route-free cut bound of the real machine binds there too).
TEST(ForestSynth, AllToAllFlowOnDgx1) {
  const Topology t = shipped("dgx1-v100");
  SynthesisRequest request = forestRequest(t, CollectiveKind::kAllToAll);
  request.size_bytes = uint64_t{256} << 20;
  request.forest_pieces = 8;
  Result<SynthesisResult> result = synthesize(request);
  ASSERT_TRUE(result.isOk()) << result.status().toString();
  EXPECT_EQ(result->chunkup, 8);
  Result<AllToAllFlow> flow = allToAllFlow(t);
  ASSERT_TRUE(flow.isOk());
  const double optimum_us = flow->us_per_byte * static_cast<double>(request.size_bytes);
  int relayed = 0;
  for (const auto& list : flow->paths) {
    for (const auto& p : list) relayed += p.ranks.size() > 2 ? 1 : 0;
  }
  EXPECT_GT(relayed, 0);
  Result<CutBound> cut = allToAllCutBound(t, static_cast<double>(request.size_bytes));
  ASSERT_TRUE(cut.isOk());
  EXPECT_GE(optimum_us, cut->time_us * (1 - 1e-9));
  SimOptions options;
  options.size_bytes = request.size_bytes;
  Result<SimResult> sim = simulate(result->algorithm, t, options);
  ASSERT_TRUE(sim.isOk()) << sim.status().toString();
  EXPECT_GE(sim->time_us, optimum_us);
  EXPECT_LE(sim->time_us, 1.05 * optimum_us);
  // Above the LP's GPU count the method refuses with the limit named.
  Topology big;
  big.name = "big";
  const int node = big.addNode("node0");
  const int sw = big.addVertex(VertexKind::kNvSwitch, node, "sw");
  for (int i = 0; i <= kAllToAllFlowMaxGpus; ++i) {
    big.addDuplexLink(big.addVertex(VertexKind::kGpu, node), sw, LinkKind::kNvlink, 100, 0.5);
  }
  SynthesisRequest too_big = forestRequest(big, CollectiveKind::kAllToAll);
  EXPECT_EQ(synthesize(too_big).status().code(), StatusCode::kUnsupported);
  EXPECT_FALSE(forestMethodBuilds(CollectiveKind::kAllToAll, kAllToAllFlowMaxGpus + 1));
  EXPECT_TRUE(forestMethodBuilds(CollectiveKind::kAllToAll, kAllToAllFlowMaxGpus));
}

TEST(ForestSynth, RefusesWhatItDoesNotBuild) {
  const Topology t = shipped("dgx1-v100");
  SynthesisRequest request;
  request.topology = &t;
  request.method = SynthesisMethod::kForest;
  for (CollectiveKind kind : {CollectiveKind::kBroadcast, CollectiveKind::kReduce}) {
    request.collective = kind;
    Result<SynthesisResult> result = synthesize(request);
    ASSERT_FALSE(result.isOk());
    EXPECT_EQ(result.status().code(), StatusCode::kUnsupported) << collectiveName(kind);
  }
  request.collective = CollectiveKind::kAllGather;
  request.forest_pieces = -1;
  EXPECT_EQ(synthesize(request).status().code(), StatusCode::kInvalidArgument);
  request.forest_pieces = 4;
  request.forest_tolerance = 1.5;
  EXPECT_EQ(synthesize(request).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parseSynthesisMethod("forest"), SynthesisMethod::kForest);
  EXPECT_EQ(parseSynthesisMethod("taccl"), SynthesisMethod::kTaccl);
  EXPECT_FALSE(parseSynthesisMethod("blink").has_value());
}

TEST(ForestSynth, EqualSharesReachTheBoundOnMultiNodeMachines) {
  // Equal shares of every physical link among the kept pairs (what the simulator delivers when they send at once)
  // lose nothing against the LP's split here: the rate equals the bound src/cost computes by other means.
  const uint64_t size = uint64_t{256} << 20;
  for (const char* name : {"dgx-a100-x2", "dgx-h100-x4", "ndv2-x4"}) {
    const Topology t = shipped(name);
    Result<synth::LogicalTopology> logical = synth::buildCompleteLogicalTopology(t, false);
    ASSERT_TRUE(logical.isOk());
    Result<synth::ForestRate> split = synth::forestRate(*logical, 60);
    ASSERT_TRUE(split.isOk());
    Result<synth::ForestRate> equal = synth::forestEqualShareRate(*logical, &*split, 60);
    ASSERT_TRUE(equal.isOk()) << equal.status().toString();
    EXPECT_FALSE(equal->sharing.empty());
    Result<CollectiveBound> bound = collectiveBound(t, CollectiveKind::kAllGather, size);
    ASSERT_TRUE(bound.isOk());
    const double us = static_cast<double>(size) / t.numGpus() / (equal->rate_gbps * 1e3);
    EXPECT_NEAR(us, bound->bandwidth_us, 1e-6 * bound->bandwidth_us) << name;
  }
}

TEST(ForestSynth, EqualShareCapsSplitEveryLinkEvenly) {
  // dgx-a100-x1: every GPU reaches the NVSwitch over 240 GB/s and has 7 peers, so each pair gets 240 / 7 GB/s.
  const Topology t = shipped("dgx-a100-x1");
  Result<synth::LogicalTopology> logical = synth::buildCompleteLogicalTopology(t, false);
  ASSERT_TRUE(logical.isOk());
  const std::vector<double> caps = synth::equalShareCaps(*logical, std::vector<char>(logical->links.size(), 1));
  for (double c : caps) EXPECT_NEAR(c, 240.0 / 7, 1e-9);
  // Keeping only links out of rank 0 gives them 240 / 7 each as well (rank 0's uplink is the bottleneck) and
  // leaves the rest at 0.
  std::vector<char> keep(logical->links.size(), 0);
  for (int l : logical->out_links[0]) keep[l] = 1;
  const std::vector<double> star = synth::equalShareCaps(*logical, keep);
  for (const synth::LogicalLink& l : logical->links) EXPECT_NEAR(star[l.id], l.src == 0 ? 240.0 / 7 : 0, 1e-9);
}

TEST(ForestSynth, ScorerPicksTheLowestScoringCandidate) {
  const Topology t = shipped("dgx-a100-x2");
  SynthesisRequest request = forestRequest(t, CollectiveKind::kAllGather);
  // A scorer that prefers more chunks: the most pieces per tree must win, and every candidate is listed.
  request.score = [](const Algorithm& a, uint64_t) -> Result<double> {
    return -std::stod(a.provenance.extra.at("chunkup"));
  };
  request.score_name = "test scorer";
  Result<SynthesisResult> result = synthesize(request);
  ASSERT_TRUE(result.isOk()) << result.status().toString();
  EXPECT_EQ(result->chunkup % 32, 0);
  bool listed = false;
  for (const std::string& note : result->notes) listed |= note.find("scored by test scorer") != std::string::npos;
  EXPECT_TRUE(listed);
  // Fixed pieces: one candidate, no scoring.
  request.forest_pieces = 2;
  result = synthesize(request);
  ASSERT_TRUE(result.isOk());
  EXPECT_EQ(result->chunkup % 2, 0);
  EXPECT_LE(result->chunkup, 2 * 32);
  // A scorer that fails everywhere is an error naming why.
  request.forest_pieces = 0;
  request.score = [](const Algorithm&, uint64_t) -> Result<double> {
    return Status(StatusCode::kInternalError, "no simulator here");
  };
  result = synthesize(request);
  ASSERT_FALSE(result.isOk());
  EXPECT_NE(result.status().message().find("no simulator here"), std::string::npos) << result.status().toString();
}

}  // namespace
}  // namespace braid
