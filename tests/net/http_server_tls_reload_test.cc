// The server's certificate follows its files: a rotated pair (a new CA's,
// swapped in by rename as kubelet does for a Secret, or rewritten in place)
// is served to the next connection; a pair that does not load leaves the
// old one in service. Clients verify against one CA or the other, so which
// certificate the server presented is what a handshake shows.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "common/status_macros.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/test_certs.h"

namespace pdc::net {
namespace {

using ::pdc::testing::MakeTestPki;
using ::pdc::testing::TempDir;
using ::pdc::testing::TestPki;

// A new client (a new connection, so a new handshake) trusting `ca_file`.
absl::StatusOr<pdc::HttpResponse> GetWith(uint16_t port, const std::string& ca_file) {
  HttpClientOptions o;
  o.base_url = absl::StrCat("https://127.0.0.1:", port);
  o.ca_file = ca_file;
  o.timeout = absl::Seconds(10);
  ASSIGN_OR_RETURN(std::unique_ptr<HttpClient> c, HttpClient::Create(o));
  return c->Get("/ping");
}

void Copy(const std::string& from, const std::string& to) {
  std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing);
}
// Writes `from`'s bytes to a temporary file and renames it over `to`: a new
// inode, as a Secret volume's atomic update gives.
void SwapIn(const std::string& from, const std::string& to) {
  const std::string tmp = to + ".tmp";
  Copy(from, tmp);
  std::filesystem::rename(tmp, to);
}

class TlsReloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    first_ = MakeTestPki(first_dir_.path());
    second_ = MakeTestPki(second_dir_.path());
    cert_ = live_.Join("tls.crt");
    key_ = live_.Join("tls.key");
    Copy(first_.server_cert, cert_);
    Copy(first_.server_key, key_);
    HttpServerOptions so;
    so.cert_file = cert_;
    so.key_file = key_;
    so.threads = 2;
    so.tls_reload_interval = absl::ZeroDuration();  // Look on every accept.
    auto s = HttpServer::Start(so, [](HttpRequest) {
      return HttpResponse{200, "text/plain", "pong", std::nullopt};
    });
    ASSERT_OK(s.status());
    server_ = *std::move(s);
  }

  bool Trusts(const TestPki& pki) {
    absl::StatusOr<pdc::HttpResponse> r = GetWith(server_->port(), pki.ca_cert);
    return r.ok() && r->status == 200 && r->body == "pong";
  }

  TempDir first_dir_, second_dir_, live_;
  TestPki first_, second_;
  std::string cert_, key_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(TlsReloadTest, ServesTheRotatedPairToNewConnections) {
  ASSERT_TRUE(Trusts(first_));
  EXPECT_FALSE(Trusts(second_));
  SwapIn(second_.server_key, key_);
  SwapIn(second_.server_cert, cert_);
  EXPECT_TRUE(Trusts(second_));
  EXPECT_FALSE(Trusts(first_));
}

TEST_F(TlsReloadTest, KeepsTheOldPairWhileTheNewOneDoesNotLoad) {
  // The certificate arrives before its key: the pair does not match.
  SwapIn(second_.server_cert, cert_);
  EXPECT_TRUE(Trusts(first_));
  EXPECT_FALSE(Trusts(second_));
  // Garbage in place of the certificate: still the old pair.
  {
    std::ofstream out(cert_, std::ios::trunc);
    out << "not a certificate\n";
  }
  EXPECT_TRUE(Trusts(first_));
  // The whole new pair: served.
  SwapIn(second_.server_cert, cert_);
  SwapIn(second_.server_key, key_);
  EXPECT_TRUE(Trusts(second_));
}

TEST_F(TlsReloadTest, ARewriteInPlaceIsSeenToo) {
  Copy(second_.server_key, key_);  // Same inode, other bytes.
  Copy(second_.server_cert, cert_);
  EXPECT_TRUE(Trusts(second_));
}

// The client CA (tls.clientCAFile) follows its file too: a client
// certificate of the rotated CA is accepted by the next handshake, one of
// the old CA refused.
TEST(TlsClientCaReloadTest, VerifiesClientsWithTheRotatedCa) {
  TempDir a, b, live;
  const TestPki first = MakeTestPki(a.path());
  const TestPki second = MakeTestPki(b.path());
  const std::string ca = live.Join("ca.crt");
  Copy(first.ca_cert, ca);
  HttpServerOptions so;
  so.cert_file = first.server_cert;
  so.key_file = first.server_key;
  so.client_ca_file = ca;
  so.threads = 2;
  so.tls_reload_interval = absl::ZeroDuration();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<HttpServer> server,
                       HttpServer::Start(so, [](HttpRequest) {
                         return HttpResponse{200, "text/plain", "pong", std::nullopt};
                       }));
  auto accepted = [&](const TestPki& client) {
    HttpClientOptions o;
    o.base_url = absl::StrCat("https://127.0.0.1:", server->port());
    o.ca_file = first.ca_cert;
    o.cert_file = client.client_cert;
    o.key_file = client.client_key;
    o.timeout = absl::Seconds(10);
    absl::StatusOr<std::unique_ptr<HttpClient>> c = HttpClient::Create(o);
    if (!c.ok()) return false;
    absl::StatusOr<pdc::HttpResponse> r = (*c)->Get("/ping");
    return r.ok() && r->status == 200;
  };
  EXPECT_TRUE(accepted(first));
  EXPECT_FALSE(accepted(second));
  SwapIn(second.ca_cert, ca);
  EXPECT_TRUE(accepted(second));
  EXPECT_FALSE(accepted(first));
}

TEST(TlsReloadIntervalTest, LooksAtTheFilesAtMostOncePerInterval) {
  TempDir a, b, live;
  const TestPki first = MakeTestPki(a.path());
  const TestPki second = MakeTestPki(b.path());
  const std::string cert = live.Join("tls.crt"), key = live.Join("tls.key");
  Copy(first.server_cert, cert);
  Copy(first.server_key, key);
  HttpServerOptions so;
  so.cert_file = cert;
  so.key_file = key;
  so.tls_reload_interval = absl::Hours(1);
  ASSERT_OK_AND_ASSIGN(auto server, HttpServer::Start(so, [](HttpRequest) {
                         return HttpResponse{200, "text/plain", "pong", std::nullopt};
                       }));
  SwapIn(second.server_key, key);
  SwapIn(second.server_cert, cert);
  // Within the interval the loaded pair stays.
  absl::StatusOr<pdc::HttpResponse> r = GetWith(server->port(), first.ca_cert);
  ASSERT_OK(r.status());
  EXPECT_EQ(r->status, 200);
}

}  // namespace
}  // namespace pdc::net
