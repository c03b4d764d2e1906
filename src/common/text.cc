#include "common/text.h"

#include <algorithm>
#include <cctype>

namespace braid {

std::string escapeXml(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

LineIndex::LineIndex(std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n') newlines_.push_back(i);
  }
}

int LineIndex::line(std::ptrdiff_t offset) const {
  if (offset < 0) return 0;
  auto it = std::lower_bound(newlines_.begin(), newlines_.end(), static_cast<size_t>(offset));
  return static_cast<int>(it - newlines_.begin()) + 1;
}

int lineAtOffset(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n'));
}

std::string lowerCase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::optional<uint64_t> parseNcclTestsSize(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0) return std::nullopt;
  uint64_t multiplier = 1;
  const std::string suffix = lowerCase(text.substr(digits));
  if (suffix == "k") {
    multiplier = uint64_t{1} << 10;
  } else if (suffix == "m") {
    multiplier = uint64_t{1} << 20;
  } else if (suffix == "g") {
    multiplier = uint64_t{1} << 30;
  } else if (!suffix.empty()) {
    return std::nullopt;
  }
  constexpr uint64_t kMax = uint64_t{1} << 63;
  uint64_t value = 0;
  for (size_t i = 0; i < digits; ++i) {
    value = value * 10 + static_cast<uint64_t>(text[i] - '0');
    if (value > kMax) return std::nullopt;
  }
  if (value > kMax / multiplier) return std::nullopt;
  return value * multiplier;
}

std::string yamlQuote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          static const char kHex[] = "0123456789abcdef";
          out += "\\x";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

}  // namespace braid
