// The admission webhook's decision, without HTTP (Decide), and its answer
// (Handle): which virt-launcher pods are pinned to their claims' node, which
// are left alone and with what warning, the exact answer kube-apiserver
// reads, malformed reviews, and the metrics.
#include "extender/admission_webhook.h"

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "rapidjson/document.h"
#include "tests/extender/extender_fixture.h"
#include "tests/testing/admission_reviews.h"

namespace pdc::extender::testing {
namespace {

using ::pdc::testing::AdmissionReviewOf;
using ::pdc::testing::kLauncherVmiUid;
using ::pdc::testing::LauncherPodAtCreate;
using ::pdc::testing::LauncherPodSpec;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kReviewUid[] = "705ab4f5-6393-11e8-b7cc-42010a800002";
constexpr char kVmUid[] = "5b2d3c1a-0000-4000-8000-00000000a001";

std::string Pin(const std::string& node) {
  return absl::StrCat(
      R"([{"op":"add","path":"/spec/affinity","value":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchFields":[{"key":"metadata.name","operator":"In","values":[")",
      node, R"("]}]}]}}}}])");
}

class AdmissionWebhookTest : public ExtenderFixture {
 protected:
  void SetUp() override {
    ExtenderFixture::SetUp();
    TwoNodes();
    alloc_ = allocator_.get();
  }

  // A fresh allocator (on its own store) with the two nodes, for one row.
  void Fresh() {
    row_store_ = std::make_unique<MemoryStore>();
    auto a = Allocator::Open(allocator_options_, row_store_.get(), &clock_);
    ASSERT_TRUE(a.ok()) << a.status();
    row_allocator_ = *std::move(a);
    alloc_ = row_allocator_.get();
    ASSERT_OK(alloc_->ReplaceInventory(Inventory("node-a", {NvmeDevice("0000:3b:00.0", 12, 0, "SNA0"),
                                                            NvmeDevice("0000:5e:00.0", 13, 0, "SNA1")})));
    ASSERT_OK(alloc_->ReplaceInventory(Inventory("node-b", {NvmeDevice("0000:3b:00.0", 12, 0, "SNB0"),
                                                            NvmeDevice("0000:5e:00.0", 13, 0, "SNB1")})));
  }

  AdmissionWebhook Webhook(const VmDirectory* directory = nullptr) {
    return AdmissionWebhook(alloc_, directory, ctx_.managed, &clock_, &registry_);
  }

  // Binds VM `vm`'s claims named `claims` and `nvme` template devices on `node`.
  void BindOn(const std::string& node, std::vector<std::string> claims, int nvme,
              const std::string& vm = "vm1", const std::string& vm_uid = "") {
    SchedulingRequest r;
    r.ns = "default";
    r.vm = vm;
    r.pod_name = absl::StrCat("virt-launcher-", vm, "-old");
    r.pod_uid = absl::StrCat("pod-uid-", ++pods_bound_);
    r.claim_names = std::move(claims);
    if (nvme > 0) r.resources = {{kNvme, nvme}};
    r.vm_uid = vm_uid;
    ASSERT_OK(alloc_->Bind(r, node).status());
  }
  void Claim(const std::string& name, const std::string& node = "") {
    ASSERT_OK(alloc_->CreateClaim({"default", name},
                                      ClaimSpec{.resource_name = kNvme, .node = node}));
  }

  WebhookDecision Decide(const AdmissionWebhook& w, const std::string& review_json) {
    std::string body = review_json;
    rapidjson::Document doc;
    absl::StatusOr<api::AdmissionRequest> r = api::ParseAdmissionReview(body, &doc);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return {};
    return w.Decide(*r);
  }

  MetricsRegistry registry_;
  int pods_bound_ = 0;
  Allocator* alloc_ = nullptr;
  std::unique_ptr<MemoryStore> row_store_;
  std::unique_ptr<Allocator> row_allocator_;
};

struct ReviewCase {
  std::string name;
  std::function<void()> setup;
  LauncherPodSpec pod;
  std::string operation = "CREATE";
  WebhookOutcome outcome;
  std::string node;     // kPinned.
  size_t patch_ops = 0;
  std::string warning;  // Substring; "" = no warning at all.
};

TEST_F(AdmissionWebhookTest, DecidesFromTheClaimsOfThePodsVm) {
  const std::string claims_ab = R"(,"pdc.kubevirt.io/claims":"a, b")";
  const std::string two_terms =
      R"({"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"zone","operator":"In","values":["z1"]}]},{"matchExpressions":[{"key":"zone","operator":"In","values":["z2"]}]}]}}})";
  const std::vector<ReviewCase> cases = {
      {"first start: nothing bound", nullptr, {}, "CREATE", WebhookOutcome::kNothingBound},
      {"restart: template claim bound", [this] { BindOn("node-b", {}, 1); }, {}, "CREATE",
       WebhookOutcome::kPinned, "node-b", 1},
      {"restart: two template devices bound", [this] { BindOn("node-a", {}, 2); },
       {.nvme = 2}, "CREATE", WebhookOutcome::kPinned, "node-a", 1},
      {"named claims bound on one node",
       [this] {
         Claim("a");
         Claim("b");
         BindOn("node-a", {"a", "b"}, 2);
       },
       {.nvme = 2, .extra_annotations = claims_ab}, "CREATE", WebhookOutcome::kPinned, "node-a",
       1},
      {"existing affinity with two terms",
       [this] { BindOn("node-a", {}, 1); }, {.affinity = two_terms}, "CREATE",
       WebhookOutcome::kPinned, "node-a", 2},
      {"a claim is Lost",
       [this] {
         BindOn("node-a", {}, 1);
         ASSERT_OK(alloc_->RemoveNode("node-a"));
       },
       {}, "CREATE", WebhookOutcome::kLost, "", 0, "is Lost"},
      {"claims split over two nodes",
       [this] {
         Claim("a", "node-a");
         Claim("b", "node-b");
         BindOn("node-a", {"a"}, 1);
         BindOn("node-b", {"b"}, 1);
       },
       {.nvme = 2, .extra_annotations = claims_ab}, "CREATE", WebhookOutcome::kSplit, "", 0,
       "a on node-a; b on node-b"},
      {"one claim bound, one pending",
       [this] {
         Claim("a");
         Claim("b");
         BindOn("node-a", {"a"}, 1);
       },
       {.nvme = 2, .extra_annotations = claims_ab}, "CREATE", WebhookOutcome::kPartlyBound, "", 0,
       "claim b is not bound yet"},
      {"a named claim does not exist", nullptr,
       {.nvme = 0, .extra_annotations = R"(,"pdc.kubevirt.io/claims":"nope")"}, "CREATE",
       WebhookOutcome::kUnresolved, "", 0, "nope"},
      {"an invalid claim name", nullptr,
       {.nvme = 0, .extra_annotations = R"(,"pdc.kubevirt.io/claims":"Not_Valid")"}, "CREATE",
       WebhookOutcome::kUnresolved, "", 0, "pdc.kubevirt.io/claims"},
      {"required affinity with no term",
       [this] { BindOn("node-a", {}, 1); },
       {.affinity =
            R"({"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[]}}})"},
       "CREATE", WebhookOutcome::kAffinityConflict, "", 0, "no node selector term"},
      {"no managed device", nullptr, {.nvme = 0}, "CREATE", WebhookOutcome::kNoClaims},
      {"not a virt-launcher pod", [this] { BindOn("node-a", {}, 1); },
       {.launcher_label = "something-else"}, "CREATE", WebhookOutcome::kNotApplicable},
      {"nodeName already set", [this] { BindOn("node-a", {}, 1); }, {.node_name = "node-b"},
       "CREATE", WebhookOutcome::kNotApplicable},
      {"an UPDATE", [this] { BindOn("node-a", {}, 1); }, {}, "UPDATE",
       WebhookOutcome::kNotApplicable},
  };
  for (const ReviewCase& c : cases) {
    SCOPED_TRACE(c.name);
    Fresh();
    if (c.setup) c.setup();
    const AdmissionWebhook w = Webhook();
    const WebhookDecision d =
        Decide(w, AdmissionReviewOf(kReviewUid, LauncherPodAtCreate(c.pod), c.operation));
    EXPECT_EQ(ToString(d.outcome), ToString(c.outcome));
    EXPECT_EQ(d.node, c.node);
    EXPECT_EQ(d.patch.size(), c.patch_ops);
    if (c.warning.empty()) {
      EXPECT_THAT(d.warnings, IsEmpty());
    } else {
      ASSERT_EQ(d.warnings.size(), 1u);
      EXPECT_THAT(d.warnings[0], HasSubstr(c.warning));
      EXPECT_THAT(d.warnings[0], HasSubstr("pdc: "));
    }
  }
}

TEST_F(AdmissionWebhookTest, OtherKindsAreLeftAlone) {
  BindOn("node-a", {}, 1);
  const AdmissionWebhook w = Webhook();
  const WebhookDecision d = Decide(
      w, AdmissionReviewOf(kReviewUid, R"({"metadata":{"name":"cm"}})", "CREATE", "ConfigMap"));
  EXPECT_EQ(d.outcome, WebhookOutcome::kNotApplicable);
  EXPECT_THAT(d.patch, IsEmpty());
}

// Kubernetes mode: the VM is the one the owner chain names, by UID; a
// launcher pod whose VMI the directory has not seen yet is not pinned.
TEST_F(AdmissionWebhookTest, FollowsTheOwnerChainInKubernetesMode) {
  VmDirectory directory;
  auto put = [](kube::ReflectorSink* sink, const std::string& json) {
    rapidjson::Document d;
    ASSERT_OK(api::json::Parse(json, &d));
    sink->Upsert(d);
  };
  BindOn("node-b", {}, 1, "vm1", kVmUid);
  const AdmissionWebhook w = Webhook(&directory);
  const std::string review = AdmissionReviewOf(kReviewUid, LauncherPodAtCreate({}));
  WebhookDecision d = Decide(w, review);
  EXPECT_EQ(d.outcome, WebhookOutcome::kUnresolved);
  ASSERT_EQ(d.warnings.size(), 1u);
  EXPECT_THAT(d.warnings[0], HasSubstr("ownerReferences"));

  put(directory.vmi_sink(),
      absl::StrCat(R"({"metadata":{"name":"vm1","namespace":"default","uid":")", kLauncherVmiUid,
                   R"(","resourceVersion":"7","ownerReferences":[{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","name":"vm1","uid":")",
                   kVmUid, R"(","controller":true}]}})"));
  put(directory.vm_sink(),
      absl::StrCat(R"({"metadata":{"name":"vm1","namespace":"default","uid":")", kVmUid,
                   R"(","resourceVersion":"8"}})"));
  d = Decide(w, review);
  EXPECT_EQ(d.outcome, WebhookOutcome::kPinned);
  EXPECT_EQ(d.node, "node-b");

  // Another VM of the same name (a new UID) does not inherit the claim.
  put(directory.vm_sink(),
      R"({"metadata":{"name":"vm1","namespace":"default","uid":"5b2d3c1a-0000-4000-8000-00000000b002","resourceVersion":"9"}})");
  put(directory.vmi_sink(),
      absl::StrCat(R"({"metadata":{"name":"vm1","namespace":"default","uid":")", kLauncherVmiUid,
                   R"(","resourceVersion":"10","ownerReferences":[{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","name":"vm1","uid":"5b2d3c1a-0000-4000-8000-00000000b002","controller":true}]}})"));
  d = Decide(w, review);
  EXPECT_NE(d.outcome, WebhookOutcome::kPinned);
}

TEST_F(AdmissionWebhookTest, AnswersWhatKubeApiserverReads) {
  BindOn("node-a", {}, 1);
  const AdmissionWebhook w = Webhook();
  HttpRequest r;
  r.method = "POST";
  r.target = "/mutate?timeout=2s";
  r.body = AdmissionReviewOf(kReviewUid, LauncherPodAtCreate({}));
  const HttpResponse out = w.Handle(r);
  ASSERT_EQ(out.status, 200) << out.body;
  EXPECT_EQ(out.content_type, "application/json");
  EXPECT_EQ(out.body,
            absl::StrCat(R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":")",
                         kReviewUid, R"(","allowed":true,"patchType":"JSONPatch","patch":")",
                         absl::Base64Escape(Pin("node-a")), R"("}})"));
  rapidjson::Document d;
  ASSERT_OK(api::json::Parse(out.body, &d));
  std::string patch;
  ASSERT_TRUE(absl::Base64Unescape(d["response"]["patch"].GetString(), &patch));
  EXPECT_EQ(patch, Pin("node-a"));

  // No patch: no patchType either (kube-apiserver refuses one alone).
  r.body = AdmissionReviewOf(kReviewUid, LauncherPodAtCreate({.nvme = 0}));
  EXPECT_EQ(w.Handle(r).body,
            absl::StrCat(R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":")",
                         kReviewUid, R"(","allowed":true}})"));

  r.body = R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}})";
  const HttpResponse bad = w.Handle(r);
  EXPECT_EQ(bad.status, 400);
  EXPECT_THAT(bad.body, HasSubstr(R"("field":"request.uid")"));

  r.method = "GET";
  r.target = "/healthz";
  EXPECT_EQ(w.Handle(r).status, 200);
  r.target = "/mutate";
  EXPECT_EQ(w.Handle(r).status, 405);

  const std::string metrics = registry_.Render();
  EXPECT_THAT(metrics, HasSubstr("pdc_webhook_decisions_total{outcome=\"pinned\"} 1\n"));
  EXPECT_THAT(metrics, HasSubstr("pdc_webhook_decisions_total{outcome=\"no_claims\"} 1\n"));
  EXPECT_THAT(metrics, HasSubstr("pdc_webhook_decisions_total{outcome=\"bad_request\"} 1\n"));
  EXPECT_THAT(metrics, HasSubstr("pdc_webhook_request_duration_seconds_count 3\n"));
}

}  // namespace
}  // namespace pdc::extender::testing
