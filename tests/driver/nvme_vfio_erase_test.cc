// FinishPendingErase of a drive on vfio-pci with a VFIO opener: erased
// where it is (fake_nvme_vfio.h's controller behind the real channel), the
// host's kernel driver never sees it before the erase is recorded, and the
// kernel driver's path only when VFIO is not possible.
#include "driver/nvme_vfio_erase.h"

#include <memory>
#include <string>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/driver/fake_nvme_admin.h"
#include "tests/driver/fake_nvme_vfio.h"
#include "tests/driver/test_util.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/status_matchers.h"

namespace pdc::driver {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

constexpr char kVfioEraseDev[] = "0000:00:05.0";

class EraseOnVfioTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host_.kernel.AddDevice(
        {.address = kVfioEraseDev, .group = 5, .driver = "nvme", .serial = "disk-v"});
    auto j = BindJournal::Open(host_.tmp.Join("journal"));
    ASSERT_TRUE(j.ok());
    journal_ = std::move(*j);
    BinderOptions bo;
    bo.classes = {testing::NvmeClass()};
    bo.verify_attempts = 2;
    bo.clock = &clock_;
    binder_ = std::make_unique<VfioBinder>(&host_.kernel, &host_.dev, &host_.proc,
                                           journal_.get(), bo);
    ASSERT_OK(binder_->Bind({testing::Addr(kVfioEraseDev)}));
    ASSERT_OK(binder_->MarkErasePending(testing::Addr(kVfioEraseDev)).status());
    admin_.controllers["nvme0"].namespaces[1] = testing::FakeNamespace{};
    admin_.controllers["nvme0"].serial = "disk-v";
    opener_.state.serial = "disk-v";
    opener_.clock = &clock_;
    options_.clock = &clock_;
    options_.controller_wait = absl::Seconds(5);
    options_.poll_interval = absl::Milliseconds(500);
    options_.vfio = &opener_;
  }

  absl::StatusOr<NvmeEraseReport> Finish() {
    return FinishPendingErase(*binder_, host_.kernel, admin_, testing::Addr(kVfioEraseDev),
                              options_);
  }
  std::optional<JournalEntry> Entry() { return journal_->Get(testing::Addr(kVfioEraseDev)); }
  bool Erasing() { return Entry() && Entry()->state == JournalState::kErasing; }
  std::string Driver() {
    auto d = LinkName(host_.kernel, std::string("bus/pci/devices/") + kVfioEraseDev + "/driver");
    return d.ok() ? *d : "";
  }

  testing::FakeHost host_;
  pdc::testing::FakeClock clock_;
  std::unique_ptr<BindJournal> journal_;
  std::unique_ptr<VfioBinder> binder_;
  testing::FakeNvmeAdmin admin_;
  testing::FakeVfioOpener opener_;
  EraseReturnOptions options_;
};

// The guest's namespaces never reach the host's block layer before they
// are erased: nothing is written to sysfs (no unbind, no probe) until the
// erase is recorded. Fails on a version that hands the drive to nvme first.
TEST_F(EraseOnVfioTest, ErasesOnVfioPciAndOnlyThenHandsTheDriveToNvme) {
  const size_t writes = host_.kernel.writes().size();
  bool checked = false;
  opener_.state.on_command = [&](uint8_t opcode) {
    if (opcode != kNvmeAdminFormatNvm) return;
    checked = true;
    EXPECT_EQ(Driver(), "vfio-pci");
    EXPECT_EQ(host_.kernel.writes().size(), writes);
    EXPECT_TRUE(Erasing());
  };
  ASSERT_OK_AND_ASSIGN(NvmeEraseReport r, Finish());
  EXPECT_TRUE(checked);
  EXPECT_EQ(r.path, "vfio-pci");
  EXPECT_EQ(r.identity, "disk-v");
  EXPECT_EQ(r.verified_blocks, 2);
  EXPECT_EQ(opener_.state.formats, 1);
  EXPECT_TRUE(opener_.state.closed);
  EXPECT_EQ(opener_.state.cc & 1, 0u);  // Disabled before the hand-back.
  ASSERT_TRUE(Entry());
  EXPECT_EQ(Entry()->state, JournalState::kReturned);
  EXPECT_EQ(Entry()->serial, "disk-v");
  EXPECT_EQ(Driver(), "nvme");
  EXPECT_THAT(admin_.commands, IsEmpty());  // The kernel's passthrough was never used.
}

// A failing erase leaves the drive on vfio-pci with its erase pending: not
// a single sysfs write. Fails on a version that erased through nvme.
TEST_F(EraseOnVfioTest, AFailedEraseStaysOnVfioPciPending) {
  const size_t writes = host_.kernel.writes().size();
  opener_.state.status_of[kNvmeAdminFormatNvm] = 0x4002;
  auto r = Finish();
  EXPECT_EQ(FailureReason(r.status()), kReasonEraseStatus);
  EXPECT_THAT(r.status().message(), HasSubstr("on vfio-pci (0000:00:05.0)"));
  EXPECT_EQ(Driver(), "vfio-pci");
  EXPECT_TRUE(Erasing());
  EXPECT_EQ(host_.kernel.writes().size(), writes);
  EXPECT_THAT(admin_.commands, IsEmpty());
  // The next attempt succeeds.
  opener_.state.status_of.clear();
  ASSERT_OK_AND_ASSIGN(NvmeEraseReport ok, Finish());
  EXPECT_EQ(ok.path, "vfio-pci");
  EXPECT_EQ(Driver(), "nvme");
}

TEST_F(EraseOnVfioTest, AnotherDriveIsLeftAloneOnVfioPci) {
  opener_.state.serial = "disk-w";
  const size_t writes = host_.kernel.writes().size();
  auto r = Finish();
  EXPECT_EQ(FailureReason(r.status()), kReasonDriveChanged);
  EXPECT_EQ(opener_.state.formats, 0);
  EXPECT_EQ(opener_.state.blocks, testing::GuestPattern(opener_.state.blocks.size()));
  EXPECT_EQ(Driver(), "vfio-pci");
  EXPECT_TRUE(Erasing());
  EXPECT_EQ(host_.kernel.writes().size(), writes);
}

TEST_F(EraseOnVfioTest, NoJournaledIdentityIsRefusedBeforeOpening) {
  ASSERT_OK(journal_->Put(JournalEntry{testing::Addr(kVfioEraseDev), JournalState::kErasing,
                                       "nvme", ""}));
  auto r = Finish();
  EXPECT_EQ(FailureReason(r.status()), kReasonEraseNoIdentity);
  EXPECT_EQ(opener_.opens, 0);
  EXPECT_EQ(Driver(), "vfio-pci");
}

// A VM still holding the group: waits, never falls back to the host driver.
TEST_F(EraseOnVfioTest, AnOpenGroupWaitsOnVfioPci) {
  opener_.fail = WithFailureReason(absl::UnavailableError("/dev/vfio/5 is open in another process"),
                                   kReasonVfioGroupInUse);
  auto r = Finish();
  EXPECT_EQ(FailureReason(r.status()), kReasonVfioGroupInUse);
  EXPECT_EQ(Driver(), "vfio-pci");
  EXPECT_TRUE(Erasing());
  EXPECT_THAT(admin_.commands, IsEmpty());
}

// A process holding the group open is named, and nothing is opened.
TEST_F(EraseOnVfioTest, AProcessHoldingTheGroupIsNamedAndWaitedFor) {
  host_.kernel.AddProcess(4242, "qemu-kvm", {"vfio/5"});
  auto r = Finish();
  EXPECT_EQ(FailureReason(r.status()), kReasonVfioGroupInUse);
  EXPECT_THAT(r.status().message(), HasSubstr("/dev/vfio/5 is open in process 4242 (qemu-kvm)"));
  EXPECT_EQ(opener_.opens, 0);
  EXPECT_EQ(Driver(), "vfio-pci");
  EXPECT_TRUE(Erasing());
}

// Only when VFIO is not possible for the drive: the kernel driver's path,
// and the report says why.
TEST_F(EraseOnVfioTest, FallsBackToNvmeOnlyWhenVfioIsNotPossible) {
  opener_.fail = WithFailureReason(absl::FailedPreconditionError("it is in no IOMMU group"),
                                   kReasonVfioUnavailable);
  ASSERT_OK_AND_ASSIGN(NvmeEraseReport r, Finish());
  EXPECT_THAT(r.path, StartsWith("nvme (VFIO not possible: "));
  EXPECT_THAT(r.path, HasSubstr("no IOMMU group"));
  EXPECT_FALSE(admin_.controllers["nvme0"].namespaces[1].has_data);
  EXPECT_EQ(Driver(), "nvme");
  EXPECT_EQ(Entry()->state, JournalState::kReturned);
  // Any other failure of the channel is not a reason to hand it over.
  opener_.fail = absl::InternalError("CSTS.CFS");
  ASSERT_OK(binder_->Bind({testing::Addr(kVfioEraseDev)}));
  ASSERT_OK(binder_->MarkErasePending(testing::Addr(kVfioEraseDev)).status());
  auto again = Finish();
  EXPECT_FALSE(again.ok());
  EXPECT_EQ(Driver(), "vfio-pci");
  EXPECT_TRUE(Erasing());
}

// Erased and recorded, but the hand-back to nvme failed: the erase is not
// run again; forgetting the acknowledged entry hands it back first.
TEST_F(EraseOnVfioTest, AFailedHandBackIsRetriedBeforeTheEntryIsForgotten) {
  host_.kernel.FailWrite("drivers/vfio-pci/unbind");
  ASSERT_OK_AND_ASSIGN(NvmeEraseReport r, Finish());
  EXPECT_THAT(r.path, HasSubstr("handing it to nvme failed, retried"));
  EXPECT_EQ(Driver(), "vfio-pci");
  EXPECT_EQ(Entry()->state, JournalState::kReturned);
  ASSERT_OK(binder_->ForgetReturned(testing::Addr(kVfioEraseDev)));
  EXPECT_EQ(Driver(), "nvme");
  EXPECT_FALSE(Entry());
  EXPECT_EQ(opener_.state.formats, 1);
}

}  // namespace
}  // namespace pdc::driver
