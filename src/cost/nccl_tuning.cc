// NCCL 2.28's analytical cost model (ncclPredict): nccl@2.28.9 src/graph/tuning.cc ncclTopoTuneModel (per
// algorithm/protocol bandwidth and latency) and ncclTopoGetAlgoTime, and src/enqueue.cc updateCollCostTable /
// topoGetAlgoInfo (which algorithms compete; the fastest wins). Constants and formulas: ../shared/reference/
// nccl_plugins.md §4.1-§4.4. Its input, the NcclSystem of NCCL's channel search, comes from nccl_search.cc.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "braid/nccl_model.h"
#include "cost/nccl_internal.h"

namespace braid {

// ---- names -----------------------------------------------------------------------------------------------

const char* ncclAlgoName(NcclAlgo algo) {
  switch (algo) {
    case NcclAlgo::kTree: return "Tree";
    case NcclAlgo::kRing: return "Ring";
    case NcclAlgo::kCollNetDirect: return "CollNetDirect";
    case NcclAlgo::kCollNetChain: return "CollNetChain";
    case NcclAlgo::kNvls: return "NVLS";
    case NcclAlgo::kNvlsTree: return "NVLSTree";
    case NcclAlgo::kPat: return "PAT";
  }
  return "?";
}

Result<NcclAlgo> parseNcclAlgo(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (int a = 0; a < kNumNcclAlgos; ++a) {
    std::string candidate = ncclAlgoName(static_cast<NcclAlgo>(a));
    std::transform(candidate.begin(), candidate.end(), candidate.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    if (candidate == lower) return static_cast<NcclAlgo>(a);
  }
  return invalidArgument(fmt::format(
      "unknown NCCL algorithm '{}': expected Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree or PAT", name));
}

std::string NcclPrediction::choiceName() const {
  return fmt::format("{}/{}", ncclAlgoName(choice.algo), protocolName(choice.protocol));
}

namespace {

using nccl::kMaxNvlsArity;
using nccl::pathTypeOf;

// ---- NCCL 2.28 constants (nccl@2.28.9 src/graph/tuning.cc ncclTunerConstantsDefaults; nccl_plugins.md §4.2) ----
// Index orders are NCCL's: algorithms Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT (= NcclAlgo);
// protocols LL, LL128, Simple; compute-capability rows Volta, Ampere, Hopper, Blackwell; node columns 1, 2, >= 4.
constexpr int kProtoLL = 0, kProtoLL128 = 1, kProtoSimple = 2;
constexpr int kTree = 0, kRing = 1, kCollNetDirect = 2, kCollNetChain = 3, kNvls = 4, kNvlsTree = 5, kPat = 6;
constexpr int kHwNvlink = 0, kHwPci = 1, kHwNet = 2;

constexpr double kBaseLat[kNumNcclAlgos][3] = {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0},      {0, 0, 0},
                                               {0, 0, 0},        {0, 0, 0},        {8.0, 8.0, 8.0}};
constexpr double kHwLat[3][kNumNcclAlgos][3] = {
    // NVLINK
    {{.6, 1.25, 4.0}, {.6, 1.9, 3.4}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 25}, {0, 0, 25}, {0, 0, 4.0}},
    // PCI
    {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 0}, {0, 0, 0}, {0, 0, 4.0}},
    // NET
    {{5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 31}, {0, 0, 30}, {0, 0, 18}, {0, 0, 20.9}, {0, 0, 14}},
};
// llMaxBws: row = GPU arch on one node; across nodes row 0 (Intel/other CPUs) or 1 (AMD or mixed CPUs).
constexpr double kLlMaxBw[4][3] = {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0}};
constexpr double kPerChMaxRingLL128Bw[4][3] = {
    {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 36.7}, {73.4, 34.6, 73.4}};
constexpr double kPerChMaxTreeLL128Bw[4][3] = {
    {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}};
constexpr double kPerChMaxTreeBw[4][3] = {
    {26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}};
constexpr double kPerChMaxNvlsTreeBw[4][3] = {
    {26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {0.0, 57.7, 45.5}, {0.0, 96.0, 43.8}};
constexpr double kNvlsEff[4] = {0.0, 0.0, 0.85, 0.74};
// treeCorrectionFactor[proto][log2(nBytes / 64)], 64 B .. 256 MiB (tuning.cc, applied in ncclTopoGetAlgoTime).
constexpr double kTreeCorrection[3][23] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9}};

int log2i(uint64_t x) {
  if (x == 0) return -1;
  int r = 0;
  while (x >>= 1) ++r;
  return r;
}

Protocol toProtocol(int p) {
  return p == kProtoLL ? Protocol::kLL : p == kProtoLL128 ? Protocol::kLL128 : Protocol::kSimple;
}

bool algoApplies(CollectiveKind coll, int a) {
  switch (coll) {
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kReduce: return a == kRing;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter: return a == kRing || a == kPat || a == kNvls || a == kCollNetDirect;
    case CollectiveKind::kAllReduce: return a != kPat;
    default: return false;
  }
}

// One ncclPredict call's system-wide quantities (tuning.cc ncclTopoTuneModel's locals).
struct Call {
  const NcclSystem& sys;
  CollectiveKind coll;
  int n = 0;
  int nodes = 1;
  bool ar = false;
  bool ag_rs = false;
  int arch = 0;
  int col = 0;     // node column: 1, 2, >= 4 nodes
  int ll_row = 0;  // llMaxBws row
  double ppn = 0;
  int ppn_int = 0;
  int nsteps = 0;
  int n_inter_steps = 0;
  bool pat_enable = false;
  double net_overhead = 0;

  Call(const NcclSystem& system, CollectiveKind collective) : sys(system), coll(collective) {
    n = sys.num_ranks;
    nodes = std::max(1, sys.num_nodes);
    ar = coll == CollectiveKind::kAllReduce;
    ag_rs = coll == CollectiveKind::kAllGather || coll == CollectiveKind::kReduceScatter;
    arch = std::clamp(sys.arch, 0, 3);
    col = nodes <= 2 ? nodes - 1 : 2;
    const bool amd_like = sys.cpu_vendor == "AMD" || sys.cpu_vendor == "mixed";
    ll_row = nodes == 1 ? arch : (amd_like ? 1 : 0);
    ppn = static_cast<double>(n) / nodes;
    ppn_int = n / nodes;
    nsteps = ar ? 2 * (n - 1) : ag_rs ? n - 1 : n;
    n_inter_steps = nodes == 1 ? 0 : ar ? 2 * (nodes - 1) : nodes - 1;
    pat_enable = nodes == n;  // 1 GPU per node, SM >= 60 (always here), host network (assumed)
    net_overhead = nodes > 1 ? (sys.cpu_vendor == "AMD" ? 2.0 : 1.0) : 0.0;
  }

  const NcclGraph& graph(int a) const {
    return (a == kRing) ? sys.ring : (a == kNvls || a == kNvlsTree) ? sys.nvls_graph : sys.tree;
  }
};

// Whether NCCL lets algorithm a with protocol p compete (enqueue.cc, tuning.cc's LL128 default).
bool enabled(const Call& c, int a, int p) {
  if (!algoApplies(c.coll, a)) return false;
  if ((a == kNvls || a == kNvlsTree) && p != kProtoSimple) return false;
  if (a == kPat && (p != kProtoSimple || !c.pat_enable)) return false;
  if (a == kCollNetDirect || a == kCollNetChain) return false;  // collnetEnable = 0 by default
  if (a == kNvlsTree && c.nodes == 1) return false;
  if (a == kNvls && c.nodes > 1) return false;  // NVLS across nodes needs CollNet
  if ((a == kNvls || a == kNvlsTree) && (!c.sys.nvls || (!c.ar && c.sys.ranks_per_node > kMaxNvlsArity))) {
    return false;
  }
  const NcclGraph& g = c.graph(a);
  if (p == kProtoLL128) {
    // LL128 default (tuning.cc): typeInter <= PXB (<= PXN on Hopper+), typeIntra <= NVB, one arch.
    const int type_inter = g.type_inter.empty() ? nccl::kPathPix : pathTypeOf(g.type_inter);
    const int type_intra = pathTypeOf(g.type_intra);
    const bool inter_ok = c.arch >= 2 ? type_inter <= nccl::kPathPxn : type_inter <= nccl::kPathPxb;
    if (!inter_ok || type_intra > nccl::kPathNvb || c.sys.mixed_arch) return false;
  }
  return g.channels > 0;
}

// Bus bandwidth of (a, p) after NCCL's per-protocol caps (ncclTopoTuneModel); -1 when NVLS lacks channels.
double busBandwidth(const Call& c, int a, int p) {
  const NcclGraph& g = c.graph(a);
  double bw = c.nodes <= 2 ? g.bw_intra : g.bw_inter;
  if (a == kNvls || a == kNvlsTree) {
    if (g.channels < 2) return -1;
    double intra_bw = g.bw_intra * kNvlsEff[c.arch] * (g.channels - 1) / g.channels;
    intra_bw *= c.ar ? 2.0 : (c.ppn - 1) / c.ppn;
    const double inter_bw = g.bw_inter * ((c.nodes <= 2 && a == kNvlsTree) ? 2 : 1);
    bw = std::min(intra_bw, inter_bw);
    if (a == kNvlsTree) bw = std::min(bw, kPerChMaxNvlsTreeBw[c.arch][c.col]);
  }
  double bus = g.channels * bw;
  if (a == kRing && p == kProtoLL) bus = std::min(kLlMaxBw[c.ll_row][c.col], bus * 0.5);
  if (a == kRing && p == kProtoLL128) bus = std::min(bus * 0.92, g.channels * kPerChMaxRingLL128Bw[c.arch][c.col]);
  if (a == kTree && c.ar) bus = std::min(bus * 0.92, g.channels * kPerChMaxTreeBw[c.arch][c.col]);
  if (a == kTree && p == kProtoLL) bus = std::min(bus / 3.8, kLlMaxBw[c.ll_row][c.col]);
  if (a == kTree && p == kProtoLL128) {
    bus = std::min(bus * (c.nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0), g.channels * kPerChMaxTreeLL128Bw[c.arch][c.col]);
  }
  if (a == kPat) bus *= 0.75;
  if (a == kNvls && c.ag_rs && c.nodes > 1) bus = 0;
  return bus;
}

// Latency of (a, p), us (ncclTopoTuneModel's latency part).
double latency(const Call& c, int a, int p) {
  const NcclGraph& g = c.graph(a);
  const int intra_hw = g.type_intra == "NVL" ? kHwNvlink : kHwPci;
  double lat = kBaseLat[a][p];
  double intra_lat = kHwLat[intra_hw][a][p];
  double inter_lat = (c.ppn == 1 ? kHwLat[kHwNet][kTree][p] : kHwLat[kHwNet][a][p]) + g.latency_inter_us;
  if (p == kProtoSimple) inter_lat += g.latency_inter_us;  // the flush
  if (a == kRing) {
    if (c.coll == CollectiveKind::kBroadcast || c.coll == CollectiveKind::kReduce) {
      const int hw = c.nodes == 1 ? intra_hw : kHwNet;
      // NCCL adds one hop when all channels follow one order (graph->sameChannels); Braid does not track
      // that and charges nsteps hops, NCCL's other case.
      lat += c.nsteps * (p == kProtoSimple ? kHwLat[hw][kTree][p] : kHwLat[hw][a][p]);
    } else {
      const double overhead = c.net_overhead * (p == kProtoSimple ? 3 : 1);
      intra_lat = std::max(intra_lat, overhead);
      lat += (c.nsteps - c.n_inter_steps) * intra_lat + c.n_inter_steps * inter_lat;
    }
  } else if (a == kTree) {
    if (c.ar) lat += 2 * ((c.ppn_int - 1) * intra_lat + log2i(c.nodes) * inter_lat);
  } else if (a == kNvls) {
    lat = intra_lat + (c.nodes > 1 ? inter_lat : 0);
  } else if (a == kNvlsTree) {
    lat += intra_lat + 2 * log2i(c.nodes) * inter_lat;
  } else if (a == kPat) {
    lat += log2i(c.nodes) * (inter_lat / 3.5) + c.n * 2.8;
  }
  return lat;
}

// One entry of NCCL's cost table: time_us = -1 when disabled (ncclTopoGetAlgoTime, numPipeOps = 1).
NcclEstimate estimate(const Call& c, int a, int p, uint64_t size_bytes) {
  NcclEstimate e;
  e.algo = static_cast<NcclAlgo>(a);
  e.protocol = toProtocol(p);
  e.time_us = -1;
  if (c.n == 1) {
    if (a == kRing && p == kProtoSimple) e.time_us = 0;  // enqueue.cc: one rank is a local copy
    return e;
  }
  if (!enabled(c, a, p)) return e;
  const double bus = busBandwidth(c, a, p);
  if (bus < 0) return e;
  e.bus_bw_gbps = bus;
  double alg = bus;
  if (!(a != kRing && c.ag_rs)) {
    alg *= (a == kRing || a == kNvls || a == kNvlsTree) ? static_cast<double>(c.n) / c.nsteps : 0.5;
  }
  double lat = latency(c, a, p);
  e.latency_us = lat;
  if (!(alg > 0)) return e;
  const int log_size = log2i(size_bytes >> 6);
  if (a == kTree && c.ar && log_size >= 0 && log_size < 23) alg *= kTreeCorrection[p][log_size];
  if (a == kRing && p == kProtoSimple && c.nodes > 1 && c.ar &&
      size_bytes / (static_cast<uint64_t>(std::max(c.sys.ring.channels, 1)) * c.n) >= 64) {
    lat *= c.arch < 1 ? 1.9 : 1.4;  // the ring's plateau
  }
  e.alg_bw_gbps = alg;
  e.latency_us = lat;
  e.time_us = lat + static_cast<double>(size_bytes) / (1000.0 * alg);
  return e;
}

}  // namespace

Result<NcclPrediction> ncclPredict(const NcclSystem& sys, CollectiveKind coll, uint64_t size_bytes) {
  if (coll == CollectiveKind::kAllToAll) {
    return unsupported(
        "NCCL's tuning model has no all-to-all: NCCL runs it as grouped send/recv (one p2p per pair, on the paths "
        "of nccl::p2pRelays), outside ncclTopoGetAlgoTime");
  }
  if (coll == CollectiveKind::kCustom) return invalidArgument("NCCL's model covers no custom collective");
  if (sys.num_ranks < 1) return invalidArgument("NCCL system has no ranks (build it with ncclSystem)");
  const Call call(sys, coll);
  NcclPrediction pred;
  double best_time = std::numeric_limits<double>::infinity();
  bool have_choice = false;
  for (int a = 0; a < kNumNcclAlgos; ++a) {
    for (int p = 0; p < 3; ++p) {
      NcclEstimate e = estimate(call, a, p, size_bytes);
      if (e.time_us >= 0 && e.time_us < best_time) {
        best_time = e.time_us;
        pred.choice = e;
        have_choice = true;
      }
      pred.all.push_back(e);
    }
  }
  if (!have_choice) {
    return internalError(fmt::format("NCCL model: no algorithm/protocol is enabled for {} on {} ranks",
                                     collectiveName(coll), sys.num_ranks));
  }
  return pred;
}

}  // namespace braid
