// The symbols NCCL looks up in a tuner library (nccl_plugins.md §2.1, §2.4): ncclTunerPlugin_v5 ... _v2, thin
// adapters over the one implementation in tuner/plugin.h. Linked into libnccl-tuner-braid.so and, as NCCL's
// fallback location, libnccl-net-braid.so; tuner/exports.map keeps every other symbol local.
#include "abi/tuner_abi.h"
#include "tuner/plugin.h"

namespace {

namespace abi = braid::nccl_abi;
namespace impl = braid::nccl_plugin;

constexpr const char* kTunerName = "Braid";

// v2-v4 init carries no communicator id, NVLink domains or constants.
int initV2(size_t n_ranks, size_t n_nodes, abi::Logger logger, void** context) {
  return impl::tunerInit(context, 0, n_ranks, n_nodes, logger, nullptr, nullptr);
}

// v3 getCollInfo does not say whether buffers are registered (-1: rules match any regBuff).
int getCollInfoV3(void* context, int coll_type, size_t n_bytes, int num_pipe_ops, float** cost_table, int num_algo,
                  int num_proto, int* n_channels) {
  return impl::tunerGetCollInfo(context, coll_type, n_bytes, num_pipe_ops, cost_table, num_algo, num_proto, -1,
                                n_channels);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) extern const abi::TunerV5 ncclTunerPlugin_v5;
__attribute__((visibility("default"))) extern const abi::TunerV4 ncclTunerPlugin_v4;
__attribute__((visibility("default"))) extern const abi::TunerV3 ncclTunerPlugin_v3;
__attribute__((visibility("default"))) extern const abi::TunerV2 ncclTunerPlugin_v2;

const abi::TunerV5 ncclTunerPlugin_v5 = {kTunerName, impl::tunerInit, impl::tunerGetCollInfo, impl::tunerFinalize};
const abi::TunerV4 ncclTunerPlugin_v4 = {kTunerName, initV2, impl::tunerGetCollInfo, impl::tunerFinalize};
const abi::TunerV3 ncclTunerPlugin_v3 = {kTunerName, initV2, getCollInfoV3, impl::tunerFinalize};
const abi::TunerV2 ncclTunerPlugin_v2 = {kTunerName, initV2, impl::tunerGetCollInfoV2, impl::tunerFinalize};

}  // extern "C"
