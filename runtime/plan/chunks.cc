// Lowering pass 2: chunk geometry and the data-flow replay that sizes scratch chunks.
//
// Input and output chunks are positional: chunk i of a buffer of E elements in C chunks spans elements
// [floor(i*E/C), floor((i+1)*E/C)). With the collective's layouts (collective.h) this keeps every logical
// chunk the same size wherever it belongs: all-gather output chunk r*c+k starts at r*E_in + floor(k*E_in/c),
// so it is exactly as large as rank r's input chunk k; the same holds for reduce-scatter's input and for
// all-to-all's (E = n*m) blocks. Scratch chunks have no size of their own: the replay below runs the
// program on chunk sizes in FIFO order — the same execution model as verify() (src/ir/verify.cc: a step
// runs when its threadblock reached it, its dependencies finished and, for a receive, a message is queued
// on its (source, destination, channel) connection) — and gives each scratch chunk the size of the chunks
// that land in it. Along the way it pairs every receive with its send and checks that sizes agree wherever
// a chunk moves, is reduced or lands; they can only disagree when the per-rank element count does not
// split evenly into chunks and the algorithm moves a chunk between positions of different sizes, or
// reuses one scratch chunk for chunks of different sizes (MSCCL's runtime avoids both by accepting only
// counts with (count x multiplier) % nchunksperloop == 0, ../shared/reference/taccl_msccl.md §3.2).
#include <fmt/format.h>

#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "plan/lower_internal.h"

namespace braid::plan {

uint64_t chunkStart(uint64_t elements, int chunks, int i) {
  if (chunks <= 0) return 0;
  return static_cast<uint64_t>(static_cast<unsigned __int128>(elements) * static_cast<unsigned>(i) /
                               static_cast<unsigned>(chunks));
}

int Geometry::chunks(int rank, BufferKind buffer) const {
  switch (buffer) {
    case BufferKind::kInput: return spec.inputChunks();
    case BufferKind::kOutput: return spec.outputChunks();
    case BufferKind::kScratch: return static_cast<int>(scratch_start[rank].size()) - 1;
  }
  return 0;
}

uint64_t Geometry::start(int rank, BufferKind buffer, int chunk) const {
  switch (buffer) {
    case BufferKind::kInput: return chunkStart(input_elements, spec.inputChunks(), chunk);
    case BufferKind::kOutput: return chunkStart(output_elements, spec.outputChunks(), chunk);
    case BufferKind::kScratch: return scratch_start[rank][chunk];
  }
  return 0;
}

ElemRange Geometry::range(int rank, BufferKind buffer, int first, int count, int part, int parts) const {
  ElemRange range{buffer, start(rank, buffer, first), start(rank, buffer, first + count)};
  if (parts > 1) {
    const uint64_t size = range.size();
    const uint64_t base = range.begin;
    range.begin = base + chunkStart(size, parts, part);
    range.end = base + chunkStart(size, parts, part + 1);
  }
  return range;
}

StepIndex::StepIndex(const Algorithm& algorithm) {
  base.resize(algorithm.ranks.size());
  for (size_t r = 0; r < algorithm.ranks.size(); ++r) {
    for (const Threadblock& tb : algorithm.ranks[r].threadblocks) {
      base[r].push_back(total);
      total += static_cast<int64_t>(tb.steps.size());
    }
  }
}

Geometry makeGeometry(const Algorithm& algorithm, const CollectiveSpec& spec, uint64_t elements_per_rank) {
  Geometry geometry;
  geometry.spec = spec;
  const uint64_t n = static_cast<uint64_t>(spec.num_ranks);
  geometry.input_elements = spec.kind == CollectiveKind::kAllGather ? elements_per_rank / n : elements_per_rank;
  geometry.output_elements = spec.kind == CollectiveKind::kReduceScatter ? elements_per_rank / n : elements_per_rank;
  geometry.scratch_start.resize(algorithm.ranks.size());
  for (size_t r = 0; r < algorithm.ranks.size(); ++r) {
    geometry.scratch_start[r].assign(static_cast<size_t>(algorithm.ranks[r].scratch_chunks) + 1, 0);
  }
  return geometry;
}

namespace {

// A message in flight in the replay: the flat step that sent it and the sizes of its chunks.
struct Message {
  int64_t sender = -1;
  size_t first = 0;  // into Replay::sizes_
  int count = 0;
};

class Replay {
 public:
  Replay(const Algorithm& algorithm, const StepIndex& index, Geometry& geometry)
      : algorithm_(algorithm), index_(index), geometry_(geometry) {}

  Result<DataFlow> run() {
    setUp();
    BRAID_RETURN_IF_ERROR(precopies());
    std::deque<int> work;
    std::vector<char> queued(num_tbs_, 1);
    for (int g = 0; g < num_tbs_; ++g) work.push_back(g);
    while (!work.empty()) {
      const int g = work.front();
      work.pop_front();
      queued[g] = 0;
      while (runnable(g)) {
        bool sent = false;
        BRAID_RETURN_IF_ERROR(execute(g, sent));
        for (int w : dependents_[g]) {
          if (!queued[w]) queued[w] = 1, work.push_back(w);
        }
        if (sent) {
          for (int w : receivers_[send_conn_[g]]) {
            if (!queued[w]) queued[w] = 1, work.push_back(w);
          }
        }
      }
    }
    BRAID_RETURN_IF_ERROR(checkFinished());
    for (size_t r = 0; r < scratch_.size(); ++r) {
      std::vector<uint64_t>& start = geometry_.scratch_start[r];
      for (size_t j = 0; j < scratch_[r].size(); ++j) {
        start[j + 1] = start[j] + (scratch_[r][j] == kUnknownSize ? 0 : scratch_[r][j]);
      }
    }
    BRAID_RETURN_IF_ERROR(checkSizes());
    return std::move(flow_);
  }

 private:
  std::string where(int r, int t, int s) const {
    return fmt::format("algorithm '{}': rank {} tb {} step {} ({})", algorithm_.name, r, t, s,
                       opTypeName(algorithm_.ranks[r].threadblocks[t].steps[s].type));
  }

  Status uneven(const std::string& what) const {
    return unsupported(fmt::format(
        "{}; chunk sizes differ because the size does not split evenly into the algorithm's chunks: lower a "
        "size whose element count (times the collective's multiplier) is a multiple of nchunksperloop={}",
        what, algorithm_.num_chunks));
  }

  void setUp() {
    const int n = algorithm_.num_ranks;
    flow_.sender.assign(index_.total, -1);
    scratch_.resize(n);
    for (int r = 0; r < n; ++r) scratch_[r].assign(algorithm_.ranks[r].scratch_chunks, kUnknownSize);
    std::unordered_map<uint64_t, int> conn_ids;
    auto connId = [&](int src, int dst, int channel) {
      const uint64_t key = (static_cast<uint64_t>(src) * n + dst) * algorithm_.num_channels + channel;
      auto [it, added] = conn_ids.emplace(key, static_cast<int>(conn_ids.size()));
      return it->second;
    };
    for (int r = 0; r < n; ++r) {
      tb_base_.push_back(num_tbs_);
      for (const Threadblock& tb : algorithm_.ranks[r].threadblocks) {
        gtb_rank_.push_back(r);
        gtb_local_.push_back(tb.id);
        send_conn_.push_back(tb.send_peer >= 0 ? connId(r, tb.send_peer, tb.channel) : -1);
        recv_conn_.push_back(tb.recv_peer >= 0 ? connId(tb.recv_peer, r, tb.channel) : -1);
        ++num_tbs_;
      }
    }
    pc_.assign(num_tbs_, 0);
    queues_.resize(conn_ids.size());
    receivers_.resize(conn_ids.size());
    dependents_.resize(num_tbs_);
    for (int g = 0; g < num_tbs_; ++g) {
      if (recv_conn_[g] >= 0) receivers_[recv_conn_[g]].push_back(g);
      const int r = gtb_rank_[g];
      for (const Step& step : tbOf(g).steps) {
        for (const Dependency& dep : step.deps) {
          std::vector<int>& list = dependents_[tb_base_[r] + dep.tb];
          if (list.empty() || list.back() != g) list.push_back(g);
        }
      }
    }
  }

  const Threadblock& tbOf(int g) const { return algorithm_.ranks[gtb_rank_[g]].threadblocks[gtb_local_[g]]; }

  bool runnable(int g) const {
    const Threadblock& tb = tbOf(g);
    const int k = pc_[g];
    if (k >= static_cast<int>(tb.steps.size())) return false;
    const Step& step = tb.steps[k];
    for (const Dependency& dep : step.deps) {
      if (pc_[tb_base_[gtb_rank_[g]] + dep.tb] <= dep.step) return false;
    }
    return !opReceives(step.type) || !queues_[recv_conn_[g]].empty();
  }

  // The size of the chunk held at (buffer, chunk) of rank r: positional for input and output.
  uint64_t cellSize(int r, BufferKind buffer, int chunk) const {
    return buffer == BufferKind::kScratch ? scratch_[r][chunk] : geometry_.size(r, buffer, chunk);
  }

  void readRange(int r, BufferKind buffer, int offset, int count, std::vector<uint64_t>& out) const {
    out.resize(count);
    for (int i = 0; i < count; ++i) out[i] = cellSize(r, buffer, offset + i);
  }

  // A chunk of `size` elements (kUnknownSize: undefined data) lands at (buffer, chunk) of rank r.
  // `context` names the step (or precopy) for an error message; it is only called on an error.
  template <typename Context>
  Status land(int r, BufferKind buffer, int chunk, uint64_t size, const Context& context) {
    if (size == kUnknownSize) return Status::ok();
    const uint64_t held = cellSize(r, buffer, chunk);
    if (held == kUnknownSize) {
      scratch_[r][chunk] = size;  // only scratch chunks start without a size
    } else if (held != size) {
      return uneven(fmt::format("{}: a chunk of {} elements lands in {}[{}], which holds {} elements", context(), size,
                                bufferName(buffer), chunk, held));
    }
    return Status::ok();
  }

  template <typename Context>
  Status landRange(int r, BufferKind buffer, int offset, const std::vector<uint64_t>& sizes, const Context& context) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      BRAID_RETURN_IF_ERROR(land(r, buffer, offset + static_cast<int>(i), sizes[i], context));
    }
    return Status::ok();
  }

  Status combine(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b, std::vector<uint64_t>& out, int r,
                 int t, int s) {
    out.resize(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i] != kUnknownSize && b[i] != kUnknownSize && a[i] != b[i]) {
        return uneven(fmt::format("{}: reduces chunks of {} and {} elements", where(r, t, s), a[i], b[i]));
      }
      out[i] = a[i] != kUnknownSize ? a[i] : b[i];
    }
    return Status::ok();
  }

  Status precopies() {
    for (int r = 0; r < algorithm_.num_ranks; ++r) {
      const std::vector<PreCopy>& copies = algorithm_.ranks[r].precopies;
      for (size_t p = 0; p < copies.size(); ++p) {
        readRange(r, BufferKind::kInput, copies[p].input_off, copies[p].count, src_);
        BRAID_RETURN_IF_ERROR(landRange(r, BufferKind::kOutput, copies[p].output_off, src_, [&] {
          return fmt::format("algorithm '{}': rank {} copy {}", algorithm_.name, r, p);
        }));
      }
    }
    return Status::ok();
  }

  Status execute(int g, bool& sent) {
    const int r = gtb_rank_[g];
    const int t = gtb_local_[g];
    const int k = pc_[g];
    const Step& step = tbOf(g).steps[k];
    const int64_t flat = index_.of(r, t, k);
    if (opReceives(step.type)) {
      std::deque<Message>& queue = queues_[recv_conn_[g]];
      const Message message = queue.front();
      queue.pop_front();
      if (message.count != step.count) {
        return invalidArgument(fmt::format("{}: receives {} chunk(s) but the matching send ({}) sent {}",
                                           where(r, t, k), step.count, senderName(message.sender), message.count));
      }
      flow_.sender[flat] = message.sender;
      received_.assign(sizes_.begin() + static_cast<std::ptrdiff_t>(message.first),
                       sizes_.begin() + static_cast<std::ptrdiff_t>(message.first + message.count));
    }
    if (opReadsSrc(step.type)) readRange(r, step.src_buf, step.src_off, step.count, src_);
    auto here = [&] { return where(r, t, k); };
    const std::vector<uint64_t>* outgoing = nullptr;
    switch (step.type) {
      case OpType::kSend: outgoing = &src_; break;
      case OpType::kRecv: BRAID_RETURN_IF_ERROR(landRange(r, step.dst_buf, step.dst_off, received_, here)); break;
      case OpType::kRecvCopySend:
        BRAID_RETURN_IF_ERROR(landRange(r, step.dst_buf, step.dst_off, received_, here));
        readRange(r, step.dst_buf, step.dst_off, step.count, dst_);
        outgoing = &dst_;
        break;
      case OpType::kRecvReduceSend:
        BRAID_RETURN_IF_ERROR(combine(src_, received_, result_, r, t, k));
        outgoing = &result_;
        break;
      case OpType::kRecvReduceCopy:
      case OpType::kRecvReduceCopySend:
        BRAID_RETURN_IF_ERROR(combine(src_, received_, result_, r, t, k));
        BRAID_RETURN_IF_ERROR(landRange(r, step.dst_buf, step.dst_off, result_, here));
        readRange(r, step.dst_buf, step.dst_off, step.count, dst_);
        if (step.type == OpType::kRecvReduceCopySend) outgoing = &dst_;
        break;
      case OpType::kCopy: BRAID_RETURN_IF_ERROR(landRange(r, step.dst_buf, step.dst_off, src_, here)); break;
      case OpType::kReduce:
        readRange(r, step.dst_buf, step.dst_off, step.count, dst_);
        BRAID_RETURN_IF_ERROR(combine(dst_, src_, result_, r, t, k));
        BRAID_RETURN_IF_ERROR(landRange(r, step.dst_buf, step.dst_off, result_, here));
        break;
      case OpType::kNop: break;
    }
    sent = outgoing != nullptr;
    if (sent) {
      queues_[send_conn_[g]].push_back(Message{flat, sizes_.size(), step.count});
      sizes_.insert(sizes_.end(), outgoing->begin(), outgoing->end());
    }
    ++pc_[g];
    return Status::ok();
  }

  std::string senderName(int64_t flat) const {
    for (int g = 0; g < num_tbs_; ++g) {
      const int r = gtb_rank_[g];
      const int t = gtb_local_[g];
      const int64_t base = index_.of(r, t, 0);
      if (flat >= base && flat < base + static_cast<int64_t>(tbOf(g).steps.size())) {
        return fmt::format("rank {} tb {} step {}", r, t, flat - base);
      }
    }
    return "?";
  }

  Status checkFinished() const {
    for (int g = 0; g < num_tbs_; ++g) {
      const Threadblock& tb = tbOf(g);
      const int k = pc_[g];
      if (k >= static_cast<int>(tb.steps.size())) continue;
      const int r = gtb_rank_[g];
      std::string reason =
          fmt::format("waits for data from rank {} on channel {} that never arrives", tb.recv_peer, tb.channel);
      for (const Dependency& dep : tb.steps[k].deps) {
        if (pc_[tb_base_[r] + dep.tb] <= dep.step) {
          reason = fmt::format("waits for tb {} step {}, which never finishes", dep.tb, dep.step);
          break;
        }
      }
      return invalidArgument(fmt::format("{}: deadlock: {}", where(r, gtb_local_[g], k), reason));
    }
    for (const std::deque<Message>& queue : queues_) {
      if (!queue.empty()) {
        return invalidArgument(fmt::format("algorithm '{}': {} sends {} chunk(s) that no step receives",
                                           algorithm_.name, senderName(queue.front().sender), queue.front().count));
      }
    }
    return Status::ok();
  }

  // With every scratch chunk sized: chunk by chunk, what a send reads has the size of what its receive
  // writes or reduces with, and the src and dst of every local move or reduction agree.
  Status checkSizes() const {
    std::vector<std::pair<int, int>> where_flat;  // flat step -> (rank, tb), built on demand for senders
    where_flat.reserve(static_cast<size_t>(index_.total));
    for (int g = 0; g < num_tbs_; ++g) {
      for (size_t s = 0; s < tbOf(g).steps.size(); ++s) where_flat.emplace_back(gtb_rank_[g], gtb_local_[g]);
    }
    auto sentRange = [](const Step& step) {
      return step.type == OpType::kSend || step.type == OpType::kRecvReduceSend
                 ? std::pair<BufferKind, int>{step.src_buf, step.src_off}
                 : std::pair<BufferKind, int>{step.dst_buf, step.dst_off};
    };
    auto compare = [&](int ra, BufferKind ba, int oa, int rb, BufferKind bb, int ob, int count,
                       const auto& context) -> Status {
      for (int i = 0; i < count; ++i) {
        const uint64_t a = geometry_.size(ra, ba, oa + i);
        const uint64_t b = geometry_.size(rb, bb, ob + i);
        if (a != b) {
          return uneven(fmt::format("{}: {}[{}] of rank {} holds {} elements but {}[{}] of rank {} holds {}", context(),
                                    bufferName(ba), oa + i, ra, a, bufferName(bb), ob + i, rb, b));
        }
      }
      return Status::ok();
    };
    for (int g = 0; g < num_tbs_; ++g) {
      const int r = gtb_rank_[g];
      const int t = gtb_local_[g];
      const Threadblock& tb = tbOf(g);
      for (int s = 0; s < static_cast<int>(tb.steps.size()); ++s) {
        const Step& step = tb.steps[s];
        if (opReadsSrc(step.type) && opWritesDst(step.type)) {
          BRAID_RETURN_IF_ERROR(compare(r, step.src_buf, step.src_off, r, step.dst_buf, step.dst_off, step.count,
                                        [&] { return where(r, t, s); }));
        }
        const int64_t sender = flow_.sender[index_.of(r, t, s)];
        if (sender < 0) continue;
        const auto [sr, st] = where_flat[sender];
        const Step& send = algorithm_.ranks[sr].threadblocks[st].steps[sender - index_.of(sr, st, 0)];
        const auto [sb, so] = sentRange(send);
        const auto [rb, ro] = step.type == OpType::kRecv || step.type == OpType::kRecvCopySend
                                  ? std::pair<BufferKind, int>{step.dst_buf, step.dst_off}
                                  : std::pair<BufferKind, int>{step.src_buf, step.src_off};
        BRAID_RETURN_IF_ERROR(compare(sr, sb, so, r, rb, ro, step.count, [&, sr = sr, st = st] {
          return fmt::format("{} receiving from rank {} tb {} step {}", where(r, t, s), sr, st,
                             sender - index_.of(sr, st, 0));
        }));
      }
    }
    return Status::ok();
  }

  const Algorithm& algorithm_;
  const StepIndex& index_;
  Geometry& geometry_;
  DataFlow flow_;
  std::vector<std::vector<uint64_t>> scratch_;  // rank -> scratch chunk -> size in elements
  int num_tbs_ = 0;
  std::vector<int> tb_base_, gtb_rank_, gtb_local_, send_conn_, recv_conn_, pc_;
  std::vector<std::vector<int>> dependents_;  // global tb -> global tbs waiting on one of its steps
  std::vector<std::vector<int>> receivers_;   // connection -> global tbs receiving on it
  std::vector<std::deque<Message>> queues_;   // connection -> messages in flight, FIFO
  std::vector<uint64_t> sizes_;               // chunk sizes of every message sent
  std::vector<uint64_t> src_, dst_, received_, result_;
};

}  // namespace

Result<DataFlow> replayDataFlow(const Algorithm& algorithm, const StepIndex& index, Geometry& geometry) {
  return Replay(algorithm, index, geometry).run();
}

}  // namespace braid::plan
