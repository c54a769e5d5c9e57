// TokenReviews: the kube-apiserver double's tokenreviews
// (tests/testing/kube_token_review.h), and pdc-extender checking pdc-node's
// projected service-account tokens with them (extender.nodeAuth) over real
// sockets, pdc-node's side reading its token file as kubelet rotates it.
#include <string>

#include "absl/strings/str_cat.h"
#include "api/rest_json.h"
#include "common/file_util.h"
#include "kube/kube_http_client.h"
#include "extender/node_auth.h"
#include "kube/token_reviewer.h"
#include "tests/kube/extender_on_double.h"

namespace pdc::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kAudience[] = "pdc-extender";

class TokenReviewDoubleTest : public KubeDoubleTest {
 protected:
  KubeReply Review(std::string_view token, std::string_view audiences_json) {
    return Call("POST", kube::TokenReviews::kPath,
                absl::StrCat(R"({"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview",)",
                             R"("spec":{"token":")", Sv(token), R"(","audiences":)", Sv(audiences_json),
                             "}}"));
  }
};

TEST_F(TokenReviewDoubleTest, AnswersAsKubeApiserver) {
  api_->token_reviews().Register("tok-a", kube::PodBoundToken("pdc-system", "pdc-node", "node-a",
                                                              {kAudience}));
  KubeReply known = Review("tok-a", R"(["pdc-extender","other"])");
  EXPECT_EQ(known.status, 201) << known.text;
  EXPECT_EQ(known.Str({"kind"}), "TokenReview");
  EXPECT_TRUE(kube::Find(known.json, {"status", "authenticated"})->GetBool());
  EXPECT_EQ(known.Str({"status", "user", "username"}),
            "system:serviceaccount:pdc-system:pdc-node");
  EXPECT_EQ(kube::GetStrings(known.json, {"status", "audiences"}),
            std::vector<std::string>{kAudience});
  EXPECT_EQ(kube::GetStrings(known.json,
                             {"status", "user", "extra", "authentication.kubernetes.io/node-name"}),
            std::vector<std::string>{"node-a"});

  KubeReply wrong_audience = Review("tok-a", R"(["https://kubernetes.default.svc"])");
  EXPECT_EQ(wrong_audience.status, 201);
  EXPECT_EQ(kube::Find(wrong_audience.json, {"status", "authenticated"}), nullptr);
  EXPECT_THAT(wrong_audience.Str({"status", "error"}),
              HasSubstr("is invalid for the target audiences"));

  // No audiences: the apiserver's own, which a pdc-extender token is not for.
  KubeReply default_audience = Review("tok-a", "[]");
  EXPECT_THAT(default_audience.Str({"status", "error"}),
              HasSubstr("https://kubernetes.default.svc.cluster.local"));

  KubeReply unknown = Review("nobody", R"(["pdc-extender"])");
  EXPECT_EQ(unknown.status, 201);
  EXPECT_EQ(unknown.Str({"status", "error"}), "invalid bearer token");

  EXPECT_EQ(Review("", R"(["pdc-extender"])").status, 400);
  EXPECT_EQ(Call("GET", kube::TokenReviews::kPath).status, 405);
}

TEST_F(TokenReviewDoubleTest, HttpTokenReviewerReadsTheAnswer) {
  api_->token_reviews().Register("tok-b", kube::PodBoundToken("pdc-system", "pdc-node", "node-b",
                                                              {kAudience}));
  pdc::kube::KubeClientConfig kc;
  kc.server = Url();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<pdc::kube::KubeApi> kube, pdc::kube::KubeApi::Connect(kc));
  pdc::kube::HttpTokenReviewer reviewer(kube.get());
  ASSERT_OK_AND_ASSIGN(api::TokenReviewStatus s,
                       reviewer.Review("tok-b", kAudience, absl::Seconds(5)));
  EXPECT_TRUE(s.authenticated);
  EXPECT_EQ(s.extra[std::string(api::kNodeNameExtra)], std::vector<std::string>{"node-b"});
  api_->FailRequests({"POST", "tokenreviews"}, 1, 503);
  absl::StatusOr<api::TokenReviewStatus> down =
      reviewer.Review("tok-b", kAudience, absl::Seconds(5));
  EXPECT_EQ(down.status().code(), absl::StatusCode::kUnavailable) << down.status();
}

// The whole pdc-extender with extender.nodeAuth, called as pdc-node calls it.
class NodeAuthOnDoubleTest : public ExtenderOnDoubleTest {
 protected:
  void SetUp() override {
    ExtenderOnDoubleTest::SetUp();
    if (IsSkipped()) return;
    admin_file_ = dir_.Join("admin-token");
    ASSERT_OK(WriteFileAtomically(admin_file_, "admin-secret\n"));
    configure_ = [this](PdcConfig* c) {
      c->extender.token_file = admin_file_;
      c->extender.node_auth.service_account = "pdc-system/pdc-node";
      c->extender.node_auth.audience = kAudience;
    };
    StartExtender();
    ASSERT_TRUE(AwaitReady());
  }

  // A pdc-node client presenting the token in `file`, re-read as it changes.
  std::unique_ptr<HttpClient> NodeClient(const std::string& file) {
    HttpClientOptions o;
    o.base_url = absl::StrCat("http://127.0.0.1:", app_->port());
    o.timeout = absl::Seconds(20);
    o.bearer_token_file = file;
    return std::move(HttpClient::Create(o)).value();
  }
  static std::string InventoryOf(const std::string& node) {
    return api::WriteInventory(Inventory(node, {NvmeDevice("0000:3b:00.0", 12, 0, "S0" + node)}));
  }
  int TokenReviewsAsked() const {
    int n = 0;
    for (const std::string& r : api_->requests()) n += r.find("tokenreviews") != std::string::npos;
    return n;
  }

  std::string admin_file_;
};

TEST_F(NodeAuthOnDoubleTest, NodeWritesOnlyItsOwnNode) {
  const std::string token = absl::StrCat("node-a-", ns_);
  api_->token_reviews().Register(token, kube::PodBoundToken("pdc-system", "pdc-node", "node-a",
                                                            {kAudience}));
  const std::string file = dir_.Join("node-token");
  ASSERT_OK(WriteFileAtomically(file, token));
  std::unique_ptr<HttpClient> node = NodeClient(file);
  const int before = TokenReviewsAsked();

  ASSERT_OK_AND_ASSIGN(HttpResponse own, node->Put("/v1/nodes/node-a/inventory", InventoryOf("node-a")));
  EXPECT_EQ(own.status, 200) << own.body;
  ASSERT_OK_AND_ASSIGN(HttpResponse other,
                       node->Put("/v1/nodes/node-b/inventory", InventoryOf("node-b")));
  EXPECT_EQ(other.status, 403);
  EXPECT_THAT(other.body, HasSubstr("PUT /v1/nodes/node-b/inventory: that is node"));
  ASSERT_OK_AND_ASSIGN(HttpResponse handoff,
                       node->Post("/v1/nodes/node-b/handoffs", R"({"podUid":"u"})"));
  EXPECT_EQ(handoff.status, 403);
  // One review; the other calls found it in the cache.
  EXPECT_EQ(TokenReviewsAsked() - before, 1);

  // The admin token still writes any node.
  HttpRequestOptions admin;
  admin.headers.emplace_back("Authorization", "Bearer admin-secret");
  ASSERT_OK_AND_ASSIGN(HttpResponse by_admin,
                       pdc_->Do("PUT", "/v1/nodes/node-b/inventory", InventoryOf("node-b"), admin));
  EXPECT_EQ(by_admin.status, 200) << by_admin.body;
  ASSERT_OK_AND_ASSIGN(HttpResponse anonymous, pdc_->Get("/v1/nodes/node-a"));
  EXPECT_EQ(anonymous.status, 401);
}

TEST_F(NodeAuthOnDoubleTest, RotatedTokenIsSentAndApiserverDownFailsClosed) {
  const std::string first = absl::StrCat("first-", ns_);
  const std::string second = absl::StrCat("second-", ns_);
  api_->token_reviews().Register(first, kube::PodBoundToken("pdc-system", "pdc-node", "node-a",
                                                            {kAudience}));
  const std::string file = dir_.Join("node-token");
  ASSERT_OK(WriteFileAtomically(file, first));
  std::unique_ptr<HttpClient> node = NodeClient(file);
  ASSERT_OK_AND_ASSIGN(HttpResponse r, node->Get("/v1/nodes/node-a/handoffs"));
  EXPECT_EQ(r.status, 200) << r.body;

  // kubelet rotates the token; kube-apiserver is down meanwhile: the new
  // token cannot be checked, and the call fails closed.
  api_->token_reviews().Forget(first);
  api_->token_reviews().Register(second, kube::PodBoundToken("pdc-system", "pdc-node", "node-a",
                                                             {kAudience}));
  ASSERT_OK(WriteFileAtomically(file, second));
  api_->FailRequests({"POST", "tokenreviews"}, 1, 503);
  ASSERT_OK_AND_ASSIGN(r, node->Get("/v1/nodes/node-a/handoffs"));
  EXPECT_EQ(r.status, 503);
  EXPECT_THAT(r.body, HasSubstr("cannot check the bearer token"));
  // Back: the new token works.
  ASSERT_OK_AND_ASSIGN(r, node->Get("/v1/nodes/node-a/handoffs"));
  EXPECT_EQ(r.status, 200) << r.body;
  ASSERT_OK_AND_ASSIGN(HttpResponse metrics, pdc_->Get("/metrics"));
  EXPECT_THAT(metrics.body, HasSubstr("pdc_node_token_reviews_total{result=\"accepted\"} 2"));
  EXPECT_THAT(metrics.body, HasSubstr("pdc_node_token_reviews_total{result=\"error\"} 1"));
}

}  // namespace
}  // namespace pdc::testing
