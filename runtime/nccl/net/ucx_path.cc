// The UCX data path (net/ucx_path.h): the process's ucp context, a worker per comm, tag messages, a progress thread.
#include "net/ucx_path.h"

#include <fmt/format.h>

#ifdef BRAID_HAVE_UCX
#include <poll.h>
#include <sys/eventfd.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ucx/ucx_init.h"
#endif

#include "common/plugin_log.h"

namespace braid::nccl_plugin {

#ifdef BRAID_HAVE_UCX

/// Owns the ucp context (ucp_cleanup when the last holder lets go).
class UcxContext {
 public:
  explicit UcxContext(ucp_context_h context) : context_(context) {}
  ~UcxContext() { ucp_cleanup(context_); }
  UcxContext(const UcxContext&) = delete;
  UcxContext& operator=(const UcxContext&) = delete;
  ucp_context_h get() const { return context_; }
  /// Set after an endpoint could not be created with peer-failure handling (UCX_TLS allows no transport that has
  /// it): later endpoints go without at once (UCX logs an ERROR line for each refused attempt).
  std::atomic<bool> no_peer_failure_handling{false};

 private:
  ucp_context_h context_;
};

namespace {

constexpr int64_t kOwnerIdleNs = 1000 * 1000;           // the progress thread steps in after the owner was away 1 ms
constexpr int64_t kRecentOwnerNs = 1000 * 1000 * 1000;  // within 1 s of the owner's last call it looks every 10 ms
constexpr int kBusyPollMs = 10;
constexpr int kIdlePollMs = 100;       // otherwise it sleeps on the worker's event fd at most this long
constexpr int kProgressRounds = 64;    // most ucp_worker_progress calls before the mutex is released
constexpr double kReleaseWaitS = 1.0;  // shutdown: longest wait for UCX to complete what it holds

std::string ucxText(const std::string& what, ucs_status_t status) {
  return fmt::format("{}: {}", what, ucs_status_string(status));
}

std::mutex& contextMutex() {
  static std::mutex mutex;
  return mutex;
}

// The process's context while someone holds it.
std::weak_ptr<UcxContext>& sharedContext() {
  static std::weak_ptr<UcxContext> context;
  return context;
}

// The context (one at a time per process, UCM's memory events off unless UCX_MEM_EVENTS is set: ucx/ucx_init.h).
// Caller holds contextMutex().
Result<std::shared_ptr<UcxContext>> createContext() {
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 1;  // every comm's worker may live in another thread of NCCL's
  ucp_context_h context = nullptr;
  const char* failed_call = nullptr;
  const ucs_status_t status = ucx::initContext(params, &context, &failed_call);
  if (status != UCS_OK) {
    const char* tls = std::getenv("UCX_TLS");
    return Status(
        StatusCode::kSystemError,
        ucxText(fmt::format("NET/Braid: {} (UCX_TLS={})", failed_call, tls != nullptr ? tls : "unset"), status));
  }
  return std::make_shared<UcxContext>(context);
}

class UcxDataPath;

// The data paths whose progress thread runs. A process that exits with comms open (an application that never
// destroys its NCCL communicators) stops them from this library's destructor (stopProgressAtExit), which runs
// before libucs's own (libucs is a dependency, finalized after its dependents): no progress thread is inside UCX
// while UCX tears down its globals. Never destroyed, so it outlives every static destructor.
std::mutex& runningMutex() {
  static auto* mutex = new std::mutex;
  return *mutex;
}
std::vector<UcxDataPath*>& runningPaths() {
  static auto* paths = new std::vector<UcxDataPath*>;
  return *paths;
}

// Removes `path` from the running ones; true when it was there (the caller then joins its thread).
bool takeRunning(UcxDataPath* path) {
  std::lock_guard<std::mutex> lock(runningMutex());
  std::vector<UcxDataPath*>& paths = runningPaths();
  const auto it = std::find(paths.begin(), paths.end(), path);
  if (it == paths.end()) return false;
  paths.erase(it);
  return true;
}

class UcxDataPath final : public DataPath {
 public:
  UcxDataPath(bool sending, std::shared_ptr<UcxContext> context, double idle_timeout_s, std::string peer)
      : DataPath(sending, idle_timeout_s), context_(std::move(context)), peer_(std::move(peer)) {}

  ~UcxDataPath() override {
    shutdown();
    if (wake_fd_ >= 0) close(wake_fd_);
  }

  // The worker (UCS_THREAD_MODE_SERIALIZED), its address and event fd, the progress thread.
  Status start() {
    ucp_worker_params_t params{};
    params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    params.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // the owner and the progress thread, under mutex_
    ucs_status_t status = ucp_worker_create(context_->get(), &params, &worker_);
    if (status != UCS_OK) {
      worker_ = nullptr;
      return Status(StatusCode::kSystemError, ucxText("NET/Braid: ucp_worker_create for " + peer_, status));
    }
    if (ucp_worker_get_efd(worker_, &event_fd_) != UCS_OK) event_fd_ = -1;  // the thread then looks every 10 ms
    ucp_address_t* address = nullptr;
    size_t length = 0;
    status = ucp_worker_get_address(worker_, &address, &length);
    if (status != UCS_OK) {
      return Status(StatusCode::kSystemError, ucxText("NET/Braid: ucp_worker_get_address for " + peer_, status));
    }
    address_.assign(reinterpret_cast<const char*>(address), length);
    ucp_worker_release_address(worker_, address);
    wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd_ < 0) return Status(StatusCode::kSystemError, "NET/Braid: eventfd: " + net::errnoText(errno));
    owner_ns_.store(nowNs());
    std::lock_guard<std::mutex> lock(runningMutex());
    thread_pid_ = getpid();
    thread_ = std::thread([this] { run(); });
    runningPaths().push_back(this);
    return Status::ok();
  }

  // Stops and joins the progress thread; whoever took this path from the running ones (takeRunning) calls it. In
  // a child forked after start() the thread does not exist: nothing to stop there.
  void stopThread() {
    if (thread_pid_ != getpid()) {
      thread_.detach();
      return;
    }
    stop_.store(true);
    wake();
    thread_.join();
  }

  void post(uint64_t seq, char* data, size_t size, std::atomic<int>* pending) override {
    std::lock_guard<std::mutex> lock(mutex_);
    owner_ns_.store(nowNs(), std::memory_order_relaxed);
    if (worker_ == nullptr || size == 0) return;
    pending->fetch_add(1, std::memory_order_acq_rel);
    if (sending() && ep_ == nullptr) {
      waiting_.push_back(Waiting{seq, data, size, pending});  // starts when the endpoint exists
      if (!remote_address_.empty()) connectEndpoint();
      return;
    }
    startOp(seq, data, size, pending);
    reap();
  }

  bool progress() override {
    std::lock_guard<std::mutex> lock(mutex_);
    owner_ns_.store(nowNs(), std::memory_order_relaxed);
    return worker_ != nullptr && progressWorker() > 0;
  }

  std::string localAddress() const override { return address_; }

  // Keeps the receiver's address; the endpoint is created when a send needs it, so a comm that never sends never
  // connects. Measured here: a sender whose close created and flushed its endpoint after the receiver had destroyed
  // its worker got "connect ... failed: Connection refused" and then an assertion in UCX 1.13's TCP transport
  // (tcp_ep.c:478, `!(ep->flags & UCT_TCP_EP_FLAG_CTX_TYPE_TX)`, from ucp_worker_progress) that aborted the
  // process, 1 run in 20 of SilentPeerTimesOut.
  Status connectTo(const std::string& address) override {
    std::lock_guard<std::mutex> lock(mutex_);
    owner_ns_.store(nowNs(), std::memory_order_relaxed);
    if (!sending() || !remote_address_.empty() || address.empty() || worker_ == nullptr) {
      return Status(StatusCode::kInternalError, "NET/Braid: unexpected UCX address record from " + peer_);
    }
    remote_address_ = address;
    if (!waiting_.empty()) connectEndpoint();
    return Status::ok();
  }

  bool drain(double seconds) override {
    std::lock_guard<std::mutex> lock(mutex_);
    owner_ns_.store(nowNs(), std::memory_order_relaxed);
    if (worker_ == nullptr || failed() || flush_.in_flight) return false;
    if (sending() && ep_ == nullptr) return waiting_.empty();  // nothing was ever sent
    ucp_request_param_t params{};
    params.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    params.cb.send = &UcxDataPath::onFlushDone;
    params.user_data = &flush_;
    flush_ = Flush{true, UCS_OK};  // before the call: the callback may run inside it
    // The sender's endpoint: every message it holds delivered; the receiver's worker: its protocol replies sent.
    const ucs_status_ptr_t request =
        sending() ? ucp_ep_flush_nbx(ep_, &params) : ucp_worker_flush_nbx(worker_, &params);
    if (request == nullptr || UCS_PTR_IS_ERR(request)) {
      flush_.in_flight = false;
      return request == nullptr && !failed();
    }
    progressUntil([&] { return !flush_.in_flight || failed(); }, seconds);
    return !flush_.in_flight && flush_.status == UCS_OK && !failed();
  }

  void shutdown() override {
    if (takeRunning(this)) stopThread();
    std::lock_guard<std::mutex> lock(mutex_);
    if (worker_ == nullptr) return;
    closing_ = true;
    waiting_.clear();
    std::vector<void*> receives;  // collected first: a cancel may complete (and free) its request at once
    for (const auto& [raw, op] : ops_) {
      if (!sending() && op->request != nullptr) receives.push_back(op->request);
    }
    for (void* request : receives) ucp_request_cancel(worker_, request);
    bool released = true;
    if (ep_ != nullptr) {
      // Force: no flush, no reply awaited from a peer that may be gone; pending sends complete with an error.
      ucp_request_param_t params{};
      params.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      params.flags = UCP_EP_CLOSE_FLAG_FORCE;
      const ucs_status_ptr_t close_request = ucp_ep_close_nbx(ep_, &params);
      ep_ = nullptr;
      if (close_request != nullptr && !UCS_PTR_IS_ERR(close_request)) {
        progressUntil([&] { return ucp_request_check_status(close_request) != UCS_INPROGRESS; }, kReleaseWaitS);
        released = ucp_request_check_status(close_request) != UCS_INPROGRESS;
        if (released) ucp_request_free(close_request);
      }
    }
    released = progressUntil([&] { return ops_.empty() && !flush_.in_flight; }, kReleaseWaitS) && released;
    if (!released) {
      // Destroying a worker under a request UCX still holds can assert in UCX, which would abort NCCL's process:
      // leave the worker (and the context it uses) alive instead.
      BRAID_PLUGIN_LOG(kLogWarn, kSubsysNet,
                       "NET/Braid: UCX did not complete {} request(s) of the connection with {} within {:g} s of its "
                       "close; its worker is left allocated",
                       ops_.size(), peer_, kReleaseWaitS);
      new std::shared_ptr<UcxContext>(context_);  // deliberately never released
      worker_ = nullptr;
      return;
    }
    ucp_worker_destroy(worker_);
    worker_ = nullptr;
  }

 private:
  // One ucp request (a send, or a receive of `bytes`) until its callback ran and reap() accounted for it.
  struct Op {
    UcxDataPath* self = nullptr;
    uint64_t seq = 0;
    size_t bytes = 0;
    std::atomic<int>* pending = nullptr;
    void* request = nullptr;  // while UCX holds it
    bool finished = false;    // the callback ran
    ucs_status_t status = UCS_OK;
    size_t length = 0;  // receive: the message's length
  };
  // A send posted before the endpoint exists.
  struct Waiting {
    uint64_t seq;
    char* data;
    size_t size;
    std::atomic<int>* pending;
  };
  struct Flush {
    bool in_flight = false;
    ucs_status_t status = UCS_OK;
  };

  // Creates the endpoint to remote_address_ (with peer-failure handling where UCX_TLS allows) and starts the sends
  // that waited for it; a failure fails the comm. Caller holds mutex_.
  void connectEndpoint() {
    ucp_ep_params_t params{};
    params.field_mask =
        UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address = reinterpret_cast<const ucp_address_t*>(remote_address_.data());
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = &UcxDataPath::onEndpointError;
    params.err_handler.arg = this;
    const bool without = context_->no_peer_failure_handling.load();
    ucs_status_t status = without ? UCS_ERR_UNREACHABLE : ucp_ep_create(worker_, &params, &ep_);
    if (status == UCS_ERR_UNREACHABLE) {
      // No transport UCX_TLS allows handles peer failures (UCX 1.13's shared-memory ones): connect without; the
      // control connection's EOF tells of a dead receiver.
      params.field_mask &=
          ~static_cast<uint64_t>(UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER);
      status = ucp_ep_create(worker_, &params, &ep_);
      if (status == UCS_OK && !without) {
        context_->no_peer_failure_handling.store(true);
        BRAID_PLUGIN_LOG(kLogInfo, kSubsysNet,
                         "NET/Braid: no transport in UCX_TLS handles peer failures (towards {}): UCX endpoints are "
                         "created without (a dead peer is seen on the control connection)",
                         peer_);
      }
    }
    if (status != UCS_OK) {
      ep_ = nullptr;
      fail(StatusCode::kSystemError, ucxText("NET/Braid: ucp_ep_create to " + peer_, status));
      return;
    }
    for (const Waiting& w : waiting_) startOp(w.seq, w.data, w.size, w.pending);
    waiting_.clear();
    reap();
  }

  // Starts the send or receive of message `seq`. Caller holds mutex_.
  void startOp(uint64_t seq, char* data, size_t size, std::atomic<int>* pending) {
    auto owned = std::make_unique<Op>();
    Op* op = owned.get();
    op->self = this;
    op->seq = seq;
    op->bytes = size;
    op->pending = pending;
    ops_.emplace(op, std::move(owned));
    ucp_request_param_t params{};
    // Always through the callback (it may run before the call returns): the receive's length is in its info.
    params.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    params.user_data = op;
    ucs_status_ptr_t request;
    if (sending()) {
      params.cb.send = &UcxDataPath::onSendDone;
      request = ucp_tag_send_nbx(ep_, data, size, seq, &params);
    } else {
      params.cb.recv = &UcxDataPath::onRecvDone;
      request = ucp_tag_recv_nbx(worker_, data, size, seq, ~uint64_t{0}, &params);
    }
    if (UCS_PTR_IS_ERR(request)) {
      op->status = UCS_PTR_STATUS(request);
      op->finished = true;
      finished_.push_back(op);
    } else if (!op->finished) {
      op->request = request;
    }
  }

  // Accounts for the requests whose callbacks ran: lowers their `pending`, or fails the comm. Caller holds mutex_.
  void reap() {
    for (Op* op : finished_) {
      if (op->status == UCS_OK && (sending() || op->length == op->bytes)) {
        op->pending->fetch_sub(1, std::memory_order_acq_rel);
        touch();
      } else if (!closing_ && op->status == UCS_OK) {
        fail(StatusCode::kSystemError,
             fmt::format("NET/Braid: message {} from {} has {} B through UCX but its header announced {} B", op->seq,
                         peer_, op->length, op->bytes));
      } else if (!closing_) {
        fail(StatusCode::kSystemError,
             ucxText(fmt::format("NET/Braid: UCX {} of message {} ({} B) {} {} (its process exited?)",
                                 sending() ? "send" : "receive", op->seq, op->bytes, sending() ? "to" : "from", peer_),
                     op->status));
      }
      ops_.erase(op);
    }
    finished_.clear();
  }

  // Progresses the worker up to kProgressRounds times; the number of calls that did something. Caller holds mutex_.
  int progressWorker() {
    int busy = 0;
    while (busy < kProgressRounds && ucp_worker_progress(worker_) != 0) ++busy;
    if (busy > 0 && !ops_.empty()) touch();
    reap();
    return busy;
  }

  // Progresses (sleeping on the event fd when idle) until done() or `seconds` passed; done(). Caller holds mutex_.
  template <class Done>
  bool progressUntil(Done done, double seconds) {
    const int64_t end = nowNs() + static_cast<int64_t>(seconds * 1e9);
    while (!done() && nowNs() < end) {
      if (progressWorker() > 0 || done()) continue;
      if (event_fd_ >= 0 && ucp_worker_arm(worker_) == UCS_OK) {
        pollfd fd{event_fd_, POLLIN, 0};
        ::poll(&fd, 1, 10);
      }
    }
    return done();
  }

  void wake() {
    const uint64_t one = 1;
    ssize_t ignored = write(wake_fd_, &one, sizeof(one));
    (void)ignored;
  }

  // The progress thread (net/ucx_path.h "Progress").
  void run() {
    while (!stop_.load()) {
      const int64_t away_ns = nowNs() - owner_ns_.load(std::memory_order_relaxed);
      int sleep_ms = 1;
      bool use_efd = false;
      if (away_ns >= kOwnerIdleNs) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (worker_ == nullptr) return;
        if (progressWorker() == kProgressRounds) continue;  // busy: look again at once
        const ucs_status_t armed = event_fd_ >= 0 ? ucp_worker_arm(worker_) : UCS_ERR_UNSUPPORTED;
        if (armed == UCS_ERR_BUSY) continue;  // events arrived meanwhile
        use_efd = armed == UCS_OK;
        sleep_ms = use_efd && away_ns > kRecentOwnerNs ? kIdlePollMs : kBusyPollMs;
      }
      pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {use_efd ? event_fd_ : -1, POLLIN, 0}};
      if (::poll(fds, 2, sleep_ms) > 0 && (fds[0].revents & POLLIN) != 0) {
        uint64_t count;
        ssize_t ignored = read(wake_fd_, &count, sizeof(count));
        (void)ignored;
      }
    }
  }

  // What both completion callbacks do (UCX calls them from ucp_worker_progress, under mutex_): the op is finished,
  // the ucp request freed.
  static void finish(Op* op, ucs_status_t status, void* request) {
    op->status = status;
    op->request = nullptr;
    op->finished = true;
    op->self->finished_.push_back(op);
    ucp_request_free(request);
  }

  static void onSendDone(void* request, ucs_status_t status, void* user_data) {
    finish(static_cast<Op*>(user_data), status, request);
  }

  static void onRecvDone(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user_data) {
    auto* op = static_cast<Op*>(user_data);
    if (info != nullptr) op->length = info->length;
    finish(op, status, request);
  }

  static void onFlushDone(void* request, ucs_status_t status, void* user_data) {
    auto* flush = static_cast<Flush*>(user_data);
    flush->status = status;
    flush->in_flight = false;
    ucp_request_free(request);
  }

  static void onEndpointError(void* arg, ucp_ep_h, ucs_status_t status) {
    auto* self = static_cast<UcxDataPath*>(arg);
    self->fail(
        StatusCode::kSystemError,
        ucxText("NET/Braid: UCX endpoint to " + self->peer_ + " failed (the receiver's process exited?)", status));
  }

  std::shared_ptr<UcxContext> context_;
  std::string peer_;
  std::string address_;  // this worker's address (set by start(), then constant)
  int event_fd_ = -1;
  int wake_fd_ = -1;
  std::atomic<int64_t> owner_ns_{0};  // the owner's last call
  std::atomic<bool> stop_{false};
  std::thread thread_;
  pid_t thread_pid_ = 0;  // the process that started thread_
  std::mutex mutex_;      // serializes the worker: guards everything below
  ucp_worker_h worker_ = nullptr;
  ucp_ep_h ep_ = nullptr;
  std::string remote_address_;  // sender: the receiver's worker address, once it arrived
  std::deque<Waiting> waiting_;
  std::unordered_map<Op*, std::unique_ptr<Op>> ops_;
  std::vector<Op*> finished_;  // filled by callbacks
  Flush flush_;
  bool closing_ = false;  // shutdown: requests completing with an error are expected
};

// At process exit (this library's .fini_array; see runningPaths): the progress threads still running stop.
__attribute__((destructor)) void stopProgressAtExit() {
  std::vector<UcxDataPath*> paths;
  {
    std::lock_guard<std::mutex> lock(runningMutex());
    paths.swap(runningPaths());
  }
  for (UcxDataPath* path : paths) path->stopThread();
}

}  // namespace

bool ucxBuilt() { return true; }

Result<std::shared_ptr<UcxContext>> acquireUcxContext() {
  std::lock_guard<std::mutex> lock(contextMutex());
  if (std::shared_ptr<UcxContext> existing = sharedContext().lock()) return existing;
  BRAID_ASSIGN_OR_RETURN(std::shared_ptr<UcxContext> created, createContext());
  sharedContext() = created;
  return created;
}

Result<std::unique_ptr<DataPath>> makeUcxDataPath(bool sending, std::shared_ptr<UcxContext> context,
                                                  double idle_timeout_s, const std::string& peer) {
  if (context == nullptr) return Status(StatusCode::kInternalError, "NET/Braid: UCX data path without a context");
  auto path = std::make_unique<UcxDataPath>(sending, std::move(context), idle_timeout_s, peer);
  BRAID_RETURN_IF_ERROR(path->start());
  return std::unique_ptr<DataPath>(std::move(path));
}

#else  // !BRAID_HAVE_UCX

class UcxContext {};

namespace {
Status withoutUcx() {
  return Status(StatusCode::kInvalidUsage,
                "NET/Braid: BRAID_NET_TRANSPORT=ucx, but this libnccl-net-braid.so was built without UCX (configure "
                "Braid where UCX >= 1.13 is installed, e.g. Debian's libucx-dev; BRAID_WITH_UCX=AUTO or ON); use "
                "BRAID_NET_TRANSPORT=tcp");
}
}  // namespace

bool ucxBuilt() { return false; }

Result<std::shared_ptr<UcxContext>> acquireUcxContext() { return withoutUcx(); }

Result<std::unique_ptr<DataPath>> makeUcxDataPath(bool, std::shared_ptr<UcxContext>, double, const std::string&) {
  return withoutUcx();
}

#endif

}  // namespace braid::nccl_plugin
