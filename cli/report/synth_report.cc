// Progress lines, tables, provenance and the JSON report of a synthesis (synth_report.h).
#include "report/synth_report.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "braid/sketch.h"
#include "common/text.h"
#include "report/html_report.h"

namespace braid::cli {
namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

std::string padLeft(const std::string& text, size_t width) {
  return text.size() >= width ? text : std::string(width - text.size(), ' ') + text;
}

std::string padRight(const std::string& text, size_t width) {
  return text.size() >= width ? text : text + std::string(width - text.size(), ' ');
}

std::string trimRight(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

/// Lays out rows of cells two spaces apart; columns listed in `left` are left-aligned, the others right-aligned.
std::string layout(const std::vector<std::vector<std::string>>& rows, const std::vector<size_t>& left,
                   const std::string& indent) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line = indent;
    for (size_t i = 0; i < row.size(); ++i) {
      const bool is_left = std::find(left.begin(), left.end(), i) != left.end();
      line += is_left ? padRight(row[i], width[i]) : padLeft(row[i], width[i]);
      if (i + 1 < row.size()) line += "  ";
    }
    out += trimRight(line) + "\n";
  }
  return out;
}

std::string us(double v) { return fmt::format("{:.2f}", v); }
std::string us(const std::optional<double>& v) { return v ? us(*v) : std::string("-"); }
std::string ratio(const std::optional<double>& v) {
  return v && *v > 0 ? fmt::format("{:.2f}x", *v) : std::string("-");
}
std::string boundRatio(double v) { return v > 0 ? fmt::format("{:.2f}", v) : std::string("-"); }
Json optionalJson(const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); }

/// NCCL's choices at the sizes of window `index`, each once, in size order.
std::vector<std::string> ncclChoicesIn(const CollectiveParetoSet& set, int index) {
  std::vector<std::string> choices;
  for (const ParetoPoint& p : set.points) {
    if (p.window == index && std::find(choices.begin(), choices.end(), p.nccl_choice) == choices.end())
      choices.push_back(p.nccl_choice);
  }
  return choices;
}

/// Who serves window `index`: Braid's candidate, or "NCCL <its choices in the window> (else <Braid's candidate>)".
std::string servedBy(const CollectiveParetoSet& set, int index) {
  const ParetoWindow& w = set.windows[index];
  if (!w.nccl) return w.candidate.source;
  const std::string nccl = fmt::format("NCCL {}", fmt::join(ncclChoicesIn(set, index), ", "));
  // What a Braid communicator runs there: a run of NCCL's sizes is split where it changes.
  return w.candidate.source.empty() ? nccl : fmt::format("{} (else {})", nccl, w.candidate.source);
}

}  // namespace

uint64_t peakRssBytes() {
  struct rusage usage {};
  if (getrusage(RUSAGE_SELF, &usage) != 0 || usage.ru_maxrss <= 0) return 0;
  return static_cast<uint64_t>(usage.ru_maxrss) * 1024;  // Linux reports kilobytes
}

std::string bytesText(uint64_t bytes) { return bytes == kUnlimitedBytes ? "inf" : ncclTestsSizeText(bytes); }

std::string windowEndText(uint64_t max_bytes) {
  return max_bytes == kUnlimitedBytes ? "inf" : bytesText(max_bytes + 1);
}

std::string paretoSetTable(const CollectiveParetoSet& set) {
  std::vector<std::vector<std::string>> rows = {
      {"window", "served by", "size", "Braid (us)", "NCCL (us)", "NCCL choice", "cut bound (us)", "NCCL/Braid"}};
  int last_window = -1;
  for (const ParetoPoint& p : set.points) {
    const ParetoWindow& w = set.windows[p.window];
    const bool first = p.window != last_window;
    last_window = p.window;
    const std::string speedup = p.nccl_us && p.braid_us > 0 ? fmt::format("{:.2f}", *p.nccl_us / p.braid_us) : "-";
    rows.push_back({first ? fmt::format("[{}, {})", bytesText(w.min_bytes), windowEndText(w.max_bytes)) : "",
                    first ? servedBy(set, p.window) : "", bytesText(p.size_bytes), us(p.braid_us), us(p.nccl_us),
                    p.nccl_choice, us(p.cut_bound_us), speedup});
  }
  return layout(rows, {0, 1, 5}, "  ");
}

Json paretoSetJson(const CollectiveParetoSet& set, const std::vector<std::string>& files) {
  Json j;
  j["collective"] = collectiveName(set.collective);
  j["min_speedup"] = set.min_speedup;
  j["windows"] = Json::array();
  for (size_t i = 0; i < set.windows.size(); ++i) {
    const ParetoWindow& w = set.windows[i];
    const std::string file = i < files.size() ? files[i] : "";
    j["windows"].push_back({{"min_bytes", w.min_bytes},
                            {"max_bytes", w.max_bytes == kUnlimitedBytes ? Json(nullptr) : Json(w.max_bytes)},
                            {"served_by", w.nccl ? "nccl" : "braid"},
                            {"nccl_choices", ncclChoicesIn(set, static_cast<int>(i))},
                            {"algorithm", w.candidate.algorithm.name},
                            {"protocol", protocolName(w.candidate.algorithm.protocol)},
                            {"instances", w.candidate.instances},
                            {"source", w.candidate.source},
                            {"file", file.empty() ? Json(nullptr) : Json(file)}});
  }
  j["points"] = Json::array();
  for (const ParetoPoint& p : set.points) {
    j["points"].push_back({{"size_bytes", p.size_bytes},
                           {"window", p.window},
                           {"braid_us", p.braid_us},
                           {"braid", p.braid_label},
                           {"nccl_us", optionalJson(p.nccl_us)},
                           {"nccl_choice", p.nccl_choice},
                           {"cut_bound_us", p.cut_bound_us}});
  }
  j["clock_cuts"] = set.clock_cuts;
  j["deterministic"] = set.clock_cuts.empty();
  j["notes"] = set.notes;
  return j;
}

Json boundLabelsJson(CollectiveKind collective, bool bound_command_fields) {
  Json j = Json::object();
  for (const BoundLabel& b : boundLabels(collective)) {
    j[bound_command_fields ? b.bound_field : b.field] = {
        {"name", b.name}, {"what", b.what}, {"valid_for", b.valid_for}};
  }
  if (collective == CollectiveKind::kAllReduce)
    j["all_reduce"] = "cut and route bounds are " + allReduceBoundNote(collective);
  return j;
}

std::string formatProgress(const std::string& prefix, const SynthesisProgress& p) {
  std::string line = fmt::format("[{} {:.1f}s] {}", prefix, p.elapsed_seconds, p.stage);
  std::vector<std::string> parts;
  if (!p.detail.empty()) parts.push_back(p.detail);
  if (p.variables > 0 || p.constraints > 0) {
    parts.push_back(fmt::format("{} vars, {} constraints", p.variables, p.constraints));
  }
  if (p.solver_seconds > 0) parts.push_back(fmt::format("z3 {:.1f}s", p.solver_seconds));
  if (p.best_makespan_us >= 0) parts.push_back(fmt::format("best {:.1f} us", p.best_makespan_us));
  for (size_t i = 0; i < parts.size(); ++i) line += (i == 0 ? ": " : ", ") + parts[i];
  return line;
}

ProgressPrinter::ProgressPrinter(std::string prefix, std::ostream& out, double quiet_s, double interval_s)
    : prefix_(std::move(prefix)),
      out_(out),
      quiet_s_(quiet_s),
      interval_s_(interval_s),
      start_(Clock::now()),
      last_(start_) {}

double ProgressPrinter::elapsedSeconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

void ProgressPrinter::report(const SynthesisProgress& progress) {
  const auto now = Clock::now();
  if (std::chrono::duration<double>(now - start_).count() < quiet_s_) return;
  const bool new_stage = progress.stage != last_stage_;
  if (printed_any_ && !new_stage && std::chrono::duration<double>(now - last_).count() < interval_s_) return;
  out_ << formatProgress(prefix_, progress) << "\n";
  out_.flush();
  printed_any_ = true;
  last_ = now;
  last_stage_ = progress.stage;
}

std::function<void(const SynthesisProgress&)> ProgressPrinter::callback() {
  return [this](const SynthesisProgress& p) { report(p); };
}

std::string stageTable(const std::vector<StageReport>& stages) {
  std::vector<std::vector<std::string>> rows = {
      {"stage", "seconds", "solver units", "variables", "constraints", "makespan (us)", "status"}};
  for (const StageReport& s : stages) {
    rows.push_back({s.name, fmt::format("{:.2f}", s.seconds), s.solver_units ? std::to_string(s.solver_units) : "-",
                    s.variables ? std::to_string(s.variables) : "-",
                    s.constraints ? std::to_string(s.constraints) : "-", s.makespan_us > 0 ? us(s.makespan_us) : "-",
                    s.status});
  }
  return layout(rows, {0, 6}, "  ");
}

std::string comparisonTable(const std::vector<std::pair<std::string, const Comparison*>>& blocks, bool labels) {
  std::vector<std::vector<std::string>> rows;
  // Two bounds on every row: the hardware cut bound (any algorithm) and the routed bound (algorithms following
  // Braid's routes); boundLegend() says so under the table.
  std::vector<std::string> header = {"size",        "Braid (us)",     "proto",          "NCCL (us)",
                                     "NCCL choice", "NCCL ring (us)", "cut bound (us)", "routed bound (us)",
                                     "vs NCCL",     "vs ring",        "Braid/cut",      "Braid/routed"};
  if (labels) header.insert(header.begin(), "collective");
  rows.push_back(header);
  for (const auto& [label, comparison] : blocks) {
    for (const SizeComparison& s : comparison->sizes) {
      std::string choice = s.nccl_choice;
      if (s.nccl_us && s.nccl_simulated != s.nccl_choice) choice += fmt::format(" (ran {})", s.nccl_simulated);
      std::vector<std::string> row = {formatSize(s.size_bytes),
                                      us(s.predicted_us),
                                      s.protocol,
                                      us(s.nccl_us),
                                      choice,
                                      us(s.nccl_ring_us),
                                      us(s.bound_cut_us),
                                      us(s.bound_us),
                                      ratio(s.speedup_vs_nccl),
                                      ratio(s.speedup_vs_ring),
                                      boundRatio(s.ratio_to_cut_bound),
                                      boundRatio(s.ratio_to_bound)};
      if (labels) row.insert(row.begin(), label);
      rows.push_back(std::move(row));
    }
  }
  // Words (the label, the protocol, NCCL's choice) left-aligned, numbers right-aligned.
  const size_t shift = labels ? 1 : 0;
  std::vector<size_t> left = {2 + shift, 4 + shift};
  if (labels) left.push_back(0);
  return layout(rows, left, "  ");
}

void recordComparison(const Comparison& comparison, Provenance* provenance) {
  uint64_t largest = 0;
  for (const SizeComparison& s : comparison.sizes) {
    provenance->predicted_us[s.size_bytes] = s.predicted_us;
    if (s.nccl_us) {
      provenance->extra[fmt::format("nccl_us.{}", s.size_bytes)] = fmt::format("{:.6g}", *s.nccl_us);
      provenance->extra[fmt::format("nccl_choice.{}", s.size_bytes)] = s.nccl_choice;
    }
    if (s.nccl_ring_us) {
      provenance->extra[fmt::format("nccl_ring_us.{}", s.size_bytes)] = fmt::format("{:.6g}", *s.nccl_ring_us);
    }
    provenance->extra[fmt::format("bound_us.{}", s.size_bytes)] = fmt::format("{:.6g}", s.bound_us);
    provenance->extra[fmt::format("cut_bound_us.{}", s.size_bytes)] = fmt::format("{:.6g}", s.bound_cut_us);
    if (s.size_bytes >= largest) {
      largest = s.size_bytes;
      provenance->lower_bound_us = s.bound_us;
    }
  }
  if (!comparison.sizes.empty()) {
    provenance->extra["lower_bound_size_bytes"] = std::to_string(largest);
    // lower_bound_us and bound_us.<bytes> are the routed bound; cut_bound_us.<bytes> holds for any algorithm.
    provenance->extra["lower_bound_valid_for"] = boundLabels(CollectiveKind::kAllGather).back().valid_for;
  }
}

Json synthReportJson(const SynthReport& report) {
  const SynthesisResult& result = *report.result;
  const Algorithm& a = result.algorithm;
  Json j;
  j["synthesis_seconds"] = result.seconds;
  j["command_seconds"] = report.command_seconds;
  j["peak_rss_bytes"] = report.peak_rss_bytes;
  j["verified"] = true;  // synthesize() returns verified algorithms only
  j["collective"] = collectiveName(report.collective);
  j["ranks"] = a.num_ranks;
  if (report.collective == CollectiveKind::kBroadcast || report.collective == CollectiveKind::kReduce) {
    j["root"] = a.root;
  }
  j["topology"] = {{"name", report.topology->name},
                   {"source", report.topology->source},
                   {"gpus", report.topology->numGpus()},
                   {"nodes", report.topology->numNodes()}};
  j["method"] = synthesisMethodName(result.method);
  if (result.method != SynthesisMethod::kTaccl) {
    j["sketch"] = nullptr;
  } else {
    j["sketch"] = {{"source", result.sketch.source},
                   {"name", result.sketch.name},
                   {"derived", !report.sketch_given},
                   {"yaml", writeSketchYaml(result.sketch)}};
  }
  j["chunkup"] = result.chunkup;
  if (result.method == SynthesisMethod::kSccl) {
    const auto& x = a.provenance.extra;
    auto num = [&x](const char* key) { return x.count(key) ? Json(std::stoi(x.at(key))) : Json(nullptr); };
    j["sccl"] = {{"steps", num("sccl_steps")}, {"rounds", num("sccl_rounds")}, {"chunks", num("sccl_chunks")}};
  }
  j["time_limit_s"] = report.time_limit_s;
  j["budget_units"] = result.budget_units;
  // Empty when the result depends on the inputs and the budget alone (SynthesisResult::clock_cuts).
  j["clock_cuts"] = result.clock_cuts;
  j["deterministic"] = result.clock_cuts.empty();
  j["costing_size_bytes"] = result.costing_size_bytes;
  j["model_makespan_us"] = result.makespan_us;
  j["stages"] = Json::array();
  for (const StageReport& s : result.stages) {
    j["stages"].push_back({{"name", s.name},
                           {"seconds", s.seconds},
                           {"solver_units", s.solver_units},
                           {"variables", s.variables},
                           {"constraints", s.constraints},
                           {"status", s.status},
                           {"makespan_us", s.makespan_us}});
  }
  j["algorithm"] = {{"name", a.name},
                    {"protocol", protocolName(a.protocol)},
                    {"threadblocks", a.numThreadblocks()},
                    {"steps", a.numSteps()},
                    {"channels", a.num_channels},
                    {"chunks", a.num_chunks},
                    {"in_place", a.in_place},
                    {"out_of_place", a.out_of_place},
                    {"file", report.output.empty() ? Json(nullptr) : Json(report.output)},
                    {"format", report.output.empty() ? Json(nullptr) : Json(report.output_format)}};
  if (report.comparison) j["bounds"] = boundLabelsJson(report.collective, false);
  j["sizes"] = Json::array();
  std::vector<std::string> notes = report.notes;
  for (const std::string& n : result.notes) notes.push_back(n);
  if (report.comparison) {
    for (const SizeComparison& s : report.comparison->sizes) {
      j["sizes"].push_back({{"size_bytes", s.size_bytes},
                            {"requested_bytes", s.requested_bytes},
                            {"count", s.count},
                            {"predicted_us", s.predicted_us},
                            {"protocol", s.protocol},
                            {"nccl_us", optionalJson(s.nccl_us)},
                            {"nccl_choice", s.nccl_choice},
                            {"nccl_simulated", s.nccl_simulated},
                            {"nccl_ring_us", optionalJson(s.nccl_ring_us)},
                            {"nccl_ring_choice", s.nccl_ring_choice},
                            {"nccl_model_us", optionalJson(s.nccl_model_us)},
                            {"cut_bound_us", s.bound_cut_us},
                            {"route_bound_us", s.bound_route_us},
                            {"latency_bound_us", s.bound_latency_us},
                            {"bound_us", s.bound_us},
                            {"speedup_vs_nccl", optionalJson(s.speedup_vs_nccl)},
                            {"speedup_vs_ring", optionalJson(s.speedup_vs_ring)},
                            {"ratio_to_cut_bound", s.ratio_to_cut_bound},
                            {"ratio_to_bound", s.ratio_to_bound},
                            {"notes", s.notes}});
    }
    for (const std::string& n : report.comparison->notes) notes.push_back(n);
  }
  j["notes"] = notes;
  return j;
}

}  // namespace braid::cli
