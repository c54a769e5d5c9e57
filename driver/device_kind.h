// DeviceKind: what pdc-node does differently for each kind of PCI function,
// behind one interface, one file per kind (driver/kinds/), chosen by PCI
// class in one table (device_kind.cc). A kind says:
//  - how it reads the function's stable identity (ReadIdentity): an NVMe
//    serial, a PCIe Device Serial Number; "" when the function has none,
//  - how the host uses it (HostUses: block devices, network interfaces, a
//    DRM client...), failing closed,
//  - whether it is scrubbed when its claim is deleted with reclaimPolicy
//    Delete, and how (Scrub),
//  - what the guest needs (GuestNeeds: the driver it is handed over on).
// Adding a kind (a GPU, an FPGA) is one file in driver/kinds/ with its
// tests, plus its row in the table; docs/design.md §4.1 shows how.
// Thread-safety: kinds are stateless singletons, callable from any thread.
#ifndef PDC_DRIVER_DEVICE_KIND_H_
#define PDC_DRIVER_DEVICE_KIND_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "driver/pci_function.h"
#include "driver/sysfs.h"
#include "model/types.h"

namespace pdc::driver {

class HostUseProbe;  // host_usage.h
struct HostView;     // host_usage.h
class VfioBinder;    // vfio_binder.h
class NvmeAdmin;     // nvme_erase.h
struct EraseReturnOptions;

// What a scrub may use: the binder (to move the function between drivers),
// sysfs, and the channels a kind's scrub talks through.
struct ScrubContext {
  VfioBinder* binder = nullptr;
  Sysfs* sys = nullptr;
  NvmeAdmin* nvme_admin = nullptr;  // Null: no NVMe admin channel.
  const EraseReturnOptions* erase = nullptr;
};

// What one scrub did, for the log ("Format NVM with user data erase of
// namespace(s) 1, 2").
struct ScrubReport {
  std::string what;
  // What the scrub found changed since the bind that it did not refuse for
  // (node.firmwareChange: report): one sentence each, logged as warnings
  // and counted.
  std::vector<std::string> warnings = {};
};

// What the guest needs of the host for the function.
struct GuestNeeds {
  // The driver the function is handed to the VM on.
  std::string_view driver = kVfioPci;
};

class DeviceKind {
 public:
  virtual ~DeviceKind() = default;

  // Short lowercase name for logs and metrics ("nvme", "pci").
  virtual std::string_view name() const = 0;

  // Fills what identifies the function across addresses and boots into
  // `info` (`serial`, and what else the kind reads); `dir` is its sysfs
  // directory. Leaves `serial` "" when the function reports nothing stable.
  virtual void ReadIdentity(Sysfs& sys, const std::string& dir, PciFunctionInfo* info) const = 0;

  // Adds to `uses` a sentence for each way the host uses the function
  // (bound to a driver other than none or vfio-pci); an error when it cannot
  // tell. `probe` reads the host's tables once for every function checked.
  virtual absl::Status HostUses(HostUseProbe& probe, const PciFunctionInfo& info,
                                const DeviceClass& device_class,
                                std::vector<std::string>* uses) const = 0;

  // The sysfs directories (resolved, relative to the root) its block
  // devices lie in, for the block rule: one ending in "/" covers what lies
  // below it, one without covers that directory itself. The default: below
  // the function's own directory.
  virtual absl::StatusOr<std::vector<std::string>> BlockDeviceDirs(
      Sysfs& sys, const PciFunctionInfo& info) const;

  // True when a function of this kind is scrubbed before it goes back to
  // the host after its claim was deleted with reclaimPolicy Delete.
  virtual bool ScrubsOnReclaim() const = 0;

  // The host driver this kind's scrub needs the function on ("nvme"), or ""
  // when the kind does not scrub. A journaled function whose original driver
  // it is takes the scrub path even when its class cannot be read.
  virtual std::string_view ScrubDriver() const { return ""; }

  // Scrubs the function at `address` whose scrub is journaled pending
  // (VfioBinder::MarkErasePending) and hands it back to the host; on
  // failure the scrub stays pending. Only called when ScrubsOnReclaim().
  virtual absl::StatusOr<ScrubReport> Scrub(const ScrubContext& context,
                                            PciAddress address) const;

  // The function's firmware state, read while it is on its host driver
  // (at bind), as one space-free word for the bind journal; "" when the
  // kind records none or it cannot be read. Compared by the kind's scrub.
  virtual std::string FirmwareState(const HostView& /*host*/,
                                    const PciFunctionInfo& /*info*/) const {
    return "";
  }

  virtual GuestNeeds Guest() const { return GuestNeeds{}; }

  // True when the SR-IOV virtual functions of a function of this kind share
  // its data (a storage controller's namespaces): such a VF is refused
  // unless node.allowSriov.
  virtual bool VirtualFunctionsShareData() const { return false; }
};

// The kind of a function of 24-bit PCI class `class_code` (never null: a
// class no row names is a generic PCI function).
const DeviceKind& KindForClass(uint32_t class_code);
inline const DeviceKind& KindOf(const PciFunctionInfo& info) {
  return KindForClass(info.class_code);
}
// The kind whose scrub needs host driver `driver`, or null.
const DeviceKind* KindScrubbingOn(std::string_view driver);

}  // namespace pdc::driver

#endif  // PDC_DRIVER_DEVICE_KIND_H_
