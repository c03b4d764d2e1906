#include "common/text.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace braid {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

/// Length of the well-formed UTF-8 sequence at the start of `s` (Unicode 15 Table 3-7), or 0 when it is
/// ill-formed; `*subpart` is then the length of its maximal subpart (at least 1), the bytes one U+FFFD replaces.
size_t wellFormedLength(std::string_view s, size_t* subpart) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = byte(0);
  *subpart = 1;
  if (b0 < 0x80) return 1;
  size_t need = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;  // range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;  // no overlong forms
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;  // no overlong forms
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;  // C0, C1, F5..FF or a continuation byte with no lead
  }
  for (size_t i = 1; i < need; ++i) {
    if (i >= s.size()) return 0;
    const unsigned char b = byte(i);
    if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return 0;
    *subpart = i + 1;
  }
  return need;
}

// Calls character(ch) for each character of `s` in order: ch is a well-formed UTF-8 sequence, or kReplacement for
// each maximal ill-formed subpart (Unicode 15, §3.9, U+FFFD substitution of maximal subparts).
template <typename Character>
void forEachCharacter(std::string_view s, Character character) {
  size_t i = 0;
  while (i < s.size()) {
    size_t subpart = 1;
    const size_t n = wellFormedLength(s.substr(i), &subpart);
    if (n > 0) {
      character(s.substr(i, n));
      i += n;
    } else {
      character(kReplacement);
      i += subpart;
    }
  }
}

}  // namespace

std::string toValidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  forEachCharacter(s, [&](std::string_view ch) { out += ch; });
  return out;
}

std::string escapeXml(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  forEachCharacter(s, [&](std::string_view ch) {
    if (ch.size() == 1) {
      const unsigned char c = static_cast<unsigned char>(ch[0]);
      switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        case '\'': out += "&apos;"; break;
        default:
          if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
            out += kReplacement;  // not an XML 1.0 Char, not even as a character reference
          } else {
            out += ch;
          }
      }
    } else if (ch == "\xEF\xBF\xBE" || ch == "\xEF\xBF\xBF") {
      out += kReplacement;  // U+FFFE, U+FFFF: not XML 1.0 Chars
    } else {
      out += ch;
    }
  });
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

std::optional<double> parseDecimalNumber(const std::string& text) {
  if (text.empty() || text.find_first_not_of("0123456789.eE+-") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  if (errno != 0 || end != text.c_str() + text.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

std::string ncclTestsSizeText(uint64_t bytes) {
  static const char* const kUnits[] = {"", "K", "M", "G", "T"};
  int u = 0;
  while (u < 4 && bytes != 0 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++u;
  }
  return std::to_string(bytes) + kUnits[u];
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
