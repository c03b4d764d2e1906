#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "braid/program_builder.h"

namespace braid::algos {

ProgramBuilder::ProgramBuilder(const CollectiveSpec& spec, bool refs_in_place, int scale)
    : spec_(spec), refs_in_place_(refs_in_place), scale_(std::max(scale, 1)) {
  ranks_.resize(std::max(spec.num_ranks, 0));
  for (int r = 0; r < spec.num_ranks; ++r) ranks_[r].rank = r;
}

Loc ProgramBuilder::in(int rank, int idx) const {
  if (refs_in_place_) {
    // Logical chunk idx covers real chunks [idx*f, idx*f+f): the alias of the first one, scaled back.
    const int alias = spec_.inputAliasInOutput(rank, idx * scale_);
    if (alias >= 0) return Loc{BufferKind::kOutput, alias / scale_};
  }
  return Loc{BufferKind::kInput, idx};
}

Loc ProgramBuilder::out(int rank, int idx) const {
  if (refs_in_place_) {
    const int alias = spec_.outputAliasInInput(rank, idx * scale_);
    if (alias >= 0) return Loc{BufferKind::kInput, alias / scale_};
  }
  return Loc{BufferKind::kOutput, idx};
}

int ProgramBuilder::newTb(int rank, int send_peer, int recv_peer, int channel) {
  Threadblock tb;
  tb.id = static_cast<int>(ranks_[rank].threadblocks.size());
  tb.send_peer = send_peer;
  tb.recv_peer = recv_peer;
  tb.channel = channel;
  ranks_[rank].threadblocks.push_back(std::move(tb));
  return ranks_[rank].threadblocks.back().id;
}

StepRef ProgramBuilder::last(int rank, int tb) const {
  const auto& steps = ranks_[rank].threadblocks[tb].steps;
  if (steps.empty()) return StepRef{};
  return StepRef{tb, static_cast<int>(steps.size()) - 1};
}

StepRef ProgramBuilder::emit(int rank, int tb, OpType type, Loc src, Loc dst, int count,
                             const std::vector<StepRef>& deps) {
  if (rank < 0 || rank >= numRanks() || tb < 0 || tb >= static_cast<int>(ranks_[rank].threadblocks.size())) {
    errors_.push_back(fmt::format("step on rank {} threadblock {} that does not exist", rank, tb));
    return StepRef{};
  }
  RankProgram& program = ranks_[rank];
  // Keep, per other threadblock, only the latest step waited on: steps of a threadblock run in order.
  std::map<int, int> latest;
  for (const StepRef& d : deps) {
    if (!d.valid() || d.tb == tb) continue;
    auto it = latest.find(d.tb);
    if (it == latest.end() || it->second < d.step) latest[d.tb] = d.step;
  }
  std::vector<Dependency> pending;
  for (const auto& [dtb, dstep] : latest) pending.push_back(Dependency{dtb, dstep});
  auto& steps = program.threadblocks[tb].steps;
  auto mark = [&](const Dependency& d) { program.threadblocks[d.tb].steps[d.step].has_dep = true; };
  // All dependencies but the last ride on nop steps in front of the real one (MSCCL has one depid per step).
  const bool is_nop = type == OpType::kNop;
  while (pending.size() > 1) {
    Step nop;
    nop.type = OpType::kNop;
    nop.count = 1;
    nop.deps = {pending.front()};
    mark(pending.front());
    pending.erase(pending.begin());
    steps.push_back(std::move(nop));
  }
  if (is_nop) {
    Step step;
    step.type = OpType::kNop;
    step.count = 1;
    if (!pending.empty()) {
      step.deps = pending;
      mark(pending.front());
    }
    steps.push_back(std::move(step));
    return StepRef{tb, static_cast<int>(steps.size()) - 1};
  }
  const int real_count = count * scale_;
  if (real_count < 1) {
    errors_.push_back(fmt::format("rank {} threadblock {}: {} of {} chunks", rank, tb, opTypeName(type), real_count));
    return StepRef{};
  }
  const bool uses_src = opReadsSrc(type);
  const bool uses_dst = opWritesDst(type);
  for (int done = 0; done < real_count; done += kMaxStepCount) {
    Step step;
    step.type = type;
    step.count = std::min(kMaxStepCount, real_count - done);
    if (uses_src) {
      step.src_buf = src.buf;
      step.src_off = src.off * scale_ + done;
    }
    if (uses_dst) {
      step.dst_buf = dst.buf;
      step.dst_off = dst.off * scale_ + done;
    }
    if (done == 0 && !pending.empty()) {
      step.deps = pending;
      mark(pending.front());
    }
    steps.push_back(std::move(step));
  }
  return StepRef{tb, static_cast<int>(steps.size()) - 1};
}

StepRef ProgramBuilder::send(int rank, int tb, Loc src, int count, const std::vector<StepRef>& deps) {
  return emit(rank, tb, OpType::kSend, src, Loc{}, count, deps);
}
StepRef ProgramBuilder::recv(int rank, int tb, Loc dst, int count, const std::vector<StepRef>& deps) {
  return emit(rank, tb, OpType::kRecv, Loc{}, dst, count, deps);
}
StepRef ProgramBuilder::recvCopySend(int rank, int tb, Loc dst, int count, const std::vector<StepRef>& deps) {
  return emit(rank, tb, OpType::kRecvCopySend, Loc{}, dst, count, deps);
}
StepRef ProgramBuilder::recvReduceSend(int rank, int tb, Loc src, int count, const std::vector<StepRef>& deps) {
  return emit(rank, tb, OpType::kRecvReduceSend, src, Loc{}, count, deps);
}
StepRef ProgramBuilder::recvReduceCopy(int rank, int tb, Loc src, Loc dst, int count,
                                       const std::vector<StepRef>& deps) {
  return emit(rank, tb, OpType::kRecvReduceCopy, src, dst, count, deps);
}
StepRef ProgramBuilder::recvReduceCopySend(int rank, int tb, Loc src, Loc dst, int count,
                                           const std::vector<StepRef>& deps) {
  return emit(rank, tb, OpType::kRecvReduceCopySend, src, dst, count, deps);
}
StepRef ProgramBuilder::copy(int rank, int tb, Loc src, Loc dst, int count, const std::vector<StepRef>& deps) {
  return emit(rank, tb, OpType::kCopy, src, dst, count, deps);
}
StepRef ProgramBuilder::barrier(int rank, int tb, const std::vector<StepRef>& deps) {
  return emit(rank, tb, OpType::kNop, Loc{}, Loc{}, 0, deps);
}

int ProgramBuilder::bufferSize(int rank, BufferKind buf) const {
  switch (buf) {
    case BufferKind::kInput: return spec_.inputChunks();
    case BufferKind::kOutput: return spec_.outputChunks();
    case BufferKind::kScratch: return ranks_[rank].scratch_chunks;
  }
  return 0;
}

Status ProgramBuilder::finish(Algorithm& algorithm) {
  int max_channel = 0;
  for (RankProgram& program : ranks_) {
    const int r = program.rank;
    program.input_chunks = spec_.inputChunks();
    program.output_chunks = spec_.outputChunks();
    int scratch = 0;
    std::set<std::pair<int, int>> send_keys, recv_keys;  // (channel, peer)
    for (const Threadblock& tb : program.threadblocks) {
      max_channel = std::max(max_channel, tb.channel);
      for (int peer : {tb.send_peer, tb.recv_peer}) {
        if (peer < -1 || peer >= numRanks() || peer == r) {
          errors_.push_back(fmt::format("rank {} threadblock {}: bad peer {}", r, tb.id, peer));
        }
      }
      if (tb.send_peer >= 0 && !send_keys.insert({tb.channel, tb.send_peer}).second) {
        errors_.push_back(
            fmt::format("rank {}: two threadblocks send to {} on channel {}", r, tb.send_peer, tb.channel));
      }
      if (tb.recv_peer >= 0 && !recv_keys.insert({tb.channel, tb.recv_peer}).second) {
        errors_.push_back(
            fmt::format("rank {}: two threadblocks receive from {} on channel {}", r, tb.recv_peer, tb.channel));
      }
      for (const Step& step : tb.steps) {
        if (opSends(step.type) && tb.send_peer < 0) {
          errors_.push_back(fmt::format("rank {} threadblock {}: send without a send peer", r, tb.id));
        }
        if (opReceives(step.type) && tb.recv_peer < 0) {
          errors_.push_back(fmt::format("rank {} threadblock {}: receive without a recv peer", r, tb.id));
        }
        if (step.src_off >= 0 && step.src_buf == BufferKind::kScratch)
          scratch = std::max(scratch, step.src_off + step.count);
        if (step.dst_off >= 0 && step.dst_buf == BufferKind::kScratch)
          scratch = std::max(scratch, step.dst_off + step.count);
      }
    }
    program.scratch_chunks = scratch;
    for (const Threadblock& tb : program.threadblocks) {
      for (size_t s = 0; s < tb.steps.size(); ++s) {
        const Step& step = tb.steps[s];
        auto check = [&](BufferKind buf, int off) {
          if (off < 0) return;
          if (off + step.count > bufferSize(r, buf)) {
            errors_.push_back(fmt::format("rank {} threadblock {} step {}: {}[{}..{}) outside {} chunks", r, tb.id, s,
                                          bufferName(buf), off, off + step.count, bufferSize(r, buf)));
          }
        };
        check(step.src_buf, step.src_off);
        check(step.dst_buf, step.dst_off);
      }
    }
  }
  if (!errors_.empty()) {
    std::string all;
    for (const std::string& e : errors_) all += (all.empty() ? "" : "; ") + e;
    return internalError(fmt::format("classic builder for {}: {}", spec_.toString(), all));
  }
  algorithm.num_ranks = numRanks();
  algorithm.num_channels = max_channel + 1;
  algorithm.num_chunks = spec_.chunksPerLoop();
  algorithm.ranks = std::move(ranks_);
  ranks_.clear();
  int longest = 0;
  for (const RankProgram& p : algorithm.ranks) {
    for (const Threadblock& tb : p.threadblocks) longest = std::max(longest, static_cast<int>(tb.steps.size()));
  }
  if (longest > kAzureMaxSteps) {
    algorithm.notes.push_back(
        fmt::format("the longest threadblock has {} steps, above the Azure msccl-executor-nccl default of {} "
                    "(MSCCL_MAX_NUM_STEPS); the old microsoft/msccl runtime allows 256",
                    longest, kAzureMaxSteps));
  }
  return Status::ok();
}

}  // namespace braid::algos
