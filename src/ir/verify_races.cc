// The verifier's race detection (verify_internal.h, Simulator): vector clocks (Lamport happens-before:
// program order, explicit dependencies, send -> matching receive) over only the threadblocks that can
// race, FastTrack-style epochs per storage chunk (Flanagan & Freund, PLDI 2009). verify.cc's top comment
// gives the two-pass scheme.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "ir/verify_internal.h"

namespace braid::verifier {

// Races exist only between two threadblocks of one rank that touch one storage chunk, at least one
// of them writing, or that share one end of a connection. Only those threadblocks (the rank's
// candidates) get clock components: ordered by the rank's own program order and dependencies (local
// clocks, never sent), and on the second pass by whatever path through other ranks (global clocks,
// carried by messages) for the candidates the first pass could not order locally.
void Simulator::setUpRaceTracking() {
  const int n = spec_.num_ranks;
  const size_t num_gtb = gtb_rank_.size();
  track_races_ = true;
  local_index_.assign(num_gtb, -1);
  local_size_.assign(n, 0);
  hist_index_.assign(n, {});
  int64_t local_cells = 0;
  int64_t local_candidates = 0;
  std::vector<int32_t> first;                   // cell -> first threadblock that touches it
  std::vector<uint8_t> shared;                  // cell -> bit 0: touched by two threadblocks, bit 1: written
  std::vector<std::tuple<int, int, int>> ends;  // (peer, channel, tb) per connection end used
  for (int r = 0; r < n; ++r) {
    const RankProgram& program = algorithm_.ranks[r];
    const int num_tbs = static_cast<int>(program.threadblocks.size());
    first.assign(layout_[r].size, -1);
    shared.assign(layout_[r].size, 0);
    for (int t = 0; t < num_tbs; ++t) {
      for (const Step& step : program.threadblocks[t].steps) {
        forEachAccess(r, step, [&](int cell, bool writes) {
          if (first[cell] < 0) {
            first[cell] = t;
          } else if (first[cell] != t) {
            shared[cell] |= 1;
          }
          if (writes) shared[cell] |= 2;
        });
      }
    }
    std::vector<char> candidate(num_tbs, 0);
    if (std::find(shared.begin(), shared.end(), 3) != shared.end()) {
      hist_index_[r].assign(layout_[r].size, -1);
      for (int cell = 0; cell < layout_[r].size; ++cell) {
        if (shared[cell] == 3) hist_index_[r][cell] = static_cast<int32_t>(history_.size()), history_.emplace_back();
      }
      for (int t = 0; t < num_tbs; ++t) {
        for (const Step& step : program.threadblocks[t].steps) {
          forEachAccess(r, step, [&](int cell, bool) {
            if (hist_index_[r][cell] >= 0) candidate[t] = 1;
          });
        }
      }
    }
    // Threadblocks that send on one connection, then those that receive on one.
    for (bool sending : {true, false}) {
      ends.clear();
      for (int t = 0; t < num_tbs; ++t) {
        const Threadblock& tb = program.threadblocks[t];
        const bool uses = std::any_of(tb.steps.begin(), tb.steps.end(), [&](const Step& step) {
          return sending ? opSends(step.type) : opReceives(step.type);
        });
        if (uses) ends.emplace_back(sending ? tb.send_peer : tb.recv_peer, tb.channel, t);
      }
      std::sort(ends.begin(), ends.end());
      for (size_t i = 0; i + 1 < ends.size(); ++i) {
        if (std::get<0>(ends[i]) == std::get<0>(ends[i + 1]) && std::get<1>(ends[i]) == std::get<1>(ends[i + 1])) {
          candidate[std::get<2>(ends[i])] = 1;
          candidate[std::get<2>(ends[i + 1])] = 1;
        }
      }
    }
    int k = 0;
    for (int t = 0; t < num_tbs; ++t) {
      if (candidate[t]) local_index_[tb_base_[r] + t] = k++;
    }
    local_size_[r] = k;
    if (k > 0) {
      int64_t targets = 0;
      for (int64_t s = step_base_[tb_base_[r]]; s < step_base_[tb_base_[r] + num_tbs]; ++s)
        targets += snap_slot_[s] >= 0;
      local_candidates += k;
      local_cells += int64_t{k} * (num_tbs + targets);
    }
  }
  if (local_cells > kMaxClockCells) {
    disableRaceTracking(fmt::format(
        "race check not done: {} threadblocks share a chunk or a connection with another threadblock of their "
        "rank, and ordering them needs more than the verifier's limit of {} vector-clock entries; races were "
        "not looked for",
        local_candidates, kMaxClockCells));
    return;
  }
  if (global_ && !global_->empty()) {
    global_size_ = static_cast<int>(global_->size());
    const int64_t global_cells = int64_t{global_size_} * (static_cast<int64_t>(num_gtb) + target_count_ + send_count_);
    if (global_cells > kMaxClockCells) {
      disableRaceTracking(fmt::format(
          "race check not done: {} threadblocks touch chunks that another threadblock of their rank touches and "
          "are not ordered by their rank's own dependencies; ordering them through the other ranks over {} "
          "threadblocks and {} sends needs more than the verifier's limit of {} vector-clock entries; races were "
          "not looked for",
          global_size_, num_gtb, send_count_, kMaxClockCells));
      return;
    }
    global_index_.assign(num_gtb, -1);
    for (int i = 0; i < global_size_; ++i) global_index_[(*global_)[i]] = i;
    global_clocks_.assign(static_cast<size_t>(global_size_) * num_gtb, 0);
    global_snaps_.assign(static_cast<size_t>(global_size_) * target_count_, 0);
  }
  unresolved_.assign(num_gtb, 0);
  // Local clocks and snapshots, laid out one after another; empty for ranks without candidates.
  local_offset_.assign(num_gtb, 0);
  local_snap_offset_.assign(target_count_, 0);
  size_t clocks = 0;
  size_t snaps = 0;
  for (size_t g = 0; g < num_gtb; ++g) {
    const int k = local_size_[gtb_rank_[g]];
    local_offset_[g] = clocks;
    clocks += k;
    for (int64_t s = step_base_[g]; s < step_base_[g + 1]; ++s) {
      if (snap_slot_[s] >= 0) local_snap_offset_[snap_slot_[s]] = snaps, snaps += k;
    }
  }
  local_clocks_.assign(clocks, 0);
  local_snaps_.assign(snaps, 0);
}

void Simulator::disableRaceTracking(std::string message) {
  track_races_ = false;
  history_.clear();
  hist_index_.assign(spec_.num_ranks, {});
  sink_.add(IssueKind::kUnverifiable, -1, -1, -1, -1, std::move(message), mode_);
}

// Whether the access of threadblock `earlier` at `epoch` happens before the current step of
// threadblock `later` (same rank).
bool Simulator::ordered(int later, int earlier, int32_t epoch) {
  if (earlier < 0) return true;
  const int local = local_index_[earlier];
  if (local >= 0 && localClock(later)[local] >= epoch) return true;
  if (!global_index_.empty() && global_index_[earlier] >= 0) {
    return globalClock(later)[global_index_[earlier]] >= epoch;
  }
  if (!global_) unresolved_[earlier] = 1;  // first pass: decided by the second one
  return false;
}

void Simulator::reportRace(int rank, const Access& a, bool a_writes, const Access& b, bool b_writes) {
  std::pair<int, int> first{a.gtb, a.step};
  std::pair<int, int> second{b.gtb, b.step};
  if (second < first) std::swap(first, second);
  if (!reported_races_.insert({rank, first.first, first.second, second.first, second.second}).second) return;
  sink_.add(IssueKind::kRace, rank, b.tb, b.step, b.index,
            fmt::format("rank {}: tb {} step {} {} {}[{}] and tb {} step {} {} {}[{}] (the same chunk) with no "
                        "ordering between them",
                        rank, a.tb, a.step, a_writes ? "writes" : "reads", bufferName(a.buf), a.index, b.tb, b.step,
                        b_writes ? "writes" : "reads", bufferName(b.buf), b.index),
            mode_);
}

Access* Simulator::findRead(int hist, CellHistory& h, int gtb) {
  const size_t scanned = std::min(h.reads.size(), kScannedReads);
  for (size_t i = 0; i < scanned; ++i) {
    if (h.reads[i].gtb == gtb) return &h.reads[i];
  }
  if (h.reads.size() <= kScannedReads) return nullptr;
  auto it = read_slot_.find(readKey(hist, gtb));
  if (it != read_slot_.end() && it->second < h.reads.size() && h.reads[it->second].gtb == gtb) {
    return &h.reads[it->second];
  }
  return nullptr;
}

void Simulator::noteRead(int rank, int hist, const Access& access) {
  CellHistory& h = history_[hist];
  const Access& w = h.last_write;
  if (w.gtb >= 0 && w.gtb != access.gtb && !ordered(access.gtb, w.gtb, w.epoch)) {
    reportRace(rank, w, true, access, false);
  }
  if (Access* mine = findRead(hist, h, access.gtb)) {
    *mine = access;
    return;
  }
  if (h.reads.size() >= kScannedReads) read_slot_[readKey(hist, access.gtb)] = h.reads.size();
  h.reads.push_back(access);
}

void Simulator::noteWrite(int rank, int hist, const Access& access) {
  CellHistory& h = history_[hist];
  const Access& w = h.last_write;
  if (w.gtb >= 0 && w.gtb != access.gtb && !ordered(access.gtb, w.gtb, w.epoch)) {
    reportRace(rank, w, true, access, true);
  }
  for (const Access& read : h.reads) {
    if (read.gtb != access.gtb && !ordered(access.gtb, read.gtb, read.epoch)) {
      reportRace(rank, read, false, access, true);
    }
  }
  h.reads.clear();
  h.last_write = access;
}

// Connection FIFO order is only well defined when the threadblocks sharing one end are ordered.
void Simulator::noteConnectionUse(int32_t& last_gtb, int32_t& last_step, int g, int k, int rank, const char* what,
                                  int peer, int channel) {
  if (last_gtb >= 0 && last_gtb != g && !ordered(g, last_gtb, last_step + 1)) {
    sink_.add(IssueKind::kRace, rank, gtb_local_[g], k, -1,
              fmt::format("rank {}: tb {} step {} and tb {} step {} both {} rank {} on channel {} with no ordering "
                          "between them, so the FIFO order of their messages is undefined",
                          rank, gtb_local_[last_gtb], last_step, gtb_local_[g], k, what, peer, channel),
              mode_);
  }
  last_gtb = g;
  last_step = k;
}
}  // namespace braid::verifier
