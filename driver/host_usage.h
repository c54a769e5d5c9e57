// HostUsage: finds out whether the host itself uses an NVMe controller, so
// that pdc never takes the host's own disk away. A controller is in use when
// any of its namespaces, or a partition of one, is mounted
// (`<proc>/self/mountinfo`, compared by major:minor and by /dev/<name>),
// used as swap (`<proc>/swaps`), or has holders (md, dm, LVM) in
// `<sys>/class/block/<name>/holders/`. Namespaces are the controller's own
// block devices and, with native NVMe multipath, the namespace heads of the
// subsystem the controller belongs to.
// Thread-safety: pure functions over Sysfs views.
#ifndef PDC_DRIVER_HOST_USAGE_H_
#define PDC_DRIVER_HOST_USAGE_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "driver/pci_function.h"
#include "driver/sysfs.h"

namespace pdc::driver {

// Block device names (namespaces then their partitions) of an NVMe
// controller, sorted. Empty for a device that is not bound to nvme.
absl::StatusOr<std::vector<std::string>> NvmeBlockDevices(Sysfs& sys,
                                                          const PciFunctionInfo& info);

// Sentences saying how the host uses the controller's block devices, e.g.
// "nvme0n1p1 (259:1) is mounted at /boot"; empty when unused. Errors reading
// the proc files are returned: an unknown answer is not "unused".
// `mountinfo_path` is relative to `proc` ("self/mountinfo"; "1/mountinfo" for
// a containerised driver that shares the host's PID namespace).
absl::StatusOr<std::vector<std::string>> HostUsesOf(Sysfs& sys, Sysfs& proc,
                                                    std::string_view mountinfo_path,
                                                    const PciFunctionInfo& info);

}  // namespace pdc::driver

#endif  // PDC_DRIVER_HOST_USAGE_H_
