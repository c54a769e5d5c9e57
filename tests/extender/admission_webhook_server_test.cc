// The admission webhook served: by the whole pdc-extender (ExtenderApp) on
// its own HTTPS listener on port 0, answering an AdmissionReview as
// kube-apiserver sends it and counted on /metrics; and on its own threads,
// so a busy extender does not hold up admission.
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "allocator/memory_store.h"
#include "config/config.h"
#include "extender/admission_webhook.h"
#include "extender/extender_app.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "net/http_client.h"
#include "rapidjson/document.h"
#include "tests/testing/admission_reviews.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/inventory_builders.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/test_certs.h"

namespace pdc::extender {
namespace {

using ::pdc::testing::AdmissionReviewOf;
using ::pdc::testing::Inventory;
using ::pdc::testing::kNvme;
using ::pdc::testing::LauncherPodAtCreate;
using ::pdc::testing::NvmeDevice;
using ::testing::HasSubstr;

constexpr char kReviewUid[] = "705ab4f5-6393-11e8-b7cc-42010a800002";

std::unique_ptr<HttpClient> Client(const std::string& url, const std::string& ca_file = "") {
  HttpClientOptions o;
  o.base_url = url;
  o.ca_file = ca_file;
  o.timeout = absl::Seconds(20);
  auto c = HttpClient::Create(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : nullptr;
}

TEST(AdmissionWebhookServerTest, ExtenderAppServesTheWebhookOverTls) {
  pdc::testing::TempDir dir;
  const pdc::testing::TestPki pki = pdc::testing::MakeTestPki(dir.path());
  // The real clock: the app's background loops would run a fake one's time
  // forward (tests/testing/fake_clock.h), and node-a would go stale.
  PdcConfig c;
  c.extender.listen = "127.0.0.1:0";
  c.extender.store = StoreKind::kMemory;
  c.extender.worker_threads = 2;
  c.extender.webhook.listen = "127.0.0.1:0";
  c.extender.webhook.cert_file = pki.server_cert;
  c.extender.webhook.key_file = pki.server_key;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ExtenderApp> app,
                       ExtenderApp::Start(c, {.version = "test"}));
  ASSERT_NE(app->webhook_port(), 0);
  ASSERT_NE(app->webhook_port(), app->port());

  Allocator* a = app->allocator();
  ASSERT_OK(a->ReplaceInventory(Inventory("node-a", {NvmeDevice("0000:3b:00.0", 12, 0, "SNA0")})));
  SchedulingRequest r;
  r.ns = "default";
  r.vm = "vm1";
  r.pod_name = "virt-launcher-vm1-old";
  r.pod_uid = "pod-uid-1";
  r.resources = {{std::string(kNvme), 1}};
  ASSERT_OK(a->Bind(r, "node-a").status());

  std::unique_ptr<HttpClient> hook =
      Client(absl::StrCat("https://127.0.0.1:", app->webhook_port()), pki.ca_cert);
  ASSERT_NE(hook, nullptr);
  ASSERT_OK_AND_ASSIGN(
      pdc::HttpResponse answer,
      hook->Post("/mutate?timeout=2s", AdmissionReviewOf(kReviewUid, LauncherPodAtCreate({}))));
  ASSERT_EQ(answer.status, 200) << answer.body;
  rapidjson::Document d;
  ASSERT_OK(api::json::Parse(answer.body, &d));
  EXPECT_STREQ(d["response"]["uid"].GetString(), kReviewUid);
  EXPECT_TRUE(d["response"]["allowed"].GetBool());
  EXPECT_STREQ(d["response"]["patchType"].GetString(), "JSONPatch");
  std::string patch;
  ASSERT_TRUE(absl::Base64Unescape(d["response"]["patch"].GetString(), &patch));
  EXPECT_THAT(patch, HasSubstr(R"("values":["node-a"])"));

  ASSERT_OK_AND_ASSIGN(pdc::HttpResponse bad, hook->Post("/mutate", "{"));
  EXPECT_EQ(bad.status, 400);

  std::unique_ptr<HttpClient> main = Client(absl::StrCat("http://127.0.0.1:", app->port()));
  ASSERT_NE(main, nullptr);
  ASSERT_OK_AND_ASSIGN(pdc::HttpResponse metrics, main->Get("/metrics"));
  EXPECT_THAT(metrics.body, HasSubstr("pdc_webhook_decisions_total{outcome=\"pinned\"} 1\n"));
  EXPECT_THAT(metrics.body, HasSubstr("pdc_webhook_decisions_total{outcome=\"bad_request\"} 1\n"));
  app->Stop();
}

TEST(AdmissionWebhookServerTest, AMissingCertificateStopsTheStartNamingTheField) {
  pdc::testing::TempDir dir;
  pdc::testing::FakeClock clock;
  PdcConfig c;
  c.extender.listen = "127.0.0.1:0";
  c.extender.store = StoreKind::kMemory;
  c.extender.webhook.listen = "127.0.0.1:0";
  c.extender.webhook.cert_file = dir.Join("missing.crt");
  c.extender.webhook.key_file = dir.Join("missing.key");
  absl::StatusOr<std::unique_ptr<ExtenderApp>> app =
      ExtenderApp::Start(c, {.clock = &clock, .version = "test"});
  ASSERT_FALSE(app.ok());
  EXPECT_THAT(std::string(app.status().message()), HasSubstr("extender.webhook: tls.certFile"));
  EXPECT_THAT(std::string(app.status().message()), HasSubstr("missing.crt"));
}

// A listener whose only worker is held (a filter that takes long) does not
// delay the webhook: it has its own listener and threads.
TEST(AdmissionWebhookServerTest, AnswersWhileTheExtendersWorkersAreBusy) {
  net::HttpServerOptions busy_options;
  busy_options.threads = 1;
  absl::Notification entered, release;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<net::HttpServer> busy,
                       net::HttpServer::Start(busy_options, [&](net::HttpRequest) {
                         entered.Notify();
                         release.WaitForNotification();
                         return net::HttpResponse{200, "text/plain", "late", std::nullopt};
                       }));
  std::thread caller([&] {
    std::unique_ptr<HttpClient> c = Client(absl::StrCat("http://127.0.0.1:", busy->port()));
    if (c != nullptr) (void)c->Post("/scheduler/filter", "{}");
  });
  entered.WaitForNotification();

  MemoryStore store;
  pdc::testing::FakeClock clock;
  AllocatorOptions ao;
  ao.serialize_handoffs = false;  // No node driver confirms hand-offs here.
  ao.device_classes = {DeviceClass{std::string(kNvme), {pdc::testing::QemuNvmeSelector()}}};
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Allocator> allocator, Allocator::Open(ao, &store, &clock));
  const AdmissionWebhook webhook(allocator.get(), nullptr, {std::string(kNvme)}, &clock, nullptr);
  // Plain HTTP here: TLS is the other test's.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<net::HttpServer> hook,
                       StartWebhookServer({"127.0.0.1:0", "", ""}, &webhook));
  std::unique_ptr<HttpClient> c = Client(absl::StrCat("http://127.0.0.1:", hook->port()));
  ASSERT_NE(c, nullptr);
  ASSERT_OK_AND_ASSIGN(pdc::HttpResponse answer,
                       c->Post("/mutate", AdmissionReviewOf(kReviewUid, LauncherPodAtCreate({}))));
  EXPECT_EQ(answer.status, 200);
  EXPECT_THAT(answer.body, HasSubstr(kReviewUid));
  EXPECT_FALSE(release.HasBeenNotified());  // The other listener is still busy.
  release.Notify();
  caller.join();
}

}  // namespace
}  // namespace pdc::extender
