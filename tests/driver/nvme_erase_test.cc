#include "driver/nvme_erase.h"

#include <cerrno>
#include <fstream>
#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/driver/fake_nvme_admin.h"
#include "tests/driver/test_util.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/status_matchers.h"

namespace pdc::driver {
namespace {

using pdc::testing::StatusIs;
using testing::Addr;
using testing::FakeController;
using testing::FakeHost;
using testing::FakeNamespace;
using testing::FakeNvmeAdmin;
using testing::NvmeClass;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kDev[] = "0000:00:03.0";

TEST(FormatCdw10Test, KeepsTheFormatAndAsksForAUserDataErase) {
  struct Case {
    uint8_t flbas, dps;
    uint32_t want;
  } cases[] = {
      {0x00, 0x00, 0x00000200},  // LBAF 0, SES 1.
      {0x03, 0x00, 0x00000203},  // LBAF 3.
      {0x11, 0x00, 0x00000211},  // LBAF 1, metadata at the end of the LBA (MSET).
      {0x01, 0x01, 0x00000221},  // Protection type 1 (PI).
      {0x01, 0x09, 0x00000321},  // PI type 1, first bytes of metadata (PIL).
      {0x22, 0x00, 0x00001202},  // LBAF 18: upper bits (LBAFU) in 13:12.
  };
  for (const Case& c : cases) {
    EXPECT_EQ(FormatCdw10(c.flbas, c.dps), c.want) << std::hex << int{c.flbas} << " " << int{c.dps};
  }
}

TEST(DescribeNvmeStatusTest, NamesTheCommonCodes) {
  struct Case {
    uint16_t status;
    const char* want;
  } cases[] = {
      {0x410A, "Invalid Format (SCT 1h SC 0Ah, do not retry)"},
      {0x4002, "Invalid Field in Command (SCT 0h SC 02h, do not retry)"},
      {0x0084, "Format In Progress (SCT 0h SC 84h)"},
      {0x0006, "Internal Error (SCT 0h SC 06h)"},
      {0x4286, "Access Denied (SCT 2h SC 86h, do not retry)"},
      {0x0733, "Vendor Specific (SCT 7h SC 33h)"},
      {0x0155, "status (SCT 1h SC 55h)"},
  };
  for (const Case& c : cases) EXPECT_EQ(DescribeNvmeStatus(c.status), c.want);
}

class EraseTest : public ::testing::Test {
 protected:
  absl::StatusOr<NvmeEraseReport> Erase() {
    return EraseNvmeController(admin_, "nvme0", kDev, options_);
  }
  FakeController& ctrl() { return admin_.controllers["nvme0"]; }

  FakeNvmeAdmin admin_;
  NvmeEraseOptions options_;
};

TEST_F(EraseTest, FormatsEveryNamespaceKeepingItsFormat) {
  ctrl().namespaces[1] = FakeNamespace{.nlbaf = 3, .flbas = 0x01};
  ctrl().namespaces[2] = FakeNamespace{.nlbaf = 3, .flbas = 0x13, .dps = 0x01};
  ctrl().namespaces[7] = FakeNamespace{.nlbaf = 20, .flbas = 0x22};
  options_.format_timeout = absl::Minutes(42);
  ASSERT_OK_AND_ASSIGN(NvmeEraseReport r, Erase());
  EXPECT_EQ(r.controller, "nvme0");
  EXPECT_THAT(r.namespaces, ElementsAre(1u, 2u, 7u));
  EXPECT_THAT(r.formatted, ElementsAre(1u, 2u, 7u));
  auto formats = admin_.Formats();
  ASSERT_EQ(formats.size(), 3u);
  EXPECT_EQ(formats[0].nsid, 1u);
  EXPECT_EQ(formats[0].cdw10, FormatCdw10(0x01, 0));
  EXPECT_EQ(formats[1].cdw10, FormatCdw10(0x13, 0x01));
  EXPECT_EQ(formats[2].cdw10, FormatCdw10(0x22, 0));
  EXPECT_EQ(formats[2].timeout, absl::Minutes(42));
  for (const auto& [id, ns] : ctrl().namespaces) {
    EXPECT_FALSE(ns.has_data) << "namespace " << id;
  }
  // The formats the namespaces had, unchanged.
  EXPECT_EQ(ctrl().namespaces[2].flbas, 0x13);
  EXPECT_EQ(ctrl().namespaces[2].dps, 0x01);
  EXPECT_EQ(ctrl().namespaces[7].flbas, 0x22);
}

TEST_F(EraseTest, OneBroadcastFormatWhenTheControllerFormatsAllNamespaces) {
  ctrl().fna = 0x1;
  ctrl().namespaces[1] = FakeNamespace{.flbas = 0x01};
  ctrl().namespaces[2] = FakeNamespace{.flbas = 0x01};
  ASSERT_OK_AND_ASSIGN(NvmeEraseReport r, Erase());
  EXPECT_THAT(r.formatted, ElementsAre(kNvmeNsidAll));
  auto formats = admin_.Formats();
  ASSERT_EQ(formats.size(), 1u);
  EXPECT_EQ(formats[0].nsid, kNvmeNsidAll);
  EXPECT_FALSE(ctrl().namespaces[1].has_data);
  EXPECT_FALSE(ctrl().namespaces[2].has_data);
}

TEST_F(EraseTest, RefusesABroadcastThatWouldChangeAFormat) {
  ctrl().fna = 0x1;
  ctrl().namespaces[1] = FakeNamespace{.flbas = 0x00};
  ctrl().namespaces[2] = FakeNamespace{.flbas = 0x01};
  auto r = Erase();
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kFailedPrecondition,
                          HasSubstr("namespaces 1 and 2 use different LBA formats")));
  EXPECT_EQ(FailureReason(r.status()), kReasonEraseUnsupported);
  EXPECT_THAT(admin_.Formats(), IsEmpty());
  EXPECT_TRUE(ctrl().namespaces[1].has_data);
}

TEST_F(EraseTest, FailedFormatsNameControllerNamespaceAndStatus) {
  struct Case {
    uint16_t status;
    const char* want;
  } cases[] = {
      {0x410A, "Invalid Format (SCT 1h SC 0Ah, do not retry)"},
      {0x4002, "Invalid Field in Command (SCT 0h SC 02h, do not retry)"},
      {0x0084, "Format In Progress (SCT 0h SC 84h)"},
  };
  ctrl().namespaces[1] = FakeNamespace{};
  ctrl().namespaces[2] = FakeNamespace{};
  for (const Case& c : cases) {
    admin_.format_status = c.status;
    auto r = Erase();
    EXPECT_THAT(r, StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr(c.want)));
    EXPECT_THAT(r.status().message(),
                HasSubstr("erasing NVMe controller nvme0 (0000:00:03.0): Format NVM (SES=1, CDW10 "
                          "00000200) of namespace 1 failed"));
    EXPECT_EQ(FailureReason(r.status()), kReasonEraseStatus);
  }
  EXPECT_TRUE(ctrl().namespaces[1].has_data);
}

TEST_F(EraseTest, SubmissionErrorsCarryTheErrno) {
  ctrl().namespaces[1] = FakeNamespace{};
  admin_.submit_error = absl::ErrnoToStatus(EIO, "ioctl NVME_IOCTL_ADMIN_CMD on /dev/nvme0");
  auto r = Erase();
  EXPECT_THAT(r.status().message(),
              HasSubstr("nvme0 (0000:00:03.0): Identify Controller (CNS 1): ioctl "
                                    "NVME_IOCTL_ADMIN_CMD on /dev/nvme0: Input/output error"));
  EXPECT_EQ(FailureReason(r.status()), kReasonEraseIo);
}

TEST_F(EraseTest, AControllerWithoutFormatNvmIsNotErasable) {
  ctrl().format = false;
  ctrl().namespaces[1] = FakeNamespace{};
  auto r = Erase();
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kFailedPrecondition,
                          HasSubstr("does not support Format NVM")));
  EXPECT_EQ(FailureReason(r.status()), kReasonEraseUnsupported);
}

TEST_F(EraseTest, OldControllersAreScannedUpToNn) {
  ctrl().cns2 = false;
  ctrl().namespaces[1] = FakeNamespace{};
  ctrl().namespaces[3] = FakeNamespace{.flbas = 0x01};
  ASSERT_OK_AND_ASSIGN(NvmeEraseReport r, Erase());
  EXPECT_THAT(r.formatted, ElementsAre(1u, 3u));  // 2 is inactive (NSZE 0).
}

TEST_F(EraseTest, ManyNamespacesAreListedPageByPage) {
  for (uint32_t id = 1; id <= 1030; ++id) ctrl().namespaces[id] = FakeNamespace{};
  ASSERT_OK_AND_ASSIGN(NvmeEraseReport r, Erase());
  EXPECT_EQ(r.formatted.size(), 1030u);
  int lists = 0;
  for (const auto& c : admin_.commands) {
    if (c.opcode == kNvmeAdminIdentify && c.cdw10 == 2) ++lists;
  }
  EXPECT_EQ(lists, 2);
}

TEST_F(EraseTest, NoNamespaceMeansNothingToErase) {
  ctrl();
  ASSERT_OK_AND_ASSIGN(NvmeEraseReport r, Erase());
  EXPECT_THAT(r.formatted, IsEmpty());
  EXPECT_THAT(admin_.Formats(), IsEmpty());
}

TEST(DevNvmeAdminTest, RefusesNamesThatAreNotControllersAndReportsOpenErrors) {
  pdc::testing::TempDir tmp;
  DevNvmeAdmin admin(tmp.path());
  EXPECT_FALSE(admin.Present("nvme0"));
  EXPECT_FALSE(admin.Present("../nvme0"));
  EXPECT_THAT(admin.Run("nvme0n1", {}, {}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(admin.Run("nvme", {}, {}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(admin.Run("nvme0", {}, {}),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("/nvme0: No such file")));
}

// The whole path against the fake kernel: journaled, to nvme, erased, done.
class FinishPendingEraseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host_.kernel.AddDevice({.address = kDev, .group = 3, .driver = "nvme", .serial = "disk-a"});
    auto j = BindJournal::Open(host_.tmp.Join("journal"));
    ASSERT_TRUE(j.ok());
    journal_ = std::move(*j);
    BinderOptions bo;
    bo.classes = {NvmeClass()};
    bo.verify_attempts = 2;
    bo.clock = &clock_;
    binder_ = std::make_unique<VfioBinder>(&host_.kernel, &host_.dev, &host_.proc, journal_.get(), bo);
    ASSERT_OK(binder_->Bind({Addr(kDev)}));
    admin_.controllers["nvme0"].namespaces[1] = FakeNamespace{};
    options_.clock = &clock_;
    options_.controller_wait = absl::Seconds(5);
    options_.poll_interval = absl::Milliseconds(500);
  }

  std::string Driver() {
    auto d = LinkName(host_.kernel, std::string("bus/pci/devices/") + kDev + "/driver");
    return d.ok() ? *d : "";
  }

  FakeHost host_;
  pdc::testing::FakeClock clock_;
  std::unique_ptr<BindJournal> journal_;
  std::unique_ptr<VfioBinder> binder_;
  FakeNvmeAdmin admin_;
  EraseReturnOptions options_;
};

TEST_F(FinishPendingEraseTest, ErasesOnNvmeThenDropsTheJournalEntry) {
  ASSERT_OK_AND_ASSIGN(bool pending, binder_->MarkErasePending(Addr(kDev)));
  EXPECT_TRUE(pending);
  auto e = journal_->Get(Addr(kDev));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->state, JournalState::kErasing);
  EXPECT_EQ(e->original_driver, "nvme");
  EXPECT_EQ(Driver(), "vfio-pci");  // Journaled before anything moved.
  // A pending erase blocks a bind and a plain restore.
  EXPECT_EQ(FailureReason(binder_->Bind({Addr(kDev)}).status()), kReasonErasePending);
  EXPECT_EQ(FailureReason(binder_->Restore(Addr(kDev)).status()), kReasonErasePending);
  admin_.on_command = [&](const testing::RecordedCommand&) {
    EXPECT_EQ(Driver(), "nvme");  // Commands only once nvme has it.
  };
  ASSERT_OK_AND_ASSIGN(NvmeEraseReport r,
                       FinishPendingErase(*binder_, host_.kernel, admin_, Addr(kDev), options_));
  EXPECT_THAT(r.formatted, ElementsAre(1u));
  EXPECT_FALSE(admin_.controllers["nvme0"].namespaces[1].has_data);
  EXPECT_FALSE(journal_->Get(Addr(kDev)));
  EXPECT_EQ(Driver(), "nvme");
}

TEST_F(FinishPendingEraseTest, WaitsBoundedForTheControllerDevice) {
  ASSERT_OK(binder_->MarkErasePending(Addr(kDev)));
  admin_.controllers["nvme0"].present = false;
  int polls = 0;
  clock_.SetSleepHook([&] {
    if (++polls == 3) admin_.controllers["nvme0"].present = true;
  });
  ASSERT_OK(FinishPendingErase(*binder_, host_.kernel, admin_, Addr(kDev), options_));
  EXPECT_FALSE(journal_->Get(Addr(kDev)));

  // Never appearing: an error after controller_wait, the erase still pending.
  ASSERT_OK(binder_->Bind({Addr(kDev)}));
  ASSERT_OK(binder_->MarkErasePending(Addr(kDev)));
  admin_.controllers["nvme0"].present = false;
  clock_.SetSleepHook(nullptr);
  const absl::Time start = clock_.Now();
  auto r = FinishPendingErase(*binder_, host_.kernel, admin_, Addr(kDev), options_);
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kUnavailable,
                          HasSubstr("NVMe controller did not come up within 5s")));
  EXPECT_EQ(FailureReason(r.status()), kReasonEraseNoController);
  EXPECT_LE(clock_.Now() - start, absl::Seconds(6));
  ASSERT_TRUE(journal_->Get(Addr(kDev)));
  EXPECT_EQ(journal_->Get(Addr(kDev))->state, JournalState::kErasing);
}

// The kernel creates /dev/nvmeN before the controller is live (and refuses
// to open it until then): the erase waits for the state too.
TEST_F(FinishPendingEraseTest, WaitsForTheControllerToBeLive) {
  ASSERT_OK(binder_->MarkErasePending(Addr(kDev)));
  ASSERT_OK(binder_->GiveBackForErase(Addr(kDev)));
  const std::string state =
      host_.kernel.sys_root() + "/bus/pci/devices/" + kDev + "/nvme/nvme0/state";
  ASSERT_TRUE(std::ofstream(state) << "connecting\n");
  int polls = 0;
  clock_.SetSleepHook([&] {
    if (++polls == 2) std::ofstream(state) << "live\n";
  });
  admin_.on_command = [&](const testing::RecordedCommand&) { EXPECT_GE(polls, 2); };
  ASSERT_OK(FinishPendingErase(*binder_, host_.kernel, admin_, Addr(kDev), options_));
  EXPECT_EQ(polls, 2);
}

TEST_F(FinishPendingEraseTest, NothingPendingOnADeviceTheHostHasAndPdcNeverHad) {
  ASSERT_OK(binder_->Restore(Addr(kDev)));
  ASSERT_OK_AND_ASSIGN(bool pending, binder_->MarkErasePending(Addr(kDev)));
  EXPECT_FALSE(pending);
  EXPECT_FALSE(journal_->Get(Addr(kDev)));
}

TEST_F(FinishPendingEraseTest, RecoverLeavesPendingErasesAlone) {
  ASSERT_OK(binder_->MarkErasePending(Addr(kDev)));
  ASSERT_OK(binder_->Recover());
  EXPECT_EQ(Driver(), "vfio-pci");
  ASSERT_TRUE(journal_->Get(Addr(kDev)));
  EXPECT_EQ(journal_->Get(Addr(kDev))->state, JournalState::kErasing);
  // And the journal reads it back after a restart.
  auto reopened = BindJournal::Open(host_.tmp.Join("journal"));
  ASSERT_OK(reopened.status());
  EXPECT_EQ((*reopened)->Get(Addr(kDev))->state, JournalState::kErasing);
}

}  // namespace
}  // namespace pdc::driver
