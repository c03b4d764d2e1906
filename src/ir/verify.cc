// The verifier: replays an algorithm symbolically and proves that it implements its collective.
//
// Execution model (MSCCL, ../shared/reference/taccl_msccl.md §2.3 and §3.2; Azure/msccl-executor-nccl
// src/device/msccl_kernel.cu): every threadblock runs its steps in order; a step starts when the
// (threadblock, step) pairs it depends on have finished; sends are buffered, receives block until the
// data is there; messages of one connection (source rank, destination rank, channel) match in FIFO
// order. Values are symbolic (collective.h): input chunk i of rank r holds {(r, i)}, every other chunk
// starts undefined, and a reduction is the multiset union of its operands, so a chunk counted twice
// is visible in the result.
//
// Structure rules mirror what Azure/msccl-executor-nccl src/misc/msccl/msccl_parser.cc
// (mscclGetAlgoFromXmlFile) rejects: threadblock ids dense from 0 with no duplicates ("thread block %d
// is missing"), peers >= -1 and different from the own rank, a channel >= 0, a step that sends needs a
// send peer and one that receives needs a recv peer, offsets bounded by the declared i/o/s chunk counts.
// That parser does NOT reject two threadblocks of one rank that share a (send peer, channel) or
// (recv peer, channel) connection, and real msccl-tools output does so (realcases
// msccl/msccltools_allreduce_ndv2_ar1.xml, rank 3 tbs 6 and 8). Braid accepts it too, but requires the
// accesses of those threadblocks to one connection to be ordered by happens-before; otherwise the
// FIFO order is a race and is reported as one. Braid is stricter than the parser in four places, each
// a real runtime failure: nchannels must be at most MAXCHANNELS (32, kMaxAlgorithmChannels: the executor
// requires nchannels <= the communicator's channels), channels must be < nchannels (the runtime only
// connects that many), counts must be >= 1 except on nop, and offset + count (not just the offset) must
// fit in the buffer.
//
// Races are found with vector clocks (Lamport happens-before: program order within a threadblock,
// explicit dependencies, and send -> matching receive, transitively); two accesses to one storage chunk
// of a rank, at least one a write, from different threadblocks, race when neither clock dominates the
// other (FastTrack-style epochs: Flanagan & Freund, PLDI 2009). As in FastTrack, every chunk that has a
// race gets at least one report (the first conflicting pair found); a pair hidden behind a later ordered
// write to the same chunk is not reported separately.
//
// Only the clock components that a check can read are kept, which is what makes 1000-rank rings,
// recursive doubling and pairwise all-to-all cheap. A check compares an access with an earlier one by
// another threadblock of the same rank on a chunk both touch, one of them writing (or on a connection
// end both use), so only those threadblocks, the rank's candidates, need components. The replay runs
// first with rank-local clocks over the rank's candidates, propagated along program order and
// dependencies only (a subset of happens-before, so "ordered" there is final). If some check was not
// ordered that way, the replay runs again with global clocks over just the threadblocks those checks
// named, carried by every threadblock and message as well; the checked pairs are the same both times
// (the schedule does not depend on clocks), so both passes together decide every check exactly as full
// vector clocks over all threadblocks would. Values are ids in a DAG of reductions (see ValueArena), so
// a step costs O(count) however many elements its chunks hold.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "braid/algorithm.h"
#include "ir/verify_internal.h"

namespace braid {

namespace {

using verifier::IssueSink;
using verifier::kMaxChunkMoves;
using verifier::Simulator;

const char* modeName(bool in_place) { return in_place ? verifier::kModeInPlace : verifier::kModeOutOfPlace; }

// Static checks, then the replay; returns false when a problem makes checking another mode pointless.
bool verifyInto(const Algorithm& algorithm, const CollectiveSpec& spec, IssueSink& sink, bool run_static) {
  if (run_static) {
    const bool structure_ok = verifier::checkStructure(algorithm, spec, sink);
    // The storage limit needs one program per rank; it is reported beside the other structural findings.
    const bool storage_ok = static_cast<int64_t>(algorithm.ranks.size()) != spec.num_ranks ||
                            verifier::checkStorageLimit(algorithm, spec, sink);
    if (!structure_ok || !storage_ok) return false;
    if (!verifier::checkRanges(algorithm, sink)) return false;
  }
  int64_t moves = 0;
  for (const RankProgram& program : algorithm.ranks) {
    for (const Threadblock& tb : program.threadblocks) {
      for (const Step& step : tb.steps) moves += step.type == OpType::kNop ? 1 : step.count;
    }
  }
  if (moves > kMaxChunkMoves) {
    sink.add(IssueKind::kUnverifiable, -1, -1, -1, -1,
             fmt::format("not replayed: the steps move {} chunks in all, more than the verifier's limit of {}", moves,
                         kMaxChunkMoves),
             modeName(spec.in_place));
    return false;
  }
  // First pass: conflicts decided by each rank's own dependency chains. Only when some were not (they
  // may still be ordered through other ranks, or race) is the replay repeated with global clocks for
  // the threadblocks involved; the first pass's findings are then dropped.
  IssueSink first_sink(sink.maxIssues());
  std::vector<int> unresolved;
  {
    Simulator first(algorithm, spec, first_sink, modeName(spec.in_place), nullptr);
    first.run();
    unresolved = first.unresolved();
  }
  if (unresolved.empty()) {
    sink.absorb(first_sink);
  } else {
    Simulator(algorithm, spec, sink, modeName(spec.in_place), &unresolved).run();
  }
  return true;
}

VerifyReport finish(IssueSink& sink, std::vector<std::string> modes) {
  VerifyReport report;
  report.modes_checked = std::move(modes);
  report.total_issues = sink.total();
  report.issues = std::move(sink.issues());
  report.ok = report.total_issues == 0;
  return report;
}

}  // namespace

VerifyReport verify(const Algorithm& algorithm, const CollectiveSpec& spec) {
  IssueSink sink(VerifyOptions{}.max_issues);
  const Status valid = validateSpec(spec);
  if (!valid.isOk()) {
    sink.add(IssueKind::kStructure, -1, -1, -1, -1, fmt::format("invalid spec: {}", valid.message()), "");
    return finish(sink, {});
  }
  verifyInto(algorithm, spec, sink, /*run_static=*/true);
  return finish(sink, {modeName(spec.in_place)});
}

VerifyReport verify(const Algorithm& algorithm, const VerifyOptions& options) {
  IssueSink sink(options.max_issues);
  if (algorithm.collective == CollectiveKind::kCustom) {
    sink.add(IssueKind::kUnverifiable, -1, -1, -1, -1,
             fmt::format("algorithm '{}' implements collective '{}', which has no postcondition; nothing was proved",
                         algorithm.name, algorithm.collective_name.empty() ? "custom" : algorithm.collective_name),
             "");
    return finish(sink, {});
  }
  std::vector<bool> modes;
  if (algorithm.out_of_place) modes.push_back(false);
  if (algorithm.in_place) modes.push_back(true);
  if (modes.empty()) {
    sink.add(IssueKind::kStructure, -1, -1, -1, -1,
             fmt::format("algorithm '{}' declares neither in-place nor out-of-place use", algorithm.name), "");
    return finish(sink, {});
  }
  if (!options.all_modes) modes.resize(1);
  std::vector<std::string> checked;
  bool static_done = false;
  for (bool in_place : modes) {
    Result<CollectiveSpec> spec = algorithm.spec(in_place);
    if (!spec.isOk()) {
      sink.add(IssueKind::kStructure, -1, -1, -1, -1, spec.status().message(), "");
      break;  // the same failure would repeat in the other mode
    }
    checked.push_back(modeName(in_place));
    if (!verifyInto(algorithm, *spec, sink, /*run_static=*/!static_done)) break;
    static_done = true;
  }
  return finish(sink, checked);
}

}  // namespace braid
