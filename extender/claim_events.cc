#include "extender/claim_events.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/claim_object.h"
#include "common/strings.h"

namespace pdc::extender {

namespace {

std::string Devices(const ClaimStatus& status) {
  std::vector<std::string> out;
  for (const BoundDevice& d : status.devices) {
    out.push_back(d.serial.empty() ? d.address.ToString()
                                   : absl::StrCat(d.address.ToString(), " (serial ", d.serial,
                                                  ")"));
  }
  return absl::StrJoin(out, ", ");
}

}  // namespace

kube::ObjectRef ClaimRef(const ClaimKey& key, std::string_view uid) {
  return kube::ObjectRef{std::string(api::kClaimGroupVersion), std::string(api::kClaimKind), key.ns,
                   key.name, std::string(uid)};
}

void RecordStatusChange(kube::EventRecorder* events, const Claim& claim, std::string_view uid,
                        std::optional<ClaimPhase> before) {
  if (events == nullptr || before == claim.status.phase) return;
  const kube::ObjectRef ref = ClaimRef(claim.key, uid);
  switch (claim.status.phase) {
    case ClaimPhase::kBound:
      if (before == ClaimPhase::kLost) {
        events->Record(ref, kube::EventType::kNormal, "ClaimRecovered",
                       absl::StrCat("its devices are back on node ", claim.status.node, ": ",
                                    Devices(claim.status)));
      } else {
        events->Record(ref, kube::EventType::kNormal, "ClaimBound",
                       absl::StrCat("bound to node ", claim.status.node, ": ",
                                    Devices(claim.status),
                                    "; it keeps them until it is deleted"));
      }
      break;
    case ClaimPhase::kLost:
      events->Record(ref, kube::EventType::kWarning, "ClaimLost", claim.status.lost_reason);
      break;
    case ClaimPhase::kPending:
      break;
  }
}

void RecordReleased(kube::EventRecorder* events, const Claim& claim, std::string_view uid) {
  if (events == nullptr) return;
  std::string what;
  if (claim.status.devices.empty()) {
    what = "it held no device";
  } else if (claim.spec.reclaim_policy == ReclaimPolicy::kDelete) {
    what = absl::StrCat("reclaimPolicy Delete: pdc-node on ", claim.status.node,
                        " erases the user data of ", Devices(claim.status),
                        " and gives them back to their host driver");
  } else {
    what = absl::StrCat("reclaimPolicy Retain: ", Devices(claim.status), " on ",
                        claim.status.node,
                        " keep their data and stay Released: only a claim of namespace ",
                        claim.key.ns,
                        " that pins them, or an administrator's release or hand-over, gives "
                        "them out again");
  }
  events->Record(ClaimRef(claim.key, uid), kube::EventType::kNormal, "ClaimReleased",
                 absl::StrCat("claim deleted; ", what));
}

void RecordWriteRefused(kube::EventRecorder* events, const ClaimKey& key, std::string_view uid,
                        const std::optional<Claim>& claim, std::string_view why) {
  if (events == nullptr) return;
  const std::string message =
      absl::StrCat("kube-apiserver refused pdc's write of PersistentDeviceClaim ", key.ToString(),
                   " (pdc tries again; a bind that needs it is refused meanwhile): ", Sv(why));
  if (!uid.empty()) {
    events->Record(ClaimRef(key, uid), kube::EventType::kWarning, "ClaimWriteRefused", message);
  } else if (claim.has_value() && !claim->spec.owner_vm.empty()) {
    events->Record(kube::ObjectRef{"kubevirt.io/v1", "VirtualMachine", key.ns,
                                   claim->spec.owner_vm, claim->spec.owner_vm_uid},
                   kube::EventType::kWarning, "ClaimWriteRefused", message);
  }
}

void RecordWithheld(kube::EventRecorder* events, const KubeApiStore::WithheldObject& w) {
  if (events == nullptr) return;
  events->Record(ClaimRef(w.key, w.uid), kube::EventType::kWarning, w.reason,
                 absl::StrCat("claim withheld: ", w.message));
}

void RecordDeviceMoved(kube::EventRecorder* events, const DeviceMove& move, std::string_view uid) {
  if (events == nullptr) return;
  events->Record(ClaimRef(move.claim, uid), kube::EventType::kNormal, "DeviceMoved",
                 absl::StrCat(move.released ? "Released device" : "device", " with serial ",
                              move.serial, " on node ", move.node, " is now at ",
                              move.to.ToString(), " (was ", move.from.ToString(),
                              "): the PCI bus was renumbered; the claim keeps the device"));
}

void RecordHandoffCancelled(kube::EventRecorder* events, const PendingHandoff& handoff,
                            const ClaimKey& claim, std::string_view uid, std::string_view why) {
  if (events == nullptr) return;
  events->Record(ClaimRef(claim, uid), kube::EventType::kWarning, "HandoffCancelled",
                 absl::StrCat("pod ", handoff.ns, "/", handoff.pod.pod_name, " (uid ",
                              handoff.pod.pod_uid, ") never received the devices from node ",
                              handoff.node, " and is gone (", Sv(why),
                              "): the claim is no longer reserved for it and keeps its devices"));
}

void RecordConflict(kube::EventRecorder* events, const ClaimConflict& conflict,
                    const std::vector<std::string>& uids) {
  if (events == nullptr) return;
  std::vector<std::string> names;
  for (const ClaimKey& k : conflict.claims) names.push_back(k.ToString());
  const std::string message = absl::StrCat(
      "device ", conflict.address.ToString(), " on node ", conflict.node,
      " is in the status of claims ", absl::StrJoin(names, " and "),
      "; pdc uses it for none of them and holds it Released until an administrator deletes "
      "the wrong claims and releases the device");
  for (size_t i = 0; i < conflict.claims.size() && i < uids.size(); ++i) {
    events->Record(ClaimRef(conflict.claims[i], uids[i]), kube::EventType::kWarning, "DeviceConflict",
                   message);
  }
}

void RecordPodBound(kube::EventRecorder* events, std::string_view ns, std::string_view pod,
                    std::string_view pod_uid, const BindOutcome& outcome) {
  if (events == nullptr || outcome.claims.empty()) return;
  std::vector<std::string> parts;
  for (const BoundClaim& c : outcome.claims) {
    std::vector<std::string> devs;
    for (PciAddress a : c.devices) devs.push_back(a.ToString());
    parts.push_back(absl::StrCat(c.key.name, " (", absl::StrJoin(devs, ", "), ")"));
  }
  events->Record(kube::ObjectRef{"v1", "Pod", std::string(ns), std::string(pod), std::string(pod_uid)},
                 kube::EventType::kNormal, "DevicesBound",
                 absl::StrCat("claims ", absl::StrJoin(parts, ", "), " on node ", outcome.node));
}

}  // namespace pdc::extender
