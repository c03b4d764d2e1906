// The tuner plugin's one implementation (docs/nccl.md "Tuner plugin"); tuner/exports.cc adapts it to NCCL's
// struct versions v2-v5 (abi/tuner_abi.h).
//
// Per communicator (init): the machine comes from BRAID_TOPOLOGY (a Braid YAML file, a shipped topology name, or
// any file loadTopology reads: NCCL topology XML, `nvidia-smi topo -m`, TACCL JSON), else from the NCCL topology
// XML NCCL_TOPO_DUMP_FILE names. Its GPU and node counts must equal nRanks and nNodes; then Braid's model
// (tuner/model.h) is built, once per process and topology. Without a topology, or on a mismatch or a model error,
// the context is in pass-through mode: init still succeeds, one line (INFO without a topology, WARN otherwise)
// says why, and getCollInfo changes NCCL's table only where a rules file says so.
//
// Per call the model moves NCCL off its own choice only where tuner/accuracy.h's rule says so (BRAID_TUNER=validated,
// the default): then every allowed entry Braid predicts gets Braid's µs; otherwise NCCL's table is left as it is.
// BRAID_TUNER=model writes Braid's predictions wherever its fastest differs from NCCL's choice; BRAID_TUNER=off makes
// every entry point a no-op that succeeds (no model, no rules): NCCL keeps all its choices. (Failing init would fail
// NCCL's communicator: NCCL 2.28 checks init's result.)
// Rules (tuner/rules.h) from BRAID_TUNER_RULES, else NCCL_TUNER_CONFIG_FILE, override the model: the first rule
// matching a call sets its entry to 0.0 (when NCCL allows the entry) and applies its channel count.
// With BRAID_DEBUG=INFO every getCollInfo logs its decision and why through NCCL's logger.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "abi/tuner_abi.h"
#include "tuner/accuracy.h"
#include "tuner/model.h"
#include "tuner/rules.h"

namespace braid::nccl_plugin {

/// What the environment asks for (read at each init).
struct TunerSettings {
  std::string topology;                          // BRAID_TOPOLOGY: file or shipped name; empty: unset
  std::string topo_dump_file;                    // NCCL_TOPO_DUMP_FILE (NCCL's variable), used when `topology` is empty
  std::string rules_file;                        // BRAID_TUNER_RULES, else NCCL_TUNER_CONFIG_FILE; empty: no rules
  std::string rules_variable;                    // which of the two named `rules_file`
  TunerModelOptions model;                       // BRAID_TUNER_MAX_SIM_BYTES, BRAID_TUNER_MAX_SIM_RANKS
  TunerPolicy policy = TunerPolicy::kValidated;  // BRAID_TUNER
  std::vector<std::string> warnings;             // values that could not be used (the default was kept)
};

/// Reads the variables above. A malformed BRAID_TUNER_MAX_SIM_* or BRAID_TUNER keeps the default, with a warning
/// naming it.
TunerSettings tunerSettingsFromEnvironment();

/// One communicator's tuner state.
class TunerContext {
 public:
  /// Never fails: problems put the context in pass-through mode (passThroughReason()) and are logged once.
  /// BRAID_TUNER=off: pass-through without rules; nothing is read or built.
  static std::unique_ptr<TunerContext> create(size_t n_ranks, size_t n_nodes, const TunerSettings& settings);

  /// v3-v5 getCollInfo on a contiguous table `cells` of num_algo x num_proto floats (µs; entry algo x num_proto +
  /// proto): when decideOverride (tuner/accuracy.h) overrides NCCL's choice, every entry that is not negative
  /// (NCCL's -1, not allowed) and that the model predicts gets the model's µs, else the table stays as it is; then
  /// the first matching rule forces its entry to 0.0 and sets *n_channels when it gives a count. Collectives
  /// outside 0..4 and a null table are left alone. reg_buff: 0/1, or -1 when NCCL does not say (v3).
  void fillCostTable(int func, size_t n_bytes, int pipe_ops, float* cells, int num_algo, int num_proto, int reg_buff,
                     int* n_channels) const;
  /// v2 getCollInfo: *algorithm / *protocol = the first matching rule's, else, when decideOverride overrides NCCL's
  /// choice as Braid's emulation of NCCL's model predicts it (TunerModel::ncclTimeUs; NVLS and NVLSTree only with
  /// nvls_support, CollNet only with coll_net_support), Braid's candidate; otherwise left as they are (NCCL's -1:
  /// NCCL's own choice).
  void chooseV2(int func, size_t n_bytes, int coll_net_support, int nvls_support, int pipe_ops, int* algorithm,
                int* protocol, int* n_channels) const;

  /// Braid's model, or nullptr in pass-through mode.
  const TunerModel* model() const { return model_.get(); }
  /// Why the model is not used (empty when it is).
  const std::string& passThroughReason() const { return pass_through_; }
  TunerPolicy policy() const { return policy_; }
  const std::vector<TunerRule>& rules() const { return rules_; }
  size_t ranks() const { return ranks_; }
  size_t nodes() const { return nodes_; }

 private:
  void logDecision(int func, size_t n_bytes, const float* cells, int num_algo, int num_proto, const TunerRule* rule,
                   const TunerDecision* decision) const;

  size_t ranks_ = 0;
  size_t nodes_ = 0;
  std::shared_ptr<const TunerModel> model_;
  std::string pass_through_;
  TunerPolicy policy_ = TunerPolicy::kValidated;
  std::vector<TunerRule> rules_;
};

// The entry points in v5's shape; each catches every exception (guarded) and getCollInfo always returns success
// (NCCL 2.28 aborts the collective otherwise: nccl_plugins.md §2.2).
int tunerInit(void** context, uint64_t comm_id, size_t n_ranks, size_t n_nodes, nccl_abi::Logger logger,
              nccl_abi::NvlDomainInfoV5* nvl_domains, nccl_abi::TunerConstantsV5* constants);
int tunerGetCollInfo(void* context, int coll_type, size_t n_bytes, int num_pipe_ops, float** cost_table, int num_algo,
                     int num_proto, int reg_buff, int* n_channels);
int tunerGetCollInfoV2(void* context, int coll_type, size_t n_bytes, int coll_net_support, int nvls_support,
                       int num_pipe_ops, int* algorithm, int* protocol, int* n_channels);
int tunerFinalize(void* context);

}  // namespace braid::nccl_plugin
