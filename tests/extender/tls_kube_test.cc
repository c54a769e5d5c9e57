// TLS on the extender's listener (server certificate, client certificates
// for the scheduler verbs) and the Kubernetes API client against an HTTPS
// fake kube-apiserver that checks method, path, headers and body the way
// kube-apiserver would and answers with apiserver-shaped Status objects.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/synchronization/mutex.h"
#include "common/file_util.h"
#include "kube/kube_http_client.h"
#include "extender/router_server.h"
#include "net/http_client.h"
#include "tests/extender/extender_fixture.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/test_certs.h"

namespace pdc::extender::testing {
namespace {

using ::pdc::testing::MakeTestPki;
using ::pdc::testing::TestPki;
using ::testing::HasSubstr;

constexpr absl::Duration kCallTimeout = absl::Seconds(10);

std::unique_ptr<HttpClient> TlsClient(uint16_t port, const TestPki& pki,
                                      const std::string& cert = "",
                                      const std::string& key = "") {
  HttpClientOptions o;
  o.base_url = absl::StrCat("https://127.0.0.1:", port);
  o.ca_file = pki.ca_cert;
  o.cert_file = cert;
  o.key_file = key;
  o.timeout = absl::Seconds(10);
  auto c = HttpClient::Create(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : nullptr;
}

class TlsServerTest : public ExtenderFixture {
 protected:
  void SetUp() override {
    options_.scheduler_requires_client_cert = true;
    ExtenderFixture::SetUp();
    pki_ = MakeTestPki(dir_.path());
    HttpServerOptions so;
    so.cert_file = pki_.server_cert;
    so.key_file = pki_.server_key;
    so.client_ca_file = pki_.ca_cert;
    auto s = StartRouterServer(so, router_.get(), &notifier_, nullptr);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
  }
  void TearDown() override { server_.reset(); }

  pdc::testing::TempDir dir_;
  TestPki pki_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(TlsServerTest, SchedulerVerbsNeedAVerifiedClientCertificate) {
  TwoNodes();
  const std::string args = NamesArgs(VirtLauncherPod("vm1", "uid-1"), {"node-a"});
  auto anonymous = TlsClient(server_->port(), pki_);
  ASSERT_OK_AND_ASSIGN(pdc::HttpResponse h, anonymous->Get("/healthz"));
  EXPECT_EQ(h.body, "ok");
  // clientCAFile guards the scheduler verbs only (config.h): the REST API
  // stays open to clients without a certificate (they use the token).
  ASSERT_OK_AND_ASSIGN(pdc::HttpResponse nodes, anonymous->Get("/v1/nodes"));
  EXPECT_EQ(nodes.status, 200);
  ASSERT_OK_AND_ASSIGN(pdc::HttpResponse denied, anonymous->Post("/scheduler/filter", args));
  EXPECT_EQ(denied.status, 401);
  EXPECT_THAT(denied.body, HasSubstr("verified client certificate"));

  auto scheduler = TlsClient(server_->port(), pki_, pki_.client_cert, pki_.client_key);
  ASSERT_OK_AND_ASSIGN(pdc::HttpResponse ok, scheduler->Post("/scheduler/filter", args));
  EXPECT_EQ(ok.status, 200);
  EXPECT_THAT(ok.body, HasSubstr(R"("NodeNames":["node-a"])"));
}

// The server ends the handshake with an "unknown CA" alert. Under TLS 1.3
// the client's side of the handshake is over before the server has checked
// its certificate, so the client reads the alert as the answer to its
// request; under TLS 1.2 it arrives during the handshake. Either way the
// client's error names the alert, which a refused connection, a timeout or
// an HTTP error status would not.
TEST_F(TlsServerTest, CertificateFromAnotherCaIsRefused) {
  auto rogue = TlsClient(server_->port(), pki_, pki_.rogue_cert, pki_.rogue_key);
  EXPECT_THAT(rogue->Get("/healthz"),
              pdc::testing::StatusIs(absl::StatusCode::kUnavailable,
                                     HasSubstr("alert unknown ca")));
}

// Plain HTTP is not a TLS ClientHello: the server drops the connection
// without a word. The client connected and sent its request (a refused
// connection would be "cannot reach"), and then lost the connection instead
// of reading an answer.
TEST_F(TlsServerTest, PlainHttpToTheTlsPortGetsNoAnswer) {
  HttpClientOptions o;
  o.base_url = absl::StrCat("http://127.0.0.1:", server_->port());
  o.timeout = absl::Seconds(5);
  ASSERT_OK_AND_ASSIGN(auto c, HttpClient::Create(o));
  EXPECT_THAT(c->Get("/healthz"),
              pdc::testing::StatusIs(
                  absl::StatusCode::kUnavailable,
                  HasSubstr(absl::StrCat("connection lost during GET /healthz to pdc-extender at "
                                         "http://127.0.0.1:",
                                         server_->port()))));
}

TEST(TlsServerStartTest, MissingCertificateIsAnErrorNamingTheField) {
  HttpServerOptions so;
  so.cert_file = "/nonexistent/server.crt";
  so.key_file = "/nonexistent/server.key";
  auto s = HttpServer::Start(so, [](HttpRequest) { return HttpResponse{}; });
  EXPECT_THAT(s, pdc::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("tls.certFile")));
}

// --- Kubernetes API client ------------------------------------------------

struct Seen {
  std::string method, target, authorization, content_type, body;
};

std::string StatusObject(int code, const std::string& reason, const std::string& message) {
  return absl::StrCat(
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":")",
      message, R"(","reason":")", reason, R"(","details":{"name":"virt-launcher-vm1-x7k2p","kind":"pods"},"code":)",
      code, "}");
}

class FakeApiserver {
 public:
  explicit FakeApiserver(const TestPki& pki) {
    HttpServerOptions so;
    so.cert_file = pki.server_cert;
    so.key_file = pki.server_key;
    so.threads = 2;
    auto s = HttpServer::Start(
        so, [this](HttpRequest r) { return Handle(std::move(r)); });
    EXPECT_TRUE(s.ok()) << s.status();
    if (s.ok()) server_ = *std::move(s);
  }
  uint16_t port() const { return server_ ? server_->port() : 0; }
  std::vector<Seen> seen() {
    absl::MutexLock lock(&mu_);
    return seen_;
  }
  std::string pod;
  bool conflict = false;

 private:
  HttpResponse Handle(HttpRequest r) {
    {
      absl::MutexLock lock(&mu_);
      seen_.push_back({r.method, r.target, r.authorization, r.content_type, r.body});
    }
    HttpResponse out;
    const std::string pod_path = "/api/v1/namespaces/default/pods/virt-launcher-vm1-x7k2p";
    if (r.target.rfind("/api/v1/namespaces/default/pods/", 0) != 0) {
      out.status = 404;
      out.body = StatusObject(404, "NotFound", "the server could not find the requested resource");
    } else if (r.method == "GET" && r.target == pod_path && !pod.empty()) {
      out.body = pod;
    } else if (r.method == "GET") {
      out.status = 404;
      out.body = StatusObject(404, "NotFound", R"(pods \"virt-launcher-vm2-x7k2p\" not found)");
    } else if (r.method == "PATCH" && r.target == pod_path) {
      out.body = pod.empty() ? "{}" : pod;
    } else if (r.method == "POST" && r.target == pod_path + "/binding") {
      if (conflict) {
        out.status = 409;
        out.body = StatusObject(
            409, "Conflict",
            R"(Operation cannot be fulfilled on pods/binding \"virt-launcher-vm1-x7k2p\": pod virt-launcher-vm1-x7k2p is already assigned to node \"node-b\")");
      } else {
        out.status = 201;
        out.body = R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201})";
      }
    } else {
      out.status = 405;
      out.body = StatusObject(405, "MethodNotAllowed", "the server does not allow this method");
    }
    return out;
  }

  absl::Mutex mu_;
  std::vector<Seen> seen_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<HttpServer> server_;
};

class KubeClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pki_ = MakeTestPki(dir_.path());
    api_ = std::make_unique<FakeApiserver>(pki_);
    token_file_ = dir_.Join("token");
    ASSERT_OK(WriteFileAtomically(token_file_, "tok-1\n"));
    kube::KubeClientConfig c;
    c.server = absl::StrCat("https://127.0.0.1:", api_->port());
    c.ca_file = pki_.ca_cert;
    c.token_file = token_file_;
    auto k = kube::NewHttpKubeClient(c);
    ASSERT_TRUE(k.ok()) << k.status();
    kube_ = *std::move(k);
  }

  pdc::testing::TempDir dir_;
  TestPki pki_;
  std::unique_ptr<FakeApiserver> api_;
  std::string token_file_;
  std::unique_ptr<kube::KubeClient> kube_;
};

TEST_F(KubeClientTest, RequestsAreWhatKubeApiserverExpects) {
  api_->pod = VirtLauncherPod("vm1", "uid-1");
  ASSERT_OK_AND_ASSIGN(std::string pod, kube_->GetPod("default", "virt-launcher-vm1-x7k2p", kCallTimeout));
  EXPECT_EQ(pod, api_->pod);
  ASSERT_OK(kube_->AnnotatePod("default", "virt-launcher-vm1-x7k2p",
                               "pdc.kubevirt.io/devices",
                               R"({"devices.kubevirt.io/nvme":["0000:3b:00.0"]})", kCallTimeout));
  // Service-account tokens rotate: the file is read for every call.
  ASSERT_OK(WriteFileAtomically(token_file_, "tok-2"));
  ASSERT_OK(kube_->BindPod("default", "virt-launcher-vm1-x7k2p", "uid-1", "node-b", kCallTimeout));

  const std::vector<Seen> seen = api_->seen();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].method, "GET");
  EXPECT_EQ(seen[0].target, "/api/v1/namespaces/default/pods/virt-launcher-vm1-x7k2p");
  EXPECT_EQ(seen[0].authorization, "Bearer tok-1");
  EXPECT_EQ(seen[1].method, "PATCH");
  EXPECT_EQ(seen[1].target, "/api/v1/namespaces/default/pods/virt-launcher-vm1-x7k2p");
  EXPECT_EQ(seen[1].content_type, "application/merge-patch+json");
  EXPECT_EQ(seen[1].body,
            R"({"metadata":{"annotations":{"pdc.kubevirt.io/devices":"{\"devices.kubevirt.io/nvme\":[\"0000:3b:00.0\"]}"}}})");
  EXPECT_EQ(seen[2].method, "POST");
  EXPECT_EQ(seen[2].target,
            "/api/v1/namespaces/default/pods/virt-launcher-vm1-x7k2p/binding");
  EXPECT_EQ(seen[2].content_type, "application/json");
  EXPECT_EQ(seen[2].authorization, "Bearer tok-2");
  EXPECT_EQ(seen[2].body,
            R"({"apiVersion":"v1","kind":"Binding","metadata":{"name":"virt-launcher-vm1-x7k2p","namespace":"default","uid":"uid-1"},"target":{"apiVersion":"v1","kind":"Node","name":"node-b"}})");
}

TEST_F(KubeClientTest, ApiserverStatusErrorsMapToCodesWithItsMessage) {
  auto missing = kube_->GetPod("default", "virt-launcher-vm2-x7k2p", kCallTimeout);
  EXPECT_THAT(missing, pdc::testing::StatusIs(
                           absl::StatusCode::kNotFound,
                           HasSubstr(R"(answered 404 NotFound: pods "virt-launcher-vm2-x7k2p" not found)")));
  api_->conflict = true;
  EXPECT_THAT(kube_->BindPod("default", "virt-launcher-vm1-x7k2p", "uid-1", "node-a", kCallTimeout),
              pdc::testing::StatusIs(absl::StatusCode::kAborted,
                                     HasSubstr("already assigned to node")));
  EXPECT_THAT(kube_->GetPod("default", "../secrets", kCallTimeout),
              pdc::testing::StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(KubeClientTest, UntrustedApiserverIsUnavailable) {
  kube::KubeClientConfig c;
  c.server = absl::StrCat("https://127.0.0.1:", api_->port());
  c.token = "t";  // System trust store: our test CA is not in it.
  ASSERT_OK_AND_ASSIGN(auto k, kube::NewHttpKubeClient(c));
  // The client refuses the server's certificate during the handshake (not a
  // refused connection, and no request reached the fake apiserver).
  EXPECT_THAT(k->GetPod("default", "x", kCallTimeout),
              pdc::testing::StatusIs(
                  absl::StatusCode::kUnavailable,
                  HasSubstr(absl::StrCat("TLS handshake with kube-apiserver at https://127.0.0.1:",
                                         api_->port(), " failed: certificate verify failed"))));
  EXPECT_TRUE(api_->seen().empty());
}

class BindThroughApiTest : public ExtenderFixture {};

TEST_F(BindThroughApiTest, RouterBindAnnotatesAndBindsOverHttps) {
  pdc::testing::TempDir dir;
  TestPki pki = MakeTestPki(dir.path());
  FakeApiserver api(pki);
  kube::KubeClientConfig c;
  c.server = absl::StrCat("https://127.0.0.1:", api.port());
  c.ca_file = pki.ca_cert;
  c.token = "static";
  ASSERT_OK_AND_ASSIGN(auto kube, kube::NewHttpKubeClient(c));
  UseKube(kube.get());
  TwoNodes();
  ASSERT_EQ(Post("/scheduler/filter",
                 NamesArgs(VirtLauncherPod("vm1", "uid-1"), {"node-a"})).status,
            200);
  EXPECT_EQ(Post("/scheduler/bind", BindArgs("vm1", "uid-1", "node-a")).body,
            R"({"Error":""})");
  ASSERT_EQ(api.seen().size(), 2u);
  EXPECT_EQ(api.seen()[0].method, "PATCH");
  EXPECT_EQ(api.seen()[1].method, "POST");
  // Already bound by someone else: the allocation is undone.
  ASSERT_EQ(Post("/scheduler/filter",
                 NamesArgs(VirtLauncherPod("vm1", "uid-2"), {"node-a"})).status,
            200);
  api.conflict = true;
  HttpResponse lost = Post("/scheduler/bind", BindArgs("vm1", "uid-2", "node-a"));
  EXPECT_THAT(lost.body, HasSubstr("already assigned to node"));
  ASSERT_OK_AND_ASSIGN(Claim claim, allocator_->GetClaim({"default", "vm1-nvme"}));
  ASSERT_TRUE(claim.status.reserved_for.has_value());
  EXPECT_EQ(claim.status.reserved_for->pod_uid, "uid-1");  // Reverted.
  UseKube(nullptr);
}

// --- Finding the apiserver --------------------------------------------------

TEST(KubeConfigTest, InCluster) {
  pdc::testing::TempDir dir;
  ASSERT_OK(WriteFileAtomically(dir.Join("token"), "sa-token\n"));
  ASSERT_OK(WriteFileAtomically(dir.Join("ca.crt"), "PEM"));
  auto env = [](std::string_view k) -> std::optional<std::string> {
    if (k == "KUBERNETES_SERVICE_HOST") return "10.96.0.1";
    if (k == "KUBERNETES_SERVICE_PORT") return "443";
    return std::nullopt;
  };
  ASSERT_OK_AND_ASSIGN(kube::KubeClientConfig c, kube::InClusterConfig(env, dir.path()));
  EXPECT_EQ(c.server, "https://10.96.0.1:443");
  EXPECT_EQ(c.token_file, dir.Join("token"));
  EXPECT_EQ(c.ca_file, dir.Join("ca.crt"));
  auto none = [](std::string_view) -> std::optional<std::string> { return std::nullopt; };
  EXPECT_THAT(kube::InClusterConfig(none, dir.path()),
              pdc::testing::StatusIs(absl::StatusCode::kFailedPrecondition,
                                     HasSubstr("KUBERNETES_SERVICE_HOST")));
}

TEST(KubeConfigTest, KubeconfigWithInlineDataAndToken) {
  pdc::testing::TempDir dir;
  const std::string kubeconfig = absl::StrCat(R"(apiVersion: v1
kind: Config
current-context: kind-pdc
clusters:
- name: other
  cluster: {server: "https://10.0.0.1:6443"}
- name: kind-pdc
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: )", absl::Base64Escape("CA PEM"), R"(
contexts:
- name: kind-pdc
  context: {cluster: kind-pdc, user: scheduler}
users:
- name: scheduler
  user:
    client-certificate-data: )", absl::Base64Escape("CERT PEM"), R"(
    client-key-data: )", absl::Base64Escape("KEY PEM"), "\n");
  ASSERT_OK(WriteFileAtomically(dir.Join("config"), kubeconfig));
  ASSERT_OK_AND_ASSIGN(kube::KubeClientConfig c,
                       kube::KubeconfigFile(dir.Join("config"), dir.path()));
  EXPECT_EQ(c.server, "https://127.0.0.1:6443");
  ASSERT_OK_AND_ASSIGN(std::string ca, ReadFileToString(c.ca_file));
  EXPECT_EQ(ca, "CA PEM");
  ASSERT_OK_AND_ASSIGN(std::string key, ReadFileToString(c.key_file));
  EXPECT_EQ(key, "KEY PEM");

  ASSERT_OK(WriteFileAtomically(dir.Join("token-config"), R"(current-context: c
clusters: [{name: k, cluster: {server: "https://k:6443", certificate-authority: ca.pem}}]
contexts: [{name: c, context: {cluster: k, user: u}}]
users: [{name: u, user: {token: abc}}]
)"));
  ASSERT_OK_AND_ASSIGN(kube::KubeClientConfig t, kube::KubeconfigFile(dir.Join("token-config")));
  EXPECT_EQ(t.token, "abc");
  EXPECT_EQ(t.ca_file, dir.Join("ca.pem"));  // Relative to the kubeconfig.

  ASSERT_OK(WriteFileAtomically(dir.Join("bad"), "current-context: nope\n"));
  EXPECT_THAT(kube::KubeconfigFile(dir.Join("bad")),
              pdc::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr(R"(current-context "nope" not found)")));
}

}  // namespace
}  // namespace pdc::extender::testing
