// replicateInstances (include/braid/algorithm.h): the written-out instances verify, and lowering them with one
// instance gives, rank by rank, the plan lowering builds for the original with LowerOptions::instances = k.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "braid/algorithm.h"
#include "braid/classic.h"
#include "braid/plan.h"
#include "support/classic_requests.h"

namespace braid {
namespace {

Plan lowered(const Algorithm& a, uint64_t size_bytes, int instances) {
  LowerOptions o;
  o.size_bytes = size_bytes;
  o.instances = instances;
  o.element_bytes = 4;
  Result<Plan> plan = lowerAlgorithm(a, o);
  EXPECT_TRUE(plan.isOk()) << plan.status().toString();
  return plan.isOk() ? *plan : Plan{};
}

struct Case {
  ClassicAlgo algo;
  CollectiveKind kind;
};

class ReplicateInstances : public ::testing::TestWithParam<std::tuple<Case, int>> {};

TEST_P(ReplicateInstances, VerifiesAndLowersToTheInstancedPlan) {
  const auto [c, k] = GetParam();
  const int n = 8;
  Result<Algorithm> built = buildClassic(testing::classicRequest(c.algo, c.kind, n));
  ASSERT_TRUE(built.isOk()) << built.status().toString();
  const Algorithm& original = *built;
  Result<Algorithm> replicated = replicateInstances(original, k);
  ASSERT_TRUE(replicated.isOk()) << replicated.status().toString();
  EXPECT_EQ(replicated->num_chunks, original.num_chunks * k);
  EXPECT_EQ(replicated->num_channels, original.num_channels * k);
  EXPECT_EQ(replicated->numThreadblocks(), original.numThreadblocks() * k);
  const VerifyReport report = verify(*replicated);
  EXPECT_TRUE(report.ok) << report.toString();
  // A size every chunk of the replicated algorithm splits evenly: instance parts and chunks then coincide.
  const uint64_t size_bytes = static_cast<uint64_t>(replicated->num_chunks) * 3 * 4 * n;
  const Plan expected = lowered(original, size_bytes, k);
  const Plan got = lowered(*replicated, size_bytes, 1);
  ASSERT_EQ(got.ranks.size(), expected.ranks.size());
  for (size_t r = 0; r < got.ranks.size(); ++r) EXPECT_TRUE(got.ranks[r] == expected.ranks[r]) << "rank " << r;
  // The comparison tells instances apart: one instance of the original is another plan.
  EXPECT_FALSE(lowered(original, size_bytes, 1).ranks == got.ranks);
}

INSTANTIATE_TEST_SUITE_P(
    Classic, ReplicateInstances,
    ::testing::Combine(::testing::Values(Case{ClassicAlgo::kRing, CollectiveKind::kAllGather},
                                         Case{ClassicAlgo::kRing, CollectiveKind::kAllReduce},
                                         Case{ClassicAlgo::kRing, CollectiveKind::kReduceScatter},
                                         Case{ClassicAlgo::kDirect, CollectiveKind::kAllToAll},
                                         Case{ClassicAlgo::kRecursiveDoubling, CollectiveKind::kAllGather},
                                         Case{ClassicAlgo::kDoubleBinaryTree, CollectiveKind::kAllReduce}),
                       ::testing::Values(2, 3)));

TEST(ReplicateInstancesErrors, OneIsTheSameAlgorithmAndBelowOneIsRefused) {
  const Algorithm ring = testing::classicAlgorithm(ClassicAlgo::kRing, CollectiveKind::kAllGather, 4);
  Result<Algorithm> same = replicateInstances(ring, 1);
  ASSERT_TRUE(same.isOk());
  EXPECT_EQ(writeMscclXml(*same), writeMscclXml(ring));
  Result<Algorithm> zero = replicateInstances(ring, 0);
  ASSERT_FALSE(zero.isOk());
  EXPECT_NE(zero.status().message().find("instances must be >= 1"), std::string::npos) << zero.status().message();
}

TEST(ReplicateInstancesErrors, ABrokenProgramIsRefused) {
  Algorithm ring = testing::classicAlgorithm(ClassicAlgo::kRing, CollectiveKind::kAllGather, 4);
  ring.ranks[1].threadblocks[0].send_peer = 9;
  Result<Algorithm> replicated = replicateInstances(ring, 2);
  ASSERT_FALSE(replicated.isOk());
  EXPECT_EQ(replicated.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace braid
