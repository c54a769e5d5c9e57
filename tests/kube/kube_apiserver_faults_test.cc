// Fault injection of the kube-apiserver double: failed, delayed and dropped
// (after commit) requests, cut watches; compaction is covered by the list
// and watch tests.
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

}  // namespace
}  // namespace pdc::testing
