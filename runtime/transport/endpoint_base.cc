#include "transport/endpoint_base.h"

#include <fmt/format.h>

namespace braid {

EndpointBase::EndpointBase(const Config& config)
    : rank_(config.rank),
      size_(config.size),
      timeout_s_(config.timeout_s),
      name_(config.name),
      channel_limit_(config.channel_limit),
      has_progress_thread_(config.progress_thread),
      bootstrap_(config.bootstrap),
      epoch_(config.epoch),
      memory_(std::vector<int>{config.rank}) {}

Status EndpointBase::bind(int rank, const RankMemory& memory, ReduceSpec reduce) {
  CallGuard guard(*this);
  return memory_.bind(rank, memory, reduce);
}

// The checks of a send or receive, in order: the sticky failure, its ends, its range (`field`: "send src"); then
// a new id and start(bytes, id).
template <typename Start>
Result<RequestId> EndpointBase::post(int rank, int peer, int channel, const BufferRef& ref, const char* what,
                                     const char* field, Start start) {
  CallGuard guard(*this);
  BRAID_RETURN_IF_ERROR(currentFailure());
  BRAID_RETURN_IF_ERROR(checkRequestEnds(name_, rank_, size_, rank, peer, channel, what, channel_limit_));
  BRAID_ASSIGN_OR_RETURN(uint8_t * bytes, memory_.resolve(rank, ref, field));
  const RequestId id = next_id_++;
  BRAID_RETURN_IF_ERROR(start(bytes, id));
  return id;
}

Result<RequestId> EndpointBase::postSend(const SendRequest& request) {
  return post(request.rank, request.peer, request.channel, request.src, "send", "send src",
              [&](uint8_t* src, RequestId id) { return startSend(request, src, id); });
}

Result<RequestId> EndpointBase::postRecv(const RecvRequest& request) {
  return post(request.rank, request.peer, request.channel, request.dst, "recv", "recv dst",
              [&](uint8_t* dst, RequestId id) { return startRecv(request, dst, id); });
}

Result<RequestId> EndpointBase::postLocal(const LocalRequest& request) {
  CallGuard guard(*this);
  BRAID_RETURN_IF_ERROR(currentFailure());
  BRAID_ASSIGN_OR_RETURN(const LocalMemory::Resolved local, memory_.resolveLocal(request));
  const RequestId id = next_id_++;
  BRAID_RETURN_IF_ERROR(startLocal(local, id));
  return id;
}

Status EndpointBase::startLocal(const LocalMemory::Resolved& local, RequestId id) {
  LocalMemory::runOnCpu(local);
  complete(id);
  return Status::ok();
}

Status EndpointBase::poll(std::vector<Completion>* done, bool block) {
  CallGuard guard(*this);
  BRAID_RETURN_IF_ERROR(currentFailure());
  BRAID_RETURN_IF_ERROR(fail(progress()));
  if (completed_.empty() && block) BRAID_RETURN_IF_ERROR(fail(waitForCompletion()));
  done->insert(done->end(), completed_.begin(), completed_.end());
  completed_.clear();
  return Status::ok();
}

void EndpointBase::abort(const Status& why) {
  CallGuard guard(*this);
  (void)fail(why.isOk() ? internalError(fmt::format("{}: rank {} aborted", name_, rank_)) : why);
  tellPeersOfAbort(failure_);
}

Status EndpointBase::bootstrapFailure() const {
  if (bootstrap_ == nullptr) return Status::ok();
  return bootstrapPeerFailure(*bootstrap_, name_, rank_);
}

}  // namespace braid
