// What pdc-extender tells others answers only from durable state
// (Allocator::AwaitReadsDurable), against the kube-apiserver double on a
// real etcd in Kubernetes mode: while a bind's claim is decided in memory
// but its object is not in the API yet (the apiserver is slow), neither
// pdc-node's allocations (GET /v1/nodes/{node}/allocations) nor the
// admission webhook's pin report it; they answer once the API holds it.
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "extender/admission_webhook.h"
#include "tests/kube/extender_on_double.h"

namespace pdc::testing {
namespace {

using ::testing::HasSubstr;

class DurableReadsOnDoubleTest : public ExtenderOnDoubleTest {
 protected:
  void TearDown() override {
    ExtenderOnDoubleTest::TearDown();
    if (IsSkipped()) return;
    DeleteAllClaims();
  }

  static std::string UidOfPod(const std::string& pod_json) {
    rapidjson::Document d;
    d.Parse(pod_json.data(), pod_json.size());
    return kube::GetString(d, {"metadata", "uid"});
  }
  // Binds `pod` on another connection while the claim's object is created
  // 1.5 s late; returns once pdc-extender's memory has the claim reserved
  // for the pod (its record not durable yet).
  std::thread BindWithSlowApi(const std::string& pod, const std::string& uid,
                              const std::string& claim, std::string* answer) {
    api_->DelayRequests({"POST", "persistentdeviceclaims"}, 1, absl::Milliseconds(1500));
    std::thread t([this, pod, uid, answer] {
      HttpClientOptions o;
      o.base_url = absl::StrCat("http://127.0.0.1:", app_->port());
      o.timeout = absl::Seconds(20);
      std::unique_ptr<HttpClient> c = std::move(HttpClient::Create(o)).value();
      absl::StatusOr<HttpResponse> r = c->Post(
          "/scheduler/bind", absl::StrCat(R"({"PodName":")", pod, R"(","PodNamespace":")", ns_,
                                          R"(","PodUID":")", uid, R"(","Node":"node-a"})"));
      *answer = r.ok() ? r->body : r.status().ToString();
    });
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (absl::Now() < deadline) {
      absl::StatusOr<Claim> c = app_->allocator()->GetClaim({ns_, claim});
      if (c.ok() && c->status.reserved_for && c->status.reserved_for->pod_uid == uid) break;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return t;
  }
  // The claim `name` as the API holds it: "<phase> <node> <reserved pod uid>",
  // or "absent".
  std::string InApi(const std::string& name) {
    KubeReply r = Call("GET", Claims(absl::StrCat("/", name)));
    if (r.status == 404) return "absent";
    return absl::StrCat(r.Str({"status", "phase"}), " ", r.Str({"status", "node"}), " ",
                        r.Str({"status", "reservedFor", "podUid"}));
  }
};

TEST_F(DurableReadsOnDoubleTest, ABindNotYetInTheApiIsNeitherReportedNorPinned) {
  // No pdc-node confirms vm1's hand-off here: the gate would hold vm2 back.
  configure_ = [](PdcConfig* c) { c->extender.allocator.serialize_handoffs = false; };
  StartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitReady());
  ReportNodeA();

  // pdc-node's long-poll answer.
  {
    const std::string vmi = CreateVm("vm1");
    const std::string pod = CreatePod("vm1", "virt-launcher-vm1-aaaaa", vmi);
    const std::string uid = UidOfPod(pod);
    ASSERT_THAT(Filter(pod).body, HasSubstr(R"("NodeNames":["node-a"])"));
    std::string bound;
    std::thread bind = BindWithSlowApi("virt-launcher-vm1-aaaaa", uid, "vm1-nvme", &bound);
    // The window: decided in memory, not in the API.
    ASSERT_EQ(InApi("vm1-nvme"), "absent");
    absl::StatusOr<HttpResponse> a = pdc_->Get("/v1/nodes/node-a/allocations");
    // Whatever the answer says of the claim, the API holds it now.
    const std::string held = InApi("vm1-nvme");
    bind.join();
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_EQ(a->status, 200) << a->body;
    ASSERT_OK_AND_ASSIGN(api::NodeAllocationsReply reply, api::ParseNodeAllocations(a->body));
    ASSERT_EQ(reply.allocations.claimed.size(), 1u) << a->body;
    EXPECT_EQ(reply.allocations.claimed[0].claim.name, "vm1-nvme");
    EXPECT_EQ(held, absl::StrCat("Bound node-a ", uid))
        << "the allocations named a reservation the API did not hold";
    EXPECT_EQ(bound, R"({"Error":""})");
  }

  // The webhook's pin of a launcher pod of a VM whose claim is being bound.
  {
    const std::string vmi = CreateVm("vm2");
    const std::string pod = CreatePod("vm2", "virt-launcher-vm2-aaaaa", vmi);
    const std::string uid = UidOfPod(pod);
    ASSERT_THAT(Filter(pod).body, HasSubstr(R"("NodeNames":["node-a"])"));
    const extender::VmDirectory* vms = app_->vm_directory();
    ASSERT_NE(vms, nullptr);
    // Another launcher pod of vm2 as kube-apiserver admits it (not stored
    // yet), while vm2's first bind is being recorded.
    const std::string next =
        absl::StrReplaceAll(pod, {{"virt-launcher-vm2-aaaaa", "virt-launcher-vm2-bbbbb"}});
    extender::AdmissionWebhook hook(app_->allocator(), vms, {"devices.kubevirt.io/nvme"},
                                    RealClock(), nullptr);
    std::string bound;
    std::thread bind = BindWithSlowApi("virt-launcher-vm2-aaaaa", uid, "vm2-nvme", &bound);
    ASSERT_EQ(InApi("vm2-nvme"), "absent");
    net::HttpRequest req;
    req.method = "POST";
    req.target = "/pods";
    req.body = absl::StrCat(
        R"({"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"r-1",)",
        R"("kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},)",
        R"("namespace":")", ns_, R"(","operation":"CREATE","object":)", next, "}}");
    const net::HttpResponse review = hook.Handle(std::move(req));
    const std::string held = InApi("vm2-nvme");
    bind.join();
    ASSERT_EQ(review.status, 200) << review.body;
    EXPECT_THAT(review.body, HasSubstr(R"("patch":")")) << "not pinned: " << review.body;
    EXPECT_EQ(held, absl::StrCat("Bound node-a ", uid))
        << "the webhook pinned to a claim the API did not hold";
    EXPECT_EQ(bound, R"({"Error":""})");
  }
}

}  // namespace
}  // namespace pdc::testing
