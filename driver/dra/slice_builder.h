// SliceBuilder: the ResourceSlices (resource.k8s.io/v1) that publish one
// pdc device class of this node to the scheduler: one pool named after the
// node, `nodeName` set, at most 128 devices a slice (the API's limit), every
// slice of the pool carrying the pool's generation and slice count, the
// generation bumped whenever what is published changes (the scheduler uses
// only the slices of a pool's highest generation).
// A device is named from its serial, never its address, so a PCI
// renumbering keeps its name and an allocation keeps meaning the same drive:
// a DNS label made of the serial's lower-cased letters and digits (other
// characters become '-') and 8 hex digits of the serial's CRC-32C (two
// serials differing only in case or punctuation stay apart).
// Attributes: resource.kubernetes.io/pciBusID and resource.kubernetes.io/
// pcieRoot (KEP-4381: the root complex, "pci<domain>:<bus>", as
// k8s.io/dynamic-resource-allocation/deviceattribute reads it from sysfs),
// and vendorID, deviceID, serial, model, numaNode, iommuGroup in the
// driver's own domain; capacity `size` (bytes) when known.
// Not published: a device that is not healthy (the host uses it or the
// check could not tell, its erase is pending, its identity is unverified,
// no IOMMU group, a serial shared with another function), one without a
// serial (it could not keep its name), and every device whose name another
// device's serial also yields.
// The builder remembers what it published: it is the DeviceDirectory the
// ClaimPreparer resolves an allocated device name with.
// Thread-safety: thread-safe.
#ifndef PDC_DRIVER_DRA_SLICE_BUILDER_H_
#define PDC_DRIVER_DRA_SLICE_BUILDER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "driver/dra/claim_preparer.h"
#include "model/types.h"

namespace pdc::driver::dra {

inline constexpr size_t kMaxDevicesPerSlice = 128;

struct SliceDeviceInput {
  Device device;  // Address, ids, group, NUMA node, health, serial.
  std::string model;
  std::string pcie_root;  // "pci0000:00"; "" when unknown (then omitted).
  std::optional<uint64_t> capacity_bytes;
  // Not published, for this reason, when not empty (a device whose claim
  // is gone: device_reclaimer.h).
  std::string withheld_reason;
};

// The DNS-label device name of `serial` ("" for an empty serial):
// model::DraDeviceNameFromSerial, which pdc-extender matches allocations by.
std::string DeviceNameFromSerial(std::string_view serial);

// The root complex of a PCI function from its sysfs path below devices/
// ("devices/pci0000:00/0000:00:01.0/0000:03:00.0" -> "pci0000:00"); "" when
// the path does not have that shape.
std::string PcieRootFromSysfsPath(std::string_view resolved);

struct SliceSet {
  int64_t generation = 0;
  bool changed = false;             // Against the previous Build.
  std::vector<std::string> slices;  // ResourceSlice JSON objects, in name order.
  std::vector<std::string> names;   // metadata.name of each.
  // Devices left out and why ("0000:03:00.0: HostInUse"), sorted.
  std::vector<std::string> withheld;
};

class SliceBuilder : public DeviceDirectory {
 public:
  // `first_generation`: the generation to publish first (one above what the
  // apiserver holds for the pool, so a restarted pdc-node is newer).
  SliceBuilder(std::string driver, std::string node, int64_t first_generation = 1);

  SliceSet Build(const std::vector<SliceDeviceInput>& inputs);

  absl::StatusOr<PciAddress> Find(std::string_view device_name) const override;

 private:
  const std::string driver_;
  const std::string node_;
  mutable absl::Mutex mu_;
  int64_t generation_ ABSL_GUARDED_BY(mu_);
  bool built_ ABSL_GUARDED_BY(mu_) = false;
  std::string last_devices_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, PciAddress> published_ ABSL_GUARDED_BY(mu_);
  // Devices of the last build left out, by name: why (for Find's error).
  std::map<std::string, std::string> withheld_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdc::driver::dra

#endif  // PDC_DRIVER_DRA_SLICE_BUILDER_H_
