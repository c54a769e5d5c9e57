// VfioBinder: moves PCI devices to vfio-pci and back, through sysfs, safely.
//   Bind:    driver_override <- vfio-pci, unbind from the current driver,
//            address -> drivers_probe, then verify the `driver` link is
//            vfio-pci (the probe write succeeds even when the probe fails)
//            and /dev/vfio/<group> exists.
//   Restore: clear driver_override, unbind from vfio-pci, probe again, verify
//            the original driver (from the BindJournal) is back.
// Both are idempotent. Refused, before any write, with FailedPrecondition and
// a sentence an operator understands: a device no configured class matches,
// no IOMMU group, a group holding a device that is neither allowed nor a PCI
// bridge, binding only part of a group's allowed devices, a device the host
// uses (by the rule of its device kind, see host_usage.h: for storage, also
// the kernel's refusal of an exclusive open), a device already on vfio-pci
// that pdc did not bind (no journal entry: someone else bound it and may
// use it; it is never adopted), a device whose erase is pending (it may hold
// a previous VM's data).
//   Erase:   MarkErasePending journals `erasing` before anything moves;
//            GiveBackForErase hands the device to nvme (after the same-drive
//            check where sysfs shows a serial); CheckUnusedForErase is the
//            host-use check before the first destructive command;
//            HoldForErase puts it back on vfio-pci when the erase failed;
//            CompleteErase journals it `returned` (the acknowledgement the
//            extender waits for) once nvme_erase.h erased it. A drive
//            erased where it is, on vfio-pci (nvme_vfio_erase.h), goes to
//            nvme only after that (ReturnErased).
// No unbind from vfio-pci while a process holds /dev/vfio/<group> open (the
// kernel's unbind would wait, in pdc-node, until the VM lets go): the step
// fails Unavailable (vfio_group_in_use), naming the holder, and is retried.
// Bind keeps the exclusive descriptors of the block devices it checked until
// the devices are off their host driver, so nothing can mount or claim them
// between the check and the unbind.
// Every failure carries a short reason (FailureReason) for metrics.
// Thread-safety: thread-safe; operations are serialised internally.
#ifndef PDC_DRIVER_VFIO_BINDER_H_
#define PDC_DRIVER_VFIO_BINDER_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "model/types.h"
#include "driver/bind_journal.h"
#include "driver/host_usage.h"
#include "driver/pci_function.h"
#include "driver/sysfs.h"

namespace pdc::driver {

// Reasons attached to failed statuses; low-cardinality metric labels.
inline constexpr std::string_view kReasonUnmatchedClass = "unmatched_class";
inline constexpr std::string_view kReasonNoIommuGroup = "no_iommu_group";
inline constexpr std::string_view kReasonGroupShared = "iommu_group_shared";
inline constexpr std::string_view kReasonGroupPartial = "iommu_group_partial";
inline constexpr std::string_view kReasonHostInUse = "host_in_use";
inline constexpr std::string_view kReasonVfioGroupInUse = "vfio_group_in_use";
inline constexpr std::string_view kReasonVfioMissing = "vfio_pci_missing";
inline constexpr std::string_view kReasonProbeFailed = "probe_failed";
inline constexpr std::string_view kReasonRestoreFailed = "restore_failed";
inline constexpr std::string_view kReasonNotFound = "device_not_found";
inline constexpr std::string_view kReasonSysfs = "sysfs_error";
inline constexpr std::string_view kReasonJournal = "journal_error";
inline constexpr std::string_view kReasonErasePending = "erase_pending";
// The drive at a claimed address is not the one last reported (hot-swapped,
// or the bus renumbered, after the report the allocations answer).
inline constexpr std::string_view kReasonDriveChanged = "drive_changed";
// On vfio-pci with no journal entry: pdc did not bind it, so someone else
// did (by hand, driverctl, another tool) and may be using it.
inline constexpr std::string_view kReasonNotBoundByPdc = "not_bound_by_pdc";
// No identity to compare the drive with (nothing journaled): not erased.
inline constexpr std::string_view kReasonEraseNoIdentity = "erase_identity_unknown";

// The reason of a status returned by VfioBinder ("" for OK).
std::string FailureReason(const absl::Status& status);
// `status` with `reason` attached unless it carries one already.
absl::Status WithFailureReason(absl::Status status, std::string_view reason);

struct BinderOptions {
  std::vector<DeviceClass> classes;
  // Relative to the proc root; "1/mountinfo" when running in a container
  // with the host's PID namespace.
  std::string mountinfo_path = "self/mountinfo";
  // How long to wait for the kernel's asynchronous effects (driver link,
  // /dev/vfio node) before calling a step failed.
  int verify_attempts = 200;
  absl::Duration verify_interval = absl::Milliseconds(10);
  // Sleeps between verification attempts; tests pass a fake. Must outlive
  // the binder.
  const Clock* clock = RealClock();
  // Identify for the shared-controller check (host_usage.h); null: sysfs
  // only. Must outlive the binder.
  NvmeAdmin* nvme_admin = nullptr;
  HostUsePolicy policy = {};
};

enum class BindOutcome { kAlreadyBound, kBound };
enum class RestoreOutcome { kAlreadyRestored, kRestored };

class VfioBinder {
 public:
  // `sys`, `dev`, `proc` are views rooted at /sys, /dev and /proc; all must
  // outlive the binder, as must `journal`.
  VfioBinder(Sysfs* sys, Sysfs* dev, Sysfs* proc, BindJournal* journal,
             BinderOptions options);

  // The safety checks of Bind, without writing anything.
  absl::Status CheckBindable(const std::vector<PciAddress>& addresses);

  // For each of `addresses` that the host uses, why: "the host uses it:
  // ..." or "cannot tell whether the host uses it: ...". Functions on
  // vfio-pci, matched by no class, or gone are skipped, and so are those the
  // host leaves alone (one on no driver is checked by its kind). A drive pdc bound for a claim before (its
  // journal entry names the serial it shows) is not refused for what its
  // guest wrote on it. One read of the host's processes and tables
  // for all (HostUsesOfEach); nothing stays open.
  std::map<PciAddress, std::string> HostUses(const std::vector<PciAddress>& addresses);

  // Binds `addresses` (every allowed device of their IOMMU groups) to
  // vfio-pci, all or nothing: when one device fails, the devices this call
  // moved are given back.
  absl::StatusOr<BindOutcome> Bind(const std::vector<PciAddress>& addresses);

  // Gives a device back to the driver it had before pdc bound it, without
  // erasing it. FailedPrecondition (erase_pending) when its erase is pending.
  absl::StatusOr<RestoreOutcome> Restore(PciAddress address);

  // Journals the device `erasing` (durable before anything moves), keeping
  // what the journal knew of it. Returns false, journaling nothing, when
  // pdc never had it: no journal entry and not on vfio-pci.
  absl::StatusOr<bool> MarkErasePending(PciAddress address);
  // The `erasing` entry of `address`, if any.
  std::optional<JournalEntry> ErasingEntry(PciAddress address);
  // Hands a device whose erase is pending to nvme (the erase needs it); a
  // no-op when it is there already. Refused with erase_identity_unknown
  // when the journal names no drive, with drive_changed when sysfs shows a
  // serial other than the journaled one (not ours: left alone), and
  // Unavailable (vfio_group_in_use) while its VFIO group is open. The entry
  // stays `erasing`.
  absl::Status GiveBackForErase(PciAddress address);
  // The function at `address` if it is the drive whose erase is pending
  // there: the journal names a drive, and its PCIe Device Serial Number
  // (journaled at bind) and, on a host driver, its serial are that drive's;
  // refused as GiveBackForErase is otherwise. Moves nothing.
  absl::StatusOr<PciFunctionInfo> PendingEraseDrive(PciAddress address);
  // The host-use check of `function` (on nvme, its erase pending): OK when
  // the host leaves it alone, its block devices then held in `hold`;
  // FailedPrecondition (host_in_use) otherwise.
  absl::Status CheckUnusedForErase(const PciFunctionInfo& function, BlockDeviceHold* hold);
  // Back onto vfio-pci after a failed erase, so the host's block layer does
  // not keep the guest's data; the entry stays `erasing`.
  absl::Status HoldForErase(PciAddress address);
  // The erase of drive `identity` is done: the entry turns `returned`
  // (FailedPrecondition when it is not `erasing`) until ForgetReturned.
  absl::Status CompleteErase(PciAddress address, std::string_view identity);
  // OK unless a process holds the VFIO group of `address` open (a VM
  // still runs on it): then Unavailable (vfio_group_in_use), naming it;
  // `doing` names the step in the message.
  absl::Status VfioGroupFree(PciAddress address, std::string_view doing);
  // Hands a drive erased on vfio-pci (nvme_vfio_erase.h; its entry
  // `returned`) to nvme; a no-op when it is off vfio-pci already.
  // FailedPrecondition when the entry is not `returned`; Unavailable
  // (vfio_group_in_use) while its VFIO group is open.
  absl::Status ReturnErased(PciAddress address);
  // Drops a `returned` entry (the extender acknowledged it), handing a
  // drive still on vfio-pci to nvme first (ReturnErased); a no-op for any
  // other state.
  absl::Status ForgetReturned(PciAddress address);
  // Moves the `erasing` entry of `from` to `to`, where its drive is now (a
  // renumbering): FailedPrecondition when `to` has an entry.
  absl::Status MoveErase(PciAddress from, PciAddress to);

  // Finishes or rolls back what a crash interrupted: `binding` entries whose
  // device reached vfio-pci become `bound`, the others are rolled back to
  // their original driver; `restoring` entries are restored; `erasing`
  // entries are left for the erase to finish (the reconciler's passes).
  // Returns the first error after trying every entry.
  absl::Status Recover();

 private:
  // `hold` (may be null) receives the exclusive descriptors of the block
  // devices checked.
  absl::Status CheckBindableLocked(const std::vector<PciFunctionInfo>& infos,
                                   BlockDeviceHold* hold) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status BindOneLocked(const PciFunctionInfo& info) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<RestoreOutcome> RestoreLocked(PciAddress address)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Clears driver_override, unbinds from vfio-pci when bound there, probes
  // and waits for `original` ("" = any driver but vfio-pci).
  absl::Status GiveBackLocked(PciAddress address, const std::string& original)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ReturnErasedLocked(PciAddress address) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<PciFunctionInfo> PendingEraseDriveLocked(PciAddress address)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OK unless a process holds the VFIO group of `address` open (then
  // Unavailable, vfio_group_in_use, naming it); `doing` names the step.
  absl::Status VfioGroupFreeLocked(PciAddress address, std::string_view doing)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Polls until `done` returns true or the attempts run out.
  bool WaitFor(const std::function<bool()>& done);
  std::string CurrentDriver(PciAddress address);
  // The function shows the serial its journal entry names (not empty).
  bool PdcDrive(const PciFunctionInfo& info) const;

  Sysfs* const sys_;
  Sysfs* const dev_;
  BindJournal* const journal_;
  const BinderOptions options_;
  const HostView host_;
  absl::Mutex mu_;
};

}  // namespace pdc::driver

#endif  // PDC_DRIVER_VFIO_BINDER_H_
