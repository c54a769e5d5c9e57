// Binder: the bind saga of pdc-extender when it is kube-scheduler's binder
// (docs/design.md §5.4), on already-decoded arguments; the HTTP handler only
// decodes the request, calls Bind and encodes the answer.
//
// The saga, in order:
//  1. the pod's request: from the filter-time PodCache, else read from the
//     Kubernetes API (the pod must still have the UID kube-scheduler sent);
//  2. Allocator::Bind on the node (skipped for a pod that needs no managed
//     device);
//  3. with a Kubernetes API: annotate the pod with its devices, then bind it
//     to the node. When the annotation fails, or the apiserver refuses the
//     Binding, Allocator::Undo puts the claims back. When the Binding's
//     outcome is unknown (timeout, connection lost after sending, 409, 5xx:
//     the apiserver may have committed it), the pod is read back: bound to
//     this node with this UID is success; gone, re-created or bound
//     elsewhere is a refusal (undo); anything else keeps the allocation
//     (kOutcomeUnknown), because a pod that runs must have its devices,
//     and a pod that does not is retried by kube-scheduler onto the same
//     devices, which stay reserved for its VM. The Binding is never sent
//     twice by pdc (net/http_client.h).
//  4. metrics (binds, rollbacks, read-backs), the pod leaves the PodCache,
//     one log line.
// The whole saga runs within BinderOptions::deadline, each Kubernetes call
// getting what is left (the Binding leaves `read_back` for the read-back).
// Change notifications are not the Binder's business: the allocator reports
// its own commits (allocator.h, SetChangeListener).
//
// Thread-safety: thread-safe; Bind runs concurrently on server threads.
#ifndef PDC_EXTENDER_BINDER_H_
#define PDC_EXTENDER_BINDER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "allocator/allocator.h"
#include "extender/extender_context.h"
#include "api/scheduler_wire.h"

namespace pdc::extender {

// How a bind ended. Every value but kBound and kOutcomeUnknown leaves the
// allocator as it was before the call (modulo an Undo that itself failed:
// see undo_status).
enum class BindStatus : uint8_t {
  kBound = 0,
  // Neither the PodCache nor the Kubernetes API gave a usable pod (not
  // found, re-created with another UID, or no API configured).
  kPodNotFound = 1,
  // Allocator::Bind refused (the node no longer fits, never fits, ...).
  kAllocatorRefused = 2,
  // The Kubernetes API refused the devices annotation; the allocation was
  // undone.
  kAnnotateFailed = 3,
  // The Kubernetes API refused the binding; the allocation (if any) was
  // undone.
  kKubeBindFailed = 4,
  // The Kubernetes API did not tell whether the Binding was committed, and
  // reading the pod back did not either: the allocation is KEPT.
  kOutcomeUnknown = 5,
  // The deadline passed before the bind could start: nothing was done.
  kTooLate = 6,
  // The claims' record is not in the API as the bind made it (another
  // object holds a claim's name, or the object is gone): the allocation was
  // undone and the pod is not bound.
  kNotRecorded = 7,
  // This replica is no longer sure it leads: nothing more was sent to the
  // API (no annotation, no Binding, no Event). What the allocator recorded
  // stays reserved for the pod; the new leader takes the retry.
  kNotLeader = 8,
};
std::string_view ToString(BindStatus status);

struct BindResult {
  BindStatus status = BindStatus::kBound;
  // What kube-scheduler shows in the pod's events; "" when bound.
  std::string error;
  // What the allocator bound; absent when it never bound (pass-through
  // pods, refusals, unknown pods). Kept after an Undo, for the log.
  // With kOutcomeUnknown: what stays reserved.
  std::optional<BindOutcome> allocation;
  // Set when the allocation was undone: the Undo's own status.
  std::optional<absl::Status> undo_status;

  bool ok() const { return status == BindStatus::kBound; }
};

struct BinderOptions {
  // The whole saga, Kubernetes calls included: shorter than kube-scheduler's
  // extender httpTimeout (deploy/: 10s), so the scheduler hears the answer.
  absl::Duration deadline = absl::Seconds(8);
  // Of the deadline, kept back from the Binding for reading the pod back.
  absl::Duration read_back = absl::Seconds(2);
};

class Binder {
 public:
  // Each Bind is an attempt with its own identity; kube-scheduler may run
  // two for one pod (a retry after its timeout while the first still runs).
  // `ctx` outlives the Binder.
  explicit Binder(const ExtenderContext* ctx, BinderOptions options = {})
      : ctx_(ctx), options_(options) {}

  // Binds within the options' deadline, from now.
  BindResult Bind(const api::BindingArgs& args) const { return Bind(args, DeadlineFromNow()); }
  // Binds within `deadline` (a bind that waited in a queue brings its own).
  // With a Kubernetes API, a bind whose deadline has passed before it
  // starts does nothing and fails.
  BindResult Bind(const api::BindingArgs& args, absl::Time deadline) const;
  absl::Time DeadlineFromNow() const;

  const BinderOptions& options() const { return options_; }

 private:
  // What the Kubernetes API did with the Binding.
  struct ApiVerdict {
    BindStatus status = BindStatus::kBound;  // kBound, kKubeBindFailed or kOutcomeUnknown.
    std::string why;                         // "" when bound at once.
  };

  // The pod's request for a bind: from the filter-time cache, else from the
  // Kubernetes API. Error text says why neither worked.
  absl::StatusOr<api::PodRequest> PodForBind(const api::BindingArgs& args,
                                             absl::Time deadline) const;
  // POSTs the Binding; when its outcome is unknown, reads the pod back.
  ApiVerdict BindThroughApi(const api::BindingArgs& args, absl::Time deadline) const;
  // Undoes what attempt `attempt` still owns of `outcome` after the API
  // refused, into a kAnnotateFailed, kKubeBindFailed or kNotRecorded result.
  BindResult UndoAfter(uint64_t attempt, BindStatus status, std::string why,
                       BindOutcome outcome) const;
  // Time left until `deadline`, minus `reserve`.
  absl::Duration Left(absl::Time deadline,
                      absl::Duration reserve = absl::ZeroDuration()) const;
  BindResult Fail(const api::BindingArgs& args, BindResult result) const;
  // The timeout of one write to the API: what is left until `deadline`
  // minus `reserve`, and no longer than this replica is sure to lead.
  absl::Duration WriteTimeout(absl::Time deadline, absl::Duration reserve) const;
  // Whether this replica may still write to the API (not sure it leads:
  // nothing more is sent).
  bool MayWrite() const;

  // Attempts: each claim a bind's allocator step returned is the latest
  // attempt's; an undo reverts only the claims still its own attempt's,
  // so an attempt never undoes what a later one (the same pod's retry)
  // relies on.
  uint64_t Begin() const;
  void Take(uint64_t attempt, const BindOutcome& outcome) const;
  // Of `outcome`, the claims still `attempt`'s (and forgets them); the
  // others were taken over by a later attempt.
  BindOutcome Own(uint64_t attempt, const BindOutcome& outcome) const;
  void Finish(uint64_t attempt, const BindOutcome& outcome) const;

  const ExtenderContext* const ctx_;
  const BinderOptions options_;
  mutable absl::Mutex attempts_mu_;
  mutable uint64_t next_attempt_ ABSL_GUARDED_BY(attempts_mu_) = 0;
  mutable absl::flat_hash_map<ClaimKey, uint64_t> attempt_of_ ABSL_GUARDED_BY(attempts_mu_);
};

// The value of the pdc.kubevirt.io/devices annotation for a bind:
// {"<resource name>": ["<PCI address>", ...], ...}, sorted.
std::string DevicesAnnotation(const BindOutcome& outcome);

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_BINDER_H_
