// The NCCL-API shim's decisions (runtime/nccl/shim/decision.h): loading BRAID_ALGO_DIR and MSCCL_XML_FILES, Braid
// or NCCL for a call with the reason, in-place detection with NCCL's layouts, the BRAID_DEBUG=INFO line.
// Algorithms are written as `braid algo` writes them (buildClassic, then Braid JSON or MSCCL XML).
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "braid/algorithm.h"
#include "braid/classic.h"
#include "shim/decision.h"
#include "support/ir_steps.h"

namespace braid::nccl_shim {
namespace {

namespace fs = std::filesystem;

Algorithm classic(ClassicAlgo algo, CollectiveKind kind, int ranks, bool in_place) {
  ClassicRequest request;
  request.algo = algo;
  request.spec.kind = kind;
  request.spec.num_ranks = ranks;
  request.spec.in_place = in_place;
  request.spec.chunk_factor = 0;
  Result<Algorithm> built = buildClassic(request);
  EXPECT_TRUE(built.isOk()) << built.status().toString();
  return built.isOk() ? std::move(built).value() : Algorithm{};
}

void writeFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

class ShimDecision : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("braid_shim_test_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "dir");
    // BRAID_ALGO_DIR: an out-of-place 4-rank ring all-reduce for [1 KiB, 1 MiB].
    ring_ = classic(ClassicAlgo::kRing, CollectiveKind::kAllReduce, 4, /*in_place=*/false);
    ring_.min_bytes = 1024;
    ring_.max_bytes = 1 << 20;
    ring_.in_place = false;  // declared for out-of-place calls only
    ring_.out_of_place = true;
    ring_file_ = (root_ / "dir" / "ring.json").string();
    writeFile(ring_file_, writeAlgorithmJson(ring_));
    // MSCCL_XML_FILES: an in-place 2-rank ring all-gather, no window.
    gather_ = classic(ClassicAlgo::kRing, CollectiveKind::kAllGather, 2, /*in_place=*/true);
    gather_.in_place = true;  // declared for in-place calls only
    gather_.out_of_place = false;
    gather_file_ = (root_ / "gather.xml").string();
    writeFile(gather_file_, writeMscclXml(gather_));
    algorithms_ = ShimAlgorithms::load((root_ / "dir").string(), " ," + gather_file_ + ":");
    ASSERT_TRUE(algorithms_->warnings().empty()) << algorithms_->warnings().front();
  }
  void TearDown() override { fs::remove_all(root_); }

  static CommView comm(int rank, int nranks) {
    CommView view;
    view.known = true;
    view.rank = rank;
    view.nranks = nranks;
    return view;
  }

  fs::path root_;
  Algorithm ring_;
  Algorithm gather_;
  std::string ring_file_;
  std::string gather_file_;
  std::unique_ptr<ShimAlgorithms> algorithms_;
  std::vector<float> memory_ = std::vector<float>(4096);
};

TEST(ShimText, SplitFileList) {
  EXPECT_EQ(splitFileList("a.xml, b.xml:c.xml,,:"), (std::vector<std::string>{"a.xml", "b.xml", "c.xml"}));
  EXPECT_TRUE(splitFileList("").empty());
  EXPECT_TRUE(splitFileList(" : , ").empty());
}

TEST(ShimText, FormatBytes) {
  EXPECT_EQ(formatBytes(0), "0 B");
  EXPECT_EQ(formatBytes(1024), "1 KiB");
  EXPECT_EQ(formatBytes(1536), "1536 B");
  EXPECT_EQ(formatBytes(3ull << 20), "3 MiB");
  EXPECT_EQ(formatBytes(5ull << 30), "5 GiB");
  EXPECT_EQ(formatBytes(1ull << 40), "1 TiB");
  EXPECT_EQ(formatBytes(1023), "1023 B");
}

TEST(ShimText, NcclNumbering) {
  EXPECT_EQ(braidDataType(0), DataType::kInt8);
  EXPECT_EQ(braidDataType(7), DataType::kFloat32);
  EXPECT_EQ(braidDataType(9), DataType::kBfloat16);
  EXPECT_FALSE(braidDataType(10).has_value());  // ncclFloat8e4m3
  EXPECT_FALSE(braidDataType(-1).has_value());
  EXPECT_EQ(ncclTypeName(11), "float8e5m2");
  EXPECT_EQ(ncclTypeName(6), "half");
  EXPECT_EQ(ncclOpName(4), "avg");
  EXPECT_EQ(ncclOpName(5), "op 5");
}

TEST_F(ShimDecision, LoadsBothSources) {
  EXPECT_EQ(algorithms_->size(), 2u);
  EXPECT_TRUE(algorithms_->servesRanks(4));
  EXPECT_TRUE(algorithms_->servesRanks(2));
  EXPECT_FALSE(algorithms_->servesRanks(8));
  const std::string summary = algorithms_->summary();
  EXPECT_NE(summary.find("BRAID_ALGO_DIR allreduce 4 ranks"), std::string::npos) << summary;
  EXPECT_NE(summary.find("MSCCL_XML_FILES allgather 2 ranks"), std::string::npos) << summary;
}

// True when `text` contains every one of `parts`.
bool hasAll(const std::string& text, const std::vector<std::string>& parts) {
  for (const std::string& part : parts) {
    if (text.find(part) == std::string::npos) return false;
  }
  return true;
}

TEST_F(ShimDecision, BadFilesAreSkippedOneWarningEach) {
  // The ring next to a truncated MSCCL XML and the summary JSON `braid synth --json` writes: the ring loads, each
  // bad file is one line naming it, in file-name order (a_corrupt.xml, ring.json, set.json).
  const fs::path dir = root_ / "mixed";
  fs::create_directories(dir);
  fs::copy_file(ring_file_, dir / "ring.json");
  const std::string xml = writeMscclXml(gather_);
  writeFile(dir / "a_corrupt.xml", xml.substr(0, xml.size() / 2));
  writeFile(dir / "set.json", "{\"candidates\": [{\"name\": \"ring\", \"file\": \"ring.json\"}]}\n");
  writeFile(dir / "notes.txt", "not an algorithm file: not read");
  const std::string missing = (root_ / "nothing.xml").string();
  for (int round = 0; round < 2; ++round) {  // the same files give the same set and lines (every rank)
    std::unique_ptr<ShimAlgorithms> loaded = ShimAlgorithms::load(dir.string(), missing + "," + gather_file_);
    EXPECT_EQ(loaded->size(), 2u) << loaded->summary();
    EXPECT_TRUE(loaded->servesRanks(4));
    EXPECT_TRUE(loaded->servesRanks(2));
    const std::vector<std::string>& warnings = loaded->warnings();
    ASSERT_EQ(warnings.size(), 3u);
    EXPECT_TRUE(hasAll(warnings[0], {"BRAID_ALGO_DIR: ", (dir / "a_corrupt.xml").string() + " skipped: "}))
        << warnings[0];
    EXPECT_TRUE(hasAll(warnings[1], {"BRAID_ALGO_DIR: ", (dir / "set.json").string() + " skipped: "})) << warnings[1];
    EXPECT_TRUE(hasAll(warnings[2], {"MSCCL_XML_FILES: ", missing + " skipped: "})) << warnings[2];
    for (const std::string& line : warnings) {
      EXPECT_EQ(line.find('\n'), std::string::npos) << line;
      EXPECT_LE(line.size(), 300u + 200u) << line;
      EXPECT_EQ(line.find("every call goes to NCCL"), std::string::npos) << line;
    }
  }
}

TEST_F(ShimDecision, NothingLoadedIsOneWarning) {
  // An empty folder: no file skipped, one line.
  fs::create_directories(root_ / "empty");
  std::unique_ptr<ShimAlgorithms> empty = ShimAlgorithms::load((root_ / "empty").string(), "");
  EXPECT_EQ(empty->size(), 0u);
  ASSERT_EQ(empty->warnings().size(), 1u);
  EXPECT_EQ(empty->warnings()[0],
            "BRAID_ALGO_DIR=" + (root_ / "empty").string() +
                " holds no algorithm the shim can run (0 files skipped); every call goes to NCCL");
  // Every file bad, in both variables: one line per file, then the summary.
  fs::create_directories(root_ / "bad");
  writeFile(root_ / "bad" / "set.json", "[]");
  const std::string missing = (root_ / "nothing.xml").string();
  std::unique_ptr<ShimAlgorithms> bad = ShimAlgorithms::load((root_ / "bad").string(), missing);
  EXPECT_EQ(bad->size(), 0u);
  ASSERT_EQ(bad->warnings().size(), 3u);
  EXPECT_EQ(bad->warnings()[2], "BRAID_ALGO_DIR=" + (root_ / "bad").string() + " and MSCCL_XML_FILES=" + missing +
                                    " hold no algorithm the shim can run (2 files skipped); every call goes to NCCL");
  // A folder that is a file or is missing: one line saying which, without "not found".
  std::unique_ptr<ShimAlgorithms> file = ShimAlgorithms::load(ring_file_, "");
  ASSERT_EQ(file->warnings().size(), 1u);
  EXPECT_EQ(file->warnings()[0], "BRAID_ALGO_DIR=" + ring_file_ + " is not a directory; every call goes to NCCL");
  std::unique_ptr<ShimAlgorithms> gone = ShimAlgorithms::load((root_ / "missing").string(), gather_file_);
  EXPECT_EQ(gone->size(), 1u);
  ASSERT_EQ(gone->warnings().size(), 1u);
  EXPECT_EQ(gone->warnings()[0], "BRAID_ALGO_DIR=" + (root_ / "missing").string() + " does not exist");
  // Nothing set: nothing to say.
  std::unique_ptr<ShimAlgorithms> none = ShimAlgorithms::load("", "");
  EXPECT_EQ(none->size(), 0u);
  EXPECT_TRUE(none->warnings().empty());
}

TEST_F(ShimDecision, MatchingAllReduceRunsBraid) {
  // 256 floats = 1 KiB: the window's lower edge, out of place.
  const CallArgs args{ShimCall::kAllReduce, memory_.data(), memory_.data() + 1024, 256, 7, 0, -1};
  const Decision d = decide(algorithms_.get(), args, comm(1, 4), 0);
  ASSERT_TRUE(d.braid()) << d.reason;
  EXPECT_EQ(d.bytes, 1024u);
  EXPECT_FALSE(d.in_place);
  EXPECT_EQ(d.candidate->algorithm.name, ring_.name);
  EXPECT_EQ(d.candidate->source, "BRAID_ALGO_DIR " + ring_file_);
  ASSERT_NE(d.plan, nullptr);
  EXPECT_EQ(d.plan->ranks.size(), 4u);
  EXPECT_EQ(logText(args, comm(1, 4), d),
            "shim: ncclAllReduce count 256 float sum out-of-place 4 ranks 1 KiB -> braid " + ring_.name +
                " (BRAID_ALGO_DIR " + ring_file_ + ", window [1 KiB, 1 MiB])");
  // The same call again gets the same plan (cached).
  EXPECT_EQ(decide(algorithms_.get(), args, comm(1, 4), 0).plan, d.plan);
  // 1 MiB (the upper edge, inclusive) still matches; one element more does not.
  std::vector<float> big(2 * 262148);
  const CallArgs at_top{ShimCall::kAllReduce, big.data(), big.data() + 262148, 262144, 7, 0, -1};
  EXPECT_TRUE(decide(algorithms_.get(), at_top, comm(0, 4), 0).braid());
  const CallArgs over{ShimCall::kAllReduce, big.data(), big.data() + 262148, 262145, 7, 0, -1};
  const Decision above = decide(algorithms_.get(), over, comm(0, 4), 0);
  EXPECT_FALSE(above.braid());
  EXPECT_EQ(above.reason, "no Braid algorithm for 4 ranks at 1048580 B out-of-place");
}

// A count whose chunks of different sizes would meet in the algorithm (here one scratch chunk takes chunks of 3 and
// 4 elements): the largest prefix the chunks split runs in Braid, the rest goes to NCCL. Classical rings lower any
// count (positional chunks keep their sizes), so a 2-rank all-reduce that reuses one scratch chunk stands for the
// synthesized programs that do not.
TEST_F(ShimDecision, CountsWhoseChunksWouldDifferRunAPrefixInBraidAndTheTailInNccl) {
  using testing::copy;
  using testing::recv;
  using testing::send;
  using testing::step;
  Algorithm reuse;
  reuse.name = "scratch_reuse_allreduce_n2";
  reuse.collective = CollectiveKind::kAllReduce;
  reuse.num_ranks = 2;
  reuse.num_chunks = 3;
  reuse.in_place = false;
  reuse.out_of_place = true;
  for (int r = 0; r < 2; ++r) {
    RankProgram p;
    p.rank = r;
    p.input_chunks = p.output_chunks = 3;
    p.scratch_chunks = 1;
    std::vector<Step> steps;
    for (int k = 0; k < 3; ++k) steps.push_back(copy(BufferKind::kInput, k, BufferKind::kOutput, k));
    for (int k = 0; k < 3; ++k) {  // o[k] = i[k] + the peer's i[k], through s[0] each time
      steps.push_back(send(BufferKind::kInput, k));
      steps.push_back(recv(BufferKind::kScratch, 0));
      steps.push_back(step(OpType::kReduce, BufferKind::kScratch, 0, BufferKind::kOutput, k));
    }
    p.threadblocks.push_back(testing::tb(0, 1 - r, 1 - r, steps));
    reuse.ranks.push_back(p);
  }
  fs::create_directories(root_ / "reuse");
  writeFile(root_ / "reuse" / "reuse.json", writeAlgorithmJson(reuse));
  std::unique_ptr<ShimAlgorithms> loaded = ShimAlgorithms::load((root_ / "reuse").string(), "");
  ASSERT_EQ(loaded->size(), 1u) << (loaded->warnings().empty() ? "" : loaded->warnings().front());

  // 10 floats: chunks of 3, 3 and 4 elements would meet in s[0]; 9 split evenly, the 10th goes to NCCL.
  const CallArgs args{ShimCall::kAllReduce, memory_.data(), memory_.data() + 64, 10, 7, 0, -1};
  const Decision d = decide(loaded.get(), args, comm(1, 2), 0);
  ASSERT_TRUE(d.braid()) << d.reason;
  EXPECT_EQ(d.bytes, 40u);  // the window is matched on the whole call
  EXPECT_EQ(d.tail_count, 1u);
  ASSERT_NE(d.plan, nullptr);
  EXPECT_EQ(d.plan->ranks[1].input_bytes, 36u);
  EXPECT_EQ(d.plan->ranks[1].output_bytes, 36u);
  EXPECT_NE(
      logText(args, comm(1, 2), d)
          .find("-> braid scratch_reuse_allreduce_n2 (BRAID_ALGO_DIR " + (root_ / "reuse" / "reuse.json").string() +
                ", window [0 B, unlimited]), the first 9 elements; the last 1 -> NCCL (the algorithm's chunks "
                "do not split 10)"),
      std::string::npos)
      << logText(args, comm(1, 2), d);
  // 9 elements split evenly: no tail. 2 elements: no prefix the chunks split, so all of it goes to NCCL.
  const CallArgs even{ShimCall::kAllReduce, memory_.data(), memory_.data() + 64, 9, 7, 0, -1};
  EXPECT_EQ(decide(loaded.get(), even, comm(1, 2), 0).tail_count, 0u);
  const CallArgs tiny{ShimCall::kAllReduce, memory_.data(), memory_.data() + 64, 2, 7, 0, -1};
  const Decision small = decide(loaded.get(), tiny, comm(1, 2), 0);
  EXPECT_FALSE(small.braid());
  EXPECT_NE(small.reason.find("cannot run 8 B"), std::string::npos) << small.reason;
  // The ring of the fixture lowers any count: no tail at 258 elements.
  const CallArgs ragged{ShimCall::kAllReduce, memory_.data(), memory_.data() + 1024, 258, 7, 0, -1};
  const Decision ring = decide(algorithms_.get(), ragged, comm(2, 4), 0);
  ASSERT_TRUE(ring.braid()) << ring.reason;
  EXPECT_EQ(ring.tail_count, 0u);
}

TEST_F(ShimDecision, EveryRuleForwardsWithItsReason) {
  float* a = memory_.data();
  float* b = memory_.data() + 1024;
  struct Case {
    const char* what;
    CallArgs args;
    CommView view;
    int depth;
    std::string reason;
  };
  CommView unknown;
  CommView forward_only = comm(0, 4);
  forward_only.forward_only = "non-blocking communicator";
  const std::vector<Case> cases = {
      {"in place",
       {ShimCall::kAllReduce, a, a, 256, 7, 0, -1},
       comm(0, 4),
       0,
       "no Braid algorithm for 4 ranks at 1 KiB in-place"},
      {"below the window",
       {ShimCall::kAllReduce, a, b, 128, 7, 0, -1},
       comm(0, 4),
       0,
       "no Braid algorithm for 4 ranks at 512 B out-of-place"},
      {"other rank count",
       {ShimCall::kAllReduce, a, b, 256, 7, 0, -1},
       comm(0, 8),
       0,
       "no Braid algorithm for 8 ranks at 1 KiB out-of-place"},
      {"group", {ShimCall::kAllReduce, a, b, 256, 7, 0, -1}, comm(0, 4), 1, "inside ncclGroupStart/ncclGroupEnd"},
      {"unknown comm",
       {ShimCall::kAllReduce, a, b, 256, 7, 0, -1},
       unknown,
       0,
       "communicator not created through the shim's init calls"},
      {"forward-only comm", {ShimCall::kAllReduce, a, b, 256, 7, 0, -1}, forward_only, 0, "non-blocking communicator"},
      {"fp8", {ShimCall::kAllReduce, a, b, 256, 10, 0, -1}, comm(0, 4), 0, "Braid has no float8e4m3"},
      {"PreMulSum op",
       {ShimCall::kAllReduce, a, b, 256, 7, 5, -1},
       comm(0, 4),
       0,
       "op 5 is not one of NCCL's built-in ops (ncclRedOpCreatePreMulSum)"},
      {"count 0", {ShimCall::kAllReduce, a, b, 0, 7, 0, -1}, comm(0, 4), 0, "count 0"},
      {"null", {ShimCall::kAllReduce, nullptr, b, 256, 7, 0, -1}, comm(0, 4), 0, "null buffer"},
      {"overlap",
       {ShimCall::kAllReduce, a, a + 8, 256, 7, 0, -1},
       comm(0, 4),
       0,
       "buffers overlap outside NCCL's in-place layout"},
      {"send", {ShimCall::kSend, a, nullptr, 256, 7, -1, 1}, comm(0, 4), 0, "point-to-point: NCCL runs it"},
      {"recv", {ShimCall::kRecv, nullptr, b, 256, 7, -1, 1}, comm(0, 4), 0, "point-to-point: NCCL runs it"},
      {"root out of range", {ShimCall::kBroadcast, a, b, 256, 7, -1, 4}, comm(0, 4), 0, "root 4 out of range"},
  };
  for (const Case& c : cases) {
    const Decision d = decide(algorithms_.get(), c.args, c.view, c.depth);
    EXPECT_FALSE(d.braid()) << c.what;
    EXPECT_EQ(d.reason, c.reason) << c.what;
  }
  // No algorithms at all.
  ShimAlgorithms none;
  const Decision d = decide(&none, {ShimCall::kAllReduce, a, b, 256, 7, 0, -1}, comm(0, 4), 0);
  EXPECT_EQ(d.reason, "no Braid algorithms loaded (BRAID_ALGO_DIR, MSCCL_XML_FILES, BRAID_TOPOLOGY)");
}

TEST_F(ShimDecision, InPlaceLayouts) {
  float* base = memory_.data();
  // All-gather, rank 1 of 2, 64 floats each: in place when send == recv + 1 * 64 elements.
  const CallArgs in_place{ShimCall::kAllGather, base + 64, base, 64, 7, -1, -1};
  const Decision gathered = decide(algorithms_.get(), in_place, comm(1, 2), 0);
  ASSERT_TRUE(gathered.braid()) << gathered.reason;
  EXPECT_TRUE(gathered.in_place);
  EXPECT_EQ(gathered.bytes, 512u);  // the gathered output, 2 x 256 B
  EXPECT_EQ(gathered.candidate->source, "MSCCL_XML_FILES " + gather_file_);
  // Rank 0's in-place piece sits at the start.
  EXPECT_TRUE(decide(algorithms_.get(), {ShimCall::kAllGather, base, base, 64, 7, -1, -1}, comm(0, 2), 0).braid());
  // Rank 1 with send == recv overlaps the output without being the layout.
  const Decision wrong = decide(algorithms_.get(), {ShimCall::kAllGather, base, base, 64, 7, -1, -1}, comm(1, 2), 0);
  EXPECT_FALSE(wrong.braid());
  EXPECT_EQ(wrong.reason, "buffers overlap outside NCCL's in-place layout");
  // Out of place: no out-of-place all-gather is loaded.
  const Decision apart =
      decide(algorithms_.get(), {ShimCall::kAllGather, base + 1024, base, 64, 7, -1, -1}, comm(1, 2), 0);
  EXPECT_EQ(apart.reason, "no Braid algorithm for 2 ranks at 512 B out-of-place");

  // Reduce-scatter, rank 2 of 4, 32 floats received: in place when recv == send + 2 * 32 elements; the size is the
  // whole input (4 x 128 B).
  const Decision scattered =
      decide(algorithms_.get(), {ShimCall::kReduceScatter, base, base + 64, 32, 7, 0, -1}, comm(2, 4), 0);
  EXPECT_TRUE(scattered.in_place);
  EXPECT_EQ(scattered.bytes, 512u);
  EXPECT_EQ(scattered.reason, "no Braid algorithm for 4 ranks at 512 B in-place");
  // All-to-all: 16 floats per peer, 4 ranks: 256 B.
  const Decision exchanged =
      decide(algorithms_.get(), {ShimCall::kAllToAll, base, base + 1024, 16, 7, -1, -1}, comm(0, 4), 0);
  EXPECT_EQ(exchanged.bytes, 256u);
  EXPECT_FALSE(exchanged.in_place);
  // A non-root broadcast rank's send buffer and a non-root reduce rank's receive buffer may be null (NCCL ignores
  // them): the rule that answers is the algorithm match, not "null buffer".
  const Decision bcast = decide(algorithms_.get(), {ShimCall::kBroadcast, nullptr, base, 16, 7, -1, 0}, comm(1, 4), 0);
  EXPECT_EQ(bcast.reason, "no Braid algorithm for 4 ranks at 64 B out-of-place");
  const Decision reduce = decide(algorithms_.get(), {ShimCall::kReduce, base, nullptr, 16, 7, 0, 0}, comm(1, 4), 0);
  EXPECT_EQ(reduce.reason, "no Braid algorithm for 4 ranks at 64 B out-of-place");
  // The root's null receive buffer is refused.
  const Decision root = decide(algorithms_.get(), {ShimCall::kReduce, base, nullptr, 16, 7, 0, 1}, comm(1, 4), 0);
  EXPECT_EQ(root.reason, "null buffer");
}

TEST_F(ShimDecision, LogLines) {
  float* a = memory_.data();
  const CallArgs args{ShimCall::kAllReduce, a, a, 256, 7, 0, -1};
  const Decision d = decide(algorithms_.get(), args, comm(0, 4), 0);
  EXPECT_EQ(logText(args, comm(0, 4), d),
            "shim: ncclAllReduce count 256 float sum in-place 4 ranks 1 KiB -> NCCL (no Braid algorithm for 4 ranks "
            "at 1 KiB in-place)");
  const CallArgs send{ShimCall::kSend, a, nullptr, 16, 2, -1, 3};
  EXPECT_EQ(logText(send, CommView{}, decide(algorithms_.get(), send, CommView{}, 0)),
            "shim: ncclSend count 16 int32 peer 3 -> NCCL (point-to-point: NCCL runs it)");
  const CallArgs bcast{ShimCall::kBcast, a, a, 8, 9, -1, 0};
  EXPECT_EQ(logText(bcast, CommView{}, decide(algorithms_.get(), bcast, CommView{}, 0)),
            "shim: ncclBcast count 8 bfloat16 root 0 -> NCCL (communicator not created through the shim's init "
            "calls)");
}

// BRAID_NCCL_ACROSS_HOSTS: the two documented values in any case; anything else is refused naming the variable and
// the text.
TEST(ShimAcrossHosts, ParsesTheSettingAndRefusesOthersNamingIt) {
  ASSERT_TRUE(parseAcrossHosts("host-driven").isOk());
  EXPECT_EQ(*parseAcrossHosts("host-driven"), AcrossHosts::kHostDriven);
  EXPECT_EQ(*parseAcrossHosts("Hierarchical"), AcrossHosts::kHierarchical);
  for (const char* bad : {"", "hier", "hostdriven", "tcp", "hierarchical "}) {
    const Result<AcrossHosts> refused = parseAcrossHosts(bad);
    ASSERT_FALSE(refused.isOk()) << bad;
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(refused.status().message(),
              "BRAID_NCCL_ACROSS_HOSTS=" + std::string(bad) + ": not host-driven or hierarchical");
  }
  EXPECT_STREQ(acrossHostsName(AcrossHosts::kHierarchical), "hierarchical");
  EXPECT_STREQ(acrossHostsName(AcrossHosts::kHostDriven), "host-driven");
}

// BRAID_TRANSPORT for the proxies: auto and tcp are TCP, ucx is UCX; threads and shm stay on one host and an unknown
// name is no transport, each refused naming the value.
TEST(ShimAcrossHosts, ProxyTransportFromBraidTransport) {
  EXPECT_EQ(*proxyTransportKind("auto"), TransportKind::kTcp);
  EXPECT_EQ(*proxyTransportKind("TCP"), TransportKind::kTcp);
  EXPECT_EQ(*proxyTransportKind("ucx"), TransportKind::kUcx);
  for (const char* local : {"threads", "shm"}) {
    const Result<TransportKind> refused = proxyTransportKind(local);
    ASSERT_FALSE(refused.isOk()) << local;
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find("BRAID_TRANSPORT=" + std::string(local) + ": does not cross hosts"),
              std::string::npos)
        << refused.status().message();
  }
  const Result<TransportKind> unknown = proxyTransportKind("rdma");
  ASSERT_FALSE(unknown.isOk());
  EXPECT_NE(unknown.status().message().find("BRAID_TRANSPORT=rdma: unknown transport"), std::string::npos)
      << unknown.status().message();
}

// One distinct host name: the device-resident executor whatever the mode; more: the mode decides, and the line names
// the host count and the proxies' transport.
TEST(ShimAcrossHosts, ChoiceFollowsTheHostsAndTheMode) {
  const std::vector<std::string> one = {"n0", "n0", "n0"};
  const std::vector<std::string> two = {"n0", "n0", "n1", "n1"};
  const std::vector<std::string> three = {"n2", "n0", "n1", "n0"};
  for (AcrossHosts mode : {AcrossHosts::kHostDriven, AcrossHosts::kHierarchical}) {
    const ExecutorChoice c = chooseExecutor(one, mode, TransportKind::kTcp);
    EXPECT_EQ(c.kind, ExecutorKind::kDeviceResident);
    EXPECT_EQ(c.hosts, 1);
    EXPECT_EQ(executorText(c), "device-resident executor");
  }
  EXPECT_EQ(chooseExecutor({}, AcrossHosts::kHierarchical, TransportKind::kTcp).kind, ExecutorKind::kDeviceResident);
  const ExecutorChoice driven = chooseExecutor(two, AcrossHosts::kHostDriven, TransportKind::kTcp);
  EXPECT_EQ(driven.kind, ExecutorKind::kHostDriven);
  EXPECT_EQ(driven.hosts, 2);
  EXPECT_EQ(executorText(driven), "host-driven CUDA transport");
  const ExecutorChoice hier = chooseExecutor(two, AcrossHosts::kHierarchical, TransportKind::kTcp);
  EXPECT_EQ(hier.kind, ExecutorKind::kHierarchical);
  EXPECT_EQ(executorText(hier), "device-resident executor, hierarchical: 2 hosts, proxies over tcp");
  const ExecutorChoice ucx = chooseExecutor(three, AcrossHosts::kHierarchical, TransportKind::kUcx);
  EXPECT_EQ(ucx.hosts, 3);
  EXPECT_EQ(executorText(ucx), "device-resident executor, hierarchical: 3 hosts, proxies over ucx");
}

}  // namespace
}  // namespace braid::nccl_shim
