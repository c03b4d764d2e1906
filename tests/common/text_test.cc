// toValidUtf8, dumpJson and escapeXml: whatever bytes a name holds, the JSON and XML written are well-formed.
#include "common/text.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <pugixml.hpp>
#include <random>
#include <string>

namespace braid {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(ToValidUtf8, KeepsWellFormedText) {
  for (const std::string& s :
       {std::string(), std::string("gpu0"), std::string("caf\xC3\xA9"), std::string("\xE2\x82\xAC 10"),
        std::string("\xF0\x9F\x98\x80"), std::string("\xF4\x8F\xBF\xBF"), std::string("a\0b", 3)}) {
    EXPECT_EQ(toValidUtf8(s), s);
  }
}

TEST(ToValidUtf8, ReplacesMaximalSubparts) {
  // Unicode 15 §3.9, Table 3-8: <61 F1 80 80 E1 80 C2 62 80 63 80 BF 64> -> a FFFD FFFD FFFD b FFFD c FFFD FFFD d.
  EXPECT_EQ(toValidUtf8("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"),
            "a" + kFffd + kFffd + kFffd + "b" + kFffd + "c" + kFffd + kFffd + "d");
  EXPECT_EQ(toValidUtf8("bad\xFF\xFEname"), "bad" + kFffd + kFffd + "name");
  EXPECT_EQ(toValidUtf8("\xC0\xAF"), kFffd + kFffd);                          // overlong '/'
  EXPECT_EQ(toValidUtf8("\xED\xA0\x80"), kFffd + kFffd + kFffd);              // a surrogate
  EXPECT_EQ(toValidUtf8("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // above U+10FFFF
  EXPECT_EQ(toValidUtf8("x\xE2\x82"), "x" + kFffd);                           // truncated at the end
}

// The JSON writers replace through nlohmann's error handler; the SVG/HTML writers through toValidUtf8. Both give
// the same bytes for any input: random strings over the bytes that matter (ASCII, continuation bytes, leads).
TEST(ToValidUtf8, MatchesTheJsonWritersReplacement) {
  std::mt19937 rng(12345);
  const unsigned char alphabet[] = {'a',  0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2,
                                    0xDF, 0xE0, 0xE1, 0xED, 0xEF, 0xF0, 0xF1, 0xF4, 0xF5, 0xFF};
  std::uniform_int_distribution<size_t> pick(0, sizeof alphabet - 1);
  std::uniform_int_distribution<int> length(0, 12);
  for (int trial = 0; trial < 20000; ++trial) {
    std::string s;
    for (int i = length(rng); i > 0; --i) s += static_cast<char>(alphabet[pick(rng)]);
    const nlohmann::json raw = s;
    const nlohmann::json clean = toValidUtf8(s);
    std::string hex;
    for (unsigned char c : s) hex += fmt::format(" {:02x}", c);
    ASSERT_EQ(dumpJson(raw), clean.dump()) << "input bytes:" << hex;
  }
}

TEST(DumpJson, NeverThrowsOnInvalidUtf8) {
  nlohmann::ordered_json j;
  j["name"] = "bad\xFF";
  j["bad\xC3key"] = 1;
  EXPECT_THROW((void)j.dump(), nlohmann::json::type_error);
  const std::string text = dumpJson(j, 2);
  const nlohmann::json back = nlohmann::json::parse(text);
  EXPECT_EQ(back["name"], "bad" + kFffd);
  EXPECT_EQ(back["bad" + kFffd + "key"], 1);
}

TEST(EscapeXml, EscapesMarkup) {
  EXPECT_EQ(escapeXml("a<b & \"c\" 'd'>"), "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;");
}

TEST(EscapeXml, ResultIsAlwaysWellFormedXml) {
  using namespace std::string_literals;
  const std::string nasty =
      "n\xFF\xC3"
      "a\x01\x08\x0B\x0C\x1F\x7F\t\n\r\xEF\xBF\xBE\xEF\xBF\xBF\xE2\x82\xAC<&>\x00z\x00"s;
  const std::string escaped = escapeXml(nasty);
  EXPECT_EQ(escaped, "n" + kFffd + kFffd + "a" + kFffd + kFffd + kFffd + kFffd + kFffd + "\x7F\t\n\r" + kFffd + kFffd +
                         "\xE2\x82\xAC&lt;&amp;&gt;" + kFffd + "z" + kFffd);
  const std::string doc = "<r a=\"" + escaped + "\">" + escaped + "</r>";
  pugi::xml_document parsed;
  EXPECT_TRUE(parsed.load_string(doc.c_str(), pugi::parse_default));
  // pugixml accepts control characters; the XML 1.0 Char production does not: check it byte by byte.
  for (unsigned char c : escaped) EXPECT_TRUE(c >= 0x20 || c == '\t' || c == '\n' || c == '\r') << int(c);
  EXPECT_EQ(toValidUtf8(escaped), escaped);
}

// Whole decimal numbers only: what strtod would also take from a prefix, hexadecimal, inf or nan is refused.
TEST(ParseDecimalNumber, WholeFiniteDecimalsOnly) {
  EXPECT_EQ(parseDecimalNumber("1.108"), 1.108);
  EXPECT_EQ(parseDecimalNumber("+1.5"), 1.5);
  EXPECT_EQ(parseDecimalNumber("2e3"), 2000.0);
  EXPECT_EQ(parseDecimalNumber("-0.25"), -0.25);
  for (const char* bad : {"", " 2", "2 ", "1,5", "1.2x", "0x1.2p0", "inf", "nan", "1e309", "abc", "."})
    EXPECT_FALSE(parseDecimalNumber(bad).has_value()) << bad;
}

}  // namespace
}  // namespace braid
