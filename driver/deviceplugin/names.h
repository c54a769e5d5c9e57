// Names and constants of the kubelet device plugin API (v1beta1) as pdc-node
// uses them: kubelet's constants (k8s.io/kubelet/pkg/apis/deviceplugin/
// v1beta1/constants.go), the plugin socket name per resource, and the
// environment variable KubeVirt's virt-launcher reads the PCI addresses from.
// Thread-safety: pure functions.
#ifndef PDC_DRIVER_DEVICEPLUGIN_NAMES_H_
#define PDC_DRIVER_DEVICEPLUGIN_NAMES_H_

#include <string>
#include <string_view>

namespace pdc::driver::deviceplugin {

inline constexpr std::string_view kApiVersion = "v1beta1";
inline constexpr std::string_view kDefaultPluginDir = "/var/lib/kubelet/device-plugins";
inline constexpr std::string_view kKubeletSocketName = "kubelet.sock";
inline constexpr std::string_view kHealthy = "Healthy";
inline constexpr std::string_view kUnhealthy = "Unhealthy";

// KubeVirt's prefix for host PCI devices (virtwrap PCI_RESOURCE_PREFIX).
inline constexpr std::string_view kPciResourcePrefix = "PCI_RESOURCE";

// KubeVirt's ResourceNameToEnvVar(PCI_RESOURCE_PREFIX, name): upper-cased,
// '/' and '.' replaced by '_', after "PCI_RESOURCE_".
// "devices.kubevirt.io/nvme" -> "PCI_RESOURCE_DEVICES_KUBEVIRT_IO_NVME".
std::string ResourceEnvVar(std::string_view resource_name);

// Base name of the plugin's socket: "pdc-" + the resource name with every
// character outside [A-Za-z0-9._-] replaced by '_' + ".sock"
// ("pdc-devices.kubevirt.io_nvme.sock").
std::string PluginSocketName(std::string_view resource_name);

}  // namespace pdc::driver::deviceplugin

#endif  // PDC_DRIVER_DEVICEPLUGIN_NAMES_H_
