// The Beast server (net/http_server.h) over real loopback sockets (port 0),
// with a plain handler: keep-alive, body limit, Expect: 100-continue, read
// and idle timeouts, long-polls parked without threads, graceful shutdown.
// pdc-extender's Router behind the same server: tests/extender.
#include "net/http_server.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "common/notifier.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "net/http_client.h"
#include "tests/testing/raw_socket.h"
#include "tests/testing/status_matchers.h"

namespace pdc::net {
namespace {

using ::pdc::testing::RawSocket;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// GET /healthz: "ok". POST /echo: the body back. GET /poll?since=V&wait=S
// [&topic=T]: a long-poll on the notifier, answered {"version":N} once the
// notifier (the topic's version, with a topic) is past V (or when the server
// says time is up); like pdc-extender's, it reads the notifier first and
// waits for any change (of the topic) past that. Anything else: 404.
class TestRoutes {
 public:
  explicit TestRoutes(const Notifier* notifier) : notifier_(notifier) {}

  HttpResponse operator()(HttpRequest r) const {
    HttpResponse out;
    const absl::string_view target = r.target;
    const absl::string_view path = target.substr(0, target.find('?'));
    if (path == "/healthz") {
      out.content_type = "text/plain";
      out.body = "ok";
    } else if (r.method == "POST" && path == "/echo") {
      out.body = std::move(r.body);
    } else if (r.method == "GET" && path == "/poll") {
      uint64_t since = 0;
      double wait = 0;
      std::string topic;
      for (absl::string_view kv : absl::StrSplit(target.substr(path.size() + 1), '&')) {
        if (absl::ConsumePrefix(&kv, "since=")) (void)absl::SimpleAtoi(kv, &since);
        if (absl::ConsumePrefix(&kv, "wait=")) (void)absl::SimpleAtod(kv, &wait);
        if (absl::ConsumePrefix(&kv, "topic=")) topic = std::string(kv);
      }
      const uint64_t now = notifier_->version(topic);
      if (now > since || !r.allow_wait) {
        out.body = absl::StrCat(R"({"version":)", now, "}");
      } else {
        out.long_poll = LongPoll{notifier_->version(), absl::Seconds(wait), topic};
      }
    } else {
      out.status = 404;
      out.body = absl::StrCat(R"({"error":"no such endpoint: )", r.method, " ", path,
                              R"(","field":""})");
    }
    return out;
  }

 private:
  const Notifier* const notifier_;
};

class HttpServerTest : public ::testing::Test {
 protected:
  void StartServer() {
    server_options_.notifier = &notifier_;
    server_options_.observer.long_polls_waiting = [this](int delta) {
      parked_gauge_ += delta;
    };
    auto s = HttpServer::Start(server_options_, TestRoutes(&notifier_));
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
  // A JSON body of `n` names, "n-100000" first.
  static std::string Names(int n) {
    std::vector<std::string> names;
    for (int i = 0; i < n; ++i) names.push_back(absl::StrCat("\"n-", 100000 + i, "\""));
    return absl::StrCat(R"({"NodeNames":[)", absl::StrJoin(names, ","), "]}");
  }

  Notifier notifier_;
  std::atomic<int> parked_gauge_{0};
  HttpServerOptions server_options_;
  std::unique_ptr<HttpServer> server_;
};

constexpr char kHealthz[] = "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n";

// At max_connections the server stops accepting: a new client waits in the
// listen backlog, unanswered, until an open connection closes.
TEST_F(HttpServerTest, AtTheConnectionCapANewClientWaitsUntilOneCloses) {
  server_options_.max_connections = 2;
  std::vector<bool> paused;
  absl::Mutex mu;
  server_options_.observer.accept_paused = [&](bool p) {
    absl::MutexLock lock(&mu);
    paused.push_back(p);
  };
  // The observer writes to these locals: the server stops before they go
  // (closing the sockets below resumes accepting, which reports it).
  absl::Cleanup stop = [this] { if (server_) server_->Shutdown(); };
  StartServer();
  auto a = std::make_unique<RawSocket>(server_->port());
  RawSocket b(server_->port());
  ASSERT_TRUE(a->Send(kHealthz) && b.Send(kHealthz));
  EXPECT_THAT(a->ReadUntil("ok"), HasSubstr("200 OK"));
  EXPECT_THAT(b.ReadUntil("ok"), HasSubstr("200 OK"));

  RawSocket c(server_->port());
  ASSERT_TRUE(c.connected()) << "the kernel's backlog takes the connection";
  ASSERT_TRUE(c.Send(kHealthz));
  EXPECT_FALSE(c.WaitReadable(500)) << "answered beyond the cap";

  a.reset();  // One closes: the third is accepted and answered.
  EXPECT_THAT(c.ReadUntil("ok"), HasSubstr("200 OK"));
  absl::MutexLock lock(&mu);
  // Paused at two, resumed when one closed (and paused again once the third
  // is in, which may come after its answer).
  ASSERT_GE(paused.size(), 2u);
  EXPECT_TRUE(paused[0]);
  EXPECT_FALSE(paused[1]);
}

// Out of descriptors, accept() fails at once for as long as the pending
// connection waits: the server backs off instead of spinning, and serves
// the connection once descriptors are free again.
TEST_F(HttpServerTest, AcceptFailuresBackOffInsteadOfSpinning) {
#if defined(PDC_SANITIZED)  // PDC_SANITIZE builds, gcc or clang.
  // With no descriptor left the sanitizer runtime itself fails its own checks
  // (UBSan's dynamic type check reports false errors): run in normal builds.
  GTEST_SKIP() << "descriptor exhaustion starves the sanitizer runtime";
#endif
  std::atomic<int> failures{0};
  server_options_.observer.accept_failed = [&](const std::string&, absl::Duration) {
    ++failures;
  };
  absl::Cleanup stop = [this] { if (server_) server_->Shutdown(); };  // Before `failures` goes.
  StartServer();
  const uint16_t port = server_->port();
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  // A limit a little above what is open, then every free number taken.
  int highest = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    int n = 0;
    if (absl::SimpleAtoi(e.path().filename().string(), &n)) highest = std::max(highest, n);
  }
  rlimit tight = saved;
  tight.rlim_cur = static_cast<rlim_t>(highest + 64);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &tight), 0);
  std::vector<int> fillers;
  for (int d; (d = ::dup(fd)) >= 0;) fillers.push_back(d);
  ASSERT_EQ(errno, EMFILE);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const int during = failures.load();
  for (int d : fillers) ::close(d);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  EXPECT_GE(during, 1) << "accept() never failed: the test did not exhaust descriptors";
  // 10 ms doubling to 1 s: about 7 attempts in a second; a loop without a
  // pause makes hundreds of thousands.
  EXPECT_LE(during, 20);
  ASSERT_EQ(::send(fd, kHealthz, sizeof(kHealthz) - 1, MSG_NOSIGNAL),
            static_cast<ssize_t>(sizeof(kHealthz) - 1));
  pollfd p{fd, POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 5000), 1) << "not served once descriptors were free";
  char buf[256] = {};
  EXPECT_GT(::recv(fd, buf, sizeof(buf) - 1, 0), 0);
  EXPECT_THAT(std::string(buf), HasSubstr("200 OK"));
  ::close(fd);
}

TEST_F(HttpServerTest, KeepAliveOverOneConnection) {
  StartServer();
  auto c = Client();
  ASSERT_NE(c, nullptr);
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(pdc::HttpResponse r,
                         c->Post("/echo", R"({"NodeNames":["node-a","node-b"]})"));
    EXPECT_EQ(r.status, 200);
    EXPECT_THAT(r.body, HasSubstr(R"("NodeNames":["node-a","node-b"])"));
    EXPECT_EQ(r.Header("Content-Type"), "application/json");
  }
  EXPECT_EQ(c->connections_opened(), 1u);
  ASSERT_OK_AND_ASSIGN(pdc::HttpResponse h, c->Get("/healthz"));
  EXPECT_EQ(h.body, "ok");
  EXPECT_EQ(h.Header("Server"), "pdc");
}

TEST_F(HttpServerTest, BodyOverTheLimitIs413) {
  server_options_.max_body_bytes = 1024;
  StartServer();
  RawSocket s(server_->port());
  ASSERT_TRUE(s.connected());
  ASSERT_TRUE(s.Send(absl::StrCat("POST /echo HTTP/1.1\r\nHost: x\r\n"
                                  "Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n",
                                  std::string(5000, ' '))));
  const std::string reply = s.ReadUntilClose();
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 413"));
  EXPECT_THAT(reply, HasSubstr(R"({"error":"request body larger than the limit of 1024 bytes",)"
                               R"("field":""})"));
  // A body within the limit still works on a new connection.
  auto c = Client();
  ASSERT_OK_AND_ASSIGN(pdc::HttpResponse ok, c->Post("/echo", "{}"));
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body, "{}");
}

// A body larger than one read chunk (256 KiB), arriving in pieces, followed
// on the same connection by a second request: both are read whole.
TEST_F(HttpServerTest, LargeBodyInPiecesThenAnotherRequestOnTheSameConnection) {
  StartServer();
  const std::string body = Names(40000);
  ASSERT_GT(body.size(), 256u * 1024);
  RawSocket s(server_->port());
  ASSERT_TRUE(s.connected());
  const std::string request =
      absl::StrCat("POST /echo HTTP/1.1\r\nHost: x\r\n"
                   "Content-Type: application/json\r\nContent-Length: ", body.size(),
                   "\r\n\r\n", body);
  const size_t third = request.size() / 3;
  ASSERT_TRUE(s.Send(std::string_view(request).substr(0, third)));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(s.Send(std::string_view(request).substr(third, third)));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(s.Send(absl::StrCat(
      request.substr(2 * third),
      "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")));
  const std::string reply = s.ReadUntilClose();
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 200"));
  // Every name came through: the first and the last are answered.
  EXPECT_THAT(reply, HasSubstr("\"n-100000\""));
  EXPECT_THAT(reply, HasSubstr("\"n-139999\""));
  EXPECT_THAT(reply, HasSubstr("\r\n\r\nok"));
}

// pdc's client reads an answer larger than one read chunk whole, twice over
// one kept-alive connection.
TEST_F(HttpServerTest, ClientReadsLargeAnswersOverOneConnection) {
  StartServer();
  auto c = Client();
  ASSERT_NE(c, nullptr);
  for (int round = 0; round < 2; ++round) {
    ASSERT_OK_AND_ASSIGN(pdc::HttpResponse r, c->Post("/echo", Names(30000)));
    EXPECT_EQ(r.status, 200);
    EXPECT_GT(r.body.size(), 256u * 1024);
    EXPECT_THAT(r.body, HasSubstr("\"n-100000\""));
    EXPECT_THAT(r.body, HasSubstr("\"n-129999\""));
    EXPECT_EQ(r.body.back(), '}');
  }
  EXPECT_EQ(c->connections_opened(), 1u);
}

TEST_F(HttpServerTest, ExpectContinueIsAnsweredOrRefused) {
  server_options_.max_body_bytes = 1024;
  StartServer();
  RawSocket big(server_->port());
  ASSERT_TRUE(big.Send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4096\r\n"
                       "Expect: 100-continue\r\n\r\n"));
  EXPECT_THAT(big.ReadUntilClose(), StartsWith("HTTP/1.1 413"));
  RawSocket small(server_->port());
  ASSERT_TRUE(small.Send("GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
                         "Expect: 100-continue\r\n\r\n"));
  EXPECT_THAT(small.ReadUntil("\r\n\r\n"), StartsWith("HTTP/1.1 100 Continue"));
  ASSERT_TRUE(small.Send("{}"));
  EXPECT_THAT(small.ReadUntil("ok"), HasSubstr("HTTP/1.1 200"));
}

TEST_F(HttpServerTest, SlowHeadersAreCutOffByTheReadTimeout) {
  server_options_.read_timeout = absl::Milliseconds(200);
  StartServer();
  RawSocket s(server_->port());
  ASSERT_TRUE(s.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n"));  // ...never ends.
  const absl::Time start = absl::Now();
  bool timed_out = true;
  const std::string reply = s.ReadUntilClose(&timed_out);
  EXPECT_FALSE(timed_out) << "the server did not close the connection";
  EXPECT_EQ(reply, "");
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST_F(HttpServerTest, IdleKeptAliveConnectionIsClosed) {
  server_options_.idle_timeout = absl::Milliseconds(200);
  StartServer();
  RawSocket s(server_->port());
  ASSERT_TRUE(s.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
  bool timed_out = true;
  const std::string reply = s.ReadUntilClose(&timed_out);
  EXPECT_FALSE(timed_out);
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(reply, HasSubstr("ok"));
}

TEST_F(HttpServerTest, MalformedRequestLineIs400AndUnknownPathIsTheHandlers) {
  StartServer();
  RawSocket bad(server_->port());
  ASSERT_TRUE(bad.Send("GARBAGE\r\n\r\n"));
  const std::string reply = bad.ReadUntilClose();
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 400"));
  EXPECT_THAT(reply, HasSubstr(R"({"error":"malformed HTTP request: )"));
  auto c = Client();
  ASSERT_OK_AND_ASSIGN(pdc::HttpResponse r, c->Post("/nope", "{}"));
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body, R"({"error":"no such endpoint: POST /nope","field":""})");
}

TEST_F(HttpServerTest, LongPollWakesOnChangeWithoutHoldingAWorker) {
  server_options_.threads = 1;
  StartServer();
  const std::string target =
      absl::StrCat("/poll?since=", notifier_.version(), "&wait=30");
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
  EXPECT_EQ(parked_gauge_.load(), kPolls);
  // ...and the worker is still free for other requests.
  auto c = Client();
  ASSERT_OK_AND_ASSIGN(pdc::HttpResponse h, c->Get("/healthz"));
  EXPECT_EQ(h.body, "ok");
  // A change wakes them all.
  const absl::Time start = absl::Now();
  notifier_.Bump();
  for (auto& t : pollers) t.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  for (const auto& a : answers) {
    EXPECT_EQ(a.status, 200);
    EXPECT_EQ(a.body, absl::StrCat(R"({"version":)", notifier_.version(), "}"));
  }
  EXPECT_EQ(notifier_.pending(), 0u);
  EXPECT_EQ(parked_gauge_.load(), 0);
}

TEST_F(HttpServerTest, LongPollAnswersWithCurrentStateWhenTimeIsUp) {
  StartServer();
  const uint64_t now = notifier_.version();
  auto c = Client();
  ASSERT_OK_AND_ASSIGN(pdc::HttpResponse r,
                       c->Get(absl::StrCat("/poll?since=", now, "&wait=0.2")));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, absl::StrCat(R"({"version":)", now, "}"));
  EXPECT_EQ(parked_gauge_.load(), 0);
}

// A poll woken by a change its handler does not wait for is parked again
// (on the same deadline) until one it waits for comes.
TEST_F(HttpServerTest, WokenPollThatStillWaitsParksAgain) {
  StartServer();
  const uint64_t target = notifier_.version() + 1;
  RawSocket s(server_->port());
  ASSERT_TRUE(s.Send(absl::StrCat("GET /poll?since=", target, "&wait=20 HTTP/1.1\r\nHost: x\r\n\r\n")));
  ASSERT_TRUE(AwaitParked(1));
  notifier_.Bump();  // Version == target: not past it yet.
  ASSERT_TRUE(AwaitParked(1));
  EXPECT_EQ(parked_gauge_.load(), 1);
  notifier_.Bump();
  const std::string reply = s.ReadUntil("}");
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(reply, HasSubstr(absl::StrCat(R"({"version":)", target + 1, "}")));
}

// A poll on a topic sleeps through bumps of other topics (its handler is not
// run again: its subscription stays) and wakes for its own.
TEST_F(HttpServerTest, TopicLongPollWakesOnlyForItsTopic) {
  StartServer();
  const uint64_t since = notifier_.version();
  RawSocket a(server_->port());
  RawSocket b(server_->port());
  ASSERT_TRUE(a.Send(absl::StrCat("GET /poll?since=", since,
                                  "&wait=20&topic=a HTTP/1.1\r\nHost: x\r\n\r\n")));
  ASSERT_TRUE(AwaitParked(1));
  ASSERT_TRUE(b.Send(absl::StrCat("GET /poll?since=", since,
                                  "&wait=20&topic=b HTTP/1.1\r\nHost: x\r\n\r\n")));
  ASSERT_TRUE(AwaitParked(2));
  notifier_.Bump(std::vector<std::string>{"b"});
  const std::string reply_b = b.ReadUntil("}");
  EXPECT_THAT(reply_b, StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(reply_b, HasSubstr(absl::StrCat(R"({"version":)", since + 1, "}")));
  // The bump took b's subscription only: a's is still pending.
  EXPECT_EQ(notifier_.pending(), 1u);
  EXPECT_EQ(parked_gauge_.load(), 1);
  notifier_.Bump(std::vector<std::string>{"a"});
  const std::string reply_a = a.ReadUntil("}");
  EXPECT_THAT(reply_a, StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(reply_a, HasSubstr(absl::StrCat(R"({"version":)", since + 2, "}")));
  EXPECT_EQ(notifier_.pending(), 0u);
}

// Without a notifier nothing parks: the handler is asked again at once with
// allow_wait = false.
TEST(HttpServerWithoutNotifierTest, LongPollIsAnsweredAtOnce) {
  Notifier never_bumped;
  HttpServerOptions so;
  ASSERT_OK_AND_ASSIGN(auto server, HttpServer::Start(so, TestRoutes(&never_bumped)));
  HttpClientOptions o;
  o.base_url = absl::StrCat("http://127.0.0.1:", server->port());
  ASSERT_OK_AND_ASSIGN(auto c, HttpClient::Create(o));
  const absl::Time start = absl::Now();
  ASSERT_OK_AND_ASSIGN(pdc::HttpResponse r, c->Get("/poll?since=0&wait=30"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, R"({"version":0})");
}

// A handler that asks to wait again when told its time is up would park
// past its deadline (or past Shutdown): the server answers 500 instead.
TEST(HttpServerHandlerBugTest, WaitingAfterTheDeadlineIs500) {
  Notifier notifier;
  HttpServerOptions so;
  so.notifier = &notifier;
  ASSERT_OK_AND_ASSIGN(auto server, HttpServer::Start(so, [](HttpRequest) {
                         HttpResponse r;
                         r.long_poll = LongPoll{0, absl::Milliseconds(50), ""};
                         return r;
                       }));
  HttpClientOptions o;
  o.base_url = absl::StrCat("http://127.0.0.1:", server->port());
  ASSERT_OK_AND_ASSIGN(auto c, HttpClient::Create(o));
  ASSERT_OK_AND_ASSIGN(pdc::HttpResponse r, c->Get("/anything"));
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.body,
            R"({"error":"the handler asked to wait after its time was up","field":""})");
}

TEST_F(HttpServerTest, ShutdownAnswersParkedPollsAndStopsAccepting) {
  StartServer();
  const uint16_t port = server_->port();
  RawSocket poll(port);
  ASSERT_TRUE(poll.Send(absl::StrCat("GET /poll?since=", notifier_.version(),
                                     "&wait=60 HTTP/1.1\r\nHost: x\r\n\r\n")));
  RawSocket idle(port);
  ASSERT_TRUE(idle.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_THAT(idle.ReadUntil("ok"), StartsWith("HTTP/1.1 200"));
  ASSERT_TRUE(AwaitParked(1));
  const absl::Time start = absl::Now();
  server_->Shutdown();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  const std::string answer = poll.ReadUntilClose();
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(answer, HasSubstr("Connection: close"));
  bool timed_out = true;
  idle.ReadUntilClose(&timed_out);
  EXPECT_FALSE(timed_out);
  RawSocket late(port);
  EXPECT_FALSE(late.connected());
  EXPECT_EQ(parked_gauge_.load(), 0);
}

// A connection that has sent part of a request when shutdown starts, and
// then nothing more, does not hold Shutdown for the read timeout.
TEST_F(HttpServerTest, ShutdownDoesNotWaitForAStalledRequest) {
  StartServer();
  RawSocket stalled(server_->port());
  ASSERT_TRUE(stalled.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n"));  // ...never ends.
  RawSocket probe(server_->port());
  ASSERT_TRUE(probe.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_THAT(probe.ReadUntil("ok"), StartsWith("HTTP/1.1 200"));
  const absl::Time start = absl::Now();
  server_->Shutdown();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  bool timed_out = true;
  stalled.ReadUntilClose(&timed_out);
  EXPECT_FALSE(timed_out);
}

TEST(SplitListenAddressTest, HostPortIPv6AndErrors) {
  HttpServerOptions o;
  ASSERT_OK(SplitListenAddress("10.0.0.1:8888", "extender.listen", &o));
  EXPECT_EQ(o.address, "10.0.0.1");
  EXPECT_EQ(o.port, 8888);
  ASSERT_OK(SplitListenAddress("[::]:0", "extender.listen", &o));
  EXPECT_EQ(o.address, "::");
  EXPECT_EQ(o.port, 0);
  EXPECT_THAT(SplitListenAddress("10.0.0.1", "extender.listen", &o),
              pdc::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr("extender.listen: \"10.0.0.1\" is not host:port")));
}

}  // namespace
}  // namespace pdc::net
