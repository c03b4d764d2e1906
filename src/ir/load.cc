// loadAlgorithm: choose the algorithm reader by the file's content, not its name; writeAlgorithmFile: write one
// only when it reads back (both under kMaxAlgorithmFileBytes).
#include <fmt/format.h>

#include <string>
#include <string_view>

#include "braid/algorithm.h"
#include "braid/file_io.h"

namespace braid {
namespace {

enum class AlgorithmFormat { kMscclXml, kBraidJson, kTacclJson, kUnknown };

// The first significant character decides XML ('<') or JSON ('{'); inside JSON the markers
// "format": "braid-algorithm" (Braid) and "sccl_type"/"msccl_type" (TACCL/SCCL) decide.
AlgorithmFormat detect(const std::string& text) {
  size_t i = 0;
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) i = 3;  // UTF-8 byte order mark
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n')) ++i;
  if (i >= text.size()) return AlgorithmFormat::kUnknown;
  if (text[i] == '<') return AlgorithmFormat::kMscclXml;
  if (text[i] != '{') return AlgorithmFormat::kUnknown;
  const std::string_view head(text.data() + i, std::min<size_t>(text.size() - i, 4096));
  if (head.find("\"braid-algorithm\"") != std::string_view::npos) return AlgorithmFormat::kBraidJson;
  if (text.find("\"sccl_type\"") != std::string::npos || text.find("\"msccl_type\"") != std::string::npos) {
    return AlgorithmFormat::kTacclJson;
  }
  if (text.find("\"braid-algorithm\"") != std::string::npos) return AlgorithmFormat::kBraidJson;
  return AlgorithmFormat::kUnknown;
}

}  // namespace

Result<Algorithm> loadAlgorithm(const std::string& path) {
  BRAID_ASSIGN_OR_RETURN(std::string text, readFile(path, kMaxAlgorithmFileBytes));
  switch (detect(text)) {
    case AlgorithmFormat::kMscclXml: return readMscclXml(text, path);
    case AlgorithmFormat::kBraidJson: return readAlgorithmJson(text, path);
    case AlgorithmFormat::kTacclJson: return readTacclAlgorithmJson(text, path);
    case AlgorithmFormat::kUnknown: break;
  }
  return parseError(path, 0, "",
                    "not a known algorithm format: expected MSCCL XML (<algo ...>), Braid JSON (\"format\": "
                    "\"braid-algorithm\") or TACCL/SCCL algorithm JSON (\"sccl_type\": \"algorithm\")");
}

Status writeAlgorithmFile(const std::string& path, const Algorithm& algorithm, AlgorithmFileFormat format) {
  const bool xml = format == AlgorithmFileFormat::kMscclXml;
  const std::string text = xml ? writeMscclXml(algorithm, MscclFlavour::kBoth) : writeAlgorithmJson(algorithm);
  if (text.size() > kMaxAlgorithmFileBytes) {
    constexpr double kMiB = 1 << 20;
    return invalidArgument(fmt::format(
        "{}: the {} of {} ({} ranks, {} chunks per loop, {} steps) would be {:.1f} MiB, more than the {} MiB Braid "
        "reads back from an algorithm file; not written: use fewer ranks or chunks",
        path, xml ? "MSCCL XML" : "Braid JSON", algorithm.name, algorithm.num_ranks, algorithm.num_chunks,
        algorithm.numSteps(), static_cast<double>(text.size()) / kMiB, kMaxAlgorithmFileBytes >> 20));
  }
  return writeFileAtomic(path, text);
}

}  // namespace braid
