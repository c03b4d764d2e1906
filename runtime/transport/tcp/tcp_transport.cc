#include "transport/tcp/tcp_transport.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/env.h"
#include "common/log.h"
#include "common/nonce.h"
#include "congestion/congestion.h"
#include "socket/socket.h"
#include "transport/endpoint_base.h"
#include "transport/factory.h"

namespace braid {
namespace {

using congestion::byteText;
using net::Deadline;
using net::Fd;
using net::SocketAddress;
using tcp::FrameHeader;
using tcp::FrameType;

constexpr uint64_t kHelloMagic = 0x3250435444494152ull;  // "RAIDTCP2" little-endian
constexpr uint64_t kMaxControlBytes = 1 << 16;
constexpr uint64_t kMaxFrameBytes = uint64_t{1} << 44;
constexpr size_t kMaxIov = 64;
constexpr int64_t kMaxRtoMinUs = 200000;  // BRAID_TCP_RTO_MIN's largest value, µs: Linux's own (TCP_RTO_MIN)
constexpr double kLogIntervalUs = 1e6;    // BRAID_DEBUG=INFO: the controllers' state at most once a second
constexpr int32_t kFreeChunk = 0;         // kChunk's channel: sent while the receiver admitted every sender
constexpr int32_t kCreditedChunk = 1;     // kChunk's channel: sent against the receiver's grant

/// What every rank all-gathers during setup.
struct Listing {
  uint32_t ip;
  uint16_t port;
  uint16_t flags;  // kListingGrants, kListingGated
  uint64_t token;
};
constexpr uint16_t kListingGrants = 1;  // this rank's receivers admit senders adaptively (grants, kAdmit)
constexpr uint16_t kListingGated = 2;   // ... and start gated (BRAID_CC_ADMIT): senders ask before chunks

enum HelloKind : int32_t { kDataConnection = 0, kControlConnection = 1 };

struct Hello {
  uint64_t magic;
  uint64_t token;  // the token of the rank connected to
  int32_t rank;    // the rank connecting
  int32_t size;
  int32_t kind;  // HelloKind
  int32_t reserved;
};

FrameHeader frameHeader(FrameType type, int32_t channel, uint64_t bytes) {
  FrameHeader header;
  header.type = static_cast<uint32_t>(type);
  header.channel = channel;
  header.bytes = bytes;
  return header;
}

class TcpTransport final : public EndpointBase {
 public:
  TcpTransport(Bootstrap& bootstrap, const TransportOptions& options)
      : EndpointBase(Config{"tcp", bootstrap.rank(), bootstrap.size(), endpointTimeoutSeconds(options), INT_MAX,
                            /*progress_thread=*/false, &bootstrap}),
        bootstrap_(&bootstrap),
        conns_(bootstrap.size()),
        granter_(0, 1, bootstrap.size()),
        scheduler_(0, bootstrap.size()) {
    for (int p = 0; p < size_; ++p) conns_[p].peer = p;
  }

  ~TcpTransport() override {
    for (Conn& conn : conns_) {
      if (!conn.fd.valid()) continue;
      if (conn.state == Conn::kOpen && !halfWritten(conn) && !failed()) {
        // Tell the peer this is a normal close, then read what is left so close() sends FIN, not RST.
        const FrameHeader header = frameHeader(FrameType::kClose, 0, 0);
        (void)::send(conn.fd.get(), &header, sizeof(header), MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      char sink[4096];
      while (::recv(conn.fd.get(), sink, sizeof(sink), MSG_DONTWAIT) > 0) {
      }
      while (conn.ctrl.valid() && ::recv(conn.ctrl.get(), sink, sizeof(sink), MSG_DONTWAIT) > 0) {
      }
    }
  }

  /// Collective setup: read the congestion parameters, listen, all-gather listings, connect to lower ranks
  /// (data and control connection), accept higher ones.
  Status connect() {
    const Deadline deadline = Deadline::after(timeout_s_);
    Result<congestion::Config> config = congestion::Config::fromEnvironment();
    bool one_host = true;
    for (const std::string& host : bootstrap_->hostNames()) one_host = one_host && host == bootstrap_->hostNames()[0];
    SocketAddress mine;
    if (one_host) {
      mine = SocketAddress{htonl(INADDR_LOOPBACK), 0};
    } else {
      Result<SocketAddress> local = net::localAddress();
      if (!local.isOk())
        return Status(local.status().code(), fmt::format("rank {}: tcp: {}", rank_, local.status().message()));
      mine = *local;
    }
    Result<Fd> listener = net::listenOn(&mine);
    if (config.isOk()) cc_ = *config;
    // Accepted sockets inherit the listener's TCP congestion control; connected ones get it below.
    tcp_congestion_ = envString("BRAID_TCP_CONGESTION");
    Result<int64_t> rto_min = envInt("BRAID_TCP_RTO_MIN");
    if (!rto_min.isOk()) {
      config = rto_min.status();
    } else if (*rto_min < 0 || *rto_min > kMaxRtoMinUs) {
      config = invalidArgument(fmt::format("BRAID_TCP_RTO_MIN={}: not in [0, {}] µs", *rto_min, kMaxRtoMinUs));
    } else {
      tcp_rto_min_us_ = static_cast<int>(*rto_min);
    }
    if (config.isOk() && listener.isOk()) {
      const Status chosen = setTcpCongestion(listener->get());
      if (!chosen.isOk()) config = chosen;
    }
    const bool ready = listener.isOk() && config.isOk();
    // Even a rank that cannot listen (or has bad parameters) takes part in the all-gather (port 0), so its peers
    // fail fast.
    std::vector<Listing> listings(size_);
    listings[rank_] = Listing{mine.ip, ready ? mine.port : uint16_t{0},
                              static_cast<uint16_t>((cc_.receiverCredits() > 0 ? kListingGrants : 0) |
                                                    (cc_.receiverStartAdmission() > 0 ? kListingGated : 0)),
                              randomNonce()};
    const Status gathered = bootstrap_->allGather(listings.data(), sizeof(Listing));
    if (!config.isOk()) {
      return Status(config.status().code(), fmt::format("rank {}: tcp: {}", rank_, config.status().message()));
    }
    if (!listener.isOk()) {
      return Status(listener.status().code(), fmt::format("rank {}: tcp: {}", rank_, listener.status().message()));
    }
    if (!gathered.isOk()) {
      return Status(gathered.code(), fmt::format("rank {}: tcp setup: {}", rank_, gathered.message()));
    }
    for (int p = 0; p < size_; ++p) {
      if (p != rank_ && listings[p].port == 0) {
        return Status(
            StatusCode::kRemoteError,
            fmt::format(
                "rank {}: tcp setup: rank {} could not listen or has bad BRAID_CC_* / BRAID_TCP_CONGESTION parameters",
                rank_, p));
      }
    }
    for (int p = 0; p < rank_; ++p) {
      const SocketAddress at{listings[p].ip, listings[p].port};
      for (const HelloKind kind : {kDataConnection, kControlConnection}) {
        const std::string what = fmt::format("rank {}: tcp {} connection to {}", rank_,
                                             kind == kDataConnection ? "data" : "control", describePeer(p));
        BRAID_ASSIGN_OR_RETURN(Fd fd, net::connectTo(at, deadline, what));
        if (kind == kDataConnection) BRAID_RETURN_IF_ERROR(setTcpCongestion(fd.get()));
        if (kind == kControlConnection) net::setThinStream(fd.get());
        const Hello hello{kHelloMagic, listings[p].token, rank_, size_, kind, 0};
        BRAID_RETURN_IF_ERROR(net::writeAll(fd.get(), &hello, sizeof(hello), deadline, what));
        (kind == kDataConnection ? conns_[p].fd : conns_[p].ctrl) = std::move(fd);
      }
    }
    const std::string what = fmt::format("rank {}: tcp listener {}", rank_, mine.toString());
    const auto take = [&](const void* bytes, Fd& fd) {
      Hello hello;
      std::memcpy(&hello, bytes, sizeof(hello));
      if (hello.magic != kHelloMagic || hello.token != listings[rank_].token || hello.size != size_ ||
          hello.rank <= rank_ || hello.rank >= size_ ||
          (hello.kind != kDataConnection && hello.kind != kControlConnection)) {
        return false;  // not a peer of this endpoint
      }
      Fd& slot = hello.kind == kDataConnection ? conns_[hello.rank].fd : conns_[hello.rank].ctrl;
      if (slot.valid()) return false;
      if (hello.kind == kControlConnection) net::setThinStream(fd.get());
      slot = std::move(fd);
      return true;
    };
    const auto never_connected = [&] {
      std::string names;
      int listed = 0;
      for (int p = rank_ + 1; p < size_ && listed < 8; ++p) {
        if (!conns_[p].fd.valid() || !conns_[p].ctrl.valid()) names += (listed++ > 0 ? ", " : "") + describePeer(p);
      }
      return Status(StatusCode::kTimeout,
                    fmt::format("{}: no connection within {} s from {}", what, timeout_s_, names));
    };
    BRAID_RETURN_IF_ERROR(net::acceptMesh(listener->get(), deadline, what, 2 * (size_ - 1 - rank_), sizeof(Hello), take,
                                          never_connected));
    granter_ = congestion::CreditGranter(cc_.receiverCredits(), cc_.grant_bytes, size_);
    granter_.forget(rank_);  // the senders are the other ranks
    if (cc_.receiverStartAdmission() > 0) {
      granter_.close(cc_.receiverStartAdmission());
      (void)granter_.takeModeChange();  // the senders know from the listing
    }
    scheduler_ = congestion::PeerScheduler(cc_.senderActivePeers(), size_);
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      conns_[p].staging.resize(tcp::kStagingBytes);
      conns_[p].control = congestion::SenderControl(cc_);
      conns_[p].peer_grants = (listings[p].flags & kListingGrants) != 0;
      conns_[p].peer_open = (listings[p].flags & kListingGated) == 0;
    }
    BRAID_LOG_RANK(kInfo, rank_, "tcp: congestion control {}", cc_.toString());
    return Status::ok();
  }

 private:
  /// BRAID_TCP_CONGESTION and BRAID_TCP_RTO_MIN on socket `fd` (nothing when unset; accepted sockets inherit the
  /// listener's). Errors: kInvalidArgument naming the variable.
  Status setTcpCongestion(int fd) const {
    if (tcp_rto_min_us_ > 0) {
      constexpr int kTcpRtoMinUs = 45;  // TCP_RTO_MIN_US (include/uapi/linux/tcp.h), for older C library headers
      if (setsockopt(fd, IPPROTO_TCP, kTcpRtoMinUs, &tcp_rto_min_us_, sizeof(tcp_rto_min_us_)) != 0) {
        return invalidArgument(
            fmt::format("BRAID_TCP_RTO_MIN={}: {} (TCP_RTO_MIN_US needs Linux 6.15+, at least 2 "
                        "timer ticks)",
                        tcp_rto_min_us_, net::errnoText(errno)));
      }
    }
    if (tcp_congestion_.empty()) return Status::ok();
    if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, tcp_congestion_.data(),
                   static_cast<socklen_t>(tcp_congestion_.size())) != 0) {
      return invalidArgument(
          fmt::format("BRAID_TCP_CONGESTION='{}': {} (net.ipv4.tcp_available_congestion_control "
                      "lists what this kernel has; without CAP_NET_ADMIN only the names in "
                      "net.ipv4.tcp_allowed_congestion_control)",
                      tcp_congestion_, net::errnoText(errno)));
    }
    return Status::ok();
  }

  // ---- Sending ------------------------------------------------------------------------------------------------

  Status startSend(const SendRequest& request, const uint8_t* src, RequestId id) override {
    Conn& conn = conns_[request.peer];
    BRAID_RETURN_IF_ERROR(closedPeer(conn, "send to"));
    SendMessage message;
    message.id = id;
    message.channel = request.channel;
    message.data = src;
    message.bytes = request.src.bytes;
    message.credited = conn.peer_grants && message.bytes > cc_.eager_bytes;
    if (message.credited) conn.large_left += message.bytes;
    conn.sends.push_back(message);
    scheduler_.want(conn.peer);
    pump(conn);
    return failure();
  }

  Status startRecv(const RecvRequest& request, uint8_t* dst, RequestId id) override {
    Conn& conn = conns_[request.peer];
    Channel& channel = conn.channels[request.channel];
    channel.recvs.push_back(PendingRecv{id, dst, request.dst.bytes});
    BRAID_RETURN_IF_ERROR(match(conn, request.channel, channel));
    if (!channel.recvs.empty()) BRAID_RETURN_IF_ERROR(closedPeer(conn, "receive from"));
    return Status::ok();
  }

  Status progress() override {
    progressAll(nullptr);
    logState();
    return failure();
  }

  // Sleeps in poll(2) on the sockets, waking at least every kPeerCheckMs to ask the bootstrap about failed peers
  // (a peer may have failed without a word on our sockets: it aborted through its bootstrap).
  Status waitForCompletion() override {
    BlockingWait wait = beginWait(tcp::kPeerCheckMs);
    std::vector<pollfd> fds;
    std::vector<int> who;
    std::vector<bool> active(size_, false);
    while (true) {
      fds.clear();
      who.clear();
      for (Conn& conn : conns_) {
        if (!conn.fd.valid() || conn.eof) continue;
        fds.push_back(pollfd{conn.fd.get(), static_cast<short>(POLLIN | (conn.wire.empty() ? 0 : POLLOUT)), 0});
        who.push_back(conn.peer);
        if (conn.ctrl.valid() && !conn.ctrl_eof) {
          const bool pending = conn.ctrl_out_done < conn.ctrl_out.size();
          fds.push_back(pollfd{conn.ctrl.get(), static_cast<short>(POLLIN | (pending ? POLLOUT : 0)), 0});
          who.push_back(conn.peer);
        }
      }
      const int ready = ::poll(fds.data(), fds.size(), wait.sleepMs());
      if (ready > 0) {
        std::fill(active.begin(), active.end(), false);
        for (size_t i = 0; i < fds.size(); ++i)
          if (fds[i].revents != 0) active[who[i]] = true;
        progressAll(&active);
        logState();
        BRAID_RETURN_IF_ERROR(failure());
        if (hasCompletions()) return Status::ok();
      }
      wait.tick();
      const bool due = wait.peerCheckDue();
      if (ready <= 0 || due) BRAID_RETURN_IF_ERROR(bootstrapFailure());
      if (wait.expired()) return timeoutError(wait.waitedSeconds(), describeWaiting());
    }
  }

  void tellPeersOfAbort(const Status& reason) override {
    if (aborted_) return;
    aborted_ = true;
    const std::string text = reason.toString().substr(0, kMaxControlBytes);
    for (Conn& conn : conns_) {
      if (!conn.fd.valid() || conn.eof) continue;
      bool told = false;
      if (!halfWritten(conn)) {
        FrameHeader header = frameHeader(FrameType::kAbort, 0, text.size());
        iovec iov[2] = {{&header, sizeof(header)}, {const_cast<char*>(text.data()), text.size()}};
        msghdr msg{};
        msg.msg_iov = iov;
        msg.msg_iovlen = 2;
        told = sendmsg(conn.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT) ==
               static_cast<ssize_t>(sizeof(header) + text.size());
      }
      // A peer we cannot tell in one non-blocking write (a frame is half written, the socket is full) sees
      // its connection close instead: also kRemoteError there.
      if (!told) shutdown(conn.fd.get(), SHUT_RDWR);
    }
    bootstrap_->abort(fmt::format("rank {}: {}", rank_, reason.toString()));
  }

  struct PendingRecv {
    RequestId id;
    uint8_t* dst;
    uint64_t bytes;
  };
  struct Unexpected {
    std::unique_ptr<uint8_t[]> data;  // not zero-filled: every byte is written from the socket
    uint64_t bytes = 0;
    bool complete = false;
  };
  struct Channel {
    std::deque<Unexpected> messages;  // arrived (or arriving) before their receive, in order
    std::deque<PendingRecv> recvs;    // posted, not matched yet, in order
  };
  /// A posted send, until its last frame is committed to the wire.
  struct SendMessage {
    RequestId id = 0;
    int32_t channel = 0;
    const uint8_t* data = nullptr;
    uint64_t bytes = 0;
    uint64_t cut = 0;       // payload bytes committed to frames
    bool begun = false;     // its kBegin frame is committed
    bool credited = false;  // its chunks need the receiver's grants while the receiver's admission is closed
  };
  /// A frame committed to the data connection, in order.
  struct OutFrame {
    FrameHeader header;
    const uint8_t* data = nullptr;
    uint64_t payload = 0;     // bytes of `data` after the header
    uint64_t done = 0;        // bytes written, header included
    RequestId completes = 0;  // the send completed once this frame is written (0: none)
    bool tracked = false;     // acknowledged by the receiver: counts in the window
  };
  /// The data message being received in chunks (kBegin .. its last kChunk).
  struct ChunkedMessage {
    bool open = false;
    int32_t channel = 0;
    uint64_t total = 0;
    uint64_t got = 0;
    uint8_t* target = nullptr;  // a receive's dst or an unexpected buffer; null: discard (a failure is kept)
    RequestId direct_id = 0;
    Unexpected* unexpected = nullptr;
  };
  struct Conn {
    enum State { kOpen, kClosed, kDead, kAborted };
    int peer = 0;
    Fd fd;    // data connection
    Fd ctrl;  // control connection
    State state = kOpen;
    bool eof = false;
    bool ctrl_eof = false;  // the control connection is gone (the data connection says why)
    // Output: posted sends, frames committed, the controller and credits.
    std::deque<SendMessage> sends;
    std::deque<OutFrame> wire;
    congestion::SenderControl control{congestion::Config{}};
    bool peer_grants = false;  // the peer's receivers admit senders (adaptive): credited messages may need grants
    bool peer_open = true;     // the peer admits every sender now: credited messages go without asking
    uint64_t large_left = 0;   // bytes of credited messages not committed yet
    uint64_t requested = 0;    // bytes requested in all
    uint64_t granted = 0;      // bytes granted in all
    uint64_t credit = 0;       // granted, not committed yet
    // Control output (acknowledgements, requests, grants) and input.
    std::vector<uint8_t> ctrl_out;
    size_t ctrl_out_done = 0;
    uint64_t acks_due = 0;
    double newest_read_us = 0;
    uint8_t ctrl_in[16 * 64] = {};
    size_t ctrl_in_got = 0;
    // Input: the frame being read.
    FrameHeader header;
    size_t header_got = 0;
    bool in_payload = false;
    uint64_t payload_len = 0;   // payload bytes of the frame being read
    uint8_t* target = nullptr;  // where the payload goes; null: discard
    uint64_t payload_got = 0;
    RequestId direct_id = 0;            // kMessage: the receive completed by this frame (0: unexpected)
    Unexpected* unexpected = nullptr;   // kMessage: the buffer being filled, if any
    ChunkedMessage message;             // the message kChunk frames belong to
    std::vector<uint8_t> control_text;  // abort reason
    std::vector<uint8_t> staging;       // read buffer
    std::unordered_map<int, Channel> channels;
    uint64_t logged_acks = 0;  // acknowledged frames at the last state line
  };

  static bool halfWritten(const Conn& conn) { return !conn.wire.empty() && conn.wire.front().done > 0; }
  static bool sending(const Conn& conn) { return !conn.sends.empty() || !conn.wire.empty(); }

  std::string describePeer(int p) const {
    const auto& hosts = bootstrap_->hostNames();
    const auto& pids = bootstrap_->processIds();
    return fmt::format("rank {} (host {}, pid {})", p, p < static_cast<int>(hosts.size()) ? hosts[p] : "?",
                       p < static_cast<int>(pids.size()) ? pids[p] : 0);
  }

  /// kRemoteError when `conn`'s peer closed its endpoint (a send to it / receive from it cannot complete).
  Status closedPeer(const Conn& conn, const char* what) const {
    if (conn.state != Conn::kClosed) return Status::ok();
    return Status(StatusCode::kRemoteError, fmt::format("rank {}: tcp: {} {}: that rank closed its endpoint", rank_,
                                                        what, describePeer(conn.peer)));
  }

  void markDead(Conn& conn, const std::string& why) {
    conn.eof = true;
    if (conn.state == Conn::kOpen) {
      conn.state = Conn::kDead;
      (void)fail(Status(StatusCode::kRemoteError,
                        fmt::format("rank {}: tcp: connection to {} {}", rank_, describePeer(conn.peer), why)));
    } else if (conn.state == Conn::kClosed) {
      // EOF after a close frame: normal. Anything still waiting on that peer can never complete.
      bool waiting = sending(conn);
      for (const auto& [channel, queue] : conn.channels) waiting = waiting || !queue.recvs.empty();
      if (waiting) (void)fail(closedPeer(conn, "waiting on"));
    }
    releaseIfIdle(conn);
  }

  void malformed(Conn& conn, const std::string& what) {
    conn.ctrl_eof = true;  // nothing more is read from that peer
    markDead(conn, fmt::format("sent a malformed frame: {}", what));
  }

  /// Progress on every connection (`active`: only those, when given).
  void progressAll(const std::vector<bool>* active) {
    for (Conn& conn : conns_) {
      if (!conn.fd.valid() || (active != nullptr && !(*active)[conn.peer])) continue;
      if (sending(conn)) writeConn(conn);
      flushControl(conn);
      readConn(conn);
      readControl(conn);
      if (failed()) return;
    }
    sendGrants();
  }

  /// Asks for credits (when the peer is active) and writes what may be written, unless the socket is full.
  void pump(Conn& conn) {
    requestCredits(conn);
    if (conn.wire.empty()) writeConn(conn);
  }

  /// While the peer's admission is closed: asks for what the credited messages still need beyond the credit in
  /// hand and the requests not granted yet.
  void requestCredits(Conn& conn) {
    if (conn.peer_open || !scheduler_.active(conn.peer) || conn.state != Conn::kOpen) return;
    const uint64_t covered = conn.credit + (conn.requested - conn.granted);
    if (conn.large_left <= covered) return;
    const uint64_t need = conn.large_left - covered;
    queueControl(conn, frameHeader(FrameType::kRequest, 0, need));
    conn.requested += need;
    flushControl(conn);
  }

  /// Commits frames to `conn.wire` (only when it is empty: a half-written frame goes first): whole messages and
  /// chunks, as far as the active-peer bound, the window and the grants allow, up to kCommitBytes of payload.
  void commit(Conn& conn) {
    if (!scheduler_.active(conn.peer)) return;
    uint64_t payload = 0;
    while (!conn.sends.empty() && conn.wire.size() + 2 <= kMaxIov / 2 && payload < tcp::kCommitBytes) {
      SendMessage& m = conn.sends.front();
      const uint64_t chunk = conn.control.chunkBytes();
      if (!m.begun) {
        // A message without credits that fits a chunk, or that needs none from a granting receiver (at most the
        // eager size), goes whole in one frame.
        if (!m.credited && (m.bytes <= chunk || conn.peer_grants)) {
          const bool tracked = m.bytes >= tcp::kAckMinBytes;
          if (tracked && !conn.control.mayCommit(m.bytes)) return;
          conn.wire.push_back(
              OutFrame{frameHeader(FrameType::kMessage, m.channel, m.bytes), m.data, m.bytes, 0, m.id, tracked});
          if (tracked) conn.control.onCommit(m.bytes);
          payload += m.bytes;
          conn.sends.pop_front();
          continue;
        }
        conn.wire.push_back(OutFrame{frameHeader(FrameType::kBegin, m.channel, m.bytes), nullptr, 0, 0, 0, false});
        m.begun = true;
      }
      uint64_t take = std::min(m.bytes - m.cut, chunk);
      // A credited message spends the credit in hand first; beyond it, it goes only while the peer admits every
      // sender (a free chunk, not charged to the peer's grants).
      const bool against_credit = m.credited && conn.credit > 0;
      if (against_credit) take = std::min(take, conn.credit);
      if (m.credited && !against_credit && !conn.peer_open) return;
      if (take == 0 || !conn.control.mayCommit(take)) return;
      const bool last = m.cut + take == m.bytes;
      conn.wire.push_back(OutFrame{frameHeader(FrameType::kChunk, against_credit ? kCreditedChunk : kFreeChunk, take),
                                   m.data + m.cut, take, 0, last ? m.id : 0, true});
      conn.control.onCommit(take);
      if (against_credit) conn.credit -= take;
      if (m.credited) conn.large_left -= take;
      if (m.credited && !against_credit) releaseExcess(conn);
      m.cut += take;
      payload += take;
      if (last) conn.sends.pop_front();
    }
  }

  void writeConn(Conn& conn) {
    while (!conn.eof) {
      if (conn.wire.empty()) commit(conn);
      if (conn.wire.empty()) break;
      iovec iov[kMaxIov];
      size_t count = 0;
      for (auto it = conn.wire.begin(); it != conn.wire.end() && count + 2 <= kMaxIov; ++it) {
        const uint64_t total = sizeof(FrameHeader) + it->payload;
        if (it->done < sizeof(FrameHeader)) {
          iov[count++] = {reinterpret_cast<char*>(&it->header) + it->done, sizeof(FrameHeader) - it->done};
          if (it->payload > 0) iov[count++] = {const_cast<uint8_t*>(it->data), it->payload};
        } else {
          iov[count++] = {const_cast<uint8_t*>(it->data) + (it->done - sizeof(FrameHeader)), total - it->done};
        }
      }
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = count;
      const ssize_t sent = sendmsg(conn.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (sent < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        const int err = errno;
        readConn(conn);  // an abort frame or a close explains it better
        markDead(conn, "failed: " + net::errnoText(err));
        break;
      }
      const double now = nowUs();
      uint64_t left = static_cast<uint64_t>(sent);
      while (left > 0 && !conn.wire.empty()) {
        OutFrame& front = conn.wire.front();
        const uint64_t total = sizeof(FrameHeader) + front.payload;
        const uint64_t take = std::min(left, total - front.done);
        front.done += take;
        left -= take;
        if (front.done < total) break;
        if (front.tracked) conn.control.onWritten(now);
        if (front.completes != 0) complete(front.completes);
        conn.wire.pop_front();
      }
    }
    releaseIfIdle(conn);
  }

  /// A peer with nothing queued, on the wire or unacknowledged gives its active slot to the next waiting peer; so
  /// does one whose connection ended (a peer that closed its endpoint acknowledges nothing more).
  void releaseIfIdle(Conn& conn) {
    if (sending(conn) || (conn.control.inflightBytes() > 0 && !conn.eof)) return;
    const int next = scheduler_.release(conn.peer);
    if (next >= 0) pump(conns_[next]);
  }

  // ---- Control connection -------------------------------------------------------------------------------------

  void queueControl(Conn& conn, const FrameHeader& header) {
    if (conn.ctrl_out_done == conn.ctrl_out.size()) {
      conn.ctrl_out.clear();
      conn.ctrl_out_done = 0;
    }
    const auto* bytes = reinterpret_cast<const uint8_t*>(&header);
    conn.ctrl_out.insert(conn.ctrl_out.end(), bytes, bytes + sizeof(header));
  }

  /// Writes the queued control frames (what the socket takes now; the rest at the next POLLOUT).
  void flushControl(Conn& conn) {
    if (conn.acks_due > 0 && conn.state == Conn::kOpen) {
      const double hold = std::max(0.0, nowUs() - conn.newest_read_us);
      queueControl(conn,
                   frameHeader(FrameType::kAck, static_cast<int32_t>(conn.acks_due), static_cast<uint64_t>(hold)));
      conn.acks_due = 0;
    }
    while (conn.ctrl.valid() && !conn.ctrl_eof && conn.ctrl_out_done < conn.ctrl_out.size()) {
      const ssize_t sent = ::send(conn.ctrl.get(), conn.ctrl_out.data() + conn.ctrl_out_done,
                                  conn.ctrl_out.size() - conn.ctrl_out_done, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (sent < 0 && errno == EINTR) continue;
      if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (sent <= 0) {
        conn.ctrl_eof = true;  // the data connection reports why (a close frame, EOF or a reset)
        return;
      }
      conn.ctrl_out_done += static_cast<size_t>(sent);
    }
  }

  void readControl(Conn& conn) {
    while (conn.ctrl.valid() && !conn.ctrl_eof) {
      const ssize_t got = ::recv(conn.ctrl.get(), conn.ctrl_in + conn.ctrl_in_got,
                                 sizeof(conn.ctrl_in) - conn.ctrl_in_got, MSG_DONTWAIT);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (got <= 0) {
        conn.ctrl_eof = true;  // as in flushControl
        return;
      }
      conn.ctrl_in_got += static_cast<size_t>(got);
      size_t at = 0;
      for (; at + sizeof(FrameHeader) <= conn.ctrl_in_got && !conn.ctrl_eof; at += sizeof(FrameHeader)) {
        FrameHeader header;
        std::memcpy(&header, conn.ctrl_in + at, sizeof(header));
        controlFrame(conn, header);
      }
      std::memmove(conn.ctrl_in, conn.ctrl_in + at, conn.ctrl_in_got - at);
      conn.ctrl_in_got -= at;
    }
  }

  void controlFrame(Conn& conn, const FrameHeader& h) {
    switch (static_cast<FrameType>(h.type)) {
      case FrameType::kAck: {
        const double now = nowUs();
        const Status acked =
            h.channel > 0 ? conn.control.onAck(static_cast<uint64_t>(h.channel), static_cast<double>(h.bytes), now)
                          : invalidArgument("an acknowledgement of no chunk");
        if (!acked.isOk()) return malformed(conn, acked.message());
        if (conn.control.tcpSignalsDue(now)) {
          Result<congestion::TcpSignals> signals = congestion::readTcpSignals(conn.fd.get());
          if (signals.isOk()) conn.control.onTcpSignals(*signals, now);
          if (conn.peer_grants) reportCongestion(conn);
        }
        if (sending(conn)) {
          if (conn.wire.empty()) writeConn(conn);
        } else {
          releaseIfIdle(conn);
        }
        return;
      }
      case FrameType::kRequest:
        if (cc_.receiverCredits() == 0 || h.bytes == 0 || h.bytes > kMaxFrameBytes) {
          return malformed(conn, fmt::format("a request for {} B of credits (this rank grants {})", h.bytes,
                                             cc_.receiverCredits() == 0 ? "none" : "credits"));
        }
        granter_.request(conn.peer, h.bytes);
        return;
      case FrameType::kReport:
        if (cc_.receiverCredits() == 0 || h.channel < 0) {
          return malformed(conn, fmt::format("a congestion report of {} timeout(s) (this rank admits {})", h.channel,
                                             cc_.receiverCredits() == 0 ? "every sender" : "adaptively"));
        }
        granter_.report(conn.peer, static_cast<uint64_t>(h.channel));
        return;
      case FrameType::kRelease: {
        const Status released = cc_.receiverCredits() == 0 ? invalidArgument("a release of credits never granted")
                                                           : granter_.received(conn.peer, h.bytes);
        if (!released.isOk()) return malformed(conn, "kRelease: " + released.message());
        return;
      }
      case FrameType::kAdmit:
        if (!conn.peer_grants || (h.channel != 0 && h.channel != 1)) {
          return malformed(conn, fmt::format("an admission frame ({}) from a rank that {}", h.channel,
                                             conn.peer_grants ? "admits adaptively" : "does not admit"));
        }
        conn.peer_open = h.channel == 1;
        if (conn.peer_open) {
          conn.control.onFanIn(0);  // no incast trouble at that receiver
          if (conn.wire.empty()) writeConn(conn);
        } else {
          requestCredits(conn);
        }
        return;
      case FrameType::kGrant:
        if (!conn.peer_grants || h.bytes == 0 || h.bytes > conn.requested - conn.granted) {
          return malformed(conn, fmt::format("a grant of {} B with {} B requested and not granted", h.bytes,
                                             conn.requested - conn.granted));
        }
        conn.granted += h.bytes;
        conn.credit += h.bytes;
        conn.control.onFanIn(h.channel);
        releaseExcess(conn);
        if (conn.wire.empty()) writeConn(conn);
        return;
      default: return malformed(conn, fmt::format("type {} on the control connection", h.type));
    }
  }

  /// Gives back credit beyond what the credited messages still need (they went while admission was open).
  void releaseExcess(Conn& conn) {
    if (conn.credit <= conn.large_left || conn.state != Conn::kOpen) return;
    queueControl(conn, frameHeader(FrameType::kRelease, 0, conn.credit - conn.large_left));
    conn.credit = conn.large_left;
    flushControl(conn);
  }

  /// A sender's report to a receiver that admits adaptively: the retransmission timeouts of its data connection
  /// since the last report, when there were any.
  void reportCongestion(Conn& conn) {
    const congestion::SenderControl::Report report = conn.control.takeReport();
    if (report.timeouts == 0 || conn.state != Conn::kOpen) return;
    const auto timeouts = static_cast<int32_t>(std::min<uint64_t>(report.timeouts, INT32_MAX));
    queueControl(conn, frameHeader(FrameType::kReport, timeouts, report.retransmits));
    flushControl(conn);
  }

  /// Sends the grants the credit granter decided on, and tells every sender when admission opened or closed.
  void sendGrants() {
    granter_.collect(&grants_);
    // The grants go first: a sender told that admission opened spends the credit it holds before sending freely.
    const bool mode_changed = granter_.takeModeChange();
    // The fan-in a grant reports: the senders holding grants (sending at once), not those waiting for one.
    const int sending = std::max(1, granter_.granted());
    for (const congestion::CreditGranter::Grant& g : grants_) {
      Conn& conn = conns_[g.sender];
      if (conn.state != Conn::kOpen) continue;
      queueControl(conn, frameHeader(FrameType::kGrant, sending, g.bytes));
      flushControl(conn);
    }
    grants_.clear();
    if (mode_changed) {
      BRAID_LOG_RANK(kInfo, rank_, "tcp cc receiver: admission {}", granter_.describe());
      for (Conn& conn : conns_) {
        if (!conn.fd.valid() || conn.state != Conn::kOpen) continue;
        queueControl(
            conn, frameHeader(FrameType::kAdmit, granter_.open() ? 1 : 0, static_cast<uint64_t>(granter_.admission())));
        flushControl(conn);
      }
    }
  }

  // ---- Receiving ----------------------------------------------------------------------------------------------

  /// Matches complete unexpected messages of one channel with its posted receives, in order.
  Status match(Conn& conn, int channel_id, Channel& channel) {
    while (!channel.messages.empty() && channel.messages.front().complete && !channel.recvs.empty()) {
      Unexpected& message = channel.messages.front();
      const PendingRecv recv = channel.recvs.front();
      if (message.bytes != recv.bytes) return fail(sizeMismatch(conn, channel_id, message.bytes, recv.bytes));
      if (recv.bytes > 0) std::memcpy(recv.dst, message.data.get(), recv.bytes);
      channel.messages.pop_front();
      channel.recvs.pop_front();
      complete(recv.id);
    }
    return Status::ok();
  }

  Status sizeMismatch(const Conn& conn, int channel, uint64_t sent, uint64_t posted) const {
    return invalidArgument(
        fmt::format("rank {} -> rank {} channel {}: a message of {} bytes matched a receive of {} bytes", conn.peer,
                    rank_, channel, sent, posted));
  }

  /// Where a message of `bytes` on `channel_id` lands: the first posted receive when no earlier message of the
  /// channel waits (`*direct_id` set), else a new unexpected buffer (`*unexpected` set). Null on failure (kept).
  uint8_t* placeMessage(Conn& conn, int channel_id, uint64_t bytes, RequestId* direct_id, Unexpected** unexpected) {
    Channel& channel = conn.channels[channel_id];
    if (channel.messages.empty() && !channel.recvs.empty()) {
      const PendingRecv recv = channel.recvs.front();
      if (recv.bytes != bytes) {
        (void)fail(sizeMismatch(conn, channel_id, bytes, recv.bytes));
        return nullptr;
      }
      channel.recvs.pop_front();
      *direct_id = recv.id;
      return recv.dst;
    }
    channel.messages.emplace_back();
    *unexpected = &channel.messages.back();
    (*unexpected)->bytes = bytes;
    if (bytes > 0) {
      (*unexpected)->data.reset(new (std::nothrow) uint8_t[bytes]);
      if ((*unexpected)->data == nullptr) {
        (void)fail(Status(StatusCode::kSystemError,
                          fmt::format("rank {}: tcp: cannot buffer a message of {} from rank {} on channel {}", rank_,
                                      byteText(bytes), conn.peer, channel_id)));
      }
    }
    return (*unexpected)->data.get();
  }

  /// A message (whole or chunked) is in: its receive completes, or its unexpected buffer is matched.
  void finishMessage(Conn& conn, int channel_id, RequestId direct_id, Unexpected* unexpected) {
    if (direct_id != 0) {
      complete(direct_id);
    } else if (unexpected != nullptr) {
      unexpected->complete = true;
      (void)match(conn, channel_id, conn.channels[channel_id]);
    }
  }

  /// A header is complete: decide where its payload goes.
  void startFrame(Conn& conn) {
    conn.header_got = 0;
    conn.in_payload = true;
    conn.payload_got = 0;
    conn.payload_len = 0;
    conn.target = nullptr;
    conn.direct_id = 0;
    conn.unexpected = nullptr;
    const FrameHeader& h = conn.header;
    ChunkedMessage& m = conn.message;
    switch (static_cast<FrameType>(h.type)) {
      case FrameType::kMessage:
        if (m.open || h.bytes > kMaxFrameBytes) return badFrame(conn);
        conn.payload_len = h.bytes;
        conn.target = placeMessage(conn, h.channel, h.bytes, &conn.direct_id, &conn.unexpected);
        break;
      case FrameType::kBegin:
        if (m.open || h.bytes == 0 || h.bytes > kMaxFrameBytes) return badFrame(conn);
        m = ChunkedMessage{true, h.channel, h.bytes, 0, nullptr, 0, nullptr};
        m.target = placeMessage(conn, h.channel, h.bytes, &m.direct_id, &m.unexpected);
        break;
      case FrameType::kChunk:
        if (!m.open || h.bytes == 0 || h.bytes > m.total - m.got) return badFrame(conn);
        if (h.channel != kFreeChunk && (h.channel != kCreditedChunk || cc_.receiverCredits() == 0)) {
          return badFrame(conn);
        }
        conn.payload_len = h.bytes;
        conn.target = m.target == nullptr ? nullptr : m.target + m.got;
        break;
      case FrameType::kAbort:
      case FrameType::kClose:
        if (h.bytes > kMaxControlBytes) return badFrame(conn);
        conn.payload_len = h.bytes;
        conn.control_text.assign(h.bytes, 0);
        conn.target = conn.control_text.data();
        break;
      default: return badFrame(conn);
    }
    if (conn.payload_len == 0) finishFrame(conn);
  }

  void badFrame(Conn& conn) {
    conn.in_payload = false;
    malformed(conn, fmt::format("type {}, channel {}, {} bytes{}", conn.header.type, conn.header.channel,
                                conn.header.bytes, conn.message.open ? " inside a chunked message" : ""));
  }

  void finishFrame(Conn& conn) {
    conn.in_payload = false;
    const FrameHeader& h = conn.header;
    switch (static_cast<FrameType>(h.type)) {
      case FrameType::kMessage:
        if (h.bytes >= tcp::kAckMinBytes) acknowledge(conn);
        finishMessage(conn, h.channel, conn.direct_id, conn.unexpected);
        break;
      case FrameType::kBegin: break;
      case FrameType::kChunk: {
        ChunkedMessage& m = conn.message;
        m.got += h.bytes;
        acknowledge(conn);
        if (h.channel == kCreditedChunk) {
          const Status credited = granter_.received(conn.peer, h.bytes);
          if (!credited.isOk()) return malformed(conn, credited.message());
        }
        if (m.got == m.total) {
          m.open = false;
          finishMessage(conn, m.channel, m.direct_id, m.unexpected);
        }
        break;
      }
      case FrameType::kAbort:
        if (conn.state == Conn::kOpen) {
          conn.state = Conn::kAborted;
          (void)fail(Status(StatusCode::kRemoteError,
                            fmt::format("rank {}: tcp: {} aborted: {}", rank_, describePeer(conn.peer),
                                        std::string(conn.control_text.begin(), conn.control_text.end()))));
        }
        break;
      case FrameType::kClose:
        if (conn.state == Conn::kOpen) conn.state = Conn::kClosed;
        granter_.forget(conn.peer);
        break;
      default: break;
    }
    conn.direct_id = 0;
    conn.unexpected = nullptr;
    conn.target = nullptr;
  }

  void acknowledge(Conn& conn) {
    ++conn.acks_due;
    conn.newest_read_us = nowUs();
  }

  /// Consumes `bytes` at `from` (bytes already read off the socket) into the frame state machine.
  void consume(Conn& conn, const uint8_t* from, size_t bytes) {
    while (bytes > 0 && !conn.eof) {
      if (!conn.in_payload) {
        const size_t take = std::min(bytes, sizeof(FrameHeader) - conn.header_got);
        std::memcpy(reinterpret_cast<uint8_t*>(&conn.header) + conn.header_got, from, take);
        conn.header_got += take;
        from += take;
        bytes -= take;
        if (conn.header_got == sizeof(FrameHeader)) startFrame(conn);
      } else {
        const size_t take = static_cast<size_t>(std::min<uint64_t>(bytes, conn.payload_len - conn.payload_got));
        if (conn.target != nullptr) std::memcpy(conn.target + conn.payload_got, from, take);
        conn.payload_got += take;
        from += take;
        bytes -= take;
        if (conn.payload_got == conn.payload_len) finishFrame(conn);
      }
    }
  }

  void readConn(Conn& conn) {
    size_t budget = tcp::kReadBudgetBytes;
    while (!conn.eof && budget > 0) {
      ssize_t got;
      const uint64_t payload_left = conn.in_payload ? conn.payload_len - conn.payload_got : 0;
      const bool direct = conn.in_payload && conn.target != nullptr && payload_left >= tcp::kDirectReadBytes;
      if (direct) {
        got = ::recv(conn.fd.get(), conn.target + conn.payload_got, static_cast<size_t>(payload_left), MSG_DONTWAIT);
      } else {
        got = ::recv(conn.fd.get(), conn.staging.data(), conn.staging.size(), MSG_DONTWAIT);
      }
      if (got == 0) {
        markDead(conn, "closed without a close frame: its process exited, was killed or aborted");
        return;
      }
      if (got < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        markDead(conn, "failed: " + net::errnoText(errno));
        return;
      }
      budget -= std::min(budget, static_cast<size_t>(got));
      if (direct) {
        conn.payload_got += static_cast<uint64_t>(got);
        if (conn.payload_got == conn.payload_len) finishFrame(conn);
      } else {
        consume(conn, conn.staging.data(), static_cast<size_t>(got));
      }
      if (failed()) return;
      // Acknowledge at once: the sender's RTT sample should not include this read loop.
      if (conn.acks_due > 0) flushControl(conn);
    }
  }

  // ---- Reporting ----------------------------------------------------------------------------------------------

  /// BRAID_DEBUG=INFO: every controller that moved data since the last time, at most once per kLogIntervalUs.
  void logState() {
    if (!logEnabled(LogLevel::kInfo)) return;
    const double now = nowUs();
    if (now < next_log_us_) return;
    next_log_us_ = now + kLogIntervalUs;
    for (Conn& conn : conns_) {
      if (!conn.fd.valid()) continue;
      const congestion::SenderControl::State s = conn.control.state();
      if (s.acked_frames == conn.logged_acks) continue;
      conn.logged_acks = s.acked_frames;
      BRAID_LOG_RANK(kInfo, rank_, "tcp cc -> rank {}: {}{}", conn.peer, conn.control.describe(),
                     conn.peer_grants ? fmt::format(" credit {}", byteText(conn.credit)) : std::string());
    }
    if (cc_.receiverCredits() > 0 && granter_.waiting() > 0) {
      BRAID_LOG_RANK(kInfo, rank_, "tcp cc receiver: admission {}", granter_.describe());
    }
  }

  /// Why a send to `conn`'s peer has not left.
  std::string sendBlocker(const Conn& conn) const {
    if (!conn.wire.empty()) return fmt::format("rank {} does not read", conn.peer);
    if (!scheduler_.active(conn.peer)) {
      return fmt::format("waiting for one of the {} active-peer slot(s) (BRAID_CC_ACTIVE_PEERS)",
                         cc_.senderActivePeers());
    }
    const SendMessage& m = conn.sends.front();
    if (m.credited && conn.credit == 0 && !conn.peer_open) {
      return fmt::format("waiting for rank {} to grant credits ({} requested, {} granted)", conn.peer,
                         byteText(conn.requested), byteText(conn.granted));
    }
    return fmt::format("window full: {} unacknowledged by rank {}", byteText(conn.control.inflightBytes()), conn.peer);
  }

  std::string describeWaiting() const {
    std::string waiting;
    int listed = 0;
    for (const Conn& conn : conns_) {
      std::map<int, size_t> by_channel;
      for (const auto& [channel, queue] : conn.channels)
        if (!queue.recvs.empty()) by_channel[channel] = queue.recvs.size();
      for (const auto& [channel, count] : by_channel) {
        if (listed++ < 8) {
          waiting += fmt::format("{}receive from rank {} on channel {} ({} posted)", waiting.empty() ? "" : "; ",
                                 conn.peer, channel, count);
        }
      }
      if (sending(conn)) {
        uint64_t left = 0;
        size_t messages = conn.sends.size();
        for (const OutFrame& f : conn.wire) {
          left += sizeof(FrameHeader) + f.payload - f.done;
          messages += f.completes != 0 && (conn.sends.empty() || f.completes != conn.sends.front().id) ? 1 : 0;
        }
        for (const SendMessage& m : conn.sends) left += m.bytes - m.cut;
        if (listed++ < 8) {
          waiting += fmt::format("{}send to rank {} ({} message(s), {} not written: {})", waiting.empty() ? "" : "; ",
                                 conn.peer, messages, byteText(left), sendBlocker(conn));
        }
      }
    }
    if (listed > 8) waiting += fmt::format("; ... ({} in all)", listed);
    return waiting.empty() ? "nothing (no send or receive outstanding)" : waiting;
  }

  Bootstrap* bootstrap_;
  congestion::Config cc_;
  std::string tcp_congestion_;  // BRAID_TCP_CONGESTION: the data sockets' TCP congestion control ("": the system's)
  int tcp_rto_min_us_ = 0;      // BRAID_TCP_RTO_MIN: the data sockets' shortest RTO, µs (0: the kernel's)
  std::vector<Conn> conns_;     // by peer rank; conns_[rank_] has no socket
  congestion::CreditGranter granter_;
  congestion::PeerScheduler scheduler_;
  std::vector<congestion::CreditGranter::Grant> grants_;
  double next_log_us_ = 0;
  bool aborted_ = false;  // abort frames were sent
};

}  // namespace

Result<std::unique_ptr<DataTransport>> createTcpTransport(Bootstrap& bootstrap, const TransportOptions& options) {
  auto transport = std::make_unique<TcpTransport>(bootstrap, options);
  BRAID_RETURN_IF_ERROR(transport->connect());
  return std::unique_ptr<DataTransport>(std::move(transport));
}

}  // namespace braid
