#include "congestion/congestion.h"

#include <fmt/format.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "common/env.h"
#include "common/text.h"

namespace braid::congestion {
namespace {

constexpr uint64_t kMinChunk = 1 << 10;
constexpr uint64_t kMaxChunk = 64 << 20;
constexpr uint64_t kMaxWindow = uint64_t{1} << 30;
constexpr int kMaxCount = 1024;

Result<uint64_t> envSize(const char* name) {
  const std::string text = envString(name);
  const std::optional<uint64_t> value = parseNcclTestsSize(text);
  if (!value) return invalidArgument(fmt::format("{}={}: not a size (bytes, K/M/G suffix)", name, text));
  return *value;
}

Result<int> envCount(const char* name) {
  Result<int64_t> value = envInt(name);
  if (!value.isOk() || *value < 0 || *value > kMaxCount) {
    return invalidArgument(fmt::format("{}={}: not a count in [0, {}]", name, envString(name), kMaxCount));
  }
  return static_cast<int>(*value);
}

}  // namespace

const char* policyName(Policy policy) { return policy == Policy::kFixed ? "fixed" : "adaptive"; }

std::string byteText(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 20) && bytes % (uint64_t{1} << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= (uint64_t{1} << 20)) return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
  if (bytes >= 1024 && bytes % 1024 == 0) return fmt::format("{} KiB", bytes >> 10);
  if (bytes >= 1024) return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / 1024);
  return fmt::format("{} B", bytes);
}

Result<Config> Config::fromEnvironment() {
  Config config;
  const std::string policy = lowerCase(envString("BRAID_CC_POLICY"));
  if (policy == "fixed") {
    config.policy = Policy::kFixed;
  } else if (policy == "adaptive") {
    config.policy = Policy::kAdaptive;
  } else {
    return invalidArgument(
        fmt::format("BRAID_CC_POLICY={}: not a policy (fixed, adaptive)", envString("BRAID_CC_POLICY")));
  }
  BRAID_ASSIGN_OR_RETURN(config.chunk_min, envSize("BRAID_CC_CHUNK_MIN"));
  BRAID_ASSIGN_OR_RETURN(config.chunk_max, envSize("BRAID_CC_CHUNK_MAX"));
  BRAID_ASSIGN_OR_RETURN(config.window, envSize("BRAID_CC_WINDOW"));
  BRAID_ASSIGN_OR_RETURN(config.grant_bytes, envSize("BRAID_CC_GRANT"));
  BRAID_ASSIGN_OR_RETURN(config.credits, envCount("BRAID_CC_CREDITS"));
  BRAID_ASSIGN_OR_RETURN(config.admit_start, envCount("BRAID_CC_ADMIT"));
  BRAID_ASSIGN_OR_RETURN(config.active_peers, envCount("BRAID_CC_ACTIVE_PEERS"));
  const Status valid = config.validate();
  if (!valid.isOk()) {
    // Name the variables behind the field the check refused.
    return invalidArgument(
        fmt::format("BRAID_CC_CHUNK_MIN={} BRAID_CC_CHUNK_MAX={} BRAID_CC_WINDOW={} BRAID_CC_GRANT={}: {}",
                    envString("BRAID_CC_CHUNK_MIN"), envString("BRAID_CC_CHUNK_MAX"), envString("BRAID_CC_WINDOW"),
                    envString("BRAID_CC_GRANT"), valid.message()));
  }
  return config;
}

Status Config::validate() const {
  if (chunk_min < kMinChunk || chunk_max > kMaxChunk) {
    return invalidArgument(fmt::format("chunks must lie in [{}, {}] (chunk min {}, max {})", byteText(kMinChunk),
                                       byteText(kMaxChunk), byteText(chunk_min), byteText(chunk_max)));
  }
  if (chunk_min > chunk_max) {
    return invalidArgument(fmt::format("chunk min {} is above chunk max {}", byteText(chunk_min), byteText(chunk_max)));
  }
  if (window < chunk_max || window > kMaxWindow) {
    return invalidArgument(fmt::format("window {} must lie in [chunk max {}, {}]", byteText(window),
                                       byteText(chunk_max), byteText(kMaxWindow)));
  }
  if (grant_bytes < chunk_min) {
    return invalidArgument(fmt::format("grant {} is below chunk min {}", byteText(grant_bytes), byteText(chunk_min)));
  }
  if (credits < 0 || credits > kMaxCount || active_peers < 0 || active_peers > kMaxCount || admit_start < 0 ||
      admit_start > kMaxCount) {
    return invalidArgument(fmt::format("credits {}, admit {} and active peers {} must lie in [0, {}]", credits,
                                       admit_start, active_peers, kMaxCount));
  }
  return Status::ok();
}

std::string Config::toString() const {
  if (policy == Policy::kFixed) {
    return fmt::format("fixed: chunk {}, window {} ({} chunks in flight per connection)", byteText(chunk_max),
                       byteText(window), window / chunk_max);
  }
  return fmt::format(
      "adaptive: chunk {}..{}, window <= {}, admission {}, grant {}, active peers {}", byteText(chunk_min),
      byteText(chunk_max), byteText(window),
      credits == 0 ? std::string("off")
                   : fmt::format("{} .. at least {}",
                                 admit_start == 0 ? std::string("all senders")
                                                  : fmt::format("{} at the start", std::max(admit_start, credits)),
                                 credits),
      byteText(grant_bytes), active_peers == 0 ? std::string("all") : std::to_string(active_peers));
}

Result<TcpSignals> readTcpSignals(int fd) {
  // Room for the fields newer kernels append after this header's struct: tcpi_rcv_wnd and tcpi_rehash (u32 each),
  // then tcpi_total_rto (u16, Linux 6.7+), at a fixed offset since the struct only ever grows at its end.
  constexpr size_t kTotalRtoOffset = offsetof(tcp_info, tcpi_snd_wnd) + sizeof(uint32_t) * 3;
  alignas(tcp_info) unsigned char raw[sizeof(tcp_info) + 64];
  std::memset(raw, 0, sizeof(raw));
  socklen_t len = sizeof(raw);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, raw, &len) != 0) {
    return Status(StatusCode::kSystemError, fmt::format("getsockopt(TCP_INFO): {}", std::strerror(errno)));
  }
  tcp_info info;
  std::memcpy(&info, raw, sizeof(info));
  TcpSignals signals;
  signals.total_retrans = info.tcpi_total_retrans;
  signals.ca_state = info.tcpi_ca_state;
  if (len >= kTotalRtoOffset + sizeof(uint16_t)) {
    uint16_t rtos = 0;
    std::memcpy(&rtos, raw + kTotalRtoOffset, sizeof(rtos));
    signals.total_rto = rtos;
    signals.rto_counted = true;
    std::memcpy(&rtos, raw + kTotalRtoOffset + sizeof(uint16_t), sizeof(rtos));
    signals.rto_recoveries = rtos;
  }
  signals.rtt_us = info.tcpi_rtt;
  // Older kernels fill less of the struct: the fields they leave out stay 0 ("not measured").
  if (len >= offsetof(tcp_info, tcpi_min_rtt) + sizeof(info.tcpi_min_rtt)) signals.min_rtt_us = info.tcpi_min_rtt;
  if (len >= offsetof(tcp_info, tcpi_delivery_rate) + sizeof(info.tcpi_delivery_rate)) {
    signals.delivery_rate = info.tcpi_delivery_rate;
  }
  return signals;
}

// ---------------------------------------------------------------------------------------------------------------
// SenderControl

SenderControl::SenderControl(const Config& config)
    : config_(config),
      chunk_(config.chunk_max),
      // Both start with NCCL's window; adaptive backs off from there on congestion and grows back (x2 per RTT
      // below twice the bandwidth-delay product, then +1 chunk per RTT).
      window_(config.window) {}

void SenderControl::onCommit(uint64_t bytes) {
  frames_.push_back(Frame{bytes, -1, bytes == chunk_});
  inflight_ += bytes;
}

void SenderControl::onWritten(double now_us) {
  if (written_ < frames_.size()) frames_[written_++].written_us = now_us;
}

Status SenderControl::onAck(uint64_t count, double hold_us, double now_us) {
  if (count == 0 || count > written_) {
    return invalidArgument(
        fmt::format("an acknowledgement of {} chunk(s) while {} were written and not acknowledged", count, written_));
  }
  uint64_t acked = 0;
  Frame newest;
  for (uint64_t i = 0; i < count; ++i) {
    newest = frames_.front();
    acked += newest.bytes;
    frames_.pop_front();
  }
  written_ -= count;
  inflight_ -= acked;
  acked_frames_ += count;
  if (!newest.sample) return Status::ok();
  // Both policies measure (BRAID_DEBUG shows it); only adaptive acts on it.
  const double rtt = std::max(1.0, now_us - newest.written_us - std::max(0.0, hold_us));
  rtt_us_ = rtt;
  srtt_us_ = srtt_us_ == 0 ? rtt : srtt_us_ + (rtt - srtt_us_) / 8;
  baseFor(newest.bytes).add(rtt, now_us);
  if (adaptive()) adapt(rtt, newest.bytes, acked, now_us);
  return Status::ok();
}

bool SenderControl::tcpSignalsDue(double now_us) const { return now_us >= next_tcp_read_us_; }

void SenderControl::onTcpSignals(const TcpSignals& signals, double now_us) {
  next_tcp_read_us_ = now_us + kTcpInfoIntervalUs;
  // Losses before the first read are not this window's. Timeouts are counted from the connection's start (the
  // first read comes with the first acknowledgement, which an incast's first timeout delays past it).
  if (!have_tcp_) retrans_base_ = signals.total_retrans;
  // What the receiver hears of (takeReport): the kernel's RTO count (16 bits: its growth modulo 2^16), else a
  // read that finds the connection newly in RTO recovery.
  uint64_t timeouts = 0;
  if (signals.rto_counted) {
    timeouts = (signals.total_rto - rto_base_) & 0xffff;
    rto_base_ = signals.total_rto;
  } else if (signals.ca_state == kTcpCaLoss && (!have_tcp_ || tcp_.ca_state != kTcpCaLoss)) {
    timeouts = 1;
  }
  timeouts_ += timeouts;
  report_.timeouts += timeouts;
  if (have_tcp_ && signals.total_retrans > tcp_.total_retrans) {
    report_.retransmits += signals.total_retrans - tcp_.total_retrans;
  }
  have_tcp_ = true;
  tcp_ = signals;
  max_delivery_rate_ = std::max(max_delivery_rate_, signals.delivery_rate);
  if (!adaptive()) return;
  // Fabric congestion: segments were lost (the shallow buffer overflowed), or TCP's own RTT shows a standing
  // queue in the network. The window shrinks first; one decrease per RTT, as losses of one RTT are one event.
  const bool lost = signals.total_retrans > retrans_base_;
  const bool queued = signals.min_rtt_us > 0 && signals.rtt_us > kKernelRttFactor * signals.min_rtt_us + kTargetSlackUs;
  if ((lost || queued) && decreaseAllowed(now_us)) decreaseWindow(kMaxDecrease, now_us);
  retrans_base_ = signals.total_retrans;
}

SenderControl::Report SenderControl::takeReport() {
  const Report report = report_;
  report_ = Report{};
  return report;
}

double SenderControl::BaseRtt::get() const {
  if (current == 0) return previous;
  if (previous == 0) return current;
  return std::min(current, previous);
}

void SenderControl::BaseRtt::add(double rtt_us, double now_us) {
  if (now_us - epoch_start_us >= kBaseEpochUs) {
    previous = current;
    current = 0;
    epoch_start_us = now_us;
  }
  current = current == 0 ? rtt_us : std::min(current, rtt_us);
}

SenderControl::BaseRtt& SenderControl::baseFor(uint64_t chunk) {
  for (BaseRtt& base : bases_) {
    if (base.chunk == chunk) return base;
  }
  bases_.push_back(BaseRtt{chunk, 0, 0, 0});
  return bases_.back();
}

bool SenderControl::decreaseAllowed(double now_us) const {
  const double rtt = srtt_us_ > 0 ? srtt_us_ : tcp_.rtt_us;
  return now_us - last_decrease_us_ >= rtt;
}

uint64_t SenderControl::windowFloor() const {
  // Twice what this connection delivers in one base RTT (its fastest delivery rate x the smallest per-chunk RTT
  // of the current chunk size): below that the window, not the network, would limit it, since every window's
  // acknowledgement waits for the receiving process as well as the network.
  double base = 0;
  for (const BaseRtt& b : bases_) {
    if (b.chunk == chunk_) base = b.get();
  }
  const double floor =
      std::max(2.0 * static_cast<double>(max_delivery_rate_) * base * 1e-6, static_cast<double>(config_.grant_bytes));
  return std::clamp<uint64_t>(static_cast<uint64_t>(floor), config_.chunk_min, config_.window);
}

void SenderControl::decreaseWindow(double factor, double now_us) {
  const double shrunk = static_cast<double>(window_) * std::clamp(factor, kMaxDecrease, 1.0);
  window_ = std::max<uint64_t>(std::min(window_, windowFloor()), static_cast<uint64_t>(shrunk));
  while (chunk_ > window_ && chunk_ / 2 >= config_.chunk_min) chunk_ /= 2;
  chunk_ = std::max(config_.chunk_min, std::min(chunk_, window_));
  growth_ = 0;
  last_decrease_us_ = now_us;
  ++decreases_;
}

void SenderControl::decreaseChunk(double now_us) {
  chunk_ = std::max(config_.chunk_min, chunk_ / 2);
  last_decrease_us_ = now_us;
  ++decreases_;
}

void SenderControl::adapt(double rtt_us, uint64_t chunk, uint64_t acked_bytes, double now_us) {
  const double base = baseFor(chunk).get();
  const double target = std::max(base * kTargetFactor, base + kTargetSlackUs);
  if (rtt_us > target) {
    if (!decreaseAllowed(now_us)) return;
    // Several senders waiting at this receiver make it incast: smaller chunks first (the receiver's credits
    // rotate faster and each sender queues less behind the others). Otherwise, when TCP's own RTT shows a queue
    // in the network (above 2 x its minimum + slack), the window, in proportion to the excess (Swift's decrease),
    // at most x0.5. A delay TCP does not see is at the hosts (the receiver reading late, this socket's own
    // backlog): shrinking the window would only idle the link, so it stays.
    const bool network_queue =
        tcp_.min_rtt_us > 0 && tcp_.rtt_us > kKernelRttFactor / 2 * tcp_.min_rtt_us + kTargetSlackUs;
    if (chunk == chunk_ && fan_in_ > 1 && chunk_ > config_.chunk_min) {
      decreaseChunk(now_us);
    } else if (network_queue) {
      decreaseWindow(1.0 - 0.8 * (rtt_us - target) / rtt_us, now_us);
    }
    return;
  }
  // Below the target: grow. Below twice the bandwidth-delay product (delivery rate x kernel min RTT) the window
  // doubles per RTT (slow start); above it, one chunk per window acknowledged (+1 chunk per RTT).
  const double bdp = static_cast<double>(max_delivery_rate_) * tcp_.min_rtt_us * 1e-6;
  const double w = static_cast<double>(window_);
  growth_ += w < 2 * bdp ? static_cast<double>(acked_bytes)
                         : static_cast<double>(chunk_) * static_cast<double>(acked_bytes) / w;
  if (growth_ >= 4096) {
    window_ = std::min<uint64_t>(config_.window, window_ + static_cast<uint64_t>(growth_));
    growth_ = 0;
  }
  // The chunk grows back once the window holds four of the doubled chunks and the receiver is not shared.
  if (fan_in_ <= 1 && chunk_ < config_.chunk_max && window_ >= 8 * chunk_) {
    chunk_ = std::min(config_.chunk_max, 2 * chunk_);
  }
}

SenderControl::State SenderControl::state() const {
  State s;
  s.chunk = chunk_;
  s.window = window_;
  s.inflight = inflight_;
  for (const BaseRtt& base : bases_) {
    if (base.chunk == chunk_) s.base_rtt_us = base.get();
  }
  s.rtt_us = rtt_us_;
  s.kernel_rtt_us = tcp_.rtt_us;
  s.kernel_min_rtt_us = tcp_.min_rtt_us;
  s.retransmits = tcp_.total_retrans;
  s.delivery_rate = tcp_.delivery_rate;
  s.fan_in = fan_in_;
  s.acked_frames = acked_frames_;
  s.decreases = decreases_;
  s.timeouts = timeouts_;
  s.recoveries = tcp_.rto_recoveries;
  return s;
}

std::string SenderControl::describe() const {
  const State s = state();
  return fmt::format(
      "{} chunk {} window {} inflight {} base RTT {:.0f} us RTT {:.0f} us kernel RTT {:.0f}/{:.0f} us retrans {} "
      "rate {:.1f} MB/s RTOs {} recoveries {} fan-in {} acked {} decreases {}",
      policyName(config_.policy), byteText(s.chunk), byteText(s.window), byteText(s.inflight), s.base_rtt_us, s.rtt_us,
      s.kernel_rtt_us, s.kernel_min_rtt_us, s.retransmits, static_cast<double>(s.delivery_rate) / 1e6, s.timeouts,
      s.recoveries, s.fan_in, s.acked_frames, s.decreases);
}

// ---------------------------------------------------------------------------------------------------------------
// CreditGranter

CreditGranter::CreditGranter(int floor, uint64_t grant_bytes, int senders)
    : floor_(floor),
      grant_bytes_(grant_bytes),
      handover_bytes_(grant_bytes / 4),
      senders_(static_cast<size_t>(senders)),
      live_(senders) {}

int CreditGranter::addSender() {
  senders_.push_back(Sender{});
  ++live_;
  return static_cast<int>(senders_.size()) - 1;
}

void CreditGranter::grant(int sender, uint64_t bytes) {
  Sender& s = senders_[sender];
  const bool held = holds(s);
  s.outstanding += bytes;
  s.wanted -= bytes;
  if (!held && holds(s)) ++holders_;
  if (!open_) s.in_round = true;
  ready_.push_back(Grant{sender, bytes});
}

void CreditGranter::enqueue(int sender) {
  Sender& s = senders_[sender];
  if (s.wanted == 0 || s.queued || holds(s) || !s.live) return;
  queue_.push_back(sender);
  s.queued = true;
}

void CreditGranter::request(int sender, uint64_t bytes) {
  Sender& s = senders_[sender];
  if (bytes == 0 || !s.live) return;
  s.wanted += bytes;
  if (open_) {
    grant(sender, s.wanted);
    return;
  }
  enqueue(sender);
  collect(nullptr);
}

Status CreditGranter::received(int sender, uint64_t bytes) {
  Sender& s = senders_[sender];
  if (bytes > s.outstanding) {
    return invalidArgument(
        fmt::format("sent {} of credited data with {} granted", byteText(bytes), byteText(s.outstanding)));
  }
  const bool held = holds(s);
  s.outstanding -= bytes;
  const bool handed_over = held && !holds(s);
  // Its grant is nearly in: the credit passes on now, while the rest drains, so the receiver's link does not
  // idle for the next sender's grant to travel. A sender that wants more queues again at the back.
  if (handed_over) --holders_;
  if (!open_) {
    if (handed_over) enqueue(sender);
    // A grant completes when its credit passes on, or (a grant of a quarter or less, which never held one) when
    // it has all arrived.
    if (s.in_round && (handed_over || s.outstanding == 0)) {
      s.in_round = false;
      grantCompleted();
    }
  }
  collect(nullptr);
  return Status::ok();
}

void CreditGranter::report(int sender, uint64_t timeouts) {
  if (timeouts == 0 || floor_ == 0 || !senders_[sender].live) return;
  if (open_) {
    // The first trouble: admit half the live senders (unless that is every one of them: nothing to gate).
    if (std::max(floor_, live_ / 2) >= live_) return;
    open_ = false;
    mode_changed_ = true;
    admission_ = std::max(floor_, live_ / 2);
  } else {
    round_reported_ = true;
    if (round_after_decrease_) return;  // may be about data sent before the last decrease
    admission_ = std::max(floor_, admission_ / 2);
  }
  ++decreases_;
  startRound();
  round_after_decrease_ = true;
}

void CreditGranter::close(int admission) {
  if (floor_ == 0) return;
  if (open_) mode_changed_ = true;
  open_ = false;
  admission_ = std::max(floor_, admission);
  startRound();
}

void CreditGranter::startRound() {
  round_length_ = std::max({1, admission_, waiting()});
  round_done_ = 0;
  round_reported_ = false;
  round_after_decrease_ = false;
}

void CreditGranter::grantCompleted() {
  if (++round_done_ < round_length_) return;
  if (!round_reported_) {
    ++admission_;
    ++increases_;
    if (admission_ >= live_) {
      openAll();
      return;
    }
  }
  startRound();
}

void CreditGranter::openAll() {
  open_ = true;
  mode_changed_ = true;
  for (const int sender : queue_) senders_[sender].queued = false;
  queue_.clear();
  for (size_t i = 0; i < senders_.size(); ++i) {
    if (senders_[i].wanted > 0 && senders_[i].live) grant(static_cast<int>(i), senders_[i].wanted);
  }
}

bool CreditGranter::takeModeChange() {
  const bool changed = mode_changed_;
  mode_changed_ = false;
  return changed;
}

void CreditGranter::forget(int sender) {
  Sender& s = senders_[sender];
  if (holds(s)) --holders_;
  if (s.live) --live_;
  s = Sender{};
  s.live = false;
  queue_.erase(std::remove(queue_.begin(), queue_.end(), sender), queue_.end());
  if (!open_ && admission_ >= live_) openAll();  // the senders left are all admitted
  collect(nullptr);
}

void CreditGranter::collect(std::vector<Grant>* out) {
  while (!open_ && holders_ < admission_ && !queue_.empty()) {
    const int sender = queue_.front();
    queue_.pop_front();
    Sender& s = senders_[sender];
    s.queued = false;
    if (s.wanted > 0) grant(sender, std::min(s.wanted, grant_bytes_));
  }
  if (out != nullptr) {
    out->insert(out->end(), ready_.begin(), ready_.end());
    ready_.clear();
  }
}

int CreditGranter::waiting() const {
  int count = 0;
  for (const Sender& s : senders_) count += (s.wanted > 0 || s.outstanding > 0) ? 1 : 0;
  return count;
}

std::string CreditGranter::describe() const {
  return fmt::format("{}: {} of {} senders admitted, {} holding, {} waiting, {} decrease(s), {} increase(s)",
                     open_ ? "open" : "gated", admission(), live_, holders_, waiting(), decreases_, increases_);
}

// ---------------------------------------------------------------------------------------------------------------
// PeerScheduler

PeerScheduler::PeerScheduler(int limit, int peers)
    : limit_(limit), active_(static_cast<size_t>(peers), false), queued_(static_cast<size_t>(peers), false) {}

void PeerScheduler::want(int peer) {
  if (limit_ == 0 || active_[peer] || queued_[peer]) return;
  if (count_ < limit_) {
    active_[peer] = true;
    ++count_;
    return;
  }
  queue_.push_back(peer);
  queued_[peer] = true;
}

int PeerScheduler::release(int peer) {
  if (limit_ == 0 || !active_[peer]) return -1;
  active_[peer] = false;
  --count_;
  if (queue_.empty()) return -1;
  const int next = queue_.front();
  queue_.pop_front();
  queued_[next] = false;
  active_[next] = true;
  ++count_;
  return next;
}

}  // namespace braid::congestion
