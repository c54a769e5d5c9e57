// BindJournal: the node driver's durable record of every device it moved to
// vfio-pci, with the driver it came from (and its NVMe serial, which sysfs
// no longer shows once the nvme driver lets go). An entry is written, and
// fsynced, before the first sysfs write of a bind, so a crash half-way is
// finished or rolled back by VfioBinder::Recover on restart, and a claim
// deleted with reclaimPolicy Delete can hand the device back to its driver.
// An NVMe controller handed back is journaled `erasing` before it leaves
// vfio-pci and stays so until its user data is erased (nvme_erase.h): a
// crash or a failed erase leaves the entry, and the device is reported
// unhealthy until a later pass finishes the erase.
// The serial is trusted only in the boot it was read in: after a reboot a
// bus renumbering may have put another drive at the address, and a drive
// that stayed on vfio-pci (vfio-pci.ids=, driverctl) shows no serial to
// check (docs/design.md §4.1).
// The firmware state the drive reported when it was bound (NVMe:
// nvme_firmware.h, one word) is kept with the entry and compared when the
// drive comes back for its erase; so is its PCIe Device Serial Number, when
// it has one: readable on vfio-pci too, another number at the address is
// another drive.
// File format (text, one entry a line, sorted by address):
//   pdc-vfio-journal v3
//   <address> <binding|bound|restoring|erasing|returned> <original driver or -> <serial or -> <boot or -> <firmware or -> <dsn or ->
// A v2 journal (no firmware, no DSN field) is read with both unknown, a v1
// journal (no boot field either) also with every boot "unknown".
// Thread-safety: thread-safe.
#ifndef PDC_DRIVER_BIND_JOURNAL_H_
#define PDC_DRIVER_BIND_JOURNAL_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "model/pci_address.h"

namespace pdc::driver {

enum class JournalState : uint8_t {
  kBinding = 0,    // Writes to sysfs may have started; not verified yet.
  kBound = 1,      // On vfio-pci, verified.
  kRestoring = 2,  // Handing back to the original driver has started.
  kErasing = 3,    // Handing back with an erase: pending until erased.
  // Erased (or handed back) after a Delete: reported to the extender, which
  // holds the device until it sees this, then dropped.
  kReturned = 4,
};

std::string_view ToString(JournalState state);

struct JournalEntry {
  PciAddress address;
  JournalState state = JournalState::kBinding;
  std::string original_driver;  // "" when the device had no driver.
  std::string serial;           // "" when unknown.
  // The boot (kernel boot_id) `serial` was read from sysfs in; "" until Put
  // stamps the current one, kUnknownBoot when a v1 journal held the entry.
  std::string boot_id = {};
  // The drive's firmware state read at bind (its kind's encoding, one
  // space-free word); "" when unknown (not read, or an older journal).
  std::string firmware = {};
  // The PCIe Device Serial Number read at bind ("dsn:..."); "" when none.
  std::string dsn = {};

  bool operator==(const JournalEntry&) const = default;
};

inline constexpr std::string_view kUnknownBoot = "unknown";

class BindJournal {
 public:
  // Loads `path` (a missing file is an empty journal). DataLoss names the
  // line when the file is corrupt: the node driver must not guess which
  // driver a device belongs to. `current_boot` is this boot's kernel
  // boot_id; "" trusts every serial (callers that cannot reboot: tests).
  static absl::StatusOr<std::unique_ptr<BindJournal>> Open(std::string path,
                                                           std::string current_boot = "");

  // Whether `entry.serial` still names the drive at its address: it was read
  // in this boot (the device has not left pdc's hands since, unless it was
  // hot-swapped on vfio-pci), or by a pdc-node that did not record boots.
  bool SerialCurrent(const JournalEntry& entry) const;

  std::optional<JournalEntry> Get(PciAddress address) const;
  std::vector<JournalEntry> Entries() const;  // Sorted by address.

  // Inserts or replaces; durable (written atomically and fsynced) on return.
  // An entry with a serial and no boot_id is stamped with the current boot.
  absl::Status Put(const JournalEntry& entry);
  // Removes the entry when present; durable on return.
  absl::Status Remove(PciAddress address);
  // Moves the entry of `from` to `to` in one write (its drive is now at
  // `to`): NotFound without an entry at `from`, FailedPrecondition when `to`
  // has one.
  absl::Status Move(PciAddress from, PciAddress to);

 private:
  BindJournal(std::string path, std::string current_boot)
      : path_(std::move(path)), current_boot_(std::move(current_boot)) {}
  absl::Status PersistLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  const std::string current_boot_;
  mutable absl::Mutex mu_;
  std::map<PciAddress, JournalEntry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdc::driver

#endif  // PDC_DRIVER_BIND_JOURNAL_H_
