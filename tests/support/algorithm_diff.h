// Test helper: the first field in which two algorithms differ, for round-trip tests.
#pragma once

#include <fmt/format.h>

#include <string>

#include "braid/algorithm.h"

namespace braid::testing {

struct DiffOptions {
  bool collective_name = true;  // a file written as "reduce_scatter" may come back as "reducescatter"
  bool notes = true;            // readers add notes for defaulted attributes
  bool provenance = true;       // MSCCL XML carries no provenance
};

/// "" when equal; otherwise names the first differing field, e.g. "rank 2 tb 1 step 3 differs".
inline std::string algorithmDifference(const Algorithm& a, const Algorithm& b, const DiffOptions& opt = {}) {
#define BRAID_CMP(expr) \
  if (!((a.expr) == (b.expr))) return #expr " differs"
  BRAID_CMP(name);
  BRAID_CMP(collective);
  BRAID_CMP(num_ranks);
  BRAID_CMP(num_chunks);
  BRAID_CMP(num_channels);
  BRAID_CMP(protocol);
  BRAID_CMP(in_place);
  BRAID_CMP(out_of_place);
  BRAID_CMP(min_bytes);
  BRAID_CMP(max_bytes);
  BRAID_CMP(root);
  BRAID_CMP(redop);
  BRAID_CMP(ranks.size());
  if (opt.collective_name) BRAID_CMP(collective_name);
  if (opt.notes) BRAID_CMP(notes);
  if (opt.provenance) {
    BRAID_CMP(provenance.generator);
    BRAID_CMP(provenance.topology);
    BRAID_CMP(provenance.sketch);
    BRAID_CMP(provenance.solver);
    BRAID_CMP(provenance.created);
    BRAID_CMP(provenance.lower_bound_us);
    BRAID_CMP(provenance.predicted_us);
    BRAID_CMP(provenance.extra);
  }
#undef BRAID_CMP
  for (size_t r = 0; r < a.ranks.size(); ++r) {
    const RankProgram& p = a.ranks[r];
    const RankProgram& q = b.ranks[r];
    if (p.rank != q.rank || p.input_chunks != q.input_chunks || p.output_chunks != q.output_chunks ||
        p.scratch_chunks != q.scratch_chunks) {
      return fmt::format("rank {} header differs", r);
    }
    if (p.precopies.size() != q.precopies.size()) return fmt::format("rank {} precopy count differs", r);
    for (size_t i = 0; i < p.precopies.size(); ++i) {
      if (p.precopies[i].input_off != q.precopies[i].input_off ||
          p.precopies[i].output_off != q.precopies[i].output_off || p.precopies[i].count != q.precopies[i].count) {
        return fmt::format("rank {} precopy {} differs", r, i);
      }
    }
    if (p.threadblocks.size() != q.threadblocks.size()) return fmt::format("rank {} threadblock count differs", r);
    for (size_t t = 0; t < p.threadblocks.size(); ++t) {
      const Threadblock& x = p.threadblocks[t];
      const Threadblock& y = q.threadblocks[t];
      if (x.id != y.id || x.send_peer != y.send_peer || x.recv_peer != y.recv_peer || x.channel != y.channel ||
          x.steps.size() != y.steps.size()) {
        return fmt::format("rank {} tb {} header differs", r, t);
      }
      for (size_t s = 0; s < x.steps.size(); ++s) {
        const Step& u = x.steps[s];
        const Step& v = y.steps[s];
        if (u.type != v.type || u.src_buf != v.src_buf || u.src_off != v.src_off || u.dst_buf != v.dst_buf ||
            u.dst_off != v.dst_off || u.count != v.count || u.deps != v.deps || u.has_dep != v.has_dep) {
          return fmt::format("rank {} tb {} step {} differs", r, t, s);
        }
      }
    }
  }
  return "";
}

}  // namespace braid::testing
