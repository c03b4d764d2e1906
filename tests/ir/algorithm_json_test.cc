// Braid algorithm JSON (lossless round trip, errors with file, line and JSON path), the TACCL/SCCL
// algorithm JSON importer, and loadAlgorithm's choice by content.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "braid/algorithm.h"
#include "support/algorithm_diff.h"

namespace braid {
namespace {

Algorithm richAlgorithm() {
  Algorithm a;
  a.name = "ring \"quoted\" \xC2\xB5s";
  a.collective = CollectiveKind::kReduceScatter;
  a.collective_name = "reduce_scatter";
  a.num_ranks = 3;
  a.num_chunks = 6;
  a.num_channels = 2;
  a.protocol = Protocol::kLL;
  a.in_place = true;
  a.out_of_place = true;
  a.min_bytes = 7;
  a.max_bytes = kUnlimitedBytes;
  a.root = 2;
  a.redop = "sum";
  a.provenance.generator = "braid algo ring";
  a.provenance.topology = "dgx1-v100";
  a.provenance.sketch = "sk1";
  a.provenance.solver = "z3 4.8.12";
  a.provenance.created = "2026-11-29T21:00:00Z";
  a.provenance.lower_bound_us = 12.345678901234567;
  a.provenance.predicted_us = {{1024, 3.25}, {18446744073709551615ull, 1e300}, {0, 0.1}};
  a.provenance.extra = {{"rounds", "7"}, {"note", "a\nb"}};
  a.notes = {"first note", "second note"};
  a.ranks.resize(3);
  for (int r = 0; r < 3; ++r) {
    RankProgram& p = a.ranks[r];
    p.rank = r;
    p.input_chunks = 6;
    p.output_chunks = 2;
    p.scratch_chunks = r;
    p.precopies = {PreCopy{r, 1 - (r % 2), 1 + r}};
    p.threadblocks.resize(2);
    for (int t = 0; t < 2; ++t) {
      Threadblock& tb = p.threadblocks[t];
      tb.id = t;
      tb.send_peer = t == 0 ? (r + 1) % 3 : -1;
      tb.recv_peer = t == 0 ? (r + 2) % 3 : -1;
      tb.channel = t;
      for (int s = 0; s < 3; ++s) {
        Step st;
        st.type = static_cast<OpType>((r * 3 + t * 2 + s) % 9);
        st.src_buf = static_cast<BufferKind>(s % 3);
        st.src_off = s - 1;
        st.dst_buf = static_cast<BufferKind>((s + r) % 3);
        st.dst_off = 10 * r + s;
        st.count = s;
        if (s == 2) st.deps = {{1 - t, 0}, {1 - t, 1}};
        st.has_dep = s == 0;
        tb.steps.push_back(st);
      }
    }
  }
  return a;
}

TEST(AlgorithmJson, LosslessRoundTrip) {
  const Algorithm a = richAlgorithm();
  const std::string text = writeAlgorithmJson(a);
  Result<Algorithm> back = readAlgorithmJson(text, "rich.json");
  ASSERT_TRUE(back.isOk()) << back.status().toString();
  EXPECT_EQ(testing::algorithmDifference(a, *back), "");
  EXPECT_EQ(writeAlgorithmJson(*back), text);
  // A finite max_bytes is a number.
  Algorithm b = a;
  b.max_bytes = 123456789012345ull;
  Result<Algorithm> back2 = readAlgorithmJson(writeAlgorithmJson(b), "b.json");
  ASSERT_TRUE(back2.isOk());
  EXPECT_EQ(back2->max_bytes, 123456789012345ull);
}

TEST(AlgorithmJson, ErrorsNameFileLineAndPath) {
  const std::string good = writeAlgorithmJson(richAlgorithm());
  // Change the count of rank 1, threadblock 0, step 2 to a string; find its line by hand.
  const std::string marker = "\"dst_off\": 12";  // rank 1 (10*r + s), step 2
  const size_t at = good.find(marker);
  ASSERT_NE(at, std::string::npos);
  const size_t count_at = good.find("\"count\": 2", at);
  ASSERT_NE(count_at, std::string::npos);
  std::string bad = good;
  bad.replace(count_at, 10, "\"count\": \"2\"");
  const int line = 1 + static_cast<int>(std::count(bad.begin(), bad.begin() + count_at, '\n'));
  Result<Algorithm> r = readAlgorithmJson(bad, "bad.json");
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), StatusCode::kParseError);
  EXPECT_NE(r.status().message().find(fmt::format("bad.json:{}: ranks[1].threadblocks[0].steps[2].count: ", line)),
            std::string::npos)
      << r.status().message();

  struct Case {
    std::string text;
    std::string expect;
  };
  std::vector<Case> cases = {
      {"{\n  \"format\": \"braid-algorithm\",\n  \"version\": 1,\n  \"name\": 5\n}",
       "bad.json:4: name: expected a string"},
      {"{\n  \"format\": \"something\"\n}", "bad.json:2: format: is \"something\""},
      {"{\n  \"format\": \"braid-algorithm\",\n  \"version\": 99\n}", "bad.json:3: version: version 99 is newer"},
      {"{\n  \"format\": \"braid-algorithm\",\n  \"version\": 1,\n  \"name\": \"x\"\n}",
       "bad.json:1: (top level): missing required member 'collective'"},
      {"{\n  \"format\": \"braid-algorithm\",\n  \"version\": 1,\n  \"name\": \"x\",\n  \"collective\": \"allmix\"\n}",
       "bad.json:5: collective: unknown collective \"allmix\""},
      {"{\n  \"format\": \"braid-algorithm\",\n  \"version\": 1.5\n}", "bad.json:3: version: expected an integer"},
      {"{\n  \"format\": \"braid-algorithm\",\n  \"version\": 1,\n  \"name\": \"x\",,\n}",
       "bad.json:4: malformed JSON"},
      {"[1, 2]", "bad.json:1: (top level): expected a JSON object"},
  };
  for (const Case& c : cases) {
    Result<Algorithm> e = readAlgorithmJson(c.text, "bad.json");
    ASSERT_FALSE(e.isOk()) << c.text;
    EXPECT_NE(e.status().message().find(c.expect), std::string::npos)
        << "expected '" << c.expect << "' in: " << e.status().message();
  }
  // Structural errors deeper in.
  std::string wrong_tb = good;
  const size_t id1 = wrong_tb.find("\"id\": 1");
  ASSERT_NE(id1, std::string::npos);
  wrong_tb.replace(id1, 7, "\"id\": 5");
  Result<Algorithm> w = readAlgorithmJson(wrong_tb, "bad.json");
  ASSERT_FALSE(w.isOk());
  EXPECT_NE(w.status().message().find("ranks[0].threadblocks[1].id: is 5 but this is entry 1"), std::string::npos)
      << w.status().message();
}

// A 3-rank allgather in SCCL form. Chunk c starts on rank c. Step 0: 0->1 (chunk 0), 1->2 (chunk 1),
// 2->0 (chunk 2). Step 1: 1->2 forwards chunk 0 (received in step 0), 2->0 forwards chunk 1, 0->1
// forwards chunk 2. A ring: every forward must wait for the receive of step 0.
const char* kSccl = R"json({"sccl_type": "algorithm", "name": "Allgather(n=3)-Ring-steps=2",
 "instance": {"sccl_type": "instance", "steps": 2, "extra_rounds": 0, "chunks": 1},
 "input_map": {"0": [0], "1": [1], "2": [2]},
 "output_map": {"0": [2, 0, 1], "1": [0, 1, 2], "2": [0, 1, 2]},
 "steps": [{"sccl_type": "step", "rounds": 1, "sends": [[0, 0, 1], [1, 1, 2], [2, 2, 0]]},
           {"sccl_type": "step", "rounds": 1, "sends": [[0, 1, 2], [1, 2, 0], [2, 0, 1]]}],
 "collective": {"sccl_type": "collective", "name": "Allgather(n=3)", "nodes": 3, "chunks": []}}
)json";

TEST(TacclAlgorithmJson, ConvertsRingAllgather) {
  Result<Algorithm> r = readTacclAlgorithmJson(kSccl, "ring.sccl.json");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const Algorithm& a = *r;
  EXPECT_EQ(a.collective, CollectiveKind::kAllGather);
  EXPECT_EQ(a.num_ranks, 3);
  EXPECT_EQ(a.num_chunks, 3);
  EXPECT_FALSE(a.in_place);
  EXPECT_TRUE(a.out_of_place);
  EXPECT_EQ(a.provenance.extra.at("rounds"), "2");
  for (int r0 = 0; r0 < 3; ++r0) {
    const RankProgram& p = a.ranks[r0];
    EXPECT_EQ(p.input_chunks, 1);
    EXPECT_EQ(p.output_chunks, 3);
    EXPECT_EQ(p.scratch_chunks, 0);
    // Own chunk r0 is copied input 0 -> output r0 (sorted output addresses 0,1,2).
    ASSERT_EQ(p.precopies.size(), 1u);
    EXPECT_EQ(p.precopies[0].input_off, 0);
    EXPECT_EQ(p.precopies[0].output_off, r0);
    // tb0 receives from the previous rank, tb1 sends to the next: (send, recv) order.
    ASSERT_EQ(p.threadblocks.size(), 2u);
    const Threadblock& recv = p.threadblocks[0];
    const Threadblock& send = p.threadblocks[1];
    EXPECT_EQ(recv.send_peer, -1);
    EXPECT_EQ(recv.recv_peer, (r0 + 2) % 3);
    EXPECT_EQ(send.send_peer, (r0 + 1) % 3);
    EXPECT_EQ(send.recv_peer, -1);
    ASSERT_EQ(recv.steps.size(), 2u);
    ASSERT_EQ(send.steps.size(), 2u);
    const int prev = (r0 + 2) % 3, prev2 = (r0 + 1) % 3;
    // Step 0 receives chunk prev, step 1 chunk prev2, into output chunks of those indices.
    EXPECT_EQ(recv.steps[0].type, OpType::kRecv);
    EXPECT_EQ(recv.steps[0].dst_buf, BufferKind::kOutput);
    EXPECT_EQ(recv.steps[0].dst_off, prev);
    EXPECT_EQ(recv.steps[1].dst_off, prev2);
    EXPECT_TRUE(recv.steps[0].has_dep);
    EXPECT_FALSE(recv.steps[1].has_dep);
    // Send step 0: own chunk, no dependency. Send step 1: forwards chunk prev after it arrived.
    EXPECT_EQ(send.steps[0].src_off, r0);
    EXPECT_TRUE(send.steps[0].deps.empty());
    EXPECT_EQ(send.steps[1].src_off, prev);
    EXPECT_EQ(send.steps[1].deps, (std::vector<Dependency>{{0, 0}}));
  }
  VerifyReport report = verify(a);
  EXPECT_TRUE(report.ok) << report.toString();
}

TEST(TacclAlgorithmJson, Errors) {
  std::string early = kSccl;
  // Rank 1 forwards chunk 2 in step 0, before it has it.
  early.replace(early.find("[1, 1, 2]"), 9, "[2, 1, 2]");
  Result<Algorithm> r = readTacclAlgorithmJson(early, "e.json");
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(
      r.status().message().find("e.json:5: steps[0].sends[1]: rank 1 sends chunk 2 in step 0 but does not hold it"),
      std::string::npos)
      << r.status().message();
  std::string bad_rank = kSccl;
  bad_rank.replace(bad_rank.find("[2, 0, 1]]"), 9, "[2, 0, 7]");
  r = readTacclAlgorithmJson(bad_rank, "e.json");
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("e.json:6: steps[1].sends[2][2]: 7 is out of range [0, 2]"), std::string::npos)
      << r.status().message();
  r = readTacclAlgorithmJson("{\"sccl_type\": \"topology\"}", "e.json");
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("only \"algorithm\""), std::string::npos);
}

class LoadAlgorithmTest : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& content) {
    std::filesystem::path dir = std::filesystem::path(BRAID_BINARY_DIR) / "test_tmp" / "algorithm_json_test";
    std::filesystem::create_directories(dir);
    std::string path = (dir / name).string();
    std::ofstream(path) << content;
    return path;
  }
};

TEST_F(LoadAlgorithmTest, ChoosesByContentNotName) {
  const Algorithm rich = richAlgorithm();
  // Deliberately misleading extensions.
  Result<Algorithm> json = loadAlgorithm(write("braid.xml", writeAlgorithmJson(rich)));
  ASSERT_TRUE(json.isOk()) << json.status().toString();
  EXPECT_EQ(json->name, rich.name);
  Result<Algorithm> ring = readTacclAlgorithmJson(kSccl, "ring.json");
  ASSERT_TRUE(ring.isOk());
  Result<Algorithm> xml = loadAlgorithm(write("msccl.json", "\n  " + writeMscclXml(*ring)));
  ASSERT_TRUE(xml.isOk()) << xml.status().toString();
  EXPECT_EQ(xml->num_ranks, 3);
  EXPECT_EQ(xml->ranks[2].precopies[0].output_off, 2);
  Result<Algorithm> sccl = loadAlgorithm(write("taccl.txt", kSccl));
  ASSERT_TRUE(sccl.isOk()) << sccl.status().toString();
  EXPECT_EQ(sccl->collective, CollectiveKind::kAllGather);
  Result<Algorithm> unknown = loadAlgorithm(write("other.json", "{\"foo\": 1}"));
  ASSERT_FALSE(unknown.isOk());
  EXPECT_NE(unknown.status().message().find("not a known algorithm format"), std::string::npos);
  Result<Algorithm> empty = loadAlgorithm(write("empty.xml", ""));
  ASSERT_FALSE(empty.isOk());
  EXPECT_EQ(empty.status().code(), StatusCode::kParseError);
  Result<Algorithm> missing = loadAlgorithm("/nonexistent/algo.xml");
  ASSERT_FALSE(missing.isOk());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace braid
