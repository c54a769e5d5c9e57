// The event heap pops in (time, insertion order) order: checked against a
// stable sort of the same events, with pushes interleaved with pops the way
// the engine does (an event handler schedules later events).
#include "sim/event_queue.h"

#include <random>
#include <set>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace pdc::sim {
namespace {

TEST(EventQueue, PopsByTimeThenInsertionOrder) {
  for (int seed = 0; seed < 5; ++seed) {
    std::mt19937 rng(seed);
    EventQueue q;
    // Pushed, not popped: ids grow with each push, so (time, id) orders
    // them by time, then insertion order (the reference, kept sorted).
    std::set<std::pair<SimTime, int32_t>> pending;
    int32_t next_id = 0;
    SimTime now = 0;
    for (int step = 0; step < 20000; ++step) {
      if (q.empty() || rng() % 3 != 0) {
        // Few distinct times, so that ties are common.
        const SimTime t = now + static_cast<SimTime>(rng() % 8);
        q.Push(t, EventType::kRetry, next_id);
        pending.emplace(t, next_id++);
        continue;
      }
      // The expected next: the earliest time, first pushed among equals.
      const auto [want_time, want_id] = *pending.begin();
      ASSERT_EQ(q.size(), pending.size());
      const Event top = q.top();  // A copy: Pop() moves the heap.
      const Event e = q.Pop();
      ASSERT_EQ(top.a, e.a);
      ASSERT_EQ(e.time, want_time) << "seed " << seed << " step " << step;
      ASSERT_EQ(e.a, want_id) << "seed " << seed << " step " << step;
      now = e.time;
      pending.erase(pending.begin());
    }
    while (!q.empty()) {
      ASSERT_FALSE(pending.empty());
      const Event e = q.Pop();
      ASSERT_EQ(e.a, pending.begin()->second);
      pending.erase(pending.begin());
    }
    EXPECT_TRUE(pending.empty());
  }
}

}  // namespace
}  // namespace pdc::sim
