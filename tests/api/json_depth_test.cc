// Every parse stops at json::kMaxDepth levels of nesting with a clear 400
// error, whatever the entry point (DOM, in situ, the filter's SAX path) and
// however deep the input goes: RapidJSON's reader recurses once per level,
// so an unlimited parse would overflow a worker thread's stack.
#include <string>

#include "api/json_util.h"
#include "api/scheduler_wire.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace pdc::api {
namespace {

using pdc::testing::IsOk;
using pdc::testing::StatusIs;
using ::testing::HasSubstr;

std::string Nested(int depth, char open, char close) {
  return std::string(static_cast<size_t>(depth), open) + std::string(static_cast<size_t>(depth), close);
}

// {"a":{"a":...{}...}}, `depth` objects.
std::string NestedObjects(int depth) {
  std::string s;
  for (int i = 1; i < depth; ++i) s += R"({"a":)";
  s += "{}";
  s += std::string(static_cast<size_t>(depth - 1), '}');
  return s;
}

struct DepthCase {
  std::string name;
  std::string text;
  bool ok;
};

class JsonDepthTest : public ::testing::TestWithParam<DepthCase> {};

TEST_P(JsonDepthTest, DomAndInSituAgree) {
  const DepthCase& c = GetParam();
  rapidjson::Document a;
  rapidjson::Document b;
  std::string copy = c.text;
  const absl::Status dom = json::Parse(c.text, &a);
  const absl::Status insitu = json::ParseInsitu(copy, &b);
  if (c.ok) {
    EXPECT_THAT(dom, IsOk());
    EXPECT_THAT(insitu, IsOk());
  } else {
    for (const absl::Status& s : {dom, insitu}) {
      EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument,
                              HasSubstr("objects and arrays nest deeper than 512 levels")));
      EXPECT_EQ(json::HttpStatusFor(s), 400);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, JsonDepthTest,
    ::testing::Values(DepthCase{"Arrays512", Nested(512, '[', ']'), true},
                      DepthCase{"Arrays513", Nested(513, '[', ']'), false},
                      DepthCase{"Objects512", NestedObjects(512), true},
                      DepthCase{"Objects513", NestedObjects(513), false},
                      DepthCase{"MillionOpenBrackets", std::string(1000000, '['), false},
                      DepthCase{"BracketsInAStringDoNotCount",
                                "[\"" + std::string(5000, '[') + "\"]", true}),
    [](const ::testing::TestParamInfo<DepthCase>& i) { return i.param.name; });

TEST(JsonDepthTest, TheFiltersSaxPathStopsToo) {
  // A pod nested 100,000 levels deep, and NodeNames after it.
  std::string body = R"({"Pod":)" + std::string(100000, '[') + std::string(100000, ']') +
                     R"(,"NodeNames":["a","b"]})";
  rapidjson::Document doc;
  EXPECT_THAT(ParseExtenderArgs(body, &doc),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("nest deeper than 512")));
  std::string fine = R"({"Pod":)" + Nested(500, '[', ']') + R"(,"NodeNames":["a","b"]})";
  rapidjson::Document doc2;
  auto args = ParseExtenderArgs(fine, &doc2);
  // Past the depth check: what remains is the Pod's type (an array here).
  EXPECT_THAT(args.status().message(), ::testing::Not(HasSubstr("nest deeper")));
}

}  // namespace
}  // namespace pdc::api
