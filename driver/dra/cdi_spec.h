// The CDI spec pdc-node writes for one prepared claim: one file per claim in
// the runtime's CDI directory, one CDI device per allocated device, each
// with the edits a VM's virt-launcher needs: the VFIO container and group
// device nodes, KubeVirt's PCI_RESOURCE_<NAME> variable (the device-plugin
// path reads it) and a read-only bind mount of each KEP-5304 metadata file.
// Follows the CDI specification (cncf-tags/container-device-interface,
// SPEC.md and specs-go/config.go); declares version 0.5.0, the lowest that
// allows what is used (specs-go/version.go: a device name may start with a
// digit from 0.5.0, and a claim UID may), which containerd 1.7+ and CRI-O
// read.
// Thread-safety: pure functions, and file writes callers serialise per path.
#ifndef PDC_DRIVER_DRA_CDI_SPEC_H_
#define PDC_DRIVER_DRA_CDI_SPEC_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pdc::driver::dra {

inline constexpr std::string_view kCdiVersion = "0.5.0";
// The CDI class under the driver name: kind "<driver>/claim".
inline constexpr std::string_view kCdiClass = "claim";

struct CdiMount {
  std::string host_path;
  std::string container_path;

  bool operator==(const CdiMount&) const = default;
};

struct CdiDevice {
  std::string name;                       // The CDI device name.
  std::vector<std::string> device_nodes;  // Paths, e.g. /dev/vfio/12.
  std::vector<std::string> env;           // "NAME=value".
  std::vector<CdiMount> mounts;           // Read-only bind mounts.
};

// "<driver>/claim".
std::string CdiKind(std::string_view driver);
// The CDI device name of `device` of claim `claim_uid`: "<uid>-<device>".
std::string CdiDeviceName(std::string_view claim_uid, std::string_view device);
// The fully qualified ID kubelet passes to the runtime: "<kind>=<name>".
std::string CdiDeviceId(std::string_view kind, std::string_view name);
// The spec file of a claim: <dir>/pdc-<driver>-<claim uid>.json.
std::string CdiSpecPath(std::string_view cdi_dir, std::string_view driver,
                        std::string_view claim_uid);

// The spec as JSON text (compact, one trailing newline), fields in the order
// of specs-go/config.go. InvalidArgument when a name or the kind breaks the
// spec's naming rules (so a runtime never refuses what pdc-node answered).
absl::StatusOr<std::string> CdiSpecJson(std::string_view kind,
                                        const std::vector<CdiDevice>& devices);

// Writes the claim's spec atomically (temporary file, fsync, rename, fsync
// of the directory): the runtime reads a whole spec or none.
absl::Status WriteCdiSpec(const std::string& path, std::string_view json);

}  // namespace pdc::driver::dra

#endif  // PDC_DRIVER_DRA_CDI_SPEC_H_
