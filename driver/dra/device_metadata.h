// The device-metadata file of KEP-5304 ("DRA device attributes in the
// downward API"), which KubeVirt's virt-launcher (v1.8+, pkg/dra/utils.go)
// reads to learn a claim's PCI address. One file per claim, request and
// driver, schema metadata.resource.k8s.io/v1alpha1 kind DeviceMetadata
// (k8s.io/dynamic-resource-allocation/api/metadata/v1alpha1/types.go; the
// fields in the order Go's encoding/json writes them, as in that package's
// testdata/v1.36.0/metadata.json). Each device carries the attribute
// resource.kubernetes.io/pciBusID, a ResourceSlice DeviceAttribute
// ({"string": "<address>"}).
// Thread-safety: pure functions.
#ifndef PDC_DRIVER_DRA_DEVICE_METADATA_H_
#define PDC_DRIVER_DRA_DEVICE_METADATA_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pdc::driver::dra {

inline constexpr std::string_view kMetadataApiVersion = "metadata.resource.k8s.io/v1alpha1";
inline constexpr std::string_view kMetadataKind = "DeviceMetadata";

struct MetadataDevice {
  std::string driver;
  std::string pool;
  std::string name;
  std::string pci_bus_id;  // "0000:03:00.0".
};

struct MetadataRequest {
  std::string name;  // As in the allocation: "<request>" or "<request>/<sub>".
  std::vector<MetadataDevice> devices;
};

struct MetadataClaim {
  std::string ns;
  std::string name;
  std::string uid;
  std::optional<std::string> pod_claim_name;
};

// The file's content (compact JSON, one trailing newline) for one request.
std::string DeviceMetadataJson(const MetadataClaim& claim, const MetadataRequest& request);

// The file name: "<driver>-metadata.json".
std::string MetadataFileName(std::string_view driver);
// The directory a container reads it from:
//   <kMetadataContainerDir>/resourceclaims/<claim name>/<request>
// or, for a claim made from a template,
//   <kMetadataContainerDir>/resourceclaimtemplates/<pod claim name>/<request>
// `request` is the allocation's request name up to a '/' (a subrequest is
// named inside the file only).
std::string MetadataContainerDir(const MetadataClaim& claim, std::string_view request);

}  // namespace pdc::driver::dra

#endif  // PDC_DRIVER_DRA_DEVICE_METADATA_H_
