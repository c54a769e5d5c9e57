// Node identities on the REST API (extender/node_auth.h, router.h "Auth"):
// a node driver's token is checked with a TokenReview (a fake reviewer here;
// tests/kube/token_review_on_double_test.cc asks the kube-apiserver double)
// or found in extender.nodeAuth.tokenDir, and may touch only its own node.
// Requests waiting for a review are parked as the HTTP server parks them
// (net/http_server.cc: the Router answers with a LongPoll; the server runs
// it again, without the body, once the Notifier topic moves).
#include <fcntl.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/file_util.h"
#include "extender/node_auth.h"
#include "rapidjson/document.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/extender/extender_fixture.h"
#include "tests/testing/temp_dir.h"

namespace pdc::extender::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kAdmin[] = "admin-secret";
constexpr char kAudience[] = "pdc-extender";
constexpr char kNodeSa[] = "system:serviceaccount:pdc-system:pdc-node";

std::string AuthInventoryBody(const std::string& node) {
  return absl::StrCat(
      R"({"node":")", node, R"(","devices":[)",
      R"({"address":"0000:3b:00.0","vendor":"1b36","device":"0010","class":"010802","iommuGroup":12,"numaNode":0,"serial":"S0-)",
      node, R"(","driver":"vfio-pci","healthy":true}]})");
}

// The `error` of an error answer (unescaped), else the body.
std::string Said(const HttpResponse& r) {
  rapidjson::Document d;
  d.Parse(r.body.data(), r.body.size());
  if (!d.HasParseError() && d.IsObject() && d.HasMember("error") && d["error"].IsString()) {
    return d["error"].GetString();
  }
  return r.body;
}

// A pod-bound pdc-node token of `node`, as kube-apiserver reviews it.
api::TokenReviewStatus NodeToken(const std::string& node,
                                 const std::string& user = kNodeSa,
                                 const std::string& audience = kAudience) {
  api::TokenReviewStatus s;
  s.authenticated = true;
  s.username = user;
  s.audiences = {audience};
  s.extra[std::string(api::kNodeNameExtra)] = {node};
  return s;
}

// Answers from a table; counts the reviews; can hold them until released.
class FakeReviewer final : public kube::TokenReviewer {
 public:
  absl::StatusOr<api::TokenReviewStatus> Review(std::string_view token,
                                                std::string_view audience,
                                                absl::Duration) override {
    absl::MutexLock lock(&mu_);
    ++calls_;
    audiences_.emplace_back(audience);
    mu_.Await(absl::Condition(
        +[](bool* held) { return !*held; }, &held_));
    if (!down_.ok()) return down_;
    auto it = tokens_.find(std::string(token));
    if (it == tokens_.end()) {
      api::TokenReviewStatus no;
      no.error = "invalid bearer token";
      return no;
    }
    return it->second;
  }
  void Set(const std::string& token, api::TokenReviewStatus s) {
    absl::MutexLock lock(&mu_);
    tokens_[token] = std::move(s);
  }
  void SetDown(absl::Status s) {
    absl::MutexLock lock(&mu_);
    down_ = std::move(s);
  }
  void Hold(bool held) {
    absl::MutexLock lock(&mu_);
    held_ = held;
  }
  int calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  std::vector<std::string> audiences() const {
    absl::MutexLock lock(&mu_);
    return audiences_;
  }

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, api::TokenReviewStatus> tokens_ ABSL_GUARDED_BY(mu_);
  absl::Status down_ ABSL_GUARDED_BY(mu_);
  bool held_ ABSL_GUARDED_BY(mu_) = false;
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> audiences_ ABSL_GUARDED_BY(mu_);
};

class NodeAuthTest : public ExtenderFixture {
 protected:
  void SetUp() override {
    ExtenderFixture::SetUp();
    TwoNodes();
    reviewer_.Set("token-a", NodeToken("node-a"));
    reviewer_.Set("token-b", NodeToken("node-b"));
    StartAuth();
  }
  void TearDown() override {
    reviewer_.Hold(false);
    router_.reset();
    auth_.reset();
  }

  void StartAuth() {
    router_.reset();
    auth_.reset();
    auth_options_.service_account = "pdc-system/pdc-node";
    auth_options_.audience = kAudience;
    auth_ = std::make_unique<NodeAuthenticator>(auth_options_, &reviewer_, &notifier_, &clock_);
    options_.bearer_token = kAdmin;
    options_.node_auth = auth_.get();
    router_ = std::make_unique<Router>(options_, &ctx_);
    router_->SetReady(true);
  }

  // Runs `method target` with `token` to its answer as the server would,
  // re-running a request parked on a TokenReview once its topic moves.
  HttpResponse Run(std::string method, std::string target, std::string body,
                   std::string token) {
    HttpRequest r;
    r.method = method;
    r.target = target;
    r.body = std::move(body);
    if (!token.empty()) r.authorization = absl::StrCat("Bearer ", token);
    const std::string auth = r.authorization;
    HttpResponse resp = router_->Handle(std::move(r));
    while (resp.long_poll.has_value() && resp.long_poll->resume_token != 0) {
      const LongPoll lp = *resp.long_poll;
      absl::Notification woken;
      const Notifier::SubscriptionId id =
          notifier_.Subscribe(lp.topic, lp.seen_version, [&woken] { woken.Notify(); });
      const bool in_time = woken.WaitForNotificationWithTimeout(absl::Seconds(10));
      if (!in_time) notifier_.Cancel(id);
      HttpRequest again;
      again.method = method;
      again.target = target;
      again.authorization = auth;
      again.resume_token = lp.resume_token;
      again.allow_wait = in_time;
      resp = router_->Handle(std::move(again));
    }
    return resp;
  }

  FakeReviewer reviewer_;
  NodeAuthOptions auth_options_;
  std::unique_ptr<NodeAuthenticator> auth_;
};

struct AuthCase {
  std::string name;
  std::string method;
  std::string target;
  std::string token;
  int status;
  std::vector<std::string> says;  // Substrings of the answer.
};

TEST_F(NodeAuthTest, WhoMayCallWhat) {
  reviewer_.Set("token-other-audience", NodeToken("node-a", kNodeSa, "https://kubernetes.default.svc"));
  reviewer_.Set("token-other-sa", NodeToken("node-a", "system:serviceaccount:default:builder"));
  api::TokenReviewStatus no_node = NodeToken("node-a");
  no_node.extra.clear();
  reviewer_.Set("token-no-node", no_node);
  const std::vector<AuthCase> cases = {
      {"NoToken", "PUT", "/v1/nodes/node-a/inventory", "", 401, {"Authorization: Bearer"}},
      {"UnknownToken", "PUT", "/v1/nodes/node-a/inventory", "nobody", 401,
       {"did not authenticate", "invalid bearer token"}},
      {"WrongAudience", "PUT", "/v1/nodes/node-a/inventory", "token-other-audience", 401,
       {"audience \"pdc-extender\""}},
      {"WrongServiceAccount", "PUT", "/v1/nodes/node-a/inventory", "token-other-sa", 403,
       {"system:serviceaccount:default:builder", kNodeSa}},
      {"NoNodeName", "PUT", "/v1/nodes/node-a/inventory", "token-no-node", 403,
       {"authentication.kubernetes.io/node-name", "tokenDir"}},
      {"OtherNodesInventory", "PUT", "/v1/nodes/node-b/inventory", "token-a", 403,
       {"node \"node-a\"", "node \"node-b\"'s"}},
      {"OtherNodesHandoff", "POST", "/v1/nodes/node-b/handoffs", "token-a", 403,
       {"node \"node-a\"", "node \"node-b\"'s"}},
      {"OtherNodesAllocations", "GET", "/v1/nodes/node-b/allocations", "token-a", 403,
       {"node \"node-b\"'s"}},
      {"OtherNodesHandoffList", "GET", "/v1/nodes/node-b/handoffs", "token-a", 403,
       {"node \"node-b\"'s"}},
      {"CancelOwnHandoff", "DELETE", "/v1/nodes/node-a/handoffs/uid-1", "token-a", 403,
       {"admin token"}},
      {"ReleaseOwnDevice", "POST", "/v1/nodes/node-a/devices/0000:3b:00.0/release", "token-a",
       403, {"admin token"}},
      {"Claims", "GET", "/v1/claims", "token-a", 403, {"admin token"}},
      {"AllNodes", "GET", "/v1/nodes", "token-a", 403, {"admin token"}},
      {"Devices", "GET", "/v1/devices", "token-a", 403, {"admin token"}},
      {"OwnNode", "GET", "/v1/nodes/node-a", "token-a", 200, {"node-a"}},
      {"OwnAllocations", "GET", "/v1/nodes/node-a/allocations", "token-a", 200, {}},
      {"OwnHandoffs", "GET", "/v1/nodes/node-a/handoffs", "token-a", 200, {"items"}},
      {"AdminAnyNode", "GET", "/v1/nodes/node-b/handoffs", kAdmin, 200, {"items"}},
      {"AdminClaims", "GET", "/v1/claims", kAdmin, 200, {}},
      {"AdminDevices", "GET", "/v1/devices", kAdmin, 200, {}},
  };
  for (const AuthCase& c : cases) {
    SCOPED_TRACE(c.name);
    HttpResponse r = Run(c.method, c.target, "", c.token);
    EXPECT_EQ(r.status, c.status) << r.body;
    for (const std::string& s : c.says) EXPECT_THAT(Said(r), HasSubstr(s));
  }
  // Every review asked for pdc's audience.
  for (const std::string& a : reviewer_.audiences()) EXPECT_EQ(a, kAudience);
}

// Every /v1/ route against the table's access column: a kOwnNode route
// with node-a's token gets past authentication on node-a and 403 naming
// node-b on node-b; every other route gets 403 asking for the admin token.
TEST_F(NodeAuthTest, EveryRouteFollowsTheAccessColumnOfTheRouteTable) {
  for (const RouteInfo& route : Router::Routes()) {
    if (route.pattern.substr(0, 4) != "/v1/") continue;
    const std::string own = absl::StrReplaceAll(
        std::string(route.pattern), {{"{node}", "node-a"}, {"{ns}", "default"}, {"{name}", "c1"},
                        {"{address}", "0000:3b:00.0"}, {"{podUid}", "uid-1"}});
    const std::string method(route.method);
    const HttpResponse mine = Run(method, own, "{}", "token-a");
    SCOPED_TRACE(absl::StrCat(method, " ", own, " -> ", mine.status, " ", mine.body));
    if (route.access == RouteAccess::kOwnNode) {
      EXPECT_NE(mine.status, 401);
      EXPECT_NE(mine.status, 403);
      const HttpResponse theirs =
          Run(method, absl::StrReplaceAll(own, {{"node-a", "node-b"}}), "{}", "token-a");
      EXPECT_EQ(theirs.status, 403);
      EXPECT_THAT(Said(theirs), HasSubstr("node \"node-b\"'s"));
    } else {
      EXPECT_EQ(mine.status, 403);
      EXPECT_THAT(Said(mine), HasSubstr("admin token"));
    }
  }
}

TEST_F(NodeAuthTest, NodeWritesItsOwnInventoryThroughAReview) {
  // The body waits with the review and is there when the request runs.
  HttpResponse r = Run("PUT", "/v1/nodes/node-a/inventory", AuthInventoryBody("node-a"), "token-a");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(reviewer_.calls(), 1);
  // Node B's identity cannot overwrite node A's inventory: nothing changes.
  r = Run("PUT", "/v1/nodes/node-a/inventory", AuthInventoryBody("node-a"), "token-b");
  EXPECT_EQ(r.status, 403);
  EXPECT_THAT(Said(r), AllOf(HasSubstr("node \"node-b\""), HasSubstr("node \"node-a\"'s")));
  // The admin token still writes any node's inventory.
  r = Run("PUT", "/v1/nodes/node-b/inventory", AuthInventoryBody("node-b"), kAdmin);
  EXPECT_EQ(r.status, 200) << r.body;
}

TEST_F(NodeAuthTest, ConfirmingAnotherNodesHandoffIsRefusedBeforeTheHandler) {
  HttpResponse r = Run("POST", "/v1/nodes/node-b/handoffs",
                       R"({"podUid":"uid-1","resourceName":"devices.kubevirt.io/nvme","devices":[]})",
                       "token-a");
  EXPECT_EQ(r.status, 403);
  EXPECT_THAT(Said(r), HasSubstr("may touch only its own node"));
}

TEST_F(NodeAuthTest, CacheHitDoesNotAskAgainUntilTheTtlEnds) {
  ASSERT_EQ(Run("GET", "/v1/nodes/node-a", "", "token-a").status, 200);
  ASSERT_EQ(Run("GET", "/v1/nodes/node-a/handoffs", "", "token-a").status, 200);
  // The answer comes from the cache at once: no parked request.
  HttpRequest direct;
  direct.method = "GET";
  direct.target = "/v1/nodes/node-a";
  direct.authorization = "Bearer token-a";
  HttpResponse now = router_->Handle(std::move(direct));
  EXPECT_FALSE(now.long_poll.has_value());
  EXPECT_EQ(now.status, 200);
  EXPECT_EQ(reviewer_.calls(), 1);
  clock_.Advance(auth_options_.cache_ttl + absl::Seconds(1));
  ASSERT_EQ(Run("GET", "/v1/nodes/node-a", "", "token-a").status, 200);
  EXPECT_EQ(reviewer_.calls(), 2);
}

TEST_F(NodeAuthTest, RefusalsAreCachedBriefly) {
  EXPECT_EQ(Run("GET", "/v1/nodes/node-a", "", "nobody").status, 401);
  EXPECT_EQ(Run("GET", "/v1/nodes/node-a", "", "nobody").status, 401);
  EXPECT_EQ(reviewer_.calls(), 1);
  clock_.Advance(auth_options_.failure_ttl + absl::Seconds(1));
  EXPECT_EQ(Run("GET", "/v1/nodes/node-a", "", "nobody").status, 401);
  EXPECT_EQ(reviewer_.calls(), 2);
}

TEST_F(NodeAuthTest, CacheIsBounded) {
  auth_options_.cache_size = 16;
  StartAuth();
  for (int i = 0; i < 17; ++i) {
    const std::string token = absl::StrCat("t", i);
    reviewer_.Set(token, NodeToken("node-a"));
    ASSERT_EQ(Run("GET", "/v1/nodes/node-a", "", token).status, 200);
  }
  EXPECT_EQ(reviewer_.calls(), 17);
  ASSERT_EQ(Run("GET", "/v1/nodes/node-a", "", "t16").status, 200);  // Kept.
  EXPECT_EQ(reviewer_.calls(), 17);
  ASSERT_EQ(Run("GET", "/v1/nodes/node-a", "", "t0").status, 200);  // The oldest: dropped.
  EXPECT_EQ(reviewer_.calls(), 18);
}

TEST_F(NodeAuthTest, ApiserverDownFailsClosedAndIsNotCached) {
  reviewer_.SetDown(absl::UnavailableError("kube-apiserver answered 503 ServiceUnavailable"));
  HttpResponse r = Run("PUT", "/v1/nodes/node-a/inventory", AuthInventoryBody("node-a"), "token-a");
  EXPECT_EQ(r.status, 503);
  EXPECT_THAT(Said(r), AllOf(HasSubstr("cannot check the bearer token"), HasSubstr("503")));
  reviewer_.SetDown(absl::PermissionDeniedError("tokenreviews is forbidden"));
  r = Run("GET", "/v1/nodes/node-a", "", "token-a");
  EXPECT_EQ(r.status, 503);
  EXPECT_THAT(Said(r), HasSubstr("create on tokenreviews.authentication.k8s.io"));
  reviewer_.SetDown(absl::OkStatus());
  EXPECT_EQ(Run("GET", "/v1/nodes/node-a", "", "token-a").status, 200);
  EXPECT_EQ(reviewer_.calls(), 3);
  EXPECT_EQ(Run("GET", "/v1/nodes/node-a", "", "nobody").status, 401);
  const NodeAuthenticator::ReviewCounts counts = auth_->review_counts();
  EXPECT_EQ(counts.failed, 2u);
  EXPECT_EQ(counts.accepted, 1u);
  EXPECT_EQ(counts.refused, 1u);
}

TEST_F(NodeAuthTest, ReviewNeverHoldsTheCallingThread) {
  reviewer_.Hold(true);
  HttpRequest r;
  r.method = "PUT";
  r.target = "/v1/nodes/node-a/inventory";
  r.body = AuthInventoryBody("node-a");
  r.authorization = "Bearer token-a";
  // Returns at once with a parked request while the review is held.
  HttpResponse parked = router_->Handle(std::move(r));
  ASSERT_TRUE(parked.long_poll.has_value());
  EXPECT_NE(parked.long_poll->resume_token, 0u);
  EXPECT_EQ(parked.long_poll->max_wait, auth_->max_wait());
  // Its time is up before the apiserver answered: 503, nothing written.
  HttpRequest late;
  late.method = "PUT";
  late.target = "/v1/nodes/node-a/inventory";
  late.authorization = "Bearer token-a";
  late.resume_token = parked.long_poll->resume_token;
  late.allow_wait = false;
  HttpResponse answer = router_->Handle(std::move(late));
  EXPECT_EQ(answer.status, 503);
  EXPECT_THAT(Said(answer), HasSubstr("did not answer the TokenReview"));
  reviewer_.Hold(false);
  // The late answer still fills the cache for the next request.
  EXPECT_EQ(Run("GET", "/v1/nodes/node-a", "", "token-a").status, 200);
}

TEST_F(NodeAuthTest, ConcurrentRequestsShareOneReview) {
  reviewer_.Hold(true);
  std::vector<LongPoll> parked;
  for (int i = 0; i < 3; ++i) {
    HttpRequest r;
    r.method = "GET";
    r.target = "/v1/nodes/node-a";
    r.authorization = "Bearer token-a";
    HttpResponse p = router_->Handle(std::move(r));
    ASSERT_TRUE(p.long_poll.has_value());
    parked.push_back(*p.long_poll);
  }
  reviewer_.Hold(false);
  for (const LongPoll& lp : parked) {
    absl::Notification woken;
    notifier_.Subscribe(lp.topic, lp.seen_version, [&woken] { woken.Notify(); });
    ASSERT_TRUE(woken.WaitForNotificationWithTimeout(absl::Seconds(10)));
    HttpRequest again;
    again.method = "GET";
    again.target = "/v1/nodes/node-a";
    again.authorization = "Bearer token-a";
    again.resume_token = lp.resume_token;
    EXPECT_EQ(router_->Handle(std::move(again)).status, 200);
  }
  EXPECT_EQ(reviewer_.calls(), 1);
}

class NodeTokenDirTest : public NodeAuthTest {
 protected:
  void SetUp() override {
    ExtenderFixture::SetUp();
    TwoNodes();
    Write("node-a", "dir-token-a\n");
    Write("node-b", "dir-token-b");
    Write("..data", "not-a-node");
    Write("Not_A_Node", "bad-name-token");
    router_.reset();
    NodeAuthOptions o;
    o.token_dir = dir_.path();
    auth_ = std::make_unique<NodeAuthenticator>(o, nullptr, &notifier_, &clock_);
    options_.bearer_token = kAdmin;
    options_.node_auth = auth_.get();
    router_ = std::make_unique<Router>(options_, &ctx_);
    router_->SetReady(true);
  }
  // As kubelet and `kubectl` replace files: a new file renamed over the old.
  void Write(const std::string& name, const std::string& text) {
    ASSERT_TRUE(WriteFileAtomically(absl::StrCat(dir_.path(), "/", name), text).ok());
  }
  pdc::testing::TempDir dir_;
};

TEST_F(NodeTokenDirTest, PerNodeTokens) {
  const std::vector<AuthCase> cases = {
      {"OwnInventory", "GET", "/v1/nodes/node-a", "dir-token-a", 200, {}},
      {"OtherNode", "PUT", "/v1/nodes/node-b/inventory", "dir-token-a", 403,
       {"node \"node-a\" (authenticated by tokenDir)", "node \"node-b\"'s"}},
      {"UnknownToken", "GET", "/v1/nodes/node-a", "dir-token-c", 401, {"tokenDir"}},
      {"DotFileIsNoNode", "GET", "/v1/nodes/node-a", "not-a-node", 401, {}},
      {"BadNameIsNoNode", "GET", "/v1/nodes/node-a", "bad-name-token", 401, {}},
      {"PrefixOfAToken", "GET", "/v1/nodes/node-a", "dir-token-", 401, {}},
      // The admin token reaches the handler (which wants a body).
      {"Admin", "PUT", "/v1/nodes/node-b/inventory", kAdmin, 400, {"malformed JSON"}},
  };
  for (const AuthCase& c : cases) {
    SCOPED_TRACE(c.name);
    HttpResponse r = Run(c.method, c.target, "", c.token);
    EXPECT_EQ(r.status, c.status) << r.body;
    for (const std::string& s : c.says) EXPECT_THAT(Said(r), HasSubstr(s));
  }
  EXPECT_EQ(Run("PUT", "/v1/nodes/node-b/inventory", AuthInventoryBody("node-b"), "dir-token-b").status,
            200);
}

TEST_F(NodeTokenDirTest, ReplacedTokenIsReadAgain) {
  ASSERT_EQ(Run("GET", "/v1/nodes/node-a", "", "dir-token-a").status, 200);
  Write("node-a", "rotated-a");
  // Within the same file-system tick the directory may look unchanged.
  clock_.Advance(NodeTokenDir::kRereadEvery);
  EXPECT_EQ(Run("GET", "/v1/nodes/node-a", "", "rotated-a").status, 200);
  EXPECT_EQ(Run("GET", "/v1/nodes/node-a", "", "dir-token-a").status, 401);
}

TEST_F(NodeTokenDirTest, SharedTokenAuthenticatesNeither) {
  Write("node-b", "dir-token-a");
  clock_.Advance(NodeTokenDir::kRereadEvery);
  EXPECT_EQ(Run("GET", "/v1/nodes/node-a", "", "dir-token-a").status, 401);
  EXPECT_EQ(Run("GET", "/v1/nodes/node-b", "", "dir-token-a").status, 401);
}

}  // namespace
}  // namespace pdc::extender::testing
