// The simulator's event heap (runtime/transport/simulated/sim_queues.h): pops in (time, key) order, and dropping
// events (removeIf, what the simulated transport does with stale flow ends) leaves the others in the same order.
#include "transport/simulated/sim_queues.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace braid::sim {
namespace {

// Pseudo-random times with repeats (a linear congruential sequence taken modulo 97), keys in insertion order.
std::vector<Event> someEvents(int n) {
  std::vector<Event> events;
  uint64_t x = 12345;
  for (int i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    events.push_back(Event{static_cast<double>((x >> 33) % 97), static_cast<uint64_t>(i) << 3, static_cast<uint32_t>(i),
                           static_cast<uint32_t>(i % 3)});
  }
  return events;
}

std::vector<uint32_t> popAll(EventHeap& heap) {
  std::vector<uint32_t> order;
  while (!heap.empty()) {
    order.push_back(heap.top().payload);
    heap.pop();
  }
  return order;
}

// The reference order: a stable sort by time of the events in insertion order (key = insertion order).
std::vector<uint32_t> sortedPayloads(std::vector<Event> events) {
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.time < b.time; });
  std::vector<uint32_t> order;
  for (const Event& e : events) order.push_back(e.payload);
  return order;
}

TEST(EventHeap, PopsByTimeThenInsertionOrder) {
  const std::vector<Event> events = someEvents(1000);
  EventHeap heap;
  for (const Event& e : events) heap.push(e);
  EXPECT_EQ(heap.size(), events.size());
  EXPECT_EQ(popAll(heap), sortedPayloads(events));
}

TEST(EventHeap, RemoveIfKeepsTheOthersInOrderAndTheHeapUsable) {
  const std::vector<Event> events = someEvents(1000);
  EventHeap heap;
  for (size_t i = 0; i < 600; ++i) heap.push(events[i]);
  heap.pop();  // the heap as the simulator leaves it: some popped, the rest in heap order
  heap.removeIf([](const Event& e) { return e.version == 1; });
  for (size_t i = 600; i < events.size(); ++i) heap.push(events[i]);  // pushes after a removal still sift right

  std::vector<Event> first(events.begin(), events.begin() + 600);
  const uint32_t popped = sortedPayloads(first).front();
  std::vector<Event> expected;
  for (const Event& e : events) {
    if ((e.payload < 600 && e.version == 1) || e.payload == popped) continue;
    expected.push_back(e);
  }
  EXPECT_EQ(heap.size(), expected.size());
  EXPECT_EQ(popAll(heap), sortedPayloads(expected));
}

TEST(EventHeap, RemoveIfEverythingAndNothing) {
  const std::vector<Event> events = someEvents(50);
  EventHeap heap;
  for (const Event& e : events) heap.push(e);
  heap.removeIf([](const Event&) { return false; });
  EXPECT_EQ(popAll(heap), sortedPayloads(events));
  for (const Event& e : events) heap.push(e);
  heap.removeIf([](const Event&) { return true; });
  EXPECT_TRUE(heap.empty());
}

}  // namespace
}  // namespace braid::sim
