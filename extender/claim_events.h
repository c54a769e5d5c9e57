// The Kubernetes Events pdc-extender publishes about claims and VM pods
// (docs/operations.md, "Kubernetes Events"), so that `kubectl describe`
// tells a claim's story: ClaimBound, ClaimLost, ClaimRecovered,
// ClaimReleased, ClaimWriteRefused, DeviceConflict, DeviceMoved,
// HandoffCancelled on the PersistentDeviceClaim (ClaimWriteRefused on its
// VM while the claim has no object); DevicesBound
// on the pod. Every function takes a null recorder (no Kubernetes API) as
// "publish nothing".
// Thread-safety: as EventRecorder::Record.
#ifndef PDC_EXTENDER_CLAIM_EVENTS_H_
#define PDC_EXTENDER_CLAIM_EVENTS_H_

#include <optional>
#include <string_view>

#include "allocator/allocator.h"
#include "kube/event_recorder.h"
#include "extender/kube_api_store.h"
#include "model/types.h"

namespace pdc::extender {

// The PersistentDeviceClaim object `key` with `uid`.
kube::ObjectRef ClaimRef(const ClaimKey& key, std::string_view uid);

// The status of `claim` (object `uid`) was recorded; its phase was
// `before` (nullopt: unknown). Phase changes become events.
void RecordStatusChange(kube::EventRecorder* events, const Claim& claim, std::string_view uid,
                        std::optional<ClaimPhase> before);
// The claim was deleted and its devices go by its reclaim policy.
void RecordReleased(kube::EventRecorder* events, const Claim& claim, std::string_view uid);
// `conflict`'s device is in the status of each of its claims (object UIDs
// by the same index in `uids`).
void RecordConflict(kube::EventRecorder* events, const ClaimConflict& conflict,
                    const std::vector<std::string>& uids);
// A claim withheld at recovery (its spec unreadable or contradicting its
// status): a Warning with the withholding's reason.
void RecordWithheld(kube::EventRecorder* events, const KubeApiStore::WithheldObject& w);
// kube-apiserver refused a write of claim `key`'s object (`uid`; "" when
// it has none yet: then the Event goes to the owner VM of `claim`, if it
// has one): a Warning ClaimWriteRefused with the apiserver's answer.
void RecordWriteRefused(kube::EventRecorder* events, const ClaimKey& key, std::string_view uid,
                        const std::optional<Claim>& claim, std::string_view why);
// A device of claim `move.claim` (object `uid`), or a Released mark, was
// found at a new PCI address by its serial (the node's bus was renumbered).
void RecordDeviceMoved(kube::EventRecorder* events, const DeviceMove& move, std::string_view uid);
// The pending hand-off of `handoff`'s pod was cancelled (`why`: the pod
// ended or is gone before its node's device plugin gave it the devices):
// claim `claim` (object `uid`) is no longer reserved for it and keeps its
// devices.
void RecordHandoffCancelled(kube::EventRecorder* events, const PendingHandoff& handoff,
                            const ClaimKey& claim, std::string_view uid, std::string_view why);
// A bind gave pod `ns`/`pod` (`pod_uid`) its claims' devices.
void RecordPodBound(kube::EventRecorder* events, std::string_view ns, std::string_view pod,
                    std::string_view pod_uid, const BindOutcome& outcome);

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_CLAIM_EVENTS_H_
