// HostUsage: finds out whether the host itself uses a PCI function, so that
// pdc never takes a device the host depends on. It fails closed: whatever
// cannot be read is an error, never "unused".
//
// The rule is the function's device kind's (device_kind.h, driver/kinds/);
// the kinds build theirs from the checks here:
//  - block devices (CheckBlockDevices; storage kinds): the block devices
//    below the directories the kind names (DeviceKind::BlockDeviceDirs: the
//    function's own, for NVMe with native multipath also the namespace heads
//    of its subsystem) and their partitions. One is in use when the kernel
//    refuses to open it exclusively (a mounted file system, md/dm/LVM, swap,
//    a ZFS pool, a lazily unmounted file system still alive, any O_EXCL
//    opener), when it is mounted (mountinfo, by major:minor and by
//    /dev/<name>), used as swap, has holders, backs a loop device (the raw
//    disk, or a file on one of its mounted file systems), or is open in any
//    process (`<proc>/<pid>/fd`).
//  - network interfaces (NetworkInterfaceUses): a host interface on the
//    function that is up (with or without addresses: up is enough), or that
//    is part of a bond, bridge or other upper device. A function on a driver
//    with no interface in the host's network namespace cannot be checked
//    (moved into a pod's).
//  - any other kind: bound to a host driver that its device class does not
//    list in `host_drivers`.
// A function bound to vfio-pci has no host use here (see VfioGroupUsers for
// a vfio-pci device some process already holds); one on no driver is
// checked by its kind (storage: a process mapping its BARs holds it).
//
// The exclusive descriptors can be kept (BlockDeviceHold) so that nothing
// mounts or claims a disk between the check and the unbind. HostUsesOfEach
// checks many functions with one read of the host's processes and tables
// (the inventory's health) and keeps nothing open.
// Thread-safety: functions are stateless; BlockDeviceHold is a value.
#ifndef PDC_DRIVER_HOST_USAGE_H_
#define PDC_DRIVER_HOST_USAGE_H_

#include <cstdint>
#include <utility>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/file_util.h"
#include "driver/pci_function.h"
#include "driver/sysfs.h"
#include "model/types.h"

namespace pdc::driver {

class NvmeAdmin;  // nvme_erase.h

// What the operator allows that the check refuses by default
// (docs/operations.md, `node:` section).
struct HostUsePolicy {
  // node.allowSharedNvme: NVMe controllers whose subsystem has more than one
  // port or controller (CMIC), or whose namespaces may be attached to more
  // than one controller (NMIC), are offered.
  bool allow_shared_nvme = false;
  // node.allowSriov: a physical function with virtual functions enabled,
  // and a virtual function of a storage controller, are offered.
  bool allow_sriov = false;
};

// Views of the host's kernel: /sys, /dev and /proc, and where in /proc the
// host's mount table is ("1/mountinfo" for pdc-node in the host's PID
// namespace; see CheckHostView); the NVMe admin channel for Identify (null:
// only what sysfs shows is checked); what the operator allows.
struct HostView {
  Sysfs* sys = nullptr;
  Sysfs* dev = nullptr;
  Sysfs* proc = nullptr;
  std::string mountinfo_path = "self/mountinfo";
  NvmeAdmin* nvme_admin = nullptr;
  HostUsePolicy policy = {};
};

// Exclusive descriptors of block devices, held until destroyed.
class BlockDeviceHold {
 public:
  void Add(UniqueFd fd) { fds_.push_back(std::move(fd)); }
  // Takes over every descriptor `other` holds.
  void Take(BlockDeviceHold&& other) {
    for (UniqueFd& fd : other.fds_) fds_.push_back(std::move(fd));
    other.fds_.clear();
  }
  size_t size() const { return fds_.size(); }

 private:
  std::vector<UniqueFd> fds_;
};

// What a device kind's host-use check reads through: the host's views, and
// the block-device check whose tables (processes, mounts, swaps, loops) are
// read once for every function of one check.
class HostUseProbe {
 public:
  virtual ~HostUseProbe() = default;
  virtual const HostView& host() const = 0;
  // Checks the block devices of `info` (below its kind's BlockDeviceDirs) by
  // the block rule; holders are added to `uses` now, the other uses when the
  // check ends.
  virtual absl::Status CheckBlockDevices(const PciFunctionInfo& info,
                                         std::vector<std::string>* uses) = 0;
  // Character devices of the function, name ("nvme0", "ng0n1") to device
  // number ("241:0"): a process holding one open is a use, said when the
  // check ends.
  virtual void CheckCharDevices(const std::vector<std::pair<std::string, std::string>>& devices) = 0;
  // For a function on no driver: a process that maps its sysfs resource
  // files (BARs) or config space drives it from userspace
  // (`<proc>/<pid>/maps`); adds a sentence for each.
  virtual absl::Status CheckUserspaceHolders(const PciFunctionInfo& info,
                                             std::vector<std::string>* uses) = 0;
};

// The network rule: adds a sentence for each interface of `info` that is up
// or part of an upper device; an error when none is visible.
absl::Status NetworkInterfaceUses(Sysfs& sys, const PciFunctionInfo& info,
                                  std::vector<std::string>* uses);

// Block device names behind a function (disks, then partitions), sorted
// within each group. Empty for a function on no driver or on vfio-pci.
absl::StatusOr<std::vector<std::string>> BlockDevicesOf(Sysfs& sys, const PciFunctionInfo& info);

// Sentences saying how the host uses the function, e.g. "nvme0n1p1 (259:1)
// is mounted at /boot"; empty when unused. An error when something could not
// be checked. `device_class` is the class the function matched (for its
// `host_drivers`). When the answer is "unused" and `hold` is not null, the
// exclusive descriptors of its block devices are added to `hold`.
absl::StatusOr<std::vector<std::string>> HostUsesOf(const HostView& host,
                                                    const PciFunctionInfo& info,
                                                    const DeviceClass& device_class,
                                                    BlockDeviceHold* hold,
                                                    bool pdc_drive = false);

// One function to check and the device class it matched (not null).
// `pdc_drive`: the drive pdc itself bound for a claim (its journal entry
// names the serial it shows): what its guest wrote on it (file systems,
// RAID or LVM signatures) is not the host's.
struct HostUsageQuery {
  PciFunctionInfo info;
  const DeviceClass* device_class = nullptr;
  bool pdc_drive = false;
};

// HostUsesOf for each query, in order, reading the host's processes, mount
// table, swaps and loop devices once for all of them. The exclusive
// descriptors are closed before it returns.
std::vector<absl::StatusOr<std::vector<std::string>>> HostUsesOfEach(
    const HostView& host, const std::vector<HostUsageQuery>& queries);

// The users of /dev/vfio/<group>, e.g. "process 4242 (qemu-kvm)"; empty when
// none. The processes holding it are looked up first (to name them); when
// none is found the group is opened and closed again: a VFIO group has one
// opener at a time, so the kernel's EBUSY says that something pdc-node
// cannot see holds it. NotFound when /dev/vfio/<group> is missing.
absl::StatusOr<std::vector<std::string>> VfioGroupUsers(const HostView& host, int32_t group);

// OK when `proc` is the host's: pdc-node runs in the host's PID namespace
// (`self/status` lists one NSpid) and the host's mount table
// (`1/mountinfo`) is readable. Otherwise FailedPrecondition saying what to
// change: a container's own view would hide the host's mounts and processes.
absl::Status CheckHostView(Sysfs& proc);

}  // namespace pdc::driver

#endif  // PDC_DRIVER_HOST_USAGE_H_
