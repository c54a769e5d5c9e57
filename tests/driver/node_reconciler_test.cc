#include "driver/node_reconciler.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/driver/fake_nvme_admin.h"
#include "tests/driver/fake_nvme_vfio.h"
#include "tests/driver/test_util.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/status_matchers.h"

namespace pdc::driver {
namespace {

using pdc::testing::StatusIs;
using testing::Addr;
using testing::FakeHost;
using testing::FakeNamespace;
using testing::NvmeClass;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// An in-memory pdc-extender: records inventories, answers allocations.
// Not thread-safe: a test that runs the loop on a thread reads it only after
// joining that thread.
class FakeExtender : public ExtenderApi {
 public:
  absl::StatusOr<uint64_t> PutInventory(const NodeInventory& inventory) override {
    ++calls;
    if (on_call) on_call();
    if (down) return absl::UnavailableError("cannot reach pdc-extender: Connection refused");
    inventories.push_back(inventory);
    return allocations.version;
  }
  absl::StatusOr<NodeAllocations> GetAllocations(std::string_view node, uint64_t since,
                                                 absl::Duration wait) override {
    ++calls;
    if (on_call) on_call();
    if (down) return absl::UnavailableError("cannot reach pdc-extender: Connection refused");
    polls.push_back({since, wait});
    return allocations;
  }

  bool down = false;
  NodeAllocations allocations;
  std::vector<NodeInventory> inventories;
  std::vector<std::pair<uint64_t, absl::Duration>> polls;
  int calls = 0;  // Both methods, up or down.
  // Run at the start of every call, on the caller's thread.
  std::function<void()> on_call;
};

// Runs reconciler.Run(stop) on a thread of its own and joins it once Run
// returns. A Run that ignores `stop` never returns and cannot be
// interrupted, so waiting for it is the one place these tests use wall-clock
// time: after kRunDeadline the test fails and ends the process at once,
// instead of hanging until ctest's timeout.
constexpr absl::Duration kRunDeadline = absl::Seconds(20);

void RunUntilItReturns(Reconciler& reconciler, absl::Notification* stop) {
  absl::Notification returned;
  std::thread loop([&] {
    reconciler.Run(stop);
    returned.Notify();
  });
  if (!returned.WaitForNotificationWithTimeout(kRunDeadline)) {
    ADD_FAILURE() << "Reconciler::Run did not return within " << kRunDeadline
                  << " of its stop notification";
    std::fflush(nullptr);
    std::_Exit(1);
  }
  loop.join();
}

class ReconcilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host_.kernel.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme", .serial = "disk-a"});
    host_.kernel.AddDevice({.address = "0000:00:04.0", .group = 4, .driver = "nvme", .serial = "disk-b"});
    OpenJournalAndBinder(kBoot);
    metrics_ = std::make_unique<NodeMetrics>(&registry_);
    // nvme0 is 03.0, nvme1 is 04.0 (the fake kernel numbers them in order).
    admin_.controllers["nvme0"].namespaces[1] = FakeNamespace{};
    admin_.controllers["nvme0"].serial = "disk-a";
    admin_.controllers["nvme1"].namespaces[1] = FakeNamespace{};
    admin_.controllers["nvme1"].serial = "disk-b";
    reconciler_ = NewReconciler();
    ASSERT_OK(reconciler_->Start());
  }

  static constexpr char kBoot[] = "boot-1";

  // The journal read from disk (as pdc-node's start does, in `boot`) and a
  // binder over it: what a restart or a reboot of the node driver sees.
  void OpenJournalAndBinder(const std::string& boot) {
    auto j = BindJournal::Open(host_.tmp.Join("journal"), boot);
    ASSERT_OK(j.status());
    journal_ = std::move(*j);
    BinderOptions bo;
    bo.classes = {NvmeClass()};
    bo.verify_attempts = 2;
    bo.clock = &binder_clock_;
    binder_ = std::make_unique<VfioBinder>(&host_.kernel, &host_.dev, &host_.proc, journal_.get(), bo);
  }

  ReconcilerOptions Options() {
    ReconcilerOptions ro;
    ro.node = "node-a";
    ro.classes = {NvmeClass()};
    ro.heartbeat = absl::Seconds(10);
    ro.nvme_admin = &admin_;
    return ro;
  }

  std::unique_ptr<Reconciler> NewReconciler() {
    return std::make_unique<Reconciler>(&host_.kernel, binder_.get(), journal_.get(), &api_,
                                        metrics_.get(), &clock_, Options());
  }

  void Claim(std::vector<std::string> addresses, uint64_t version) {
    api_.allocations.version = version;
    api_.allocations.claimed.clear();
    for (const std::string& a : addresses) {
      api_.allocations.claimed.push_back({Addr(a), ClaimKey{"default", "vm1-nvme"},
                                          "devices.kubevirt.io/nvme", ReclaimPolicy::kDelete,
                                          Reservation{"vm1", "virt-launcher-vm1", "uid-1"}});
    }
  }

  std::string Driver(const std::string& a) {
    auto d = LinkName(host_.kernel, "bus/pci/devices/" + a + "/driver");
    return d.ok() ? *d : "";
  }

  bool Rendered(const std::string& line) {
    return registry_.Render().find(line + "\n") != std::string::npos;
  }

  FakeHost host_;
  pdc::testing::FakeClock clock_;
  pdc::testing::FakeClock binder_clock_;  // The binder's waits; apart from clock_.
  FakeExtender api_;
  testing::FakeNvmeAdmin admin_;
  MetricsRegistry registry_;
  std::unique_ptr<NodeMetrics> metrics_;
  std::unique_ptr<BindJournal> journal_;
  std::unique_ptr<VfioBinder> binder_;
  std::unique_ptr<Reconciler> reconciler_;
};

// The device plugin's view: every discovered inventory and every
// allocations answer, from the loop thread.
TEST_F(ReconcilerTest, HooksSeeEveryInventoryAndAllocationsAnswer) {
  std::vector<NodeInventory> inventories;
  std::vector<uint64_t> versions;
  ReconcilerOptions ro;
  ro.node = "node-a";
  ro.classes = {NvmeClass()};
  ro.on_inventory = [&](const NodeInventory& i) { inventories.push_back(i); };
  ro.on_allocations = [&](const NodeAllocations& a) { versions.push_back(a.version); };
  Reconciler r(&host_.kernel, binder_.get(), journal_.get(), &api_, nullptr, &clock_, ro);
  Claim({"0000:00:03.0"}, 7);
  ASSERT_OK(r.RunOnce(absl::ZeroDuration()).status());
  EXPECT_THAT(versions, ElementsAre(7u));
  // Before the bind and after it (the pass discovers again).
  ASSERT_EQ(inventories.size(), 2u);
  EXPECT_EQ(inventories[0].devices[0].driver, "nvme");
  EXPECT_EQ(inventories[1].devices[0].driver, "vfio-pci");
  EXPECT_EQ(inventories[1].devices[0].health, DeviceHealth::kHealthy);
}

// A class in `dra` mode belongs to pdc-node's DRA driver: its devices are
// discovered (the driver publishes them as ResourceSlices) but never offered
// to pdc-extender, which would hand them out a second time.
TEST_F(ReconcilerTest, DevicesOfAnUnreportedClassReachTheHookButNotTheExtender) {
  std::vector<NodeInventory> seen;
  ReconcilerOptions ro = Options();
  ro.unreported_resources = {NvmeClass().resource_name};
  ro.on_inventory = [&](const NodeInventory& i) { seen.push_back(i); };
  Reconciler r(&host_.kernel, binder_.get(), journal_.get(), &api_, nullptr, &clock_, ro);
  api_.inventories.clear();
  ASSERT_OK(r.RunOnce(absl::ZeroDuration()).status());
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back().devices.size(), 2u);
  ASSERT_FALSE(api_.inventories.empty());
  EXPECT_THAT(api_.inventories.back().devices, IsEmpty());
  EXPECT_EQ(api_.inventories.back().node, "node-a");
}

TEST_F(ReconcilerTest, ReportsThenBindsClaimedDevicesAndReportsAgain) {
  Claim({"0000:00:03.0"}, 5);
  ASSERT_OK_AND_ASSIGN(PassResult r, reconciler_->RunOnce(absl::Seconds(10)));
  EXPECT_EQ(r.bound, 1);
  EXPECT_TRUE(r.reported);
  EXPECT_THAT(r.errors, IsEmpty());
  EXPECT_EQ(Driver("0000:00:03.0"), "vfio-pci");
  EXPECT_EQ(Driver("0000:00:04.0"), "nvme");
  ASSERT_EQ(api_.inventories.size(), 2u);
  EXPECT_EQ(api_.inventories[0].node, "node-a");
  EXPECT_EQ(api_.inventories[0].devices[0].driver, "nvme");
  const Device& after = api_.inventories[1].devices[0];
  EXPECT_EQ(after.driver, "vfio-pci");
  EXPECT_EQ(after.serial, "disk-a");  // From the journal: sysfs has none now.
  EXPECT_EQ(after.health, DeviceHealth::kHealthy);
  ASSERT_EQ(api_.polls.size(), 1u);
  EXPECT_EQ(api_.polls[0].first, 0u);
  EXPECT_EQ(api_.polls[0].second, absl::Seconds(10));
  EXPECT_TRUE(Rendered("pdc_node_binds_total{outcome=\"bound\"} 1"));
  EXPECT_TRUE(Rendered("pdc_node_devices{driver=\"nvme\"} 1"));
  EXPECT_TRUE(Rendered("pdc_node_devices{driver=\"vfio-pci\"} 1"));
  EXPECT_TRUE(Rendered("pdc_node_allocations_version 5"));
  EXPECT_TRUE(Rendered("pdc_node_inventory_reports_total 2"));
}

// The allocations answer is computed from the inventory reported before the
// long-poll; a drive that took the claimed address meanwhile (hot-swapped,
// or the bus renumbered) is another drive, and stays with the host until
// pdc-extender has seen it.
TEST_F(ReconcilerTest, ADriveSwappedDuringTheLongPollIsNotTakenForTheClaimedOne) {
  Claim({"0000:00:03.0"}, 5);
  api_.on_call = [&] {
    if (api_.polls.empty() && !api_.inventories.empty()) {
      std::ofstream(host_.kernel.sys_root() + "/bus/pci/devices/0000:00:03.0/nvme/nvme0/serial")
          << "disk-z    \n";
    }
  };
  ASSERT_OK_AND_ASSIGN(PassResult r, reconciler_->RunOnce(absl::Seconds(10)));
  EXPECT_EQ(r.bound, 0);
  EXPECT_EQ(Driver("0000:00:03.0"), "nvme");
  EXPECT_THAT(r.errors, ElementsAre(AllOf(HasSubstr("0000:00:03.0"), HasSubstr("disk-z"),
                                          HasSubstr("disk-a"))));
  EXPECT_TRUE(Rendered("pdc_node_bind_failures_total{operation=\"bind\",reason=\"drive_changed\"} 1"));
  // The next pass reports disk-z; an extender that still claims the address
  // after seeing it gets the drive bound.
  api_.on_call = nullptr;
  ASSERT_OK_AND_ASSIGN(r, reconciler_->RunOnce(absl::Seconds(10)));
  EXPECT_EQ(api_.inventories[1].devices[0].serial, "disk-z");
  EXPECT_EQ(r.bound, 1);
  EXPECT_EQ(Driver("0000:00:03.0"), "vfio-pci");
}

// "No serial" is not the serial reported: a drive at the claimed address
// that shows none (a controller reporting no serial, no namespace identity)
// is not taken for the claimed one.
TEST_F(ReconcilerTest, ADriveShowingNoSerialIsNotTakenForTheClaimedOne) {
  Claim({"0000:00:03.0"}, 5);
  api_.on_call = [&] {
    if (api_.polls.empty() && !api_.inventories.empty()) {
      std::ofstream(host_.kernel.sys_root() + "/bus/pci/devices/0000:00:03.0/nvme/nvme0/serial")
          << "    \n";
    }
  };
  ASSERT_OK_AND_ASSIGN(PassResult r, reconciler_->RunOnce(absl::Seconds(10)));
  EXPECT_EQ(r.bound, 0);
  EXPECT_EQ(Driver("0000:00:03.0"), "nvme");
  EXPECT_THAT(r.errors, ElementsAre(AllOf(HasSubstr("0000:00:03.0 has no serial"),
                                          HasSubstr("not the serial disk-a"))));
  EXPECT_TRUE(Rendered("pdc_node_bind_failures_total{operation=\"bind\",reason=\"drive_changed\"} 1"));
}

// A device someone bound to vfio-pci by hand (no journal entry) is reported
// unhealthy with its reason, never free, and a claim of it is not bound.
TEST_F(ReconcilerTest, ADeviceOnVfioPciPdcDidNotBindIsNeverFreeNorAdopted) {
  host_.kernel.AddDevice({.address = "0000:00:05.0", .group = 5, .driver = "vfio-pci"});
  Claim({"0000:00:05.0"}, 5);
  ASSERT_OK_AND_ASSIGN(PassResult r, reconciler_->RunOnce(absl::ZeroDuration()));
  ASSERT_EQ(api_.inventories.back().devices.size(), 3u);
  const Device& d = api_.inventories.back().devices[2];
  EXPECT_EQ(d.health, DeviceHealth::kUnhealthy);
  EXPECT_EQ(d.unhealthy_reason, UnhealthyReason::kHostInUse);
  EXPECT_THAT(r.errors, ElementsAre(HasSubstr("pdc did not bind it")));
  EXPECT_FALSE(journal_->Get(Addr("0000:00:05.0")).has_value());
  EXPECT_TRUE(Rendered(
      "pdc_node_bind_failures_total{operation=\"bind\",reason=\"not_bound_by_pdc\"} 1"));
}

TEST_F(ReconcilerTest, KeepsClaimedDevicesBoundAndReportsOnlyOnHeartbeat) {
  Claim({"0000:00:03.0"}, 5);
  ASSERT_OK(reconciler_->RunOnce(absl::ZeroDuration()));
  const size_t writes = host_.kernel.writes().size();
  ASSERT_OK_AND_ASSIGN(PassResult again, reconciler_->RunOnce(absl::ZeroDuration()));
  EXPECT_EQ(again.bound, 0);
  EXPECT_FALSE(again.reported);
  EXPECT_EQ(host_.kernel.writes().size(), writes);
  EXPECT_EQ(api_.inventories.size(), 2u);
  EXPECT_EQ(api_.polls.back().first, 5u);  // Long-polls from the last version.
  EXPECT_TRUE(Rendered("pdc_node_binds_total{outcome=\"already_bound\"} 1"));
  clock_.Advance(absl::Seconds(10));
  ASSERT_OK_AND_ASSIGN(PassResult beat, reconciler_->RunOnce(absl::ZeroDuration()));
  EXPECT_TRUE(beat.reported);
  EXPECT_EQ(api_.inventories.size(), 3u);
}

TEST_F(ReconcilerTest, RebindsADeviceTheHostTookBack) {
  Claim({"0000:00:03.0"}, 5);
  ASSERT_OK(reconciler_->RunOnce(absl::ZeroDuration()));
  // Someone hands it to nvme behind pdc's back.
  ASSERT_OK(host_.kernel.Write("bus/pci/devices/0000:00:03.0/driver_override", "\n"));
  ASSERT_OK(host_.kernel.Write("bus/pci/drivers/vfio-pci/unbind", "0000:00:03.0"));
  ASSERT_OK(host_.kernel.Write("bus/pci/drivers_probe", "0000:00:03.0"));
  ASSERT_EQ(Driver("0000:00:03.0"), "nvme");
  ASSERT_OK_AND_ASSIGN(PassResult r, reconciler_->RunOnce(absl::ZeroDuration()));
  EXPECT_EQ(r.bound, 1);
  EXPECT_EQ(Driver("0000:00:03.0"), "vfio-pci");
  // The report before the fix showed it unhealthy (not on vfio-pci).
  EXPECT_EQ(api_.inventories[api_.inventories.size() - 2].devices[0].health,
            DeviceHealth::kUnhealthy);
  EXPECT_EQ(api_.inventories.back().devices[0].health, DeviceHealth::kHealthy);
}

// The extender keeps a device it must get back on its return list while the
// node does not have it (it holds a deleted claim's data): nothing to do
// here until it appears, and no error every pass.
TEST_F(ReconcilerTest, AReturnOfADeviceNotPresentWaitsQuietly) {
  api_.allocations.return_to_host = {Addr("0000:00:1f.0")};
  for (int i = 0; i < 2; ++i) {
    ASSERT_OK_AND_ASSIGN(PassResult r, reconciler_->RunOnce(absl::ZeroDuration()));
    EXPECT_EQ(r.restored, 0);
    EXPECT_THAT(r.errors, IsEmpty());
  }
  EXPECT_FALSE(Rendered("pdc_node_bind_failures_total{operation=\"restore\"} 1"));
}

TEST_F(ReconcilerTest, ReturnToHostRestoresAndRetainKeeps) {
  Claim({"0000:00:03.0", "0000:00:04.0"}, 5);
  ASSERT_OK_AND_ASSIGN(PassResult first, reconciler_->RunOnce(absl::ZeroDuration()));
  EXPECT_EQ(first.bound, 2);
  // Claim of 03.0 deleted with Delete, claim of 04.0 deleted with Retain.
  Claim({}, 6);
  api_.allocations.return_to_host = {Addr("0000:00:03.0")};
  ASSERT_OK_AND_ASSIGN(PassResult r, reconciler_->RunOnce(absl::ZeroDuration()));
  EXPECT_EQ(r.restored, 1);
  EXPECT_EQ(r.erased, 1);
  EXPECT_TRUE(r.reported);
  EXPECT_THAT(r.errors, IsEmpty());
  EXPECT_EQ(Driver("0000:00:03.0"), "nvme");
  EXPECT_EQ(Driver("0000:00:04.0"), "vfio-pci");
  // Erased on nvme0, namespace 1, with a user data erase; 04.0 untouched.
  auto formats = admin_.Formats();
  ASSERT_EQ(formats.size(), 1u);
  EXPECT_EQ(formats[0].controller, "nvme0");
  EXPECT_EQ(formats[0].nsid, 1u);
  EXPECT_EQ((formats[0].cdw10 >> 9) & 0x7, 1u);
  EXPECT_FALSE(admin_.controllers["nvme0"].namespaces[1].has_data);
  EXPECT_TRUE(admin_.controllers["nvme1"].namespaces[1].has_data);
  // The erase of drive disk-a is acknowledged to the extender, which frees
  // the device only then; the entry stays until it no longer lists it.
  ASSERT_TRUE(journal_->Get(Addr("0000:00:03.0")));
  EXPECT_EQ(journal_->Get(Addr("0000:00:03.0"))->state, JournalState::kReturned);
  EXPECT_THAT(api_.inventories.back().returned, ElementsAre("disk-a"));
  EXPECT_EQ(api_.inventories.back().devices[0].driver, "nvme");
  EXPECT_EQ(api_.inventories.back().devices[0].health, DeviceHealth::kHealthy);
  EXPECT_EQ(api_.inventories.back().devices[1].driver, "vfio-pci");
  EXPECT_TRUE(Rendered("pdc_node_restores_total{outcome=\"restored\"} 1"));
  EXPECT_TRUE(Rendered("pdc_node_erases_total{outcome=\"erased\"} 1"));
  EXPECT_TRUE(Rendered("pdc_node_erases_pending 0"));
  // The extender still lists it until it saw the report: nothing again.
  ASSERT_OK_AND_ASSIGN(PassResult again, reconciler_->RunOnce(absl::ZeroDuration()));
  EXPECT_EQ(again.restored, 0);
  EXPECT_EQ(admin_.Formats().size(), 1u);
  EXPECT_THAT(api_.inventories.back().returned, ElementsAre("disk-a"));
  // Dropped from the list: the acknowledgement goes.
  api_.allocations.return_to_host.clear();
  ASSERT_OK(reconciler_->RunOnce(absl::ZeroDuration()));
  EXPECT_FALSE(journal_->Get(Addr("0000:00:03.0")));
  ASSERT_OK(reconciler_->RunOnce(absl::ZeroDuration()));
  EXPECT_THAT(api_.inventories.back().returned, IsEmpty());
}

// With a VFIO opener the erase runs on vfio-pci: the kernel driver's
// passthrough is never used. A hand-back to nvme that failed after the
// erase was recorded is retried by the next pass, not the erase.
TEST_F(ReconcilerTest, ErasesOnVfioPciAndRetriesAFailedHandBack) {
  testing::FakeVfioOpener vfio;
  vfio.clock = &binder_clock_;
  vfio.state.serial = "disk-a";
  ReconcilerOptions ro = Options();
  ro.erase.vfio = &vfio;
  reconciler_ = std::make_unique<Reconciler>(&host_.kernel, binder_.get(), journal_.get(), &api_,
                                             metrics_.get(), &clock_, ro);
  ASSERT_OK(reconciler_->Start());
  Claim({"0000:00:03.0"}, 5);
  ASSERT_OK(reconciler_->RunOnce(absl::ZeroDuration()));
  ASSERT_EQ(Driver("0000:00:03.0"), "vfio-pci");
  Claim({}, 6);
  api_.allocations.return_to_host = {Addr("0000:00:03.0")};
  host_.kernel.FailWrite("drivers/vfio-pci/unbind");
  ASSERT_OK_AND_ASSIGN(PassResult r, reconciler_->RunOnce(absl::ZeroDuration()));
  EXPECT_EQ(r.erased, 1);
  EXPECT_EQ(vfio.state.formats, 1);
  EXPECT_THAT(admin_.Formats(), IsEmpty());
  EXPECT_TRUE(admin_.controllers["nvme0"].namespaces[1].has_data);  // Never reached.
  EXPECT_EQ(Driver("0000:00:03.0"), "vfio-pci");
  EXPECT_EQ(journal_->Get(Addr("0000:00:03.0"))->state, JournalState::kReturned);
  EXPECT_TRUE(Rendered("pdc_node_erases_total{outcome=\"erased\"} 1"));
  ASSERT_OK_AND_ASSIGN(PassResult again, reconciler_->RunOnce(absl::ZeroDuration()));
  EXPECT_THAT(again.errors, IsEmpty());
  EXPECT_EQ(Driver("0000:00:03.0"), "nvme");
  EXPECT_EQ(vfio.state.formats, 1);  // Not erased again.
  EXPECT_EQ(vfio.opens, 1);
  EXPECT_THAT(api_.inventories.back().returned, ElementsAre("disk-a"));
}

// A failed erase: the device is back on vfio-pci (the host's block layer
// never keeps the guest's data; on a version that left it on nvme this
// fails), unhealthy, the error is counted, and the erase is retried after
// the backoff, not before.
TEST_F(ReconcilerTest, FailedEraseKeepsTheDeviceUnhealthyAndIsRetriedWithBackoff) {
  Claim({"0000:00:03.0"}, 5);
  ASSERT_OK(reconciler_->RunOnce(absl::ZeroDuration()));
  Claim({}, 6);
  api_.allocations.return_to_host = {Addr("0000:00:03.0")};
  admin_.format_status = 0x410A;  // Invalid Format, do not retry.
  ASSERT_OK_AND_ASSIGN(PassResult r, reconciler_->RunOnce(absl::ZeroDuration()));
  EXPECT_EQ(r.restored, 0);
  EXPECT_EQ(r.erased, 0);
  EXPECT_THAT(r.errors, ElementsAre(AllOf(HasSubstr("0000:00:03.0: erasing NVMe controller nvme0"),
                                          HasSubstr("namespace 1 failed"),
                                          HasSubstr("Invalid Format (SCT 1h SC 0Ah"))));
  EXPECT_EQ(Driver("0000:00:03.0"), "vfio-pci");
  ASSERT_TRUE(journal_->Get(Addr("0000:00:03.0")));
  EXPECT_EQ(journal_->Get(Addr("0000:00:03.0"))->state, JournalState::kErasing);
  EXPECT_TRUE(Rendered("pdc_node_erases_total{outcome=\"failed\"} 1"));
  EXPECT_TRUE(Rendered(
      "pdc_node_bind_failures_total{operation=\"erase\",reason=\"erase_nvme_status\"} 1"));
  EXPECT_TRUE(Rendered("pdc_node_erases_pending 1"));

  // Next pass: reported on vfio-pci, unhealthy; no new attempt within the backoff.
  const size_t reports = api_.inventories.size();
  ASSERT_OK_AND_ASSIGN(PassResult wait, reconciler_->RunOnce(absl::ZeroDuration()));
  EXPECT_EQ(api_.inventories.size(), reports + 1);
  EXPECT_EQ(api_.inventories.back().devices[0].driver, "vfio-pci");
  EXPECT_EQ(api_.inventories.back().devices[0].health, DeviceHealth::kUnhealthy);
  EXPECT_THAT(wait.errors, ElementsAre(HasSubstr("erase pending, retried in 10s")));
  EXPECT_EQ(admin_.Formats().size(), 1u);
  // A claim on it meanwhile is refused: it may hold the previous VM's data.
  Claim({"0000:00:03.0"}, 7);
  ASSERT_OK_AND_ASSIGN(PassResult claimed, reconciler_->RunOnce(absl::ZeroDuration()));
  EXPECT_THAT(claimed.errors, Contains(HasSubstr("its erase is pending")));
  EXPECT_EQ(Driver("0000:00:03.0"), "vfio-pci");
  Claim({}, 8);

  // After the backoff it fails again (backoff doubles), then succeeds.
  clock_.Advance(absl::Seconds(10));
  ASSERT_OK_AND_ASSIGN(PassResult second, reconciler_->RunOnce(absl::ZeroDuration()));
  EXPECT_EQ(admin_.Formats().size(), 2u);
  EXPECT_THAT(second.errors, ElementsAre(HasSubstr("Invalid Format")));
  clock_.Advance(absl::Seconds(10));
  ASSERT_OK_AND_ASSIGN(PassResult early, reconciler_->RunOnce(absl::ZeroDuration()));
  EXPECT_EQ(admin_.Formats().size(), 2u);
  EXPECT_THAT(early.errors, ElementsAre(HasSubstr("retried in 10s")));
  admin_.format_status.reset();
  clock_.Advance(absl::Seconds(10));
  ASSERT_OK_AND_ASSIGN(PassResult done, reconciler_->RunOnce(absl::ZeroDuration()));
  EXPECT_EQ(done.erased, 1);
  EXPECT_THAT(done.errors, IsEmpty());
  EXPECT_FALSE(admin_.controllers["nvme0"].namespaces[1].has_data);
  EXPECT_EQ(api_.inventories.back().devices[0].health, DeviceHealth::kHealthy);
  EXPECT_TRUE(Rendered("pdc_node_erases_total{outcome=\"erased\"} 1"));
  EXPECT_TRUE(Rendered("pdc_node_erases_total{outcome=\"failed\"} 2"));
}

// The controller reports other firmware at the erase than when it was bound
// (its sysfs firmware_rev, journaled at bind): held unerased on vfio-pci,
// logged and counted; an administrator who accepts the new firmware sets
// node.firmwareChange: report, and the next pdc-node erases it and counts
// the change as reported. Fails on a version that erases without comparing.
TEST_F(ReconcilerTest, AFirmwareChangeWhileClaimedIsHeldThenReportedWhenAccepted) {
  Claim({"0000:00:03.0"}, 5);
  ASSERT_OK(reconciler_->RunOnce(absl::ZeroDuration()));
  ASSERT_TRUE(journal_->Get(Addr("0000:00:03.0")));
  EXPECT_EQ(journal_->Get(Addr("0000:00:03.0"))->firmware, "fr=1.0");
  admin_.controllers["nvme0"].firmware_rev = "6.6";  // The guest's doing.
  Claim({}, 6);
  api_.allocations.return_to_host = {Addr("0000:00:03.0")};
  ASSERT_OK_AND_ASSIGN(PassResult held, reconciler_->RunOnce(absl::ZeroDuration()));
  EXPECT_EQ(held.erased, 0);
  EXPECT_THAT(held.errors, ElementsAre(AllOf(HasSubstr("firmware changed while it was claimed"),
                                             HasSubstr("\"1.0\" -> \"6.6\""))));
  EXPECT_EQ(Driver("0000:00:03.0"), "vfio-pci");
  EXPECT_EQ(journal_->Get(Addr("0000:00:03.0"))->state, JournalState::kErasing);
  EXPECT_TRUE(admin_.controllers["nvme0"].namespaces[1].has_data);
  EXPECT_THAT(admin_.Formats(), IsEmpty());
  EXPECT_TRUE(Rendered("pdc_node_firmware_changes_total{action=\"held\"} 1"));
  EXPECT_TRUE(Rendered(
      "pdc_node_bind_failures_total{operation=\"erase\",reason=\"firmware_changed\"} 1"));
  ASSERT_OK(reconciler_->RunOnce(absl::ZeroDuration()));
  EXPECT_EQ(api_.inventories.back().devices[0].health, DeviceHealth::kUnhealthy);
  EXPECT_EQ(api_.inventories.back().devices[0].unhealthy_reason, UnhealthyReason::kErasing);

  ReconcilerOptions accept = Options();
  accept.erase.erase.hold_on_firmware_change = false;
  reconciler_ = std::make_unique<Reconciler>(&host_.kernel, binder_.get(), journal_.get(), &api_,
                                             metrics_.get(), &clock_, accept);
  ASSERT_OK(reconciler_->Start());
  ASSERT_OK_AND_ASSIGN(PassResult done, reconciler_->RunOnce(absl::ZeroDuration()));
  EXPECT_EQ(done.erased, 1);
  EXPECT_FALSE(admin_.controllers["nvme0"].namespaces[1].has_data);
  EXPECT_EQ(Driver("0000:00:03.0"), "nvme");
  EXPECT_TRUE(Rendered("pdc_node_firmware_changes_total{action=\"reported\"} 1"));
  EXPECT_TRUE(Rendered("pdc_node_firmware_changes_total{action=\"held\"} 1"));
}

// A crash after the erase was journaled: a new process reports the device
// unhealthy at once and finishes the erase before reporting it healthy,
// whether or not the extender still lists it.
TEST_F(ReconcilerTest, RestartResumesAJournaledEraseBeforeReportingTheDeviceHealthy) {
  struct Case {
    const char* name;
    bool crashed_after_unbind;
  } cases[] = {{"still on vfio-pci", false}, {"already on nvme", true}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Claim({"0000:00:03.0"}, 5);
    ASSERT_OK(reconciler_->RunOnce(absl::ZeroDuration()));
    ASSERT_EQ(Driver("0000:00:03.0"), "vfio-pci");
    ASSERT_OK(binder_->MarkErasePending(Addr("0000:00:03.0")));
    if (c.crashed_after_unbind) {
      ASSERT_OK(binder_->GiveBackForErase(Addr("0000:00:03.0")));
    }
    admin_.controllers["nvme0"].namespaces[1].has_data = true;

    // The restart: journal read from disk, new binder, new reconciler.
    OpenJournalAndBinder(kBoot);
    reconciler_ = NewReconciler();  // The old one's journal and binder are gone.
    std::vector<NodeInventory> seen;
    ReconcilerOptions ro = Options();
    ro.on_inventory = [&](const NodeInventory& i) { seen.push_back(i); };
    Reconciler restarted(&host_.kernel, binder_.get(), journal_.get(), &api_, metrics_.get(),
                         &clock_, ro);
    ASSERT_OK(restarted.Start());
    Claim({}, 6);  // The extender dropped it already.
    ASSERT_OK_AND_ASSIGN(PassResult r, restarted.RunOnce(absl::ZeroDuration()));
    EXPECT_EQ(r.erased, 1);
    ASSERT_EQ(seen.size(), 2u);
    EXPECT_EQ(seen[0].devices[0].health, DeviceHealth::kUnhealthy);  // Before the erase.
    EXPECT_EQ(seen[0].devices[0].unhealthy_reason, UnhealthyReason::kErasing);
    EXPECT_EQ(seen[1].devices[0].health, DeviceHealth::kHealthy);
    EXPECT_EQ(seen[1].devices[0].driver, "nvme");
    EXPECT_FALSE(admin_.controllers["nvme0"].namespaces[1].has_data);
    EXPECT_EQ(journal_->Get(Addr("0000:00:03.0"))->state, JournalState::kReturned);
    ASSERT_OK(restarted.RunOnce(absl::ZeroDuration()));  // Not listed: acknowledged.
    EXPECT_FALSE(journal_->Get(Addr("0000:00:03.0")));
  }
}

// While a format runs the loop does no pass; it counts as progress, the
// device's journal entry says erasing, and nothing reports it healthy.
TEST_F(ReconcilerTest, UnhealthyWhileErasingAndTheLoopStaysHealthy) {
  Claim({"0000:00:03.0"}, 5);
  ASSERT_OK(reconciler_->RunOnce(absl::ZeroDuration()));
  Claim({}, 6);
  api_.allocations.return_to_host = {Addr("0000:00:03.0")};
  const size_t reports = api_.inventories.size();
  bool checked = false;
  admin_.on_command = [&](const testing::RecordedCommand& c) {
    if (c.opcode != kNvmeAdminFormatNvm) return;
    clock_.Advance(absl::Minutes(20));  // A long format.
    EXPECT_TRUE(reconciler_->Healthy());
    auto e = journal_->Get(Addr("0000:00:03.0"));
    EXPECT_TRUE(e && e->state == JournalState::kErasing);
    EXPECT_EQ(api_.inventories.size(), reports);  // Nothing reported mid-erase.
    checked = true;
  };
  ASSERT_OK_AND_ASSIGN(PassResult r, reconciler_->RunOnce(absl::ZeroDuration()));
  EXPECT_TRUE(checked);
  EXPECT_EQ(r.erased, 1);
  EXPECT_TRUE(reconciler_->Healthy());  // The pass just ended.
}

// The hand-back to nvme before the erase is a restore: its failure counts
// as one, and the erase stays pending.
TEST_F(ReconcilerTest, AFailedHandBackBeforeTheEraseIsARestoreFailure) {
  Claim({"0000:00:03.0"}, 5);
  ASSERT_OK(reconciler_->RunOnce(absl::ZeroDuration()));
  host_.kernel.FailProbe("0000:00:03.0", "nvme");
  Claim({}, 6);
  api_.allocations.return_to_host = {Addr("0000:00:03.0")};
  ASSERT_OK_AND_ASSIGN(PassResult r, reconciler_->RunOnce(absl::ZeroDuration()));
  EXPECT_THAT(r.errors, ElementsAre(HasSubstr("giving 0000:00:03.0 back to nvme failed")));
  EXPECT_TRUE(Rendered(
      "pdc_node_bind_failures_total{operation=\"restore\",reason=\"restore_failed\"} 1"));
  EXPECT_TRUE(Rendered("pdc_node_erases_total{outcome=\"failed\"} 1"));
  EXPECT_THAT(admin_.commands, IsEmpty());
  ASSERT_TRUE(journal_->Get(Addr("0000:00:03.0")));
  EXPECT_EQ(journal_->Get(Addr("0000:00:03.0"))->state, JournalState::kErasing);
}

// The extender lists devices pdc-node has no record of (a lost journal, a
// manual rebind, a reboot that put them on a host driver): they held a
// deleted claim's data, but which drive that was is unknown, so nothing is
// erased and they are held, unhealthy, never acknowledged. Fails on a
// version that took them for "already restored".
TEST_F(ReconcilerTest, AReturnPdcHasNoRecordOfIsHeldNotErasedNorAcknowledged) {
  host_.kernel.AddDevice({.address = "0000:00:05.0", .group = 5, .driver = "", .serial = "c"});
  Claim({}, 5);
  api_.allocations.return_to_host = {Addr("0000:00:04.0"), Addr("0000:00:05.0")};
  ASSERT_OK_AND_ASSIGN(PassResult r, reconciler_->RunOnce(absl::ZeroDuration()));
  EXPECT_THAT(r.errors, ElementsAre(HasSubstr("the journal names no drive"),
                                    HasSubstr("the journal names no drive")));
  EXPECT_EQ(r.erased, 0);
  EXPECT_THAT(admin_.commands, IsEmpty());
  ASSERT_EQ(journal_->Entries().size(), 2u);
  EXPECT_TRUE(Rendered(
      "pdc_node_bind_failures_total{operation=\"erase\",reason=\"erase_identity_unknown\"} 2"));
  ASSERT_OK(reconciler_->RunOnce(absl::ZeroDuration()));
  EXPECT_THAT(api_.inventories.back().returned, IsEmpty());
  for (const Device& d : api_.inventories.back().devices) {
    if (d.address == Addr("0000:00:03.0")) continue;
    EXPECT_EQ(d.unhealthy_reason, UnhealthyReason::kErasing) << d.address.ToString();
  }
}

// A renumbering at reboot while an erase is pending: the claimed drive
// (disk-a, journaled at 04.0) came up at 03.0 and another drive (disk-b)
// at 04.0. Only disk-a is erased, at its new address; disk-b is never sent
// a command, and is acknowledged (nothing of the claim on it). Until the
// erase, disk-a is not offered anywhere and a bind of it is refused. Fails
// on a version that erased whatever was at the journaled address.
TEST_F(ReconcilerTest, ARenumberingWhileAnEraseIsPendingErasesOnlyTheClaimedDrive) {
  ASSERT_OK(journal_->Put(
      JournalEntry{Addr("0000:00:04.0"), JournalState::kErasing, "nvme", "disk-a"}));
  api_.allocations.return_to_host = {Addr("0000:00:04.0")};
  std::vector<NodeInventory> seen;
  ReconcilerOptions ro = Options();
  ro.on_inventory = [&](const NodeInventory& i) { seen.push_back(i); };
  Reconciler r(&host_.kernel, binder_.get(), journal_.get(), &api_, metrics_.get(), &clock_, ro);
  // The first report, before anything ran: disk-a is held at its new address.
  EXPECT_EQ(FailureReason(binder_->Bind({Addr("0000:00:03.0")}).status()), kReasonErasePending);
  ASSERT_OK_AND_ASSIGN(PassResult pass, r.RunOnce(absl::ZeroDuration()));
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen[0].devices[0].unhealthy_reason, UnhealthyReason::kErasing);  // disk-a
  EXPECT_EQ(pass.erased, 1);
  EXPECT_FALSE(admin_.controllers["nvme0"].namespaces[1].has_data);  // disk-a, 03.0
  EXPECT_TRUE(admin_.controllers["nvme1"].namespaces[1].has_data);   // disk-b, 04.0
  for (const auto& c : admin_.commands) EXPECT_EQ(c.controller, "nvme0");
  EXPECT_EQ(Driver("0000:00:04.0"), "nvme");
  ASSERT_OK(r.RunOnce(absl::ZeroDuration()));
  EXPECT_THAT(api_.inventories.back().returned, ElementsAre("disk-a", "disk-b"));
  for (const Device& d : api_.inventories.back().devices) {
    EXPECT_EQ(d.health, DeviceHealth::kHealthy) << d.address.ToString();
  }
}

// Without an admin channel an NVMe is never reported free.
TEST_F(ReconcilerTest, NoAdminChannelMeansNoErasedDevice) {
  ReconcilerOptions ro = Options();
  ro.nvme_admin = nullptr;
  Reconciler r(&host_.kernel, binder_.get(), journal_.get(), &api_, metrics_.get(), &clock_, ro);
  Claim({"0000:00:03.0"}, 5);
  ASSERT_OK(r.RunOnce(absl::ZeroDuration()));
  Claim({}, 6);
  api_.allocations.return_to_host = {Addr("0000:00:03.0")};
  ASSERT_OK_AND_ASSIGN(PassResult pass, r.RunOnce(absl::ZeroDuration()));
  EXPECT_THAT(pass.errors, ElementsAre(HasSubstr("no NVMe admin channel")));
  ASSERT_OK_AND_ASSIGN(PassResult next, r.RunOnce(absl::ZeroDuration()));
  EXPECT_EQ(api_.inventories.back().devices[0].health, DeviceHealth::kUnhealthy);
}

// A class pdc cannot erase goes back unerased, and says so in a metric.
TEST_F(ReconcilerTest, OtherClassesGoBackUnerasedAndAreCounted) {
  host_.kernel.AddDriver({"nvidia", {{0x10de, 0x1eb8}}, std::nullopt});
  host_.kernel.AddDevice({.address = "0000:05:00.0", .vendor = 0x10de, .device = 0x1eb8,
                          .class_code = 0x030200, .group = 12, .driver = "nvidia"});
  const DeviceClass gpu{"example.com/gpu", {{0x10de, 0x1eb8, std::nullopt}}, {"nvidia"}};
  BinderOptions bo;
  bo.classes = {NvmeClass(), gpu};
  bo.verify_attempts = 2;
  bo.clock = &binder_clock_;
  VfioBinder binder(&host_.kernel, &host_.dev, &host_.proc, journal_.get(), bo);
  ReconcilerOptions ro = Options();
  ro.classes = {NvmeClass(), gpu};
  Reconciler r(&host_.kernel, &binder, journal_.get(), &api_, metrics_.get(), &clock_, ro);
  Claim({"0000:05:00.0"}, 5);
  ASSERT_OK_AND_ASSIGN(PassResult bound, r.RunOnce(absl::ZeroDuration()));
  ASSERT_EQ(bound.bound, 1) << (bound.errors.empty() ? "" : bound.errors[0]);
  Claim({}, 6);
  api_.allocations.return_to_host = {Addr("0000:05:00.0")};
  ASSERT_OK_AND_ASSIGN(PassResult back, r.RunOnce(absl::ZeroDuration()));
  EXPECT_EQ(back.restored, 1);
  EXPECT_EQ(back.erased, 0);
  EXPECT_EQ(Driver("0000:05:00.0"), "nvidia");
  EXPECT_THAT(admin_.commands, IsEmpty());
  EXPECT_TRUE(Rendered("pdc_node_erases_total{outcome=\"not_supported\"} 1"));
  // Acknowledged by address (it has no serial) until the extender drops it.
  ASSERT_OK(r.RunOnce(absl::ZeroDuration()));
  EXPECT_THAT(api_.inventories.back().returned, ElementsAre("0000:05:00.0"));
  EXPECT_EQ(Driver("0000:05:00.0"), "nvidia");
}

TEST_F(ReconcilerTest, ClaimedWinsOverAStaleReturnToHost) {
  Claim({"0000:00:03.0"}, 7);
  api_.allocations.return_to_host = {Addr("0000:00:03.0")};
  ASSERT_OK_AND_ASSIGN(PassResult r, reconciler_->RunOnce(absl::ZeroDuration()));
  EXPECT_EQ(r.restored, 0);
  EXPECT_EQ(Driver("0000:00:03.0"), "vfio-pci");
}

TEST_F(ReconcilerTest, ExtenderDownLeavesDevicesAndCatchesUp) {
  Claim({"0000:00:03.0"}, 5);
  ASSERT_OK(reconciler_->RunOnce(absl::ZeroDuration()));
  api_.down = true;
  clock_.Advance(absl::Seconds(30));  // Heartbeat due: the PUT fails.
  EXPECT_THAT(reconciler_->RunOnce(absl::ZeroDuration()), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(Driver("0000:00:03.0"), "vfio-pci");
  EXPECT_TRUE(Rendered("pdc_node_extender_errors_total{operation=\"inventory\"} 1"));
  api_.down = false;
  Claim({}, 8);
  api_.allocations.return_to_host = {Addr("0000:00:03.0")};
  ASSERT_OK_AND_ASSIGN(PassResult r, reconciler_->RunOnce(absl::ZeroDuration()));
  EXPECT_EQ(r.restored, 1);
  EXPECT_EQ(Driver("0000:00:03.0"), "nvme");
}

// pdc-extender answered again after a failure: it may be a new leader (or a
// restarted process) that knows this node only from the claims, so it gets
// the inventory at once, unchanged and before the heartbeat is due, and is
// asked for its allocations from the start (its versions are its own).
TEST_F(ReconcilerTest, AfterAFailedPassTheInventoryIsResentAtOnceAndPollsStartOver) {
  Claim({"0000:00:03.0"}, 50);
  ASSERT_OK(reconciler_->RunOnce(absl::ZeroDuration()));
  ASSERT_OK(reconciler_->RunOnce(absl::ZeroDuration()));
  const size_t reported = api_.inventories.size();
  EXPECT_EQ(api_.polls.back().first, 50u);
  api_.down = true;
  EXPECT_FALSE(reconciler_->RunOnce(absl::ZeroDuration()).ok());
  api_.down = false;
  Claim({"0000:00:03.0"}, 3);  // The new leader's own version.
  ASSERT_OK_AND_ASSIGN(PassResult r, reconciler_->RunOnce(absl::ZeroDuration()));
  EXPECT_TRUE(r.reported);
  EXPECT_EQ(api_.inventories.size(), reported + 1);
  EXPECT_EQ(api_.polls.back().first, 0u);
  // Then back to the heartbeat and the last version.
  ASSERT_OK_AND_ASSIGN(PassResult quiet, reconciler_->RunOnce(absl::ZeroDuration()));
  EXPECT_FALSE(quiet.reported);
  EXPECT_EQ(api_.polls.back().first, 3u);
}

TEST_F(ReconcilerTest, RefusalsAreCountedByReasonAndRetried) {
  host_.kernel.AddMount(host_.kernel.BlockDev("nvme0n1"), "/", "/dev/nvme0n1");
  Claim({"0000:00:03.0"}, 5);
  ASSERT_OK_AND_ASSIGN(PassResult r, reconciler_->RunOnce(absl::ZeroDuration()));
  EXPECT_EQ(r.bound, 0);
  EXPECT_THAT(r.errors, ElementsAre(HasSubstr("iommu group 3: refusing to bind")));
  EXPECT_EQ(Driver("0000:00:03.0"), "nvme");
  ASSERT_OK(reconciler_->RunOnce(absl::ZeroDuration()));
  EXPECT_TRUE(Rendered("pdc_node_bind_failures_total{operation=\"bind\",reason=\"host_in_use\"} 2"));
}

// The allocator never picks an unhealthy device: one the host uses is
// reported unhealthy before any claim asks for it, and offered again once
// the host lets go.
TEST_F(ReconcilerTest, ADeviceTheHostUsesIsUnhealthyUntilTheHostLetsGo) {
  host_.kernel.AddProcess(4242, "postgres", {"nvme1n1"});
  ASSERT_OK(reconciler_->RunOnce(absl::ZeroDuration()));
  ASSERT_EQ(api_.inventories.back().devices.size(), 2u);
  EXPECT_EQ(api_.inventories.back().devices[0].health, DeviceHealth::kHealthy);
  EXPECT_EQ(api_.inventories.back().devices[1].health, DeviceHealth::kUnhealthy);
  EXPECT_EQ(api_.inventories.back().devices[1].unhealthy_reason, UnhealthyReason::kHostInUse);
  EXPECT_TRUE(Rendered("pdc_node_devices_host_used 1"));
  EXPECT_THAT(host_.kernel.OpenDevNodes(), IsEmpty()) << "the check keeps nothing open";

  std::filesystem::remove_all(host_.kernel.proc_root() + "/4242");
  ASSERT_OK(reconciler_->RunOnce(absl::ZeroDuration()));
  EXPECT_EQ(api_.inventories.back().devices[1].health, DeviceHealth::kHealthy);
  EXPECT_EQ(api_.inventories.back().devices[1].unhealthy_reason, UnhealthyReason::kNone);
  EXPECT_TRUE(Rendered("pdc_node_devices_host_used 0"));
}

// Whatever cannot be checked is not offered either.
TEST_F(ReconcilerTest, ADeviceThatCannotBeCheckedIsUnhealthy) {
  std::filesystem::remove(host_.kernel.proc_root() + "/self/mountinfo");
  ASSERT_OK(reconciler_->RunOnce(absl::ZeroDuration()));
  ASSERT_EQ(api_.inventories.back().devices.size(), 2u);
  EXPECT_EQ(api_.inventories.back().devices[0].health, DeviceHealth::kUnhealthy);
  EXPECT_EQ(api_.inventories.back().devices[1].health, DeviceHealth::kUnhealthy);
  EXPECT_EQ(api_.inventories.back().devices[1].unhealthy_reason, UnhealthyReason::kHostInUse);
  EXPECT_TRUE(Rendered("pdc_node_devices_host_used 2"));
}

// A drive left on vfio-pci shows no serial; the journal's is the drive's
// only in the boot it was read in. After a reboot (vfio-pci.ids=, driverctl
// keep the address on vfio-pci) another drive may be at the address: it is
// reported without the serial and unhealthy, so no claim follows the serial
// onto it and nobody gets it. A restart in the same boot keeps the serial.
TEST_F(ReconcilerTest, AJournaledSerialIsTrustedOnlyInTheBootItWasReadIn) {
  Claim({"0000:00:03.0"}, 5);
  ASSERT_OK(reconciler_->RunOnce(absl::ZeroDuration()));
  ASSERT_EQ(Driver("0000:00:03.0"), "vfio-pci");
  struct Case {
    const char* boot;
    std::string serial;
    DeviceHealth health;
    UnhealthyReason reason;
  } cases[] = {
      {kBoot, "disk-a", DeviceHealth::kHealthy, UnhealthyReason::kNone},
      {"boot-2", "", DeviceHealth::kUnhealthy, UnhealthyReason::kUnverifiedIdentity},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.boot);
    OpenJournalAndBinder(c.boot);
    reconciler_ = NewReconciler();
    ASSERT_OK(reconciler_->Start());
    ASSERT_OK(reconciler_->RunOnce(absl::ZeroDuration()));
    ASSERT_EQ(api_.inventories.back().devices.size(), 2u);
    const Device& d = api_.inventories.back().devices[0];
    EXPECT_EQ(d.driver, "vfio-pci");
    EXPECT_EQ(d.serial, c.serial);
    EXPECT_EQ(d.health, c.health);
    EXPECT_EQ(d.unhealthy_reason, c.reason);
    EXPECT_EQ(api_.inventories.back().devices[1].health, DeviceHealth::kHealthy);
  }
}

TEST_F(ReconcilerTest, BindsAWholeGroupInOneCall) {
  host_.kernel.AddDevice({.address = "0000:01:00.0", .group = 9, .driver = "nvme", .serial = "g1"});
  host_.kernel.AddDevice({.address = "0000:01:01.0", .group = 9, .driver = "nvme", .serial = "g2"});
  Claim({"0000:01:00.0", "0000:01:01.0"}, 3);
  ASSERT_OK_AND_ASSIGN(PassResult r, reconciler_->RunOnce(absl::ZeroDuration()));
  EXPECT_EQ(r.bound, 2);
  EXPECT_THAT(r.errors, IsEmpty());
}

TEST_F(ReconcilerTest, HealthFollowsTheLoop) {
  EXPECT_TRUE(reconciler_->Healthy());
  clock_.Advance(absl::Seconds(59));
  EXPECT_TRUE(reconciler_->Healthy());
  clock_.Advance(absl::Seconds(2));  // 3 x 10 s heartbeat + 30 s backoff passed.
  EXPECT_FALSE(reconciler_->Healthy());
  ASSERT_OK(reconciler_->RunOnce(absl::ZeroDuration()));
  EXPECT_TRUE(reconciler_->Healthy());
}

// Notified before it starts, Run returns without a pass. The extender is up,
// so a pass would show as a call (and an inventory).
TEST_F(ReconcilerTest, RunStopsWhenNotified) {
  absl::Notification stop;
  stop.Notify();
  RunUntilItReturns(*reconciler_, &stop);
  EXPECT_EQ(api_.calls, 0);
  EXPECT_TRUE(api_.inventories.empty());
}

// Notified during a pass, Run finishes that pass and starts no other.
TEST_F(ReconcilerTest, RunStopsAfterThePassItWasNotifiedIn) {
  absl::Notification stop;
  api_.on_call = [&] {
    if (api_.polls.size() == 2) stop.Notify();  // During the third pass.
  };
  RunUntilItReturns(*reconciler_, &stop);
  EXPECT_EQ(api_.polls.size(), 3u);
  // The first pass reported; the clock did not move, so no heartbeat since.
  EXPECT_EQ(api_.inventories.size(), 1u);
}

// With the extender down Run backs off between passes; a stop notification
// ends the wait at once. The backoff is an hour, so a Run that slept it out
// would miss kRunDeadline. The test thread notifies after the first failed
// call, so the notification lands before or during the wait, and both must
// stop the loop.
TEST_F(ReconcilerTest, RunWakesFromItsBackoffWhenNotified) {
  ReconcilerOptions ro;
  ro.node = "node-a";
  ro.classes = {NvmeClass()};
  ro.backoff_initial = absl::Hours(1);
  ro.backoff_max = absl::Hours(1);
  Reconciler r(&host_.kernel, binder_.get(), journal_.get(), &api_, nullptr, &clock_, ro);
  api_.down = true;
  absl::Notification failed_once;
  api_.on_call = [&] {
    if (!failed_once.HasBeenNotified()) failed_once.Notify();
  };
  absl::Notification stop;
  std::thread notifier([&] {
    failed_once.WaitForNotification();
    stop.Notify();
  });
  RunUntilItReturns(r, &stop);
  notifier.join();
  EXPECT_EQ(api_.calls, 1);  // The inventory report, refused; no retry.
}

TEST(NextBackoffTest, DoublesUpToTheCap) {
  const absl::Duration i = absl::Seconds(1), m = absl::Seconds(30);
  struct Case {
    absl::Duration current, want;
  } cases[] = {{absl::ZeroDuration(), absl::Seconds(1)},
               {absl::Seconds(1), absl::Seconds(2)},
               {absl::Seconds(16), absl::Seconds(30)},
               {absl::Seconds(30), absl::Seconds(30)}};
  for (const Case& c : cases) EXPECT_EQ(NextBackoff(c.current, i, m), c.want);
}

}  // namespace
}  // namespace pdc::driver
