// Emitter (synthesizer/emit.cc): schedules built by hand on hand-built logical topologies, lowered to MSCCL
// programs and checked four ways: exact threadblock/step structure where it can be derived by hand (rings, the
// 2-node contiguous group), verify() in every declared mode, an MSCCL XML round trip, and real data moved by the
// executor over the in-memory transport (tests/runtime/mem_transport.h) compared with a reference computed
// here from the collective's definition. Times are in abstract units (every transfer takes 1 unless said).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "braid/algorithm.h"
#include "braid/executor.h"
#include "braid/plan.h"
#include "runtime/mem_transport.h"
#include "support/uint32_reference.h"
#include "synthesizer/model.h"

namespace braid::synth {
namespace {

constexpr BufferKind kI = BufferKind::kInput;
constexpr BufferKind kO = BufferKind::kOutput;

// ---- hand-built inputs --------------------------------------------------------------------------

// A logical topology with the given directed links (α 1 µs, 1 GB/s); `node_of` empty = one node.
LogicalTopology logical(int n, const std::vector<std::pair<int, int>>& links, std::vector<int> node_of = {}) {
  LogicalTopology lt;
  lt.num_ranks = n;
  lt.node_of = node_of.empty() ? std::vector<int>(n, 0) : node_of;
  std::vector<int> count(n, 0);
  for (int r = 0; r < n; ++r) lt.local_of.push_back(count[lt.node_of[r]]++);
  lt.out_links.assign(n, {});
  lt.in_links.assign(n, {});
  std::vector<int> identity(n);
  std::iota(identity.begin(), identity.end(), 0);
  lt.symmetry = {identity};
  for (const auto& [src, dst] : links) {
    LogicalLink l;
    l.id = static_cast<int>(lt.links.size());
    l.src = src;
    l.dst = dst;
    l.alpha_us = 1;
    l.gbps = 1;
    l.inter_node = lt.node_of[src] != lt.node_of[dst];
    lt.index[{src, dst}] = l.id;
    lt.out_links[src].push_back(l.id);
    lt.in_links[dst].push_back(l.id);
    lt.links.push_back(l);
    lt.relay_allowed.push_back(l.inter_node ? std::vector<char>(n, 1) : std::vector<char>{});
  }
  return lt;
}

// Both directions of every undirected edge.
std::vector<std::pair<int, int>> duplex(const std::vector<std::pair<int, int>>& edges) {
  std::vector<std::pair<int, int>> out;
  for (const auto& [a, b] : edges) {
    out.push_back({a, b});
    out.push_back({b, a});
  }
  return out;
}

int chunkId(const ChunkProblem& p, int owner, int dest, int piece) {
  for (const Chunk& c : p.chunks) {
    if (c.owner == owner && c.dest == dest && c.piece == piece) return c.id;
  }
  ADD_FAILURE() << "no chunk owner " << owner << " dest " << dest << " piece " << piece;
  return -1;
}

struct Hop {
  int chunk;
  int src;
  int dst;
  double start;
  double end;
};

// A schedule from explicit transfers: link order by start time (then listing order); `groups` lists indices
// into `hops` sent together, every other transfer alone.
Schedule schedule(const LogicalTopology& lt, const std::vector<Hop>& hops, std::vector<std::vector<int>> groups = {}) {
  Schedule s;
  s.link_order.assign(lt.links.size(), {});
  for (const Hop& h : hops) {
    const int link = lt.find(h.src, h.dst);
    EXPECT_GE(link, 0) << h.src << "->" << h.dst;
    s.transfers.push_back(Transfer{h.chunk, link, h.start, h.end});
    s.makespan_us = std::max(s.makespan_us, h.end);
  }
  for (int t = 0; t < static_cast<int>(hops.size()); ++t) s.link_order[s.transfers[t].link].push_back(t);
  for (auto& order : s.link_order) {
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return s.transfers[a].start_us < s.transfers[b].start_us; });
  }
  std::vector<bool> grouped(hops.size(), false);
  for (const auto& g : groups) {
    for (int t : g) grouped[t] = true;
  }
  for (int t = 0; t < static_cast<int>(hops.size()); ++t) {
    if (!grouped[t]) groups.push_back({t});
  }
  s.groups = groups;
  return s;
}

// A greedy schedule of trees: trees[chunk] = its edges (src, dst), parents before children. Edges are taken
// level by level (edge depth = hops from the owner to its src) across all chunks; each starts when its chunk
// is at src and its link is free, and takes 1. Starts along a link never decrease (each starts after the
// previous one ended), and a forwarded chunk leaves after it arrived: a valid schedule.
Schedule greedy(const LogicalTopology& lt, const ChunkProblem& p,
                const std::vector<std::vector<std::pair<int, int>>>& trees) {
  const int n = lt.num_ranks;
  std::vector<std::vector<double>> at(p.chunks.size(), std::vector<double>(n, -1));
  std::vector<std::vector<int>> depth(p.chunks.size(), std::vector<int>(n, -1));
  int max_depth = 0;
  for (const Chunk& c : p.chunks) {
    at[c.id][c.owner] = 0;
    depth[c.id][c.owner] = 0;
    for (const auto& [a, b] : trees[c.id]) {
      EXPECT_GE(depth[c.id][a], 0) << "tree of chunk " << c.id << " lists " << a << "->" << b << " before " << a;
      depth[c.id][b] = depth[c.id][a] + 1;
      max_depth = std::max(max_depth, depth[c.id][a]);
    }
  }
  std::map<std::pair<int, int>, double> link_free;
  std::vector<Hop> hops;
  for (int d = 0; d <= max_depth; ++d) {
    for (const Chunk& c : p.chunks) {
      for (const auto& [a, b] : trees[c.id]) {
        if (depth[c.id][a] != d) continue;
        const double start = std::max(at[c.id][a], link_free[{a, b}]);
        hops.push_back(Hop{c.id, a, b, start, start + 1});
        link_free[{a, b}] = start + 1;
        at[c.id][b] = start + 1;
      }
    }
  }
  return schedule(lt, hops);
}

// The ring all-gather: chunk (o, j) goes o -> o+dir -> ... (n-1 hops); hop s of piece j runs over
// [s*c + j, s*c + j + 1], so at hop s every link carries chunk (v - dir*s) piece by piece.
Schedule ringSchedule(const LogicalTopology& lt, const ChunkProblem& p, int dir) {
  const int n = lt.num_ranks, c = p.chunkup;
  std::vector<Hop> hops;
  for (int s = 0; s + 1 < n; ++s) {
    for (int o = 0; o < n; ++o) {
      for (int j = 0; j < c; ++j) {
        const int from = ((o + dir * s) % n + n) % n, to = ((o + dir * (s + 1)) % n + n) % n;
        hops.push_back(Hop{chunkId(p, o, -1, j), from, to, double(s * c + j), double(s * c + j + 1)});
      }
    }
  }
  return schedule(lt, hops);
}

std::vector<std::pair<int, int>> ringLinks(int n) {
  std::vector<std::pair<int, int>> links;
  for (int v = 0; v < n; ++v) {
    links.push_back({v, (v + 1) % n});
    links.push_back({(v + 1) % n, v});
  }
  return links;
}

// ---- checks ---------------------------------------------------------------------------------------

// Emits the program and asserts success.
Algorithm emit(const EmitRequest& r) {
  Result<Algorithm> a = emitProgram(r);
  EXPECT_TRUE(a.isOk()) << a.status().toString();
  return a.isOk() ? *a : Algorithm{};
}

EmitRequest forwardRequest(CollectiveKind kind, const LogicalTopology& lt, const ChunkProblem& p, const Schedule& s) {
  EmitRequest r;
  r.collective = kind;
  r.name = "test";
  r.root = p.root;
  r.forward_logical = &lt;
  r.forward_problem = &p;
  r.forward = &s;
  r.pair_connections = true;  // the structure tests below describe MSCCLang-style paired threadblocks
  return r;
}

EmitRequest reverseRequest(CollectiveKind kind, const LogicalTopology& lt, const ChunkProblem& p, const Schedule& s) {
  EmitRequest r;
  r.collective = kind;
  r.name = "test";
  r.root = p.root;
  r.reverse_logical = &lt;
  r.reverse_problem = &p;
  r.reverse = &s;
  r.pair_connections = true;
  return r;
}

// All-reduce: the reduce-scatter part from `rev` (run backwards) and the all-gather part from `fwd`, both on `lt`
// with the chunks of `p`.
EmitRequest allReduceRequest(const LogicalTopology& lt, const ChunkProblem& p, const Schedule& fwd,
                             const Schedule& rev) {
  EmitRequest r = forwardRequest(CollectiveKind::kAllReduce, lt, p, fwd);
  r.reverse_logical = &lt;
  r.reverse_problem = &p;
  r.reverse = &rev;
  return r;
}

void expectVerified(const Algorithm& a) {
  const VerifyReport report = verify(a);
  EXPECT_TRUE(report.ok) << a.name << " " << collectiveName(a.collective) << ":\n" << report.toString();
  const size_t modes = (a.in_place ? 1 : 0) + (a.out_of_place ? 1 : 0);
  EXPECT_EQ(report.modes_checked.size(), modes);
}

void expectXmlRoundTrip(const Algorithm& a) {
  const std::string xml = writeMscclXml(a);
  Result<Algorithm> back = readMscclXml(xml, "lowered.xml");
  ASSERT_TRUE(back.isOk()) << back.status().toString();
  EXPECT_EQ(back->num_ranks, a.num_ranks);
  EXPECT_EQ(back->num_chunks, a.num_chunks);
  EXPECT_EQ(back->num_channels, a.num_channels);
  EXPECT_EQ(back->numSteps(), a.numSteps());
  EXPECT_EQ(back->in_place, a.in_place);
  EXPECT_EQ(back->out_of_place, a.out_of_place);
  const VerifyReport report = verify(*back);
  EXPECT_TRUE(report.ok) << report.toString();
}

// Data and reference: tests/support/uint32_reference.h.
using testing::inputWord;
using testing::referenceWord;

// Executes `a` through MemTransport (completions in shuffled order) for each count (elements per rank-sized
// piece, nccl-tests convention) in every declared mode and compares every output element with referenceWord().
// Three transports: unbounded FIFOs; one message in flight per connection (fifo_depth 1, the tightest: a send
// waits for the receiver to reach the previous message, which the key order of the lowering must allow); and
// 16-byte slices with NCCL's 8 slots (every chunk of more than 4 elements moves in several slices, a step of
// several such chunks sends one message per chunk per iteration).
void expectExecutesCorrectly(const Algorithm& a, const std::vector<uint64_t>& counts = {1, 7, 1003}) {
  for (bool in_place : {false, true}) {
    if (in_place ? !a.in_place : !a.out_of_place) continue;
    for (uint64_t count : counts) {
      for (uint64_t seed : {1u, 2u, 3u}) {
        const std::string what = fmt::format("{} {} count {} {} seed {}", a.name, collectiveName(a.collective), count,
                                             in_place ? "in-place" : "out-of-place", seed);
        Result<CollectiveSpec> spec = a.spec(in_place);
        ASSERT_TRUE(spec.isOk()) << what;
        LowerOptions options;
        options.size_bytes = count * 4 * spec->sizeMultiplier();
        options.in_place = in_place;
        options.element_bytes = 4;
        options.slice_bytes = seed == 3 ? 16 : 0;
        Result<Plan> plan = lowerAlgorithm(a, options);
        ASSERT_TRUE(plan.isOk()) << what << ": " << plan.status().toString();
        const uint64_t in_elems = plan->ranks[0].input_bytes / 4, out_elems = plan->ranks[0].output_bytes / 4;
        // In place, input element i lives in the output (reduce-scatter: output j lives in the input).
        auto inputAt = [&](int r, uint64_t i) -> std::pair<BufferKind, uint64_t> {
          if (!in_place || spec->kind == CollectiveKind::kReduceScatter) return {kI, i};
          if (spec->kind == CollectiveKind::kAllGather) return {kO, r * in_elems + i};
          return {kO, i};
        };
        auto outputAt = [&](int r, uint64_t j) -> std::pair<BufferKind, uint64_t> {
          if (in_place && spec->kind == CollectiveKind::kReduceScatter) return {kI, r * out_elems + j};
          return {kO, j};
        };
        testing::MemTransport mem(*plan, seed, /*move_data=*/true, /*fifo_depth=*/seed == 1 ? 0 : seed == 2 ? 1 : 8);
        for (int r = 0; r < a.num_ranks; ++r) {
          for (BufferKind b : {kI, kO, BufferKind::kScratch}) {
            for (uint64_t w = 0; w < mem.buffer(r, b).size() / 4; ++w) mem.setWord(r, b, w, 0xDEADBEEFu);
          }
          for (uint64_t i = 0; i < in_elems; ++i) {
            const auto [b, at] = inputAt(r, i);
            mem.setWord(r, b, at, inputWord(r, i));
          }
        }
        Result<ExecResult> result = execute(*plan, mem);
        ASSERT_TRUE(result.isOk()) << what << ": " << result.status().toString();
        int wrong = 0;
        for (int r = 0; r < a.num_ranks; ++r) {
          for (uint64_t j = 0; j < out_elems; ++j) {
            const std::optional<uint32_t> want = referenceWord(*spec, in_elems, out_elems, r, j);
            if (!want) continue;
            const auto [b, at] = outputAt(r, j);
            if (mem.word(r, b, at) != *want && wrong++ < 3) {
              ADD_FAILURE() << what << ": rank " << r << " output[" << j << "] = " << mem.word(r, b, at)
                            << ", expected " << *want;
            }
          }
          if (!in_place) {
            for (uint64_t i = 0; i < in_elems; ++i) {
              if (mem.word(r, kI, i) != inputWord(r, i) && wrong++ < 3) ADD_FAILURE() << what << ": input modified";
            }
          }
        }
        EXPECT_EQ(wrong, 0) << what;
      }
    }
  }
}

void expectAllGood(const Algorithm& a) {
  expectVerified(a);
  expectXmlRoundTrip(a);
  expectExecutesCorrectly(a);
}

struct StepShape {
  OpType type;
  BufferKind src_buf;
  int src_off;
  BufferKind dst_buf;
  int dst_off;
  int count;
};

std::string stepsText(const Threadblock& tb) {
  std::string text;
  for (const Step& s : tb.steps) {
    text += fmt::format(" {}({}{}->{}{} x{})", opTypeName(s.type), bufferName(s.src_buf), s.src_off,
                        bufferName(s.dst_buf), s.dst_off, s.count);
  }
  return text;
}

void expectSteps(const Threadblock& tb, const std::vector<StepShape>& want, const std::string& where) {
  ASSERT_EQ(tb.steps.size(), want.size()) << where << ":" << stepsText(tb);
  for (size_t s = 0; s < want.size(); ++s) {
    const Step& got = tb.steps[s];
    const StepShape& w = want[s];
    EXPECT_EQ(got.type, w.type) << where << " step " << s << ": " << opTypeName(got.type);
    EXPECT_EQ(got.count, w.count) << where << " step " << s;
    if (w.src_off >= 0) {
      EXPECT_EQ(got.src_buf, w.src_buf) << where << " step " << s;
      EXPECT_EQ(got.src_off, w.src_off) << where << " step " << s;
    }
    if (w.dst_off >= 0) {
      EXPECT_EQ(got.dst_buf, w.dst_buf) << where << " step " << s;
      EXPECT_EQ(got.dst_off, w.dst_off) << where << " step " << s;
    }
  }
}

int mod(int a, int n) { return ((a % n) + n) % n; }

// ---- exact structure on the 4-rank ring -------------------------------------------------------------

// Ring all-gather, n = 4, c = 1. Rank v sends its own chunk at [0,1], receives chunk v-1 at 1 and forwards it
// at [1,2], receives v-2 at 2 and forwards it, receives v-3 at 3 and keeps it. The forwarding pairs the
// receive from v-1 with the send to v+1 in one threadblock; each receive is immediately followed by the send
// of the same chunk there, so they fuse into rcs. The owner's input moves to o[v] first (a cpy that is the
// identity in place). Expected per rank: one threadblock (send v+1, recv v-1, channel 0):
//   cpy i[0] -> o[v]; s o[v]; rcs o[v-1]; rcs o[v-2]; r o[v-3]   (5 steps, 3 sends, 3 receives).
TEST(LowerSchedule, RingAllGatherStructure) {
  const int n = 4;
  const LogicalTopology lt = logical(n, ringLinks(n));
  const ChunkProblem p = makeChunkProblem(CollectiveKind::kAllGather, lt, 1, 0, 4096);
  const Schedule s = ringSchedule(lt, p, +1);
  const Algorithm a = emit(forwardRequest(CollectiveKind::kAllGather, lt, p, s));
  ASSERT_EQ(a.num_ranks, n);
  EXPECT_EQ(a.num_chunks, 4);  // allgather: n * c
  EXPECT_EQ(a.num_channels, 1);
  EXPECT_TRUE(a.in_place);
  EXPECT_TRUE(a.out_of_place);
  EXPECT_EQ(a.name, "test");
  EXPECT_EQ(a.collective_name, "allgather");
  for (int v = 0; v < n; ++v) {
    const RankProgram& rp = a.ranks[v];
    EXPECT_EQ(rp.scratch_chunks, 0);
    ASSERT_EQ(rp.threadblocks.size(), 1u) << "rank " << v;
    const Threadblock& tb = rp.threadblocks[0];
    EXPECT_EQ(tb.send_peer, mod(v + 1, n));
    EXPECT_EQ(tb.recv_peer, mod(v - 1, n));
    EXPECT_EQ(tb.channel, 0);
    expectSteps(tb,
                {{OpType::kCopy, kI, 0, kO, v, 1},
                 {OpType::kSend, kO, v, kO, -1, 1},
                 {OpType::kRecvCopySend, kI, -1, kO, mod(v - 1, n), 1},
                 {OpType::kRecvCopySend, kI, -1, kO, mod(v - 2, n), 1},
                 {OpType::kRecv, kI, -1, kO, mod(v - 3, n), 1}},
                fmt::format("rank {}", v));
    for (const Step& step : tb.steps) EXPECT_TRUE(step.deps.empty());
  }
  expectAllGood(a);
}

// The default (pair_connections off): the same ring gets a send-only and a receive-only threadblock per rank,
// no fused steps, and each forward depends on the receive of the same chunk in the other threadblock.
//   send tb (send v+1): cpy i[0] -> o[v]; s o[v]; s o[v-1] (after recv of o[v-1]); s o[v-2] (after its recv)
//   recv tb (recv v-1): r o[v-1]; r o[v-2]; r o[v-3]
TEST(LowerSchedule, RingAllGatherUnpaired) {
  const int n = 4;
  const LogicalTopology lt = logical(n, ringLinks(n));
  const ChunkProblem p = makeChunkProblem(CollectiveKind::kAllGather, lt, 1, 0, 4096);
  const Schedule s = ringSchedule(lt, p, +1);
  EmitRequest req = forwardRequest(CollectiveKind::kAllGather, lt, p, s);
  req.pair_connections = false;
  const Algorithm a = emit(req);
  ASSERT_EQ(a.num_ranks, n);
  for (int v = 0; v < n; ++v) {
    const RankProgram& rp = a.ranks[v];
    ASSERT_EQ(rp.threadblocks.size(), 2u) << "rank " << v;
    const Threadblock* send_tb = nullptr;
    const Threadblock* recv_tb = nullptr;
    for (const Threadblock& tb : rp.threadblocks) {
      if (tb.send_peer >= 0) send_tb = &tb;
      if (tb.recv_peer >= 0) recv_tb = &tb;
    }
    ASSERT_TRUE(send_tb && recv_tb && send_tb != recv_tb) << "rank " << v;
    EXPECT_EQ(send_tb->send_peer, mod(v + 1, n));
    EXPECT_EQ(send_tb->recv_peer, -1);
    EXPECT_EQ(recv_tb->recv_peer, mod(v - 1, n));
    EXPECT_EQ(recv_tb->send_peer, -1);
    int sends = 0, recvs = 0, forwards_with_dep = 0;
    for (const Step& step : send_tb->steps) {
      EXPECT_NE(step.type, OpType::kRecvCopySend);
      if (step.type == OpType::kSend) {
        ++sends;
        if (step.src_off != v) {
          ASSERT_EQ(step.deps.size(), 1u);
          EXPECT_EQ(step.deps[0].tb, recv_tb->id);
          ++forwards_with_dep;
        }
      }
    }
    for (const Step& step : recv_tb->steps) recvs += step.type == OpType::kRecv ? 1 : 0;
    EXPECT_EQ(sends, 3);
    EXPECT_EQ(forwards_with_dep, 2);
    EXPECT_EQ(recvs, 3);
  }
  expectAllGood(a);
}

// Reduce-scatter from the same ring schedule run backwards (the "mirrors" reuse of synthesize()): link
// (a -> b) carries partial sums b -> a over [T - end, T - start], T = 3. Chunk o's all-gather path
// o -> o+1 -> o+2 -> o+3 becomes o+3 -> o+2 -> o+1 -> o. Rank v: sends its input of chunk v+1 (it is that
// chunk's leaf) at [0,1]; receives the partial of chunk v-2 at 1 and sends it on at [1,2] (fused rrs with its
// input i[v-2]), the same for chunk v-1 at 2; receives its own chunk's partial at 3 and reduces it with i[v]
// into o[0]. Expected per rank: one threadblock (send v-1, recv v+1):
//   s i[v+1]; rrs i[v-2]; rrs i[v-1]; rrc i[v] -> o[0]   (no scratch: every partial goes straight on).
TEST(LowerSchedule, RingReduceScatterStructure) {
  const int n = 4;
  const LogicalTopology lt = logical(n, ringLinks(n));
  const ChunkProblem p = makeChunkProblem(CollectiveKind::kAllGather, lt, 1, 0, 4096);
  const Schedule s = ringSchedule(lt, p, +1);
  const Algorithm a = emit(reverseRequest(CollectiveKind::kReduceScatter, lt, p, s));
  ASSERT_EQ(a.num_ranks, n);
  EXPECT_EQ(a.num_chunks, 4);  // reducescatter: n * c
  EXPECT_EQ(a.redop, "sum");
  EXPECT_TRUE(a.in_place);
  EXPECT_TRUE(a.out_of_place);
  for (int v = 0; v < n; ++v) {
    ASSERT_EQ(a.ranks[v].threadblocks.size(), 1u);
    const Threadblock& tb = a.ranks[v].threadblocks[0];
    EXPECT_EQ(tb.send_peer, mod(v - 1, n));
    EXPECT_EQ(tb.recv_peer, mod(v + 1, n));
    EXPECT_EQ(a.ranks[v].scratch_chunks, 0);
    expectSteps(tb,
                {{OpType::kSend, kI, mod(v + 1, n), kO, -1, 1},
                 {OpType::kRecvReduceSend, kI, mod(v - 2, n), kO, -1, 1},
                 {OpType::kRecvReduceSend, kI, mod(v - 1, n), kO, -1, 1},
                 {OpType::kRecvReduceCopy, kI, v, kO, 0, 1}},
                fmt::format("rank {}", v));
  }
  expectAllGood(a);
}

// All-reduce: reduce-scatter part from a ring all-gather in the opposite orientation (chunk o: o -> o-1 -> o-2
// -> o-3), so its partial sums flow v -> v+1, the same way as the all-gather part (o -> o+1 -> ...). With
// T = 3 the reduce part at rank v: send i[v-1] (leaf of chunk v-1) at 0, partial of chunk v+2 in at 1 and out
// at 1 (rrs), chunk v+1 in at 2 and out (rrs), own chunk in at 3 (rrc into o[v]); then the all-gather part
// starts by sending o[v], which depends only on that rrc: they fuse into rrcs. Expected per rank: one
// threadblock (send v+1, recv v-1) — exactly the classical ring all-reduce:
//   s i[v-1]; rrs i[v+2]; rrs i[v+1]; rrcs i[v] -> o[v]; rcs o[v-1]; rcs o[v-2]; r o[v-3]
TEST(LowerSchedule, RingAllReduceStructure) {
  const int n = 4;
  const LogicalTopology lt = logical(n, ringLinks(n));
  const ChunkProblem p = makeChunkProblem(CollectiveKind::kAllGather, lt, 1, 0, 4096);
  const Schedule fwd = ringSchedule(lt, p, +1);
  const Schedule rev = ringSchedule(lt, p, -1);
  EmitRequest r = allReduceRequest(lt, p, fwd, rev);
  const Algorithm a = emit(r);
  ASSERT_EQ(a.num_ranks, n);
  EXPECT_EQ(a.num_chunks, 4);  // allreduce: chunk factor n * c
  for (int v = 0; v < n; ++v) {
    ASSERT_EQ(a.ranks[v].threadblocks.size(), 1u);
    const Threadblock& tb = a.ranks[v].threadblocks[0];
    EXPECT_EQ(tb.send_peer, mod(v + 1, n));
    EXPECT_EQ(tb.recv_peer, mod(v - 1, n));
    expectSteps(tb,
                {{OpType::kSend, kI, mod(v - 1, n), kO, -1, 1},
                 {OpType::kRecvReduceSend, kI, mod(v + 2, n), kO, -1, 1},
                 {OpType::kRecvReduceSend, kI, mod(v + 1, n), kO, -1, 1},
                 {OpType::kRecvReduceCopySend, kI, v, kO, v, 1},
                 {OpType::kRecvCopySend, kI, -1, kO, mod(v - 1, n), 1},
                 {OpType::kRecvCopySend, kI, -1, kO, mod(v - 2, n), 1},
                 {OpType::kRecv, kI, -1, kO, mod(v - 3, n), 1}},
                fmt::format("rank {}", v));
  }
  expectAllGood(a);
}

// All-reduce whose two parts run in opposite directions (the reverse schedule is the same ring all-gather run
// backwards): reduce part on (send v-1, recv v+1), gather part on (send v+1, recv v-1); the gather part's first
// send waits on the other threadblock's final reduction (a cross-threadblock dependency).
TEST(LowerSchedule, RingAllReduceOppositeDirections) {
  const int n = 4;
  const LogicalTopology lt = logical(n, ringLinks(n));
  const ChunkProblem p = makeChunkProblem(CollectiveKind::kAllGather, lt, 1, 0, 4096);
  const Schedule s = ringSchedule(lt, p, +1);
  EmitRequest r = allReduceRequest(lt, p, s, s);
  const Algorithm a = emit(r);
  for (int v = 0; v < n; ++v) {
    ASSERT_EQ(a.ranks[v].threadblocks.size(), 2u);
    int cross = 0;
    for (const Threadblock& tb : a.ranks[v].threadblocks) {
      for (const Step& step : tb.steps) cross += static_cast<int>(step.deps.size());
    }
    EXPECT_EQ(cross, 1) << "rank " << v;
  }
  expectAllGood(a);
}

// ---- hubs and relays ---------------------------------------------------------------------------------

// 3 ranks on a line 0 - 1 - 2: rank 1 relays everything between 0 and 2. chunkup 2.
struct Line3 {
  LogicalTopology lt = logical(3, duplex({{0, 1}, {1, 2}}));
};

std::vector<std::vector<std::pair<int, int>>> lineTrees(const ChunkProblem& p) {
  std::vector<std::vector<std::pair<int, int>>> trees(p.chunks.size());
  for (const Chunk& c : p.chunks) {
    if (c.dest >= 0) {  // all-to-all: the path along the line
      const int dir = c.dest > c.owner ? 1 : -1;
      for (int v = c.owner; v != c.dest; v += dir) trees[c.id].push_back({v, v + dir});
      continue;
    }
    if (c.owner == 0) trees[c.id] = {{0, 1}, {1, 2}};
    if (c.owner == 1) trees[c.id] = {{1, 0}, {1, 2}};
    if (c.owner == 2) trees[c.id] = {{2, 1}, {1, 0}};
  }
  return trees;
}

TEST(LowerSchedule, LineAllGatherReduceScatterAllReduce) {
  Line3 line;
  const ChunkProblem p = makeChunkProblem(CollectiveKind::kAllGather, line.lt, 2, 0, 6 * 1024);
  const Schedule s = greedy(line.lt, p, lineTrees(p));
  const Algorithm ag = emit(forwardRequest(CollectiveKind::kAllGather, line.lt, p, s));
  EXPECT_EQ(ag.num_chunks, 6);
  expectAllGood(ag);
  const Algorithm rs = emit(reverseRequest(CollectiveKind::kReduceScatter, line.lt, p, s));
  EXPECT_EQ(rs.num_chunks, 6);
  expectAllGood(rs);
  EmitRequest r = allReduceRequest(line.lt, p, s, s);
  const Algorithm ar = emit(r);
  EXPECT_EQ(ar.num_chunks, 6);  // n * c
  expectAllGood(ar);
}

// All-to-all on the line: chunk (0 -> 2) and (2 -> 0) pass through rank 1's scratch. chunkup 2: rank 1 relays
// 2 pieces each way, so it needs 4 scratch chunks; ranks 0 and 2 relay nothing.
TEST(LowerSchedule, LineAllToAllRelaysThroughScratch) {
  Line3 line;
  const ChunkProblem p = makeChunkProblem(CollectiveKind::kAllToAll, line.lt, 2, 0, 6 * 1024);
  const Schedule s = greedy(line.lt, p, lineTrees(p));
  const Algorithm a = emit(forwardRequest(CollectiveKind::kAllToAll, line.lt, p, s));
  EXPECT_EQ(a.num_chunks, 6);
  EXPECT_FALSE(a.in_place);
  EXPECT_TRUE(a.out_of_place);
  EXPECT_EQ(a.ranks[0].scratch_chunks, 0);
  EXPECT_EQ(a.ranks[1].scratch_chunks, 4);
  EXPECT_EQ(a.ranks[2].scratch_chunks, 0);
  expectAllGood(a);
}

// A hub: rank 1 is linked to 0, 2 and 3 (4 ranks). Rank 1 relays every chunk of 0, 2, 3, and in the reverse
// direction reduces two children's partial sums (chained rrc into scratch) before sending to the owner.
struct Hub4 {
  LogicalTopology lt = logical(4, duplex({{1, 0}, {1, 2}, {1, 3}}));
};

std::vector<std::vector<std::pair<int, int>>> hubTrees(const ChunkProblem& p) {
  std::vector<std::vector<std::pair<int, int>>> trees(p.chunks.size());
  for (const Chunk& c : p.chunks) {
    if (c.dest >= 0) {
      if (c.owner != 1) trees[c.id].push_back({c.owner, 1});
      if (c.dest != 1) trees[c.id].push_back({1, c.dest});
      continue;
    }
    if (c.owner != 1) trees[c.id].push_back({c.owner, 1});
    for (int r = 0; r < 4; ++r) {
      if (r != 1 && r != c.owner) trees[c.id].push_back({1, r});
    }
  }
  return trees;
}

TEST(LowerSchedule, HubAllCollectives) {
  Hub4 hub;
  const ChunkProblem p = makeChunkProblem(CollectiveKind::kAllGather, hub.lt, 1, 0, 4096);
  const Schedule s = greedy(hub.lt, p, hubTrees(p));
  expectAllGood(emit(forwardRequest(CollectiveKind::kAllGather, hub.lt, p, s)));
  const Algorithm rs = emit(reverseRequest(CollectiveKind::kReduceScatter, hub.lt, p, s));
  // The greedy all-gather: [0,1] every owner's first hop (1 sends chunk 1 to all); [1,2] 1 -> 2 and 1 -> 3
  // chunk 0, 1 -> 0 chunk 2; [2,3] 1 -> 3 chunk 2, 1 -> 0 and 1 -> 2 chunk 3. Backwards (T = 3) rank 1 gets,
  // for each of the chunks 0, 2, 3 that it relays, two children's partial sums before it sends to the owner:
  // the first is reduced with its input into a scratch slot, the second with that slot, so it needs one
  // scratch chunk for each of the three (the second receive fuses with the send into rrs where adjacent, but
  // the first one's result still lives in scratch) -> 3 scratch chunks; the leaves 0, 2, 3 need none.
  EXPECT_EQ(rs.ranks[1].scratch_chunks, 3);
  for (int leaf : {0, 2, 3}) EXPECT_EQ(rs.ranks[leaf].scratch_chunks, 0);
  expectAllGood(rs);
  EmitRequest r = allReduceRequest(hub.lt, p, s, s);
  expectAllGood(emit(r));
  const ChunkProblem q = makeChunkProblem(CollectiveKind::kAllToAll, hub.lt, 2, 0, 8 * 1024);
  expectAllGood(emit(forwardRequest(CollectiveKind::kAllToAll, hub.lt, q, greedy(hub.lt, q, hubTrees(q)))));
}

// Broadcast from root 2 and reduce to root 0 on the hub, chunkup 3: the broadcast tree is 2 -> 1 -> {0, 3}; the
// reduce is the broadcast from 0 (0 -> 1 -> {2, 3}) run backwards: 2 and 3 send their inputs to 1, which reduces
// them with its own and sends the sum to 0; 0 reduces it into o[j].
TEST(LowerSchedule, HubBroadcastAndReduce) {
  Hub4 hub;
  const ChunkProblem b = makeChunkProblem(CollectiveKind::kBroadcast, hub.lt, 3, 2, 3 * 1024);
  std::vector<std::vector<std::pair<int, int>>> btrees(b.chunks.size(), {{2, 1}, {1, 0}, {1, 3}});
  const Algorithm bc = emit(forwardRequest(CollectiveKind::kBroadcast, hub.lt, b, greedy(hub.lt, b, btrees)));
  EXPECT_EQ(bc.root, 2);
  EXPECT_EQ(bc.num_chunks, 3);
  expectAllGood(bc);
  const ChunkProblem rp = makeChunkProblem(CollectiveKind::kBroadcast, hub.lt, 3, 0, 3 * 1024);
  std::vector<std::vector<std::pair<int, int>>> rtrees(rp.chunks.size(), {{0, 1}, {1, 2}, {1, 3}});
  const Schedule rs = greedy(hub.lt, rp, rtrees);
  EmitRequest r = reverseRequest(CollectiveKind::kReduce, hub.lt, rp, rs);
  const Algorithm red = emit(r);
  EXPECT_EQ(red.root, 0);
  EXPECT_EQ(red.redop, "sum");
  // Root 0 receives only from 1: every step it runs reduces into o[j] from i[j] (rrc), no scratch.
  EXPECT_EQ(red.ranks[0].scratch_chunks, 0);
  for (const Threadblock& tb : red.ranks[0].threadblocks) {
    for (const Step& step : tb.steps) EXPECT_EQ(step.type, OpType::kRecvReduceCopy);
  }
  expectAllGood(red);
}

// ---- contiguity groups -------------------------------------------------------------------------------

// Two nodes of two ranks: {0, 1} and {2, 3}; intra-node links 0 <-> 1, 2 <-> 3, inter-node links 1 <-> 2.
// All-gather, c = 1:
//   [0,1]  0 -> 1 chunk 0, 1 -> 0 chunk 1, 2 -> 3 chunk 2, 3 -> 2 chunk 3
//   [1,3]  1 -> 2 chunks {0, 1} as one group, 2 -> 1 chunks {2, 3} as one group
//   [3,5]  2 -> 3 chunks {0, 1} as one group, 1 -> 0 chunks {2, 3} as one group
// Chunks 0 and 1 are output chunks 0 and 1 at both ends of 1 -> 2, so the group is one step of cnt 2:
// rank 1 sends o[0..2) (it waits on its receive of chunk 0 and on its own copy into o[1]); rank 2 receives it
// into o[0..2) and, since the next step of that threadblock sends exactly those chunks to 3, as one rcs of cnt 2.
TEST(LowerSchedule, TwoNodeGroupIsOneStep) {
  const LogicalTopology lt = logical(4, duplex({{0, 1}, {2, 3}, {1, 2}}), {0, 0, 1, 1});
  const ChunkProblem p = makeChunkProblem(CollectiveKind::kAllGather, lt, 1, 0, 4096);
  const std::vector<Hop> hops = {{0, 0, 1, 0, 1}, {1, 1, 0, 0, 1}, {2, 2, 3, 0, 1}, {3, 3, 2, 0, 1},
                                 {0, 1, 2, 1, 3}, {1, 1, 2, 1, 3}, {2, 2, 1, 1, 3}, {3, 2, 1, 1, 3},
                                 {0, 2, 3, 3, 5}, {1, 2, 3, 3, 5}, {2, 1, 0, 3, 5}, {3, 1, 0, 3, 5}};
  const Schedule s = schedule(lt, hops, {{4, 5}, {6, 7}, {8, 9}, {10, 11}});
  const Algorithm a = emit(forwardRequest(CollectiveKind::kAllGather, lt, p, s));
  auto find = [&](int rank, int peer, bool sending, OpType type) -> const Step* {
    for (const Threadblock& tb : a.ranks[rank].threadblocks) {
      if ((sending ? tb.send_peer : tb.recv_peer) != peer) continue;
      for (const Step& step : tb.steps) {
        if (step.type == type) return &step;
      }
    }
    return nullptr;
  };
  const Step* send12 = find(1, 2, true, OpType::kSend);
  ASSERT_NE(send12, nullptr);
  EXPECT_EQ(send12->count, 2);
  EXPECT_EQ(send12->src_buf, kO);
  EXPECT_EQ(send12->src_off, 0);
  const Step* recv21 = find(2, 1, false, OpType::kRecvCopySend);
  ASSERT_NE(recv21, nullptr);
  EXPECT_EQ(recv21->count, 2);
  EXPECT_EQ(recv21->dst_buf, kO);
  EXPECT_EQ(recv21->dst_off, 0);
  // Symmetric the other way: rank 2 sends o[2..4) to 1 in one step.
  const Step* send21 = find(2, 1, true, OpType::kSend);
  ASSERT_NE(send21, nullptr);
  EXPECT_EQ(send21->count, 2);
  EXPECT_EQ(send21->src_off, 2);
  // 12 transfers in 8 messages: 8 sends and 8 receives in all (fused steps count once for each side).
  int sends = 0, recvs = 0;
  for (const RankProgram& rp : a.ranks) {
    for (const Threadblock& tb : rp.threadblocks) {
      for (const Step& step : tb.steps) {
        sends += opSends(step.type) ? 1 : 0;
        recvs += opReceives(step.type) ? 1 : 0;
      }
    }
  }
  EXPECT_EQ(sends, 8);
  EXPECT_EQ(recvs, 8);
  expectAllGood(a);
}

// A group whose chunks are not contiguous at the receiver is split into contiguous runs, the same way at both
// ends. Rank 0 sends chunks of owners 1 and 3 (relayed) to rank 2 as one group on a 4-rank fully connected
// topology: at the receiver they are o[1] and o[3] -> two steps of cnt 1.
TEST(LowerSchedule, NonContiguousGroupIsSplit) {
  std::vector<std::pair<int, int>> all;
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < 4; ++b) {
      if (a != b) all.push_back({a, b});
    }
  }
  const LogicalTopology lt = logical(4, all);
  const ChunkProblem p = makeChunkProblem(CollectiveKind::kAllGather, lt, 1, 0, 4096);
  std::vector<Hop> hops;
  // Chunks 1 and 3 reach 0 first at [0,1]; 0 relays both to 2 together at [1,3]; every other pair direct.
  hops.push_back({1, 1, 0, 0, 1});
  hops.push_back({3, 3, 0, 0, 1});
  hops.push_back({1, 0, 2, 1, 3});
  hops.push_back({3, 0, 2, 1, 3});
  for (int o = 0; o < 4; ++o) {
    for (int r = 0; r < 4; ++r) {
      if (r == o || (r == 0 && (o == 1 || o == 3)) || (r == 2 && (o == 1 || o == 3))) continue;
      hops.push_back({o, o, r, 3, 4});
    }
  }
  const Schedule s = schedule(lt, hops, {{2, 3}});
  const Algorithm a = emit(forwardRequest(CollectiveKind::kAllGather, lt, p, s));
  int relay_steps = 0;
  for (const Threadblock& tb : a.ranks[0].threadblocks) {
    if (tb.send_peer != 2) continue;
    for (const Step& step : tb.steps) {
      if (opSends(step.type) && step.src_off % 2 == 1) {
        ++relay_steps;
        EXPECT_EQ(step.count, 1);
      }
    }
  }
  EXPECT_EQ(relay_steps, 2);
  expectAllGood(a);
}

// ---- the step limit ----------------------------------------------------------------------------------

// max_steps_per_tb = 7 on the 4-rank ring all-gather with chunkup 3 (hop s of piece j at [3s + j, 3s + j + 1]).
// Unspread, rank v's one threadblock interleaves the pieces: at time t it receives a piece and sends another
// (own piece t, or the forward of the piece received at t - 2), so nothing fuses: cpy + 9 sends + 9 receives =
// 19 steps. Each pair's 9 messages spread over K = min(9 messages, ceil(19 / 7) = 3) channels. Chunk (o, j) has
// id 3o + j, so by data chain piece j runs on channel j on every pair (3 messages per channel: even) and each
// channel is the ring all-gather of one piece, where receive and forward are adjacent again: per rank one
// threadblock (send v+1, recv v-1) per channel j:
//   [channel 0 only: cpy i[0..3) -> o[3v..3v+3)]; s o[3v+j]; rcs o[3(v-1)+j]; rcs o[3(v-2)+j]; r o[3(v-3)+j]
// (channels 1 and 2 wait for the cpy on channel 0: one cross-threadblock dependency each).
TEST(LowerSchedule, StepLimitSpreadsChainsOverChannels) {
  const int n = 4, c = 3;
  const LogicalTopology lt = logical(n, ringLinks(n));
  const ChunkProblem p = makeChunkProblem(CollectiveKind::kAllGather, lt, c, 0, 4096 * 3);
  const Schedule s = ringSchedule(lt, p, +1);
  EmitRequest r = forwardRequest(CollectiveKind::kAllGather, lt, p, s);
  r.max_steps_per_tb = 7;
  const Algorithm a = emit(r);
  EXPECT_EQ(a.num_channels, 3);
  EXPECT_TRUE(a.notes.empty());
  for (int v = 0; v < n; ++v) {
    ASSERT_EQ(a.ranks[v].threadblocks.size(), 3u) << "rank " << v;
    for (const Threadblock& tb : a.ranks[v].threadblocks) {
      const int j = tb.channel;
      EXPECT_EQ(tb.send_peer, mod(v + 1, n));
      EXPECT_EQ(tb.recv_peer, mod(v - 1, n));
      std::vector<StepShape> want;
      if (j == 0) want.push_back({OpType::kCopy, kI, 0, kO, 3 * v, 3});
      want.push_back({OpType::kSend, kO, 3 * v + j, kO, -1, 1});
      want.push_back({OpType::kRecvCopySend, kI, -1, kO, 3 * mod(v - 1, n) + j, 1});
      want.push_back({OpType::kRecvCopySend, kI, -1, kO, 3 * mod(v - 2, n) + j, 1});
      want.push_back({OpType::kRecv, kI, -1, kO, 3 * mod(v - 3, n) + j, 1});
      expectSteps(tb, want, fmt::format("rank {} channel {}", v, j));
      int cross = 0;
      for (const Step& step : tb.steps) cross += static_cast<int>(step.deps.size());
      EXPECT_EQ(cross, j == 0 ? 0 : 1) << "rank " << v << " channel " << j;
    }
  }
  expectAllGood(a);
}

// max_steps_per_tb = 2 on the 4-rank ring all-gather with chunkup 1: every pair carries 3 of the 4 chunks, so
// no chain assignment spreads them evenly over 3 channels and the pairs fall back to round-robin; whatever the
// mix, every threadblock ends within 2 steps on at most 3 channels (3 messages per pair).
TEST(LowerSchedule, StepLimitFallsBackToRoundRobin) {
  const int n = 4;
  const LogicalTopology lt = logical(n, ringLinks(n));
  const ChunkProblem p = makeChunkProblem(CollectiveKind::kAllGather, lt, 1, 0, 4096);
  const Schedule s = ringSchedule(lt, p, +1);
  EmitRequest r = forwardRequest(CollectiveKind::kAllGather, lt, p, s);
  r.max_steps_per_tb = 2;
  const Algorithm a = emit(r);
  EXPECT_GT(a.num_channels, 1);
  EXPECT_LE(a.num_channels, 3);
  for (const RankProgram& rp : a.ranks) {
    for (const Threadblock& tb : rp.threadblocks) EXPECT_LE(tb.steps.size(), 2u) << stepsText(tb);
  }
  EXPECT_TRUE(a.notes.empty());
  expectAllGood(a);
}

// The same limit on the ring all-reduce (7 steps per threadblock) also spreads, and the result still
// verifies and runs; a limit that cannot be met (1 step: a cpy and a send share channel 0's threadblock)
// leaves a note instead of failing.
TEST(LowerSchedule, StepLimitOnAllReduceAndUnreachableLimit) {
  const int n = 4;
  const LogicalTopology lt = logical(n, ringLinks(n));
  const ChunkProblem p = makeChunkProblem(CollectiveKind::kAllGather, lt, 2, 0, 8192);
  const Schedule fwd = ringSchedule(lt, p, +1);
  const Schedule rev = ringSchedule(lt, p, -1);
  EmitRequest r = allReduceRequest(lt, p, fwd, rev);
  r.max_steps_per_tb = 4;
  const Algorithm a = emit(r);
  EXPECT_GT(a.num_channels, 1);
  for (const RankProgram& rp : a.ranks) {
    for (const Threadblock& tb : rp.threadblocks) EXPECT_LE(tb.steps.size(), 4u);
  }
  expectAllGood(a);
  EmitRequest g = forwardRequest(CollectiveKind::kAllGather, lt, p, fwd);
  g.max_steps_per_tb = 1;
  const Algorithm tight = emit(g);
  ASSERT_EQ(tight.notes.size(), 1u);
  EXPECT_NE(tight.notes[0].find("max_steps_per_tb"), std::string::npos) << tight.notes[0];
  expectVerified(tight);
}

// ---- threadblocks per channel ----------------------------------------------------------------------------

// A hub with 34 leaves (35 ranks, all-gather through rank 0): the hub receives from 34 peers and forwards to 34,
// so even with every receive paired with a send it has 34 threadblocks on channel 0, above the Azure executor's
// 32 per channel; the connections of the last two move to channel 1 (both ends follow).
TEST(LowerSchedule, ThreadblocksPerChannelStayWithinTheExecutorLimit) {
  const int n = 35;
  std::vector<std::pair<int, int>> spokes;
  for (int r = 1; r < n; ++r) spokes.push_back({0, r});
  const LogicalTopology lt = logical(n, duplex(spokes));
  const ChunkProblem p = makeChunkProblem(CollectiveKind::kAllGather, lt, 1, 0, 35 * 1024);
  std::vector<std::vector<std::pair<int, int>>> trees(p.chunks.size());
  for (const Chunk& c : p.chunks) {
    if (c.owner != 0) trees[c.id].push_back({c.owner, 0});
    for (int r = 1; r < n; ++r) {
      if (r != c.owner) trees[c.id].push_back({0, r});
    }
  }
  const Algorithm a = emit(forwardRequest(CollectiveKind::kAllGather, lt, p, greedy(lt, p, trees)));
  EXPECT_EQ(a.num_channels, 2);
  for (const RankProgram& rp : a.ranks) {
    std::map<int, int> per_channel;
    for (const Threadblock& tb : rp.threadblocks) ++per_channel[tb.channel];
    for (const auto& [ch, count] : per_channel) EXPECT_LE(count, 32) << "rank " << rp.rank << " channel " << ch;
  }
  EXPECT_EQ(a.ranks[0].threadblocks.size(), 34u);
  EXPECT_TRUE(a.notes.empty());
  expectVerified(a);
  expectExecutesCorrectly(a, {7});
}

// ---- errors ----------------------------------------------------------------------------------------------

TEST(LowerSchedule, RejectsBrokenSchedules) {
  const int n = 4;
  const LogicalTopology lt = logical(n, ringLinks(n));
  const ChunkProblem p = makeChunkProblem(CollectiveKind::kAllGather, lt, 1, 0, 4096);
  // A relay that forwards a chunk it never received: drop the first hop of chunk 0.
  {
    std::vector<Hop> hops;
    for (int s = 0; s < 3; ++s) {
      for (int o = 0; o < n; ++o) {
        if (o == 0 && s == 0) continue;
        hops.push_back({o, mod(o + s, n), mod(o + s + 1, n), double(s), double(s + 1)});
      }
    }
    const Schedule s = schedule(lt, hops);
    Result<Algorithm> a = emitProgram(forwardRequest(CollectiveKind::kAllGather, lt, p, s));
    ASSERT_FALSE(a.isOk());
    EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(a.status().message().find("never receives"), std::string::npos) << a.status().message();
  }
  // Times that run backwards: rank 1 forwards chunk 0 at [0,1] but receives it only at [1,2].
  {
    std::vector<Hop> hops;
    for (int s = 0; s < 3; ++s) {
      for (int o = 0; o < n; ++o) {
        const double start = (o == 0 && s == 0) ? 1 : (o == 0 && s == 1) ? 0 : s;
        hops.push_back({o, mod(o + s, n), mod(o + s + 1, n), start, start + 1});
      }
    }
    const Schedule s = schedule(lt, hops);
    Result<Algorithm> a = emitProgram(forwardRequest(CollectiveKind::kAllGather, lt, p, s));
    ASSERT_FALSE(a.isOk());
    EXPECT_EQ(a.status().code(), StatusCode::kInternalError);
    EXPECT_NE(a.status().message().find("not causal"), std::string::npos) << a.status().message();
  }
  // A target that never gets a chunk.
  {
    const Schedule s = schedule(lt, {{0, 0, 1, 0, 1}});
    Result<Algorithm> a = emitProgram(forwardRequest(CollectiveKind::kAllGather, lt, p, s));
    ASSERT_FALSE(a.isOk());
    EXPECT_NE(a.status().message().find("never receives"), std::string::npos);
  }
  // Missing parts and a pattern that does not fit the collective.
  {
    const Schedule s = ringSchedule(lt, p, +1);
    EmitRequest r = forwardRequest(CollectiveKind::kReduceScatter, lt, p, s);  // needs the reverse part
    EXPECT_EQ(emitProgram(r).status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(emitProgram(forwardRequest(CollectiveKind::kAllToAll, lt, p, s)).status().code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ(emitProgram(forwardRequest(CollectiveKind::kCustom, lt, p, s)).status().code(), StatusCode::kUnsupported);
  }
  // A group that is not a run of one link's order.
  {
    const Schedule good = ringSchedule(lt, p, +1);
    Schedule bad = good;
    bad.groups = {{0, 1}};  // transfers 0 (0 -> 1) and 1 (1 -> 2) are on different links
    for (int t = 2; t < static_cast<int>(bad.transfers.size()); ++t) bad.groups.push_back({t});
    Result<Algorithm> a = emitProgram(forwardRequest(CollectiveKind::kAllGather, lt, p, bad));
    ASSERT_FALSE(a.isOk());
    EXPECT_NE(a.status().message().find("mixes links"), std::string::npos) << a.status().message();
  }
}

// A reduction tree that leaves a rank out cannot produce the sum: an error naming the rank, not a program that
// fails verification.
TEST(LowerSchedule, ReductionNeedsEveryRank) {
  Line3 line;
  const ChunkProblem p = makeChunkProblem(CollectiveKind::kBroadcast, line.lt, 1, 0, 1024);
  ChunkProblem partial = p;
  partial.chunks[0].targets = {1};  // rank 2 dropped from the targets and the tree
  const Schedule s = schedule(line.lt, {{0, 0, 1, 0, 1}});
  Result<Algorithm> a = emitProgram(reverseRequest(CollectiveKind::kReduce, line.lt, partial, s));
  ASSERT_FALSE(a.isOk());
  EXPECT_NE(a.status().message().find("rank 2 is not in the tree"), std::string::npos) << a.status().message();
}

}  // namespace
}  // namespace braid::synth
