// MSCCL instances written out as a plain algorithm (replicateInstances, include/braid/algorithm.h): chunk j
// becomes chunks j*k .. j*k+k-1, threadblock t is copied k times on channels offset by nchannels, copy i
// works on chunks j*k+i. The same split and order as lowering's instances pass (runtime/plan/instances.cc).
#include <fmt/format.h>

#include <climits>
#include <utility>
#include <vector>

#include "braid/algorithm.h"

namespace braid {
namespace {

/// Step `s` of a threadblock in copy `copy` of k: one step per chunk of its range (one step when it names no
/// range or covers one chunk).
void expandStep(const Step& s, int copy, int k, int tb_offset, const std::vector<std::vector<int>>& last_index,
                std::vector<Step>* out) {
  const bool ranged = s.src_off >= 0 || s.dst_off >= 0;
  const int pieces = ranged && s.count > 1 ? s.count : 1;
  for (int m = 0; m < pieces; ++m) {
    Step e = s;
    e.count = pieces > 1 ? 1 : s.count;
    if (s.src_off >= 0) e.src_off = (s.src_off + m) * k + copy;
    if (s.dst_off >= 0) e.dst_off = (s.dst_off + m) * k + copy;
    e.deps.clear();
    e.has_dep = false;
    if (m == 0) {
      for (const Dependency& d : s.deps) e.deps.push_back(Dependency{d.tb + tb_offset, last_index[d.tb][d.step]});
    }
    if (m + 1 == pieces) e.has_dep = s.has_dep;
    out->push_back(std::move(e));
  }
}

}  // namespace

Result<Algorithm> replicateInstances(const Algorithm& algorithm, int instances) {
  if (instances < 1) {
    return invalidArgument(fmt::format("algorithm '{}': instances must be >= 1, got {}", algorithm.name, instances));
  }
  if (instances == 1) return algorithm;
  const bool in_place_only = algorithm.in_place && !algorithm.out_of_place;
  BRAID_ASSIGN_OR_RETURN(CollectiveSpec spec, algorithm.spec(in_place_only));
  BRAID_RETURN_IF_ERROR(checkAlgorithmStructure(algorithm, spec));
  const long long k = instances;
  if (static_cast<long long>(algorithm.num_channels) * k > INT_MAX / 2 ||
      static_cast<long long>(algorithm.num_chunks) * k > INT_MAX / 2 ||
      static_cast<long long>(algorithm.numThreadblocks()) * k > INT_MAX / 2) {
    return invalidArgument(fmt::format("algorithm '{}': {} instances of {} channels, {} chunks overflow an int",
                                       algorithm.name, instances, algorithm.num_channels, algorithm.num_chunks));
  }
  Algorithm out = algorithm;
  out.num_chunks = algorithm.num_chunks * instances;
  out.num_channels = algorithm.num_channels * instances;
  out.notes.push_back(fmt::format("{} MSCCL instances of '{}' written out: chunks and threadblocks x {}", instances,
                                  algorithm.name, instances));
  for (size_t r = 0; r < algorithm.ranks.size(); ++r) {
    const RankProgram& p = algorithm.ranks[r];
    RankProgram& q = out.ranks[r];
    q.input_chunks = p.input_chunks * instances;
    q.output_chunks = p.output_chunks * instances;
    q.scratch_chunks = p.scratch_chunks * instances;
    q.precopies.clear();
    for (const PreCopy& c : p.precopies) {
      q.precopies.push_back(PreCopy{c.input_off * instances, c.output_off * instances, c.count * instances});
    }
    // Where each step of a threadblock ends in its copies (the same in every copy).
    const int tbs = static_cast<int>(p.threadblocks.size());
    std::vector<std::vector<int>> last_index(p.threadblocks.size());
    for (int t = 0; t < tbs; ++t) {
      int next = 0;
      for (const Step& s : p.threadblocks[t].steps) {
        const bool ranged = s.src_off >= 0 || s.dst_off >= 0;
        next += ranged && s.count > 1 ? s.count : 1;
        last_index[t].push_back(next - 1);
      }
    }
    q.threadblocks.clear();
    q.threadblocks.reserve(static_cast<size_t>(tbs) * instances);
    for (int i = 0; i < instances; ++i) {
      for (int t = 0; t < tbs; ++t) {
        const Threadblock& tb = p.threadblocks[t];
        Threadblock copy;
        copy.id = i * tbs + t;
        copy.send_peer = tb.send_peer;
        copy.recv_peer = tb.recv_peer;
        copy.channel = tb.channel + i * algorithm.num_channels;
        for (const Step& s : tb.steps) expandStep(s, i, instances, i * tbs, last_index, &copy.steps);
        q.threadblocks.push_back(std::move(copy));
      }
    }
  }
  return out;
}

}  // namespace braid
