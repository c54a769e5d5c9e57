// ClaimPreparer on the fake kernel with the real VfioBinder: what
// NodePrepareResources and NodeUnprepareResources do to devices and files.
#include <filesystem>
#include <map>
#include <memory>

#include "common/file_util.h"
#include "driver/dra/cdi_spec.h"
#include "driver/dra/claim_preparer.h"
#include "driver/dra/dra_service.h"
#include "driver/dra/names.h"
#include "driver/dra/registrar.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/driver/fake_dra_kubelet.h"
#include "tests/driver/test_util.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/status_matchers.h"

namespace pdc::driver::dra {
namespace {

using pdc::testing::IsOk;
using pdc::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kDriver[] = "nvme.pdc.kubevirt.io";
constexpr char kNode[] = "node-1";
constexpr char kUid[] = "5c1e2f0a-1111-4222-8333-944455556666";

class FakeClaims : public ClaimSource {
 public:
  absl::StatusOr<ResourceClaimView> Get(std::string_view ns, std::string_view name) override {
    ++reads;
    auto it = claims.find(std::string(ns) + "/" + std::string(name));
    if (it == claims.end())
      return absl::NotFoundError("resourceclaims \"" + std::string(name) + "\" not found");
    return it->second;
  }
  std::map<std::string, ResourceClaimView> claims;
  int reads = 0;
};

class FakeDirectory : public DeviceDirectory {
 public:
  absl::StatusOr<PciAddress> Find(std::string_view name) const override {
    auto it = devices.find(std::string(name));
    if (it == devices.end()) return absl::NotFoundError("not published on this node");
    return it->second;
  }
  std::map<std::string, PciAddress> devices;
};

class ClaimPreparerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host_.kernel.AddDevice(
        {.address = "0000:03:00.0", .group = 12, .driver = "nvme", .serial = "S1"});
    host_.kernel.AddDevice(
        {.address = "0000:04:00.0", .group = 13, .driver = "nvme", .serial = "S2"});
    directory_.devices = {{"nvme-s1", *PciAddress::Parse("0000:03:00.0")},
                          {"nvme-s2", *PciAddress::Parse("0000:04:00.0")}};
    cdi_dir_ = host_.tmp.Join("cdi");
    ASSERT_THAT(MakeDirectories(cdi_dir_), IsOk());
    AddClaim("vms", "disk-a", kUid, {{"disk", kDriver, kNode, "nvme-s1"}});
    Restart();
  }

  // A new pdc-node process over the same files and kernel.
  void Restart() {
    preparer_.reset();
    binder_.reset();
    auto j = BindJournal::Open(host_.tmp.Join("vfio-journal"));
    ASSERT_THAT(j.status(), IsOk());
    journal_ = std::move(*j);
    BinderOptions options;
    options.classes = {testing::NvmeClass()};
    options.verify_attempts = 3;
    options.clock = &clock_;
    binder_ = std::make_unique<VfioBinder>(&host_.kernel, &host_.dev, &host_.proc, journal_.get(),
                                           options);
    auto cp = PreparedCheckpoint::Open(host_.tmp.Join("dra-prepared"));
    ASSERT_THAT(cp.status(), IsOk());
    checkpoint_ = std::move(*cp);
    auto holders = PreparedCheckpoint::Open(host_.tmp.Join("dra-holders"));
    ASSERT_THAT(holders.status(), IsOk());
    holders_ = std::move(*holders);
    PreparerOptions o{kDriver, kNode, "devices.kubevirt.io/nvme", cdi_dir_,
                      host_.tmp.Join("metadata")};
    preparer_ = std::make_unique<ClaimPreparer>(
        o, &claims_, &directory_, binder_.get(),
        HostView{&host_.kernel, &host_.dev, &host_.proc, "self/mountinfo"}, checkpoint_.get(),
        holders_.get());
  }

  void AddClaim(const std::string& ns, const std::string& name, const std::string& uid,
                std::vector<AllocatedDevice> devices) {
    ResourceClaimView v;
    v.ns = ns;
    v.name = name;
    v.uid = uid;
    v.allocated = true;
    v.devices = std::move(devices);
    claims_.claims[ns + "/" + name] = v;
  }

  std::string Driver(const std::string& a) {
    auto d = LinkName(host_.kernel, "bus/pci/devices/" + a + "/driver");
    return d.ok() ? *d : "";
  }
  std::string SpecPath(const std::string& uid) { return CdiSpecPath(cdi_dir_, kDriver, uid); }
  std::string MetadataPath(const std::string& uid, const std::string& request) {
    return host_.tmp.Join("metadata") + "/" + uid + "/" + request + "/" + kDriver +
           "-metadata.json";
  }
  bool Exists(const std::string& p) { return std::filesystem::exists(p); }

  testing::FakeHost host_;
  pdc::testing::FakeClock clock_;
  FakeClaims claims_;
  FakeDirectory directory_;
  std::string cdi_dir_;
  std::unique_ptr<BindJournal> journal_;
  std::unique_ptr<VfioBinder> binder_;
  std::unique_ptr<PreparedCheckpoint> checkpoint_;
  std::unique_ptr<PreparedCheckpoint> holders_;
  std::unique_ptr<ClaimPreparer> preparer_;
};

TEST_F(ClaimPreparerTest, BindsToVfioAndWritesCdiAndMetadata) {
  auto answer = preparer_->Prepare("vms", "disk-a", kUid);
  ASSERT_THAT(answer.status(), IsOk());
  const std::string cdi_name = std::string(kUid) + "-nvme-s1";
  EXPECT_THAT(*answer, ElementsAre(PreparedDeviceAnswer{
                           "disk", kNode, "nvme-s1", std::string(kDriver) + "/claim=" + cdi_name}));
  EXPECT_EQ(Driver("0000:03:00.0"), "vfio-pci");
  EXPECT_EQ(Driver("0000:04:00.0"), "nvme");  // Not in the claim.
  EXPECT_TRUE(host_.dev.Exists("vfio/12"));

  auto spec = ReadFileToString(SpecPath(kUid));
  ASSERT_THAT(spec.status(), IsOk());
  EXPECT_EQ(
      *spec,
      absl::StrCat(
          R"({"cdiVersion":"0.5.0","kind":"nvme.pdc.kubevirt.io/claim","devices":[{"name":")",
          cdi_name,
          R"(","containerEdits":{"env":["PCI_RESOURCE_DEVICES_KUBEVIRT_IO_NVME=0000:03:00.0"],)"
          R"("deviceNodes":[{"path":"/dev/vfio/vfio"},{"path":"/dev/vfio/12"}],"mounts":[{"hostPath":")",
          MetadataPath(kUid, "disk"),
          R"(","containerPath":"/var/run/kubernetes.io/dra-device-attributes/resourceclaims/)"
          R"(disk-a/disk/nvme.pdc.kubevirt.io-metadata.json","options":["ro","nosuid","nodev","bind"]}]}}]})"
          "\n"));
  auto metadata = ReadFileToString(MetadataPath(kUid, "disk"));
  ASSERT_THAT(metadata.status(), IsOk());
  EXPECT_THAT(*metadata,
              HasSubstr(R"("resource.kubernetes.io/pciBusID":{"string":"0000:03:00.0"})"));
  EXPECT_EQ(std::filesystem::status(MetadataPath(kUid, "disk")).permissions() &
                std::filesystem::perms::others_read,
            std::filesystem::perms::others_read);
  ASSERT_TRUE(checkpoint_->Get(kUid).has_value());
}

TEST_F(ClaimPreparerTest, PreparingAgainAnswersTheSameWithoutAnotherBind) {
  auto first = preparer_->Prepare("vms", "disk-a", kUid);
  ASSERT_THAT(first.status(), IsOk());
  const size_t writes = host_.kernel.writes().size();
  auto again = preparer_->Prepare("vms", "disk-a", kUid);
  ASSERT_THAT(again.status(), IsOk());
  EXPECT_EQ(*again, *first);
  EXPECT_EQ(host_.kernel.writes().size(), writes);
  Restart();  // pdc-node restarted; kubelet asks again.
  auto after = preparer_->Prepare("vms", "disk-a", kUid);
  ASSERT_THAT(after.status(), IsOk());
  EXPECT_EQ(*after, *first);
}

TEST_F(ClaimPreparerTest, OnlyThisDriversDevicesInThisNodesPool) {
  AddClaim("vms", "mixed", "u-mixed",
           {{"gpu", "gpu.example.com", kNode, "nvme-s2"},
            {"disk", kDriver, "node-2", "nvme-s2"},
            {"disk", kDriver, kNode, "nvme-s1"}});
  auto answer = preparer_->Prepare("vms", "mixed", "u-mixed");
  ASSERT_THAT(answer.status(), IsOk());
  ASSERT_EQ(answer->size(), 1u);
  EXPECT_EQ((*answer)[0].device, "nvme-s1");
  EXPECT_EQ(Driver("0000:04:00.0"), "nvme");
}

TEST_F(ClaimPreparerTest, ARecreatedClaimIsRefusedByUid) {
  auto answer = preparer_->Prepare("vms", "disk-a", "an-older-uid");
  EXPECT_THAT(answer.status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("claim vms/disk-a has UID " + std::string(kUid))));
  EXPECT_EQ(Driver("0000:03:00.0"), "nvme");
  EXPECT_FALSE(Exists(SpecPath("an-older-uid")));
}

TEST_F(ClaimPreparerTest, ErrorsNameTheClaimAndTheReason) {
  EXPECT_THAT(preparer_->Prepare("vms", "gone", "u-gone").status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("claim vms/gone")));
  AddClaim("vms", "unknown-device", "u-x", {{"disk", kDriver, kNode, "nvme-s9"}});
  EXPECT_THAT(
      preparer_->Prepare("vms", "unknown-device", "u-x").status(),
      StatusIs(absl::StatusCode::kNotFound, HasSubstr("claim vms/unknown-device: device nvme-s9")));
  EXPECT_THAT(preparer_->Prepare("vms", "disk-a", "../../etc").status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  ResourceClaimView unallocated = claims_.claims["vms/disk-a"];
  unallocated.allocated = false;
  unallocated.devices.clear();
  claims_.claims["vms/disk-a"] = unallocated;
  EXPECT_THAT(preparer_->Prepare("vms", "disk-a", kUid).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("not allocated")));
}

TEST_F(ClaimPreparerTest, NeverHandsOutADeviceTheHostUses) {
  host_.kernel.AddMount(host_.kernel.BlockDev("nvme0n1"), "/var/lib/data", "/dev/nvme0n1");
  auto answer = preparer_->Prepare("vms", "disk-a", kUid);
  EXPECT_THAT(answer.status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("/var/lib/data")));
  EXPECT_THAT(answer.status().message(), HasSubstr("claim vms/disk-a"));
  EXPECT_EQ(Driver("0000:03:00.0"), "nvme");
  EXPECT_FALSE(Exists(SpecPath(kUid)));
  EXPECT_FALSE(Exists(MetadataPath(kUid, "disk")));
  EXPECT_FALSE(checkpoint_->Get(kUid).has_value());
}

TEST_F(ClaimPreparerTest, UnprepareRemovesFilesAndKeepsVfio) {
  ASSERT_THAT(preparer_->Prepare("vms", "disk-a", kUid).status(), IsOk());
  Restart();  // Unprepare after a pdc-node restart.
  ASSERT_THAT(preparer_->Unprepare("vms", "disk-a", kUid), IsOk());
  EXPECT_FALSE(Exists(SpecPath(kUid)));
  EXPECT_FALSE(Exists(host_.tmp.Join("metadata") + "/" + kUid));
  EXPECT_FALSE(checkpoint_->Get(kUid).has_value());
  EXPECT_EQ(Driver("0000:03:00.0"), "vfio-pci");
  // Twice is fine.
  EXPECT_THAT(preparer_->Unprepare("vms", "disk-a", kUid), IsOk());
}

TEST_F(ClaimPreparerTest, AGroupStillOpenElsewhereIsRetriedNamingTheHolder) {
  ASSERT_THAT(preparer_->Prepare("vms", "disk-a", kUid).status(), IsOk());
  // The VM runs: its QEMU holds the group. kubelet asking again for the
  // same prepared claim (a second pod, a kubelet restart) is answered.
  host_.kernel.AddProcess(4242, "qemu-kvm", {"vfio/12"});
  EXPECT_THAT(preparer_->Prepare("vms", "disk-a", kUid).status(), IsOk());
  // The VM stopped: kubelet unprepared; the old QEMU has not exited yet
  // when the VM starts again.
  ASSERT_THAT(preparer_->Unprepare("vms", "disk-a", kUid), IsOk());
  auto answer = preparer_->Prepare("vms", "disk-a", kUid);
  EXPECT_THAT(answer.status(), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("4242")));
  EXPECT_THAT(answer.status().message(), HasSubstr("/dev/vfio/12"));
  EXPECT_FALSE(Exists(SpecPath(kUid)));
}

TEST_F(ClaimPreparerTest, EachClaimOfARequestGetsItsOwnAnswer) {
  AddClaim("vms", "disk-b", "u-b", {{"disk", kDriver, kNode, "nvme-s2"}});
  drapb::NodePrepareResourcesRequest req;
  for (auto [name, uid] : std::vector<std::pair<std::string, std::string>>{
           {"disk-a", "wrong-uid"}, {"disk-b", "u-b"}, {"gone", "u-gone"}}) {
    drapb::Claim* c = req.add_claims();
    c->set_namespace_("vms");
    c->set_name(name);
    c->set_uid(uid);
  }
  drapb::NodePrepareResourcesResponse resp = PrepareClaims(*preparer_, req);
  ASSERT_EQ(resp.claims().size(), 3u);
  EXPECT_THAT(resp.claims().at("wrong-uid").error(), HasSubstr("claim vms/disk-a"));
  EXPECT_THAT(resp.claims().at("u-gone").error(), HasSubstr("claim vms/gone"));
  EXPECT_EQ(resp.claims().at("u-b").error(), "");
  ASSERT_EQ(resp.claims().at("u-b").devices_size(), 1);
  EXPECT_EQ(resp.claims().at("u-b").devices(0).device_name(), "nvme-s2");
  EXPECT_EQ(resp.claims().at("u-b").devices(0).pool_name(), kNode);
  EXPECT_THAT(resp.claims().at("u-b").devices(0).request_names(), ElementsAre("disk"));
  EXPECT_EQ(Driver("0000:04:00.0"), "vfio-pci");
}

// The driver as kubelet meets it: registration through the plugin watcher
// and the DRA manager's calls, over gRPC on unix sockets (kubelet double:
// tests/driver/fake_dra_kubelet.h).
class DraKubeletTest : public ClaimPreparerTest {
 protected:
  void SetUp() override {
    ClaimPreparerTest::SetUp();
    registry_ = host_.tmp.Join("plugins_registry");
    ASSERT_THAT(MakeDirectories(registry_), IsOk());
    server_ = std::make_unique<DraServer>(preparer_.get(),
                                          ServiceSocketPath(host_.tmp.Join("plugins"), kDriver));
    ASSERT_THAT(server_->Start(), IsOk());
    registrar_ = std::make_unique<Registrar>(
        RegistrarOptions{kDriver, registry_, server_->socket_path(), {}});
    ASSERT_THAT(registrar_->Ensure(), IsOk());
  }
  void TearDown() override {
    registrar_.reset();
    server_.reset();
  }

  std::string registry_;
  std::unique_ptr<DraServer> server_;
  std::unique_ptr<Registrar> registrar_;
};

const std::vector<std::string> kKubelet134 = {"v1.DRAPlugin", "v1beta1.DRAPlugin"};

TEST_F(DraKubeletTest, RegistersThroughThePluginWatcher) {
  testing::FakeDraKubelet kubelet(registry_, kKubelet134);
  EXPECT_EQ(kubelet.WatchOnce(), 1);
  ASSERT_TRUE(kubelet.plugins().contains(kDriver));
  EXPECT_EQ(kubelet.plugins().at(kDriver).chosen_service, "v1.DRAPlugin");
  EXPECT_EQ(kubelet.plugins().at(kDriver).endpoint, server_->socket_path());
  EXPECT_TRUE(registrar_->WaitForVerdicts(1, 1, absl::Seconds(10)));
  EXPECT_EQ(registrar_->accepted(), 1u);
  EXPECT_EQ(registrar_->socket_path(), registry_ + "/" + kDriver + "-reg.sock");
  EXPECT_EQ(kubelet.WatchOnce(), 0);  // Nothing new.
}

TEST_F(DraKubeletTest, AKubeletThatKnowsOnlyV1beta1PreparesThroughIt) {
  testing::FakeDraKubelet kubelet(registry_, {"v1beta1.DRAPlugin"});
  kubelet.WatchOnce();
  ASSERT_EQ(kubelet.plugins().at(kDriver).chosen_service, "v1beta1.DRAPlugin");
  auto ids = kubelet.PreparePod("pod-1", {{"vms", "disk-a", kUid, kDriver}});
  ASSERT_THAT(ids.status(), IsOk());
  EXPECT_THAT(*ids, ElementsAre(std::string(kDriver) + "/claim=" + kUid + "-nvme-s1"));
}

TEST_F(DraKubeletTest, ARefusalIsLoggedAndRegistrationIsRetried) {
  testing::FakeDraKubelet old_kubelet(registry_, {"v1alpha4.Node"});
  old_kubelet.WatchOnce();
  ASSERT_TRUE(registrar_->WaitForVerdicts(1, 1, absl::Seconds(10)));
  EXPECT_EQ(registrar_->refused(), 1u);
  EXPECT_THAT(registrar_->last_error(), HasSubstr("none of services supported by the plugin"));
  EXPECT_THAT(old_kubelet.plugins(), IsEmpty());
  // The next Ensure serves a new socket, which the watcher sees created.
  ASSERT_THAT(registrar_->Ensure(), IsOk());
  EXPECT_EQ(registrar_->server_starts(), 2u);
  testing::FakeDraKubelet kubelet(registry_, kKubelet134);
  EXPECT_EQ(kubelet.WatchOnce(), 1);
  EXPECT_TRUE(registrar_->WaitForVerdicts(1, 2, absl::Seconds(10)));
  EXPECT_EQ(registrar_->accepted(), 1u);
  // Accepted: nothing to redo.
  ASSERT_THAT(registrar_->Ensure(), IsOk());
  EXPECT_EQ(registrar_->server_starts(), 2u);
}

TEST_F(DraKubeletTest, TwoPodsShareAClaimAndKubeletRestarts) {
  testing::FakeDraKubelet kubelet(registry_, kKubelet134);
  kubelet.WatchOnce();
  const std::vector<testing::FakeClaimRef> claims = {{"vms", "disk-a", kUid, kDriver}};
  auto first = kubelet.PreparePod("pod-1", claims);
  ASSERT_THAT(first.status(), IsOk());
  EXPECT_EQ(kubelet.prepare_calls(), 1);
  EXPECT_EQ(Driver("0000:03:00.0"), "vfio-pci");

  // A second pod (the VM's migration target, a hot-plug pod) shares it:
  // kubelet's cache says prepared, no call.
  auto second = kubelet.PreparePod("pod-2", claims);
  ASSERT_THAT(second.status(), IsOk());
  EXPECT_EQ(*second, *first);
  EXPECT_EQ(kubelet.prepare_calls(), 1);

  // kubelet restarts: the driver registers again, and prepare is called
  // again for the claim of the running pods.
  kubelet.Restart();
  EXPECT_EQ(kubelet.WatchOnce(), 1);
  auto after = kubelet.PreparePod("pod-2", claims);
  ASSERT_THAT(after.status(), IsOk());
  EXPECT_EQ(*after, *first);
  EXPECT_EQ(kubelet.prepare_calls(), 2);

  // One pod gone: the claim is still used. Both gone: unprepared, the
  // device stays on vfio-pci.
  ASSERT_THAT(kubelet.UnpreparePod("pod-1"), IsOk());
  EXPECT_EQ(kubelet.unprepare_calls(), 0);
  EXPECT_TRUE(Exists(SpecPath(kUid)));
  ASSERT_THAT(kubelet.UnpreparePod("pod-2"), IsOk());
  EXPECT_EQ(kubelet.unprepare_calls(), 1);
  EXPECT_FALSE(Exists(SpecPath(kUid)));
  EXPECT_EQ(Driver("0000:03:00.0"), "vfio-pci");
}

TEST_F(DraKubeletTest, APodIsRefusedWhileTheOldVmHoldsTheGroup) {
  testing::FakeDraKubelet kubelet(registry_, kKubelet134);
  kubelet.WatchOnce();
  const std::vector<testing::FakeClaimRef> claims = {{"vms", "disk-a", kUid, kDriver}};
  ASSERT_THAT(kubelet.PreparePod("launcher-1", claims).status(), IsOk());
  host_.kernel.AddProcess(4242, "qemu-kvm", {"vfio/12"});
  ASSERT_THAT(kubelet.UnpreparePod("launcher-1"), IsOk());  // VM stopped.
  auto next = kubelet.PreparePod("launcher-2", claims);     // VM started again.
  EXPECT_THAT(next.status(), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("process 4242")));
}

}  // namespace
}  // namespace pdc::driver::dra
