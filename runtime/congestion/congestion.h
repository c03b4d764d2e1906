// Congestion-aware chunking for byte-stream transports (runtime/congestion/README.md): how a sender cuts messages
// into chunks and how many bytes it keeps unacknowledged per peer (SenderControl), how a receiver admits senders
// (CreditGranter: receiver-driven clear-to-send, incast control) and how many peers a sender feeds at once
// (PeerScheduler: staggered all-to-all). The TCP transport (runtime/transport/tcp/) drives them; the NCCL net
// plugin's TCP data path drives CreditGranter and the reports (README.md, "Using it from another transport").
//
// Two policies (Config::policy, BRAID_CC_POLICY):
//   - fixed: NCCL's Simple protocol over the network — NCCL_BUFFSIZE 4 MiB in NCCL_STEPS = 8 slots, so 512 KiB
//     chunks with at most 8 of them unacknowledged per connection (a 4 MiB window), every sender pushing to every
//     receiver at once. Chunk = chunk_max, window = window; no credits, no limit on active peers.
//   - adaptive: the window W and chunk c of each peer follow measured signals (AIMD, Jacobson's congestion
//     avoidance with a delay target in the manner of Swift, Kumar et al., SIGCOMM'20): per-chunk round-trip time
//     from the receiver's acknowledgement frames against the path's base RTT (a windowed min filter, one per chunk
//     size), and the kernel's TCP_INFO (tcpi_total_retrans, tcpi_rtt against tcpi_min_rtt, tcpi_delivery_rate)
//     read at a bounded rate. Receivers admit senders adaptively (CreditGranter): every sender sends freely
//     while no admitted sender reports retransmission timeouts; after one, the receiver grants clear-to-send to
//     a number of senders at a time that halves on each further report (down to `credits`) and grows by one per
//     round of grants without one, back to every sender (AIMD on the admission count; receiver-driven admission
//     as Meta's, SIGCOMM'24; NCCL's IB transport posts receive slots the same way). Senders keep at most
//     `active_peers` peers busy, in the order their sends were posted.
// Units: bytes, microseconds (µs) on the caller's clock, bytes per second.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "braid/status.h"

namespace braid::congestion {

enum class Policy { kFixed, kAdaptive };

/// "fixed" / "adaptive".
const char* policyName(Policy policy);

struct Config {
  Policy policy = Policy::kFixed;
  uint64_t chunk_min = 64 << 10;    // smallest chunk (adaptive), bytes
  uint64_t chunk_max = 512 << 10;   // largest chunk (adaptive); fixed's chunk
  uint64_t window = 4 << 20;        // most unacknowledged bytes per peer (adaptive's ceiling; fixed's window)
  int credits = 1;                  // adaptive receivers: the fewest senders admitted at once (0: no admission)
  int admit_start = 0;              // adaptive receivers: senders admitted at the start (0: every sender)
  uint64_t grant_bytes = 1 << 20;   // bytes per grant
  int active_peers = 0;             // adaptive senders: peers sent to at once (0: every peer)
  uint64_t eager_bytes = 64 << 10;  // messages up to this size are sent whole, without a grant

  /// BRAID_CC_POLICY, BRAID_CC_CHUNK_MIN, BRAID_CC_CHUNK_MAX, BRAID_CC_WINDOW, BRAID_CC_CREDITS, BRAID_CC_GRANT,
  /// BRAID_CC_ACTIVE_PEERS (docs/env.md; sizes take K/M/G suffixes). Errors: kInvalidArgument naming the variable
  /// and its text ("BRAID_CC_CHUNK_MIN=1x: not a size (bytes, K/M/G suffix)"), or the pair that disagrees
  /// ("BRAID_CC_CHUNK_MIN=1M is above BRAID_CC_CHUNK_MAX=512K").
  static Result<Config> fromEnvironment();
  /// The checks of fromEnvironment() on a config built in code: chunks in [1 KiB, 64 MiB], chunk_min <=
  /// chunk_max <= window <= 1 GiB, credits, admit_start and active peers in [0, 1024], grant >= chunk_min.
  Status validate() const;

  /// The floor of the receiver's admission count: `credits` under adaptive, 0 (no admission control, no
  /// clear-to-send) under fixed.
  int receiverCredits() const { return policy == Policy::kAdaptive ? credits : 0; }
  /// Senders a receiver admits at the start: 0 (every sender) unless the receiver admits adaptively and
  /// admit_start > 0, then max(admit_start, credits).
  int receiverStartAdmission() const {
    return receiverCredits() > 0 && admit_start > 0 ? std::max(admit_start, credits) : 0;
  }
  /// Peers a sender keeps busy: `active_peers` under adaptive, 0 (all) under fixed.
  int senderActivePeers() const { return policy == Policy::kAdaptive ? active_peers : 0; }
  /// "adaptive: chunk 64 KiB..512 KiB, window <= 4 MiB, admission all senders .. at least 1, grant 1 MiB,
  /// active peers all".
  std::string toString() const;
};

/// The kernel's view of one TCP connection (getsockopt TCP_INFO), the fields the controller reads.
struct TcpSignals {
  uint64_t total_retrans = 0;   // tcpi_total_retrans: segments retransmitted since the connection opened
  uint64_t delivery_rate = 0;   // tcpi_delivery_rate, bytes/s (0: not measured yet)
  double rtt_us = 0;            // tcpi_rtt: smoothed RTT of TCP's own acknowledgements
  double min_rtt_us = 0;        // tcpi_min_rtt: the kernel's windowed minimum
  uint64_t total_rto = 0;       // tcpi_total_rto: retransmission timeouts since the connection opened (Linux 6.7+)
  uint64_t rto_recoveries = 0;  // tcpi_total_rto_recoveries: RTO episodes (a timeout not repaired by the first
                                // retransmission counts once here and once more in total_rto per further timeout)
  bool rto_counted = false;     // the kernel reports tcpi_total_rto (else only ca_state tells an RTO recovery)
  uint8_t ca_state = 0;         // tcpi_ca_state: kTcpCaLoss while recovering from a retransmission timeout
};

/// tcpi_ca_state of a connection recovering from a retransmission timeout (TCP_CA_Loss).
inline constexpr uint8_t kTcpCaLoss = 4;

/// TCP_INFO of socket `fd`. Errors: kSystemError naming errno (not a TCP socket, closed).
Result<TcpSignals> readTcpSignals(int fd);

/// "512 KiB", "1.5 MiB", "80 B".
std::string byteText(uint64_t bytes);

/// The sender's controller of one connection (one peer). The transport commits frames in order and they are
/// acknowledged in order: each tracked frame is counted from onCommit() (window space taken), stamped by
/// onWritten() when its last byte entered the socket, and released by the acknowledgement that names it. Only
/// full chunks (bytes == chunkBytes() when committed) give RTT samples.
class SenderControl {
 public:
  /// Time constants of the adaptive policy.
  static constexpr double kTcpInfoIntervalUs = 1000;  // most one TCP_INFO read per connection per ms
  static constexpr double kBaseEpochUs = 10e6;        // the base-RTT min filter forgets samples older than 2 epochs
  static constexpr double kTargetFactor = 2.0;        // RTT target: twice the base RTT of the chunk size ...
  static constexpr double kTargetSlackUs = 50;        // ... and at least this above it (timer and scheduling noise)
  static constexpr double kKernelRttFactor = 4.0;     // a standing network queue: tcpi_rtt > 4 x tcpi_min_rtt +
                                                      // slack (x0.5); above 2 x, delay samples may shrink W
  static constexpr double kMaxDecrease = 0.5;         // multiplicative decrease, at most x0.5 per RTT

  explicit SenderControl(const Config& config);

  uint64_t chunkBytes() const { return chunk_; }
  uint64_t windowBytes() const { return window_; }
  uint64_t inflightBytes() const { return inflight_; }
  /// Whether a tracked frame of `bytes` fits the window now (always when nothing is in flight).
  bool mayCommit(uint64_t bytes) const { return inflight_ == 0 || inflight_ + bytes <= window_; }
  /// A tracked frame of `bytes` was committed to the wire (takes window space).
  void onCommit(uint64_t bytes);
  /// The oldest committed, unwritten tracked frame finished writing at `now_us`.
  void onWritten(double now_us);
  /// The receiver acknowledged the next `count` tracked frames; the newest was read `hold_us` before the
  /// acknowledgement left the receiver. Errors: kInvalidArgument when `count` exceeds the frames written.
  Status onAck(uint64_t count, double hold_us, double now_us);
  /// Whether TCP_INFO should be read now (at most every kTcpInfoIntervalUs; fixed records it for BRAID_DEBUG only).
  bool tcpSignalsDue(double now_us) const;
  void onTcpSignals(const TcpSignals& signals, double now_us);
  /// The receiver reported `senders` waiting for its credits (fan-in; grants carry it).
  void onFanIn(int senders) { fan_in_ = senders; }

  /// What a sender tells a receiver that admits senders (CreditGranter::report): this connection's
  /// retransmission timeouts (RTOs) and retransmitted segments since the last report.
  struct Report {
    uint64_t timeouts = 0;
    uint64_t retransmits = 0;
  };
  /// The report accumulated from the TCP_INFO reads since the last call (zero when nothing happened); the
  /// counts restart. RTOs are tcpi_total_rto's growth where the kernel reports it (Linux 6.7+), else the reads
  /// that found the connection newly in RTO recovery (tcpi_ca_state TCP_CA_Loss), which can miss short ones.
  Report takeReport();

  /// Counters and the last measurements, for logs and tests.
  struct State {
    uint64_t chunk = 0;
    uint64_t window = 0;
    uint64_t inflight = 0;
    double base_rtt_us = 0;  // base RTT of the current chunk size (0: no sample yet)
    double rtt_us = 0;       // last per-chunk RTT sample
    double kernel_rtt_us = 0;
    double kernel_min_rtt_us = 0;
    uint64_t retransmits = 0;  // tcpi_total_retrans at the last read
    uint64_t delivery_rate = 0;
    int fan_in = 0;
    uint64_t acked_frames = 0;
    uint64_t decreases = 0;   // multiplicative decreases (window or chunk)
    uint64_t timeouts = 0;    // retransmission timeouts seen since the connection opened
    uint64_t recoveries = 0;  // RTO recovery episodes among them (Linux 6.7+)
  };
  State state() const;
  /// One line: "adaptive chunk 128 KiB window 384 KiB inflight 256 KiB base RTT 412 us RTT 655 us kernel RTT
  /// 310/120 us retrans 12 rate 118.0 MB/s fan-in 2 decreases 7".
  std::string describe() const;

 private:
  struct Frame {
    uint64_t bytes = 0;
    double written_us = -1;  // < 0: not written yet
    bool sample = false;     // a full chunk: gives an RTT sample
  };
  // The base RTT of chunks of one size: the min of this epoch and the last (a windowed min filter).
  struct BaseRtt {
    uint64_t chunk = 0;
    double current = 0;  // 0: none
    double previous = 0;
    double epoch_start_us = 0;
    double get() const;
    void add(double rtt_us, double now_us);
  };

  bool adaptive() const { return config_.policy == Policy::kAdaptive; }
  BaseRtt& baseFor(uint64_t chunk);
  /// The AIMD step for one RTT sample of a full chunk of size `chunk` (already in the base and the EWMA).
  void adapt(double rtt_us, uint64_t chunk, uint64_t acked_bytes, double now_us);
  /// The smallest window a decrease leaves: 2 x max delivery rate x base RTT, within [chunk_min, window].
  uint64_t windowFloor() const;
  /// Fabric congestion (loss, kernel RTT): the window first, x `factor` (>= x0.5), not below windowFloor().
  void decreaseWindow(double factor, double now_us);
  /// Incast (several senders wait at the receiver): the chunk, down to chunk_min.
  void decreaseChunk(double now_us);
  bool decreaseAllowed(double now_us) const;

  Config config_;
  uint64_t chunk_;
  uint64_t window_;
  uint64_t inflight_ = 0;
  std::deque<Frame> frames_;  // committed, not acknowledged, in order
  size_t written_ = 0;        // frames_[0, written_) are written
  std::vector<BaseRtt> bases_;
  double rtt_us_ = 0;
  double srtt_us_ = 0;  // EWMA (1/8) of the samples: the pace of decreases
  double last_decrease_us_ = -1e18;
  double growth_ = 0;  // additive increase accumulated below one chunk
  TcpSignals tcp_;
  bool have_tcp_ = false;
  uint64_t retrans_base_ = 0;  // tcpi_total_retrans when the last loss was acted on
  bool loss_pending_ = false;  // retransmissions seen, not acted on yet
  double next_tcp_read_us_ = 0;
  uint64_t max_delivery_rate_ = 0;
  int fan_in_ = 0;
  uint64_t acked_frames_ = 0;
  uint64_t decreases_ = 0;
  uint64_t rto_base_ = 0;  // tcpi_total_rto at the last read
  uint64_t timeouts_ = 0;  // RTOs seen in all
  Report report_;          // accumulated since the last takeReport()
};

/// The receiver's admission of senders (incast control), adaptive: AIMD on the number of senders admitted at once.
///
/// Open (the start, as NCCL's fixed protocol): every sender is admitted; each request is granted at once, in full,
/// and senders may send without asking at all (open() tells the transport so). A report of retransmission
/// timeouts (report(): a sender's TCP connection to this receiver timed out, the signature of incast
/// overflowing a shallow switch buffer) closes admission to half the live senders (at least `floor`); each
/// further report halves it again (not below `floor`), at most once per round; a round without a report adds one
/// sender; at every live sender admission opens again (also when senders leave). A report that would admit every
/// live sender anyway (one sender, or `floor` at least the live senders) changes nothing. A round is as many
/// completed grants (a grant completes when its credit passes on; one of a quarter grant or less, when all of it
/// arrived) as max(admission, senders waiting) when it began: every waiting sender served once.
/// Reports in the round right after a decrease only mark it (no growth at its end): they may still be about data
/// sent before the decrease.
///
/// Gated: at most `admission` senders hold a grant of at most `grant_bytes`; a sender whose grant is nearly used
/// up (a quarter of a grant or less still to arrive) passes its credit on and goes to the back of the queue when it
/// wants more — so the next sender's grant travels while the last quarter drains, and a sender alone is granted
/// again before it runs dry.
///
/// Floor 0: no admission control — every request is granted at once, in full, and admission never closes.
class CreditGranter {
 public:
  struct Grant {
    int sender = 0;
    uint64_t bytes = 0;
  };

  /// `senders` live senders numbered 0..senders-1 (more with addSender()), admitted at least `floor` at once.
  CreditGranter(int floor, uint64_t grant_bytes, int senders);

  /// A new live sender (the net plugin's receive comms come and go); returns its number.
  int addSender();
  /// `sender` wants `bytes` more.
  void request(int sender, uint64_t bytes);
  /// `bytes` of credited data from `sender` arrived. Errors: kInvalidArgument when it exceeds its grants.
  Status received(int sender, uint64_t bytes);
  /// `sender` reports `timeouts` retransmission timeouts on its connection to this receiver since its last report
  /// (SenderControl::takeReport); zero changes nothing.
  void report(int sender, uint64_t timeouts);
  /// `sender` is gone (closed its endpoint): its requests and grants are dropped, it no longer counts as live.
  void forget(int sender);
  /// Gates admission now at max(`admission`, floor) senders (BRAID_CC_ADMIT: a receiver that starts gated), even
  /// when that admits every live sender; a round begins, which grows it as after a report. Nothing for floor 0.
  void close(int admission);
  /// Moves the grants to send now into `out` (appended).
  void collect(std::vector<Grant>* out);
  /// Senders that want bytes or hold a grant: the receiver's fan-in.
  int waiting() const;
  /// Senders holding a credit now (senders whose last quarter of a grant drains do not).
  int granted() const { return holders_; }
  /// Every sender admitted: senders need not ask (always for floor 0).
  bool open() const { return open_; }
  /// Senders admitted at once: the live senders when open.
  int admission() const { return open_ ? live_ : admission_; }
  /// Whether open() changed since the last call (the transport then tells every sender).
  bool takeModeChange();
  /// Admission decreases and increases so far (logs and tests).
  uint64_t decreases() const { return decreases_; }
  uint64_t increases() const { return increases_; }
  /// "gated: 2 of 7 senders admitted, 2 holding, 5 waiting, 3 decrease(s), 1 increase(s)".
  std::string describe() const;

 private:
  struct Sender {
    uint64_t wanted = 0;       // requested, not granted yet
    uint64_t outstanding = 0;  // granted, not arrived yet
    bool queued = false;
    bool live = true;
    bool in_round = false;  // holds a grant given while gated that has not completed yet
  };
  bool holds(const Sender& s) const { return s.outstanding > handover_bytes_; }
  void grant(int sender, uint64_t bytes);
  void enqueue(int sender);
  /// Every sender admitted: what each wants is granted now, in full.
  void openAll();
  void startRound();
  /// A grant completed: ends the round once it is full (growth when no report came).
  void grantCompleted();

  int floor_;
  uint64_t grant_bytes_;
  uint64_t handover_bytes_;
  std::vector<Sender> senders_;
  int live_ = 0;
  std::deque<int> queue_;  // senders waiting for a grant, in request order
  int holders_ = 0;
  std::vector<Grant> ready_;
  bool open_ = true;
  int admission_ = 0;                  // gated: senders admitted at once
  bool mode_changed_ = false;          // open_ changed, not taken yet
  int round_length_ = 1;               // grants that complete the round
  int round_done_ = 0;                 // grants completed in this round
  bool round_reported_ = false;        // a report came in this round: no growth at its end
  bool round_after_decrease_ = false;  // this round began with a decrease: reports do not decrease again
  uint64_t decreases_ = 0;
  uint64_t increases_ = 0;
};

/// The sender's bound on peers fed at once (the staggered all-to-all): a peer becomes active when it has data and
/// a slot is free, in the order peers asked; it stays active until nothing is queued or unacknowledged to it.
/// Limit 0: every peer is active.
class PeerScheduler {
 public:
  PeerScheduler(int limit, int peers);
  /// `peer` has data to send.
  void want(int peer);
  /// `peer` has nothing queued or in flight: its slot goes to the next waiting peer (returned, or -1).
  int release(int peer);
  bool active(int peer) const { return limit_ == 0 || active_[peer]; }
  int activeCount() const { return count_; }

 private:
  int limit_;
  std::vector<bool> active_;
  std::vector<bool> queued_;
  std::deque<int> queue_;
  int count_ = 0;
};

}  // namespace braid::congestion
