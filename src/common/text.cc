#include "common/text.h"

#include <algorithm>

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

}  // namespace braid
