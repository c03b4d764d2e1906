// Expert-parallel dispatch and combine (include/braid/moe.h) on ranks as threads, against a reference that routes
// every rank's tokens by the definition (priority order, capacity, expert-major layout) one slot at a time.
#include "braid/moe.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "comm/comm_test_util.h"

namespace braid::moe {
namespace {

// Rank r's batch: tokens, their top_k choices and the exact values of their hidden vectors.
struct Batch {
  size_t tokens = 0;
  std::vector<int32_t> ids;  // [tokens x top_k]
};

// Token counts differ per rank; rank 1 has none. Choices mix every expert, unrouted slots and repeats.
Batch batchOf(int rank, int top_k, int experts) {
  Batch b;
  b.tokens = rank == 1 ? 0 : static_cast<size_t>(5 + 3 * rank);
  for (size_t t = 0; t < b.tokens; ++t) {
    for (int k = 0; k < top_k; ++k) {
      const uint64_t h = testing::movedWord(rank, t * 16 + static_cast<uint64_t>(k));
      b.ids.push_back(h % 11 == 0 ? -1 : static_cast<int32_t>(h % static_cast<uint64_t>(experts)));
    }
  }
  return b;
}

// x[rank][t][h]: small integers, exact in every floating type.
double tokenValue(int rank, size_t t, size_t h) {
  return static_cast<double>(static_cast<int64_t>((rank * 7 + t * 3 + h * 5) % 13) - 6);
}
// What expert e computes: y = x * (e + 1) + e.
double expertValue(int expert, double x) { return x * (expert + 1) + expert; }
float weightOf(size_t t, int k) { return 0.5f + 0.25f * static_cast<float>(k) + 0.125f * static_cast<float>(t % 3); }

// The admitted slots of every rank, by the definition: (source rank, token, k, expert), in priority order.
struct Slot {
  int src;
  size_t token;
  int k;
  int expert;
};
std::vector<std::vector<Slot>> admitted(int ranks, int top_k, int experts, int64_t capacity,
                                        std::vector<int64_t>* dropped) {
  std::vector<std::vector<Slot>> out(ranks);
  dropped->assign(ranks, 0);
  for (int r = 0; r < ranks; ++r) {
    const Batch b = batchOf(r, top_k, experts);
    std::vector<int64_t> used(experts, 0);
    for (int k = 0; k < top_k; ++k) {
      for (size_t t = 0; t < b.tokens; ++t) {
        const int e = b.ids[t * top_k + k];
        if (e < 0) continue;
        if (capacity >= 0 && used[e] >= capacity) {
          ++(*dropped)[r];
          continue;
        }
        ++used[e];
        out[r].push_back({r, t, k, e});
      }
    }
  }
  return out;
}

void store(void* p, size_t i, DataType type, double v) {
  switch (type) {
    case DataType::kFloat32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DataType::kFloat64: static_cast<double*>(p)[i] = v; break;
    case DataType::kBfloat16: static_cast<uint16_t*>(p)[i] = floatToBfloat16(static_cast<float>(v)); break;
    default: static_cast<uint16_t*>(p)[i] = floatToHalf(static_cast<float>(v)); break;
  }
}
double load(const void* p, size_t i, DataType type) {
  switch (type) {
    case DataType::kFloat32: return static_cast<const float*>(p)[i];
    case DataType::kFloat64: return static_cast<const double*>(p)[i];
    case DataType::kBfloat16: return bfloat16ToFloat(static_cast<const uint16_t*>(p)[i]);
    default: return halfToFloat(static_cast<const uint16_t*>(p)[i]);
  }
}

struct Case {
  int ranks;
  int experts;
  int top_k;
  int64_t capacity;
  DataType type;
  size_t hidden;
};

// One rank: plan, dispatch, check the received rows, compute the experts, combine, check the output.
Status runRank(Communicator& comm, const Case& c) {
  const int rank = comm.rank();
  const Batch b = batchOf(rank, c.top_k, c.experts);
  std::vector<int64_t> dropped;
  const auto all = admitted(c.ranks, c.top_k, c.experts, c.capacity, &dropped);
  RoutingRequest req{b.ids.data(), b.tokens, c.top_k, c.experts, c.capacity};
  BRAID_ASSIGN_OR_RETURN(DispatchPlan plan, DispatchPlan::plan(comm, req));
  if (plan.droppedSlots() != dropped[rank])
    return internalError(
        fmt::format("rank {}: dropped {} slots, reference {}", rank, plan.droppedSlots(), dropped[rank]));
  // Expected received rows: local expert j (global expert rank * E_local + j), then source rank, then priority.
  const int local = c.experts / c.ranks;
  std::vector<Slot> expect;
  for (int j = 0; j < local; ++j) {
    for (int src = 0; src < c.ranks; ++src) {
      for (const Slot& s : all[src])
        if (s.expert == rank * local + j) expect.push_back(s);
    }
  }
  if (plan.receivedSlots() != expect.size())
    return internalError(
        fmt::format("rank {}: receives {} rows, reference {}", rank, plan.receivedSlots(), expect.size()));
  const size_t esz = dataTypeSize(c.type);
  std::vector<uint8_t> tokens(b.tokens * c.hidden * esz), received(expect.size() * c.hidden * esz + 64, 0xA5);
  for (size_t t = 0; t < b.tokens; ++t)
    for (size_t h = 0; h < c.hidden; ++h) store(tokens.data(), t * c.hidden + h, c.type, tokenValue(rank, t, h));
  BRAID_RETURN_IF_ERROR(plan.dispatch(comm, tokens.data(), c.hidden, c.type, received.data()));
  for (size_t i = 0; i < expect.size(); ++i) {
    for (size_t h = 0; h < c.hidden; ++h) {
      if (load(received.data(), i * c.hidden + h, c.type) != tokenValue(expect[i].src, expect[i].token, h))
        return internalError(fmt::format("rank {}: received row {} element {} differs", rank, i, h));
    }
  }
  for (size_t g = expect.size() * c.hidden * esz; g < received.size(); ++g)
    if (received[g] != 0xA5) return internalError(fmt::format("rank {}: dispatch wrote past its output", rank));
  // The experts: each row through its expert, located by expertCounts() alone.
  std::vector<uint8_t> expert_out(expect.size() * c.hidden * esz);
  size_t row = 0;
  for (int j = 0; j < local; ++j) {
    for (int64_t n = 0; n < plan.expertCounts()[j]; ++n, ++row) {
      for (size_t h = 0; h < c.hidden; ++h) {
        const size_t i = row * c.hidden + h;
        store(expert_out.data(), i, c.type, expertValue(rank * local + j, load(received.data(), i, c.type)));
      }
    }
  }
  std::vector<float> weights(b.tokens * c.top_k);
  for (size_t t = 0; t < b.tokens; ++t)
    for (int k = 0; k < c.top_k; ++k) weights[t * c.top_k + k] = weightOf(t, k);
  std::vector<uint8_t> out(b.tokens * c.hidden * esz);
  BRAID_RETURN_IF_ERROR(plan.combine(comm, expert_out.data(), c.hidden, c.type, weights.data(), out.data()));
  // Reference: sum over the admitted slots in k order, in double, rounded once.
  std::vector<double> ref(b.tokens * c.hidden, 0.0);
  for (const Slot& s : all[rank]) {
    for (size_t h = 0; h < c.hidden; ++h) {
      ref[s.token * c.hidden + h] +=
          static_cast<double>(weightOf(s.token, s.k)) * expertValue(s.expert, tokenValue(rank, s.token, h));
    }
  }
  std::vector<uint8_t> ref_bytes(out.size());
  for (size_t i = 0; i < ref.size(); ++i) store(ref_bytes.data(), i, c.type, ref[i]);
  if (ref_bytes != out) return internalError(fmt::format("rank {}: combined output differs", rank));
  return Status::ok();
}

class MoeTest : public ::testing::TestWithParam<Case> {};

TEST_P(MoeTest, DispatchAndCombineMatchTheReference) {
  const Case c = GetParam();
  Status s = testing::runRanks(c.ranks, {}, [&](Communicator& comm) { return runRank(comm, c); });
  EXPECT_TRUE(s.isOk()) << s.toString();
}

INSTANTIATE_TEST_SUITE_P(Shapes, MoeTest,
                         ::testing::Values(Case{4, 8, 2, -1, DataType::kFloat32, 5},   // dropless, top-2
                                           Case{4, 8, 2, 2, DataType::kFloat32, 5},    // capacity drops
                                           Case{3, 3, 1, 1, DataType::kBfloat16, 16},  // 1 expert per rank
                                           Case{4, 16, 3, 3, DataType::kFloat16, 7},   // 4 experts per rank
                                           Case{2, 4, 2, 0, DataType::kFloat64, 3},    // capacity 0: all dropped
                                           Case{1, 2, 2, -1, DataType::kFloat32, 4}),  // one rank
                         [](const ::testing::TestParamInfo<Case>& info) {
                           const Case& c = info.param;
                           return fmt::format("r{}_e{}_k{}_cap{}_{}_h{}", c.ranks, c.experts, c.top_k,
                                              c.capacity < 0 ? std::string("less") : std::to_string(c.capacity),
                                              dataTypeName(c.type), c.hidden);
                         });

// A bad expert id on one rank fails that rank with the token and slot, and the other ranks with its name: nobody
// waits for a rank that gave up.
TEST(Moe, ExpertIdOutOfRangeFailsEveryRank) {
  Status s = testing::runRanks(2, {}, [](Communicator& comm) -> Status {
    std::vector<int32_t> ids = {0, 1, 2, comm.rank() == 0 ? 9 : 3};
    Result<DispatchPlan> p = DispatchPlan::plan(comm, RoutingRequest{ids.data(), 2, 2, 4, -1});
    if (p.isOk()) return internalError(fmt::format("rank {} planned", comm.rank()));
    const char* want = comm.rank() == 0 ? "token 1 slot 1: expert 9" : "rank 0's routing is invalid";
    if (p.status().message().find(want) == std::string::npos) return p.status();
    return Status::ok();
  });
  EXPECT_TRUE(s.isOk()) << s.toString();
}

TEST(Moe, RanksThatDisagreeOnTheExpertsFailTogether) {
  Status s = testing::runRanks(3, {}, [](Communicator& comm) -> Status {
    std::vector<int32_t> ids = {0};
    RoutingRequest req{ids.data(), 1, 1, comm.rank() == 2 ? 6 : 3, -1};
    Result<DispatchPlan> p = DispatchPlan::plan(comm, req);
    if (p.isOk()) return internalError(fmt::format("rank {} planned", comm.rank()));
    if (p.status().message().find("rank 2 routes over 6 experts") == std::string::npos) return p.status();
    return Status::ok();
  });
  EXPECT_TRUE(s.isOk()) << s.toString();
}

TEST(Moe, CombineRefusesIntegerTypes) {
  Status s = testing::runRanks(2, {}, [](Communicator& comm) -> Status {
    std::vector<int32_t> ids = {comm.rank()};
    BRAID_ASSIGN_OR_RETURN(DispatchPlan p, DispatchPlan::plan(comm, RoutingRequest{ids.data(), 1, 1, 2, -1}));
    int32_t x = 1, y = 0;
    const Status c = p.combine(comm, &x, 1, DataType::kInt32, nullptr, &y);
    return c.code() == StatusCode::kInvalidArgument ? Status::ok() : internalError("int32 combine: " + c.toString());
  });
  EXPECT_TRUE(s.isOk()) << s.toString();
}

}  // namespace
}  // namespace braid::moe
