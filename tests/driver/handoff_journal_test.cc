// The hand-off journal (driver/deviceplugin/handoff_journal.h): durable
// entries that read back, and a corrupt file that costs only its bad lines.
#include <string>
#include <vector>

#include "common/file_util.h"
#include "driver/deviceplugin/handoff_journal.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/driver/test_util.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace pdc::driver::deviceplugin {
namespace {

using pdc::testing::StatusIs;
using testing::Addr;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

using testing::kNvme;

HandoffRecord Record(const std::string& uid, std::vector<PciAddress> devices) {
  return HandoffRecord{kNvme, uid, "default", "virt-launcher-" + uid, std::move(devices)};
}

class HandoffJournalTest : public ::testing::Test {
 protected:
  std::vector<HandoffRecord> Reopened() {
    auto opened = HandoffJournal::Open(path_);
    EXPECT_OK(opened.status());
    if (!opened.ok()) return {};
    EXPECT_THAT(opened->corrupt, IsEmpty());
    return opened->journal->Entries();
  }

  pdc::testing::TempDir dir_;
  const std::string path_ = dir_.Join("handoff-journal");
};

TEST_F(HandoffJournalTest, MissingFileIsEmpty) { EXPECT_THAT(Reopened(), IsEmpty()); }

TEST_F(HandoffJournalTest, EntriesReadBackSortedAndRemoved) {
  ASSERT_OK_AND_ASSIGN(HandoffJournal::Opened j, HandoffJournal::Open(path_));
  const HandoffRecord b = Record("uid-b", {Addr("0000:00:04.0"), Addr("0000:00:03.0")});
  const HandoffRecord a = Record("uid-a", {Addr("0000:00:05.0")});
  ASSERT_OK(j.journal->Put(b));
  ASSERT_OK(j.journal->Put(a));
  HandoffRecord b_sorted = b;
  std::swap(b_sorted.devices[0], b_sorted.devices[1]);
  EXPECT_THAT(Reopened(), ElementsAre(a, b_sorted));
  EXPECT_TRUE(j.journal->Contains(kNvme, "uid-a"));
  ASSERT_OK(j.journal->Remove(kNvme, "uid-a"));
  ASSERT_OK(j.journal->Remove(kNvme, "uid-a"));  // Twice is fine.
  EXPECT_THAT(Reopened(), ElementsAre(b_sorted));
  ASSERT_OK_AND_ASSIGN(std::string text, ReadFileToString(path_));
  EXPECT_EQ(text,
            "pdc-handoff-journal v1\n"
            "devices.kubevirt.io/nvme uid-b default virt-launcher-uid-b "
            "0000:00:03.0,0000:00:04.0\n");
}

TEST_F(HandoffJournalTest, RefusesWhatWouldNotReadBack) {
  ASSERT_OK_AND_ASSIGN(HandoffJournal::Opened j, HandoffJournal::Open(path_));
  HandoffRecord spaced = Record("uid-a", {Addr("0000:00:03.0")});
  spaced.pod_name = "virt launcher";
  EXPECT_THAT(j.journal->Put(spaced),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("white space")));
  EXPECT_THAT(j.journal->Put(Record("uid-a", {})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no device")));
  EXPECT_THAT(Reopened(), IsEmpty());
}

TEST_F(HandoffJournalTest, CorruptLineIsNamedAndTheOthersKept) {
  const std::string content =
      "pdc-handoff-journal v1\n"
      "devices.kubevirt.io/nvme uid-a default virt-launcher-a 0000:00:03.0\n"
      "devices.kubevirt.io/nvme uid-b default virt-launcher-b 0000:zz:04.0\n"
      "devices.kubevirt.io/nvme uid-c default\n"
      "devices.kubevirt.io/nvme uid-d default virt-launcher-d 0000:00:05.0\n";
  ASSERT_OK(WriteFileAtomically(path_, content));
  ASSERT_OK_AND_ASSIGN(HandoffJournal::Opened j, HandoffJournal::Open(path_));
  ASSERT_EQ(j.corrupt.size(), 2u);
  EXPECT_THAT(j.corrupt[0], StatusIs(absl::StatusCode::kDataLoss,
                                     HasSubstr(path_ + ":3: bad PCI address")));
  EXPECT_THAT(j.corrupt[1],
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr(path_ + ":4: want 5 fields")));
  std::vector<std::string> uids;
  for (const HandoffRecord& r : j.journal->Entries()) uids.push_back(r.pod_uid);
  EXPECT_THAT(uids, ElementsAre("uid-a", "uid-d"));
  // What could not be read is kept for a person, also after the next write.
  ASSERT_OK(j.journal->Remove(kNvme, "uid-a"));
  ASSERT_OK_AND_ASSIGN(std::string kept, ReadFileToString(path_ + ".corrupt"));
  EXPECT_EQ(kept, content);
  EXPECT_THAT(Reopened(), ElementsAre(HandoffRecord{kNvme, "uid-d", "default", "virt-launcher-d",
                                                 {Addr("0000:00:05.0")}}));
}

TEST_F(HandoffJournalTest, OtherFileIsNamedNotRead) {
  ASSERT_OK(WriteFileAtomically(path_, "pdc-vfio-journal v1\n0000:00:03.0 bound nvme -\n"));
  ASSERT_OK_AND_ASSIGN(HandoffJournal::Opened j, HandoffJournal::Open(path_));
  ASSERT_EQ(j.corrupt.size(), 1u);
  EXPECT_THAT(j.corrupt[0], StatusIs(absl::StatusCode::kDataLoss,
                                     HasSubstr(path_ + ":1: first line is not")));
  EXPECT_THAT(j.journal->Entries(), IsEmpty());
}

}  // namespace
}  // namespace pdc::driver::deviceplugin
