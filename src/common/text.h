// Small text helpers shared by the writers.
#pragma once

#include <string>
#include <string_view>

namespace braid {

/// Escapes & < > " ' for use in XML/SVG text and attribute values.
std::string escapeXml(std::string_view s);

}  // namespace braid
