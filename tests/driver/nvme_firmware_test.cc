#include "driver/nvme_firmware.h"

#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "driver/bind_journal.h"
#include "driver/vfio_binder.h"
#include "tests/driver/fake_nvme_admin.h"
#include "tests/driver/test_util.h"
#include "tests/testing/status_matchers.h"

namespace pdc::driver {
namespace {

using pdc::testing::StatusIs;
using testing::Addr;
using testing::FakeHost;
using testing::FakeNamespace;
using testing::FakeNvmeAdmin;
using testing::NvmeClass;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(NvmeFirmwareStateTest, EncodesOneWordThatDecodesBack) {
  struct Case {
    NvmeFirmwareState state;
    std::string word;
  } cases[] = {
      {{}, ""},
      {{.revision = "1.0"}, "fr=1.0"},
      {{.revision = "GPJA0B3Q", .afi = "01", .slots = {"GPJA0B3Q", "", ""}, .boot = "none"},
       "fr=GPJA0B3Q,afi=01,fs=GPJA0B3Q//,bp=none"},
      // What the journal line or the encoding itself would split on.
      {{.revision = "a b,c=d/e%f", .boot = "1.2"}, "fr=a%20b%2Cc%3Dd%2Fe%25f,bp=1.2"},
      {{.afi = "11", .slots = {""}}, "afi=11,fs="},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.word);
    EXPECT_EQ(EncodeFirmwareState(c.state), c.word);
    ASSERT_OK_AND_ASSIGN(NvmeFirmwareState back, DecodeFirmwareState(c.word));
    EXPECT_EQ(back, c.state);
  }
}

TEST(NvmeFirmwareStateTest, DecodingNamesWhatDoesNotRead) {
  struct Case {
    std::string word;
    std::string message;
  } cases[] = {
      {"fr", "is not key=value"},
      {"fr=1.0,afi", "\"afi\" is not key=value"},
      {"fr=%G1", "bad percent escape"},
      {"fr=ab%4", "bad percent escape"},
      {"fs=1.0/%zz", "fs: bad percent escape"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(DecodeFirmwareState(c.word),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.word;
  }
  // A key of a later pdc-node is ignored.
  ASSERT_OK_AND_ASSIGN(NvmeFirmwareState st, DecodeFirmwareState("fr=2.0,zz=9"));
  EXPECT_EQ(st, (NvmeFirmwareState{.revision = "2.0"}));
}

TEST(NvmeFirmwareStateTest, ChangesComparesWhatWasRecordedAtBind) {
  const NvmeFirmwareState bound{
      .revision = "1.0", .afi = "01", .slots = {"1.0", "", ""}, .boot = "0.1"};
  struct Case {
    std::string name;
    NvmeFirmwareState now;
    std::vector<std::string> want;  // Substrings, one per change.
  } cases[] = {
      {"same", bound, {}},
      {"revision", {.revision = "6.6", .afi = "01", .slots = {"1.0", "", ""}, .boot = "0.1"},
       {"firmware revision (FR) \"1.0\" -> \"6.6\""}},
      // A download into slot 2 committed for activation at the next reset:
      // the running revision is still the same.
      {"pending activation",
       {.revision = "1.0", .afi = "21", .slots = {"1.0", "6.6", ""}, .boot = "0.1"},
       {"(AFI) 01h -> 21h", "slot 2 (FRS2) (empty) -> \"6.6\""}},
      {"boot partition", {.revision = "1.0", .afi = "01", .slots = {"1.0", "", ""}, .boot = "1.1"},
       {"boot partitions (BPINFO ABPID.BPSZ) 0.1 -> 1.1"}},
      // Firmware that stops answering a log it answered at bind.
      {"unreadable now",
       {.revision = "1.0"},
       {"Firmware Slot Information log was read at bind and cannot be read now",
        "Boot Partition log was read at bind and cannot be read now"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<std::string> got = FirmwareChanges(bound, c.now);
    ASSERT_EQ(got.size(), c.want.size()) << ::testing::PrintToString(got);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_THAT(got[i], HasSubstr(c.want[i]));
  }
  EXPECT_THAT(FirmwareChanges({}, bound), IsEmpty());  // Nothing recorded at bind.
}

TEST(NvmeFirmwareStateTest, ReadsTheSlotAndBootPartitionLogs) {
  FakeNvmeAdmin admin;
  auto& c = admin.controllers["nvme0"];
  c.slots = {"1.0", "2.0"};
  c.afi = 0x12;
  ASSERT_OK_AND_ASSIGN(auto channel, admin.Open("nvme0", ""));
  NvmeFirmwareState st{.revision = "kept"};
  ReadFirmwareLogs(*channel, absl::Seconds(1), &st);
  // No Boot Partition log page (Invalid Field): none.
  EXPECT_EQ(st, (NvmeFirmwareState{.revision = "kept",
                                   .afi = "12",
                                   .slots = {"1.0", "2.0", "", "", "", "", ""},
                                   .boot = "none"}));
  c.bpinfo = 0x80000004;  // ABPID 1, BPSZ 4 (512 KiB).
  ReadFirmwareLogs(*channel, absl::Seconds(1), &st);
  EXPECT_EQ(st.boot, "1.4");
  // Commands that cannot be submitted leave what they would have read unknown.
  admin.submit_error = absl::UnavailableError("ioctl: Input/output error");
  NvmeFirmwareState unknown;
  ReadFirmwareLogs(*channel, absl::Seconds(1), &unknown);
  EXPECT_TRUE(unknown.empty());
}

// At bind, while the controller is on nvme, its firmware state is journaled:
// Identify Controller FR and the logs through the admin channel when
// pdc-node has one, sysfs firmware_rev alone when not.
TEST(NvmeFirmwareStateTest, BindJournalsTheFirmwareState) {
  struct Case {
    bool admin;
    std::string want;
  } cases[] = {
      {false, "fr=1.0-sys"},
      {true, "fr=1.0-idfy,afi=01,fs=1.0-idfy//////,bp=none"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.admin);
    FakeHost host;
    host.kernel.AddDevice({.address = "0000:00:05.0", .group = 5, .driver = "nvme",
                           .serial = "fw-a", .firmware_rev = "1.0-sys"});
    ASSERT_OK_AND_ASSIGN(auto journal, BindJournal::Open(host.tmp.Join("journal")));
    FakeNvmeAdmin admin;
    auto& ctrl = admin.controllers["nvme0"];
    ctrl.serial = "fw-a";
    ctrl.firmware_rev = "1.0-idfy";
    ctrl.slots = {"1.0-idfy"};
    ctrl.namespaces[1] = FakeNamespace{};
    BinderOptions bo;
    bo.classes = {NvmeClass()};
    bo.verify_attempts = 2;
    if (c.admin) bo.nvme_admin = &admin;
    VfioBinder binder(&host.kernel, &host.dev, &host.proc, journal.get(), bo);
    ASSERT_OK(binder.Bind({Addr("0000:00:05.0")}));
    std::optional<JournalEntry> e = journal->Get(Addr("0000:00:05.0"));
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->state, JournalState::kBound);
    EXPECT_EQ(e->firmware, c.want);
  }
}

}  // namespace
}  // namespace pdc::driver
