// NVMe erase: wipes the user data of every namespace of an NVMe controller
// through the kernel's admin passthrough (ioctl NVME_IOCTL_ADMIN_CMD on the
// controller's character device /dev/nvmeN), before a device whose claim was
// deleted with reclaimPolicy Delete is offered to anyone again.
//   Identify Controller (CNS 1): OACS must say Format NVM is supported; FNA
//     says whether a format applies to all namespaces at once.
//   Active namespace list (CNS 2; controllers older than NVMe 1.1 answer it
//     with Invalid Field, then NSIDs 1..NN are tried), Identify Namespace
//     (CNS 0) of each: its current LBA format (FLBAS, DPS) is kept.
//   Format NVM (admin opcode 80h) with SES=1 (user data erase) per
//     namespace, or once with NSID FFFFFFFFh when FNA bit 0 says a format
//     applies to all namespaces (refused when the namespaces use different
//     formats: one broadcast format would change some of them).
// Errors name the controller, the PCI function, the namespace, the command,
// the NVMe status (SCT/SC decoded for the common ones) or the errno, and
// carry a FailureReason (vfio_binder.h) for metrics.
// FinishPendingErase is the whole return-to-host path of an NVMe
// controller (used by the reconciler and the QEMU guest check).
// Thread-safety: the functions are; NvmeAdmin implementations must be.
#ifndef PDC_DRIVER_NVME_ERASE_H_
#define PDC_DRIVER_NVME_ERASE_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "model/pci_address.h"
#include "driver/sysfs.h"
#include "driver/vfio_binder.h"

namespace pdc::driver {

inline constexpr std::string_view kReasonEraseUnsupported = "erase_unsupported";
inline constexpr std::string_view kReasonEraseStatus = "erase_nvme_status";
inline constexpr std::string_view kReasonEraseIo = "erase_io_error";
inline constexpr std::string_view kReasonEraseNoController = "erase_no_controller";

inline constexpr uint8_t kNvmeAdminIdentify = 0x06;
inline constexpr uint8_t kNvmeAdminFormatNvm = 0x80;
inline constexpr uint32_t kNvmeNsidAll = 0xFFFFFFFF;

struct NvmeAdminCommand {
  uint8_t opcode = 0;
  uint32_t nsid = 0;
  uint32_t cdw10 = 0;
  uint32_t cdw11 = 0;
  absl::Duration timeout = absl::Seconds(60);
};

// Submits admin commands to NVMe controllers.
class NvmeAdmin {
 public:
  virtual ~NvmeAdmin() = default;
  // True when the character device of `controller` ("nvme0") exists.
  virtual bool Present(std::string_view controller) = 0;
  // Runs `cmd` on `controller`; `data` (possibly empty) is the buffer the
  // controller writes into. Returns the NVMe status field as the kernel
  // gives it (0: success; SC bits 7:0, SCT bits 10:8, DNR bit 14), or an
  // error when the command could not be run (open or ioctl failed: the
  // message names the errno).
  virtual absl::StatusOr<uint16_t> Run(std::string_view controller, const NvmeAdminCommand& cmd,
                                       std::span<uint8_t> data) = 0;
};

// The real one: /dev/<controller> below `dev_root` ("/dev").
class DevNvmeAdmin : public NvmeAdmin {
 public:
  explicit DevNvmeAdmin(std::string dev_root) : dev_root_(std::move(dev_root)) {}
  bool Present(std::string_view controller) override;
  absl::StatusOr<uint16_t> Run(std::string_view controller, const NvmeAdminCommand& cmd,
                               std::span<uint8_t> data) override;

 private:
  const std::string dev_root_;
};

// "Invalid Format (SCT 1h SC 0Ah, do not retry)" for a status field.
std::string DescribeNvmeStatus(uint16_t status);

// The Format NVM CDW10 that keeps a namespace's format (FLBAS and DPS of
// its Identify Namespace data) and asks for a user data erase (SES=1).
uint32_t FormatCdw10(uint8_t flbas, uint8_t dps);

struct NvmeEraseOptions {
  // Per Format NVM command: a user data erase of a large drive takes minutes.
  absl::Duration format_timeout = absl::Minutes(30);
  absl::Duration identify_timeout = absl::Seconds(60);
  // Called before every admin command with its timeout (the reconciler
  // counts a running erase as progress). May be empty.
  std::function<void(absl::Duration)> before_command;
};

struct NvmeEraseReport {
  std::string controller;
  // NSIDs formatted, ascending; {kNvmeNsidAll} after one broadcast format.
  std::vector<uint32_t> formatted;
  std::vector<uint32_t> namespaces;  // Active NSIDs found.
};

// Erases all user data of `controller` ("nvme0"); `device` (the PCI
// address) only names it in messages. A controller without active
// namespaces holds no user data: OK with nothing formatted.
absl::StatusOr<NvmeEraseReport> EraseNvmeController(NvmeAdmin& admin, std::string_view controller,
                                                    std::string_view device,
                                                    const NvmeEraseOptions& options);

struct EraseReturnOptions {
  NvmeEraseOptions erase;
  // Bound on waiting for nvme's probe to create the controller device.
  absl::Duration controller_wait = absl::Seconds(30);
  absl::Duration poll_interval = absl::Milliseconds(100);
  const Clock* clock = RealClock();
};

// The return-to-host path of an NVMe controller whose erase is journaled
// pending (VfioBinder::MarkErasePending): off vfio-pci onto nvme, wait
// (bounded) for its controller character device, erase, and only then
// VfioBinder::CompleteErase. The controller counts as up when its sysfs
// `state` reads "live" and its character device exists (the kernel refuses
// to open it before). On failure the erase stays pending.
absl::StatusOr<NvmeEraseReport> FinishPendingErase(VfioBinder& binder, Sysfs& sys,
                                                   NvmeAdmin& admin, PciAddress address,
                                                   const EraseReturnOptions& options);

}  // namespace pdc::driver

#endif  // PDC_DRIVER_NVME_ERASE_H_
