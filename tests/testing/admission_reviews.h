// AdmissionReview requests shaped as kube-apiserver sends them to a mutating
// webhook (admission.k8s.io/v1; k8s.io/apiserver's
// CreateV1AdmissionReview), around a virt-launcher pod as virt-controller
// creates it: with metadata.generateName and no name, uid, resourceVersion
// or status yet (those are filled in after admission).
#ifndef PDC_TESTS_TESTING_ADMISSION_REVIEWS_H_
#define PDC_TESTS_TESTING_ADMISSION_REVIEWS_H_

#include <string>

#include "absl/strings/str_cat.h"

namespace pdc::testing {

// The VMI uid the launcher pod's owner reference names.
inline constexpr char kLauncherVmiUid[] = "7f0c1c7e-3f57-4a36-9d0a-1d1f4a2c8b11";

struct LauncherPodSpec {
  std::string vm = "vm1";
  int nvme = 1;
  // Spliced into metadata.annotations (e.g. R"(,"pdc.kubevirt.io/claims":"data")").
  std::string extra_annotations;
  // The value of spec.affinity as JSON; "" = absent.
  std::string affinity;
  std::string scheduler_name = "pdc-scheduler";
  std::string launcher_label = "virt-launcher";
  std::string vmi_uid = kLauncherVmiUid;
  std::string node_name;  // spec.nodeName; "" = absent.
};

inline std::string LauncherPodAtCreate(const LauncherPodSpec& s) {
  const std::string n = absl::StrCat(s.nvme);
  const std::string resources =
      s.nvme > 0
          ? absl::StrCat(R"("limits":{"devices.kubevirt.io/kvm":"1","devices.kubevirt.io/nvme":")", n,
                         R"("},"requests":{"cpu":"100m","devices.kubevirt.io/kvm":"1","devices.kubevirt.io/nvme":")",
                         n, R"(","memory":"2294Mi"})")
          : R"("limits":{"devices.kubevirt.io/kvm":"1"},"requests":{"cpu":"100m","devices.kubevirt.io/kvm":"1","memory":"2294Mi"})";
  return absl::StrCat(
      R"({"kind":"Pod","apiVersion":"v1","metadata":{"generateName":"virt-launcher-)", s.vm,
      R"(-","namespace":"default","creationTimestamp":null,"labels":{"kubevirt.io":")",
      s.launcher_label, R"(","kubevirt.io/created-by":")", s.vmi_uid,
      R"(","vm.kubevirt.io/name":")", s.vm,
      R"("},"annotations":{"kubectl.kubernetes.io/default-container":"compute","kubevirt.io/domain":")",
      s.vm, R"(")", s.extra_annotations,
      R"(},"ownerReferences":[{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","name":")",
      s.vm, R"(","uid":")", s.vmi_uid,
      R"(","controller":true,"blockOwnerDeletion":true}]},"spec":{"volumes":[{"name":"private","emptyDir":{}}],"containers":[{"name":"compute","image":"quay.io/kubevirt/virt-launcher:v1.3.0","resources":{)",
      resources,
      R"(}}],"restartPolicy":"Never","nodeSelector":{"kubernetes.io/arch":"amd64","kubevirt.io/schedulable":"true"},)",
      s.affinity.empty() ? "" : absl::StrCat(R"("affinity":)", s.affinity, ","),
      s.node_name.empty() ? "" : absl::StrCat(R"("nodeName":")", s.node_name, R"(",)"),
      R"("schedulerName":")", s.scheduler_name,
      R"(","priority":0},"status":{}})");
}

// The review of `object` (a JSON object text) for `operation` of a `kind`
// in the core group.
inline std::string AdmissionReviewOf(const std::string& uid, const std::string& object,
                                     const std::string& operation = "CREATE",
                                     const std::string& kind = "Pod") {
  return absl::StrCat(
      R"({"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":")", uid,
      R"(","kind":{"group":"","version":"v1","kind":")", kind,
      R"("},"resource":{"group":"","version":"v1","resource":"pods"},"requestKind":{"group":"","version":"v1","kind":")",
      kind,
      R"("},"requestResource":{"group":"","version":"v1","resource":"pods"},"namespace":"default","operation":")",
      operation,
      R"(","userInfo":{"username":"system:serviceaccount:kubevirt:kubevirt-controller","uid":"0c3a1e52-5b0e-4d8e-9d7e-3f1a2b4c5d6e","groups":["system:serviceaccounts","system:serviceaccounts:kubevirt","system:authenticated"]},"object":)",
      object,
      R"(,"oldObject":null,"dryRun":false,"options":{"kind":"CreateOptions","apiVersion":"meta.k8s.io/v1"}}})");
}

}  // namespace pdc::testing

#endif  // PDC_TESTS_TESTING_ADMISSION_REVIEWS_H_
