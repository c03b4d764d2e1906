// validatePlan() (include/braid/plan.h): what the executor relies on to index a plan safely, checked once per
// run in O(steps). Lowering's plans pass by construction; the check exists for plans built by hand (the
// Communicator's all-to-all-v) and read from elsewhere, so that a wrong field is an error naming it, never an
// out-of-bounds access in a transport.
#include <fmt/format.h>

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "braid/plan.h"

namespace braid {

namespace {

// Slices and bytes one end of a connection moves, and the first step that does (for the message).
struct EndTotals {
  uint64_t slices = 0;
  uint64_t bytes = 0;
  int rank = -1;
  int tb = -1;
};

struct ConnectionTotals {
  EndTotals send;
  EndTotals recv;
};

using ConnectionKey = std::tuple<int, int, int>;  // (sender, receiver, channel)

class PlanValidator {
 public:
  PlanValidator(const Plan& plan, const std::vector<int>& ranks)
      : plan_(plan), ranks_(ranks), slice_(plan::executedSliceBytes(plan)), iteration_(plan::iterationBytes(plan)) {}

  Status run() {
    BRAID_RETURN_IF_ERROR(checkPlan());
    for (int r : ranks_) BRAID_RETURN_IF_ERROR(checkRank(r));
    return checkPairing();
  }

 private:
  std::string where(int r) const { return fmt::format("plan '{}': rank {}", plan_.algorithm, r); }
  std::string where(int r, int t) const { return fmt::format("plan '{}': rank {} tb {}", plan_.algorithm, r, t); }
  std::string where(int r, int t, size_t s, OpType type) const {
    return fmt::format("plan '{}': rank {} tb {} step {} ({})", plan_.algorithm, r, t, s, opTypeName(type));
  }

  Status checkPlan() {
    const int n = plan_.num_ranks;
    if (n < 1 || static_cast<int64_t>(plan_.ranks.size()) != n) {
      return invalidArgument(
          fmt::format("plan '{}': {} rank plans for {} ranks", plan_.algorithm, plan_.ranks.size(), n));
    }
    if (plan_.element_bytes < 1) return invalidArgument(fmt::format("plan '{}': element_bytes is 0", plan_.algorithm));
    if (plan_.slices_per_iteration < 1 || plan_.slices_per_iteration > kMaxSlicesPerIteration) {
      return invalidArgument(fmt::format("plan '{}': slices_per_iteration must be in 1..{}, got {}", plan_.algorithm,
                                         kMaxSlicesPerIteration, plan_.slices_per_iteration));
    }
    if (plan_.instances < 1) {
      return invalidArgument(
          fmt::format("plan '{}': instances must be >= 1, got {}", plan_.algorithm, plan_.instances));
    }
    if (ranks_.empty()) {
      for (int r = 0; r < n; ++r) ranks_.push_back(r);
    }
    listed_.assign(n, 0);
    for (int r : ranks_) {
      if (r < 0 || r >= n) {
        return invalidArgument(fmt::format("local rank {} is outside plan '{}' of {} ranks", r, plan_.algorithm, n));
      }
      if (listed_[r]) return invalidArgument(fmt::format("local rank {} is listed twice", r));
      listed_[r] = 1;
    }
    return Status::ok();
  }

  // The size of `kind` on a rank, in bytes (the staging region after scratch is not a step's to touch).
  static uint64_t bufferBytes(const RankPlan& rank, BufferKind kind) {
    switch (kind) {
      case BufferKind::kInput: return rank.input_bytes;
      case BufferKind::kOutput: return rank.output_bytes;
      case BufferKind::kScratch: return rank.scratch_bytes;
    }
    return 0;
  }

  // `ref` lies inside its buffer of `rank` and on whole elements.
  Status checkRange(const RankPlan& rank, const BufferRef& ref, const char* role, const std::string& at) const {
    const int kind = static_cast<int>(ref.buffer);
    if (kind < 0 || kind > static_cast<int>(BufferKind::kScratch)) {
      return invalidArgument(fmt::format("{}: {} names buffer kind {}", at, role, kind));
    }
    const uint64_t size = bufferBytes(rank, ref.buffer);
    if (ref.offset > size || ref.bytes > size - ref.offset) {
      return invalidArgument(fmt::format("{}: {} {}[{}..+{}) is outside the {}-byte buffer", at, role,
                                         bufferName(ref.buffer), ref.offset, ref.bytes, size));
    }
    const uint64_t eb = plan_.element_bytes;
    if (ref.offset % eb != 0 || ref.bytes % eb != 0) {
      return invalidArgument(fmt::format("{}: {} {}[{}..+{}) is not on whole {}-byte elements", at, role,
                                         bufferName(ref.buffer), ref.offset, ref.bytes, eb));
    }
    return Status::ok();
  }

  Status checkRank(int r) {
    const RankPlan& rank = plan_.ranks[r];
    if (rank.rank != r) {
      return invalidArgument(fmt::format("plan '{}': ranks[{}] is labelled rank {}", plan_.algorithm, r, rank.rank));
    }
    if (rank.scratch_bytes + rank.temp_bytes < rank.scratch_bytes) {
      return invalidArgument(
          fmt::format("{}: scratch_bytes {} + temp_bytes {} overflows", where(r), rank.scratch_bytes, rank.temp_bytes));
    }
    for (size_t p = 0; p < rank.precopies.size(); ++p) {
      const PlanCopy& copy = rank.precopies[p];
      const std::string at = fmt::format("{} copy {}", where(r), p);
      BRAID_RETURN_IF_ERROR(checkRange(rank, copy.src, "src", at));
      BRAID_RETURN_IF_ERROR(checkRange(rank, copy.dst, "dst", at));
      if (copy.src.bytes != copy.dst.bytes) {
        return invalidArgument(
            fmt::format("{}: copies {} bytes into a range of {}", at, copy.src.bytes, copy.dst.bytes));
      }
    }
    const int num_tbs = static_cast<int>(rank.threadblocks.size());
    for (int t = 0; t < num_tbs; ++t) BRAID_RETURN_IF_ERROR(checkThreadblock(rank, t));
    return Status::ok();
  }

  Status checkThreadblock(const RankPlan& rank, int t) {
    const int r = rank.rank;
    const int n = plan_.num_ranks;
    const PlanThreadblock& tb = rank.threadblocks[t];
    if (tb.id != t) {
      return invalidArgument(
          fmt::format("plan '{}': rank {}: threadblock at position {} has id {}", plan_.algorithm, r, t, tb.id));
    }
    for (auto [peer, what] : {std::pair<int, const char*>{tb.send_peer, "send"}, {tb.recv_peer, "recv"}}) {
      if (peer < -1 || peer >= n || peer == r) {
        return invalidArgument(
            fmt::format("{}: {} peer {} is not -1 or another rank in [0, {})", where(r, t), what, peer, n));
      }
    }
    if (tb.channel < 0) return invalidArgument(fmt::format("{}: channel {} is negative", where(r, t), tb.channel));
    if (tb.channel >= kCallCheckChannel) {
      return invalidArgument(fmt::format("{}: channel {} is at or above {}, the communicator's call-check channel",
                                         where(r, t), tb.channel, kCallCheckChannel));
    }
    if (tb.temp.bytes > 0) {
      const uint64_t end = rank.scratch_bytes + rank.temp_bytes;
      if (tb.temp.buffer != BufferKind::kScratch || tb.temp.offset < rank.scratch_bytes || tb.temp.offset > end ||
          tb.temp.bytes > end - tb.temp.offset) {
        return invalidArgument(fmt::format(
            "{}: staging {}[{}..+{}) is outside the staging region s[{}..{}) after the algorithm's scratch",
            where(r, t), bufferName(tb.temp.buffer), tb.temp.offset, tb.temp.bytes, rank.scratch_bytes, end));
      }
    }
    uint64_t send_slices = 0, send_bytes = 0, recv_slices = 0, recv_bytes = 0;
    for (size_t s = 0; s < tb.steps.size(); ++s) {
      const PlanStep& step = tb.steps[s];
      BRAID_RETURN_IF_ERROR(checkStep(rank, t, s));
      const uint64_t slices = plan::sliceCount(step.bytes, slice_);
      if (opSends(step.type)) send_slices += slices, send_bytes += step.bytes;
      if (opReceives(step.type)) recv_slices += slices, recv_bytes += step.bytes;
    }
    if (send_slices > 0) addEnd(ConnectionKey{r, tb.send_peer, tb.channel}, true, send_slices, send_bytes, r, t);
    if (recv_slices > 0) addEnd(ConnectionKey{tb.recv_peer, r, tb.channel}, false, recv_slices, recv_bytes, r, t);
    return Status::ok();
  }

  Status checkStep(const RankPlan& rank, int t, size_t s) const {
    const int r = rank.rank;
    const PlanThreadblock& tb = rank.threadblocks[t];
    const PlanStep& step = tb.steps[s];
    const int type = static_cast<int>(step.type);
    if (type < 0 || type > static_cast<int>(OpType::kNop)) {
      return invalidArgument(
          fmt::format("plan '{}': rank {} tb {} step {}: op type {} is not an OpType", plan_.algorithm, r, t, s, type));
    }
    const std::string at = where(r, t, s, step.type);
    if (opSends(step.type) && tb.send_peer < 0)
      return invalidArgument(fmt::format("{}: sends but has no send peer", at));
    if (opReceives(step.type) && tb.recv_peer < 0) {
      return invalidArgument(fmt::format("{}: receives but has no recv peer", at));
    }
    const bool uses_src = opReadsSrc(step.type);
    const bool uses_dst = opWritesDst(step.type);
    if ((uses_src && step.src.bytes != step.bytes) || (uses_dst && step.dst.bytes != step.bytes)) {
      return invalidArgument(fmt::format("{}: moves {} bytes but its src has {} and its dst {}", at, step.bytes,
                                         uses_src ? step.src.bytes : step.bytes,
                                         uses_dst ? step.dst.bytes : step.bytes));
    }
    if (uses_src) BRAID_RETURN_IF_ERROR(checkRange(rank, step.src, "src", at));
    if (uses_dst) BRAID_RETURN_IF_ERROR(checkRange(rank, step.dst, "dst", at));
    const uint64_t staged = plan::stagedSliceBytes(step, iteration_);
    if (plan::needsStaging(step) && tb.temp.bytes < staged) {
      return invalidArgument(
          fmt::format("{}: needs {} bytes of staging but the threadblock has {}", at, staged, tb.temp.bytes));
    }
    if (plan::sliceCount(step.bytes, slice_) >= UINT32_MAX) {
      return invalidArgument(
          fmt::format("{}: {} bytes in slices of {} bytes are too many slices", at, step.bytes, slice_));
    }
    for (const Dependency& dep : step.deps) {
      if (dep.tb < 0 || dep.tb >= static_cast<int>(rank.threadblocks.size()) || dep.step < 0 ||
          dep.step >= static_cast<int>(rank.threadblocks[dep.tb].steps.size()) ||
          (dep.tb == t && dep.step >= static_cast<int>(s))) {
        return invalidArgument(
            fmt::format("{}: dependency on tb {} step {} names no earlier step of rank {}", at, dep.tb, dep.step, r));
      }
    }
    return Status::ok();
  }

  // Connections whose other end is not listed are the other side's to check (it may build its own plan).
  void addEnd(const ConnectionKey& key, bool sending, uint64_t slices, uint64_t bytes, int r, int t) {
    const int other = sending ? std::get<1>(key) : std::get<0>(key);
    if (!listed_[other]) return;
    EndTotals& end = sending ? connections_[key].send : connections_[key].recv;
    if (end.rank < 0) end.rank = r, end.tb = t;
    end.slices += slices;
    end.bytes += bytes;
  }

  Status checkPairing() const {
    for (const auto& [key, totals] : connections_) {
      const auto& [from, to, channel] = key;
      if (totals.send.slices == totals.recv.slices && totals.send.bytes == totals.recv.bytes) continue;
      return invalidArgument(fmt::format(
          "plan '{}': rank {} sends {} slice(s) ({} bytes) to rank {} on channel {} (first: tb {}) but rank {} "
          "receives {} ({} bytes) from it (first: tb {})",
          plan_.algorithm, from, totals.send.slices, totals.send.bytes, to, channel, totals.send.tb, to,
          totals.recv.slices, totals.recv.bytes, totals.recv.tb));
    }
    return Status::ok();
  }

  const Plan& plan_;
  std::vector<int> ranks_;
  const uint64_t slice_;
  const uint64_t iteration_;  // bytes of one iteration (plan::iterationBytes): what staging holds
  std::vector<char> listed_;
  std::map<ConnectionKey, ConnectionTotals> connections_;
};

}  // namespace

Status validatePlan(const Plan& plan, const std::vector<int>& ranks) { return PlanValidator(plan, ranks).run(); }

}  // namespace braid
