// The event heap pops in (time, insertion order) order: checked against a
// stable sort of the same events, with pushes interleaved with pops the way
// the engine does (an event handler schedules later events).
#include "sim/event_queue.h"

#include <algorithm>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace pdc::sim {
namespace {

TEST(EventQueue, PopsByTimeThenInsertionOrder) {
  for (int seed = 0; seed < 5; ++seed) {
    std::mt19937 rng(seed);
    EventQueue q;
    struct Pushed {
      SimTime time;
      int32_t id;
    };
    std::vector<Pushed> pending;  // Pushed, not popped, in push order.
    int32_t next_id = 0;
    SimTime now = 0;
    for (int step = 0; step < 20000; ++step) {
      if (q.empty() || rng() % 3 != 0) {
        // Few distinct times, so that ties are common.
        const SimTime t = now + static_cast<SimTime>(rng() % 8);
        q.Push(t, EventType::kRetry, next_id);
        pending.push_back({t, next_id++});
        continue;
      }
      // The expected next: the earliest time, first pushed among equals.
      auto want = std::min_element(pending.begin(), pending.end(),
                                   [](const Pushed& a, const Pushed& b) {
                                     return a.time < b.time;
                                   });
      ASSERT_EQ(q.size(), pending.size());
      const Event top = q.top();  // A copy: Pop() moves the heap.
      const Event e = q.Pop();
      ASSERT_EQ(top.a, e.a);
      ASSERT_EQ(e.time, want->time) << "seed " << seed << " step " << step;
      ASSERT_EQ(e.a, want->id) << "seed " << seed << " step " << step;
      now = e.time;
      pending.erase(want);
    }
    while (!q.empty()) {
      auto want = std::min_element(pending.begin(), pending.end(),
                                   [](const Pushed& a, const Pushed& b) {
                                     return a.time < b.time;
                                   });
      const Event e = q.Pop();
      ASSERT_EQ(e.a, want->id);
      pending.erase(want);
    }
    EXPECT_TRUE(pending.empty());
  }
}

}  // namespace
}  // namespace pdc::sim
