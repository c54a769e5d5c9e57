// The AdmissionReview codec: a review as kube-apiserver sends it, the answer
// it accepts (uid echoed, patchType with patch, the patch in base64),
// malformed reviews (HTTP 400 naming the field), and the JSON Patch that
// pins a pod, applied to pods with every shape of required node affinity.
#include "api/admission_json.h"

#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rapidjson/pointer.h"
#include "tests/testing/admission_reviews.h"
#include "tests/testing/status_matchers.h"

namespace pdc::api {
namespace {

using ::pdc::testing::AdmissionReviewOf;
using ::pdc::testing::LauncherPodAtCreate;
using ::pdc::testing::LauncherPodSpec;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kUid[] = "705ab4f5-6393-11e8-b7cc-42010a800002";

TEST(AdmissionJsonTest, ReadsAReviewAsKubeApiserverSendsIt) {
  std::string body = AdmissionReviewOf(kUid, LauncherPodAtCreate({}));
  rapidjson::Document doc;
  ASSERT_OK_AND_ASSIGN(AdmissionRequest r, ParseAdmissionReview(body, &doc));
  EXPECT_EQ(r.uid, kUid);
  EXPECT_EQ(r.kind.group, "");
  EXPECT_EQ(r.kind.version, "v1");
  EXPECT_EQ(r.kind.kind, "Pod");
  EXPECT_EQ(r.operation, "CREATE");
  EXPECT_EQ(r.ns, "default");
  EXPECT_EQ(r.name, "");
  EXPECT_FALSE(r.dry_run);
  ASSERT_NE(r.object, nullptr);
  // The name kube-apiserver generates later is not known: generateName
  // without its '-' stands in for it.
  const json::Value* name = rapidjson::Pointer("/metadata/name").Get(*r.object);
  ASSERT_NE(name, nullptr);
  EXPECT_EQ(json::StringOf(*name), "virt-launcher-vm1");
  ASSERT_OK_AND_ASSIGN(AdmissionPod pod, ReadAdmissionPod(*r.object));
  EXPECT_EQ(pod.launcher_label, "virt-launcher");
  EXPECT_EQ(pod.scheduler_name, "pdc-scheduler");
  EXPECT_TRUE(pod.has_spec);
  EXPECT_FALSE(pod.affinity.affinity);
}

TEST(AdmissionJsonTest, KeysMatchIgnoringCaseAsGoReadsThem) {
  std::string body = absl::StrCat(
      R"({"APIVersion":"admission.k8s.io/v1","Kind":"AdmissionReview","Request":{"UID":")", kUid,
      R"(","Operation":"DELETE","Kind":{"Kind":"Pod","Version":"v1"},"Object":null}})");
  rapidjson::Document doc;
  ASSERT_OK_AND_ASSIGN(AdmissionRequest r, ParseAdmissionReview(body, &doc));
  EXPECT_EQ(r.uid, kUid);
  EXPECT_EQ(r.operation, "DELETE");
  EXPECT_EQ(r.object, nullptr);
}

struct BadCase {
  std::string name;
  std::string body;
  std::string field;
  std::string message;
};

TEST(AdmissionJsonTest, RefusesMalformedReviewsWith400NamingTheField) {
  const std::string ok_head = R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview",)";
  const std::vector<BadCase> cases = {
      {"not json", "{\"apiVersion\":", "", "JSON"},
      {"trailing garbage", ok_head + R"("request":{"uid":"a"}} x)", "", ""},
      {"an array", "[]", "", "must be a JSON object"},
      {"v1beta1", R"({"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview"})",
       "apiVersion", "admissionReviewVersions"},
      {"no apiVersion", R"({"kind":"AdmissionReview"})", "apiVersion", "must be"},
      {"wrong kind", R"({"apiVersion":"admission.k8s.io/v1","kind":"ConversionReview"})", "kind",
       "AdmissionReview"},
      {"no request", ok_head + R"("response":{}})", "request", "is required"},
      {"request not an object", ok_head + R"("request":[]})", "request", "object"},
      {"no uid", ok_head + R"("request":{"operation":"CREATE"}})", "request.uid", ""},
      {"uid a number", ok_head + R"("request":{"uid":7}})", "request.uid", "string"},
      {"uid with a space", ok_head + R"("request":{"uid":"a b"}})", "request.uid", "printable"},
      {"uid too long", ok_head + R"("request":{"uid":")" + std::string(200, 'u') + R"("}})",
       "request.uid", "128"},
      {"kind not an object", ok_head + R"("request":{"uid":"u","kind":"Pod"}})", "request.kind",
       "object"},
      {"operation a bool", ok_head + R"("request":{"uid":"u","operation":true}})",
       "request.operation", "string"},
      {"bad namespace", ok_head + R"("request":{"uid":"u","namespace":"Not_A_Namespace"}})",
       "request.namespace", ""},
      {"dryRun a string", ok_head + R"("request":{"uid":"u","dryRun":"yes"}})", "request.dryRun",
       ""},
      {"pod object a string",
       ok_head + R"("request":{"uid":"u","kind":{"kind":"Pod","version":"v1"},"object":"pod"}})",
       "request.object", "object"},
      {"pod metadata an array",
       ok_head +
           R"("request":{"uid":"u","kind":{"kind":"Pod","version":"v1"},"object":{"metadata":[]}}})",
       "request.object.metadata", "object"},
      {"too deep", ok_head + R"("request":{"uid":"u","object":)" + std::string(600, '[') +
                       std::string(600, ']') + "}}",
       "", "deep"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    std::string body = c.body;
    rapidjson::Document doc;
    absl::StatusOr<AdmissionRequest> r = ParseAdmissionReview(body, &doc);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(json::HttpStatusFor(r.status()), 400) << r.status();
    EXPECT_EQ(json::FieldOf(r.status()), c.field) << r.status();
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.message));
  }
}

TEST(AdmissionJsonTest, AnswerEchoesTheUidAndCarriesPatchTypeOnlyWithAPatch) {
  EXPECT_EQ(WriteAdmissionReview({kUid, "", {}, true, ""}),
            absl::StrCat(R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview",)",
                         R"("response":{"uid":")", kUid, R"(","allowed":true}})"));
  const std::string patch = R"([{"op":"add","path":"/spec/affinity","value":{}}])";
  const std::string out = WriteAdmissionReview({kUid, patch, {"pdc: a warning"}, true, ""});
  EXPECT_EQ(out, absl::StrCat(R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview",)",
                              R"("response":{"uid":")", kUid,
                              R"(","allowed":true,"patchType":"JSONPatch","patch":")",
                              absl::Base64Escape(patch), R"(","warnings":["pdc: a warning"]}})"));
  rapidjson::Document d;
  ASSERT_OK(json::Parse(out, &d));
  std::string decoded;
  ASSERT_TRUE(absl::Base64Unescape(d["response"]["patch"].GetString(), &decoded));
  EXPECT_EQ(decoded, patch);
}

TEST(AdmissionJsonTest, ARefusalCarriesItsReasonAndNoPatch) {
  AdmissionResponse r{kUid, R"([{"op":"add","path":"/x","value":1}])", {}, true, ""};
  r.allowed = false;
  r.message = "pdc: ResourceClaim ns/vm1-data belongs to another VirtualMachine";
  EXPECT_EQ(WriteAdmissionReview(r),
            absl::StrCat(R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview",)",
                         R"("response":{"uid":")", kUid,
                         R"(","allowed":false,"status":{"code":403,"message":")", r.message,
                         R"("}}})"));
}

TEST(AdmissionJsonTest, EscapesJsonPointerTokens) {
  EXPECT_EQ(EscapeJsonPointer("kubernetes.io/hostname"), "kubernetes.io~1hostname");
  EXPECT_EQ(EscapeJsonPointer("a~b"), "a~0b");
  EXPECT_EQ(EscapeJsonPointer("~1"), "~01");  // '~' first, so "~1" does not become "/".
  EXPECT_EQ(EscapeJsonPointer("plain"), "plain");
}

// Applies `patch` to `doc` with RFC 6902's add/replace semantics for the
// operations the webhook writes (the parent must exist; "-" appends; an
// array index is replaced by "replace"). A failure is reported, not applied.
::testing::AssertionResult ApplyPatch(const std::string& patch, rapidjson::Document& doc) {
  rapidjson::Document ops;
  if (!json::Parse(patch, &ops).ok() || !ops.IsArray()) {
    return ::testing::AssertionFailure() << "not a JSON array: " << patch;
  }
  for (const json::Value& op : ops.GetArray()) {
    const std::string path = std::string(json::StringOf(op["path"]));
    const std::string kind = std::string(json::StringOf(op["op"]));
    const std::string parent = path.substr(0, path.rfind('/'));
    const json::Value* p = parent.empty() ? &doc : rapidjson::Pointer(parent.c_str()).Get(doc);
    if (p == nullptr || !(p->IsObject() || p->IsArray())) {
      return ::testing::AssertionFailure() << "no parent for " << path;
    }
    rapidjson::Pointer ptr(path.c_str());
    if (!ptr.IsValid()) return ::testing::AssertionFailure() << "bad pointer " << path;
    if (kind == "replace" && ptr.Get(doc) == nullptr) {
      return ::testing::AssertionFailure() << "replace of nothing at " << path;
    }
    if (kind == "add" && p->IsArray() && path.substr(path.rfind('/')) != "/-") {
      return ::testing::AssertionFailure() << "insert into an array: " << path;
    }
    json::Value v;
    v.CopyFrom(op["value"], doc.GetAllocator());
    ptr.Set(doc, v);
  }
  return ::testing::AssertionSuccess();
}

// Every node selector term of `pod` holds the hostname expression for `node`.
void ExpectEveryTermPins(const rapidjson::Document& pod, const std::string& node,
                         size_t want_terms) {
  const json::Value* terms = rapidjson::Pointer(
      "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/"
      "nodeSelectorTerms").Get(pod);
  ASSERT_NE(terms, nullptr);
  ASSERT_TRUE(terms->IsArray());
  ASSERT_EQ(terms->Size(), want_terms);
  for (const json::Value& t : terms->GetArray()) {
    ASSERT_TRUE(t.IsObject());
    bool found = false;
    for (const json::Value& e : t["matchFields"].GetArray()) {
      if (json::StringOf(e["key"]) == "metadata.name" &&
          json::StringOf(e["operator"]) == "In" && e["values"].Size() == 1 &&
          json::StringOf(e["values"][0]) == node) {
        found = true;
      }
    }
    EXPECT_TRUE(found);
  }
}

struct AffinityCase {
  std::string name;
  std::string affinity;  // spec.affinity JSON, "" = absent.
  std::vector<JsonPatchOp> want;
  size_t terms_after;
  // Expressions each term keeps besides the pin (by index).
  std::vector<size_t> kept;
};

TEST(AdmissionJsonTest, PatchAddsTheNodeNameToEveryTermOrCreatesThePath) {
  const std::string expr = R"({"key":"metadata.name","operator":"In","values":["node-a"]})";
  const std::string exprs = "[" + expr + "]";
  const std::string term = R"({"matchFields":)" + exprs + "}";
  const std::string terms = "[" + term + "]";
  const std::string required = R"({"nodeSelectorTerms":)" + terms + "}";
  const std::string na = R"({"requiredDuringSchedulingIgnoredDuringExecution":)" + required + "}";
  const std::string base = "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution";
  const std::string zone =
      R"({"key":"topology.kubernetes.io/zone","operator":"In","values":["z1"]})";
  const std::vector<AffinityCase> cases = {
      {"no affinity", "", {{"add", "/spec/affinity", R"({"nodeAffinity":)" + na + "}"}}, 1, {0}},
      {"null affinity", "null", {{"add", "/spec/affinity", R"({"nodeAffinity":)" + na + "}"}}, 1,
       {0}},
      {"pod affinity only", R"({"podAntiAffinity":{}})",
       {{"add", "/spec/affinity/nodeAffinity", na}}, 1, {0}},
      {"preferred only",
       R"({"nodeAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":1,"preference":{"matchExpressions":[)" +
           zone + "]}}]}}",
       {{"add", "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution",
         required}},
       1, {0}},
      {"required without terms", R"({"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{}}})",
       {{"add", base + "/nodeSelectorTerms", terms}}, 1, {0}},
      {"one term with expressions only",
       R"({"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[)" +
           zone + "]}]}}}",
       {{"add", base + "/nodeSelectorTerms/0/matchFields", exprs}}, 1, {0}},
      {"two terms, one with matchFields",
       R"({"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[)" +
           zone +
           R"(]},{"matchFields":[{"key":"metadata.name","operator":"NotIn","values":["node-b"]}]}]}}})",
       {{"add", base + "/nodeSelectorTerms/0/matchFields", exprs},
        {"add", base + "/nodeSelectorTerms/1/matchFields/-", expr}},
       2, {0, 1}},
      {"a null term", R"({"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[null]}}})",
       {{"replace", base + "/nodeSelectorTerms/0", term}}, 1, {0}},
  };
  for (const AffinityCase& c : cases) {
    SCOPED_TRACE(c.name);
    LauncherPodSpec s;
    s.affinity = c.affinity;
    const std::string pod_json = LauncherPodAtCreate(s);
    rapidjson::Document pod;
    ASSERT_OK(json::Parse(pod_json, &pod));
    ASSERT_OK_AND_ASSIGN(AdmissionPod ap, ReadAdmissionPod(pod));
    const std::vector<JsonPatchOp> ops = RequireNodeNamePatch(ap.affinity, "node-a");
    EXPECT_EQ(ops, c.want);
    ASSERT_TRUE(ApplyPatch(WriteJsonPatch(ops), pod));
    ExpectEveryTermPins(pod, "node-a", c.terms_after);
    const json::Value* t = rapidjson::Pointer(
        "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/"
        "nodeSelectorTerms").Get(pod);
    ASSERT_NE(t, nullptr);
    for (size_t i = 0; i < c.kept.size(); ++i) {
      EXPECT_EQ((*t)[static_cast<rapidjson::SizeType>(i)]["matchFields"].Size(), c.kept[i] + 1);
    }
  }
}

TEST(AdmissionJsonTest, ReadsTheAffinityShapeAndRefusesWrongTypes) {
  LauncherPodSpec s;
  s.affinity = R"({"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[]}}})";
  rapidjson::Document pod;
  ASSERT_OK(json::Parse(LauncherPodAtCreate(s), &pod));
  ASSERT_OK_AND_ASSIGN(AdmissionPod ap, ReadAdmissionPod(pod));
  EXPECT_TRUE(ap.affinity.terms_present);
  EXPECT_TRUE(ap.affinity.terms.empty());

  s.affinity = R"({"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[7]}}})";
  ASSERT_OK(json::Parse(LauncherPodAtCreate(s), &pod));
  absl::StatusOr<AdmissionPod> bad = ReadAdmissionPod(pod);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(json::FieldOf(bad.status()),
            "Pod.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
            "nodeSelectorTerms[0]");
  s.affinity = R"({"nodeAffinity":"node-a"})";
  ASSERT_OK(json::Parse(LauncherPodAtCreate(s), &pod));
  bad = ReadAdmissionPod(pod);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(json::FieldOf(bad.status()), "Pod.spec.affinity.nodeAffinity");
}

TEST(AdmissionJsonTest, WritesPatchOperationsInOrder) {
  EXPECT_EQ(WriteJsonPatch({{"add", "/a~1b", R"({"x":1})"}, {"replace", "/c/0", "[1]"}}),
            R"([{"op":"add","path":"/a~1b","value":{"x":1}},{"op":"replace","path":"/c/0","value":[1]}])");
  EXPECT_THAT(WriteJsonPatch({}), "[]");
}

}  // namespace
}  // namespace pdc::api
