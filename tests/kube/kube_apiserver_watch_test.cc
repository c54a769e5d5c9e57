// Watches of the kube-apiserver double: event order and types from etcd,
// the initial ADDED events of a watch from "0", BOOKMARKs and resuming from
// their resourceVersion, 410 Expired after compaction, label selectors,
// timeoutSeconds, all namespaces.
#include "tests/kube/kube_test_util.h"

namespace pdc::testing {
namespace {

using ::testing::ElementsAre;

using KubeApiServerWatchTest = KubeDoubleTest;

TEST_F(KubeApiServerWatchTest, EventsArriveInOrderWithTheirResourceVersions) {
  KubeReply list = Call("GET", Claims());
  std::unique_ptr<HttpStream> w =
      OpenWatch(Claims(Cat("?watch=1&resourceVersion=", list.Rv())));
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->Header("Content-Type"), "application/json");
  KubeReply c = CreateClaim("c1");
  KubeReply p =
      Call("PATCH", Claims("/c1"), R"({"metadata":{"labels":{"a":"b"}}})",
           "application/merge-patch+json");
  KubeReply d = Call("DELETE", Claims("/c1"));
  ASSERT_EQ(d.status, 200);
  std::optional<WatchEvent> e1 = NextChange(*w);
  std::optional<WatchEvent> e2 = NextChange(*w);
  std::optional<WatchEvent> e3 = NextChange(*w);
  ASSERT_TRUE(e1 && e2 && e3);
  EXPECT_EQ(e1->type, "ADDED");
  EXPECT_EQ(e1->Rv(), c.Rv());
  EXPECT_EQ(e1->Name(), "c1");
  EXPECT_EQ(kube::GetString(e1->object, {"kind"}), "PersistentDeviceClaim");
  EXPECT_EQ(e2->type, "MODIFIED");
  EXPECT_EQ(e2->Rv(), p.Rv());
  EXPECT_EQ(kube::GetString(e2->object, {"metadata", "labels", "a"}), "b");
  // DELETED carries the last state at the deletion's revision.
  EXPECT_EQ(e3->type, "DELETED");
  EXPECT_GT(e3->Rv(), p.Rv());
  EXPECT_EQ(kube::GetString(e3->object, {"metadata", "labels", "a"}), "b");
}

TEST_F(KubeApiServerWatchTest, WatchFromZeroStartsWithTheCurrentObjects) {
  CreateClaim("a");
  CreateClaim("b");
  std::unique_ptr<HttpStream> w =
      OpenWatch(Claims("?watch=true&resourceVersion=0"));
  ASSERT_NE(w, nullptr);
  std::optional<WatchEvent> a = NextChange(*w);
  std::optional<WatchEvent> b = NextChange(*w);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->type, "ADDED");
  EXPECT_EQ(a->Name(), "a");
  EXPECT_EQ(b->Name(), "b");
  CreateClaim("c");
  std::optional<WatchEvent> c = NextChange(*w);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->Name(), "c");
}

TEST_F(KubeApiServerWatchTest, BookmarksCarryOnlyAResourceVersionToResumeFrom) {
  KubeReply list = Call("GET", Claims());
  std::unique_ptr<HttpStream> w = OpenWatch(Claims(
      Cat("?watch=1&allowWatchBookmarks=true&resourceVersion=", list.Rv())));
  ASSERT_NE(w, nullptr);
  KubeReply c = CreateClaim("c1");
  std::optional<WatchEvent> added = NextChange(*w);
  ASSERT_TRUE(added.has_value());
  // Bookmarks come every 200 ms; one reaches the claim's revision (etcd's
  // progress notifications advance it).
  std::optional<WatchEvent> bookmark;
  for (int i = 0; i < 50; ++i) {
    std::optional<WatchEvent> e = NextEvent(*w);
    ASSERT_TRUE(e.has_value());
    ASSERT_EQ(e->type, "BOOKMARK");
    if (e->Rv() >= c.Rv()) {
      bookmark = std::move(e);
      break;
    }
  }
  ASSERT_TRUE(bookmark.has_value());
  EXPECT_EQ(kube::GetString(bookmark->object, {"kind"}),
            "PersistentDeviceClaim");
  EXPECT_EQ(kube::GetString(bookmark->object, {"apiVersion"}),
            "pdc.kubevirt.io/v1alpha1");
  EXPECT_EQ(kube::Find(bookmark->object, {"metadata", "name"}), nullptr);
  w.reset();
  // Resuming from the bookmark sees only what came after it.
  CreateClaim("c2");
  std::unique_ptr<HttpStream> resumed =
      OpenWatch(Claims(Cat("?watch=1&resourceVersion=", bookmark->Rv())));
  ASSERT_NE(resumed, nullptr);
  std::optional<WatchEvent> next = NextChange(*resumed);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->type, "ADDED");
  EXPECT_EQ(next->Name(), "c2");
}

TEST_F(KubeApiServerWatchTest, WatchFromACompactedVersionGetsExpiredThenEnds) {
  KubeReply c = CreateClaim("c1");
  CreateClaim("c2");
  CreateClaim("c3");
  // Compacted at c3's revision: a watch from c1's starts at c2's, gone.
  ASSERT_OK(api_->CompactEtcd().status());
  std::unique_ptr<HttpStream> w =
      OpenWatch(Claims(Cat("?watch=1&resourceVersion=", c.Rv())));
  ASSERT_NE(w, nullptr);
  std::optional<WatchEvent> e = NextEvent(*w);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->type, "ERROR");
  EXPECT_EQ(kube::GetString(e->object, {"kind"}), "Status");
  EXPECT_EQ(kube::GetInt(e->object, {"code"}), 410);
  EXPECT_EQ(kube::GetString(e->object, {"reason"}), "Expired");
  EXPECT_EQ(kube::GetString(e->object, {"message"}),
            "The resourceVersion for the provided watch is too old.");
  EXPECT_FALSE(NextEvent(*w, /*expect_end=*/true).has_value());
}

TEST_F(KubeApiServerWatchTest,
       LabelSelectorTurnsLeavingIntoDeletedAndJoiningIntoAdded) {
  const std::string mp = "application/merge-patch+json";
  KubeReply list = Call("GET", Claims());
  std::unique_ptr<HttpStream> w = OpenWatch(Claims(
      Cat("?watch=1&labelSelector=tier%3Dgold&resourceVersion=", list.Rv())));
  ASSERT_NE(w, nullptr);
  CreateClaim("c1");  // Not gold: unseen.
  Call("PATCH", Claims("/c1"), R"({"metadata":{"labels":{"tier":"gold"}}})",
       mp);
  Call("PATCH", Claims("/c1"),
       R"({"metadata":{"labels":{"tier":"gold","x":"y"}}})", mp);
  Call("PATCH", Claims("/c1"), R"({"metadata":{"labels":{"tier":"lead"}}})",
       mp);
  std::vector<std::string> types;
  for (int i = 0; i < 3; ++i) {
    std::optional<WatchEvent> e = NextChange(*w);
    ASSERT_TRUE(e.has_value());
    types.push_back(e->type);
  }
  EXPECT_THAT(types, ElementsAre("ADDED", "MODIFIED", "DELETED"));
}

TEST_F(KubeApiServerWatchTest,
       AllNamespacesWatchAndTimeoutSecondsEndsTheStream) {
  KubeReply list =
      Call("GET", "/apis/pdc.kubevirt.io/v1alpha1/persistentdeviceclaims");
  ASSERT_EQ(list.status, 200);
  std::unique_ptr<HttpStream> w =
      OpenWatch(Cat("/apis/pdc.kubevirt.io/v1alpha1/"
                    "persistentdeviceclaims?watch=1&timeoutSeconds=1&"
                    "resourceVersion=",
                    list.Rv()));
  ASSERT_NE(w, nullptr);
  ASSERT_EQ(Call("POST",
                 Cat("/apis/pdc.kubevirt.io/v1alpha1/namespaces/", ns_,
                     "-b/persistentdeviceclaims"),
                 ClaimJson("other-ns"))
                .status,
            201);
  std::optional<WatchEvent> e = NextChange(*w);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->Name(), "other-ns");
  // The stream then ends cleanly (final chunk) after about a second.
  absl::StatusOr<std::optional<std::string>> end =
      w->ReadLine(absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_FALSE(end->has_value());
}

}  // namespace
}  // namespace pdc::testing
