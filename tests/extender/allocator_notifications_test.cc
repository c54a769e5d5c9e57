// Long-polls follow the allocator's revision (extender_context.h,
// FollowCommits): every mutating entry point of the Allocator wakes a parked
// waiter once it has committed, with no handler bumping the Notifier by hand;
// a call that commits nothing wakes nobody; a waiter on a node's topic wakes
// only for a commit that touched that node. One row per entry point.
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "allocator/allocator.h"
#include "allocator/memory_store.h"
#include "extender/extender_context.h"
#include "common/notifier.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/inventory_builders.h"
#include "tests/testing/status_matchers.h"

namespace pdc::extender {
namespace {

using ::pdc::testing::Addr;
using ::pdc::testing::Inventory;
using ::pdc::testing::kNvme;
using ::pdc::testing::NvmeDevice;

SchedulingRequest Vm(const std::string& vm, const std::string& uid) {
  SchedulingRequest r;
  r.ns = "default";
  r.vm = vm;
  r.pod_name = "virt-launcher-" + vm;
  r.pod_uid = uid;
  r.resources = {{kNvme, 1}};
  return r;
}

NodeInventory NodeA() {
  return Inventory("node-a", {NvmeDevice("0000:3b:00.0", 12, 0, "SNA0"),
                              NvmeDevice("0000:5e:00.0", 13, 0, "SNA1")});
}

struct World {
  Allocator* allocator;
  // Outcome of the set-up's bind of vm1 (uid-1) on node-a.
  BindOutcome bound;
};

struct NotifyCase {
  std::string name;
  // Runs the mutation under test; must succeed.
  std::function<absl::Status(World&)> mutate;
  bool wakes = true;
  // The nodes the commit touched (Allocator::Change::nodes).
  std::vector<std::string> nodes = {"node-a"};
};

class AllocatorNotificationsTest : public ::testing::TestWithParam<NotifyCase> {
 protected:
  void SetUp() override {
    AllocatorOptions o;
    o.serialize_handoffs = false;  // No node driver confirms hand-offs here.
    o.device_classes = {DeviceClass{kNvme, {::pdc::testing::QemuNvmeSelector()}}};
    auto a = Allocator::Open(o, &store_, &clock_);
    ASSERT_TRUE(a.ok()) << a.status();
    allocator_ = *std::move(a);
    FollowCommits(allocator_.get(), &notifier_);
    ASSERT_OK(allocator_->ReplaceInventory(NodeA()));
    ASSERT_OK(allocator_->CreateClaim({"default", "spare"}, ClaimSpec{.resource_name = kNvme}));
    ASSERT_OK_AND_ASSIGN(world_.bound, allocator_->Bind(Vm("vm1", "uid-1"), "node-a"));
    world_.allocator = allocator_.get();
  }

  pdc::testing::FakeClock clock_;
  MemoryStore store_;
  Notifier notifier_;
  std::unique_ptr<Allocator> allocator_;
  World world_{};
};

TEST_P(AllocatorNotificationsTest, WakesAParkedWaiterExactlyWhenItCommits) {
  const uint64_t seen = notifier_.version();
  const uint64_t revision = allocator_->revision();
  int woken = 0;
  const Notifier::SubscriptionId id = notifier_.Subscribe(seen, [&] { ++woken; });
  ASSERT_NE(id, 0u);  // Parked.

  ASSERT_OK(GetParam().mutate(world_));

  EXPECT_EQ(allocator_->revision() > revision, GetParam().wakes);
  EXPECT_EQ(woken, GetParam().wakes ? 1 : 0);
  EXPECT_EQ(notifier_.pending(), GetParam().wakes ? 0u : 1u);
  notifier_.Cancel(id);
}

// Waiters on node topics, as allocations long-polls park: only the touched
// nodes' wake, and a touched node's allocations version moved.
TEST_P(AllocatorNotificationsTest, WakesOnlyTheTouchedNodesWaiters) {
  const std::vector<std::string> all = {"node-a", "node-b"};
  const uint64_t seen = notifier_.version();
  std::map<std::string, uint64_t> version_before;
  std::map<std::string, int> woken;
  std::vector<Notifier::SubscriptionId> ids;
  for (const std::string& node : all) {
    auto a = allocator_->GetNodeAllocations(node);
    version_before[node] = a.ok() ? a->version : 0;
    ids.push_back(notifier_.Subscribe(node, seen, [&woken, node] { ++woken[node]; }));
    ASSERT_NE(ids.back(), 0u);
  }
  std::vector<std::string> told;
  int calls = 0;
  allocator_->SetChangeListener([&](const Allocator::Change& change) {
    ++calls;
    told = change.nodes;
    notifier_.Bump(change.nodes);
  });

  ASSERT_OK(GetParam().mutate(world_));

  EXPECT_EQ(calls, GetParam().wakes ? 1 : 0);
  const std::vector<std::string> want =
      GetParam().wakes ? GetParam().nodes : std::vector<std::string>{};
  EXPECT_EQ(told, want);
  for (const std::string& node : all) {
    const bool touched = std::find(want.begin(), want.end(), node) != want.end();
    EXPECT_EQ(woken[node], touched ? 1 : 0) << node;
    auto a = allocator_->GetNodeAllocations(node);
    const uint64_t version_after = a.ok() ? a->version : 0;
    // A node removed for good has no allocations to answer (404).
    if (a.ok()) {
      EXPECT_EQ(version_after > version_before[node], touched) << node;
    }
  }
  for (Notifier::SubscriptionId id : ids) notifier_.Cancel(id);
}

INSTANTIATE_TEST_SUITE_P(
    EveryMutation, AllocatorNotificationsTest,
    ::testing::Values(
        NotifyCase{"ReplaceInventoryChanged",
             [](World& w) {
               return w.allocator->ReplaceInventory(
                   Inventory("node-a", {NvmeDevice("0000:3b:00.0", 12, 0, "SNA0")}));
             }},
        NotifyCase{"ReplaceInventoryNewNode",
             [](World& w) {
               return w.allocator->ReplaceInventory(
                   Inventory("node-b", {NvmeDevice("0000:3b:00.0", 12, 0, "SNB0")}));
             },
             true, {"node-b"}},
        NotifyCase{"ReplaceInventoryHeartbeatOnly",
             [](World& w) { return w.allocator->ReplaceInventory(NodeA()); }, false},
        NotifyCase{"RemoveNode", [](World& w) { return w.allocator->RemoveNode("node-a"); }},
        // A Pending claim lives on no node: the commit wakes no node's waiter.
        NotifyCase{"CreateClaim",
             [](World& w) {
               return w.allocator->CreateClaim({"default", "new"}, ClaimSpec{.resource_name = kNvme})
                   .status();
             },
             true, {}},
        NotifyCase{"DeleteClaim",
             [](World& w) { return w.allocator->DeleteClaim({"default", "spare"}, false); }, true,
             {}},
        NotifyCase{"DeleteBoundClaim",
             [](World& w) { return w.allocator->DeleteClaim({"default", "vm1-nvme"}, true); }},
        NotifyCase{"Release",
             [](World& w) { return w.allocator->Release({"default", "vm1-nvme"}, "uid-1"); }},
        NotifyCase{"ReleaseNothingHeld",
             [](World& w) { return w.allocator->Release({"default", "spare"}, ""); }, false},
        NotifyCase{"Bind",
             [](World& w) { return w.allocator->Bind(Vm("vm2", "uid-2"), "node-a").status(); }},
        NotifyCase{"BindRetriedChangesNothing",
             [](World& w) { return w.allocator->Bind(Vm("vm1", "uid-1"), "node-a").status(); },
             false},
        NotifyCase{"Undo", [](World& w) { return w.allocator->Undo(w.bound); }},
        NotifyCase{"ConfirmHandoff",
             [](World& w) {
               return w.allocator
                   ->ConfirmHandoff("node-a", "uid-1", kNvme, w.bound.claims[0].devices)
                   .status();
             }},
        NotifyCase{"CancelHandoff",
             [](World& w) { return w.allocator->CancelHandoff("node-a", "uid-1").status(); }}),
    [](const auto& info) { return info.param.name; });

// The listener runs after the mutation is durable and may read the
// allocator: it sees the revision it is told about.
TEST(AllocatorChangeListenerTest, SeesTheCommittedRevision) {
  pdc::testing::FakeClock clock;
  MemoryStore store;
  AllocatorOptions o;
  o.serialize_handoffs = false;  // No node driver confirms hand-offs here.
  o.device_classes = {DeviceClass{kNvme, {::pdc::testing::QemuNvmeSelector()}}};
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Allocator> a, Allocator::Open(o, &store, &clock));
  std::vector<uint64_t> told;
  std::vector<uint64_t> read;
  a->SetChangeListener([&](const Allocator::Change& change) {
    told.push_back(change.revision);
    read.push_back(a->revision());
  });
  ASSERT_OK(a->ReplaceInventory(NodeA()));
  ASSERT_OK(a->CreateClaim({"default", "c"}, ClaimSpec{.resource_name = kNvme}));
  EXPECT_EQ(told, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(read, told);
  a->SetChangeListener(nullptr);
  ASSERT_OK(a->DeleteClaim({"default", "c"}, false));
  EXPECT_EQ(told.size(), 2u);
}

}  // namespace
}  // namespace pdc::extender
