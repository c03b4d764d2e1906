// SimTransport: the simulated transport (include/braid/simulate.h, docs/simulator.md "Model").
//
// A virtual clock over a topology. Every send is one message (one slice, as the executor posts it) that
// goes through these stages, in this order (the order is part of the contract; tests pin it):
//
//   0. Credit. Send number s of a connection (src, dst, channel) may start only when
//      s < (receives dst has posted on that connection) + fifo_depth: at most fifo_depth slices are sent
//      and not yet matched by a posted receive (NCCL_STEPS). A send beyond that waits for the receive.
//   1. Sender overhead o (message_overhead_us), serialized per connection (one threadblock posts one
//      message at a time): start = max(now, end of the connection's previous o), end = start + o.
//   2. Network admission, for a message whose route crosses a NIC: first the sending rank's network proxy
//      (proxy_gap_us: it posts one network send every proxy_gap_us, t = max(t, proxy_free[src]), proxy_free[src] =
//      t + gap — an isolated message waits for nothing; receives are posted ahead of the data), then the NIC admission
//      gap g (nic_gap_us) for every NIC vertex on the route in route order (the sending NIC, then the receiving NIC),
//      each NIC admitting one message every g: t = max(t, nic_free) + g. Done in time order (an event at the end of
//      stage 1), so messages reach a proxy or NIC in the order they are ready.
//   3. Data phase, serialized per connection (slice k+1 of a connection leaves after slice k): it starts
//      when stages 1-2 are done and the connection's previous data phase has ended (on a route through a NIC:
//      net_step_us after it ended, the per-step handshake of a network connection), and moves `bytes` at a
//      rate re-evaluated whenever the set of messages in their data phase changes on any of its links:
//        rate = min over its links l of  bandwidth(l) x efficiency[protocol][kind(l)] / flows(l)
//      (equal split among the messages on a link direction, bytes/us = GB/s x 1e3). The send completes
//      when its data phase ends (its last byte has left).
//   4. Head-to-tail latency, added once after the data phase (cut-through: the tail arrives this long after
//      the last byte left): L = sum over the route's links of alpha + hop_latency_us[protocol][kind].
//   5. Receiver overhead o: the message is delivered at data_end + L + o.
//   6. FIFO matching per connection: send k matches receive k. The receive completes at
//      max(time it was posted, delivery).
//
// Local requests take bytes / local_gbps (fused ones: nothing) and do not queue behind each other.
//
// Efficiency: one binary heap of events with lazy invalidation (a message's data-phase end is re-pushed
// with a new version when its rate changes; stale entries are skipped), per link the list of messages in
// their data phase, and on a start/finish only the messages on the touched links are re-rated (each keeps
// its remaining bytes and the time its rate was last set). A message costs at most three events: the end of
// stages 1-2 (only when its connection is idle; a queued message starts when its predecessor's data ends), the
// end of its data phase, and its delivery (only when the receive is posted by then; a receive posted after the
// delivery completes at once).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>
#include <utility>

#include "braid/simulate.h"
#include "transport/simulated/sim_queues.h"

namespace braid {
namespace {

using sim::Event;
using sim::EventHeap;
using sim::RingQueue;

constexpr double kBytesPerUsPerGbps = 1e3;  // 1 GB/s = 1e3 bytes/us

enum EventType : uint8_t {
  kNicStage,   // sender overhead done: pass the NICs (stage 2)
  kReady,      // stages 1-2 done: enter the connection's data queue (stage 3)
  kFlowEnd,    // data phase ends (versioned)
  kDeliver,    // data_end + L + o of a slot whose receive is posted (payload: connection, version: seq)
  kLocalDone,  // a local copy/reduce finished
};

struct SimRoute {
  std::vector<int> links;
  std::vector<int> nics;  // NIC vertices on the route, in route order
  std::array<double, kNumProtocols> latency_us{};
  std::array<double, kNumProtocols> min_cap{};  // smallest link capacity per protocol, bytes/us
};

struct Slot {  // one position of a connection's FIFO: send k <-> receive k
  RequestId recv = 0;
  double delivery = -1;  // data end + L + o, known once the send's data phase ended; < 0 before
  bool recv_posted = false;
  bool delivered = false;  // the receive completed (or will be completed by a pending kDeliver)
};

struct Connection {
  int src = 0, dst = 0, channel = 0;
  int route = 0;
  long long sends_posted = 0;
  long long recvs_posted = 0;
  RingQueue<int> credit_wait;  // messages waiting for a credit (stage 0), in order
  double o_free = 0;           // end of the last sender overhead (stage 1)
  bool data_busy = false;      // a message of this connection is in (or reserved for) its data phase
  double data_free_at = 0;     // earliest start of its next data phase (end of the last one + net_step_us)
  bool crosses_nic = false;    // its route passes a NIC: network steps pay net_step_us
  RingQueue<int> data_wait;    // messages past stage 1 (and 2) waiting for the connection, in order
  long long slot_base = 0;     // sequence number of slots.front()
  RingQueue<Slot> slots;
};

struct Message {
  RequestId id = 0;
  int conn = 0;
  int route = 0;
  int protocol = 0;
  long long seq = 0;
  uint64_t bytes = 0;
  double ready = 0;      // end of stages 1-2: earliest start of the data phase
  double remaining = 0;  // bytes left as of `last`
  double rate = 0;       // bytes/us
  double last = 0;
  uint32_t version = 0;
  // Index in links[route.links[k]].flows for each k, during the data phase: inline for routes of up to
  // kInlineHops links, in `more_pos` beyond.
  static constexpr int kInlineHops = 12;
  int link_pos[kInlineHops] = {};
  std::vector<int> more_pos;
  int& pos(size_t k) { return k < kInlineHops ? link_pos[k] : more_pos[k - kInlineHops]; }
};

struct LinkEntry {
  int msg = 0;
  int k = 0;  // index of this link on the message's route
};

struct TimelineState {
  double start = 0;
  double gbps = 0;
  int messages = 0;
};

}  // namespace

struct SimTransport::Impl {
  const Topology& topo;
  SimModel model;
  bool record = false;
  int num_ranks = 0;
  double now = 0;
  uint64_t next_order = 0;
  RequestId next_id = 1;
  long long outstanding = 0;

  EventHeap heap;
  static constexpr size_t kMinCompactEvents = size_t{1} << 20;
  size_t compact_at = kMinCompactEvents;  // heap size at which push() next drops stale events
  std::vector<Completion> ready;          // completed, not yet returned by poll

  std::vector<SimRoute> routes;
  std::unordered_map<uint64_t, int> route_of_pair;
  RouteCache route_cache;  // Topology::route with each source's searches shared across its destinations
  std::vector<Connection> conns;
  std::unordered_map<uint64_t, int> conn_of_key;
  std::vector<int> send_cache, recv_cache;  // per rank: last connection it sent / received on
  std::vector<Message> msgs;
  std::vector<int> free_msgs;
  std::vector<RequestId> local_ids;  // local requests in flight, by slot
  std::vector<uint32_t> free_locals;

  // Per link, one cache line: the messages in their data phase on it, its capacity per protocol (bytes/us),
  // bytes carried, and busy time as (sum of idle->busy times negated + busy->idle times).
  struct alignas(64) LinkState {
    std::vector<LinkEntry> flows;
    std::array<double, kNumProtocols> cap{};
    double busy_acc = 0;
    double bytes = 0;
    double rate_sum = 0;       // with record: sum of its messages' rates, bytes/us, kept as rates change
    uint32_t noted_stamp = 0;  // with record: the rerate that last noted it in the timeline
  };
  std::vector<LinkState> links;
  std::vector<double> nic_free;    // by vertex id
  std::vector<double> proxy_free;  // by rank: when its network proxy takes the next message

  // Re-rating scratch.
  std::vector<uint32_t> mark;
  uint32_t stamp = 0;
  std::vector<int> touched_msgs;

  std::vector<TimelineState> tl_state;
  std::vector<LinkSegment> segments;

  SimStats stats;

  Impl(const Topology& t, const SimModel& m, bool rec) : topo(t), model(m), record(rec), route_cache(t) {
    num_ranks = topo.numGpus();
    send_cache.assign(num_ranks, -1);
    recv_cache.assign(num_ranks, -1);
    const size_t nl = topo.links.size();
    links.resize(nl);
    for (size_t l = 0; l < nl; ++l) {
      const Link& link = topo.links[l];
      for (int p = 0; p < kNumProtocols; ++p) {
        links[l].cap[p] = link.bandwidth_gbps * kBytesPerUsPerGbps * model.efficiency[p][static_cast<int>(link.kind)];
      }
    }
    nic_free.assign(topo.vertices.size(), 0);
    proxy_free.assign(static_cast<size_t>(topo.numGpus()), 0);
    stats.link_bytes.assign(nl, 0);
    stats.link_busy_us.assign(nl, 0);
    if (record) tl_state.resize(nl);
  }

  void push(double time, EventType type, uint32_t payload, uint32_t version = 0) {
    // A re-rated message leaves its earlier kFlowEnd in the heap, stale. Where many flows share links (a flat
    // all-to-all over a fat-tree's spines: every start re-rates thousands), stale events outnumber live ones by
    // orders of magnitude; the heap drops them whenever it doubled since the last time (amortized O(1) a push).
    if (heap.size() >= compact_at) {
      heap.removeIf([this](const Event& e) { return stale(e); });
      compact_at = std::max(kMinCompactEvents, 2 * heap.size());
    }
    heap.push(Event{time, (next_order++ << 3) | type, payload, version});
  }

  void complete(RequestId id) {
    ready.push_back(Completion{id, now});
    --outstanding;
  }

  Result<int> routeFor(int src, int dst) {
    const uint64_t key = static_cast<uint64_t>(src) * static_cast<uint64_t>(num_ranks) + static_cast<uint64_t>(dst);
    auto it = route_of_pair.find(key);
    if (it != route_of_pair.end()) return it->second;
    std::optional<Route> r = route_cache.route(src, dst);
    if (!r || r->links.empty()) {
      return invalidArgument(
          fmt::format("sim: topology '{}' has no route from rank {} to rank {}", topo.name, src, dst));
    }
    SimRoute sr;
    sr.links = r->links;
    for (size_t k = 0; k < sr.links.size(); ++k) {
      const Link& link = topo.links[sr.links[k]];
      if (k == 0 && topo.vertices[link.src].kind == VertexKind::kNic) sr.nics.push_back(link.src);
      if (topo.vertices[link.dst].kind == VertexKind::kNic) sr.nics.push_back(link.dst);
      for (int p = 0; p < kNumProtocols; ++p) {
        sr.latency_us[p] += link.alpha_us + model.hop_latency_us[p][static_cast<int>(link.kind)];
        const double cap = links[sr.links[k]].cap[p];
        if (k == 0 || cap < sr.min_cap[p]) sr.min_cap[p] = cap;
      }
    }
    const int id = static_cast<int>(routes.size());
    routes.push_back(std::move(sr));
    route_of_pair.emplace(key, id);
    return id;
  }

  // Connection (src, dst, channel); `cache` remembers the last one per rank (most threadblocks talk to one peer).
  Result<int> connFor(int src, int dst, int channel, int* cache) {
    if (*cache >= 0) {
      const Connection& c = conns[*cache];
      if (c.src == src && c.dst == dst && c.channel == channel) return *cache;
    }
    BRAID_ASSIGN_OR_RETURN(const int id, lookupConn(src, dst, channel));
    *cache = id;
    return id;
  }

  Result<int> lookupConn(int src, int dst, int channel) {
    const uint64_t key =
        (static_cast<uint64_t>(src) << 42) | (static_cast<uint64_t>(dst) << 21) | static_cast<uint64_t>(channel);
    auto it = conn_of_key.find(key);
    if (it != conn_of_key.end()) return it->second;
    BRAID_ASSIGN_OR_RETURN(int route, routeFor(src, dst));
    Connection c;
    c.src = src;
    c.dst = dst;
    c.channel = channel;
    c.route = route;
    c.crosses_nic = !routes[route].nics.empty() && model.net_step_us > 0;
    const int id = static_cast<int>(conns.size());
    conns.push_back(std::move(c));
    conn_of_key.emplace(key, id);
    return id;
  }

  Status checkEndpoints(const char* what, int rank, int peer, int channel, Protocol protocol) const {
    if (rank < 0 || rank >= num_ranks || peer < 0 || peer >= num_ranks) {
      return invalidArgument(
          fmt::format("sim: {} between rank {} and rank {}: the topology has {} ranks", what, rank, peer, num_ranks));
    }
    if (rank == peer) return invalidArgument(fmt::format("sim: {} from rank {} to itself", what, rank));
    if (channel < 0 || channel >= (1 << 21)) {
      return invalidArgument(fmt::format("sim: {} of rank {}: channel {} out of range", what, rank, channel));
    }
    const int p = static_cast<int>(protocol);
    if (p < 0 || p >= kNumProtocols)
      return invalidArgument(fmt::format("sim: {} of rank {}: bad protocol", what, rank));
    return Status::ok();
  }

  int newMessage() {
    if (!free_msgs.empty()) {
      const int m = free_msgs.back();
      free_msgs.pop_back();
      return m;
    }
    msgs.emplace_back();
    mark.push_back(0);
    return static_cast<int>(msgs.size()) - 1;
  }

  Slot& slotAt(Connection& c, long long seq) {
    while (c.slot_base + static_cast<long long>(c.slots.size()) <= seq) c.slots.push_back(Slot{});
    return c.slots[static_cast<size_t>(seq - c.slot_base)];
  }

  void popDoneSlots(Connection& c) {
    while (!c.slots.empty() && c.slots.front().recv_posted && c.slots.front().delivered) {
      c.slots.pop_front();
      ++c.slot_base;
    }
  }

  bool hasCredit(const Connection& c, long long seq) const {
    return seq < c.recvs_posted + static_cast<long long>(std::max(model.fifo_depth, 1));
  }

  // Stage 1: sender overhead, serialized per connection.
  void startSend(int m) {
    Message& msg = msgs[m];
    Connection& c = conns[msg.conn];
    const double o_end = std::max(now, c.o_free) + model.message_overhead_us;
    c.o_free = o_end;
    if ((model.nic_gap_us > 0 || model.proxy_gap_us > 0) && !routes[msg.route].nics.empty()) {
      if (o_end > now) {
        push(o_end, EventType::kNicStage, static_cast<uint32_t>(m));
      } else {
        nicStage(m);
      }
      return;
    }
    msg.ready = o_end;
    enqueueData(m);
  }

  // Stage 2: the two ranks' network proxies, then the NIC admission gaps in route order, when the message's sender
  // overhead ends.
  void nicStage(int m) {
    double t = now;
    if (model.proxy_gap_us > 0) {
      // The sending rank's proxy posts the send when the data is ready: one every proxy_gap_us. Receives are posted
      // ahead of the data (NCCL posts a connection's NCCL_STEPS receive slots in advance), so the receiver's proxy
      // is off the message's path.
      const int src = conns[msgs[m].conn].src;
      if (src >= 0 && src < static_cast<int>(proxy_free.size())) {
        t = std::max(t, proxy_free[src]);
        proxy_free[src] = t + model.proxy_gap_us;
      }
    }
    for (int v : routes[msgs[m].route].nics) {
      t = std::max(t, nic_free[v]) + model.nic_gap_us;
      nic_free[v] = t;
    }
    msgs[m].ready = t;
    enqueueData(m);
  }

  // Stage 3 entry: the connection's data phases run one at a time, in order. A message queued behind a busy
  // connection needs no event for the end of its stages 1-2: it starts when the previous data phase ends, or
  // at `ready` if that is later.
  void enqueueData(int m) {
    Connection& c = conns[msgs[m].conn];
    if (c.data_busy) {
      c.data_wait.push_back(m);
      return;
    }
    c.data_busy = true;  // reserved for m from now on
    msgs[m].ready = std::max(msgs[m].ready, c.data_free_at);
    launchData(m);
  }

  void launchData(int m) {
    if (msgs[m].ready > now) {
      push(msgs[m].ready, EventType::kReady, static_cast<uint32_t>(m));
    } else {
      startFlow(m);
    }
  }

  double shareOf(const Message& msg) const {
    double rate = std::numeric_limits<double>::infinity();
    for (int l : routes[msg.route].links) {
      rate = std::min(rate, links[l].cap[msg.protocol] / static_cast<double>(links[l].flows.size()));
    }
    return rate;
  }

  // Notes link l's rate (the sum of its messages' rates, kept incrementally) once per rerate. A sum that moved by
  // rounding only is the same rate.
  void timelineNote(int l) {
    if (links[l].noted_stamp == stamp) return;
    links[l].noted_stamp = stamp;
    TimelineState& st = tl_state[l];
    const int count = static_cast<int>(links[l].flows.size());
    const double gbps = count == 0 ? 0.0 : links[l].rate_sum / kBytesPerUsPerGbps;
    if (std::abs(gbps - st.gbps) <= 1e-12 * std::max(1.0, std::abs(st.gbps)) && count == st.messages) return;
    if (st.messages > 0 && now > st.start) segments.push_back(LinkSegment{l, st.start, now, st.gbps, st.messages});
    st.start = now;
    st.gbps = gbps;
    st.messages = count;
  }

  // Re-rates every message in its data phase on `route_links` (the route of a message that just started or ended).
  void rerate(const std::vector<int>& route_links) {
    ++stamp;
    touched_msgs.clear();
    for (int l : route_links) {
      for (const LinkEntry& e : links[l].flows) {
        if (mark[e.msg] == stamp) continue;
        mark[e.msg] = stamp;
        Message& f = msgs[e.msg];
        const double rate = shareOf(f);
        if (rate == f.rate) continue;
        f.remaining = std::max(0.0, f.remaining - f.rate * (now - f.last));
        f.last = now;
        if (record) {
          for (int l : routes[f.route].links) links[l].rate_sum += rate - f.rate;
        }
        f.rate = rate;
        ++f.version;
        push(now + f.remaining / rate, EventType::kFlowEnd, static_cast<uint32_t>(e.msg), f.version);
        if (record) touched_msgs.push_back(e.msg);
      }
    }
    if (record) {
      for (int l : route_links) timelineNote(l);
      for (int fm : touched_msgs) {
        for (int l : routes[msgs[fm].route].links) timelineNote(l);
      }
    }
  }

  void startFlow(int m) {
    Message& msg = msgs[m];
    if (msg.bytes == 0) {  // a zero-byte message has no data phase
      endData(m);
      return;
    }
    const SimRoute& route = routes[msg.route];
    msg.remaining = static_cast<double>(msg.bytes);
    msg.rate = 0;
    msg.last = now;
    if (route.links.size() > Message::kInlineHops) msg.more_pos.resize(route.links.size() - Message::kInlineHops);
    for (size_t k = 0; k < route.links.size(); ++k) {
      const int l = route.links[k];
      LinkState& link = links[l];
      if (link.flows.empty()) link.busy_acc -= now;
      msg.pos(k) = static_cast<int>(link.flows.size());
      link.flows.push_back(LinkEntry{m, static_cast<int>(k)});
      link.bytes += static_cast<double>(msg.bytes);
    }
    rerate(route.links);
  }

  void endFlow(int m) {
    Message& msg = msgs[m];
    const SimRoute& route = routes[msg.route];
    for (size_t k = 0; k < route.links.size(); ++k) {
      const int l = route.links[k];
      std::vector<LinkEntry>& list = links[l].flows;
      const int pos = msg.pos(k);
      const LinkEntry moved = list.back();
      list[pos] = moved;
      msgs[moved.msg].pos(moved.k) = pos;
      list.pop_back();
      if (list.empty()) links[l].busy_acc += now;
      if (record) links[l].rate_sum = list.empty() ? 0.0 : links[l].rate_sum - msg.rate;
    }
    msg.rate = 0;
    ++msg.version;  // any pending kFlowEnd of this message is stale now
    rerate(route.links);
    endData(m);
  }

  // End of stage 3: the send completes; stages 4-5 are one delay; the connection's next data phase starts.
  // A kDeliver event is scheduled only when the receive is already posted; otherwise postRecv completes the
  // receive at once (delivery already past) or schedules the event then. The message itself is done here.
  void endData(int m) {
    Message& msg = msgs[m];
    const int conn = msg.conn;
    complete(msg.id);
    Connection& c = conns[conn];
    Slot& slot = slotAt(c, msg.seq);
    slot.delivery = now + routes[msg.route].latency_us[msg.protocol] + model.message_overhead_us;
    if (slot.recv_posted) pushDeliver(conn, msg.seq, slot.delivery);
    free_msgs.push_back(m);
    c.data_busy = false;
    if (c.crosses_nic) c.data_free_at = now + model.net_step_us;
    if (!c.data_wait.empty()) {
      const int next = c.data_wait.front();
      c.data_wait.pop_front();
      c.data_busy = true;
      msgs[next].ready = std::max(msgs[next].ready, c.data_free_at);
      launchData(next);
    }
  }

  void pushDeliver(int conn, long long seq, double time) {
    push(time, EventType::kDeliver, static_cast<uint32_t>(conn), static_cast<uint32_t>(seq));
  }

  // Stage 6 at the delivery time of slot `seq32` (low 32 bits of the sequence number) of a connection whose
  // receive is posted: the receive completes.
  void deliver(int conn, uint32_t seq32) {
    Connection& c = conns[conn];
    const long long seq = c.slot_base + static_cast<uint32_t>(seq32 - static_cast<uint32_t>(c.slot_base));
    Slot& slot = slotAt(c, seq);
    slot.delivered = true;
    complete(slot.recv);
    popDoneSlots(c);
  }

  void process(const Event& ev) {
    const int m = static_cast<int>(ev.payload);
    switch (ev.type()) {
      case EventType::kNicStage: nicStage(m); break;
      case EventType::kReady: startFlow(m); break;
      case EventType::kFlowEnd: endFlow(m); break;
      case EventType::kDeliver: deliver(m, ev.version); break;
      case EventType::kLocalDone:
        complete(local_ids[ev.payload]);
        free_locals.push_back(ev.payload);
        break;
    }
  }

  bool stale(const Event& ev) const {
    return ev.type() == EventType::kFlowEnd && msgs[static_cast<int>(ev.payload)].version != ev.version;
  }

  std::string deadlockMessage() const {
    std::vector<std::string> waits;
    long long total = 0;
    for (const Connection& c : conns) {
      long long unmatched = 0;
      for (size_t k = 0; k < c.slots.size(); ++k) {
        const long long seq = c.slot_base + static_cast<long long>(k);
        if (c.slots[k].recv_posted && seq >= c.sends_posted) ++unmatched;
      }
      if (unmatched > 0) {
        ++total;
        if (waits.size() < 4) {
          waits.push_back(
              fmt::format("rank {} waits for {} message(s) from rank {} on channel {} that rank {} never sent", c.dst,
                          unmatched, c.src, c.channel, c.src));
        }
      }
      if (!c.credit_wait.empty()) {
        ++total;
        if (waits.size() < 4) {
          waits.push_back(fmt::format(
              "rank {} waits to send {} message(s) to rank {} on channel {}: {} slice(s) in flight and no receive "
              "posted (fifo_depth {})",
              c.src, c.credit_wait.size(), c.dst, c.channel, c.sends_posted - c.recvs_posted - c.credit_wait.size(),
              model.fifo_depth));
        }
      }
    }
    std::string out = fmt::format("sim: deadlock at {:.3f} us, {} request(s) can never complete: ", now, outstanding);
    for (size_t i = 0; i < waits.size(); ++i) out += (i ? "; " : "") + waits[i];
    if (total > static_cast<long long>(waits.size())) out += fmt::format("; and {} more", total - waits.size());
    return out;
  }
};

SimTransport::SimTransport(const Topology& topology, const SimModel& model, bool record_timeline)
    : impl_(std::make_unique<Impl>(topology, model, record_timeline)) {}

SimTransport::~SimTransport() = default;

Result<RequestId> SimTransport::postSend(const SendRequest& request) {
  Impl& s = *impl_;
  BRAID_RETURN_IF_ERROR(s.checkEndpoints("send", request.rank, request.peer, request.channel, request.protocol));
  BRAID_ASSIGN_OR_RETURN(const int conn,
                         s.connFor(request.rank, request.peer, request.channel, &s.send_cache[request.rank]));
  const int p = static_cast<int>(request.protocol);
  if (!(s.routes[s.conns[conn].route].min_cap[p] > 0)) {
    for (int l : s.routes[s.conns[conn].route].links) {
      if (s.links[l].cap[p] > 0) continue;
      const Link& link = s.topo.links[l];
      return invalidArgument(
          fmt::format("sim: send from rank {} to rank {}: {} link {} -> {} has no bandwidth for {} "
                      "(bandwidth {} GB/s x efficiency[{}][{}])",
                      request.rank, request.peer, linkKindName(link.kind), s.topo.vertices[link.src].name,
                      s.topo.vertices[link.dst].name, protocolName(request.protocol), link.bandwidth_gbps,
                      protocolName(request.protocol), linkKindName(link.kind)));
    }
  }
  const int m = s.newMessage();
  Message& msg = s.msgs[m];
  Connection& c = s.conns[conn];
  msg.id = s.next_id++;
  msg.conn = conn;
  msg.route = c.route;
  msg.protocol = p;
  msg.seq = c.sends_posted++;
  msg.bytes = request.src.bytes;
  ++s.outstanding;
  ++s.stats.messages;
  if (c.credit_wait.empty() && s.hasCredit(c, msg.seq)) {
    s.startSend(m);
  } else {
    c.credit_wait.push_back(m);
  }
  return s.msgs[m].id;
}

Result<RequestId> SimTransport::postRecv(const RecvRequest& request) {
  Impl& s = *impl_;
  BRAID_RETURN_IF_ERROR(s.checkEndpoints("receive", request.peer, request.rank, request.channel, request.protocol));
  BRAID_ASSIGN_OR_RETURN(const int conn,
                         s.connFor(request.peer, request.rank, request.channel, &s.recv_cache[request.rank]));
  const RequestId id = s.next_id++;
  ++s.outstanding;
  Connection& c = s.conns[conn];
  const long long seq = c.recvs_posted++;
  Slot& slot = s.slotAt(c, seq);
  slot.recv = id;
  slot.recv_posted = true;
  if (slot.delivery >= 0) {  // the send's data phase ended: delivery is known
    if (slot.delivery <= s.now) {
      slot.delivered = true;
      s.complete(id);
    } else {
      s.pushDeliver(conn, seq, slot.delivery);
    }
  }
  s.popDoneSlots(c);
  // A posted receive frees a credit: start the sends it unblocks.
  while (!c.credit_wait.empty() && s.hasCredit(c, s.msgs[c.credit_wait.front()].seq)) {
    const int m = c.credit_wait.front();
    c.credit_wait.pop_front();
    s.startSend(m);
  }
  return id;
}

Result<RequestId> SimTransport::postLocal(const LocalRequest& request) {
  Impl& s = *impl_;
  if (request.rank < 0 || request.rank >= s.num_ranks) {
    return invalidArgument(
        fmt::format("sim: local request on rank {}: the topology has {} ranks", request.rank, s.num_ranks));
  }
  if (!request.fused && !(s.model.local_gbps > 0)) {
    return invalidArgument(
        fmt::format("sim: local request on rank {}: local_gbps is {}, not positive", request.rank, s.model.local_gbps));
  }
  const RequestId id = s.next_id++;
  ++s.outstanding;
  const uint64_t bytes = std::max(request.src.bytes, request.dst.bytes);
  const double duration = request.fused ? 0.0 : static_cast<double>(bytes) / (s.model.local_gbps * kBytesPerUsPerGbps);
  if (duration > 0) {
    uint32_t slot = 0;
    if (s.free_locals.empty()) {
      slot = static_cast<uint32_t>(s.local_ids.size());
      s.local_ids.push_back(id);
    } else {
      slot = s.free_locals.back();
      s.free_locals.pop_back();
      s.local_ids[slot] = id;
    }
    s.push(s.now + duration, EventType::kLocalDone, slot);
  } else {
    s.complete(id);
  }
  return id;
}

Status SimTransport::poll(std::vector<Completion>* done, bool block) {
  Impl& s = *impl_;
  if (done == nullptr) return invalidArgument("sim: poll needs a completion vector");
  // Events due at the current time (none are ever pushed in the past).
  auto runDueNow = [&s]() {
    while (!s.heap.empty() && s.heap.top().time <= s.now) {
      const Event ev = s.heap.top();
      s.heap.pop();
      if (s.stale(ev)) continue;
      ++s.stats.events;
      s.process(ev);
    }
  };
  runDueNow();
  if (block && s.ready.empty()) {
    for (;;) {
      if (s.heap.empty()) {
        if (s.outstanding > 0) return internalError(s.deadlockMessage());
        return Status(StatusCode::kInvalidUsage, "sim: blocking poll with no outstanding request");
      }
      const Event ev = s.heap.top();
      s.heap.pop();
      if (s.stale(ev)) continue;
      s.now = std::max(s.now, ev.time);
      ++s.stats.events;
      s.process(ev);
      if (!s.ready.empty()) break;
    }
    runDueNow();  // everything else that happens at this instant
  }
  done->insert(done->end(), s.ready.begin(), s.ready.end());
  s.ready.clear();
  return Status::ok();
}

double SimTransport::nowUs() const { return impl_->now; }

const SimStats& SimTransport::stats() const {
  Impl& s = *impl_;
  for (size_t l = 0; l < s.links.size(); ++l) {
    const Impl::LinkState& link = s.links[l];
    s.stats.link_bytes[l] = link.bytes;
    s.stats.link_busy_us[l] = link.busy_acc + (link.flows.empty() ? 0.0 : s.now);  // a busy link: up to now
  }
  return s.stats;
}

std::vector<LinkSegment> SimTransport::timeline() const {
  std::vector<LinkSegment> out = impl_->segments;
  std::stable_sort(out.begin(), out.end(), [](const LinkSegment& a, const LinkSegment& b) {
    return a.link < b.link || (a.link == b.link && a.start_us < b.start_us);
  });
  return out;
}

}  // namespace braid
