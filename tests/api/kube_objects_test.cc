// Kubernetes object metadata, list metadata, watch events and v1 Status as
// kube-apiserver sends them, and the answers pdc refuses to keep.
#include "api/kube_objects.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rapidjson/document.h"
#include "tests/testing/status_matchers.h"

namespace pdc::api::testing {
namespace {

using ::pdc::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

rapidjson::Document Doc(const std::string& text) {
  rapidjson::Document d;
  EXPECT_TRUE(json::Parse(text, &d).ok()) << text;
  return d;
}

// A virt-launcher pod's metadata as the apiserver returns it.
constexpr char kPod[] = R"({"metadata":{"name":"virt-launcher-vm1-x7k2p","generateName":"virt-launcher-vm1-","namespace":"default","uid":"3d7a1c52-4f0e-4c1b-9a57-0e6b1f1f2a10","resourceVersion":"81234","generation":1,"creationTimestamp":"2026-11-30T05:00:00Z","deletionTimestamp":"2026-11-30T06:00:00Z","finalizers":["kubevirt.io/virtualMachineInstance"],"ownerReferences":[{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","name":"vm1","uid":"7f0c1c7e-3f57-4a36-9d0a-1d1f4a2c8b11","controller":true,"blockOwnerDeletion":true}]}})";

TEST(KubeObjectsTest, ReadsAVirtLauncherPodsMetadata) {
  ASSERT_OK_AND_ASSIGN(ObjectMeta m, ReadObjectMeta(Doc(kPod), "Pod"));
  EXPECT_EQ(m.Key(), "default/virt-launcher-vm1-x7k2p");
  EXPECT_EQ(m.uid, "3d7a1c52-4f0e-4c1b-9a57-0e6b1f1f2a10");
  EXPECT_EQ(m.resource_version, "81234");
  EXPECT_EQ(m.generation, 1);
  EXPECT_TRUE(m.deleting);
  EXPECT_THAT(m.finalizers, ElementsAre("kubevirt.io/virtualMachineInstance"));
  ASSERT_NE(m.Controller(), nullptr);
  EXPECT_EQ(*m.Controller(), (OwnerReference{"kubevirt.io/v1", "VirtualMachineInstance", "vm1",
                                             "7f0c1c7e-3f57-4a36-9d0a-1d1f4a2c8b11", true}));
}

TEST(KubeObjectsTest, AnOwnerThatIsNotTheControllerIsNotTheController) {
  ASSERT_OK_AND_ASSIGN(
      ObjectMeta m,
      ReadObjectMeta(Doc(R"({"metadata":{"name":"a","uid":"u","resourceVersion":"1",)"
                         R"("ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"c","uid":"v"}]}})"),
                     "Pod"));
  EXPECT_EQ(m.Controller(), nullptr);
  EXPECT_EQ(m.Key(), "a");  // Cluster-scoped.
}

struct Bad {
  std::string name;
  std::string json;
  std::string field;  // In the error.
};

class BadMetaTest : public ::testing::TestWithParam<Bad> {};

TEST_P(BadMetaTest, IsRefusedNamingTheField) {
  EXPECT_THAT(ReadObjectMeta(Doc(GetParam().json), "Pod").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(GetParam().field)));
}

std::string ManyOwners(int n) {
  std::string owners;
  for (int i = 0; i < n; ++i) {
    if (i > 0) owners += ",";
    owners += R"({"apiVersion":"v1","kind":"K","name":"n","uid":"u"})";
  }
  return R"({"metadata":{"name":"a","uid":"u","resourceVersion":"1","ownerReferences":[)" + owners +
         "]}}";
}

INSTANTIATE_TEST_SUITE_P(
    Answers, BadMetaTest,
    ::testing::Values(
        Bad{"NoMetadata", R"({"kind":"Pod"})", "Pod.metadata"},
        Bad{"NoUid", R"({"metadata":{"name":"a","resourceVersion":"1"}})", "Pod.metadata.uid"},
        Bad{"NoResourceVersion", R"({"metadata":{"name":"a","uid":"u"}})",
            "Pod.metadata.resourceVersion"},
        Bad{"BadName", R"({"metadata":{"name":"A_B","uid":"u","resourceVersion":"1"}})",
            "Pod.metadata.name"},
        Bad{"BadNamespace",
            R"({"metadata":{"name":"a","namespace":"x/y","uid":"u","resourceVersion":"1"}})",
            "Pod.metadata.namespace"},
        Bad{"UidWithSpace", R"({"metadata":{"name":"a","uid":"u v","resourceVersion":"1"}})",
            "Pod.metadata.uid"},
        Bad{"OwnerWithoutUid",
            R"({"metadata":{"name":"a","uid":"u","resourceVersion":"1","ownerReferences":[{"apiVersion":"v1","kind":"K","name":"n"}]}})",
            "Pod.metadata.ownerReferences[0].uid"},
        Bad{"OwnerControllerNotBool",
            R"({"metadata":{"name":"a","uid":"u","resourceVersion":"1","ownerReferences":[{"apiVersion":"v1","kind":"K","name":"n","uid":"v","controller":"yes"}]}})",
            "Pod.metadata.ownerReferences[0].controller"},
        Bad{"TooManyOwners", ManyOwners(65), "Pod.metadata.ownerReferences"},
        Bad{"FinalizerNotAString",
            R"({"metadata":{"name":"a","uid":"u","resourceVersion":"1","finalizers":[7]}})",
            "Pod.metadata.finalizers[0]"}),
    [](const auto& info) { return info.param.name; });

TEST(KubeObjectsTest, ListMeta) {
  ASSERT_OK_AND_ASSIGN(ListMeta m,
                       ReadListMeta(Doc(R"({"metadata":{"resourceVersion":"90","continue":"eyJ2Ijo"},"items":[]})")));
  EXPECT_EQ(m.resource_version, "90");
  EXPECT_EQ(m.continue_token, "eyJ2Ijo");
  EXPECT_THAT(ReadListMeta(Doc(R"({"metadata":{}})")).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("List.metadata.resourceVersion")));
}

TEST(KubeObjectsTest, WatchEvents) {
  for (const auto& [type, want] :
       {std::pair{"ADDED", WatchEventType::kAdded}, std::pair{"MODIFIED", WatchEventType::kModified},
        std::pair{"DELETED", WatchEventType::kDeleted},
        std::pair{"BOOKMARK", WatchEventType::kBookmark}, std::pair{"ERROR", WatchEventType::kError}}) {
    const rapidjson::Document d =
        Doc(std::string(R"({"type":")") + type + R"(","object":{"metadata":{}}})");
    ASSERT_OK_AND_ASSIGN(WatchEvent e, ReadWatchEvent(d));
    EXPECT_EQ(e.type, want);
    EXPECT_EQ(ToString(e.type), type);
    EXPECT_TRUE(e.object->IsObject());
  }
  EXPECT_THAT(ReadWatchEvent(Doc(R"({"type":"SYNC","object":{}})")).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("WatchEvent.type")));
  EXPECT_THAT(ReadWatchEvent(Doc(R"({"type":"ADDED"})")).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("WatchEvent.object")));
}

TEST(KubeObjectsTest, StatusOfAnExpiredWatch) {
  ASSERT_OK_AND_ASSIGN(
      ApiStatus s,
      ReadApiStatus(Doc(R"json({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 10 (20)","reason":"Expired","code":410})json")));
  EXPECT_EQ(s.code, 410);
  EXPECT_EQ(s.reason, "Expired");
  EXPECT_EQ(s.message, "too old resource version: 10 (20)");
}

}  // namespace
}  // namespace pdc::api::testing
