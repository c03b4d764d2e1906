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

namespace {

/// The bytes one more step adds to `format`'s text: the difference between a one-rank algorithm with two shortest
/// steps and one with one (indentation, separators and keys included).
uint64_t shortestStepBytes(AlgorithmFileFormat format) {
  auto render = [format](int steps) {
    Algorithm a;
    a.collective = CollectiveKind::kCustom;
    a.num_ranks = 1;
    a.num_chunks = 1;
    RankProgram program;
    Threadblock tb;
    for (int s = 0; s < steps; ++s) {
      Step step;
      step.type = OpType::kSend;  // a one-letter name ("s"), as the shortest of all
      step.src_off = 0;
      step.dst_off = 0;
      step.count = 1;
      step.has_dep = true;  // "true" is shorter than "false" in JSON
      // XML writes a missing dependency as depid="-1" deps="-1", one as depid="0" deps="0"; JSON one as [[0, 0]].
      if (format == AlgorithmFileFormat::kMscclXml) step.deps.push_back(Dependency{0, 0});
      tb.steps.push_back(step);
    }
    program.threadblocks.push_back(tb);
    a.ranks.push_back(program);
    return format == AlgorithmFileFormat::kMscclXml ? writeMscclXml(a, MscclFlavour::kBoth).size()
                                                    : writeAlgorithmJson(a).size();
  };
  const size_t one = render(1), two = render(2);
  return two > one ? two - one : 0;
}

}  // namespace

uint64_t algorithmFileBytesAtLeast(uint64_t steps, AlgorithmFileFormat format) {
  static const uint64_t xml = shortestStepBytes(AlgorithmFileFormat::kMscclXml);
  static const uint64_t json = shortestStepBytes(AlgorithmFileFormat::kBraidJson);
  const uint64_t per_step = format == AlgorithmFileFormat::kMscclXml ? xml : json;
  return per_step > 0 && steps > UINT64_MAX / per_step ? UINT64_MAX : steps * per_step;
}

Result<std::string> renderAlgorithmFile(const std::string& path, const Algorithm& algorithm,
                                        AlgorithmFileFormat format) {
  const bool xml = format == AlgorithmFileFormat::kMscclXml;
  constexpr double kMiB = 1 << 20;
  auto too_large = [&](const char* how, uint64_t bytes) {
    return invalidArgument(fmt::format(
        "{}: the {} of {} ({} ranks, {} chunks per loop, {} steps) would be {}{:.1f} MiB, more than the {} MiB Braid "
        "reads back from an algorithm file; not written: use fewer ranks or chunks",
        path, xml ? "MSCCL XML" : "Braid JSON", algorithm.name, algorithm.num_ranks, algorithm.num_chunks,
        algorithm.numSteps(), how, static_cast<double>(bytes) / kMiB, kMaxAlgorithmFileBytes >> 20));
  };
  // Refused before rendering when the steps alone are too many: rendering would take far more memory than the file.
  const uint64_t at_least = algorithmFileBytesAtLeast(static_cast<uint64_t>(algorithm.numSteps()), format);
  if (at_least > kMaxAlgorithmFileBytes) return too_large("at least ", at_least);
  std::string text = xml ? writeMscclXml(algorithm, MscclFlavour::kBoth) : writeAlgorithmJson(algorithm);
  if (text.size() > kMaxAlgorithmFileBytes) return too_large("", text.size());
  return text;
}

Status writeAlgorithmFile(const std::string& path, const Algorithm& algorithm, AlgorithmFileFormat format) {
  BRAID_ASSIGN_OR_RETURN(const std::string text, renderAlgorithmFile(path, algorithm, format));
  return writeFileAtomic(path, text);
}

}  // namespace braid
