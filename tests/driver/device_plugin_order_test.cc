// The order of PCI_RESOURCE_<NAME> (docs/design.md §6.3): virt-launcher gives
// the k-th address to the VM's k-th hostDevices entry of the resource, so
// each entry must get the same drive at every start. A VM with two claims of
// one resource is started through the real allocator (over the allocations
// wire encoding), pdc-node's device plugin and a kubelet double, then the
// node reboots with its drives renumbered and the VM starts again.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "allocator/allocator.h"
#include "allocator/memory_store.h"
#include "api/rest_json.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "driver/deviceplugin/device_plugin_manager.h"
#include "driver/discovery.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/driver/fake_kubelet.h"
#include "tests/driver/test_util.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace pdc::driver::deviceplugin {
namespace {

using testing::FakeHost;
using testing::FakeKubelet;
using testing::NvmeClass;
using ::testing::ElementsAre;

using testing::kNvme;

// pdc-extender's answers, from a real allocator, through the JSON the
// allocations long-poll carries.
class AllocatorExtender : public ExtenderApi {
 public:
  explicit AllocatorExtender(Allocator* allocator) : allocator_(allocator) {}

  absl::StatusOr<uint64_t> PutInventory(const NodeInventory& inventory) override {
    RETURN_IF_ERROR(allocator_->ReplaceInventory(inventory));
    ASSIGN_OR_RETURN(NodeAllocations a, allocator_->GetNodeAllocations(inventory.node));
    return a.version;
  }
  absl::StatusOr<NodeAllocations> GetAllocations(std::string_view node, uint64_t,
                                                 absl::Duration) override {
    ASSIGN_OR_RETURN(NodeAllocations a, allocator_->GetNodeAllocations(node));
    ASSIGN_OR_RETURN(api::NodeAllocationsReply reply,
                     api::ParseNodeAllocations(api::WriteNodeAllocations(node, a)));
    return reply.allocations;
  }
  absl::Status ConfirmHandoff(std::string_view node, std::string_view pod_uid,
                              std::string_view resource_name,
                              absl::Span<const PciAddress> devices) override {
    return allocator_->ConfirmHandoff(node, pod_uid, resource_name, devices).status();
  }

 private:
  Allocator* const allocator_;
};

struct Drive {
  std::string address;
  int group;
  std::string serial;
};

// One boot of node-a: its kernel, kubelet and pdc-node's device plugin.
class NodeBoot {
 public:
  NodeBoot(const std::vector<Drive>& drives, ExtenderApi* extender,
           const pdc::testing::FakeClock* clock)
      : extender_(extender) {
    for (const Drive& d : drives) {
      host_.kernel.AddDevice({.address = d.address, .group = d.group, .driver = "vfio-pci"});
      serials_[*PciAddress::Parse(d.address)] = d.serial;
    }
    kubelet_ = std::make_unique<FakeKubelet>(plugin_dir_.path());
    DevicePluginManagerOptions o;
    o.node = "node-a";
    o.plugin_dir = plugin_dir_.path();
    o.classes = {NvmeClass()};
    o.watch_interval = absl::Milliseconds(20);
    o.confirmer.backoff_initial = absl::Milliseconds(1);
    o.confirmer.backoff_max = absl::Milliseconds(5);
    manager_ = std::make_unique<DevicePluginManager>(&host_.kernel, extender_, clock, o);
  }
  ~NodeBoot() {
    manager_->Stop();
    kubelet_->Stop();
  }

  // What pdc-node's reconcile loop does at start: discovers the drives
  // (a drive on vfio-pci shows no serial in sysfs; pdc-node's bind journal
  // remembers it) and reports them.
  absl::Status Start() {
    RETURN_IF_ERROR(kubelet_->Start());
    ASSIGN_OR_RETURN(DiscoveryResult r, Discover(host_.kernel, "node-a", {{NvmeClass()}, {}}));
    for (Device& d : r.inventory.devices) d.serial = serials_.at(d.address);
    RETURN_IF_ERROR(extender_->PutInventory(r.inventory).status());
    manager_->OnInventory(r.inventory);
    RETURN_IF_ERROR(manager_->Start());
    if (!kubelet_->WaitForRegistrations(1) ||
        !kubelet_->WaitForDevices(kNvme, [&](const auto& d) { return d.size() == serials_.size(); })) {
      return absl::DeadlineExceededError("the plugin did not register its devices with kubelet");
    }
    return absl::OkStatus();
  }

  // kubelet admits the VM pod `pod_uid` (two NVMe); the serials of
  // PCI_RESOURCE_<NAME>, in its order.
  absl::StatusOr<std::vector<std::string>> Admit(const std::string& pod_uid) {
    ASSIGN_OR_RETURN(NodeAllocations a,
                     extender_->GetAllocations("node-a", 0, absl::ZeroDuration()));
    manager_->OnAllocations(a);
    FakeKubelet::Admission admission = kubelet_->Admit(pod_uid, kNvme, 2, /*reverse=*/false);
    RETURN_IF_ERROR(admission.response.status());
    auto env = admission.response->envs().find(testing::kNvmeEnv);
    if (env == admission.response->envs().end()) return absl::NotFoundError(testing::kNvmeEnv);
    kubelet_->Release(pod_uid);  // The VM stops again.
    std::vector<std::string> serials;
    for (absl::string_view a : absl::StrSplit(env->second, ',')) {
      serials.push_back(serials_.at(*PciAddress::Parse(StdSv(a))));
    }
    if (!manager_->confirmer().WaitUntilIdle(absl::Seconds(20))) {
      return absl::DeadlineExceededError("hand-off confirmation");
    }
    return serials;
  }

 private:
  FakeHost host_;
  pdc::testing::TempDir plugin_dir_;
  ExtenderApi* const extender_;
  std::map<PciAddress, std::string> serials_;
  std::unique_ptr<FakeKubelet> kubelet_;
  std::unique_ptr<DevicePluginManager> manager_;
};

TEST(DevicePluginOrderTest, EachHostDeviceGetsItsDriveAtEveryStartAcrossARenumbering) {
  pdc::testing::FakeClock clock;
  MemoryStore store;
  AllocatorOptions options;
  options.serialize_handoffs = false;  // No node driver confirms hand-offs here.
  options.device_classes = {NvmeClass()};
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Allocator> allocator,
                       Allocator::Open(options, &store, &clock));
  AllocatorExtender extender(allocator.get());
  // The VM names "boot" before "data"; boot's drive has the higher address
  // at first, so address order is not the VM's order.
  ClaimSpec boot;
  boot.resource_name = kNvme;
  boot.serial = "SN-BOOT";
  ClaimSpec data = boot;
  data.serial = "SN-DATA";
  ASSERT_OK(allocator->CreateClaim({"default", "boot"}, boot).status());
  ASSERT_OK(allocator->CreateClaim({"default", "data"}, data).status());

  struct Boot {
    std::string name;
    std::vector<Drive> drives;
  };
  const std::vector<Boot> boots = {
      {"first boot",
       {{"0000:00:03.0", 3, "SN-DATA"}, {"0000:00:04.0", 4, "SN-BOOT"},
        {"0000:00:05.0", 5, "SN-SPARE"}}},
      {"a card added: every drive renumbered",
       {{"0000:00:03.0", 3, "SN-SPARE"}, {"0000:00:05.0", 5, "SN-BOOT"},
        {"0000:00:06.0", 6, "SN-DATA"}}},
      {"slots swapped",
       {{"0000:00:03.0", 3, "SN-BOOT"}, {"0000:00:05.0", 5, "SN-DATA"},
        {"0000:00:06.0", 6, "SN-SPARE"}}},
  };
  int start = 0;
  for (const Boot& b : boots) {
    SCOPED_TRACE(b.name);
    NodeBoot node(b.drives, &extender, &clock);
    ASSERT_OK(node.Start());
    // Two VM starts per boot: a restart gets the same order.
    for (int i = 0; i < 2; ++i) {
      SchedulingRequest pod;
      pod.ns = "default";
      pod.vm = "vm1";
      pod.pod_uid = "pod-" + std::to_string(start++);
      pod.pod_name = "virt-launcher-vm1-" + pod.pod_uid;
      pod.claim_names = {"boot", "data"};
      pod.resources = {{kNvme, 2}};
      ASSERT_OK(allocator->Bind(pod, "node-a").status());
      ASSERT_OK_AND_ASSIGN(std::vector<std::string> serials, node.Admit(pod.pod_uid));
      EXPECT_THAT(serials, ElementsAre("SN-BOOT", "SN-DATA"));
    }
  }
}

}  // namespace
}  // namespace pdc::driver::deviceplugin
