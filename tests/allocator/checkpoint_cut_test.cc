// Checkpoints that do not stop mutations (docs/design.md §8.4): the snapshot
// is encoded in chunks with the allocator's lock released between them, and
// mutations made meanwhile must neither leak into it nor be lost. Each test
// mutates from the checkpoint's between-chunks hook, so the interleaving is
// exact and repeatable; allocator_concurrency_test does the same with real
// threads.
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "allocator/allocator.h"
#include "allocator/allocator_impl.h"
#include "allocator/file_store.h"
#include "allocator/memory_store.h"
#include "allocator/record.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/allocator/allocator_test_util.h"
#include "tests/testing/faulty_store.h"
#include "tests/testing/temp_dir.h"

namespace pdc::testing {
namespace {

using ::testing::SizeIs;

// Forwards to a MemoryStore and keeps the last snapshot it was given.
class SnapshotKeepingStore final : public Store {
 public:
  absl::StatusOr<RecoveryReport> Recover(const RecordVisitor& apply) override {
    return store_.Recover(apply);
  }
  absl::StatusOr<Ticket> Append(const Record& record) override { return store_.Append(record); }
  absl::Status Sync(Ticket ticket) override { return store_.Sync(ticket); }
  uint64_t RecordsSinceCheckpoint() const override { return store_.RecordsSinceCheckpoint(); }
  uint64_t BytesSinceCheckpoint() const override { return store_.BytesSinceCheckpoint(); }
  absl::Status BeginCheckpoint(uint64_t revision) override {
    return store_.BeginCheckpoint(revision);
  }
  absl::Status WriteEncodedCheckpoint(uint64_t revision, std::string_view snapshot) override {
    {
      absl::MutexLock lock(&mu_);
      last_snapshot_ = std::string(snapshot);
    }
    return store_.WriteEncodedCheckpoint(revision, snapshot);
  }
  absl::Status Health() const override { return store_.Health(); }

  std::string last_snapshot() const {
    absl::MutexLock lock(&mu_);
    return last_snapshot_;
  }

 private:
  MemoryStore store_;
  mutable absl::Mutex mu_;
  std::string last_snapshot_ ABSL_GUARDED_BY(mu_);
};

ClaimSpec DeletePolicySpec() {
  ClaimSpec s = Spec(kNvme, 1);
  s.reclaim_policy = ReclaimPolicy::kDelete;
  return s;
}

NodeInventory FourDrives(const std::string& node) {
  return Inventory(node, {NvmeDevice("0000:3b:00.0", 1, 0), NvmeDevice("0000:5e:00.0", 2, 0),
                          NvmeDevice("0000:86:00.0", 3, 1), NvmeDevice("0000:af:00.0", 4, 1)});
}

// The durable part of a node as the allocator shows it (last report and
// reporting are in memory only).
struct DurableNode {
  std::string name;
  std::vector<Device> devices;
  std::vector<PciAddress> return_to_host;
  std::vector<ReleasedDevice> released;
  bool operator==(const DurableNode&) const = default;
};

std::vector<DurableNode> DurableNodes(const Allocator& a) {
  std::vector<DurableNode> out;
  for (const NodeView& v : a.ListNodes()) {
    out.push_back({v.name, v.inventory.devices, v.return_to_host, v.released});
  }
  return out;
}

// Runs one step of `steps` per call, in order; the checkpoint calls it after
// the cut and after every chunk.
class Script {
 public:
  explicit Script(std::vector<std::function<void()>> steps) : steps_(std::move(steps)) {}
  void operator()() {
    if (next_ < steps_.size()) steps_[next_++]();
  }
  bool finished() const { return next_ == steps_.size(); }

 private:
  std::vector<std::function<void()>> steps_;
  size_t next_ = 0;
};

// Four nodes; bound template claims of vm1..vm6, a named claim, a claim with
// reclaimPolicy Delete, a Pending claim.
void Populate(Allocator& a) {
  for (const char* node : {"node-a", "node-b", "node-c", "node-d"}) {
    ASSERT_OK(a.ReplaceInventory(FourDrives(node)));
  }
  const char* nodes[] = {"node-a", "node-b", "node-c", "node-d", "node-a", "node-b"};
  for (int vm = 1; vm <= 6; ++vm) {
    ASSERT_OK(a.Bind(VmPod("vm" + std::to_string(vm), "u" + std::to_string(vm)), nodes[vm - 1])
                  .status());
  }
  ASSERT_OK(a.CreateClaim({"default", "data"}, Spec(kNvme, 1)).status());
  ASSERT_OK(a.Bind(VmPod("vm7", "u7", 1, {"data"}), "node-c").status());
  ASSERT_OK(a.CreateClaim({"default", "scratch"}, DeletePolicySpec()).status());
  ASSERT_OK(a.Bind(VmPod("vm8", "u8", 1, {"scratch"}), "node-d").status());
  ASSERT_OK(a.CreateClaim({"other", "pending"}, Spec(kNvme, 2)).status());
}

// Every kind of change, each to something the snapshot holds: claims
// created, changed, deleted and re-created under the same key; node records
// changed and removed.
std::vector<std::function<void()>> EveryKindOfChange(Allocator& a) {
  return {
      [&a] { ASSERT_OK(a.Bind(VmPod("vm-new", "n1"), "node-a").status()); },
      [&a] { ASSERT_OK(a.Release({"default", "vm1-nvme"}, "")); },
      // Retain: the drive turns Released, a change to node-b's record.
      [&a] { ASSERT_OK(a.DeleteClaim({"default", "vm2-nvme"}, /*force=*/true)); },
      [&a] { ASSERT_OK(a.CreateClaim({"default", "vm2-nvme"}, Spec(kNvme, 1)).status()); },
      [&a] {
        NodeInventory inv = FourDrives("node-c");
        inv.devices.pop_back();  // vm3's or vm7's drive may be gone: Lost.
        inv.devices[0].health = DeviceHealth::kUnhealthy;
        ASSERT_OK(a.ReplaceInventory(std::move(inv)));
      },
      // Delete: the drive goes on node-d's return list.
      [&a] { ASSERT_OK(a.DeleteClaim({"default", "scratch"}, /*force=*/true)); },
      [&a] { ASSERT_OK(a.RemoveNode("node-d")); },
      [&a] {
        const NodeView b = *a.GetNode("node-b");
        ASSERT_THAT(b.released, SizeIs(1));
        ASSERT_OK(a.ReleaseDevice("node-b", b.released[0].address));
      },
      [&a] { ASSERT_OK(a.DeleteClaim({"other", "pending"}, false)); },
      [&a] { ASSERT_OK(a.Bind(VmPod("vm1", "u1-again"), "node-a").status()); },
  };
}

// An allocator over a store that keeps the snapshot it was given, holding
// the populated state, and a script of every kind of change.
class CheckpointCutOverSnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(allocator, Allocator::Open(TestOptions(), &store, &clock));
    impl = dynamic_cast<AllocatorImpl*>(allocator.get());
    Populate(*allocator);
  }

  FakeClock clock;
  SnapshotKeepingStore store;
  std::unique_ptr<Allocator> allocator;
  AllocatorImpl* impl = nullptr;
};

TEST_F(CheckpointCutOverSnapshotTest, SnapshotIsTheStateAtItsRevisionWhateverChangesWhileItIsEncoded) {
  Script script(EveryKindOfChange(*allocator));
  impl->SetCheckpointChunkForTest(1, [&script] { script(); });
  const Record at_cut = impl->SnapshotForTest();

  ASSERT_OK(allocator->Checkpoint());
  ASSERT_TRUE(script.finished()) << "fewer chunks than steps: the test did not interleave";
  EXPECT_EQ(allocator->revision(), at_cut.revision + 10);
  // Byte for byte what the state at the cut encodes to, none of the ten
  // changes made during the encode in it.
  const std::string written = store.last_snapshot();
  EXPECT_EQ(written, EncodeRecord(at_cut));
  ASSERT_OK_AND_ASSIGN(const Record decoded, DecodeRecord(written));
  EXPECT_EQ(decoded, at_cut);
  EXPECT_EQ(impl->CheckInvariantsForTest(), "");

  // Recovery: the snapshot, then the ten records after it.
  const std::vector<Claim> claims = allocator->ListClaims("");
  const std::vector<DurableNode> nodes = DurableNodes(*allocator);
  const uint64_t revision = allocator->revision();
  const Record live = impl->SnapshotForTest();
  allocator.reset();
  RecoveryReport report;
  ASSERT_OK_AND_ASSIGN(auto recovered, Allocator::Open(TestOptions(), &store, &clock, &report));
  EXPECT_EQ(report.snapshot_revision, at_cut.revision);
  EXPECT_EQ(report.records_replayed, 10u);
  EXPECT_EQ(recovered->revision(), revision);
  EXPECT_EQ(recovered->ListClaims(""), claims);
  EXPECT_EQ(DurableNodes(*recovered), nodes);
  auto* recovered_impl = dynamic_cast<AllocatorImpl*>(recovered.get());
  EXPECT_EQ(recovered_impl->SnapshotForTest(), live);
  EXPECT_EQ(recovered_impl->CheckInvariantsForTest(), "");
}

// Once a checkpoint is done its pre-images are gone: the next one, with
// nothing happening meanwhile, writes the state as it is then.
TEST_F(CheckpointCutOverSnapshotTest, TheNextCheckpointWritesTheStateOfItsOwnCut) {
  Script script(EveryKindOfChange(*allocator));
  impl->SetCheckpointChunkForTest(1, [&script] { script(); });
  ASSERT_OK(allocator->Checkpoint());
  ASSERT_TRUE(script.finished());

  impl->SetCheckpointChunkForTest(2, nullptr);
  ASSERT_OK(allocator->Release({"default", "vm4-nvme"}, ""));
  const Record now = impl->SnapshotForTest();
  ASSERT_OK(allocator->Checkpoint());
  EXPECT_EQ(store.last_snapshot(), EncodeRecord(now));
}

// Mutations and reads go on while a checkpoint is between two chunks of its
// encode, from other threads.
TEST(CheckpointCutTest, MutationsAndReadsGoOnDuringTheEncode) {
  FakeClock clock;
  MemoryStore store;
  ASSERT_OK_AND_ASSIGN(auto allocator, Allocator::Open(TestOptions(), &store, &clock));
  auto* impl = dynamic_cast<AllocatorImpl*>(allocator.get());
  Populate(*allocator);
  absl::Notification entered, resume;
  int calls = 0;
  impl->SetCheckpointChunkForTest(2, [&] {
    if (++calls == 3) {  // Some of the state is encoded, not all.
      entered.Notify();
      resume.WaitForNotification();
    }
  });
  std::thread checkpoint([&] { EXPECT_OK(allocator->Checkpoint()); });
  entered.WaitForNotification();
  absl::Notification done;
  std::thread other([&] {
    EXPECT_OK(allocator->Bind(VmPod("vm-new", "n1"), "node-a").status());
    EXPECT_OK(allocator->Release({"default", "vm2-nvme"}, ""));
    const std::vector<std::string_view> nodes = {"node-a"};
    EXPECT_EQ(allocator->Filter(VmPod("vm-other", "o1"), nodes).nodes.size(), 1u);
    EXPECT_OK(allocator->GetClaim({"default", "vm-new-nvme"}).status());
    done.Notify();
  });
  // Were the lock held for the whole encode, this would wait for it.
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  resume.Notify();
  other.join();
  checkpoint.join();
  EXPECT_EQ(impl->CheckInvariantsForTest(), "");
}

// The data directory at some instant, as a crash would leave it (every
// acknowledged record is on disk by then), recovered into a new allocator.
struct CrashImage {
  std::string dir;
  uint64_t revision = 0;
  std::vector<Claim> claims;
  std::vector<DurableNode> nodes;
};

CrashImage TakeCrashImage(const std::string& from, const std::string& to, const Allocator& a) {
  std::filesystem::copy(from, to, std::filesystem::copy_options::recursive);
  return CrashImage{to, a.revision(), a.ListClaims(""), DurableNodes(a)};
}

void ExpectRecovers(const CrashImage& image, uint64_t snapshot_revision) {
  SCOPED_TRACE(image.dir);
  FakeClock clock;
  ASSERT_OK_AND_ASSIGN(auto store, FileStore::Open(image.dir));
  RecoveryReport report;
  ASSERT_OK_AND_ASSIGN(auto a, Allocator::Open(TestOptions(), store.get(), &clock, &report));
  EXPECT_EQ(report.snapshot_revision, snapshot_revision);
  EXPECT_EQ(a->revision(), image.revision);
  EXPECT_EQ(a->ListClaims(""), image.claims);
  EXPECT_EQ(DurableNodes(*a), image.nodes);
  EXPECT_EQ(dynamic_cast<AllocatorImpl*>(a.get())->CheckInvariantsForTest(), "");
}

// Crashes at each step of a checkpoint that mutations overlap: during the
// encode (the log already cut at the snapshot's revision, later records in
// the new segment, no snapshot yet), after the snapshot was written, and
// after a snapshot write that failed.
TEST(CheckpointCutTest, ACrashAtAnyStepOfAnOverlappedCheckpointRecoversTheLiveState) {
  TempDir tmp;
  const std::string dir = tmp.Join("data");
  FakeClock clock;
  ASSERT_OK_AND_ASSIGN(auto file_store, FileStore::Open(dir));
  FaultyStore store(file_store.get());
  ASSERT_OK_AND_ASSIGN(auto allocator, Allocator::Open(TestOptions(), &store, &clock));
  auto* impl = dynamic_cast<AllocatorImpl*>(allocator.get());
  Populate(*allocator);
  std::vector<std::function<void()>> steps = EveryKindOfChange(*allocator);
  std::optional<CrashImage> during;
  steps.insert(steps.begin() + 5,
               [&] { during = TakeCrashImage(dir, tmp.Join("during-encode"), *allocator); });
  Script script(std::move(steps));
  impl->SetCheckpointChunkForTest(1, [&script] { script(); });
  const uint64_t cut = allocator->revision();
  ASSERT_OK(allocator->Checkpoint());
  ASSERT_TRUE(script.finished());
  ASSERT_TRUE(during.has_value());
  EXPECT_EQ(during->revision, cut + 5);
  const CrashImage after = TakeCrashImage(dir, tmp.Join("after-snapshot"), *allocator);

  // A snapshot write that fails while mutations overlap it: the log keeps
  // everything, the previous snapshot stays the one recovery starts from.
  Script more({[&] { ASSERT_OK(allocator->Release({"default", "vm3-nvme"}, "")); },
               [&] { ASSERT_OK(allocator->Bind(VmPod("vm-late", "l1"), "node-b").status()); }});
  impl->SetCheckpointChunkForTest(1, [&more] { more(); });
  store.FailNextCheckpointWrite(absl::UnavailableError("snapshot: No space left on device"));
  EXPECT_FALSE(allocator->Checkpoint().ok());
  ASSERT_TRUE(more.finished());
  const CrashImage failed = TakeCrashImage(dir, tmp.Join("failed-snapshot"), *allocator);

  ExpectRecovers(*during, /*snapshot_revision=*/0);
  ExpectRecovers(after, cut);
  ExpectRecovers(failed, cut);
}

}  // namespace
}  // namespace pdc::testing
