// DraDriver: one pdc device class served as a DRA driver on this node — the
// ClaimPreparer behind the DRAPlugin service (DraServer), its registration
// with kubelet (Registrar), the prepared-claims checkpoint, and the
// ResourceSlices of the class (SliceBuilder), published through a
// SlicePublisher each time the inventory changes what they say.
// KubeSlicePublisher writes them to kube-apiserver: create, or update with
// the resourceVersion read just before, and delete the pool's slices that
// are no longer part of it.
// Before each publication the DeviceReclaimer says which devices no claim
// holds any more: they are left out of the slices, and only once the
// apiserver holds slices without them does the reclaimer erase them (or
// keep them Released), so a freed device is never offered with its data.
// Thread-safety: OnInventory and Tick from one thread (pdc-node's reconcile
// loop and its timer); the gRPC services run on their own threads.
#ifndef PDC_DRIVER_DRA_DRA_DRIVER_H_
#define PDC_DRIVER_DRA_DRA_DRIVER_H_

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "driver/bind_journal.h"
#include "driver/dra/claim_index.h"
#include "driver/dra/claim_preparer.h"
#include "driver/dra/device_reclaimer.h"
#include "driver/dra/dra_service.h"
#include "driver/dra/prepared_checkpoint.h"
#include "driver/dra/registrar.h"
#include "driver/dra/slice_builder.h"
#include "kube/kube_http_client.h"
#include "model/allocations.h"
#include "model/types.h"

namespace pdc::driver::dra {

class SlicePublisher {
 public:
  virtual ~SlicePublisher() = default;
  // The generation the pool has on the apiserver now (0 when none).
  virtual absl::StatusOr<int64_t> CurrentGeneration(const std::string& driver,
                                                    const std::string& node) = 0;
  // Makes the pool's slices on the apiserver exactly `set`.
  virtual absl::Status Publish(const std::string& driver, const std::string& node,
                               const SliceSet& set) = 0;
};

class KubeSlicePublisher : public SlicePublisher {
 public:
  // `api` must outlive this.
  KubeSlicePublisher(kube::KubeApi* api, absl::Duration timeout) : api_(api), timeout_(timeout) {}
  absl::StatusOr<int64_t> CurrentGeneration(const std::string& driver,
                                            const std::string& node) override;
  absl::Status Publish(const std::string& driver, const std::string& node,
                       const SliceSet& set) override;

 private:
  // Names and pool generations of the slices of `driver` on `node`.
  absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> List(const std::string& driver,
                                                                    const std::string& node);
  kube::KubeApi* const api_;
  const absl::Duration timeout_;
};

struct DraDriverOptions {
  std::string driver_name;
  std::string node_name;
  DeviceClass device_class;
  std::string registry_dir;  // kubelet's plugins_registry/.
  std::string plugins_dir;   // kubelet's plugins/.
  std::string cdi_dir;
  std::string metadata_dir;
  std::string checkpoint_path;
  // Which claim's data each device holds (device_reclaimer.h).
  std::string holders_path;
  ReclaimPolicy reclaim_policy = ReclaimPolicy::kDelete;
  // Administrators' release requests for Released devices; "" = none.
  std::string release_dir;
};

class DraDriver {
 public:
  // Every pointer must outlive the driver; `publisher` may be null (slices
  // are then built, logged, and not published). `journal` is the binder's.
  static absl::StatusOr<std::unique_ptr<DraDriver>> Create(DraDriverOptions options,
                                                           ClaimSource* claims,
                                                           const ClaimIndex* index,
                                                           VfioBinder* binder, BindJournal* journal,
                                                           HostView host,
                                                           SlicePublisher* publisher);
  ~DraDriver();

  // Serves the DRA service and registers with kubelet.
  absl::Status Start();
  // Rebuilds the class's slices from the inventory, without the devices
  // the reclaimer withholds; publishes them when they changed (or the last
  // publication failed); then lets the reclaimer act on what it withheld.
  void OnInventory(const NodeInventory& inventory);
  // pdc-extender's allocations for the node (the reconcile loop's answer):
  // a device they hold is never this driver's to offer or erase.
  void OnAllocations(const NodeAllocations& allocations);
  // Registration again when kubelet refused it or the socket vanished.
  void Tick();
  void Stop();

  const std::string& driver_name() const { return options_.driver_name; }
  // What the DRA service calls (tests call it directly).
  ClaimPreparer* preparer() { return preparer_.get(); }

 private:
  DraDriver(DraDriverOptions options, HostView host, SlicePublisher* publisher)
      : options_(std::move(options)), host_(std::move(host)), publisher_(publisher) {}

  const DraDriverOptions options_;
  const HostView host_;
  SlicePublisher* const publisher_;
  std::unique_ptr<PreparedCheckpoint> checkpoint_;
  std::unique_ptr<PreparedCheckpoint> holders_;
  std::unique_ptr<DeviceReclaimer> reclaimer_;
  std::unique_ptr<SliceBuilder> slices_;
  std::unique_ptr<ClaimPreparer> preparer_;
  std::unique_ptr<DraServer> server_;
  std::unique_ptr<Registrar> registrar_;
  bool publish_pending_ = true;
  std::map<std::string, std::string> model_by_serial_;
  std::map<std::string, uint64_t> capacity_by_serial_;  // Bytes of its namespaces.
  std::optional<std::set<PciAddress>> extender_held_;
};

}  // namespace pdc::driver::dra

#endif  // PDC_DRIVER_DRA_DRA_DRIVER_H_
