// The tuner's rules file (runtime/nccl/tuner/rules.h): NCCL's example-tuner CSV format, its writer, matching and
// the messages for malformed lines.
#include <gtest/gtest.h>

#include <string>

#include "tuner/rules.h"

namespace braid::nccl_plugin {
namespace {

// The example file of NCCL's example tuner, in its three field counts (nccl@2.28.9 ext-tuner/example/README.md).
constexpr const char* kExample =
    "# comment\n"
    "\n"
    "allreduce,0,65536,tree,simple,2,1,-1,-1,1\n"
    "allreduce,65537,1048576,ring,simple,4,4,32,1,0\n"
    "allreduce,1048577,4294967295,ring,ll128,-1,-1,-1,4,-1\n"
    "broadcast,0,32768,tree,simple,-1,1,-1\n"
    "allgather,0,4294967295,ring,simple,4,2,-1\n"
    "  ReduceScatter , 131073 , 4294967295 , NVLS_Tree , LL , -1 , -1 , -1 , 2\r\n";

TEST(TunerRules, ParsesNcclsExampleFormat) {
  const TunerRules parsed = parseTunerRules(kExample, "example.conf");
  EXPECT_TRUE(parsed.warnings.empty()) << parsed.warnings.front();
  ASSERT_EQ(parsed.rules.size(), 6u);
  const TunerRule& first = parsed.rules[0];
  EXPECT_EQ(first.func, 4);  // allreduce
  EXPECT_EQ(first.min_bytes, 0u);
  EXPECT_EQ(first.max_bytes, 65536u);
  EXPECT_EQ(first.algo, 0);   // tree
  EXPECT_EQ(first.proto, 2);  // simple
  EXPECT_EQ(first.channels, 2);
  EXPECT_EQ(first.nodes, 1);
  EXPECT_EQ(first.ranks, -1);
  EXPECT_EQ(first.pipe_ops, -1);
  EXPECT_EQ(first.reg_buff, 1);
  EXPECT_EQ(first.line, 3);
  const TunerRule& eight = parsed.rules[3];  // 8 fields: any numPipeOps, any regBuff
  EXPECT_EQ(eight.func, 0);
  EXPECT_EQ(eight.pipe_ops, -1);
  EXPECT_EQ(eight.reg_buff, -1);
  const TunerRule& padded = parsed.rules[5];  // blanks, upper case, CRLF, 9 fields
  EXPECT_EQ(padded.func, 3);
  EXPECT_EQ(padded.algo, 5);  // nvls_tree
  EXPECT_EQ(padded.proto, 0);
  EXPECT_EQ(padded.pipe_ops, 2);
  EXPECT_EQ(padded.reg_buff, -1);
}

TEST(TunerRules, WriteThenReadGivesTheSameRules) {
  const TunerRules parsed = parseTunerRules(kExample, "example.conf");
  const std::string text = writeTunerRules(parsed.rules, "written by the test\nsecond line");
  EXPECT_EQ(text.rfind("# written by the test\n# second line\n", 0), 0u) << text;
  const TunerRules again = parseTunerRules(text, "written.conf");
  EXPECT_TRUE(again.warnings.empty());
  ASSERT_EQ(again.rules.size(), parsed.rules.size());
  for (size_t i = 0; i < parsed.rules.size(); ++i) EXPECT_TRUE(again.rules[i].sameAs(parsed.rules[i])) << i;
  // Sizes above 4 GiB and every name survive.
  std::vector<TunerRule> all;
  for (int func = 0; func < 5; ++func) {
    for (int algo = 0; algo < 7; ++algo) {
      TunerRule r;
      r.func = func;
      r.algo = algo;
      r.proto = (func + algo) % 3;
      r.min_bytes = uint64_t{1} << 33;
      r.max_bytes = uint64_t{1} << 40;
      r.channels = algo + 1;
      r.nodes = func + 1;
      r.reg_buff = algo % 2;
      all.push_back(r);
    }
  }
  const TunerRules round = parseTunerRules(writeTunerRules(all), "all.conf");
  ASSERT_EQ(round.rules.size(), all.size());
  for (size_t i = 0; i < all.size(); ++i) EXPECT_TRUE(round.rules[i].sameAs(all[i])) << i;
}

TEST(TunerRules, MalformedLinesAreSkippedWithFileLineAndField) {
  const std::string text =
      "allreduce,0,100,ring,simple,-1,-1,-1\n"
      "allreduce,0,100,spiral,simple,-1,-1,-1\n"     // line 2: algorithm
      "allreduce,0,100,ring\n"                       // line 3: field count
      "allreduce,100,0,ring,simple,-1,-1,-1\n"       // line 4: max below min
      "allreduce,0,1e3,ring,simple,-1,-1,-1\n"       // line 5: not a byte count
      "allreduce,0,100,ring,simple,0,-1,-1\n"        // line 6: channels 0
      "allreduce,0,100,ring,simple,-1,-1,-1,-1,2\n"  // line 7: regBuff
      "gather,0,100,ring,simple,-1,-1,-1\n"          // line 8: collective
      "allgather,0,100,ring,ll256,-1,-1,-1\n"        // line 9: protocol
      "allgather,0,100,ring,ll,-1,-3,-1\n";          // line 10: nNodes
  const TunerRules parsed = parseTunerRules(text, "bad.conf");
  ASSERT_EQ(parsed.rules.size(), 1u);
  ASSERT_EQ(parsed.warnings.size(), 9u);
  const char* expected[] = {"bad.conf:2: field 4 (algorithm): 'spiral'",
                            "bad.conf:3: 4 fields",
                            "bad.conf:4: field 3 (max_bytes)",
                            "bad.conf:5: field 3 (max_bytes): '1e3'",
                            "bad.conf:6: field 6 (channels)",
                            "bad.conf:7: field 10 (regBuff)",
                            "bad.conf:8: field 1 (collective_type): 'gather'",
                            "bad.conf:9: field 5 (protocol): 'll256'",
                            "bad.conf:10: field 7 (nNodes)"};
  for (size_t i = 0; i < 9; ++i) {
    EXPECT_EQ(parsed.warnings[i].rfind(expected[i], 0), 0u) << parsed.warnings[i];
    EXPECT_NE(parsed.warnings[i].find("line skipped"), std::string::npos);
  }
}

TEST(TunerRules, FirstMatchingRuleWins) {
  const TunerRules parsed = parseTunerRules(kExample, "example.conf");
  // allreduce 1 KiB on 1 node, registered buffers: line 3.
  const TunerRule* r = firstMatchingRule(parsed.rules, 4, 1024, 1, 8, 1, 1);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->line, 3);
  // Not registered: line 3 needs regBuff 1; line 4 needs 4 nodes; nothing else covers 1 KiB.
  EXPECT_EQ(firstMatchingRule(parsed.rules, 4, 1024, 1, 8, 1, 0), nullptr);
  // regBuff unknown (v3): matches line 3.
  EXPECT_EQ(firstMatchingRule(parsed.rules, 4, 1024, 1, 8, 1, -1)->line, 3);
  EXPECT_EQ(firstMatchingRule(parsed.rules, 4, 65537, 4, 32, 1, 0)->line, 4);
  EXPECT_EQ(firstMatchingRule(parsed.rules, 4, 65537, 4, 16, 1, 0), nullptr);  // nRanks 32 only
  EXPECT_EQ(firstMatchingRule(parsed.rules, 4, 4294967295u, 2, 16, 4, 0)->line, 5);
  EXPECT_EQ(firstMatchingRule(parsed.rules, 4, 4294967296u, 2, 16, 4, 0), nullptr);  // above max_bytes
  EXPECT_EQ(firstMatchingRule(parsed.rules, 2, 1 << 20, 2, 16, 7, 1)->line, 7);
}

TEST(TunerRules, MissingFileIsAnErrorNamingIt) {
  Result<TunerRules> r = readTunerRulesFile("/nonexistent/braid_rules.conf");
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("/nonexistent/braid_rules.conf"), std::string::npos);
}

}  // namespace
}  // namespace braid::nccl_plugin
