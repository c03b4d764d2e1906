// Real MSCCL/TACCL algorithm files (../shared/realcases, RC-31..RC-40, RC-46..RC-48): every file loads
// (or fails clearly), read -> write -> read is exact, the written XML carries every attribute both
// runtimes require, and damaged copies never crash, throw or hang.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <pugixml.hpp>
#include <random>
#include <string>
#include <vector>

#include "braid/algorithm.h"
#include "braid/file_io.h"
#include "support/algorithm_diff.h"
#include "support/corpus.h"

namespace braid {
namespace {

namespace fs = std::filesystem;

const fs::path kRealcases = testing::realcasesDir();
const char* kBroadcastNoColl = "mcrl_A_broadcast.A.n2.gpu2.i3.xml";  // RC-47: no coll attribute

std::vector<fs::path> corpusXml() {
  std::vector<fs::path> files;
  for (const char* dir : {"msccl", "taccl/outputs_xml"}) {
    const fs::path d = kRealcases / dir;
    if (!fs::is_directory(d)) continue;
    for (const auto& e : fs::directory_iterator(d)) {
      if (e.path().extension() == ".xml") files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

// XML written as "reduce_scatter" reads back as "reducescatter", old-format notes are not repeated, and
// MSCCL XML carries no provenance.
constexpr testing::DiffOptions kLenient{.collective_name = false, .notes = false, .provenance = false};

// Every attribute the Azure executor (msccl_parser.cc) and microsoft/msccl (topo.cc) read as required.
std::string missingRequiredAttribute(const std::string& xml) {
  pugi::xml_document doc;
  if (!doc.load_string(xml.c_str())) return "written XML does not parse";
  pugi::xml_node algo = doc.child("algo");
  for (const char* a : {"name", "proto", "nchannels", "nchunksperloop", "ngpus", "coll", "inplace", "outofplace",
                        "minBytes", "maxBytes"}) {
    if (!algo.attribute(a)) return fmt::format("<algo> lacks {}", a);
  }
  for (pugi::xml_node gpu : algo.children("gpu")) {
    for (const char* a : {"id", "i_chunks", "o_chunks", "s_chunks"}) {
      if (!gpu.attribute(a)) return fmt::format("<gpu> lacks {}", a);
    }
    for (pugi::xml_node copy : gpu.children("copy")) {
      if (!copy.attribute("i_off") || !copy.attribute("o_off")) return "<copy> lacks i_off/o_off";
    }
    for (pugi::xml_node tb : gpu.children("tb")) {
      for (const char* a : {"id", "send", "recv", "chan"}) {
        if (!tb.attribute(a)) return fmt::format("<tb> lacks {}", a);
      }
      bool after_nop = false;
      for (pugi::xml_node step : tb.children("step")) {
        for (const char* a : {"s", "type", "srcbuf", "srcoff", "dstbuf", "dstoff", "cnt", "depid", "deps", "hasdep"}) {
          if (!step.attribute(a)) return fmt::format("<step> lacks {}", a);
        }
        const bool nop = std::string(step.attribute("type").value()) == "nop";
        // Azure: a run of nops hands its dependencies to the next real step, which must have a depid.
        if (after_nop && !nop && step.attribute("depid").as_int() < 0) return "a nop run ends in a step without depid";
        after_nop = nop;
      }
    }
  }
  return "";
}

TEST(MscclCorpus, EveryFileLoadsRoundTripsAndIsComplete) {
  BRAID_SKIP_WITHOUT_REALCASES();
  const std::vector<fs::path> files = corpusXml();
  ASSERT_GE(files.size(), 27u) << "realcases/msccl and realcases/taccl/outputs_xml should hold 27 XML files";
  int loaded = 0;
  for (const fs::path& path : files) {
    SCOPED_TRACE(path.string());
    Result<Algorithm> a1 = loadMscclXml(path.string());
    if (path.filename() == kBroadcastNoColl) {
      ASSERT_FALSE(a1.isOk());
      EXPECT_EQ(a1.status().code(), StatusCode::kParseError);
      EXPECT_NE(a1.status().message().find(path.string() + ":1: <algo> attribute 'coll': missing"), std::string::npos)
          << a1.status().message();
      continue;
    }
    ASSERT_TRUE(a1.isOk()) << a1.status().toString();
    ++loaded;
    for (MscclFlavour flavour : {MscclFlavour::kBoth, MscclFlavour::kAzure, MscclFlavour::kMicrosoft}) {
      const std::string xml = writeMscclXml(*a1, flavour);
      EXPECT_EQ(missingRequiredAttribute(xml), "");
      Result<Algorithm> a2 = readMscclXml(xml, "written.xml");
      ASSERT_TRUE(a2.isOk()) << a2.status().toString();
      EXPECT_EQ(testing::algorithmDifference(*a1, *a2, kLenient), "") << static_cast<int>(flavour);
      // A file Braid wrote reads back exactly, notes and names included.
      Result<Algorithm> a3 = readMscclXml(writeMscclXml(*a2, flavour), "again.xml");
      ASSERT_TRUE(a3.isOk());
      EXPECT_EQ(testing::algorithmDifference(*a2, *a3), "");
    }
  }
  EXPECT_EQ(loaded, static_cast<int>(files.size()) - 1);
}

TEST(MscclCorpus, SizeWindowsHandOverWithoutGaps) {
  BRAID_SKIP_WITHOUT_REALCASES();
  auto load = [](const char* rel) { return loadMscclXml((kRealcases / rel).string()); };
  // RC-31 (Azure format, inclusive): LL up to 2078719, LL128 from 2078720 (BUG-02).
  Result<Algorithm> ll = load("msccl/ndv4_allreduce_ring_r48ll.xml");
  Result<Algorithm> ll128 = load("msccl/ndv4_allreduce_ring_r48ll128.xml");
  ASSERT_TRUE(ll.isOk() && ll128.isOk());
  EXPECT_EQ(ll->min_bytes, 266240u);
  EXPECT_EQ(ll->max_bytes, 2078719u);
  EXPECT_EQ(ll128->min_bytes, 2078720u);
  EXPECT_EQ(ll128->max_bytes, 20971520u);
  EXPECT_EQ(ll->max_bytes + 1, ll128->min_bytes);
  // RC-40 (microsoft/msccl format, exclusive maxBytes): small LL [8, 409600) then ring LL128 from 409600.
  Result<Algorithm> small = load("msccl/msccl_allreduce_small_LL.xml");
  Result<Algorithm> ring = load("msccl/msccl_allreduce_ring4ch_LL128_20ch.xml");
  ASSERT_TRUE(small.isOk() && ring.isOk());
  EXPECT_EQ(small->max_bytes, 409599u);
  EXPECT_EQ(small->max_bytes + 1, ring->min_bytes);
  EXPECT_EQ(ring->max_bytes, 19988479u);
  // RC-36 old format: defaults with notes, never a failure (BUG-01).
  Result<Algorithm> old = load("msccl/msccltools_allreduce_ring_1ch8_LL128_oldformat.xml");
  ASSERT_TRUE(old.isOk());
  EXPECT_EQ(old->min_bytes, 0u);
  EXPECT_EQ(old->max_bytes, kUnlimitedBytes);
  EXPECT_FALSE(old->out_of_place);
  EXPECT_EQ(old->notes.size(), 3u);
  // RC-48: maxBytes 2^40 in an Azure-format file.
  Result<Algorithm> a2a = load("taccl/outputs_xml/mi300x_alltoall_n24_original.xml");
  ASSERT_TRUE(a2a.isOk());
  EXPECT_EQ(a2a->max_bytes, 1099511627776u);
  EXPECT_EQ(a2a->numThreadblocks(), 1104);
  // RC-47 TACCL-EF: <copy> elements become precopies.
  Result<Algorithm> ag = load("taccl/outputs_xml/mcrl_A_allgather.A.n1.gpu2.i3.xml");
  ASSERT_TRUE(ag.isOk());
  ASSERT_EQ(ag->ranks[1].precopies.size(), 3u);
  EXPECT_EQ(ag->ranks[1].precopies[2].input_off, 2);
  EXPECT_EQ(ag->ranks[1].precopies[2].output_off, 5);
}

TEST(MscclCorpus, LargeFilesLoadFast) {
  BRAID_SKIP_WITHOUT_REALCASES();
  for (const char* rel :
       {"msccl/ndv4_allreduce_allpairs_ap2ll.xml", "taccl/outputs_xml/mi300x_alltoall_n24_withcopy.xml"}) {
    const auto start = std::chrono::steady_clock::now();
    Result<Algorithm> a = loadMscclXml((kRealcases / rel).string());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_TRUE(a.isOk()) << a.status().toString();
    EXPECT_LT(seconds, 1.0) << rel;
  }
}

// Damaged copies: truncations, byte flips, deleted quotes and '>' must give an error or a result.
TEST(MscclCorpus, DamagedFilesNeverCrash) {
  BRAID_SKIP_WITHOUT_REALCASES();
  int errors = 0, results = 0;
  auto attempt = [&](const std::string& text) {
    Result<Algorithm> r = readMscclXml(text, "damaged.xml");  // must not throw or crash
    if (r.isOk()) {
      ++results;
      // Whatever loaded must also write and read back.
      EXPECT_TRUE(readMscclXml(writeMscclXml(*r), "rewritten.xml").isOk());
    } else {
      ++errors;
      EXPECT_EQ(r.status().code(), StatusCode::kParseError) << r.status().message();
      EXPECT_EQ(r.status().message().rfind("damaged.xml", 0), 0u) << r.status().message();
    }
  };
  for (const fs::path& path : corpusXml()) {
    SCOPED_TRACE(path.string());
    Result<std::string> text = readFile(path.string());
    ASSERT_TRUE(text.isOk());
    const std::string& t = *text;
    for (double cut : {0.0, 0.01, 0.1, 0.33, 0.5, 0.77, 0.99})
      attempt(t.substr(0, static_cast<size_t>(t.size() * cut)));
    std::mt19937 rng(12345 + static_cast<unsigned>(t.size()));
    std::uniform_int_distribution<size_t> pos(0, t.size() - 1);
    for (int k = 0; k < 8; ++k) {
      std::string flipped = t;
      for (int j = 0; j < 4; ++j) flipped[pos(rng)] ^= static_cast<char>(1 << (rng() % 8));
      attempt(flipped);
    }
    for (char victim : {'"', '>'}) {
      std::string deleted = t;
      size_t p = t.find(victim, t.size() / 3);
      if (p != std::string::npos) deleted.erase(p, 1);
      attempt(deleted);
    }
    std::string digits = t;  // a number made non-numeric
    size_t p = digits.find("cnt=\"");
    if (p != std::string::npos) {
      digits.insert(p + 5, "x");
      attempt(digits);
    }
  }
  // Every truncation except the full-length ones and every deleted quote must fail; flips may land
  // in names or whitespace and leave a loadable file.
  EXPECT_GT(errors, 27 * 7);
  EXPECT_EQ(errors + results, 27 * (7 + 8 + 2 + 1));
}

// RC-46: TACCL algorithm JSON converts to the IR, implements alltoall, and survives MSCCL XML.
TEST(TacclCorpus, AlgorithmJsonConvertsAndVerifies) {
  BRAID_SKIP_WITHOUT_REALCASES();
  const fs::path dir = kRealcases / "taccl/algo_json";
  int converted = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".json") continue;
    SCOPED_TRACE(e.path().string());
    Result<Algorithm> a = loadAlgorithm(e.path().string());
    ASSERT_TRUE(a.isOk()) << a.status().toString();
    ++converted;
    EXPECT_EQ(a->collective, CollectiveKind::kAllToAll);
    EXPECT_EQ(a->num_chunks, a->num_ranks);
    // One threadblock per (rank, peer, direction): every rank talks to every other rank in these files.
    for (const RankProgram& p : a->ranks) EXPECT_GE(p.threadblocks.size(), 2u);
    VerifyReport report = verify(*a);
    EXPECT_TRUE(report.ok) << report.toString();
    Result<Algorithm> back = readMscclXml(writeMscclXml(*a), "taccl.xml");
    ASSERT_TRUE(back.isOk()) << back.status().toString();
    EXPECT_EQ(testing::algorithmDifference(*a, *back, kLenient), "");
    Result<Algorithm> json = readAlgorithmJson(writeAlgorithmJson(*a), "taccl.json");
    ASSERT_TRUE(json.isOk()) << json.status().toString();
    EXPECT_EQ(testing::algorithmDifference(*a, *json), "");
  }
  EXPECT_EQ(converted, 2);
}

}  // namespace
}  // namespace braid
