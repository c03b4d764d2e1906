// The calibration's validated bands per NCCL all-reduce entry (include/braid/sim_accuracy.h).
#include "braid/sim_accuracy.h"

#include <algorithm>
#include <limits>

namespace braid {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kNoUpperEnd = std::numeric_limits<uint64_t>::max();

// The all-reduce entries' calibration. Source: docs/simulator.md "Calibration", the three all-reduce tables of
// `build/bin/calibrate` with SimModel::defaults(): Azure ND A100 v4 on dgx-a100-x1 (Ring entries), Azure ND H100 v5
// on dgx-h100-x1 (Ring/LL, NVLS), the 2-node H100 log RC-50 on dgx-h100-x2 (Tree, NVLSTree); each row measures the
// entry NCCL chose at that size. The band holds the rows within ±15 %; a band without upper end holds every row
// from its start to the table's largest size (8 or 16 GiB).
constexpr SimCalibration kAllReduceCalibration[] = {
    {NcclAlgo::kRing, Protocol::kLL, 1 * kMiB, 2 * kMiB, 0.006, 0.111,
     "Ring/LL validated at 1-2 MiB (ND A100 v4 +0.6 % at 1 MiB, -11.1 % at 2 MiB; ND H100 v5 -0.1 % at 1 MiB)",
     "Ring/LL is validated only at 1-2 MiB: below 1 MiB the simulation is up to 68 % optimistic (ND A100 v4 "
     "+40..+68 %, ND H100 v5 up to +53 %), above 2 MiB not measured"},
    {NcclAlgo::kRing, Protocol::kLL128, 4 * kMiB, 16 * kMiB, 0.009, 0.039,
     "Ring/LL128 validated at 4-16 MiB (ND A100 v4 -3.9 % .. +0.9 %)",
     "Ring/LL128 is validated only at 4-16 MiB (ND A100 v4); other sizes were not measured"},
    {NcclAlgo::kRing, Protocol::kSimple, 256 * kMiB, kNoUpperEnd, 0.103, 0.0,
     "Ring/Simple validated from 256 MiB (ND A100 v4 +3.5 % .. +10.3 % up to 8 GiB)",
     "Ring/Simple is validated from 256 MiB: at 32-128 MiB the simulation is 35-59 % optimistic (ND A100 v4), "
     "below 32 MiB not measured"},
    {NcclAlgo::kTree, Protocol::kLL, 0, 0, 0, 0, "",
     "Tree/LL is not validated: the simulation is 31-45 % pessimistic up to 128 KiB (2-node H100 log RC-50)"},
    {NcclAlgo::kTree, Protocol::kLL128, 0, 0, 0, 0, "",
     "Tree/LL128 is not validated: the simulation is 21-52 % pessimistic at 256 KiB-4 MiB (2-node H100 log RC-50)"},
    {NcclAlgo::kTree, Protocol::kSimple, 0, 0, 0, 0, "",
     "Tree/Simple is not validated: no published measurement of it (NCCL chose other entries at every size)"},
    {NcclAlgo::kNvls, Protocol::kSimple, 16 * kMiB, kNoUpperEnd, 0.138, 0.053,
     "NVLS/Simple (the NVLS emulation) validated from 16 MiB (ND H100 v5 -5.3 % .. +13.8 % up to 8 GiB)",
     "NVLS/Simple (the NVLS emulation) is validated from 16 MiB: below it the simulation is 42-97 % optimistic "
     "(ND H100 v5: +42 % at 8 MiB, +62 % at 4 MiB, +97 % at 2 MiB)"},
    {NcclAlgo::kNvlsTree, Protocol::kSimple, 32 * kMiB, kNoUpperEnd, 0.123, 0.0,
     "NVLSTree/Simple (the NVLS emulation) validated from 32 MiB (2-node H100 log RC-50 +1.9 % .. +12.3 % up to "
     "16 GiB)",
     "NVLSTree/Simple (the NVLS emulation) is validated from 32 MiB: below it the simulation is optimistic (2-node "
     "H100 log RC-50: +22 % at 16 MiB, +36 % at 8 MiB; the single-node NVLS emulation +42..+97 % at 2-8 MiB)"},
};

// NCCL's all-to-all on the H20 log RC-53 (2 VMs x 2 H20-3e, 1 MiB .. 4 GiB, every row within ±15 %).
constexpr SimCalibration kAllToAllCalibration = {
    NcclAlgo::kRing,
    Protocol::kSimple,
    1 * kMiB,
    kNoUpperEnd,
    0.108,
    0.061,
    "NCCL's all-to-all (p2p/Simple) validated from 1 MiB (H20 log RC-53 -6.1 % .. +10.8 % up to 4 GiB)",
    "NCCL's all-to-all (p2p/Simple) is validated from 1 MiB (H20 log RC-53); smaller sizes were not measured"};

}  // namespace

const SimCalibration* allToAllSimCalibration(Protocol protocol) {
  return protocol == Protocol::kSimple ? &kAllToAllCalibration : nullptr;
}

double worstValidatedPointToPointOptimism() {
  double worst = kAllToAllCalibration.max_bytes != 0 ? kAllToAllCalibration.worst_optimistic : 0.0;
  for (const SimCalibration& c : kAllReduceCalibration) {
    if (c.algo == NcclAlgo::kRing && c.max_bytes != 0) worst = std::max(worst, c.worst_optimistic);
  }
  return worst;
}

const SimCalibration* allReduceSimCalibration(NcclAlgo algo, Protocol protocol) {
  for (const SimCalibration& c : kAllReduceCalibration) {
    if (c.algo == algo && c.protocol == protocol) return &c;
  }
  return nullptr;
}

}  // namespace braid
