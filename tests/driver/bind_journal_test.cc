#include "driver/bind_journal.h"

#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/driver/test_util.h"
#include "tests/testing/status_matchers.h"
#include "common/file_util.h"
#include "tests/testing/temp_dir.h"

namespace pdc::driver {
namespace {

using pdc::testing::StatusIs;
using testing::Addr;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(BindJournalTest, PersistsSortedEntriesAcrossReopen) {
  pdc::testing::TempDir tmp;
  const std::string path = tmp.Join("j");
  {
    ASSERT_OK_AND_ASSIGN(auto j, BindJournal::Open(path));
    ASSERT_OK(j->Put({Addr("0000:3b:00.0"), JournalState::kBound, "nvme", "S1"}));
    ASSERT_OK(j->Put({Addr("0000:00:03.0"), JournalState::kBinding, "", ""}));
    ASSERT_OK(j->Put({Addr("0000:5e:00.0"), JournalState::kRestoring, "nvme", "has space"}));
    ASSERT_OK(j->Put({Addr("0000:af:00.0"), JournalState::kErasing, "nvme", "S9"}));
    ASSERT_OK(j->Remove(Addr("0000:00:09.0")));  // Absent: fine.
  }
  ASSERT_OK_AND_ASSIGN(std::string text, ReadFileToString(path));
  EXPECT_EQ(text,
            "pdc-vfio-journal v3\n"
            "0000:00:03.0 binding - - - - -\n"
            "0000:3b:00.0 bound nvme S1 - - -\n"
            "0000:5e:00.0 restoring nvme - - - -\n"
            "0000:af:00.0 erasing nvme S9 - - -\n");
  ASSERT_OK_AND_ASSIGN(auto j, BindJournal::Open(path));
  EXPECT_THAT(j->Entries(),
              ElementsAre(JournalEntry{Addr("0000:00:03.0"), JournalState::kBinding, "", ""},
                          JournalEntry{Addr("0000:3b:00.0"), JournalState::kBound, "nvme", "S1"},
                          JournalEntry{Addr("0000:5e:00.0"), JournalState::kRestoring, "nvme", ""},
                          JournalEntry{Addr("0000:af:00.0"), JournalState::kErasing, "nvme", "S9"}));
  ASSERT_OK(j->Remove(Addr("0000:3b:00.0")));
  ASSERT_OK_AND_ASSIGN(auto k, BindJournal::Open(path));
  EXPECT_EQ(k->Entries().size(), 3u);
  EXPECT_FALSE(k->Get(Addr("0000:3b:00.0")).has_value());
}

// A pending erase follows its drive to a new address (a renumbering) in one
// write; the acknowledgement state reads back.
TEST(BindJournalTest, MovesAnEntryAndKeepsTheReturnedState) {
  pdc::testing::TempDir tmp;
  const std::string path = tmp.Join("j");
  {
    ASSERT_OK_AND_ASSIGN(auto j, BindJournal::Open(path));
    ASSERT_OK(j->Put({Addr("0000:3b:00.0"), JournalState::kErasing, "nvme", "S1"}));
    ASSERT_OK(j->Put({Addr("0000:5e:00.0"), JournalState::kReturned, "nvme", "S2"}));
    EXPECT_THAT(j->Move(Addr("0000:3b:00.0"), Addr("0000:5e:00.0")),
                StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("it has one")));
    EXPECT_THAT(j->Move(Addr("0000:00:09.0"), Addr("0000:af:00.0")),
                StatusIs(absl::StatusCode::kNotFound));
    ASSERT_OK(j->Move(Addr("0000:3b:00.0"), Addr("0000:af:00.0")));
  }
  ASSERT_OK_AND_ASSIGN(std::string text, ReadFileToString(path));
  EXPECT_EQ(text,
            "pdc-vfio-journal v3\n"
            "0000:5e:00.0 returned nvme S2 - - -\n"
            "0000:af:00.0 erasing nvme S1 - - -\n");
  ASSERT_OK_AND_ASSIGN(auto j, BindJournal::Open(path));
  EXPECT_EQ(j->Get(Addr("0000:5e:00.0"))->state, JournalState::kReturned);
  EXPECT_EQ(j->Get(Addr("0000:af:00.0"))->serial, "S1");
}

TEST(BindJournalTest, CorruptFileIsDataLoss) {
  pdc::testing::TempDir tmp;
  struct Case {
    std::string content;
    std::string message;
  } cases[] = {
      {"garbage\n", "first line"},
      {"pdc-vfio-journal v1\n0000:00:03.0 bound nvme\n", ":2: want 4 fields"},
      {"pdc-vfio-journal v2\n0000:00:03.0 bound nvme S1\n", ":2: want 5 fields"},
      {"pdc-vfio-journal v3\n0000:00:03.0 bound nvme S1 - fr=1\n", ":2: want 7 fields"},
      {"pdc-vfio-journal v4\n", "first line"},
      {"pdc-vfio-journal v1\n0000:00:3.0 bound nvme -\n", "bad PCI address"},
      {"pdc-vfio-journal v1\n0000:00:03.0 maybe nvme -\n", "bad state"},
  };
  for (const Case& c : cases) {
    std::ofstream(tmp.Join("j"), std::ios::trunc) << c.content;
    EXPECT_THAT(BindJournal::Open(tmp.Join("j")),
                StatusIs(absl::StatusCode::kDataLoss, HasSubstr(c.message)))
        << c.content;
  }
}

// A serial read from sysfs names the drive at its address in that boot only:
// after a reboot a renumbering may have put another drive there.
TEST(BindJournalTest, SerialIsCurrentInTheBootItWasReadIn) {
  pdc::testing::TempDir tmp;
  const std::string path = tmp.Join("j");
  {
    ASSERT_OK_AND_ASSIGN(auto j, BindJournal::Open(path, "boot-a"));
    ASSERT_OK(j->Put({Addr("0000:3b:00.0"), JournalState::kBound, "nvme", "S1"}));
    ASSERT_OK(j->Put({Addr("0000:5e:00.0"), JournalState::kBound, "", ""}));
    // Carried over from an earlier entry: keeps the boot it had.
    ASSERT_OK(j->Put({Addr("0000:af:00.0"), JournalState::kBound, "nvme", "S9", "boot-0"}));
    std::optional<JournalEntry> e = j->Get(Addr("0000:3b:00.0"));
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->boot_id, "boot-a");
    EXPECT_TRUE(j->SerialCurrent(*e));
    EXPECT_EQ(j->Get(Addr("0000:5e:00.0"))->boot_id, "");  // No serial: no boot.
    EXPECT_FALSE(j->SerialCurrent(*j->Get(Addr("0000:af:00.0"))));
  }
  ASSERT_OK_AND_ASSIGN(std::string text, ReadFileToString(path));
  EXPECT_EQ(text,
            "pdc-vfio-journal v3\n"
            "0000:3b:00.0 bound nvme S1 boot-a - -\n"
            "0000:5e:00.0 bound - - - - -\n"
            "0000:af:00.0 bound nvme S9 boot-0 - -\n");
  ASSERT_OK_AND_ASSIGN(auto same_boot, BindJournal::Open(path, "boot-a"));
  EXPECT_TRUE(same_boot->SerialCurrent(*same_boot->Get(Addr("0000:3b:00.0"))));
  ASSERT_OK_AND_ASSIGN(auto rebooted, BindJournal::Open(path, "boot-b"));
  EXPECT_FALSE(rebooted->SerialCurrent(*rebooted->Get(Addr("0000:3b:00.0"))));
}

// A journal of a pdc-node that did not record boots keeps working as it
// did: its serials are trusted (said in the design: until the next bind).
TEST(BindJournalTest, Version1JournalIsReadWithBootsUnknown) {
  pdc::testing::TempDir tmp;
  std::ofstream(tmp.Join("j")) << "pdc-vfio-journal v1\n0000:3b:00.0 bound nvme S1\n";
  ASSERT_OK_AND_ASSIGN(auto j, BindJournal::Open(tmp.Join("j"), "boot-b"));
  std::optional<JournalEntry> e = j->Get(Addr("0000:3b:00.0"));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(*e, (JournalEntry{Addr("0000:3b:00.0"), JournalState::kBound, "nvme", "S1",
                              std::string(kUnknownBoot)}));
  EXPECT_TRUE(j->SerialCurrent(*e));
  // Any write: the file becomes v3.
  ASSERT_OK(j->Put({Addr("0000:00:03.0"), JournalState::kBinding, "", ""}));
  ASSERT_OK_AND_ASSIGN(std::string text, ReadFileToString(tmp.Join("j")));
  EXPECT_EQ(text,
            "pdc-vfio-journal v3\n0000:00:03.0 binding - - - - -\n"
            "0000:3b:00.0 bound nvme S1 unknown - -\n");
}

// The firmware state and the Device Serial Number read at bind are kept
// with the entry; a journal of a pdc-node that did not record them (v2)
// reads with them unknown, and one that would not read back is dropped, as
// a serial is.
TEST(BindJournalTest, KeepsTheFirmwareStateAndReadsVersion2WithoutIt) {
  pdc::testing::TempDir tmp;
  std::ofstream(tmp.Join("j")) << "pdc-vfio-journal v2\n0000:3b:00.0 bound nvme S1 boot-a\n";
  ASSERT_OK_AND_ASSIGN(auto j, BindJournal::Open(tmp.Join("j"), "boot-a"));
  EXPECT_EQ(*j->Get(Addr("0000:3b:00.0")),
            (JournalEntry{Addr("0000:3b:00.0"), JournalState::kBound, "nvme", "S1", "boot-a", ""}));
  ASSERT_OK(j->Put({Addr("0000:5e:00.0"), JournalState::kBinding, "nvme", "S2", "",
                    "fr=1.2,afi=01,fs=1.2/,bp=none", "dsn:0011223344556677.0"}));
  ASSERT_OK(j->Put({Addr("0000:af:00.0"), JournalState::kBinding, "nvme", "S3", "", "fr=a b"}));
  ASSERT_OK_AND_ASSIGN(std::string text, ReadFileToString(tmp.Join("j")));
  EXPECT_EQ(text,
            "pdc-vfio-journal v3\n"
            "0000:3b:00.0 bound nvme S1 boot-a - -\n"
            "0000:5e:00.0 binding nvme S2 boot-a fr=1.2,afi=01,fs=1.2/,bp=none "
            "dsn:0011223344556677.0\n"
            "0000:af:00.0 binding nvme S3 boot-a - -\n");
  ASSERT_OK_AND_ASSIGN(auto k, BindJournal::Open(tmp.Join("j"), "boot-a"));
  EXPECT_EQ(k->Get(Addr("0000:5e:00.0"))->firmware, "fr=1.2,afi=01,fs=1.2/,bp=none");
  EXPECT_EQ(k->Get(Addr("0000:5e:00.0"))->dsn, "dsn:0011223344556677.0");
  EXPECT_EQ(k->Get(Addr("0000:af:00.0"))->firmware, "");
}

TEST(BindJournalTest, DriverNameWithSpaceIsRefused) {
  pdc::testing::TempDir tmp;
  ASSERT_OK_AND_ASSIGN(auto j, BindJournal::Open(tmp.Join("j")));
  EXPECT_THAT(j->Put({Addr("0000:00:03.0"), JournalState::kBound, "bad name", ""}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_TRUE(j->Entries().empty());
}

TEST(BindJournalTest, FailedWriteLeavesMemoryUnchanged) {
  pdc::testing::TempDir tmp;
  ASSERT_OK_AND_ASSIGN(auto j, BindJournal::Open(tmp.Join("missing-dir/j")));
  EXPECT_FALSE(j->Put({Addr("0000:00:03.0"), JournalState::kBound, "nvme", ""}).ok());
  EXPECT_TRUE(j->Entries().empty());
}

}  // namespace
}  // namespace pdc::driver
