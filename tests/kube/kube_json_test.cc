// The pure pieces of the kube-apiserver double, without etcd: RFC 7386
// merge patches, label and field selectors, continue tokens, v1 Status
// bodies, request paths.
#include "tests/testing/kube_json.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/kube_list.h"
#include "tests/testing/kube_resources.h"
#include "tests/testing/status_matchers.h"

namespace pdc::testing::kube {
namespace {

using ::testing::HasSubstr;

Document Json(std::string_view text) {
  Document d;
  d.Parse(text.data(), text.size());
  EXPECT_FALSE(d.HasParseError()) << text;
  return d;
}

TEST(KubeDoubleMergePatchTest, Rfc7386AppendixA) {
  // RFC 7386, Appendix A: original, patch, result.
  struct Case {
    const char* original;
    const char* patch;
    const char* result;
  };
  const Case cases[] = {
      {R"({"a":"b"})", R"({"a":"c"})", R"({"a":"c"})"},
      {R"({"a":"b"})", R"({"b":"c"})", R"({"a":"b","b":"c"})"},
      {R"({"a":"b"})", R"({"a":null})", R"({})"},
      {R"({"a":"b","b":"c"})", R"({"a":null})", R"({"b":"c"})"},
      {R"({"a":["b"]})", R"({"a":"c"})", R"({"a":"c"})"},
      {R"({"a":"c"})", R"({"a":["b"]})", R"({"a":["b"]})"},
      {R"({"a":{"b":"c"}})", R"({"a":{"b":"d","c":null}})",
       R"({"a":{"b":"d"}})"},
      {R"({"a":[{"b":"c"}]})", R"({"a":[1]})", R"({"a":[1]})"},
      {R"(["a","b"])", R"(["c","d"])", R"(["c","d"])"},
      {R"({"a":"b"})", R"(["c"])", R"(["c"])"},
      {R"({"a":"foo"})", "null", "null"},
      {R"({"a":"foo"})", R"("bar")", R"("bar")"},
      {R"({"e":null})", R"({"a":1})", R"({"e":null,"a":1})"},
      {R"([1,2])", R"({"a":"b","c":null})", R"({"a":"b"})"},
      {R"({})", R"({"a":{"bb":{"ccc":null}}})", R"({"a":{"bb":{}}})"},
  };
  for (const Case& c : cases) {
    Document target = Json(c.original);
    Document patch = Json(c.patch);
    ApplyMergePatch(target, patch, target.GetAllocator());
    EXPECT_EQ(target, Json(c.result))
        << c.original << " + " << c.patch << " = " << ToJson(target);
  }
}

TEST(KubeDoubleLabelSelectorTest, Requirements) {
  struct Case {
    const char* selector;
    const char* labels;
    bool matches;
  };
  const Case cases[] = {
      {"", R"({})", true},
      {"app=vm", R"({"app":"vm"})", true},
      {"app==vm", R"({"app":"db"})", false},
      {"app!=vm", R"({})", true},
      {"app!=vm", R"({"app":"vm"})", false},
      {"app in (vm, db)", R"({"app":"db"})", true},
      {"app in (vm,db)", R"({})", false},
      {"app notin (vm,db)", R"({})", true},
      {"app notin (vm,db)", R"({"app":"vm"})", false},
      {"app", R"({"app":""})", true},
      {"!app", R"({"app":"x"})", false},
      {"app=vm,tier=gold", R"({"app":"vm","tier":"gold"})", true},
      {"app=vm,tier=gold", R"({"app":"vm"})", false},
  };
  for (const Case& c : cases) {
    absl::StatusOr<LabelSelector> s = LabelSelector::Parse(c.selector);
    ASSERT_OK(s.status());
    Document labels = Json(c.labels);
    EXPECT_EQ(s->Matches(&labels), c.matches)
        << c.selector << " on " << c.labels;
  }
  for (const char* bad : {"app in vm", "a,,b", "in (x", "=x"}) {
    EXPECT_THAT(LabelSelector::Parse(bad),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << bad;
  }
}

TEST(KubeDoubleFieldSelectorTest, EqualityOnJsonPaths) {
  Document pod = Json(R"({"metadata":{"name":"p1"},"spec":{"nodeName":"n1"}})");
  struct Case {
    const char* selector;
    bool matches;
  };
  const Case cases[] = {
      {"metadata.name=p1", true}, {"metadata.name==p2", false},
      {"spec.nodeName!=", true},  {"spec.nodeName=n1,metadata.name=p1", true},
      {"status.phase=", true},    {"status.phase!=", false},
  };
  for (const Case& c : cases) {
    absl::StatusOr<FieldSelector> s = FieldSelector::Parse(c.selector);
    ASSERT_OK(s.status());
    EXPECT_EQ(s->Matches(pod), c.matches) << c.selector;
  }
  EXPECT_THAT(FieldSelector::Parse("metadata.name"),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(KubeDoubleContinueTokenTest, RoundTripAndRejects) {
  const std::string token = EncodeContinue(std::string("ns1/c2\0", 7), 42);
  ASSERT_OK_AND_ASSIGN(auto decoded, DecodeContinue(token));
  EXPECT_EQ(decoded.first, std::string("ns1/c2\0", 7));
  EXPECT_EQ(decoded.second, 42);
  EXPECT_EQ(token.find('='), std::string::npos);  // base64url without padding.
  for (const char* bad :
       {"!!", "e30",
        "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MCwic3RhcnQiOiJ4In0"}) {
    EXPECT_THAT(DecodeContinue(bad),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("continue key is not valid")))
        << bad;
  }
  // A start key may not leave its collection.
  EXPECT_THAT(DecodeContinue(EncodeContinue("../secrets/x", 5)),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(KubeDoubleStatusJsonTest, ConflictNamesTheQualifiedResource) {
  Document d = Json(StatusJson(Conflict(
      "persistentdeviceclaims.pdc.kubevirt.io", "c1", kOptimisticLockMessage)));
  EXPECT_EQ(
      d,
      Json(
          R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
      "message":"Operation cannot be fulfilled on persistentdeviceclaims.pdc.kubevirt.io \"c1\": the object has been modified; please apply your changes to the latest version and try again",
      "reason":"Conflict","details":{"name":"c1","group":"pdc.kubevirt.io","kind":"persistentdeviceclaims"},
      "code":409})"));
  // An error from elsewhere (etcd unreachable) is a 503.
  Document e = Json(StatusJson(absl::UnavailableError("etcd down")));
  EXPECT_EQ(GetInt(e, {"code"}), 503);
  EXPECT_EQ(GetString(e, {"reason"}), "ServiceUnavailable");
}

TEST(KubeDoubleResourcePathTest, ParsesCollectionsObjectsAndSubresources) {
  KubeStore store(nullptr, StandardResources(), nullptr);
  struct Case {
    const char* path;
    const char* resource;  // "" when not found.
    const char* ns;
    const char* name;
    const char* sub;
  };
  const Case cases[] = {
      {"/api/v1/pods", "pods", "", "", ""},
      {"/api/v1/namespaces/a/pods", "pods", "a", "", ""},
      {"/api/v1/namespaces/a/pods/p/binding", "pods", "a", "p", "binding"},
      {"/api/v1/namespaces/a/pods/p/status", "pods", "a", "p", "status"},
      {"/apis/pdc.kubevirt.io/v1alpha1/persistentdeviceclaims",
       "persistentdeviceclaims", "", "", ""},
      {"/apis/kubevirt.io/v1/namespaces/a/virtualmachineinstances/v",
       "virtualmachineinstances", "a", "v", ""},
      {"/apis/coordination.k8s.io/v1/namespaces/a/leases/l", "leases", "a", "l",
       ""},
      {"/api/v1/namespaces/a/events/e/status", "", "", "",
       ""},  // No status subresource.
      {"/apis/pdc.kubevirt.io/v1alpha1/namespaces/a/persistentdeviceclaims/c/"
       "binding",
       "", "", "", ""},
      {"/api/v1/namespaces/a/secrets", "", "", "", ""},
      {"/apis/kubevirt.io/v2/namespaces/a/virtualmachines", "", "", "", ""},
      {"/api/v1/namespaces/a/pods/p/status/x", "", "", "", ""},
      {"/healthz", "", "", "", ""},
  };
  for (const Case& c : cases) {
    absl::StatusOr<ResourcePath> p = store.ParsePath(c.path);
    if (std::string(c.resource).empty()) {
      EXPECT_THAT(p, StatusIs(absl::StatusCode::kNotFound)) << c.path;
      continue;
    }
    ASSERT_OK(p.status());
    EXPECT_EQ(p->resource->resource, c.resource) << c.path;
    EXPECT_EQ(p->ns, c.ns) << c.path;
    EXPECT_EQ(p->name, c.name) << c.path;
    EXPECT_EQ(p->subresource, c.sub) << c.path;
  }
}

}  // namespace
}  // namespace pdc::testing::kube
