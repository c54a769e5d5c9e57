// A pdc-node restart between answering kubelet's Allocate and pdc-extender
// accepting the confirmation (docs/design.md §6.4): the hand-off is
// confirmed at the next start from the hand-off journal, or, when that was
// lost, from kubelet's pod resources API (a double serving the real gRPC
// protocol on a real unix socket, fake_pod_resources.h). Each case runs two
// lives of the device plugin manager over the same state directory.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/file_util.h"
#include "common/metrics.h"
#include "driver/deviceplugin/device_plugin_manager.h"
#include "driver/deviceplugin/handoff_journal.h"
#include "driver/deviceplugin/handoff_recovery.h"
#include "driver/discovery.h"
#include "driver/node_metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/driver/fake_handoff_extender.h"
#include "tests/driver/fake_pod_resources.h"
#include "tests/driver/test_util.h"
#include "tests/testing/captured_log.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace pdc::driver::deviceplugin {
namespace {

using pdc::testing::CapturedLog;
using testing::Addr;
using testing::FakeHost;
using testing::FakePodResources;
using testing::GatedExtender;
using testing::NvmeClass;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

using testing::kNvme;
const std::string kClaimed = "0000:00:03.0";  // The VM's claimed device.
const std::string kOther = "0000:00:04.0";  // Another device of the resource.
const std::string kPod = "virt-launcher-vm1-uid-1";  // GatedExtender's name for it.

// What kubelet's pod resources endpoint shows after the restart.
enum class Kubelet {
  kNoSocket,      // Older kubelet, endpoint off, or not mounted.
  kNoPod,         // The pod is gone.
  kHoldsClaimed,  // default/<pod> holds the claimed device.
  kHoldsOther,    // default/<pod> holds another device of the resource.
};

struct Case {
  const char* name;
  bool keep_journal;      // The journal survives the restart.
  bool corrupt_line;      // A line of garbage is added to it.
  Kubelet kubelet;
  int failing_lists;      // List answers UNAVAILABLE this often first.
  bool pod_cancelled;     // The extender no longer shows the pod pending.
  bool want_confirmed;
};

class HandoffRecoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host_.kernel.AddDevice({.address = kClaimed, .group = 3, .numa = 0, .driver = "vfio-pci"});
    host_.kernel.AddDevice({.address = kOther, .group = 4, .numa = 0, .driver = "vfio-pci"});
  }

  std::unique_ptr<DevicePluginManager> NewManager(HandoffJournal* journal, GatedExtender* api,
                                                  const std::string& socket,
                                                  NodeMetrics* metrics = nullptr) {
    DevicePluginManagerOptions o;
    o.metrics = metrics;
    o.node = "node-a";
    o.plugin_dir = plugin_dir_.Join("absent");  // No kubelet to register with.
    o.classes = {NvmeClass()};
    o.confirmer.backoff_initial = absl::Milliseconds(1);
    o.confirmer.backoff_max = absl::Milliseconds(5);
    o.confirmer.journal = journal;
    o.recovery.socket_path = socket;
    o.recovery.backoff_initial = absl::Milliseconds(1);
    o.recovery.backoff_max = absl::Milliseconds(5);
    return std::make_unique<DevicePluginManager>(&host_.kernel, api, &clock_, o);
  }

  // Runs one case; the outcome as the extender and the journal see it.
  void Run(const Case& c) {
    SCOPED_TRACE(c.name);
    GatedExtender extender(kNvme);
    extender.AddClaim("default/c1", Addr(kClaimed));
    ASSERT_OK(extender.StartPod("default/c1", "vm1", "uid-1"));
    pdc::testing::TempDir state;
    const std::string path = state.Join("handoff-journal");

    // First life: Allocate is answered, then pdc-node is gone before its
    // confirmer ever reached pdc-extender.
    {
      ASSERT_OK_AND_ASSIGN(HandoffJournal::Opened j, HandoffJournal::Open(path));
      auto manager = NewManager(j.journal.get(), &extender, "");
      // The reconcile loop's first pass: an inventory, then the answer.
      DiscoveryOptions d{{NvmeClass()}, {}};
      ASSERT_OK_AND_ASSIGN(DiscoveryResult r, Discover(host_.kernel, "node-a", d));
      manager->OnInventory(r.inventory);
      manager->OnAllocations(extender.Answer());
      auto h = manager->plugin(kNvme)->Allocate({kOther});
      ASSERT_OK(h.status());
      EXPECT_THAT(h->pod.devices, ElementsAre(Addr(kClaimed)));
      // Journaled before the answer.
      EXPECT_TRUE(HandoffJournal::Open(path)->journal->Contains(kNvme, "uid-1"));
    }
    EXPECT_THAT(extender.confirmations(), IsEmpty());

    if (!c.keep_journal) {
      ASSERT_OK(WriteFileAtomically(path, ""));
    }
    if (c.corrupt_line) {
      ASSERT_OK_AND_ASSIGN(std::string text, ReadFileToString(path));
      ASSERT_OK(WriteFileAtomically(path, text + "devices.kubevirt.io/nvme half a line\n"));
    }
    if (c.pod_cancelled) extender.CancelPod("uid-1");
    pdc::testing::TempDir sockets;  // Per case: no socket left from the one before.
    const std::string socket = sockets.Join("kubelet.sock");
    FakePodResources kubelet(socket);
    if (c.kubelet != Kubelet::kNoSocket) {
      ASSERT_OK(kubelet.Start());
      kubelet.Fail(c.failing_lists);
      kubelet.AddPod("default", "virt-launcher-vm2-uid-2", "compute", "example.com/gpu",
                     {"gpu-0"});
      if (c.kubelet == Kubelet::kHoldsClaimed) {
        kubelet.AddPod("default", kPod, "compute", kNvme, {kClaimed});
      } else if (c.kubelet == Kubelet::kHoldsOther) {
        kubelet.AddPod("default", kPod, "compute", kNvme, {kOther});
      }
    }

    // Second life.
    CapturedLog log;
    MetricsRegistry registry;
    NodeMetrics metrics(&registry);
    {
      ASSERT_OK_AND_ASSIGN(HandoffJournal::Opened j, HandoffJournal::Open(path));
      EXPECT_EQ(j.corrupt.size(), c.corrupt_line ? 1u : 0u);
      auto manager = NewManager(j.journal.get(), &extender, socket, &metrics);
      ASSERT_OK(manager->Start());
      ASSERT_TRUE(manager->recovery().WaitUntilDone(absl::Seconds(20)));
      ASSERT_TRUE(manager->confirmer().WaitUntilIdle(absl::Seconds(20)));
      manager->Stop();
    }
    if (c.want_confirmed) {
      ASSERT_EQ(extender.confirmations().size(), 1u);
      EXPECT_EQ(extender.confirmations()[0].pod_uid, "uid-1");
      EXPECT_THAT(extender.confirmations()[0].devices, ElementsAre(Addr(kClaimed)));
    } else {
      EXPECT_THAT(extender.confirmations(), IsEmpty());
    }
    // Where the hand-off was found again, counted.
    const std::string rendered = registry.Render();
    EXPECT_EQ(absl::StrContains(rendered,
                                "pdc_node_handoffs_recovered_total{source=\"journal\"} 1\n"),
              c.keep_journal)
        << rendered;
    EXPECT_EQ(absl::StrContains(rendered,
                                "pdc_node_handoffs_recovered_total{source=\"pod_resources\"} 1\n"),
              !c.keep_journal && c.want_confirmed)
        << rendered;
    // Nothing is left to confirm again at the next start, whatever happened:
    // confirmed, gone upstream, or never journaled.
    ASSERT_OK_AND_ASSIGN(HandoffJournal::Opened after, HandoffJournal::Open(path));
    EXPECT_THAT(after.journal->Entries(), IsEmpty());
    if (c.kubelet == Kubelet::kNoSocket) {
      const std::string text = log.text();
      size_t lines = 0;
      for (size_t at = text.find("pod resources socket"); at != std::string::npos;
           at = text.find("pod resources socket", at + 1)) {
        ++lines;
      }
      EXPECT_EQ(lines, 1u) << text;
      EXPECT_TRUE(absl::StrContains(text, "hand-off journal alone")) << text;
    } else {
      EXPECT_EQ(kubelet.lists(), 1 + c.failing_lists);
    }
  }

  FakeHost host_;
  pdc::testing::TempDir plugin_dir_;
  pdc::testing::FakeClock clock_;
};

TEST_F(HandoffRecoveryTest, RestartBetweenAllocateAndConfirmation) {
  const Case cases[] = {
      {"journal kept: confirmed at start from it", true, false, Kubelet::kHoldsClaimed, 0,
       false, true},
      {"journal lost, kubelet shows the pod: confirmed", false, false, Kubelet::kHoldsClaimed,
       0, false, true},
      {"kubelet answers after two failures: confirmed", false, false, Kubelet::kHoldsClaimed,
       2, false, true},
      {"no pod resources socket: the journal alone, one log line", true, false,
       Kubelet::kNoSocket, 0, false, true},
      {"pod gone from kubelet and the extender: entry dropped", true, false, Kubelet::kNoPod,
       0, true, false},
      {"same pod name, other devices: not confirmed", false, false, Kubelet::kHoldsOther, 0,
       false, false},
      {"corrupt line in the journal: the entry beside it confirmed", true, true,
       Kubelet::kNoPod, 0, false, true},
  };
  for (const Case& c : cases) Run(c);
}

TEST(MatchHeldTest, NamespaceNameResourceAndExactDevices) {
  PendingPod p;
  p.resource_name = kNvme;
  p.ns = "default";
  p.pod_name = kPod;
  p.pod_uid = "uid-1";
  p.devices = {Addr(kOther), Addr(kClaimed)};  // Hand-off order, not sorted.
  auto held = [](std::string ns, std::string name, std::string resource,
                 std::vector<std::string> ids) {
    return PodDevices{std::move(ns), std::move(name), std::move(resource), std::move(ids)};
  };
  EXPECT_EQ(MatchHeld({p}, {held("default", kPod, kNvme, {kClaimed, kOther})}).size(), 1u);
  EXPECT_THAT(MatchHeld({p}, {held("other", kPod, kNvme, {kClaimed, kOther})}), IsEmpty());
  EXPECT_THAT(MatchHeld({p}, {held("default", "virt-launcher-x", kNvme, {kClaimed, kOther})}), IsEmpty());
  EXPECT_THAT(MatchHeld({p}, {held("default", kPod, "example.com/gpu", {kClaimed, kOther})}), IsEmpty());
  EXPECT_THAT(MatchHeld({p}, {held("default", kPod, kNvme, {kClaimed})}), IsEmpty());
  EXPECT_THAT(MatchHeld({p}, {held("default", kPod, kNvme, {kClaimed, kOther, "0000:00:05.0"})}),
              IsEmpty());
  EXPECT_THAT(MatchHeld({p}, {held("default", kPod, kNvme, {kClaimed, "not-a-pci-address"})}),
              IsEmpty());
}

}  // namespace
}  // namespace pdc::driver::deviceplugin
