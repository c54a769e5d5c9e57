// ClaimPreparer: what NodePrepareResources and NodeUnprepareResources do for
// one claim of one DRA driver (one pdc device class) on this node, apart
// from gRPC (dra_service.h carries it over the wire).
//
// Prepare(namespace, name, uid):
//   1. reads the claim from the API (ClaimSource) and checks its UID (a
//      claim deleted and re-created under the name is another claim);
//   2. takes the allocation's devices whose driver is this one and whose
//      pool is this node (others belong to other drivers or nodes);
//   3. for each, finds its PCI function by device name (DeviceDirectory);
//      unless this claim is prepared already (the checkpoint: kubelet asks
//      again after its restart, or for a second pod of the claim), refuses a
//      device whose /dev/vfio/<group> another process holds open (the
//      previous VM's QEMU still shutting down) with Unavailable naming the
//      holder, so kubelet retries;
//   4. refuses (Unavailable, retried) a device whose holder record names
//      another claim: it holds that claim's data until it is erased or
//      released (device_reclaimer.h); otherwise records this claim as the
//      holder of its devices (durable, before any bind), then binds every
//      device to vfio-pci with the VfioBinder, which refuses (before any
//      write) a device the host uses, or whose erase is pending, with the
//      reason;
//   5. writes one KEP-5304 metadata file per request and then the claim's
//      CDI spec, both atomically, and records the claim in the checkpoint;
//   6. answers the CDI device IDs.
// Every step is idempotent, so a repeated prepare answers the same devices.
// Unprepare(uid) removes the claim's CDI spec and metadata and its
// checkpoint entry, and leaves the devices on vfio-pci: the claim still
// holds them (erase happens only once the claim is gone).
// Errors name the claim and the reason; each claim is independent.
// Thread-safety: thread-safe. Calls for different claims run in parallel
// (the binder serialises its sysfs writes); calls for one claim queue.
#ifndef PDC_DRIVER_DRA_CLAIM_PREPARER_H_
#define PDC_DRIVER_DRA_CLAIM_PREPARER_H_

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "driver/dra/claim_source.h"
#include "driver/dra/prepared_checkpoint.h"
#include "driver/host_usage.h"
#include "driver/sysfs.h"
#include "driver/vfio_binder.h"
#include "model/pci_address.h"

namespace pdc::driver::dra {

// Where a published device is now. Implemented by the ResourceSlice
// builder's record of what it published (slice_builder.h); tests fake it.
class DeviceDirectory {
 public:
  virtual ~DeviceDirectory() = default;
  // NotFound when no device of that name is published on this node.
  virtual absl::StatusOr<PciAddress> Find(std::string_view device_name) const = 0;
};

struct PreparerOptions {
  std::string driver_name;
  std::string node_name;      // The pool: pdc publishes one pool per node.
  std::string resource_name;  // The class's, for PCI_RESOURCE_<NAME>.
  std::string cdi_dir;
  std::string metadata_host_dir;
};

// One device of a prepared claim, as kubelet is told.
struct PreparedDeviceAnswer {
  std::string request;
  std::string pool;
  std::string device;
  std::string cdi_device_id;

  bool operator==(const PreparedDeviceAnswer&) const = default;
};

class ClaimPreparer {
 public:
  // Every pointer must outlive the preparer. `host` views /sys, /dev, /proc
  // (for the VFIO group holders). `holders`: which claim's data each device
  // holds (device_reclaimer.h).
  ClaimPreparer(PreparerOptions options, ClaimSource* claims, const DeviceDirectory* devices,
                VfioBinder* binder, HostView host, PreparedCheckpoint* checkpoint,
                PreparedCheckpoint* holders);

  absl::StatusOr<std::vector<PreparedDeviceAnswer>> Prepare(const std::string& ns,
                                                            const std::string& name,
                                                            const std::string& uid);
  absl::Status Unprepare(const std::string& ns, const std::string& name, const std::string& uid);

  const PreparerOptions& options() const { return options_; }

 private:
  absl::StatusOr<std::vector<PreparedDeviceAnswer>> PrepareClaim(const std::string& ns,
                                                                 const std::string& name,
                                                                 const std::string& uid);
  // Waits until no other call works on `uid`, then marks it busy.
  void Enter(const std::string& uid);
  void Leave(const std::string& uid);

  const PreparerOptions options_;
  ClaimSource* const claims_;
  const DeviceDirectory* const devices_;
  VfioBinder* const binder_;
  const HostView host_;
  PreparedCheckpoint* const checkpoint_;
  PreparedCheckpoint* const holders_;
  absl::Mutex mu_;
  std::set<std::string> busy_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdc::driver::dra

#endif  // PDC_DRIVER_DRA_CLAIM_PREPARER_H_
