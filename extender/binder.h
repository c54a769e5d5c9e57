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
//     to the node; when either fails, Allocator::Undo puts the claims back;
//  4. metrics (binds, rollbacks), the pod leaves the PodCache, one log line.
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

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "allocator/allocator.h"
#include "extender/extender_context.h"
#include "api/scheduler_wire.h"

namespace pdc::extender {

// How a bind ended. Every value but kBound leaves the allocator as it was
// before the call (modulo an Undo that itself failed: see undo_status).
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
};
std::string_view ToString(BindStatus status);

struct BindResult {
  BindStatus status = BindStatus::kBound;
  // What kube-scheduler shows in the pod's events; "" when bound.
  std::string error;
  // What the allocator bound; absent when it never bound (pass-through
  // pods, refusals, unknown pods). Kept after an Undo, for the log.
  std::optional<BindOutcome> allocation;
  // Set when the allocation was undone: the Undo's own status.
  std::optional<absl::Status> undo_status;

  bool ok() const { return status == BindStatus::kBound; }
};

class Binder {
 public:
  // `ctx` outlives the Binder.
  explicit Binder(const ExtenderContext* ctx) : ctx_(ctx) {}

  BindResult Bind(const api::BindingArgs& args) const;

 private:
  // The pod's request for a bind: from the filter-time cache, else from the
  // Kubernetes API. Error text says why neither worked.
  absl::StatusOr<api::PodRequest> PodForBind(const api::BindingArgs& args) const;
  BindResult Fail(const api::BindingArgs& args, BindResult result) const;

  const ExtenderContext* const ctx_;
};

// The value of the pdc.kubevirt.io/devices annotation for a bind:
// {"<resource name>": ["<PCI address>", ...], ...}, sorted.
std::string DevicesAnnotation(const BindOutcome& outcome);

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_BINDER_H_
