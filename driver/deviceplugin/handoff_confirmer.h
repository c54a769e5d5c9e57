// HandoffConfirmer: tells pdc-extender that kubelet's Allocate was answered
// for a pod (POST /v1/nodes/<node>/handoffs), in the background so that
// kubelet's call never waits on the extender. Each confirmation is retried
// with exponential backoff until the extender takes it, answers that the pod
// has nothing pending any more (NotFound), or the book no longer shows the
// pod waiting upstream (its reservation went away). Until then the
// extender's gate keeps other pods of that resource off this node, which is
// the point: confirming late is safe, confirming wrongly is not.
// With a HandoffJournal each hand-off is journaled (fsynced) by Enqueue and
// removed from it once it needs no confirming any more; Start queues what
// the journal holds, so a restart loses none.
// Thread-safety: Enqueue from any thread; one background thread.
#ifndef PDC_DRIVER_DEVICEPLUGIN_HANDOFF_CONFIRMER_H_
#define PDC_DRIVER_DEVICEPLUGIN_HANDOFF_CONFIRMER_H_

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "model/pci_address.h"
#include "driver/deviceplugin/handoff_book.h"
#include "driver/deviceplugin/handoff_journal.h"
#include "driver/node_extender_api.h"
#include "driver/node_metrics.h"

namespace pdc::driver::deviceplugin {

struct ConfirmerOptions {
  absl::Duration backoff_initial = absl::Milliseconds(500);
  absl::Duration backoff_max = absl::Seconds(30);
  HandoffJournal* journal = nullptr;  // Optional; must outlive the confirmer.
};

class HandoffConfirmer {
 public:
  // `api`, `book` and `metrics` (may be null) must outlive the confirmer.
  HandoffConfirmer(ExtenderApi* api, const HandoffBook* book, ConfirmerOptions options,
                   NodeMetrics* metrics = nullptr);
  ~HandoffConfirmer();  // Stops; unconfirmed hand-offs stay journaled (logged).

  // Starts the thread; the journal's entries are queued first.
  void Start();
  void Stop();

  // Journals the hand-off (durable on return) and queues its confirmation.
  // The confirmation is queued even when the journal write fails, whose
  // error is returned: only a restart before it is accepted would lose it.
  absl::Status Enqueue(HandoffRecord record);

  // Confirmations taken by the extender so far, and still queued (tests).
  uint64_t confirmed() const;
  size_t queued() const;
  // Waits until nothing is queued or being sent; false on timeout.
  bool WaitUntilIdle(absl::Duration timeout) const;

 private:
  struct Job {
    HandoffRecord record;
    absl::Time due;
    absl::Duration backoff;
    int attempts = 0;
  };
  void Loop();
  // Drops the journal entry of a hand-off that needs no confirming now.
  void Forget(const HandoffRecord& record);

  ExtenderApi* const api_;
  const HandoffBook* const book_;
  const ConfirmerOptions options_;
  NodeMetrics* const metrics_;
  mutable absl::Mutex mu_;
  std::vector<Job> jobs_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t wakeups_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t confirmed_ ABSL_GUARDED_BY(mu_) = 0;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace pdc::driver::deviceplugin

#endif  // PDC_DRIVER_DEVICEPLUGIN_HANDOFF_CONFIRMER_H_
