// HandoffBook: which pod waits for its devices, from the allocations answer
// plus the hand-offs already answered locally.
#include "driver/deviceplugin/handoff_book.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/driver/test_util.h"
#include "tests/testing/status_matchers.h"

namespace pdc::driver::deviceplugin {
namespace {

using pdc::testing::StatusIs;
using testing::Addr;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using testing::kNvme;

NodeAllocation Entry(const std::string& address, const std::string& claim,
                     std::optional<std::string> pod_uid, bool handed_off,
                     const std::string& resource = kNvme) {
  NodeAllocation d;
  d.address = Addr(address);
  const size_t slash = claim.find('/');
  d.claim = ClaimKey{claim.substr(0, slash), claim.substr(slash + 1)};
  d.resource_name = resource;
  if (pod_uid) {
    d.reserved_for = Reservation{"vm-" + *pod_uid, "pod-" + *pod_uid, *pod_uid};
  }
  d.handoff_pending = d.reserved_for.has_value() && !handed_off;
  return d;
}

// The pod's devices come in the extender's hand-off order (handoffIndex),
// not by address: the k-th goes to the VM's k-th hostDevices entry.
TEST(HandoffBookTest, DevicesAreInTheHandoffOrder) {
  struct Case {
    std::string name;
    std::vector<uint32_t> indices;  // Of 3b, 5e, af.
    std::vector<std::string> want;
  };
  const std::vector<Case> cases = {
      {"address order", {0, 1, 2}, {"0000:3b:00.0", "0000:5e:00.0", "0000:af:00.0"}},
      {"reversed", {2, 1, 0}, {"0000:af:00.0", "0000:5e:00.0", "0000:3b:00.0"}},
      {"mixed", {1, 2, 0}, {"0000:af:00.0", "0000:3b:00.0", "0000:5e:00.0"}},
      // An extender that sends no index: address order.
      {"absent", {0, 0, 0}, {"0000:3b:00.0", "0000:5e:00.0", "0000:af:00.0"}},
  };
  for (const Case& tc : cases) {
    HandoffBook book("node-a");
    NodeAllocations a{.version = 1};
    const std::vector<std::string> addresses = {"0000:3b:00.0", "0000:5e:00.0", "0000:af:00.0"};
    for (size_t i = 0; i < addresses.size(); ++i) {
      a.claimed.push_back(Entry(addresses[i], "ns/c" + std::to_string(i), "u1", false));
      a.claimed.back().handoff_index = tc.indices[i];
    }
    book.Update(a, false);
    ASSERT_OK_AND_ASSIGN(PendingPod p, book.Pending(kNvme));
    std::vector<std::string> got;
    for (PciAddress d : p.devices) got.push_back(d.ToString());
    EXPECT_EQ(got, tc.want) << tc.name;
  }
}

TEST(HandoffBookTest, PendingIsTheOneReservedPodNotHandedOff) {
  HandoffBook book("node-a");
  EXPECT_THAT(book.Pending(kNvme), StatusIs(absl::StatusCode::kNotFound,
                                            HasSubstr("no VM pod is waiting for a "
                                                      "devices.kubevirt.io/nvme device on node "
                                                      "node-a")));
  book.Update({.version = 2,
               .claimed = {Entry("0000:3b:00.0", "ns/a-1", "u1", false),
                           Entry("0000:5e:00.0", "ns/b", "u0", true),
                           Entry("0000:af:00.0", "ns/c", std::nullopt, true),
                           Entry("0000:1a:00.0", "ns/a-2", "u1", false),
                           Entry("0000:d8:00.0", "ns/g", "u9", false, "nvidia.com/gpu")}},
              false);
  ASSERT_OK_AND_ASSIGN(PendingPod p, book.Pending(kNvme));
  EXPECT_EQ(p.pod_uid, "u1");
  EXPECT_EQ(p.ns, "ns");
  EXPECT_EQ(p.vm, "vm-u1");
  EXPECT_EQ(p.pod_name, "pod-u1");
  EXPECT_THAT(p.claims, ElementsAre("ns/a-1", "ns/a-2"));
  EXPECT_THAT(p.devices, ElementsAre(Addr("0000:1a:00.0"), Addr("0000:3b:00.0")));
  ASSERT_OK_AND_ASSIGN(PendingPod g, book.Pending("nvidia.com/gpu"));
  EXPECT_EQ(g.pod_uid, "u9");
}

TEST(HandoffBookTest, AnsweredLocallyIsNotPendingUntilTheExtenderForgetsIt) {
  HandoffBook book("node-a");
  const NodeAllocations waiting{.version = 2,
                                .claimed = {Entry("0000:3b:00.0", "ns/a", "u1", false)}};
  book.Update(waiting, false);
  book.MarkHandedOff(kNvme, "u1");
  EXPECT_THAT(book.Pending(kNvme), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_TRUE(book.PendingUpstream(kNvme, "u1"));
  // The same answer again (the extender has not recorded it yet).
  book.Update(waiting, true);
  EXPECT_THAT(book.Pending(kNvme), StatusIs(absl::StatusCode::kNotFound));
  // Recorded, then the VM restarts with a new pod: pending again.
  book.Update({.version = 3, .claimed = {Entry("0000:3b:00.0", "ns/a", "u1", true)}}, false);
  EXPECT_FALSE(book.PendingUpstream(kNvme, "u1"));
  book.Update({.version = 4, .claimed = {Entry("0000:3b:00.0", "ns/a", "u2", false)}}, false);
  ASSERT_OK_AND_ASSIGN(PendingPod p, book.Pending(kNvme));
  EXPECT_EQ(p.pod_uid, "u2");
}

TEST(HandoffBookTest, OlderLongPollAnswersAreIgnoredFreshOnesAreNot) {
  HandoffBook book("node-a");
  book.Update({.version = 5, .claimed = {Entry("0000:3b:00.0", "ns/a", "u1", false)}}, false);
  book.Update({.version = 4, .claimed = {}}, false);
  EXPECT_EQ(book.version(), 5u);
  EXPECT_OK(book.Pending(kNvme).status());
  book.Update({.version = 1, .claimed = {}}, true);  // An extender that restarted.
  EXPECT_EQ(book.version(), 1u);
  EXPECT_THAT(book.Pending(kNvme), StatusIs(absl::StatusCode::kNotFound));
}

TEST(HandoffBookTest, TwoPodsWaitingIsRefusedNamingBoth) {
  HandoffBook book("node-a");
  book.Update({.version = 1,
               .claimed = {Entry("0000:3b:00.0", "ns/a", "u1", false),
                           Entry("0000:5e:00.0", "ns/b", "u2", false)}},
              false);
  EXPECT_THAT(book.Pending(kNvme),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("2 VM pods are waiting"),
                             HasSubstr("ns/vm-u1 (pod pod-u1, uid u1)"),
                             HasSubstr("ns/vm-u2 (pod pod-u2, uid u2)"))));
}

}  // namespace
}  // namespace pdc::driver::deviceplugin
