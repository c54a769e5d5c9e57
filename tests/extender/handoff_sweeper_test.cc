// HandoffSweeper: a pending hand-off whose pod is gone is cancelled once it
// has waited the grace period; a live pod, or an apiserver that cannot say,
// keeps it. With the watch of the scheduler's pods, a pod the watch shows
// gone is cancelled at once, and one it shows alive costs no GET.
#include "extender/handoff_sweeper.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/strings.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/extender/extender_fixture.h"
#include "tests/testing/fake_kube.h"
#include "tests/testing/reflector_feed.h"

namespace pdc::extender::testing {
namespace {

using ::pdc::testing::Delete;
using ::pdc::testing::FakeKube;
using ::pdc::testing::List;
using ::pdc::testing::Put;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr char kPod[] = "virt-launcher-vm1-x7k2p";

std::string PodJson(std::string_view uid, std::string_view phase) {
  return absl::StrCat(R"({"kind":"Pod","apiVersion":"v1","metadata":{"name":")", kPod,
                      R"(","namespace":"default","uid":")", Sv(uid),
                      R"(","resourceVersion":"7"},"spec":{"nodeName":"node-a"},"status":{"phase":")",
                      Sv(phase), R"("}})");
}

struct SweepCase {
  std::string name;
  absl::StatusOr<std::string> answer;
  bool cancelled;
};

class HandoffSweeperTest : public ExtenderFixture, public ::testing::WithParamInterface<SweepCase> {
 protected:
  void SetUp() override {
    allocator_options_.serialize_handoffs = true;
    Open();
    Report("node-a", {NvmeDevice("0000:3b:00.0", 12, 0, "SNA0"),
                      NvmeDevice("0000:5e:00.0", 13, 0, "SNA1")});
    ASSERT_EQ(Post("/scheduler/filter", NamesArgs(VirtLauncherPod("vm1", "uid-1"), {"node-a"})).status,
              200);
    ASSERT_EQ(Post("/scheduler/bind", BindArgs("vm1", "uid-1", "node-a")).body,
              R"({"Error":""})");
    ASSERT_EQ(allocator_->PendingHandoffs("").size(), 1u);
  }

  HandoffSweeper::Options Opts() {
    HandoffSweeper::Options o;
    o.grace = absl::Seconds(30);
    return o;
  }

  FakeKube kube_;
};

TEST_P(HandoffSweeperTest, DecidesByWhatTheApiserverSays) {
  kube_.SetPod(GetParam().answer);
  HandoffSweeper sweeper(Opts(), allocator_.get(), &kube_, &clock_);
  EXPECT_EQ(sweeper.SweepOnce(), 0u);  // First seen now: not asked yet.
  EXPECT_THAT(kube_.calls(), ::testing::IsEmpty());
  clock_.Advance(absl::Seconds(29));
  EXPECT_EQ(sweeper.SweepOnce(), 0u);
  EXPECT_THAT(kube_.calls(), ::testing::IsEmpty());
  clock_.Advance(absl::Seconds(1));
  const uint64_t before = notifier_.version();
  EXPECT_EQ(sweeper.SweepOnce(), GetParam().cancelled ? 1u : 0u);
  EXPECT_THAT(kube_.calls(),
              ::testing::ElementsAre("GET default/virt-launcher-vm1-x7k2p"));
  EXPECT_EQ(allocator_->PendingHandoffs("").empty(), GetParam().cancelled);
  EXPECT_EQ(notifier_.version() > before, GetParam().cancelled);
  ASSERT_OK_AND_ASSIGN(Claim c, allocator_->GetClaim({"default", "vm1-nvme"}));
  EXPECT_EQ(c.status.phase, ClaimPhase::kBound);  // The claim keeps its device either way.
  EXPECT_EQ(c.status.reserved_for.has_value(), !GetParam().cancelled);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, HandoffSweeperTest,
    ::testing::Values(SweepCase{"Deleted", absl::NotFoundError("pods not found"), true},
                      SweepCase{"Replaced", PodJson("uid-2", "Pending"), true},
                      SweepCase{"FailedAdmission", PodJson("uid-1", "Failed"), true},
                      SweepCase{"Succeeded", PodJson("uid-1", "Succeeded"), true},
                      SweepCase{"StillPending", PodJson("uid-1", "Pending"), false},
                      SweepCase{"Running", PodJson("uid-1", "Running"), false},
                      SweepCase{"ApiserverDown", absl::UnavailableError("connection refused"), false},
                      SweepCase{"NotJson", std::string("<html>"), false}),
    [](const auto& info) { return info.param.name; });

TEST_F(HandoffSweeperTest, ForgetsPodsThatAreNoLongerPending) {
  kube_.SetPod(PodJson("uid-1", "Running"));
  HandoffSweeper sweeper(Opts(), allocator_.get(), &kube_, &clock_);
  EXPECT_EQ(sweeper.SweepOnce(), 0u);
  ASSERT_OK(allocator_
                ->ConfirmHandoff("node-a", "uid-1", kNvme,
                                 std::vector<PciAddress>{*PciAddress::Parse("0000:3b:00.0")})
                .status());
  clock_.Advance(absl::Minutes(5));
  EXPECT_EQ(sweeper.SweepOnce(), 0u);
  EXPECT_THAT(kube_.calls(), ::testing::IsEmpty());  // Confirmed: nothing to ask about.
}

// The sweeper with the watch: a pod the watch shows gone gives up its
// hand-off at once, without the grace period; a pod it shows alive costs no
// GET.
class SweeperWithWatchTest : public HandoffSweeperTest {
 protected:
  HandoffSweeper::Options Opts() {
    HandoffSweeper::Options o = HandoffSweeperTest::Opts();
    o.pods = &pods_;
    return o;
  }

  PodDirectory pods_;
};

TEST_F(SweeperWithWatchTest, APodTheWatchShowsEndedIsCancelledAtOnce) {
  HandoffSweeper sweeper(Opts(), allocator_.get(), &kube_, &clock_);
  List(&pods_, {PodJson("uid-1", "Pending")});
  EXPECT_EQ(sweeper.SweepOnce(), 0u);
  Put(&pods_, PodJson("uid-1", "Failed"));
  sweeper.PodGone("uid-1");
  EXPECT_EQ(sweeper.SweepOnce(), 1u);  // No grace: the watch saw it end.
  EXPECT_THAT(kube_.calls(), IsEmpty());
  EXPECT_THAT(allocator_->PendingHandoffs(""), IsEmpty());
}

TEST_F(SweeperWithWatchTest, ADeletedPodIsConfirmedWithTheApiserver) {
  HandoffSweeper sweeper(Opts(), allocator_.get(), &kube_, &clock_);
  List(&pods_, {PodJson("uid-1", "Pending")});
  EXPECT_EQ(sweeper.SweepOnce(), 0u);
  // Deleted, but the apiserver still has it (the watch raced ahead of a
  // grace-period deletion): kept.
  Delete(&pods_, PodJson("uid-1", "Pending"));
  kube_.SetPod(PodJson("uid-1", "Running"));
  sweeper.PodGone("uid-1");
  EXPECT_EQ(sweeper.SweepOnce(), 0u);
  EXPECT_THAT(kube_.calls(), ElementsAre("GET default/virt-launcher-vm1-x7k2p"));
  // Now it is gone.
  kube_.SetPod(absl::NotFoundError("pods \"virt-launcher-vm1-x7k2p\" not found"));
  sweeper.PodGone("uid-1");
  EXPECT_EQ(sweeper.SweepOnce(), 1u);
}

TEST_F(SweeperWithWatchTest, APodTheWatchShowsAliveCostsNoGet) {
  HandoffSweeper sweeper(Opts(), allocator_.get(), &kube_, &clock_);
  List(&pods_, {PodJson("uid-1", "Running")});
  EXPECT_EQ(sweeper.SweepOnce(), 0u);
  clock_.Advance(absl::Minutes(1));
  EXPECT_EQ(sweeper.SweepOnce(), 0u);
  EXPECT_THAT(kube_.calls(), IsEmpty());
  EXPECT_EQ(allocator_->PendingHandoffs("").size(), 1u);
}

TEST_F(SweeperWithWatchTest, PodGoneWakesTheSweeperThread) {
  // A real clock for the thread: the pass interval is an hour, so only the
  // wake can run it.
  HandoffSweeper::Options o = Opts();
  o.interval = absl::Hours(1);
  HandoffSweeper sweeper(o, allocator_.get(), &kube_, RealClock());
  List(&pods_, {PodJson("uid-1", "Failed")});
  sweeper.Start();
  sweeper.PodGone("uid-1");
  for (int i = 0; i < 500 && !allocator_->PendingHandoffs("").empty(); ++i) {
    RealClock()->SleepFor(absl::Milliseconds(10));
  }
  EXPECT_THAT(allocator_->PendingHandoffs(""), IsEmpty());
  sweeper.Stop();
}

}  // namespace
}  // namespace pdc::extender::testing
