// The simulator's cost model parameters (include/braid/simulate.h, docs/simulator.md).
//
// Every default lives in SimModel::defaults() below, with its source, so the calibration step can refit
// them in one place. Indices: efficiency/hop_latency_us are [Protocol][LinkKind]
// (Protocol: kSimple, kLL, kLL128; LinkKind: kNvlink, kPcie, kSys, kNet, kC2c).
#include <limits>

#include "braid/simulate.h"

namespace braid {
namespace {

constexpr int kSimple = static_cast<int>(Protocol::kSimple);
constexpr int kLL = static_cast<int>(Protocol::kLL);
constexpr int kLL128 = static_cast<int>(Protocol::kLL128);
constexpr int kNvlink = static_cast<int>(LinkKind::kNvlink);
constexpr int kPcie = static_cast<int>(LinkKind::kPcie);
constexpr int kSys = static_cast<int>(LinkKind::kSys);
constexpr int kNet = static_cast<int>(LinkKind::kNet);
constexpr int kC2c = static_cast<int>(LinkKind::kC2c);

}  // namespace

SimModel SimModel::defaults() {
  SimModel m;

  // Bandwidth efficiency = protocol efficiency x link efficiency.
  //  * Protocol: Simple 1.0; LL 0.5 — every 16-byte LL line carries 8 bytes of data and 8 of flags
  //    (union ncclLLFifoLine); LL128 120/128 — one 8-byte flag word per 128-byte line
  //    (NCCL_LL128_DATAELEMS = NCCL_LL128_LINEELEMS - 1). ../shared/reference/nccl_plugins.md §4.3.
  //  * Link: 1.0 for every kind. Topology bandwidths are already NCCL's effective per-link values
  //    (nccl_plugins.md §4.5: NVLink 20/20.6 GB/s per link, PCI from width x rate, NET = speed / 8), and
  //    NCCL's tuner uses them as achievable bus bandwidth; e.g. H100 NVLink 18 x 20.6 = 370.8 GB/s against
  //    ~370 GB/s measured ring busbw (nccl_plugins.md §7 D).
  constexpr double kLinkEfficiency = 1.0;
  const double protocol_efficiency[kNumProtocols] = {/*Simple*/ 1.0, /*LL*/ 0.5, /*LL128*/ 120.0 / 128.0};
  for (int p = 0; p < kNumProtocols; ++p) {
    for (int k = 0; k < kNumLinkKinds; ++k) m.efficiency[p][k] = protocol_efficiency[p] * kLinkEfficiency;
  }

  // Per-hop protocol latency, from NCCL's hwLatencies for the Ring algorithm (nccl@2.28.9
  // src/graph/tuning.cc; nccl_plugins.md §4.2), {LL, LL128, Simple} per GPU-to-GPU step:
  //   NVLINK 0.6 / 1.9 / 3.4, PCI 1.0 / 2.5 / 5.7, NET 2.7 / 4.0 / 14.0 us.
  // NCCL charges them per step; a step's route has two links of that kind in the common case
  // (GPU-NVSwitch-GPU, GPU-PCIe switch-GPU, NIC-switch-NIC), so each hop gets half. Inter-socket (sys) hops
  // take the PCI value, chip-to-chip (c2c) hops the NVLink value. Topology alphas come on top.
  const double nvlink_step[kNumProtocols] = {/*Simple*/ 3.4, /*LL*/ 0.6, /*LL128*/ 1.9};
  const double pci_step[kNumProtocols] = {/*Simple*/ 5.7, /*LL*/ 1.0, /*LL128*/ 2.5};
  const double net_step[kNumProtocols] = {/*Simple*/ 14.0, /*LL*/ 2.7, /*LL128*/ 4.0};
  for (int p = 0; p < kNumProtocols; ++p) {
    m.hop_latency_us[p][kNvlink] = nvlink_step[p] / 2;
    m.hop_latency_us[p][kPcie] = pci_step[p] / 2;
    m.hop_latency_us[p][kSys] = pci_step[p] / 2;
    m.hop_latency_us[p][kNet] = net_step[p] / 2;
    m.hop_latency_us[p][kC2c] = nvlink_step[p] / 2;
  }

  // Launch: NCCL's baseLatencies for Ring {LL 6.6, LL128 14.0, Simple 8.4} us (nccl_plugins.md §4.2).
  m.launch_us[kSimple] = 8.4;
  m.launch_us[kLL] = 6.6;
  m.launch_us[kLL128] = 14.0;

  // Slices and FIFO: lowering's, so that the plan simulated is the plan executed — one slot of NCCL's
  // per-connection FIFO of NCCL_STEPS = 8 slots per slice (defaultSliceBytes, runtime/plan/lower.cc gives the
  // derivation: Simple 512 KiB, LL 32 KiB, LL128 576000 bytes) and NCCL_STEPS slots per connection
  // (anchors_algorithms.md §6, NCCL knobs).
  for (int p = 0; p < kNumProtocols; ++p) m.slice_bytes[p] = defaultSliceBytes(static_cast<Protocol>(p));
  m.fifo_depth = kNcclSteps;

  // LogGP o and g from NIC message rates: ConnectX-class NICs sustain 200-400 million messages/s
  // (NVIDIA product briefs: ConnectX-6 215 M msg/s, ConnectX-7 330-370 M msg/s), i.e. 2.5-5 ns per message.
  // g = 1 / 330 M/s for a NIC; o, the per-message cost of one threadblock posting a slice, takes the slow end
  // of the range, 5 ns. Both are estimates until calibrated.
  m.message_overhead_us = 1.0 / 200.0;  // 1 / (200e6 msg/s) in us
  m.nic_gap_us = 1.0 / 330.0;           // 1 / (330e6 msg/s) in us
  // The host side of every network send: NCCL's proxy thread (one per GPU) posts each send when its data is ready.
  // NCCL's own tuning model charges NCCL_NET_OVERHEAD for it, 1 us by default on Intel and other CPUs (2 us on AMD;
  // nccl@2.28.9 src/graph/tuning.cc, ../shared/reference/nccl_plugins.md §4.2), as the least time per network
  // step; here it is the gap between the network sends one rank's proxy posts.
  m.proxy_gap_us = 1.0;

  // Local copies/reductions run from HBM: read + write at ~2 TB/s (A100-80GB 2.0 TB/s, H100 SXM 3.35 TB/s,
  // anchors_algorithms.md §7); a copy moves each byte twice, so ~1000 GB/s of copied bytes.
  m.local_gbps = 1000;

  // Calibrated NVLink values, replacing the NCCL-derived starting points above for NVLink: fitted by
  // `calibrate --fit` (perf/calibrate.cc, runtime/calibration/) to Azure ND A100 v4's all-reduce busbw at 1 MiB,
  // 16 MiB, 256 MiB, 1 GiB and 8 GiB with NCCL's choice simulated (Ring/LL, Ring/LL128, Ring/Simple), and
  // checked by predicting ND H100 v5 and the realcases 2-node H100 log (docs/simulator.md, "Calibration").
  m.efficiency[kSimple][kNvlink] = 1.0;
  m.hop_latency_us[kSimple][kNvlink] = 0.5185;
  m.efficiency[kLL][kNvlink] = 0.3033;
  m.hop_latency_us[kLL][kNvlink] = 0.3619;
  m.efficiency[kLL128][kNvlink] = 0.5686;
  m.hop_latency_us[kLL128][kNvlink] = 1.076;

  // Per-step handshake of NCCL's p2p network connections: fitted by `calibrate --fit` (fitAllToAllModel) to the
  // realcases H20 all-to-all log RC-53 (2 VMs x 2 H20-3e, one 400 Gb/s RoCE NIC per GPU, NCCL 2.26.5) at every size
  // from 1 MiB to 4 GiB, with NCCL's p2p run as NCCL runs it: 2 channels per peer, 128 KiB network chunks, 8 in
  // flight (docs/simulator.md, "Calibration"). NCCL does not document this cost; the fit absorbs whatever the log's
  // machine adds per p2p step (VM, RoCE, its vendor net plugin, shared p2p buffers), so it is the least certain
  // number here. Rings and trees keep net_step_us = 0: their calibration needs none, and a per-step gap they cannot
  // hide (one connection per NIC) would cut a network ring to about 57% of the NIC.
  m.net_step_us = 0;
  m.p2p_net_step_us = 8.0;
  return m;
}

SimModel SimModel::ideal() {
  SimModel m;
  for (int p = 0; p < kNumProtocols; ++p) {
    for (int k = 0; k < kNumLinkKinds; ++k) {
      m.efficiency[p][k] = 1.0;
      m.hop_latency_us[p][k] = 0.0;
    }
    m.launch_us[p] = 0.0;
    m.slice_bytes[p] = kUnlimitedBytes;  // one slice per step: no pipelining
  }
  m.fifo_depth = std::numeric_limits<int>::max();
  m.message_overhead_us = 0.0;
  m.nic_gap_us = 0.0;
  m.proxy_gap_us = 0.0;
  // The alpha-beta model has no local cost: copies and reductions are free.
  m.local_gbps = std::numeric_limits<double>::infinity();
  return m;
}

}  // namespace braid
