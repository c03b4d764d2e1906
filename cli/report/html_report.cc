// HTML page of `braid simulate` (see html_report.h): inline CSS and SVG, no external resources.
#include "report/html_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "common/text.h"

namespace braid::cli {
namespace {

/// Text and attribute values: escapeXml (ill-formed UTF-8 and the controls XML forbids replaced by U+FFFD), so
/// the page's inline SVG stays well-formed whatever names the topology carries.
std::string escapeHtml(const std::string& text) { return escapeXml(text); }

/// 1, 2 or 5 times a power of ten, at least `raw`.
double niceStep(double raw) {
  if (!(raw > 0) || !std::isfinite(raw)) return 1;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * power >= raw * (1 - 1e-12)) return m * power;
  }
  return 10 * power;
}

/// Compact number for tick labels and tooltips: at most 4 significant digits, no trailing zeros.
std::string num(double value) {
  if (value == 0) return "0";
  std::string text = fmt::format("{:.4g}", value);
  return text;
}

/// Fixed-point coordinate with one decimal (keeps the SVG small).
std::string coord(double value) { return fmt::format("{:.1f}", value); }

// Utilization colors: pale yellow (idle-ish) -> orange -> dark red (saturated).
std::string utilizationColor(double u) {
  u = std::clamp(std::isfinite(u) ? u : 0.0, 0.0, 1.0);
  struct Stop {
    double at;
    std::array<double, 3> rgb;
  };
  static const std::array<Stop, 3> stops = {Stop{0.0, {255, 242, 170}}, Stop{0.5, {245, 140, 50}},
                                            Stop{1.0, {150, 0, 20}}};
  int i = u <= 0.5 ? 0 : 1;
  const double t = (u - stops[i].at) / (stops[i + 1].at - stops[i].at);
  std::array<int, 3> c{};
  for (int k = 0; k < 3; ++k) {
    c[k] = static_cast<int>(std::lround(stops[i].rgb[k] + t * (stops[i + 1].rgb[k] - stops[i].rgb[k])));
  }
  return fmt::format("#{:02x}{:02x}{:02x}", c[0], c[1], c[2]);
}

struct Series {
  const char* css_class;
  const char* label;
  const char* color;
  const char* dash;                                 // stroke-dasharray, empty for solid
  std::vector<std::pair<uint64_t, double>> points;  // (size, busbw GB/s)
};

std::string busbwPlot(const SimulateReport& report) {
  std::vector<Series> series = {
      {"series-braid", "Braid (simulated)", "#1f5fbf", "", {}},
      {"series-nccl", "NCCL model", "#e07b00", "6 4", {}},
      {"series-nccl-sim", "NCCL simulated", "#2a9d3a", "", {}},
      {"series-bound", "routed bound (ceiling)", "#555555", "2 4", {}},
      {"series-cut-bound", "cut bound (hardware)", "#999999", "8 3 2 3", {}},
  };
  for (const SimulateRow& row : report.rows) {
    series[0].points.emplace_back(row.size_bytes, row.busbw_gbps);
    if (row.nccl_busbw_gbps) series[1].points.emplace_back(row.size_bytes, *row.nccl_busbw_gbps);
    series[2].points.emplace_back(row.size_bytes, row.nccl_sim_busbw_gbps);
    series[3].points.emplace_back(row.size_bytes, row.bound_busbw_gbps);
    series[4].points.emplace_back(row.size_bytes, row.cut_bound_busbw_gbps);
  }
  constexpr double kWidth = 900, kHeight = 440, kLeft = 70, kRight = 220, kTop = 30, kBottom = 60;
  const double plot_w = kWidth - kLeft - kRight;
  const double plot_h = kHeight - kTop - kBottom;

  double x_min = 0, x_max = 1, y_max = 0;
  bool any = false;
  for (const Series& s : series) {
    for (const auto& [size, bw] : s.points) {
      const double lx = std::log2(static_cast<double>(std::max<uint64_t>(size, 1)));
      if (!any) x_min = x_max = lx;
      x_min = std::min(x_min, lx);
      x_max = std::max(x_max, lx);
      if (std::isfinite(bw)) y_max = std::max(y_max, bw);
      any = true;
    }
  }
  if (x_max - x_min < 1e-9) {
    x_min -= 1;
    x_max += 1;
  }
  const double y_step = niceStep(std::max(y_max, 1e-3) / 5);
  const double y_top = std::max(y_step, std::ceil(y_max / y_step - 1e-9) * y_step);
  auto px = [&](uint64_t size) {
    const double lx = std::log2(static_cast<double>(std::max<uint64_t>(size, 1)));
    return kLeft + (lx - x_min) / (x_max - x_min) * plot_w;
  };
  auto py = [&](double bw) { return kTop + plot_h - std::clamp(bw / y_top, 0.0, 1.0) * plot_h; };

  std::string svg = fmt::format(
      "<svg id=\"busbw-plot\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} "
      "{1}\" role=\"img\" aria-label=\"bus bandwidth versus size\">\n",
      kWidth, kHeight);
  svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#ffffff\" stroke=\"#999\"/>\n", kLeft,
                     kTop, plot_w, plot_h);
  // Y grid and ticks.
  svg += "<g class=\"axis y-axis\" font-size=\"11\" text-anchor=\"end\">\n";
  for (double v = 0; v <= y_top * (1 + 1e-9); v += y_step) {
    const double y = py(v);
    svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#e4e4e4\"/>", kLeft, coord(y),
                       kLeft + plot_w);
    svg += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", kLeft - 6, coord(y + 4), num(v));
  }
  svg += fmt::format(
      "<text x=\"16\" y=\"{0}\" transform=\"rotate(-90 16 {0})\" text-anchor=\"middle\" font-size=\"12\">busbw "
      "(GB/s)</text>\n",
      coord(kTop + plot_h / 2));
  svg += "</g>\n";
  // X ticks at powers of two, at most ~12 labels.
  svg += "<g class=\"axis x-axis\" font-size=\"11\" text-anchor=\"middle\">\n";
  const int first = static_cast<int>(std::ceil(x_min - 1e-9));
  const int last = static_cast<int>(std::floor(x_max + 1e-9));
  const int every = std::max(1, (last - first + 11) / 12);
  for (int e = first; e <= last && e < 64; ++e) {
    const uint64_t size = uint64_t{1} << std::max(e, 0);
    const double x = px(size);
    const bool labelled = (e - first) % every == 0;
    svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"{3}\"/>", coord(x), kTop,
                       kTop + plot_h, labelled ? "#e4e4e4" : "#f4f4f4");
    if (labelled) {
      svg += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>", coord(x), kTop + plot_h + 16, formatSize(size));
    }
    svg += "\n";
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"12\">size (bytes, log2 scale)</text>\n",
                     coord(kLeft + plot_w / 2), kTop + plot_h + 40);
  svg += "</g>\n";
  // Series, Braid drawn last so it stays visible where it coincides with another curve.
  for (auto it = series.rbegin(); it != series.rend(); ++it) {
    const Series& s = *it;
    std::string points;
    for (const auto& [size, bw] : s.points) {
      if (!std::isfinite(bw)) continue;
      if (!points.empty()) points += ' ';
      points += coord(px(size)) + "," + coord(py(bw));
    }
    svg += fmt::format("<polyline class=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{} points=\"{}\"/>\n",
                       s.css_class, s.color,
                       std::string(s.dash).empty() ? "" : fmt::format(" stroke-dasharray=\"{}\"", s.dash), points);
    svg += fmt::format("<g class=\"{}-points\" fill=\"{}\">", s.css_class, s.color);
    for (const auto& [size, bw] : s.points) {
      if (!std::isfinite(bw)) continue;
      svg += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"2.5\"><title>{}: {} B, {} GB/s</title></circle>",
                         coord(px(size)), coord(py(bw)), s.label, size, num(bw));
    }
    svg += "</g>\n";
  }
  // Legend.
  const double lx = kLeft + plot_w + 16;
  svg += "<g class=\"legend\" font-size=\"12\">\n";
  for (size_t i = 0; i < series.size(); ++i) {
    const Series& s = series[i];
    const double y = kTop + 12 + 22.0 * static_cast<double>(i);
    svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"{3}\" stroke-width=\"2\"{4}/>",
                       coord(lx), coord(y), coord(lx + 26), s.color,
                       std::string(s.dash).empty() ? "" : fmt::format(" stroke-dasharray=\"{}\"", s.dash));
    svg += fmt::format("<text x=\"{}\" y=\"{}\">{}{}</text>\n", coord(lx + 32), coord(y + 4), s.label,
                       s.points.empty() ? " (not modelled)" : "");
  }
  svg += "</g>\n</svg>\n";
  return svg;
}

std::string linkTimeline(const SimulateTimeline& timeline, const HtmlLimits& limits) {
  constexpr double kLabelW = 250, kPlotW = 760, kRight = 20, kTop = 64, kRowH = 16, kBarH = 12, kAxisH = 44;
  const double width = kLabelW + kPlotW + kRight;
  const int rows = static_cast<int>(timeline.links.size());
  const double height = kTop + std::max(1, rows) * kRowH + kAxisH + 36;

  double span = timeline.time_us;
  for (const TimelineLink& link : timeline.links) {
    for (const TimelineSegment& s : link.segments) span = std::max(span, s.end_us);
  }
  if (!(span > 0)) span = 1;
  auto px = [&](double t) { return kLabelW + std::clamp(t / span, 0.0, 1.0) * kPlotW; };

  std::string svg = fmt::format(
      "<svg id=\"link-timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 "
      "{0} {1}\" role=\"img\" aria-label=\"per-link timeline\">\n",
      width, coord(height));
  svg += fmt::format(
      "<text class=\"title\" x=\"{}\" y=\"18\" font-size=\"14\" font-weight=\"bold\">Per-link timeline at {} "
      "({} B): {} link(s) carried data, collective {} us</text>\n",
      kLabelW, formatSize(timeline.size_bytes), timeline.size_bytes, rows, num(timeline.time_us));

  const int per_link =
      rows == 0 ? limits.max_rects : std::max(limits.min_rects_per_link, limits.max_rects / std::max(1, rows));
  for (int r = 0; r < rows; ++r) {
    const TimelineLink& link = timeline.links[r];
    const double y = kTop + r * kRowH;
    svg += fmt::format("<g class=\"link-row\" data-link=\"{}\">", link.link);
    svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">{}</text>", kLabelW - 6,
                       coord(y + kBarH - 2), escapeHtml(link.label));
    svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#eeeeee\"/>", kLabelW,
                       coord(y + kBarH / 2), kLabelW + kPlotW);
    for (const TimelineSegment& s : mergeSegments(link.segments, per_link)) {
      const double u = link.bandwidth_gbps > 0 ? s.gbps / link.bandwidth_gbps : 0;
      const double x0 = px(s.start_us);
      const double w = std::max(0.4, px(s.end_us) - x0);
      svg += fmt::format(
          "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{}-{} us, {} GB/s "
          "({}%)</title></rect>",
          coord(x0), coord(y), fmt::format("{:.2f}", w), kBarH, utilizationColor(u), num(s.start_us), num(s.end_us),
          num(s.gbps), num(100 * u));
    }
    svg += "</g>\n";
  }
  // Time axis.
  const double axis_y = kTop + std::max(1, rows) * kRowH + 4;
  svg += fmt::format("<g class=\"axis time-axis\" font-size=\"11\" text-anchor=\"middle\">");
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#333\"/>", kLabelW, coord(axis_y),
                     kLabelW + kPlotW);
  const double step = niceStep(span / 8);
  for (double t = 0; t <= span * (1 + 1e-9); t += step) {
    svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#333\"/>", coord(px(t)),
                       coord(axis_y), coord(axis_y + 5));
    svg += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>", coord(px(t)), coord(axis_y + 18), num(t));
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"12\">time (us)</text></g>\n", coord(kLabelW + kPlotW / 2),
                     coord(axis_y + 36));
  // Utilization scale.
  svg +=
      "<defs><linearGradient id=\"util-gradient\"><stop offset=\"0\" stop-color=\"#fff2aa\"/><stop offset=\"0.5\" "
      "stop-color=\"#f58c32\"/><stop offset=\"1\" stop-color=\"#960014\"/></linearGradient></defs>\n";
  svg += fmt::format(
      "<g class=\"util-legend\" font-size=\"11\"><text x=\"10\" y=\"18\">utilization (GB/s / link GB/s)</text>"
      "<rect x=\"10\" y=\"24\" width=\"160\" height=\"10\" fill=\"url(#util-gradient)\"/>"
      "<text x=\"10\" y=\"{0}\">0%</text><text x=\"170\" y=\"{0}\" text-anchor=\"end\">100%</text></g>\n",
      48);
  svg += "</svg>\n";
  return svg;
}

std::string rowsTable(const SimulateReport& report) {
  std::string html = "<table id=\"rows\">\n<thead><tr>";
  for (const char* h : {"size (B)",
                        "count (elements)",
                        "type",
                        "redop",
                        "proto",
                        "time (us)",
                        "algbw (GB/s)",
                        "busbw (GB/s)",
                        "NCCL model (us)",
                        "NCCL choice",
                        "NCCL sim (us)",
                        "NCCL simulated",
                        "cut bound (us)",
                        "routed bound (us)",
                        "routed bound busbw (GB/s)",
                        "vs model (NCCL model / Braid)",
                        "vs NCCL (NCCL sim / Braid)",
                        "Braid / cut bound",
                        "Braid / routed bound",
                        "notes"}) {
    html += fmt::format("<th>{}</th>", h);
  }
  html += "</tr></thead>\n<tbody>\n";
  for (const SimulateRow& row : report.rows) {
    std::string notes;
    for (const std::string& n : row.notes) notes += (notes.empty() ? "" : "; ") + escapeHtml(n);
    html += fmt::format("<tr{}>", row.in_window ? "" : " class=\"out-of-window\"");
    html += fmt::format(
        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2f}</td><td>{:.2f}</td><td>{:.2f}</td>",
        row.size_bytes, row.count, escapeHtml(row.type), escapeHtml(row.redop), escapeHtml(row.protocol), row.time_us,
        row.algbw_gbps, row.busbw_gbps);
    html += fmt::format("<td>{}</td><td>{}</td><td>{:.2f}</td><td>{}</td><td>{:.2f}</td><td>{:.2f}</td><td>{:.2f}</td>",
                        row.nccl_time_us ? fmt::format("{:.2f}", *row.nccl_time_us) : "-", escapeHtml(row.nccl_choice),
                        row.nccl_sim_us, escapeHtml(row.nccl_sim_algo), row.bound_cut_us, row.bound_us,
                        row.bound_busbw_gbps);
    auto ratio = [&](double bound) { return bound > 0 ? fmt::format("{:.2f}", row.time_us / bound) : "-"; };
    html +=
        fmt::format("<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                    row.nccl_time_us && row.time_us > 0 ? fmt::format("{:.2f}", *row.nccl_time_us / row.time_us) : "-",
                    row.nccl_sim_us > 0 && row.time_us > 0 ? fmt::format("{:.2f}", row.nccl_sim_us / row.time_us) : "-",
                    ratio(row.bound_cut_us), ratio(row.bound_us), notes);
  }
  html += "</tbody>\n</table>\n";
  return html;
}

}  // namespace

std::string formatSize(uint64_t bytes) {
  constexpr uint64_t kK = 1024;
  if (bytes >= kK * kK * kK && bytes % (kK * kK * kK) == 0) return fmt::format("{}G", bytes / (kK * kK * kK));
  if (bytes >= kK * kK && bytes % (kK * kK) == 0) return fmt::format("{}M", bytes / (kK * kK));
  if (bytes >= kK && bytes % kK == 0) return fmt::format("{}K", bytes / kK);
  return fmt::format("{}", bytes);
}

std::vector<TimelineSegment> mergeSegments(const std::vector<TimelineSegment>& segments, int max_segments) {
  // Lossless pass: touching pieces with the same rate become one.
  std::vector<TimelineSegment> exact;
  exact.reserve(segments.size());
  for (const TimelineSegment& s : segments) {
    if (!exact.empty()) {
      TimelineSegment& last = exact.back();
      const double tolerance = 1e-9 * std::max({1.0, std::fabs(last.gbps), std::fabs(s.gbps)});
      if (s.start_us <= last.end_us + 1e-9 && std::fabs(s.gbps - last.gbps) <= tolerance) {
        last.end_us = std::max(last.end_us, s.end_us);
        if (last.messages != s.messages) last.messages = 0;
        continue;
      }
    }
    exact.push_back(s);
  }
  max_segments = std::max(1, max_segments);
  if (static_cast<int>(exact.size()) <= max_segments) return exact;
  // Groups of `group` consecutive pieces, drawn over their span at the rate that carries the same bytes.
  const size_t group = (exact.size() + max_segments - 1) / max_segments;
  std::vector<TimelineSegment> merged;
  merged.reserve(max_segments);
  for (size_t i = 0; i < exact.size(); i += group) {
    const size_t end = std::min(exact.size(), i + group);
    TimelineSegment m;
    m.start_us = exact[i].start_us;
    m.end_us = exact[i].end_us;
    m.messages = exact[i].messages;
    double bytes_x1e3 = 0;  // GB/s x us = 1e3 bytes
    double peak = 0;
    for (size_t k = i; k < end; ++k) {
      m.start_us = std::min(m.start_us, exact[k].start_us);
      m.end_us = std::max(m.end_us, exact[k].end_us);
      bytes_x1e3 += exact[k].gbps * (exact[k].end_us - exact[k].start_us);
      peak = std::max(peak, exact[k].gbps);
      if (exact[k].messages != m.messages) m.messages = 0;
    }
    const double span = m.end_us - m.start_us;
    m.gbps = span > 0 ? bytes_x1e3 / span : peak;
    merged.push_back(m);
  }
  return merged;
}

std::string renderSimulateHtml(const SimulateReport& report, const HtmlLimits& limits) {
  const std::string title = fmt::format("Braid simulate: {} on {} ({} ranks), {}", report.algorithm, report.topology,
                                        report.ranks, report.collective);
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  html += fmt::format("<title>{}</title>\n", escapeHtml(title));
  html +=
      "<style>\n"
      "body{font-family:sans-serif;margin:24px;color:#222;background:#fafafa}\n"
      "h1{font-size:20px}h2{font-size:16px;margin-top:28px}\n"
      "svg{background:#fff;border:1px solid #ddd;display:block;margin:8px 0}\n"
      "table{border-collapse:collapse;font-size:12px;background:#fff}\n"
      "th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}th{background:#eee}\n"
      "td:nth-child(3),td:nth-child(4),td:nth-child(5),td:nth-child(10),td:nth-child(12),td:nth-child(17)"
      "{text-align:left}\n"
      "tr.out-of-window td{color:#a33}\n"
      "dl{display:grid;grid-template-columns:max-content auto;gap:2px 12px;font-size:13px}dt{font-weight:bold}\n"
      "</style>\n</head>\n<body>\n";
  html += fmt::format("<h1>{}</h1>\n<dl>\n", escapeHtml(title));
  auto item = [&](const std::string& key, const std::string& value) {
    html += fmt::format("<dt>{}</dt><dd>{}</dd>\n", escapeHtml(key), escapeHtml(value));
  };
  item("algorithm", report.algorithm_name.empty() || report.algorithm_name == report.algorithm
                        ? report.algorithm
                        : fmt::format("{} ({})", report.algorithm, report.algorithm_name));
  item("topology", report.topology);
  item("collective", report.collective);
  item("ranks", std::to_string(report.ranks));
  item("protocol", report.protocol);
  item("datatype", report.datatype);
  item("mode", report.in_place ? "in-place" : "out-of-place");
  item("instances", std::to_string(report.instances));
  item("busbw factor", num(report.bus_factor));
  html += "</dl>\n";
  if (!report.notes.empty()) {
    html += "<ul class=\"notes\">\n";
    for (const std::string& n : report.notes) html += fmt::format("<li>{}</li>\n", escapeHtml(n));
    html += "</ul>\n";
  }
  html += "<h2>Bus bandwidth vs size</h2>\n";
  html += busbwPlot(report);
  html +=
      "<p>busbw = size / time x busbw factor (nccl-tests). The cut bound curve is the busbw at ForestColl's hardware "
      "cut bound: no algorithm on this topology can exceed it unless the network reduces data itself (NVLS). The "
      "routed bound curve is the busbw at max(cut bound, route bound, latency bound): no algorithm whose GPU-to-GPU "
      "messages follow the topology's routes (as Braid's, NCCL's and MSCCL's do in this simulator) can exceed "
      "it.</p>\n";
  if (!report.bound_legend.empty()) {
    html += "<ul class=\"bounds\">\n";
    for (const std::string& line : report.bound_legend) html += fmt::format("<li>{}</li>\n", escapeHtml(line));
    html += "</ul>\n";
  }
  if (report.timeline) {
    html += fmt::format("<h2>Per-link timeline at {}</h2>\n", formatSize(report.timeline->size_bytes));
    html += linkTimeline(*report.timeline, limits);
    html +=
        "<p>One row per link direction that carried data; each rectangle is a period of constant rate, colored by "
        "utilization (rate / link bandwidth). Adjacent periods are merged to keep the page small.</p>\n";
  }
  html += "<h2>Rows</h2>\n";
  html += rowsTable(report);
  html += "</body>\n</html>\n";
  return html;
}

}  // namespace braid::cli
