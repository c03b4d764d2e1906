// The congestion model's event loop: NIC schedulers, switch queues with ECN and PFC, chunk windows, receiver credits
// (include/braid/congestion.h, docs/congestion.md).
//
// Events (one binary heap, time then insertion order):
//   kTxDone   a link finished serializing its train: the train leaves the sending switch's buffer (its ingress
//             counter may fall to Xon: resume upstream) and arrives latency_us later; the link starts its next train.
//   kArrive   a train reaches a device: at its destination NIC it is delivered (the chunk's last train schedules the
//             acknowledgement); at a switch it is counted against its ingress port (Xoff: pause upstream), marked by
//             RED on its egress queue, and queued.
//   kPfc      a pause (version 1) or resume (version 0) reaches the upstream end of a link.
//   kAck      a chunk's acknowledgement reaches the sender: window update (adaptive), next chunk.
//   kStart    a rank starts its all-to-all (at 0, or after its launch skew).
//   kRequest, kGrant   receiver credits (rx_credit_chunks > 0): a flow asks for its next chunk, the receiver grants
//                      it when fewer than rx_credit_chunks granted chunks are on their way to it.
#include "braid/congestion.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "transport/simulated/congestion_fabric.h"
#include "transport/simulated/sim_queues.h"

namespace braid::congestion {

Policy Policy::fixed512k() {
  Policy p;
  p.name = "fixed-512K";
  p.kind = PolicyKind::kFixed;
  p.chunk_bytes = 512 << 10;
  p.window_chunks = 8;
  return p;
}

Policy Policy::fixed128k() {
  Policy p = fixed512k();
  p.name = "fixed-128K";
  p.chunk_bytes = 128 << 10;
  return p;
}

Policy Policy::adaptive() {
  Policy p;
  p.name = "adaptive";
  p.kind = PolicyKind::kAdaptive;
  p.chunk_bytes = 512 << 10;
  p.rtt_target_us = 20;
  p.rx_credit_chunks = 4;
  return p;
}

namespace {

using sim::Event;
using sim::EventHeap;
using sim::RingQueue;

enum EventType : uint8_t { kTxDone, kArrive, kPfc, kAck, kRequest, kGrant, kStart };

struct Train {
  uint32_t flow = 0;
  uint32_t bytes = 0;
  uint8_t hop = 0;  // index of the link it is queued on or crossing
  bool marked = false;
  bool last_of_chunk = false;
};

struct ChunkRecord {   // one unacknowledged chunk of a flow, in order
  double sent_us = 0;  // its last train started to leave the NIC (RTT = acknowledgement - this: the network's part)
  uint32_t trains = 0;
  uint32_t marked = 0;
  uint64_t bytes = 0;
};

enum class FlowState : uint8_t { kIdle, kActive, kDone };

struct Flow {
  Fabric::Path path;
  int src = 0, dst = 0;  // ranks
  uint64_t size = 0;
  uint64_t sent = 0;        // bytes handed to the NIC
  uint64_t delivered = 0;   // bytes at the receiver
  uint64_t chunk_left = 0;  // bytes of the current chunk not yet sent
  uint64_t inflight = 0;    // bytes of unacknowledged chunks
  int inflight_chunks = 0;
  int arrived = 0;  // unacknowledged chunks whose last train arrived (acknowledgement in flight)
  double cwnd = 0;  // adaptive: window, bytes
  double alpha = 0;
  double last_cut_us = -1;  // adaptive: last multiplicative decrease
  double start_us = 0, done_us = 0;
  FlowState state = FlowState::kIdle;
  int credits = 0;          // receiver credits: granted chunks not yet started
  bool requesting = false;  // receiver credits: a request is on its way or queued at the receiver
  bool queued = false;      // in its NIC's ready list
  RingQueue<ChunkRecord> chunks;
};

struct LinkState {
  RingQueue<uint32_t> queue;  // trains waiting (switch egress); NIC egress is fed by the scheduler
  uint64_t queue_bytes = 0;
  uint64_t ingress_bytes = 0;  // at the destination switch: bytes that came in here and are still there
  bool busy = false;
  bool paused = false;      // the downstream switch paused this link
  bool pause_sent = false;  // the downstream switch has a pause outstanding for this link
  double paused_since = 0;
  uint32_t tx = 0;  // the train being serialized
};

class Engine {
 public:
  Engine(const FabricSpec& fs, const SwitchSpec& ss, const Policy& p, const Workload& w, Fabric fabric,
         const std::vector<FlowSpec>& flows)
      : fs_(fs), ss_(ss), policy_(p), work_(w), f_(std::move(fabric)), rng_(w.seed * 0x9e3779b97f4a7c15ull + 1) {
    links_.resize(f_.links.size());
    occupancy_.assign(static_cast<size_t>(f_.devices - f_.hosts), 0);
    buffer_.resize(occupancy_.size());
    for (size_t s = 0; s < buffer_.size(); ++s) {
      buffer_[s] = ss_.buffer_bytes > 0 ? ss_.buffer_bytes : ss_.buffer_per_port_bytes * f_.ports_of[s];
    }
    ready_.resize(f_.hosts);
    rx_granted_.assign(fs_.ranks, 0);
    rx_waiting_.resize(fs_.ranks);
    next_.assign(fs_.ranks, 0);
    active_.assign(fs_.ranks, 0);
    buildFlows(flows);
  }

  Report run() {
    // Every rank starts at 0, or at a uniform draw in [0, start_jitter_us] (launch skew).
    for (int r = 0; r < fs_.ranks; ++r) {
      const double at = work_.start_jitter_us > 0 ? uniform() * work_.start_jitter_us : 0.0;
      push(at, kStart, static_cast<uint32_t>(r));
    }
    while (!heap_.empty()) {
      const Event ev = heap_.top();
      heap_.pop();
      now_ = ev.time;
      ++report_.events;
      dispatch(ev);
    }
    return finish();
  }

 private:
  // ---- setup ------------------------------------------------------------------------------------------------

  void buildFlows(const std::vector<FlowSpec>& specs) {
    order_.resize(fs_.ranks);
    for (const FlowSpec& spec : specs) {
      Flow fl;
      fl.src = spec.src;
      fl.dst = spec.dst;
      fl.size = spec.bytes;
      fl.path = flowPath(fs_, f_, spec.src, spec.dst, work_.seed);
      fl.cwnd = static_cast<double>(policy_.initial_window_bytes);
      order_[spec.src].push_back(static_cast<int>(flows_.size()));
      flows_.push_back(std::move(fl));
    }
  }

  void push(double time, EventType type, uint32_t payload, uint32_t version = 0) {
    heap_.push(Event{time, (seq_++ << 3) | type, payload, version});
  }

  // ---- senders ------------------------------------------------------------------------------------------------

  // Activates rank r's next flows, in the order given, until peers_in_flight are active.
  void activateMore(int r) {
    while (active_[r] < work_.peers_in_flight && next_[r] < order_[r].size()) {
      const int id = order_[r][next_[r]++];
      Flow& fl = flows_[id];
      ++active_[r];
      fl.start_us = now_;
      fl.state = FlowState::kActive;
      makeReady(id);
    }
  }

  uint64_t chunkBytes(const Flow& fl) const {
    if (policy_.kind == PolicyKind::kFixed) return policy_.chunk_bytes;
    // A quarter of the window, a power of two within [min_chunk, chunk].
    uint64_t c = policy_.min_chunk_bytes;
    while (c * 2 <= policy_.chunk_bytes && static_cast<double>(c * 2) * 4 <= fl.cwnd) c *= 2;
    return c;
  }

  bool windowOpen(const Flow& fl) const {
    if (policy_.kind == PolicyKind::kFixed) return fl.inflight_chunks < policy_.window_chunks;
    return fl.inflight_chunks == 0 || static_cast<double>(fl.inflight + chunkBytes(fl)) <= fl.cwnd;
  }

  bool canSend(const Flow& fl) const {
    if (fl.state != FlowState::kActive || fl.sent >= fl.size) return false;
    return fl.chunk_left > 0 || (windowOpen(fl) && (!credited() || fl.credits > 0));
  }

  bool credited() const { return policy_.kind == PolicyKind::kAdaptive && policy_.rx_credit_chunks > 0; }

  // Receiver credits: a flow with chunks left, its window open and no credit in hand asks for one (one request at a
  // time; the receiver serves requests first come, first served, so its senders take turns chunk by chunk).
  void maybeRequest(int id) {
    Flow& fl = flows_[id];
    if (!credited() || fl.requesting || fl.credits > 0 || fl.sent + fl.chunk_left >= fl.size) return;
    if (fl.state != FlowState::kActive || fl.sent >= fl.size || !windowOpen(fl)) return;
    fl.requesting = true;
    push(now_ + fl.path.latency_us, kRequest, static_cast<uint32_t>(id));
  }

  void makeReady(int id) {
    Flow& fl = flows_[id];
    maybeRequest(id);
    if (fl.queued || !canSend(fl)) return;
    fl.queued = true;
    ready_[fl.path.src_host].push_back(static_cast<uint32_t>(id));
    startLink(f_.host_up[fl.path.src_host]);
  }

  // The NIC's next train: round-robin over its ready flows.
  bool nextHostTrain(int host, uint32_t* train) {
    RingQueue<uint32_t>& q = ready_[host];
    while (!q.empty()) {
      const uint32_t id = q.front();
      q.pop_front();
      Flow& fl = flows_[id];
      fl.queued = false;
      if (!canSend(fl)) continue;
      if (fl.chunk_left == 0) {  // a new chunk
        const uint64_t c = std::min(chunkBytes(fl), fl.size - fl.sent);
        fl.chunk_left = c;
        fl.inflight += c;
        ++fl.inflight_chunks;
        fl.chunks.push_back(ChunkRecord{now_, 0, 0, c});
        if (credited()) {
          --fl.credits;
          maybeRequest(static_cast<int>(id));  // ask for the next chunk while this one goes out
        }
      }
      const uint64_t bytes = std::min<uint64_t>(work_.train_bytes, fl.chunk_left);
      fl.chunk_left -= bytes;
      fl.sent += bytes;
      if (fl.chunk_left == 0) fl.chunks[fl.chunks.size() - 1].sent_us = now_;
      *train = newTrain(id, bytes, fl.chunk_left == 0);
      if (canSend(fl)) {
        fl.queued = true;
        q.push_back(id);
      }
      return true;
    }
    return false;
  }

  uint32_t newTrain(uint32_t flow, uint64_t bytes, bool last) {
    uint32_t t;
    if (!free_trains_.empty()) {
      t = free_trains_.back();
      free_trains_.pop_back();
    } else {
      t = static_cast<uint32_t>(trains_.size());
      trains_.emplace_back();
    }
    trains_[t] = Train{flow, static_cast<uint32_t>(bytes), 0, false, last};
    ++report_.trains;
    return t;
  }

  // ---- links and switches -------------------------------------------------------------------------------------

  void startLink(int l) {
    LinkState& ls = links_[l];
    if (ls.busy || ls.paused) return;
    uint32_t t = 0;
    if (f_.links[l].src < f_.hosts) {
      if (!nextHostTrain(f_.links[l].src, &t)) return;
    } else {
      if (ls.queue.empty()) return;
      t = ls.queue.front();
      ls.queue.pop_front();
      ls.queue_bytes -= trains_[t].bytes;
    }
    ls.busy = true;
    ls.tx = t;
    push(now_ + trains_[t].bytes / f_.links[l].bytes_per_us, kTxDone, static_cast<uint32_t>(l));
  }

  void txDone(int l) {
    LinkState& ls = links_[l];
    ls.busy = false;
    const uint32_t t = ls.tx;
    Train& tr = trains_[t];
    const Flow& fl = flows_[tr.flow];
    if (tr.hop > 0) leaveSwitch(fl.path.link[tr.hop - 1], tr.bytes);
    push(now_ + f_.links[l].latency_us, kArrive, t);
    startLink(l);
  }

  // A train that came in through `in_link` leaves its switch.
  void leaveSwitch(int in_link, uint32_t bytes) {
    LinkState& in = links_[in_link];
    in.ingress_bytes -= bytes;
    occupancy_[f_.links[in_link].dst - f_.hosts] -= bytes;
    if (in.pause_sent && in.ingress_bytes <= ss_.pfc_xon_bytes) {
      in.pause_sent = false;
      push(now_ + f_.links[in_link].latency_us, kPfc, static_cast<uint32_t>(in_link), 0);
    }
  }

  double uniform() {
    rng_ ^= rng_ << 13;
    rng_ ^= rng_ >> 7;
    rng_ ^= rng_ << 17;
    return static_cast<double>(rng_ >> 11) * (1.0 / 9007199254740992.0);
  }

  bool redMark(uint64_t queue) {
    if (queue <= ss_.ecn_kmin_bytes) return false;
    if (queue >= ss_.ecn_kmax_bytes) return true;
    const double p = ss_.ecn_pmax * static_cast<double>(queue - ss_.ecn_kmin_bytes) /
                     static_cast<double>(ss_.ecn_kmax_bytes - ss_.ecn_kmin_bytes);
    return uniform() < p;
  }

  void arrive(uint32_t t) {
    Train& tr = trains_[t];
    Flow& fl = flows_[tr.flow];
    const int in_link = fl.path.link[tr.hop];
    if (tr.hop + 1 == fl.path.hops) {
      deliver(t);
      return;
    }
    // A switch: ingress accounting, PFC, ECN, egress queue.
    const int sw = f_.links[in_link].dst - f_.hosts;
    LinkState& in = links_[in_link];
    in.ingress_bytes += tr.bytes;
    occupancy_[sw] += tr.bytes;
    report_.max_buffer_bytes = std::max(report_.max_buffer_bytes, occupancy_[sw]);
    if (occupancy_[sw] > buffer_[sw]) ++report_.buffer_overruns;
    if (ss_.pfc && !in.pause_sent && in.ingress_bytes >= ss_.pfc_xoff_bytes) {
      in.pause_sent = true;
      push(now_ + f_.links[in_link].latency_us, kPfc, static_cast<uint32_t>(in_link), 1);
    }
    ++tr.hop;
    const int out = fl.path.link[tr.hop];
    LinkState& ls = links_[out];
    if (!tr.marked && redMark(ls.queue_bytes)) {
      tr.marked = true;
      ++report_.ecn_marks;
    }
    ls.queue.push_back(t);
    ls.queue_bytes += tr.bytes;
    report_.max_queue_bytes = std::max(report_.max_queue_bytes, ls.queue_bytes);
    startLink(out);
  }

  void pfc(int l, bool pause) {
    LinkState& ls = links_[l];
    if (pause) {
      if (ls.paused) return;
      ls.paused = true;
      ls.paused_since = now_;
      ++report_.pause_frames;
      if (f_.links[l].src < f_.hosts) ++report_.pause_frames_to_nics;
      return;
    }
    if (!ls.paused) return;
    ls.paused = false;
    report_.paused_us += now_ - ls.paused_since;
    startLink(l);
  }

  // ---- receivers ----------------------------------------------------------------------------------------------

  void deliver(uint32_t t) {
    const Train tr = trains_[t];
    free_trains_.push_back(t);
    Flow& fl = flows_[tr.flow];
    fl.delivered += tr.bytes;
    // Chunks arrive in order (one path, FIFO queues): this train belongs to the first chunk not fully arrived.
    ChunkRecord& rec = fl.chunks[static_cast<size_t>(fl.arrived)];
    ++rec.trains;
    rec.marked += tr.marked ? 1 : 0;
    if (tr.last_of_chunk) {
      ++fl.arrived;
      push(now_ + fl.path.latency_us, kAck, tr.flow);
      if (credited()) chunkLanded(fl.dst);
    }
    if (fl.delivered == fl.size) fl.done_us = now_;
  }

  void ack(uint32_t id) {
    Flow& fl = flows_[id];
    const ChunkRecord rec = fl.chunks.front();
    fl.chunks.pop_front();
    --fl.arrived;
    fl.inflight -= rec.bytes;
    --fl.inflight_chunks;
    if (policy_.kind == PolicyKind::kAdaptive) adapt(fl, rec);
    if (fl.delivered == fl.size && fl.inflight_chunks == 0) {
      fl.state = FlowState::kDone;
      --active_[fl.src];
      activateMore(fl.src);
      return;
    }
    makeReady(static_cast<int>(id));
  }

  // DCTCP on the chunk's marks, Swift-like on its RTT; at most one decrease per RTT.
  void adapt(Flow& fl, const ChunkRecord& rec) {
    const double rtt = now_ - rec.sent_us;
    const double fraction = rec.trains > 0 ? static_cast<double>(rec.marked) / rec.trains : 0.0;
    fl.alpha = (1 - policy_.dctcp_g) * fl.alpha + policy_.dctcp_g * fraction;
    const bool may_cut = fl.last_cut_us < 0 || now_ - fl.last_cut_us >= rtt;
    double factor = 1.0;
    if (policy_.ecn_window && rec.marked > 0) factor = std::min(factor, 1 - fl.alpha / 2);
    if (policy_.rtt_target_us > 0 && rtt > policy_.rtt_target_us) {
      factor = std::min(factor, std::max(0.5, 1 - 0.5 * (rtt - policy_.rtt_target_us) / rtt));
    }
    if (factor < 1.0) {
      if (may_cut) {
        fl.cwnd *= factor;
        fl.last_cut_us = now_;
      }
    } else {
      fl.cwnd += static_cast<double>(rec.bytes) * static_cast<double>(rec.bytes) / fl.cwnd;  // +1 chunk per window
    }
    fl.cwnd = std::clamp(fl.cwnd, static_cast<double>(policy_.min_window_bytes),
                         static_cast<double>(policy_.max_window_bytes));
  }

  // A request reaches the receiver: granted at once while fewer than rx_credit_chunks granted chunks are on their
  // way to it, queued otherwise.
  void request(uint32_t id) {
    const int r = flows_[id].dst;
    if (rx_granted_[r] < policy_.rx_credit_chunks) {
      ++rx_granted_[r];
      push(now_ + flows_[id].path.latency_us, kGrant, id);
    } else {
      rx_waiting_[r].push_back(id);
    }
  }

  void grant(uint32_t id) {
    Flow& fl = flows_[id];
    fl.requesting = false;
    ++fl.credits;
    makeReady(static_cast<int>(id));
  }

  // A granted chunk has fully arrived at receiver r: its credit goes to the next request.
  void chunkLanded(int r) {
    --rx_granted_[r];
    if (rx_waiting_[r].empty()) return;
    const uint32_t next = rx_waiting_[r].front();
    rx_waiting_[r].pop_front();
    ++rx_granted_[r];
    push(now_ + flows_[next].path.latency_us, kGrant, next);
  }

  void dispatch(const Event& ev) {
    switch (ev.type()) {
      case kTxDone: txDone(static_cast<int>(ev.payload)); break;
      case kArrive: arrive(ev.payload); break;
      case kPfc: pfc(static_cast<int>(ev.payload), ev.version == 1); break;
      case kAck: ack(ev.payload); break;
      case kRequest: request(ev.payload); break;
      case kGrant: grant(ev.payload); break;
      case kStart: activateMore(static_cast<int>(ev.payload)); break;
    }
  }

  Report finish() {
    Report& r = report_;
    r.policy = policy_.name;
    r.flows = static_cast<long long>(flows_.size());
    double last = 0;
    uint64_t bytes = 0;
    std::vector<bool> sends(f_.hosts, false);
    r.fct_us.reserve(flows_.size());
    for (const Flow& fl : flows_) {
      last = std::max(last, fl.done_us);
      bytes += fl.size;
      sends[fl.path.src_host] = true;
      r.fct_us.push_back(fl.done_us - fl.start_us);
    }
    r.time_us = last;
    for (size_t l = 0; l < links_.size(); ++l) {
      if (links_[l].paused) r.paused_us += now_ - links_[l].paused_since;
    }
    const long long senders = std::count(sends.begin(), sends.end(), true);
    if (last > 0) {
      r.nic_gbps = static_cast<double>(bytes) / last / 1e3 / static_cast<double>(std::max<long long>(1, senders));
      r.paused_fraction = r.paused_us / (static_cast<double>(links_.size()) * last);
    }
    std::vector<double> sorted = r.fct_us;
    std::sort(sorted.begin(), sorted.end());
    auto pct = [&](double q) {
      if (sorted.empty()) return 0.0;
      const size_t k = std::min(sorted.size() - 1, static_cast<size_t>(std::ceil(q * sorted.size())) - 1);
      return sorted[k];
    };
    r.fct_p50_us = pct(0.50);
    r.fct_p99_us = pct(0.99);
    r.fct_max_us = sorted.empty() ? 0 : sorted.back();
    return r;
  }

  const FabricSpec& fs_;
  const SwitchSpec& ss_;
  const Policy& policy_;
  const Workload& work_;
  Fabric f_;
  uint64_t rng_;
  double now_ = 0;
  uint64_t seq_ = 0;
  EventHeap heap_;
  std::vector<Flow> flows_;
  std::vector<std::vector<int>> order_;  // per sending rank: its flows in activation order
  std::vector<Train> trains_;
  std::vector<uint32_t> free_trains_;
  std::vector<LinkState> links_;
  std::vector<uint64_t> occupancy_;         // per switch
  std::vector<uint64_t> buffer_;            // per switch
  std::vector<RingQueue<uint32_t>> ready_;  // per NIC: flows that can send
  std::vector<int> rx_granted_;             // per receiving rank: granted chunks not yet arrived
  std::vector<RingQueue<uint32_t>> rx_waiting_;
  std::vector<size_t> next_;  // per sending rank: the next of order_ to activate
  std::vector<int> active_;   // per sending rank: active flows
  Report report_;
};

Status checkRun(const SwitchSpec& s, const Policy& p, const Workload& w) {
  if (s.pfc && s.pfc_xon_bytes > s.pfc_xoff_bytes) {
    return invalidArgument(
        fmt::format("congestion: PFC Xon {} bytes is above Xoff {}", s.pfc_xon_bytes, s.pfc_xoff_bytes));
  }
  if (s.ecn_kmin_bytes > s.ecn_kmax_bytes) {
    return invalidArgument(
        fmt::format("congestion: ECN Kmin {} bytes is above Kmax {}", s.ecn_kmin_bytes, s.ecn_kmax_bytes));
  }
  if (!(s.ecn_pmax >= 0 && s.ecn_pmax <= 1)) {
    return invalidArgument(fmt::format("congestion: ECN Pmax {} is not a probability", s.ecn_pmax));
  }
  if (s.buffer_bytes == 0 && s.buffer_per_port_bytes == 0)
    return invalidArgument("congestion: switch buffer of 0 bytes");
  if (p.chunk_bytes == 0) return invalidArgument(fmt::format("congestion: policy '{}': chunk of 0 bytes", p.name));
  if (p.kind == PolicyKind::kFixed && p.window_chunks < 1) {
    return invalidArgument(fmt::format("congestion: policy '{}': window of {} chunks", p.name, p.window_chunks));
  }
  if (p.kind == PolicyKind::kAdaptive) {
    if (p.min_chunk_bytes == 0 || p.min_chunk_bytes > p.chunk_bytes) {
      return invalidArgument(
          fmt::format("congestion: policy '{}': chunk range [{}, {}] bytes", p.name, p.min_chunk_bytes, p.chunk_bytes));
    }
    if (p.min_window_bytes == 0 || p.min_window_bytes > p.max_window_bytes || p.initial_window_bytes == 0) {
      return invalidArgument(fmt::format("congestion: policy '{}': window range [{}, {}] bytes, initial {}", p.name,
                                         p.min_window_bytes, p.max_window_bytes, p.initial_window_bytes));
    }
    if (!(p.dctcp_g > 0 && p.dctcp_g <= 1)) {
      return invalidArgument(fmt::format("congestion: policy '{}': DCTCP gain {}", p.name, p.dctcp_g));
    }
    if (p.rx_credit_chunks < 0) {
      return invalidArgument(fmt::format("congestion: policy '{}': rx_credit_chunks < 0", p.name));
    }
  }
  if (w.bytes_per_peer == 0) return invalidArgument("congestion: 0 bytes per peer");
  if (w.peers_in_flight < 1) return invalidArgument("congestion: peers_in_flight must be at least 1");
  if (!(w.start_jitter_us >= 0) || !std::isfinite(w.start_jitter_us)) {
    return invalidArgument(fmt::format("congestion: start jitter {} us", w.start_jitter_us));
  }
  if (w.train_bytes == 0 || w.train_bytes > (uint64_t{1} << 31)) {
    return invalidArgument(fmt::format("congestion: train of {} bytes", w.train_bytes));
  }
  return Status::ok();
}

}  // namespace

Result<Report> simulateFlows(const FabricSpec& fabric, const SwitchSpec& switches, const Policy& policy,
                             const Workload& workload, const std::vector<FlowSpec>& flows) {
  BRAID_ASSIGN_OR_RETURN(Fabric built, buildFabric(fabric));
  BRAID_RETURN_IF_ERROR(checkRun(switches, policy, workload));
  for (size_t k = 0; k < flows.size(); ++k) {
    const FlowSpec& f = flows[k];
    if (f.src < 0 || f.src >= fabric.ranks || f.dst < 0 || f.dst >= fabric.ranks) {
      return invalidArgument(
          fmt::format("congestion: flow {}: {} -> {} outside ranks 0 .. {}", k, f.src, f.dst, fabric.ranks - 1));
    }
    if (f.src / fabric.gpus_per_node == f.dst / fabric.gpus_per_node) {
      return invalidArgument(
          fmt::format("congestion: flow {}: {} -> {} stays in one node (NVLink, not the fabric)", k, f.src, f.dst));
    }
    if (f.bytes == 0) return invalidArgument(fmt::format("congestion: flow {}: 0 bytes", k));
  }
  Engine engine(fabric, switches, policy, workload, std::move(built), flows);
  return engine.run();
}

Result<Report> simulateAllToAll(const FabricSpec& fabric, const SwitchSpec& switches, const Policy& policy,
                                const Workload& workload) {
  BRAID_RETURN_IF_ERROR(buildFabric(fabric).status());
  BRAID_RETURN_IF_ERROR(checkRun(switches, policy, workload));
  // NCCL's p2p order: rank r sends to r+1, r+2, ...; pairs on one node go over NVLink.
  std::vector<FlowSpec> flows;
  const int n = fabric.ranks;
  for (int s = 0; s < n; ++s) {
    for (int i = 1; i < n; ++i) {
      const int d = (s + i) % n;
      if (s / fabric.gpus_per_node != d / fabric.gpus_per_node) flows.push_back({s, d, workload.bytes_per_peer});
    }
  }
  BRAID_ASSIGN_OR_RETURN(Report report, simulateFlows(fabric, switches, policy, workload, flows));
  if (report.time_us > 0) {
    const double size = static_cast<double>(workload.bytes_per_peer) * n;  // nccl-tests size: one rank's buffer
    report.busbw_gbps = size / report.time_us / 1e3 * (n - 1) / n;
  }
  return report;
}

}  // namespace braid::congestion
