// HandoffJournal: pdc-node's durable record of the hand-offs it answered
// kubelet's Allocate with and pdc-extender has not accepted yet
// (docs/design.md §6.4). An entry is written, and fsynced, before Allocate
// answers kubelet, and removed once the confirmation is accepted (or
// nothing is pending for the pod any more); at start the entries are
// confirmed again. Without it a pdc-node restart between the answer and the
// confirmation would keep the node closed to every other VM of the resource
// (the gate, §6.2) until the pod is gone.
// File format (text, one entry a line, sorted by resource name, pod UID):
//   pdc-handoff-journal v1
//   <resource name> <pod uid> <namespace> <pod name> <address>[,<address>...]
// Thread-safety: thread-safe.
#ifndef PDC_DRIVER_DEVICEPLUGIN_HANDOFF_JOURNAL_H_
#define PDC_DRIVER_DEVICEPLUGIN_HANDOFF_JOURNAL_H_

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "model/pci_address.h"

namespace pdc::driver::deviceplugin {

// One answered hand-off: what the confirmation needs, and who it was for.
struct HandoffRecord {
  std::string resource_name;
  std::string pod_uid;
  std::string ns;
  std::string pod_name;
  std::vector<PciAddress> devices;  // Sorted, as the confirmation lists them.

  bool operator==(const HandoffRecord&) const = default;
};

class HandoffJournal {
 public:
  struct Opened {
    std::unique_ptr<HandoffJournal> journal;
    // One DataLoss per line that could not be read ("<path>:<line>: why"),
    // or for a file that is not a hand-off journal at all. The entries that
    // could be read are kept; the file as it was is copied to
    // <path>.corrupt before anything is written over it.
    std::vector<absl::Status> corrupt;
  };

  // Loads `path` (a missing file is an empty journal). Fails only when the
  // file cannot be read or the corrupt copy cannot be written.
  static absl::StatusOr<Opened> Open(std::string path);

  const std::string& path() const { return path_; }
  std::vector<HandoffRecord> Entries() const;  // Sorted by resource name, pod UID.
  bool Contains(std::string_view resource_name, std::string_view pod_uid) const;

  // Inserts or replaces; durable (written atomically and fsynced) on return.
  // InvalidArgument for a field with white space (it would not read back).
  absl::Status Put(const HandoffRecord& record);
  // Removes the entry when present; durable on return.
  absl::Status Remove(std::string_view resource_name, std::string_view pod_uid);

 private:
  using Key = std::pair<std::string, std::string>;  // (resource name, pod uid)
  explicit HandoffJournal(std::string path) : path_(std::move(path)) {}
  absl::Status PersistLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  mutable absl::Mutex mu_;
  std::map<Key, HandoffRecord> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdc::driver::deviceplugin

#endif  // PDC_DRIVER_DEVICEPLUGIN_HANDOFF_JOURNAL_H_
