// Notifier: a version counter that every state change bumps, so that
// waiters (pdc-extender's long-polls, GET /v1/nodes/{node}/allocations?wait=)
// learn about a change without polling. It knows nothing of HTTP: it lives in
// common/ so that the server (net/) can park on it and the programs can bump
// it without either depending on the other.
//
// Two ways to wait, both without a busy loop:
//  - Subscribe(seen, callback): the callback runs once, on the bumping
//    thread (or at once when the version already moved past `seen`). The
//    HTTP server (net/http_server.h) uses this with an Asio timer for the
//    deadline, so a parked long-poll holds no worker thread; the callback
//    only posts to the connection's executor.
//  - WaitFor(seen, timeout): blocks on an absl::CondVar, for callers with a
//    thread to spare (tests, tools).
// Thread-safety: all methods are thread-safe. Callbacks must not call back
// into the Notifier.
#ifndef PDC_COMMON_NOTIFIER_H_
#define PDC_COMMON_NOTIFIER_H_

#include <cstdint>
#include <functional>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pdc {

class Notifier {
 public:
  using Callback = std::function<void()>;
  using SubscriptionId = uint64_t;

  uint64_t version() const;
  // Increments the version and runs every pending callback.
  void Bump();
  // Runs `cb` once the version exceeds `seen`. Returns an id for Cancel; 0
  // when `cb` already ran (synchronously, in this call).
  SubscriptionId Subscribe(uint64_t seen, Callback cb);
  // Drops a pending callback; no effect when it already ran.
  void Cancel(SubscriptionId id);
  // Blocks until version() > seen or `timeout` passed; returns version().
  uint64_t WaitFor(uint64_t seen, absl::Duration timeout) const;
  size_t pending() const;

 private:
  mutable absl::Mutex mu_;
  mutable absl::CondVar changed_;
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  SubscriptionId next_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<SubscriptionId, Callback> callbacks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdc

#endif  // PDC_COMMON_NOTIFIER_H_
