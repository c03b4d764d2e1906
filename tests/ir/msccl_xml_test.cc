// MSCCL XML reader and writer: every step type, every error (file, line, attribute), old-format
// defaults, size windows of both runtimes, nop spilling with renumbering, flavour differences.
#include <gtest/gtest.h>

#include <pugixml.hpp>
#include <string>
#include <vector>

#include "braid/algorithm.h"

namespace braid {
namespace {

// A 3-rank algorithm whose steps use every step type; values differ per position so a field read
// from the wrong place shows up.
const char* kAllTypes =
    R"(<algo name="all types" proto="LL128" nchannels="2" nchunksperloop="6" ngpus="3" coll="allreduce" inplace="1" outofplace="0" minBytes="96" maxBytes="4096" redop="sum" nthreads="512">
  <gpu id="0" i_chunks="6" o_chunks="6" s_chunks="4">
    <tb id="0" send="1" recv="2" chan="1">
      <step s="0" type="s" srcbuf="i" srcoff="1" dstbuf="o" dstoff="2" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="r" srcbuf="o" srcoff="-1" dstbuf="o" dstoff="3" cnt="2" depid="-1" deps="-1" hasdep="1"/>
      <step s="2" type="rcs" srcbuf="o" srcoff="-1" dstbuf="s" dstoff="1" cnt="1" depid="1" deps="0" hasdep="0"/>
      <step s="3" type="rrs" srcbuf="s" srcoff="2" dstbuf="s" dstoff="-1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="4" type="rrc" srcbuf="o" srcoff="4" dstbuf="o" dstoff="5" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="5" type="rrcs" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
    <tb id="1" send="-1" recv="-1" chan="0">
      <step s="0" type="cpy" srcbuf="i" srcoff="5" dstbuf="s" dstoff="3" cnt="1" depid="-1" deps="-1" hasdep="1"/>
      <step s="1" type="nop" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="-1" cnt="0" depid="0" deps="1" hasdep="0"/>
      <step s="2" type="re" srcbuf="s" srcoff="3" dstbuf="o" dstoff="4" cnt="1" depid="0" deps="2" hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="1" i_chunks="6" o_chunks="6" s_chunks="0">
  </gpu>
  <gpu id="2" i_chunks="6" o_chunks="6" s_chunks="0"/>
</algo>
)";

TEST(MscclXmlRead, EveryStepTypeAndField) {
  Result<Algorithm> r = readMscclXml(kAllTypes, "all.xml");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const Algorithm& a = *r;
  EXPECT_EQ(a.name, "all types");
  EXPECT_EQ(a.protocol, Protocol::kLL128);
  EXPECT_EQ(a.num_channels, 2);
  EXPECT_EQ(a.num_chunks, 6);
  EXPECT_EQ(a.num_ranks, 3);
  EXPECT_EQ(a.collective, CollectiveKind::kAllReduce);
  EXPECT_TRUE(a.in_place);
  EXPECT_FALSE(a.out_of_place);
  EXPECT_EQ(a.min_bytes, 96u);
  EXPECT_EQ(a.max_bytes, 4096u);  // Azure format (outofplace present): inclusive
  EXPECT_EQ(a.redop, "sum");
  EXPECT_TRUE(a.notes.empty()) << a.notes.front();
  ASSERT_EQ(a.ranks.size(), 3u);
  EXPECT_EQ(a.ranks[0].scratch_chunks, 4);
  EXPECT_EQ(a.ranks[1].scratch_chunks, 0);
  EXPECT_TRUE(a.ranks[2].threadblocks.empty());
  const Threadblock& tb0 = a.ranks[0].threadblocks[0];
  EXPECT_EQ(tb0.send_peer, 1);
  EXPECT_EQ(tb0.recv_peer, 2);
  EXPECT_EQ(tb0.channel, 1);
  const std::vector<OpType> types0 = {OpType::kSend,           OpType::kRecv,           OpType::kRecvCopySend,
                                      OpType::kRecvReduceSend, OpType::kRecvReduceCopy, OpType::kRecvReduceCopySend};
  ASSERT_EQ(tb0.steps.size(), types0.size());
  for (size_t i = 0; i < types0.size(); ++i) EXPECT_EQ(tb0.steps[i].type, types0[i]) << i;
  EXPECT_EQ(tb0.steps[0].src_buf, BufferKind::kInput);
  EXPECT_EQ(tb0.steps[0].src_off, 1);
  EXPECT_EQ(tb0.steps[0].dst_off, 2);
  EXPECT_EQ(tb0.steps[1].count, 2);
  EXPECT_TRUE(tb0.steps[1].has_dep);
  EXPECT_EQ(tb0.steps[2].dst_buf, BufferKind::kScratch);
  ASSERT_EQ(tb0.steps[2].deps.size(), 1u);
  EXPECT_EQ(tb0.steps[2].deps[0], (Dependency{1, 0}));
  EXPECT_TRUE(tb0.steps[0].deps.empty());
  EXPECT_EQ(tb0.steps[3].src_off, 2);
  EXPECT_EQ(tb0.steps[4].dst_off, 5);
  const Threadblock& tb1 = a.ranks[0].threadblocks[1];
  ASSERT_EQ(tb1.steps.size(), 3u);
  EXPECT_EQ(tb1.steps[0].type, OpType::kCopy);
  EXPECT_EQ(tb1.steps[1].type, OpType::kNop);  // kept as an IR step
  EXPECT_EQ(tb1.steps[1].deps[0], (Dependency{0, 1}));
  EXPECT_EQ(tb1.steps[2].type, OpType::kReduce);
  EXPECT_EQ(tb1.steps[2].deps[0], (Dependency{0, 2}));
  EXPECT_EQ(tb1.send_peer, -1);
}

// Threadblocks listed out of order are placed by id.
TEST(MscclXmlRead, ThreadblocksSortedById) {
  const char* xml =
      R"(<algo name="x" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" coll="allgather" inplace="0" outofplace="1" minBytes="0" maxBytes="0">
  <gpu id="1" i_chunks="1" o_chunks="2" s_chunks="0">
    <tb id="1" send="0" recv="-1" chan="0"><step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/></tb>
    <tb id="0" send="-1" recv="0" chan="0"><step s="0" type="r" srcbuf="o" srcoff="-1" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/></tb>
  </gpu>
  <gpu id="0" i_chunks="1" o_chunks="2" s_chunks="0"/>
</algo>)";
  Result<Algorithm> r = readMscclXml(xml, "sorted.xml");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->max_bytes, kUnlimitedBytes);  // Azure: maxBytes 0 = unlimited
  EXPECT_EQ(r->ranks[1].threadblocks[0].recv_peer, 0);
  EXPECT_EQ(r->ranks[1].threadblocks[0].steps[0].type, OpType::kRecv);
  EXPECT_EQ(r->ranks[1].threadblocks[1].send_peer, 0);
  EXPECT_EQ(r->ranks[1].threadblocks[1].id, 1);
}

// Old format (msccl-tools before outofplace/minBytes/maxBytes; RC-36, BUG-01): defaults plus notes.
TEST(MscclXmlRead, OldFormatDefaultsAreNotedNotFatal) {
  const char* xml =
      R"(<algo name="old" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" coll="allgather" inplace="1">
  <gpu id="0" i_chunks="1" o_chunks="2" s_chunks="0"/>
  <gpu id="1" i_chunks="1" o_chunks="2" s_chunks="0"/>
</algo>)";
  Result<Algorithm> r = readMscclXml(xml, "old.xml");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_TRUE(r->in_place);
  EXPECT_FALSE(r->out_of_place);
  EXPECT_EQ(r->min_bytes, 0u);
  EXPECT_EQ(r->max_bytes, kUnlimitedBytes);
  ASSERT_EQ(r->notes.size(), 3u);
  EXPECT_NE(r->notes[0].find("outofplace"), std::string::npos);
  EXPECT_NE(r->notes[1].find("minBytes"), std::string::npos);
  EXPECT_NE(r->notes[2].find("maxBytes"), std::string::npos);
}

// Windows: the old runtime (no outofplace attribute) compares size < maxBytes; Azure size <= maxBytes.
TEST(MscclXmlRead, SizeWindowConventions) {
  auto window = [](const std::string& attrs) {
    std::string xml =
        "<algo name=\"w\" proto=\"LL\" nchannels=\"1\" nchunksperloop=\"1\" ngpus=\"1\" coll=\"allreduce\" " + attrs +
        "><gpu id=\"0\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"0\"/></algo>";
    return readMscclXml(xml, "w.xml");
  };
  Result<Algorithm> old = window("inplace=\"1\" minBytes=\"8\" maxBytes=\"409600\"");
  ASSERT_TRUE(old.isOk()) << old.status().toString();
  EXPECT_EQ(old->min_bytes, 8u);
  EXPECT_EQ(old->max_bytes, 409599u);
  Result<Algorithm> azure = window("inplace=\"1\" outofplace=\"0\" minBytes=\"8\" maxBytes=\"409600\"");
  ASSERT_TRUE(azure.isOk());
  EXPECT_EQ(azure->max_bytes, 409600u);
  Result<Algorithm> big = window("inplace=\"0\" outofplace=\"1\" minBytes=\"0\" maxBytes=\"1099511627776\"");
  ASSERT_TRUE(big.isOk());
  EXPECT_EQ(big->max_bytes, 1099511627776u);
  Result<Algorithm> int64max = window("inplace=\"0\" outofplace=\"1\" minBytes=\"0\" maxBytes=\"9223372036854775807\"");
  ASSERT_TRUE(int64max.isOk());
  EXPECT_EQ(int64max->max_bytes, kUnlimitedBytes);
  Result<Algorithm> marked =
      window("inplace=\"0\" outofplace=\"1\" minBytes=\"0\" maxBytes=\"100\" maxbytes_exclusive=\"1\"");
  ASSERT_TRUE(marked.isOk());
  EXPECT_EQ(marked->max_bytes, 99u);
  Result<Algorithm> hex = window("inplace=\"0\" outofplace=\"1\" minBytes=\"0x10\" maxBytes=\"0x20\"");
  ASSERT_TRUE(hex.isOk());
  EXPECT_EQ(hex->min_bytes, 16u);
  EXPECT_EQ(hex->max_bytes, 32u);
}

struct BadCase {
  const char* what;
  std::string xml;
  std::vector<std::string> expect;  // substrings of the error message
};

std::string replaceAll(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
  return s;
}

std::string header(const std::string& extra = "") {
  return "<algo name=\"b\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"2\" ngpus=\"2\" coll=\"allgather\" "
         "inplace=\"0\" outofplace=\"1\" minBytes=\"0\" maxBytes=\"0\"" +
         extra + ">\n";
}
const char* kGpu1 = "  <gpu id=\"1\" i_chunks=\"1\" o_chunks=\"2\" s_chunks=\"0\"/>\n</algo>\n";
std::string gpu0WithStep(const std::string& step, const std::string& tb = "send=\"1\" recv=\"1\" chan=\"0\"") {
  return "  <gpu id=\"0\" i_chunks=\"1\" o_chunks=\"2\" s_chunks=\"0\">\n    <tb id=\"0\" " + tb + ">\n      " + step +
         "\n    </tb>\n  </gpu>\n";
}
std::string stepXml(const std::string& type, const std::string& srcoff, const std::string& extra = "") {
  return "<step s=\"0\" type=\"" + type + "\" srcbuf=\"i\" srcoff=\"" + srcoff +
         "\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"" + extra + "/>";
}

TEST(MscclXmlRead, ErrorsNameFileLineAndAttribute) {
  const std::string good_step = stepXml("s", "0");
  std::vector<BadCase> cases = {
      {"non-integer srcoff",
       header() + gpu0WithStep(stepXml("s", "1.5")) + kGpu1,
       {"bad.xml:4:", "<step> attribute 'srcoff'", "not an integer"}},
      {"empty srcoff", header() + gpu0WithStep(stepXml("s", "")) + kGpu1, {"bad.xml:4:", "'srcoff'", "not an integer"}},
      {"unknown step type",
       header() + gpu0WithStep(stepXml("xx", "0")) + kGpu1,
       {"bad.xml:4:", "<step> attribute 'type'", "unknown step type 'xx'"}},
      {"unknown buffer",
       header() +
           gpu0WithStep("<step s=\"0\" type=\"s\" srcbuf=\"q\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" "
                        "depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>") +
           kGpu1,
       {"bad.xml:4:", "'srcbuf'", "unknown buffer 'q'"}},
      {"missing cnt",
       header() +
           gpu0WithStep("<step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" "
                        "depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>") +
           kGpu1,
       {"bad.xml:4:", "<step> attribute 'cnt'", "missing"}},
      {"missing hasdep",
       header() +
           gpu0WithStep("<step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" "
                        "depid=\"-1\" deps=\"-1\"/>") +
           kGpu1,
       {"bad.xml:4:", "'hasdep'", "missing"}},
      {"step index out of order",
       header() +
           gpu0WithStep("<step s=\"1\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" "
                        "depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>") +
           kGpu1,
       {"bad.xml:4:", "<step> attribute 's'", "step 1 where 0 was expected"}},
      {"threadblock ids with a gap",
       replaceAll(header() + gpu0WithStep(good_step) + kGpu1, "<tb id=\"0\"", "<tb id=\"2\""),
       {"bad.xml:3:", "<tb> attribute 'id'", "not 0..0"}},
      {"threadblock id twice",
       replaceAll(header() + gpu0WithStep(good_step) + kGpu1, "    </tb>\n",
                  "    </tb>\n    <tb id=\"0\" send=\"-1\" recv=\"-1\" chan=\"0\"/>\n"),
       {"bad.xml:6:", "<tb> attribute 'id'", "appears twice"}},
      {"gpu id out of range",
       header() + "  <gpu id=\"2\" i_chunks=\"1\" o_chunks=\"2\" s_chunks=\"0\"/>\n" + kGpu1,
       {"bad.xml:2:", "<gpu> attribute 'id'", "out of range [0, 1]"}},
      {"gpu missing", header() + kGpu1, {"bad.xml:1:", "<gpu>", "no <gpu id=\"0\">"}},
      {"gpu twice",
       header() + "  <gpu id=\"1\" i_chunks=\"1\" o_chunks=\"2\" s_chunks=\"0\"/>\n" + kGpu1,
       {"bad.xml:3:", "<gpu> attribute 'id'", "appears twice"}},
      {"missing coll",
       "<algo name=\"b\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"2\" ngpus=\"2\" inplace=\"0\">\n</algo>",
       {"bad.xml:1:", "<algo> attribute 'coll'", "missing"}},
      {"unknown coll",
       header().replace(header().find("allgather"), 9, "allscatter") + kGpu1,
       {"bad.xml:1:", "'coll'", "unknown collective 'allscatter'"}},
      {"missing proto",
       "<algo name=\"b\" nchannels=\"1\" nchunksperloop=\"2\" ngpus=\"2\" coll=\"allgather\">\n</algo>",
       {"bad.xml:1:", "<algo> attribute 'proto'", "missing"}},
      {"bad proto", header().replace(header().find("Simple"), 6, "LL64") + kGpu1, {"bad.xml:1:", "'proto'", "LL64"}},
      {"negative ngpus",
       header().replace(header().find("ngpus=\"2\""), 9, "ngpus=\"-2\"") + kGpu1,
       {"bad.xml:1:", "'ngpus'", "out of range"}},
      {"missing inplace",
       header().replace(header().find("inplace=\"0\""), 11, "") + kGpu1,
       {"bad.xml:1:", "'inplace'", "missing"}},
      {"minBytes above maxBytes",
       header().replace(header().find("minBytes=\"0\" maxBytes=\"0\""), 25, "minBytes=\"100\" maxBytes=\"50\"") + kGpu1,
       {"bad.xml:1:", "'minBytes'", "above the largest size 50"}},
      {"maxBytes beyond 64 bits",
       header().replace(header().find("maxBytes=\"0\""), 12, "maxBytes=\"99999999999999999999\"") + kGpu1,
       {"bad.xml:1:", "'maxBytes'", "does not fit in 64 bits"}},
      {"send peer is itself",
       header() + gpu0WithStep(good_step, "send=\"0\" recv=\"-1\" chan=\"0\"") + kGpu1,
       {"bad.xml:3:", "<tb> attribute 'send'", "gpu itself"}},
      {"send without send peer",
       header() + gpu0WithStep(good_step, "send=\"-1\" recv=\"1\" chan=\"0\"") + kGpu1,
       {"bad.xml:4:", "'type'", "send=\"-1\""}},
      {"channel beyond nchannels",
       header() + gpu0WithStep(good_step, "send=\"1\" recv=\"-1\" chan=\"1\"") + kGpu1,
       {"bad.xml:3:", "<tb> attribute 'chan'", "out of range [0, 0]"}},
      {"depid without deps",
       header() + gpu0WithStep(stepXml("s", "0").replace(stepXml("s", "0").find("depid=\"-1\""), 10, "depid=\"0\"")) +
           kGpu1,
       {"bad.xml:4:", "'deps'", "a step index is needed"}},
      {"not XML", "this is not xml", {"bad.xml:1:", "malformed XML"}},
      {"wrong root", "<algorithm/>", {"bad.xml:1:", "<algorithm>", "expected <algo>"}},
      {"unclosed",
       header() + "  <gpu id=\"0\" i_chunks=\"1\" o_chunks=\"2\" s_chunks=\"0\">\n",
       {"bad.xml:", "malformed XML"}},
  };
  for (const BadCase& c : cases) {
    Result<Algorithm> r = readMscclXml(c.xml, "bad.xml");
    ASSERT_FALSE(r.isOk()) << c.what << "\n" << c.xml;
    EXPECT_EQ(r.status().code(), StatusCode::kParseError) << c.what;
    for (const std::string& e : c.expect) {
      EXPECT_NE(r.status().message().find(e), std::string::npos)
          << c.what << ": expected '" << e << "' in: " << r.status().message();
    }
  }
}

// Duplicate attributes make XML not well-formed: refused on every element, with the line of the second occurrence.
TEST(MscclXmlRead, DuplicateAttributesAreRejected) {
  const std::string good_step = stepXml("s", "0");
  std::vector<BadCase> cases = {
      {"ngpus twice on <algo> (the user's report: the first value used to win)",
       header(" ngpus=\"3\"") + gpu0WithStep(good_step) + kGpu1,
       {"bad.xml:1: <algo> attribute 'ngpus': appears twice (\"2\" and \"3\")", "not well-formed"}},
      {"proto twice with the same value",
       header(" proto=\"Simple\"") + gpu0WithStep(good_step) + kGpu1,
       {"bad.xml:1: <algo> attribute 'proto': appears twice (\"Simple\" and \"Simple\")"}},
      {"second occurrence on a later line of the start tag",
       header("\n   coll=\"allreduce\"") + gpu0WithStep(good_step) + kGpu1,
       {"bad.xml:2: <algo> attribute 'coll': appears twice (\"allgather\" and \"allreduce\")"}},
      {"<gpu> i_chunks twice",
       replaceAll(header() + gpu0WithStep(good_step) + kGpu1, "<gpu id=\"1\"", "<gpu id=\"1\" i_chunks=\"4\""),
       {"bad.xml:7: <gpu> attribute 'i_chunks': appears twice (\"4\" and \"1\")"}},
      {"<gpu> id twice",
       header() + gpu0WithStep(good_step) + replaceAll(kGpu1, "id=\"1\"", "id=\"1\" id=\"0\""),
       {"bad.xml:7: <gpu> attribute 'id': appears twice (\"1\" and \"0\")"}},
      {"<tb> send twice",
       header() + gpu0WithStep(good_step, "send=\"1\" recv=\"1\" chan=\"0\" send=\"-1\"") + kGpu1,
       {"bad.xml:3: <tb> attribute 'send': appears twice (\"1\" and \"-1\")"}},
      {"<step> srcoff twice",
       header() + gpu0WithStep(stepXml("s", "0", " srcoff=\"1\"")) + kGpu1,
       {"bad.xml:4: <step> attribute 'srcoff': appears twice (\"0\" and \"1\")"}},
      {"value holding the name does not count",
       header() + gpu0WithStep(stepXml("s", "0", " note='cnt=\"9\"' cnt=\"2\"")) + kGpu1,
       {"bad.xml:4: <step> attribute 'cnt': appears twice (\"1\" and \"2\")"}},
      {"<copy> o_off twice",
       header() +
           "  <gpu id=\"0\" i_chunks=\"1\" o_chunks=\"2\" s_chunks=\"0\">\n"
           "    <copy i_off=\"0\" o_off=\"0\" o_off=\"1\"/>\n  </gpu>\n" +
           kGpu1,
       {"bad.xml:3: <copy> attribute 'o_off': appears twice (\"0\" and \"1\")"}},
      {"element the reader skips",
       header() + "  <meta key=\"a\" key=\"b\"/>\n" + gpu0WithStep(good_step) + kGpu1,
       {"bad.xml:2: <meta> attribute 'key': appears twice (\"a\" and \"b\")"}},
  };
  for (const BadCase& c : cases) {
    Result<Algorithm> r = readMscclXml(c.xml, "bad.xml");
    ASSERT_FALSE(r.isOk()) << c.what << "\n" << c.xml;
    EXPECT_EQ(r.status().code(), StatusCode::kParseError) << c.what;
    for (const std::string& e : c.expect) {
      EXPECT_NE(r.status().message().find(e), std::string::npos)
          << c.what << ": expected '" << e << "' in: " << r.status().message();
    }
  }
  // CRLF line ends and a byte order mark: same line.
  std::string crlf;
  for (char ch : header() + gpu0WithStep(stepXml("s", "0", "\n cnt=\"3\"")) + kGpu1) {
    if (ch == '\n') crlf += '\r';
    crlf += ch;
  }
  for (const std::string& text : {crlf, std::string("\xEF\xBB\xBF") + crlf}) {
    Result<Algorithm> r = readMscclXml(text, "crlf.xml");
    ASSERT_FALSE(r.isOk());
    EXPECT_NE(r.status().message().find("crlf.xml:5: <step> attribute 'cnt': appears twice (\"1\" and \"3\")"),
              std::string::npos)
        << r.status().message();
  }
  // The same attribute on different elements is fine, and the reader still loads the good file.
  Result<Algorithm> ok = readMscclXml(header() + gpu0WithStep(good_step) + kGpu1, "ok.xml");
  EXPECT_TRUE(ok.isOk()) << ok.status().toString();
}

// Windows line ends and a UTF-8 byte order mark do not shift the reported line.
TEST(MscclXmlRead, LineNumbersWithCrLfAndBom) {
  std::string xml = header() + gpu0WithStep(stepXml("s", "zz")) + kGpu1;
  std::string crlf;
  for (char c : xml) {
    if (c == '\n') crlf += '\r';
    crlf += c;
  }
  for (const std::string& text : {crlf, std::string("\xEF\xBB\xBF") + crlf}) {
    Result<Algorithm> r = readMscclXml(text, "crlf.xml");
    ASSERT_FALSE(r.isOk());
    EXPECT_NE(r.status().message().find("crlf.xml:4: <step> attribute 'srcoff': 'zz' is not an integer"),
              std::string::npos)
        << r.status().message();
  }
  Result<Algorithm> ok = readMscclXml("\xEF\xBB\xBF" + replaceAll(crlf, "\"zz\"", "\"0\""), "bom.xml");
  EXPECT_TRUE(ok.isOk()) << ok.status().toString();
}

TEST(MscclXmlRead, UnknownAttributesAndElementsTolerated) {
  const char* xml =
      R"(<algo name="t" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" coll="reducescatter" inplace="0" outofplace="1" minBytes="0" maxBytes="0" maxcount="4" nthreadblocks="2">
  <!-- a comment -->
  <meta key="v"/>
  <gpu id="0" i_chunks="2" o_chunks="1" s_chunks="0"><extra/></gpu>
  <gpu id="1" i_chunks="2" o_chunks="1" s_chunks="0"/>
</algo>)";
  Result<Algorithm> r = readMscclXml(xml, "t.xml");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->collective, CollectiveKind::kReduceScatter);
  ASSERT_EQ(r->notes.size(), 2u);  // <extra> and <meta>
  EXPECT_NE(r->notes[0].find("<extra>"), std::string::npos);
  Result<Algorithm> rs =
      readMscclXml(std::string(xml).replace(std::string(xml).find("reducescatter"), 13, "reduce_scatter"), "t.xml");
  ASSERT_TRUE(rs.isOk());
  EXPECT_EQ(rs->collective, CollectiveKind::kReduceScatter);
  EXPECT_EQ(rs->collective_name, "reduce_scatter");
  Result<Algorithm> custom =
      readMscclXml(std::string(xml).replace(std::string(xml).find("reducescatter"), 13, "custom"), "t.xml");
  ASSERT_TRUE(custom.isOk());
  EXPECT_EQ(custom->collective, CollectiveKind::kCustom);
}

TEST(MscclXmlRead, TacclPrecopies) {
  const char* xml =
      R"(<algo name="taccl" nchannels="1" nchunksperloop="4" proto="Simple" coll="allgather" inplace="1" redop="nop" ngpus="2">
  <gpu id="0" i_chunks="2" o_chunks="4" s_chunks="0">
    <copy i_off="0" o_off="0"/>
    <copy i_off="1" o_off="1"/>
  </gpu>
  <gpu id="1" i_chunks="2" o_chunks="4" s_chunks="0">
    <copy i_off="0" o_off="2"/>
    <copy i_off="1" o_off="3" cnt="1"/>
  </gpu>
</algo>)";
  Result<Algorithm> r = readMscclXml(xml, "t.xml");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  ASSERT_EQ(r->ranks[1].precopies.size(), 2u);
  EXPECT_EQ(r->ranks[1].precopies[0].input_off, 0);
  EXPECT_EQ(r->ranks[1].precopies[0].output_off, 2);
  EXPECT_EQ(r->ranks[1].precopies[1].input_off, 1);
  EXPECT_EQ(r->ranks[1].precopies[1].output_off, 3);
  EXPECT_EQ(r->redop, "nop");
  // The copies survive writing and reading back.
  Result<Algorithm> back = readMscclXml(writeMscclXml(*r), "w.xml");
  ASSERT_TRUE(back.isOk()) << back.status().toString();
  ASSERT_EQ(back->ranks[1].precopies.size(), 2u);
  EXPECT_EQ(back->ranks[1].precopies[0].output_off, 2);
}

// ---- writer --------------------------------------------------------------------------------

Step makeStep(OpType type, int src_off, int dst_off, std::vector<Dependency> deps = {}) {
  Step s;
  s.type = type;
  s.src_buf = BufferKind::kInput;
  s.src_off = src_off;
  s.dst_buf = BufferKind::kOutput;
  s.dst_off = dst_off;
  s.count = 1;
  s.deps = std::move(deps);
  return s;
}

// Rank 0: tb0 has 2 steps; tb1's step 1 waits on three steps (tb0:0, tb0:1, tb2:0); tb2's step 1
// waits on tb1's step 2, which moves to index 4 once tb1's step 1 is spilled into 2 nops + itself.
Algorithm spillAlgorithm() {
  Algorithm a;
  a.name = "spill";
  a.collective = CollectiveKind::kAllGather;
  a.num_ranks = 2;
  a.num_chunks = 2;
  a.ranks.resize(2);
  for (int r = 0; r < 2; ++r) {
    a.ranks[r].rank = r;
    a.ranks[r].input_chunks = 1;
    a.ranks[r].output_chunks = 2;
  }
  RankProgram& p = a.ranks[0];
  p.threadblocks.resize(3);
  for (int t = 0; t < 3; ++t) p.threadblocks[t].id = t;
  p.threadblocks[0].send_peer = 1;
  p.threadblocks[0].steps = {makeStep(OpType::kSend, 0, -1), makeStep(OpType::kSend, 0, -1)};
  p.threadblocks[1].steps = {makeStep(OpType::kCopy, 0, 0), makeStep(OpType::kCopy, 0, 1, {{0, 0}, {0, 1}, {2, 0}}),
                             makeStep(OpType::kCopy, 0, 0)};
  p.threadblocks[2].steps = {makeStep(OpType::kCopy, 0, 1), makeStep(OpType::kCopy, 0, 0, {{1, 2}})};
  return a;
}

TEST(MscclXmlWrite, SpillsExtraDependenciesIntoNopsAndRenumbers) {
  const std::string xml = writeMscclXml(spillAlgorithm());
  pugi::xml_document doc;
  ASSERT_TRUE(doc.load_string(xml.c_str())) << xml;
  pugi::xml_node gpu0 = doc.child("algo").find_child_by_attribute("gpu", "id", "0");
  pugi::xml_node tb1 = gpu0.find_child_by_attribute("tb", "id", "1");
  std::vector<pugi::xml_node> steps;
  for (pugi::xml_node s : tb1.children("step")) steps.push_back(s);
  ASSERT_EQ(steps.size(), 5u);  // cpy, nop, nop, cpy (deps[0]), cpy
  const char* types[] = {"cpy", "nop", "nop", "cpy", "cpy"};
  for (int i = 0; i < 5; ++i) {
    EXPECT_STREQ(steps[i].attribute("type").value(), types[i]) << i;
    EXPECT_EQ(steps[i].attribute("s").as_int(), i);
  }
  // nops carry deps[1..], the real step deps[0] (msccl-tools ir_to_xml convention).
  EXPECT_EQ(steps[1].attribute("depid").as_int(), 0);
  EXPECT_EQ(steps[1].attribute("deps").as_int(), 1);
  EXPECT_EQ(steps[2].attribute("depid").as_int(), 2);
  EXPECT_EQ(steps[2].attribute("deps").as_int(), 0);
  EXPECT_EQ(steps[3].attribute("depid").as_int(), 0);
  EXPECT_EQ(steps[3].attribute("deps").as_int(), 0);
  EXPECT_EQ(steps[4].attribute("depid").as_int(), -1);
  // tb2's step 1 depended on tb1 step 2, now at index 4.
  pugi::xml_node tb2 = gpu0.find_child_by_attribute("tb", "id", "2");
  pugi::xml_node tb2s1 = tb2.find_child_by_attribute("step", "s", "1");
  EXPECT_EQ(tb2s1.attribute("depid").as_int(), 1);
  EXPECT_EQ(tb2s1.attribute("deps").as_int(), 4);
  // hasdep recomputed: tb0 s0, tb0 s1, tb2 s0 and tb1 s4 are waited on; nothing else.
  pugi::xml_node tb0 = gpu0.find_child_by_attribute("tb", "id", "0");
  EXPECT_EQ(tb0.find_child_by_attribute("step", "s", "0").attribute("hasdep").as_int(), 1);
  EXPECT_EQ(tb0.find_child_by_attribute("step", "s", "1").attribute("hasdep").as_int(), 1);
  EXPECT_EQ(tb2.find_child_by_attribute("step", "s", "0").attribute("hasdep").as_int(), 1);
  EXPECT_EQ(tb2s1.attribute("hasdep").as_int(), 0);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(steps[i].attribute("hasdep").as_int(), i == 4 ? 1 : 0) << i;

  // Read back: the nops are steps, the dependency targets are the renumbered real steps.
  Result<Algorithm> back = readMscclXml(xml, "spill.xml");
  ASSERT_TRUE(back.isOk()) << back.status().toString();
  const auto& btb1 = back->ranks[0].threadblocks[1];
  ASSERT_EQ(btb1.steps.size(), 5u);
  EXPECT_EQ(btb1.steps[3].deps, (std::vector<Dependency>{{0, 0}}));
  EXPECT_EQ(back->ranks[0].threadblocks[2].steps[1].deps, (std::vector<Dependency>{{1, 4}}));
  // Writing the read-back algorithm again changes nothing.
  EXPECT_EQ(writeMscclXml(*back), xml);
}

const char* const kRequiredAlgo[] = {"name", "proto",   "nchannels",  "nchunksperloop", "ngpus",
                                     "coll", "inplace", "outofplace", "minBytes",       "maxBytes"};

TEST(MscclXmlWrite, FlavoursNameReduceScatterAndWindows) {
  Algorithm a = spillAlgorithm();
  a.collective = CollectiveKind::kReduceScatter;
  a.min_bytes = 1024;
  a.max_bytes = 65535;
  for (MscclFlavour f : {MscclFlavour::kBoth, MscclFlavour::kAzure, MscclFlavour::kMicrosoft}) {
    const std::string xml = writeMscclXml(a, f);
    pugi::xml_document doc;
    ASSERT_TRUE(doc.load_string(xml.c_str()));
    pugi::xml_node algo = doc.child("algo");
    for (const char* attr : kRequiredAlgo) EXPECT_TRUE(algo.attribute(attr)) << attr;
    const bool microsoft = f == MscclFlavour::kMicrosoft;
    EXPECT_STREQ(algo.attribute("coll").value(), microsoft ? "reduce_scatter" : "reducescatter");
    EXPECT_EQ(algo.attribute("maxBytes").as_ullong(), microsoft ? 65536u : 65535u);
    EXPECT_EQ(static_cast<bool>(algo.attribute("maxbytes_exclusive")), microsoft);
    Result<Algorithm> back = readMscclXml(xml, "f.xml");
    ASSERT_TRUE(back.isOk()) << back.status().toString();
    EXPECT_EQ(back->min_bytes, 1024u);
    EXPECT_EQ(back->max_bytes, 65535u);
    EXPECT_EQ(back->collective, CollectiveKind::kReduceScatter);
  }
  // Unlimited: INT64_MAX, which Azure compares inclusively and microsoft/msccl exclusively.
  a.max_bytes = kUnlimitedBytes;
  for (MscclFlavour f : {MscclFlavour::kBoth, MscclFlavour::kMicrosoft}) {
    const std::string xml = writeMscclXml(a, f);
    EXPECT_NE(xml.find("maxBytes=\"9223372036854775807\""), std::string::npos);
    Result<Algorithm> back = readMscclXml(xml, "u.xml");
    ASSERT_TRUE(back.isOk());
    EXPECT_EQ(back->max_bytes, kUnlimitedBytes);
  }
}

TEST(MscclXmlWrite, EscapesNames) {
  Algorithm a = spillAlgorithm();
  a.name = "a<b & \"c\"";
  Result<Algorithm> back = readMscclXml(writeMscclXml(a), "e.xml");
  ASSERT_TRUE(back.isOk()) << back.status().toString();
  EXPECT_EQ(back->name, "a<b & \"c\"");
}

TEST(MscclXmlLoad, MissingFileIsNotFound) {
  Result<Algorithm> r = loadMscclXml("/nonexistent/dir/x.xml");
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace braid
