// The verifier's replay (verify_internal.h): symbolic values and the FIFO-order execution of every
// threadblock that pairs receives with sends, finds deadlocks and unreceived sends, and proves the
// postcondition. Race checks run inside it (verify_races.cc). The execution model is verify.cc's.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ir/verify_internal.h"

namespace braid::verifier {

// The multiset of a defined value, sorted by element. Linear in the nodes reachable from x (not in
// its size): multiplicities are pushed from x down to the leaves in decreasing id order.
std::vector<Counted> ValueArena::flatten(int32_t x) {
  if (isLeaf(x)) return {Counted{leafRef(x), 1}};
  if (mult_.size() < nodes_.size()) {
    mult_.resize(nodes_.size(), 0);
    seen_.resize(nodes_.size(), 0);
  }
  if (++stamp_ == 0) {
    std::fill(seen_.begin(), seen_.end(), 0);
    stamp_ = 1;
  }
  std::vector<int32_t> inner;
  std::vector<int32_t> leaves;
  std::vector<int32_t> stack{x};
  seen_[x] = stamp_;
  bool tree = true;  // no node reachable twice: every element occurs once per path, no sort needed
  while (!stack.empty()) {
    const int32_t y = stack.back();
    stack.pop_back();
    if (isLeaf(y)) {
      leaves.push_back(y);
      continue;
    }
    inner.push_back(y);
    for (int32_t child : {nodes_[y].a, nodes_[y].b}) {
      if (seen_[child] != stamp_) {
        seen_[child] = stamp_;
        stack.push_back(child);
      } else {
        tree = false;
      }
    }
  }
  std::vector<Counted> out;
  out.reserve(leaves.size());
  if (tree) {
    for (int32_t y : leaves) out.push_back(Counted{leafRef(y), 1});
  } else {
    std::sort(inner.begin(), inner.end(), std::greater<>());
    mult_[x] = 1;
    for (int32_t y : inner) {
      mult_[nodes_[y].a] = saturatingAdd(mult_[nodes_[y].a], mult_[y]);
      mult_[nodes_[y].b] = saturatingAdd(mult_[nodes_[y].b], mult_[y]);
      mult_[y] = 0;
    }
    for (int32_t y : leaves) {
      out.push_back(Counted{leafRef(y), mult_[y]});
      mult_[y] = 0;
    }
  }
  std::sort(out.begin(), out.end(), [](const Counted& a, const Counted& b) { return a.first < b.first; });
  size_t kept = 0;  // one leaf per input chunk in practice; merge equal elements all the same
  for (size_t i = 0; i < out.size(); ++i) {
    if (kept > 0 && out[kept - 1].first == out[i].first) {
      out[kept - 1].second = saturatingAdd(out[kept - 1].second, out[i].second);
    } else {
      out[kept++] = out[i];
    }
  }
  out.resize(kept);
  return out;
}

// True when value x is exactly the multiset `expected` (compared as the sorted sequence).
bool ValueArena::equals(int32_t x, const ChunkValue& expected) {
  if (x == kUndefined || size(x) != expected.size()) return false;
  if (isLeaf(x)) return expected[0] == leafRef(x);
  size_t i = 0;
  for (const auto& [ref, count] : flatten(x)) {
    for (uint64_t c = 0; c < count; ++c, ++i) {
      if (!(expected[i] == ref)) return false;
    }
  }
  return true;
}

std::string ValueArena::text(int32_t x) {
  if (x == kUndefined) return "undefined";
  std::string text = "{";
  for (const auto& [ref, count] : flatten(x)) {
    if (text.size() > 1) text += ",";
    text += fmt::format("({},{})", ref.rank, ref.index);
    if (count > 1) text += fmt::format("x{}", count);
  }
  return text + "}";
}

// Names the elements that occur more than once (double counting), or "" when none does.
std::string ValueArena::duplicatesText(int32_t x) {
  std::string text;
  if (x == kUndefined) return text;
  for (const auto& [ref, count] : flatten(x)) {
    if (count < 2) continue;
    if (!text.empty()) text += ", ";
    text += fmt::format("({},{})", ref.rank, ref.index);
  }
  return text;
}

std::string refsText(const std::vector<ChunkRef>& refs) {
  std::string text = "{";
  for (size_t i = 0; i < refs.size();) {
    size_t j = i;
    while (j < refs.size() && refs[j] == refs[i]) ++j;
    if (i > 0) text += ",";
    text += fmt::format("({},{})", refs[i].rank, refs[i].index);
    if (j - i > 1) text += fmt::format("x{}", j - i);
    i = j;
  }
  return text + "}";
}

std::string stepWhere(int rank, int tb, int step, OpType type) {
  return fmt::format("rank {} tb {} step {} ({})", rank, tb, step, opTypeName(type));
}

void Simulator::run() {
  setUp();
  std::deque<int> work;
  std::vector<char> queued(gtb_rank_.size(), 1);
  for (size_t g = 0; g < gtb_rank_.size(); ++g) work.push_back(static_cast<int>(g));
  while (!work.empty()) {
    const int g = work.front();
    work.pop_front();
    queued[g] = 0;
    // Waking a threadblock that is already queued does nothing and nothing leaves the queue while g
    // runs, so its dependents and receivers need waking once per run of g, not once per step.
    bool woke_dependents = false;
    bool woke_receivers = false;
    while (runnable(g)) {
      const bool sent = execute(g);
      if (!woke_dependents) {
        woke_dependents = true;
        for (const int32_t* w = dependents_.begin(g); w != dependents_.end(g); ++w) {
          if (!queued[*w]) queued[*w] = 1, work.push_back(*w);
        }
      }
      if (sent && !woke_receivers) {
        woke_receivers = true;
        for (const int32_t* w = receivers_.begin(send_conn_[g]); w != receivers_.end(send_conn_[g]); ++w) {
          if (!queued[*w]) queued[*w] = 1, work.push_back(*w);
        }
      }
    }
  }
  const bool deadlocked = reportDeadlocks();
  reportLeftovers();
  if (!deadlocked) checkPostcondition();
}

void Simulator::setUp() {
  const int n = spec_.num_ranks;
  const int in = spec_.inputChunks();
  const int out = spec_.outputChunks();
  layout_.resize(n);
  storage_.resize(n);
  tb_base_.resize(n);
  for (int r = 0; r < n; ++r) {
    const RankProgram& program = algorithm_.ranks[r];
    Layout& l = layout_[r];
    if (!spec_.in_place) {
      l.in_base = 0;
      l.out_base = in;
      l.scratch_base = in + out;
    } else if (spec_.kind == CollectiveKind::kReduceScatter) {
      l.in_base = 0;
      l.out_base = 0;  // every output chunk aliases into the input
      l.scratch_base = in;
    } else {
      l.in_base = 0;  // every input chunk aliases into the output
      l.out_base = 0;
      l.scratch_base = out;
    }
    l.size = l.scratch_base + std::max(0, program.scratch_chunks);
    storage_[r].assign(l.size, kUndefined);
    for (int i = 0; i < in; ++i) storage_[r][cellOf(r, BufferKind::kInput, i)] = values_.leaf(r, i);
    for (const PreCopy& copy : program.precopies) {
      std::vector<int32_t> values;
      for (int k = 0; k < copy.count; ++k)
        values.push_back(storage_[r][cellOf(r, BufferKind::kInput, copy.input_off + k)]);
      for (int k = 0; k < copy.count; ++k) storage_[r][cellOf(r, BufferKind::kOutput, copy.output_off + k)] = values[k];
    }
    tb_base_[r] = static_cast<int>(gtb_rank_.size());
    for (size_t t = 0; t < program.threadblocks.size(); ++t) {
      gtb_rank_.push_back(r);
      gtb_local_.push_back(static_cast<int>(t));
    }
  }
  const size_t num_gtb = gtb_rank_.size();
  pc_.assign(num_gtb, 0);
  step_base_.assign(num_gtb + 1, 0);
  std::vector<ConnKey> keys;
  std::vector<int64_t> dep_count(num_gtb + 1, 0);
  for (size_t g = 0; g < num_gtb; ++g) {
    const Threadblock& tb = tbOf(static_cast<int>(g));
    const int r = gtb_rank_[g];
    step_base_[g + 1] = step_base_[g] + static_cast<int64_t>(tb.steps.size());
    if (tb.send_peer >= 0) keys.emplace_back(r, tb.send_peer, tb.channel);
    if (tb.recv_peer >= 0) keys.emplace_back(tb.recv_peer, r, tb.channel);
    for (const Step& step : tb.steps) {
      if (opSends(step.type)) ++send_count_;
      for (const Dependency& dep : step.deps) ++dep_count[tb_base_[r] + dep.tb + 1];
    }
  }
  // dependents_: global tb -> the global tbs that depend on one of its steps, sorted, no repeats.
  for (size_t g = 0; g < num_gtb; ++g) dep_count[g + 1] += dep_count[g];
  std::vector<int32_t> raw(dep_count[num_gtb]);
  std::vector<int64_t> fill(dep_count.begin(), dep_count.end() - 1);
  for (size_t g = 0; g < num_gtb; ++g) {
    const int r = gtb_rank_[g];
    for (const Step& step : tbOf(static_cast<int>(g)).steps) {
      for (const Dependency& dep : step.deps) raw[fill[tb_base_[r] + dep.tb]++] = static_cast<int32_t>(g);
    }
  }
  dependents_.start.assign(num_gtb + 1, 0);
  for (size_t g = 0; g < num_gtb; ++g) {
    auto first = raw.begin() + dep_count[g];
    auto last = raw.begin() + dep_count[g + 1];
    std::sort(first, last);
    last = std::unique(first, last);
    dependents_.items.insert(dependents_.items.end(), first, last);
    dependents_.start[g + 1] = static_cast<int64_t>(dependents_.items.size());
  }
  raw = {};
  // Connections get ids in (source, destination, channel) order.
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  conn_keys_ = std::move(keys);
  connections_.resize(conn_keys_.size());
  send_conn_.assign(num_gtb, -1);
  recv_conn_.assign(num_gtb, -1);
  auto connId = [&](int src, int dst, int channel) {
    return static_cast<int32_t>(std::lower_bound(conn_keys_.begin(), conn_keys_.end(), ConnKey{src, dst, channel}) -
                                conn_keys_.begin());
  };
  receivers_.start.assign(conn_keys_.size() + 1, 0);
  for (size_t g = 0; g < num_gtb; ++g) {
    const Threadblock& tb = tbOf(static_cast<int>(g));
    const int r = gtb_rank_[g];
    if (tb.send_peer >= 0) send_conn_[g] = connId(r, tb.send_peer, tb.channel);
    if (tb.recv_peer >= 0) {
      recv_conn_[g] = connId(tb.recv_peer, r, tb.channel);
      ++receivers_.start[recv_conn_[g] + 1];
    }
  }
  // receivers_: connection -> the threadblocks that receive on it, in global id order.
  for (size_t c = 0; c < conn_keys_.size(); ++c) receivers_.start[c + 1] += receivers_.start[c];
  receivers_.items.resize(receivers_.start.back());
  fill.assign(receivers_.start.begin(), receivers_.start.end() - 1);
  for (size_t g = 0; g < num_gtb; ++g) {
    if (recv_conn_[g] >= 0) receivers_.items[fill[recv_conn_[g]]++] = static_cast<int32_t>(g);
  }
  // Dependency targets: the steps whose clocks are kept for the steps that wait on them.
  snap_slot_.assign(step_base_[num_gtb], -1);
  target_count_ = 0;
  for (size_t g = 0; g < num_gtb; ++g) {
    const int r = gtb_rank_[g];
    for (const Step& step : tbOf(static_cast<int>(g)).steps) {
      for (const Dependency& dep : step.deps) {
        int32_t& slot = snap_slot_[step_base_[tb_base_[r] + dep.tb] + dep.step];
        if (slot < 0) slot = static_cast<int32_t>(target_count_++);
      }
    }
  }
  setUpRaceTracking();
}

bool Simulator::runnable(int g) const {
  const Threadblock& tb = tbOf(g);
  const int k = pc_[g];
  if (k >= static_cast<int>(tb.steps.size())) return false;
  const Step& step = tb.steps[k];
  const int r = gtb_rank_[g];
  for (const Dependency& dep : step.deps) {
    if (!depDone(r, dep)) return false;
  }
  if (opReceives(step.type) && connections_[recv_conn_[g]].head < 0) return false;
  return true;
}

// Runs the next step of global threadblock g; returns whether it sent.
bool Simulator::execute(int g) {
  const int r = gtb_rank_[g];
  const int t = gtb_local_[g];
  const Threadblock& tb = tbOf(g);
  const int k = pc_[g];
  const Step& step = tb.steps[k];
  const int count = step.count;

  const bool track = track_races_;
  const bool track_global = track && global_size_ > 0;
  const size_t local_size = local_size_[r];
  if (track) {
    for (const Dependency& dep : step.deps) {
      const int32_t slot = snap_slot_[step_base_[tb_base_[r] + dep.tb] + dep.step];
      joinInto(localClock(g), local_snaps_.data() + local_snap_offset_[slot], local_size);
      if (track_global) {
        joinInto(globalClock(g), global_snaps_.data() + static_cast<size_t>(global_size_) * slot, global_size_);
      }
    }
  }

  if (opReceives(step.type)) {
    Connection& conn = connections_[recv_conn_[g]];
    const int32_t id = conn.head;
    Message& message = messages_[id];
    conn.head = message.next;
    if (conn.head < 0) conn.tail = -1;
    if (track_global) joinInto(globalClock(g), message.clock.data(), global_size_);
    if (static_cast<int>(message.data.size()) != count) {
      sink_.add(IssueKind::kPeerMismatch, r, t, k, -1,
                fmt::format("{}: receives {} chunk(s) but the matching send, rank {} tb {} step {}, sent {}",
                            stepWhere(r, t, k, step.type), count, tb.recv_peer, message.tb, message.step,
                            message.data.size()),
                mode_);
    }
    received_.assign(count, kUndefined);  // missing chunks arrive undefined
    std::copy_n(message.data.begin(), std::min<size_t>(count, message.data.size()), received_.begin());
    message.next = free_message_;
    free_message_ = id;
    if (track) {
      setEpoch(g, k + 1);
      noteConnectionUse(conn.last_recv_gtb, conn.last_recv_step, g, k, r, "receive from", tb.recv_peer, tb.channel);
    }
  }
  if (track) setEpoch(g, k + 1);

  const std::vector<int32_t>& hist = hist_index_[r];
  std::vector<int32_t>& cells = storage_[r];
  auto readRange = [&](BufferKind b, int offset, std::vector<int32_t>& values) {
    values.resize(count);
    for (int i = 0; i < count; ++i) {
      const int cell = cellOf(r, b, offset + i);
      if (track && !hist.empty() && hist[cell] >= 0) noteRead(r, hist[cell], Access{g, k + 1, t, k, b, offset + i});
      values[i] = cells[cell];
    }
  };
  auto writeRange = [&](BufferKind b, int offset, const std::vector<int32_t>& values) {
    for (int i = 0; i < count; ++i) {
      const int cell = cellOf(r, b, offset + i);
      if (track && !hist.empty() && hist[cell] >= 0) noteWrite(r, hist[cell], Access{g, k + 1, t, k, b, offset + i});
      cells[cell] = values[i];
    }
  };
  auto combine = [&](const std::vector<int32_t>& a, const std::vector<int32_t>& b, std::vector<int32_t>& out) {
    out.resize(count);
    for (int i = 0; i < count; ++i) out[i] = values_.reduce(a[i], b[i]);
  };

  const std::vector<int32_t>* outgoing = nullptr;
  switch (step.type) {
    case OpType::kSend:
      readRange(step.src_buf, step.src_off, src_);
      outgoing = &src_;
      break;
    case OpType::kRecv: writeRange(step.dst_buf, step.dst_off, received_); break;
    case OpType::kRecvCopySend:
      writeRange(step.dst_buf, step.dst_off, received_);
      outgoing = &received_;
      break;
    case OpType::kRecvReduceSend:
      readRange(step.src_buf, step.src_off, src_);
      combine(src_, received_, result_);
      outgoing = &result_;
      break;
    case OpType::kRecvReduceCopy:
      readRange(step.src_buf, step.src_off, src_);
      combine(src_, received_, result_);
      writeRange(step.dst_buf, step.dst_off, result_);
      break;
    case OpType::kRecvReduceCopySend:
      readRange(step.src_buf, step.src_off, src_);
      combine(src_, received_, result_);
      writeRange(step.dst_buf, step.dst_off, result_);
      outgoing = &result_;
      break;
    case OpType::kCopy:
      readRange(step.src_buf, step.src_off, src_);
      writeRange(step.dst_buf, step.dst_off, src_);
      break;
    case OpType::kReduce:
      // src is read before dst, the order the verifier has always reported conflicting reads in.
      readRange(step.src_buf, step.src_off, src_);
      readRange(step.dst_buf, step.dst_off, dst_);
      combine(dst_, src_, result_);
      writeRange(step.dst_buf, step.dst_off, result_);
      break;
    case OpType::kNop: break;
  }

  if (outgoing) {
    Connection& conn = connections_[send_conn_[g]];
    if (track) noteConnectionUse(conn.last_send_gtb, conn.last_send_step, g, k, r, "send to", tb.send_peer, tb.channel);
    int32_t id = free_message_;
    if (id >= 0) {
      free_message_ = messages_[id].next;
    } else {
      id = static_cast<int32_t>(messages_.size());
      messages_.emplace_back();
    }
    Message& message = messages_[id];
    message.next = -1;
    message.tb = t;
    message.step = k;
    message.data.assign(outgoing->begin(), outgoing->end());
    if (track_global) message.clock.assign(globalClock(g), globalClock(g) + global_size_);
    if (conn.tail >= 0) {
      messages_[conn.tail].next = id;
    } else {
      conn.head = id;
    }
    conn.tail = id;
  }
  const int32_t slot = snap_slot_[step_base_[g] + k];
  if (track && slot >= 0) {
    std::copy_n(localClock(g), local_size, local_snaps_.data() + local_snap_offset_[slot]);
    if (track_global) {
      std::copy_n(globalClock(g), global_size_, global_snaps_.data() + static_cast<size_t>(global_size_) * slot);
    }
  }
  ++pc_[g];
  return outgoing != nullptr;
}

bool Simulator::reportDeadlocks() {
  bool any = false;
  for (size_t g = 0; g < gtb_rank_.size(); ++g) {
    const Threadblock& tb = tbOf(static_cast<int>(g));
    const int k = pc_[g];
    if (k >= static_cast<int>(tb.steps.size())) continue;
    any = true;
    const int r = gtb_rank_[g];
    const Step& step = tb.steps[k];
    std::string reason;
    for (const Dependency& dep : step.deps) {
      if (!depDone(r, dep)) {
        reason = fmt::format("waits for tb {} step {}, which never finishes", dep.tb, dep.step);
        break;
      }
    }
    if (reason.empty()) {
      reason = fmt::format("waits for data from rank {} on channel {} that never arrives", tb.recv_peer, tb.channel);
    }
    sink_.add(IssueKind::kDeadlock, r, gtb_local_[g], k, -1,
              fmt::format("{}: stuck: {} ({} of {} steps of this threadblock finished)",
                          stepWhere(r, gtb_local_[g], k, step.type), reason, k, tb.steps.size()),
              mode_);
  }
  return any;
}

void Simulator::reportLeftovers() {
  for (size_t c = 0; c < connections_.size(); ++c) {  // ids follow (src, dst, channel) order
    const auto& [src, dst, channel] = conn_keys_[c];
    for (int32_t id = connections_[c].head; id >= 0; id = messages_[id].next) {
      const Message& message = messages_[id];
      const Step& step = algorithm_.ranks[src].threadblocks[message.tb].steps[message.step];
      sink_.add(
          IssueKind::kPeerMismatch, src, message.tb, message.step, -1,
          fmt::format("{}: sends {} chunk(s) to rank {} on channel {} that no step of rank {} receives",
                      stepWhere(src, message.tb, message.step, step.type), message.data.size(), dst, channel, dst),
          mode_);
    }
  }
}

void Simulator::checkPostcondition() {
  const int n = spec_.num_ranks;
  // An allreduce expects the same value of output chunk j on every rank: build it once per chunk and
  // remember the value that matched it, which a ring or tree copies to every rank unchanged.
  const bool same_on_every_rank = spec_.kind == CollectiveKind::kAllReduce;
  std::vector<std::optional<ChunkValue>> expected_by_chunk;
  std::vector<int32_t> matched_by_chunk;
  if (same_on_every_rank) matched_by_chunk.assign(spec_.outputChunks(), kUndefined);
  for (int r = 0; r < n; ++r) {
    for (int j = 0; j < spec_.outputChunks(); ++j) {
      std::optional<ChunkValue> own;
      const std::optional<ChunkValue>* expected = &own;
      if (same_on_every_rank) {
        if (r == 0) expected_by_chunk.push_back(spec_.expectedOutput(r, j));
        expected = &expected_by_chunk[j];
      } else {
        own = spec_.expectedOutput(r, j);
      }
      if (!*expected) continue;
      const int32_t actual = storage_[r][cellOf(r, BufferKind::kOutput, j)];
      if (actual != kUndefined && same_on_every_rank && matched_by_chunk[j] == actual) continue;
      if (values_.equals(actual, **expected)) {
        if (same_on_every_rank) matched_by_chunk[j] = actual;
        continue;
      }
      std::string message =
          fmt::format("rank {} output chunk {}: expected {} got {}", r, j, refsText(**expected), values_.text(actual));
      const std::string twice = values_.duplicatesText(actual);
      if (!twice.empty()) message += fmt::format(" ({} reduced more than once)", twice);
      sink_.add(IssueKind::kPostcondition, r, -1, -1, j, std::move(message), mode_);
    }
    if (!spec_.in_place) {
      // NCCL's sendbuff is const: an out-of-place call must leave the input as it found it.
      for (int i = 0; i < spec_.inputChunks(); ++i) {
        const int32_t actual = storage_[r][cellOf(r, BufferKind::kInput, i)];
        if (actual != kUndefined && values_.isLeaf(actual) && values_.leafRef(actual) == ChunkRef{r, i}) continue;
        sink_.add(IssueKind::kPostcondition, r, -1, -1, -1,
                  fmt::format("rank {} input chunk {}: an out-of-place call must not modify its input: expected "
                              "{{({},{})}} got {}",
                              r, i, r, i, values_.text(actual)),
                  mode_);
      }
    }
  }
}
}  // namespace braid::verifier
