// The watch of pdc-scheduler's pods: what it answers about a pod, what it
// reports as gone, and AskPodFate with it (an answer from the watch saves
// the GET; "not in the watch" never decides alone). The hand-off sweeper
// with the watch: handoff_sweeper_test.cc.
#include "extender/pod_directory.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
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

constexpr char kLauncherPod[] = "virt-launcher-vm1-x7k2p";

std::string PodObject(const std::string& name, const std::string& uid, const std::string& phase,
                      const std::string& node = "node-a") {
  return absl::StrCat(R"({"kind":"Pod","apiVersion":"v1","metadata":{"name":")", name,
                      R"(","namespace":"default","uid":")", uid,
                      R"(","resourceVersion":"7"},"spec":{"schedulerName":"pdc-scheduler",)",
                      R"("nodeName":")", node, R"("},"status":{"phase":")", phase, R"("}})");
}

struct Gone {
  std::vector<std::string> uids;
  PodDirectory::GoneFn fn() {
    return [this](const PodRef& p) { uids.push_back(absl::StrCat(p.ns, "/", p.name, "/", p.uid)); };
  }
};

PodFate FateOf(const PodDirectory& d, const std::string& name, const std::string& uid) {
  std::string why;
  return d.Fate("default", name, uid, &why);
}

TEST(PodsOfSchedulerTest, IsAFieldSelectorOnSchedulerName) {
  EXPECT_EQ(PodsOfScheduler("pdc-scheduler"), "fieldSelector=spec.schedulerName%3Dpdc-scheduler");
}

TEST(PodDirectoryTest, KnowsNothingBeforeItsFirstList) {
  PodDirectory d;
  Put(&d, PodObject(kLauncherPod, "uid-1", "Running"));
  EXPECT_EQ(FateOf(d, kLauncherPod, "uid-1"), PodFate::kUnknown);
  List(&d, {});
  EXPECT_EQ(FateOf(d, kLauncherPod, "uid-1"), PodFate::kUnknown);  // The list is all there is.
}

struct FateCase {
  std::string name;
  std::vector<std::string> listed;
  std::string ask_uid;
  PodFate want;
};

class PodDirectoryFateTest : public ::testing::TestWithParam<FateCase> {};

TEST_P(PodDirectoryFateTest, Answers) {
  PodDirectory d;
  List(&d, GetParam().listed);
  std::string why;
  EXPECT_EQ(d.Fate("default", kLauncherPod, GetParam().ask_uid, &why), GetParam().want) << why;
  EXPECT_FALSE(why.empty());
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PodDirectoryFateTest,
    ::testing::Values(
        FateCase{"Running", {PodObject(kLauncherPod, "uid-1", "Running")}, "uid-1", PodFate::kAlive},
        FateCase{"PendingUnbound", {PodObject(kLauncherPod, "uid-1", "Pending", "")}, "uid-1",
                 PodFate::kAlive},
        FateCase{"Failed", {PodObject(kLauncherPod, "uid-1", "Failed")}, "uid-1", PodFate::kGone},
        FateCase{"Succeeded", {PodObject(kLauncherPod, "uid-1", "Succeeded")}, "uid-1", PodFate::kGone},
        FateCase{"ReplacedUnderTheName", {PodObject(kLauncherPod, "uid-2", "Pending")}, "uid-1",
                 PodFate::kGone},
        // Not in the watch: maybe deleted, maybe not shown yet. Ask.
        FateCase{"NotHeld", {PodObject("other", "uid-9", "Running")}, "uid-1",
                 PodFate::kUnknown}),
    [](const auto& info) { return info.param.name; });

// A pod being deleted (deletionTimestamp) on `node` ("" never scheduled).
std::string DeletingPod(const std::string& node) {
  std::string pod = PodObject(kLauncherPod, "uid-1", "Pending", node);
  pod.insert(pod.find(R"("resourceVersion")"), R"("deletionTimestamp":"2026-01-01T00:00:00Z",)");
  return pod;
}

// PodEnd::kDone (the DRA claim keeper's rule, kube-controller-manager's
// isPodDone): a pod being deleted that was never scheduled is gone; one on a
// node still runs until it is removed. PodEnd::kEnded (the other users)
// keeps both alive.
TEST(PodDirectoryTest, ADeletedUnscheduledPodIsGoneOnlyByTheDoneRule) {
  struct Case {
    PodEnd end;
    std::string node;
    PodFate want;
  };
  for (const Case& c : std::vector<Case>{{PodEnd::kDone, "", PodFate::kGone},
                                         {PodEnd::kDone, "node-a", PodFate::kAlive},
                                         {PodEnd::kEnded, "", PodFate::kAlive}}) {
    SCOPED_TRACE(c.node + (c.end == PodEnd::kDone ? " done" : " ended"));
    Gone gone;
    PodDirectory d(gone.fn(), c.end);
    List(&d, {PodObject(kLauncherPod, "uid-1", "Pending", c.node)});
    Put(&d, DeletingPod(c.node));
    EXPECT_EQ(FateOf(d, kLauncherPod, "uid-1"), c.want);
    EXPECT_EQ(gone.uids.size(), c.want == PodFate::kGone ? 1u : 0u);
    // The same answer from the apiserver, for a pod the watch does not hold.
    FakeKube kube;
    kube.SetPod(DeletingPod(c.node));
    std::string why;
    EXPECT_EQ(AskPodFate(nullptr, &kube, "default", kLauncherPod, "uid-1", absl::Seconds(1), &why, c.end),
              c.want)
        << why;
  }
}

TEST(PodDirectoryTest, ReportsPodsThatEndOrLeaveOnce) {
  Gone gone;
  PodDirectory d(gone.fn());
  List(&d, {PodObject(kLauncherPod, "uid-1", "Running"), PodObject("p2", "uid-2", "Running"),
            PodObject("p3", "uid-3", "Running")});
  EXPECT_THAT(gone.uids, IsEmpty());
  Put(&d, PodObject(kLauncherPod, "uid-1", "Failed"));
  Put(&d, PodObject(kLauncherPod, "uid-1", "Failed"));  // Still failed: not again.
  Delete(&d, PodObject("p2", "uid-2", "Running"));
  Delete(&d, PodObject("p2", "uid-2", "Running"));  // Already gone.
  // p3 was deleted and its name re-used while the watch was away.
  Put(&d, PodObject("p3", "uid-4", "Pending"));
  // A relist without the failed pod: it was reported already.
  List(&d, {PodObject("p3", "uid-4", "Pending")});
  EXPECT_THAT(gone.uids, ElementsAre("default/virt-launcher-vm1-x7k2p/uid-1", "default/p2/uid-2",
                                     "default/p3/uid-3"));
  EXPECT_EQ(d.size(), 1u);
  // A pod deleted while the watch was down is reported by the relist.
  List(&d, {});
  EXPECT_EQ(gone.uids.back(), "default/p3/uid-4");
}

TEST(PodDirectoryTest, IgnoresPodsItCannotRead) {
  PodDirectory d;
  List(&d, {R"({"metadata":{"name":"x"}})", PodObject(kLauncherPod, "uid-1", "Running"),
            PodObject("p2", "uid-2", "Run ning")});
  EXPECT_EQ(d.size(), 1u);
  EXPECT_EQ(FateOf(d, kLauncherPod, "uid-1"), PodFate::kAlive);
}

TEST(AskPodFateTest, TheWatchAnswersWithoutAGet) {
  PodDirectory d;
  List(&d, {PodObject(kLauncherPod, "uid-1", "Running"), PodObject("p2", "uid-2", "Failed")});
  FakeKube kube;
  std::string why;
  EXPECT_EQ(AskPodFate(&d, &kube, "default", kLauncherPod, "uid-1", absl::Seconds(1), &why),
            PodFate::kAlive);
  EXPECT_EQ(AskPodFate(&d, &kube, "default", "p2", "uid-2", absl::Seconds(1), &why),
            PodFate::kGone);
  EXPECT_THAT(kube.calls(), IsEmpty());
  // Not in the watch: kube-apiserver decides (here: 404).
  EXPECT_EQ(AskPodFate(&d, &kube, "default", "p3", "uid-3", absl::Seconds(1), &why),
            PodFate::kGone);
  EXPECT_THAT(kube.calls(), ElementsAre("GET default/p3"));
  // ... and a pod it has that the watch has not shown yet is alive.
  kube.SetPod(PodObject("p4", "uid-4", "Pending"));
  EXPECT_EQ(AskPodFate(&d, &kube, "default", "p4", "uid-4", absl::Seconds(1), &why),
            PodFate::kAlive);
}

}  // namespace
}  // namespace pdc::extender::testing
