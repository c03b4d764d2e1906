#include "transport/cuda/cuda_transport.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "braid/cuda.h"
#include "braid/transports.h"
#include "common/env.h"
#include "cuda/cuda_check.h"
#include "cuda/kernels.h"
#include "transport/endpoint_base.h"
#include "transport/endpoint_common.h"

#ifdef BRAID_HAVE_NCCL
#include <nccl.h>
#endif

namespace braid {

#ifdef BRAID_HAVE_NCCL
namespace {

using cuda_transport::ControlMessage;
using cuda_transport::ControlType;
using cuda_transport::kControlSlots;
using cuda_transport::kMaxSleepUs;

constexpr const char* kName = "cuda";

/// An NCCL result as a Status naming the call and, where NCCL kept one, its last error text.
Status ncclStatus(ncclResult_t result, const std::string& what, ncclComm_t comm = nullptr) {
  if (result == ncclSuccess) return Status::ok();
  const char* last = ncclGetLastError(comm);
  StatusCode code = StatusCode::kInternalError;
  switch (result) {
    case ncclUnhandledCudaError: code = StatusCode::kUnhandledCudaError; break;
    case ncclSystemError: code = StatusCode::kSystemError; break;
    case ncclInvalidArgument: code = StatusCode::kInvalidArgument; break;
    case ncclInvalidUsage: code = StatusCode::kInvalidUsage; break;
    case ncclRemoteError: code = StatusCode::kRemoteError; break;
    default: break;
  }
  return Status(code, fmt::format("{}: {}{}{}", what, ncclGetErrorString(result),
                                  last != nullptr && *last != '\0' ? ": " : "", last != nullptr ? last : ""));
}

/// CUDA events for completions, reused.
class EventPool {
 public:
  ~EventPool() {
    for (cudaEvent_t e : free_) (void)cudaEventDestroy(e);
  }
  Result<cudaEvent_t> get() {
    if (!free_.empty()) {
      cudaEvent_t e = free_.back();
      free_.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    BRAID_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }
  void put(cudaEvent_t e) {
    if (e != nullptr) free_.push_back(e);
  }

 private:
  std::vector<cudaEvent_t> free_;
};

/// Whether `event` has completed: ok(true), ok(false) while pending, or the CUDA error it reports. A pending
/// event's cudaErrorNotReady is taken off the thread's last-error record, where a later cudaGetLastError (ours or
/// the application's, on this thread) would read it as a failure.
Result<bool> eventDone(cudaEvent_t event, const char* what) {
  const cudaError_t state = cudaEventQuery(event);
  if (state == cudaSuccess) return true;
  if (state == cudaErrorNotReady) {
    if (cudaPeekAtLastError() == cudaErrorNotReady) (void)cudaGetLastError();
    return false;
  }
  return cuda::cudaStatus(state, std::string("cuda: ") + what);
}

class CudaEndpoint final : public EndpointBase {
 public:
  CudaEndpoint(const Config& config, Bootstrap& bootstrap, const CudaTransportOptions& options)
      : EndpointBase(config),
        bootstrap_(bootstrap),
        options_(options),
        fifo_depth_(static_cast<uint32_t>(std::max(1, options.base.fifo_depth))),
        spin_us_(endpointSpinMicroseconds(options.base, 1)),
        peers_(static_cast<size_t>(config.size)) {}

  ~CudaEndpoint() override { shutdown(); }

  Status setup();

  /// The transport's streams wait for the work enqueued on `stream` so far.
  Status beginCollective(cudaStream_t stream) {
    BRAID_RETURN_IF_ERROR(failure());
    BRAID_RETURN_IF_ERROR(useDevice());
    BRAID_ASSIGN_OR_RETURN(cudaEvent_t event, events_.get());
    Status status = cuda::cudaStatus(cudaEventRecord(event, stream), "cuda: cudaEventRecord on the caller's stream");
    for (cudaStream_t s : internalStreams()) {
      if (status.isOk()) status = cuda::cudaStatus(cudaStreamWaitEvent(s, event, 0), "cuda: cudaStreamWaitEvent");
    }
    events_.put(event);  // a wait uses the event's state when enqueued: it may be recorded again
    return status;
  }

  /// `stream` waits for everything enqueued on the transport's streams so far.
  Status endCollective(cudaStream_t stream) {
    BRAID_RETURN_IF_ERROR(useDevice());
    for (cudaStream_t s : internalStreams()) {
      BRAID_ASSIGN_OR_RETURN(cudaEvent_t event, events_.get());
      const Status status = cuda::cudaStatus(cudaEventRecord(event, s), "cuda: cudaEventRecord");
      if (status.isOk()) {
        BRAID_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream, event, 0));
      }
      events_.put(event);
      BRAID_RETURN_IF_ERROR(status);
    }
    return Status::ok();
  }

 protected:
  Status startSend(const SendRequest& request, const uint8_t* src, RequestId id) override;
  Status startRecv(const RecvRequest& request, uint8_t* dst, RequestId id) override;
  Status startLocal(const LocalMemory::Resolved& local, RequestId id) override;
  Status progress() override;
  Status waitForCompletion() override;
  void tellPeersOfAbort(const Status& reason) override;

 private:
  /// An operation on a stream that completes request `id` (0: none) when `event` has.
  struct OnDevice {
    cudaEvent_t event = nullptr;
    RequestId id = 0;
    int channel = 0;
    uint64_t bytes = 0;
  };
  /// A send waiting for a staging credit of its channel.
  struct Held {
    RequestId id = 0;
    const uint8_t* src = nullptr;
    uint64_t bytes = 0;
  };
  /// A send staged and announced (or being): complete once its copy finished and its announcement left.
  struct Staged {
    RequestId id = 0;
    int peer = 0;
    int channel = 0;
    cudaEvent_t copy_event = nullptr;  // null: nothing to copy (zero bytes)
    RequestId control_id = 0;          // 0: not handed to the control transport yet
    bool announced = false;
  };
  /// A receive posted and not matched to an announced message yet.
  struct Posted {
    RequestId id = 0;
    uint8_t* dst = nullptr;
    uint64_t bytes = 0;
  };
  /// An announced message with no receive posted when it was announced: received into staging.
  struct Unexpected {
    uint8_t* staging = nullptr;
    uint64_t bytes = 0;
    cudaEvent_t received = nullptr;  // after the ncclRecv into staging
  };
  struct Peer {
    ncclComm_t send_comm = nullptr;  // this rank -> peer; NCCL rank 0 is the sender
    ncclComm_t recv_comm = nullptr;  // peer -> this rank
    cudaStream_t send_stream = nullptr;
    cudaStream_t recv_stream = nullptr;
    std::map<int, std::deque<Held>> held;              // per channel
    std::map<int, uint32_t> credits_used;              // per channel: staged messages the peer has not received yet
    std::deque<OnDevice> sends_on_device;              // ncclSends, in enqueue order
    std::deque<ControlMessage> to_announce;            // announcements waiting for a control slot, in order
    std::map<int, std::deque<Posted>> posted;          // per channel
    std::map<int, std::deque<Unexpected>> unexpected;  // per channel
    std::deque<OnDevice> recvs_on_device;              // ncclRecvs into posted receives, in enqueue order
    RequestId control_recv = 0;
  };

  Status useDevice() const {
    const cudaError_t error = cudaSetDevice(device_);
    if (error == cudaSuccess) return Status::ok();
    return cuda::cudaStatus(error, fmt::format("cuda: rank {}: cudaSetDevice({})", rank_, device_));
  }
  std::vector<cudaStream_t> internalStreams() const {
    std::vector<cudaStream_t> streams{local_stream_, staging_stream_};
    for (const Peer& p : peers_) {
      if (p.send_stream != nullptr) streams.push_back(p.send_stream);
      if (p.recv_stream != nullptr) streams.push_back(p.recv_stream);
    }
    return streams;
  }
  std::string connection(int from, int to, int channel) const {
    return fmt::format("rank {} -> rank {} channel {}", from, to, channel);
  }

  Status stageSend(int peer, int channel, const Held& send);
  Status announce(int peer, const ControlMessage& message, RequestId* control_id);
  Status postAnnouncement(int peer, const ControlMessage& message, RequestId* control_id);
  Status flushAnnouncements(int peer);
  Status onAnnouncement(int peer, const ControlMessage& message);
  Status postControlRecv(int peer);
  Status pollControl();
  Status pollDevice();
  Status checkNcclErrors();
  std::string waitingFor() const;
  void shutdown();

  Bootstrap& bootstrap_;
  const CudaTransportOptions options_;
  const uint32_t fifo_depth_;
  const double spin_us_;
  int device_ = -1;
  std::unique_ptr<DataTransport> control_;
  std::vector<ControlMessage> control_out_;  // send slots
  std::vector<ControlMessage> control_in_;   // one receive slot per peer
  std::vector<uint32_t> free_slots_;
  std::map<RequestId, uint32_t> control_sends_;  // control request -> slot
  std::map<RequestId, int> control_recvs_;       // control request -> peer
  std::vector<Peer> peers_;
  cudaStream_t local_stream_ = nullptr;
  cudaStream_t staging_stream_ = nullptr;
  cudaMemPool_t pool_ = nullptr;
  EventPool events_;
  std::deque<OnDevice> local_ops_;  // kernels and staging copies on the local stream, in order
  std::deque<Staged> staged_;       // sends not yet complete, in post order
  bool torn_down_ = false;
};

Status CudaEndpoint::setup() {
  const int n = size_;
  // 1. The device.
  Status status;
  if (options_.device >= 0) {
    device_ = options_.device;
  } else {
    Result<int> chosen = defaultCudaDevice(bootstrap_);
    if (chosen.isOk()) {
      device_ = *chosen;
    } else {
      status = chosen.status();
    }
  }
  if (status.isOk()) status = useDevice();
  BRAID_RETURN_IF_ERROR(agreeOnSetup(bootstrap_, status, kName, "select its CUDA device"));
  // 2. The control transport, over the CPU.
  BRAID_ASSIGN_OR_RETURN(control_, createTransport(TransportKind::kAuto, bootstrap_, options_.base));
  // 3. The NCCL ids of this rank's outgoing pairs (this rank is NCCL rank 0 of each), all-gathered.
  std::vector<ncclUniqueId> ids(static_cast<size_t>(n) * n);
  for (int q = 0; q < n && status.isOk(); ++q) {
    if (q != rank_) status = ncclStatus(ncclGetUniqueId(&ids[rank_ * n + q]), "cuda: ncclGetUniqueId");
  }
  BRAID_RETURN_IF_ERROR(agreeOnSetup(bootstrap_, status, kName, "create NCCL ids"));
  BRAID_RETURN_IF_ERROR(bootstrap_.allGather(ids.data(), sizeof(ncclUniqueId) * n));
  // 4. Every communicator of this rank in one group: NCCL initialises them in parallel, so the order in which
  // ranks reach their pairs does not matter.
  status = ncclStatus(ncclGroupStart(), "cuda: ncclGroupStart");
  for (int q = 0; q < n && status.isOk(); ++q) {
    if (q == rank_) continue;
    status = ncclStatus(ncclCommInitRank(&peers_[q].send_comm, 2, ids[rank_ * n + q], 0),
                        fmt::format("cuda: ncclCommInitRank for rank {} -> rank {}", rank_, q));
    if (status.isOk()) {
      status = ncclStatus(ncclCommInitRank(&peers_[q].recv_comm, 2, ids[q * n + rank_], 1),
                          fmt::format("cuda: ncclCommInitRank for rank {} -> rank {}", q, rank_));
    }
  }
  const Status ended = ncclStatus(ncclGroupEnd(), "cuda: ncclGroupEnd (communicator initialisation)");
  if (status.isOk()) status = ended;
  BRAID_RETURN_IF_ERROR(agreeOnSetup(bootstrap_, status, kName, "initialise its NCCL communicators"));
  // 5. Streams, the staging pool, the control buffers and their receives.
  const auto stream = [&](cudaStream_t* s) {
    if (status.isOk()) {
      status = cuda::cudaStatus(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking), "cuda: cudaStreamCreate");
    }
  };
  stream(&local_stream_);
  stream(&staging_stream_);
  for (int q = 0; q < n; ++q) {
    if (q == rank_) continue;
    stream(&peers_[q].send_stream);
    stream(&peers_[q].recv_stream);
  }
  if (status.isOk()) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device_;
    status = cuda::cudaStatus(cudaMemPoolCreate(&pool_, &props), "cuda: cudaMemPoolCreate");
    uint64_t keep = UINT64_MAX;  // staging is reused, never returned to the driver while the endpoint lives
    if (status.isOk()) {
      status = cuda::cudaStatus(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep),
                                "cuda: cudaMemPoolSetAttribute");
    }
  }
  control_out_.resize(kControlSlots);
  control_in_.resize(static_cast<size_t>(n));
  for (uint32_t s = 0; s < kControlSlots; ++s) free_slots_.push_back(kControlSlots - 1 - s);
  if (status.isOk()) {
    RankMemory memory;
    memory.input = control_out_.data();
    memory.input_bytes = control_out_.size() * sizeof(ControlMessage);
    memory.output = control_in_.data();
    memory.output_bytes = control_in_.size() * sizeof(ControlMessage);
    status = control_->bind(rank_, memory, ReduceSpec{});
  }
  for (int q = 0; q < n && status.isOk(); ++q) {
    if (q != rank_) status = postControlRecv(q);
  }
  return agreeOnSetup(bootstrap_, status, kName, "create its streams and control buffers");
}

Status CudaEndpoint::postControlRecv(int peer) {
  RecvRequest request;
  request.rank = rank_;
  request.peer = peer;
  request.channel = 0;
  request.dst =
      BufferRef{BufferKind::kOutput, static_cast<uint64_t>(peer) * sizeof(ControlMessage), sizeof(ControlMessage)};
  BRAID_ASSIGN_OR_RETURN(const RequestId id, control_->postRecv(request));
  peers_[peer].control_recv = id;
  control_recvs_[id] = peer;
  return Status::ok();
}

// Announces `message` to `peer` now when no earlier announcement waits for a control slot (*control_id: its
// control request), else queues it behind them (*control_id = 0; flushAnnouncements sends it).
Status CudaEndpoint::announce(int peer, const ControlMessage& message, RequestId* control_id) {
  Peer& p = peers_[peer];
  *control_id = 0;
  if (!p.to_announce.empty() || free_slots_.empty()) {
    p.to_announce.push_back(message);
    return Status::ok();
  }
  return postAnnouncement(peer, message, control_id);
}

Status CudaEndpoint::postAnnouncement(int peer, const ControlMessage& message, RequestId* control_id) {
  const uint32_t slot = free_slots_.back();
  control_out_[slot] = message;
  SendRequest request;
  request.rank = rank_;
  request.peer = peer;
  request.channel = 0;
  request.src = BufferRef{BufferKind::kInput, uint64_t{slot} * sizeof(ControlMessage), sizeof(ControlMessage)};
  BRAID_ASSIGN_OR_RETURN(const RequestId id, control_->postSend(request));
  free_slots_.pop_back();
  control_sends_[id] = slot;
  *control_id = id;
  return Status::ok();
}

// Announcements that waited for a slot, in order; the staged sends they belong to (the oldest of that peer still
// without a control request) learn their control request.
Status CudaEndpoint::flushAnnouncements(int peer) {
  Peer& p = peers_[peer];
  while (!p.to_announce.empty() && !free_slots_.empty()) {
    RequestId id = 0;
    BRAID_RETURN_IF_ERROR(postAnnouncement(peer, p.to_announce.front(), &id));
    p.to_announce.pop_front();
    for (Staged& s : staged_) {
      if (s.peer == peer && s.control_id == 0) {
        s.control_id = id;
        break;
      }
    }
  }
  return Status::ok();
}

// Copies the send into staging, enqueues its ncclSend after the copy, frees the staging after the send (all
// stream-ordered), and announces it.
Status CudaEndpoint::stageSend(int peer, int channel, const Held& send) {
  Peer& p = peers_[peer];
  Staged staged;
  staged.id = send.id;
  staged.peer = peer;
  staged.channel = channel;
  if (send.bytes > 0) {
    void* staging = nullptr;
    BRAID_CUDA_RETURN_IF_ERROR(cudaMallocFromPoolAsync(&staging, send.bytes, pool_, staging_stream_));
    BRAID_RETURN_IF_ERROR(cuda::launchCopy(staging, send.src, send.bytes, staging_stream_));
    BRAID_ASSIGN_OR_RETURN(staged.copy_event, events_.get());
    BRAID_CUDA_RETURN_IF_ERROR(cudaEventRecord(staged.copy_event, staging_stream_));
    BRAID_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(p.send_stream, staged.copy_event, 0));
    BRAID_RETURN_IF_ERROR(ncclStatus(ncclSend(staging, send.bytes, ncclUint8, 1, p.send_comm, p.send_stream),
                                     fmt::format("cuda: ncclSend {}", connection(rank_, peer, channel)), p.send_comm));
    OnDevice sent;
    BRAID_ASSIGN_OR_RETURN(sent.event, events_.get());
    BRAID_CUDA_RETURN_IF_ERROR(cudaEventRecord(sent.event, p.send_stream));
    BRAID_CUDA_RETURN_IF_ERROR(cudaFreeAsync(staging, p.send_stream));
    sent.channel = channel;
    sent.bytes = send.bytes;
    p.sends_on_device.push_back(sent);
    ++p.credits_used[channel];
  }
  BRAID_RETURN_IF_ERROR(announce(
      peer, ControlMessage{static_cast<uint32_t>(ControlType::kMessage), channel, send.bytes}, &staged.control_id));
  staged_.push_back(staged);
  return Status::ok();
}

Status CudaEndpoint::startSend(const SendRequest& request, const uint8_t* src, RequestId id) {
  BRAID_RETURN_IF_ERROR(useDevice());
  Peer& p = peers_[request.peer];
  const Held send{id, src, request.src.bytes};
  std::deque<Held>& held = p.held[request.channel];
  // Behind held sends of its channel (FIFO per channel), or held itself when the channel has no staging credit
  // (zero-byte messages take none).
  if (!held.empty() || (send.bytes > 0 && p.credits_used[request.channel] >= fifo_depth_)) {
    held.push_back(send);  // staged when the peer has received one of this channel's staged messages
    return Status::ok();
  }
  return fail(stageSend(request.peer, request.channel, send));
}

Status CudaEndpoint::startRecv(const RecvRequest& request, uint8_t* dst, RequestId id) {
  BRAID_RETURN_IF_ERROR(useDevice());
  Peer& p = peers_[request.peer];
  const uint64_t bytes = request.dst.bytes;
  std::deque<Unexpected>& waiting = p.unexpected[request.channel];
  if (waiting.empty()) {
    p.posted[request.channel].push_back(Posted{id, dst, bytes});
    return Status::ok();
  }
  const Unexpected message = waiting.front();
  waiting.pop_front();
  if (message.bytes != bytes) {
    return fail(invalidArgument(fmt::format("{}: {}: a message of {} bytes matched a receive of {} bytes", kName,
                                            connection(request.peer, rank_, request.channel), message.bytes, bytes)));
  }
  if (bytes == 0) {
    complete(id);
    return Status::ok();
  }
  // From staging to dst on the local stream, after the message arrived; the staging is freed after the copy.
  OnDevice copy;
  copy.id = id;
  Status status =
      cuda::cudaStatus(cudaStreamWaitEvent(local_stream_, message.received, 0), "cuda: cudaStreamWaitEvent");
  if (status.isOk()) status = cuda::launchCopy(dst, message.staging, bytes, local_stream_);
  if (status.isOk()) {
    Result<cudaEvent_t> event = events_.get();
    status = event.status();
    if (event.isOk()) {
      copy.event = *event;
      status = cuda::cudaStatus(cudaEventRecord(copy.event, local_stream_), "cuda: cudaEventRecord");
    }
  }
  if (status.isOk()) status = cuda::cudaStatus(cudaFreeAsync(message.staging, local_stream_), "cuda: cudaFreeAsync");
  events_.put(message.received);  // its wait is enqueued
  if (!status.isOk()) return fail(status);
  local_ops_.push_back(copy);
  return Status::ok();
}

Status CudaEndpoint::startLocal(const LocalMemory::Resolved& local, RequestId id) {
  BRAID_RETURN_IF_ERROR(useDevice());
  if (local.bytes == 0 || (!local.reduce && local.src == local.dst)) {
    complete(id);
    return Status::ok();
  }
  if (local.reduce) {
    BRAID_RETURN_IF_ERROR(cuda::launchReduce(local.dst, local.dst, local.src,
                                             local.bytes / dataTypeSize(local.spec.type), local.spec.type,
                                             local.spec.op, local_stream_));
  } else {
    BRAID_RETURN_IF_ERROR(cuda::launchCopy(local.dst, local.src, local.bytes, local_stream_));
  }
  OnDevice op;
  op.id = id;
  BRAID_ASSIGN_OR_RETURN(op.event, events_.get());
  BRAID_RETURN_IF_ERROR(fail(cuda::cudaStatus(cudaEventRecord(op.event, local_stream_), "cuda: cudaEventRecord")));
  local_ops_.push_back(op);
  return Status::ok();
}

// A message `peer` announced: into the first posted receive of its channel, or into staging until one is posted.
Status CudaEndpoint::onAnnouncement(int peer, const ControlMessage& message) {
  if (message.type != static_cast<uint32_t>(ControlType::kMessage) || message.channel < 0) {
    return internalError(fmt::format("{}: rank {}: control message of type {} channel {} from rank {}", kName, rank_,
                                     message.type, message.channel, peer));
  }
  Peer& p = peers_[peer];
  const int channel = message.channel;
  std::deque<Posted>& posted = p.posted[channel];
  if (!posted.empty()) {
    const Posted receive = posted.front();
    posted.pop_front();
    if (receive.bytes != message.bytes) {
      return invalidArgument(fmt::format("{}: {}: a message of {} bytes matched a receive of {} bytes", kName,
                                         connection(peer, rank_, channel), message.bytes, receive.bytes));
    }
    if (receive.bytes == 0) {
      complete(receive.id);
      return Status::ok();
    }
    BRAID_RETURN_IF_ERROR(ncclStatus(ncclRecv(receive.dst, receive.bytes, ncclUint8, 0, p.recv_comm, p.recv_stream),
                                     fmt::format("cuda: ncclRecv {}", connection(peer, rank_, channel)), p.recv_comm));
    OnDevice op;
    op.id = receive.id;
    op.channel = channel;
    op.bytes = receive.bytes;
    BRAID_ASSIGN_OR_RETURN(op.event, events_.get());
    BRAID_CUDA_RETURN_IF_ERROR(cudaEventRecord(op.event, p.recv_stream));
    p.recvs_on_device.push_back(op);
    return Status::ok();
  }
  Unexpected unexpected;
  unexpected.bytes = message.bytes;
  if (message.bytes > 0) {
    void* staging = nullptr;
    BRAID_CUDA_RETURN_IF_ERROR(cudaMallocFromPoolAsync(&staging, message.bytes, pool_, p.recv_stream));
    unexpected.staging = static_cast<uint8_t*>(staging);
    BRAID_RETURN_IF_ERROR(ncclStatus(ncclRecv(staging, message.bytes, ncclUint8, 0, p.recv_comm, p.recv_stream),
                                     fmt::format("cuda: ncclRecv {} into staging", connection(peer, rank_, channel)),
                                     p.recv_comm));
    BRAID_ASSIGN_OR_RETURN(unexpected.received, events_.get());
    BRAID_CUDA_RETURN_IF_ERROR(cudaEventRecord(unexpected.received, p.recv_stream));
  }
  p.unexpected[channel].push_back(unexpected);
  return Status::ok();
}

Status CudaEndpoint::pollControl() {
  std::vector<Completion> done;
  BRAID_RETURN_IF_ERROR(control_->poll(&done, /*block=*/false));
  for (const Completion& c : done) {
    if (auto sent = control_sends_.find(c.id); sent != control_sends_.end()) {
      free_slots_.push_back(sent->second);
      control_sends_.erase(sent);
      for (Staged& s : staged_) {
        if (s.control_id == c.id) {
          s.announced = true;
          break;
        }
      }
      continue;
    }
    auto received = control_recvs_.find(c.id);
    if (received == control_recvs_.end()) continue;
    const int peer = received->second;
    control_recvs_.erase(received);
    const ControlMessage message = control_in_[static_cast<size_t>(peer)];
    BRAID_RETURN_IF_ERROR(onAnnouncement(peer, message));
    BRAID_RETURN_IF_ERROR(postControlRecv(peer));
  }
  for (int q = 0; q < size_; ++q) {
    if (q != rank_) BRAID_RETURN_IF_ERROR(flushAnnouncements(q));
  }
  return Status::ok();
}

Status CudaEndpoint::pollDevice() {
  // Kernels and copies of the local stream, in order.
  while (!local_ops_.empty()) {
    BRAID_ASSIGN_OR_RETURN(const bool done, eventDone(local_ops_.front().event, "a kernel on the local stream"));
    if (!done) break;
    events_.put(local_ops_.front().event);
    complete(local_ops_.front().id);
    local_ops_.pop_front();
  }
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    Peer& p = peers_[q];
    while (!p.recvs_on_device.empty()) {
      BRAID_ASSIGN_OR_RETURN(const bool done, eventDone(p.recvs_on_device.front().event, "an ncclRecv"));
      if (!done) break;
      events_.put(p.recvs_on_device.front().event);
      complete(p.recvs_on_device.front().id);
      p.recvs_on_device.pop_front();
    }
    // Sends the peer received: their channel's credit comes back, and a held send of it is staged.
    while (!p.sends_on_device.empty()) {
      BRAID_ASSIGN_OR_RETURN(const bool done, eventDone(p.sends_on_device.front().event, "an ncclSend"));
      if (!done) break;
      const OnDevice sent = p.sends_on_device.front();
      p.sends_on_device.pop_front();
      events_.put(sent.event);
      --p.credits_used[sent.channel];
      std::deque<Held>& held = p.held[sent.channel];
      while (!held.empty() && (held.front().bytes == 0 || p.credits_used[sent.channel] < fifo_depth_)) {
        const Held next = held.front();
        held.pop_front();
        BRAID_RETURN_IF_ERROR(stageSend(q, sent.channel, next));
      }
    }
  }
  // Staged sends complete in post order once copied and announced (the executor may reuse src).
  while (!staged_.empty()) {
    Staged& s = staged_.front();
    if (s.copy_event != nullptr) {
      BRAID_ASSIGN_OR_RETURN(const bool copied, eventDone(s.copy_event, "a staging copy"));
      if (!copied) break;
      events_.put(s.copy_event);
      s.copy_event = nullptr;
    }
    if (!s.announced) break;
    complete(s.id);
    staged_.pop_front();
  }
  return Status::ok();
}

Status CudaEndpoint::checkNcclErrors() {
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    for (ncclComm_t comm : {peers_[q].send_comm, peers_[q].recv_comm}) {
      if (comm == nullptr) continue;
      ncclResult_t async = ncclSuccess;
      BRAID_RETURN_IF_ERROR(ncclStatus(ncclCommGetAsyncError(comm, &async), "cuda: ncclCommGetAsyncError", comm));
      if (async != ncclSuccess && async != ncclInProgress) {
        return ncclStatus(async, fmt::format("cuda: rank {}: the NCCL communicator with rank {} failed", rank_, q),
                          comm);
      }
    }
  }
  return Status::ok();
}

Status CudaEndpoint::progress() {
  BRAID_RETURN_IF_ERROR(useDevice());
  BRAID_RETURN_IF_ERROR(pollControl());
  return pollDevice();
}

std::string CudaEndpoint::waitingFor() const {
  for (int q = 0; q < size_; ++q) {
    const Peer& p = peers_[q];
    for (const auto& [channel, posted] : p.posted) {
      if (!posted.empty()) {
        return fmt::format("a message of {} bytes from rank {} on channel {} ({} posted)", posted.front().bytes, q,
                           channel, posted.size());
      }
    }
    if (!p.recvs_on_device.empty()) {
      return fmt::format("the ncclRecv of {} bytes from rank {} on channel {}", p.recvs_on_device.front().bytes, q,
                         p.recvs_on_device.front().channel);
    }
    for (const auto& [channel, held] : p.held) {
      if (!held.empty()) {
        return fmt::format("rank {} to receive a staged message on channel {} ({} sends held)", q, channel,
                           held.size());
      }
    }
  }
  if (!local_ops_.empty()) return fmt::format("{} kernel(s) on the local stream", local_ops_.size());
  if (!staged_.empty()) {
    return fmt::format("the staging copy or announcement of a send to rank {} on channel {}", staged_.front().peer,
                       staged_.front().channel);
  }
  return "nothing posted";
}

Status CudaEndpoint::waitForCompletion() {
  BlockingWait wait = beginWait(/*slice_ms=*/100);
  const auto spin_end =
      std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                             std::chrono::duration<double, std::micro>(spin_us_));
  int sleep_us = 1;
  while (true) {
    BRAID_RETURN_IF_ERROR(progress());
    if (hasCompletions()) return Status::ok();
    wait.tick();
    if (wait.peerCheckDue()) {
      BRAID_RETURN_IF_ERROR(bootstrapFailure());
      BRAID_RETURN_IF_ERROR(checkNcclErrors());
    }
    if (wait.expired()) return timeoutError(wait.waitedSeconds(), waitingFor());
    if (std::chrono::steady_clock::now() < spin_end) {
      cpuRelax();
      continue;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    sleep_us = std::min(2 * sleep_us, kMaxSleepUs);
  }
}

void CudaEndpoint::tellPeersOfAbort(const Status& reason) {
  if (control_ != nullptr) control_->abort(reason);
  (void)useDevice();
  for (Peer& p : peers_) {
    for (ncclComm_t* comm : {&p.send_comm, &p.recv_comm}) {
      if (*comm != nullptr) (void)ncclCommAbort(*comm);
      *comm = nullptr;
    }
  }
}

// Waits until the peers received every staged message (bounded), then destroys what the endpoint owns; a failed
// or stuck endpoint aborts its communicators instead of destroying them.
void CudaEndpoint::shutdown() {
  if (torn_down_) return;
  torn_down_ = true;
  if (device_ < 0) return;  // setup never selected a device: nothing was created
  (void)useDevice();
  bool clean = !failed();
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                             std::chrono::duration<double>(std::min(timeout_s_, 10.0)));
  const auto busy = [&] {
    if (!staged_.empty() || !local_ops_.empty()) return true;
    for (const Peer& p : peers_) {
      if (!p.sends_on_device.empty() || !p.recvs_on_device.empty()) return true;
      for (const auto& [channel, held] : p.held)
        if (!held.empty()) return true;
    }
    return false;
  };
  while (clean && busy()) {
    if (!progress().isOk() || std::chrono::steady_clock::now() > deadline) {
      clean = false;
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  for (Peer& p : peers_) {
    for (ncclComm_t* comm : {&p.send_comm, &p.recv_comm}) {
      if (*comm == nullptr) continue;
      (void)(clean ? ncclCommDestroy(*comm) : ncclCommAbort(*comm));
      *comm = nullptr;
    }
  }
  for (cudaStream_t s : internalStreams()) {
    if (clean) (void)cudaStreamSynchronize(s);
    (void)cudaStreamDestroy(s);
  }
  for (const OnDevice& op : local_ops_) events_.put(op.event);
  for (const Staged& st : staged_) events_.put(st.copy_event);
  for (const Peer& p : peers_) {
    for (const OnDevice& op : p.sends_on_device) events_.put(op.event);
    for (const OnDevice& op : p.recvs_on_device) events_.put(op.event);
    for (const auto& [channel, messages] : p.unexpected)
      for (const Unexpected& m : messages) events_.put(m.received);
  }
  if (pool_ != nullptr) (void)cudaMemPoolDestroy(pool_);
  control_.reset();
}

}  // namespace

Result<std::unique_ptr<DataTransport>> createCudaTransport(Bootstrap& bootstrap, const CudaTransportOptions& options) {
  Result<double> timeout_s = resolveTimeoutSeconds(options.base.timeout_s);
  if (!timeout_s.isOk()) {
    return invalidArgument(fmt::format("rank {}: cuda transport: {}", bootstrap.rank(), timeout_s.status().message()));
  }
  CudaTransportOptions resolved = options;
  resolved.base.timeout_s = *timeout_s;
  EndpointBase::Config config;
  config.name = kName;
  config.rank = bootstrap.rank();
  config.size = bootstrap.size();
  config.timeout_s = *timeout_s;
  config.bootstrap = &bootstrap;
  auto endpoint = std::make_unique<CudaEndpoint>(config, bootstrap, resolved);
  BRAID_RETURN_IF_ERROR(endpoint->setup());
  return std::unique_ptr<DataTransport>(std::move(endpoint));
}

Result<ExecResult> executeOnStream(const Plan& plan, DataTransport& endpoint, const RankMemory& memory,
                                   ReduceSpec reduce, cudaStream_t stream) {
  auto* cuda = dynamic_cast<CudaEndpoint*>(&endpoint);
  if (cuda == nullptr) {
    return invalidArgument(
        fmt::format("executeOnStream: the endpoint is a '{}' transport, not a CUDA transport", endpoint.name()));
  }
  if (endpoint.localRanks().size() != 1) return invalidArgument("executeOnStream: the endpoint drives no single rank");
  const int rank = endpoint.localRanks()[0];
  BRAID_RETURN_IF_ERROR(endpoint.bind(rank, memory, reduce));
  BRAID_RETURN_IF_ERROR(cuda->beginCollective(stream));
  ExecOptions options;
  options.local_ranks = {rank};
  Result<ExecResult> result = execute(plan, endpoint, options);
  const Status ended = cuda->endCollective(stream);
  if (!result.isOk()) return result;
  BRAID_RETURN_IF_ERROR(ended);
  return result;
}

#else  // BRAID_HAVE_NCCL

Result<std::unique_ptr<DataTransport>> createCudaTransport(Bootstrap& bootstrap, const CudaTransportOptions&) {
  return unsupported(
      fmt::format("rank {}: cuda transport: Braid was built without NCCL (nccl.h and libnccl were "
                  "not found beside the CUDA toolkit)",
                  bootstrap.rank()));
}

Result<ExecResult> executeOnStream(const Plan&, DataTransport& endpoint, const RankMemory&, ReduceSpec, cudaStream_t) {
  return invalidArgument(
      fmt::format("executeOnStream: the endpoint is a '{}' transport, and this build has no CUDA "
                  "transport (no NCCL)",
                  endpoint.name()));
}

#endif  // BRAID_HAVE_NCCL

Status averageOnStream(void* buf, uint64_t count, DataType type, int num_ranks, cudaStream_t stream) {
  return cuda::launchDivide(buf, count, type, num_ranks, stream);
}

}  // namespace braid
