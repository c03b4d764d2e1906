// TCP socket helpers shared by the bootstrap (runtime/bootstrap/) and the TCP transport
// (runtime/transport/tcp/): IPv4 addresses, the local address choice (BRAID_SOCKET_IFNAME), listening,
// connecting with retries, and reads/writes bounded by a deadline. Every socket is non-blocking and
// close-on-exec; waits use poll(2), never a busy loop.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "braid/status.h"

namespace braid::net {

using Clock = std::chrono::steady_clock;

/// A point in time every wait of one operation is bounded by.
class Deadline {
 public:
  /// `seconds` from now (<= 0 or NaN: already expired; at most kMaxTimeoutSeconds, common/env.h).
  static Deadline after(double seconds);
  bool expired() const { return Clock::now() >= at_; }
  /// Milliseconds left for poll(2): 0 when expired, rounded up, at most INT32_MAX.
  int remainingMs() const;
  Clock::time_point at() const { return at_; }

 private:
  Clock::time_point at_;
};

/// An IPv4 socket address. `ip` in network byte order, `port` in host byte order.
struct SocketAddress {
  uint32_t ip = 0;
  uint16_t port = 0;
  /// "a.b.c.d:port".
  std::string toString() const;
  bool isLoopback() const;
};

/// "host:port" or "host" (port 0): a dotted quad or a host name resolved to its first IPv4 address.
/// Errors: kInvalidArgument naming the text (`what` says where it came from, e.g. "BRAID_ROOT").
Result<SocketAddress> parseSocketAddress(const std::string& text, const std::string& what);

/// The address this host listens on (port 0): the first IPv4 address of the interface BRAID_SOCKET_IFNAME
/// names (exact name, else the first interface whose name starts with it); without it, the address of this
/// host's name when a socket can bind to it; else 127.0.0.1. Errors: kInvalidArgument when
/// BRAID_SOCKET_IFNAME names no interface with an IPv4 address (the message lists the interfaces found).
Result<SocketAddress> localAddress();

/// An owned file descriptor (closed on destruction).
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  void reset();

 private:
  int fd_ = -1;
};

/// strerror(err) (thread-safe).
std::string errnoText(int err);

/// A listening socket bound to `address` (port 0: any free port); `address->port` receives the port.
/// Errors: kSystemError naming the address.
Result<Fd> listenOn(SocketAddress* address);

/// Connects to `address`, retrying refused/unreachable attempts (the listener may not be up yet) with
/// backoff until `deadline`. TCP_NODELAY is set. Errors: kTimeout / kSystemError "<what> at <address>: ...".
/// `interrupt` (optional) is called before each retry; a non-ok status it returns ends the wait and is returned.
Result<Fd> connectTo(const SocketAddress& address, Deadline deadline, const std::string& what,
                     const std::function<Status()>& interrupt = {});

/// Accepts one connection (nullopt-like invalid Fd never returned: kTimeout at the deadline). TCP_NODELAY is
/// set on the accepted socket. `interrupt` (optional) is called at least every kInterruptPollMs while waiting; a
/// non-ok status it returns ends the wait and is returned.
Result<Fd> acceptOne(int listen_fd, Deadline deadline, const std::string& what,
                     const std::function<Status()>& interrupt = {});
/// How often acceptOne() calls its `interrupt` while nothing arrives, ms.
inline constexpr int kInterruptPollMs = 20;

/// Writes / reads exactly `bytes`, waiting with poll(2) until `deadline`. Errors: kTimeout, kRemoteError on
/// EOF or a reset connection, kSystemError otherwise; every message starts with `what`.
Status writeAll(int fd, const void* data, size_t bytes, Deadline deadline, const std::string& what);
Status readAll(int fd, void* data, size_t bytes, Deadline deadline, const std::string& what);

/// The accepting half of a full mesh (each rank connects to every lower rank and accepts every higher one):
/// accepts on `listen_fd` until `take` kept `expected` connections. Each connecting peer first writes a hello of
/// `hello_bytes`; take(hello, fd) moves `fd` away and returns true for a peer it expects, false for a stray
/// connection (then closed and ignored; so is one whose hello does not arrive). Errors: at the deadline,
/// on_timeout() (which names the peers that never connected); acceptOne's other errors (`interrupt`'s included)
/// as they are.
Status acceptMesh(int listen_fd, Deadline deadline, const std::string& what, int expected, size_t hello_bytes,
                  const std::function<bool(const void* hello, Fd& fd)>& take, const std::function<Status()>& on_timeout,
                  const std::function<Status()>& interrupt = {});
void setNonBlocking(int fd);
void setNoDelay(int fd);
/// Shortest retransmission timeout of a control connection, µs (the kernel rounds it up to its timer tick).
inline constexpr int kControlRtoMinUs = 5000;
/// For a connection that carries only small control frames (a thin stream: too few packets in flight for
/// duplicate acknowledgements to repair a loss, so every lost frame waits for a retransmission timeout): the
/// timeout floor lowered from Linux's 200 ms to kControlRtoMinUs (TCP_RTO_MIN_US, Linux 6.15+) and linear instead
/// of exponential backoff for thin streams (TCP_THIN_LINEAR_TIMEOUTS). Best effort: a kernel without an option
/// keeps its default; returns whether the timeout floor was lowered.
bool setThinStream(int fd);

}  // namespace braid::net
