// Binder: the bind saga of pdc-extender when it is kube-scheduler's binder
// (docs/design.md §5.4), on already-decoded arguments; the HTTP handler only
// decodes the request, calls Bind and encodes the answer. What depends on
// the mode is the context's BindTarget (bind_target.h); the saga is the
// same in every mode:
//  1. the pod's request: from the filter-time PodCache, else read by the
//     target (the pod must still have the UID kube-scheduler sent);
//  2. Allocator::Bind on the node (skipped for a pod that needs no managed
//     device), and, in Kubernetes mode, its claims' records in the API
//     (ExtenderContext::recorded);
//  3. the target publishes the bind (Kubernetes: the pod's devices
//     annotation, then its Binding). When it refuses (kAnnotateFailed,
//     kKubeBindFailed), Allocator::Undo puts back the claims this attempt
//     still owns. When the outcome is unknown (kOutcomeUnknown) or this
//     replica stopped leading (kNotLeader), the allocation is kept, because
//     a pod that runs must have its devices, and a pod that does not is
//     retried by kube-scheduler onto the same devices, which stay reserved
//     for its VM.
//  4. metrics (binds, rollbacks), the pod leaves the PodCache, an Event,
//     one log line.
// The whole saga runs within BinderOptions::deadline, each call of the
// target getting what is left (the Binding leaves `read_back` for the
// read-back).
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
#include "extender/bind_target.h"
#include "extender/extender_context.h"
#include "api/scheduler_wire.h"

namespace pdc::extender {

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
  // A bind whose deadline has passed before it starts does nothing and
  // fails.
  BindResult Bind(const api::BindingArgs& args, absl::Time deadline) const;
  absl::Time DeadlineFromNow() const;

  const BinderOptions& options() const { return options_; }

 private:
  // The pod's request for a bind: from the filter-time cache, else from the
  // target. Error text says why neither worked.
  absl::StatusOr<api::PodRequest> PodForBind(const api::BindingArgs& args,
                                             const BindBudget& budget) const;
  // Undoes what attempt `attempt` still owns of `outcome` after the API
  // refused, into a kAnnotateFailed, kKubeBindFailed or kNotRecorded result.
  BindResult UndoAfter(uint64_t attempt, BindStatus status, std::string why,
                       BindOutcome outcome) const;
  BindResult Fail(const api::BindingArgs& args, BindResult result) const;
  // The allocation kept for the pod after a kNotLeader or kOutcomeUnknown
  // verdict of the target.
  BindResult Keep(uint64_t attempt, BindTarget::Verdict verdict, BindOutcome outcome) const;

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

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_BINDER_H_
