// KubeBindTarget: the bind saga's Kubernetes part (bind_target.h), for
// pdc-extender with a Kubernetes API (docs/design.md §5.4):
//  - a pod no filter call told of is read from the API (GET pod);
//  - a bind is published as the pod's devices annotation
//    (pdc.kubevirt.io/devices, DevicesAnnotation) and then its Binding;
//    the annotation comes first, so a pod that runs has its devices named;
//  - a Binding whose outcome the API did not give (timeout, connection lost
//    after sending, 409, 5xx: the apiserver may have committed it) is
//    settled by reading the pod back: bound to this node with this UID is
//    success; gone, re-created or bound elsewhere is a refusal; anything
//    else is kOutcomeUnknown. The Binding is never sent twice (net/
//    http_client.h);
//  - each write gets what is left of the budget, and no more than this
//    replica is sure to lead (`leadership_left`); none is sent once it is
//    not (kNotLeader).
// Thread-safety: thread-safe.
#ifndef PDC_EXTENDER_KUBE_BIND_TARGET_H_
#define PDC_EXTENDER_KUBE_BIND_TARGET_H_

#include <functional>
#include <string>

#include "absl/time/time.h"
#include "common/clock.h"
#include "extender/bind_target.h"
#include "extender/extender_metrics.h"
#include "kube/kube_client.h"

namespace pdc::extender {

class KubeBindTarget final : public BindTarget {
 public:
  struct Options {
    const Clock* clock = RealClock();
    ExtenderMetrics* metrics = nullptr;  // Null: read-backs are not counted.
    // With several replicas: how long this replica is still sure to lead
    // (LeaderElector::SureFor); zero or less once it is not. Empty: one
    // replica, always sure.
    std::function<absl::Duration()> leadership_left;
  };

  // `kube` outlives the target.
  KubeBindTarget(kube::KubeClient* kube, Options options)
      : kube_(kube), options_(std::move(options)) {}

  absl::StatusOr<std::string> ReadPod(const api::BindingArgs& args,
                                      const BindBudget& budget) const override;
  bool MayWrite() const override;
  Verdict Publish(const api::BindingArgs& args, const BindOutcome* outcome,
                  const BindBudget& budget) const override;

 private:
  // POSTs the Binding; when its outcome is unknown, reads the pod back.
  Verdict PostBinding(const api::BindingArgs& args, const BindBudget& budget) const;
  // Time left of `budget`, minus `reserve`.
  absl::Duration Left(const BindBudget& budget, absl::Duration reserve) const;
  // The timeout of one write: what is left of `budget` minus `reserve`, no
  // longer than this replica is sure to lead.
  absl::Duration WriteTimeout(const BindBudget& budget, absl::Duration reserve) const;

  kube::KubeClient* const kube_;
  const Options options_;
};

// The value of the pdc.kubevirt.io/devices annotation for a bind:
// {"<resource name>": ["<PCI address>", ...], ...}, sorted.
std::string DevicesAnnotation(const BindOutcome& outcome);

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_KUBE_BIND_TARGET_H_
