#include "net/connect.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <unordered_set>

#include "common/plugin_log.h"

namespace braid::nccl_plugin {
namespace {

// The sender's state between connect() calls (its pointer lives in the sender's copy of the handle).
struct Connector {
  ConnectHandle handle;
  net::SocketAddress address;
  net::Deadline deadline = net::Deadline::after(0);
  uint64_t conn_id = 0;
  ConnectionOptions options;  // the local ones, with the listener's thread count
  struct Socket {
    net::Fd fd;
    enum class Stage { kConnecting, kHello, kDone } stage = Stage::kConnecting;
    Hello hello;
    size_t written = 0;
  };
  std::vector<Socket> sockets;
};

// Connectors in progress. A handle's state bytes are trusted only when they name one of these: a handle that did
// not come from this process's earlier connect() (garbage, another Braid version's layout) starts afresh, and its
// magic is checked before anything else is read from it.
std::mutex g_connectors_mu;
std::unordered_set<const Connector*> g_connectors;

Connector* stateOf(void* handle) {
  Connector* c;
  std::memcpy(&c, static_cast<char*>(handle) + kConnectStateOffset, sizeof(c));
  if (c == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(g_connectors_mu);
  return g_connectors.count(c) != 0 ? c : nullptr;
}

void setState(void* handle, Connector* c, Connector* previous) {
  std::memcpy(static_cast<char*>(handle) + kConnectStateOffset, &c, sizeof(c));
  std::lock_guard<std::mutex> lock(g_connectors_mu);
  if (previous != nullptr) g_connectors.erase(previous);
  if (c != nullptr) g_connectors.insert(c);
}

Status startConnect(const net::SocketAddress& address, Connector::Socket* s) {
  s->fd = net::Fd(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s->fd.valid()) return Status(StatusCode::kSystemError, "NET/Braid: socket: " + net::errnoText(errno));
  net::setNoDelay(s->fd.get());
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = address.ip;
  sa.sin_port = htons(address.port);
  if (connect(s->fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 && errno != EINPROGRESS) {
    if (errno == ECONNREFUSED || errno == EAGAIN) {
      s->fd.reset();  // retried at the next step
      return Status::ok();
    }
    return Status(StatusCode::kSystemError,
                  "NET/Braid: connect to " + address.toString() + ": " + net::errnoText(errno));
  }
  s->stage = Connector::Socket::Stage::kConnecting;
  return Status::ok();
}

// Advances one socket; Status error on a hard failure.
Status stepSocket(Connector* c, Connector::Socket* s) {
  using Stage = Connector::Socket::Stage;
  if (s->stage == Stage::kConnecting) {
    if (!s->fd.valid()) return startConnect(c->address, s);
    pollfd p{s->fd.get(), POLLOUT, 0};
    if (poll(&p, 1, 0) <= 0) return Status::ok();
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(s->fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err == ECONNREFUSED || err == ETIMEDOUT || err == EAGAIN) {
      s->fd.reset();
      return Status::ok();
    }
    if (err != 0) {
      return Status(StatusCode::kSystemError,
                    "NET/Braid: connect to " + c->address.toString() + ": " + net::errnoText(err));
    }
    s->stage = Stage::kHello;
  }
  if (s->stage == Stage::kHello) {
    const char* bytes = reinterpret_cast<const char*>(&s->hello);
    while (s->written < sizeof(s->hello)) {
      const ssize_t got = send(s->fd.get(), bytes + s->written, sizeof(s->hello) - s->written, MSG_NOSIGNAL);
      if (got > 0) {
        s->written += static_cast<size_t>(got);
        continue;
      }
      if (got < 0 && (errno == EINTR)) continue;
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Status::ok();
      return Status(StatusCode::kSystemError,
                    "NET/Braid: hello to " + c->address.toString() + ": " + net::errnoText(got < 0 ? errno : EPIPE));
    }
    s->stage = Stage::kDone;
  }
  return Status::ok();
}

// Reads what arrived of one socket's hello; false when the socket is to be dropped.
bool readHello(ListenComm::Arrival* a) {
  char* bytes = reinterpret_cast<char*>(&a->hello);
  while (a->have < sizeof(a->hello)) {
    const ssize_t got = recv(a->fd.get(), bytes + a->have, sizeof(a->hello) - a->have, 0);
    if (got > 0) {
      a->have += static_cast<size_t>(got);
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;  // EOF or error: a connector that gave up
  }
  return true;
}

std::string peerOf(int fd) {
  sockaddr_in sa{};
  socklen_t len = sizeof(sa);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) return "unknown peer";
  return net::SocketAddress{sa.sin_addr.s_addr, ntohs(sa.sin_port)}.toString();
}

}  // namespace

Result<std::unique_ptr<ListenComm>> listenOn(int dev, const ConnectionOptions& options, void* handle) {
  BRAID_ASSIGN_OR_RETURN(const std::vector<NetDevice>* devices, netDevices());
  if (dev < 0 || dev >= static_cast<int>(devices->size())) {
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("listen: device {} out of range ({} devices)", dev, devices->size()));
  }
  if (handle == nullptr) return Status(StatusCode::kInvalidArgument, "listen: handle is NULL");
  net::SocketAddress address{(*devices)[dev].ip, 0};
  BRAID_ASSIGN_OR_RETURN(net::Fd fd, net::listenOn(&address));
  auto listen = std::make_unique<ListenComm>();
  const bool ucx = options.transport == NetTransport::kUcx;
  listen->fd = std::move(fd);
  listen->options = options;
  listen->handle.ip = address.ip;
  listen->handle.port = address.port;
  listen->handle.nsocks = ucx ? 0 : static_cast<uint16_t>(options.nsocks);
  listen->handle.nthreads = ucx ? 0 : static_cast<uint16_t>(options.nthreads);
  listen->handle.nonce = randomU64();
  listen->handle.transport = options.transport;
  encodeHandle(listen->handle, handle);
  BRAID_PLUGIN_LOG(kLogTrace, kSubsysNet, "NET/Braid: listening on {} (device {}, {}, {} data sockets, {} threads)",
                   address.toString(), dev, transportName(options.transport), listen->handle.nsocks,
                   listen->handle.nthreads);
  return listen;
}

Result<std::unique_ptr<SendComm>> connectStep(void* handle, const ConnectionOptions& options) {
  if (handle == nullptr) return Status(StatusCode::kInvalidArgument, "connect: handle is NULL");
  Connector* c = stateOf(handle);
  if (c == nullptr) {
    BRAID_ASSIGN_OR_RETURN(ConnectHandle decoded, decodeHandle(handle));
    if (decoded.transport != options.transport) {
      return Status(StatusCode::kInvalidUsage,
                    fmt::format("NET/Braid: connect to {}: the listener moves data over {} but this process has "
                                "BRAID_NET_TRANSPORT={}: set the same value on every rank",
                                net::SocketAddress{decoded.ip, decoded.port}.toString(),
                                transportName(decoded.transport), transportName(options.transport)));
    }
    auto fresh = std::make_unique<Connector>();
    fresh->handle = decoded;
    fresh->address = net::SocketAddress{decoded.ip, decoded.port};
    fresh->deadline = net::Deadline::after(options.timeout_s);
    fresh->conn_id = randomU64();
    fresh->options = options;
    fresh->options.nthreads = decoded.nthreads;
    fresh->sockets.resize(1 + decoded.nsocks);
    for (size_t i = 0; i < fresh->sockets.size(); ++i) {
      Hello& h = fresh->sockets[i].hello;
      h.index = static_cast<uint32_t>(i);
      h.nonce = decoded.nonce;
      h.conn_id = fresh->conn_id;
      h.nsocks = decoded.nsocks;
    }
    c = fresh.release();
    setState(handle, c, nullptr);
  }
  std::unique_ptr<Connector> owned(c);  // released again below while in progress
  bool all_done = true;
  for (Connector::Socket& s : c->sockets) {
    Status st = stepSocket(c, &s);
    if (!st.isOk()) {
      setState(handle, nullptr, c);
      return st;
    }
    all_done = all_done && s.stage == Connector::Socket::Stage::kDone;
  }
  if (!all_done) {
    if (c->deadline.expired()) {
      setState(handle, nullptr, c);
      return Status(StatusCode::kSystemError,
                    fmt::format("NET/Braid: connect to {}: not connected after {:g} s (BRAID_TIMEOUT)",
                                c->address.toString(), c->options.timeout_s));
    }
    owned.release();
    return std::unique_ptr<SendComm>();
  }
  setState(handle, nullptr, c);
  std::vector<net::Fd> fds;
  for (Connector::Socket& s : c->sockets) fds.push_back(std::move(s.fd));
  return makeSendComm(std::move(fds), c->options.dataPath(), c->address.toString());
}

Result<std::unique_ptr<RecvComm>> acceptStep(ListenComm* listen) {
  for (;;) {
    const int fd = accept4(listen->fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return Status(StatusCode::kSystemError, "NET/Braid: accept: " + net::errnoText(errno));
    }
    net::setNoDelay(fd);
    listen->arrivals.push_back(ListenComm::Arrival{net::Fd(fd), Hello{}, 0});
  }
  const uint32_t nsocks = listen->handle.nsocks;
  for (size_t i = 0; i < listen->arrivals.size();) {
    ListenComm::Arrival& a = listen->arrivals[i];
    const bool keep = readHello(&a);
    if (keep && a.have < sizeof(a.hello)) {
      ++i;
      continue;
    }
    const Hello& h = a.hello;
    if (keep && h.magic == kHandleMagic && h.nonce == listen->handle.nonce && h.nsocks == nsocks && h.index <= nsocks) {
      ListenComm::Group& g = listen->groups[h.conn_id];
      if (g.fds.empty()) g.fds.resize(1 + nsocks);
      if (!g.fds[h.index].valid()) {
        if (h.index == 0) g.peer = peerOf(a.fd.get());
        g.fds[h.index] = std::move(a.fd);
        ++g.count;
      }
    } else if (keep) {
      BRAID_PLUGIN_LOG(kLogWarn, kSubsysNet, "NET/Braid: dropped a connection to {} with a foreign hello",
                       net::SocketAddress{listen->handle.ip, listen->handle.port}.toString());
    }
    listen->arrivals.erase(listen->arrivals.begin() + static_cast<std::ptrdiff_t>(i));
  }
  for (auto it = listen->groups.begin(); it != listen->groups.end(); ++it) {
    if (it->second.count != static_cast<int>(nsocks) + 1) continue;
    std::vector<net::Fd> fds = std::move(it->second.fds);
    std::string peer = it->second.peer;
    listen->groups.erase(it);
    return makeRecvComm(std::move(fds), listen->options.dataPath(), std::move(peer));
  }
  return std::unique_ptr<RecvComm>();
}

}  // namespace braid::nccl_plugin
