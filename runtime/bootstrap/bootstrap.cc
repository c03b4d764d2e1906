// The TCP bootstrap (include/braid/bootstrap.h), in the shape of NCCL's bootstrap root:
//
// 1. createUniqueId() listens on a socket and starts a detached root thread; the id holds a magic, the
//    root's IPv4 address and port, and a random nonce that every rank of this rendezvous presents.
// 2. connectBootstrap(): every rank listens on its own port, connects to the root and sends a RootHello
//    (nonce, rank, size, host name, pid, listening address, its timeout). The root checks them (nonce, one
//    size, each rank once) and, when all `size` ranks are in, answers each with the table of every rank's
//    host, pid and address, then exits. A rank whose timeout passes first asks the root which ranks are
//    still missing and names them in its kTimeout. A registered rank whose connection to the root closes before
//    the table went out without having asked (its process exited, or its bootstrap failed) fails the
//    rendezvous: the root tells every rank registered so far, and refuses every rank that comes later, naming
//    it (kRemoteError), so ranks in other processes learn of it at once instead of at their timeout.
// 3. Full mesh: rank i connects to every rank j < i (sending a MeshHello) and accepts a connection from
//    every rank j > i. These sockets carry framed messages (FrameHeader: type, tag, bytes): data frames
//    matched by (peer, tag) in arrival order, abort frames (the reason), and a bye frame when a rank
//    destroys its bootstrap normally. EOF without a bye means the peer's process died.
//
// Every socket is non-blocking; a rank waiting to send also reads whatever any peer sends (into per-peer
// queues), so ranks sending to each other never deadlock on full socket buffers.
#include "braid/bootstrap.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <random>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap_internal.h"
#include "common/env.h"
#include "common/nonce.h"
#include "socket/socket.h"

namespace braid {
namespace {

using net::Deadline;
using net::Fd;
using net::SocketAddress;

constexpr char kIdMagic[8] = {'B', 'R', 'A', 'I', 'D', 'I', 'D', '1'};
constexpr uint64_t kWireMagic = 0x3153424449415242ull;  // "BRAIDBS1" little-endian
constexpr int kHostBytes = 64;

struct IdLayout {
  char magic[8];
  uint64_t nonce;
  uint32_t ip;  // network byte order
  uint16_t port;
  uint16_t reserved;
};
static_assert(sizeof(IdLayout) <= sizeof(UniqueId::internal));

struct RootHello {
  uint64_t magic;
  uint64_t nonce;
  int32_t rank;
  int32_t size;
  int64_t pid;
  uint32_t ip;
  uint16_t port;
  uint16_t reserved;
  double timeout_s;
  char host[kHostBytes];
};

// RootHello::size of a rank that could not join (its settings were refused before it could take part); its host
// field then carries the first kHostBytes - 1 bytes of its error instead of a host name.
constexpr int32_t kCouldNotJoin = -1;

// How long the root of a failed rendezvous still answers late ranks with the failure, seconds.
constexpr double kFailedRootGraceS = 10.0;

struct RankEntry {
  int64_t pid;
  uint32_t ip;
  uint16_t port;
  uint16_t reserved;
  char host[kHostBytes];
};

enum : int32_t { kReplyTable = 0, kReplyError = 1, kReplyStatus = 2, kReplyRankFailed = 3 };
struct RootReply {
  uint64_t magic;
  int32_t kind;
  int32_t code;  // kReplyError: the StatusCode
  uint64_t bytes;
};
constexpr uint32_t kQueryWord = 0x51525931;  // a waiting rank asks the root which ranks are missing

struct MeshHello {
  uint64_t magic;
  uint64_t nonce;
  int32_t rank;
  int32_t size;
};

enum : uint32_t { kFrameData = 1, kFrameAbort = 2, kFrameBye = 3 };
struct FrameHeader {
  uint32_t type;
  int32_t tag;
  uint64_t bytes;
};
constexpr uint64_t kMaxFrameBytes = uint64_t{1} << 40;
constexpr int32_t kTagAllGather = INT32_MIN + 1;
constexpr int32_t kTagBarrier = INT32_MIN + 2;
constexpr int32_t kReservedTagsBelow = INT32_MIN + 1024;

std::string systemHostName() {
  char host[kHostBytes] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return "unknown";
  return host;
}

/// The host name this rank gives the others: BootstrapOptions::host_id, else BRAID_HOSTID, else gethostname().
/// Errors: kInvalidArgument naming the setting when it does not fit the wire's kHostBytes - 1 bytes.
Result<std::string> resolveHostName(const BootstrapOptions& options, int rank) {
  const bool from_option = !options.host_id.empty();
  const std::string chosen = from_option ? options.host_id : envString("BRAID_HOSTID");
  if (chosen.empty()) return systemHostName();
  if (chosen.size() > static_cast<size_t>(kHostBytes - 1)) {
    return invalidArgument(fmt::format("rank {}: bootstrap: {}={}: longer than {} bytes", rank,
                                       from_option ? "BootstrapOptions::host_id" : "BRAID_HOSTID", chosen,
                                       kHostBytes - 1));
  }
  return chosen;
}

void copyHost(char (&to)[kHostBytes], const std::string& from) {
  std::memset(to, 0, sizeof(to));
  std::memcpy(to, from.data(), std::min(from.size(), sizeof(to) - 1));
}

std::string hostText(const char (&from)[kHostBytes]) { return std::string(from, strnlen(from, kHostBytes)); }

/// "2, 5, 7" (at most 16, then "... (N in all)").
std::string rankList(const std::vector<int>& ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size() && i < 16; ++i) text += (i > 0 ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > 16) text += fmt::format(", ... ({} in all)", ranks.size());
  return text;
}

// ---------------------------------------------------------------------------------------------- root thread

class Root {
 public:
  Root(Fd listener, uint64_t nonce, SocketAddress address, double timeout_s)
      : listener_(std::move(listener)), nonce_(nonce), address_(address), timeout_s_(timeout_s) {}

  void serve() {
    deadline_ = net::Clock::now() + timeoutDuration(timeout_s_);
    while (true) {
      if (size_ > 0 && registered_ == size_ && failed_.empty()) {
        sendTables();
        return;
      }
      if (net::Clock::now() >= deadline_) {
        const std::string why = fmt::format("bootstrap root at {} gave up waiting: {}", address_.toString(), missing());
        for (auto& client : clients_)
          if (client->registered) reply(*client, kReplyError, StatusCode::kTimeout, why);
        return;
      }
      std::vector<pollfd> fds;
      fds.push_back(pollfd{listener_.get(), POLLIN, 0});
      for (auto& client : clients_) fds.push_back(pollfd{client->fd.get(), POLLIN, 0});
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - net::Clock::now()).count();
      poll(fds.data(), fds.size(), static_cast<int>(std::clamp<long long>(left + 1, 0, 1000)));
      if (fds[0].revents != 0) acceptAll();
      for (size_t i = 1; i < fds.size(); ++i)
        if (fds[i].revents != 0) readClient(*clients_[i - 1]);
      clients_.erase(std::remove_if(clients_.begin(), clients_.end(), [](const auto& c) { return c->dropped; }),
                     clients_.end());
    }
  }

 private:
  struct Client {
    Fd fd;
    RootHello hello{};
    size_t hello_got = 0;
    bool registered = false;
    bool dropped = false;
    uint32_t query = 0;
    size_t query_got = 0;
    bool asked = false;  // it sent a query: its own timeout passed, it gives up
  };

  std::string missing() const {
    if (size_ <= 0) return "no rank connected";
    std::vector<int> absent;
    std::vector<int> left;
    for (int r = 0; r < size_; ++r) {
      if (by_rank_[r] == nullptr) (left_[r] ? left : absent).push_back(r);
    }
    std::string text;
    if (!absent.empty()) {
      text = fmt::format("rank{} {} of {} never connected to the root", absent.size() == 1 ? "" : "s", rankList(absent),
                         size_);
    }
    if (!left.empty()) {
      text += fmt::format("{}rank{} {} of {} connected but gave up", text.empty() ? "" : "; ",
                          left.size() == 1 ? "" : "s", rankList(left), size_);
    }
    return text;
  }

  void acceptAll() {
    while (true) {
      const int fd = accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;
      net::setNoDelay(fd);
      auto client = std::make_unique<Client>();
      client->fd = Fd(fd);
      clients_.push_back(std::move(client));
    }
  }

  void reply(Client& client, int32_t kind, StatusCode code, const std::string& text) {
    RootReply header{kWireMagic, kind, static_cast<int32_t>(code), text.size()};
    const Deadline deadline = Deadline::after(5);
    if (!net::writeAll(client.fd.get(), &header, sizeof(header), deadline, "root").isOk()) return;
    (void)net::writeAll(client.fd.get(), text.data(), text.size(), deadline, "root");
  }

  void refuse(Client& client, StatusCode code, const std::string& why) {
    reply(client, failed_.empty() ? kReplyError : kReplyRankFailed, code, why);
    client.dropped = true;
  }

  // A registered rank's connection closed before the table went out and it never asked who is missing: it died
  // or its bootstrap failed, so the rendezvous cannot complete.
  void failRendezvous(const Client& gone) {
    const RootHello& h = gone.hello;
    failAll(fmt::format("rank {} (host {}, pid {}) of this rendezvous failed: its connection to the bootstrap root at "
                        "{} closed before every rank had joined (its process exited or its bootstrap failed)",
                        h.rank, hostText(h.host), h.pid, address_.toString()),
            &gone);
  }

  // A rank with this rendezvous' id that cannot take part (its size differs, its rank is out of range or taken):
  // the ranks were started inconsistently, so the rendezvous cannot complete. It is refused with `why`, and every
  // other rank fails with it too.
  void refuseAndFail(Client& client, const std::string& why) {
    refuse(client, StatusCode::kInvalidArgument, why);
    failAll("the rendezvous failed: " + why, &client);
  }

  // The rendezvous cannot complete: every rank registered so far is told `why` now (kRemoteError), every later one
  // when it says hello (admit) within kFailedRootGraceS.
  void failAll(const std::string& why, const Client* except) {
    failed_ = why;
    // Late ranks are refused with `why` for a while; then the root ends (it may live in a process that goes on).
    deadline_ = std::min(deadline_, net::Clock::now() + timeoutDuration(kFailedRootGraceS));
    for (auto& client : clients_) {
      if (!client->registered || client.get() == except) continue;
      reply(*client, kReplyRankFailed, StatusCode::kRemoteError, failed_);
      by_rank_[client->hello.rank] = nullptr;
      --registered_;
      client->registered = false;
      client->dropped = true;
    }
  }

  void unregister(Client& client) {
    if (client.registered && by_rank_[client.hello.rank] == &client) {
      by_rank_[client.hello.rank] = nullptr;
      left_[client.hello.rank] = true;
      --registered_;
    }
    client.registered = false;
    client.dropped = true;
  }

  void readClient(Client& client) {
    while (!client.dropped) {
      char* target;
      size_t want;
      if (!client.registered) {
        target = reinterpret_cast<char*>(&client.hello) + client.hello_got;
        want = sizeof(RootHello) - client.hello_got;
      } else {
        target = reinterpret_cast<char*>(&client.query) + client.query_got;
        want = sizeof(uint32_t) - client.query_got;
      }
      const ssize_t n = recv(client.fd.get(), target, want, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n <= 0) {  // the rank gave up or died: it counts as missing again
        const bool failed = client.registered && !client.asked && failed_.empty();
        unregister(client);
        if (failed) failRendezvous(client);
        return;
      }
      if (!client.registered) {
        client.hello_got += static_cast<size_t>(n);
        if (client.hello_got == sizeof(RootHello)) admit(client);
      } else {
        client.query_got += static_cast<size_t>(n);
        if (client.query_got == sizeof(uint32_t)) {
          client.query_got = 0;
          if (client.query == kQueryWord) {
            client.asked = true;
            reply(client, kReplyStatus, StatusCode::kTimeout, missing());
          }
        }
      }
    }
  }

  void admit(Client& client) {
    const RootHello& h = client.hello;
    const std::string who = fmt::format("rank {} (host {}, pid {})", h.rank, hostText(h.host), h.pid);
    if (h.magic != kWireMagic) {
      client.dropped = true;  // not a Braid rank
      return;
    }
    if (h.nonce != nonce_) {
      return refuse(client, StatusCode::kInvalidArgument,
                    fmt::format("{} presented the id of another rendezvous (nonce mismatch)", who));
    }
    if (h.size == kCouldNotJoin) {
      client.dropped = true;
      if (failed_.empty()) {
        failAll(fmt::format("rank {} (pid {}) could not join this rendezvous: {} (its own error has the whole message)",
                            h.rank, h.pid, hostText(h.host)),
                &client);
      }
      return;
    }
    if (!failed_.empty()) return refuse(client, StatusCode::kRemoteError, failed_);
    if (size_ < 0) {
      if (h.size < 1) return refuse(client, StatusCode::kInvalidArgument, fmt::format("{}: size {}", who, h.size));
      size_ = h.size;
      size_from_ = h.rank;
      by_rank_.assign(size_, nullptr);
      left_.assign(size_, false);
    }
    if (h.size != size_) {
      return refuseAndFail(client, fmt::format("{} says the communicator has {} ranks, rank {} said {} (the world "
                                               "size, e.g. BRAID_WORLD_SIZE, must be the same on every rank)",
                                               who, h.size, size_from_, size_));
    }
    if (h.rank < 0 || h.rank >= size_) {
      return refuseAndFail(client, fmt::format("{}: rank out of range for {} ranks", who, size_));
    }
    if (by_rank_[h.rank] != nullptr) {
      const RootHello& first = by_rank_[h.rank]->hello;
      return refuseAndFail(client, fmt::format("rank {} given twice: host {} pid {}, and {}", h.rank,
                                               hostText(first.host), first.pid, who));
    }
    by_rank_[h.rank] = &client;
    left_[h.rank] = false;
    client.registered = true;
    ++registered_;
    // Live at least as long as this rank waits (plus a second to answer its query).
    deadline_ = std::max(deadline_, net::Clock::now() + timeoutDuration(h.timeout_s + 1.0));
  }

  void sendTables() {
    std::vector<RankEntry> table(size_);
    for (int r = 0; r < size_; ++r) {
      const RootHello& h = by_rank_[r]->hello;
      table[r] = RankEntry{h.pid, h.ip, h.port, 0, {}};
      std::memcpy(table[r].host, h.host, kHostBytes);
      table[r].host[kHostBytes - 1] = '\0';
    }
    const std::string bytes(reinterpret_cast<const char*>(table.data()), table.size() * sizeof(RankEntry));
    for (int r = 0; r < size_; ++r) reply(*by_rank_[r], kReplyTable, StatusCode::kOk, bytes);
  }

  Fd listener_;
  uint64_t nonce_;
  SocketAddress address_;
  double timeout_s_;  // BRAID_TIMEOUT when the id was created
  net::Clock::time_point deadline_;
  std::vector<std::unique_ptr<Client>> clients_;
  std::vector<Client*> by_rank_;
  std::vector<bool> left_;  // registered once, then closed its connection (it gave up or died)
  int size_ = -1;
  int size_from_ = -1;
  int registered_ = 0;
  std::string failed_;  // why the rendezvous failed (failRendezvous); empty while it can complete
};

// ------------------------------------------------------------------------------------- failures of a rendezvous

// Ranks of one rendezvous that run as threads of one process learn of each other's failure here at once, even
// when the failing rank could not open a single connection (it ran out of file descriptors): connectBootstrap()
// posts its error under the rendezvous' nonce and polls this board while it waits. Ranks in other processes learn
// of it through the abort frames that the failing rank sends over the mesh connections it has.
class FailureBoard {
 public:
  void post(uint64_t nonce, int rank, const std::string& why) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& entry : entries_)
      if (entry.nonce == nonce) return;  // the first failure explains the others
    if (entries_.size() >= kKept) entries_.pop_front();
    entries_.push_back(Entry{nonce, rank, why});
  }
  /// The failure another rank of rendezvous `nonce` posted, as kRemoteError; ok when there is none.
  Status check(uint64_t nonce, int rank) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& entry : entries_) {
      if (entry.nonce != nonce || entry.rank == rank) continue;
      return Status(StatusCode::kRemoteError, fmt::format("rank {}: bootstrap: rank {} of this rendezvous failed: {}",
                                                          rank, entry.rank, entry.why));
    }
    return Status::ok();
  }

 private:
  static constexpr size_t kKept = 64;  // failed rendezvous remembered (a nonce is never reused)
  struct Entry {
    uint64_t nonce;
    int rank;
    std::string why;
  };
  std::mutex mutex_;
  std::deque<Entry> entries_;
};

FailureBoard& failureBoard() {
  static FailureBoard* board = new FailureBoard();  // never destroyed: detached threads may still post
  return *board;
}

// ------------------------------------------------------------------------------------------------- the mesh

class TcpBootstrap final : public Bootstrap {
 public:
  struct PeerInfo {
    std::string host;
    int64_t pid = 0;
    SocketAddress address;
  };

  TcpBootstrap(int rank, int size, double timeout_s, uint64_t nonce, std::vector<PeerInfo> info)
      : rank_(rank), size_(size), timeout_s_(timeout_s), nonce_(nonce), peers_(size) {
    for (int r = 0; r < size; ++r) {
      hosts_.push_back(info[r].host);
      pids_.push_back(info[r].pid);
      peers_[r].address = info[r].address.toString();
    }
  }

  ~TcpBootstrap() override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (int p = 0; p < size_; ++p) {
      Peer& peer = peers_[p];
      if (!peer.fd.valid() || peer.state != Peer::kOpen || peer.out_partial || aborted_.load()) continue;
      const FrameHeader bye{kFrameBye, 0, 0};
      (void)::send(peer.fd.get(), &bye, sizeof(bye), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
  }

  /// Sets up the connection to `peer` during the mesh phase (before the object is shared).
  void setPeer(int peer, Fd fd) { peers_[peer].fd = std::move(fd); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::vector<std::string>& hostNames() const override { return hosts_; }
  const std::vector<int64_t>& processIds() const override { return pids_; }

  Status allGather(void* data, size_t bytes_per_rank) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const Deadline deadline = Deadline::after(timeout_s_);
    char* base = static_cast<char*>(data);
    for (int k = 1; k < size_; ++k) {
      const int peer = (rank_ + k) % size_;
      BRAID_RETURN_IF_ERROR(
          sendLocked(peer, kTagAllGather, base + rank_ * bytes_per_rank, bytes_per_rank, deadline, "allGather"));
    }
    for (int k = 1; k < size_; ++k) {
      const int peer = (rank_ - k + size_) % size_;
      BRAID_RETURN_IF_ERROR(
          recvLocked(peer, kTagAllGather, base + peer * bytes_per_rank, bytes_per_rank, deadline, "allGather"));
    }
    return Status::ok();
  }

  Status barrier() override {
    std::lock_guard<std::mutex> lock(mutex_);
    const Deadline deadline = Deadline::after(timeout_s_);
    const char token = 1;
    for (int k = 1; k < size_; ++k)
      BRAID_RETURN_IF_ERROR(sendLocked((rank_ + k) % size_, kTagBarrier, &token, 1, deadline, "barrier"));
    for (int k = 1; k < size_; ++k) {
      char got = 0;
      BRAID_RETURN_IF_ERROR(recvLocked((rank_ - k + size_) % size_, kTagBarrier, &got, 1, deadline, "barrier"));
    }
    return Status::ok();
  }

  Status send(int peer, int tag, const void* data, size_t bytes) override {
    BRAID_RETURN_IF_ERROR(checkUserCall(peer, tag, "send"));
    std::lock_guard<std::mutex> lock(mutex_);
    return sendLocked(peer, tag, data, bytes, Deadline::after(timeout_s_), "send");
  }

  Status recv(int peer, int tag, void* data, size_t bytes) override {
    BRAID_RETURN_IF_ERROR(checkUserCall(peer, tag, "recv"));
    std::lock_guard<std::mutex> lock(mutex_);
    return recvLocked(peer, tag, data, bytes, Deadline::after(timeout_s_), "recv");
  }

  Status checkPeers() override {
    std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock()) {  // another thread is in a call: report what it saw last
      std::lock_guard<std::mutex> failure_lock(failure_mutex_);
      return failure_;
    }
    if (aborted_.load()) return abortedStatus();
    waitIo(Deadline::after(0), -1, /*poll_now=*/true);
    return failure();
  }

  void abort(const std::string& why) override {
    {
      std::lock_guard<std::mutex> failure_lock(failure_mutex_);
      if (aborted_.load()) return;
      abort_reason_ = why;
      aborted_.store(true);
    }
    std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
    const std::string text = why.substr(0, 4000);
    for (int p = 0; p < size_; ++p) {
      Peer& peer = peers_[p];
      if (!peer.fd.valid()) continue;
      bool told = false;
      if (lock.owns_lock() && !peer.out_partial && peer.state == Peer::kOpen) {
        const FrameHeader header{kFrameAbort, 0, text.size()};
        iovec iov[2] = {{const_cast<FrameHeader*>(&header), sizeof(header)},
                        {const_cast<char*>(text.data()), text.size()}};
        msghdr msg{};
        msg.msg_iov = iov;
        msg.msg_iovlen = 2;
        const ssize_t n = sendmsg(peer.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        told = n == static_cast<ssize_t>(sizeof(header) + text.size());
        if (!told && n > 0) peer.out_partial = true;
      }
      // A peer we could not tell in one non-blocking write sees its connection close instead.
      if (!told) shutdown(peer.fd.get(), SHUT_RDWR);
    }
  }

 private:
  struct Peer {
    enum State { kOpen, kBye, kDead, kAborted };
    Fd fd;
    std::string address;
    State state = kOpen;
    std::string why;  // kDead / kAborted
    bool eof = false;
    bool out_partial = false;  // a frame was cut short by a timeout: nothing more can be framed
    // Input: the frame being read.
    FrameHeader header{};
    size_t header_got = 0;
    bool in_payload = false;
    std::vector<uint8_t> payload;
    size_t payload_got = 0;
    std::deque<std::pair<int32_t, std::vector<uint8_t>>> frames;  // data frames not received yet, in order
  };

  Status checkUserCall(int peer, int tag, const char* what) const {
    if (peer < 0 || peer >= size_ || peer == rank_) {
      return invalidArgument(
          fmt::format("rank {}: bootstrap {}: peer {} is not another rank of {}", rank_, what, peer, size_));
    }
    if (tag < kReservedTagsBelow) {
      return invalidArgument(fmt::format("rank {}: bootstrap {}: tag {} is reserved (tags below {} are internal)",
                                         rank_, what, tag, kReservedTagsBelow));
    }
    return Status::ok();
  }

  Status abortedStatus() const {
    std::lock_guard<std::mutex> failure_lock(failure_mutex_);
    return Status(StatusCode::kInvalidUsage, fmt::format("rank {}: bootstrap was aborted: {}", rank_, abort_reason_));
  }

  std::string describePeer(int p) const {
    return fmt::format("rank {} (host {}, pid {}, {})", p, hosts_[p], pids_[p], peers_[p].address);
  }

  /// The first peer that died or aborted, as kRemoteError; ok otherwise. Caches it for checkPeers().
  Status failure() {
    for (int p = 0; p < size_; ++p) {
      const Peer& peer = peers_[p];
      if (peer.state != Peer::kDead && peer.state != Peer::kAborted) continue;
      // A rank of this process that failed first, and whose failure closed this connection, says why.
      Status posted = peer.state == Peer::kDead ? failureBoard().check(nonce_, rank_) : Status::ok();
      Status status =
          !posted.isOk()
              ? posted
              : Status(StatusCode::kRemoteError,
                       peer.state == Peer::kAborted
                           ? fmt::format("rank {}: {} aborted: {}", rank_, describePeer(p), peer.why)
                           : fmt::format("rank {}: bootstrap connection to {} {}", rank_, describePeer(p), peer.why));
      std::lock_guard<std::mutex> failure_lock(failure_mutex_);
      if (failure_.isOk()) failure_ = status;
      return status;
    }
    return Status::ok();
  }

  void markDead(Peer& peer, const std::string& why) {
    peer.eof = true;
    if (peer.state == Peer::kOpen) {
      peer.state = Peer::kDead;
      peer.why = why;
    }
  }

  void finishFrame(Peer& peer) {
    peer.in_payload = false;
    peer.header_got = 0;
    if (peer.state != Peer::kOpen) return;  // after a bye or an abort nothing counts
    switch (peer.header.type) {
      case kFrameData: peer.frames.emplace_back(peer.header.tag, std::move(peer.payload)); break;
      case kFrameAbort:
        peer.state = Peer::kAborted;
        peer.why.assign(peer.payload.begin(), peer.payload.end());
        break;
      case kFrameBye: peer.state = Peer::kBye; break;
      default: break;
    }
    peer.payload = {};
  }

  /// Reads whatever `peer` has sent (non-blocking), completing frames into its queue.
  void pump(Peer& peer) {
    while (!peer.eof) {
      ssize_t n;
      if (!peer.in_payload) {
        n = ::recv(peer.fd.get(), reinterpret_cast<char*>(&peer.header) + peer.header_got,
                   sizeof(FrameHeader) - peer.header_got, 0);
      } else {
        n = ::recv(peer.fd.get(), peer.payload.data() + peer.payload_got, peer.payload.size() - peer.payload_got, 0);
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n == 0) {
        markDead(peer, "closed: its process exited or was killed");
        return;
      }
      if (n < 0) {
        markDead(peer, "failed: " + net::errnoText(errno));
        return;
      }
      if (!peer.in_payload) {
        peer.header_got += static_cast<size_t>(n);
        if (peer.header_got < sizeof(FrameHeader)) continue;
        if (peer.header.bytes > kMaxFrameBytes || peer.header.type < kFrameData || peer.header.type > kFrameBye) {
          markDead(peer,
                   fmt::format("sent a malformed frame (type {}, {} bytes)", peer.header.type, peer.header.bytes));
          return;
        }
        peer.in_payload = true;
        try {
          peer.payload.assign(peer.header.bytes, 0);
        } catch (const std::bad_alloc&) {
          markDead(peer, fmt::format("sent a frame of {} bytes that cannot be buffered", peer.header.bytes));
          return;
        }
        peer.payload_got = 0;
        if (peer.header.bytes == 0) finishFrame(peer);
      } else {
        peer.payload_got += static_cast<size_t>(n);
        if (peer.payload_got == peer.payload.size()) finishFrame(peer);
      }
    }
  }

  /// Waits until any peer sent something (or `writable_peer`'s socket has room) or the deadline, and reads
  /// every readable peer. Returns true when `writable_peer` can be written.
  bool waitIo(Deadline deadline, int writable_peer, bool poll_now = false) {
    std::vector<pollfd> fds;
    std::vector<int> who;
    for (int p = 0; p < size_; ++p) {
      if (!peers_[p].fd.valid() || (peers_[p].eof && p != writable_peer)) continue;
      short events = peers_[p].eof ? 0 : POLLIN;
      if (p == writable_peer) events |= POLLOUT;
      fds.push_back(pollfd{peers_[p].fd.get(), events, 0});
      who.push_back(p);
    }
    const int rc = poll(fds.data(), fds.size(), poll_now ? 0 : deadline.remainingMs());
    bool writable = false;
    if (rc <= 0) return false;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Peer& peer = peers_[who[i]];
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) pump(peer);
      if (who[i] == writable_peer && (fds[i].revents & (POLLOUT | POLLERR | POLLHUP))) writable = true;
    }
    return writable;
  }

  Status sendLocked(int p, int32_t tag, const void* data, size_t bytes, Deadline deadline, const char* what) {
    if (aborted_.load()) return abortedStatus();
    BRAID_RETURN_IF_ERROR(failure());
    Peer& peer = peers_[p];
    const auto timeout = [&] {
      return Status(StatusCode::kTimeout,
                    fmt::format("rank {}: bootstrap {} to {} (tag {}, {} bytes) timed out after {} s", rank_, what,
                                describePeer(p), tag, bytes, timeout_s_));
    };
    if (peer.out_partial) return timeout();
    if (peer.state == Peer::kBye) {
      return Status(StatusCode::kRemoteError, fmt::format("rank {}: bootstrap {} to {}: that rank closed its bootstrap",
                                                          rank_, what, describePeer(p)));
    }
    const FrameHeader header{kFrameData, tag, bytes};
    size_t sent = 0;
    const size_t total = sizeof(header) + bytes;
    while (sent < total) {
      iovec iov[2];
      int count = 0;
      if (sent < sizeof(header)) {
        iov[count++] = {reinterpret_cast<char*>(const_cast<FrameHeader*>(&header)) + sent, sizeof(header) - sent};
        if (bytes > 0) iov[count++] = {const_cast<void*>(data), bytes};
      } else {
        iov[count++] = {static_cast<char*>(const_cast<void*>(data)) + (sent - sizeof(header)), total - sent};
      }
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = count;
      const ssize_t n = sendmsg(peer.fd.get(), &msg, MSG_NOSIGNAL);
      if (n > 0) {
        sent += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
        const int err = errno;
        pump(peer);  // an abort frame or EOF explains it better
        if (sent > 0) peer.out_partial = true;
        markDead(peer, "failed: " + net::errnoText(err));
        return failure();
      }
      if (deadline.expired()) {
        if (sent > 0) peer.out_partial = true;
        return timeout();
      }
      waitIo(deadline, p);  // reads every peer meanwhile: ranks sending to each other progress
      if (aborted_.load()) return abortedStatus();
      BRAID_RETURN_IF_ERROR(failure());
    }
    return Status::ok();
  }

  Status recvLocked(int p, int32_t tag, void* data, size_t bytes, Deadline deadline, const char* what) {
    Peer& peer = peers_[p];
    bool polled = false;
    while (true) {
      if (aborted_.load()) return abortedStatus();
      for (auto it = peer.frames.begin(); it != peer.frames.end(); ++it) {
        if (it->first != tag) continue;
        if (it->second.size() != bytes) {
          return invalidArgument(
              fmt::format("rank {}: bootstrap {} from rank {} (tag {}): {} bytes expected, {} arrived", rank_, what, p,
                          tag, bytes, it->second.size()));
        }
        if (bytes > 0) std::memcpy(data, it->second.data(), bytes);
        peer.frames.erase(it);
        return Status::ok();
      }
      BRAID_RETURN_IF_ERROR(failure());
      if (peer.state == Peer::kBye || (peer.eof && peer.state != Peer::kOpen)) {
        return Status(StatusCode::kRemoteError,
                      fmt::format("rank {}: bootstrap {} from {} (tag {}): that rank closed its bootstrap", rank_, what,
                                  describePeer(p), tag));
      }
      if (polled && deadline.expired()) {
        return Status(StatusCode::kTimeout,
                      fmt::format("rank {}: bootstrap {} from {} (tag {}, {} bytes) timed out after {} s", rank_, what,
                                  describePeer(p), tag, bytes, timeout_s_));
      }
      waitIo(deadline, -1, /*poll_now=*/!polled);
      polled = true;
    }
  }

  const int rank_;
  const int size_;
  const double timeout_s_;
  const uint64_t nonce_;  // the rendezvous' (FailureBoard)
  std::vector<std::string> hosts_;
  std::vector<int64_t> pids_;
  std::vector<Peer> peers_;  // by rank; peers_[rank_] has no socket
  std::mutex mutex_;         // every call but checkPeers' fast path and abort
  mutable std::mutex failure_mutex_;
  Status failure_;  // the first failure seen
  std::atomic<bool> aborted_{false};
  std::string abort_reason_;
};

Result<IdLayout> decodeId(const UniqueId& id) {
  IdLayout layout;
  std::memcpy(&layout, id.internal, sizeof(layout));
  if (std::memcmp(layout.magic, kIdMagic, sizeof(kIdMagic)) != 0) {
    return invalidArgument("not a Braid UniqueId (its magic is missing: was it made by createUniqueId()?)");
  }
  if (layout.port == 0) return invalidArgument("the UniqueId names port 0: no root listens there");
  return layout;
}

/// Reads one root reply (header and payload).
Status readReply(int fd, Deadline deadline, const std::string& what, RootReply* header, std::string* payload) {
  BRAID_RETURN_IF_ERROR(net::readAll(fd, header, sizeof(*header), deadline, what));
  if (header->magic != kWireMagic || header->bytes > (uint64_t{1} << 30)) {
    return Status(StatusCode::kSystemError, what + ": the root sent a malformed reply");
  }
  payload->assign(header->bytes, '\0');
  return net::readAll(fd, payload->data(), payload->size(), deadline, what);
}

/// `status` with the descriptor limit appended when it reports running out of file descriptors (EMFILE / ENFILE):
/// "(RLIMIT_NOFILE soft S, hard H; R ranks in this process of N need about D for the bootstrap alone): raise
/// `ulimit -n`" (not to a kRemoteError: that relays another rank's failure). `ranks_here`: this process' ranks (0:
/// unknown, then every rank is counted).
Status withDescriptorLimit(const Status& status, int ranks_here, int size) {
  const std::string& text = status.message();
  if (status.code() == StatusCode::kRemoteError) return status;  // another rank's failure, annotated there
  if (text.find(net::errnoText(EMFILE)) == std::string::npos && text.find(net::errnoText(ENFILE)) == std::string::npos)
    return status;
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  const auto show = [](rlim_t value) {
    return value == RLIM_INFINITY ? std::string("unlimited") : std::to_string(static_cast<uint64_t>(value));
  };
  const int here = ranks_here > 0 ? ranks_here : size;
  // Each rank holds a listening socket and one mesh connection to every other rank; the root accepts each rank
  // of the process once more while the rendezvous lasts.
  const int64_t need = static_cast<int64_t>(here) * (size + 1) + here;
  return Status(status.code(),
                fmt::format("{} (RLIMIT_NOFILE soft {}, hard {}; {} rank{} in this process of {} need about {} "
                            "descriptors for the bootstrap alone): raise `ulimit -n`",
                            text, show(limit.rlim_cur), show(limit.rlim_max), here, here == 1 ? "" : "s", size, need));
}

}  // namespace

namespace bootstrap_internal {

UniqueId makeId(SocketAddress address, uint64_t nonce) {
  UniqueId id;
  IdLayout layout{};
  std::memcpy(layout.magic, kIdMagic, sizeof(kIdMagic));
  layout.nonce = nonce;
  layout.ip = address.ip;
  layout.port = address.port;
  std::memcpy(id.internal, &layout, sizeof(layout));
  return id;
}

void reportCouldNotJoin(const UniqueId& id, int rank, const std::string& why) {
  Result<IdLayout> layout = decodeId(id);
  if (!layout.isOk()) return;
  const SocketAddress root{layout->ip, layout->port};
  const Deadline deadline = Deadline::after(kCouldNotJoinWaitS);
  Result<Fd> fd = net::connectTo(root, deadline, fmt::format("rank {}: bootstrap root", rank));
  if (!fd.isOk()) return;
  RootHello hello{};
  hello.magic = kWireMagic;
  hello.nonce = layout->nonce;
  hello.rank = rank;
  hello.size = kCouldNotJoin;
  hello.pid = getpid();
  copyHost(hello.host, why.size() < kHostBytes ? why : why.substr(0, kHostBytes - 4) + "...");
  (void)net::writeAll(fd->get(), &hello, sizeof(hello), deadline, "bootstrap root");
}

Result<UniqueId> startRoot(SocketAddress address, uint64_t nonce) {
  Result<double> timeout_s = runtimeTimeoutSeconds();
  if (!timeout_s.isOk()) return invalidArgument("bootstrap root: " + timeout_s.status().message());
  Result<Fd> listener = net::listenOn(&address);
  if (!listener.isOk()) {
    return Status(listener.status().code(), "bootstrap root: " + listener.status().message());
  }
  const UniqueId id = makeId(address, nonce);
  auto root = std::make_shared<Root>(std::move(listener).value(), nonce, address, *timeout_s);
  std::thread([root] { root->serve(); }).detach();
  return id;
}

}  // namespace bootstrap_internal

std::string uniqueIdToString(const UniqueId& id) {
  static const char kHex[] = "0123456789abcdef";
  std::string text;
  text.reserve(2 * sizeof(id.internal));
  for (const char c : id.internal) {
    const auto byte = static_cast<unsigned char>(c);
    text += kHex[byte >> 4];
    text += kHex[byte & 15];
  }
  return text;
}

Result<UniqueId> uniqueIdFromString(const std::string& text) {
  if (text.size() != 2 * sizeof(UniqueId::internal)) {
    return invalidArgument(fmt::format("UniqueId text has {} characters, expected {} hex digits", text.size(),
                                       2 * sizeof(UniqueId::internal)));
  }
  UniqueId id;
  const auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < sizeof(id.internal); ++i) {
    const int hi = digit(text[2 * i]);
    const int lo = digit(text[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      return invalidArgument(fmt::format("UniqueId text: character {} ('{}') is not a hex digit",
                                         hi < 0 ? 2 * i : 2 * i + 1, hi < 0 ? text[2 * i] : text[2 * i + 1]));
    }
    id.internal[i] = static_cast<char>(hi * 16 + lo);
  }
  BRAID_RETURN_IF_ERROR(decodeId(id).status());
  return id;
}

Result<UniqueId> createUniqueId(const std::string& address) {
  SocketAddress where;
  if (address.empty()) {
    BRAID_ASSIGN_OR_RETURN(where, net::localAddress());
  } else {
    BRAID_ASSIGN_OR_RETURN(where, net::parseSocketAddress(address, "createUniqueId address"));
  }
  return bootstrap_internal::startRoot(where, randomNonce());
}

namespace {

/// The rendezvous and the mesh of connectBootstrap() for a checked id and rank. `built` receives the bootstrap as
/// soon as the table is known (so that a failure can abort the connections made so far); `ranks_here` the number
/// of ranks in this process once the table is known; `root_fd` the connection to the root until the table arrived
/// (the caller closes it after posting a failure, so that the root's report of this rank reaches the ranks of this
/// process after the FailureBoard's). `interrupt` is polled while waiting for peers.
Status connectRanks(const IdLayout& layout, int rank, int size, double timeout_s, const std::string& my_host,
                    const std::function<Status()>& interrupt, std::unique_ptr<TcpBootstrap>* built, int* ranks_here,
                    Fd* root_fd) {
  const Deadline deadline = Deadline::after(timeout_s);
  const SocketAddress root{layout.ip, layout.port};

  // Listen first, so peers can connect as soon as the root publishes the table.
  SocketAddress mine;
  if (root.isLoopback()) {
    mine = SocketAddress{htonl(INADDR_LOOPBACK), 0};
  } else {
    BRAID_ASSIGN_OR_RETURN(mine, net::localAddress());
  }
  Result<Fd> listener = net::listenOn(&mine);
  if (!listener.isOk())
    return Status(listener.status().code(), fmt::format("rank {}: bootstrap: {}", rank, listener.status().message()));

  const std::string what = fmt::format("rank {}: bootstrap root {}", rank, root.toString());
  BRAID_ASSIGN_OR_RETURN(*root_fd,
                         net::connectTo(root, deadline, fmt::format("rank {}: bootstrap root", rank), interrupt));
  RootHello hello{};
  hello.magic = kWireMagic;
  hello.nonce = layout.nonce;
  hello.rank = rank;
  hello.size = size;
  hello.pid = getpid();
  hello.ip = mine.ip;
  hello.port = mine.port;
  hello.timeout_s = timeout_s;
  copyHost(hello.host, my_host);
  BRAID_RETURN_IF_ERROR(net::writeAll(root_fd->get(), &hello, sizeof(hello), deadline, what));

  // Wait for the table, watching for a rank of this process that failed meanwhile.
  while (!deadline.expired()) {
    pollfd ready{root_fd->get(), POLLIN, 0};
    if (poll(&ready, 1, std::min(deadline.remainingMs(), net::kInterruptPollMs)) > 0) break;
    BRAID_RETURN_IF_ERROR(interrupt());
  }
  RootReply reply{};
  std::string payload;
  Status got = readReply(root_fd->get(), deadline, what, &reply, &payload);
  if (got.code() == StatusCode::kTimeout) {
    // Ask the root who is missing; the table may also arrive right now.
    const uint32_t query = kQueryWord;
    const Deadline grace = Deadline::after(1.0);
    if (net::writeAll(root_fd->get(), &query, sizeof(query), grace, what).isOk()) {
      got = readReply(root_fd->get(), grace, what, &reply, &payload);
    }
    if (!got.isOk()) {
      return Status(StatusCode::kTimeout,
                    fmt::format("{}: rendezvous of {} ranks timed out after {} s (the root did not say which ranks are "
                                "missing)",
                                what, size, timeout_s));
    }
    if (reply.kind == kReplyStatus) {
      return Status(StatusCode::kTimeout,
                    fmt::format("{}: rendezvous of {} ranks timed out after {} s: {}", what, size, timeout_s, payload));
    }
  }
  BRAID_RETURN_IF_ERROR(got);
  if (reply.kind == kReplyError) {
    return Status(static_cast<StatusCode>(reply.code), fmt::format("{} refused the rendezvous: {}", what, payload));
  }
  if (reply.kind == kReplyRankFailed) {
    return Status(StatusCode::kRemoteError, fmt::format("rank {}: bootstrap: {}", rank, payload));
  }
  if (reply.kind != kReplyTable || payload.size() != static_cast<size_t>(size) * sizeof(RankEntry)) {
    return Status(StatusCode::kSystemError, what + ": the root sent a malformed table");
  }
  root_fd->reset();

  std::vector<TcpBootstrap::PeerInfo> info(size);
  for (int r = 0; r < size; ++r) {
    RankEntry entry;
    std::memcpy(&entry, payload.data() + r * sizeof(RankEntry), sizeof(entry));
    info[r] = TcpBootstrap::PeerInfo{hostText(entry.host), entry.pid, SocketAddress{entry.ip, entry.port}};
  }
  *built = std::make_unique<TcpBootstrap>(rank, size, timeout_s, layout.nonce, info);
  TcpBootstrap* bootstrap = built->get();
  *ranks_here = 0;
  for (const auto& peer : info) *ranks_here += peer.pid == getpid() && peer.host == my_host ? 1 : 0;

  // Mesh: connect to every lower rank, accept every higher one.
  const MeshHello mine_hello{kWireMagic, layout.nonce, rank, size};
  for (int peer = 0; peer < rank; ++peer) {
    const std::string to = fmt::format("rank {}: bootstrap connection to rank {} (host {}, pid {})", rank, peer,
                                       info[peer].host, info[peer].pid);
    BRAID_ASSIGN_OR_RETURN(Fd fd, net::connectTo(info[peer].address, deadline, to, interrupt));
    BRAID_RETURN_IF_ERROR(net::writeAll(fd.get(), &mine_hello, sizeof(mine_hello), deadline, to));
    bootstrap->setPeer(peer, std::move(fd));
  }
  std::vector<bool> connected(size, false);
  const std::string from = fmt::format("rank {}: bootstrap mesh at {}", rank, mine.toString());
  const auto take = [&](const void* hello, Fd& fd) {
    MeshHello peer_hello;
    std::memcpy(&peer_hello, hello, sizeof(peer_hello));
    if (peer_hello.magic != kWireMagic || peer_hello.nonce != layout.nonce || peer_hello.size != size ||
        peer_hello.rank <= rank || peer_hello.rank >= size || connected[peer_hello.rank]) {
      return false;  // a stray connection: not a peer of this rendezvous
    }
    connected[peer_hello.rank] = true;
    bootstrap->setPeer(peer_hello.rank, std::move(fd));
    return true;
  };
  const auto never_connected = [&] {
    std::vector<int> absent;
    std::string where;
    for (int r = rank + 1; r < size; ++r) {
      if (connected[r]) continue;
      absent.push_back(r);
      if (absent.size() <= 4) {
        where += fmt::format("{}rank {}: host {} pid {} at {}", absent.size() > 1 ? "; " : "", r, info[r].host,
                             info[r].pid, info[r].address.toString());
      }
    }
    return Status(StatusCode::kTimeout, fmt::format("{}: timed out after {} s: rank{} {} never connected ({})", from,
                                                    timeout_s, absent.size() == 1 ? "" : "s", rankList(absent), where));
  };
  return net::acceptMesh(listener->get(), deadline, from, size - 1 - rank, sizeof(MeshHello), take, never_connected,
                         interrupt);
}

}  // namespace

Result<std::unique_ptr<Bootstrap>> connectBootstrap(const UniqueId& id, int rank, int size,
                                                    const BootstrapOptions& options) {
  Result<IdLayout> decoded = decodeId(id);
  if (!decoded.isOk())
    return invalidArgument(fmt::format("rank {}: connectBootstrap: {}", rank, decoded.status().message()));
  const IdLayout layout = *decoded;
  // A rank whose own settings are refused tells the root, which fails the rendezvous for every rank at once.
  const auto could_not_join = [&](Status why) {
    bootstrap_internal::reportCouldNotJoin(id, rank, why.message());
    return why;
  };
  if (size < 1 || rank < 0 || rank >= size) {
    return could_not_join(
        invalidArgument(fmt::format("connectBootstrap: rank {} of {} ranks is out of range", rank, size)));
  }
  Result<double> resolved = resolveTimeoutSeconds(options.timeout_s);
  if (!resolved.isOk()) {
    return could_not_join(invalidArgument(fmt::format("rank {}: bootstrap: {}", rank, resolved.status().message())));
  }
  const double timeout_s = *resolved;
  Result<std::string> host = resolveHostName(options, rank);
  if (!host.isOk()) return could_not_join(host.status());
  const std::string my_host = *host;
  const uint64_t nonce = layout.nonce;
  std::unique_ptr<TcpBootstrap> bootstrap;
  // A failure of another rank: posted by a rank of this process, or an abort / a closed connection of a peer
  // connected so far. Either ends this rank's wait at once.
  const auto interrupt = [&]() -> Status {
    BRAID_RETURN_IF_ERROR(failureBoard().check(nonce, rank));
    return bootstrap ? bootstrap->checkPeers() : Status::ok();
  };
  int ranks_here = 0;
  Fd root_fd;  // closed after a failure was posted (connectRanks)
  Status status = connectRanks(layout, rank, size, timeout_s, my_host, interrupt, &bootstrap, &ranks_here, &root_fd);
  if (status.isOk()) return std::unique_ptr<Bootstrap>(std::move(bootstrap));
  // A rank of this process that failed first posted why before it closed its connections: that explains this
  // rank's failure (a connection closed under it) better than the closed connection does.
  if (Status posted = failureBoard().check(nonce, rank); !posted.isOk()) status = posted;
  // This rank cannot join: tell every rank it can reach (the same process through the board, the others through
  // abort frames on the connections made so far; a rank that learns of it here tells its own peers in turn).
  status = withDescriptorLimit(status, ranks_here, size);
  failureBoard().post(nonce, rank, status.message());
  if (bootstrap) bootstrap->abort(status.message());
  return status;
}

}  // namespace braid
