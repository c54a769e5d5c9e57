// The route table (extender/router.cc): every /v1/ route is documented in
// docs/rest-api.md and no two routes answer the same method and path. The
// node identity's rights against the table: node_auth_test.cc.
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "extender/router.h"
#include "gtest/gtest.h"

namespace pdc::extender::testing {
namespace {

std::string ReadRestApiDoc() {
  std::ifstream in(PDC_REST_API_DOC);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(RouteTableTest, EveryRestRouteHasItsSectionInTheReference) {
  const std::string doc = ReadRestApiDoc();
  ASSERT_FALSE(doc.empty()) << PDC_REST_API_DOC;
  for (const RouteInfo& r : Router::Routes()) {
    if (r.pattern.substr(0, 4) != "/v1/") continue;
    // A heading or the node-access table names it as METHOD `pattern`.
    const std::string named = absl::StrCat(std::string(r.method), " `", std::string(r.pattern));
    EXPECT_NE(doc.find(named), std::string::npos)
        << named << "` is served but docs/rest-api.md does not document it";
  }
}

TEST(RouteTableTest, NoTwoRoutesShareMethodAndPattern) {
  const std::vector<RouteInfo> routes = Router::Routes();
  for (size_t i = 0; i < routes.size(); ++i) {
    for (size_t j = i + 1; j < routes.size(); ++j) {
      EXPECT_FALSE(routes[i].method == routes[j].method &&
                   routes[i].pattern == routes[j].pattern)
          << routes[i].method << " " << routes[i].pattern;
    }
  }
}

}  // namespace
}  // namespace pdc::extender::testing
