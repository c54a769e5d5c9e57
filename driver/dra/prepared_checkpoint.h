// PreparedCheckpoint: the claims pdc-node answered NodePrepareResources for
// and has not unprepared since, i.e. what kubelet believes prepared. It
// survives a pdc-node restart, so that a prepare kubelet repeats (after its
// own restart, or for a second pod of a shared claim) answers the same
// devices without mistaking the claim's own VM for another holder of the
// device, and an unprepare after the restart finds the claim.
// Every change rewrites the file atomically and fsyncs it (common/
// file_util.h) before it returns, like the bind journal.
// File format (text, one claim a line, sorted by UID):
//   pdc-dra-prepared v1
//   <crc32c> <uid> <namespace> <name> [<request>,<pool>,<device>,<address>]...
// <crc32c> is the masked CRC-32C of the rest of the line, 8 hex digits. A
// line that fails its check or does not parse (a torn tail, a corrupted
// disk block) is skipped and named in problems(): the claim is treated as
// not prepared, which costs at most an overlap check, never a wrong answer.
// A missing file is an empty checkpoint; an unknown header is DataLoss.
// Thread-safety: thread-safe.
#ifndef PDC_DRIVER_DRA_PREPARED_CHECKPOINT_H_
#define PDC_DRIVER_DRA_PREPARED_CHECKPOINT_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "model/pci_address.h"

namespace pdc::driver::dra {

struct PreparedDevice {
  std::string request;
  std::string pool;
  std::string device;
  PciAddress address;

  bool operator==(const PreparedDevice&) const = default;
};

struct PreparedClaim {
  std::string uid;
  std::string ns;
  std::string name;
  std::vector<PreparedDevice> devices;

  bool operator==(const PreparedClaim&) const = default;
};

inline constexpr std::string_view kPreparedCheckpointHeader = "pdc-dra-prepared v1";

class PreparedCheckpoint {
 public:
  static absl::StatusOr<std::unique_ptr<PreparedCheckpoint>> Open(std::string path);

  std::optional<PreparedClaim> Get(const std::string& uid) const;
  std::vector<PreparedClaim> Claims() const;  // Sorted by UID.
  // Lines skipped when the file was opened, each naming its line number.
  const std::vector<std::string>& problems() const { return problems_; }

  // Inserts or replaces; durable on return. InvalidArgument when a field
  // is empty or holds whitespace or a ','.
  absl::Status Put(const PreparedClaim& claim);
  // Removes the claim when present; durable on return.
  absl::Status Remove(const std::string& uid);

  // One line of the file, without the newline (for tests).
  static std::string EncodeLine(const PreparedClaim& claim);

 private:
  explicit PreparedCheckpoint(std::string path) : path_(std::move(path)) {}
  absl::Status PersistLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  std::vector<std::string> problems_;
  mutable absl::Mutex mu_;
  std::map<std::string, PreparedClaim> claims_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdc::driver::dra

#endif  // PDC_DRIVER_DRA_PREPARED_CHECKPOINT_H_
