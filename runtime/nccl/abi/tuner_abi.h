// NCCL's tuner plugin ABI, versions 2 to 5, written from the documented layout (../shared/reference/
// nccl_plugins.md §2.1-§2.3; nccl@2.28.9 src/include/plugin/tuner/tuner_v2.h ... tuner_v5.h, nccl_tuner.h).
// NCCL 2.28 looks up the symbols ncclTunerPlugin_v5, _v4, _v3, _v2 in that order (§2.1, §2.4).
//
// The cost table of v3-v5 getCollInfo is declared `float**` but is a contiguous float[numAlgo][numProto]
// (row-major, 7 x 3 in 2.28): read it through costTableCells(), never as an array of row pointers (§2.2).
#pragma once

#include <cstddef>
#include <cstdint>

#include "abi/nccl_types.h"

namespace braid::nccl_abi {

/// NCCL_NUM_HW_LINKS_V5 (rows of hwLatencies: NVLink 0, PCI 1, NET 2).
inline constexpr int kNumHwLinks = 3;
enum HwLink : int { kHwNvlink = 0, kHwPci = 1, kHwNet = 2 };
/// NCCL_NUM_COMPCAPS_V5 (rows of the bandwidth caps: Volta 0, Ampere 1, Hopper 2, Blackwell 3).
inline constexpr int kNumCompCaps = 4;
enum CompCap : int { kCompCapVolta = 0, kCompCapAmpere = 1, kCompCapHopper = 2, kCompCapBlackwell = 3 };
/// NCCL_NUM_TUNING_SCALES_V5 (columns of the bandwidth caps: 1 node 0, 2 nodes 1, 4 or more nodes 2).
inline constexpr int kNumTuningScales = 3;
enum TuningScale : int { kScale1Node = 0, kScale2Nodes = 1, kScale4Nodes = 2 };

/// ncclNvlDomainInfo_v5_t: the communicator's NVLink domains (v5 init input).
struct NvlDomainInfoV5 {
  int nNvlDomains;
  int minRanksPerNvlDomain;
  int maxRanksPerNvlDomain;
};

/// ncclTunerConstants_v5_t: the constants of NCCL's own model (nccl_plugins.md §4.2), filled with NCCL's defaults
/// before init and read by NCCL after it, so a plugin may change them. Latencies in µs, bandwidths in GB/s.
struct TunerConstantsV5 {
  double baseLatencies[kNumAlgorithms][kNumProtocols];
  double hwLatencies[kNumHwLinks][kNumAlgorithms][kNumProtocols];
  double llMaxBws[kNumCompCaps][kNumTuningScales];
  double perChMaxRingLL128Bws[kNumCompCaps][kNumTuningScales];
  double perChMaxTreeLL128Bws[kNumCompCaps][kNumTuningScales];
  double perChMaxTreeBws[kNumCompCaps][kNumTuningScales];
  double perChMaxNVLSTreeBws[kNumCompCaps][kNumTuningScales];
};

// Entry points. Every one returns an ncclResult_t (Result) as int; collType is an ncclFunc_t (Func).

/// v2-v4 init: per communicator; the plugin's state goes to *context.
using TunerInitV2 = int (*)(size_t nRanks, size_t nNodes, Logger logFunction, void** context);
/// v5 init: also the communicator id, its NVLink domains and NCCL's model constants (in/out).
using TunerInitV5 = int (*)(void** context, uint64_t commId, size_t nRanks, size_t nNodes, Logger logFunction,
                            NvlDomainInfoV5* nvlDomainInfo, TunerConstantsV5* constants);
/// v2 getCollInfo: no table; the plugin sets *algorithm and *protocol (NCCL starts them at -1, undefined, and
/// forces the pair when both are in range and NCCL allows it: nccl@2.28.9 src/plugin/tuner/tuner_v2.cc).
using TunerGetCollInfoV2 = int (*)(void* context, int collType, size_t nBytes, int collNetSupport, int nvlsSupport,
                                   int numPipeOps, int* algorithm, int* protocol, int* nChannels);
/// v3 getCollInfo: collCostTable is a contiguous float[numAlgo][numProto] of µs, -1 = not allowed.
using TunerGetCollInfoV3 = int (*)(void* context, int collType, size_t nBytes, int numPipeOps, float** collCostTable,
                                   int numAlgo, int numProto, int* nChannels);
/// v4 and v5 getCollInfo: v3 plus regBuff (1 when the user buffers can be registered).
using TunerGetCollInfoV4 = int (*)(void* context, int collType, size_t nBytes, int numPipeOps, float** collCostTable,
                                   int numAlgo, int numProto, int regBuff, int* nChannels);
/// destroy (v2-v4) and finalize (v5): per communicator.
using TunerFinalize = int (*)(void* context);

/// ncclTuner_v2_t: name, init, getCollInfo, destroy.
struct TunerV2 {
  const char* name;
  TunerInitV2 init;
  TunerGetCollInfoV2 getCollInfo;
  TunerFinalize destroy;
};
/// ncclTuner_v3_t: name, init, getCollInfo (table), destroy.
struct TunerV3 {
  const char* name;
  TunerInitV2 init;
  TunerGetCollInfoV3 getCollInfo;
  TunerFinalize destroy;
};
/// ncclTuner_v4_t: name, init, getCollInfo (table, regBuff), destroy.
struct TunerV4 {
  const char* name;
  TunerInitV2 init;
  TunerGetCollInfoV4 getCollInfo;
  TunerFinalize destroy;
};
/// ncclTuner_v5_t: name, init (v5 arguments), getCollInfo (as v4), finalize.
struct TunerV5 {
  const char* name;
  TunerInitV5 init;
  TunerGetCollInfoV4 getCollInfo;
  TunerFinalize finalize;
};

/// The cost table as NCCL lays it out (nccl_plugins.md §2.2): `numAlgo` rows of `numProto` floats, one after
/// the other; cell (algo, proto) is element algo x numProto + proto of the returned array.
inline float* costTableCells(float** table) { return reinterpret_cast<float*>(table); }

}  // namespace braid::nccl_abi
