#include "socket/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <thread>
#include <vector>

#include "common/env.h"

namespace braid::net {

Deadline Deadline::after(double seconds) {
  Deadline d;
  d.at_ = Clock::now() + timeoutDuration(seconds);
  return d;
}

int Deadline::remainingMs() const {
  const auto left = at_ - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(left + std::chrono::microseconds(999)).count();
  return static_cast<int>(std::min<long long>(ms, INT_MAX));
}

std::string SocketAddress::toString() const {
  char text[INET_ADDRSTRLEN] = {};
  in_addr addr{};
  addr.s_addr = ip;
  inet_ntop(AF_INET, &addr, text, sizeof(text));
  return fmt::format("{}:{}", text, port);
}

bool SocketAddress::isLoopback() const { return (ntohl(ip) >> 24) == 127; }

namespace {

sockaddr_in toSockaddr(const SocketAddress& address) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = address.ip;
  sa.sin_port = htons(address.port);
  return sa;
}

bool canBind(uint32_t ip) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const sockaddr_in sa = toSockaddr(SocketAddress{ip, 0});
  const bool ok = bind(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) == 0;
  close(fd);
  return ok;
}

}  // namespace

std::string errnoText(int err) {
  char buffer[256] = {};
  // GNU strerror_r returns the message (which may or may not be `buffer`).
  return strerror_r(err, buffer, sizeof(buffer));
}

Result<SocketAddress> parseSocketAddress(const std::string& text, const std::string& what) {
  std::string host = text;
  uint16_t port = 0;
  const size_t colon = text.rfind(':');
  if (colon != std::string::npos) {
    host = text.substr(0, colon);
    const std::string port_text = text.substr(colon + 1);
    char* end = nullptr;
    errno = 0;
    const long value = std::strtol(port_text.c_str(), &end, 10);
    if (port_text.empty() || *end != '\0' || errno != 0 || value < 0 || value > 65535) {
      return invalidArgument(fmt::format("{}={}: port '{}' is not a number in 0..65535", what, text, port_text));
    }
    port = static_cast<uint16_t>(value);
  }
  if (host.empty()) return invalidArgument(fmt::format("{}={}: no host (expected host:port)", what, text));
  in_addr addr{};
  if (inet_pton(AF_INET, host.c_str(), &addr) == 1) return SocketAddress{addr.s_addr, port};
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr) {
    return invalidArgument(fmt::format("{}={}: host '{}' has no IPv4 address ({})", what, text, host,
                                       rc != 0 ? gai_strerror(rc) : "none"));
  }
  const uint32_t ip = reinterpret_cast<const sockaddr_in*>(found->ai_addr)->sin_addr.s_addr;
  freeaddrinfo(found);
  return SocketAddress{ip, port};
}

Result<SocketAddress> localAddress() {
  const std::string ifname = envString("BRAID_SOCKET_IFNAME");
  if (!ifname.empty()) {
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) {
      return Status(StatusCode::kSystemError, "BRAID_SOCKET_IFNAME=" + ifname + ": getifaddrs: " + errnoText(errno));
    }
    std::vector<std::pair<std::string, uint32_t>> candidates;
    std::string names;
    for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
      if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
      const uint32_t ip = reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr;
      candidates.emplace_back(a->ifa_name, ip);
      names += (names.empty() ? "" : ", ") + std::string(a->ifa_name);
    }
    freeifaddrs(list);
    for (const auto& [name, ip] : candidates)
      if (name == ifname) return SocketAddress{ip, 0};
    for (const auto& [name, ip] : candidates)
      if (name.rfind(ifname, 0) == 0) return SocketAddress{ip, 0};
    return invalidArgument(fmt::format("BRAID_SOCKET_IFNAME={}: no interface of that name has an IPv4 address ({})",
                                       ifname, names.empty() ? "no IPv4 interfaces" : "found: " + names));
  }
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) {
    Result<SocketAddress> resolved = parseSocketAddress(host, "host name");
    if (resolved.isOk() && canBind(resolved->ip)) return SocketAddress{resolved->ip, 0};
  }
  return SocketAddress{htonl(INADDR_LOOPBACK), 0};
}

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.release();
  }
  return *this;
}

int Fd::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void Fd::reset() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

void setNonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

void setNoDelay(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

bool setThinStream(int fd) {
  // Linux's values (include/uapi/linux/tcp.h), for C libraries whose headers predate them.
  constexpr int kTcpThinLinearTimeouts = 16;
  constexpr int kTcpRtoMinUs = 45;
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, kTcpThinLinearTimeouts, &one, sizeof(one));
  const int rto_min = kControlRtoMinUs;
  return setsockopt(fd, IPPROTO_TCP, kTcpRtoMinUs, &rto_min, sizeof(rto_min)) == 0;
}

Result<Fd> listenOn(SocketAddress* address) {
  Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Status(StatusCode::kSystemError, "socket: " + errnoText(errno));
  const int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const sockaddr_in sa = toSockaddr(*address);
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) != 0) {
    return Status(StatusCode::kSystemError,
                  fmt::format("cannot listen on {}: bind: {}", address->toString(), errnoText(errno)));
  }
  if (listen(fd.get(), SOMAXCONN) != 0) {
    return Status(StatusCode::kSystemError,
                  fmt::format("cannot listen on {}: {}", address->toString(), errnoText(errno)));
  }
  sockaddr_in bound{};
  socklen_t length = sizeof(bound);
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &length);
  address->port = ntohs(bound.sin_port);
  return fd;
}

Result<Fd> connectTo(const SocketAddress& address, Deadline deadline, const std::string& what,
                     const std::function<Status()>& interrupt) {
  int backoff_ms = 5;
  std::string last_error = "no attempt";
  do {
    Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return Status(StatusCode::kSystemError, fmt::format("{}: socket: {}", what, errnoText(errno)));
    const sockaddr_in sa = toSockaddr(address);
    int err = 0;
    if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        pollfd p{fd.get(), POLLOUT, 0};
        int rc;
        do {
          rc = poll(&p, 1, deadline.remainingMs());
        } while (rc < 0 && errno == EINTR);
        if (rc == 0) {
          err = ETIMEDOUT;
        } else {
          socklen_t length = sizeof(err);
          getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &length);
        }
      }
    }
    if (err == 0) {
      setNoDelay(fd.get());
      return fd;
    }
    last_error = errnoText(err);
    const bool retry = err == ECONNREFUSED || err == ETIMEDOUT || err == ENETUNREACH || err == EHOSTUNREACH ||
                       err == ECONNRESET || err == EAGAIN || err == ECONNABORTED;
    if (!retry) {
      return Status(StatusCode::kSystemError,
                    fmt::format("{} at {}: connect: {}", what, address.toString(), last_error));
    }
    if (interrupt) BRAID_RETURN_IF_ERROR(interrupt());
    const int sleep_ms = std::min(backoff_ms, deadline.remainingMs());
    if (sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    backoff_ms = std::min(backoff_ms * 2, 100);
  } while (!deadline.expired());
  return Status(StatusCode::kTimeout, fmt::format("{} at {}: no connection before the timeout (last attempt: {})", what,
                                                  address.toString(), last_error));
}

Result<Fd> acceptOne(int listen_fd, Deadline deadline, const std::string& what,
                     const std::function<Status()>& interrupt) {
  while (true) {
    const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      setNoDelay(fd);
      return Fd(fd);
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
      return Status(StatusCode::kSystemError, fmt::format("{}: accept: {}", what, errnoText(errno)));
    }
    if (interrupt) BRAID_RETURN_IF_ERROR(interrupt());
    if (deadline.expired()) return Status(StatusCode::kTimeout, what + ": no connection before the timeout");
    pollfd p{listen_fd, POLLIN, 0};
    poll(&p, 1, interrupt ? std::min(deadline.remainingMs(), kInterruptPollMs) : deadline.remainingMs());
  }
}

Status writeAll(int fd, const void* data, size_t bytes, Deadline deadline, const std::string& what) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = send(fd, p, bytes, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      const int err = errno;
      const StatusCode code = (err == EPIPE || err == ECONNRESET) ? StatusCode::kRemoteError : StatusCode::kSystemError;
      return Status(code, fmt::format("{}: send: {}", what, errnoText(err)));
    }
    if (deadline.expired()) return Status(StatusCode::kTimeout, what + ": send timed out");
    pollfd pf{fd, POLLOUT, 0};
    poll(&pf, 1, deadline.remainingMs());
  }
  return Status::ok();
}

Status readAll(int fd, void* data, size_t bytes, Deadline deadline, const std::string& what) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = recv(fd, p, bytes, 0);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return Status(StatusCode::kRemoteError, what + ": connection closed by the peer");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      const int err = errno;
      const StatusCode code = err == ECONNRESET ? StatusCode::kRemoteError : StatusCode::kSystemError;
      return Status(code, fmt::format("{}: recv: {}", what, errnoText(err)));
    }
    if (deadline.expired()) return Status(StatusCode::kTimeout, what + ": receive timed out");
    pollfd pf{fd, POLLIN, 0};
    poll(&pf, 1, deadline.remainingMs());
  }
  return Status::ok();
}

Status acceptMesh(int listen_fd, Deadline deadline, const std::string& what, int expected, size_t hello_bytes,
                  const std::function<bool(const void* hello, Fd& fd)>& take, const std::function<Status()>& on_timeout,
                  const std::function<Status()>& interrupt) {
  std::vector<uint8_t> hello(hello_bytes);
  for (int waiting = expected; waiting > 0;) {
    Result<Fd> accepted = acceptOne(listen_fd, deadline, what, interrupt);
    if (!accepted.isOk()) return accepted.status().code() == StatusCode::kTimeout ? on_timeout() : accepted.status();
    Fd fd = std::move(accepted).value();
    if (!readAll(fd.get(), hello.data(), hello_bytes, deadline, what).isOk()) continue;
    if (take(hello.data(), fd)) --waiting;
  }
  return Status::ok();
}

}  // namespace braid::net
