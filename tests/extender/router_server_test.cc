// pdc-extender's Router served by the shared server (extender/router_server.h)
// over real loopback sockets (port 0): scheduler verbs over keep-alive, the
// Router's errors, and its allocations long-polls parked without threads and
// woken by a bind on their node only. The server's own behaviour (body limit,
// large bodies and answers in pieces, malformed requests, timeouts, Expect,
// shutdown) is tested once, in tests/net/http_server_test.cc.
#include "extender/router_server.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "net/http_client.h"
#include "tests/extender/extender_fixture.h"
#include "tests/testing/raw_socket.h"

namespace pdc::extender::testing {
namespace {

using ::pdc::testing::RawSocket;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class RouterServerTest : public ExtenderFixture {
 protected:
  void StartServer() {
    auto s = StartRouterServer(server_options_, router_.get(), &notifier_, &metrics_);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }
  std::unique_ptr<HttpClient> Client() {
    HttpClientOptions o;
    o.base_url = absl::StrCat("http://127.0.0.1:", server_->port());
    o.timeout = absl::Seconds(20);
    auto c = HttpClient::Create(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }
  // Waits (bounded) until `n` long-polls are parked on the notifier.
  bool AwaitParked(size_t n) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (notifier_.pending() < n) {
      if (absl::Now() > deadline) return false;
      std::this_thread::yield();
    }
    return true;
  }

  // kube-scheduler's filter and bind of vm1's first pod on node-a, over `c`.
  void FilterAndBindVm1OnNodeA(HttpClient& c) {
    ASSERT_OK_AND_ASSIGN(pdc::HttpResponse f,
                         c.Post("/scheduler/filter",
                                NamesArgs(VirtLauncherPod("vm1", "uid-1"), {"node-a"})));
    EXPECT_EQ(f.status, 200);
    ASSERT_OK_AND_ASSIGN(pdc::HttpResponse bind,
                         c.Post("/scheduler/bind", BindArgs("vm1", "uid-1", "node-a")));
    EXPECT_EQ(bind.body, R"({"Error":""})");
  }

  MetricsRegistry registry_;
  ExtenderMetrics metrics_{&registry_, nullptr, &clock_, "test"};
  HttpServerOptions server_options_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(RouterServerTest, KeepAliveFilterOverOneConnection) {
  TwoNodes();
  StartServer();
  auto c = Client();
  ASSERT_NE(c, nullptr);
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(
        pdc::HttpResponse r,
        c->Post("/scheduler/filter",
                NamesArgs(VirtLauncherPod("vm1", "uid-1"), {"node-a", "node-b"})));
    EXPECT_EQ(r.status, 200);
    EXPECT_THAT(r.body, HasSubstr(R"("NodeNames":["node-a","node-b"])"));
    EXPECT_EQ(r.Header("Content-Type"), "application/json");
  }
  EXPECT_EQ(c->connections_opened(), 1u);
  ASSERT_OK_AND_ASSIGN(pdc::HttpResponse h, c->Get("/healthz"));
  EXPECT_EQ(h.body, "ok");
}

// The server leaves unknown paths to its handler: the Router's JSON 404.
TEST_F(RouterServerTest, UnknownPathIsTheRoutersJson404) {
  StartServer();
  auto c = Client();
  ASSERT_OK_AND_ASSIGN(pdc::HttpResponse r, c->Post("/scheduler/nope", "{}"));
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body, R"({"error":"no such endpoint: POST /scheduler/nope","field":""})");
}

TEST_F(RouterServerTest, LongPollWakesOnChangeWithoutHoldingAWorker) {
  server_options_.threads = 1;
  TwoNodes();
  StartServer();
  ASSERT_OK_AND_ASSIGN(NodeAllocations now, allocator_->GetNodeAllocations("node-a"));
  const std::string target = absl::StrCat("/v1/nodes/node-a/allocations?since=",
                                          now.version, "&wait=30");
  // Several parked polls on a one-thread server...
  constexpr int kPolls = 4;
  std::vector<std::thread> pollers;
  std::vector<pdc::HttpResponse> answers(kPolls);
  for (int i = 0; i < kPolls; ++i) {
    pollers.emplace_back([&, i] {
      auto c = Client();
      auto r = c->Get(target);
      if (r.ok()) answers[i] = *r;
    });
  }
  ASSERT_TRUE(AwaitParked(kPolls));
  // The server reports them in pdc-extender's gauge.
  EXPECT_THAT(registry_.Render(), HasSubstr(absl::StrCat("\npdc_long_polls_waiting ", kPolls, "\n")));
  // ...and the worker is still free for other requests.
  auto c = Client();
  ASSERT_OK_AND_ASSIGN(pdc::HttpResponse h, c->Get("/healthz"));
  EXPECT_EQ(h.body, "ok");
  // A bind on node-a changes its allocations and wakes them all.
  const absl::Time start = absl::Now();
  FilterAndBindVm1OnNodeA(*c);
  for (auto& t : pollers) t.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  for (const auto& a : answers) {
    EXPECT_EQ(a.status, 200);
    EXPECT_THAT(a.body, HasSubstr(R"("claim":"default/vm1-nvme")"));
  }
  EXPECT_EQ(notifier_.pending(), 0u);
  EXPECT_THAT(registry_.Render(), HasSubstr("\npdc_long_polls_waiting 0\n"));
}

TEST_F(RouterServerTest, LongPollAnswersWithCurrentStateWhenTimeIsUp) {
  TwoNodes();
  StartServer();
  ASSERT_OK_AND_ASSIGN(NodeAllocations now, allocator_->GetNodeAllocations("node-a"));
  auto c = Client();
  ASSERT_OK_AND_ASSIGN(
      pdc::HttpResponse r,
      c->Get(absl::StrCat("/v1/nodes/node-a/allocations?since=", now.version, "&wait=0.2")));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, absl::StrCat(R"({"node":"node-a","version":)", now.version,
                                 R"(,"claimed":[],"returnToHost":[]})"));
  // A change on another node leaves the poll's subscription alone; a bump of
  // everything wakes it, and it parks again until its time is up.
  RawSocket s(server_->port());
  ASSERT_TRUE(s.Send(absl::StrCat("GET /v1/nodes/node-a/allocations?since=", now.version,
                                  "&wait=0.5 HTTP/1.1\r\nHost: x\r\n\r\n")));
  ASSERT_TRUE(AwaitParked(1));
  Report("node-b", {NvmeDevice("0000:3b:00.0", 12, 0, "SNB0")});
  EXPECT_EQ(notifier_.pending(), 1u);
  notifier_.Bump();
  EXPECT_THAT(s.ReadUntil("returnToHost"), StartsWith("HTTP/1.1 200"));
}

// Over real sockets: a bind on node-a answers node-a's parked poll and
// leaves node-b's parked, its subscription untouched.
TEST_F(RouterServerTest, BindWakesOnlyItsNodesPoll) {
  TwoNodes();
  StartServer();
  ASSERT_OK_AND_ASSIGN(NodeAllocations a0, allocator_->GetNodeAllocations("node-a"));
  ASSERT_OK_AND_ASSIGN(NodeAllocations b0, allocator_->GetNodeAllocations("node-b"));
  RawSocket a(server_->port());
  RawSocket b(server_->port());
  ASSERT_TRUE(a.Send(absl::StrCat("GET /v1/nodes/node-a/allocations?since=", a0.version,
                                  "&wait=20 HTTP/1.1\r\nHost: x\r\n\r\n")));
  ASSERT_TRUE(b.Send(absl::StrCat("GET /v1/nodes/node-b/allocations?since=", b0.version,
                                  "&wait=20 HTTP/1.1\r\nHost: x\r\n\r\n")));
  ASSERT_TRUE(AwaitParked(2));
  auto c = Client();
  FilterAndBindVm1OnNodeA(*c);
  // The bind's listener ran before the bind answered: node-b's subscription
  // is still the one pending.
  EXPECT_EQ(notifier_.pending(), 1u);
  const std::string reply = a.ReadUntil("returnToHost");
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(reply, HasSubstr(R"("claim":"default/vm1-nvme")"));
  EXPECT_EQ(notifier_.pending(), 1u);
  EXPECT_THAT(registry_.Render(), HasSubstr("\npdc_long_polls_waiting 1\n"));
}

}  // namespace
}  // namespace pdc::extender::testing
