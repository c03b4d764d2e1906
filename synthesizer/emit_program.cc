// One MSCCL program for a channel assignment: threadblocks per (peer, channel), fusion into rcs / rrs / rrcs,
// scratch layout, ProgramBuilder, and the algorithm's header (emit.cc's file comment).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "synthesizer/emitter.h"

namespace braid::synth::emit {

bool Emitter::chainsUneven(const std::pair<int, int>& pair, int k) const {
  const std::vector<int>& list = pair_msgs_.at(pair);
  std::vector<int> load(k, 0);
  for (int m : list) ++load[chainOf(msgs_[m]) % k];
  const int fair = (static_cast<int>(list.size()) + k - 1) / k;
  return *std::max_element(load.begin(), load.end()) > fair;
}

namespace {

// Positions where the buffer ranges of `op` stop being contiguous.
void breaksOf(const Op& op, std::set<int>* breaks) {
  for (const std::vector<SLoc>* list : {&op.src, &op.dst}) {
    for (size_t i = 1; i < list->size(); ++i) {
      if ((*list)[i].buf != (*list)[i - 1].buf || (*list)[i].idx != (*list)[i - 1].idx + 1) {
        breaks->insert(static_cast<int>(i));
      }
    }
  }
}

}  // namespace

Result<Algorithm> Emitter::build(std::vector<std::vector<TbDesc>>* tbs_out,
                                 std::set<std::pair<int, int>>* split_into_paired) {
  assignChannels();
  Draft draft = startDraft();
  for (int r = 0; r < n_; ++r) {
    draft.tbs[r] = rankThreadblocks(r, draft);
    placeOps(r, &draft);
  }
  fuse(&draft);
  BRAID_RETURN_IF_ERROR(resolveDependencies(&draft));
  layoutScratch(&draft);
  const std::vector<std::set<int>> msg_breaks = messageBreaks(draft);
  BRAID_ASSIGN_OR_RETURN(Algorithm algorithm, emitSteps(draft, msg_breaks, split_into_paired));
  *tbs_out = std::move(draft.tbs);
  return algorithm;
}

void Emitter::assignChannels() {
  for (Message& m : msgs_) {
    const Spread& sp = spread_.at({m.from, m.to});
    m.channel = sp.base + (sp.round_robin ? m.seq : chainOf(m)) % sp.channels;
  }
  if (!req_.level_channels) return;
  // Tree levels on separate channels: the depth of each (phase, chunk, rank) in its chunk's tree.
  std::map<std::tuple<int, int, int>, int> parent;
  auto addTree = [&](int phase, const LogicalTopology* lt, const Schedule* s) {
    if (!lt || !s) return;
    for (const Transfer& t : s->transfers) parent[{phase, t.chunk, lt->links[t.link].dst}] = lt->links[t.link].src;
  };
  addTree(kPhaseGather, req_.forward_logical, req_.forward);
  addTree(kPhaseReduce, req_.reverse_logical, req_.reverse);
  auto depth = [&](int phase, int chunk, int rank) {
    int d = 0;
    for (auto it = parent.find({phase, chunk, rank}); it != parent.end() && d < 64;
         it = parent.find({phase, chunk, it->second}))
      ++d;
    return d;
  };
  int max_ch = 0;
  for (const Message& m : msgs_) max_ch = std::max(max_ch, m.channel + 1);
  for (Message& m : msgs_) {
    const LogicalTopology* lt = m.phase == kPhaseGather ? req_.forward_logical : req_.reverse_logical;
    const int chunk = units_[data_[m.units[0]]].chunk;
    const int level = depth(m.phase, chunk, lt->links[m.link].src);
    m.channel = std::min(kMaxChannels - 1, m.channel + max_ch * level);
  }
}

Draft Emitter::startDraft() const {
  Draft draft;
  draft.ops = ops_;
  const int num_ops = static_cast<int>(draft.ops.size());
  draft.alias.assign(num_ops, -1);
  draft.op_tb.assign(num_ops, -1);
  draft.tbs.resize(n_);
  draft.rank_ops.resize(n_);
  for (int o = 0; o < num_ops; ++o) draft.rank_ops[draft.ops[o].rank].push_back(o);
  for (auto& list : draft.rank_ops) {
    std::sort(list.begin(), list.end(), [&](int a, int b) { return draft.ops[a].key < draft.ops[b].key; });
  }
  return draft;
}

std::vector<TbDesc> Emitter::rankThreadblocks(int r, const Draft& draft) const {
  const std::vector<Op>& ops = draft.ops;
  std::set<std::pair<int, int>> sends, recvs;       // (channel, peer)
  std::map<std::tuple<int, int, int>, int> weight;  // (channel, recv peer, send peer) -> forwarded chunks
  for (int o : draft.rank_ops[r]) {
    const Op& op = ops[o];
    if (op.send_msg >= 0) {
      const Message& sm = msgs_[op.send_msg];
      sends.insert({sm.channel, sm.to});
      for (const auto& member : op.deps) {
        for (int d : member) {
          if (ops[d].recv_msg < 0) continue;
          const Message& rm = msgs_[ops[d].recv_msg];
          if (rm.channel == sm.channel) ++weight[{sm.channel, rm.from, sm.to}];
        }
      }
    }
    if (op.recv_msg >= 0) recvs.insert({msgs_[op.recv_msg].channel, msgs_[op.recv_msg].from});
  }
  std::vector<std::pair<int, std::tuple<int, int, int>>> candidates;
  if (req_.pair_connections) {
    for (const auto& [key, w] : weight) candidates.push_back({-w, key});
  }
  std::sort(candidates.begin(), candidates.end());
  std::set<std::pair<int, int>> paired_sends, paired_recvs;
  std::vector<TbDesc> list;
  for (const auto& [neg, key] : candidates) {
    const auto [ch, q, p] = key;
    if (paired_sends.count({ch, p}) || paired_recvs.count({ch, q}) || solo_recv_.count({q, r})) continue;
    paired_sends.insert({ch, p});
    paired_recvs.insert({ch, q});
    list.push_back(TbDesc{p, q, ch});
  }
  // Above the executor's threadblocks per channel, unrelated send and receive connections share
  // threadblocks too (the same peer first, as MSCCL's all-pairs algorithms do).
  std::map<int, int> per_channel;
  std::map<int, std::vector<int>> lone_sends, lone_recvs;  // channel -> peers
  for (const auto& [ch, p] : sends) {
    ++per_channel[ch];
    if (!paired_sends.count({ch, p})) lone_sends[ch].push_back(p);
  }
  for (const auto& [ch, q] : recvs) {
    if (paired_recvs.count({ch, q})) continue;
    ++per_channel[ch];
    if (!solo_recv_.count({q, r})) lone_recvs[ch].push_back(q);
  }
  for (auto& [ch, count] : per_channel) {
    for (int same = 1; same >= 0; --same) {
      for (int p : lone_sends[ch]) {
        if (count <= kMaxTbsPerChannel) break;
        if (paired_sends.count({ch, p})) continue;
        for (int q : lone_recvs[ch]) {
          if (paired_recvs.count({ch, q}) || (same == 1 && q != p)) continue;
          paired_sends.insert({ch, p});
          paired_recvs.insert({ch, q});
          list.push_back(TbDesc{p, q, ch});
          --count;
          break;
        }
      }
    }
  }
  for (const auto& [ch, p] : sends) {
    if (!paired_sends.count({ch, p})) list.push_back(TbDesc{p, -1, ch});
  }
  for (const auto& [ch, q] : recvs) {
    if (!paired_recvs.count({ch, q})) list.push_back(TbDesc{-1, q, ch});
  }
  std::sort(list.begin(), list.end(), [](const TbDesc& a, const TbDesc& b) {
    auto peer = [](int p) { return p < 0 ? std::numeric_limits<int>::max() : p; };
    return std::tuple(a.channel, peer(a.send_peer), peer(a.recv_peer)) <
           std::tuple(b.channel, peer(b.send_peer), peer(b.recv_peer));
  });
  return list;
}

void Emitter::placeOps(int r, Draft* draft) const {
  const std::vector<Op>& ops = draft->ops;
  const std::vector<int>& rank_ops = draft->rank_ops[r];
  std::vector<TbDesc>& list = draft->tbs[r];
  std::vector<int>& op_tb = draft->op_tb;
  std::map<std::pair<int, int>, int> send_tb, recv_tb;
  for (int t = 0; t < static_cast<int>(list.size()); ++t) {
    if (list[t].send_peer >= 0) send_tb[{list[t].channel, list[t].send_peer}] = t;
    if (list[t].recv_peer >= 0) recv_tb[{list[t].channel, list[t].recv_peer}] = t;
  }
  std::vector<int> load(list.size(), 0);
  for (int o : rank_ops) {
    const Op& op = ops[o];
    if (op.send_msg >= 0) op_tb[o] = send_tb.at({msgs_[op.send_msg].channel, msgs_[op.send_msg].to});
    if (op.recv_msg >= 0) op_tb[o] = recv_tb.at({msgs_[op.recv_msg].channel, msgs_[op.recv_msg].from});
    if (op_tb[o] >= 0) ++load[op_tb[o]];
  }
  // Copies: in the threadblock of their first dependant, else the least loaded one (a local one if none).
  for (int o : rank_ops) {
    if (ops[o].type != OpType::kCopy) continue;
    int best = -1;
    for (int d : rank_ops) {
      if (op_tb[d] < 0) continue;
      bool depends = false;
      for (const auto& member : ops[d].deps) depends = depends || std::count(member.begin(), member.end(), o) > 0;
      if (depends && (best < 0 || ops[d].key < ops[best].key)) best = d;
    }
    if (best >= 0) {
      op_tb[o] = op_tb[best];
    } else if (!list.empty()) {
      op_tb[o] = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    } else {
      list.push_back(TbDesc{-1, -1, 0});
      load.push_back(0);
      op_tb[o] = 0;
    }
    ++load[op_tb[o]];
  }
}

// The fused step finishes only when its send does (which, with a bounded FIFO, waits for the receiver), so every
// other step waiting on the receive must come after the send in key order, or the order would no longer be
// well-founded (a relay forwarding a chunk to a second peer earlier than to this one keeps them apart).
void Emitter::fuse(Draft* draft) const {
  std::vector<Op>& ops = draft->ops;
  std::vector<int>& alias = draft->alias;
  const int num_ops = static_cast<int>(ops.size());
  std::vector<std::vector<int>> dependants(num_ops);
  for (int o = 0; o < num_ops; ++o) {
    for (const auto& member : ops[o].deps) {
      for (int d : member) {
        if (dependants[d].empty() || dependants[d].back() != o) dependants[d].push_back(o);
      }
    }
  }
  for (int r = 0; r < n_; ++r) {
    std::vector<int> last_in_tb(draft->tbs[r].size(), -1);
    for (int o : draft->rank_ops[r]) {
      const int t = draft->op_tb[o];
      const int a = last_in_tb[t];
      last_in_tb[t] = o;
      if (a < 0 || alias[a] >= 0) continue;
      Op& A = ops[a];
      Op& B = ops[o];
      if (B.type != OpType::kSend || (A.type != OpType::kRecv && A.type != OpType::kRecvReduceCopy)) continue;
      if (A.units.size() != B.units.size() || A.dst != B.src) continue;
      bool same_data = true;  // (all-reduce: a gather unit is the same data as its reduce unit)
      for (size_t i = 0; i < A.units.size(); ++i) same_data = same_data && data_[A.units[i]] == data_[B.units[i]];
      if (!same_data) continue;
      bool only_a = true;
      for (const auto& member : B.deps) {
        for (int d : member) only_a = only_a && draft->resolve(d) == a;
      }
      if (!only_a) continue;
      bool later = true;
      for (int d : dependants[a]) later = later && (d == o || B.key < ops[d].key);
      if (!later) continue;
      OpType fused;
      if (A.type == OpType::kRecv) {
        fused = OpType::kRecvCopySend;
      } else {
        const bool all_scratch =
            std::all_of(A.dst.begin(), A.dst.end(), [](const SLoc& l) { return l.buf == BufferKind::kScratch; });
        const bool none_scratch =
            std::none_of(A.dst.begin(), A.dst.end(), [](const SLoc& l) { return l.buf == BufferKind::kScratch; });
        if (!all_scratch && !none_scratch) continue;
        // A partial sum that only its send reads needs no storage; a finished reduction (output) does.
        fused = all_scratch ? OpType::kRecvReduceSend : OpType::kRecvReduceCopySend;
        if (all_scratch) A.dst.clear();
      }
      A.type = fused;
      A.send_msg = B.send_msg;
      alias[o] = a;
      last_in_tb[t] = a;
    }
  }
}

// Every dependency must point to a strictly earlier key (see emit.cc's file comment).
Status Emitter::resolveDependencies(Draft* draft) const {
  std::vector<Op>& ops = draft->ops;
  for (int o = 0; o < static_cast<int>(ops.size()); ++o) {
    if (draft->alias[o] >= 0) continue;
    for (auto& member : ops[o].deps) {
      std::vector<int> resolved;
      for (int d : member) {
        const int t = draft->resolve(d);
        if (t == o) continue;
        if (!(ops[t].key < ops[o].key)) {
          return internalError(fmt::format(
              "lowering {}: rank {}: a step at time {} us waits for one at {} us: the schedule is not causal",
              collectiveName(req_.collective), ops[o].rank, ops[o].key.time, ops[t].key.time));
        }
        resolved.push_back(t);
      }
      member = std::move(resolved);
    }
  }
  return Status::ok();
}

void Emitter::layoutScratch(Draft* draft) const {
  for (int r = 0; r < n_; ++r) {
    std::map<int, int> scratch_off;
    int next = 0;
    for (int o : draft->rank_ops[r]) {
      if (draft->alias[o] >= 0) continue;
      for (std::vector<SLoc>* list : {&draft->ops[o].src, &draft->ops[o].dst}) {
        for (SLoc& l : *list) {
          if (l.buf != BufferKind::kScratch) continue;
          auto it = scratch_off.find(l.idx);
          if (it == scratch_off.end()) it = scratch_off.emplace(l.idx, next++).first;
          l.idx = it->second;
        }
      }
    }
  }
}

std::vector<std::set<int>> Emitter::messageBreaks(const Draft& draft) const {
  const std::vector<Op>& ops = draft.ops;
  const int num_ops = static_cast<int>(ops.size());
  const int num_msgs = static_cast<int>(msgs_.size());
  std::vector<int> parent(num_msgs);
  std::iota(parent.begin(), parent.end(), 0);
  std::function<int(int)> find = [&](int x) { return parent[x] == x ? x : parent[x] = find(parent[x]); };
  for (int o = 0; o < num_ops; ++o) {
    if (draft.alias[o] < 0 && ops[o].recv_msg >= 0 && ops[o].send_msg >= 0) {
      parent[find(ops[o].recv_msg)] = find(ops[o].send_msg);
    }
  }
  std::vector<std::set<int>> joined(num_msgs);  // by the first message of each fused set
  for (int o = 0; o < num_ops; ++o) {
    if (draft.alias[o] >= 0) continue;
    const int m = ops[o].recv_msg >= 0 ? ops[o].recv_msg : ops[o].send_msg;
    if (m >= 0) breaksOf(ops[o], &joined[find(m)]);
  }
  std::vector<std::set<int>> msg_breaks(num_msgs);
  for (int m = 0; m < num_msgs; ++m) msg_breaks[m] = joined[find(m)];
  return msg_breaks;
}

// Per rank in key order (dependencies are always emitted first).
Result<Algorithm> Emitter::emitSteps(const Draft& draft, const std::vector<std::set<int>>& msg_breaks,
                                     std::set<std::pair<int, int>>* split_into_paired) const {
  const std::vector<Op>& ops = draft.ops;
  CollectiveSpec spec;
  spec.kind = req_.collective;
  spec.num_ranks = n_;
  spec.chunk_factor = req_.collective == CollectiveKind::kAllReduce ? n_ * c_ : c_;
  spec.root = req_.root;
  spec.in_place = false;
  ProgramBuilder builder(spec, /*refs_in_place=*/false, /*scale=*/1);
  std::vector<StepRef> done(ops.size());
  for (int r = 0; r < n_; ++r) {
    for (const TbDesc& d : draft.tbs[r]) builder.newTb(r, d.send_peer, d.recv_peer, d.channel);
    for (int o : draft.rank_ops[r]) {
      if (draft.alias[o] >= 0) continue;
      const Op& op = ops[o];
      const int size = static_cast<int>(std::max(op.src.size(), op.dst.size()));
      std::set<int> own;
      const int m = op.recv_msg >= 0 ? op.recv_msg : op.send_msg;
      if (m < 0) breaksOf(op, &own);
      const std::set<int>& breaks = m >= 0 ? msg_breaks[m] : own;
      std::vector<int> cuts(breaks.begin(), breaks.end());
      cuts.push_back(size);
      const int t = draft.op_tb[o];
      if (op.recv_msg >= 0 && draft.tbs[r][t].send_peer >= 0) {
        int steps = 0, from = 0;
        for (int end : cuts) {
          steps += (end - from + algos::kMaxStepCount - 1) / algos::kMaxStepCount;
          from = end;
        }
        if (steps > 1) split_into_paired->insert({msgs_[op.recv_msg].from, r});
      }
      int begin = 0;
      for (int end : cuts) {
        std::vector<StepRef> deps;
        for (int i = begin; i < end; ++i) {
          for (int d : op.deps[i]) {
            if (!done[d].valid()) {
              return internalError(fmt::format("lowering: rank {} step depends on one not yet emitted", r));
            }
            deps.push_back(done[d]);
          }
        }
        const Loc src = op.src.empty() ? Loc{} : Loc{op.src[begin].buf, op.src[begin].idx};
        const Loc dst = op.dst.empty() ? Loc{} : Loc{op.dst[begin].buf, op.dst[begin].idx};
        const int count = end - begin;
        switch (op.type) {
          case OpType::kSend: done[o] = builder.send(r, t, src, count, deps); break;
          case OpType::kRecv: done[o] = builder.recv(r, t, dst, count, deps); break;
          case OpType::kRecvCopySend: done[o] = builder.recvCopySend(r, t, dst, count, deps); break;
          case OpType::kRecvReduceSend: done[o] = builder.recvReduceSend(r, t, src, count, deps); break;
          case OpType::kRecvReduceCopy: done[o] = builder.recvReduceCopy(r, t, src, dst, count, deps); break;
          case OpType::kRecvReduceCopySend: done[o] = builder.recvReduceCopySend(r, t, src, dst, count, deps); break;
          case OpType::kCopy: done[o] = builder.copy(r, t, src, dst, count, deps); break;
          default: return internalError("lowering: unexpected step type");
        }
        begin = end;
      }
    }
  }
  Algorithm algorithm;
  BRAID_RETURN_IF_ERROR(builder.finish(algorithm));
  return algorithm;
}

Algorithm Emitter::finishHeader(Algorithm algorithm, const std::vector<std::string>& notes) {
  const CollectiveKind k = req_.collective;
  algorithm.name = req_.name.empty() ? fmt::format("braid-synth-{}-n{}", collectiveName(k), n_) : req_.name;
  algorithm.collective = k;
  algorithm.collective_name = collectiveName(k);
  algorithm.protocol = req_.protocol;
  // One program serves both modes: in place the owner's copy is the identity and partial sums live in
  // scratch; MSCCL runtimes reject in-place all-to-all.
  algorithm.out_of_place = true;
  algorithm.in_place = k != CollectiveKind::kAllToAll;
  algorithm.min_bytes = 0;
  algorithm.max_bytes = kUnlimitedBytes;
  algorithm.root = (k == CollectiveKind::kBroadcast || k == CollectiveKind::kReduce) ? req_.root : 0;
  const bool reduces =
      k == CollectiveKind::kReduceScatter || k == CollectiveKind::kAllReduce || k == CollectiveKind::kReduce;
  algorithm.redop = reduces ? "sum" : "";
  for (const std::string& note : notes) {
    if (!note.empty()) algorithm.notes.push_back(note);
  }
  return algorithm;
}

}  // namespace braid::synth::emit
