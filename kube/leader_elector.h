// LeaderElector: one leader among pdc-extender's replicas, through a
// coordination.k8s.io/v1 Lease, with the algorithm and timings of client-go's
// tools/leaderelection (leaderelection.go, tryAcquireOrRenew):
//  - a replica takes the lease when nobody holds it, or when the holder's
//    record has not changed for leaseDuration as measured on this replica's
//    own clock from when it saw the record change (no clock skew between
//    replicas matters, only their rates);
//  - every write is a PUT with the resourceVersion read just before, so two
//    replicas can never both succeed (409 for the loser);
//  - the leader renews every retryPeriod; when it has not renewed for
//    renewDeadline it has lost the lease (on_lost), and it serves nothing
//    from that moment: Leading() turns false renewDeadline after the last
//    successful renewal was *sent*, which is leaseDuration - renewDeadline
//    before any follower can take the lease;
//  - Stop() of a leader releases the lease (holder "", duration 1s, as
//    client-go's ReleaseOnCancel), so a rolling update hands over at once.
// A replica that lost the lease does not try again: pdc-extender exits and
// starts afresh as a follower (kube-scheduler and kube-controller-manager
// do the same), so no state of its leadership survives into a new one.
//
// Thread-safety: thread-safe. Start/Stop from one thread.
#ifndef PDC_KUBE_LEADER_ELECTOR_H_
#define PDC_KUBE_LEADER_ELECTOR_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "api/lease_json.h"
#include "common/clock.h"
#include "kube/kube_http_client.h"

namespace pdc::kube {

struct LeaderElectorOptions {
  std::string ns;        // The Lease's namespace.
  std::string name;      // The Lease's name.
  std::string identity;  // This replica's holderIdentity; unique.
  absl::Duration lease_duration = absl::Seconds(15);
  absl::Duration renew_deadline = absl::Seconds(10);
  absl::Duration retry_period = absl::Seconds(2);
  const Clock* clock = RealClock();  // Must outlive the elector.
  // Called on the elector's thread when this replica became the leader,
  // and when it lost the lease (not on Stop). Either may be empty.
  std::function<void()> on_started_leading;
  std::function<void()> on_lost;
};

class LeaderElector {
 public:
  // `api` must outlive the elector.
  LeaderElector(KubeApi* api, LeaderElectorOptions options);
  ~LeaderElector();  // Stop().
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  // Starts the thread that takes and then renews the lease.
  void Start();
  // Ends the thread; a leader releases the lease. Idempotent.
  void Stop();

  // True while this replica holds the lease and its last renewal was sent
  // less than renewDeadline ago: the gate every leader-only action passes.
  bool Leading() const;
  // How much longer Leading() stays true without another renewal (zero or
  // less once it is false): a write sent with a timeout within it ends
  // before any other replica can take the lease (leaseDuration -
  // renewDeadline later at the earliest).
  absl::Duration SureFor() const;
  // Whether this replica has lost the lease it held (it never leads again).
  bool Lost() const;
  // The holder this replica last saw in the Lease ("" = none or unknown).
  std::string Leader() const;
  const std::string& identity() const { return options_.identity; }
  // leaseTransitions of the record this replica last read or wrote.
  int64_t transitions() const;
  // When this replica became the leader (InfinitePast: never).
  absl::Time leading_since() const;

  // One try of client-go's tryAcquireOrRenew: reads the Lease, creates it
  // when there is none, and takes or renews it when it may. True when this
  // replica holds the lease afterwards. Public for tests.
  bool TryAcquireOrRenew();

 private:
  void Loop();
  // Gives the lease up (Stop of a leader).
  void Release();
  // The lease record this replica writes now.
  api::LeaderRecord Mine(absl::Time now, const api::LeaderRecord* old) const;

  KubeApi* const api_;
  const LeaderElectorOptions options_;
  absl::Notification stop_;
  std::thread thread_;

  mutable absl::Mutex mu_;
  bool leading_ ABSL_GUARDED_BY(mu_) = false;
  bool lost_ ABSL_GUARDED_BY(mu_) = false;
  // When the last successful write of this replica's record was sent.
  absl::Time renewed_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time leading_since_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // The record last read or written, and when (this replica's clock) it
  // was last seen to change.
  api::LeaderRecord observed_ ABSL_GUARDED_BY(mu_);
  bool observed_any_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time observed_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

// This replica's identity: `base` (the pod's name) with "_" and a random
// suffix, as kube-scheduler adds one (a replica restarted in the same pod
// never takes the previous process's record for its own).
std::string LeaderIdentity(std::string_view base);

}  // namespace pdc::kube

#endif  // PDC_KUBE_LEADER_ELECTOR_H_
