// The UCX transport; the design (tags, buffered sends, waiting, teardown) is described in ucx_transport.h.
#include "transport/ucx/ucx_transport.h"

#include <fmt/format.h>

#ifdef BRAID_HAVE_UCX
#include <poll.h>
#include <ucp/api/ucp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/log.h"
#include "common/nonce.h"
#include "transport/endpoint_base.h"
#include "ucx/ucx_init.h"
#endif

namespace braid {

#ifdef BRAID_HAVE_UCX
namespace ucx {
namespace {

class UcxTransport;

struct PeerContext {  // argument of an endpoint's error handler
  UcxTransport* self = nullptr;
  int peer = 0;
};

struct SendConn;

struct InFlightSend {  // a ucp send the executor already saw complete
  UcxTransport* self = nullptr;
  SendConn* conn = nullptr;
  std::vector<uint8_t> buffer;  // the bounce buffer
  ucs_status_t status = UCS_OK;
  bool finished = false;  // its callback ran
};

struct PendingSend {  // waiting for room (fifo_depth ucp sends in flight): not copied yet
  RequestId id = 0;
  const uint8_t* src = nullptr;
  uint64_t bytes = 0;
};

struct SendConn {
  int peer = 0;
  int channel = 0;
  uint64_t sequence = 0;
  int in_flight = 0;
  std::deque<PendingSend> pending;
  std::vector<std::vector<uint8_t>> spare;  // bounce buffers ready for reuse
};

struct RecvOp {
  UcxTransport* self = nullptr;
  RequestId id = 0;
  int peer = 0;
  int channel = 0;
  uint64_t bytes = 0;
  uint64_t sequence = 0;
  void* request = nullptr;  // the ucp request while it is outstanding
  bool finished = false;    // its callback ran
  ucs_status_t status = UCS_OK;
  ucp_tag_recv_info_t info{};
};

struct ClosingRecv {        // the receive of one peer's closing message (teardown)
  void* request = nullptr;  // the ucp request while it is outstanding
  bool finished = false;    // its callback ran
};

// What a rank's transport shows the ranks of its communicator that live in the same process: by sender, how many
// messages from it this rank's receives matched. Teardown reads it (see sameProcessPeerDone()).
struct LocalState {
  explicit LocalState(int size) : received(new std::atomic<uint64_t>[static_cast<size_t>(size)]) {
    for (int p = 0; p < size; ++p) received[static_cast<size_t>(p)].store(0, std::memory_order_relaxed);
  }
  std::unique_ptr<std::atomic<uint64_t>[]> received;
};

// The live transports of this process by their random token (all-gathered at setup): a peer whose token is found
// here is a rank of the same process.
class LocalRegistry {
 public:
  static LocalRegistry& instance() {
    static LocalRegistry* registry = new LocalRegistry();  // never destroyed: transports may outlive statics
    return *registry;
  }
  void add(uint64_t token, const std::shared_ptr<LocalState>& state) {
    std::lock_guard<std::mutex> lock(mutex_);
    states_[token] = state;
  }
  void remove(uint64_t token) {
    std::lock_guard<std::mutex> lock(mutex_);
    states_.erase(token);
  }
  std::shared_ptr<LocalState> find(uint64_t token) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = states_.find(token);
    return it == states_.end() ? nullptr : it->second.lock();
  }

 private:
  std::mutex mutex_;
  std::unordered_map<uint64_t, std::weak_ptr<LocalState>> states_;
};

Status ucxError(StatusCode code, const std::string& what, ucs_status_t status) {
  return Status(code, fmt::format("{}: {}", what, ucs_status_string(status)));
}

class UcxTransport final : public EndpointBase {
 public:
  UcxTransport(Bootstrap& bootstrap, const TransportOptions& options)
      : EndpointBase(Config{"ucx", bootstrap.rank(), bootstrap.size(), endpointTimeoutSeconds(options), INT_MAX,
                            /*progress_thread=*/true, &bootstrap}),
        bootstrap_(bootstrap),
        fifo_depth_(std::max(1, options.fifo_depth)),
        peers_(static_cast<size_t>(bootstrap.size())),
        endpoints_(static_cast<size_t>(bootstrap.size()), nullptr),
        peer_failure_(static_cast<size_t>(bootstrap.size())),
        waiting_on_(static_cast<size_t>(bootstrap.size()), 0),
        sent_to_(static_cast<size_t>(bootstrap.size()), 0),
        received_from_(static_cast<size_t>(bootstrap.size()), 0),
        messages_to_(static_cast<size_t>(bootstrap.size()), 0),
        local_state_(std::make_shared<LocalState>(bootstrap.size())),
        local_peers_(static_cast<size_t>(bootstrap.size())),
        same_process_(static_cast<size_t>(bootstrap.size()), 0) {
    for (int p = 0; p < size_; ++p) peers_[static_cast<size_t>(p)] = PeerContext{this, p};
  }

  ~UcxTransport() override {
    progressThread().stop();
    teardown();
    if (token_ != 0) LocalRegistry::instance().remove(token_);
  }

  Status setup() {
    Status mine = createWorker();
    BRAID_RETURN_IF_ERROR(agreeOnSetup(bootstrap_, mine, "ucx", "create its UCX worker"));
    // Worker addresses: lengths first, then the addresses padded to the longest.
    std::vector<uint64_t> lengths(static_cast<size_t>(size_), 0);
    lengths[static_cast<size_t>(rank_)] = address_length_;
    BRAID_RETURN_IF_ERROR(bootstrap_.allGather(lengths.data(), sizeof(uint64_t)));
    const uint64_t longest = *std::max_element(lengths.begin(), lengths.end());
    std::vector<uint8_t> addresses(static_cast<size_t>(longest) * static_cast<size_t>(size_), 0);
    std::memcpy(addresses.data() + longest * static_cast<uint64_t>(rank_), address_, address_length_);
    BRAID_RETURN_IF_ERROR(bootstrap_.allGather(addresses.data(), longest));
    // Tokens: which peers live in this process (registered before the all-gather, looked up after it).
    token_ = randomNonce();
    LocalRegistry::instance().add(token_, local_state_);
    std::vector<uint64_t> tokens(static_cast<size_t>(size_), 0);
    tokens[static_cast<size_t>(rank_)] = token_;
    BRAID_RETURN_IF_ERROR(bootstrap_.allGather(tokens.data(), sizeof(uint64_t)));
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      std::shared_ptr<LocalState> peer = LocalRegistry::instance().find(tokens[static_cast<size_t>(p)]);
      if (peer == nullptr) continue;
      local_peers_[static_cast<size_t>(p)] = peer;
      same_process_[static_cast<size_t>(p)] = 1;
    }
    mine = Status::ok();
    for (int p = 0; p < size_ && mine.isOk(); ++p) {
      if (p == rank_) continue;
      ucp_ep_params_t params{};
      params.field_mask =
          UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
      params.address = reinterpret_cast<const ucp_address_t*>(addresses.data() + longest * static_cast<uint64_t>(p));
      params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
      params.err_handler.cb = &UcxTransport::onEndpointError;
      params.err_handler.arg = &peers_[static_cast<size_t>(p)];
      ucp_ep_h* endpoint = &endpoints_[static_cast<size_t>(p)];
      ucs_status_t status = ucp_ep_create(worker_, &params, endpoint);
      if (status == UCS_ERR_UNREACHABLE) {
        // No transport allowed by UCX_TLS supports peer failure handling (UCX 1.13's shared-memory ones do
        // not): connect without it; a dead peer is then reported through the bootstrap only.
        params.field_mask &=
            ~static_cast<uint64_t>(UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER);
        status = ucp_ep_create(worker_, &params, endpoint);
        if (status == UCS_OK) {
          BRAID_LOG_RANK(kInfo, rank_,
                         "ucx: no transport in UCX_TLS handles peer failures towards rank {}; connected without (a "
                         "dead peer is reported through the bootstrap)",
                         p);
        }
      }
      if (status != UCS_OK) {
        *endpoint = nullptr;
        mine =
            ucxError(StatusCode::kSystemError, fmt::format("ucx: rank {}: ucp_ep_create to rank {}", rank_, p), status);
      }
    }
    BRAID_RETURN_IF_ERROR(agreeOnSetup(bootstrap_, mine, "ucx", "connect its UCX endpoints"));
    progressThread().start([this] { progressLoop(); });
    return Status::ok();
  }

 private:
  Status startSend(const SendRequest& request, const uint8_t* src, RequestId id) override {
    BRAID_RETURN_IF_ERROR(checkTagFields(request.peer, request.channel, "send"));
    BRAID_RETURN_IF_ERROR(peerUsable(request.peer));
    SendConn& conn = sendConn(request.peer, request.channel);
    sent_to_[static_cast<size_t>(request.peer)] = 1;
    ++messages_to_[static_cast<size_t>(request.peer)];
    conn.pending.push_back(PendingSend{id, src, request.src.bytes});
    ++waiting_on_[static_cast<size_t>(request.peer)];
    return fail(issue(conn));
  }

  Status startRecv(const RecvRequest& request, uint8_t* dst, RequestId id) override {
    BRAID_RETURN_IF_ERROR(checkTagFields(request.peer, request.channel, "recv"));
    BRAID_RETURN_IF_ERROR(peerUsable(request.peer));
    received_from_[static_cast<size_t>(request.peer)] = 1;
    uint64_t& sequence = recv_sequence_[connKey(request.peer, request.channel)];
    auto op = std::make_unique<RecvOp>();
    op->self = this;
    op->id = id;
    op->peer = request.peer;
    op->channel = request.channel;
    op->bytes = request.dst.bytes;
    op->sequence = sequence++;
    ucp_request_param_t params{};
    // Always through the callback (it may run before ucp_tag_recv_nbx returns): UCX 1.13 does not fill
    // recv_info.tag_info when a receive completes at once from the unexpected queue.
    params.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    params.cb.recv = &UcxTransport::onRecvDone;
    params.user_data = op.get();
    void* buffer = op->bytes > 0 ? static_cast<void*>(dst) : static_cast<void*>(&dummy_);
    const ucs_status_ptr_t result = ucp_tag_recv_nbx(
        worker_, buffer, op->bytes, messageTag(request.peer, request.channel, op->sequence), ~uint64_t{0}, &params);
    if (UCS_PTR_IS_ERR(result)) {
      return fail(ucxError(
          StatusCode::kSystemError,
          fmt::format("ucx: rank {}: receive from rank {} on channel {}", rank_, request.peer, request.channel),
          UCS_PTR_STATUS(result)));
    }
    RecvOp* raw = op.get();
    ++waiting_on_[static_cast<size_t>(request.peer)];
    recvs_.emplace(raw, std::move(op));
    if (!raw->finished) raw->request = result;
    return Status::ok();
  }

  Status waitForCompletion() override {
    if (recvs_.empty() && pendingSends() == 0) {
      return internalError(fmt::format("ucx: rank {}: blocking poll with no request outstanding", rank_));
    }
    BlockingWait wait = beginWait(kWaitSliceMs);
    while (true) {
      Status status = progress();
      wait.tick();
      if (status.isOk() && !hasCompletions()) status = peerFailures(wait.peerCheckDue());
      if (status.isOk() && !hasCompletions() && wait.expired()) status = timeoutStatus(wait.waitedSeconds());
      if (!status.isOk() || hasCompletions()) return status;
      const ucs_status_t armed = ucp_worker_arm(worker_);
      if (armed == UCS_ERR_BUSY) continue;  // events arrived meanwhile: progress again
      if (armed != UCS_OK) {
        return ucxError(StatusCode::kSystemError, fmt::format("ucx: rank {}: ucp_worker_arm", rank_), armed);
      }
      pollfd fd{event_fd_, POLLIN, 0};
      ::poll(&fd, 1, wait.sleepMs());
    }
  }

  void tellPeersOfAbort(const Status& reason) override { bootstrap_.abort(reason.toString()); }

  // Background progress: ucp sends the executor already saw complete still need this worker to progress
  // (wireup, TCP transmission, rendezvous) after execute() returned, when nobody calls poll(). While sends
  // are in flight and the owner has been out of the transport for ProgressThread::kOwnerIdle, this thread
  // progresses the worker, sleeping on its event fd in between; otherwise it sleeps on a condition variable.
  void progressLoop() {
    ProgressThread& progress_thread = progressThread();
    std::unique_lock<std::mutex> lock(progress_thread.mutex());
    while (progress_thread.waitForWork(lock, [this] { return !in_flight_.empty() && !failed(); })) {
      (void)fail(progress());  // an error surfaces at the owner's next call
      if (in_flight_.empty() || ucp_worker_arm(worker_) != UCS_OK) continue;
      lock.unlock();
      pollfd fd{event_fd_, POLLIN, 0};
      ::poll(&fd, 1, 10);
      lock.lock();
    }
  }

  static void onEndpointError(void* arg, ucp_ep_h, ucs_status_t status) {
    auto* peer = static_cast<PeerContext*>(arg);
    Status& failure = peer->self->peer_failure_[static_cast<size_t>(peer->peer)];
    if (failure.isOk()) {
      failure = ucxError(StatusCode::kRemoteError,
                         fmt::format("ucx: rank {}: the connection to rank {} failed", peer->self->rank_, peer->peer),
                         status);
    }
  }

  static void onSendDone(void* request, ucs_status_t status, void* user_data) {
    auto* send = static_cast<InFlightSend*>(user_data);
    send->status = status;
    send->finished = true;
    send->self->finished_sends_.push_back(send);
    ucp_request_free(request);
  }

  static void onRecvDone(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user_data) {
    auto* op = static_cast<RecvOp*>(user_data);
    op->status = status;
    if (info != nullptr) op->info = *info;
    op->request = nullptr;
    op->finished = true;
    op->self->finished_recvs_.push_back(op);
    ucp_request_free(request);
  }

  // The context (one at a time per process, UCM's memory events off: ucx/ucx_init.h), the worker, its event fd
  // and address.
  Status createWorker() {
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
    const char* failed_call = nullptr;
    ucs_status_t status = initContext(params, &context_, &failed_call);
    if (status != UCS_OK) {
      return ucxError(StatusCode::kSystemError, fmt::format("ucx: rank {}: {}", rank_, failed_call), status);
    }
    ucp_worker_params_t worker_params{};
    worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    worker_params.thread_mode =
        UCS_THREAD_MODE_SERIALIZED;  // the owner and the progress thread, under progressThread().mutex()
    status = ucp_worker_create(context_, &worker_params, &worker_);
    if (status != UCS_OK) {
      worker_ = nullptr;
      return ucxError(StatusCode::kSystemError, fmt::format("ucx: rank {}: ucp_worker_create", rank_), status);
    }
    status = ucp_worker_get_efd(worker_, &event_fd_);
    if (status != UCS_OK) {
      return ucxError(StatusCode::kSystemError, fmt::format("ucx: rank {}: ucp_worker_get_efd", rank_), status);
    }
    size_t length = 0;
    status = ucp_worker_get_address(worker_, &address_, &length);
    if (status != UCS_OK) {
      address_ = nullptr;
      return ucxError(StatusCode::kSystemError, fmt::format("ucx: rank {}: ucp_worker_get_address", rank_), status);
    }
    address_length_ = length;
    return Status::ok();
  }

  // The tag's fields (ucx_transport.h) hold channels < 2^16 and ranks < 2^20 - 1 (the last sender value is
  // kClosingSender's): kUnsupported beyond.
  Status checkTagFields(int peer, int channel, const char* what) const {
    if (channel >= (1 << kChannelBits) || size_ > kClosingSender) {
      return unsupported(
          fmt::format("ucx: rank {}: {} with peer {} on channel {} of {} ranks: tags hold channels < "
                      "{} and ranks < {}",
                      rank_, what, peer, channel, size_, 1 << kChannelBits, kClosingSender));
    }
    return Status::ok();
  }

  Status peerUsable(int peer) {
    const Status& failure = peer_failure_[static_cast<size_t>(peer)];
    if (!failure.isOk()) return fail(failure);
    return Status::ok();
  }

  static uint64_t connKey(int peer, int channel) {
    return (static_cast<uint64_t>(peer) << 32) | static_cast<uint64_t>(channel);
  }

  SendConn& sendConn(int peer, int channel) {
    auto [it, inserted] = send_conns_.try_emplace(connKey(peer, channel));
    if (inserted) {
      it->second = std::make_unique<SendConn>();
      it->second->peer = peer;
      it->second->channel = channel;
    }
    return *it->second;
  }

  // Starts queued sends of `conn` while fewer than fifo_depth are in flight; each completes to the executor.
  Status issue(SendConn& conn) {
    while (!conn.pending.empty() && conn.in_flight < fifo_depth_) {
      const PendingSend pending = conn.pending.front();
      conn.pending.pop_front();
      --waiting_on_[static_cast<size_t>(conn.peer)];
      auto send = std::make_unique<InFlightSend>();
      send->self = this;
      send->conn = &conn;
      if (!conn.spare.empty()) {
        send->buffer = std::move(conn.spare.back());
        conn.spare.pop_back();
      }
      send->buffer.resize(pending.bytes);
      if (pending.bytes > 0) std::memcpy(send->buffer.data(), pending.src, pending.bytes);
      ucp_request_param_t params{};
      params.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
      params.cb.send = &UcxTransport::onSendDone;
      params.user_data = send.get();
      const void* buffer = pending.bytes > 0 ? static_cast<const void*>(send->buffer.data()) : &dummy_;
      const ucs_status_ptr_t result =
          ucp_tag_send_nbx(endpoints_[static_cast<size_t>(conn.peer)], buffer, pending.bytes,
                           messageTag(rank_, conn.channel, conn.sequence), &params);
      ++conn.sequence;
      if (UCS_PTR_IS_ERR(result)) {
        return ucxError(StatusCode::kRemoteError,
                        fmt::format("ucx: rank {}: send to rank {} on channel {}", rank_, conn.peer, conn.channel),
                        UCS_PTR_STATUS(result));
      }
      complete(pending.id);
      if (result == nullptr) {  // done at once: the bounce buffer is free again
        conn.spare.push_back(std::move(send->buffer));
      } else {
        ++conn.in_flight;
        InFlightSend* raw = send.get();
        in_flight_.emplace(raw, std::move(send));
        progressThread().wake();
      }
    }
    return Status::ok();
  }

  Status progress() override {
    while (ucp_worker_progress(worker_) != 0) {
    }
    Status status = Status::ok();
    for (InFlightSend* send : finished_sends_) {
      SendConn& conn = *send->conn;
      --conn.in_flight;
      if (send->status != UCS_OK && status.isOk()) {
        Status& failure = peer_failure_[static_cast<size_t>(conn.peer)];
        if (failure.isOk()) {
          failure = ucxError(
              StatusCode::kRemoteError,
              fmt::format("ucx: rank {}: a send to rank {} on channel {} failed", rank_, conn.peer, conn.channel),
              send->status);
        }
      }
      conn.spare.push_back(std::move(send->buffer));
      in_flight_.erase(send);
    }
    finished_sends_.clear();
    for (RecvOp* op : finished_recvs_) {
      if (op->status != UCS_OK && op->status != UCS_ERR_MESSAGE_TRUNCATED) {
        // The connection failed under the receive: this rank still waits for the peer (waiting_on_ stays), and
        // peerFailures() reports it, with the bootstrap's explanation when one comes.
        Status& failure = peer_failure_[static_cast<size_t>(op->peer)];
        if (failure.isOk()) {
          failure =
              ucxError(StatusCode::kRemoteError,
                       fmt::format("ucx: rank {}: receive from rank {} on channel {}", rank_, op->peer, op->channel),
                       op->status);
        }
        recvs_.erase(op);
        continue;
      }
      --waiting_on_[static_cast<size_t>(op->peer)];
      local_state_->received[static_cast<size_t>(op->peer)].fetch_add(1, std::memory_order_release);
      if (status.isOk()) {
        if (op->status == UCS_ERR_MESSAGE_TRUNCATED) {
          status = invalidArgument(fmt::format(
              "ucx: rank {} -> rank {} channel {}: a message of more than {} bytes matched a receive of {} bytes",
              op->peer, rank_, op->channel, op->bytes, op->bytes));
        } else if (op->info.length != op->bytes) {
          status = invalidArgument(
              fmt::format("ucx: rank {} -> rank {} channel {}: a message of {} bytes matched a receive of {} bytes",
                          op->peer, rank_, op->channel, op->info.length, op->bytes));
        } else {
          complete(op->id);
        }
      }
      recvs_.erase(op);
    }
    finished_recvs_.clear();
    BRAID_RETURN_IF_ERROR(status);
    for (auto& [key, conn] : send_conns_) {
      if (!conn->pending.empty() && conn->in_flight < fifo_depth_) BRAID_RETURN_IF_ERROR(issue(*conn));
    }
    return Status::ok();
  }

  size_t pendingSends() const {
    size_t n = 0;
    for (const auto& [key, conn] : send_conns_) n += conn->pending.size();
    return n;
  }

  // A failed endpoint matters when this rank still waits for that peer; the bootstrap reports killed and
  // aborted ranks. The bootstrap's report is preferred: it says whether the peer died or aborted, and why (a
  // peer that aborted because a third rank died names that rank). Its message can arrive after UCX saw the
  // endpoint fail, so a failed endpoint is reported alone only after kExplainGraceMs without the bootstrap's.
  Status peerFailures(bool check_bootstrap) {
    int failed = -1;
    for (int p = 0; p < size_ && failed < 0; ++p) {
      if (waiting_on_[static_cast<size_t>(p)] > 0 && !peer_failure_[static_cast<size_t>(p)].isOk()) failed = p;
    }
    if (failed >= 0 || check_bootstrap) BRAID_RETURN_IF_ERROR(bootstrapFailure());
    if (failed < 0) return Status::ok();
    const auto now = std::chrono::steady_clock::now();
    if (!endpoint_failure_seen_) endpoint_failure_seen_ = now;
    if (now - *endpoint_failure_seen_ < std::chrono::milliseconds(kExplainGraceMs)) return Status::ok();
    return peer_failure_[static_cast<size_t>(failed)];
  }

  Status timeoutStatus(double waited_s) const {
    std::string what;
    const RecvOp* oldest = nullptr;
    for (const auto& [raw, op] : recvs_) {
      if (oldest == nullptr || op->id < oldest->id) oldest = raw;
    }
    if (oldest != nullptr) {
      what = fmt::format("a message of {} bytes from rank {} on channel {} ({} receive(s) posted)", oldest->bytes,
                         oldest->peer, oldest->channel, recvs_.size());
    } else {
      for (const auto& [key, conn] : send_conns_) {
        if (conn->pending.empty()) continue;
        what = fmt::format("room to send to rank {} on channel {} ({} sends in flight, {} queued)", conn->peer,
                           conn->channel, conn->in_flight, conn->pending.size());
        break;
      }
    }
    return timeoutError(waited_s, what);
  }

  // Waits (progressing) until `done` or `seconds` passed.
  template <typename Done>
  void progressUntil(Done done, double seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      if (ucp_worker_progress(worker_) != 0) continue;
      if (ucp_worker_arm(worker_) == UCS_OK) {
        pollfd fd{event_fd_, POLLIN, 0};
        ::poll(&fd, 1, 10);
      }
    }
  }

  // Clean (no receive outstanding, no failure): every connected peer gets a closing message, then in-flight sends
  // finish and the peers' closing messages arrive, within min(timeout, 10 s) (the peers are progressing while they
  // finish), then a worker flush, then endpoints are force-closed. A peer's closing message says it has received
  // everything it waits for, so no endpoint closes under a peer that still receives from it (closing earlier
  // failed that peer's connection, "Endpoint timeout", when ranks were threads of one process). Otherwise
  // receives may be posted into buffers the caller is about to free: receives are cancelled first, then every
  // endpoint is force-closed, which fails the requests still queued on it (sends to a dead peer, rendezvous
  // receives), and only then is the worker destroyed. UCX requires an endpoint's request list to be empty when it
  // is destroyed (ucp_worker_destroy with a send still queued to a dead peer asserts in ucp_ep_destroy_base).
  void teardown() {
    if (worker_ != nullptr) {
      if (recvs_.empty() && !failed()) {
        const double grace_s = std::min(timeout_s_, 10.0);
        exchangeClosingMessages();
        progressUntil([&] { return sendsSettled() && closingSettled(); }, grace_s);
        ucp_request_param_t params{};
        const ucs_status_ptr_t flush = ucp_worker_flush_nbx(worker_, &params);
        if (flush != nullptr && !UCS_PTR_IS_ERR(flush)) {
          progressUntil([&] { return ucp_request_check_status(flush) != UCS_INPROGRESS; }, grace_s);
          if (ucp_request_check_status(flush) != UCS_INPROGRESS) ucp_request_free(flush);
        }
      } else {
        for (auto& [raw, op] : recvs_) {
          if (op->request != nullptr && !op->finished) ucp_request_cancel(worker_, op->request);
        }
      }
      for (ClosingRecv& closing : closing_) {
        if (closing.request != nullptr && !closing.finished) ucp_request_cancel(worker_, closing.request);
      }
      forceCloseEndpoints();
      if (address_ != nullptr) ucp_worker_release_address(worker_, address_);
      ucp_worker_destroy(worker_);  // destroys the endpoints still open
      worker_ = nullptr;
    }
    if (context_ != nullptr) ucp_cleanup(context_);
    context_ = nullptr;
  }

  // Sends a zero-byte closing message (tag closingTag(rank_)) to every peer this endpoint sent to or received
  // from, and posts the receive of the closing message of every peer it sent to (the ones that may still be
  // receiving). Peers it never talked to are left alone: nothing is in flight between them, and a first message
  // to a peer that is closing (a new TCP connection) can trip UCX 1.13's TCP transport (assertion
  // "ep->conn_state != UCT_TCP_EP_CONN_STATE_CLOSED" in tcp_iface.c: 4 of 30 runs of the timeout test).
  void exchangeClosingMessages() {
    closing_.assign(static_cast<size_t>(size_), ClosingRecv{});
    for (int p = 0; p < size_; ++p) {
      const size_t peer = static_cast<size_t>(p);
      ClosingRecv& closing = closing_[peer];
      closing.finished = true;
      if (p == rank_ || endpoints_[peer] == nullptr || !peer_failure_[peer].isOk() ||
          !(sent_to_[peer] || received_from_[peer])) {
        continue;
      }
      ucp_request_param_t send_params{};
      send_params.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK;
      send_params.cb.send = [](void* request, ucs_status_t, void*) { ucp_request_free(request); };
      const ucs_status_ptr_t sent = ucp_tag_send_nbx(endpoints_[peer], &dummy_, 0, closingTag(rank_), &send_params);
      if (UCS_PTR_IS_ERR(sent) || !sent_to_[peer]) continue;  // the endpoint failed, or nothing to wait for
      ucp_request_param_t recv_params{};
      recv_params.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
      recv_params.cb.recv = [](void* request, ucs_status_t, const ucp_tag_recv_info_t*, void* user_data) {
        auto* done = static_cast<ClosingRecv*>(user_data);
        done->request = nullptr;
        done->finished = true;
        ucp_request_free(request);
      };
      recv_params.user_data = &closing;
      closing.finished = false;
      const ucs_status_ptr_t received =
          ucp_tag_recv_nbx(worker_, &closing_dummy_, 0, closingTag(p), ~uint64_t{0}, &recv_params);
      if (UCS_PTR_IS_ERR(received) || received == nullptr) {
        closing.finished = true;  // the receive failed at once, or completed (no callback then)
      } else if (!closing.finished) {
        closing.request = received;
      }
    }
    last_closing_check_ = std::chrono::steady_clock::now();
  }

  // Every peer's closing message arrived, or its endpoint failed, or it lives in this process and is done with this
  // rank (sameProcessPeerDone), or the bootstrap reports a dead or aborted rank (asked every kClosingCheckMs; a peer
  // that exits without destroying its endpoint sends no closing message).
  bool closingSettled() {
    bool settled = true;
    for (int p = 0; p < static_cast<int>(closing_.size()) && settled; ++p) {
      settled = closing_[static_cast<size_t>(p)].finished || !peer_failure_[static_cast<size_t>(p)].isOk() ||
                sameProcessPeerDone(p);
    }
    if (settled) return true;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_closing_check_ < std::chrono::milliseconds(kClosingCheckMs)) return false;
    last_closing_check_ = now;
    return !bootstrapFailure().isOk();
  }

  // A peer of this process needs nothing more from this rank when its receives matched every message this rank
  // sent it, or when its transport is gone. Its closing message would say the same later, but it comes only when
  // that peer is destroyed, and one thread destroying every rank's communicator in turn destroys it after this one.
  bool sameProcessPeerDone(int p) const {
    if (!same_process_[static_cast<size_t>(p)]) return false;
    const std::shared_ptr<LocalState> peer = local_peers_[static_cast<size_t>(p)].lock();
    return peer == nullptr || peer->received[static_cast<size_t>(rank_)].load(std::memory_order_acquire) >=
                                  messages_to_[static_cast<size_t>(p)];
  }

  // Closes every endpoint in UCP_EP_CLOSE_FLAG_FORCE mode (no flush; requests still queued on it complete with
  // an error), progressing up to 1 s per endpoint for the close to finish.
  void forceCloseEndpoints() {
    for (ucp_ep_h& endpoint : endpoints_) {
      if (endpoint == nullptr) continue;
      ucp_request_param_t close_params{};
      close_params.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      close_params.flags = UCP_EP_CLOSE_FLAG_FORCE;
      const ucs_status_ptr_t close = ucp_ep_close_nbx(endpoint, &close_params);
      if (close != nullptr && !UCS_PTR_IS_ERR(close)) {
        progressUntil([&] { return ucp_request_check_status(close) != UCS_INPROGRESS; }, 1.0);
        if (ucp_request_check_status(close) != UCS_INPROGRESS) ucp_request_free(close);
      }
      endpoint = nullptr;
    }
  }

  // Every in-flight send finished, or its peer's endpoint failed (nothing more will come of it).
  bool sendsSettled() const {
    for (const auto& [raw, send] : in_flight_) {
      if (!send->finished && peer_failure_[static_cast<size_t>(send->conn->peer)].isOk()) return false;
    }
    return true;
  }

  Bootstrap& bootstrap_;
  const int fifo_depth_;
  std::optional<std::chrono::steady_clock::time_point> endpoint_failure_seen_;  // see peerFailures()
  // progressThread().mutex() guards the worker and everything below; held by every public call and the progress
  // thread.
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_address_t* address_ = nullptr;
  size_t address_length_ = 0;
  int event_fd_ = -1;
  std::vector<PeerContext> peers_;
  std::vector<ucp_ep_h> endpoints_;
  std::vector<Status> peer_failure_;    // by peer: why its endpoint failed
  std::vector<int> waiting_on_;         // by peer: receives posted from it + sends queued to it
  std::vector<uint8_t> sent_to_;        // by peer: a send to it was posted (teardown's closing messages)
  std::vector<uint8_t> received_from_;  // by peer: a receive from it was posted
  std::vector<uint64_t> messages_to_;   // by peer: sends to it posted
  uint64_t token_ = 0;                  // this transport's key in LocalRegistry (0: not registered)
  std::shared_ptr<LocalState> local_state_;
  std::vector<std::weak_ptr<LocalState>> local_peers_;  // by peer in this process: its LocalState
  std::vector<uint8_t> same_process_;                   // by peer: it lives in this process
  std::unordered_map<uint64_t, std::unique_ptr<SendConn>> send_conns_;
  std::unordered_map<uint64_t, uint64_t> recv_sequence_;  // (peer, channel) -> receives posted
  std::unordered_map<InFlightSend*, std::unique_ptr<InFlightSend>> in_flight_;
  std::unordered_map<RecvOp*, std::unique_ptr<RecvOp>> recvs_;
  std::vector<InFlightSend*> finished_sends_;  // filled by callbacks during ucp_worker_progress
  std::vector<RecvOp*> finished_recvs_;
  uint8_t dummy_ = 0;                 // buffer of zero-byte messages
  std::vector<ClosingRecv> closing_;  // by peer (teardown)
  uint8_t closing_dummy_ = 0;         // buffer of the closing messages' receives
  std::chrono::steady_clock::time_point last_closing_check_;
};

}  // namespace
}  // namespace ucx

Result<std::unique_ptr<DataTransport>> createUcxTransport(Bootstrap& bootstrap, const TransportOptions& options) {
  auto transport = std::make_unique<ucx::UcxTransport>(bootstrap, options);
  BRAID_RETURN_IF_ERROR(transport->setup());
  return std::unique_ptr<DataTransport>(std::move(transport));
}

#else

Result<std::unique_ptr<DataTransport>> createUcxTransport(Bootstrap& bootstrap, const TransportOptions& options) {
  (void)bootstrap;
  (void)options;
  return unsupported("built without UCX");
}

#endif

}  // namespace braid
