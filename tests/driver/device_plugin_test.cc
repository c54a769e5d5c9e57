// pdc-node as the kubelet device plugin (docs/design.md §6.3), end to end
// over real gRPC on real unix sockets: the plugin manager against a kubelet
// double (fake_kubelet.h), a fake kernel (fake_sysfs.h) and an extender that
// models the hand-off gate (fake_handoff_extender.h).
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/metrics.h"
#include "driver/deviceplugin/device_plugin_manager.h"
#include "driver/deviceplugin/names.h"
#include "driver/discovery.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/driver/fake_handoff_extender.h"
#include "tests/driver/fake_kubelet.h"
#include "tests/driver/test_util.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace pdc::driver::deviceplugin {
namespace {

using pdc::testing::StatusIs;
using testing::Addr;
using testing::FakeHost;
using testing::FakeKubelet;
using testing::GatedExtender;
using testing::NvmeClass;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using testing::kNvme;
const std::string kA = "0000:00:03.0";  // IOMMU group 3, NUMA 0
const std::string kB = "0000:00:04.0";  // IOMMU group 4, NUMA 1

std::vector<std::string> DevicePaths(const v1beta1::ContainerAllocateResponse& r) {
  std::vector<std::string> out;
  for (const auto& d : r.devices()) {
    EXPECT_EQ(d.host_path(), d.container_path());
    EXPECT_EQ(d.permissions(), "mrw");
    out.push_back(d.container_path());
  }
  return out;
}

std::string Env(const v1beta1::ContainerAllocateResponse& r) {
  auto it = r.envs().find(testing::kNvmeEnv);
  return it == r.envs().end() ? "<unset>" : it->second;
}

class DevicePluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host_.kernel.AddDevice({.address = kA, .group = 3, .numa = 0, .driver = "vfio-pci"});
    host_.kernel.AddDevice({.address = kB, .group = 4, .numa = 1, .driver = "vfio-pci"});
    kubelet_ = std::make_unique<FakeKubelet>(plugin_dir_.path());
    ASSERT_OK(kubelet_->Start());
    DevicePluginManagerOptions o;
    o.node = "node-a";
    o.plugin_dir = plugin_dir_.path();
    o.classes = {NvmeClass()};
    o.watch_interval = absl::Milliseconds(20);
    o.vfio_wait = absl::Seconds(10);
    o.vfio_poll = absl::Milliseconds(500);
    // Allocate's wait for vfio-pci runs on the fake clock.
    clock_.SetSleepHook([this] {
      if (sleep_hook_) sleep_hook_();
    });
    o.confirmer.backoff_initial = absl::Milliseconds(1);
    o.confirmer.backoff_max = absl::Milliseconds(5);
    o.metrics = &metrics_;
    manager_ = std::make_unique<DevicePluginManager>(&host_.kernel, &extender_, &clock_, o);
    if (feed_at_start_) FeedInventory();
    ASSERT_OK(manager_->Start());
    ASSERT_TRUE(kubelet_->WaitForRegistrations(1));
    if (feed_at_start_) {
      ASSERT_TRUE(kubelet_->WaitForDevices(kNvme, [](const auto& d) { return d.size() == 2; }));
    }
  }

  void TearDown() override {
    manager_->Stop();
    kubelet_->Stop();
  }

  // What the reconcile loop hands the manager after a discovery pass.
  void FeedInventory(std::map<PciAddress, DeviceHealth> health = {}) {
    DiscoveryOptions d{{NvmeClass()}, {}};
    auto r = Discover(host_.kernel, "node-a", d);
    ASSERT_OK(r.status());
    for (Device& dev : r->inventory.devices) {
      if (auto it = health.find(dev.address); it != health.end()) dev.health = it->second;
    }
    manager_->OnInventory(r->inventory);
  }
  // What the reconcile loop hands the manager after a long-poll answer.
  void FeedAllocations() { manager_->OnAllocations(extender_.Answer()); }

  bool feed_at_start_ = true;  // The reconcile loop's first inventory before Start.
  FakeHost host_;
  pdc::testing::TempDir plugin_dir_;
  pdc::testing::FakeClock clock_;
  GatedExtender extender_{kNvme};
  std::unique_ptr<FakeKubelet> kubelet_;
  std::unique_ptr<DevicePluginManager> manager_;
  std::function<void()> sleep_hook_;  // Runs on the gRPC thread in Allocate's wait.
  MetricsRegistry registry_;
  NodeMetrics metrics_{&registry_};

  bool Rendered(const std::string& line) {
    return registry_.Render().find(line + "\n") != std::string::npos;
  }
};

TEST(DevicePluginNamesTest, EnvVarFollowsKubeVirtsRule) {
  EXPECT_EQ(ResourceEnvVar("devices.kubevirt.io/nvme"), "PCI_RESOURCE_DEVICES_KUBEVIRT_IO_NVME");
  EXPECT_EQ(ResourceEnvVar("nvidia.com/GP102GL_Tesla_P40"),
            "PCI_RESOURCE_NVIDIA_COM_GP102GL_TESLA_P40");
  EXPECT_EQ(PluginSocketName("devices.kubevirt.io/nvme"), "pdc-devices.kubevirt.io_nvme.sock");
  EXPECT_EQ(PluginSocketName("a/b c:d"), "pdc-a_b_c_d.sock");
}

TEST_F(DevicePluginTest, RegistersAndListsDevicesTheWayKubeletExpects) {
  auto regs = kubelet_->registrations();
  ASSERT_EQ(regs.size(), 1u);
  EXPECT_EQ(regs[0].version(), "v1beta1");
  EXPECT_EQ(regs[0].endpoint(), "pdc-devices.kubevirt.io_nvme.sock");
  EXPECT_EQ(regs[0].resource_name(), kNvme);
  EXPECT_TRUE(regs[0].options().get_preferred_allocation_available());
  EXPECT_FALSE(regs[0].options().pre_start_required());
  ASSERT_TRUE(kubelet_->WaitForDevices(kNvme, [](const auto&) { return true; }));
  auto opts = kubelet_->options(kNvme);
  ASSERT_TRUE(opts.has_value());
  EXPECT_TRUE(opts->get_preferred_allocation_available());
  auto devices = kubelet_->devices(kNvme);
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0].id(), kA);
  EXPECT_EQ(devices[0].health(), "Healthy");
  ASSERT_EQ(devices[0].topology().nodes_size(), 1);
  EXPECT_EQ(devices[0].topology().nodes(0).id(), 0);
  EXPECT_EQ(devices[1].id(), kB);
  EXPECT_EQ(devices[1].topology().nodes(0).id(), 1);
}

// The VM owns B; kubelet on its own would pick whichever device comes
// first. Fifty restarts, each a new pod UID, the available list in either
// order, half of them with a kubelet that ignores the preferred allocation:
// the VM always gets B, and each hand-off is confirmed.
TEST_F(DevicePluginTest, VmRestartedFiftyTimesAlwaysGetsItsOwnDevice) {
  extender_.AddClaim("default/vm1-nvme", Addr(kB));
  extender_.AddClaim("default/vm2-nvme", Addr(kA));
  FeedAllocations();
  for (int i = 0; i < 50; ++i) {
    SCOPED_TRACE(absl::StrCat("restart ", i));
    const std::string uid = absl::StrCat("vm1-uid-", i);
    ASSERT_OK(extender_.StartPod("default/vm1-nvme", "vm1", uid));
    // Every other time the long-poll has not delivered the reservation yet:
    // the plugin asks the extender itself.
    if (i % 2 == 0) FeedAllocations();
    const bool reverse = i % 2 == 1;
    const bool ignore_preferred = i % 4 >= 2;
    auto a = kubelet_->Admit(uid, kNvme, 1, reverse, ignore_preferred);
    ASSERT_OK(a.response.status());
    EXPECT_THAT(a.preferred, ElementsAre(kB));
    EXPECT_EQ(Env(*a.response), kB);
    EXPECT_THAT(DevicePaths(*a.response), ElementsAre("/dev/vfio/vfio", "/dev/vfio/4"));
    ASSERT_TRUE(extender_.WaitForConfirmations(i + 1));
    EXPECT_EQ(extender_.confirmations().back().pod_uid, uid);
    FeedAllocations();
    kubelet_->Release(uid);  // The VM stops.
  }
  EXPECT_EQ(extender_.confirmations().size(), 50u);
  EXPECT_TRUE(manager_->confirmer().WaitUntilIdle(absl::Seconds(20)));
  EXPECT_TRUE(Rendered("pdc_node_handoffs_total{outcome=\"handed_off\"} 50"));
  EXPECT_TRUE(Rendered("pdc_node_handoff_confirmations_total{outcome=\"confirmed\"} 50"));
}

// vm1 and vm2 start at the same moment on a node with two NVMe: the
// extender's gate lets vm1 through and refuses vm2 (retryable) until vm1's
// hand-off is confirmed; kubelet admits vm2 meanwhile on another thread as
// soon as the scheduler's retry succeeds. Each gets its own device.
TEST_F(DevicePluginTest, TwoVmsStartedAtOnceAreSerializedAndEachGetsItsOwn) {
  extender_.AddClaim("default/vm1-nvme", Addr(kB));
  extender_.AddClaim("default/vm2-nvme", Addr(kA));
  FeedAllocations();
  ASSERT_OK(extender_.StartPod("default/vm1-nvme", "vm1", "vm1-uid"));
  EXPECT_THAT(extender_.StartPod("default/vm2-nvme", "vm2", "vm2-uid"),
              StatusIs(absl::StatusCode::kUnavailable,
                       "another VM is starting on this node: default/vm1 has not received its "
                       "devices.kubevirt.io/nvme devices yet"));
  FakeKubelet::Admission second{{}, {}, absl::UnknownError("not run")};
  std::thread vm2([&] {
    // The scheduler retries vm2 after the first hand-off is recorded.
    if (!extender_.WaitForConfirmations(1)) return;
    if (!extender_.StartPod("default/vm2-nvme", "vm2", "vm2-uid").ok()) return;
    second = kubelet_->Admit("vm2-uid", kNvme, 1, /*reverse=*/true);
  });
  // kubelet admits vm1 with the available list in the misleading order.
  auto first = kubelet_->Admit("vm1-uid", kNvme, 1, /*reverse=*/false);
  vm2.join();
  ASSERT_OK(first.response.status());
  ASSERT_OK(second.response.status());
  EXPECT_EQ(Env(*first.response), kB);
  EXPECT_THAT(DevicePaths(*first.response), ElementsAre("/dev/vfio/vfio", "/dev/vfio/4"));
  EXPECT_EQ(Env(*second.response), kA);
  EXPECT_THAT(DevicePaths(*second.response), ElementsAre("/dev/vfio/vfio", "/dev/vfio/3"));
  ASSERT_TRUE(extender_.WaitForConfirmations(2));
  auto confirmations = extender_.confirmations();
  EXPECT_EQ(confirmations[0].pod_uid, "vm1-uid");
  EXPECT_THAT(confirmations[0].devices, ElementsAre(Addr(kB)));
  EXPECT_EQ(confirmations[1].pod_uid, "vm2-uid");
  EXPECT_THAT(confirmations[1].devices, ElementsAre(Addr(kA)));
}

// kubelet's own bookkeeping may disagree with what pdc handed out (it
// records the IDs it chose). vm2 runs on A while kubelet thinks it has B;
// vm1 then starts and kubelet can only offer A, vm2's device: vm1 still gets
// B, its own, and vm2's A is never handed to anyone else.
TEST_F(DevicePluginTest, KubeletsCrossedBookkeepingNeverGivesAwayAnotherVmsDevice) {
  extender_.AddClaim("default/vm1-nvme", Addr(kB));
  extender_.AddClaim("default/vm2-nvme", Addr(kA));
  ASSERT_OK(extender_.StartPod("default/vm2-nvme", "vm2", "vm2-uid"));
  auto second = kubelet_->Admit("vm2-uid", kNvme, 1, /*reverse=*/true, /*ignore_preferred=*/true);
  ASSERT_OK(second.response.status());
  EXPECT_THAT(second.chosen, ElementsAre(kB));  // kubelet's record
  EXPECT_EQ(Env(*second.response), kA);          // what vm2 really got
  ASSERT_TRUE(extender_.WaitForConfirmations(1));
  FeedAllocations();
  ASSERT_OK(extender_.StartPod("default/vm1-nvme", "vm1", "vm1-uid"));
  auto first = kubelet_->Admit("vm1-uid", kNvme, 1, /*reverse=*/false);
  ASSERT_OK(first.response.status());
  EXPECT_THAT(first.chosen, ElementsAre(kA));
  EXPECT_EQ(Env(*first.response), kB);
  EXPECT_THAT(DevicePaths(*first.response), ElementsAre("/dev/vfio/vfio", "/dev/vfio/4"));
}

TEST_F(DevicePluginTest, SecondAllocateBeforeTheExtenderConfirmedGetsNothing) {
  extender_.AddClaim("default/vm1-nvme", Addr(kB));
  extender_.FailConfirms(1'000'000);  // The extender does not record it yet.
  ASSERT_OK(extender_.StartPod("default/vm1-nvme", "vm1", "uid-1"));
  FeedAllocations();
  auto first = kubelet_->Allocate(kNvme, {kA});
  ASSERT_OK(first.status());
  EXPECT_EQ(Env(*first), kB);
  // kubelet admits some other pod asking for the resource: the extender
  // still shows vm1 waiting, but vm1's devices were handed out already.
  EXPECT_THAT(kubelet_->Allocate(kNvme, {kB}),
              StatusIs(absl::StatusCode::kNotFound,
                       "no VM pod is waiting for a devices.kubevirt.io/nvme device on node "
                       "node-a; pdc hands devices only to pods it scheduled"));
  // Two attempts failed and are retried; then the extender is back.
  ASSERT_TRUE(extender_.WaitForConfirmCalls(2));
  extender_.FailConfirms(0);
  ASSERT_TRUE(extender_.WaitForConfirmations(1));
  EXPECT_GE(extender_.confirm_calls(), 3);
  EXPECT_EQ(extender_.confirmations()[0].pod_uid, "uid-1");
}

TEST_F(DevicePluginTest, AllocateWithNothingPendingFailsWithAClearMessage) {
  extender_.AddClaim("default/vm1-nvme", Addr(kB));  // Not reserved by any pod.
  FeedAllocations();
  const int polls = extender_.polls();
  auto a = kubelet_->Admit("stray-pod", kNvme, 1, false);
  EXPECT_THAT(a.response,
              StatusIs(absl::StatusCode::kNotFound,
                       "no VM pod is waiting for a devices.kubevirt.io/nvme device on node "
                       "node-a; pdc hands devices only to pods it scheduled"));
  // GetPreferredAllocation fell back to kubelet's own choice.
  EXPECT_THAT(a.preferred, ElementsAre(kA));
  // Before refusing, the plugin asked the extender (once per call).
  EXPECT_EQ(extender_.polls(), polls + 2);
  EXPECT_TRUE(extender_.confirmations().empty());
  EXPECT_TRUE(Rendered("pdc_node_handoffs_total{outcome=\"nothing_pending\"} 1"));
}

TEST_F(DevicePluginTest, CountDifferentFromTheClaimsIsRefused) {
  extender_.AddClaim("default/vm1-nvme", Addr(kB));
  ASSERT_OK(extender_.StartPod("default/vm1-nvme", "vm1", "uid-1"));
  FeedAllocations();
  EXPECT_THAT(kubelet_->Allocate(kNvme, {kA, kB}),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("kubelet asked for 2 devices.kubevirt.io/nvme device(s) but VM "
                                 "default/vm1 (pod virt-launcher-vm1-uid-1, uid uid-1) holds 1 "
                                 "claimed (0000:00:04.0)")));
  EXPECT_TRUE(Rendered("pdc_node_handoffs_total{outcome=\"count_mismatch\"} 1"));
  // Still pending: a correct request afterwards gets the device.
  auto ok = kubelet_->Allocate(kNvme, {kA});
  ASSERT_OK(ok.status());
  EXPECT_EQ(Env(*ok), kB);
}

TEST_F(DevicePluginTest, TwoPodsPendingAtOnceIsRefusedNotGuessed) {
  extender_.gate = false;  // A misconfigured extender.
  extender_.AddClaim("default/vm1-nvme", Addr(kB));
  extender_.AddClaim("default/vm2-nvme", Addr(kA));
  ASSERT_OK(extender_.StartPod("default/vm1-nvme", "vm1", "uid-1"));
  ASSERT_OK(extender_.StartPod("default/vm2-nvme", "vm2", "uid-2"));
  FeedAllocations();
  auto a = kubelet_->Admit("p", kNvme, 1, false);
  EXPECT_THAT(a.response, StatusIs(absl::StatusCode::kFailedPrecondition,
                                   AllOf(HasSubstr("2 VM pods are waiting"),
                                         HasSubstr("default/vm1 (pod virt-launcher-vm1-uid-1"),
                                         HasSubstr("default/vm2 (pod virt-launcher-vm2-uid-2"),
                                         HasSubstr("refuses rather than guess"))));
  EXPECT_TRUE(Rendered("pdc_node_handoffs_total{outcome=\"several_pending\"} 1"));
  EXPECT_TRUE(extender_.confirmations().empty());
}

// Before the first inventory nothing about a device has been checked (host
// use, a pending erase, a device pdc did not bind): no hand-off, even of a
// device that sits on vfio-pci.
class DevicePluginBeforeInventoryTest : public DevicePluginTest {
 protected:
  DevicePluginBeforeInventoryTest() { feed_at_start_ = false; }
};

TEST_F(DevicePluginBeforeInventoryTest, HealthGateStaysClosedUntilTheFirstInventory) {
  extender_.AddClaim("default/vm1-nvme", Addr(kB));
  ASSERT_OK(extender_.StartPod("default/vm1-nvme", "vm1", "uid-1"));
  FeedAllocations();
  EXPECT_THAT(manager_->plugin(kNvme)->Allocate({kA}),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("pdc-node has not finished its first inventory of node node-a")));
  EXPECT_TRUE(extender_.confirmations().empty());
  FeedInventory();
  auto after = manager_->plugin(kNvme)->Allocate({kA});
  ASSERT_OK(after.status());
}

TEST_F(DevicePluginTest, DeviceNotInTheInventoryIsNotHandedOver) {
  host_.kernel.AddDevice({.address = "0000:00:06.0", .group = 6, .driver = "vfio-pci"});
  extender_.AddClaim("default/vm4-nvme", Addr("0000:00:06.0"));
  ASSERT_OK(extender_.StartPod("default/vm4-nvme", "vm4", "uid-4"));
  FeedAllocations();
  EXPECT_THAT(kubelet_->Allocate(kNvme, {kA}),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("device 0000:00:06.0 is not in node node-a's inventory")));
}

TEST_F(DevicePluginTest, DeviceNotOnVfioPciIsRefusedWithTheReason) {
  host_.kernel.AddDevice({.address = "0000:00:05.0", .group = 5, .driver = "nvme"});
  FeedInventory();
  extender_.AddClaim("default/vm3-nvme", Addr("0000:00:05.0"));
  ASSERT_OK(extender_.StartPod("default/vm3-nvme", "vm3", "uid-3"));
  FeedAllocations();
  const absl::Time before = clock_.Now();
  EXPECT_THAT(kubelet_->Allocate(kNvme, {kA}),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("cannot hand devices.kubevirt.io/nvme to VM default/vm3"),
                             HasSubstr("device 0000:00:05.0 is bound to nvme, not vfio-pci"),
                             HasSubstr("waited 10s"))));
  // It waited (on the fake clock) for the reconcile loop before refusing.
  EXPECT_GE(clock_.Now() - before, absl::Seconds(10));
  EXPECT_TRUE(Rendered("pdc_node_handoffs_total{outcome=\"device_not_ready\"} 1"));
  EXPECT_TRUE(extender_.confirmations().empty());
}

// The reconcile loop is still binding the claimed device when kubelet asks:
// Allocate waits (bounded) and answers once the device is on vfio-pci.
TEST_F(DevicePluginTest, AllocateWaitsForTheReconcilerToBindTheDevice) {
  host_.kernel.AddDevice({.address = "0000:00:05.0", .group = 5, .driver = "nvme"});
  FeedInventory();  // Discovered on nvme, healthy, then claimed.
  extender_.AddClaim("default/vm3-nvme", Addr("0000:00:05.0"));
  ASSERT_OK(extender_.StartPod("default/vm3-nvme", "vm3", "uid-3"));
  FeedAllocations();
  int looks = 0;
  sleep_hook_ = [&] {
    // The third look finds it bound: what the reconciler does meanwhile.
    if (++looks == 2) {
      ASSERT_OK(host_.kernel.Write("bus/pci/devices/0000:00:05.0/driver_override", "vfio-pci"));
      ASSERT_OK(host_.kernel.Write("bus/pci/devices/0000:00:05.0/driver/unbind", "0000:00:05.0"));
      ASSERT_OK(host_.kernel.Write("bus/pci/drivers_probe", "0000:00:05.0"));
    }
  };
  auto a = kubelet_->Allocate(kNvme, {kA});
  ASSERT_OK(a.status());
  EXPECT_EQ(Env(*a), "0000:00:05.0");
  EXPECT_THAT(DevicePaths(*a), ElementsAre("/dev/vfio/vfio", "/dev/vfio/5"));
  EXPECT_EQ(looks, 2);
}

TEST_F(DevicePluginTest, DeviceGoingUnhealthyIsStreamedAndNotHandedOut) {
  FeedInventory({{Addr(kB), DeviceHealth::kUnhealthy}});
  ASSERT_TRUE(kubelet_->WaitForDevices(kNvme, [](const auto& d) {
    return d.size() == 2 && d[0].health() == "Healthy" && d[1].health() == "Unhealthy";
  }));
  extender_.AddClaim("default/vm1-nvme", Addr(kB));
  ASSERT_OK(extender_.StartPod("default/vm1-nvme", "vm1", "uid-1"));
  FeedAllocations();
  EXPECT_THAT(kubelet_->Allocate(kNvme, {kA}),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("device 0000:00:04.0 is Unhealthy on node node-a")));
  FeedInventory();  // Healthy again.
  ASSERT_TRUE(kubelet_->WaitForDevices(kNvme, [](const auto& d) {
    return d.size() == 2 && d[1].health() == "Healthy";
  }));
  auto ok = kubelet_->Allocate(kNvme, {kA});
  ASSERT_OK(ok.status());
  EXPECT_EQ(Env(*ok), kB);
}

TEST_F(DevicePluginTest, ReRegistersAfterKubeletRestarts) {
  ASSERT_OK(kubelet_->Restart());  // Our socket is gone, kubelet.sock is new.
  ASSERT_TRUE(kubelet_->WaitForRegistrations(2));
  ASSERT_TRUE(kubelet_->WaitForDevices(kNvme, [](const auto& d) { return d.size() == 2; }));
  PluginEndpoint* endpoint = manager_->endpoint(kNvme);
  EXPECT_GE(endpoint->server_starts(), 2u);
  ASSERT_TRUE(endpoint->WaitForRegistrations(2, absl::Seconds(20)));
  EXPECT_TRUE(Rendered(absl::StrCat("pdc_node_device_plugin_registrations_total ",
                                    endpoint->registrations())));
  // And it still hands devices out through the new connection.
  extender_.AddClaim("default/vm1-nvme", Addr(kA));
  ASSERT_OK(extender_.StartPod("default/vm1-nvme", "vm1", "uid-1"));
  auto a = kubelet_->Admit("uid-1", kNvme, 1, /*reverse=*/true);
  ASSERT_OK(a.response.status());
  EXPECT_EQ(Env(*a.response), kA);
}

TEST_F(DevicePluginTest, UnconfirmedHandoffOfAPodThatWentAwayIsDropped) {
  extender_.AddClaim("default/vm1-nvme", Addr(kB));
  extender_.FailConfirms(1'000'000);
  ASSERT_OK(extender_.StartPod("default/vm1-nvme", "vm1", "uid-1"));
  FeedAllocations();
  ASSERT_OK(kubelet_->Allocate(kNvme, {kB}).status());
  // The pod is deleted before it started; the extender cancels the hand-off.
  extender_.CancelPod("uid-1");
  FeedAllocations();
  // The confirmer gives up on its next attempt.
  EXPECT_TRUE(manager_->confirmer().WaitUntilIdle(absl::Seconds(20)));
  EXPECT_TRUE(extender_.confirmations().empty());
  EXPECT_TRUE(Rendered("pdc_node_handoff_confirmations_total{outcome=\"gone\"} 1"));
}

}  // namespace
}  // namespace pdc::driver::deviceplugin
