// Shared set-up for extender tests: an allocator on a MemoryStore with one
// device class (devices.kubevirt.io/nvme = QEMU NVMe 1b36:0010), a fake
// clock, reporting nodes, and a Router over them; plus builders for
// kube-scheduler-shaped requests around a real virt-launcher pod.
#ifndef PDC_TESTS_EXTENDER_EXTENDER_FIXTURE_H_
#define PDC_TESTS_EXTENDER_EXTENDER_FIXTURE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "allocator/allocator.h"
#include "allocator/memory_store.h"
#include "extender/extender_context.h"
#include "extender/router.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/inventory_builders.h"
#include "tests/testing/status_matchers.h"

namespace pdc::extender::testing {

using ::pdc::testing::Inventory;
using ::pdc::testing::kNvme;
using ::pdc::testing::NvmeDevice;

inline AllocatorOptions TestOptions() {
  AllocatorOptions o;
  o.device_classes = {
      DeviceClass{kNvme, {::pdc::testing::QemuNvmeSelector()}}};
  return o;
}

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

class ExtenderFixture : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }

  // (Re)opens the allocator on the same store, as a restart would.
  void Open() {
    router_.reset();
    allocator_.reset();
    auto a = Allocator::Open(allocator_options_, &store_, &clock_);
    ASSERT_TRUE(a.ok()) << a.status();
    allocator_ = *std::move(a);
    FollowCommits(allocator_.get(), &notifier_);
    pods_ = std::make_unique<PodCache>(&clock_, 1000, absl::Minutes(10));
    ctx_.allocator = allocator_.get();
    ctx_.clock = &clock_;
    ctx_.pod_cache = pods_.get();
    ctx_.notifier = &notifier_;
    ctx_.managed = {kNvme};
    router_ = std::make_unique<Router>(options_, &ctx_);
    router_->SetReady(true);
  }

  void Report(std::string_view node, std::vector<Device> devices) {
    ASSERT_OK(allocator_->ReplaceInventory(
        Inventory(std::string(node), std::move(devices))));
  }

  // Two nodes with two NVMe drives each (separate IOMMU groups, NUMA node 0).
  void TwoNodes() {
    Report("node-a", {NvmeDevice("0000:3b:00.0", 12, 0, "SNA0"),
                      NvmeDevice("0000:5e:00.0", 13, 0, "SNA1")});
    Report("node-b", {NvmeDevice("0000:3b:00.0", 12, 0, "SNB0"),
                      NvmeDevice("0000:5e:00.0", 13, 0, "SNB1")});
  }

  HttpResponse Call(std::string method, std::string target, std::string body = "",
                    std::string auth = "") {
    HttpRequest r;
    r.method = std::move(method);
    r.target = std::move(target);
    r.body = std::move(body);
    r.authorization = std::move(auth);
    return router_->Handle(std::move(r));
  }
  HttpResponse Post(std::string target, std::string body) {
    return Call("POST", std::move(target), std::move(body));
  }

  AllocatorOptions allocator_options_ = TestOptions();  // Set before Open().
  pdc::testing::FakeClock clock_;
  MemoryStore store_;
  Notifier notifier_;
  RouterOptions options_;
  std::unique_ptr<Allocator> allocator_;
  std::unique_ptr<PodCache> pods_;
  ExtenderContext ctx_;
  std::unique_ptr<Router> router_;
};

}  // namespace pdc::extender::testing

#endif  // PDC_TESTS_EXTENDER_EXTENDER_FIXTURE_H_
