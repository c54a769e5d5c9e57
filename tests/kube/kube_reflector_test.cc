// Reflector against a scripted apiserver over real sockets: pages of a list,
// a watch resumed from its last resourceVersion (bookmarks included), a
// relist after 410 Gone and after an event pdc cannot read, backoff after
// errors, and Stop ending an open watch at once.
#include "kube/kube_reflector.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "api/kube_objects.h"
#include "common/strings.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_http_server.h"

namespace pdc::extender {
namespace {

using ::pdc::testing::TestHttpServer;
using ::pdc::testing::TestReply;
using ::pdc::testing::TestRequest;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Pod(const std::string& name, int rv) {
  return absl::StrCat(R"({"metadata":{"name":")", name, R"(","namespace":"default","uid":"uid-)",
                      name, R"(","resourceVersion":")", rv, R"("}})");
}

std::string List(const std::vector<std::string>& items, int rv, const std::string& cont = "") {
  return absl::StrCat(R"({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":")", rv,
                      R"(","continue":")", cont, R"("},"items":[)", absl::StrJoin(items, ","),
                      "]}");
}

std::string Event(const std::string& type, const std::string& object) {
  return absl::StrCat(R"({"type":")", type, R"(","object":)", object, "}\n");
}

std::string Bookmark(int rv) {
  return Event("BOOKMARK", absl::StrCat(R"({"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":")",
                                        rv, R"("}})"));
}

constexpr char kGone[] =
    R"json({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 10 (20)","reason":"Expired","code":410}})json"
    "\n";

// Records what the reflector hands on, as "replace:a,b", "upsert:c", "remove:d".
class RecordingSink final : public kube::ReflectorSink {
 public:
  void Replace(const std::vector<const api::json::Value*>& items) override {
    std::vector<std::string> names;
    for (const api::json::Value* v : items) names.push_back(Name(*v));
    Add(absl::StrCat("replace:", absl::StrJoin(names, ",")));
  }
  void Upsert(const api::json::Value& object) override { Add("upsert:" + Name(object)); }
  void Remove(const api::json::Value& object) override { Add("remove:" + Name(object)); }

  std::vector<std::string> seen() const {
    absl::MutexLock lock(&mu_);
    return seen_;
  }
  // Waits (bounded) until `n` calls were recorded.
  bool Await(size_t n) const {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return seen_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(10));
  }

 private:
  static std::string Name(const api::json::Value& v) {
    absl::StatusOr<api::ObjectMeta> m = api::ReadObjectMeta(v, "Pod");
    return m.ok() ? m->name : "?";
  }
  void Add(std::string s) {
    absl::MutexLock lock(&mu_);
    seen_.push_back(std::move(s));
  }
  mutable absl::Mutex mu_;
  std::vector<std::string> seen_ ABSL_GUARDED_BY(mu_);
};

class ReflectorTest : public ::testing::Test {
 protected:
  void Start(TestHttpServer::Handler handler) {
    server_ = std::make_unique<TestHttpServer>(std::move(handler));
    kube::KubeClientConfig kc;
    kc.server = server_->url();
    kc.token = "t0ken";
    endpoint_ = std::make_unique<kube::KubeEndpoint>(kc);
    kube::ReflectorOptions o;
    o.path = "/api/v1/pods";
    o.page_size = 2;
    o.backoff_initial = absl::Milliseconds(10);
    o.backoff_max = absl::Milliseconds(40);
    reflector_ = std::make_unique<kube::Reflector>(endpoint_.get(), o, &sink_);
    reflector_->Start();
  }
  void TearDown() override {
    if (reflector_) reflector_->Stop();
  }
  // Requests so far whose target contains `part`.
  std::vector<std::string> Targets(std::string_view part) const {
    std::vector<std::string> out;
    for (const TestRequest& r : server_->requests()) {
      if (absl::StrContains(r.target, Sv(part))) out.push_back(r.target);
    }
    return out;
  }

  // What the scripted server counted; declared before the server, which
  // may still run a handler while the fixture goes away.
  std::atomic<int> lists_{0};
  std::atomic<int> watches_{0};
  RecordingSink sink_;
  std::unique_ptr<TestHttpServer> server_;
  std::unique_ptr<kube::KubeEndpoint> endpoint_;
  std::unique_ptr<kube::Reflector> reflector_;
};

TEST_F(ReflectorTest, ListsInPagesThenWatchesAndResumesFromTheLastVersion) {
  Start([&](const TestRequest& r) {
    TestReply reply;
    if (!absl::StrContains(r.target, "watch=1")) {
      reply.body = absl::StrContains(r.target, "continue=c1")
                       ? List({Pod("c", 3)}, 10)
                       : List({Pod("a", 1), Pod("b", 2)}, 10, "c1");
      return reply;
    }
    if (++watches_ == 1) {
      // Then the watch ends, as timeoutSeconds does.
      reply.chunks = {Event("ADDED", Pod("d", 11)), Event("MODIFIED", Pod("a", 12)),
                      Event("DELETED", Pod("b", 13)) + Bookmark(15)};
    } else {
      reply.chunks = {Bookmark(16)};
      reply.hold_open = true;
    }
    return reply;
  });
  ASSERT_TRUE(reflector_->WaitForSync(absl::Seconds(10)));
  ASSERT_TRUE(sink_.Await(4));
  EXPECT_THAT(sink_.seen(),
              ElementsAre("replace:a,b,c", "upsert:d", "upsert:a", "remove:b"));
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (reflector_->resource_version() != "16" && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(reflector_->resource_version(), "16");
  const std::vector<std::string> w = Targets("watch=1");
  ASSERT_EQ(w.size(), 2u);
  EXPECT_THAT(w[0], HasSubstr("allowWatchBookmarks=true&resourceVersion=10&timeoutSeconds="));
  EXPECT_THAT(w[1], HasSubstr("resourceVersion=15"));  // The bookmark's.
  EXPECT_EQ(reflector_->lists(), 1u);
  // Every request carried the token.
  for (const TestRequest& r : server_->requests()) EXPECT_EQ(r.authorization, "Bearer t0ken");
}

TEST_F(ReflectorTest, GoneListsAgain) {
  Start([&](const TestRequest& r) {
    TestReply reply;
    if (!absl::StrContains(r.target, "watch=1")) {
      reply.body = ++lists_ == 1 ? List({Pod("a", 1)}, 10) : List({Pod("b", 21)}, 21);
      return reply;
    }
    reply.chunks = {++watches_ == 1 ? std::string(kGone) : Bookmark(22)};
    reply.hold_open = watches_ > 1;
    return reply;
  });
  ASSERT_TRUE(sink_.Await(2));
  EXPECT_THAT(sink_.seen(), ElementsAre("replace:a", "replace:b"));
  EXPECT_EQ(Targets("limit=").size(), 2u);
  EXPECT_THAT(Targets("watch=1").front(), HasSubstr("resourceVersion=10&"));

}

// An event pdc cannot read is not skipped: the copy is rebuilt from a list.
TEST_F(ReflectorTest, AnUnreadableEventListsAgain) {
  Start([&](const TestRequest& r) {
    TestReply reply;
    if (!absl::StrContains(r.target, "watch=1")) {
      reply.body = ++lists_ == 1 ? List({Pod("a", 1)}, 10) : List({Pod("a", 1), Pod("e", 12)}, 12);
      return reply;
    }
    if (++watches_ == 1) {
      reply.chunks = {Event("ADDED", R"({"metadata":{"name":"Not A Name!","uid":"x","resourceVersion":"11"}})")};
    } else {
      reply.chunks = {Bookmark(13)};
      reply.hold_open = true;
    }
    return reply;
  });
  ASSERT_TRUE(sink_.Await(2));
  EXPECT_THAT(sink_.seen(), ElementsAre("replace:a", "replace:a,e"));
}

TEST_F(ReflectorTest, FailuresBackOffAndRetry) {
  Start([&](const TestRequest& r) {
    TestReply reply;
    if (!absl::StrContains(r.target, "watch=1")) {
      if (++lists_ < 3) {
        reply.status = 503;
        reply.body = R"({"kind":"Status","status":"Failure","message":"etcd is down","code":503})";
        return reply;
      }
      reply.body = List({Pod("a", 1)}, 10);
      return reply;
    }
    reply.chunks = {Bookmark(11)};
    reply.hold_open = true;
    return reply;
  });
  ASSERT_TRUE(reflector_->WaitForSync(absl::Seconds(10)));
  EXPECT_EQ(lists_.load(), 3);
  EXPECT_THAT(sink_.seen(), ElementsAre("replace:a"));
}

TEST_F(ReflectorTest, StopEndsAnOpenWatchAtOnce) {
  Start([&](const TestRequest& r) {
    TestReply reply;
    if (!absl::StrContains(r.target, "watch=1")) {
      reply.body = List({}, 10);
      return reply;
    }
    reply.chunks = {Bookmark(11)};
    reply.hold_open = true;
    return reply;
  });
  ASSERT_TRUE(reflector_->WaitForSync(absl::Seconds(10)));
  while (reflector_->resource_version() != "11") absl::SleepFor(absl::Milliseconds(5));
  const absl::Time start = absl::Now();
  reflector_->Stop();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST_F(ReflectorTest, StopEndsAHangingListAtOnce) {
  Start([&](const TestRequest&) {
    TestReply reply;
    reply.hang = true;  // An apiserver that never answers the list.
    return reply;
  });
  while (server_->requests().empty()) absl::SleepFor(absl::Milliseconds(5));
  const absl::Time start = absl::Now();
  reflector_->Stop();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_FALSE(reflector_->HasSynced());
}

}  // namespace
}  // namespace pdc::extender
