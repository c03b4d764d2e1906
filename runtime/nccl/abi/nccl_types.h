// The parts of NCCL's plugin ABI that the net and tuner plugins share, written from the documented layout
// (../shared/reference/nccl_plugins.md §1.2, §2.3; nccl@2.28.9 src/include/plugin/nccl_net.h, nccl_tuner.h,
// nccl_common.h). NCCL's own headers are not included: the installed NCCL ships none of its plugin headers, and a
// plugin carries its own copy of the structs (nccl@2.28.9 ext-net/README.md, "Headers management").
//
// Every type here is plain C layout: what crosses the boundary is ints, pointers and these enums' int values.
#pragma once

#include <cstddef>
#include <cstdint>

namespace braid::nccl_abi {

/// ncclResult_t (0..7). The plugins return these as int; StatusCode's first eight values are the same numbers
/// (include/braid/status.h toNcclResultCode).
enum Result : int {
  kSuccess = 0,
  kUnhandledCudaError = 1,
  kSystemError = 2,
  kInternalError = 3,
  kInvalidArgument = 4,
  kInvalidUsage = 5,
  kRemoteError = 6,
  kInProgress = 7,
};

/// ncclDebugLogLevel.
enum DebugLevel : int {
  kLogNone = 0,
  kLogVersion = 1,
  kLogWarn = 2,
  kLogInfo = 3,
  kLogAbort = 4,
  kLogTrace = 5,
};

/// ncclDebugLogSubSys bits the plugins log under.
enum DebugSubsys : unsigned long {
  kSubsysInit = 0x1,
  kSubsysNet = 0x10,
  kSubsysTuning = 0x40,
  kSubsysEnv = 0x1000,
};

/// ncclDebugLogger_t: NCCL's logger, printf-style; NCCL filters by NCCL_DEBUG / NCCL_DEBUG_SUBSYS.
using Logger = void (*)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);

/// ncclFunc_t: only the first five reach the tuner.
enum Func : int {
  kFuncBroadcast = 0,
  kFuncReduce = 1,
  kFuncAllGather = 2,
  kFuncReduceScatter = 3,
  kFuncAllReduce = 4,
  kFuncSendRecv = 5,
  kFuncSend = 6,
  kFuncRecv = 7,
};
inline constexpr int kNumFuncs = 5;  // NCCL_NUM_FUNCTIONS

/// NCCL_ALGO_* indices of the tuner's cost table (rows).
enum Algo : int {
  kAlgoUndef = -1,
  kAlgoTree = 0,
  kAlgoRing = 1,
  kAlgoCollNetDirect = 2,
  kAlgoCollNetChain = 3,
  kAlgoNvls = 4,
  kAlgoNvlsTree = 5,
  kAlgoPat = 6,
};
inline constexpr int kNumAlgorithms = 7;

/// NCCL_PROTO_* indices (columns).
enum Proto : int { kProtoUndef = -1, kProtoLL = 0, kProtoLL128 = 1, kProtoSimple = 2 };
inline constexpr int kNumProtocols = 3;

/// NCCL_ALGO_PROTO_IGNORE: a cost-table entry NCCL will not use.
inline constexpr float kAlgoProtoIgnore = -1.0f;

}  // namespace braid::nccl_abi
