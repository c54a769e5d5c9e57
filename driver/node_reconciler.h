// Reconciler: the loop of pdc-node. Each pass discovers the managed devices,
// reports the inventory to pdc-extender when it changed or the heartbeat is
// due, long-polls the node's allocations, then makes sysfs match them:
// every claimed device (whole IOMMU groups together) is bound to vfio-pci and
// kept there, also while its VM is stopped; every `returnToHost` device
// (claim deleted with reclaimPolicy Delete) goes back to its original driver;
// devices of claims deleted with Retain are left on vfio-pci. After any
// change the inventory is reported again at once.
// When the extender is unreachable the pass fails, devices stay as they
// are, and Run() retries with exponential backoff, catching up on the next
// answer. Binding errors are counted by reason, logged once per change of
// message, and retried on the next pass. A device the host uses (by the
// check a bind makes, see host_usage.h) is reported unhealthy, so it is
// never allocated; the reason is logged.
// Thread-safety: RunOnce/Run from one thread; Healthy() and Stop from any.
#ifndef PDC_DRIVER_NODE_RECONCILER_H_
#define PDC_DRIVER_NODE_RECONCILER_H_

#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "model/types.h"
#include "common/backoff.h"
#include "common/clock.h"
#include "driver/bind_journal.h"
#include "driver/node_extender_api.h"
#include "driver/node_metrics.h"
#include "driver/nvme_erase.h"
#include "driver/pci_function.h"
#include "driver/sysfs.h"
#include "driver/vfio_binder.h"

namespace pdc::driver {

struct ReconcilerOptions {
  std::string node;
  std::vector<DeviceClass> classes;
  // Inventory is re-sent at least this often; also the long-poll wait.
  absl::Duration heartbeat = absl::Seconds(10);
  absl::Duration backoff_initial = absl::Seconds(1);
  absl::Duration backoff_max = absl::Seconds(30);
  // Called on the loop thread with every inventory discovered and every
  // allocations answer received (the device plugin's view of the node).
  // Must not block for long.
  std::function<void(const NodeInventory&)> on_inventory;
  std::function<void(const NodeAllocations&)> on_allocations;
  // Resource names whose devices are not reported to pdc-extender (classes
  // in `dra` mode: kube-scheduler's DRA plugin allocates them from the
  // ResourceSlices pdc-node's DRA driver publishes, never pdc-extender).
  // on_inventory still sees them.
  std::vector<std::string> unreported_resources;
  // Submits the erase commands; must outlive the reconciler. Null: every
  // NVMe erase fails (the device stays unhealthy, never reported free).
  NvmeAdmin* nvme_admin = nullptr;
  // Timeouts of the erase and of the wait for the nvme controller; its
  // clock is the reconciler's.
  EraseReturnOptions erase;
  // Retries of a failed erase: initial, doubled, capped.
  absl::Duration erase_backoff_initial = absl::Seconds(10);
  absl::Duration erase_backoff_max = absl::Minutes(10);
};

// What one pass did; `errors` are device-level problems (sorted).
struct PassResult {
  bool reported = false;
  int bound = 0;     // Devices moved to vfio-pci in this pass.
  int restored = 0;  // Devices handed back in this pass (erased or not).
  int erased = 0;    // NVMe controllers erased in this pass.
  std::vector<std::string> errors;
};

// Retries back off with pdc::NextBackoff (common/backoff.h).

class Reconciler {
 public:
  // All pointers must outlive the reconciler; `metrics` may be null.
  Reconciler(Sysfs* sys, VfioBinder* binder, BindJournal* journal, ExtenderApi* api,
             NodeMetrics* metrics, const Clock* clock, ReconcilerOptions options);

  // Finishes or rolls back binds a crash interrupted (VfioBinder::Recover).
  // Erases journaled pending are left to the passes (they report those
  // devices unhealthy until erased).
  absl::Status Start();

  // One pass with a long-poll of `wait` (zero: answer at once). Fails only
  // when sysfs cannot be walked or the extender cannot be reached.
  absl::StatusOr<PassResult> RunOnce(absl::Duration wait);

  // Passes until `stop` is notified, backing off after failures.
  void Run(absl::Notification* stop);

  // The loop made progress recently (a pass ended, successfully or not).
  bool Healthy() const;

 private:
  absl::StatusOr<NodeInventory> Discover();
  // Marks unhealthy the devices the host uses (VfioBinder::HostUses) and
  // logs why, once per change.
  void MarkHostUsed(NodeInventory* inventory);
  absl::Status Report(const NodeInventory& discovered, bool force);
  // What pdc-extender is told of `discovered` (without unreported_resources).
  NodeInventory Reportable(const NodeInventory& discovered) const;
  // OK unless the last inventory reported another serial at `now.address`:
  // the allocations answer was computed from that inventory, so a drive that
  // took the address since (a hot swap, a renumbering during the long-poll)
  // must not be taken for the claimed one.
  absl::Status SameDriveAsReported(const PciFunctionInfo& now) const;
  void Apply(const NodeAllocations& allocations, PassResult* result);
  void ReturnToHost(PciAddress address, PassResult* result);
  // Runs the erases journaled pending whose retry time came.
  void RunPendingErases(const std::set<PciAddress>& claimed, PassResult* result);
  // Logs a claim whose devices changed address since the last answer.
  void LogMovedClaims(const NodeAllocations& allocations);
  // Where the erase of journal entry `e` runs (*at): its own address, or
  // the address its drive moved to (the entry moves with it). False when
  // it must wait (the reason noted).
  bool FollowErase(const JournalEntry& e, const std::set<PciAddress>& claimed, PciAddress* at,
                   PassResult* result);
  void EraseOne(PciAddress address, PassResult* result);
  void NoteError(const std::string& key, const absl::Status& s, std::string_view operation,
                 PassResult* result);

  Sysfs* const sys_;
  VfioBinder* const binder_;
  BindJournal* const journal_;
  ExtenderApi* const api_;
  NodeMetrics* const metrics_;
  const Clock* const clock_;
  const ReconcilerOptions options_;

  // Loop-thread state.
  std::optional<NodeInventory> last_reported_;
  std::optional<NodeInventory> last_discovered_;
  absl::Time last_report_time_ = absl::InfinitePast();
  uint64_t reports_ = 0;  // Inventories sent.
  uint64_t since_ = 0;
  // The last pass failed (or none ran yet): the next one re-sends the
  // inventory and polls the allocations from version 0.
  bool resync_ = true;
  std::map<PciAddress, std::string> expected_driver_;
  std::map<std::string, std::string> last_error_;  // key -> message logged
  // Each claim's devices in the last allocations answer (sorted by address).
  std::map<ClaimKey, std::vector<PciAddress>> claim_devices_;
  struct EraseRetry {
    absl::Time next = absl::InfinitePast();
    absl::Duration backoff = absl::ZeroDuration();
    std::string message;
  };
  std::map<PciAddress, EraseRetry> erase_retry_;
  // While an erase command runs: the time until which it counts as progress.
  std::atomic<int64_t> busy_until_unix_nanos_{0};

  std::atomic<int64_t> last_pass_unix_nanos_{0};
};

}  // namespace pdc::driver

#endif  // PDC_DRIVER_NODE_RECONCILER_H_
