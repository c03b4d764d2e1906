// The NVLS all-reduce emulation (ncclNvlsProgram): structure, and per-link traffic checked against what
// NVLink SHARP moves: with n GPUs per node and an M-byte buffer, every GPU pushes M into the switch
// (multimem.ld_reduce reads each GPU's part of every share) plus its stored share M/n (multimem.st), and
// receives its reduced share M/n plus the multicast of all n shares, M. So each GPU<->switch link carries
// M(1 + 1/n) per direction. Across nodes each GPU exchanges its share M/n with the GPU of the same local
// index in the other node (NVLSTree's inter-node step).
#include <gtest/gtest.h>

#include <cstdint>

#include "braid/nccl_model.h"
#include "braid/simulate.h"
#include "braid/topology.h"
#include "support/small_topologies.h"

namespace braid {
namespace {

TEST(NvlsEmulation, SwitchBecomesARankAndLinksAreScaled) {
  const Topology t = testing::starTopology(4, 100.0, 0.0);
  auto program = ncclNvlsProgram(t, /*channels=*/2, /*rounds=*/4, /*nvls_efficiency=*/0.85);
  ASSERT_TRUE(program.isOk()) << program.status().toString();
  EXPECT_EQ(program->gpu_ranks, 4);
  EXPECT_EQ(program->algorithm.num_ranks, 5);
  EXPECT_EQ(program->topology.numGpus(), 5);
  EXPECT_EQ(program->topology.vertices[program->topology.gpuVertex(4)].kind, VertexKind::kGpu);
  for (const Link& l : program->topology.links) EXPECT_DOUBLE_EQ(l.bandwidth_gbps, 85.0);
  // 4 channels per emulated channel (contributions, reduced shares, stores, multicast): 2 x 4.
  EXPECT_EQ(program->algorithm.num_channels, 8);
}

TEST(NvlsEmulation, EachGpuLinkCarriesMTimesOnePlusOneOverN) {
  for (int n : {2, 4, 8}) {
    const Topology t = testing::starTopology(n, 100.0, 0.0);
    auto program = ncclNvlsProgram(t, 1, 2, 1.0);
    ASSERT_TRUE(program.isOk()) << program.status().toString();
    const uint64_t m = 8ull * 1024 * 1024;  // divisible by n * rounds * 4-byte elements
    SimOptions options;
    options.size_bytes = m;
    options.model = SimModel::ideal();
    auto result = simulate(program->algorithm, program->topology, options);
    ASSERT_TRUE(result.isOk()) << result.status().toString();
    const double expected = static_cast<double>(m) * (1.0 + 1.0 / n);
    ASSERT_EQ(result->stats.link_bytes.size(), program->topology.links.size());
    for (size_t l = 0; l < program->topology.links.size(); ++l) {
      EXPECT_NEAR(result->stats.link_bytes[l], expected, 1.0) << "n=" << n << " link " << l;
    }
    // No link can finish its M(1 + 1/n) bytes faster than at full bandwidth (1 GB/s = 1e3 B/us).
    EXPECT_GE(result->time_us, expected / (100.0 * 1e3) - 1e-6);
  }
}

TEST(NvlsEmulation, TwoNodesExchangeOneShareAcrossTheNetwork) {
  auto t = loadTopologyOrShipped("dgx-h100-x2");
  ASSERT_TRUE(t.isOk()) << t.status().toString();
  auto program = ncclNvlsProgram(t.value(), 1, 1, 1.0);
  ASSERT_TRUE(program.isOk()) << program.status().toString();
  EXPECT_EQ(program->algorithm.num_ranks, 18);
  EXPECT_EQ(program->algorithm.name, "nccl-nvlstree");
  const uint64_t m = 16ull * 1024 * 1024;
  SimOptions options;
  options.size_bytes = m;
  options.model = SimModel::ideal();
  auto result = simulate(program->algorithm, program->topology, options);
  ASSERT_TRUE(result.isOk()) << result.status().toString();
  // Expected network bytes: every GPU sends its share M/8 to its peer; each route crosses some net links.
  double expected_net = 0;
  const Topology& pt = program->topology;
  for (int a = 0; a < 2; ++a) {
    for (int j = 0; j < 8; ++j) {
      const int src = pt.vertices[pt.nodes[a].gpus[j]].rank;
      const int dst = pt.vertices[pt.nodes[1 - a].gpus[j]].rank;
      auto route = pt.route(src, dst);
      ASSERT_TRUE(route.has_value());
      int net_links = 0;
      for (int l : route->links) net_links += pt.links[l].kind == LinkKind::kNet ? 1 : 0;
      EXPECT_GE(net_links, 1);
      expected_net += net_links * static_cast<double>(m) / 8;
    }
  }
  double net = 0;
  for (size_t l = 0; l < pt.links.size(); ++l)
    net += pt.links[l].kind == LinkKind::kNet ? result->stats.link_bytes[l] : 0;
  EXPECT_NEAR(net, expected_net, 16.0);
}

TEST(NvlsEmulation, RefusesWhatItCannotExpress) {
  auto dgx1 = loadTopologyOrShipped("dgx1-v100");  // hybrid cube mesh, no NVSwitch
  ASSERT_TRUE(dgx1.isOk());
  auto r = ncclNvlsProgram(dgx1.value(), 1, 1, 0.85);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  const Topology t = testing::starTopology(4, 100.0, 0.0);
  EXPECT_EQ(ncclNvlsProgram(t, 2, 1, 0.85).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ncclNvlsProgram(t, 1, 1, 0.0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_DOUBLE_EQ(ncclNvlsEfficiency(2), 0.85);
  EXPECT_DOUBLE_EQ(ncclNvlsEfficiency(1), 0.0);
}

}  // namespace
}  // namespace braid
