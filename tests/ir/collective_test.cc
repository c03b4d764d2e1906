// CollectiveSpec and Algorithm::spec: chunk counts, expected outputs, aliasing and bus-bandwidth
// factors, each checked against values worked out by hand from the definitions in collective.h.
#include "braid/collective.h"

#include <gtest/gtest.h>

#include <cmath>

#include "braid/algorithm.h"

namespace braid {
namespace {

CollectiveSpec makeSpec(CollectiveKind kind, int n, int c, bool in_place = false, int root = 0) {
  CollectiveSpec spec;
  spec.kind = kind;
  spec.num_ranks = n;
  spec.chunk_factor = c;
  spec.in_place = in_place;
  spec.root = root;
  return spec;
}

TEST(CollectiveNames, RoundTripAndAliases) {
  for (CollectiveKind kind :
       {CollectiveKind::kAllGather, CollectiveKind::kReduceScatter, CollectiveKind::kAllReduce,
        CollectiveKind::kAllToAll, CollectiveKind::kBroadcast, CollectiveKind::kReduce, CollectiveKind::kCustom}) {
    std::optional<CollectiveKind> parsed = parseCollective(collectiveName(kind));
    ASSERT_TRUE(parsed.has_value()) << collectiveName(kind);
    EXPECT_EQ(*parsed, kind);
  }
  EXPECT_STREQ(collectiveName(CollectiveKind::kReduceScatter), "reducescatter");
  EXPECT_EQ(parseCollective("reduce_scatter"), CollectiveKind::kReduceScatter);
  EXPECT_EQ(parseCollective("All_Gather"), CollectiveKind::kAllGather);
  EXPECT_EQ(parseCollective("ALL_REDUCE"), CollectiveKind::kAllReduce);
  EXPECT_EQ(parseCollective("all_to_all"), CollectiveKind::kAllToAll);
  EXPECT_EQ(parseCollective("AllToAll"), CollectiveKind::kAllToAll);
  EXPECT_FALSE(parseCollective("alltoallv").has_value());
  EXPECT_FALSE(parseCollective("").has_value());
  EXPECT_FALSE(parseCollective("all-gather").has_value());
}

TEST(CollectiveSpecCounts, PerCollectiveTable) {
  // n = 3, c = 2: the table at the top of collective.h.
  struct Row {
    CollectiveKind kind;
    int in, out, loop, mult;
  };
  const Row rows[] = {
      {CollectiveKind::kAllGather, 2, 6, 6, 3}, {CollectiveKind::kReduceScatter, 6, 2, 6, 3},
      {CollectiveKind::kAllReduce, 2, 2, 2, 1}, {CollectiveKind::kAllToAll, 6, 6, 6, 3},
      {CollectiveKind::kBroadcast, 2, 2, 2, 1}, {CollectiveKind::kReduce, 2, 2, 2, 1},
  };
  for (const Row& row : rows) {
    CollectiveSpec spec = makeSpec(row.kind, 3, 2);
    EXPECT_EQ(spec.inputChunks(), row.in) << collectiveName(row.kind);
    EXPECT_EQ(spec.outputChunks(), row.out) << collectiveName(row.kind);
    EXPECT_EQ(spec.chunksPerLoop(), row.loop) << collectiveName(row.kind);
    EXPECT_EQ(spec.sizeMultiplier(), row.mult) << collectiveName(row.kind);
  }
}

TEST(CollectiveSpecExpected, AllGather) {
  CollectiveSpec spec = makeSpec(CollectiveKind::kAllGather, 3, 2);
  // output chunk 3 = piece 1 of rank 1, on every rank.
  for (int r = 0; r < 3; ++r) EXPECT_EQ(spec.expectedOutput(r, 3), (ChunkValue{{1, 1}}));
  EXPECT_EQ(spec.expectedOutput(2, 0), (ChunkValue{{0, 0}}));
  EXPECT_EQ(spec.expectedOutput(0, 5), (ChunkValue{{2, 1}}));
  EXPECT_FALSE(spec.expectedOutput(0, 6).has_value());
  EXPECT_FALSE(spec.expectedOutput(3, 0).has_value());
}

TEST(CollectiveSpecExpected, ReduceScatterSumsTheRanksPiece) {
  CollectiveSpec spec = makeSpec(CollectiveKind::kReduceScatter, 3, 2);
  // rank 2 output chunk 1 is input chunk 2*2+1 = 5 summed over all ranks.
  EXPECT_EQ(spec.expectedOutput(2, 1), (ChunkValue{{0, 5}, {1, 5}, {2, 5}}));
  EXPECT_EQ(spec.expectedOutput(0, 0), (ChunkValue{{0, 0}, {1, 0}, {2, 0}}));
  EXPECT_EQ(spec.expectedOutput(1, 0), (ChunkValue{{0, 2}, {1, 2}, {2, 2}}));
}

TEST(CollectiveSpecExpected, AllReduceAllToAllBroadcastReduce) {
  EXPECT_EQ(makeSpec(CollectiveKind::kAllReduce, 2, 3).expectedOutput(1, 2), (ChunkValue{{0, 2}, {1, 2}}));
  // alltoall n=3 c=2: rank 1 output chunk 4 = (s=2, piece 0) = rank 2's input chunk 1*2+0 = 2.
  CollectiveSpec a2a = makeSpec(CollectiveKind::kAllToAll, 3, 2);
  EXPECT_EQ(a2a.expectedOutput(1, 4), (ChunkValue{{2, 2}}));
  EXPECT_EQ(a2a.expectedOutput(0, 3), (ChunkValue{{1, 1}}));
  EXPECT_EQ(a2a.expectedOutput(2, 1), (ChunkValue{{0, 5}}));
  CollectiveSpec bcast = makeSpec(CollectiveKind::kBroadcast, 4, 2, false, 3);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(bcast.expectedOutput(r, 1), (ChunkValue{{3, 1}}));
  CollectiveSpec reduce = makeSpec(CollectiveKind::kReduce, 3, 1, false, 1);
  EXPECT_EQ(reduce.expectedOutput(1, 0), (ChunkValue{{0, 0}, {1, 0}, {2, 0}}));
  EXPECT_FALSE(reduce.expectedOutput(0, 0).has_value());
  EXPECT_FALSE(reduce.expectedOutput(2, 0).has_value());
}

TEST(CollectiveSpecAlias, InPlaceViews) {
  CollectiveSpec ag = makeSpec(CollectiveKind::kAllGather, 4, 2, true);
  EXPECT_EQ(ag.inputAliasInOutput(3, 1), 7);
  EXPECT_EQ(ag.inputAliasInOutput(0, 0), 0);
  EXPECT_EQ(ag.inputAliasInOutput(1, 2), -1);  // past the input
  EXPECT_EQ(ag.outputAliasInInput(3, 1), -1);
  CollectiveSpec rs = makeSpec(CollectiveKind::kReduceScatter, 4, 2, true);
  EXPECT_EQ(rs.outputAliasInInput(2, 1), 5);
  EXPECT_EQ(rs.inputAliasInOutput(2, 5), -1);
  for (CollectiveKind kind :
       {CollectiveKind::kAllReduce, CollectiveKind::kAllToAll, CollectiveKind::kBroadcast, CollectiveKind::kReduce}) {
    CollectiveSpec spec = makeSpec(kind, 3, 2, true);
    EXPECT_EQ(spec.inputAliasInOutput(2, 1), 1) << collectiveName(kind);
    EXPECT_EQ(spec.outputAliasInInput(2, 1), -1) << collectiveName(kind);
  }
  CollectiveSpec out_of_place = makeSpec(CollectiveKind::kAllGather, 4, 2, false);
  EXPECT_EQ(out_of_place.inputAliasInOutput(3, 1), -1);
  EXPECT_EQ(makeSpec(CollectiveKind::kReduceScatter, 4, 2, false).outputAliasInInput(2, 1), -1);
}

TEST(CollectiveSpecBusBandwidth, FactorsForSeveralRankCounts) {
  // nccl-tests: allreduce 2(n-1)/n, allgather/reducescatter/alltoall (n-1)/n, broadcast/reduce 1.
  struct Row {
    int n;
    double allreduce, gather;
  };
  const Row rows[] = {{1, 0.0, 0.0}, {2, 1.0, 0.5}, {8, 1.75, 0.875}, {17, 32.0 / 17.0, 16.0 / 17.0}};
  for (const Row& row : rows) {
    EXPECT_DOUBLE_EQ(makeSpec(CollectiveKind::kAllReduce, row.n, 1).busBandwidthFactor(), row.allreduce) << row.n;
    for (CollectiveKind kind :
         {CollectiveKind::kAllGather, CollectiveKind::kReduceScatter, CollectiveKind::kAllToAll}) {
      EXPECT_DOUBLE_EQ(makeSpec(kind, row.n, 1).busBandwidthFactor(), row.gather) << row.n;
    }
    EXPECT_DOUBLE_EQ(makeSpec(CollectiveKind::kBroadcast, row.n, 1).busBandwidthFactor(), 1.0);
    EXPECT_DOUBLE_EQ(makeSpec(CollectiveKind::kReduce, row.n, 1).busBandwidthFactor(), 1.0);
  }
  // RC-53 (realcases nccltests): 4-rank alltoall busbw = 3/4 algbw.
  EXPECT_DOUBLE_EQ(makeSpec(CollectiveKind::kAllToAll, 4, 1).busBandwidthFactor(), 0.75);
}

TEST(CollectiveSpecText, ToString) {
  EXPECT_EQ(makeSpec(CollectiveKind::kAllGather, 8, 1).toString(), "allgather n=8 c=1 out-of-place");
  EXPECT_EQ(makeSpec(CollectiveKind::kReduceScatter, 4, 3, true).toString(), "reducescatter n=4 c=3 in-place");
  EXPECT_EQ(makeSpec(CollectiveKind::kBroadcast, 4, 2, false, 3).toString(), "broadcast n=4 c=2 root=3 out-of-place");
}

TEST(CollectiveSpecValidate, RejectsBadSpecs) {
  EXPECT_TRUE(validateSpec(makeSpec(CollectiveKind::kAllReduce, 1, 1)).isOk());
  Status custom = validateSpec(makeSpec(CollectiveKind::kCustom, 4, 1));
  EXPECT_EQ(custom.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(custom.message().find("custom"), std::string::npos);
  Status ranks = validateSpec(makeSpec(CollectiveKind::kAllReduce, 0, 1));
  EXPECT_FALSE(ranks.isOk());
  EXPECT_NE(ranks.message().find("num_ranks"), std::string::npos);
  Status chunks = validateSpec(makeSpec(CollectiveKind::kAllReduce, 2, 0));
  EXPECT_NE(chunks.message().find("chunk_factor"), std::string::npos);
  Status root = validateSpec(makeSpec(CollectiveKind::kBroadcast, 4, 1, false, 4));
  EXPECT_NE(root.message().find("root"), std::string::npos);
  EXPECT_FALSE(validateSpec(makeSpec(CollectiveKind::kReduce, 4, 1, false, -1)).isOk());
  EXPECT_FALSE(validateSpec(makeSpec(CollectiveKind::kAllGather, 1 << 16, 1 << 16)).isOk());
}

Algorithm makeAlgorithm(CollectiveKind kind, int n, int num_chunks) {
  Algorithm algorithm;
  algorithm.name = "t";
  algorithm.collective = kind;
  algorithm.collective_name = collectiveName(kind);
  algorithm.num_ranks = n;
  algorithm.num_chunks = num_chunks;
  algorithm.root = n - 1;
  return algorithm;
}

TEST(AlgorithmSpec, ChunkFactorFromChunksPerLoop) {
  // ndv4 a2a2ll: ngpus 8, nchunksperloop 16 -> c = 2; ag-4m: 32 / 8 = 4; r48ll allreduce: c = 64.
  Result<CollectiveSpec> a2a = makeAlgorithm(CollectiveKind::kAllToAll, 8, 16).spec(false);
  ASSERT_TRUE(a2a.isOk()) << a2a.status().toString();
  EXPECT_EQ(a2a->chunk_factor, 2);
  EXPECT_FALSE(a2a->in_place);
  EXPECT_EQ(a2a->inputChunks(), 16);
  Result<CollectiveSpec> ag = makeAlgorithm(CollectiveKind::kAllGather, 8, 32).spec(true);
  ASSERT_TRUE(ag.isOk());
  EXPECT_EQ(ag->chunk_factor, 4);
  EXPECT_TRUE(ag->in_place);
  Result<CollectiveSpec> rs = makeAlgorithm(CollectiveKind::kReduceScatter, 4, 12).spec(true);
  ASSERT_TRUE(rs.isOk());
  EXPECT_EQ(rs->chunk_factor, 3);
  Result<CollectiveSpec> ar = makeAlgorithm(CollectiveKind::kAllReduce, 8, 64).spec(false);
  ASSERT_TRUE(ar.isOk());
  EXPECT_EQ(ar->chunk_factor, 64);
  Result<CollectiveSpec> bcast = makeAlgorithm(CollectiveKind::kBroadcast, 4, 3).spec(false);
  ASSERT_TRUE(bcast.isOk());
  EXPECT_EQ(bcast->chunk_factor, 3);
  EXPECT_EQ(bcast->root, 3);
}

TEST(AlgorithmSpec, Errors) {
  Result<CollectiveSpec> indivisible = makeAlgorithm(CollectiveKind::kAllGather, 4, 6).spec(false);
  ASSERT_FALSE(indivisible.isOk());
  EXPECT_EQ(indivisible.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(indivisible.status().message().find("divisible"), std::string::npos);
  Result<CollectiveSpec> custom = makeAlgorithm(CollectiveKind::kCustom, 24, 16).spec(true);
  ASSERT_FALSE(custom.isOk());
  EXPECT_EQ(custom.status().code(), StatusCode::kUnsupported);
  EXPECT_FALSE(makeAlgorithm(CollectiveKind::kAllReduce, 4, 0).spec(false).isOk());
  EXPECT_FALSE(makeAlgorithm(CollectiveKind::kAllReduce, 0, 4).spec(false).isOk());
  Algorithm bad_root = makeAlgorithm(CollectiveKind::kReduce, 4, 1);
  bad_root.root = 7;
  EXPECT_FALSE(bad_root.spec(false).isOk());
}

TEST(AlgorithmSizes, CountsThreadblocksAndSteps) {
  Algorithm algorithm = makeAlgorithm(CollectiveKind::kAllReduce, 2, 1);
  algorithm.ranks.resize(2);
  algorithm.ranks[0].threadblocks.resize(3);
  algorithm.ranks[0].threadblocks[1].steps.resize(4);
  algorithm.ranks[1].threadblocks.resize(1);
  algorithm.ranks[1].threadblocks[0].steps.resize(2);
  EXPECT_EQ(algorithm.numThreadblocks(), 4);
  EXPECT_EQ(algorithm.numSteps(), 6);
  EXPECT_EQ(Algorithm{}.numSteps(), 0);
}

TEST(VerifyReportText, OneLinePerIssueWithMode) {
  VerifyReport report;
  EXPECT_EQ(report.toString(), "");
  VerifyIssue issue;
  issue.kind = IssueKind::kPostcondition;
  issue.message = "rank 3 output chunk 5: expected {(5,0)} got undefined";
  issue.mode = "in-place";
  report.issues.push_back(issue);
  issue.kind = IssueKind::kStructure;
  issue.message = "bad";
  issue.mode = "";
  report.issues.push_back(issue);
  report.total_issues = 5;
  EXPECT_EQ(report.toString(),
            "in-place: postcondition: rank 3 output chunk 5: expected {(5,0)} got undefined\n"
            "structure: bad\n"
            "... 3 more issue(s) not recorded\n");
}

}  // namespace
}  // namespace braid
