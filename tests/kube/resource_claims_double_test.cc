// resource.k8s.io/v1 on the kube-apiserver double (kube_resource_claims.h):
// resourceclaims with their status subresource and the validation a DRA
// client relies on (reservedFor a set by uid, at most 256, only with an
// allocation, none new while deleting; allocation and spec immutable;
// status only through /status), and resourceclaimtemplates.
#include "tests/kube/kube_test_util.h"
#include "tests/testing/kube_resource_claims.h"

namespace pdc::testing {
namespace {

using ::testing::HasSubstr;

class ResourceClaimsDoubleTest : public KubeDoubleTest {
 protected:
  std::string Rc(std::string_view rest = "") const {
    return Cat("/apis/resource.k8s.io/v1/namespaces/", ns_, "/resourceclaims",
               rest);
  }
  static std::string ClaimJson(std::string_view name) {
    return Cat(
        R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":")",
        name,
        R"("},"spec":{"devices":{"requests":[{"name":"disk","exactly":{"deviceClassName":"nvme","count":1}}]}}})");
  }
  static std::string Consumer(std::string_view resource, std::string_view name,
                              std::string_view uid) {
    return Cat(R"({"resource":")", resource, R"(","name":")", name,
               R"(","uid":")", uid, R"("})");
  }
  static constexpr std::string_view kAllocation =
      R"({"devices":{"results":[{"request":"disk","driver":"pdc.kubevirt.io","pool":"node-a","device":"nvme-0"}]},"nodeSelector":{"nodeSelectorTerms":[{"matchFields":[{"key":"metadata.name","operator":"In","values":["node-a"]}]}]}})";

  KubeReply Create(std::string_view name) {
    KubeReply r = Call("POST", Rc(), ClaimJson(name));
    EXPECT_EQ(r.status, 201) << r.text;
    return r;
  }
  // PUT .../status with `status` (JSON) on the claim as read now.
  KubeReply PutStatus(std::string_view name, std::string_view status) {
    KubeReply got = Call("GET", Rc(Cat("/", name)));
    kube::Document d;
    d.CopyFrom(got.json, d.GetAllocator());
    kube::Document st;
    st.Parse(status.data(), status.size());
    kube::Set(d, {"status"}, kube::Value(st, d.GetAllocator()),
              d.GetAllocator());
    return Call("PUT", Rc(Cat("/", name, "/status")), kube::ToJson(d));
  }
  static std::string Status(std::string_view allocation,
                            const std::vector<std::string>& consumers) {
    std::string list;
    for (const std::string& c : consumers) {
      if (!list.empty()) list += ",";
      list += c;
    }
    return Cat("{", allocation.empty() ? "" : Cat(R"("allocation":)", allocation, ","),
               R"("reservedFor":[)", list, "]}");
  }
};

TEST_F(ResourceClaimsDoubleTest, ReservedForNeedsAnAllocation) {
  Create("c");
  KubeReply r = PutStatus("c", Status("", {Consumer("pods", "p", "u1")}));
  EXPECT_EQ(r.status, 422) << r.text;
  EXPECT_THAT(r.Str({"message"}),
              HasSubstr("status.reservedFor: Forbidden: may not be specified "
                        "when `allocated` is not set"));
  r = PutStatus("c", Status(kAllocation, {Consumer("pods", "p", "u1")}));
  EXPECT_EQ(r.status, 200) << r.text;
  // Any consumer is accepted once allocated (a VM, not only pods).
  r = PutStatus("c", Status(kAllocation, {Consumer("pods", "p", "u1"),
                                          R"({"apiGroup":"kubevirt.io","resource":"virtualmachines","name":"vm","uid":"u2"})"}));
  EXPECT_EQ(r.status, 200) << r.text;
  EXPECT_EQ(r.json["status"]["reservedFor"].Size(), 2u);
}

TEST_F(ResourceClaimsDoubleTest, ReservedForIsASetOfAtMost256ByUid) {
  Create("c");
  KubeReply r = PutStatus("c", Status(kAllocation, {Consumer("pods", "a", "u1"),
                                                    Consumer("pods", "b", "u1")}));
  EXPECT_EQ(r.status, 422) << r.text;
  EXPECT_THAT(r.Str({"message"}),
              HasSubstr("status.reservedFor[1].uid: Duplicate value: \"u1\""));
  std::vector<std::string> many;
  for (int i = 0; i < kube::kResourceClaimReservedForMaxSize; ++i) {
    many.push_back(Consumer("pods", Cat("p", i), Cat("u", i)));
  }
  r = PutStatus("c", Status(kAllocation, many));
  EXPECT_EQ(r.status, 200) << r.text;
  many.push_back(Consumer("pods", "one-more", "u-more"));
  r = PutStatus("c", Status(kAllocation, many));
  EXPECT_EQ(r.status, 422) << r.text;
  EXPECT_THAT(r.Str({"message"}),
              HasSubstr("status.reservedFor: Too many: 257: must have at most "
                        "256 items"));
  r = PutStatus("c", Status(kAllocation, {R"({"resource":"pods","uid":"x"})"}));
  EXPECT_EQ(r.status, 422) << r.text;
  EXPECT_THAT(r.Str({"message"}),
              HasSubstr("status.reservedFor[0].name: Required value"));
}

TEST_F(ResourceClaimsDoubleTest, AllocationIsImmutableButMayBeCleared) {
  Create("c");
  ASSERT_EQ(PutStatus("c", Status(kAllocation, {})).status, 200);
  std::string other(kAllocation);
  other.replace(other.find("nvme-0"), 6, "nvme-1");
  KubeReply r = PutStatus("c", Status(other, {}));
  EXPECT_EQ(r.status, 422) << r.text;
  EXPECT_THAT(r.Str({"message"}),
              HasSubstr("status.allocation: Invalid value: field is immutable"));
  EXPECT_EQ(PutStatus("c", "{}").status, 200);
  EXPECT_EQ(PutStatus("c", Status(other, {})).status, 200);
}

TEST_F(ResourceClaimsDoubleTest, SpecIsImmutableAndStatusOnlyThroughStatus) {
  KubeReply created = Create("c");
  kube::Document d;
  d.CopyFrom(created.json, d.GetAllocator());
  kube::Set(d, {"status"},
            kube::Value(kube::ParseObject(Status(kAllocation, {}), "s")
                            .value(), d.GetAllocator()),
            d.GetAllocator());
  KubeReply r = Call("PUT", Rc("/c"), kube::ToJson(d));
  EXPECT_EQ(r.status, 200) << r.text;
  EXPECT_EQ(kube::Find(r.json, {"status", "allocation"}), nullptr)
      << "the main resource wrote status: " << r.text;
  kube::SetString(d, {"spec", "devices", "requests"}, "x", d.GetAllocator());
  kube::SetString(d, {"metadata", "resourceVersion"},
                  r.Str({"metadata", "resourceVersion"}), d.GetAllocator());
  r = Call("PUT", Rc("/c"), kube::ToJson(d));
  EXPECT_EQ(r.status, 422) << r.text;
  EXPECT_THAT(r.Str({"message"}),
              HasSubstr("ResourceClaim.resource.k8s.io \"c\" is invalid: spec: "
                        "Invalid value: field is immutable"));
  // A merge patch of the spec is refused the same way.
  r = Call("PATCH", Rc("/c"), R"({"spec":{"devices":null}})",
           "application/merge-patch+json");
  EXPECT_EQ(r.status, 422) << r.text;
  // Labels may change.
  r = Call("PATCH", Rc("/c"), R"({"metadata":{"labels":{"a":"b"}}})",
           "application/merge-patch+json");
  EXPECT_EQ(r.status, 200) << r.text;
}

TEST_F(ResourceClaimsDoubleTest, StaleResourceVersionOnStatusIsConflict) {
  KubeReply created = Create("c");
  kube::Document d;
  d.CopyFrom(created.json, d.GetAllocator());
  ASSERT_EQ(PutStatus("c", Status(kAllocation, {})).status, 200);
  kube::Set(d, {"status"},
            kube::Value(kube::ParseObject(Status(kAllocation, {Consumer("pods", "p", "u")}), "s")
                            .value(), d.GetAllocator()),
            d.GetAllocator());
  KubeReply r = Call("PUT", Rc("/c/status"), kube::ToJson(d));
  EXPECT_EQ(r.status, 409) << r.text;
}

TEST_F(ResourceClaimsDoubleTest, NoNewConsumerWhileDeleting) {
  Create("c");
  ASSERT_EQ(Call("PATCH", Rc("/c"),
                 R"({"metadata":{"finalizers":["resource.kubernetes.io/delete-protection"]}})",
                 "application/merge-patch+json")
                .status,
            200);
  ASSERT_EQ(PutStatus("c", Status(kAllocation, {Consumer("pods", "p", "u1")})).status, 200);
  ASSERT_EQ(Call("DELETE", Rc("/c")).status, 200);
  KubeReply r = PutStatus("c", Status(kAllocation, {Consumer("pods", "p", "u1"),
                                                    Consumer("pods", "q", "u2")}));
  EXPECT_EQ(r.status, 422) << r.text;
  EXPECT_THAT(r.Str({"message"}), HasSubstr("new entries may not be added"));
  // Removing one is fine.
  EXPECT_EQ(PutStatus("c", Status(kAllocation, {})).status, 200);
  Call("PATCH", Rc("/c"), R"({"metadata":{"finalizers":null}})",
       "application/merge-patch+json");
}

TEST_F(ResourceClaimsDoubleTest, TemplatesAreServed) {
  const std::string path =
      Cat("/apis/resource.k8s.io/v1/namespaces/", ns_, "/resourceclaimtemplates");
  KubeReply r = Call(
      "POST", path,
      R"({"metadata":{"name":"t"},"spec":{"spec":{"devices":{"requests":[{"name":"disk","exactly":{"deviceClassName":"nvme"}}]}}}})");
  ASSERT_EQ(r.status, 201) << r.text;
  EXPECT_EQ(r.Str({"kind"}), "ResourceClaimTemplate");
  EXPECT_EQ(r.Str({"apiVersion"}), "resource.k8s.io/v1");
  EXPECT_EQ(Call("GET", Cat(path, "/t")).status, 200);
  EXPECT_EQ(Call("GET", Cat(path, "/t/status")).status, 404);
}

}  // namespace
}  // namespace pdc::testing
