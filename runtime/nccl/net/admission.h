// Receiver-driven admission for the net plugin's TCP data path (BRAID_CC_POLICY=adaptive; runtime/congestion's
// CreditGranter, README.md "Using it from another transport").
//
// One Admission per process, shared by every receive comm of every NCCL communicator in it: the senders that push
// to this host's NIC at once are the senders of all of them. Each receive comm is one sender of the granter.
//
// Protocol on the control connection (net/handle.h records):
//   - a receiver that admits writes kAdmitMagic first (tag 1 open / 0 gated, size = its grant size) and again at
//     each change of mode;
//   - while the receiver is gated, a sender announces each message longer than the eager size (64 KiB) with
//     kCreditedMagic instead of kHandleMagic and writes no byte of it before credit arrives;
//   - the receiver asks its granter for a credited message's bytes when the message meets a posted receive buffer
//     (as NCCL's IB transport sends clear-to-send when a buffer is posted: granted credit is never held by data
//     that waits for a buffer), and writes kGrantMagic records (size = bytes) as the granter decides;
//   - a credited message travels in parts of at most grantBytes / 4 (creditedPartBytes), each written once the
//     sender's credit covers it, in order; so what is left of a grant after whole parts is a quarter grant or
//     less, and the granter hands the credit on (CreditGranter's hand-over rule);
//   - a sender reads TCP_INFO of its data sockets at most once per ms and writes kReportMagic (size = retransmission
//     timeouts since its last report) when there were any: the signal that closes admission.
// Messages keep their order on every data socket: a message waiting for credit holds back every later message of
// its connection, credited or not.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "braid/status.h"
#include "congestion/congestion.h"

namespace braid::nccl_plugin {

class Admission {
 public:
  /// What one receive comm has to write to its sender (take()).
  struct Mail {
    std::vector<uint64_t> grants;  // bytes per grant, in order
    bool mode_changed = false;     // admission opened or closed since this sender was last told
    bool open = true;
  };

  /// The process's admission for `config` (adaptive with credits > 0): created by the first receive comm, shared
  /// while any holds it. A later call with another config gets the existing one (the first comm's environment).
  static std::shared_ptr<Admission> acquire(const congestion::Config& config);

  explicit Admission(const congestion::Config& config);

  uint64_t grantBytes() const { return grant_bytes_; }
  /// A new receive comm; its sender number.
  int join();
  /// The receive comm closed: its requests and grants are dropped.
  void leave(int sender);
  /// A credited message of `bytes` from `sender` met its receive buffer.
  void request(int sender, uint64_t bytes);
  /// `bytes` of credited data from `sender` arrived. Errors: kInvalidArgument (more than was granted: a malformed
  /// peer).
  Status received(int sender, uint64_t bytes);
  /// `sender` reported `timeouts` retransmission timeouts.
  void report(int sender, uint64_t timeouts);
  /// The grants for `sender` and whether it must be told the mode; `*announced` is the mode epoch it was last told
  /// (updated).
  Mail take(int sender, uint64_t* announced);
  /// Whether senders are admitted without asking now.
  bool open() const;
  /// CreditGranter::describe() (BRAID_DEBUG=INFO).
  std::string describe() const;

 private:
  void collectLocked();

  mutable std::mutex mu_;
  uint64_t grant_bytes_;
  congestion::CreditGranter granter_;
  std::vector<std::vector<uint64_t>> mailboxes_;  // per sender: grants not yet taken
  std::vector<congestion::CreditGranter::Grant> collected_;
  uint64_t epoch_ = 0;  // mode changes so far
};

/// Size of the parts a credited message travels in over `nsocks` data sockets for a receiver granting
/// `grant_bytes`: min(chunkBytes(size, nsocks), max(1, grant_bytes / 4)).
size_t creditedPartBytes(size_t size, int nsocks, uint64_t grant_bytes);

}  // namespace braid::nccl_plugin
