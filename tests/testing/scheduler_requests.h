// Builders for kube-scheduler-shaped requests around a real virt-launcher
// pod (v1.Pod JSON, ExtenderArgs in both modes, ExtenderBindingArgs), for the
// tests of the scheduler wire codec and of the extender's router.
#ifndef PDC_TESTS_TESTING_SCHEDULER_REQUESTS_H_
#define PDC_TESTS_TESTING_SCHEDULER_REQUESTS_H_

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace pdc::testing {

// A virt-launcher pod as KubeVirt creates it for VM `vm`, as kube-scheduler
// serialises it (v1.Pod JSON). `extra_annotations` is spliced into the
// annotations object (e.g. R"(,"pdc.kubevirt.io/claims":"data")").
inline std::string VirtLauncherPod(const std::string& vm, const std::string& uid,
                                   int nvme = 1,
                                   const std::string& extra_annotations = "") {
  const std::string n = absl::StrCat(nvme);
  const std::string resources =
      nvme > 0
          ? absl::StrCat(R"("limits":{"devices.kubevirt.io/kvm":"1","devices.kubevirt.io/nvme":")", n,
                         R"("},"requests":{"cpu":"100m","devices.kubevirt.io/kvm":"1","devices.kubevirt.io/nvme":")",
                         n, R"(","memory":"2294Mi"})")
          : R"("limits":{"devices.kubevirt.io/kvm":"1"},"requests":{"cpu":"100m","devices.kubevirt.io/kvm":"1","memory":"2294Mi"})";
  return absl::StrCat(
      R"({"metadata":{"name":"virt-launcher-)", vm, R"(-x7k2p","generateName":"virt-launcher-)", vm,
      R"(-","namespace":"default","uid":")", uid,
      R"(","resourceVersion":"81234","creationTimestamp":"2026-11-30T05:00:00Z","labels":{"kubevirt.io":"virt-launcher","kubevirt.io/created-by":"7f0c1c7e-3f57-4a36-9d0a-1d1f4a2c8b11","vm.kubevirt.io/name":")",
      vm,
      R"("},"annotations":{"kubectl.kubernetes.io/default-container":"compute","kubevirt.io/domain":")",
      vm, R"(","kubevirt.io/migrationTransportUnix":"true")", extra_annotations,
      R"(},"ownerReferences":[{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","name":")",
      vm,
      R"(","uid":"7f0c1c7e-3f57-4a36-9d0a-1d1f4a2c8b11","controller":true,"blockOwnerDeletion":true}]},)"
      R"("spec":{"volumes":[{"name":"private","emptyDir":{}}],"containers":[{"name":"compute","image":"quay.io/kubevirt/virt-launcher:v1.3.0","command":["/usr/bin/virt-launcher-monitor","--qemu-timeout","300s"],"resources":{)",
      resources,
      R"(},"securityContext":{"capabilities":{"add":["NET_BIND_SERVICE","SYS_NICE"],"drop":["ALL"]},"runAsUser":107}}],"restartPolicy":"Never","terminationGracePeriodSeconds":210,"dnsPolicy":"ClusterFirst","nodeSelector":{"kubernetes.io/arch":"amd64","kubevirt.io/schedulable":"true"},"serviceAccountName":"default","schedulerName":"default-scheduler","priority":0,"enableServiceLinks":false,"preemptionPolicy":"PreemptLowerPriority"},"status":{"phase":"Pending","qosClass":"Burstable"}})");
}

// ExtenderArgs in nodeCacheCapable mode, exactly as Go marshals it.
inline std::string NamesArgs(const std::string& pod,
                             const std::vector<std::string>& nodes) {
  std::vector<std::string> quoted;
  for (const auto& n : nodes) quoted.push_back(absl::StrCat("\"", n, "\""));
  return absl::StrCat(R"({"Pod":)", pod, R"(,"Nodes":null,"NodeNames":[)",
                      absl::StrJoin(quoted, ","), "]}");
}

inline std::string NodeObject(const std::string& name) {
  return absl::StrCat(R"({"metadata":{"name":")", name,
                      R"(","uid":"node-uid-)", name,
                      R"(","labels":{"kubernetes.io/hostname":")", name,
                      R"("}},"spec":{},"status":{"capacity":{"devices.kubevirt.io/nvme":"2"}}})");
}

// ExtenderArgs with a full NodeList (nodeCacheCapable: false).
inline std::string ListArgs(const std::string& pod,
                            const std::vector<std::string>& nodes) {
  std::vector<std::string> items;
  for (const auto& n : nodes) items.push_back(NodeObject(n));
  return absl::StrCat(R"({"Pod":)", pod, R"(,"Nodes":{"metadata":{},"items":[)",
                      absl::StrJoin(items, ","), R"(]},"NodeNames":null})");
}

inline std::string BindArgs(const std::string& vm, const std::string& uid,
                            const std::string& node) {
  return absl::StrCat(R"({"PodName":"virt-launcher-)", vm,
                      R"(-x7k2p","PodNamespace":"default","PodUID":")", uid,
                      R"(","Node":")", node, R"("})");
}

}  // namespace pdc::testing

#endif  // PDC_TESTS_TESTING_SCHEDULER_REQUESTS_H_
