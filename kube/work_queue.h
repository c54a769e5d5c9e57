// WorkQueue and Controller: the level-triggered controller loop of
// client-go's `util/workqueue` and its controllers' `processNextWorkItem`,
// for pdc's controllers (docs/design.md §10).
//
// A key ("<ns>/<name>") in the queue only says "look at this object again";
// the controller's Reconcile(key) compares what it wants with what it
// observes and acts on the difference, so a missed or repeated event costs a
// repeated look, never a wrong action. The rules are client-go's:
//  - a key is queued at most once (adding it again while it waits is a no-op);
//  - a key being processed is handed to no other worker; added again
//    meanwhile, it is queued again when Done(key) is called (dirty/processing
//    sets of workqueue.Type);
//  - AddAfter(key, d) makes it ready d from now (an earlier readiness wins);
//  - AddRateLimited(key) waits the key's own exponential backoff (base
//    5 ms, doubled per failure up to 1000 s: the
//    ItemExponentialFailureRateLimiter of DefaultControllerRateLimiter; the
//    overall token bucket is left out: pdc's controllers act on tens of
//    thousands of objects at most, and the apiserver's own priority and
//    fairness limits a client);
//  - Forget(key) resets that backoff (after a success).
// Time comes from a Clock: a delayed key becomes ready when the Clock says
// so, fake or real.
// Thread-safety: every method from any thread.
#ifndef PDC_KUBE_WORK_QUEUE_H_
#define PDC_KUBE_WORK_QUEUE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace pdc::kube {

struct WorkQueueOptions {
  absl::Duration base_delay = absl::Milliseconds(5);
  absl::Duration max_delay = absl::Seconds(1000);
};

class WorkQueue {
 public:
  // `clock` must outlive the queue.
  explicit WorkQueue(const Clock* clock, WorkQueueOptions options = {});

  void Add(std::string_view key);
  void AddAfter(std::string_view key, absl::Duration delay);
  // After a failure: the key's next backoff, which doubles each time.
  void AddRateLimited(std::string_view key);
  // After a success: the key's backoff starts again from the base.
  void Forget(std::string_view key);
  // How many times in a row the key failed (AddRateLimited since Forget).
  int Requeues(std::string_view key) const;

  // A key that is ready now, taken for processing; nullopt when none is
  // (or the queue is shut down). Never waits.
  std::optional<std::string> TryGet();
  // Waits on the clock for a ready key; nullopt once shut down. With a
  // FakeClock, a wait with nothing delayed moves time to the end of time:
  // tests use TryGet (Controller::ProcessReady).
  std::optional<std::string> Get();
  // The key's processing is over: if it was added meanwhile, it is queued.
  void Done(std::string_view key);

  // Get() returns nullopt from now on; keys still queued are dropped.
  void ShutDown();
  bool shutting_down() const;

  // Keys waiting (ready or delayed), not counting those being processed.
  size_t size() const;
  // When the next delayed key becomes ready (InfiniteFuture: none).
  absl::Time NextDelayed() const;

 private:
  void AddLocked(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PromoteDueLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::optional<std::string> PopLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WakeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Clock* const clock_;
  const WorkQueueOptions options_;
  mutable absl::Mutex mu_;
  std::deque<std::string> ready_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> dirty_ ABSL_GUARDED_BY(mu_);       // In ready_ or to be.
  absl::flat_hash_set<std::string> processing_ ABSL_GUARDED_BY(mu_);
  // Delayed keys by readiness time; a key's earliest readiness only.
  std::multimap<absl::Time, std::string> delayed_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, absl::Time> delayed_at_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> failures_ ABSL_GUARDED_BY(mu_);
  // Notified (and replaced) whenever Get() may have something to return.
  std::shared_ptr<absl::Notification> wake_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

// What a controller does with one key: bring the world in line with the
// object's desired state. An error is retried with the key's backoff; OK
// forgets the key's failures. Called by one worker at a time per key.
class Reconciler {
 public:
  virtual ~Reconciler() = default;
  virtual absl::Status Reconcile(const std::string& key) = 0;
};

// The worker loop: Get, Reconcile, then Forget or AddRateLimited, then Done.
class Controller {
 public:
  // `queue` and `reconciler` must outlive the controller.
  Controller(WorkQueue* queue, Reconciler* reconciler);
  ~Controller();  // Stop().

  // Starts `workers` threads running the loop until Stop().
  void Run(int workers);
  // Shuts the queue down and joins the workers. Idempotent.
  void Stop();

  // Processes every key that is ready now, on the calling thread (tests,
  // with a FakeClock); returns how many were reconciled.
  int ProcessReady();

 private:
  void ProcessOne(const std::string& key);

  WorkQueue* const queue_;
  Reconciler* const reconciler_;
  std::vector<std::thread> workers_;
};

}  // namespace pdc::kube

#endif  // PDC_KUBE_WORK_QUEUE_H_
