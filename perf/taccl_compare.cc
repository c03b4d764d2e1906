// TACCL comparison: TACCL's own synthesized algorithms (../shared/realcases/taccl/outputs_xml, RC-47 and
// RC-48: `taccl ncclize` outputs from mcrl/TACCL-experiment-codebase and A-Dying-Pig/taccl) against Braid's
// synthesized algorithm for the same collective on the same topology, both simulated in Braid's simulator
// (include/braid/simulate.h, SimModel::defaults()) at the same nccl-tests sizes. Prints a verify() line per TACCL
// file and one table row per (TACCL file, size); exits 1 when Braid is slower than TACCL anywhere or something
// fails. docs/synthesis.md "Comparison with TACCL's outputs" explains the choices below.
//
// The topology each TACCL file ran on (loadTacclTopology with TACCL's sketch for the run):
//   mcrl_A_*.A.n1.gpu2 / .n2.gpu2  tests/data/taccl/akmu-A-GPU2-1MB.json (the 2-GPU cut of machine A's profile)
//                                  with 1 or 2 nodes, inter-node fully connected: the TACCL files send between all
//                                  12 ordered pairs of the 4 ranks directly, i.e. they were synthesized with
//                                  internode_conn "fully-connected" (the mcrl sketches' form, RC-43);
//   mcrl_A_allreduce.A.n1.gpu4     the A-GPU4 profile, 1 node;
//   mi300x_alltoall_n24_*          adp_topo-mi300x.json with the sketch adp_mi300x-n3.json (3 nodes);
//   mi300x-dumb_alltoall_n8_*      adp_topo-mi300x_dumb.json with adp_mi300x-dumb-n2.json (2 nodes).
// Left out: mcrl_D_allreduce.D.n2.gpu4 (2 nodes x 4 GPUs of machine D, whose only profile has 1 GPU per node: no
// measured intra-node numbers for it). The broadcast file has neither `coll` nor `inplace`, which readMscclXml
// requires (RC-47); it is read from an in-memory copy with coll="broadcast" inplace="0" added (the root is rank 0,
// the only rank that sends; its <copy> elements copy its input into its output, which out of place needs).
//
// Braid's side: synthesize() (include/braid/synthesize.h) with two sketches — Braid's own derived sketch
// (deriveSketch) and TACCL's sketch for the run (sketchFromTaccl of the sketch above) — each with input chunkup 1,
// 2 and 3, costed at the row's size; the fastest of the six in the simulator is Braid's time (sketch and chunkup
// are synthesis inputs, like TACCL's sketch and input_chunkup). Both sketches' best times are printed. Both
// algorithms run with their own protocol (all Simple here) in the TACCL file's mode (in place for the mcrl files,
// out of place for the others).
//
// Sizes: requested sizes are rounded down to the nearest nccl-tests size whose buffer holds a whole number of the
// TACCL file's chunks (nchunksperloop x 4-byte elements), so TACCL's program runs with equal chunks; Braid's
// algorithm runs at exactly the same size (the simulator handles its chunks being uneven there).
//
// Usage: taccl_compare [--sizes 1K,64K,1M,16M,256M] [--time-limit S] [--shared DIR]
//                      [--sketches derived,taccl,all-pairs] [--instances 1,3]
// (--sketches / --instances restrict Braid's choices, to see what each contributes.)
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "braid/algorithm.h"
#include "braid/file_io.h"
#include "braid/simulate.h"
#include "braid/sketch.h"
#include "braid/synthesize.h"
#include "braid/taccl.h"
#include "braid/topology.h"
#include "comm/pareto/compare.h"

namespace {

namespace fs = std::filesystem;
using braid::Algorithm;
using braid::CollectiveKind;
using braid::Result;
using braid::Topology;

constexpr uint64_t kElementBytes = 4;  // float, as nccl-tests runs by default

/// One TACCL output file and the machine it ran on.
struct Case {
  std::string xml;           // file in taccl/outputs_xml
  std::string profile;       // TACCL profile: "src:<path>" in the source tree, else a path under the shared dir
  int nodes = 1;             // without `sketch`: this many nodes, inter-node fully connected
  std::string sketch;        // TACCL sketch in taccl/sketch the run used, if the corpus has it
  std::string add_attrs;     // attributes the file lacks, added to <algo> of an in-memory copy
  std::string left_out;      // non-empty: not compared, and why
  std::string topology_tag;  // short topology description for the table
};

std::vector<Case> cases() {
  const std::string a2 = "src:tests/data/taccl/akmu-A-GPU2-1MB.json";
  const std::string a4 = "realcases/taccl/topo/mcrl_akmu-A-GPU4-P2P-1-GDRLEVEL-SYS-GDRREAD-1-1MB.json";
  const std::string mi = "realcases/taccl/topo/adp_topo-mi300x.json";
  const std::string dumb = "realcases/taccl/topo/adp_topo-mi300x_dumb.json";
  const std::string no_d = "machine D's only profile (mcrl_akmu-D-GPU1) has 1 GPU per node: no intra-node numbers";
  return {
      {"mcrl_A_allgather.A.n1.gpu2.i3.xml", a2, 1, "", "", "", "akmu-A 1x2"},
      {"mcrl_A_allgather.A.n2.gpu2.i3.xml", a2, 2, "", "", "", "akmu-A 2x2"},
      {"mcrl_A_allreduce.A.n1.gpu4.i3.xml", a4, 1, "", "", "", "akmu-A 1x4"},
      {"mcrl_A_allreduce.A.n2.gpu2.i3.xml", a2, 2, "", "", "", "akmu-A 2x2"},
      {"mcrl_A_broadcast.A.n2.gpu2.i3.xml", a2, 2, "", "coll=\"broadcast\" inplace=\"0\"", "", "akmu-A 2x2"},
      {"mcrl_A_reducescatter.A.n2.gpu2.i3.xml", a2, 2, "", "", "", "akmu-A 2x2"},
      {"mcrl_D_allreduce.D.n2.gpu4.i3.xml", "", 2, "", "", no_d, "akmu-D 2x4"},
      {"mi300x-dumb_alltoall_n8_original.xml", dumb, 2, "adp_mi300x-dumb-n2.json", "", "", "MI300X-dumb 2x4"},
      {"mi300x_alltoall_n24_original.xml", mi, 3, "adp_mi300x-n3.json", "", "", "MI300X 3x8"},
      {"mi300x_alltoall_n24_withcopy.xml", mi, 3, "adp_mi300x-n3.json", "", "", "MI300X 3x8"},
  };
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::string resolve(const std::string& path, const fs::path& shared) {
  if (path.rfind("src:", 0) == 0) return (fs::path(BRAID_SOURCE_DIR) / path.substr(4)).string();
  return (shared / path).string();
}

/// TACCL sketch of `nodes` copies of a profile's node, inter-node fully connected, no symmetry, chunkup 1.
braid::TacclSketch fullyConnected(int nodes) {
  braid::TacclSketch s;
  s.source = fmt::format("fully-connected-n{}", nodes);
  s.nnodes = nodes;
  s.has_internode = nodes > 1;
  s.internode_strategy = "relay";
  s.internode_conn_kind = "fully-connected";
  return s;
}

/// TACCL's algorithm: the file as is, or a copy with `add_attrs` added to <algo>.
Result<Algorithm> loadTaccl(const std::string& path, const std::string& add_attrs, std::string* note) {
  if (add_attrs.empty()) return braid::loadMscclXml(path);
  BRAID_ASSIGN_OR_RETURN(std::string text, braid::readFile(path));
  const size_t at = text.find("<algo ");
  if (at == std::string::npos) return braid::invalidArgument(fmt::format("{}: no <algo> element", path));
  text.insert(at + 6, add_attrs + " ");
  *note = fmt::format("read with {} added to <algo>", add_attrs);
  return braid::readMscclXml(text, path);
}

/// The largest multiple of chunks x kElementBytes that is <= requested (0 if none): every chunk of an algorithm
/// with `chunks` chunks per buffer then holds whole elements.
uint64_t usableSize(uint64_t requested, int chunks) {
  const uint64_t unit = static_cast<uint64_t>(chunks) * kElementBytes;
  return requested / unit * unit;
}

std::string issueSummary(const braid::VerifyReport& report) {
  if (report.ok) return "verified (" + fmt::format("{}", fmt::join(report.modes_checked, ", ")) + ")";
  std::map<std::string, int> kinds;
  for (const braid::VerifyIssue& issue : report.issues) ++kinds[braid::issueKindName(issue.kind)];
  std::string out = fmt::format("fails: {} issue(s):", report.total_issues);
  for (const auto& [kind, count] : kinds) out += fmt::format(" {} {}", count, kind);
  return out;
}

std::string sizeText(uint64_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return fmt::format("{}M", bytes >> 20);
  if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) return fmt::format("{}K", bytes >> 10);
  return fmt::format("{}", bytes);
}

/// Braid's fastest algorithm for one sketch at one size.
struct Best {
  double us = -1;  // simulated time, -1 = none synthesized
  int chunkup = 0;
  int instances = 0;
  std::string mode;  // the mode it ran in: "in" or "out" (of place)
  std::string text() const {
    return us < 0 ? std::string("-") : fmt::format("{:.2f} (c{} i{})", us, chunkup, instances);
  }
};

constexpr int kNumSketches = 3;
const char* const kSketchLabels[kNumSketches] = {"derived", "TACCL's", "all-pairs"};

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> size_texts = {"1K", "64K", "1M", "16M", "256M"};
  double time_limit = 10;
  fs::path shared = BRAID_SHARED_DIR;
  bool use_sketch[kNumSketches] = {true, true, true};
  std::vector<int> instance_counts = {1, 3};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "taccl_compare: " << arg << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--sizes") {
      size_texts = split(value());
    } else if (arg == "--time-limit") {
      time_limit = std::stod(value());
    } else if (arg == "--shared") {
      shared = value();
    } else if (arg == "--sketches") {
      for (bool& u : use_sketch) u = false;
      for (const std::string& name : split(value())) {
        const int k = name == "derived" ? 0 : name == "taccl" ? 1 : name == "all-pairs" ? 2 : -1;
        if (k < 0) {
          std::cerr << "taccl_compare: --sketches: unknown sketch " << name << " (derived, taccl, all-pairs)\n";
          return 2;
        }
        use_sketch[k] = true;
      }
    } else if (arg == "--instances") {
      instance_counts.clear();
      for (const std::string& text : split(value())) {
        const int v = std::atoi(text.c_str());
        if (v < 1 || v > 32) {
          std::cerr << "taccl_compare: --instances: " << text << " is not 1..32\n";
          return 2;
        }
        instance_counts.push_back(v);
      }
    } else {
      std::cerr << "usage: taccl_compare [--sizes 1K,64K,1M,16M,256M] [--time-limit S] [--shared DIR] "
                   "[--sketches derived,taccl,all-pairs] [--instances 1,3]\n";
      return 2;
    }
  }
  std::vector<uint64_t> sizes;
  for (const std::string& s : size_texts) {
    std::optional<uint64_t> v = braid::parseNcclTestsSize(s);
    if (!v || *v == 0) {
      std::cerr << "taccl_compare: bad size " << s << "\n";
      return 2;
    }
    sizes.push_back(*v);
  }
  const fs::path taccl_dir = shared / "realcases" / "taccl";
  if (!fs::is_directory(taccl_dir / "outputs_xml")) {
    std::cerr << "taccl_compare: " << (taccl_dir / "outputs_xml").string() << " not found (--shared DIR)\n";
    return 2;
  }

  int slower = 0, slower_than_invalid = 0, errors = 0;
  std::vector<std::string> file_lines, rows, notes;
  auto fail = [&](const std::string& what) {
    fmt::print(stderr, "taccl_compare: {}\n", what);
    notes.push_back("error: " + what);
    ++errors;
  };
  for (const Case& c : cases()) {
    if (!c.left_out.empty()) {
      file_lines.push_back(fmt::format("| {} | {} | - | left out: {} |", c.xml, c.topology_tag, c.left_out));
      continue;
    }
    std::string load_note;
    Result<Algorithm> taccl = loadTaccl((taccl_dir / "outputs_xml" / c.xml).string(), c.add_attrs, &load_note);
    if (!taccl) {
      file_lines.push_back(
          fmt::format("| {} | {} | - | does not load: {} |", c.xml, c.topology_tag, taccl.status().message()));
      ++errors;
      continue;
    }
    const braid::VerifyReport report = braid::verify(*taccl);
    file_lines.push_back(fmt::format("| {} | {} | {} | {}{} |", c.xml, c.topology_tag,
                                     braid::collectiveName(taccl->collective), issueSummary(report),
                                     load_note.empty() ? "" : "; " + load_note));

    // The topology, from TACCL's sketch for the run.
    braid::TacclSketch taccl_sketch;
    if (!c.sketch.empty()) {
      Result<braid::TacclSketch> ts = braid::loadTacclSketch((taccl_dir / "sketch" / c.sketch).string());
      if (!ts) {
        fail(fmt::format("{}: {}", c.xml, ts.status().message()));
        continue;
      }
      taccl_sketch = *ts;
    } else {
      taccl_sketch = fullyConnected(c.nodes);
    }
    Result<Topology> topology = braid::loadTacclTopology(resolve(c.profile, shared), taccl_sketch);
    if (!topology) {
      fail(fmt::format("{}: topology: {}", c.xml, topology.status().message()));
      continue;
    }
    if (topology->numGpus() != taccl->num_ranks) {
      fail(fmt::format("{}: {} ranks but the topology has {} GPUs", c.xml, taccl->num_ranks, topology->numGpus()));
      continue;
    }
    const CollectiveKind coll = taccl->collective;
    const bool in_place = !taccl->out_of_place;  // the TACCL file's mode (mcrl: in place only)

    // Braid's sketches: its own derived sketch; TACCL's sketch file for the run where the corpus has it; the
    // all-pairs sketch (TACCL's, or the fully connected one, with every GPU sending to every GPU of the other
    // nodes and relaying any chunk of its node: the connections TACCL's outputs use).
    std::optional<braid::Sketch> sketches[kNumSketches];
    Result<braid::Sketch> derived = braid::deriveSketch(*topology, coll);
    if (!derived) {
      fail(fmt::format("{}: derive sketch: {}", c.xml, derived.status().message()));
      continue;
    }
    sketches[0] = *derived;
    if (!c.sketch.empty()) sketches[1] = braid::sketchFromTaccl(taccl_sketch);
    sketches[2] = braid::sketchFromTaccl(taccl_sketch);
    sketches[2]->name = "all-pairs";
    sketches[2]->internode_conn = braid::InterConn::kFullyConnected;
    sketches[2]->internode_map.clear();
    sketches[2]->relay_for.clear();
    sketches[2]->enforce_ordering = false;

    for (uint64_t requested : sizes) {
      const uint64_t size = usableSize(requested, taccl->num_chunks);
      if (size == 0) {
        notes.push_back(
            fmt::format("{}: {} holds fewer than {} elements; skipped", c.xml, sizeText(requested), taccl->num_chunks));
        continue;
      }
      braid::SimOptions sim;
      sim.size_bytes = size;
      sim.in_place = in_place;
      Result<braid::SimResult> taccl_run = braid::simulate(*taccl, *topology, sim);
      if (!taccl_run) {
        fail(fmt::format("{} at {} bytes: simulating TACCL's: {}", c.xml, size, taccl_run.status().message()));
        continue;
      }

      // Braid: each sketch with chunkup 1, 2, 3, costed at this size, run with 1 and 3 instances; per sketch the
      // fastest in the simulator.
      Best best[kNumSketches];
      for (int k = 0; k < kNumSketches; ++k) {
        if (!sketches[k] || !use_sketch[k]) continue;
        for (int chunkup : {1, 2, 3}) {
          braid::SynthesisRequest req;
          req.topology = &*topology;
          req.sketch = *sketches[k];
          req.sketch.chunkup = chunkup;
          req.has_sketch = true;
          req.collective = coll;
          req.root = taccl->root;
          req.size_bytes = size;
          req.time_limit_s = time_limit;
          Result<braid::SynthesisResult> result = braid::synthesize(req);
          if (!result) {
            fail(fmt::format("{} at {} bytes, {} sketch, chunkup {}: synthesis: {}", c.xml, size, kSketchLabels[k],
                             chunkup, result.status().message()));
            continue;
          }
          for (int instances : instance_counts) {
            braid::SimOptions braid_sim = sim;
            braid_sim.instances = instances;
            Result<braid::SimResult> run = braid::simulate(result->algorithm, *topology, braid_sim);
            if (!run) {
              fail(fmt::format("{} at {} bytes, {} sketch, chunkup {}, {} instance(s): simulating Braid's: {}", c.xml,
                               size, kSketchLabels[k], chunkup, instances, run.status().message()));
              continue;
            }
            if (best[k].us < 0 || run->time_us < best[k].us) {
              const Algorithm& a = result->algorithm;
              best[k] =
                  Best{run->time_us, chunkup, instances, (in_place && a.in_place) || !a.out_of_place ? "in" : "out"};
            }
          }
        }
      }
      const Best* winner = nullptr;
      for (const Best& b : best) {
        if (b.us >= 0 && (!winner || b.us < winner->us)) winner = &b;
      }
      if (!winner) continue;
      const double speedup = taccl_run->time_us / winner->us;
      std::string verdict;
      if (speedup < 1) {
        ++(report.ok ? slower : slower_than_invalid);
        verdict = fmt::format(" {} by {:.4f} us{}", report.ok ? "**slower**" : "slower",
                              winner->us - taccl_run->time_us, report.ok ? "" : " (TACCL's file fails verify())");
      }
      rows.push_back(fmt::format("| {} | {} | {} | {} ({}) | {} / {} | {:.2f} | {} | {} | {} | {:.3f}x{} |", c.xml,
                                 c.topology_tag, braid::collectiveName(coll), sizeText(requested), size,
                                 in_place ? "in" : "out", winner->mode, taccl_run->time_us, best[0].text(),
                                 best[1].text(), best[2].text(), speedup, verdict));
    }
  }

  fmt::print(
      "# TACCL's outputs (realcases/taccl/outputs_xml) vs Braid's synthesized algorithm on the same topology, both "
      "simulated in Braid's simulator (default model); times in us\n\n");
  fmt::print("| TACCL file | topology | collective | verify() of the TACCL file |\n|---|---|---|---|\n");
  for (const std::string& line : file_lines) fmt::print("{}\n", line);
  fmt::print(
      "\n| TACCL file | topology | collective | size (bytes run) | in/out of place TACCL / Braid | TACCL | Braid, "
      "derived sketch | Braid, TACCL's sketch | Braid, all-pairs sketch | speedup |\n"
      "|---|---|---|---|---|---|---|---|---|---|\n");
  for (const std::string& row : rows) fmt::print("{}\n", row);
  for (const std::string& note : notes) fmt::print("\n# note: {}", note);
  fmt::print(
      "\n# Braid columns: the fastest over chunkup c = 1, 2, 3 and i = {} instance(s); speedup = TACCL / the fastest "
      "Braid column\n",
      fmt::join(instance_counts, ", "));
  fmt::print(
      "# {} row(s) where Braid is slower than a TACCL algorithm that verifies, {} where it is slower than one that "
      "does not, {} error(s)\n",
      slower, slower_than_invalid, errors);
  return slower == 0 && errors == 0 ? 0 : 1;
}
