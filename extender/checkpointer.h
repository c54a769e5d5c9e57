// Checkpointer: the background loop that writes an allocator checkpoint
// (a snapshot that lets the store drop the log it covers) whenever the
// allocator says one is due (AllocatorOptions::checkpoint_every_records).
//
// Every `interval` on the Clock it asks Allocator::CheckpointDue(); a failed
// checkpoint is logged and retried on the next pass (the log keeps growing,
// nothing is lost). The last checkpoint at shutdown is the caller's
// (ExtenderApp::Stop), after the server stopped taking requests.
//
// Thread-safety: CheckpointIfDue() is thread-safe; Start() once, Stop() from
// any one thread.
#ifndef PDC_EXTENDER_CHECKPOINTER_H_
#define PDC_EXTENDER_CHECKPOINTER_H_

#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "allocator/allocator.h"
#include "common/clock.h"

namespace pdc::extender {

class Checkpointer {
 public:
  struct Options {
    absl::Duration interval = absl::Seconds(1);  // Between passes.
  };
  // `allocator` and `clock` outlive the checkpointer.
  Checkpointer(Options options, Allocator* allocator, const Clock* clock);
  ~Checkpointer();  // Stops the loop.

  // One pass: true when a checkpoint was due and written, false when none
  // was due; the allocator's error when writing one failed.
  absl::StatusOr<bool> CheckpointIfDue();

  // Runs CheckpointIfDue() every `interval` on a thread of its own, logging
  // failures, until Stop().
  void Start();
  void Stop();

 private:
  const Options options_;
  Allocator* const allocator_;
  const Clock* const clock_;
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_CHECKPOINTER_H_
