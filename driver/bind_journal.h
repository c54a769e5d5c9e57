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
// File format (text, one entry a line, sorted by address):
//   pdc-vfio-journal v1
//   <address> <binding|bound|restoring|erasing> <original driver or -> <serial or ->
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
};

std::string_view ToString(JournalState state);

struct JournalEntry {
  PciAddress address;
  JournalState state = JournalState::kBinding;
  std::string original_driver;  // "" when the device had no driver.
  std::string serial;           // "" when unknown.

  bool operator==(const JournalEntry&) const = default;
};

class BindJournal {
 public:
  // Loads `path` (a missing file is an empty journal). DataLoss names the
  // line when the file is corrupt: the node driver must not guess which
  // driver a device belongs to.
  static absl::StatusOr<std::unique_ptr<BindJournal>> Open(std::string path);

  std::optional<JournalEntry> Get(PciAddress address) const;
  std::vector<JournalEntry> Entries() const;  // Sorted by address.

  // Inserts or replaces; durable (written atomically and fsynced) on return.
  absl::Status Put(const JournalEntry& entry);
  // Removes the entry when present; durable on return.
  absl::Status Remove(PciAddress address);

 private:
  explicit BindJournal(std::string path) : path_(std::move(path)) {}
  absl::Status PersistLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  mutable absl::Mutex mu_;
  std::map<PciAddress, JournalEntry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdc::driver

#endif  // PDC_DRIVER_BIND_JOURNAL_H_
