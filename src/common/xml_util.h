// pugixml helpers shared by the XML readers (NCCL topology XML, MSCCL XML).
#pragma once

#include <optional>
#include <pugixml.hpp>
#include <string>
#include <string_view>

#include "common/text.h"

namespace braid {

/// An attribute given twice on one element: not well-formed XML (XML 1.0 §3.1, "Unique Att Spec").
/// pugixml keeps both and attribute() returns the first, so readers must look for them.
struct DuplicateAttribute {
  pugi::xml_node element;
  std::string attribute;
  std::string first_value;
  std::string second_value;
  int line = 0;  // line of the second occurrence
};

/// The first duplicate attribute of any element of `doc`, in document order (elements a reader skips
/// included). `text` is the document's source, used to find the line of the second occurrence.
std::optional<DuplicateAttribute> findDuplicateAttribute(const pugi::xml_document& doc, std::string_view text,
                                                         const LineIndex& lines);

}  // namespace braid
