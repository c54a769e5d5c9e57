// DiskSignatures: what the host's tools would recognise on a block device
// that nothing has opened yet: an md RAID member, an LVM2 physical volume, a
// ZFS pool member, a Ceph BlueStore OSD, a file system, swap, LUKS. Such a
// disk belongs to someone even while idle (an unassembled array, an
// inactive volume group, an exported pool, a stopped OSD, a local
// PersistentVolume between pods), as Rook and OpenEBS refuse signed disks.
// The magic numbers and offsets are those of the formats' own
// documentation, as util-linux's libblkid probes them.
// Thread-safety: pure functions over a Sysfs.
#ifndef PDC_DRIVER_DISK_SIGNATURES_H_
#define PDC_DRIVER_DISK_SIGNATURES_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "driver/sysfs.h"

namespace pdc::driver {

// The signature found on `dev/<name>` ("an md RAID member (superblock
// 1.2)"), or nullopt when none. `size_bytes` is the device's size (for the
// signatures at its end), 0 when unknown (those are then not looked for).
// An error when the device cannot be read.
absl::StatusOr<std::optional<std::string>> FindDiskSignature(Sysfs& dev, const std::string& name,
                                                             uint64_t size_bytes);

}  // namespace pdc::driver

#endif  // PDC_DRIVER_DISK_SIGNATURES_H_
