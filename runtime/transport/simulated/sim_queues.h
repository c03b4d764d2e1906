// Small containers of the simulated transport (runtime/transport/sim/sim_transport.cc): a FIFO ring buffer
// and a min-heap of events with a cheaper pop than std::priority_queue's. Both keep their elements in one
// contiguous array (fewer cache misses than std::deque; the event queue dominates a 1024-rank simulation).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace braid::sim {

/// FIFO queue in a power-of-two ring buffer; index 0 is the front.
template <typename T>
class RingQueue {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  T& front() { return buf_[head_]; }
  const T& front() const { return buf_[head_]; }
  T& operator[](size_t i) { return buf_[(head_ + i) & (buf_.size() - 1)]; }
  const T& operator[](size_t i) const { return buf_[(head_ + i) & (buf_.size() - 1)]; }
  void push_back(const T& value) {
    if (size_ == buf_.size()) grow();
    buf_[(head_ + size_) & (buf_.size() - 1)] = value;
    ++size_;
  }
  void pop_front() {
    head_ = (head_ + 1) & (buf_.size() - 1);
    --size_;
  }

 private:
  void grow() {
    std::vector<T> next(buf_.empty() ? 4 : buf_.size() * 2);
    for (size_t i = 0; i < size_; ++i) next[i] = std::move((*this)[i]);
    buf_ = std::move(next);
    head_ = 0;
  }

  std::vector<T> buf_;
  size_t head_ = 0;
  size_t size_ = 0;
};

/// One simulator event: ordered by time, then by `key` (insertion order << 3 | type), so events at the same
/// time run first-in first-out.
struct Event {
  double time = 0;
  uint64_t key = 0;
  uint32_t payload = 0;  // message index or local-request slot
  uint32_t version = 0;  // data-phase end: must equal the message's version, else the event is stale
  int type() const { return static_cast<int>(key & 7); }
};

/// Binary min-heap of events. pop() moves the hole left by the top down to a leaf along the smaller children
/// (one comparison per level) and sifts the last element up from there (Floyd's bottom-up heapsort trick; few
/// levels in practice since the last element is large): about half the comparisons of the textbook pop.
class EventHeap {
 public:
  bool empty() const { return v_.empty(); }
  size_t size() const { return v_.size(); }
  const Event& top() const { return v_.front(); }

  void push(const Event& e) {
    v_.push_back(e);
    siftUp(v_.size() - 1, e);
  }

  void pop() {
    const Event last = v_.back();
    v_.pop_back();
    const size_t n = v_.size();
    if (n == 0) return;
    size_t hole = 0;
    for (;;) {
      size_t child = 2 * hole + 1;
      if (child >= n) break;
      if (child + 1 < n && less(v_[child + 1], v_[child])) ++child;
      v_[hole] = v_[child];
      hole = child;
    }
    siftUp(hole, last);
  }

  /// Drops every event for which `pred` holds and restores the heap (Floyd's bottom-up construction, O(size)).
  /// The order in which the remaining events pop is unchanged: it depends on (time, key) alone.
  template <typename Pred>
  void removeIf(Pred pred) {
    v_.erase(std::remove_if(v_.begin(), v_.end(), pred), v_.end());
    for (size_t i = v_.size() / 2; i-- > 0;) siftDown(i);
  }

 private:
  static bool less(const Event& a, const Event& b) { return a.time < b.time || (a.time == b.time && a.key < b.key); }

  void siftDown(size_t i) {
    const Event e = v_[i];
    const size_t n = v_.size();
    for (;;) {
      size_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && less(v_[child + 1], v_[child])) ++child;
      if (!less(v_[child], e)) break;
      v_[i] = v_[child];
      i = child;
    }
    v_[i] = e;
  }

  void siftUp(size_t i, const Event& e) {
    while (i > 0) {
      const size_t parent = (i - 1) / 2;
      if (!less(e, v_[parent])) break;
      v_[i] = v_[parent];
      i = parent;
    }
    v_[i] = e;
  }

  std::vector<Event> v_;
};

}  // namespace braid::sim
