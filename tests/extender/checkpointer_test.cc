// Checkpointer: a checkpoint is written exactly when the allocator says one
// is due; a failure is reported and retried; the loop runs on the Clock (a
// fake one here: its waits move fake time, so the test never sleeps).
#include "extender/checkpointer.h"

#include <memory>
#include <vector>

#include "absl/synchronization/notification.h"
#include "allocator/allocator.h"
#include "allocator/memory_store.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/faulty_store.h"
#include "tests/testing/inventory_builders.h"
#include "tests/testing/status_matchers.h"

namespace pdc::extender {
namespace {

using ::pdc::testing::kNvme;

class CheckpointerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    AllocatorOptions o;
    o.serialize_handoffs = false;  // No node driver confirms hand-offs here.
    o.device_classes = {DeviceClass{kNvme, {::pdc::testing::QemuNvmeSelector()}}};
    o.checkpoint_every_records = 2;
    ASSERT_OK_AND_ASSIGN(allocator_, Allocator::Open(o, &store_, &clock_));
  }

  absl::Status Mutate() {
    return allocator_->CreateClaim({"default", absl::StrCat("c", ++claims_)},
                                   ClaimSpec{.resource_name = kNvme})
        .status();
  }

  pdc::testing::FakeClock clock_;
  MemoryStore memory_;
  pdc::testing::FaultyStore store_{&memory_};
  std::unique_ptr<Allocator> allocator_;
  int claims_ = 0;
};

TEST_F(CheckpointerTest, WritesOnlyWhenDue) {
  Checkpointer c({}, allocator_.get(), &clock_);
  ASSERT_OK_AND_ASSIGN(bool wrote, c.CheckpointIfDue());
  EXPECT_FALSE(wrote);
  ASSERT_OK(Mutate());
  ASSERT_OK_AND_ASSIGN(wrote, c.CheckpointIfDue());
  EXPECT_FALSE(wrote);  // One record of two.
  EXPECT_EQ(memory_.RecordsSinceCheckpoint(), 1u);
  ASSERT_OK(Mutate());
  ASSERT_OK_AND_ASSIGN(wrote, c.CheckpointIfDue());
  EXPECT_TRUE(wrote);
  EXPECT_EQ(memory_.RecordsSinceCheckpoint(), 0u);
  ASSERT_OK_AND_ASSIGN(wrote, c.CheckpointIfDue());
  EXPECT_FALSE(wrote);
}

// Few but large records make a checkpoint due by the log's bytes.
TEST(CheckpointerBytesTest, LargeRecordsMakeItDueByTheLogsSize) {
  AllocatorOptions o;
  o.serialize_handoffs = false;  // No node driver confirms hand-offs here.
  o.device_classes = {DeviceClass{kNvme, {::pdc::testing::QemuNvmeSelector()}}};
  o.checkpoint_every_records = 1000;
  o.checkpoint_every_bytes = 4096;
  pdc::testing::FakeClock clock;
  MemoryStore store;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Allocator> allocator, Allocator::Open(o, &store, &clock));
  Checkpointer c({}, allocator.get(), &clock);
  ASSERT_OK(allocator->CreateClaim({"default", "small"}, ClaimSpec{.resource_name = kNvme}));
  ASSERT_OK_AND_ASSIGN(bool wrote, c.CheckpointIfDue());
  EXPECT_FALSE(wrote);
  std::vector<Device> devices;
  for (int bus = 1; bus <= 250; ++bus) {
    devices.push_back(::pdc::testing::NvmeDevice(PciAddress(0, static_cast<uint8_t>(bus), 0, 0),
                                                 bus));
  }
  ASSERT_OK(allocator->ReplaceInventory(::pdc::testing::Inventory("node-a", devices)));
  EXPECT_EQ(store.RecordsSinceCheckpoint(), 2u);
  EXPECT_GE(store.BytesSinceCheckpoint(), 4096u);
  ASSERT_OK_AND_ASSIGN(wrote, c.CheckpointIfDue());
  EXPECT_TRUE(wrote);
  EXPECT_EQ(store.BytesSinceCheckpoint(), 0u);
}

TEST_F(CheckpointerTest, ReportsAFailedCheckpoint) {
  Checkpointer c({}, allocator_.get(), &clock_);
  ASSERT_OK(Mutate());
  ASSERT_OK(Mutate());
  store_.FailNextSync(absl::UnavailableError("disk gone"));
  ASSERT_FALSE(Mutate().ok());  // The sync failure sticks to the store.
  absl::StatusOr<bool> wrote = c.CheckpointIfDue();
  EXPECT_FALSE(wrote.ok());
  EXPECT_NE(memory_.RecordsSinceCheckpoint(), 0u);
}

TEST_F(CheckpointerTest, LoopRunsOnTheClockUntilStopped) {
  ASSERT_OK(Mutate());
  ASSERT_OK(Mutate());
  const absl::Time start = clock_.Now();
  const absl::Duration every = absl::Seconds(5);
  Checkpointer c({.interval = every}, allocator_.get(), &clock_);
  // The hook runs on the loop's thread after each wait, before that pass:
  // on the third wait, the first two passes are done.
  int waits = 0;
  absl::Notification two_passes;
  clock_.SetSleepHook([&] {
    if (++waits == 3) two_passes.Notify();
  });
  c.Start();
  two_passes.WaitForNotification();
  c.Stop();
  clock_.SetSleepHook(nullptr);
  EXPECT_EQ(memory_.RecordsSinceCheckpoint(), 0u);  // Written by a pass.
  // Fake time moved only through the loop's waits, one interval each.
  EXPECT_GE(clock_.sleeps(), 3);
  EXPECT_EQ(clock_.Now() - start, clock_.sleeps() * every);
  EXPECT_EQ(clock_.slept(), clock_.sleeps() * every);
  c.Stop();  // Idempotent.
}

}  // namespace
}  // namespace pdc::extender
