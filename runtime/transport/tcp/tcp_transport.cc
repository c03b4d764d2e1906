#include "transport/tcp/tcp_transport.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/nonce.h"
#include "socket/socket.h"
#include "transport/endpoint_base.h"
#include "transport/factory.h"

namespace braid {
namespace {

using net::Deadline;
using net::Fd;
using net::SocketAddress;
using tcp::FrameHeader;
using tcp::FrameType;

constexpr uint64_t kHelloMagic = 0x3150435444494152ull;  // "RAIDTCP1" little-endian
constexpr uint64_t kMaxControlBytes = 1 << 16;
constexpr uint64_t kMaxFrameBytes = uint64_t{1} << 44;
constexpr size_t kMaxIov = 64;

/// What every rank all-gathers during setup.
struct Listing {
  uint32_t ip;
  uint16_t port;
  uint16_t reserved;
  uint64_t token;
};

struct Hello {
  uint64_t magic;
  uint64_t token;  // the token of the rank connected to
  int32_t rank;    // the rank connecting
  int32_t size;
};

std::string sizeText(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 20)) return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
  if (bytes >= 1024) return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / 1024);
  return fmt::format("{} B", bytes);
}

class TcpTransport final : public EndpointBase {
 public:
  TcpTransport(Bootstrap& bootstrap, const TransportOptions& options)
      : EndpointBase(Config{"tcp", bootstrap.rank(), bootstrap.size(), endpointTimeoutSeconds(options), INT_MAX,
                            /*progress_thread=*/false, &bootstrap}),
        bootstrap_(&bootstrap),
        conns_(bootstrap.size()) {
    for (int p = 0; p < size_; ++p) conns_[p].peer = p;
  }

  ~TcpTransport() override {
    for (Conn& conn : conns_) {
      if (!conn.fd.valid()) continue;
      if (conn.state == Conn::kOpen && !halfWritten(conn) && !failed()) {
        // Tell the peer this is a normal close, then read what is left so close() sends FIN, not RST.
        FrameHeader header;
        header.type = static_cast<uint32_t>(FrameType::kClose);
        (void)::send(conn.fd.get(), &header, sizeof(header), MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      char sink[4096];
      while (::recv(conn.fd.get(), sink, sizeof(sink), MSG_DONTWAIT) > 0) {
      }
    }
  }

  /// Collective setup: listen, all-gather listings, connect to lower ranks, accept higher ones.
  Status connect() {
    const Deadline deadline = Deadline::after(timeout_s_);
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
    // Even a rank that cannot listen takes part in the all-gather (port 0), so its peers fail fast.
    std::vector<Listing> listings(size_);
    listings[rank_] = Listing{mine.ip, listener.isOk() ? mine.port : uint16_t{0}, 0, randomNonce()};
    const Status gathered = bootstrap_->allGather(listings.data(), sizeof(Listing));
    if (!listener.isOk()) {
      return Status(listener.status().code(), fmt::format("rank {}: tcp: {}", rank_, listener.status().message()));
    }
    if (!gathered.isOk()) {
      return Status(gathered.code(), fmt::format("rank {}: tcp setup: {}", rank_, gathered.message()));
    }
    for (int p = 0; p < size_; ++p) {
      if (p != rank_ && listings[p].port == 0) {
        return Status(StatusCode::kRemoteError, fmt::format("rank {}: tcp setup: rank {} could not listen", rank_, p));
      }
    }
    for (int p = 0; p < rank_; ++p) {
      const SocketAddress at{listings[p].ip, listings[p].port};
      const std::string what = fmt::format("rank {}: tcp connection to {}", rank_, describePeer(p));
      BRAID_ASSIGN_OR_RETURN(Fd fd, net::connectTo(at, deadline, what));
      const Hello hello{kHelloMagic, listings[p].token, rank_, size_};
      BRAID_RETURN_IF_ERROR(net::writeAll(fd.get(), &hello, sizeof(hello), deadline, what));
      conns_[p].fd = std::move(fd);
    }
    const std::string what = fmt::format("rank {}: tcp listener {}", rank_, mine.toString());
    const auto take = [&](const void* bytes, Fd& fd) {
      Hello hello;
      std::memcpy(&hello, bytes, sizeof(hello));
      if (hello.magic != kHelloMagic || hello.token != listings[rank_].token || hello.size != size_ ||
          hello.rank <= rank_ || hello.rank >= size_ || conns_[hello.rank].fd.valid()) {
        return false;  // not a peer of this endpoint
      }
      conns_[hello.rank].fd = std::move(fd);
      return true;
    };
    const auto never_connected = [&] {
      std::string names;
      int listed = 0;
      for (int p = rank_ + 1; p < size_ && listed < 8; ++p) {
        if (!conns_[p].fd.valid()) names += (listed++ > 0 ? ", " : "") + describePeer(p);
      }
      return Status(StatusCode::kTimeout,
                    fmt::format("{}: no connection within {} s from {}", what, timeout_s_, names));
    };
    BRAID_RETURN_IF_ERROR(
        net::acceptMesh(listener->get(), deadline, what, size_ - 1 - rank_, sizeof(Hello), take, never_connected));
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      conns_[p].staging.resize(tcp::kStagingBytes);
    }
    return Status::ok();
  }

 private:
  Status startSend(const SendRequest& request, const uint8_t* src, RequestId id) override {
    Conn& conn = conns_[request.peer];
    BRAID_RETURN_IF_ERROR(closedPeer(conn, "send to"));
    OutMessage message;
    message.id = id;
    message.header.type = static_cast<uint32_t>(FrameType::kData);
    message.header.channel = request.channel;
    message.header.bytes = request.src.bytes;
    message.data = src;
    conn.out.push_back(std::move(message));
    if (conn.out.size() == 1) writeConn(conn);  // try at once: small messages leave here
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
        fds.push_back(pollfd{conn.fd.get(), static_cast<short>(POLLIN | (conn.out.empty() ? 0 : POLLOUT)), 0});
        who.push_back(conn.peer);
      }
      const int ready = ::poll(fds.data(), fds.size(), wait.sleepMs());
      if (ready > 0) {
        std::fill(active.begin(), active.end(), false);
        for (size_t i = 0; i < fds.size(); ++i)
          if (fds[i].revents != 0) active[who[i]] = true;
        progressAll(&active);
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
        FrameHeader header;
        header.type = static_cast<uint32_t>(FrameType::kAbort);
        header.bytes = text.size();
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
  struct OutMessage {
    RequestId id = 0;  // 0: a control frame
    FrameHeader header;
    const uint8_t* data = nullptr;
    uint64_t done = 0;  // bytes written, header included
  };
  struct Conn {
    enum State { kOpen, kClosed, kDead, kAborted };
    int peer = 0;
    Fd fd;
    State state = kOpen;
    bool eof = false;
    std::deque<OutMessage> out;
    // Input: the frame being read.
    FrameHeader header;
    size_t header_got = 0;
    bool in_payload = false;
    uint8_t* target = nullptr;  // where the payload goes (a receive's dst or an unexpected buffer); null: discard
    uint64_t payload_got = 0;
    RequestId direct_id = 0;           // the receive completed by this frame (0: unexpected or control)
    Unexpected* unexpected = nullptr;  // the buffer being filled, if any
    std::vector<uint8_t> control;      // abort reason
    std::vector<uint8_t> staging;      // read buffer
    size_t stage_begin = 0;
    size_t stage_end = 0;
    std::unordered_map<int, Channel> channels;
  };

  static bool halfWritten(const Conn& conn) { return !conn.out.empty() && conn.out.front().done > 0; }

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
      bool waiting = !conn.out.empty();
      for (const auto& [channel, queue] : conn.channels) waiting = waiting || !queue.recvs.empty();
      if (waiting) (void)fail(closedPeer(conn, "waiting on"));
    }
  }

  /// Progress on every connection (`active`: only those, when given).
  void progressAll(const std::vector<bool>* active) {
    for (Conn& conn : conns_) {
      if (!conn.fd.valid() || (active != nullptr && !(*active)[conn.peer])) continue;
      if (!conn.out.empty()) writeConn(conn);
      readConn(conn);
      if (failed()) return;
    }
  }

  void writeConn(Conn& conn) {
    while (!conn.out.empty() && !conn.eof) {
      iovec iov[kMaxIov];
      size_t count = 0;
      for (auto it = conn.out.begin(); it != conn.out.end() && count + 2 <= kMaxIov; ++it) {
        const uint64_t total = sizeof(FrameHeader) + it->header.bytes;
        if (it->done < sizeof(FrameHeader)) {
          iov[count++] = {reinterpret_cast<char*>(&it->header) + it->done, sizeof(FrameHeader) - it->done};
          if (it->header.bytes > 0) iov[count++] = {const_cast<uint8_t*>(it->data), it->header.bytes};
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
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        const int err = errno;
        readConn(conn);  // an abort frame or a close explains it better
        markDead(conn, "failed: " + net::errnoText(err));
        return;
      }
      uint64_t left = static_cast<uint64_t>(sent);
      while (left > 0 && !conn.out.empty()) {
        OutMessage& front = conn.out.front();
        const uint64_t total = sizeof(FrameHeader) + front.header.bytes;
        const uint64_t take = std::min(left, total - front.done);
        front.done += take;
        left -= take;
        if (front.done < total) break;
        if (front.id != 0) complete(front.id);
        conn.out.pop_front();
      }
    }
  }

  /// Matches complete unexpected messages of one channel with its posted receives, in order.
  Status match(Conn& conn, int channel_id, Channel& channel) {
    while (!channel.messages.empty() && channel.messages.front().complete && !channel.recvs.empty()) {
      Unexpected& message = channel.messages.front();
      const PendingRecv recv = channel.recvs.front();
      if (message.bytes != recv.bytes) {
        const Status wrong = invalidArgument(
            fmt::format("rank {} -> rank {} channel {}: a message of {} bytes matched a receive of {} bytes", conn.peer,
                        rank_, channel_id, message.bytes, recv.bytes));
        return fail(wrong);
      }
      if (recv.bytes > 0) std::memcpy(recv.dst, message.data.get(), recv.bytes);
      channel.messages.pop_front();
      channel.recvs.pop_front();
      complete(recv.id);
    }
    return Status::ok();
  }

  /// A header is complete: decide where its payload goes.
  void startFrame(Conn& conn) {
    conn.header_got = 0;
    conn.in_payload = true;
    conn.payload_got = 0;
    conn.target = nullptr;
    conn.direct_id = 0;
    conn.unexpected = nullptr;
    const FrameHeader& h = conn.header;
    if (h.type == static_cast<uint32_t>(FrameType::kData) && h.bytes <= kMaxFrameBytes) {
      Channel& channel = conn.channels[h.channel];
      if (channel.messages.empty() && !channel.recvs.empty()) {
        const PendingRecv recv = channel.recvs.front();
        if (recv.bytes != h.bytes) {
          (void)fail(invalidArgument(
              fmt::format("rank {} -> rank {} channel {}: a message of {} bytes matched a receive of {} bytes",
                          conn.peer, rank_, h.channel, h.bytes, recv.bytes)));
        } else {
          channel.recvs.pop_front();
          conn.target = recv.dst;
          conn.direct_id = recv.id;
        }
      } else {
        channel.messages.emplace_back();
        conn.unexpected = &channel.messages.back();
        conn.unexpected->bytes = h.bytes;
        if (h.bytes > 0) {
          conn.unexpected->data.reset(new (std::nothrow) uint8_t[h.bytes]);
          if (conn.unexpected->data == nullptr) {
            (void)fail(Status(StatusCode::kSystemError,
                              fmt::format("rank {}: tcp: cannot buffer a message of {} from rank {} on channel {}",
                                          rank_, sizeText(h.bytes), conn.peer, h.channel)));
          }
        }
        conn.target = conn.unexpected->data.get();
      }
    } else if ((h.type == static_cast<uint32_t>(FrameType::kAbort) ||
                h.type == static_cast<uint32_t>(FrameType::kClose)) &&
               h.bytes <= kMaxControlBytes) {
      conn.control.assign(h.bytes, 0);
      conn.target = conn.control.data();
    } else {
      markDead(conn, fmt::format("sent a malformed frame (type {}, {} bytes)", h.type, h.bytes));
      conn.in_payload = false;
      return;
    }
    if (h.bytes == 0) finishFrame(conn);
  }

  void finishFrame(Conn& conn) {
    conn.in_payload = false;
    const FrameHeader& h = conn.header;
    switch (static_cast<FrameType>(h.type)) {
      case FrameType::kData:
        if (conn.direct_id != 0) {
          complete(conn.direct_id);
        } else if (conn.unexpected != nullptr) {
          conn.unexpected->complete = true;
          Channel& channel = conn.channels[h.channel];
          (void)match(conn, h.channel, channel);
        }
        break;
      case FrameType::kAbort:
        if (conn.state == Conn::kOpen) {
          conn.state = Conn::kAborted;
          (void)fail(Status(StatusCode::kRemoteError,
                            fmt::format("rank {}: tcp: {} aborted: {}", rank_, describePeer(conn.peer),
                                        std::string(conn.control.begin(), conn.control.end()))));
        }
        break;
      case FrameType::kClose:
        if (conn.state == Conn::kOpen) conn.state = Conn::kClosed;
        break;
    }
    conn.direct_id = 0;
    conn.unexpected = nullptr;
    conn.target = nullptr;
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
        const size_t take = static_cast<size_t>(std::min<uint64_t>(bytes, conn.header.bytes - conn.payload_got));
        if (conn.target != nullptr) std::memcpy(conn.target + conn.payload_got, from, take);
        conn.payload_got += take;
        from += take;
        bytes -= take;
        if (conn.payload_got == conn.header.bytes) finishFrame(conn);
      }
    }
  }

  void readConn(Conn& conn) {
    size_t budget = tcp::kReadBudgetBytes;
    while (!conn.eof && budget > 0) {
      ssize_t got;
      const uint64_t payload_left = conn.in_payload ? conn.header.bytes - conn.payload_got : 0;
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
        if (conn.payload_got == conn.header.bytes) finishFrame(conn);
      } else {
        consume(conn, conn.staging.data(), static_cast<size_t>(got));
      }
      if (failed()) return;
    }
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
      if (!conn.out.empty()) {
        uint64_t left = 0;
        for (const OutMessage& m : conn.out) left += sizeof(FrameHeader) + m.header.bytes - m.done;
        if (listed++ < 8) {
          waiting += fmt::format("{}send to rank {} ({} message(s), {} not written: rank {} does not read)",
                                 waiting.empty() ? "" : "; ", conn.peer, conn.out.size(), sizeText(left), conn.peer);
        }
      }
    }
    if (listed > 8) waiting += fmt::format("; ... ({} in all)", listed);
    return waiting.empty() ? "nothing (no send or receive outstanding)" : waiting;
  }

  Bootstrap* bootstrap_;
  std::vector<Conn> conns_;  // by peer rank; conns_[rank_] has no socket
  bool aborted_ = false;     // abort frames were sent
};

}  // namespace

Result<std::unique_ptr<DataTransport>> createTcpTransport(Bootstrap& bootstrap, const TransportOptions& options) {
  auto transport = std::make_unique<TcpTransport>(bootstrap, options);
  BRAID_RETURN_IF_ERROR(transport->connect());
  return std::unique_ptr<DataTransport>(std::move(transport));
}

}  // namespace braid
