// Small text helpers shared by the readers and writers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace braid {

/// Escapes & < > " ' for use in XML/SVG text and attribute values.
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

/// YAML double-quoted scalar (a superset of JSON strings): quotes, backslashes and control characters escaped.
std::string yamlQuote(const std::string& s);

/// 1-based line of the byte at `offset` in `text` (one-off queries; LineIndex for many).
int lineAtOffset(std::string_view text, size_t offset);

}  // namespace braid
