// NVMe firmware state: what of an NVMe controller's firmware pdc-node can
// read cheaply through its admin interface, recorded when the drive is bound
// to vfio-pci (it is on nvme then) and compared when it comes back for its
// erase. A guest that owns the whole controller can download and activate
// firmware (Firmware Image Download 11h, Firmware Commit 10h) and write the
// boot partitions; pdc-node cannot verify firmware, only notice that what
// the controller says about it changed (docs/design.md §4.1).
// Fields, named as in the NVM Express Base Specification 2.0:
//   revision  Identify Controller FR (bytes 71:64), or sysfs firmware_rev.
//   slots     Firmware Slot Information log page (LID 03h): AFI (the
//             active slot, and the one activated at the next reset) and
//             FRS1..FRS7 (the revision in each slot).
//   boot      Boot Partition log page (LID 15h) header: BPINFO (ABPID, the
//             active boot partition, and BPSZ, its size in 128 KiB units);
//             "none" when the controller answers that it has no such page.
// An empty field is unknown (not read, or unreadable); one unknown at bind
// is not compared, one known at bind and unknown at the return is a change.
// Encoded as one space-free word for the bind journal:
//   fr=<v>,afi=<2 hex>,fs=<v>/<v>/.../<v>,bp=<abpid>.<bpsz>|none
// with every value percent-encoded; unknown keys are ignored on decoding.
// Thread-safety: functions only.
#ifndef PDC_DRIVER_NVME_FIRMWARE_H_
#define PDC_DRIVER_NVME_FIRMWARE_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "driver/nvme_erase.h"

namespace pdc::driver {

// The controller's firmware changed since the drive was bound, and
// node.firmwareChange is `hold`: not erased, held for an administrator.
inline constexpr std::string_view kReasonFirmwareChanged = "firmware_changed";

inline constexpr uint8_t kNvmeLogFirmwareSlot = 0x03;
inline constexpr uint8_t kNvmeLogBootPartition = 0x15;

struct NvmeFirmwareState {
  std::string revision;
  std::string afi;                 // Two hex digits; "" unknown.
  std::vector<std::string> slots;  // FRS1..FRS7, trimmed ("" empty slot).
  std::string boot;                // "<abpid>.<bpsz>", "none", or "" unknown.

  bool empty() const { return revision.empty() && afi.empty() && slots.empty() && boot.empty(); }
  bool operator==(const NvmeFirmwareState&) const = default;
};

// The journal word of `state` ("" when empty).
std::string EncodeFirmwareState(const NvmeFirmwareState& state);
// InvalidArgument naming the part that does not read.
absl::StatusOr<NvmeFirmwareState> DecodeFirmwareState(std::string_view word);

// The FR field of Identify Controller data (4096 bytes), trimmed.
std::string FirmwareRevisionOf(std::span<const uint8_t> identify_controller);

// Reads the Firmware Slot Information and Boot Partition log headers
// through `channel` into `state` (its revision is left as it is). A log the
// controller refuses with an NVMe status leaves slots unknown, boot "none";
// a command that cannot be submitted leaves the field unknown.
void ReadFirmwareLogs(NvmeAdminChannel& channel, absl::Duration timeout, NvmeFirmwareState* state);

// What differs between `bound` (recorded at bind) and `now`, one sentence
// per field; a field not recorded at bind is not compared, one recorded
// then and unreadable now is a change.
std::vector<std::string> FirmwareChanges(const NvmeFirmwareState& bound,
                                         const NvmeFirmwareState& now);

}  // namespace pdc::driver

#endif  // PDC_DRIVER_NVME_FIRMWARE_H_
