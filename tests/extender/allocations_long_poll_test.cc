// Allocations long-polls (docs/rest-api.md §4.5) wake for their own node
// only. The polls are parked as the HTTP server parks them (net/http_server.cc:
// the Router answers with a LongPoll, the server subscribes to the Notifier
// for the poll's topic and runs the Router again when woken), so the tests
// count wakes: a wake the poll did not need is the O(nodes) cost of every
// change this file guards against.
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "extender/extender_context.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/extender/extender_fixture.h"

namespace pdc::extender::testing {
namespace {

using ::testing::HasSubstr;

// The REST inventory of a node with two NVMe drives; `healthy` is the first
// drive's health.
std::string InventoryBody(const std::string& node, bool healthy = true) {
  return absl::StrCat(
      R"({"node":")", node, R"(","devices":[)",
      R"({"address":"0000:3b:00.0","vendor":"1b36","device":"0010","class":"010802","iommuGroup":12,"numaNode":0,"serial":"S0-)",
      node, R"(","driver":"vfio-pci","healthy":)", healthy ? "true" : "false", "},",
      R"({"address":"0000:5e:00.0","vendor":"1b36","device":"0010","class":"010802","iommuGroup":13,"numaNode":0,"serial":"S1-)",
      node, R"(","driver":"vfio-pci","healthy":true}]})");
}

class AllocationsLongPollTest : public ExtenderFixture {
 protected:
  void SetUp() override {
    ExtenderFixture::SetUp();
    for (const char* node : {"node-a", "node-b"}) PutInventory(node, InventoryBody(node));
  }
  void TearDown() override {
    for (auto& [node, poll] : polls_) {
      if (poll.subscription != 0) notifier_.Cancel(poll.subscription);
    }
  }

  void PutInventory(const std::string& node, const std::string& body) {
    HttpResponse r = Call("PUT", absl::StrCat("/v1/nodes/", node, "/inventory"), body);
    ASSERT_EQ(r.status, 200) << r.body;
  }

  uint64_t VersionOf(const std::string& node) {
    absl::StatusOr<NodeAllocations> a = allocator_->GetNodeAllocations(node);
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? a->version : 0;
  }

  // GET /v1/nodes/{node}/allocations?since=<node's version>&wait=30, parked
  // as the server parks it. Fails the test when it is answered instead.
  void Park(const std::string& node) {
    Poll& p = polls_[node];
    p.since = VersionOf(node);
    HttpResponse r = Get(node, p.since);
    ASSERT_TRUE(r.long_poll.has_value()) << node << ": " << r.body;
    EXPECT_EQ(r.long_poll->topic, node);
    p.subscription = notifier_.Subscribe(r.long_poll->topic, r.long_poll->seen_version,
                                         [this, node] { ++polls_[node].wakes; });
    ASSERT_NE(p.subscription, 0u) << node << " woke at once";
  }

  // What the server does with a woken poll: run the Router again.
  HttpResponse Rerun(const std::string& node) {
    polls_[node].subscription = 0;
    return Get(node, polls_[node].since);
  }

  HttpResponse Get(const std::string& node, uint64_t since) {
    return Call("GET", absl::StrCat("/v1/nodes/", node, "/allocations?since=", since,
                                    "&wait=30"));
  }

  int Wakes(const std::string& node) { return polls_[node].wakes; }

  struct Poll {
    uint64_t since = 0;
    Notifier::SubscriptionId subscription = 0;
    int wakes = 0;
  };
  std::map<std::string, Poll> polls_;
};

TEST_F(AllocationsLongPollTest, UnchangedHeartbeatWakesNoPoll) {
  Park("node-a");
  Park("node-b");
  const uint64_t revision = allocator_->revision();
  clock_.Advance(absl::Seconds(10));
  PutInventory("node-a", InventoryBody("node-a"));  // Same inventory again.
  PutInventory("node-b", InventoryBody("node-b"));
  EXPECT_EQ(allocator_->revision(), revision);
  EXPECT_EQ(Wakes("node-a"), 0);
  EXPECT_EQ(Wakes("node-b"), 0);
  EXPECT_EQ(notifier_.pending(), 2u);  // Both still parked.
}

TEST_F(AllocationsLongPollTest, ChangedInventoryWakesOnlyItsNodesPoll) {
  Park("node-a");
  Park("node-b");
  PutInventory("node-b", InventoryBody("node-b", /*healthy=*/false));
  EXPECT_EQ(Wakes("node-a"), 0);
  EXPECT_EQ(Wakes("node-b"), 1);
  EXPECT_EQ(notifier_.pending(), 1u);
  HttpResponse b = Rerun("node-b");
  EXPECT_FALSE(b.long_poll.has_value());
  EXPECT_THAT(b.body, HasSubstr(absl::StrCat(R"("version":)", VersionOf("node-b"))));
}

TEST_F(AllocationsLongPollTest, ClaimChangeOnANodeWakesOnlyThatNodesPoll) {
  Park("node-a");
  Park("node-b");
  const std::string pod = VirtLauncherPod("vm1", "uid-1");
  ASSERT_EQ(Post("/scheduler/filter", NamesArgs(pod, {"node-a", "node-b"})).status, 200);
  // Filter reads only.
  EXPECT_EQ(Wakes("node-a") + Wakes("node-b"), 0);
  ASSERT_EQ(Post("/scheduler/bind", BindArgs("vm1", "uid-1", "node-a")).body,
            R"({"Error":""})");
  EXPECT_EQ(Wakes("node-a"), 1);
  EXPECT_EQ(Wakes("node-b"), 0);
  HttpResponse a = Rerun("node-a");
  ASSERT_FALSE(a.long_poll.has_value());
  EXPECT_THAT(a.body, HasSubstr(R"("claim":"default/vm1-nvme")"));

  // Releasing the claim changes node-a again, node-b still not.
  Park("node-a");
  ASSERT_EQ(Post("/v1/namespaces/default/claims/vm1-nvme/release", "").status, 200);
  EXPECT_EQ(Wakes("node-a"), 2);
  EXPECT_EQ(Wakes("node-b"), 0);
  EXPECT_EQ(notifier_.pending(), 1u);  // node-b's.
}

// A commit that concerns no node (a Pending claim) wakes no node's poll.
TEST_F(AllocationsLongPollTest, PendingClaimWakesNoPoll) {
  Park("node-a");
  HttpResponse r = Post("/v1/namespaces/default/claims",
                        R"({"name":"spare","resourceName":"devices.kubevirt.io/nvme"})");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(Wakes("node-a"), 0);
  EXPECT_EQ(notifier_.pending(), 1u);
}

// The version pdc-node waits past is the allocator's, recovered from the
// store: a restarted pdc-extender answers the same version (its notifier
// starts again at 0, which pdc-node never sees), parks a poll at that
// version, and the next change to the node moves past it.
TEST_F(AllocationsLongPollTest, VersionHoldsAcrossARestart) {
  const std::string pod = VirtLauncherPod("vm1", "uid-1");
  ASSERT_EQ(Post("/scheduler/filter", NamesArgs(pod, {"node-a"})).status, 200);
  ASSERT_EQ(Post("/scheduler/bind", BindArgs("vm1", "uid-1", "node-a")).body,
            R"({"Error":""})");
  const uint64_t before = VersionOf("node-a");
  Open();  // Recover from the same store.
  EXPECT_EQ(VersionOf("node-a"), before);
  Park("node-a");
  PutInventory("node-a", InventoryBody("node-a"));  // The first heartbeat after the restart.
  EXPECT_EQ(Wakes("node-a"), 0);
  ASSERT_EQ(Post("/v1/namespaces/default/claims/vm1-nvme/release", "").status, 200);
  EXPECT_EQ(Wakes("node-a"), 1);
  EXPECT_GT(VersionOf("node-a"), before);
}

}  // namespace
}  // namespace pdc::extender::testing
