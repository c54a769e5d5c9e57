// The simulator's future-event list: a 4-ary min-heap ordered by simulated
// time, ties broken by insertion order so a run is a pure function of its
// inputs. Events are small PODs; the engine interprets them. Four children
// per node halve the heap's depth against a binary heap, and a node's
// children share two cache lines: a million-event run pops ~40k-deep heaps
// millions of times.
// Thread-safety: not synchronised; one queue per simulation run.
#ifndef PDC_SIM_EVENT_QUEUE_H_
#define PDC_SIM_EVENT_QUEUE_H_

#include <cstdint>
#include <vector>

#include "sim/scenario.h"

namespace pdc::sim {

enum class EventType : uint8_t {
  kVmCreate,       // a: vm
  kVmWantStart,    // a: vm, b: epoch
  kVmWantStop,     // a: vm, b: epoch
  kVmDelete,       // a: vm
  kRetry,          // a: vm, b: attempt generation
  kNodeFail,       // a: node (-1: pick one at random), b: repair override (s)
  kNodeRepair,     // a: node
  kDeviceFail,     // a: -1 (pick at random)
  kDeviceRepair,   // a: device
  kMassRestart,
  kSample,
  // Start-path model (scenario start_path) only:
  kKubeletArrive,  // a: vm, b: generation; the bound pod reaches kubelet
  kHandoff,        // a: vm, b: generation; pdc-node confirms the hand-off
  kVmRunning,      // a: vm, b: generation; QEMU started
  kPodFailed,      // a: vm, b: generation; kubelet refused the pod at admission
  kNodeReboot,     // a: index into Scenario::node_reboots
  kNodeBack,       // a: index into Scenario::node_reboots
};

struct Event {
  SimTime time = 0;
  uint64_t seq = 0;
  EventType type = EventType::kSample;
  int32_t a = 0;
  uint32_t b = 0;
};

class EventQueue {
 public:
  void Push(SimTime time, EventType type, int32_t a = 0, uint32_t b = 0);
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  const Event& top() const { return heap_.front(); }
  Event Pop();

 private:
  static constexpr size_t kArity = 4;
  static bool Before(const Event& x, const Event& y) {
    return x.time != y.time ? x.time < y.time : x.seq < y.seq;
  }
  std::vector<Event> heap_;
  uint64_t next_seq_ = 0;
};

}  // namespace pdc::sim

#endif  // PDC_SIM_EVENT_QUEUE_H_
