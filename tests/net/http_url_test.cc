#include "net/http_url.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace pdc {
namespace {

using ::pdc::testing::StatusIs;
using ::testing::HasSubstr;

TEST(HttpUrlTest, ParsesGoodUrls) {
  struct Case {
    std::string url;
    bool tls;
    std::string host;
    uint16_t port;
    std::string prefix;
    std::string normalised;
  };
  const Case cases[] = {
      {"http://127.0.0.1:8888", false, "127.0.0.1", 8888, "",
       "http://127.0.0.1:8888"},
      {"http://pdc", false, "pdc", 80, "", "http://pdc:80"},
      {"https://pdc.example/", true, "pdc.example", 443, "",
       "https://pdc.example:443"},
      {"https://pdc:9443/api/", true, "pdc", 9443, "/api",
       "https://pdc:9443/api"},
      {"http://[::1]:8888", false, "::1", 8888, "", "http://[::1]:8888"},
  };
  for (const Case& c : cases) {
    ASSERT_OK_AND_ASSIGN(BaseUrl u, ParseBaseUrl(c.url));
    EXPECT_EQ(u.tls, c.tls) << c.url;
    EXPECT_EQ(u.host, c.host) << c.url;
    EXPECT_EQ(u.port, c.port) << c.url;
    EXPECT_EQ(u.path_prefix, c.prefix) << c.url;
    EXPECT_EQ(u.ToString(), c.normalised) << c.url;
  }
}

TEST(HttpUrlTest, RejectsBadUrls) {
  struct Case {
    std::string url;
    std::string want;
  };
  const Case cases[] = {
      {"127.0.0.1:8888", "is not an http:// or https:// URL"},
      {"ftp://x", "is not an http:// or https:// URL"},
      {"http://", "has no host"},
      {"http://:80", "has no host"},
      {"http://x:", "has an empty port"},
      {"http://x:99999", "has an invalid port"},
      {"http://x:8a", "has an invalid port"},
      {"http://[::1", "unclosed"},
      {"http://u:p@x", "must not carry user information"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(ParseBaseUrl(c.url),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.want)))
        << c.url;
  }
}

}  // namespace
}  // namespace pdc
