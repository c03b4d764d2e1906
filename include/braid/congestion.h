// The congestion model: a discrete-event simulation of an RDMA fabric at chunk-train granularity, beside the fluid
// simulator of include/braid/simulate.h (docs/congestion.md). It answers what the fluid model cannot: how switch
// queues, ECN marking and PFC pause behave under an all-to-all, and how the sender's chunking policy (fixed NCCL-like
// chunks and windows, or adaptive windows with receiver-side incast control) changes pauses, tail latency and
// throughput, at 64 … 1024 ranks where no fabric is at hand.
//
// Model (docs/congestion.md gives the sources of every default):
//   * Fabric: one NIC port per GPU rank; a two-level leaf-spine (hosts_per_leaf NICs per leaf, every leaf linked to
//     every spine, optional oversubscription, ECMP: each flow hashed onto one spine) or a rail-only fabric (NIC i of
//     every node on rail switch i; a flow to a GPU of another rail crosses NVLink to the GPU of its rail first, PXN,
//     so it enters the fabric at the NIC of the receiver's rail). Pairs inside a node use NVLink: off the fabric.
//   * Data moves in trains of `train_bytes` (a burst of packets), store-and-forward per hop: a train occupies a link
//     for bytes / bandwidth, then arrives latency_us later at the next device.
//   * Switches are output-queued with one FIFO per egress port and a shared buffer. ECN: a train enqueued at an
//     egress queue holding q bytes is marked with probability 0 below ecn_kmin, ecn_pmax x (q - kmin) / (kmax - kmin)
//     up to ecn_kmax, 1 above (RED-style, as DCQCN configures switches). PFC: every ingress port counts the bytes that
//     arrived through it and still sit in the switch; at pfc_xoff the switch pauses the upstream port (the pause
//     takes effect one link latency later, after the train in transmission), at pfc_xon it resumes it. Lossless: a
//     train that finds the shared buffer full is kept and counted as an overrun.
//   * Senders: each rank activates its flows in NCCL's p2p order (peer r+1, r+2, …) with at most peers_in_flight
//     active at once, starting at 0 or after a random launch skew (start_jitter_us). A NIC serves its ready flows
//     round-robin, one train at a time. A flow sends chunks; a chunk is acknowledged when its last train reaches the
//     receiver plus the path latency back (acknowledgements are not queued). The policy sets the chunk size and how
//     many chunks may be unacknowledged:
//       fixed     — chunk_bytes, window_chunks (NCCL: 512 KiB Simple steps or 128 KiB p2p chunks, NCCL_STEPS = 8);
//       adaptive  — a window in bytes that reacts to ECN (DCTCP, Alizadeh et al. SIGCOMM'10: alpha <- (1-g) alpha +
//                   g F per acknowledged chunk, W <- W (1 - alpha/2) at most once per RTT, +chunk per RTT otherwise)
//                   and to RTT above rtt_target_us (multiplicative decrease, Swift-like; the RTT of a chunk runs from
//                   its last train leaving the NIC to its acknowledgement: the fabric's part), a chunk of a quarter of
//                   the window within [min_chunk_bytes, chunk_bytes], and receiver-side credits (incast control, the
//                   clear-to-send scheme of Meta's RoCE fabric): a flow asks its receiver for each chunk, and a
//                   receiver lets at most rx_credit_chunks granted chunks be on their way to it, granting requests
//                   first come, first served as chunks land — so at most that many senders push to it at once.
//                   Requests and grants travel at the path latency and are not queued.
// Units: bytes, microseconds, GB/s (1 GB/s = 1e3 bytes/us).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "braid/status.h"

namespace braid::congestion {

enum class FabricKind { kLeafSpine, kRail };

struct FabricSpec {
  FabricKind kind = FabricKind::kLeafSpine;
  int ranks = 64;                // GPUs, one NIC port each
  int gpus_per_node = 8;         // pairs inside a node use NVLink (off the fabric); rail: the number of rails
  int hosts_per_leaf = 16;       // leaf-spine: NIC ports per leaf switch
  int spines = 0;                // leaf-spine: 0 = hosts_per_leaf / oversubscription (one uplink per downlink at 1:1)
  double oversubscription = 1;   // leaf-spine: leaf downlink bandwidth / uplink bandwidth
  double link_gbps = 50;         // NIC and switch port bandwidth, GB/s per direction (400 Gb/s)
  double link_latency_us = 0.6;  // per hop: propagation plus switch pipeline
};

struct SwitchSpec {
  uint64_t buffer_bytes = 0;  // shared buffer per switch; 0 = buffer_per_port_bytes x ports
  uint64_t buffer_per_port_bytes = uint64_t{1} << 20;
  uint64_t ecn_kmin_bytes = 150000;   // NVIDIA Onyx RoCE lossless default: ECN min 150 KB
  uint64_t ecn_kmax_bytes = 1500000;  // ... max 1500 KB
  double ecn_pmax = 1.0;              // marking probability reached at kmax
  bool pfc = true;
  uint64_t pfc_xoff_bytes = 512 << 10;  // per ingress port
  uint64_t pfc_xon_bytes = 256 << 10;
};

enum class PolicyKind { kFixed, kAdaptive };

struct Policy {
  std::string name;
  PolicyKind kind = PolicyKind::kFixed;
  uint64_t chunk_bytes = 512 << 10;  // fixed: the chunk; adaptive: the largest chunk
  int window_chunks = 8;             // fixed: unacknowledged chunks per flow (NCCL_STEPS)
  // Adaptive only.
  uint64_t min_chunk_bytes = 64 << 10;
  uint64_t initial_window_bytes = 1 << 20;
  uint64_t min_window_bytes = 64 << 10;
  uint64_t max_window_bytes = 4 << 20;
  bool ecn_window = true;     // DCTCP on the ECN marks of each chunk
  double dctcp_g = 1.0 / 16;  // DCTCP's gain
  double rtt_target_us = 0;   // > 0: multiplicative decrease when a chunk's RTT exceeds it
  int rx_credit_chunks = 0;   // > 0: receiver credits: granted chunks in flight towards a receiver, at most

  /// NCCL's Simple steps: 512 KiB chunks, 8 in flight.
  static Policy fixed512k();
  /// NCCL's p2p network chunks: 128 KiB, 8 in flight.
  static Policy fixed128k();
  /// ECN/RTT window plus receiver credits (rx_credit_chunks = 4, RTT target 20 us).
  static Policy adaptive();
};

struct Workload {
  uint64_t bytes_per_peer = 1 << 20;  // each rank sends this much to every other rank (all-to-all)
  int peers_in_flight = 8;            // active flows per sending rank (NCCL: p2p channels x operations per batch)
  uint64_t train_bytes = 64 << 10;    // simulation unit
  uint64_t seed = 1;                  // ECN marking draws, ECMP hashing, start jitter
  double start_jitter_us = 0;         // each rank starts at a uniform draw in [0, this] (launch skew); 0: all at 0
};

struct Report {
  std::string policy;
  double time_us = 0;     // last byte delivered
  long long flows = 0;    // fabric flows (pairs on different nodes)
  double fct_p50_us = 0;  // flow completion: activation to last byte delivered
  double fct_p99_us = 0;
  double fct_max_us = 0;
  double nic_gbps = 0;         // fabric bytes / time / NICs that send
  double busbw_gbps = 0;       // nccl-tests all-to-all busbw if NVLink pairs take no longer than the fabric
  long long pause_frames = 0;  // PFC pauses received by upstream ports
  long long pause_frames_to_nics =
      0;                       // ... of them by NICs (the rest paused switch ports: pause spread into the fabric)
  double paused_us = 0;        // link-time paused, summed over links
  double paused_fraction = 0;  // paused_us / (links x time)
  long long trains = 0;
  long long ecn_marks = 0;
  uint64_t max_queue_bytes = 0;   // largest egress queue seen
  uint64_t max_buffer_bytes = 0;  // largest switch buffer occupancy seen
  long long buffer_overruns = 0;  // trains that found the shared buffer full (kept: lossless)
  long long events = 0;
  std::vector<double> fct_us;  // per fabric flow, in flow order (src-major)
};

/// One flow: `bytes` from rank src to rank dst (on different nodes).
struct FlowSpec {
  int src = 0;
  int dst = 0;
  uint64_t bytes = 0;
};

/// Simulates the given flows; each rank activates its flows in the order listed, at most workload.peers_in_flight at
/// once (workload.bytes_per_peer is not used; Report::busbw_gbps stays 0). Errors: kInvalidArgument for a spec that
/// builds no fabric (fewer than 2 nodes, ranks not a multiple of gpus_per_node, hosts_per_leaf < 1, bandwidth <= 0,
/// oversubscription < 1), bad switch or policy values (xon > xoff, kmin > kmax, pmax outside [0, 1], a window, chunk
/// or train of 0), or a flow outside the ranks, inside one node, or of 0 bytes.
Result<Report> simulateFlows(const FabricSpec& fabric, const SwitchSpec& switches, const Policy& policy,
                             const Workload& workload, const std::vector<FlowSpec>& flows);

/// Simulates one all-to-all of workload.bytes_per_peer between every pair of ranks on different nodes, each rank
/// sending in NCCL's p2p order (peer r+1, r+2, ...); Report::busbw_gbps is nccl-tests' busbw for it. Errors: as
/// simulateFlows.
Result<Report> simulateAllToAll(const FabricSpec& fabric, const SwitchSpec& switches, const Policy& policy,
                                const Workload& workload);

}  // namespace braid::congestion
