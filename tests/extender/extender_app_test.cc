// ExtenderApp: the whole of pdc-extender in-process (no signals): it serves
// on port 0, and a stop and a restart on the same data directory keep what
// was committed. Runs on a fake clock (its background loops' waits move fake
// time and return at once).
#include "extender/extender_app.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "config/config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "net/http_client.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace pdc::extender {
namespace {

using ::testing::HasSubstr;

class ExtenderAppTest : public ::testing::Test {
 protected:
  PdcConfig Config() {
    PdcConfig c;
    c.extender.listen = "127.0.0.1:0";
    c.extender.store = StoreKind::kFile;
    c.extender.data_dir = dir_.path();
    c.extender.worker_threads = 2;
    return c;
  }

  absl::StatusOr<std::unique_ptr<ExtenderApp>> Start(const PdcConfig& c) {
    return ExtenderApp::Start(c, {.clock = &clock_, .version = "test"});
  }

  std::unique_ptr<HttpClient> Client(const ExtenderApp& app) {
    HttpClientOptions o;
    o.base_url = absl::StrCat("http://127.0.0.1:", app.port());
    o.timeout = absl::Seconds(20);
    auto c = HttpClient::Create(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  pdc::testing::TempDir dir_;
  pdc::testing::FakeClock clock_;
};

TEST_F(ExtenderAppTest, ServesAndKeepsClaimsAcrossARestart) {
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<ExtenderApp> app, Start(Config()));
    ASSERT_NE(app->port(), 0);
    std::unique_ptr<HttpClient> client = Client(*app);
    ASSERT_NE(client, nullptr);
    ASSERT_OK_AND_ASSIGN(pdc::HttpResponse ready, client->Get("/readyz"));
    EXPECT_EQ(ready.status, 200);
    ASSERT_OK_AND_ASSIGN(
        pdc::HttpResponse created,
        client->Post("/v1/namespaces/default/claims",
                     R"({"name":"data","resourceName":"devices.kubevirt.io/nvme","count":1})"));
    EXPECT_EQ(created.status, 201) << created.body;
    app->Stop();
    app->Stop();  // Idempotent.
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ExtenderApp> app, Start(Config()));
  std::unique_ptr<HttpClient> client = Client(*app);
  ASSERT_NE(client, nullptr);
  ASSERT_OK_AND_ASSIGN(pdc::HttpResponse got, client->Get("/v1/namespaces/default/claims/data"));
  EXPECT_EQ(got.status, 200);
  EXPECT_THAT(got.body, HasSubstr(R"("name":"data")"));
  EXPECT_GE(app->allocator()->revision(), 1u);
}

TEST_F(ExtenderAppTest, ABadListenAddressNamesTheField) {
  PdcConfig c = Config();
  c.extender.listen = "localhost";
  absl::StatusOr<std::unique_ptr<ExtenderApp>> app = Start(c);
  ASSERT_FALSE(app.ok());
  EXPECT_THAT(std::string(app.status().message()), HasSubstr("extender.listen"));
}

}  // namespace
}  // namespace pdc::extender
