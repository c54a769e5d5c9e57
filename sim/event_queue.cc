#include "sim/event_queue.h"

#include <algorithm>

namespace pdc::sim {

void EventQueue::Push(SimTime time, EventType type, int32_t a, uint32_t b) {
  const Event e{time, next_seq_++, type, a, b};
  // Sift the hole up from the new leaf, then drop the event in.
  size_t hole = heap_.size();
  heap_.emplace_back();
  while (hole > 0) {
    const size_t parent = (hole - 1) / kArity;
    if (!Before(e, heap_[parent])) break;
    heap_[hole] = heap_[parent];
    hole = parent;
  }
  heap_[hole] = e;
}

Event EventQueue::Pop() {
  const Event top = heap_.front();
  const Event last = heap_.back();
  heap_.pop_back();
  const size_t n = heap_.size();
  if (n == 0) return top;
  // Sift the hole down from the root along the earliest children, then put
  // the former last event there.
  size_t hole = 0;
  for (;;) {
    const size_t first = hole * kArity + 1;
    if (first >= n) break;
    size_t best = first;
    const size_t end = std::min(first + kArity, n);
    for (size_t c = first + 1; c < end; ++c) {
      if (Before(heap_[c], heap_[best])) best = c;
    }
    if (!Before(heap_[best], last)) break;
    heap_[hole] = heap_[best];
    hole = best;
  }
  heap_[hole] = last;
  return top;
}

}  // namespace pdc::sim
