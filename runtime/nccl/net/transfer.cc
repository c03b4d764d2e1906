// The comms of the net plugin (net/comm.h): the control stream, matching, isend / irecv / iflush / test, close.
// One piece of code for both data paths (net/tcp_path.h, net/ucx_path.h).
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "common/plugin_log.h"
#include "net/admission.h"
#include "net/comm.h"
#include "net/tcp_path.h"
#include "net/ucx_path.h"

namespace braid::nccl_plugin {
namespace {

Status socketError(const std::string& what, int err) {
  return Status(StatusCode::kSystemError, what + ": " + net::errnoText(err));
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// DataPath: the failure state both paths share

DataPath::DataPath(bool sending, double idle_timeout_s) : sending_(sending), idle_timeout_s_(idle_timeout_s) {
  touch();
}

Status DataPath::connectTo(const std::string&) {
  return Status(StatusCode::kInternalError, "NET/Braid: an address record on a connection whose data path takes none");
}

int64_t DataPath::nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void DataPath::fail(StatusCode code, const std::string& reason) {
  std::lock_guard<std::mutex> lock(failure_mutex_);
  if (failed_.load()) return;
  failure_ = Status(code, reason);
  failed_.store(true, std::memory_order_release);
}

Status DataPath::failure() const {
  std::lock_guard<std::mutex> lock(failure_mutex_);
  return failure_;
}

bool DataPath::checkStalled(const std::string& what) {
  if (failed()) return true;
  const double idle_s = static_cast<double>(nowNs() - last_progress_ns_.load(std::memory_order_relaxed)) * 1e-9;
  if (idle_timeout_s_ > 0 && idle_s > idle_timeout_s_) {
    fail(StatusCode::kSystemError,
         fmt::format("NET/Braid: {}: no byte moved for {:.1f} s (BRAID_NET_IDLE_TIMEOUT={:g}): "
                     "the peer stopped or the network is down",
                     what, idle_s, idle_timeout_s_));
  }
  return failed();
}

// ---------------------------------------------------------------------------------------------------------------
// Comms

Request* CommBase::allocate(Request::Type type) {
  for (Request& r : requests) {
    if (r.used) continue;
    r.kind = ObjectKind::kRequest;
    r.comm = this;
    r.type = type;
    r.used = true;
    r.n = 0;
    r.assigned_count = 0;
    r.header_end = 0;
    r.pending.store(0);
    for (int i = 0; i < kNetMaxRecvs; ++i) {
      r.data[i] = nullptr;
      r.capacity[i] = r.sizes[i] = 0;
      r.tags[i] = 0;
      r.assigned[i] = false;
    }
    return &r;
  }
  return nullptr;
}

namespace {
constexpr int kKeepIdleS = 10;
constexpr int kKeepIntervalS = 5;
constexpr int kKeepCount = 6;
}  // namespace

// Every socket of a comm gets it, with BRAID_TIMEOUT: a peer that is only slow, or whose flow sits in
// retransmission back-off, is waited for as NCCL's own socket transport waits, and a vanished host fails the comm
// after BRAID_TIMEOUT. A count of probes alone (TCP_KEEPCNT: 6 probes, about 40 s) is not enough: in an incast that
// keeps a downlink's buffer full, probes and their answers are dropped like data, and connections of live peers
// timed out that way (perf/netns, 8 hosts, 16 MiB per peer at 20 Mbit/s). With SO_KEEPALIVE, TCP_USER_TIMEOUT
// decides when keepalive failure closes the connection (tcp(7)).
void setDeadPeerDetection(int fd, double dead_peer_s) {
  const int on = 1, idle = kKeepIdleS, interval = kKeepIntervalS, count = kKeepCount;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
  double ms = dead_peer_s * 1000.0;
  if (!(ms >= 1000.0)) ms = 1000.0;  // NaN too
  ms = std::min(ms, static_cast<double>(std::numeric_limits<int>::max()));
  const unsigned int user_timeout_ms = static_cast<unsigned int>(ms);
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof(user_timeout_ms));
}

namespace {

// Appends one control record (and its payload) to the bytes to write.
void queueRecord(CommBase* comm, const MessageHeader& record, const std::string& payload = {}) {
  const char* bytes = reinterpret_cast<const char*>(&record);
  comm->control_out.insert(comm->control_out.end(), bytes, bytes + sizeof(record));
  comm->control_out.insert(comm->control_out.end(), payload.begin(), payload.end());
  comm->control_queued += sizeof(record) + payload.size();
}

// Writes queued control bytes as far as the control socket takes them.
void flushControl(CommBase* comm) {
  while (!comm->control_out.empty() && !comm->path->failed()) {
    const ssize_t got = send(comm->control.get(), comm->control_out.data(), comm->control_out.size(), MSG_NOSIGNAL);
    if (got > 0) {
      comm->control_out.erase(comm->control_out.begin(), comm->control_out.begin() + got);
      comm->control_written += static_cast<uint64_t>(got);
      comm->path->touch();
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    comm->path->fail(
        StatusCode::kSystemError,
        socketError("NET/Braid: control connection with " + comm->peer, got < 0 ? errno : EPIPE).message());
  }
}

// A record of an admitting receiver (net/admission.h) at its sender.
void onAdmissionRecord(SendComm* comm, const MessageHeader& record) {
  if (record.magic == kAdmitMagic) {
    if (record.size == 0 || (record.tag != 0 && record.tag != 1) || comm->path->failed()) {
      comm->path->fail(StatusCode::kSystemError, "NET/Braid: corrupt admission record from " + comm->peer);
      return;
    }
    auto* tcp = dynamic_cast<TcpDataPath*>(comm->path.get());
    if (!comm->peer_admits && tcp != nullptr) {
      comm->reporters.assign(static_cast<size_t>(tcp->nsocks()), congestion::SenderControl(comm->cc));
    }
    comm->peer_admits = true;
    comm->peer_open = record.tag == 1;
    comm->peer_grant = record.size;
    return;
  }
  // kGrantMagic: never more than the credited messages announced still need.
  if (!comm->peer_admits || record.size == 0 || record.size > comm->credit_wanted) {
    comm->path->fail(StatusCode::kSystemError,
                     fmt::format("NET/Braid: {} granted {} B of credit with {} B announced and not granted", comm->peer,
                                 record.size, comm->credit_wanted));
    return;
  }
  comm->credit += record.size;
  comm->credit_wanted -= record.size;
}

// One complete record from the peer (net/handle.h): a receiver takes headers, reports and the goodbye, a sender the
// UCX address announcement, admission records and the goodbye.
void onRecord(CommBase* comm, const MessageHeader& record) {
  if (record.magic == kGoodbyeMagic) {
    comm->goodbye = true;
    return;
  }
  if (comm->kind == ObjectKind::kRecv) {
    auto* recv = static_cast<RecvComm*>(comm);
    const bool credited = record.magic == kCreditedMagic && recv->admission != nullptr;
    if ((record.magic == kHandleMagic || credited) && !comm->goodbye) {
      recv->headers.push_back(record);
      ++recv->announced;
      return;
    }
    if (record.magic == kReportMagic && recv->admission != nullptr) {
      recv->admission->report(recv->sender, record.size);
      return;
    }
  }
  if (comm->kind == ObjectKind::kSend && record.magic == kAddressMagic && record.size > 0 &&
      record.size <= kMaxAddressBytes && comm->payload.empty()) {
    comm->payload.assign(record.size, '\0');
    comm->payload_want = record.size;
    return;
  }
  if (comm->kind == ObjectKind::kSend && (record.magic == kAdmitMagic || record.magic == kGrantMagic)) {
    onAdmissionRecord(static_cast<SendComm*>(comm), record);
    return;
  }
  comm->path->fail(StatusCode::kSystemError, "NET/Braid: corrupt record on the control connection with " + comm->peer);
}

// Reads what the control socket holds (a receiver up to kMaxQueuedHeaders unmatched headers), handing complete
// records to onRecord; notes EOF (or a reset: the peer's process ended with bytes unread).
void readControlRecords(CommBase* comm) {
  while (!comm->control_closed && !comm->path->failed()) {
    if (comm->kind == ObjectKind::kRecv && static_cast<RecvComm*>(comm)->headers.size() >= kMaxQueuedHeaders) return;
    const bool in_payload = comm->payload_want > 0;
    char* into = in_payload ? comm->payload.data() + (comm->payload.size() - comm->payload_want)
                            : comm->record + comm->record_have;
    const size_t want = in_payload ? comm->payload_want : sizeof(comm->record) - comm->record_have;
    const ssize_t got = recv(comm->control.get(), into, want, 0);
    if (got > 0) {
      comm->path->touch();
      if (in_payload) {
        comm->payload_want -= static_cast<size_t>(got);
        comm->address_pending = comm->payload_want == 0;
        continue;
      }
      comm->record_have += static_cast<size_t>(got);
      if (comm->record_have == sizeof(comm->record)) {
        MessageHeader record;
        std::memcpy(&record, comm->record, sizeof(record));
        comm->record_have = 0;
        onRecord(comm, record);
      }
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (got == 0 || errno == ECONNRESET) {
      comm->control_closed = true;
      comm->closed_at_ns = DataPath::nowNs();
      return;
    }
    comm->path->fail(StatusCode::kSystemError,
                     socketError("NET/Braid: control connection with " + comm->peer, errno).message());
  }
}

// readControlRecords, then a complete UCX address goes to the data path, unless the receiver already closed the
// connection (its worker is gone then: nothing is to be connected to it).
void readControl(CommBase* comm) {
  readControlRecords(comm);
  if (comm->address_pending && comm->payload_want == 0 && !comm->control_closed && !comm->path->failed()) {
    comm->address_pending = false;
    Status connected = comm->path->connectTo(comm->payload);
    if (!connected.isOk()) comm->path->fail(connected.code(), connected.message());
  }
}

// Matches one header to the oldest receive still missing messages and starts its payload.
void assignHeader(RecvComm* comm, const MessageHeader& header) {
  Request* r = comm->unassigned.front();
  int slot = -1;
  for (int i = 0; i < r->n && slot < 0; ++i)
    if (!r->assigned[i] && r->tags[i] == header.tag) slot = i;
  if (slot < 0) {
    comm->path->fail(StatusCode::kInternalError,
                     fmt::format("NET/Braid: message with tag {} from {} matches no buffer of the posted receive",
                                 header.tag, comm->peer));
    return;
  }
  if (header.size > r->capacity[slot]) {
    comm->path->fail(StatusCode::kInvalidUsage,
                     fmt::format("NET/Braid: message truncated: {} B sent by {} into a {} B receive buffer (tag {})",
                                 header.size, comm->peer, r->capacity[slot], header.tag));
    return;
  }
  r->assigned[slot] = true;
  r->sizes[slot] = header.size;
  ++r->assigned_count;
  const uint64_t seq = comm->next_seq++;
  auto* tcp = dynamic_cast<TcpDataPath*>(comm->path.get());
  if (header.magic == kCreditedMagic && tcp != nullptr && header.size > 0) {
    // A credited message: its parts are read as they come; its sender gets credit for it now that it has a buffer.
    const size_t part = creditedPartBytes(header.size, tcp->nsocks(), comm->admission->grantBytes());
    const size_t count = TcpDataPath::partCount(header.size, part);
    r->pending.fetch_add(static_cast<int>(count), std::memory_order_acq_rel);
    tcp->postParts(seq, r->data[slot], header.size, part, 0, count, &r->pending, &comm->credited_arrived);
    comm->admission->request(comm->sender, header.size);
  } else if (header.size > 0) {
    comm->path->post(seq, r->data[slot], header.size, &r->pending);
  }
  if (r->assigned_count == r->n) comm->unassigned.pop_front();
}

// An admitting receiver: tells the admission what credited data arrived, and writes its sender's grants and, when
// it changed, the mode.
void pumpAdmission(RecvComm* comm) {
  if (comm->admission == nullptr || comm->path->failed()) return;
  const uint64_t arrived = comm->credited_arrived.load(std::memory_order_acquire);
  if (arrived > comm->credited_counted) {
    const Status credited = comm->admission->received(comm->sender, arrived - comm->credited_counted);
    comm->credited_counted = arrived;
    if (!credited.isOk()) {
      comm->path->fail(StatusCode::kSystemError,
                       "NET/Braid: credited data from " + comm->peer + ": " + credited.message());
      return;
    }
  }
  const Admission::Mail mail = comm->admission->take(comm->sender, &comm->mode_epoch);
  for (uint64_t bytes : mail.grants) {
    MessageHeader record;
    record.size = bytes;
    record.magic = kGrantMagic;
    queueRecord(comm, record);
  }
  if (mail.mode_changed) {
    MessageHeader record;
    record.size = comm->admission->grantBytes();
    record.tag = mail.open ? 1 : 0;
    record.magic = kAdmitMagic;
    queueRecord(comm, record);
    BRAID_PLUGIN_LOG(kLogInfo, kSubsysNet, "NET/Braid: admission for {}: {}", comm->peer, comm->admission->describe());
  }
  if (!mail.grants.empty() || mail.mode_changed) flushControl(comm);
}

// A sender: hands held messages to the data path in order, credited parts as far as the credit covers them.
void pumpHeld(SendComm* comm) {
  auto* tcp = dynamic_cast<TcpDataPath*>(comm->path.get());
  while (!comm->held.empty() && tcp != nullptr && !comm->path->failed()) {
    HeldSend& h = comm->held.front();
    const size_t count = TcpDataPath::partCount(h.size, h.part);
    size_t end = count;
    if (h.credited) {
      end = h.next;
      while (end < count) {
        const uint64_t bytes = std::min(h.part, h.size - end * h.part);
        if (bytes > comm->credit) break;
        comm->credit -= bytes;
        ++end;
      }
    }
    if (end > h.next) {
      tcp->postParts(h.seq, h.data, h.size, h.part, h.next, end, h.pending, nullptr);
      h.next = end;
      comm->path->touch();
    }
    if (h.next < count) return;
    comm->held.pop_front();
  }
}

// A sender to an admitting receiver: reads TCP_INFO of the data sockets (at most once per ms each) and reports
// retransmission timeouts.
void reportTimeouts(SendComm* comm) {
  auto* tcp = dynamic_cast<TcpDataPath*>(comm->path.get());
  if (!comm->peer_admits || tcp == nullptr || comm->path->failed()) return;
  const double now_us = static_cast<double>(DataPath::nowNs()) * 1e-3;
  uint64_t timeouts = 0;
  for (size_t i = 0; i < comm->reporters.size(); ++i) {
    congestion::SenderControl& reporter = comm->reporters[i];
    if (!reporter.tcpSignalsDue(now_us)) continue;
    Result<congestion::TcpSignals> signals = congestion::readTcpSignals(tcp->fd(static_cast<int>(i)));
    if (!signals.isOk()) continue;
    reporter.onTcpSignals(*signals, now_us);
    timeouts += reporter.takeReport().timeouts;
  }
  if (timeouts == 0) return;
  MessageHeader record;
  record.size = timeouts;
  record.magic = kReportMagic;
  queueRecord(comm, record);
  flushControl(comm);
}

void matchHeaders(RecvComm* comm) {
  while (!comm->unassigned.empty() && !comm->headers.empty() && !comm->path->failed()) {
    const MessageHeader header = comm->headers.front();
    comm->headers.pop_front();
    assignHeader(comm, header);
  }
}

bool sendComplete(const SendComm* comm, const Request& r) {
  return comm->control_written >= r.header_end && r.pending.load(std::memory_order_acquire) == 0;
}

bool sendsPending(const SendComm* comm) {
  for (const Request& r : comm->requests) {
    if (r.used && r.type == Request::Type::kSend && !sendComplete(comm, r)) return true;
  }
  return false;
}

// After EOF on the control socket (net/comm.h "Closing and failures"): a sender without the receiver's goodbye
// died, and so did a receiver without the sender's; after a sender's goodbye only receives that no header will
// reach fail, after a receiver's a send still pending kPeerCloseGraceS later.
void checkPeerClosed(CommBase* comm) {
  if (!comm->control_closed || comm->path->failed()) return;
  if (comm->kind == ObjectKind::kRecv) {
    auto* recv = static_cast<RecvComm*>(comm);
    if (!recv->goodbye) {
      recv->path->fail(StatusCode::kSystemError,
                       "NET/Braid: connection from " + recv->peer +
                           " closed without a goodbye: the sender died (its process exited?)");
    } else if (!recv->unassigned.empty() && recv->headers.empty()) {
      recv->path->fail(StatusCode::kSystemError,
                       fmt::format("NET/Braid: connection from {} closed by the sender after {} message(s); a posted "
                                   "receive waits for more",
                                   recv->peer, recv->announced));
    }
    return;
  }
  auto* send = static_cast<SendComm*>(comm);
  if (!sendsPending(send)) return;  // a later isend fails in sendPost
  if (!send->goodbye) {
    send->path->fail(StatusCode::kSystemError,
                     "NET/Braid: connection to " + send->peer +
                         " closed without a goodbye: the receiver died (its process exited?)");
  } else if (static_cast<double>(DataPath::nowNs() - send->closed_at_ns) * 1e-9 > kPeerCloseGraceS) {
    send->path->fail(StatusCode::kSystemError,
                     "NET/Braid: connection to " + send->peer + " closed by the receiver while a send was pending");
  }
}

// The error of a failed comm, logged once.
int reportFailure(CommBase* comm, const char* what) {
  const Status failure = comm->path->failure();
  if (!comm->failure_reported) {
    comm->failure_reported = true;
    return report(failure, nccl_abi::kSubsysNet, what);
  }
  return toNcclResultCode(failure.code());
}

// Congestion control of a new comm (TCP data path only): a sender keeps the policy for its reports; a receiver
// whose policy admits senders joins the process's admission and tells its sender first (kAdmitMagic).
void setUpAdmission(SendComm* comm, const DataPathOptions& options) { comm->cc = options.cc; }
void setUpAdmission(RecvComm* comm, const DataPathOptions& options) {
  if (options.cc.receiverCredits() == 0 || dynamic_cast<TcpDataPath*>(comm->path.get()) == nullptr) return;
  comm->admission = Admission::acquire(options.cc);
  comm->sender = comm->admission->join();
  comm->mode_epoch = ~uint64_t{0};  // the first take() tells the mode
  pumpAdmission(comm);
}

template <class Comm>
Result<std::unique_ptr<Comm>> makeComm(bool sending, std::vector<net::Fd> sockets, const DataPathOptions& options,
                                       std::string peer) {
  auto comm = std::make_unique<Comm>();
  for (const net::Fd& s : sockets) setDeadPeerDetection(s.get(), options.dead_peer_s);
  if (!options.tcp_congestion.empty()) {
    for (size_t i = 1; i < sockets.size(); ++i) {
      const std::string& name = options.tcp_congestion;
      if (setsockopt(sockets[i].get(), IPPROTO_TCP, TCP_CONGESTION, name.data(), static_cast<socklen_t>(name.size())) !=
          0) {
        return Status(StatusCode::kInvalidUsage,
                      "NET/Braid: BRAID_TCP_CONGESTION=" + name + " on a data socket: " + net::errnoText(errno));
      }
    }
  }
  comm->control = std::move(sockets[0]);
  comm->peer = std::move(peer);
  if (options.transport == NetTransport::kUcx) {
    BRAID_ASSIGN_OR_RETURN(comm->path, makeUcxDataPath(sending, options.ucx, options.idle_timeout_s, comm->peer));
  } else {
    std::vector<net::Fd> data;
    for (size_t i = 1; i < sockets.size(); ++i) data.push_back(std::move(sockets[i]));
    comm->path = std::make_unique<TcpDataPath>(sending, std::move(data), options.nthreads, options.idle_timeout_s);
  }
  const std::string address = comm->path->localAddress();
  if (!sending && !address.empty()) {
    MessageHeader record;
    record.size = address.size();
    record.magic = kAddressMagic;
    queueRecord(comm.get(), record, address);
    flushControl(comm.get());
  }
  setUpAdmission(comm.get(), options);
  return comm;
}

}  // namespace

Result<std::unique_ptr<SendComm>> makeSendComm(std::vector<net::Fd> sockets, const DataPathOptions& options,
                                               std::string peer) {
  return makeComm<SendComm>(true, std::move(sockets), options, std::move(peer));
}

Result<std::unique_ptr<RecvComm>> makeRecvComm(std::vector<net::Fd> sockets, const DataPathOptions& options,
                                               std::string peer) {
  return makeComm<RecvComm>(false, std::move(sockets), options, std::move(peer));
}

int sendPost(SendComm* comm, void* data, size_t size, int tag, void** request) {
  *request = nullptr;
  readControl(comm);
  if (comm->control_closed && !comm->path->failed()) {
    comm->path->fail(StatusCode::kSystemError,
                     "NET/Braid: isend: the receiver " + comm->peer + " closed the connection");
  }
  if (comm->path->failed()) return reportFailure(comm, "isend");
  if (size > 0 && data == nullptr) {
    return report(Status(StatusCode::kInvalidArgument, "isend: data is NULL"), nccl_abi::kSubsysNet, "isend");
  }
  Request* r = comm->allocate(Request::Type::kSend);
  if (r == nullptr) return nccl_abi::kSuccess;  // all slots busy: NCCL retries
  r->n = 1;
  r->data[0] = static_cast<char*>(data);
  r->capacity[0] = r->sizes[0] = size;
  r->tags[0] = tag;
  auto* tcp = dynamic_cast<TcpDataPath*>(comm->path.get());
  // A gated receiver (net/admission.h) credits messages beyond the eager size; a message behind a held one waits.
  const bool credited = tcp != nullptr && comm->peer_admits && !comm->peer_open && size > comm->cc.eager_bytes;
  MessageHeader header;
  header.size = size;
  header.tag = tag;
  if (credited) header.magic = kCreditedMagic;
  queueRecord(comm, header);
  r->header_end = comm->control_queued;
  const uint64_t seq = comm->next_seq++;
  if (size > 0 && (credited || !comm->held.empty())) {
    HeldSend h;
    h.seq = seq;
    h.data = r->data[0];
    h.size = size;
    h.part = credited ? creditedPartBytes(size, tcp->nsocks(), comm->peer_grant) : chunkBytes(size, tcp->nsocks());
    h.credited = credited;
    h.pending = &r->pending;
    r->pending.fetch_add(static_cast<int>(TcpDataPath::partCount(size, h.part)), std::memory_order_acq_rel);
    if (credited) comm->credit_wanted += size;
    comm->held.push_back(h);
    pumpHeld(comm);
  } else if (size > 0) {
    comm->path->post(seq, r->data[0], size, &r->pending);
  }
  comm->path->touch();
  flushControl(comm);
  reportTimeouts(comm);
  *request = r;
  return nccl_abi::kSuccess;
}

int recvPost(RecvComm* comm, int n, void** data, const size_t* sizes, const int* tags, void** request) {
  *request = nullptr;
  if (comm->path->failed()) return reportFailure(comm, "irecv");
  if (n < 1 || n > kNetMaxRecvs || data == nullptr || sizes == nullptr || tags == nullptr) {
    return report(Status(StatusCode::kInvalidArgument,
                         fmt::format("irecv: n = {} (1..{}) or a NULL data/sizes/tags array", n, kNetMaxRecvs)),
                  nccl_abi::kSubsysNet, "irecv");
  }
  size_t in_use = 0;
  for (const Request& q : comm->requests) in_use += (q.used && q.type == Request::Type::kRecv) ? 1 : 0;
  if (in_use >= static_cast<size_t>(nccl_abi::kNetMaxRequests)) return nccl_abi::kSuccess;
  Request* r = comm->allocate(Request::Type::kRecv);
  if (r == nullptr) return nccl_abi::kSuccess;
  r->n = n;
  for (int i = 0; i < n; ++i) {
    r->data[i] = static_cast<char*>(data[i]);
    r->capacity[i] = sizes[i];
    r->tags[i] = tags[i];
  }
  comm->unassigned.push_back(r);
  comm->path->touch();
  flushControl(comm);
  readControl(comm);
  matchHeaders(comm);
  pumpAdmission(comm);
  *request = r;
  return nccl_abi::kSuccess;
}

int flushPost(RecvComm* comm, void** request) {
  *request = comm->allocate(Request::Type::kFlush);  // host memory: nothing to flush, done at the first test
  if (*request != nullptr) static_cast<Request*>(*request)->n = 0;
  return nccl_abi::kSuccess;
}

namespace {

// Whether `r` is complete, after progressing the control socket both ways.
bool requestComplete(Request* r) {
  CommBase* base = static_cast<CommBase*>(r->comm);
  if (r->type == Request::Type::kFlush) return true;
  flushControl(base);
  readControl(base);
  if (r->type == Request::Type::kSend) {
    auto* comm = static_cast<SendComm*>(base);
    pumpHeld(comm);
    reportTimeouts(comm);
    checkPeerClosed(comm);
    return sendComplete(comm, *r);
  }
  auto* comm = static_cast<RecvComm*>(base);
  matchHeaders(comm);
  pumpAdmission(comm);
  checkPeerClosed(comm);
  return r->assigned_count == r->n && r->pending.load(std::memory_order_acquire) == 0;
}

}  // namespace

int requestTest(Request* r, int* done, int* sizes) {
  *done = 0;
  CommBase* base = static_cast<CommBase*>(r->comm);
  bool complete = requestComplete(r);
  // NCCL's proxy polls test() in a loop: rather than spin, its thread moves bytes itself (TCP: on sockets whose
  // helper is not busy with them, bounded per call; UCX: progresses the worker).
  if (!complete && base->path->progress()) complete = requestComplete(r);
  if (!complete) {
    if (base->path->checkStalled(r->type == Request::Type::kSend ? "isend to " + base->peer
                                                                 : "irecv from " + base->peer)) {
      return reportFailure(base, "test");
    }
    // Give the core to the threads that move the bytes (on a host with fewer cores than busy threads this is most
    // of the throughput; with idle cores it returns at once).
    sched_yield();
    return nccl_abi::kSuccess;
  }
  if (sizes != nullptr) {
    for (int i = 0; i < r->n; ++i) {
      sizes[i] = r->sizes[i] > static_cast<size_t>(INT32_MAX) ? INT32_MAX : static_cast<int>(r->sizes[i]);
    }
  }
  r->used = false;
  *done = 1;
  return nccl_abi::kSuccess;
}

void closeComm(CommBase* comm) {
  if (comm->path) {
    // The goodbye: a sender's says every message it announced was delivered, a receiver's that it closed on purpose.
    flushControl(comm);
    readControl(comm);
    bool goodbye = !comm->control_closed && comm->control.valid();
    if (comm->kind == ObjectKind::kSend) {
      goodbye = goodbye && !comm->path->failed() && !sendsPending(static_cast<SendComm*>(comm)) &&
                comm->path->drain(kCloseDrainS);
    } else if (!comm->path->failed()) {
      comm->path->drain(kCloseDrainS);
    }
    if (goodbye) {
      MessageHeader record;
      record.size = comm->next_seq;
      record.magic = kGoodbyeMagic;
      queueRecord(comm, record);
      // Best effort, bounded: a peer that stopped reading is not waited for longer.
      (void)net::writeAll(comm->control.get(), comm->control_out.data(), comm->control_out.size(),
                          net::Deadline::after(kCloseDrainS), "NET/Braid: goodbye to " + comm->peer);
    }
    comm->path->shutdown();
  }
  if (comm->kind == ObjectKind::kRecv) {
    auto* recv = static_cast<RecvComm*>(comm);
    if (recv->admission != nullptr) recv->admission->leave(recv->sender);
    recv->admission.reset();
  }
  comm->control.reset();
  comm->path.reset();
  comm->kind = ObjectKind::kDead;
}

RecvComm::~RecvComm() {
  if (admission != nullptr) admission->leave(sender);
}

}  // namespace braid::nccl_plugin
