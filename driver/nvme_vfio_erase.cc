#include "driver/nvme_vfio_erase.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pdc::driver {

absl::StatusOr<NvmeEraseReport> EraseOnVfio(VfioBinder& binder, NvmeVfioOpener& opener,
                                            PciAddress address, const JournalEntry& entry,
                                            const EraseReturnOptions& options) {
  const std::string addr = address.ToString();
  if (entry.serial.empty()) {
    return WithFailureReason(
        absl::FailedPreconditionError(absl::StrCat(
            "not erasing ", addr, ": the journal names no drive for its pending erase, so which "
            "drive holds the deleted claim's data cannot be checked; held on vfio-pci until an "
            "administrator erases it")),
        kReasonEraseNoIdentity);
  }
  // The group's own single-opener rule refuses it too, but this names the
  // process (a VM that has not let go yet).
  RETURN_IF_ERROR(binder.VfioGroupFree(address, "erasing it on vfio-pci"));
  // The drive the erase is for (its Device Serial Number, where it has
  // one); Identify's serial is compared once the channel is open.
  RETURN_IF_ERROR(binder.PendingEraseDrive(address).status());
  absl::StatusOr<NvmeEraseReport> report;
  {
    auto channel = opener.Open(address);
    if (!channel.ok()) {
      // The reason says whether to wait (a VM holds the group) or fall back
      // (VFIO not possible here).
      const std::string reason = FailureReason(channel.status());
      return WithFailureReason(
          absl::Status(channel.status().code(),
                       absl::StrCat("erasing ", addr, " on vfio-pci: ", channel.status().message())),
          reason.empty() ? kReasonEraseNoController : reason);
    }
    NvmeEraseOptions eo = options.erase;
    eo.clock = options.clock;
    eo.bound_firmware = entry.firmware;
    report = EraseNvmeController(**channel, "on vfio-pci", addr, entry.serial, eo);
    // The channel closes here: the controller is disabled and the group
    // released before anything else may touch the function.
  }
  if (!report.ok()) return report;
  report->path = "vfio-pci";
  RETURN_IF_ERROR(binder.CompleteErase(address, report->identity));
  if (absl::Status back = binder.ReturnErased(address); !back.ok()) {
    report->path = absl::StrCat("vfio-pci (erased and recorded; handing it to nvme failed, "
                                "retried: ", back.message(), ")");
  }
  return report;
}

}  // namespace pdc::driver
