#include "common/xml_util.h"

#include <set>

namespace braid {
namespace {

// Byte offset of the second occurrence of attribute `name` in the start tag of the element at `offset`
// (pugixml's offset of the element), scanned from the raw text; `offset` itself when the scan does not find it.
std::ptrdiff_t secondAttributeOffset(std::string_view text, std::ptrdiff_t offset, std::string_view name) {
  if (offset < 0 || static_cast<size_t>(offset) >= text.size()) return offset;
  size_t i = static_cast<size_t>(offset);
  auto space = [&](size_t k) { return text[k] == ' ' || text[k] == '\t' || text[k] == '\n' || text[k] == '\r'; };
  if (text[i] == '<') ++i;
  while (i < text.size() && !space(i) && text[i] != '/' && text[i] != '>') ++i;  // element name
  int seen = 0;
  while (i < text.size()) {
    while (i < text.size() && space(i)) ++i;
    if (i >= text.size() || text[i] == '/' || text[i] == '>') break;
    const size_t name_start = i;
    while (i < text.size() && !space(i) && text[i] != '=' && text[i] != '/' && text[i] != '>') ++i;
    if (text.substr(name_start, i - name_start) == name && ++seen == 2) return static_cast<std::ptrdiff_t>(name_start);
    while (i < text.size() && space(i)) ++i;
    if (i >= text.size() || text[i] != '=') break;
    ++i;
    while (i < text.size() && space(i)) ++i;
    if (i >= text.size() || (text[i] != '"' && text[i] != '\'')) break;
    const size_t close = text.find(text[i], i + 1);
    if (close == std::string_view::npos) break;
    i = close + 1;
  }
  return offset;
}

}  // namespace

std::optional<DuplicateAttribute> findDuplicateAttribute(const pugi::xml_document& doc, std::string_view text,
                                                         const LineIndex& lines) {
  pugi::xml_node node = doc.first_child();
  while (node) {
    if (node.type() == pugi::node_element) {
      std::set<std::string_view> names;
      for (pugi::xml_attribute a : node.attributes()) {
        if (names.insert(a.name()).second) continue;
        DuplicateAttribute d;
        d.element = node;
        d.attribute = a.name();
        d.first_value = node.attribute(a.name()).value();
        d.second_value = a.value();
        d.line = lines.line(secondAttributeOffset(text, node.offset_debug(), a.name()));
        return d;
      }
    }
    if (node.first_child()) {
      node = node.first_child();
      continue;
    }
    while (node && !node.next_sibling()) node = node.parent();
    if (node) node = node.next_sibling();
  }
  return std::nullopt;
}

}  // namespace braid
