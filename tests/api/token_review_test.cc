// The TokenReview codec (api/token_review.h): what pdc-extender sends and
// what it reads back, shaped as kube-apiserver writes it.
#include "api/token_review.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace pdc::api {
namespace {

using ::testing::HasSubstr;

TEST(TokenReviewTest, RequestCarriesTokenAndAudiences) {
  const std::vector<std::string> audiences = {"pdc-extender"};
  EXPECT_EQ(TokenReviewJson("a\"b", audiences),
            R"({"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview",)"
            R"("spec":{"token":"a\"b","audiences":["pdc-extender"]}})");
}

TEST(TokenReviewTest, ReadsAnAuthenticatedAnswer) {
  ASSERT_OK_AND_ASSIGN(
      TokenReviewStatus s,
      ParseTokenReviewStatus(
          R"({"kind":"TokenReview","apiVersion":"authentication.k8s.io/v1",)"
          R"("metadata":{"creationTimestamp":null},"spec":{"token":"x"},)"
          R"("status":{"authenticated":true,"user":{"username":"system:serviceaccount:s:n",)"
          R"("uid":"u1","groups":["system:serviceaccounts"],)"
          R"("extra":{"authentication.kubernetes.io/node-name":["node-a"],)"
          R"("Authentication.kubernetes.io/node-name":["other"]}},)"
          R"("audiences":["pdc-extender"]}})"));
  EXPECT_TRUE(s.authenticated);
  EXPECT_EQ(s.username, "system:serviceaccount:s:n");
  EXPECT_EQ(s.uid, "u1");
  EXPECT_EQ(s.groups, std::vector<std::string>{"system:serviceaccounts"});
  EXPECT_EQ(s.audiences, std::vector<std::string>{"pdc-extender"});
  // Extra keys are matched exactly, not ignoring case.
  EXPECT_EQ(s.extra.at(std::string(kNodeNameExtra)), std::vector<std::string>{"node-a"});
  EXPECT_EQ(s.extra.size(), 2u);
}

TEST(TokenReviewTest, ReadsARefusal) {
  ASSERT_OK_AND_ASSIGN(TokenReviewStatus s,
                       ParseTokenReviewStatus(
                           R"({"status":{"user":{},"error":"invalid bearer token"}})"));
  EXPECT_FALSE(s.authenticated);
  EXPECT_EQ(s.error, "invalid bearer token");
  ASSERT_OK_AND_ASSIGN(s, ParseTokenReviewStatus("{}"));
  EXPECT_FALSE(s.authenticated);
}

TEST(TokenReviewTest, MalformedAnswersNameTheField) {
  struct Case {
    std::string body;
    std::string field;
  };
  const Case cases[] = {
      {R"({"status":[]})", "TokenReview.status"},
      {R"({"status":{"authenticated":"yes"}})", "TokenReview.status.authenticated"},
      {R"({"status":{"audiences":[1]}})", "TokenReview.status.audiences"},
      {R"({"status":{"user":{"username":5}}})", "TokenReview.status.user.username"},
      {R"({"status":{"user":{"extra":{"k":"v"}}}})", "TokenReview.status.user.extra[k]"},
      {R"({"status":{"user":{"extra":{"k":[1]}}}})", "TokenReview.status.user.extra[k]"},
      {R"({"status":{"user":{"groups":{}}}})", "TokenReview.status.user.groups"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<TokenReviewStatus> s = ParseTokenReviewStatus(c.body);
    ASSERT_FALSE(s.ok()) << c.body;
    EXPECT_THAT(std::string(s.status().message()), HasSubstr(c.field)) << c.body;
  }
  EXPECT_FALSE(ParseTokenReviewStatus("not json").ok());
}

}  // namespace
}  // namespace pdc::api
