#include "net/http_client.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <atomic>
#include <memory>
#include <optional>
#include <thread>
#include <string>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_http_server.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/test_certs.h"

namespace pdc {
namespace {

using ::pdc::testing::MakeTestPki;
using ::pdc::testing::StatusIs;
using ::pdc::testing::TestHttpServer;
using ::pdc::testing::TestPki;
using ::pdc::testing::TestReply;
using ::pdc::testing::TestRequest;
using ::testing::HasSubstr;

std::unique_ptr<HttpClient> MakeClient(const std::string& url,
                                       std::string token = "") {
  HttpClientOptions o;
  o.base_url = url;
  o.bearer_token = std::move(token);
  o.timeout = absl::Seconds(10);
  auto c = HttpClient::Create(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return std::move(*c);
}

TestReply Echo(const TestRequest& r) {
  TestReply reply;
  reply.status = r.target == "/missing" ? 404 : 200;
  reply.body = r.method + " " + r.target + " " + r.body;
  return reply;
}

TEST(HttpClientTest, SendsMethodTargetBodyAndToken) {
  TestHttpServer server(Echo);
  auto client = MakeClient(server.url() + "/prefix", "s3cret");
  ASSERT_OK_AND_ASSIGN(HttpResponse get, client->Get("/v1/claims?x=1"));
  EXPECT_EQ(get.status, 200);
  EXPECT_EQ(get.body, "GET /prefix/v1/claims?x=1 ");
  EXPECT_EQ(get.Header("content-type"), "application/json");
  ASSERT_OK_AND_ASSIGN(HttpResponse post,
                       client->Post("/v1/namespaces/default/claims", "{}"));
  EXPECT_EQ(post.body, "POST /prefix/v1/namespaces/default/claims {}");
  ASSERT_OK_AND_ASSIGN(HttpResponse put, client->Put("/v1/x", "[1]"));
  EXPECT_EQ(put.body, "PUT /prefix/v1/x [1]");
  ASSERT_OK_AND_ASSIGN(HttpResponse del, client->Delete("/v1/y"));
  EXPECT_EQ(del.body, "DELETE /prefix/v1/y ");

  const std::vector<TestRequest> seen = server.requests();
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0].authorization, "Bearer s3cret");
  EXPECT_EQ(seen[1].content_type, "application/json");
}

TEST(HttpClientTest, NonSuccessStatusIsAResponseNotAnError) {
  TestHttpServer server(Echo);
  auto client = MakeClient(server.url());
  ASSERT_OK_AND_ASSIGN(HttpResponse r, client->Get("/missing"));
  EXPECT_EQ(r.status, 404);
}

TEST(HttpClientTest, KeepsTheConnectionAlive) {
  TestHttpServer server(Echo);
  auto client = MakeClient(server.url());
  for (int i = 0; i < 5; ++i) ASSERT_OK(client->Get("/a"));
  EXPECT_EQ(server.connections(), 1);
  EXPECT_EQ(client->connections_opened(), 1u);
  client->Close();
  ASSERT_OK(client->Get("/a"));
  EXPECT_EQ(server.connections(), 2);
}

TEST(HttpClientTest, ReconnectsWhenTheServerClosedAnIdleConnection) {
  TestHttpServer server([](const TestRequest& r) {
    TestReply reply = Echo(r);
    reply.close_after = true;  // Says keep-alive, then closes.
    return reply;
  });
  auto client = MakeClient(server.url());
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(HttpResponse r, client->Get("/p"));
    EXPECT_EQ(r.body, "GET /p ");
  }
  EXPECT_EQ(server.connections(), 3);
  // Each request reached the server exactly once.
  EXPECT_EQ(server.requests().size(), 3u);
}

// The server reads the second request on a kept-alive connection and drops
// the connection without answering: whether the request took effect is
// unknown. Only a request whose repetition is harmless is sent again.
struct DropCase {
  std::string method;
  std::optional<bool> idempotent;  // HttpRequestOptions::idempotent.
  bool sent_again;
};

class DroppedAfterReadingTest : public ::testing::TestWithParam<DropCase> {};

TEST_P(DroppedAfterReadingTest, OnlyIdempotentRequestsAreSentAgain) {
  const DropCase& c = GetParam();
  std::atomic<int> seen{0};
  TestHttpServer server([&seen](const TestRequest& r) {
    TestReply reply = Echo(r);
    reply.drop = ++seen == 2;
    return reply;
  });
  auto client = MakeClient(server.url());
  ASSERT_OK(client->Get("/warm").status());
  HttpRequestOptions ro;
  ro.idempotent = c.idempotent;
  absl::StatusOr<HttpResponse> r = client->Do(c.method, "/act", "{}", ro);
  if (c.sent_again) {
    ASSERT_OK(r.status());
    EXPECT_EQ(r->body, c.method + " /act {}");
    EXPECT_EQ(server.requests().size(), 3u);
  } else {
    EXPECT_THAT(r.status(), StatusIs(absl::StatusCode::kUnavailable,
                                     HasSubstr("connection lost during " + c.method + " /act")));
    EXPECT_EQ(server.requests().size(), 2u);  // Sent once, never again.
  }
}

INSTANTIATE_TEST_SUITE_P(
    Methods, DroppedAfterReadingTest,
    ::testing::Values(DropCase{"POST", std::nullopt, false},
                      DropCase{"PATCH", std::nullopt, false},
                      DropCase{"GET", std::nullopt, true},
                      DropCase{"PUT", std::nullopt, true},
                      DropCase{"DELETE", std::nullopt, true},
                      DropCase{"POST", true, true},
                      DropCase{"PUT", false, false}),
    [](const ::testing::TestParamInfo<DropCase>& info) {
      std::string name = info.param.method;
      if (info.param.idempotent) name += *info.param.idempotent ? "MarkedIdempotent" : "MarkedNot";
      return name;
    });

// A streamed answer (a Kubernetes watch) is handed on as it arrives.
TEST(HttpClientTest, StreamHandsOnTheBodyAsItArrives) {
  TestHttpServer server([](const TestRequest&) {
    TestReply reply;
    reply.chunks = {"{\"type\":\"ADDED\"}\n", "{\"type\":", "\"DELETED\"}\n"};
    return reply;
  });
  auto client = MakeClient(server.url());
  int status = 0;
  std::string got;
  StreamCallbacks cb;
  cb.on_head = [&](const HttpResponse& head) {
    status = head.status;
    return true;
  };
  cb.on_data = [&](std::string_view piece) {
    got.append(piece);
    return true;
  };
  ASSERT_OK(client->Stream("GET", "/watch", "", {}, absl::Seconds(5), cb));
  EXPECT_EQ(status, 200);
  EXPECT_EQ(got, "{\"type\":\"ADDED\"}\n{\"type\":\"DELETED\"}\n");
  // The body ended cleanly: the connection carries the next request.
  ASSERT_OK(client->Get("/after").status());
  EXPECT_EQ(server.connections(), 1);
}

TEST(HttpClientTest, StreamStopsWhenACallbackSaysSo) {
  TestHttpServer server([](const TestRequest&) {
    TestReply reply;
    reply.chunks = {"one\n", "two\n"};
    reply.hold_open = true;
    return reply;
  });
  auto client = MakeClient(server.url());
  StreamCallbacks cb;
  cb.on_data = [](std::string_view) { return false; };
  ASSERT_OK(client->Stream("GET", "/watch", "", {}, absl::Seconds(5), cb));
}

TEST(HttpClientTest, StreamWithNothingArrivingIsDeadlineExceeded) {
  TestHttpServer server([](const TestRequest&) {
    TestReply reply;
    reply.chunks = {"one\n"};
    reply.hold_open = true;
    return reply;
  });
  auto client = MakeClient(server.url());
  EXPECT_THAT(client->Stream("GET", "/watch", "", {}, absl::Milliseconds(300), {}),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("nothing arrived for 300ms")));
}

TEST(HttpClientTest, CancelEndsAStreamFromAnotherThread) {
  TestHttpServer server([](const TestRequest&) {
    TestReply reply;
    reply.chunks = {"one\n"};
    reply.hold_open = true;
    return reply;
  });
  auto client = MakeClient(server.url());
  absl::Notification first;
  StreamCallbacks cb;
  cb.on_data = [&](std::string_view) {
    if (!first.HasBeenNotified()) first.Notify();
    return true;
  };
  std::thread canceller([&] {
    first.WaitForNotification();
    client->Cancel();
  });
  EXPECT_THAT(client->Stream("GET", "/watch", "", {}, absl::Seconds(30), cb),
              StatusIs(absl::StatusCode::kCancelled));
  canceller.join();
  // A cancelled client is done.
  EXPECT_THAT(client->Get("/x").status(), StatusIs(absl::StatusCode::kCancelled));
}

TEST(HttpClientTest, ConnectionRefusedIsUnavailableNamingTheUrl) {
  // Take a free port and close it again: nobody listens there.
  uint16_t port;
  {
    boost::asio::io_context ioc;
    boost::asio::ip::tcp::acceptor a(
        ioc, {boost::asio::ip::make_address("127.0.0.1"), 0});
    port = a.local_endpoint().port();
  }
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  auto client = MakeClient(url);
  EXPECT_THAT(client->Get("/v1/claims"),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("cannot reach pdc-extender at " + url +
                                 ": Connection refused")));
}

TEST(HttpClientTest, TimeoutIsDeadlineExceeded) {
  TestHttpServer server([](const TestRequest& r) {
    TestReply reply;
    reply.hang = r.target == "/hang";
    return reply;
  });
  auto client = MakeClient(server.url());
  HttpRequestOptions quick;
  quick.timeout = absl::Milliseconds(200);
  EXPECT_THAT(client->Get("/hang", quick),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("GET /hang to pdc-extender at " +
                                 server.url() + " timed out after 200ms")));
  // The client recovers on a new connection.
  ASSERT_OK_AND_ASSIGN(HttpResponse r, client->Get("/ok"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(server.connections(), 2);
}

TEST(HttpClientTest, ResponseLargerThanTheLimitIsResourceExhausted) {
  TestHttpServer server([](const TestRequest&) {
    TestReply reply;
    reply.body = std::string(4096, 'x');
    return reply;
  });
  HttpClientOptions o;
  o.base_url = server.url();
  o.max_response_bytes = 1024;
  ASSERT_OK_AND_ASSIGN(auto client, HttpClient::Create(o));
  EXPECT_THAT(client->Get("/big"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("larger than 1024 bytes")));
}

TEST(HttpClientTest, CreateRejectsBadOptions) {
  HttpClientOptions o;
  o.base_url = "localhost:8888";
  EXPECT_THAT(HttpClient::Create(o),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is not an http:// or https:// URL")));
  o.base_url = "http://localhost:8888";
  o.ca_file = "/ca.pem";
  EXPECT_THAT(HttpClient::Create(o),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is not an https:// URL")));
  o.base_url = "https://localhost:8888";
  o.ca_file = "/nonexistent/ca.pem";
  EXPECT_THAT(
      HttpClient::Create(o),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("cannot load CA file \"/nonexistent/ca.pem\"")));
}

TEST(HttpClientTest, UnknownMethodIsInvalidArgument) {
  TestHttpServer server(Echo);
  auto client = MakeClient(server.url());
  EXPECT_THAT(client->Do("FETCH", "/"),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(HttpClientTest, HttpsVerifiesTheServerAgainstTheCaFile) {
  pdc::testing::TempDir dir;
  const TestPki pki = MakeTestPki(dir.path());
  TestHttpServer server(Echo, pdc::testing::TestTlsConfig{
                                  pki.server_cert_pem, pki.server_key_pem});

  HttpClientOptions o;
  o.base_url = server.url();
  o.ca_file = pki.ca_cert;
  o.bearer_token = "t";
  ASSERT_OK_AND_ASSIGN(auto client, HttpClient::Create(o));
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(HttpResponse r, client->Post("/tls", "b"));
    EXPECT_EQ(r.body, "POST /tls b");
  }
  EXPECT_EQ(server.connections(), 1);  // Kept alive over TLS too.
  EXPECT_EQ(server.requests().at(0).authorization, "Bearer t");

  // A CA that did not sign the server's certificate: the handshake fails.
  o.ca_file = pki.rogue_ca_cert;
  ASSERT_OK_AND_ASSIGN(auto untrusting, HttpClient::Create(o));
  EXPECT_THAT(untrusting->Get("/tls"),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("TLS handshake with pdc-extender at " +
                                 server.url() + " failed")));
}

TEST(HttpClientTest, HttpsReconnectsAfterTheServerClosedTheConnection) {
  pdc::testing::TempDir dir;
  const TestPki pki = MakeTestPki(dir.path());
  TestHttpServer server(
      [](const TestRequest& r) {
        TestReply reply = Echo(r);
        reply.close_after = true;
        return reply;
      },
      pdc::testing::TestTlsConfig{pki.server_cert_pem, pki.server_key_pem});
  HttpClientOptions o;
  o.base_url = server.url();
  o.ca_file = pki.ca_cert;
  ASSERT_OK_AND_ASSIGN(auto client, HttpClient::Create(o));
  for (int i = 0; i < 2; ++i) {
    ASSERT_OK_AND_ASSIGN(HttpResponse r, client->Get("/x"));
    EXPECT_EQ(r.status, 200);
  }
  EXPECT_EQ(server.connections(), 2);
  EXPECT_EQ(server.requests().size(), 2u);
}

}  // namespace
}  // namespace pdc
