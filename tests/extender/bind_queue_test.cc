// Binds with a Kubernetes API run on the BindQueue's threads: the bind
// request is parked (a long-poll) while the apiserver is slow, so the HTTP
// server's only worker still answers /healthz and filter; the answer comes
// when the saga ends, or when its time is up.
#include "extender/bind_queue.h"

#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "extender/router_server.h"
#include "net/http_client.h"
#include "tests/extender/extender_fixture.h"
#include "tests/testing/fake_kube.h"

namespace pdc::extender::testing {
namespace {

using ::pdc::testing::FakeKube;
using ::testing::HasSubstr;

// FakeKube whose Binding waits until the test releases it: an apiserver
// that takes its time.
class GatedKube final : public kube::KubeClient {
 public:
  absl::StatusOr<std::string> GetPod(std::string_view ns, std::string_view name,
                                     absl::Duration timeout) override {
    return fake.GetPod(ns, name, timeout);
  }
  absl::Status AnnotatePod(std::string_view ns, std::string_view name, std::string_view key,
                           std::string_view value, absl::Duration timeout) override {
    return fake.AnnotatePod(ns, name, key, value, timeout);
  }
  absl::Status BindPod(std::string_view ns, std::string_view name, std::string_view uid,
                       std::string_view node, absl::Duration timeout) override {
    if (!entered.HasBeenNotified()) entered.Notify();
    release.WaitForNotification();
    return fake.BindPod(ns, name, uid, node, timeout);
  }

  FakeKube fake;
  absl::Notification entered;  // A Binding is being sent.
  absl::Notification release;  // The apiserver answers.
};

class BindQueueTest : public ExtenderFixture {
 protected:
  void SetUp() override {
    ExtenderFixture::SetUp();
    TwoNodes();
    UseKube(&kube_);
  }
  void StartQueue(BinderOptions bo, BindQueueOptions qo = {}) {
    binder_ = std::make_unique<Binder>(&ctx_, bo);
    queue_ = std::make_unique<BindQueue>(binder_.get(), &notifier_, qo);
    ctx_.binds = queue_.get();
    // The router takes the context's Binds when it is made.
    router_ = std::make_unique<Router>(options_, &ctx_);
    router_->SetReady(true);
  }
  void StartServer() {
    HttpServerOptions so;
    so.threads = 1;  // One HTTP worker: a bind holding it would stall everything.
    auto s = StartRouterServer(so, router_.get(), &notifier_, nullptr);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
  }
  void TearDown() override {
    if (!kube_.release.HasBeenNotified()) kube_.release.Notify();
    if (server_) server_->Shutdown();
    queue_.reset();
    ctx_.binds = nullptr;
    UseKube(nullptr);
  }
  std::unique_ptr<HttpClient> Client() {
    HttpClientOptions o;
    o.base_url = absl::StrCat("http://127.0.0.1:", server_->port());
    o.timeout = absl::Seconds(20);
    auto c = HttpClient::Create(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }
  void FilterVm1(HttpClient& c) {
    ASSERT_OK_AND_ASSIGN(pdc::HttpResponse f,
                         c.Post("/scheduler/filter",
                                NamesArgs(VirtLauncherPod("vm1", "uid-1"), {"node-a"})));
    ASSERT_EQ(f.status, 200);
  }

  GatedKube kube_;
  std::unique_ptr<Binder> binder_;
  std::unique_ptr<BindQueue> queue_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(BindQueueTest, ASlowApiserverHoldsNoHttpThread) {
  StartQueue(BinderOptions{});
  StartServer();
  auto scheduler = Client();
  FilterVm1(*scheduler);
  std::string answer;
  std::thread bind([&] {
    auto r = scheduler->Post("/scheduler/bind", BindArgs("vm1", "uid-1", "node-a"));
    answer = r.ok() ? r->body : r.status().ToString();
  });
  ASSERT_TRUE(kube_.entered.WaitForNotificationWithTimeout(absl::Seconds(10)));

  // The bind waits for the apiserver; the one HTTP worker is free.
  auto other = Client();
  ASSERT_OK_AND_ASSIGN(pdc::HttpResponse health, other->Get("/healthz"));
  EXPECT_EQ(health.status, 200);
  ASSERT_OK_AND_ASSIGN(pdc::HttpResponse filter,
                       other->Post("/scheduler/filter",
                                   NamesArgs(VirtLauncherPod("vm2", "uid-2"), {"node-b"})));
  EXPECT_EQ(filter.status, 200);
  EXPECT_EQ(queue_->jobs(), 1u);

  kube_.release.Notify();
  bind.join();
  EXPECT_EQ(answer, R"({"Error":""})");
  EXPECT_EQ(queue_->jobs(), 0u);  // Taken.
  ASSERT_OK_AND_ASSIGN(Claim c, allocator_->GetClaim({"default", "vm1-nvme"}));
  EXPECT_EQ(c.status.node, "node-a");
}

TEST_F(BindQueueTest, ABindStillRunningWhenItsTimeIsUpIsAnsweredAndEndsAlone) {
  BinderOptions bo;
  bo.deadline = absl::Seconds(1);  // Parked for 2 s at most (deadline + 1 s).
  bo.read_back = absl::Milliseconds(250);
  StartQueue(bo);
  StartServer();
  auto scheduler = Client();
  FilterVm1(*scheduler);
  ASSERT_OK_AND_ASSIGN(pdc::HttpResponse r,
                       scheduler->Post("/scheduler/bind", BindArgs("vm1", "uid-1", "node-a")));
  EXPECT_THAT(r.body, HasSubstr("the bind did not end within 2s"));
  EXPECT_EQ(queue_->jobs(), 1u);  // Still talking to the apiserver.

  kube_.release.Notify();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (queue_->jobs() != 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(queue_->jobs(), 0u);  // Its result was dropped: nobody waits.
  // The saga itself ran to its end: the pod is bound with its device.
  ASSERT_OK_AND_ASSIGN(Claim c, allocator_->GetClaim({"default", "vm1-nvme"}));
  EXPECT_EQ(c.status.node, "node-a");
}

TEST_F(BindQueueTest, AFullQueueRefusesAtOnce) {
  BindQueueOptions qo;
  qo.threads = 1;
  qo.max_jobs = 1;
  StartQueue(BinderOptions{}, qo);
  ASSERT_EQ(Post("/scheduler/filter", NamesArgs(VirtLauncherPod("vm1", "uid-1"), {"node-a"})).status,
            200);
  const size_t topics_before = notifier_.topics();
  ASSERT_OK_AND_ASSIGN(BindQueue::Ticket first,
                       queue_->Start(api::BindingArgs{"virt-launcher-vm1-x7k2p", "default",
                                                      "uid-1", "node-a"}));
  EXPECT_NE(first.token, 0u);
  EXPECT_EQ(first.topic, BindQueue::Topic(first.token));
  absl::StatusOr<BindQueue::Ticket> second =
      queue_->Start(api::BindingArgs{"virt-launcher-vm2-x7k2p", "default", "uid-2", "node-b"});
  EXPECT_THAT(second.status(), pdc::testing::StatusIs(absl::StatusCode::kResourceExhausted,
                                                      HasSubstr("kube-scheduler will retry")));
  kube_.release.Notify();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  std::optional<BindResult> result;
  while (!(result = queue_->Take(first.token)) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_TRUE(result.has_value());
  EXPECT_TRUE(result->ok()) << result->error;
  // Its topic was bumped and then retired: only node topics are left.
  EXPECT_EQ(notifier_.topics(), topics_before);
}

}  // namespace
}  // namespace pdc::extender::testing
