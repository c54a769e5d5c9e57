// Fault injection of the kube-apiserver double: failed, delayed and dropped
// (after commit) requests, cut watches; compaction is covered by the list
// and watch tests.
#include <thread>

#include "tests/kube/kube_test_util.h"

namespace pdc::testing {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

using KubeApiServerFaultTest = KubeDoubleTest;

std::unique_ptr<HttpClient> FreshClient(absl::Duration timeout) {
  HttpClientOptions o;
  o.base_url = KubeDoubleTest::Url();
  o.timeout = timeout;
  return std::move(HttpClient::Create(o)).value();
}

TEST_F(KubeApiServerFaultTest, FailedRequestsAreAnsweredWithoutBeingDone) {
  api_->FailRequests({"POST", Cat("/namespaces/", ns_, "/")}, 2, 503);
  KubeReply first = Call("POST", Claims(), ClaimJson("c1"));
  EXPECT_EQ(first.status, 503);
  EXPECT_EQ(first.Str({"reason"}), "ServiceUnavailable");
  EXPECT_EQ(Call("POST", Claims(), ClaimJson("c1")).status, 503);
  // Reads do not match the rule.
  EXPECT_EQ(Call("GET", Claims("/c1")).status, 404);
  EXPECT_EQ(Call("POST", Claims(), ClaimJson("c1")).status, 201);
  EXPECT_THAT(api_->requests(), Contains(Cat("POST ", Claims())));
}

TEST_F(KubeApiServerFaultTest, DelayedRequestOutlastsTheClientsTimeout) {
  CreateClaim("c1");
  api_->DelayRequests({"GET", Claims("/c1")}, 1, absl::Seconds(2));
  std::unique_ptr<HttpClient> impatient = FreshClient(absl::Milliseconds(300));
  EXPECT_THAT(impatient->Get(Claims("/c1")),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  // Only one request was delayed.
  std::unique_ptr<HttpClient> next = FreshClient(absl::Milliseconds(1500));
  ASSERT_OK_AND_ASSIGN(HttpResponse r, next->Get(Claims("/c1")));
  EXPECT_EQ(r.status, 200);
}

TEST_F(KubeApiServerFaultTest,
       DroppedAfterCommitLeavesTheClientUnsureButTheObjectThere) {
  api_->DropAfterCommit({"POST", Claims()});
  std::unique_ptr<HttpClient> once = FreshClient(absl::Seconds(5));
  EXPECT_THAT(once->Post(Claims(), ClaimJson("c1")),
              StatusIs(absl::StatusCode::kUnavailable));
  // It happened: reading back is how a client finds out.
  KubeReply got = Call("GET", Claims("/c1"));
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(Call("POST", Claims(), ClaimJson("c1")).status, 409);
}

TEST_F(KubeApiServerFaultTest, CutWatchesEndsStreamsWithoutAFinalChunk) {
  KubeReply list = Call("GET", Claims());
  std::unique_ptr<HttpStream> w =
      OpenWatch(Claims(Cat("?watch=1&resourceVersion=", list.Rv())));
  ASSERT_NE(w, nullptr);
  ASSERT_TRUE(api_->WaitForWatches(1, absl::Seconds(10)));
  EXPECT_GE(api_->CutWatches(), 1);
  absl::StatusOr<std::optional<std::string>> line =
      w->ReadLine(absl::Now() + absl::Seconds(10));
  EXPECT_THAT(line,
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("closed")));
  // The double serves new watches afterwards.
  std::unique_ptr<HttpStream> again =
      OpenWatch(Claims(Cat("?watch=1&resourceVersion=", list.Rv())));
  ASSERT_NE(again, nullptr);
  CreateClaim("c1");
  std::optional<WatchEvent> e = NextChange(*again);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->Name(), "c1");
}

TEST_F(KubeApiServerFaultTest,
       ConcurrentUpdatesFromOneVersionLetExactlyOneWin) {
  KubeReply c = CreateClaim("c1");
  int64_t rv = c.Rv();
  for (int round = 0; round < 10; ++round) {
    int statuses[2] = {0, 0};
    std::thread writers[2];
    for (int i = 0; i < 2; ++i) {
      writers[i] = std::thread([&, i] {
        std::unique_ptr<HttpClient> own = FreshClient(absl::Seconds(10));
        absl::StatusOr<HttpResponse> r =
            own->Put(Claims("/c1"),
                     Cat(R"({"metadata":{"name":"c1","resourceVersion":")", rv,
                         R"("},"spec":{"count":)", round * 2 + i + 2, "}}"));
        statuses[i] = r.ok() ? r->status : -1;
      });
    }
    for (std::thread& w : writers) w.join();
    EXPECT_EQ((statuses[0] == 200) + (statuses[1] == 200), 1)
        << "round " << round << ": " << statuses[0] << " " << statuses[1];
    EXPECT_EQ(statuses[0] + statuses[1], 200 + 409);
    rv = Call("GET", Claims("/c1")).Rv();
  }
  EXPECT_EQ(Call("GET", Claims("/c1")).Int({"metadata", "generation"}), 11);
}

TEST(KubeApiServerHaTest, KeepsServingWhenAnEtcdMemberStops) {
  if (absl::StatusOr<std::string> bin = EtcdProcess::FindBinary(); !bin.ok()) {
    GTEST_SKIP() << bin.status().message();
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<EtcdProcess> etcd,
                       EtcdProcess::StartCluster(3));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<KubeApiServerDouble> api,
                       KubeApiServerDouble::Start(etcd->client_ports()));
  HttpClientOptions o;
  o.base_url = api->url();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<HttpClient> client,
                       HttpClient::Create(o));
  const std::string claims =
      "/apis/pdc.kubevirt.io/v1alpha1/namespaces/ha/persistentdeviceclaims";
  ASSERT_OK_AND_ASSIGN(HttpResponse a,
                       client->Post(claims, R"({"metadata":{"name":"a"}})"));
  ASSERT_EQ(a.status, 201) << a.body;
  ASSERT_OK(etcd->StopMember(0));
  ASSERT_OK_AND_ASSIGN(HttpResponse b,
                       client->Post(claims, R"({"metadata":{"name":"b"}})"));
  EXPECT_EQ(b.status, 201) << b.body;
  ASSERT_OK_AND_ASSIGN(HttpResponse list, client->Get(claims));
  EXPECT_THAT(list.body, HasSubstr(R"("name":"a")"));
  EXPECT_THAT(list.body, HasSubstr(R"("name":"b")"));
  // A watch is served by a live member.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<HttpStream> w,
                       HttpStream::Open(api->port(), "GET",
                                        claims + "?watch=1&resourceVersion=0"));
  ASSERT_EQ(w->status(), 200);
  int added = 0;
  while (added < 2) {
    absl::StatusOr<std::optional<std::string>> line =
        w->ReadLine(absl::Now() + absl::Seconds(10));
    ASSERT_TRUE(line.ok() && line->has_value()) << line.status();
    EXPECT_THAT(**line, HasSubstr(R"("type":"ADDED")"));
    ++added;
  }
}

}  // namespace
}  // namespace pdc::testing
