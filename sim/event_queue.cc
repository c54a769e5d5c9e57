#include "sim/event_queue.h"

#include <algorithm>

namespace pdc::sim {

void EventQueue::Push(SimTime time, EventType type, int32_t a, uint32_t b) {
  heap_.push_back(Event{time, next_seq_++, type, a, b});
  std::push_heap(heap_.begin(), heap_.end(), Later{});
}

Event EventQueue::Pop() {
  std::pop_heap(heap_.begin(), heap_.end(), Later{});
  Event e = heap_.back();
  heap_.pop_back();
  return e;
}

}  // namespace pdc::sim
