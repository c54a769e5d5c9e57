// BindTarget: the part of the bind saga (Binder, docs/design.md §5.4) that
// depends on pdc-extender's mode — where a pod comes from when no filter
// call told of it, and what the cluster must learn of a bind before
// kube-scheduler hears that it is bound. The Binder owns the rest (the
// allocator's bind, the attempts, the undo) and is the same in every mode.
//  - StandaloneBindTarget (below): no Kubernetes API. A pod is known only
//    from a filter call; nothing is published (kube-scheduler, or the load
//    generator speaking for it, takes the answer as the binding).
//  - KubeBindTarget (kube_bind_target.h): reads the pod from the API,
//    annotates it with its devices and posts its Binding, reading the pod
//    back when the Binding's outcome is unknown; nothing is sent once this
//    replica is not sure it leads.
// Thread-safety: implementations are thread-safe.
#ifndef PDC_EXTENDER_BIND_TARGET_H_
#define PDC_EXTENDER_BIND_TARGET_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "allocator/allocator.h"
#include "api/scheduler_wire.h"

namespace pdc::extender {

// How a bind ended. Every value but kBound and kOutcomeUnknown leaves the
// allocator as it was before the call (modulo an Undo that itself failed:
// see BindResult::undo_status).
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

// The time a bind has: until `at`, of which `read_back` is kept from the
// Binding for reading the pod back.
struct BindBudget {
  absl::Time at;
  absl::Duration read_back;
};

class BindTarget {
 public:
  // What the cluster did with a bind: kBound, or why not (kNotLeader,
  // kAnnotateFailed, kKubeBindFailed: nothing of it stands; kOutcomeUnknown:
  // it may stand).
  struct Verdict {
    BindStatus status = BindStatus::kBound;
    std::string why;  // "" when bound at once.
  };

  virtual ~BindTarget() = default;
  // The pod of `args` as JSON, read where this mode keeps pods, within
  // `budget` (less its read-back share); the error says why not, and where
  // it looked.
  virtual absl::StatusOr<std::string> ReadPod(const api::BindingArgs& args,
                                              const BindBudget& budget) const = 0;
  // Whether this replica may still change the cluster (several replicas:
  // while it is sure it leads).
  virtual bool MayWrite() const = 0;
  // Tells the cluster that the pod of `args` is bound to args.node with the
  // devices of `outcome` (null: a pod that needs no managed device).
  virtual Verdict Publish(const api::BindingArgs& args, const BindOutcome* outcome,
                          const BindBudget& budget) const = 0;
};

// No Kubernetes API: a bind is the allocator's alone.
class StandaloneBindTarget final : public BindTarget {
 public:
  absl::StatusOr<std::string> ReadPod(const api::BindingArgs& args,
                                      const BindBudget&) const override {
    return absl::FailedPreconditionError(absl::StrCat(
        "pdc-extender has no record of pod ", args.pod_namespace, "/", args.pod_name, " (uid ",
        args.pod_uid,
        ") from a filter call, and no Kubernetes API is configured to read it; kube-scheduler "
        "will retry the pod"));
  }
  bool MayWrite() const override { return true; }
  Verdict Publish(const api::BindingArgs&, const BindOutcome*, const BindBudget&) const override {
    return {};
  }
};

// The one standalone target (it has no state).
inline const BindTarget* StandaloneTarget() {
  static const StandaloneBindTarget target;
  return &target;
}

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_BIND_TARGET_H_
