// The event-driven simulator: Braid's executor over a simulated transport (virtual clock), so what is
// simulated is what runs (ARCHITECTURE.md §5).
//
// Cost model (docs/simulator.md):
//   * A message from rank a to rank b follows Topology::route(a, b). Intermediate switches, NICs, PCIe
//     switches and CPUs forward cut-through: the message costs sum(alpha of its links) + the protocol's
//     per-hop latency, plus bytes / rate, where rate is its fair share of every link direction it crosses
//     (a link's bandwidth x the protocol's efficiency on that link kind, split equally among the messages
//     crossing it at that moment; a message's rate is the minimum of its shares — LogP/LogGP-style
//     processor sharing). A switch port, a NIC and a PCIe uplink are link directions in the model, so they
//     are shared the same way.
//   * LogGP overheads (Alexandrov et al., SPAA'95): every message costs `message_overhead_us` (o) at its
//     sending and its receiving threadblock, and each NIC it crosses admits one message every `nic_gap_us`
//     (g, the inverse message rate), so with many small messages the message rate decides. Each rank's network
//     proxy posts one network send every `proxy_gap_us` (g at the host: NCCL's proxy thread posts every network
//     send of its GPU), so a rank sending to hundreds of peers over the network at once queues there.
//   * Protocols cut every step into slices (slice_bytes) that pipeline across hops through fused steps; a
//     connection holds at most `fifo_depth` slices in flight (NCCL_STEPS = 8). A connection through a NIC
//     waits `net_step_us` between the data phases of consecutive slices (per-step network handshake; NCCL's p2p
//     programs are simulated with p2p_net_step_us there).
//   * Local copies and reductions run at `local_gbps`; reductions fused into a receive cost nothing extra.
//   * Each collective pays `launch_us` once (kernel launch and NCCL base latency; fitted per protocol).
// Units: bytes, microseconds, GB/s (1 GB/s = 1e3 bytes/us).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "braid/algorithm.h"
#include "braid/executor.h"
#include "braid/nccl_runs.h"
#include "braid/plan.h"
#include "braid/status.h"
#include "braid/topology.h"
#include "braid/transport.h"

namespace braid {

inline constexpr int kNumProtocols = 3;  // indexed by static_cast<int>(Protocol)
inline constexpr int kNumLinkKinds = 5;  // indexed by static_cast<int>(LinkKind)

struct SimModel {
  /// Fraction of a link's bandwidth a protocol achieves, [protocol][link kind].
  std::array<std::array<double, kNumLinkKinds>, kNumProtocols> efficiency{};
  /// Extra latency per message per hop of the given kind, [protocol][link kind], microseconds.
  std::array<std::array<double, kNumLinkKinds>, kNumProtocols> hop_latency_us{};
  std::array<double, kNumProtocols> launch_us{};      // once per collective
  std::array<uint64_t, kNumProtocols> slice_bytes{};  // pipelining unit per protocol
  int fifo_depth = kNcclSteps;                        // slices in flight per connection
  double message_overhead_us = 0;                     // LogGP o, at sender and at receiver
  double nic_gap_us = 0;                              // LogGP g per NIC (1 / message rate)
  /// Per rank, the gap between the network sends its proxy posts (a message whose route crosses a NIC): NCCL's
  /// proxy thread, one per GPU, posts every network send in turn when its data is ready (receives are posted ahead
  /// of the data). An isolated message waits for nothing (its own posting is inside the calibrated hop latencies);
  /// many at once — an all-to-all's hundreds of peers — queue. LogGP's g at the sending processor.
  double proxy_gap_us = 0;
  /// Per network step of a connection (a message whose route crosses a NIC): the connection's next data phase
  /// starts this long after its previous one ended — a per-step handshake the connection's own data cannot hide;
  /// other connections use the NIC meanwhile. 0 in defaults(): NCCL's rings and trees over the network are
  /// calibrated without it.
  double net_step_us = 0;
  /// net_step_us for NCCL's point-to-point connections (grouped send/recv, all-to-all: 128 KiB steps through the
  /// proxy's shared p2p buffers): whoever simulates NCCL's p2p program (NcclBaselines' all-to-all, Runnable::nccl_p2p)
  /// sets net_step_us to this. Fitted on a measured all-to-all (docs/simulator.md, "Calibration").
  double p2p_net_step_us = 0;
  double local_gbps = 1000;  // local copy / reduce bandwidth per rank

  /// The calibrated defaults (docs/simulator.md says where each number comes from).
  static SimModel defaults();
  /// An ideal α-β model: efficiency 1, no protocol latency, no launch cost, no overheads, one slice per
  /// step (no pipelining), unlimited credits, free local copies (local_gbps = infinity) — hand-computable.
  static SimModel ideal();
};

/// One piece of a link's timeline: between start and end the link carried `gbps` (all messages together).
struct LinkSegment {
  int link = 0;  // index into Topology::links
  double start_us = 0;
  double end_us = 0;
  double gbps = 0;
  int messages = 0;  // concurrent messages
};

struct SimStats {
  long long messages = 0;  // slices sent
  long long events = 0;
  std::vector<double> link_bytes;    // bytes carried per link (index = Topology::links)
  std::vector<double> link_busy_us;  // time each link carried anything
};

/// The simulated transport: a virtual clock over a topology. Ranks are the topology's GPU ranks.
class SimTransport : public Transport {
 public:
  SimTransport(const Topology& topology, const SimModel& model, bool record_timeline = false);
  ~SimTransport() override;
  const char* name() const override { return "sim"; }
  Result<RequestId> postSend(const SendRequest& request) override;
  Result<RequestId> postRecv(const RecvRequest& request) override;
  Result<RequestId> postLocal(const LocalRequest& request) override;
  Status poll(std::vector<Completion>* done, bool block) override;
  double nowUs() const override;

  const SimStats& stats() const;
  /// Link timeline (only with record_timeline), ordered by link then start.
  std::vector<LinkSegment> timeline() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct SimOptions {
  uint64_t size_bytes = 0;  // nccl-tests size convention (include/braid/plan.h)
  bool in_place = false;    // ignored when the algorithm declares only one mode
  std::optional<Protocol> protocol;
  int instances = 1;
  /// Slices per iteration of the executor's loop (LowerOptions::slices_per_iteration): 1 is how Braid's runtimes
  /// run every plan; simulate(Runnable) sets NCCL's ring iteration in Simple.
  uint32_t slices_per_iteration = 1;
  SimModel model = SimModel::defaults();
  bool record_timeline = false;
};

struct SimResult {
  double time_us = 0;  // launch_us + executor makespan
  Protocol protocol = Protocol::kSimple;
  SimStats stats;
  std::vector<LinkSegment> timeline;  // with record_timeline
};

/// The plan simulate() runs: `algorithm` lowered through lowerAlgorithm with callLowerOptions() (element
/// size 1), the options' protocol, instances and slices_per_iteration, and the model's slice_bytes and fifo_depth. An
/// algorithm that declares one mode only is lowered in that mode. With SimModel::defaults() this is the plan the
/// Communicator runs for an int8 call of the same size and mode. Errors: kInvalidArgument for a protocol
/// outside Protocol; lowering's errors.
Result<Plan> simulationPlan(const Algorithm& algorithm, const SimOptions& options);

/// Lowers (simulationPlan) and runs `algorithm` on `topology` for one size. Errors: kInvalidArgument when the
/// algorithm's rank count differs from the topology's GPU count or a pair has no route (checkPlacement); lowering and
/// transport errors as they come.
Result<SimResult> simulate(const Algorithm& algorithm, const Topology& topology, const SimOptions& options);

/// simulate() of a Runnable (include/braid/nccl_runs.h) the way its program iterates: in Simple, the Runnable's
/// slice, slices per iteration and FIFO slices replace the options' where set (NCCL's ring: ncclRunnable); NCCL's
/// p2p program runs with SimModel::p2p_net_step_us as net_step_us. Errors as simulate(), prefixed with the
/// algorithm's name and the size.
Result<SimResult> simulate(const Runnable& what, SimOptions options);

}  // namespace braid
