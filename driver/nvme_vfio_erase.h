// The erase of a claimed NVMe controller where it is, on vfio-pci: the
// admin commands reach it from userspace through its VFIO group
// (nvme_vfio_channel.h), so the host's block layer never sees the guest's
// namespaces before they are erased (udev, blkid, LVM autoactivation, mdadm
// incremental assembly, multipath and fstab act on what they find). Only
// the erased drive is handed to nvme. Called by FinishPendingErase
// (nvme_erase.h), which falls back to the kernel driver's path when this
// one fails with kReasonVfioUnavailable.
// Thread-safety: as FinishPendingErase.
#ifndef PDC_DRIVER_NVME_VFIO_ERASE_H_
#define PDC_DRIVER_NVME_VFIO_ERASE_H_

#include "absl/status/statusor.h"
#include "model/pci_address.h"
#include "driver/bind_journal.h"
#include "driver/nvme_erase.h"
#include "driver/nvme_vfio_channel.h"
#include "driver/vfio_binder.h"

namespace pdc::driver {

// Erases the function at `address` (on vfio-pci, its erase pending as
// `entry` journals it) through `opener`'s channel: Identify must name the
// journaled drive (a blank journal or another drive is refused, nothing
// changed), then EraseNvmeController's refusals, erase and verification.
// On success the erase is recorded (VfioBinder::CompleteErase) and only
// then the function goes to nvme (VfioBinder::ReturnErased; when that
// fails the report's `path` says so and the binder retries it). On
// failure the function stays on vfio-pci with its erase pending; a group a
// VM still holds open fails Unavailable (vfio_group_in_use).
absl::StatusOr<NvmeEraseReport> EraseOnVfio(VfioBinder& binder, NvmeVfioOpener& opener,
                                            PciAddress address, const JournalEntry& entry,
                                            const EraseReturnOptions& options);

}  // namespace pdc::driver

#endif  // PDC_DRIVER_NVME_VFIO_ERASE_H_
