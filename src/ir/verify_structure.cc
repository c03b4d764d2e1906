// The verifier's static checks (verify_internal.h) and checkAlgorithmStructure() (include/braid/algorithm.h):
// what every consumer of an algorithm needs before it indexes anything. The rules, and where they follow
// MSCCL's parser, are in verify.cc's top comment.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "ir/verify_internal.h"

namespace braid {
namespace verifier {
namespace {

std::string bufferLongName(BufferKind b) {
  switch (b) {
    case BufferKind::kInput: return "input buffer (i_chunks";
    case BufferKind::kOutput: return "output buffer (o_chunks";
    case BufferKind::kScratch: return "scratch buffer (s_chunks";
  }
  return "?";
}

int declaredChunks(const RankProgram& program, BufferKind b) {
  switch (b) {
    case BufferKind::kInput: return program.input_chunks;
    case BufferKind::kOutput: return program.output_chunks;
    case BufferKind::kScratch: return program.scratch_chunks;
  }
  return 0;
}

}  // namespace

bool checkStructure(const Algorithm& algorithm, const CollectiveSpec& spec, IssueSink& sink) {
  const int before = sink.total();
  auto structure = [&](int rank, int tb, int step, std::string message) {
    sink.add(IssueKind::kStructure, rank, tb, step, -1, std::move(message), "");
  };
  const int n = spec.num_ranks;
  if (algorithm.num_ranks != n) {
    structure(-1, -1, -1, fmt::format("algorithm has ngpus={} but the spec has {} ranks", algorithm.num_ranks, n));
  }
  if (static_cast<int64_t>(algorithm.ranks.size()) != n) {
    structure(-1, -1, -1, fmt::format("algorithm lists {} rank programs but has {} ranks", algorithm.ranks.size(), n));
    return false;
  }
  if (algorithm.num_channels < 1 || algorithm.num_channels > kMaxAlgorithmChannels) {
    structure(-1, -1, -1, channelRangeMessage(algorithm.num_channels));
  }
  for (int r = 0; r < n; ++r) {
    const RankProgram& program = algorithm.ranks[r];
    if (program.rank != r) structure(r, -1, -1, fmt::format("ranks[{}] is labelled rank {}", r, program.rank));
    if (program.input_chunks != 0 && program.input_chunks != spec.inputChunks()) {
      structure(r, -1, -1,
                fmt::format("rank {}: i_chunks={} but {} has {} input chunks per rank (0 is accepted when the "
                            "input buffer is never used)",
                            r, program.input_chunks, spec.toString(), spec.inputChunks()));
    }
    if (program.output_chunks != 0 && program.output_chunks != spec.outputChunks()) {
      structure(r, -1, -1,
                fmt::format("rank {}: o_chunks={} but {} has {} output chunks per rank (0 is accepted when the "
                            "output buffer is never used)",
                            r, program.output_chunks, spec.toString(), spec.outputChunks()));
    }
    if (program.scratch_chunks < 0) {
      structure(r, -1, -1, fmt::format("rank {}: s_chunks must be >= 0, got {}", r, program.scratch_chunks));
    }
    for (size_t p = 0; p < program.precopies.size(); ++p) {
      if (program.precopies[p].count < 1) {
        structure(r, -1, -1,
                  fmt::format("rank {} copy {}: count must be >= 1, got {}", r, p, program.precopies[p].count));
      }
    }
    const int num_tbs = static_cast<int>(program.threadblocks.size());
    for (int t = 0; t < num_tbs; ++t) {
      const Threadblock& tb = program.threadblocks[t];
      if (tb.id != t) {
        structure(r, t, -1,
                  fmt::format("rank {}: threadblock at position {} has id {}; ids must be 0..{} in order with no "
                              "gaps or duplicates",
                              r, t, tb.id, num_tbs - 1));
      }
      for (auto [peer, what] : {std::pair<int, const char*>{tb.send_peer, "send"}, {tb.recv_peer, "recv"}}) {
        if (peer < -1 || peer >= n) {
          structure(r, t, -1, fmt::format("rank {} tb {}: {} peer {} is outside [-1, {})", r, t, what, peer, n));
        } else if (peer == r) {
          structure(r, t, -1, fmt::format("rank {} tb {}: {} peer is the rank itself", r, t, what));
        }
      }
      if (tb.channel < 0 || (algorithm.num_channels >= 1 && tb.channel >= algorithm.num_channels)) {
        structure(r, t, -1,
                  fmt::format("rank {} tb {}: channel {} is outside [0, nchannels={})", r, t, tb.channel,
                              algorithm.num_channels));
      }
      const int num_steps = static_cast<int>(tb.steps.size());
      for (int s = 0; s < num_steps; ++s) {
        const Step& step = tb.steps[s];
        auto where = [&] { return stepWhere(r, t, s, step.type); };  // formatted only on a finding
        if (step.type == OpType::kNop ? step.count < 0 : step.count < 1) {
          structure(r, t, s, fmt::format("{}: count must be >= 1, got {}", where(), step.count));
        }
        if (opSends(step.type) && tb.send_peer < 0) {
          structure(r, t, s, fmt::format("{}: sends but the threadblock has no send peer", where()));
        }
        if (opReceives(step.type) && tb.recv_peer < 0) {
          structure(r, t, s, fmt::format("{}: receives but the threadblock has no recv peer", where()));
        }
        for (const Dependency& dep : step.deps) {
          if (dep.tb < 0 || dep.tb >= num_tbs) {
            structure(r, t, s,
                      fmt::format("{}: depends on tb {}, which does not exist on rank {}", where(), dep.tb, r));
          } else if (dep.step < 0 || dep.step >= static_cast<int>(program.threadblocks[dep.tb].steps.size())) {
            structure(r, t, s,
                      fmt::format("{}: depends on tb {} step {}, which does not exist (tb {} has {} steps)", where(),
                                  dep.tb, dep.step, dep.tb, program.threadblocks[dep.tb].steps.size()));
          } else if (dep.tb == t && dep.step >= s) {
            structure(r, t, s,
                      fmt::format("{}: depends on step {} of its own threadblock, which runs after it (deadlock)",
                                  where(), dep.step));
          }
        }
      }
    }
  }
  return sink.total() == before;
}

bool checkStorageLimit(const Algorithm& algorithm, const CollectiveSpec& spec, IssueSink& sink) {
  int64_t cells = 0;
  for (const RankProgram& program : algorithm.ranks) {
    cells += int64_t{spec.inputChunks()} + spec.outputChunks() + std::max(0, program.scratch_chunks);
  }
  if (cells <= kMaxStorageCells) return true;
  sink.add(IssueKind::kStructure, -1, -1, -1, -1,
           fmt::format("buffers total {} chunks over all ranks, more than the verifier's limit of {}", cells,
                       kMaxStorageCells),
           "");
  return false;
}

bool checkRanges(const Algorithm& algorithm, IssueSink& sink) {
  const int before = sink.total();
  auto check = [&](int rank, int tb, int step, const auto& where, const char* role, BufferKind b, int offset, int count,
                   const RankProgram& program) {
    const int64_t size = declaredChunks(program, b);
    if (offset < 0 || int64_t{offset} + count > size) {
      sink.add(IssueKind::kOutOfRange, rank, tb, step, offset,
               fmt::format("{}: {} {}[{}..{}) is outside the {}={})", where(), role, bufferName(b), offset,
                           int64_t{offset} + count, bufferLongName(b), size),
               "");
    }
  };
  for (const RankProgram& program : algorithm.ranks) {
    const int r = program.rank;
    for (size_t p = 0; p < program.precopies.size(); ++p) {
      const PreCopy& copy = program.precopies[p];
      auto where = [&] { return fmt::format("rank {} copy {}", r, p); };
      check(r, -1, -1, where, "src", BufferKind::kInput, copy.input_off, copy.count, program);
      check(r, -1, -1, where, "dst", BufferKind::kOutput, copy.output_off, copy.count, program);
    }
    for (size_t t = 0; t < program.threadblocks.size(); ++t) {
      const Threadblock& tb = program.threadblocks[t];
      for (size_t s = 0; s < tb.steps.size(); ++s) {
        const Step& step = tb.steps[s];
        auto where = [&] { return stepWhere(r, static_cast<int>(t), static_cast<int>(s), step.type); };
        if (opReadsSrc(step.type)) {
          check(r, static_cast<int>(t), static_cast<int>(s), where, "src", step.src_buf, step.src_off, step.count,
                program);
        }
        if (opWritesDst(step.type)) {
          check(r, static_cast<int>(t), static_cast<int>(s), where, "dst", step.dst_buf, step.dst_off, step.count,
                program);
        }
      }
    }
  }
  return sink.total() == before;
}

}  // namespace verifier

Status checkAlgorithmStructure(const Algorithm& algorithm, const CollectiveSpec& spec) {
  verifier::IssueSink sink(1);
  if (verifier::checkStructure(algorithm, spec, sink)) verifier::checkRanges(algorithm, sink);
  if (sink.issues().empty()) return Status::ok();
  return invalidArgument(fmt::format("algorithm '{}': {}", algorithm.name, sink.issues().front().message));
}

}  // namespace braid
