// DeviceReclaimer: what pdc-node's DRA driver does with a device of its
// class once no ResourceClaim holds it any more — the DRA side of the
// reclaim policy (docs/dra.md §2).
//
// Who holds a device is recorded by the ClaimPreparer before it binds the
// device to vfio-pci (the holders file: the claim's UID, namespace, name
// and devices, fsynced; the format of the prepared-claims checkpoint). The
// record stays after NodeUnprepareResources (a stopped VM's claim still
// holds its data) and goes only when the device is erased or released.
// A device is *freed* when a claim that holds it is gone: deleted (its UID
// is not in the ClaimIndex, and a read of the claim by name says NotFound
// or another UID), or still there but no longer allocated that device
// (status.allocation cleared). A claim the index could not decode is never
// taken for gone. A device on vfio-pci that pdc bound (a bind-journal
// entry) that no holder record names (they were lost) and no claim is
// allocated is held Released whatever the policy: whose data it holds is
// unknown, so it is neither offered nor erased unasked; one that a live
// claim is allocated is adopted by that claim. A device pdc-extender's
// allocations hold (a PersistentDeviceClaim from before its class turned
// to DRA mode) is neither: it is withheld and left alone, and so is every
// such device until pdc-extender's allocations were read once.
// A freed device is first withdrawn from the ResourceSlice (Plan names it
// in `withheld`; the caller publishes the slices without it and only then
// calls Apply), then:
//   Delete, of a kind that scrubs (NVMe): Apply journals its erase pending
//     (VfioBinder::MarkErasePending, fsynced, keyed by address with the
//     drive's serial) and drops the holder record; the reconcile loop runs
//     the erase (same-drive identity check and host-use check before the
//     first destructive command) and the device, back on its host driver
//     with its erase recorded done, is published again by the next pass.
//   Retain, or a kind that cannot scrub: the device stays on vfio-pci,
//     withdrawn and Released (the reason names the claim), until an
//     administrator releases it: a file named after the device in the
//     release directory (pdc-node --release-dra-device=DRIVER/DEVICE writes
//     it). A released device is erased when its kind scrubs, else handed
//     back to its host driver unerased, as the administrator asked.
// A device prepared (the prepared-claims checkpoint) for a claim that
// still exists is never erased. Until the index has listed the claims
// once, every device with a holder record, and every device pdc holds on
// vfio-pci, is withheld.
// Thread-safety: Plan and Apply from one thread (the reconcile loop); the
// files they share with the ClaimPreparer are thread-safe.
#ifndef PDC_DRIVER_DRA_DEVICE_RECLAIMER_H_
#define PDC_DRIVER_DRA_DEVICE_RECLAIMER_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "driver/bind_journal.h"
#include "driver/dra/claim_index.h"
#include "driver/dra/claim_source.h"
#include "driver/dra/prepared_checkpoint.h"
#include "driver/vfio_binder.h"
#include "model/types.h"

namespace pdc::driver::dra {

struct ReclaimerOptions {
  std::string driver_name;
  std::string node_name;  // The pool.
  ReclaimPolicy policy = ReclaimPolicy::kDelete;
  // Where administrators drop release requests (one empty file per device
  // name); "" = none accepted.
  std::string release_dir;
};

enum class ReclaimAction : uint8_t {
  kErase,    // Journal the erase pending, then drop the holder record.
  kRestore,  // Released by an administrator, kind without scrub: hand back.
  kForget,   // The holder's device never reached vfio-pci: drop the record.
  kAdopt,    // Record the live claim allocated the device as its holder.
};

struct ReclaimStep {
  ReclaimAction action = ReclaimAction::kErase;
  PciAddress address;
  std::string device;  // The device name (from its serial).
  std::string why;     // For the log.
  bool release_request = false;  // Consumes the administrator's request.
  ResourceClaimView adopter;     // kAdopt only.
};

struct ReclaimPlan {
  // Devices not to publish, with the reason (shown in the slice log).
  std::map<PciAddress, std::string> withheld;
  std::vector<ReclaimStep> steps;
};

class DeviceReclaimer {
 public:
  // Every pointer must outlive the reclaimer. `claims` confirms a claim
  // the index misses before anything is done about it.
  DeviceReclaimer(ReclaimerOptions options, const ClaimIndex* index, ClaimSource* claims,
                  PreparedCheckpoint* holders, const PreparedCheckpoint* prepared,
                  BindJournal* journal, VfioBinder* binder);

  // What to do about `devices` (the inventory's devices of this class).
  // `extender_held`: the addresses pdc-extender's allocations hold, nullopt
  // until they were read.
  ReclaimPlan Plan(const std::vector<Device>& devices,
                   const std::optional<std::set<PciAddress>>& extender_held);
  // Does the steps; call only once slices without `plan.withheld` are what
  // the apiserver holds. Errors are logged and retried by the next pass.
  void Apply(const ReclaimPlan& plan);

 private:
  enum class Liveness : uint8_t { kHolds, kGone, kUnknown };
  // Whether claim `holder` still holds `device`, from `snapshot`, confirmed
  // by a read of the claim when the snapshot says it is gone.
  Liveness Holds(const PreparedClaim& holder, const std::string& device,
                 const ClaimSnapshot& snapshot);
  absl::Status DropHolder(const std::string& device);
  bool ReleaseRequested(const std::string& device) const;
  void ConsumeRelease(const std::string& device);
  // Logs `message` for `device` once per change.
  void Note(const std::string& device, const std::string& message, bool warn);

  const ReclaimerOptions options_;
  const ClaimIndex* const index_;
  ClaimSource* const claims_;
  PreparedCheckpoint* const holders_;
  const PreparedCheckpoint* const prepared_;
  BindJournal* const journal_;
  VfioBinder* const binder_;
  std::map<std::string, std::string> noted_;  // device -> last message logged
  // UIDs read back as deleted: a UID never comes back.
  std::set<std::string> deleted_uids_;
  // Release requests naming no Released device (removed by Apply).
  std::vector<std::string> stale_requests_;
};

// True when `claim` is allocated `device` of `driver` in pool `pool`.
bool AllocatesDevice(const ResourceClaimView& claim, const std::string& driver,
                     const std::string& pool, const std::string& device);

}  // namespace pdc::driver::dra

#endif  // PDC_DRIVER_DRA_DEVICE_RECLAIMER_H_
