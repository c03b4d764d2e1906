// Test support for communicator tests: ranks as threads of this process, position-dependent data and a naive
// reference computed independently of the runtime (one element at a time, in exact or wrap-around arithmetic).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "braid/collective.h"
#include "braid/comm.h"
#include "braid/datatype.h"
#include "support/store_value.h"

namespace braid::testing {

/// Creates `n` communicators on threads of this process (threads transport unless options say otherwise) and
/// runs body(comm) on each rank's thread. Returns the first failing status (creation or body), naming the
/// rank.
inline Status runRanks(int n, const CommOptions& options, const std::function<Status(Communicator&)>& body) {
  Result<UniqueId> id = createUniqueId("127.0.0.1:0");
  if (!id.isOk()) return id.status();
  std::vector<Status> results(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      Result<std::unique_ptr<Communicator>> comm = Communicator::create(*id, r, n, options);
      if (!comm.isOk()) {
        results[r] = comm.status();
        return;
      }
      results[r] = body(**comm);
      if (!results[r].isOk()) (*comm)->abort(results[r].message());
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    if (!results[r].isOk()) return Status(results[r].code(), fmt::format("rank {}: {}", r, results[r].message()));
  }
  return Status::ok();
}

/// Small integers, exactly representable in every type, whose reductions over <= 16 ranks stay exact in
/// fp16 (< 2048) and bf16 (< 256): sum/avg 1..11, prod 1 or 2 (at most ~6 twos per element), min/max
/// -11..11 (0..22 for unsigned types).
inline int64_t inputValue(int rank, uint64_t i, ReduceOp op, DataType type) {
  const bool is_unsigned = type == DataType::kUint8 || type == DataType::kUint32 || type == DataType::kUint64;
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return 1 + static_cast<int64_t>((static_cast<uint64_t>(rank) * 131 + i * 7) % 11);
    case ReduceOp::kProd: return (static_cast<uint64_t>(rank) + i) % 3 == 0 ? 2 : 1;
    case ReduceOp::kMin:
    case ReduceOp::kMax: {
      const int64_t v = static_cast<int64_t>((static_cast<uint64_t>(rank) * 37 + i * 11) % 23);
      return is_unsigned ? v : v - 11;
    }
  }
  return 0;
}

/// The expected bytes of one reduced element over ranks 0..n-1, computed from the definition: integers in
/// wrap-around arithmetic of the type's width (avg: wrapped sum then truncating division, NCCL's
/// SumPostDiv), floats exactly (the inputs keep every partial result exact) then rounded once; float avg
/// divides in the type's compute precision (fp16/bf16: float) and rounds once.
inline void expectedElement(void* out, DataType type, ReduceOp op, int n, uint64_t i) {
  const int bits = static_cast<int>(dataTypeSize(type)) * 8;
  const bool is_float = type == DataType::kFloat16 || type == DataType::kBfloat16 || type == DataType::kFloat32 ||
                        type == DataType::kFloat64;
  const bool is_signed = type == DataType::kInt8 || type == DataType::kInt32 || type == DataType::kInt64;
  if (is_float) {
    double acc = static_cast<double>(inputValue(0, i, op, type));
    for (int r = 1; r < n; ++r) {
      const double v = static_cast<double>(inputValue(r, i, op, type));
      switch (op) {
        case ReduceOp::kSum:
        case ReduceOp::kAvg: acc += v; break;
        case ReduceOp::kProd: acc *= v; break;
        case ReduceOp::kMin: acc = std::min(acc, v); break;
        case ReduceOp::kMax: acc = std::max(acc, v); break;
      }
    }
    if (op == ReduceOp::kAvg) {
      if (type == DataType::kFloat64) {
        acc = acc / n;
      } else {
        acc = static_cast<double>(static_cast<float>(acc) / static_cast<float>(n));
      }
    }
    switch (type) {
      case DataType::kFloat16: {
        const uint16_t x = floatToHalf(static_cast<float>(acc));
        std::memcpy(out, &x, 2);
        return;
      }
      case DataType::kBfloat16: {
        const uint16_t x = floatToBfloat16(static_cast<float>(acc));
        std::memcpy(out, &x, 2);
        return;
      }
      case DataType::kFloat32: {
        const float x = static_cast<float>(acc);
        std::memcpy(out, &x, 4);
        return;
      }
      default: std::memcpy(out, &acc, 8); return;
    }
  }
  const uint64_t mask = bits == 64 ? ~uint64_t{0} : ((uint64_t{1} << bits) - 1);
  auto as_signed = [&](uint64_t x) -> int64_t {
    x &= mask;
    if (bits < 64 && (x >> (bits - 1)) != 0) return static_cast<int64_t>(x) - static_cast<int64_t>(mask) - 1;
    return static_cast<int64_t>(x);
  };
  uint64_t acc = static_cast<uint64_t>(inputValue(0, i, op, type)) & mask;
  for (int r = 1; r < n; ++r) {
    const uint64_t v = static_cast<uint64_t>(inputValue(r, i, op, type)) & mask;
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: acc = (acc + v) & mask; break;
      case ReduceOp::kProd: acc = (acc * v) & mask; break;
      case ReduceOp::kMin: acc = is_signed ? (as_signed(v) < as_signed(acc) ? v : acc) : std::min(acc, v); break;
      case ReduceOp::kMax: acc = is_signed ? (as_signed(v) > as_signed(acc) ? v : acc) : std::max(acc, v); break;
    }
  }
  if (op == ReduceOp::kAvg) {
    acc = is_signed ? static_cast<uint64_t>(as_signed(acc) / n) & mask : (acc / static_cast<uint64_t>(n)) & mask;
  }
  storeValue(out, type, static_cast<int64_t>(acc));
}

/// Position-dependent bytes for data-movement collectives: byte b (< 8) of element i of rank r, from one
/// 64-bit mix per element (splitmix64's finalizer), so no two nearby positions share a pattern.
inline uint64_t movedWord(int rank, uint64_t i) {
  uint64_t x = (static_cast<uint64_t>(rank) + 1) * 0x9E3779B97F4A7C15ull + i * 0xD1B54A32D192ED03ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
inline uint8_t movedByte(int rank, uint64_t i, size_t b) { return static_cast<uint8_t>(movedWord(rank, i) >> (8 * b)); }

/// The period in the element index of inputValue() for `op`: every rank's input, and so every reduced
/// element, repeats with it (sum/avg 11, prod 3, min/max 23).
inline uint64_t inputPeriod(ReduceOp op) {
  switch (op) {
    case ReduceOp::kProd: return 3;
    case ReduceOp::kMin:
    case ReduceOp::kMax: return 23;
    default: return 11;
  }
}

inline constexpr uint64_t kGuard = 64;
inline constexpr uint8_t kGuardByte = 0xA5;

inline bool reduces(CollectiveKind k) {
  return k == CollectiveKind::kAllReduce || k == CollectiveKind::kReduceScatter || k == CollectiveKind::kReduce;
}
inline bool pieced(CollectiveKind k) {
  return k == CollectiveKind::kAllGather || k == CollectiveKind::kReduceScatter || k == CollectiveKind::kAllToAll;
}

struct Run {
  uint64_t count = 0;
  bool in_place = false;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
};

/// One call on one rank: fills the send buffer (position-dependent), calls, checks the result against the naive
/// reference and the guard zones after every buffer (nothing written past a user buffer). All-gather,
/// reduce-scatter and all-to-all take run.count as the size of the whole buffer: each rank piece holds
/// ceil(count / n) elements. Returns a description of the first mismatch.
inline Status checkCollective(Communicator& comm, CollectiveKind kind, int root, const std::string& name,
                              const Run& run) {
  const int n = comm.size();
  const int rank = comm.rank();
  const uint64_t esz = dataTypeSize(run.type);
  const uint64_t piece = pieced(kind) ? (run.count + n - 1) / n : run.count;
  // Elements of the send and receive buffers of this rank.
  uint64_t in_elems = piece;
  uint64_t out_elems = piece;
  if (kind == CollectiveKind::kAllGather) out_elems = piece * n;
  if (kind == CollectiveKind::kReduceScatter) in_elems = piece * n;
  if (kind == CollectiveKind::kAllToAll) in_elems = out_elems = piece * n;
  // In place: one buffer, the larger one.
  const uint64_t big = std::max(in_elems, out_elems);
  std::vector<uint8_t> send_buf(run.in_place ? 0 : in_elems * esz + kGuard, kGuardByte);
  std::vector<uint8_t> recv_buf((run.in_place ? big : out_elems) * esz + kGuard, kGuardByte);
  std::fill(recv_buf.begin(), recv_buf.end() - kGuard, 0xCD);
  uint8_t* recv = recv_buf.data();
  uint8_t* send = run.in_place ? recv : send_buf.data();
  // Input position inside the in-place buffer.
  uint64_t in_offset = 0;
  if (run.in_place && kind == CollectiveKind::kAllGather) in_offset = static_cast<uint64_t>(rank) * piece;
  send += in_offset * esz;
  if (run.in_place && kind == CollectiveKind::kReduceScatter) recv += static_cast<uint64_t>(rank) * piece * esz;
  const bool fills_input = kind != CollectiveKind::kBroadcast || rank == root;
  // Reductions: inputs repeat with inputPeriod(op) (comm_test_util.h), so one period of input and of the
  // expected result is computed element by element and then tiled / compared.
  const uint64_t period = inputPeriod(run.op);
  std::vector<uint8_t> input_period(period * esz);
  std::vector<uint8_t> expected_period(period * esz);
  if (reduces(kind)) {
    for (uint64_t i = 0; i < period; ++i) {
      storeValue(input_period.data() + i * esz, run.type, inputValue(rank, i, run.op, run.type));
      expectedElement(expected_period.data() + i * esz, run.type, run.op, n, i);
    }
  }
  if (fills_input) {
    for (uint64_t i = 0; i < in_elems; ++i) {
      if (reduces(kind)) {
        std::memcpy(send + i * esz, input_period.data() + (i % period) * esz, esz);
      } else {
        const uint64_t word = movedWord(rank, i);
        std::memcpy(send + i * esz, &word, esz);
      }
    }
  }
  Status status;
  switch (kind) {
    case CollectiveKind::kAllReduce: status = comm.allReduce(send, recv, run.count, run.type, run.op); break;
    case CollectiveKind::kAllGather: status = comm.allGather(send, recv, piece, run.type); break;
    case CollectiveKind::kReduceScatter: status = comm.reduceScatter(send, recv, piece, run.type, run.op); break;
    case CollectiveKind::kAllToAll: status = comm.allToAll(send, recv, piece, run.type); break;
    case CollectiveKind::kBroadcast: status = comm.broadcast(send, recv, run.count, run.type, root); break;
    case CollectiveKind::kReduce: status = comm.reduce(send, recv, run.count, run.type, run.op, root); break;
    default: return unsupported("custom collective");
  }
  const std::string what =
      fmt::format("{} '{}' n={} count={} {} {} {}", collectiveName(kind), name, n, run.count,
                  run.in_place ? "in-place" : "out-of-place", dataTypeName(run.type), reduceOpName(run.op));
  if (!status.isOk()) return Status(status.code(), what + ": " + status.message());
  // Guard zones.
  for (uint64_t g = recv_buf.size() - kGuard; g < recv_buf.size(); ++g) {
    if (recv_buf[g] != kGuardByte) return internalError(what + ": wrote past the receive buffer");
  }
  if (!run.in_place) {
    for (uint64_t g = send_buf.size() - kGuard; g < send_buf.size(); ++g) {
      if (send_buf[g] != kGuardByte) return internalError(what + ": wrote past the send buffer");
    }
  }
  if (kind == CollectiveKind::kReduce && rank != root) return Status::ok();  // recv unspecified off the root
  const uint64_t rs_base = kind == CollectiveKind::kReduceScatter ? static_cast<uint64_t>(rank) * piece : 0;
  for (uint64_t j = 0; j < out_elems; ++j) {
    const uint8_t* expected = nullptr;
    uint64_t word = 0;
    switch (kind) {
      case CollectiveKind::kAllReduce:
      case CollectiveKind::kReduce:
      case CollectiveKind::kReduceScatter: expected = expected_period.data() + ((rs_base + j) % period) * esz; break;
      case CollectiveKind::kAllGather: word = movedWord(static_cast<int>(j / piece), j % piece); break;
      case CollectiveKind::kAllToAll:
        word = movedWord(static_cast<int>(j / piece), static_cast<uint64_t>(rank) * piece + j % piece);
        break;
      case CollectiveKind::kBroadcast: word = movedWord(root, j); break;
      default: break;
    }
    if (expected == nullptr) expected = reinterpret_cast<const uint8_t*>(&word);
    if (std::memcmp(expected, recv + j * esz, esz) != 0) {
      return internalError(fmt::format("{}: rank {} element {} differs from the reference", what, rank, j));
    }
  }
  return Status::ok();
}

}  // namespace braid::testing
