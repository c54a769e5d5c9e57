// NVMe erase: wipes the user data of every namespace an NVMe controller
// has allocated, through its admin interface, before a device whose claim
// was deleted with reclaimPolicy Delete is offered to anyone again. All
// commands of one erase go through one open channel (NvmeAdminChannel) of
// the controller; the channel is opened once and checked to be the
// controller of the PCI function being erased (its device number), so a
// controller name the kernel reused meanwhile cannot redirect a format.
// Commands and fields are named as in the NVM Express Base Specification 2.0.
//   Identify Controller (CNS 01h): SN is compared with the
//     identity journaled when the drive was bound (a blank SN: the NGUID,
//     else EUI-64, of the active namespace with the lowest ID, as discovery
//     reads it) before any destructive command: another drive at the
//     address is refused (drive_changed), an unknown identity too.
//     OACS (Format NVM, Namespace Management), SANICAP, FNA, CMIC, CNTLID.
//     FR, with the Firmware Slot Information and Boot Partition log
//     headers (nvme_firmware.h), is compared with what was journaled at
//     bind, before anything is erased: a change refuses the erase
//     (firmware_changed, held for an administrator) or, with
//     hold_on_firmware_change false, is reported with the erase.
//   Active namespace list (CNS 02h; NVMe 1.0 controllers answer Invalid
//     Field, then NSIDs 1..NN are tried) and, with Namespace Management,
//     the Allocated namespace list (CNS 10h): a namespace the guest detached
//     keeps its data and is erased too. Identify Namespace (CNS 00h, or 11h
//     for an allocated one) of each: format (FLBAS, DPS), NMIC, NSATTR.
//   Refused, with the reason, before anything is erased: a write-protected
//     namespace (NSATTR bit 0), a namespace shared with other
//     controllers (NMIC bit 0), a subsystem-wide erase (Sanitize, or Format
//     NVM when FNA says it reaches every namespace of the subsystem) in a
//     subsystem that may hold other controllers (CMIC bit 1): it would
//     erase what another host or function uses.
//   Sanitize (84h) when SANICAP offers it: Crypto Erase, else Block
//     Erase, with AUSE set (a failed sanitize can be retried); it reaches
//     every namespace, attached or not; progress and outcome from the
//     Sanitize Status log page (81h), polled.
//   Otherwise Format NVM (80h) with the strongest secure erase the
//     controller offers (SES=2 cryptographic erase when FNA bit 2 says it
//     is supported, else SES=1 user data erase), keeping each namespace's
//     LBA format; once with NSID FFFFFFFFh when FNA bits 0/1 say a format
//     or secure erase applies to all namespaces (refused when their formats
//     differ). A detached namespace is attached to this controller for its
//     format (Namespace Attachment, 15h) and detached again.
//   Verification: the first and last block of every namespace that was
//     active are read before and after (Read 02h through the channel); one
//     that still holds what it held before (and is not a uniform fill) fails
//     the erase. A channel that cannot read (the kernel's passthrough reads
//     through the controller only with a single namespace) says so in the
//     report.
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
#include <memory>
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

class NvmeVfioOpener;  // nvme_vfio_channel.h

inline constexpr std::string_view kReasonEraseUnsupported = "erase_unsupported";
inline constexpr std::string_view kReasonEraseStatus = "erase_nvme_status";
inline constexpr std::string_view kReasonEraseIo = "erase_io_error";
inline constexpr std::string_view kReasonEraseNoController = "erase_no_controller";
// The erase ran but a block read back still holds what it held before.
inline constexpr std::string_view kReasonEraseUnverified = "erase_unverified";
// A write-protected or shared namespace, or a subsystem-wide erase that
// would reach other controllers: not erased, held for an administrator.
inline constexpr std::string_view kReasonEraseRefused = "erase_refused";

inline constexpr uint8_t kNvmeAdminGetLogPage = 0x02;
inline constexpr uint8_t kNvmeAdminIdentify = 0x06;
inline constexpr uint8_t kNvmeAdminNsAttachment = 0x15;
inline constexpr uint8_t kNvmeAdminFormatNvm = 0x80;
inline constexpr uint8_t kNvmeAdminSanitize = 0x84;
inline constexpr uint8_t kNvmeIoRead = 0x02;
inline constexpr uint32_t kNvmeNsidAll = 0xFFFFFFFF;
inline constexpr uint8_t kNvmeLogSanitizeStatus = 0x81;

struct NvmeAdminCommand {
  uint8_t opcode = 0;
  uint32_t nsid = 0;
  uint32_t cdw10 = 0;
  uint32_t cdw11 = 0;
  uint32_t cdw12 = 0;
  absl::Duration timeout = absl::Seconds(60);
};

// One open NVMe controller: every command of one erase goes through it.
class NvmeAdminChannel {
 public:
  virtual ~NvmeAdminChannel() = default;
  // Runs admin command `cmd`; `data` (possibly empty) is the buffer the
  // controller reads from or writes into. Returns the NVMe status field as
  // the kernel gives it (0: success; SC bits 7:0, SCT bits 10:8, DNR bit
  // 14), or an error when the command could not be run (the message names
  // the errno).
  virtual absl::StatusOr<uint16_t> Run(const NvmeAdminCommand& cmd, std::span<uint8_t> data) = 0;
  // Runs I/O command `cmd` (a Read) on namespace cmd.nsid. Unimplemented
  // when the channel cannot submit I/O commands for that namespace.
  virtual absl::StatusOr<uint16_t> RunIo(const NvmeAdminCommand& cmd, std::span<uint8_t> data) = 0;
};

// Opens NVMe controllers.
class NvmeAdmin {
 public:
  virtual ~NvmeAdmin() = default;
  // True when the character device of `controller` ("nvme0") exists.
  virtual bool Present(std::string_view controller) = 0;
  // Opens `controller` once for a whole erase. `device_number` ("241:0",
  // the controller's sysfs `dev`) must be the number of the node opened:
  // a name the kernel gave another controller meanwhile is refused.
  virtual absl::StatusOr<std::unique_ptr<NvmeAdminChannel>> Open(
      std::string_view controller, std::string_view device_number) = 0;
};

// The real one: /dev/<controller> below `dev_root` ("/dev"), through the
// kernel's passthrough (NVME_IOCTL_ADMIN_CMD, NVME_IOCTL_IO_CMD).
class DevNvmeAdmin : public NvmeAdmin {
 public:
  explicit DevNvmeAdmin(std::string dev_root) : dev_root_(std::move(dev_root)) {}
  bool Present(std::string_view controller) override;
  absl::StatusOr<std::unique_ptr<NvmeAdminChannel>> Open(std::string_view controller,
                                                         std::string_view device_number) override;

 private:
  const std::string dev_root_;
};

// "Invalid Format (SCT 1h SC 0Ah, do not retry)" for a status field.
std::string DescribeNvmeStatus(uint16_t status);

// The Format NVM CDW10 that keeps a namespace's format (FLBAS and DPS of
// its Identify Namespace data) and asks for secure erase `ses` (1: user
// data erase, 2: cryptographic erase).
uint32_t FormatCdw10(uint8_t flbas, uint8_t dps, uint32_t ses = 1);

struct NvmeEraseOptions {
  // Per Format NVM command: a user data erase of a large drive takes minutes.
  absl::Duration format_timeout = absl::Minutes(30);
  absl::Duration identify_timeout = absl::Seconds(60);
  // Bound on a sanitize, polled every `sanitize_poll`.
  absl::Duration sanitize_timeout = absl::Hours(4);
  absl::Duration sanitize_poll = absl::Seconds(2);
  const Clock* clock = RealClock();
  // Called before every admin command with its timeout (the reconciler
  // counts a running erase as progress). May be empty.
  std::function<void(absl::Duration)> before_command;
  // The firmware state journaled when the drive was bound
  // (nvme_firmware.h's word; "" unknown: nothing to compare), and what a
  // change does: refuse the erase (node.firmwareChange: hold) or erase and
  // report it (NvmeEraseReport::firmware_changes).
  std::string bound_firmware;
  bool hold_on_firmware_change = true;
};

struct NvmeEraseReport {
  std::string controller;
  std::string identity;  // What Identify said the drive is (SN, or nguid:/eui64:).
  // "sanitize (crypto erase)", "sanitize (block erase)", "format (SES=1)",
  // "format (SES=2)", or "none" (no namespace allocated).
  std::string method;
  // NSIDs formatted, ascending; {kNvmeNsidAll} after one broadcast format;
  // empty after a sanitize (it reaches every namespace).
  std::vector<uint32_t> formatted;
  std::vector<uint32_t> namespaces;  // Allocated NSIDs found (active or not).
  std::vector<uint32_t> attached;    // Detached ones attached for the format.
  // Blocks read back after the erase; `verify_note` says why none when 0.
  int verified_blocks = 0;
  std::string verify_note;
  // How the commands reached the controller: "vfio-pci" (from userspace,
  // the function never left vfio-pci) or "nvme" (the kernel driver's
  // passthrough), with the reason when the VFIO path was not possible.
  std::string path;
  // The firmware state read now (nvme_firmware.h's word), and what changed
  // since the bind (with hold_on_firmware_change false; else the erase was
  // refused).
  std::string firmware;
  std::vector<std::string> firmware_changes;
};

// Erases all user data of `controller` ("nvme0") through `channel`, once
// Identify says it is `expected_identity` (the journaled serial); `device`
// (the PCI address) only names it in messages. A controller with no
// allocated namespace holds no user data: OK with nothing erased.
absl::StatusOr<NvmeEraseReport> EraseNvmeController(NvmeAdminChannel& channel,
                                                    std::string_view controller,
                                                    std::string_view device,
                                                    std::string_view expected_identity,
                                                    const NvmeEraseOptions& options);

struct EraseReturnOptions {
  NvmeEraseOptions erase;
  // Bound on waiting for nvme's probe to create the controller device.
  absl::Duration controller_wait = absl::Seconds(30);
  absl::Duration poll_interval = absl::Milliseconds(100);
  const Clock* clock = RealClock();
  // Erases a function on vfio-pci where it is (nvme_vfio_erase.h); null:
  // through nvme always. Must outlive the call.
  NvmeVfioOpener* vfio = nullptr;
};

// The return-to-host path of an NVMe controller whose erase is journaled
// pending (VfioBinder::MarkErasePending). On vfio-pci with `options.vfio`
// set, the erase runs there, from userspace (EraseOnVfio in
// nvme_vfio_erase.h), and only the erased drive goes to nvme; when VFIO is
// not possible for it (kReasonVfioUnavailable) it falls back to the kernel
// driver's path: off vfio-pci onto nvme (refused
// while a process holds its VFIO group open), wait (bounded) for its
// controller, check that the host does not use it (holding its block
// devices exclusively for the whole erase), open the controller once,
// erase what Identify says is the journaled drive, and only then
// VfioBinder::CompleteErase. The controller counts as up when its sysfs
// `state` reads "live" and its character device exists (the kernel refuses
// to open it before). On failure the erase stays pending and the device
// goes back to vfio-pci (VfioBinder::HoldForErase), off the host's block
// layer, with the guest's data; a drive that is not the journaled one is
// left where it is, untouched.
absl::StatusOr<NvmeEraseReport> FinishPendingErase(VfioBinder& binder, Sysfs& sys,
                                                   NvmeAdmin& admin, PciAddress address,
                                                   const EraseReturnOptions& options);

}  // namespace pdc::driver

#endif  // PDC_DRIVER_NVME_ERASE_H_
