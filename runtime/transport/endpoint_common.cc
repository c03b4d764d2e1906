#include "transport/endpoint_common.h"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>

#include "common/env.h"

namespace braid {

double endpointTimeoutSeconds(const TransportOptions& options) {
  // createTransport resolved the value (and refused a bad one); the default only covers a bad value that
  // reaches here another way.
  Result<double> resolved = resolveTimeoutSeconds(options.timeout_s);
  return resolved.isOk() ? *resolved : 300.0;
}

double endpointSpinMicroseconds(const TransportOptions& options, int local_ranks) {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  const int cores = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  if (local_ranks > cores) return 0;
  return std::clamp(options.spin_us >= 0 ? options.spin_us : runtimeSpinMicroseconds(), 0.0, kMaxSpinMicroseconds);
}

Status checkRequestPeer(const char* transport, int self, int size, int rank, int peer, const char* what) {
  if (rank != self) {
    return invalidArgument(
        fmt::format("{}: {} from rank {}, but this endpoint drives rank {}", transport, what, rank, self));
  }
  if (peer < 0 || peer >= size || peer == self) {
    return invalidArgument(fmt::format("{}: rank {}: {} with peer {} ({} ranks)", transport, self, what, peer, size));
  }
  return Status::ok();
}

Status checkRequestEnds(const char* transport, int self, int size, int rank, int peer, int channel, const char* what,
                        int channel_limit) {
  BRAID_RETURN_IF_ERROR(checkRequestPeer(transport, self, size, rank, peer, what));
  if (channel < 0 || channel >= channel_limit) {
    return invalidArgument(fmt::format("{}: rank {}: {} with peer {} on channel {}, outside [0, {})", transport, self,
                                       what, peer, channel, channel_limit));
  }
  return Status::ok();
}

Status agreeOnSetup(Bootstrap& bootstrap, const Status& mine, const char* transport, const char* stage) {
  const int size = bootstrap.size();
  std::vector<int32_t> ok(static_cast<size_t>(size), 0);
  ok[static_cast<size_t>(bootstrap.rank())] = mine.isOk() ? 1 : 0;
  BRAID_RETURN_IF_ERROR(bootstrap.allGather(ok.data(), sizeof(int32_t)));
  if (!mine.isOk()) return mine;
  for (int p = 0; p < size; ++p) {
    if (ok[static_cast<size_t>(p)] == 0) {
      return Status(StatusCode::kRemoteError, fmt::format("{}: rank {} could not {}", transport, p, stage));
    }
  }
  return Status::ok();
}

Status bootstrapPeerFailure(Bootstrap& bootstrap, const char* transport, int rank) {
  const Status peers = bootstrap.checkPeers();
  if (peers.isOk()) return Status::ok();
  // The bootstrap's message starts with "rank <rank>: " already: said once.
  const std::string own = fmt::format("rank {}: ", rank);
  const std::string& why = peers.message();
  return Status(StatusCode::kRemoteError, why.rfind(own, 0) == 0 ? fmt::format("{}: {}", transport, why)
                                                                 : fmt::format("{}: {}{}", transport, own, why));
}

Status noCompletionTimeout(const char* transport, int rank, double waited_s, const std::string& waiting_for) {
  return Status(StatusCode::kTimeout, fmt::format("{}: rank {}: no completion for {:.1f} s (BRAID_TIMEOUT); waiting "
                                                  "for {}",
                                                  transport, rank, waited_s, waiting_for));
}

BlockingWait::BlockingWait(double timeout_s, int slice_ms, std::chrono::steady_clock::time_point* last_peer_check)
    : timeout_s_(timeout_s),
      slice_ms_(slice_ms),
      last_peer_check_(last_peer_check),
      begin_(std::chrono::steady_clock::now()),
      now_(begin_) {}

void BlockingWait::tick() { now_ = std::chrono::steady_clock::now(); }

bool BlockingWait::peerCheckDue() {
  if (now_ - *last_peer_check_ < std::chrono::milliseconds(slice_ms_)) return false;
  *last_peer_check_ = now_;
  return true;
}

double BlockingWait::waitedSeconds() const { return std::chrono::duration<double>(now_ - begin_).count(); }

int BlockingWait::sleepMs() const {
  const double left_ms = (timeout_s_ - waitedSeconds()) * 1e3;
  return static_cast<int>(std::clamp(left_ms, 1.0, static_cast<double>(slice_ms_)));
}

void ProgressThread::stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

bool ProgressThread::waitForWork(std::unique_lock<std::mutex>& lock, const std::function<bool()>& has_work) {
  while (!stop_) {
    if (!has_work()) {
      wake_.wait_for(lock, std::chrono::milliseconds(100));
      continue;
    }
    const auto idle = std::chrono::steady_clock::now() - last_call_end_;
    if (idle < kOwnerIdle) {
      wake_.wait_for(lock, kOwnerIdle - idle);
      continue;
    }
    return true;
  }
  return false;
}

}  // namespace braid
