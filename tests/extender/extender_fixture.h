// Shared set-up for extender tests: an allocator on a MemoryStore with one
// device class (devices.kubevirt.io/nvme = QEMU NVMe 1b36:0010), a fake
// clock, reporting nodes, and a Router over them (the kube-scheduler-shaped
// request builders are tests/testing/scheduler_requests.h).
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
#include "extender/kube_bind_target.h"
#include "extender/router.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/inventory_builders.h"
#include "tests/testing/scheduler_requests.h"
#include "tests/testing/status_matchers.h"

namespace pdc::extender::testing {

using ::pdc::testing::Inventory;
using ::pdc::testing::kNvme;
using ::pdc::testing::NvmeDevice;
using ::pdc::testing::BindArgs;
using ::pdc::testing::ListArgs;
using ::pdc::testing::NamesArgs;
using ::pdc::testing::NodeObject;
using ::pdc::testing::VirtLauncherPod;

inline AllocatorOptions TestOptions() {
  AllocatorOptions o;
  o.serialize_handoffs = false;  // No node driver confirms hand-offs here.
  o.device_classes = {
      DeviceClass{kNvme, {::pdc::testing::QemuNvmeSelector()}}};
  return o;
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

  // Binds reach the Kubernetes API `kube` from now on (KubeBindTarget,
  // counting read-backs in ctx_.metrics); null: standalone again.
  void UseKube(kube::KubeClient* kube) {
    if (kube == nullptr) {
      ctx_.bind_target = StandaloneTarget();
      kube_target_.reset();
      return;
    }
    KubeBindTarget::Options o;
    o.clock = &clock_;
    o.metrics = ctx_.metrics;
    kube_target_ = std::make_unique<KubeBindTarget>(kube, std::move(o));
    ctx_.bind_target = kube_target_.get();
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
  std::unique_ptr<KubeBindTarget> kube_target_;
  ExtenderContext ctx_;
  std::unique_ptr<Router> router_;
};

}  // namespace pdc::extender::testing

#endif  // PDC_TESTS_EXTENDER_EXTENDER_FIXTURE_H_
