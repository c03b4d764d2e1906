// perf/congestion_benchmark: chunking policies side by side in the congestion model (include/braid/congestion.h,
// docs/congestion.md): an all-to-all on a leaf-spine or rail fabric at several rank counts and sizes, each size run
// once per policy with everything else equal, printing completion p50/p99 per flow, throughput, PFC pauses, ECN
// marks and queue depths, and the adaptive policies' ratios to NCCL's fixed 512 KiB steps.
//
//   congestion_benchmark [--fabric leaf-spine|rail] [--ranks 64,256,1024] [--sizes 1M,4M,16M]
//                        [--policies fixed-512K,fixed-128K,window,credits,adaptive] [--peers-in-flight N]
//                        [--gpus-per-node N] [--hosts-per-leaf N] [--oversubscription X] [--link-gbps X]
//                        [--latency-us X] [--buffer-per-port SIZE] [--ecn-kmin SIZE] [--ecn-kmax SIZE]
//                        [--ecn-pmax X] [--xoff SIZE] [--xon SIZE] [--no-pfc] [--rx-credits N] [--rtt-target-us X]
//                        [--train SIZE] [--jitter-us X] [--seed N] [--iterations N] [--max-events N]
// Sizes are bytes per peer, nccl-tests syntax (K, M, G). The table shows the first iteration (seed --seed); with
// --iterations N each policy also runs seeds seed+1 .. seed+N-1 (other ECMP hashes and ECN draws) and a line gives the
// all-to-all time's p50/p99 over them. A (ranks, size) case whose fixed-512K run would move more
// than --max-events trains x hops is skipped with a note (the default keeps the default matrix to minutes on 2 cores).
// Exit status 1 on a bad argument or a failed simulation.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "braid/congestion.h"

namespace {

using braid::congestion::FabricKind;
using braid::congestion::FabricSpec;
using braid::congestion::Policy;
using braid::congestion::PolicyKind;
using braid::congestion::Report;
using braid::congestion::SwitchSpec;
using braid::congestion::Workload;

std::optional<uint64_t> parseSize(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !(v > 0)) return std::nullopt;
  double mult = 1;
  const std::string unit(end);
  if (unit == "K" || unit == "k") {
    mult = 1024;
  } else if (unit == "M" || unit == "m") {
    mult = 1024.0 * 1024;
  } else if (unit == "G" || unit == "g") {
    mult = 1024.0 * 1024 * 1024;
  } else if (!unit.empty()) {
    return std::nullopt;
  }
  return static_cast<uint64_t>(v * mult);
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const size_t stop = comma == std::string::npos ? text.size() : comma;
    if (stop > start) out.push_back(text.substr(start, stop - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string human(uint64_t bytes) {
  if (bytes >= (1u << 30) && bytes % (1u << 30) == 0) return fmt::format("{}G", bytes >> 30);
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return fmt::format("{}M", bytes >> 20);
  if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) return fmt::format("{}K", bytes >> 10);
  return fmt::format("{}", bytes);
}

// The policies by name. window: the ECN/RTT window alone; credits: NCCL's 128 KiB chunks and 8-chunk window behind
// receiver credits alone; adaptive: both.
std::optional<Policy> policyNamed(const std::string& name, int rx_credit_chunks, double rtt_target_us) {
  if (name == "fixed-512K") return Policy::fixed512k();
  if (name == "fixed-128K") return Policy::fixed128k();
  Policy a = Policy::adaptive();
  if (rx_credit_chunks >= 0) a.rx_credit_chunks = rx_credit_chunks;
  if (rtt_target_us >= 0) a.rtt_target_us = rtt_target_us;
  if (name == "adaptive") return a;
  if (name == "window") {
    a.name = "window";
    a.rx_credit_chunks = 0;
    return a;
  }
  if (name == "credits") {
    // NCCL's p2p chunking behind receiver credits, no window reaction: an adaptive policy whose window starts and
    // stays at 8 x 128 KiB and whose chunk is 128 KiB.
    a.name = "credits";
    a.ecn_window = false;
    a.rtt_target_us = 0;
    a.chunk_bytes = a.min_chunk_bytes = 128 << 10;
    a.initial_window_bytes = a.min_window_bytes = a.max_window_bytes = 8 * (128 << 10);
    return a;
  }
  return std::nullopt;
}

struct Options {
  FabricSpec fabric;
  SwitchSpec switches;
  Workload workload;
  std::vector<int> ranks = {64, 256, 1024};
  std::vector<uint64_t> sizes = {1 << 20, 4 << 20, 16 << 20};
  std::vector<std::string> policies = {"fixed-512K", "fixed-128K", "window", "credits", "adaptive"};
  int rx_credit_chunks = -1;
  double rtt_target_us = -1;
  double max_events = 2.5e8;
  int iterations = 1;  // > 1: the all-to-all with seeds seed .. seed + iterations - 1 (ECMP hashing, ECN draws)
};

int usage(const char* why) {
  std::fprintf(stderr, "congestion_benchmark: %s (see the comment at the top of perf/congestion_benchmark.cc)\n", why);
  return 1;
}

// Parses argv into `o`; returns an error message or "".
std::string parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= argc) return std::nullopt;
      return std::string(argv[++i]);
    };
    auto number = [&](double* out) -> bool {
      const std::optional<std::string> v = value();
      if (!v) return false;
      char* end = nullptr;
      *out = std::strtod(v->c_str(), &end);
      return end != v->c_str() && *end == '\0';
    };
    auto size = [&](uint64_t* out) -> bool {
      const std::optional<std::string> v = value();
      const std::optional<uint64_t> s = v ? parseSize(*v) : std::nullopt;
      if (s) *out = *s;
      return s.has_value();
    };
    double x = 0;
    if (flag == "--fabric") {
      const std::optional<std::string> v = value();
      if (v == "leaf-spine") {
        o.fabric.kind = FabricKind::kLeafSpine;
      } else if (v == "rail") {
        o.fabric.kind = FabricKind::kRail;
      } else {
        return "--fabric: leaf-spine or rail";
      }
    } else if (flag == "--ranks") {
      const std::optional<std::string> v = value();
      o.ranks.clear();
      for (const std::string& r : split(v.value_or(""))) o.ranks.push_back(std::atoi(r.c_str()));
      if (o.ranks.empty()) return "--ranks: a comma-separated list of rank counts";
    } else if (flag == "--sizes") {
      const std::optional<std::string> v = value();
      o.sizes.clear();
      for (const std::string& s : split(v.value_or(""))) {
        const std::optional<uint64_t> b = parseSize(s);
        if (!b) return fmt::format("--sizes: '{}' is not a size", s);
        o.sizes.push_back(*b);
      }
      if (o.sizes.empty()) return "--sizes: a comma-separated list of sizes per peer";
    } else if (flag == "--policies") {
      o.policies = split(value().value_or(""));
      if (o.policies.empty()) return "--policies: a comma-separated list";
    } else if (flag == "--peers-in-flight" && number(&x)) {
      o.workload.peers_in_flight = static_cast<int>(x);
    } else if (flag == "--gpus-per-node" && number(&x)) {
      o.fabric.gpus_per_node = static_cast<int>(x);
    } else if (flag == "--hosts-per-leaf" && number(&x)) {
      o.fabric.hosts_per_leaf = static_cast<int>(x);
    } else if (flag == "--oversubscription" && number(&x)) {
      o.fabric.oversubscription = x;
    } else if (flag == "--link-gbps" && number(&x)) {
      o.fabric.link_gbps = x;
    } else if (flag == "--latency-us" && number(&x)) {
      o.fabric.link_latency_us = x;
    } else if (flag == "--buffer-per-port" && size(&o.switches.buffer_per_port_bytes)) {
    } else if (flag == "--ecn-kmin" && size(&o.switches.ecn_kmin_bytes)) {
    } else if (flag == "--ecn-kmax" && size(&o.switches.ecn_kmax_bytes)) {
    } else if (flag == "--ecn-pmax" && number(&x)) {
      o.switches.ecn_pmax = x;
    } else if (flag == "--xoff" && size(&o.switches.pfc_xoff_bytes)) {
    } else if (flag == "--xon" && size(&o.switches.pfc_xon_bytes)) {
    } else if (flag == "--no-pfc") {
      o.switches.pfc = false;
    } else if (flag == "--rx-credits" && number(&x)) {
      o.rx_credit_chunks = static_cast<int>(x);
    } else if (flag == "--rtt-target-us" && number(&x)) {
      o.rtt_target_us = x;
    } else if (flag == "--train" && size(&o.workload.train_bytes)) {
    } else if (flag == "--jitter-us" && number(&x)) {
      o.workload.start_jitter_us = x;
    } else if (flag == "--seed" && number(&x)) {
      o.workload.seed = static_cast<uint64_t>(x);
    } else if (flag == "--max-events" && number(&x)) {
      o.max_events = x;
    } else if (flag == "--iterations" && number(&x)) {
      o.iterations = static_cast<int>(x);
      if (o.iterations < 1) return "--iterations: at least 1";
    } else {
      return fmt::format("unknown or incomplete argument '{}'", flag);
    }
  }
  for (const std::string& p : o.policies) {
    if (!policyNamed(p, o.rx_credit_chunks, o.rtt_target_us)) {
      return fmt::format("--policies: unknown policy '{}' (fixed-512K, fixed-128K, window, credits, adaptive)", p);
    }
  }
  return "";
}

void printHeader() {
  std::printf("# %6s %8s %-11s %10s %8s %8s %10s %10s %10s %8s %8s %8s %8s %9s %9s %7s %7s\n", "ranks", "size/peer",
              "policy", "time(us)", "busbw", "NIC", "FCT p50", "FCT p99", "FCT max", "pauses", "to-sw", "paused%",
              "ECN%", "maxQ(KB)", "maxBuf(KB)", "p99/fx", "wall(s)");
  std::printf("# %6s %8s %-11s %10s %8s %8s %10s %10s %10s %8s %8s %8s %8s %9s %9s %7s %7s\n", "", "", "", "", "(GB/s)",
              "(GB/s)", "(us)", "(us)", "(us)", "", "", "", "", "", "", "", "");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  const std::string error = parse(argc, argv, o);
  if (!error.empty()) return usage(error.c_str());
  const FabricSpec& f0 = o.fabric;
  std::printf(
      "# Braid congestion model: all-to-all on a %s fabric, %g GB/s ports, %g us per hop, %d GPUs per node%s\n",
      f0.kind == FabricKind::kRail ? "rail-only" : "leaf-spine", f0.link_gbps, f0.link_latency_us, f0.gpus_per_node,
      f0.kind == FabricKind::kLeafSpine
          ? fmt::format(", {} NICs per leaf, oversubscription {}:1", f0.hosts_per_leaf, f0.oversubscription).c_str()
          : "");
  std::printf(
      "# switches: %s buffer per port, ECN RED %s..%s (pmax %g), PFC %s; %d peers in flight per rank, trains of %s\n",
      human(o.switches.buffer_per_port_bytes).c_str(), human(o.switches.ecn_kmin_bytes).c_str(),
      human(o.switches.ecn_kmax_bytes).c_str(), o.switches.ecn_pmax,
      o.switches.pfc
          ? fmt::format("Xoff {} Xon {}", human(o.switches.pfc_xoff_bytes), human(o.switches.pfc_xon_bytes)).c_str()
          : "off",
      o.workload.peers_in_flight, human(o.workload.train_bytes).c_str());
  std::printf(
      "# busbw: nccl-tests all-to-all busbw (NVLink pairs assumed no slower); NIC: fabric bytes per NIC per us;\n"
      "# FCT: per flow, activation to last byte; pauses: PFC pause frames (to-sw: of them to switch ports, spreading\n"
      "# into the fabric); paused%%: link-time paused;\n"
      "# ECN%%: trains marked; p99/fx: FCT p99 / that of fixed-512K in the same case\n");
  printHeader();
  bool ok = true;
  for (int ranks : o.ranks) {
    for (uint64_t size : o.sizes) {
      FabricSpec fabric = o.fabric;
      fabric.ranks = ranks;
      Workload work = o.workload;
      work.bytes_per_peer = size;
      // Work estimate: trains x hops of the whole all-to-all (4 hops on leaf-spine, 2 on rails).
      const double per_node = fabric.gpus_per_node;
      const double trains = static_cast<double>(ranks) * (ranks - per_node) *
                            std::ceil(static_cast<double>(size) / static_cast<double>(work.train_bytes));
      const double hops = fabric.kind == FabricKind::kRail ? 2 : 4;
      if (trains * hops > o.max_events) {
        std::printf("# %6d %8s skipped: %.3g train-hops > --max-events %.3g (raise it, or --train)\n", ranks,
                    human(size).c_str(), trains * hops, o.max_events);
        continue;
      }
      double fixed_p99 = 0;
      for (const std::string& name : o.policies) {
        const Policy policy = *policyNamed(name, o.rx_credit_chunks, o.rtt_target_us);
        const auto start = std::chrono::steady_clock::now();
        std::vector<Report> runs;
        for (int it = 0; it < o.iterations && ok; ++it) {
          Workload w = work;
          w.seed = work.seed + static_cast<uint64_t>(it);
          braid::Result<Report> r = braid::congestion::simulateAllToAll(fabric, o.switches, policy, w);
          if (!r.isOk()) {
            std::fprintf(stderr, "congestion_benchmark: %d ranks, %s per peer, %s: %s\n", ranks, human(size).c_str(),
                         name.c_str(), r.status().toString().c_str());
            ok = false;
            break;
          }
          runs.push_back(std::move(*r));
        }
        if (!ok) continue;
        const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const Report* r = &runs.front();
        if (name == "fixed-512K") fixed_p99 = r->fct_p99_us;
        const std::string ratio = fixed_p99 > 0 ? fmt::format("{:.2f}", r->fct_p99_us / fixed_p99) : "-";
        std::printf(
            "  %6d %8s %-11s %10.1f %8.2f %8.2f %10.1f %10.1f %10.1f %8lld %8lld %8.2f %8.2f %9.0f %9.0f %7s %7.1f\n",
            ranks, human(size).c_str(), name.c_str(), r->time_us, r->busbw_gbps, r->nic_gbps, r->fct_p50_us,
            r->fct_p99_us, r->fct_max_us, r->pause_frames, r->pause_frames - r->pause_frames_to_nics,
            100 * r->paused_fraction, r->trains > 0 ? 100.0 * r->ecn_marks / r->trains : 0.0, r->max_queue_bytes / 1e3,
            r->max_buffer_bytes / 1e3, ratio.c_str(), wall);
        if (r->buffer_overruns > 0) {
          std::printf("#   %s: %lld train(s) found the shared buffer full (kept; a real switch would drop them)\n",
                      name.c_str(), r->buffer_overruns);
        }
        if (runs.size() > 1) {
          std::vector<double> times;
          for (const Report& x : runs) times.push_back(x.time_us);
          std::sort(times.begin(), times.end());
          auto pct = [&](double q) {
            return times[std::min(times.size() - 1, static_cast<size_t>(std::ceil(q * times.size())) - 1)];
          };
          std::printf(
              "#   %s over %zu iterations (seeds %llu..%llu): all-to-all time p50 %.1f us, p99 %.1f us, max %.1f us\n",
              name.c_str(), runs.size(), static_cast<unsigned long long>(work.seed),
              static_cast<unsigned long long>(work.seed + runs.size() - 1), pct(0.5), pct(0.99), times.back());
        }
        std::fflush(stdout);
      }
    }
  }
  return ok ? 0 : 1;
}
