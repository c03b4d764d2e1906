// Test helper: IR steps written by hand (include/braid/algorithm.h), for tests that build small programs.
#pragma once

#include <utility>
#include <vector>

#include "braid/algorithm.h"

namespace braid::testing {

/// A step of `type` on chunk ranges (offset -1: unused by the op).
inline Step step(OpType type, BufferKind src_buf, int src_off, BufferKind dst_buf, int dst_off, int count = 1,
                 std::vector<Dependency> deps = {}) {
  Step s;
  s.type = type;
  s.src_buf = src_buf;
  s.src_off = src_off;
  s.dst_buf = dst_buf;
  s.dst_off = dst_off;
  s.count = count;
  s.deps = std::move(deps);
  return s;
}
inline Step send(BufferKind buf, int off, int count = 1) {
  return step(OpType::kSend, buf, off, BufferKind::kOutput, -1, count);
}
inline Step recv(BufferKind buf, int off, int count = 1) {
  return step(OpType::kRecv, BufferKind::kInput, -1, buf, off, count);
}
inline Step copy(BufferKind src, int src_off, BufferKind dst, int dst_off, int count = 1) {
  return step(OpType::kCopy, src, src_off, dst, dst_off, count);
}
inline Step nop(std::vector<Dependency> deps) {
  return step(OpType::kNop, BufferKind::kInput, -1, BufferKind::kOutput, -1, 0, std::move(deps));
}

/// A threadblock with its peers, steps and channel.
inline Threadblock tb(int id, int send_peer, int recv_peer, std::vector<Step> steps, int channel = 0) {
  Threadblock t;
  t.id = id;
  t.send_peer = send_peer;
  t.recv_peer = recv_peer;
  t.channel = channel;
  t.steps = std::move(steps);
  return t;
}

}  // namespace braid::testing
