// Names and paths of pdc-node's DRA driver that kubelet, the container
// runtime and KubeVirt agree on. Each says the upstream file it comes from.
// Thread-safety: constants and pure functions.
#ifndef PDC_DRIVER_DRA_NAMES_H_
#define PDC_DRIVER_DRA_NAMES_H_

#include <string>
#include <string_view>

namespace pdc::driver::dra {

// The driver name of a class whose configuration names none.
inline constexpr std::string_view kDefaultDriverName = "nvme.pdc.kubevirt.io";

// kubelet's plugin watcher watches this directory for registration sockets
// (pkg/kubelet/kubelet.go: the plugins_registry directory under the root).
inline constexpr std::string_view kDefaultRegistryDir = "/var/lib/kubelet/plugins_registry";
// Where DRA drivers keep their service sockets by convention
// (k8s.io/dynamic-resource-allocation/kubeletplugin: plugins/<driver>/).
inline constexpr std::string_view kDefaultPluginsDir = "/var/lib/kubelet/plugins";

// PluginInfo.type of a DRA driver
// (k8s.io/kubelet/pkg/apis/pluginregistration/v1/constants.go: DRAPlugin).
inline constexpr std::string_view kDraPluginType = "DRAPlugin";
// The services pdc-node serves, most recent first: kubelet takes the first
// of the list it knows (pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go,
// validateSupportedServices; k8s.io/kubelet/pkg/apis/dra/v1/types.go and
// v1beta1/types.go: DRAPluginService).
inline constexpr std::string_view kServiceV1 = "v1.DRAPlugin";
inline constexpr std::string_view kServiceV1beta1 = "v1beta1.DRAPlugin";

// The container runtime reads CDI specs from here (CDI SPEC.md: /etc/cdi
// and /var/run/cdi; the latter is for generated, transient specs).
inline constexpr std::string_view kDefaultCdiDir = "/var/run/cdi";

// Where a container finds a claim's device metadata (KEP-5304;
// k8s.io/dynamic-resource-allocation/kubeletplugin; KubeVirt pkg/dra/utils.go):
//   <base>/resourceclaims/<claim name>/<request>/<driver>-metadata.json
//   <base>/resourceclaimtemplates/<pod claim name>/<request>/<driver>-metadata.json
inline constexpr std::string_view kMetadataContainerDir =
    "/var/run/kubernetes.io/dra-device-attributes";
// Where pdc-node keeps the host side of those files, one directory per
// claim UID.
inline constexpr std::string_view kDefaultMetadataHostDir = "/var/run/pdc/dra-metadata";

// The annotation kube-controller-manager's resourceclaim controller puts on
// a claim it made from a template: the pod's claim name
// (pkg/controller/resourceclaim/controller.go, podResourceClaimAnnotation).
inline constexpr std::string_view kPodClaimNameAnnotation = "resource.kubernetes.io/pod-claim-name";

// Standard device attributes (KEP-4381; k8s.io/dynamic-resource-allocation/
// deviceattribute).
inline constexpr std::string_view kPciBusIdAttribute = "resource.kubernetes.io/pciBusID";
inline constexpr std::string_view kPcieRootAttribute = "resource.kubernetes.io/pcieRoot";

// The registration socket of `driver` in kubelet's registry directory.
std::string RegistrationSocketPath(std::string_view registry_dir, std::string_view driver);
// The DRA service socket of `driver`: <plugins_dir>/<driver>/dra.sock.
std::string ServiceSocketPath(std::string_view plugins_dir, std::string_view driver);

}  // namespace pdc::driver::dra

#endif  // PDC_DRIVER_DRA_NAMES_H_
