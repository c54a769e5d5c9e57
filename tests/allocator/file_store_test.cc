#include "allocator/file_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/inventory_builders.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace pdc {
namespace {

using ::pdc::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// The durable state a store carries, rebuilt from records the way the
// allocator does it, so "state after recovery == state before" is checkable.
struct Model {
  std::map<ClaimKey, Claim> claims;
  std::map<std::string, NodeRecord> nodes;
  uint64_t revision = 0;

  absl::Status Apply(const Record& r) {
    for (const Mutation& m : r.mutations) {
      if (const auto* p = std::get_if<PutClaim>(&m)) {
        claims[p->claim.key] = p->claim;
      } else if (const auto* p = std::get_if<DeleteClaim>(&m)) {
        claims.erase(p->key);
      } else if (const auto* p = std::get_if<PutNode>(&m)) {
        nodes[p->node.inventory.node] = p->node;
      } else if (const auto* p = std::get_if<DeleteNode>(&m)) {
        nodes.erase(p->node);
      }
    }
    revision = r.revision;
    return absl::OkStatus();
  }

  Record Snapshot() const {
    Record r;
    r.revision = revision;
    for (const auto& [key, claim] : claims)
      r.mutations.push_back(PutClaim{claim});
    for (const auto& [name, node] : nodes) r.mutations.push_back(PutNode{node});
    return r;
  }

  bool operator==(const Model&) const = default;
};

// A deterministic mix of mutations for `revision`.
Record MakeRecord(uint64_t revision) {
  Record r;
  r.revision = revision;
  Claim c;
  c.key = {"ns", absl::StrCat("claim-", revision % 13)};
  c.uid = absl::StrCat("uid-", revision);
  c.spec.resource_name = "devices.kubevirt.io/nvme";
  c.status.phase = ClaimPhase::kBound;
  c.status.node = absl::StrCat("node-", revision % 3);
  c.status.devices = {
      {PciAddress(0, static_cast<uint8_t>(revision % 200), 0, 0),
       absl::StrCat("SN", revision)}};
  r.mutations.push_back(PutClaim{c});
  if (revision % 5 == 0) {
    r.mutations.push_back(
        DeleteClaim{{"ns", absl::StrCat("claim-", revision % 7)}});
  }
  if (revision % 4 == 0) {
    NodeRecord n;
    n.inventory.node = absl::StrCat("node-", revision % 3);
    n.inventory.devices.push_back(
        testing::NvmeDevice("0000:3b:00.0", /*iommu_group=*/-1, /*numa_node=*/-1,
                            absl::StrCat("SN", revision)));
    r.mutations.push_back(PutNode{n});
  }
  return r;
}

std::string SegmentPath(const testing::TempDir& dir, uint64_t first) {
  return dir.Join(wal::SegmentFileName(first));
}

std::vector<std::string> DataFiles(const std::string& dir) {
  std::vector<std::string> out;
  auto names = ListDirectory(dir);
  for (const std::string& n : names.value()) {
    if (n != "LOCK") out.push_back(n);
  }
  return out;
}

// Opens a store on `dir` and recovers into *model.
absl::StatusOr<std::unique_ptr<FileStore>> OpenAndRecover(
    const std::string& dir, Model* model, RecoveryReport* report = nullptr,
    FileStoreOptions options = {}) {
  auto store = FileStore::Open(dir, options);
  if (!store.ok()) return store.status();
  auto rep =
      (*store)->Recover([model](const Record& r) { return model->Apply(r); });
  if (!rep.ok()) return rep.status();
  if (report) *report = *rep;
  return store;
}

// Appends and syncs records first..last, mirroring them into *model.
void AppendRange(FileStore& store, Model* model, uint64_t first,
                 uint64_t last) {
  for (uint64_t r = first; r <= last; ++r) {
    Record rec = MakeRecord(r);
    ASSERT_OK_AND_ASSIGN(Store::Ticket t, store.Append(rec));
    ASSERT_OK(store.Sync(t));
    ASSERT_OK(model->Apply(rec));
  }
}

void Checkpoint(FileStore& store, const Model& model) {
  ASSERT_OK(store.BeginCheckpoint(model.revision));
  ASSERT_OK(store.WriteCheckpoint(model.Snapshot()));
}

TEST(FileStoreTest, FreshDirectoryRecoversEmpty) {
  testing::TempDir tmp;
  Model model;
  RecoveryReport report;
  ASSERT_OK_AND_ASSIGN(auto store,
                       OpenAndRecover(tmp.Join("a/b"), &model, &report));
  EXPECT_EQ(report.last_revision, 0u);
  EXPECT_EQ(report.snapshot_revision, 0u);
  EXPECT_THAT(report.torn_tail, IsEmpty());
  EXPECT_OK(store->Health());
}

TEST(FileStoreTest, RecoversFromLogsOnly) {
  testing::TempDir tmp;
  Model before;
  {
    Model empty;
    ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.path(), &empty));
    AppendRange(*store, &before, 1, 100);
    EXPECT_EQ(store->RecordsSinceCheckpoint(), 100u);
  }
  Model after;
  RecoveryReport report;
  ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.path(), &after, &report));
  EXPECT_EQ(after, before);
  EXPECT_EQ(report.records_replayed, 100u);
  EXPECT_EQ(report.last_revision, 100u);
  EXPECT_THAT(report.torn_tail, IsEmpty());
  EXPECT_EQ(store->RecordsSinceCheckpoint(), 100u);
}

TEST(FileStoreTest, RecoversFromSnapshotOnly) {
  testing::TempDir tmp;
  Model before;
  {
    Model empty;
    ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.path(), &empty));
    AppendRange(*store, &before, 1, 50);
    Checkpoint(*store, before);
    EXPECT_EQ(store->RecordsSinceCheckpoint(), 0u);
  }
  // The log from revision 1 stays: the way back if the snapshot cannot be
  // read.
  EXPECT_THAT(DataFiles(tmp.path()),
              ElementsAre("snapshot-00000000000000000050.snap", "wal-00000000000000000001.log",
                          "wal-00000000000000000051.log"));
  Model after;
  RecoveryReport report;
  ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.path(), &after, &report));
  EXPECT_EQ(after, before);
  EXPECT_EQ(report.snapshot_revision, 50u);
  EXPECT_EQ(report.records_replayed, 0u);
  EXPECT_EQ(report.last_revision, 50u);
}

TEST(FileStoreTest, RecoversFromSnapshotAndLogsAcrossCheckpoints) {
  testing::TempDir tmp;
  Model before;
  {
    Model empty;
    ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.path(), &empty));
    for (int round = 0; round < 5; ++round) {
      AppendRange(*store, &before, before.revision + 1, before.revision + 30);
      Checkpoint(*store, before);
    }
    AppendRange(*store, &before, 151, 167);
    EXPECT_EQ(store->RecordsSinceCheckpoint(), 17u);
    EXPECT_EQ(store->GetStats().snapshots_written, 5u);
  }
  // The newest snapshot and the one before it, with the log after that one;
  // older snapshots and the segments they cover are gone.
  EXPECT_THAT(DataFiles(tmp.path()),
              ElementsAre("snapshot-00000000000000000120.snap",
                          "snapshot-00000000000000000150.snap", "wal-00000000000000000121.log",
                          "wal-00000000000000000151.log"));
  Model after;
  RecoveryReport report;
  ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.path(), &after, &report));
  EXPECT_EQ(after, before);
  EXPECT_EQ(report.snapshot_revision, 150u);
  EXPECT_EQ(report.records_replayed, 17u);
  EXPECT_EQ(report.last_revision, 167u);
  // And the recovered store keeps going.
  AppendRange(*store, &before, 168, 170);
  Checkpoint(*store, before);
  store.reset();
  Model again;
  ASSERT_OK_AND_ASSIGN(store, OpenAndRecover(tmp.path(), &again));
  EXPECT_EQ(again, before);
}

TEST(FileStoreTest, CheckpointWithNothingAppendedSinceTheLastOne) {
  testing::TempDir tmp;
  Model before;
  {
    Model empty;
    ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.path(), &empty));
    AppendRange(*store, &before, 1, 10);
    Checkpoint(*store, before);
    Checkpoint(*store, before);
    AppendRange(*store, &before, 11, 12);
  }
  Model after;
  ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.path(), &after));
  EXPECT_EQ(after, before);
}

TEST(FileStoreTest, IgnoresSegmentsLeftBehindByACrashDuringCheckpoint) {
  testing::TempDir tmp;
  Model before;
  const std::string first = SegmentPath(tmp, 1);
  const std::string copy = tmp.Join("saved");
  {
    Model empty;
    ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.path(), &empty));
    AppendRange(*store, &before, 1, 20);
    std::filesystem::copy_file(first, copy);
    Checkpoint(*store, before);
    AppendRange(*store, &before, 21, 25);
  }
  // The crash hit after the snapshot's rename, before the unlink.
  std::filesystem::rename(copy, first);
  Model after;
  RecoveryReport report;
  ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.path(), &after, &report));
  EXPECT_EQ(after, before);
  EXPECT_EQ(report.records_replayed, 5u);
  // The next checkpoint removes the leftover.
  Checkpoint(*store, before);
  EXPECT_FALSE(std::filesystem::exists(first));
}

TEST(FileStoreTest, TornTailAtEveryCutIsDroppedReportedAndRepaired) {
  testing::TempDir tmp;
  constexpr uint64_t kRecords = 6;
  // Size of the log with kRecords - 1 and with kRecords records.
  std::string full;
  {
    Model m;
    ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.Join("probe"), &m));
    AppendRange(*store, &m, 1, kRecords);
  }
  ASSERT_OK_AND_ASSIGN(
      full, ReadFileToString(tmp.Join("probe/") + wal::SegmentFileName(1)));
  const wal::SegmentScan scan = wal::ScanSegment(full);
  ASSERT_EQ(scan.frames.size(), kRecords);
  const size_t last_offset = scan.frames.back().offset;

  for (size_t keep = last_offset + 1; keep < full.size(); ++keep) {
    SCOPED_TRACE(keep);
    const std::string dir = tmp.Join(absl::StrCat("cut-", keep));
    ASSERT_OK(MakeDirectories(dir));
    const std::string seg = dir + "/" + wal::SegmentFileName(1);
    ASSERT_OK(WriteFileAtomically(seg, full.substr(0, keep)));

    Model expected;
    for (uint64_t r = 1; r < kRecords; ++r)
      ASSERT_OK(expected.Apply(MakeRecord(r)));
    Model after;
    RecoveryReport report;
    ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(dir, &after, &report));
    EXPECT_EQ(after, expected);
    EXPECT_EQ(report.last_revision, kRecords - 1);
    EXPECT_THAT(
        report.torn_tail,
        HasSubstr(absl::StrCat(seg, " at offset ", last_offset, ": dropped ",
                               keep - last_offset, " bytes")));
    // The tail was cut before new appends, which survive another recovery.
    AppendRange(*store, &expected, kRecords, kRecords + 1);
    store.reset();
    Model again;
    ASSERT_OK_AND_ASSIGN(store, OpenAndRecover(dir, &again, &report));
    EXPECT_EQ(again, expected);
    EXPECT_THAT(report.torn_tail, IsEmpty());
    EXPECT_EQ(report.last_revision, kRecords + 1);
  }
}

// Appends `bytes` to the file at `path`.
void AppendToFile(const std::string& path, const std::string& bytes) {
  auto data = ReadFileToString(path);
  ASSERT_OK(data.status());
  ASSERT_OK(WriteFileAtomically(path, *data + bytes));
}

void FlipByte(const std::string& path, size_t offset) {
  auto data = ReadFileToString(path);
  ASSERT_OK(data.status());
  ASSERT_LT(offset, data->size());
  (*data)[offset] ^= 0x20;
  ASSERT_OK(WriteFileAtomically(path, *data));
}

TEST(FileStoreTest, ZeroTailIsTorn) {
  testing::TempDir tmp;
  Model before;
  {
    Model empty;
    ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.path(), &empty));
    AppendRange(*store, &before, 1, 10);
  }
  AppendToFile(SegmentPath(tmp, 1), std::string(4096, '\0'));
  Model after;
  RecoveryReport report;
  ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.path(), &after, &report));
  EXPECT_EQ(after, before);
  EXPECT_THAT(report.torn_tail, HasSubstr("dropped 4096 bytes"));
}

TEST(FileStoreTest, FlippedByteInAMiddleRecordIsDataLossNamingFileAndOffset) {
  testing::TempDir tmp;
  {
    Model m;
    ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.path(), &m));
    AppendRange(*store, &m, 1, 10);
  }
  const std::string seg = SegmentPath(tmp, 1);
  ASSERT_OK_AND_ASSIGN(std::string data, ReadFileToString(seg));
  const wal::SegmentScan scan = wal::ScanSegment(data);
  ASSERT_EQ(scan.frames.size(), 10u);
  const uint64_t offset = scan.frames[4].offset;
  FlipByte(seg, offset + wal::kHeaderSize + 3);
  Model after;
  EXPECT_THAT(
      OpenAndRecover(tmp.path(), &after),
      StatusIs(absl::StatusCode::kDataLoss,
               HasSubstr(absl::StrCat(seg, " at offset ", offset, ": "))));
}

// A snapshot that does not decode is skipped for the previous one (here:
// none, the log from revision 1), reported, and set aside; only when the
// log that fallback needs is gone is it DataLoss.
TEST(FileStoreTest, UnreadableSnapshotFallsBackToThePreviousOne) {
  for (bool previous_snapshot : {false, true}) {
    SCOPED_TRACE(previous_snapshot);
    testing::TempDir tmp;
    Model before;
    {
      Model m;
      ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.path(), &m));
      AppendRange(*store, &before, 1, 10);
      if (previous_snapshot) Checkpoint(*store, before);
      AppendRange(*store, &before, 11, 20);
      Checkpoint(*store, before);
      AppendRange(*store, &before, 21, 23);
    }
    const std::string snap = tmp.Join(wal::SnapshotFileName(20));
    FlipByte(snap, 40);
    Model after;
    RecoveryReport report;
    ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.path(), &after, &report));
    EXPECT_EQ(after, before);
    EXPECT_EQ(report.snapshot_revision, previous_snapshot ? 10u : 0u);
    EXPECT_EQ(report.last_revision, 23u);
    EXPECT_THAT(report.skipped_snapshots,
                ElementsAre(::testing::AllOf(HasSubstr(snap + " at offset"),
                                             HasSubstr("checksum mismatch"))));
    EXPECT_FALSE(std::filesystem::exists(snap));
    EXPECT_TRUE(std::filesystem::exists(snap + ".unreadable"));
    // The store goes on, and the set-aside file is never read again.
    AppendRange(*store, &before, 24, 25);
    Checkpoint(*store, before);
    store.reset();
    Model again;
    ASSERT_OK_AND_ASSIGN(store, OpenAndRecover(tmp.path(), &again, &report));
    EXPECT_EQ(again, before);
    EXPECT_EQ(report.snapshot_revision, 25u);
    EXPECT_THAT(report.skipped_snapshots, IsEmpty());
  }
}

TEST(FileStoreTest, UnreadableSnapshotWithoutTheLogBeforeItIsDataLoss) {
  testing::TempDir tmp;
  {
    Model m;
    ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.path(), &m));
    AppendRange(*store, &m, 1, 10);
    Checkpoint(*store, m);
    AppendRange(*store, &m, 11, 12);
  }
  const std::string snap = tmp.Join(wal::SnapshotFileName(10));
  FlipByte(snap, 40);
  ASSERT_EQ(::unlink(SegmentPath(tmp, 1).c_str()), 0);
  Model after;
  EXPECT_THAT(OpenAndRecover(tmp.path(), &after),
              StatusIs(absl::StatusCode::kDataLoss,
                       ::testing::AllOf(HasSubstr("missing"),
                                        HasSubstr("without the unreadable snapshot " + snap))));
  // Nothing was set aside by the failed recovery.
  EXPECT_TRUE(std::filesystem::exists(snap));
}

// Three segments: 1..10, 11..20, 21..30.
void WriteThreeSegments(const std::string& dir) {
  Model m;
  ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(dir, &m));
  AppendRange(*store, &m, 1, 10);
  ASSERT_OK(store->BeginCheckpoint(10));
  AppendRange(*store, &m, 11, 20);
  ASSERT_OK(store->BeginCheckpoint(20));
  AppendRange(*store, &m, 21, 30);
}

TEST(FileStoreTest, MissingSegmentIsDataLoss) {
  for (uint64_t missing : {1u, 11u}) {
    SCOPED_TRACE(missing);
    testing::TempDir tmp;
    WriteThreeSegments(tmp.path());
    ASSERT_EQ(::unlink(SegmentPath(tmp, missing).c_str()), 0);
    Model after;
    EXPECT_THAT(OpenAndRecover(tmp.path(), &after),
                StatusIs(absl::StatusCode::kDataLoss, HasSubstr("missing")));
  }
}

TEST(FileStoreTest, TornRecordInAnEarlierSegmentIsDataLoss) {
  testing::TempDir tmp;
  WriteThreeSegments(tmp.path());
  AppendToFile(SegmentPath(tmp, 11), "partial");
  Model after;
  EXPECT_THAT(OpenAndRecover(tmp.path(), &after),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("not the last")));
}

TEST(FileStoreTest, AllThreeSegmentsReplay) {
  testing::TempDir tmp;
  WriteThreeSegments(tmp.path());
  Model after;
  RecoveryReport report;
  ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.path(), &after, &report));
  EXPECT_EQ(report.records_replayed, 30u);
  EXPECT_EQ(after.revision, 30u);
}

// A crash right after a rotation created the next segment, before any
// record reached it.
TEST(FileStoreTest, EmptyLastSegmentTakesTheNextRecords) {
  testing::TempDir tmp;
  Model before;
  {
    Model empty;
    ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.path(), &empty));
    AppendRange(*store, &before, 1, 10);
  }
  ASSERT_OK(WriteFileAtomically(SegmentPath(tmp, 11), ""));
  ASSERT_OK(WriteFileAtomically(
      tmp.Join("snapshot-00000000000000000010.snap.tmp"), "x"));
  {
    Model after;
    RecoveryReport report;
    ASSERT_OK_AND_ASSIGN(auto store,
                         OpenAndRecover(tmp.path(), &after, &report));
    EXPECT_EQ(after, before);
    EXPECT_THAT(report.torn_tail, IsEmpty());
    AppendRange(*store, &before, 11, 12);
  }
  // The unfinished snapshot is gone; record 11 went to the empty segment.
  EXPECT_THAT(DataFiles(tmp.path()),
              ElementsAre("wal-00000000000000000001.log",
                          "wal-00000000000000000011.log"));
  Model after;
  ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.path(), &after));
  EXPECT_EQ(after, before);
}

TEST(FileStoreTest, SegmentStartingPastTheLogIsDataLoss) {
  testing::TempDir tmp;
  {
    Model m;
    ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.path(), &m));
    AppendRange(*store, &m, 1, 10);
  }
  ASSERT_OK(WriteFileAtomically(SegmentPath(tmp, 15), ""));
  Model after;
  EXPECT_THAT(OpenAndRecover(tmp.path(), &after),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("wal-00000000000000000015.log at offset 0")));
}

TEST(FileStoreTest, RecordsSinceCheckpointSurvivesRecovery) {
  testing::TempDir tmp;
  Model before;
  {
    Model empty;
    ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.path(), &empty));
    AppendRange(*store, &before, 1, 8);
    Checkpoint(*store, before);
    AppendRange(*store, &before, 9, 11);
  }
  Model after;
  ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.path(), &after));
  EXPECT_EQ(store->RecordsSinceCheckpoint(), 3u);
}

TEST(FileStoreTest, SecondOpenOfTheSameDirectoryIsRefused) {
  testing::TempDir tmp;
  ASSERT_OK_AND_ASSIGN(auto first, FileStore::Open(tmp.path()));
  EXPECT_THAT(
      FileStore::Open(tmp.path()),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("in use")));
  first.reset();
  EXPECT_OK(FileStore::Open(tmp.path()).status());
}

TEST(FileStoreTest, ProtocolViolationsAreErrors) {
  testing::TempDir tmp;
  ASSERT_OK_AND_ASSIGN(auto store, FileStore::Open(tmp.path()));
  EXPECT_THAT(store->Append(MakeRecord(1)),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  Model m;
  ASSERT_OK(
      store->Recover([&m](const Record& r) { return m.Apply(r); }).status());
  EXPECT_THAT(store->Append(MakeRecord(2)),
              StatusIs(absl::StatusCode::kInternal));
  EXPECT_THAT(store->Sync(5), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store->BeginCheckpoint(3), StatusIs(absl::StatusCode::kInternal));
  // None of these is an I/O failure: the store stays healthy.
  EXPECT_OK(store->Health());
}

// FileOps whose syncs block until released, and that can fail on demand.
class ControlledOps : public wal::FileOps {
 public:
  absl::Status SyncData(int fd, const std::string& path) override {
    {
      absl::MutexLock lock(&mu_);
      ++sync_calls_;
      if (block_syncs_) {
        blocked_ = true;
        mu_.Await(absl::Condition(
            +[](bool* block) { return !*block; }, &block_syncs_));
        blocked_ = false;
      }
      if (fail_syncs_)
        return absl::DataLossError("fdatasync " + path + ": EIO");
    }
    return FileOps::SyncData(fd, path);
  }
  absl::Status Write(int fd, std::string_view data,
                     const std::string& path) override {
    {
      absl::MutexLock lock(&mu_);
      if (fail_writes_)
        return absl::ResourceExhaustedError("write " + path + ": ENOSPC");
    }
    return FileOps::Write(fd, data, path);
  }
  absl::Status WriteFileAtomically(const std::string& path,
                                   std::string_view data) override {
    {
      absl::MutexLock lock(&mu_);
      if (fail_snapshots_)
        return absl::UnavailableError("fsync " + path + ": EIO");
    }
    return FileOps::WriteFileAtomically(path, data);
  }

  void BlockSyncs(bool block) {
    absl::MutexLock lock(&mu_);
    block_syncs_ = block;
  }
  void WaitUntilBlocked() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&blocked_));
  }
  void FailSyncs() {
    absl::MutexLock lock(&mu_);
    fail_syncs_ = true;
  }
  void FailWrites() {
    absl::MutexLock lock(&mu_);
    fail_writes_ = true;
  }
  void FailSnapshots(bool fail) {
    absl::MutexLock lock(&mu_);
    fail_snapshots_ = fail;
  }

 private:
  absl::Mutex mu_;
  int sync_calls_ ABSL_GUARDED_BY(mu_) = 0;
  bool block_syncs_ ABSL_GUARDED_BY(mu_) = false;
  bool blocked_ ABSL_GUARDED_BY(mu_) = false;
  bool fail_syncs_ ABSL_GUARDED_BY(mu_) = false;
  bool fail_writes_ ABSL_GUARDED_BY(mu_) = false;
  bool fail_snapshots_ ABSL_GUARDED_BY(mu_) = false;
};

// Deterministic group commit: while the first leader is inside fdatasync,
// seven more records arrive; one flush then covers all seven.
TEST(FileStoreTest, WaitingSyncsShareOneFlush) {
  testing::TempDir tmp;
  ControlledOps ops;
  Model m;
  ASSERT_OK_AND_ASSIGN(
      auto store, OpenAndRecover(tmp.path(), &m, nullptr, {.file_ops = &ops}));
  ops.BlockSyncs(true);
  ASSERT_OK_AND_ASSIGN(Store::Ticket first, store->Append(MakeRecord(1)));
  std::thread leader([&] { EXPECT_OK(store->Sync(first)); });
  ops.WaitUntilBlocked();
  std::vector<std::thread> followers;
  for (uint64_t r = 2; r <= 8; ++r) {
    ASSERT_OK_AND_ASSIGN(Store::Ticket t, store->Append(MakeRecord(r)));
    followers.emplace_back([&store, t] { EXPECT_OK(store->Sync(t)); });
  }
  ops.BlockSyncs(false);
  leader.join();
  for (std::thread& t : followers) t.join();
  const FileStore::Stats stats = store->GetStats();
  EXPECT_EQ(stats.records, 8u);
  EXPECT_EQ(stats.syncs, 2u);
}

TEST(FileStoreTest, ConcurrentSyncsAreDurableWithFewerSyncsThanRecords) {
  testing::TempDir tmp;
  constexpr int kThreads = 8;
  constexpr int kPerThread = 150;
  Model before;
  {
    Model empty;
    ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.path(), &empty));
    absl::Mutex append_mu;  // Plays the allocator's lock.
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&] {
        for (int k = 0; k < kPerThread; ++k) {
          absl::StatusOr<Store::Ticket> t;
          {
            absl::MutexLock lock(&append_mu);
            Record rec = MakeRecord(before.revision + 1);
            t = store->Append(rec);
            ASSERT_OK(t.status());
            ASSERT_OK(before.Apply(rec));
          }
          ASSERT_OK(store->Sync(*t));
        }
      });
    }
    for (std::thread& t : threads) t.join();
    const FileStore::Stats stats = store->GetStats();
    EXPECT_EQ(stats.records, uint64_t{kThreads * kPerThread});
    EXPECT_LT(stats.syncs, stats.records);
  }
  Model after;
  RecoveryReport report;
  ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.path(), &after, &report));
  EXPECT_EQ(report.records_replayed, uint64_t{kThreads * kPerThread});
  EXPECT_EQ(after, before);
}

// Checkpoints taken while binders append and sync, the way the allocator
// does it: Append and BeginCheckpoint under one lock, Sync and
// WriteCheckpoint outside it.
TEST(FileStoreTest, CheckpointsWhileOthersSync) {
  uint64_t written = 0;
  testing::TempDir tmp;
  Model before;
  {
    Model empty;
    ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.path(), &empty));
    absl::Mutex allocator_mu;
    std::atomic<bool> done{false};
    std::vector<std::thread> binders;
    for (int i = 0; i < 4; ++i) {
      binders.emplace_back([&] {
        for (int k = 0; k < 100; ++k) {
          absl::StatusOr<Store::Ticket> t;
          {
            absl::MutexLock lock(&allocator_mu);
            Record rec = MakeRecord(before.revision + 1);
            t = store->Append(rec);
            ASSERT_OK(t.status());
            ASSERT_OK(before.Apply(rec));
          }
          ASSERT_OK(store->Sync(*t));
        }
      });
    }
    // At least one checkpoint whatever the scheduling: on a fast file system
    // the binders can finish before this thread first runs.
    std::thread checkpointer([&] {
      do {
        Record snapshot;
        {
          absl::MutexLock lock(&allocator_mu);
          snapshot = before.Snapshot();
          ASSERT_OK(store->BeginCheckpoint(snapshot.revision));
        }
        ASSERT_OK(store->WriteCheckpoint(snapshot));
      } while (!done.load());
    });
    for (std::thread& t : binders) t.join();
    done = true;
    checkpointer.join();
    written = store->GetStats().snapshots_written;
    EXPECT_GE(written, 1u);
  }
  Model after;
  ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.path(), &after));
  EXPECT_EQ(after, before);
  // The newest snapshot and, once there were two, the one before it.
  std::vector<std::string> files = DataFiles(tmp.path());
  EXPECT_EQ(
      std::count_if(files.begin(), files.end(),
                    [](const std::string& f) { return f.ends_with(".snap"); }),
      std::min<uint64_t>(written, 2));
}

TEST(FileStoreTest, SyncFailureIsSticky) {
  testing::TempDir tmp;
  ControlledOps ops;
  Model before;
  {
    Model empty;
    ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.path(), &empty, nullptr,
                                                    {.file_ops = &ops}));
    AppendRange(*store, &before, 1, 5);
    ops.FailSyncs();
    ASSERT_OK_AND_ASSIGN(Store::Ticket t, store->Append(MakeRecord(6)));
    const absl::Status failed = store->Sync(t);
    EXPECT_THAT(failed,
                StatusIs(absl::StatusCode::kDataLoss, HasSubstr("EIO")));
    EXPECT_EQ(store->Health(), failed);
    // Sticky: every later call fails the same way, even an already durable
    // ticket, and nothing more is appended.
    EXPECT_EQ(store->Sync(t), failed);
    EXPECT_EQ(store->Sync(1), failed);
    EXPECT_EQ(store->Append(MakeRecord(7)).status(), failed);
    EXPECT_EQ(store->BeginCheckpoint(6), failed);
    EXPECT_EQ(store->WriteCheckpoint(before.Snapshot()), failed);
  }
  // The acknowledged records survive (the unacknowledged one may or may not).
  Model after;
  RecoveryReport report;
  ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.path(), &after, &report));
  EXPECT_GE(report.last_revision, 5u);
}

TEST(FileStoreTest, WriteFailureIsSticky) {
  testing::TempDir tmp;
  ControlledOps ops;
  Model m;
  ASSERT_OK_AND_ASSIGN(
      auto store, OpenAndRecover(tmp.path(), &m, nullptr, {.file_ops = &ops}));
  AppendRange(*store, &m, 1, 2);
  ops.FailWrites();
  ASSERT_OK_AND_ASSIGN(Store::Ticket t, store->Append(MakeRecord(3)));
  EXPECT_THAT(store->Sync(t), StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(store->Health(), StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(store->Append(MakeRecord(4)),
              StatusIs(absl::StatusCode::kResourceExhausted));
}

// A failed snapshot write loses nothing and stops nothing: the log holds
// every record, appends go on, the checkpoint is due again, and the next one
// succeeds.
TEST(FileStoreTest, SnapshotFailureIsNotStickyAndKeepsTheLog) {
  testing::TempDir tmp;
  ControlledOps ops;
  Model before;
  {
    Model empty;
    ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.path(), &empty, nullptr,
                                                    {.file_ops = &ops}));
    AppendRange(*store, &before, 1, 5);
    ops.FailSnapshots(true);
    ASSERT_OK(store->BeginCheckpoint(5));
    EXPECT_THAT(store->WriteCheckpoint(before.Snapshot()),
                StatusIs(absl::StatusCode::kUnavailable));
    EXPECT_OK(store->Health());
    EXPECT_EQ(store->RecordsSinceCheckpoint(), 5u);
    AppendRange(*store, &before, 6, 8);
    EXPECT_EQ(store->RecordsSinceCheckpoint(), 8u);
    EXPECT_EQ(store->GetStats().snapshots_written, 0u);
  }
  Model after;
  RecoveryReport report;
  {
    ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.path(), &after, &report,
                                                    {.file_ops = &ops}));
    EXPECT_EQ(after, before);
    EXPECT_EQ(report.snapshot_revision, 0u);
    ops.FailSnapshots(false);
    Checkpoint(*store, before);
    EXPECT_EQ(store->RecordsSinceCheckpoint(), 0u);
  }
  Model again;
  ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.path(), &again, &report));
  EXPECT_EQ(again, before);
  EXPECT_EQ(report.snapshot_revision, 8u);
}

// The log's growth since the last snapshot, in frame bytes: what appends
// add, a checkpoint clears, a failed snapshot restores, and recovery counts
// from the segments.
TEST(FileStoreTest, BytesSinceCheckpointFollowTheLog) {
  testing::TempDir tmp;
  ControlledOps ops;
  Model before;
  uint64_t bytes = 0;
  for (uint64_t r = 9; r <= 11; ++r) bytes += wal::kHeaderSize + EncodeRecord(MakeRecord(r)).size();
  {
    Model empty;
    ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.path(), &empty, nullptr,
                                                    {.file_ops = &ops}));
    AppendRange(*store, &before, 1, 8);
    EXPECT_GT(store->BytesSinceCheckpoint(), 8 * wal::kHeaderSize);
    Checkpoint(*store, before);
    EXPECT_EQ(store->BytesSinceCheckpoint(), 0u);
    AppendRange(*store, &before, 9, 11);
    EXPECT_EQ(store->BytesSinceCheckpoint(), bytes);
    ops.FailSnapshots(true);
    ASSERT_OK(store->BeginCheckpoint(11));
    EXPECT_EQ(store->BytesSinceCheckpoint(), 0u);
    EXPECT_FALSE(store->WriteCheckpoint(before.Snapshot()).ok());
    EXPECT_EQ(store->BytesSinceCheckpoint(), bytes);
  }
  Model after;
  ASSERT_OK_AND_ASSIGN(auto store, OpenAndRecover(tmp.path(), &after));
  EXPECT_EQ(store->BytesSinceCheckpoint(), bytes);
}

}  // namespace
}  // namespace pdc
