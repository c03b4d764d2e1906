// The report of `braid simulate` (cli/simulate_cmd.cc) and its self-contained HTML page.
//
// The page has no external scripts, fonts or URLs: inline CSS and inline SVG only, so every picture is in
// the DOM without JavaScript. It holds (1) a bus-bandwidth vs size plot (`<svg id="busbw-plot">`, log2 x
// axis, GB/s y axis) with one `<polyline>` per series (classes `series-braid`, `series-nccl`,
// `series-nccl-sim`, `series-bound`, `series-cut-bound`), (2) a per-link timeline for one size (`<svg
// id="link-timeline">`): one row per link that carried data, one `<rect>` per (merged) LinkSegment colored by
// utilization, a time axis in µs, and (3) the table of rows.
//
// Units: bytes, microseconds, GB/s (1 GB/s = 1e3 bytes/us), as in include/braid/simulate.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace braid::cli {

/// One swept size: what Braid's simulator, NCCL's model, NCCL's algorithm in the simulator and the lower
/// bound say. Bandwidths follow nccl-tests (algbw = size / time, busbw = algbw x busBandwidthFactor).
struct SimulateRow {
  uint64_t size_bytes = 0;  // nccl-tests size: max(send, recv) buffer bytes of one rank
  uint64_t count = 0;       // elements per rank passed to the collective (nccl-tests "count")
  std::string type;         // nccl-tests datatype name ("float", ...)
  std::string redop;        // "sum" for reductions, "none" otherwise
  std::string protocol;     // protocol Braid's algorithm ran with at this size
  double time_us = 0;       // Braid: simulated time
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  std::optional<double> nccl_time_us;  // NCCL's model (nullopt: the model does not cover the collective)
  std::string nccl_choice;             // e.g. "Ring/LL128"; "-" when not modelled
  std::optional<double> nccl_busbw_gbps;
  double nccl_sim_us = 0;  // NCCL's algorithm run in Braid's simulator
  double nccl_sim_busbw_gbps = 0;
  std::string nccl_sim_algo;  // what was simulated, e.g. "Ring/LL128"
  double bound_us = 0;  // routed bound, collectiveBound: max(cut, route, latency); algorithms following the routes
  double bound_bandwidth_us = 0;    // bandwidth bound: max(ForestColl cut bound, route bound)
  double bound_cut_us = 0;          // ForestColl hardware cut bound alone: any algorithm
  double bound_route_us = 0;        // route-constrained LP bound alone (0 when not computed)
  double bound_latency_us = 0;      // the latency bound alone
  double bound_busbw_gbps = 0;      // busbw at the routed bound: the ceiling for algorithms following the routes
  double cut_bound_busbw_gbps = 0;  // busbw at the cut bound: the hardware ceiling (bandwidth only)
  bool in_window = true;            // size inside the algorithm's [min_bytes, max_bytes]
  std::vector<std::string> notes;
};

/// One drawn piece of a link's timeline.
struct TimelineSegment {
  double start_us = 0;
  double end_us = 0;
  double gbps = 0;   // all messages on the link together
  int messages = 0;  // concurrent messages (0 after merging pieces with different counts)
};

/// One link that carried data at the timeline size.
struct TimelineLink {
  int link = 0;                           // index into Topology::links
  std::string label;                      // e.g. "gpu0->nvswitch0 (nvlink)"
  double bandwidth_gbps = 0;              // link bandwidth (utilization = gbps / bandwidth_gbps)
  double bytes = 0;                       // bytes carried in all
  std::vector<TimelineSegment> segments;  // ordered by start
};

struct SimulateTimeline {
  uint64_t size_bytes = 0;
  double time_us = 0;  // the collective's simulated time at this size
  std::vector<TimelineLink> links;
};

struct SimulateReport {
  std::string algorithm;       // as given on the command line (name or file)
  std::string algorithm_name;  // Algorithm::name (file algorithms) or the built algorithm's name
  std::string topology;        // topology name
  std::string collective;      // collectiveName
  int ranks = 0;
  std::string protocol;  // protocol text for the header ("Simple", or "per size (NCCL's choice)")
  std::string datatype;  // nccl-tests datatype name
  bool in_place = false;
  int instances = 1;
  double bus_factor = 1;  // nccl-tests busbw factor
  std::vector<SimulateRow> rows;
  std::optional<SimulateTimeline> timeline;
  std::vector<std::string> notes;
  std::vector<std::string> bound_legend;  // boundLegend(collective) (comm/pareto/compare.h): what each bound holds for
};

/// Limits that keep the page small (< ~2 MB): at most `max_rects` timeline rectangles in all; a link with
/// more segments than its share has adjacent segments merged (time-weighted average rate).
struct HtmlLimits {
  int max_rects = 6000;
  int min_rects_per_link = 16;
};

/// Merges a link's segments so that at most `max_segments` remain: exact merges first (touching pieces with
/// the same rate), then groups of consecutive pieces, each drawn over its span with the rate that carries the
/// same bytes (sum of gbps x duration / span). Bytes are preserved exactly.
std::vector<TimelineSegment> mergeSegments(const std::vector<TimelineSegment>& segments, int max_segments);

/// The whole HTML page (UTF-8). Pure: depends only on its arguments.
std::string renderSimulateHtml(const SimulateReport& report, const HtmlLimits& limits = {});

/// Human-readable size in nccl-tests style powers of two: 1024 -> "1K", 1048576 -> "1M", 1536 -> "1536".
std::string formatSize(uint64_t bytes);

}  // namespace braid::cli
