// Erase in DRA mode: pdc-node's whole loop (Reconciler, DraDriver with its
// DeviceReclaimer, the real VfioBinder and bind journal) on the fake kernel
// and a fake NVMe admin channel, with the ResourceClaims of a fake
// apiserver. A device whose claim is gone is withdrawn from the
// ResourceSlice before anything else, erased (Delete) or kept Released
// (Retain), and published again only once erased; restarts in the middle
// never publish it unerased; a claim that still holds a device never loses
// its data.
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "driver/dra/claim_index.h"
#include "driver/dra/device_reclaimer.h"
#include "driver/dra/dra_driver.h"
#include "driver/dra/slice_builder.h"
#include "driver/node_reconciler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rapidjson/document.h"
#include "tests/driver/fake_dra_claims.h"
#include "tests/driver/fake_nvme_admin.h"
#include "tests/driver/test_util.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/status_matchers.h"

namespace pdc::driver::dra {
namespace {

using ::pdc::testing::IsOk;
using ::pdc::testing::StatusIs;
using ::testing::HasSubstr;

constexpr char kReclaimDriver[] = "nvme.pdc.kubevirt.io";
constexpr char kReclaimNode[] = "node-1";
constexpr char kUidA[] = "aaaaaaaa-1111-4222-8333-944455556666";
constexpr char kUidB[] = "bbbbbbbb-1111-4222-8333-944455556666";
constexpr char kS1Address[] = "0000:03:00.0";
constexpr char kS2Address[] = "0000:04:00.0";

// pdc-extender for a node whose only class is in DRA mode: it returns
// nothing, and allocates only what a test sets.
class IdleExtender : public ExtenderApi {
 public:
  absl::StatusOr<uint64_t> PutInventory(const NodeInventory&) override { return 1; }
  absl::StatusOr<NodeAllocations> GetAllocations(std::string_view, uint64_t,
                                                 absl::Duration) override {
    NodeAllocations a;
    a.version = 1;
    a.claimed = claimed;
    return a;
  }
  // PersistentDeviceClaims' devices (a class that was in device-plugin mode).
  std::vector<NodeAllocation> claimed;
};

// The apiserver's ResourceSlices: the last set published.
class RecordingPublisher : public SlicePublisher {
 public:
  absl::StatusOr<int64_t> CurrentGeneration(const std::string&, const std::string&) override {
    return 0;
  }
  absl::Status Publish(const std::string&, const std::string&, const SliceSet& set) override {
    ++publications;
    if (fail) return absl::UnavailableError("apiserver down");
    last = set;
    return absl::OkStatus();
  }
  // The device is in the slices the apiserver holds.
  bool Offers(const std::string& device) const {
    for (const std::string& s : last.slices) {
      if (s.find("\"name\":\"" + device + "\"") != std::string::npos) return true;
    }
    return false;
  }
  SliceSet last;
  bool fail = false;
  int publications = 0;
};

class DraReclaimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host_.kernel.AddDevice({.address = kS1Address, .group = 12, .driver = "nvme", .serial = "S1"});
    host_.kernel.AddDevice({.address = kS2Address, .group = 13, .driver = "nvme", .serial = "S2"});
    // nvme0 is 03:00.0, nvme1 04:00.0 (the fake kernel numbers them in order).
    admin_.controllers["nvme0"].namespaces[1] = testing::FakeNamespace{};
    admin_.controllers["nvme0"].serial = "S1";
    admin_.controllers["nvme1"].namespaces[1] = testing::FakeNamespace{};
    admin_.controllers["nvme1"].serial = "S2";
    s1_ = DeviceNameFromSerial("S1");
    s2_ = DeviceNameFromSerial("S2");
    Start();
  }

  // pdc-node starting (again) over the same files and kernel.
  void Start() {
    reconciler_.reset();
    driver_.reset();
    binder_.reset();
    auto j = BindJournal::Open(host_.tmp.Join("vfio-journal"), "boot-1");
    ASSERT_THAT(j.status(), IsOk());
    journal_ = std::move(*j);
    BinderOptions bo;
    bo.classes = {testing::NvmeClass()};
    bo.verify_attempts = 2;
    bo.clock = &clock_;
    binder_ = std::make_unique<VfioBinder>(&host_.kernel, &host_.dev, &host_.proc, journal_.get(),
                                           bo);
    DraDriverOptions o{kReclaimDriver,
                       kReclaimNode,
                       testing::NvmeClass(),
                       host_.tmp.Join("registry"),
                       host_.tmp.Join("plugins"),
                       host_.tmp.Join("cdi"),
                       host_.tmp.Join("metadata"),
                       host_.tmp.Join("dra-prepared"),
                       host_.tmp.Join("dra-holders"),
                       policy_,
                       ReleaseDir()};
    ASSERT_THAT(MakeDirectories(host_.tmp.Join("cdi")), IsOk());
    auto d = DraDriver::Create(o, &claims_, &claims_, binder_.get(), journal_.get(),
                               HostView{&host_.kernel, &host_.dev, &host_.proc, "self/mountinfo"},
                               &publisher_);
    ASSERT_THAT(d.status(), IsOk());
    driver_ = std::move(*d);
    ReconcilerOptions ro;
    ro.node = kReclaimNode;
    ro.classes = {testing::NvmeClass()};
    ro.nvme_admin = &admin_;
    ro.unreported_resources = {testing::NvmeClass().resource_name};
    ro.on_inventory = [this](const NodeInventory& i) { driver_->OnInventory(i); };
    ro.on_allocations = [this](const NodeAllocations& a) { driver_->OnAllocations(a); };
    reconciler_ = std::make_unique<Reconciler>(&host_.kernel, binder_.get(), journal_.get(),
                                               &extender_, nullptr, &clock_, ro);
    ASSERT_THAT(reconciler_->Start(), IsOk());
  }

  std::string ReleaseDir() { return host_.tmp.Join("dra-release"); }

  void Pass() {
    auto r = reconciler_->RunOnce(absl::ZeroDuration());
    ASSERT_THAT(r.status(), IsOk());
  }

  void Allocate(const std::string& name, const std::string& uid, const std::string& device) {
    claims_.Allocate("vms", name, uid, kReclaimDriver, kReclaimNode, {device});
  }

  absl::Status Prepare(const std::string& name, const std::string& uid) {
    return driver_->preparer()->Prepare("vms", name, uid).status();
  }

  std::string Driver(const std::string& a) {
    auto d = LinkName(host_.kernel, "bus/pci/devices/" + a + "/driver");
    return d.ok() ? *d : "";
  }
  bool S1Erased() { return !admin_.controllers["nvme0"].namespaces[1].has_data; }

  // Claim A prepared S1 (its VM ran), kubelet unprepared it (the VM
  // stopped): S1 stays on vfio-pci with A's data, published.
  void S1UsedByClaimA() {
    Pass();
    ASSERT_TRUE(publisher_.Offers(s1_));
    Allocate("disk-a", kUidA, s1_);
    ASSERT_THAT(Prepare("disk-a", kUidA), IsOk());
    ASSERT_THAT(driver_->preparer()->Unprepare("vms", "disk-a", kUidA), IsOk());
    ASSERT_EQ(Driver(kS1Address), "vfio-pci");
    Pass();
    ASSERT_TRUE(publisher_.Offers(s1_));
  }

  testing::FakeHost host_;
  pdc::testing::FakeClock clock_;
  testing::FakeNvmeAdmin admin_;
  testing::FakeDraClaims claims_;
  RecordingPublisher publisher_;
  IdleExtender extender_;
  ReclaimPolicy policy_ = ReclaimPolicy::kDelete;
  std::unique_ptr<BindJournal> journal_;
  std::unique_ptr<VfioBinder> binder_;
  std::unique_ptr<DraDriver> driver_;
  std::unique_ptr<Reconciler> reconciler_;
  std::string s1_;
  std::string s2_;
};

// How a claim stops holding its device: deleted, deleted and created again
// under its name (another UID), or its allocation cleared.
struct FreedCase {
  const char* name;
  std::function<void(testing::FakeDraClaims&)> free;
};

class DraReclaimFreedTest : public DraReclaimTest,
                            public ::testing::WithParamInterface<FreedCase> {};

TEST_P(DraReclaimFreedTest, WithdrawnThenErasedThenPublishedAgain) {
  S1UsedByClaimA();
  GetParam().free(claims_);
  // At the first destructive command, the apiserver no longer offers S1.
  bool offered_during_erase = true;
  admin_.on_command = [&](const testing::RecordedCommand& c) {
    if (c.opcode == kNvmeAdminFormatNvm) offered_during_erase = publisher_.Offers(s1_);
  };
  Pass();
  EXPECT_FALSE(offered_during_erase);
  EXPECT_TRUE(S1Erased());
  EXPECT_EQ(Driver(kS1Address), "nvme");
  // The pass reports again after an erase: offered once erased.
  EXPECT_TRUE(publisher_.Offers(s1_));
  EXPECT_TRUE(publisher_.Offers(s2_));
  EXPECT_TRUE(admin_.controllers["nvme1"].namespaces[1].has_data);  // S2 untouched.
  // Erased once; another claim now gets it.
  Allocate("disk-b", kUidB, s1_);
  EXPECT_THAT(Prepare("disk-b", kUidB), IsOk());
  Pass();
  EXPECT_EQ(admin_.Formats().size(), 1u);
  EXPECT_EQ(Driver(kS1Address), "vfio-pci");
}

INSTANTIATE_TEST_SUITE_P(
    Freed, DraReclaimFreedTest,
    ::testing::Values(
        FreedCase{"Deleted", [](testing::FakeDraClaims& c) { c.Delete("vms", "disk-a"); }},
        FreedCase{"RecreatedUnderItsName",
                  [](testing::FakeDraClaims& c) {
                    c.Delete("vms", "disk-a");
                    c.Allocate("vms", "disk-a", kUidB, kReclaimDriver, kReclaimNode,
                               {DeviceNameFromSerial("S2")});
                  }},
        FreedCase{"Deallocated",
                  [](testing::FakeDraClaims& c) { c.Deallocate("vms", "disk-a"); }}),
    [](const ::testing::TestParamInfo<FreedCase>& info) { return std::string(info.param.name); });

// What keeps a device whose claim still holds it: never erased, still
// published.
struct HeldCase {
  const char* name;
  bool prepared;  // The VM runs (prepared) or is stopped (unprepared).
  std::function<void(testing::FakeDraClaims&)> view;
};

class DraReclaimHeldTest : public DraReclaimTest,
                           public ::testing::WithParamInterface<HeldCase> {};

TEST_P(DraReclaimHeldTest, AClaimThatHoldsItsDeviceKeepsItsData) {
  Pass();
  Allocate("disk-a", kUidA, s1_);
  ASSERT_THAT(Prepare("disk-a", kUidA), IsOk());
  if (!GetParam().prepared) {
    ASSERT_THAT(driver_->preparer()->Unprepare("vms", "disk-a", kUidA), IsOk());
  }
  GetParam().view(claims_);
  for (int i = 0; i < 3; ++i) Pass();
  EXPECT_FALSE(S1Erased());
  EXPECT_TRUE(admin_.Formats().empty());
  EXPECT_EQ(Driver(kS1Address), "vfio-pci");
}

INSTANTIATE_TEST_SUITE_P(
    Held, DraReclaimHeldTest,
    ::testing::Values(
        HeldCase{"Prepared", true, [](testing::FakeDraClaims&) {}},
        HeldCase{"Unprepared", false, [](testing::FakeDraClaims&) {}},
        // The watched copy has not seen the claim yet: the apiserver, read
        // before anything is done, says it holds the device.
        HeldCase{"CopyLagging", false,
                 [](testing::FakeDraClaims& c) { c.lagging = true; }},
        HeldCase{"CopyLaggingPrepared", true,
                 [](testing::FakeDraClaims& c) { c.lagging = true; }},
        // The copy could not decode the claim and the apiserver cannot be
        // read: unknown is not gone.
        HeldCase{"Unreadable", false,
                 [](testing::FakeDraClaims& c) {
                   c.lagging = true;
                   c.unreadable.insert("vms/disk-a");
                   c.read_error = absl::UnavailableError("apiserver down");
                 }},
        // The claims are not listed yet (pdc-node just started).
        HeldCase{"NotListedYet", false,
                 [](testing::FakeDraClaims& c) { c.synced = false; }}),
    [](const ::testing::TestParamInfo<HeldCase>& info) { return std::string(info.param.name); });

TEST_F(DraReclaimTest, NotListedYetWithholdsWhatAClaimMayHold) {
  S1UsedByClaimA();
  claims_.synced = false;
  Pass();
  EXPECT_FALSE(publisher_.Offers(s1_));
  EXPECT_TRUE(publisher_.Offers(s2_));  // On nvme, nobody's: offered.
  claims_.synced = true;
  Pass();
  EXPECT_TRUE(publisher_.Offers(s1_));
  EXPECT_FALSE(S1Erased());
}

// A device re-allocated to claim B while it still holds deleted claim A's
// data (the scheduler saw it free before pdc-node withdrew it): B's
// prepare waits, the device is erased (nothing of B is on it yet), then B
// gets it, and from then on B's data is never erased under B.
TEST_F(DraReclaimTest, ReallocatedDeviceIsErasedBeforeTheNewClaimAndNeverUnderIt) {
  S1UsedByClaimA();
  claims_.Delete("vms", "disk-a");
  Allocate("disk-b", kUidB, s1_);
  EXPECT_THAT(Prepare("disk-b", kUidB),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("still holds the data of claim "
                                                                 "vms/disk-a")));
  Pass();  // Withdrawn, erased, offered again.
  EXPECT_TRUE(S1Erased());
  ASSERT_TRUE(publisher_.Offers(s1_));
  ASSERT_THAT(Prepare("disk-b", kUidB), IsOk());
  admin_.controllers["nvme0"].namespaces[1].has_data = true;  // B's VM writes.
  ASSERT_THAT(driver_->preparer()->Unprepare("vms", "disk-b", kUidB), IsOk());
  for (int i = 0; i < 3; ++i) Pass();
  EXPECT_FALSE(S1Erased());
  EXPECT_EQ(admin_.Formats().size(), 1u);
}

// A device prepared for live claim B that also holds deleted claim A's data
// (records from an older pdc-node): never erased under B.
TEST_F(DraReclaimTest, PreparedForALiveClaimIsNeverErasedEvenWithAGoneHolder) {
  S1UsedByClaimA();
  {
    auto holders = PreparedCheckpoint::Open(host_.tmp.Join("dra-holders"));
    ASSERT_THAT(holders.status(), IsOk());
    auto a = (*holders)->Get(kUidA);
    ASSERT_TRUE(a.has_value());
    // B prepared it too (the checkpoint of prepared claims).
    auto prepared = PreparedCheckpoint::Open(host_.tmp.Join("dra-prepared"));
    ASSERT_THAT(prepared.status(), IsOk());
    ASSERT_THAT((*prepared)->Put({kUidB, "vms", "disk-b", a->devices}), IsOk());
  }
  claims_.Delete("vms", "disk-a");
  Allocate("disk-b", kUidB, s1_);
  Start();
  for (int i = 0; i < 3; ++i) Pass();
  EXPECT_FALSE(S1Erased());
  EXPECT_EQ(Driver(kS1Address), "vfio-pci");
  EXPECT_FALSE(publisher_.Offers(s1_));  // Withheld for an administrator.
}

TEST_F(DraReclaimTest, RetainKeepsItWithdrawnAndReleasedUntilAnAdministratorReleasesIt) {
  policy_ = ReclaimPolicy::kRetain;
  Start();
  S1UsedByClaimA();
  claims_.Delete("vms", "disk-a");
  for (int i = 0; i < 3; ++i) Pass();
  EXPECT_FALSE(publisher_.Offers(s1_));
  EXPECT_THAT(publisher_.last.withheld,
              ::testing::Contains(HasSubstr("Released: holds the data of deleted or deallocated "
                                            "claim vms/disk-a")));
  EXPECT_FALSE(S1Erased());
  EXPECT_EQ(Driver(kS1Address), "vfio-pci");
  // Still Released after a restart.
  Start();
  Pass();
  EXPECT_FALSE(publisher_.Offers(s1_));
  EXPECT_FALSE(S1Erased());
  // A stale request for another device is dropped, not kept for later.
  ASSERT_THAT(WriteFileAtomically(ReleaseDir() + "/" + s2_, ""), IsOk());
  Pass();
  EXPECT_FALSE(std::filesystem::exists(ReleaseDir() + "/" + s2_));
  // The administrator releases it: erased, then offered.
  ASSERT_THAT(WriteFileAtomically(ReleaseDir() + "/" + s1_, ""), IsOk());
  Pass();
  EXPECT_TRUE(S1Erased());
  EXPECT_FALSE(std::filesystem::exists(ReleaseDir() + "/" + s1_));
  EXPECT_TRUE(publisher_.Offers(s1_));
}

// Restarts of pdc-node at each point of the way never offer S1 unerased.
TEST_F(DraReclaimTest, RestartBeforeTheWithdrawalWasPublishedResumes) {
  S1UsedByClaimA();
  claims_.Delete("vms", "disk-a");
  publisher_.fail = true;  // The withdrawal does not reach the apiserver.
  Pass();
  EXPECT_FALSE(S1Erased());  // Nothing before the withdrawal is published.
  EXPECT_TRUE(publisher_.Offers(s1_));
  publisher_.fail = false;
  claims_.synced = false;  // The new process has not listed the claims yet.
  Start();
  Pass();
  EXPECT_FALSE(publisher_.Offers(s1_));
  EXPECT_FALSE(S1Erased());
  claims_.synced = true;
  bool offered_during_erase = true;
  admin_.on_command = [&](const testing::RecordedCommand& c) {
    if (c.opcode == kNvmeAdminFormatNvm) offered_during_erase = publisher_.Offers(s1_);
  };
  Pass();
  EXPECT_TRUE(S1Erased());
  EXPECT_FALSE(offered_during_erase);
  EXPECT_TRUE(publisher_.Offers(s1_));
}

TEST_F(DraReclaimTest, RestartWithTheErasePendingResumesTheErase) {
  S1UsedByClaimA();
  claims_.Delete("vms", "disk-a");
  admin_.open_error = absl::UnavailableError("the controller does not answer");
  Pass();  // Withdrawn, journaled pending; the erase fails.
  EXPECT_FALSE(S1Erased());
  EXPECT_FALSE(publisher_.Offers(s1_));
  // The claim comes back under its name (another UID): nothing of it helps.
  Allocate("disk-a", kUidB, s2_);
  admin_.open_error = absl::OkStatus();
  clock_.Advance(absl::Minutes(1));  // The retry is due.
  Start();
  bool offered_during_erase = true;
  admin_.on_command = [&](const testing::RecordedCommand& c) {
    if (c.opcode == kNvmeAdminFormatNvm) offered_during_erase = publisher_.Offers(s1_);
  };
  Pass();
  EXPECT_TRUE(S1Erased());
  EXPECT_FALSE(offered_during_erase);
  EXPECT_TRUE(publisher_.Offers(s1_));
}

// The holder records are lost: a device on vfio-pci for no claim holds data
// whose owner is unknown. It is never offered, and erased only once an
// administrator releases it. The prepared-claims checkpoint knows the
// devices of claims kubelet did not unprepare (next test).
TEST_F(DraReclaimTest, OnVfioForNoKnownClaimAtStartupIsHeldUntilReleased) {
  S1UsedByClaimA();
  claims_.Delete("vms", "disk-a");
  std::filesystem::remove(host_.tmp.Join("dra-holders"));
  Start();
  for (int i = 0; i < 3; ++i) Pass();
  EXPECT_FALSE(S1Erased());
  EXPECT_FALSE(publisher_.Offers(s1_));
  ASSERT_THAT(WriteFileAtomically(ReleaseDir() + "/" + s1_, ""), IsOk());
  bool offered_during_erase = true;
  admin_.on_command = [&](const testing::RecordedCommand& c) {
    if (c.opcode == kNvmeAdminFormatNvm) offered_during_erase = publisher_.Offers(s1_);
  };
  Pass();
  EXPECT_TRUE(S1Erased());
  EXPECT_FALSE(offered_during_erase);
  EXPECT_TRUE(publisher_.Offers(s1_));
}

// A device a PersistentDeviceClaim of pdc-extender holds (its class was in
// device-plugin mode before) is neither offered through DRA nor erased.
TEST_F(DraReclaimTest, ADeviceAPersistentDeviceClaimHoldsIsLeftAlone) {
  extender_.claimed = {{*PciAddress::Parse(kS1Address), ClaimKey{"default", "vm1-nvme"},
                        testing::NvmeClass().resource_name, ReclaimPolicy::kDelete}};
  for (int i = 0; i < 3; ++i) Pass();
  EXPECT_EQ(Driver(kS1Address), "vfio-pci");  // The reconcile loop bound it for that claim.
  EXPECT_FALSE(publisher_.Offers(s1_));
  EXPECT_TRUE(publisher_.Offers(s2_));
  EXPECT_FALSE(S1Erased());
}

TEST_F(DraReclaimTest, PreparedCheckpointNamesTheDeviceOfAClaimGoneAtStartup) {
  Pass();
  Allocate("disk-a", kUidA, s1_);
  ASSERT_THAT(Prepare("disk-a", kUidA), IsOk());  // Never unprepared.
  claims_.Delete("vms", "disk-a");
  std::filesystem::remove(host_.tmp.Join("dra-holders"));
  Start();
  Pass();
  EXPECT_TRUE(S1Erased());
  Pass();
  EXPECT_TRUE(publisher_.Offers(s1_));
}

// Without holder records, a live claim allocated the device on vfio-pci
// keeps it (it is taken as that claim's).
TEST_F(DraReclaimTest, OnVfioWithoutRecordAllocatedToALiveClaimIsAdopted) {
  S1UsedByClaimA();
  std::filesystem::remove(host_.tmp.Join("dra-holders"));
  Start();
  for (int i = 0; i < 2; ++i) Pass();
  EXPECT_FALSE(S1Erased());
  EXPECT_TRUE(publisher_.Offers(s1_));
  claims_.Delete("vms", "disk-a");  // Adopted: its deletion now frees it.
  Pass();
  EXPECT_TRUE(S1Erased());
}

// The watched copy: decoded claims, and one that does not decode named as
// unreadable (never taken for gone); nothing before the first list.
TEST(ReflectedClaimIndexTest, KeepsDecodedClaimsAndNamesTheUnreadable) {
  ReflectedClaimIndex index(nullptr);
  EXPECT_FALSE(index.Snapshot().has_value());
  rapidjson::Document good;
  good.Parse(R"({"metadata":{"namespace":"vms","name":"disk-a","uid":"u1","resourceVersion":"5"},
                 "status":{"allocation":{"devices":{"results":[
                   {"request":"disk","driver":"nvme.pdc.kubevirt.io","pool":"node-1",
                    "device":"s1"}]}}}})");
  rapidjson::Document bad;
  bad.Parse(R"({"metadata":{"namespace":"vms","name":"disk-b","uid":"u2","resourceVersion":"6"},
                "status":{"allocation":{"devices":{"results":[{"request":7}]}}}})");
  index.sink()->Replace({&good, &bad});
  std::optional<ClaimSnapshot> s = index.Snapshot();
  ASSERT_TRUE(s.has_value());
  ASSERT_EQ(s->claims.size(), 1u);
  EXPECT_EQ(s->claims[0].uid, "u1");
  EXPECT_TRUE(AllocatesDevice(s->claims[0], "nvme.pdc.kubevirt.io", "node-1", "s1"));
  EXPECT_FALSE(AllocatesDevice(s->claims[0], "nvme.pdc.kubevirt.io", "node-2", "s1"));
  EXPECT_EQ(s->unreadable, std::set<std::string>{"vms/disk-b"});
}

}  // namespace
}  // namespace pdc::driver::dra
