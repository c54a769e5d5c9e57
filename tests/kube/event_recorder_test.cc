// EventRecorder against the kube-apiserver double on a real etcd: the Event
// it POSTs (read back and checked field by field), a repeat PATCHed into it
// (count, lastTimestamp), a repeat after the window a new Event, an expired
// Event created again, a full queue and a spammy object dropping and
// counting, an apiserver that fails, is unreachable or hangs never holding
// Record, and Stop bounded by its deadline.
#include "kube/event_recorder.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/metrics.h"
#include "extender/extender_metrics.h"
#include "kube/kube_http_client.h"
#include "tests/kube/kube_test_util.h"
#include "tests/testing/fake_clock.h"

namespace pdc::testing {
namespace {

using pdc::kube::EventRecorder;
using pdc::kube::EventRecorderOptions;
using pdc::kube::EventResult;
using pdc::kube::EventType;
using pdc::kube::ObjectRef;
using ::testing::HasSubstr;

// 2023-11-14T22:13:20.123456789Z
const absl::Time kT0 = absl::FromUnixNanos(1'700'000'000'123'456'789);

// A loopback port nobody listens on.
uint16_t ClosedPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ADD_FAILURE() << "no loopback port";
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

std::unique_ptr<pdc::kube::KubeApi> Connect(const std::string& server) {
  pdc::kube::KubeClientConfig c;
  c.server = server;
  absl::StatusOr<std::unique_ptr<pdc::kube::KubeApi>> api = pdc::kube::KubeApi::Connect(c);
  EXPECT_TRUE(api.ok()) << api.status();
  return api.ok() ? *std::move(api) : nullptr;
}

class EventRecorderTest : public KubeDoubleTest {
 protected:
  void SetUp() override {
    KubeDoubleTest::SetUp();
    if (IsSkipped()) return;
    kube_ = Connect(Url());
    ASSERT_NE(kube_, nullptr);
  }

  std::unique_ptr<pdc::kube::EventRecorder> NewRecorder(const Clock* clock, pdc::kube::EventRecorderOptions o = {}) {
    return std::make_unique<pdc::kube::EventRecorder>(kube_.get(), "pdc-extender", "pdc-extender-7c9f-x2",
                                           clock, o);
  }

  pdc::kube::ObjectRef Pod(std::string name = "virt-launcher-vm1-abcde", std::string uid = "uid-1") const {
    return {"v1", "Pod", ns_, std::move(name), std::move(uid)};
  }

  std::string EventsPath() const { return Cat("/api/v1/namespaces/", ns_, "/events"); }

  // The Events of this test's namespace, by name.
  std::vector<kube::Document> ListEvents() {
    KubeReply r = Call("GET", EventsPath());
    EXPECT_EQ(r.status, 200) << r.text;
    std::vector<kube::Document> out;
    const kube::Value* items = kube::Find(r.json, {"items"});
    if (items == nullptr || !items->IsArray()) {
      ADD_FAILURE() << "no items: " << r.text;
      return out;
    }
    for (const kube::Value& item : items->GetArray()) {
      out.emplace_back();
      out.back().CopyFrom(item, out.back().GetAllocator());
    }
    std::sort(out.begin(), out.end(), [](const kube::Document& a, const kube::Document& b) {
      return kube::GetString(a, {"metadata", "name"}) < kube::GetString(b, {"metadata", "name"});
    });
    return out;
  }

  // How many requests the double got that start with `prefix`.
  int Requests(std::string_view prefix) const {
    int n = 0;
    for (const std::string& r : api_->requests()) n += absl::StartsWith(r, Sv(prefix)) ? 1 : 0;
    return n;
  }
  // Waits (real time, at most 10 s) until the double got such a request.
  bool AwaitRequest(std::string_view prefix) const {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (absl::Now() < deadline) {
      if (Requests(prefix) > 0) return true;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return false;
  }

  std::unique_ptr<pdc::kube::KubeApi> kube_;
};

TEST_F(EventRecorderTest, FirstEventIsPostedWithClientGoFields) {
  FakeClock clock(kT0);
  MetricsRegistry registry;
  extender::ExtenderMetrics metrics(&registry, nullptr, &clock, "test");
  pdc::kube::EventRecorderOptions o;
  o.metrics = metrics.events();
  std::unique_ptr<pdc::kube::EventRecorder> events = NewRecorder(&clock, o);
  events->Record(Pod(), pdc::kube::EventType::kNormal, "ClaimBound",
                 "claim c1 bound: device 0000:3b:00.0 on node-a");
  events->WaitIdle();

  std::vector<kube::Document> list = ListEvents();
  ASSERT_EQ(list.size(), 1u);
  const kube::Document& e = list[0];
  // client-go: fmt.Sprintf("%v.%x", ref.Name, t.UnixNano()).
  EXPECT_EQ(kube::GetString(e, {"metadata", "name"}), "virt-launcher-vm1-abcde.17979cfe3d85cd15");
  EXPECT_EQ(kube::GetString(e, {"metadata", "namespace"}), ns_);
  EXPECT_EQ(kube::GetString(e, {"involvedObject", "apiVersion"}), "v1");
  EXPECT_EQ(kube::GetString(e, {"involvedObject", "kind"}), "Pod");
  EXPECT_EQ(kube::GetString(e, {"involvedObject", "namespace"}), ns_);
  EXPECT_EQ(kube::GetString(e, {"involvedObject", "name"}), "virt-launcher-vm1-abcde");
  EXPECT_EQ(kube::GetString(e, {"involvedObject", "uid"}), "uid-1");
  EXPECT_EQ(kube::GetString(e, {"reason"}), "ClaimBound");
  EXPECT_EQ(kube::GetString(e, {"message"}), "claim c1 bound: device 0000:3b:00.0 on node-a");
  EXPECT_EQ(kube::GetString(e, {"type"}), "Normal");
  EXPECT_EQ(kube::GetString(e, {"source", "component"}), "pdc-extender");
  EXPECT_EQ(kube::GetString(e, {"source", "host"}), "pdc-extender-7c9f-x2");
  EXPECT_EQ(kube::GetString(e, {"firstTimestamp"}), "2023-11-14T22:13:20Z");
  EXPECT_EQ(kube::GetString(e, {"lastTimestamp"}), "2023-11-14T22:13:20Z");
  EXPECT_EQ(kube::GetInt(e, {"count"}), 1);
  EXPECT_EQ(kube::GetString(e, {"reportingComponent"}), "pdc-extender");
  EXPECT_EQ(kube::GetString(e, {"reportingInstance"}), "pdc-extender-7c9f-x2");

  EXPECT_EQ(events->counts()[pdc::kube::EventResult::kSent], 1);
  EXPECT_THAT(registry.Render(), HasSubstr("pdc_events_total{result=\"sent\"} 1\n"));
}

TEST_F(EventRecorderTest, WarningOnAClaim) {
  FakeClock clock(kT0);
  std::unique_ptr<pdc::kube::EventRecorder> events = NewRecorder(&clock);
  events->Record({"pdc.kubevirt.io/v1alpha1", "PersistentDeviceClaim", ns_, "c1", "uid-c1"},
                 pdc::kube::EventType::kWarning, "ClaimLost", "node-a stopped reporting");
  events->WaitIdle();
  std::vector<kube::Document> list = ListEvents();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(kube::GetString(list[0], {"type"}), "Warning");
  EXPECT_EQ(kube::GetString(list[0], {"involvedObject", "apiVersion"}), "pdc.kubevirt.io/v1alpha1");
  EXPECT_EQ(kube::GetString(list[0], {"involvedObject", "kind"}), "PersistentDeviceClaim");
  EXPECT_TRUE(absl::StartsWith(kube::GetString(list[0], {"metadata", "name"}), "c1."));
}

TEST_F(EventRecorderTest, RepeatWithinWindowPatchesCountAndLastTimestamp) {
  FakeClock clock(kT0);
  std::unique_ptr<pdc::kube::EventRecorder> events = NewRecorder(&clock);
  events->Record(Pod(), pdc::kube::EventType::kWarning, "HandoffCancelled", "the target pod was deleted");
  events->WaitIdle();
  clock.Advance(absl::Minutes(3));
  events->Record(Pod(), pdc::kube::EventType::kWarning, "HandoffCancelled", "the target pod was deleted");
  events->WaitIdle();

  std::vector<kube::Document> list = ListEvents();
  ASSERT_EQ(list.size(), 1u);
  const std::string name = kube::GetString(list[0], {"metadata", "name"});
  EXPECT_EQ(kube::GetInt(list[0], {"count"}), 2);
  EXPECT_EQ(kube::GetString(list[0], {"firstTimestamp"}), "2023-11-14T22:13:20Z");
  EXPECT_EQ(kube::GetString(list[0], {"lastTimestamp"}), "2023-11-14T22:16:20Z");
  EXPECT_EQ(Requests(Cat("PATCH ", EventsPath(), "/", name)), 1);
  EXPECT_EQ(Requests(Cat("POST ", EventsPath())), 1);
  EXPECT_EQ(events->counts()[pdc::kube::EventResult::kSent], 1);
  EXPECT_EQ(events->counts()[pdc::kube::EventResult::kAggregated], 1);
}

TEST_F(EventRecorderTest, RepeatAfterTenMinutesIsNewEvent) {
  FakeClock clock(kT0);
  std::unique_ptr<pdc::kube::EventRecorder> events = NewRecorder(&clock);
  events->Record(Pod(), pdc::kube::EventType::kNormal, "ClaimReleased", "claim c1 released");
  clock.Advance(absl::Minutes(10) + absl::Seconds(1));
  events->Record(Pod(), pdc::kube::EventType::kNormal, "ClaimReleased", "claim c1 released");
  events->WaitIdle();

  std::vector<kube::Document> list = ListEvents();
  ASSERT_EQ(list.size(), 2u);
  for (const kube::Document& e : list) EXPECT_EQ(kube::GetInt(e, {"count"}), 1);
  EXPECT_EQ(kube::GetString(list[0], {"firstTimestamp"}), "2023-11-14T22:13:20Z");
  EXPECT_EQ(kube::GetString(list[1], {"firstTimestamp"}), "2023-11-14T22:23:21Z");
  EXPECT_EQ(events->counts()[pdc::kube::EventResult::kSent], 2);
  EXPECT_EQ(events->counts()[pdc::kube::EventResult::kAggregated], 0);
}

TEST_F(EventRecorderTest, ExpiredEventIsCreatedAgainUnderItsName) {
  FakeClock clock(kT0);
  std::unique_ptr<pdc::kube::EventRecorder> events = NewRecorder(&clock);
  events->Record(Pod(), pdc::kube::EventType::kNormal, "ClaimRecovered", "node-a reports again");
  events->WaitIdle();
  std::vector<kube::Document> list = ListEvents();
  ASSERT_EQ(list.size(), 1u);
  const std::string name = kube::GetString(list[0], {"metadata", "name"});
  // kube-apiserver deletes Events after their TTL (an hour by default).
  ASSERT_EQ(Call("DELETE", Cat(EventsPath(), "/", name)).status, 200);

  clock.Advance(absl::Minutes(1));
  events->Record(Pod(), pdc::kube::EventType::kNormal, "ClaimRecovered", "node-a reports again");
  events->WaitIdle();
  list = ListEvents();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(kube::GetString(list[0], {"metadata", "name"}), name);
  EXPECT_EQ(kube::GetInt(list[0], {"count"}), 2);
  EXPECT_EQ(kube::GetString(list[0], {"firstTimestamp"}), "2023-11-14T22:13:20Z");
  EXPECT_EQ(kube::GetString(list[0], {"lastTimestamp"}), "2023-11-14T22:14:20Z");
  EXPECT_EQ(Requests(Cat("PATCH ", EventsPath(), "/", name)), 1);
  EXPECT_EQ(events->counts()[pdc::kube::EventResult::kSent], 2);
}

TEST_F(EventRecorderTest, BadInputNeverMakesAnInvalidRequest) {
  FakeClock clock(kT0);
  std::unique_ptr<pdc::kube::EventRecorder> events = NewRecorder(&clock);
  std::string message = "device \"0000:3b:00.0\"\n\xFF\xC3 conflict ";
  message.append(5000, 'x');
  events->Record(Pod("Virt_Launcher.-VM1"), pdc::kube::EventType::kWarning, "device conflict!", message);
  events->Record(Pod(""), pdc::kube::EventType::kNormal, "ClaimBound", "no name");
  events->Record({"v1", "Pod", "Bad/Namespace", "p", "u"}, pdc::kube::EventType::kNormal, "ClaimBound", "m");
  events->WaitIdle();

  std::vector<kube::Document> list = ListEvents();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_TRUE(absl::StartsWith(kube::GetString(list[0], {"metadata", "name"}),
                               "virt-launcher.vm1.17979cfe3d85cd15"));
  EXPECT_EQ(kube::GetString(list[0], {"reason"}), "DeviceConflict");
  const std::string stored = kube::GetString(list[0], {"message"});
  EXPECT_LE(stored.size(), pdc::kube::kMaxEventMessage);
  EXPECT_TRUE(
      absl::StartsWith(stored, "device \"0000:3b:00.0\"\n\xEF\xBF\xBD\xEF\xBF\xBD conflict x"))
      << stored.substr(0, 40);
  EXPECT_EQ(events->counts()[pdc::kube::EventResult::kSent], 1);
  EXPECT_EQ(events->counts()[pdc::kube::EventResult::kDroppedInvalid], 2);
  EXPECT_EQ(events->counts()[pdc::kube::EventResult::kDroppedSendFailed], 0);
}

TEST_F(EventRecorderTest, FullQueueDropsAndCounts) {
  FakeClock clock(kT0);
  pdc::kube::EventRecorderOptions o;
  o.queue_limit = 3;
  std::unique_ptr<pdc::kube::EventRecorder> events = NewRecorder(&clock, o);
  // The sender is held in its first POST while the queue fills.
  api_->DelayRequests({"POST", EventsPath()}, 1, absl::Seconds(2));
  events->Record(Pod(), pdc::kube::EventType::kNormal, "ClaimBound", "first");
  ASSERT_TRUE(AwaitRequest(Cat("POST ", EventsPath())));
  for (int i = 0; i < 5; ++i) {
    events->Record(Pod(), pdc::kube::EventType::kNormal, "ClaimBound", absl::StrCat("more ", i));
  }
  EXPECT_EQ(events->counts()[pdc::kube::EventResult::kDroppedQueueFull], 2);
  events->WaitIdle();
  EXPECT_EQ(events->counts()[pdc::kube::EventResult::kSent], 4);
  std::vector<std::string> messages;
  for (const kube::Document& e : ListEvents()) messages.push_back(kube::GetString(e, {"message"}));
  std::sort(messages.begin(), messages.end());
  EXPECT_EQ(messages, (std::vector<std::string>{"first", "more 0", "more 1", "more 2"}));
}

TEST_F(EventRecorderTest, SpammyObjectIsThrottled) {
  FakeClock clock(kT0);
  std::unique_ptr<pdc::kube::EventRecorder> events = NewRecorder(&clock);
  for (int i = 0; i < 30; ++i) {
    events->Record(Pod(), pdc::kube::EventType::kWarning, "DeviceConflict", absl::StrCat("conflict ", i));
  }
  events->Record(Pod("other-pod", "uid-2"), pdc::kube::EventType::kNormal, "ClaimBound", "unaffected");
  events->WaitIdle();
  EXPECT_EQ(events->counts()[pdc::kube::EventResult::kSent], 26);
  EXPECT_EQ(events->counts()[pdc::kube::EventResult::kDroppedSpam], 5);
  EXPECT_EQ(ListEvents().size(), 26u);

  // One token back after 5 minutes.
  clock.Advance(absl::Minutes(5));
  events->Record(Pod(), pdc::kube::EventType::kWarning, "DeviceConflict", "after a pause");
  events->Record(Pod(), pdc::kube::EventType::kWarning, "DeviceConflict", "too soon again");
  events->WaitIdle();
  EXPECT_EQ(events->counts()[pdc::kube::EventResult::kSent], 27);
  EXPECT_EQ(events->counts()[pdc::kube::EventResult::kDroppedSpam], 6);
}

TEST_F(EventRecorderTest, ServerErrorsAreRetriedWithBackoffThenDropped) {
  FakeClock clock(kT0);
  std::unique_ptr<pdc::kube::EventRecorder> events = NewRecorder(&clock);  // 3 attempts.
  const std::string post = Cat("POST ", EventsPath());

  api_->FailRequests({"POST", EventsPath()}, 2, 500);
  events->Record(Pod(), pdc::kube::EventType::kNormal, "ClaimBound", "third time lucky");
  events->WaitIdle();
  EXPECT_EQ(events->counts()[pdc::kube::EventResult::kSent], 1);
  EXPECT_EQ(Requests(post), 3);
  // Two waits: 500 ms and 1 s, each jittered by up to 20 %.
  EXPECT_GE(clock.slept(), absl::Milliseconds(1500));
  EXPECT_LT(clock.slept(), absl::Milliseconds(1800));

  api_->FailRequests({"POST", EventsPath()}, 3, 503);
  events->Record(Pod(), pdc::kube::EventType::kNormal, "ClaimBound", "never");
  events->WaitIdle();
  EXPECT_EQ(events->counts()[pdc::kube::EventResult::kDroppedSendFailed], 1);
  EXPECT_EQ(Requests(post), 6);

  // A refusal (not transient) is not tried again.
  api_->FailRequests({"POST", EventsPath()}, 1, 403);
  events->Record(Pod(), pdc::kube::EventType::kNormal, "ClaimBound", "forbidden");
  events->WaitIdle();
  EXPECT_EQ(events->counts()[pdc::kube::EventResult::kDroppedSendFailed], 2);
  EXPECT_EQ(Requests(post), 7);
  ASSERT_EQ(ListEvents().size(), 1u);
  EXPECT_EQ(kube::GetString(ListEvents()[0], {"message"}), "third time lucky");
}

TEST_F(EventRecorderTest, UnreachableApiserverNeverBlocksAndStopReturns) {
  FakeClock clock(kT0);
  std::unique_ptr<pdc::kube::KubeApi> nowhere =
      Connect(absl::StrCat("http://127.0.0.1:", ClosedPort()));
  ASSERT_NE(nowhere, nullptr);
  pdc::kube::EventRecorder events(nowhere.get(), "pdc-extender", "h", &clock);
  for (int i = 0; i < 20; ++i) {
    events.Record(Pod(), pdc::kube::EventType::kNormal, "ClaimBound", absl::StrCat("m", i));
  }
  const absl::Time start = absl::Now();
  events.Stop();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  const pdc::kube::EventCounts c = events.counts();
  EXPECT_EQ(c[pdc::kube::EventResult::kSent], 0);
  EXPECT_EQ(c[pdc::kube::EventResult::kDroppedSendFailed] + c[pdc::kube::EventResult::kDroppedShutdown], 20);
  // Recorded after Stop: counted, not queued.
  events.Record(Pod(), pdc::kube::EventType::kNormal, "ClaimBound", "late");
  EXPECT_EQ(events.counts()[pdc::kube::EventResult::kDroppedShutdown], c[pdc::kube::EventResult::kDroppedShutdown] + 1);
}

// Real time: what is measured is how long Stop takes.
TEST_F(EventRecorderTest, HangingApiserverStopReturnsWithinItsDeadline) {
  pdc::kube::EventRecorderOptions o;
  o.call_timeout = absl::Seconds(1);
  o.stop_deadline = absl::Milliseconds(500);
  std::unique_ptr<pdc::kube::EventRecorder> events = NewRecorder(RealClock(), o);
  api_->DelayRequests({"POST", EventsPath()}, 100, absl::Seconds(3));
  const absl::Time record_start = absl::Now();
  for (int i = 0; i < 20; ++i) {
    events->Record(Pod(), pdc::kube::EventType::kNormal, "ClaimBound", absl::StrCat("m", i));
  }
  EXPECT_LT(absl::Now() - record_start, absl::Seconds(1));  // Queued, not sent.
  ASSERT_TRUE(AwaitRequest(Cat("POST ", EventsPath())));

  const absl::Time stop_start = absl::Now();
  events->Stop();
  // The call in flight (1 s at most), then the 500 ms drain at most.
  EXPECT_LT(absl::Now() - stop_start,
            absl::Seconds(1) + absl::Milliseconds(500) + absl::Seconds(1));
  const pdc::kube::EventCounts c = events->counts();
  EXPECT_EQ(c[pdc::kube::EventResult::kSent], 0);
  EXPECT_GE(c[pdc::kube::EventResult::kDroppedShutdown], 1);
  EXPECT_EQ(c[pdc::kube::EventResult::kDroppedSendFailed] + c[pdc::kube::EventResult::kDroppedShutdown], 20);
}

}  // namespace
}  // namespace pdc::testing
