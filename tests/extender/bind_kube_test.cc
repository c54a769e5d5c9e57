// bind with a Kubernetes API: the pod is annotated with its devices and bound
// through the API; a failure there undoes the allocation. Also: a bind for a
// pod the extender never saw in filter reads the pod from the API.
#include <string>
#include <vector>

#include "common/metrics.h"
#include "extender/extender_metrics.h"
#include "extender/scheduler_handlers.h"
#include "tests/extender/extender_fixture.h"
#include "tests/testing/fake_kube.h"

namespace pdc::extender::testing {
namespace {

using ::pdc::testing::FakeKube;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class BindKubeTest : public ExtenderFixture {
 protected:
  void SetUp() override {
    ExtenderFixture::SetUp();
    ctx_.metrics = &metrics_;
    ctx_.registry = &registry_;
    UseKube(&kube_);
    TwoNodes();
  }
  void TearDown() override {
    UseKube(nullptr);
    ctx_.metrics = nullptr;
    ctx_.registry = nullptr;
  }
  void FilterVm1(const std::string& uid) {
    ASSERT_EQ(Post("/scheduler/filter",
                   NamesArgs(VirtLauncherPod("vm1", uid, 2), {"node-a"})).status,
              200);
  }

  FakeKube kube_;
  MetricsRegistry registry_;
  ExtenderMetrics metrics_{&registry_, nullptr, &clock_, "test"};
};

TEST_F(BindKubeTest, AnnotatesThenBinds) {
  FilterVm1("uid-1");
  EXPECT_EQ(Post("/scheduler/bind", BindArgs("vm1", "uid-1", "node-a")).body,
            R"({"Error":""})");
  EXPECT_THAT(
      kube_.calls(),
      ElementsAre(
          R"(PATCH default/virt-launcher-vm1-x7k2p pdc.kubevirt.io/devices={"devices.kubevirt.io/nvme":["0000:3b:00.0","0000:5e:00.0"]})",
          "BIND default/virt-launcher-vm1-x7k2p uid-1 node-a"));
}

TEST_F(BindKubeTest, ApiFailureUndoesTheAllocation) {
  FilterVm1("uid-1");
  kube_.SetBindStatus(absl::AbortedError(
      "Operation cannot be fulfilled on pods/binding \"virt-launcher-vm1-x7k2p\": pod "
      "virt-launcher-vm1-x7k2p is already assigned to node \"node-b\""));
  HttpResponse r = Post("/scheduler/bind", BindArgs("vm1", "uid-1", "node-a"));
  EXPECT_EQ(r.status, 200);
  EXPECT_THAT(r.body, HasSubstr(R"({"Error":"Kubernetes API: Operation cannot be fulfilled)"));
  // The template claim this bind created is gone again: node-a is free.
  EXPECT_THAT(allocator_->GetClaim({"default", "vm1-nvme"}),
              pdc::testing::StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(allocator_->Stats().devices_allocated, 0u);
  const std::string text = registry_.Render();
  EXPECT_THAT(text, HasSubstr("pdc_bind_rollbacks_total 1"));
  EXPECT_THAT(text, HasSubstr(R"(pdc_binds_total{result="error"} 1)"));
  // kube-scheduler retries; this time the API agrees.
  kube_.SetBindStatus(absl::OkStatus());
  EXPECT_EQ(Post("/scheduler/bind", BindArgs("vm1", "uid-1", "node-a")).body,
            R"({"Error":""})");
  EXPECT_EQ(allocator_->Stats().devices_allocated, 2u);
}

TEST_F(BindKubeTest, AnnotationFailureSkipsTheBindingAndUndoes) {
  FilterVm1("uid-1");
  kube_.SetAnnotateStatus(absl::UnavailableError("connection refused"));
  HttpResponse r = Post("/scheduler/bind", BindArgs("vm1", "uid-1", "node-a"));
  EXPECT_THAT(r.body, HasSubstr("Kubernetes API: connection refused"));
  ASSERT_EQ(kube_.calls().size(), 1u);
  EXPECT_EQ(allocator_->Stats().devices_allocated, 0u);
}

TEST_F(BindKubeTest, CacheMissReadsThePodFromTheApi) {
  kube_.SetPod(VirtLauncherPod("vm1", "uid-7"));
  EXPECT_EQ(Post("/scheduler/bind", BindArgs("vm1", "uid-7", "node-b")).body,
            R"({"Error":""})");
  ASSERT_EQ(kube_.calls().size(), 3u);
  EXPECT_EQ(kube_.calls()[0], "GET default/virt-launcher-vm1-x7k2p");
  ASSERT_OK_AND_ASSIGN(Claim c, allocator_->GetClaim({"default", "vm1-nvme"}));
  EXPECT_EQ(c.status.node, "node-b");
}

TEST_F(BindKubeTest, RecreatedPodWithAnotherUidIsRefused) {
  kube_.SetPod(VirtLauncherPod("vm1", "uid-new"));
  HttpResponse r = Post("/scheduler/bind", BindArgs("vm1", "uid-old", "node-b"));
  EXPECT_THAT(r.body, HasSubstr("now has uid uid-new, not uid-old"));
  EXPECT_EQ(allocator_->Stats().devices_allocated, 0u);
}

TEST_F(BindKubeTest, PodWithoutDevicesIsOnlyBound) {
  ASSERT_EQ(Post("/scheduler/filter",
                 NamesArgs(VirtLauncherPod("web", "uid-w", 0), {"node-a"})).status,
            200);
  EXPECT_EQ(Post("/scheduler/bind", BindArgs("web", "uid-w", "node-a")).body,
            R"({"Error":""})");
  EXPECT_THAT(kube_.calls(), ElementsAre("BIND default/virt-launcher-web-x7k2p uid-w node-a"));
}

TEST(PodCacheTest, BoundedAndExpiring) {
  pdc::testing::FakeClock clock;
  PodCache cache(&clock, 2, absl::Minutes(1));
  auto pod = [](std::string uid) {
    api::PodRequest p;
    p.request.pod_uid = std::move(uid);
    return p;
  };
  cache.Put(pod("a"));
  cache.Put(pod("b"));
  cache.Put(pod("a"));  // Refresh: "b" is now the oldest.
  cache.Put(pod("c"));
  EXPECT_TRUE(cache.Get("a").has_value());
  EXPECT_FALSE(cache.Get("b").has_value());
  EXPECT_TRUE(cache.Get("c").has_value());
  EXPECT_EQ(cache.size(), 2u);
  clock.Advance(absl::Seconds(61));
  EXPECT_FALSE(cache.Get("a").has_value());
  cache.Put(pod(""));  // No UID: not cached.
  EXPECT_EQ(cache.size(), 2u);
  for (int i = 0; i < 1000; ++i) cache.Put(pod("a"));  // Order stays bounded.
  EXPECT_LE(cache.size(), 2u);
}

}  // namespace
}  // namespace pdc::extender::testing
