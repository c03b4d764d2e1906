// The process's receiver admission (net/admission.h).
#include "net/admission.h"

#include <algorithm>

#include "net/handle.h"

namespace braid::nccl_plugin {

std::shared_ptr<Admission> Admission::acquire(const congestion::Config& config) {
  static std::mutex mu;
  static std::weak_ptr<Admission> current;
  std::lock_guard<std::mutex> lock(mu);
  std::shared_ptr<Admission> admission = current.lock();
  if (!admission) {
    admission = std::make_shared<Admission>(config);
    current = admission;
  }
  return admission;
}

Admission::Admission(const congestion::Config& config)
    : grant_bytes_(config.grant_bytes), granter_(config.receiverCredits(), config.grant_bytes, 0) {
  if (config.receiverStartAdmission() > 0) {
    granter_.close(config.receiverStartAdmission());
    ++epoch_;
  }
  (void)granter_.takeModeChange();
}

int Admission::join() {
  std::lock_guard<std::mutex> lock(mu_);
  const int sender = granter_.addSender();
  mailboxes_.resize(static_cast<size_t>(sender) + 1);
  return sender;
}

void Admission::leave(int sender) {
  std::lock_guard<std::mutex> lock(mu_);
  granter_.forget(sender);
  mailboxes_[static_cast<size_t>(sender)].clear();
  collectLocked();
}

void Admission::request(int sender, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  granter_.request(sender, bytes);
  collectLocked();
}

Status Admission::received(int sender, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  Status status = granter_.received(sender, bytes);
  collectLocked();
  return status;
}

void Admission::report(int sender, uint64_t timeouts) {
  std::lock_guard<std::mutex> lock(mu_);
  granter_.report(sender, timeouts);
  collectLocked();
}

void Admission::collectLocked() {
  granter_.collect(&collected_);
  for (const congestion::CreditGranter::Grant& g : collected_) {
    mailboxes_[static_cast<size_t>(g.sender)].push_back(g.bytes);
  }
  collected_.clear();
  if (granter_.takeModeChange()) ++epoch_;
}

Admission::Mail Admission::take(int sender, uint64_t* announced) {
  std::lock_guard<std::mutex> lock(mu_);
  collectLocked();
  Mail mail;
  mail.grants.swap(mailboxes_[static_cast<size_t>(sender)]);
  mail.open = granter_.open();
  mail.mode_changed = *announced != epoch_;
  *announced = epoch_;
  return mail;
}

bool Admission::open() const {
  std::lock_guard<std::mutex> lock(mu_);
  return granter_.open();
}

std::string Admission::describe() const {
  std::lock_guard<std::mutex> lock(mu_);
  return granter_.describe();
}

size_t creditedPartBytes(size_t size, int nsocks, uint64_t grant_bytes) {
  const size_t quarter = static_cast<size_t>(std::max<uint64_t>(1, grant_bytes / 4));
  return std::min(chunkBytes(size, nsocks), quarter);
}

}  // namespace braid::nccl_plugin
