// verify() at NCCL job sizes: 1000-rank classic algorithms verify (the race check included), and a
// race planted in one of them is still found exactly. These ran out of vector-clock budget when every
// threadblock carried a component for every other threadblock.
#include <gtest/gtest.h>

#include <string>

#include "braid/algorithm.h"
#include "braid/classic.h"

namespace braid {
namespace {

Algorithm classic(ClassicAlgo algo, CollectiveKind kind, int n) {
  ClassicRequest request;
  request.algo = algo;
  request.spec.kind = kind;
  request.spec.num_ranks = n;
  Result<Algorithm> built = buildClassic(request);
  EXPECT_TRUE(built.isOk()) << built.status().message();
  return built.isOk() ? std::move(built).value() : Algorithm{};
}

bool mentions(const VerifyReport& report, const std::string& text) {
  for (const VerifyIssue& issue : report.issues) {
    if (issue.message.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(VerifyScale, RingAllReduceThousandRanks) {
  const Algorithm a = classic(ClassicAlgo::kRing, CollectiveKind::kAllReduce, 1000);
  const VerifyReport report = verify(a);
  EXPECT_TRUE(report.ok) << report.toString().substr(0, 2000);
  EXPECT_FALSE(mentions(report, "race check not done"));
}

TEST(VerifyScale, RecursiveDoublingAllReduceThousandRanks) {
  // Every threadblock of a rank reads and writes the same output chunk, ordered by dependencies.
  const Algorithm a = classic(ClassicAlgo::kRecursiveDoubling, CollectiveKind::kAllReduce, 1000);
  const VerifyReport report = verify(a);
  EXPECT_TRUE(report.ok) << report.toString().substr(0, 2000);
}

TEST(VerifyScale, PlantedRaceInAThousandRankRingIsNamed) {
  // Rank 500 gets a second threadblock that copies i[y] -> o[y] while the ring's threadblock also
  // writes o[y], with nothing ordering the two: a race on exactly that rank and chunk, nothing else
  // (the copied value is the one the ring overwrites it with or reduces from).
  Algorithm a = classic(ClassicAlgo::kRing, CollectiveKind::kAllReduce, 1000);
  RankProgram& rank = a.ranks[500];
  ASSERT_EQ(rank.threadblocks.size(), 1u);
  int writer_step = -1;
  const std::vector<Step>& steps = rank.threadblocks[0].steps;
  for (size_t s = 0; s < steps.size() && writer_step < 0; ++s) {
    if (opWritesDst(steps[s].type) && steps[s].dst_buf == BufferKind::kOutput) writer_step = static_cast<int>(s);
  }
  ASSERT_GE(writer_step, 0);
  const int y = steps[writer_step].dst_off;
  Threadblock extra;
  extra.id = 1;
  Step copy;
  copy.type = OpType::kCopy;
  copy.src_buf = BufferKind::kInput;
  copy.src_off = y;
  copy.dst_buf = BufferKind::kOutput;
  copy.dst_off = y;
  extra.steps.push_back(copy);
  rank.threadblocks.push_back(extra);

  const VerifyReport racy = verify(a);
  EXPECT_FALSE(racy.ok);
  ASSERT_FALSE(racy.issues.empty());
  for (const VerifyIssue& issue : racy.issues) {
    EXPECT_EQ(issue.kind, IssueKind::kRace) << issue.message;
    EXPECT_EQ(issue.rank, 500) << issue.message;
    EXPECT_EQ(issue.chunk, y) << issue.message;
  }

  // The ring's write waits for the copy: ordered on the rank itself, so no race and a correct result.
  rank.threadblocks[0].steps[writer_step].deps.push_back(Dependency{1, 0});
  rank.threadblocks[1].steps[0].has_dep = true;
  const VerifyReport ordered = verify(a);
  EXPECT_TRUE(ordered.ok) << ordered.toString().substr(0, 2000);
}

}  // namespace
}  // namespace braid
