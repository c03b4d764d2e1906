// Expert-parallel dispatch and combine (include/braid/moe.h).
#include "braid/moe.h"

#include <fmt/format.h>

#include <cstring>
#include <limits>

namespace braid::moe {
namespace {

constexpr int kMaxTopK = 64;

// Checks the request on this rank alone; the error names the rank, and the token and slot at fault.
Status validate(const RoutingRequest& r, int rank, int ranks) {
  if (r.top_k < 1 || r.top_k > kMaxTopK)
    return invalidArgument(fmt::format("moe plan on rank {}: top_k {} is not in 1..{}", rank, r.top_k, kMaxTopK));
  if (r.num_experts <= 0 || r.num_experts % ranks != 0) {
    return invalidArgument(fmt::format("moe plan on rank {}: num_experts {} is not a positive multiple of the {} ranks",
                                       rank, r.num_experts, ranks));
  }
  if (r.capacity < -1)
    return invalidArgument(fmt::format("moe plan on rank {}: capacity {} (>= 0, or -1: dropless)", rank, r.capacity));
  if (r.num_tokens > 0 && r.expert_ids == nullptr)
    return invalidArgument(fmt::format("moe plan on rank {}: expert_ids is null with {} tokens", rank, r.num_tokens));
  if (r.num_tokens > std::numeric_limits<size_t>::max() / static_cast<size_t>(r.top_k) / sizeof(int64_t))
    return invalidArgument(fmt::format("moe plan on rank {}: {} tokens is too many", rank, r.num_tokens));
  for (size_t s = 0; s < r.num_tokens * static_cast<size_t>(r.top_k); ++s) {
    const int32_t e = r.expert_ids[s];
    if (e < -1 || e >= r.num_experts) {
      return invalidArgument(fmt::format("moe plan on rank {}: token {} slot {}: expert {} is not in 0..{} (or -1)",
                                         rank, s / r.top_k, s % r.top_k, e, r.num_experts - 1));
    }
  }
  return Status::ok();
}

// Every rank must route over the same experts with the same top_k, and every rank's input must be valid: both are
// all-gathered, so all ranks reach the same verdict (a rank with bad input never leaves the others waiting).
Status agree(Communicator& comm, const RoutingRequest& r, const Status& mine_valid) {
  const int64_t mine[3] = {r.num_experts, r.top_k, mine_valid.isOk() ? 1 : 0};
  std::vector<int64_t> all(3 * static_cast<size_t>(comm.size()));
  BRAID_RETURN_IF_ERROR(comm.allGather(mine, all.data(), 3, DataType::kInt64));
  if (!mine_valid.isOk()) return mine_valid;
  for (int p = 0; p < comm.size(); ++p) {
    if (all[3 * p + 2] == 0) {
      return invalidArgument(
          fmt::format("moe plan on rank {}: rank {}'s routing is invalid (its error says why)", comm.rank(), p));
    }
    if (all[3 * p] != all[0] || all[3 * p + 1] != all[1]) {
      return invalidArgument(
          fmt::format("moe plan on rank {}: rank {} routes over {} experts with top_k {}, rank 0 "
                      "over {} with top_k {}",
                      comm.rank(), p, all[3 * p], all[3 * p + 1], all[0], all[1]));
    }
  }
  return Status::ok();
}

// Bytes of `rows` rows of `hidden` elements of `esz` bytes, or an error when that overflows.
Result<size_t> rowBytes(size_t rows, size_t hidden, size_t esz, const char* what, int rank) {
  if (hidden != 0 && rows > std::numeric_limits<size_t>::max() / hidden / esz)
    return invalidArgument(fmt::format("moe {} on rank {}: {} rows of {} elements overflow", what, rank, rows, hidden));
  return rows * hidden * esz;
}

// Reads element i of a floating-point buffer as double; writes one back rounded once.
double loadReal(const void* p, size_t i, DataType type) {
  switch (type) {
    case DataType::kFloat16: return halfToFloat(static_cast<const uint16_t*>(p)[i]);
    case DataType::kBfloat16: return bfloat16ToFloat(static_cast<const uint16_t*>(p)[i]);
    case DataType::kFloat32: return static_cast<const float*>(p)[i];
    default: return static_cast<const double*>(p)[i];
  }
}

void storeReal(void* p, size_t i, DataType type, double v) {
  switch (type) {
    case DataType::kFloat16: static_cast<uint16_t*>(p)[i] = floatToHalf(static_cast<float>(v)); break;
    case DataType::kBfloat16: static_cast<uint16_t*>(p)[i] = floatToBfloat16(static_cast<float>(v)); break;
    case DataType::kFloat32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    default: static_cast<double*>(p)[i] = v;
  }
}

}  // namespace

Result<DispatchPlan> DispatchPlan::plan(Communicator& comm, const RoutingRequest& r) {
  DispatchPlan p;
  p.ranks_ = comm.size();
  p.rank_ = comm.rank();
  BRAID_RETURN_IF_ERROR(agree(comm, r, validate(r, p.rank_, p.ranks_)));
  const int experts = r.num_experts;
  p.local_experts_ = experts / p.ranks_;
  p.top_k_ = r.top_k;
  p.num_tokens_ = r.num_tokens;
  const size_t slots = r.num_tokens * static_cast<size_t>(r.top_k);
  p.slot_row_.assign(slots, -1);
  // Admission in priority order (every token's choice k before any token's choice k + 1); a slot's index within
  // its expert's bucket is the expert's count when it is admitted.
  std::vector<int64_t> bucket_index(slots, -1);
  p.send_counts_.assign(static_cast<size_t>(experts), 0);
  for (int k = 0; k < r.top_k; ++k) {
    for (size_t t = 0; t < r.num_tokens; ++t) {
      const size_t s = t * static_cast<size_t>(r.top_k) + static_cast<size_t>(k);
      const int32_t e = r.expert_ids[s];
      if (e < 0) continue;
      if (r.capacity >= 0 && p.send_counts_[static_cast<size_t>(e)] >= r.capacity) {
        ++p.dropped_;
        continue;
      }
      bucket_index[s] = p.send_counts_[static_cast<size_t>(e)]++;
      ++p.sent_total_;
    }
  }
  // Send order: by destination rank, then local expert (global expert id order), then bucket index.
  std::vector<int64_t> bucket_first(static_cast<size_t>(experts), 0);
  p.send_rank_rows_.assign(static_cast<size_t>(p.ranks_), 0);
  p.send_rank_first_.assign(static_cast<size_t>(p.ranks_), 0);
  int64_t row = 0;
  for (int e = 0; e < experts; ++e) {
    const int dst = e / p.local_experts_;
    if (e % p.local_experts_ == 0) p.send_rank_first_[static_cast<size_t>(dst)] = static_cast<size_t>(row);
    bucket_first[static_cast<size_t>(e)] = row;
    row += p.send_counts_[static_cast<size_t>(e)];
    p.send_rank_rows_[static_cast<size_t>(dst)] += static_cast<size_t>(p.send_counts_[static_cast<size_t>(e)]);
  }
  for (size_t s = 0; s < slots; ++s) {
    if (bucket_index[s] >= 0) p.slot_row_[s] = bucket_first[static_cast<size_t>(r.expert_ids[s])] + bucket_index[s];
  }
  // Counts per (source, local expert): one all-to-all of local_experts integers per rank pair.
  p.recv_counts_.assign(static_cast<size_t>(experts), 0);
  BRAID_RETURN_IF_ERROR(comm.allToAll(p.send_counts_.data(), p.recv_counts_.data(),
                                      static_cast<size_t>(p.local_experts_), DataType::kInt64));
  // Wire order (source-major: each source's rows by local expert) -> received layout (expert-major).
  p.expert_counts_.assign(static_cast<size_t>(p.local_experts_), 0);
  p.recv_rank_rows_.assign(static_cast<size_t>(p.ranks_), 0);
  p.recv_rank_first_.assign(static_cast<size_t>(p.ranks_), 0);
  for (int src = 0; src < p.ranks_; ++src) {
    p.recv_rank_first_[static_cast<size_t>(src)] = p.recv_total_;
    for (int j = 0; j < p.local_experts_; ++j) {
      const int64_t n = p.recv_counts_[static_cast<size_t>(src * p.local_experts_ + j)];
      if (n < 0) return Status(StatusCode::kRemoteError, fmt::format("moe plan: rank {} sent a count of {}", src, n));
      p.expert_counts_[static_cast<size_t>(j)] += n;
      p.recv_rank_rows_[static_cast<size_t>(src)] += static_cast<size_t>(n);
      p.recv_total_ += static_cast<size_t>(n);
    }
  }
  std::vector<size_t> layout_next(static_cast<size_t>(p.local_experts_), 0);  // expert-major first rows
  for (int j = 1; j < p.local_experts_; ++j) {
    layout_next[static_cast<size_t>(j)] =
        layout_next[static_cast<size_t>(j - 1)] + static_cast<size_t>(p.expert_counts_[static_cast<size_t>(j - 1)]);
  }
  p.wire_to_layout_.reserve(p.recv_total_);
  for (int src = 0; src < p.ranks_; ++src) {
    for (int j = 0; j < p.local_experts_; ++j) {
      const int64_t n = p.recv_counts_[static_cast<size_t>(src * p.local_experts_ + j)];
      for (int64_t i = 0; i < n; ++i) p.wire_to_layout_.push_back(layout_next[static_cast<size_t>(j)]++);
    }
  }
  return p;
}

// One all-to-all-v of rows of `hidden` elements: forward (dispatch) sends rows in send order and receives them in
// wire order; backward (combine) the reverse.
Status DispatchPlan::exchangeVectors(Communicator& comm, const void* send, size_t hidden, DataType type, void* recv,
                                     bool forward) const {
  const std::vector<size_t>& out_rows = forward ? send_rank_rows_ : recv_rank_rows_;
  const std::vector<size_t>& out_first = forward ? send_rank_first_ : recv_rank_first_;
  const std::vector<size_t>& in_rows = forward ? recv_rank_rows_ : send_rank_rows_;
  const std::vector<size_t>& in_first = forward ? recv_rank_first_ : send_rank_first_;
  std::vector<size_t> send_counts(static_cast<size_t>(ranks_)), send_displs(static_cast<size_t>(ranks_));
  std::vector<size_t> recv_counts(static_cast<size_t>(ranks_)), recv_displs(static_cast<size_t>(ranks_));
  for (size_t p = 0; p < static_cast<size_t>(ranks_); ++p) {
    send_counts[p] = out_rows[p] * hidden;
    send_displs[p] = out_first[p] * hidden;
    recv_counts[p] = in_rows[p] * hidden;
    recv_displs[p] = in_first[p] * hidden;
  }
  return comm.allToAllv(send, send_counts.data(), send_displs.data(), recv, recv_counts.data(), recv_displs.data(),
                        type);
}

Status DispatchPlan::dispatch(Communicator& comm, const void* tokens, size_t hidden, DataType type,
                              void* received) const {
  if (static_cast<int>(type) < 0 || static_cast<int>(type) >= kNumDataTypes)
    return invalidArgument(fmt::format("moe dispatch on rank {}: invalid datatype {}", rank_, static_cast<int>(type)));
  const size_t esz = dataTypeSize(type);
  BRAID_ASSIGN_OR_RETURN(const size_t send_bytes,
                         rowBytes(static_cast<size_t>(sent_total_), hidden, esz, "dispatch", rank_));
  BRAID_ASSIGN_OR_RETURN(const size_t recv_bytes, rowBytes(recv_total_, hidden, esz, "dispatch", rank_));
  if (send_bytes > 0 && tokens == nullptr)
    return invalidArgument(fmt::format("moe dispatch on rank {}: tokens is null", rank_));
  if (recv_bytes > 0 && received == nullptr)
    return invalidArgument(fmt::format("moe dispatch on rank {}: received is null", rank_));
  const size_t row_bytes = hidden * esz;
  std::vector<uint8_t> packed(send_bytes), wire(recv_bytes);
  for (size_t s = 0; s < slot_row_.size(); ++s) {
    if (slot_row_[s] < 0) continue;
    std::memcpy(packed.data() + static_cast<size_t>(slot_row_[s]) * row_bytes,
                static_cast<const uint8_t*>(tokens) + (s / static_cast<size_t>(top_k_)) * row_bytes, row_bytes);
  }
  BRAID_RETURN_IF_ERROR(exchangeVectors(comm, packed.data(), hidden, type, wire.data(), /*forward=*/true));
  for (size_t w = 0; w < recv_total_; ++w) {
    std::memcpy(static_cast<uint8_t*>(received) + wire_to_layout_[w] * row_bytes, wire.data() + w * row_bytes,
                row_bytes);
  }
  return Status::ok();
}

Status DispatchPlan::combine(Communicator& comm, const void* expert_out, size_t hidden, DataType type,
                             const float* weights, void* out) const {
  if (type != DataType::kFloat16 && type != DataType::kBfloat16 && type != DataType::kFloat32 &&
      type != DataType::kFloat64) {
    return invalidArgument(fmt::format("moe combine on rank {}: datatype {} is not half, bfloat16, float or double",
                                       rank_, static_cast<int>(type)));
  }
  const size_t esz = dataTypeSize(type);
  BRAID_ASSIGN_OR_RETURN(const size_t back_bytes,
                         rowBytes(static_cast<size_t>(sent_total_), hidden, esz, "combine", rank_));
  BRAID_ASSIGN_OR_RETURN(const size_t out_bytes, rowBytes(num_tokens_, hidden, esz, "combine", rank_));
  if (recv_total_ * hidden > 0 && expert_out == nullptr)
    return invalidArgument(fmt::format("moe combine on rank {}: expert_out is null", rank_));
  if (out_bytes > 0 && out == nullptr)
    return invalidArgument(fmt::format("moe combine on rank {}: out is null", rank_));
  const size_t row_bytes = hidden * esz;
  std::vector<uint8_t> wire(recv_total_ * row_bytes), back(back_bytes);
  for (size_t w = 0; w < recv_total_; ++w) {
    std::memcpy(wire.data() + w * row_bytes, static_cast<const uint8_t*>(expert_out) + wire_to_layout_[w] * row_bytes,
                row_bytes);
  }
  BRAID_RETURN_IF_ERROR(exchangeVectors(comm, wire.data(), hidden, type, back.data(), /*forward=*/false));
  std::vector<double> acc(hidden);
  for (size_t t = 0; t < num_tokens_; ++t) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int k = 0; k < top_k_; ++k) {
      const size_t s = t * static_cast<size_t>(top_k_) + static_cast<size_t>(k);
      if (slot_row_[s] < 0) continue;
      const double w = weights != nullptr ? static_cast<double>(weights[s]) : 1.0;
      const size_t base = static_cast<size_t>(slot_row_[s]) * hidden;
      for (size_t h = 0; h < hidden; ++h) acc[h] += w * loadReal(back.data(), base + h, type);
    }
    for (size_t h = 0; h < hidden; ++h) storeReal(out, t * hidden + h, type, acc[h]);
  }
  return Status::ok();
}

}  // namespace braid::moe
