// Lowering pass 1: the structural checks lowering needs before it indexes anything. A subset of verify()'s
// (src/ir/verify.cc) — lowering does not prove the postcondition, it only refuses what it cannot index:
// threadblock ids, peers, channels, dependency targets, counts and chunk ranges. Input and output ranges
// are bounded by the collective's chunk counts (CollectiveSpec), scratch ranges by s_chunks.
#include <fmt/format.h>

#include <cstdint>
#include <string>

#include "plan/lower_internal.h"

namespace braid::plan {

namespace {

std::string where(const Algorithm& algorithm, int rank, int tb, int step, OpType type) {
  return fmt::format("algorithm '{}': rank {} tb {} step {} ({})", algorithm.name, rank, tb, step, opTypeName(type));
}

int64_t bound(const CollectiveSpec& spec, const RankProgram& program, BufferKind buffer) {
  switch (buffer) {
    case BufferKind::kInput: return spec.inputChunks();
    case BufferKind::kOutput: return spec.outputChunks();
    case BufferKind::kScratch: return program.scratch_chunks;
  }
  return 0;
}

}  // namespace

Status checkStructure(const Algorithm& algorithm, const CollectiveSpec& spec) {
  const int n = algorithm.num_ranks;
  if (static_cast<int>(algorithm.ranks.size()) != n) {
    return invalidArgument(
        fmt::format("algorithm '{}': {} rank programs for ngpus={}", algorithm.name, algorithm.ranks.size(), n));
  }
  if (algorithm.num_channels < 1) {
    return invalidArgument(
        fmt::format("algorithm '{}': nchannels must be >= 1, got {}", algorithm.name, algorithm.num_channels));
  }
  for (int r = 0; r < n; ++r) {
    const RankProgram& program = algorithm.ranks[r];
    if (program.scratch_chunks < 0) {
      return invalidArgument(fmt::format("algorithm '{}': rank {}: s_chunks must be >= 0, got {}", algorithm.name, r,
                                         program.scratch_chunks));
    }
    for (size_t p = 0; p < program.precopies.size(); ++p) {
      const PreCopy& copy = program.precopies[p];
      if (copy.count < 1 || copy.input_off < 0 || int64_t{copy.input_off} + copy.count > spec.inputChunks() ||
          copy.output_off < 0 || int64_t{copy.output_off} + copy.count > spec.outputChunks()) {
        return invalidArgument(fmt::format(
            "algorithm '{}': rank {} copy {}: i[{}..+{}] -> o[{}..+{}] is outside the buffers ({} input, {} output "
            "chunks) or has count < 1",
            algorithm.name, r, p, copy.input_off, copy.count, copy.output_off, copy.count, spec.inputChunks(),
            spec.outputChunks()));
      }
    }
    const int num_tbs = static_cast<int>(program.threadblocks.size());
    for (int t = 0; t < num_tbs; ++t) {
      const Threadblock& tb = program.threadblocks[t];
      if (tb.id != t) {
        return invalidArgument(
            fmt::format("algorithm '{}': rank {}: threadblock at position {} has id {}", algorithm.name, r, t, tb.id));
      }
      for (int peer : {tb.send_peer, tb.recv_peer}) {
        if (peer < -1 || peer >= n || peer == r) {
          return invalidArgument(fmt::format("algorithm '{}': rank {} tb {}: peer {} is not another rank in [0, {})",
                                             algorithm.name, r, t, peer, n));
        }
      }
      if (tb.channel < 0 || tb.channel >= algorithm.num_channels) {
        return invalidArgument(fmt::format("algorithm '{}': rank {} tb {}: channel {} is outside [0, nchannels={})",
                                           algorithm.name, r, t, tb.channel, algorithm.num_channels));
      }
      for (int s = 0; s < static_cast<int>(tb.steps.size()); ++s) {
        const Step& step = tb.steps[s];
        if (step.type == OpType::kNop ? step.count < 0 : step.count < 1) {
          return invalidArgument(
              fmt::format("{}: count must be >= 1, got {}", where(algorithm, r, t, s, step.type), step.count));
        }
        if (opSends(step.type) && tb.send_peer < 0) {
          return invalidArgument(
              fmt::format("{}: sends but the threadblock has no send peer", where(algorithm, r, t, s, step.type)));
        }
        if (opReceives(step.type) && tb.recv_peer < 0) {
          return invalidArgument(
              fmt::format("{}: receives but the threadblock has no recv peer", where(algorithm, r, t, s, step.type)));
        }
        for (const Dependency& dep : step.deps) {
          if (dep.tb < 0 || dep.tb >= num_tbs || dep.step < 0 ||
              dep.step >= static_cast<int>(program.threadblocks[dep.tb].steps.size()) ||
              (dep.tb == t && dep.step >= s)) {
            return invalidArgument(fmt::format("{}: dependency on tb {} step {} names no earlier step of rank {}",
                                               where(algorithm, r, t, s, step.type), dep.tb, dep.step, r));
          }
        }
        auto check = [&](const char* role, BufferKind buffer, int offset) -> Status {
          const int64_t size = bound(spec, program, buffer);
          if (offset < 0 || int64_t{offset} + step.count > size) {
            return invalidArgument(fmt::format("{}: {} {}[{}..{}) is outside the buffer's {} chunks",
                                               where(algorithm, r, t, s, step.type), role, bufferName(buffer), offset,
                                               int64_t{offset} + step.count, size));
          }
          return Status::ok();
        };
        if (opReadsSrc(step.type)) BRAID_RETURN_IF_ERROR(check("src", step.src_buf, step.src_off));
        if (opWritesDst(step.type)) BRAID_RETURN_IF_ERROR(check("dst", step.dst_buf, step.dst_off));
      }
    }
  }
  return Status::ok();
}

}  // namespace braid::plan
