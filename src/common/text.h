// Small text helpers shared by the readers and writers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace braid {

/// `s` with every ill-formed UTF-8 sequence replaced by U+FFFD (EF BF BD), one replacement per maximal subpart
/// of an ill-formed sequence (Unicode 15 §3.9 U+FFFD substitution; the same bytes nlohmann::json's dump writes
/// with error_handler_t::replace, and Python's decode(errors="replace")). Valid UTF-8 comes back unchanged.
std::string toValidUtf8(std::string_view s);

/// Serializes a nlohmann::json or nlohmann::ordered_json (`indent` < 0: one line) with invalid UTF-8 in keys and
/// strings replaced as toValidUtf8 does, so no name read from a file can make a JSON writer throw. Every JSON
/// writer of Braid serializes through this.
template <class Json>
std::string dumpJson(const Json& j, int indent = -1) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

/// Escapes & < > " ' for use in XML/SVG/HTML text and attribute values. The result is always XML 1.0 character
/// data: ill-formed UTF-8 is replaced as toValidUtf8 does, and the characters XML 1.0 forbids (C0 controls other
/// than tab, newline and carriage return, U+FFFE and U+FFFF) are replaced by U+FFFD.
std::string escapeXml(std::string_view s);

/// Byte offset -> 1-based line number, for error messages. Build once per file, query in O(log lines).
class LineIndex {
 public:
  explicit LineIndex(std::string_view text);
  /// Line of the byte at `offset` (offsets past the end give the last line); 0 for a negative offset.
  int line(std::ptrdiff_t offset) const;

 private:
  std::vector<size_t> newlines_;
};

/// ASCII lower case.
std::string lowerCase(std::string s);

/// nccl-tests size syntax (nccl-tests src/common.cu parsesize): digits with an optional K, M or G suffix (either
/// case; powers of 1024). nullopt when malformed or above 2^63.
std::optional<uint64_t> parseNcclTestsSize(const std::string& text);

/// `text` as a finite decimal number: the whole of it, digits with an optional point, sign and exponent (no blanks,
/// hexadecimal, inf or nan); nullopt otherwise. Callers check the range.
std::optional<double> parseDecimalNumber(const std::string& text);

/// `bytes` in the largest of K, M, G, T (powers of 1024) that divides it, e.g. 268435456 -> "256M", 1000 -> "1000"
/// (parseNcclTestsSize reads it back up to G).
std::string ncclTestsSizeText(uint64_t bytes);

/// YAML double-quoted scalar (a superset of JSON strings): quotes, backslashes and control characters escaped.
std::string yamlQuote(const std::string& s);

/// 1-based line of the byte at `offset` in `text` (one-off queries; LineIndex for many).
int lineAtOffset(std::string_view text, size_t offset);

}  // namespace braid
