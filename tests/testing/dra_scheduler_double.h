// DraSchedulerDouble: the rules of kube-scheduler's DRA plugin
// (pkg/scheduler/framework/plugins/dynamicresources/, dynamicresources.go
// with its allocator k8s.io/dynamic-resource-allocation/structured) that
// decide what happens to a VM's ResourceClaim, against the kube-apiserver
// double. No scheduling queue, no threads: the test asks it to place one
// pod that names one claim (pod.spec.resourceClaims[].resourceClaimName).
//
// What it does, following the plugin:
//  - PreFilter/Filter: an allocated claim is usable by any further pod
//    (CanBeReserved allows sharing); its allocation's node selector is a
//    hard constraint. The selector is modelled as the one node name the
//    allocation holds (matchFields metadata.name In [node]), which is what
//    the structured allocator writes for node-local devices;
//  - an unallocated claim is allocated from the ResourceSlices given to the
//    double in memory (not read from the API): an exact-count request of
//    one device (`exactly`, count absent or 1) of a DeviceClass, matched by
//    driver name only. It understands no CEL: a request or class with
//    `selectors` is refused (Unimplemented) rather than misread. Devices in
//    any claim's allocation (all namespaces) are not free;
//  - PreBind: adds resource.kubernetes.io/delete-protection, then writes
//    status.allocation (devices.results[{request, driver, pool, device}],
//    nodeSelector) and appends the pod to status.reservedFor in one status
//    update on the resourceVersion read (get + update; a 409 reads again);
//    then binds the pod (pods/binding);
//  - PostFilter: when the pod fits no node, an allocated claim is
//    deallocated only when reservedFor is empty or holds just this pod.
// Thread-safety: thread-compatible.
#ifndef PDC_TESTS_TESTING_DRA_SCHEDULER_DOUBLE_H_
#define PDC_TESTS_TESTING_DRA_SCHEDULER_DOUBLE_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/testing/kube_json_client.h"

namespace pdc::testing {

// A DeviceClass whose only selector is `device.driver == "<driver>"`.
struct DeviceClassDouble {
  std::string name;
  std::string driver;
};

// One ResourceSlice: a driver's pool on a node and its devices' names.
struct ResourceSliceDouble {
  std::string driver;
  std::string pool;
  std::string node;
  std::vector<std::string> devices;
};

// A device as an allocation names it.
struct AllocatedDevice {
  std::string driver;
  std::string pool;
  std::string device;
  std::string node;
  bool operator==(const AllocatedDevice&) const = default;
};

class DraSchedulerDouble {
 public:
  static absl::StatusOr<std::unique_ptr<DraSchedulerDouble>> Start(
      const std::string& api_url, std::vector<DeviceClassDouble> classes,
      std::vector<ResourceSliceDouble> slices);

  // Places pod `ns`/`pod`, which uses claim `claim`, on one of `nodes` (the
  // nodes that are up) and binds it. ResourceExhausted: no free device;
  // FailedPrecondition: the allocation's node is not among `nodes` (the
  // pod waits; PostFilter deallocated the claim only if `deallocated`).
  struct Placement {
    std::string node;
    bool allocated_now = false;  // This call wrote the allocation.
  };
  absl::StatusOr<Placement> Schedule(std::string_view ns, std::string_view pod,
                                     std::string_view claim,
                                     const std::vector<std::string>& nodes,
                                     bool* deallocated = nullptr);

 private:
  DraSchedulerDouble(std::unique_ptr<kube::KubeJsonClient> api,
                     std::vector<DeviceClassDouble> classes,
                     std::vector<ResourceSliceDouble> slices)
      : api_(std::move(api)),
        classes_(std::move(classes)),
        slices_(std::move(slices)) {}
  // One attempt; Aborted (409) is tried again by Schedule.
  absl::StatusOr<Placement> TryOnce(std::string_view ns, std::string_view pod,
                                    std::string_view claim,
                                    const std::vector<std::string>& nodes,
                                    bool* deallocated);
  absl::StatusOr<AllocatedDevice> PickDevice(
      const kube::Value& claim, const std::vector<std::string>& nodes,
      std::string* request);
  absl::Status Bind(std::string_view ns, std::string_view pod,
                    std::string_view node);

  std::unique_ptr<kube::KubeJsonClient> api_;
  const std::vector<DeviceClassDouble> classes_;
  const std::vector<ResourceSliceDouble> slices_;
};

// The devices of a claim's status.allocation (node: its node selector's
// node), empty when unallocated.
std::vector<AllocatedDevice> AllocatedDevices(const kube::Value& claim);

}  // namespace pdc::testing

#endif  // PDC_TESTS_TESTING_DRA_SCHEDULER_DOUBLE_H_
