// NCCL 2.28's tuning model (ncclPredict) and its view of shipped topologies (ncclSystem). Every expected value is
// worked out by hand below from the constants of nccl@2.28.9 src/graph/tuning.cc and search.cc as listed in
// ../shared/reference/nccl_plugins.md §4 (base/hw latencies §4.2, refinements §4.3, latency §4.4, search §4.5).
#include "braid/nccl_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "braid/topology.h"

namespace braid {
namespace {

constexpr uint64_t kKiB = 1024, kMiB = 1024 * 1024, kGiB = 1024ull * 1024 * 1024;

const NcclEstimate& estimate(const NcclPrediction& p, NcclAlgo algo, Protocol proto) {
  for (const NcclEstimate& e : p.all) {
    if (e.algo == algo && e.protocol == proto) return e;
  }
  static NcclEstimate none;
  ADD_FAILURE() << "no estimate for " << ncclAlgoName(algo) << "/" << protocolName(proto);
  return none;
}

Topology shipped(const std::string& name) {
  Result<Topology> t = loadTopologyOrShipped(name);
  EXPECT_TRUE(t.isOk()) << t.status().toString();
  return t.isOk() ? std::move(t).value() : Topology{};
}

// §4.6's system written out by hand: 8 A100 on one NVSwitch node, 12 channels x 20 GB/s for rings and trees.
NcclSystem a100Node() {
  NcclSystem s;
  s.num_ranks = 8;
  s.num_nodes = 1;
  s.ranks_per_node = 8;
  s.arch = 1;
  s.arch_name = "Ampere";
  s.cpu_vendor = "AMD";
  s.ring = NcclGraph{12, 20, 0, "NVL", "", 0};
  s.tree = s.ring;
  return s;
}

TEST(NcclNames, RoundTrip) {
  for (int a = 0; a < kNumNcclAlgos; ++a) {
    const NcclAlgo algo = static_cast<NcclAlgo>(a);
    Result<NcclAlgo> parsed = parseNcclAlgo(ncclAlgoName(algo));
    ASSERT_TRUE(parsed.isOk());
    EXPECT_EQ(*parsed, algo);
  }
  EXPECT_EQ(*parseNcclAlgo("nvlstree"), NcclAlgo::kNvlsTree);
  EXPECT_FALSE(parseNcclAlgo("butterfly").isOk());
  NcclPrediction p;
  p.choice.algo = NcclAlgo::kRing;
  p.choice.protocol = Protocol::kLL128;
  EXPECT_EQ(p.choiceName(), "Ring/LL128");
}

TEST(NcclPredict, WorkedExampleRingSimple) {
  // §4.6: busBw = 12 x 20 = 240; algBw = 240 x 8 / (2 x 7) = 137.142857; latency = base 8.4 + 14 steps x
  // NVLink Ring/Simple 3.4 = 56 us; 1 MiB -> 56 + 1048576 / (1000 x 137.142857) = 56 + 7.645833 us.
  Result<NcclPrediction> p = ncclPredict(a100Node(), CollectiveKind::kAllReduce, kMiB);
  ASSERT_TRUE(p.isOk()) << p.status().toString();
  const NcclEstimate& e = estimate(*p, NcclAlgo::kRing, Protocol::kSimple);
  EXPECT_NEAR(e.bus_bw_gbps, 240.0, 1e-9);
  EXPECT_NEAR(e.alg_bw_gbps, 240.0 * 8 / 14, 1e-9);
  EXPECT_NEAR(e.latency_us, 56.0, 1e-9);
  EXPECT_NEAR(e.time_us, 56.0 + 1048576.0 / (1000.0 * 240.0 * 8 / 14), 1e-9);
}

TEST(NcclPredict, LowLatencyProtocolCaps) {
  Result<NcclPrediction> p = ncclPredict(a100Node(), CollectiveKind::kAllReduce, kMiB);
  ASSERT_TRUE(p.isOk());
  // Ring/LL: min(llMaxBw Ampere 1 node = 87.7, 240 x 0.5 = 120) = 87.7; latency 6.6 + 14 x 0.6 = 15.0.
  const NcclEstimate& ll = estimate(*p, NcclAlgo::kRing, Protocol::kLL);
  EXPECT_NEAR(ll.bus_bw_gbps, 87.7, 1e-9);
  EXPECT_NEAR(ll.alg_bw_gbps, 87.7 * 8 / 14, 1e-9);
  EXPECT_NEAR(ll.latency_us, 15.0, 1e-9);
  // Ring/LL128: min(240 x 0.92 = 220.8, 12 x perChMaxRingLL128Bw 20 = 240) = 220.8; latency 14 + 14 x 1.9 = 40.6.
  const NcclEstimate& ll128 = estimate(*p, NcclAlgo::kRing, Protocol::kLL128);
  EXPECT_NEAR(ll128.bus_bw_gbps, 220.8, 1e-9);
  EXPECT_NEAR(ll128.latency_us, 40.6, 1e-9);
}

TEST(NcclPredict, TreeCorrectionFactor) {
  // Tree all-reduce, 12 x 20 = 240: Simple min(240 x 0.92, 12 x perChMaxTreeBw 24 = 288) = 220.8, algBw x 0.5 =
  // 110.4; at 1 MiB log2(2^20 / 64) = 14 -> Simple correction 0.5 -> 55.2 GB/s.
  // Latency: 8.4 + 2 x ((8 - 1) x NVLink Tree/Simple 4.0 + log2(1) x ...) = 64.4 us.
  Result<NcclPrediction> p = ncclPredict(a100Node(), CollectiveKind::kAllReduce, kMiB);
  ASSERT_TRUE(p.isOk());
  const NcclEstimate& tree = estimate(*p, NcclAlgo::kTree, Protocol::kSimple);
  EXPECT_NEAR(tree.bus_bw_gbps, 220.8, 1e-9);
  EXPECT_NEAR(tree.alg_bw_gbps, 55.2, 1e-9);
  EXPECT_NEAR(tree.latency_us, 64.4, 1e-9);
  EXPECT_NEAR(tree.time_us, 64.4 + 1048576.0 / 55200.0, 1e-9);
  // Tree/LL: min(220.8 / 3.8, 87.7) = 58.105..; at 1 KiB log2(16) = 4 -> LL correction 0.9; latency
  // 6.8 + 2 x 7 x 0.6 = 15.2.
  Result<NcclPrediction> small = ncclPredict(a100Node(), CollectiveKind::kAllReduce, kKiB);
  ASSERT_TRUE(small.isOk());
  const NcclEstimate& tree_ll = estimate(*small, NcclAlgo::kTree, Protocol::kLL);
  EXPECT_NEAR(tree_ll.bus_bw_gbps, 220.8 / 3.8, 1e-9);
  EXPECT_NEAR(tree_ll.alg_bw_gbps, 220.8 / 3.8 * 0.5 * 0.9, 1e-9);
  EXPECT_NEAR(tree_ll.latency_us, 15.2, 1e-9);
  // Tree/LL128 on one node: min(220.8 x 7/9, 12 x 20) = 171.733..
  EXPECT_NEAR(estimate(*small, NcclAlgo::kTree, Protocol::kLL128).bus_bw_gbps, 220.8 * 7 / 9, 1e-9);
  // 1 KiB: Ring/LL 15 + 1024 / 50114 = 15.02 us beats Tree/LL 15.2 + 1024 / 26147 = 15.24 us.
  EXPECT_EQ(small->choiceName(), "Ring/LL");
}

TEST(NcclPredict, AllGatherUsesRingStepsAndNoTree) {
  // All-gather: nsteps = 7: algBw = 240 x 8 / 7; latency 8.4 + 7 x 3.4 = 32.2 (Ring/Simple); Tree is not offered.
  Result<NcclPrediction> p = ncclPredict(a100Node(), CollectiveKind::kAllGather, 64 * kMiB);
  ASSERT_TRUE(p.isOk());
  const NcclEstimate& ring = estimate(*p, NcclAlgo::kRing, Protocol::kSimple);
  EXPECT_NEAR(ring.alg_bw_gbps, 240.0 * 8 / 7, 1e-9);
  EXPECT_NEAR(ring.latency_us, 32.2, 1e-9);
  EXPECT_EQ(estimate(*p, NcclAlgo::kTree, Protocol::kSimple).time_us, -1);
  EXPECT_EQ(estimate(*p, NcclAlgo::kPat, Protocol::kSimple).time_us, -1);  // 8 GPUs per node: no PAT
}

TEST(NcclPredict, AllToAllIsUnsupported) {
  Result<NcclPrediction> p = ncclPredict(a100Node(), CollectiveKind::kAllToAll, kMiB);
  ASSERT_FALSE(p.isOk());
  EXPECT_EQ(p.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(p.status().message().find("send/recv"), std::string::npos);
}

TEST(NcclPredict, OneRankIsALocalCopy) {
  NcclSystem s = a100Node();
  s.num_ranks = s.ranks_per_node = 1;
  Result<NcclPrediction> p = ncclPredict(s, CollectiveKind::kAllReduce, kMiB);
  ASSERT_TRUE(p.isOk());
  EXPECT_EQ(p->choiceName(), "Ring/Simple");
  EXPECT_EQ(p->choice.time_us, 0);
}

TEST(NcclSystem, DgxA100RingsMatchTheWorkedExample) {
  // 12 NVLinks x 20 GB/s = 240 GB/s per GPU. Pass 1 starts at the first intra speed, 40: 240 / 40 = 6 rings
  // = 240 GB/s = the GPU's total -> perfect. 40 >= 25 on SM80: channels doubled at half speed -> 12 x 20.
  NcclSystem s = *ncclSystem(shipped("dgx-a100-x1"));
  EXPECT_EQ(s.arch_name, "Ampere");
  EXPECT_EQ(s.num_nodes, 1);
  EXPECT_EQ(s.ring.channels, 12);
  EXPECT_DOUBLE_EQ(s.ring.bw_intra, 20);
  EXPECT_EQ(s.ring.type_intra, "NVL");
  EXPECT_EQ(s.tree.channels, 12);
  EXPECT_FALSE(s.nvls);  // Ampere has no NVLink SHARP
  EXPECT_EQ(s.cpu_vendor, "AMD");
  // So the model gives §4.6's Ring/Simple numbers on the shipped topology too.
  Result<NcclPrediction> p = ncclPredict(s, CollectiveKind::kAllReduce, kMiB);
  ASSERT_TRUE(p.isOk());
  EXPECT_NEAR(estimate(*p, NcclAlgo::kRing, Protocol::kSimple).time_us, 56.0 + 1048576.0 / (1000.0 * 240 * 8 / 14),
              1e-9);
}

TEST(NcclSystem, Dgx1UsesSixLaneDisjointNvlinkRings) {
  // SM70 list starts at 40: only the NV2 pairs carry 40 GB/s and they form one Hamiltonian cycle
  // (0-3-2-1-5-6-7-4), so 2 rings (one per direction) = 80 GB/s. 30: still 2 rings. 20 (20/40 > 0.49): every
  // NVLink lane carries a ring, 6 lanes per GPU each way -> 6 rings x 20 = 120 = the GPU's NVLink total ->
  // perfect. 20 < 25: no duplication.
  NcclSystem s = *ncclSystem(shipped("dgx1-v100"));
  EXPECT_EQ(s.arch_name, "Volta");
  EXPECT_EQ(s.ring.channels, 6);
  EXPECT_DOUBLE_EQ(s.ring.bw_intra, 20);
  EXPECT_EQ(s.ring.type_intra, "NVL");
}

TEST(NcclSystem, DgxH100RingsAndNvls) {
  // SM90: 18 x 20.6 = 370.8 GB/s. Rings: 60 -> 6 rings = 360 < 370.8 (not perfect); 50 -> 7 x 50 = 350, 40 -> 9 x
  // 40 = 360, 30 -> 12 x 30 = 360 (ties keep the first); 24 / 60 < 0.49 stops. 6 x 60 doubled (Hopper, 60 >= 50)
  // -> 12 x 30.
  // NVLS: 8 channels forced (one per GPU); each GPU heads one channel, so its switch links carry 9 x speed:
  // 9 x 50 > 370.8 >= 9 x 40 -> bwIntra 40; pass 2 raises bwInter while below 2 x 40: 50, 60 (list top) -> 60.
  NcclSystem s = *ncclSystem(shipped("dgx-h100-x1"));
  EXPECT_EQ(s.arch_name, "Hopper");
  EXPECT_EQ(s.ring.channels, 12);
  EXPECT_DOUBLE_EQ(s.ring.bw_intra, 30);
  ASSERT_TRUE(s.nvls);
  EXPECT_EQ(s.nvls_graph.channels, 8);
  EXPECT_DOUBLE_EQ(s.nvls_graph.bw_intra, 40);
  EXPECT_DOUBLE_EQ(s.nvls_graph.bw_inter, 60);
  // NVLS/Simple all-reduce: per channel min(40 x 0.85 x 7/8 x 2 = 59.5, 60) -> busBw 8 x 59.5 = 476, algBw
  // 476 x 8 / 14 = 272; latency = NVLink NVLS/Simple 25 us. 256 MiB: 25 + 268435456 / 272000 us, and it beats
  // Ring/Simple (algBw 360 x 8 / 14 = 205.7, latency 56).
  Result<NcclPrediction> p = ncclPredict(s, CollectiveKind::kAllReduce, 256 * kMiB);
  ASSERT_TRUE(p.isOk());
  const NcclEstimate& nvls = estimate(*p, NcclAlgo::kNvls, Protocol::kSimple);
  EXPECT_NEAR(nvls.bus_bw_gbps, 476, 1e-9);
  EXPECT_NEAR(nvls.alg_bw_gbps, 272, 1e-9);
  EXPECT_NEAR(nvls.time_us, 25 + 268435456.0 / 272000.0, 1e-9);
  EXPECT_EQ(p->choiceName(), "NVLS/Simple");
  EXPECT_EQ(estimate(*p, NcclAlgo::kNvls, Protocol::kLL).time_us, -1);          // NVLS is Simple only
  EXPECT_EQ(estimate(*p, NcclAlgo::kNvlsTree, Protocol::kSimple).time_us, -1);  // NVLSTree: several nodes only
}

TEST(NcclSystem, ChoiceMovesFromLLToSimpleWithSize) {
  for (const char* name : {"dgx1-v100", "dgx-a100-x1"}) {
    NcclSystem s = *ncclSystem(shipped(name));
    Result<NcclPrediction> small = ncclPredict(s, CollectiveKind::kAllReduce, kKiB);
    Result<NcclPrediction> large = ncclPredict(s, CollectiveKind::kAllReduce, kGiB);
    ASSERT_TRUE(small.isOk() && large.isOk());
    EXPECT_EQ(small->choice.protocol, Protocol::kLL) << name << ": " << small->choiceName();
    EXPECT_EQ(large->choiceName(), "Ring/Simple") << name;
    // The choice is the fastest enabled estimate.
    for (const NcclEstimate& e : large->all) {
      if (e.time_us >= 0) {
        EXPECT_LE(large->choice.time_us, e.time_us);
      }
    }
  }
}

TEST(NcclSystem, MultiNodeRingLatencyCountsInterNodeSteps) {
  // dgx-a100-x2: PCIe Gen4 24 GB/s is the widest GPU -> NIC path, so the inter list starts at 24; each 25 GB/s
  // HDR NIC carries one 24 GB/s channel -> 8 channels (192 < 240: not perfect); down to 12 (12/24 >= 0.49) two
  // channels per NIC give 16 x 12 = 192, a tie -> 8 x 24, typeInter PIX (NIC and GPU on one PCIe switch).
  NcclSystem s = *ncclSystem(shipped("dgx-a100-x2"));
  EXPECT_EQ(s.num_nodes, 2);
  EXPECT_EQ(s.ring.channels, 8);
  EXPECT_DOUBLE_EQ(s.ring.bw_intra, 24);
  EXPECT_DOUBLE_EQ(s.ring.bw_inter, 24);
  EXPECT_EQ(s.ring.type_inter, "PIX");
  EXPECT_DOUBLE_EQ(s.ring.latency_inter_us, 1.3);  // the NIC's network link alpha
  // All-reduce Ring/Simple, 16 ranks on 2 nodes: nsteps 30, nInterSteps 2 x (2 - 1) = 2.
  //   intraLat = max(NVLink 3.4, AMD net overhead 2 x 3) = 6; interLat = NET Ring/Simple 14 + 1.3 + flush 1.3 = 16.6
  //   latency = 8.4 + 28 x 6 + 2 x 16.6 = 209.6; plateau (1 GiB / (8 x 16) >= 64): x 1.4 (Ampere) = 293.44.
  //   busBw = 8 x bwIntra 24 (<= 2 nodes) = 192, algBw = 192 x 16 / 30 = 102.4.
  Result<NcclPrediction> p = ncclPredict(s, CollectiveKind::kAllReduce, kGiB);
  ASSERT_TRUE(p.isOk());
  const NcclEstimate& ring = estimate(*p, NcclAlgo::kRing, Protocol::kSimple);
  EXPECT_NEAR(ring.latency_us, 209.6 * 1.4, 1e-9);
  EXPECT_NEAR(ring.alg_bw_gbps, 102.4, 1e-9);
  EXPECT_NEAR(ring.time_us, 209.6 * 1.4 + 1073741824.0 / 102400.0, 1e-6);
  // All-gather Ring/LL: nsteps 15, nInterSteps 1: intraLat max(0.6, 2) = 2, interLat 2.7 + 1.3 = 4 (no flush
  // for LL): 6.6 + 14 x 2 + 4 = 38.6.
  Result<NcclPrediction> ag = ncclPredict(s, CollectiveKind::kAllGather, kMiB);
  ASSERT_TRUE(ag.isOk());
  EXPECT_NEAR(estimate(*ag, NcclAlgo::kRing, Protocol::kLL).latency_us, 38.6, 1e-9);
  // 2 nodes, Ampere: LL cap is the CPU row (AMD = 1) and column N2: 22.5.
  EXPECT_NEAR(estimate(*ag, NcclAlgo::kRing, Protocol::kLL).bus_bw_gbps, 22.5, 1e-9);
}

TEST(NcclSystem, DgxH100TwoNodesRingAndNvlsTree) {
  // Rings: PCIe Gen5 48 GB/s is the widest GPU -> NIC path, so the SM90 inter list starts at 48. A channel is
  // NIC -> first GPU -> ... -> last GPU -> NIC: the last GPU sends nothing over NVLink, so with 8 channels (one per
  // 50 GB/s NIC) each GPU's NVLink carries at most 7 x 48 = 336 <= 370.8 -> 8 x 48 = 384 >= 370.8: perfect.
  // Hopper, 48 < 50 and 8 > 4 channels: not duplicated.
  NcclSystem s = *ncclSystem(shipped("dgx-h100-x2"));
  EXPECT_EQ(s.ring.channels, 8);
  EXPECT_DOUBLE_EQ(s.ring.bw_intra, 48);
  EXPECT_EQ(s.cpu_vendor, "Intel");
  // NVLS: heads = the NICs' nearest GPUs (8 distinct); a head's switch links carry (k + 1) x speed: 48 -> k = 6,
  // 45 -> 7, 42 -> 7, 40 -> 8 = every GPU: done, bwIntra 40; pass 2 raises bwInter while below 80 and the NIC
  // paths carry it: 42, 45, 48 (top of the list).
  ASSERT_TRUE(s.nvls);
  EXPECT_EQ(s.nvls_graph.channels, 8);
  EXPECT_DOUBLE_EQ(s.nvls_graph.bw_intra, 40);
  EXPECT_DOUBLE_EQ(s.nvls_graph.bw_inter, 48);
  // NVLSTree all-reduce, 2 nodes: per channel min(40 x 0.85 x 7/8 x 2 = 59.5, 48 x 2 = 96, perChMaxNVLSTreeBw
  // Hopper N2 57.7) = 57.7; busBw 8 x 57.7 = 461.6; algBw x 16/30. Latency: intraLat NVLink NVLSTree/Simple 25
  // + 2 x log2(2) x (NET NVLSTree/Simple 20.9 + NIC 1.3 + flush 1.3) = 25 + 47 = 72.
  Result<NcclPrediction> p = ncclPredict(s, CollectiveKind::kAllReduce, kGiB);
  ASSERT_TRUE(p.isOk());
  const NcclEstimate& tree = estimate(*p, NcclAlgo::kNvlsTree, Protocol::kSimple);
  EXPECT_NEAR(tree.bus_bw_gbps, 461.6, 1e-9);
  EXPECT_NEAR(tree.alg_bw_gbps, 461.6 * 16 / 30, 1e-9);
  EXPECT_NEAR(tree.latency_us, 72, 1e-9);
  EXPECT_EQ(estimate(*p, NcclAlgo::kNvls, Protocol::kSimple).time_us, -1);  // NVLS across nodes needs CollNet
  EXPECT_EQ(p->choiceName(), "NVLSTree/Simple");  // 246 GB/s algBw vs Ring/Simple 384 x 16/30 = 204.8
}

TEST(NcclSystem, PatNeedsOneGpuPerNode) {
  // Four nodes of one A100, one 200 Gb/s NIC each, on one switch (alpha 1.3 per hop).
  const std::string yaml = R"(name: one-gpu-nodes
templates:
  box:
    gpus: {count: 1, model: A100-SXM4-40GB}
    nics: {count: 1, model: ConnectX-6}
    switches:
      - {name: pcie0, kind: pcie_switch}
      - {name: cpu0, kind: cpu, model: Xeon Gold 6248}
    links:
      - {a: [gpu0, nic0], b: pcie0, kind: pcie, bandwidth: 24, alpha: 1.0}
      - {a: pcie0, b: cpu0, kind: pcie, bandwidth: 24, alpha: 1.0}
nodes: {template: box, count: 4}
network: {kind: switch, speed_gbit: 200, alpha: 1.3}
)";
  Result<Topology> t = readTopologyYaml(yaml, "one-gpu-nodes.yaml");
  ASSERT_TRUE(t.isOk()) << t.status().toString();
  NcclSystem s = *ncclSystem(*t);
  EXPECT_EQ(s.num_nodes, 4);
  EXPECT_EQ(s.ranks_per_node, 1);
  Result<NcclPrediction> p = ncclPredict(s, CollectiveKind::kAllGather, kMiB);
  ASSERT_TRUE(p.isOk());
  // PAT latency: 8 + log2(4) x interLat / 3.5 + 4 ranks x 2.8, with ppn = 1 -> interLat = NET Tree/Simple 14
  // + NIC latency 1.3 + flush 1.3 = 16.6: 8 + 2 x 16.6 / 3.5 + 11.2.
  const NcclEstimate& pat = estimate(*p, NcclAlgo::kPat, Protocol::kSimple);
  ASSERT_GE(pat.time_us, 0);
  EXPECT_NEAR(pat.latency_us, 8 + 2 * 16.6 / 3.5 + 11.2, 1e-9);
  // PAT bandwidth: tree channels x bwInter (4 nodes > 2) x 0.75, not converted to algBw.
  EXPECT_NEAR(pat.alg_bw_gbps, s.tree.channels * s.tree.bw_inter * 0.75, 1e-9);
  EXPECT_EQ(estimate(*p, NcclAlgo::kPat, Protocol::kLL).time_us, -1);
  // Eight GPUs per node: no PAT.
  NcclSystem dgx = *ncclSystem(shipped("dgx-a100-x2"));
  EXPECT_EQ(estimate(*ncclPredict(dgx, CollectiveKind::kAllGather, kMiB), NcclAlgo::kPat, Protocol::kSimple).time_us,
            -1);
}

TEST(NcclSystem, UnknownGpuModelIsAmpereWithANote) {
  NcclSystem s = *ncclSystem(shipped("pcie-2s4g"));
  EXPECT_EQ(s.arch, 1);
  bool noted = false;
  for (const std::string& note : s.notes) noted = noted || note.find("PCIe GPU") != std::string::npos;
  EXPECT_TRUE(noted);
  // No NVLink: the ring has to cross the 10 GB/s inter-socket link, so typeIntra is SYS and one channel of 10.
  EXPECT_EQ(s.ring.type_intra, "SYS");
  EXPECT_EQ(s.ring.channels, 1);
  EXPECT_DOUBLE_EQ(s.ring.bw_intra, 10);
  // LL128 needs typeIntra <= NVB: disabled here.
  Result<NcclPrediction> p = ncclPredict(s, CollectiveKind::kAllReduce, kMiB);
  ASSERT_TRUE(p.isOk());
  EXPECT_EQ(estimate(*p, NcclAlgo::kRing, Protocol::kLL128).time_us, -1);
  // PCI latencies: Ring/Simple 8.4 + 14 x 5.7.
  EXPECT_NEAR(estimate(*p, NcclAlgo::kRing, Protocol::kSimple).latency_us, 8.4 + 14 * 5.7, 1e-9);
}

}  // namespace
}  // namespace braid
