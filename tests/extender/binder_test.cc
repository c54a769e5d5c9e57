// Binder: the bind saga on decoded arguments, without JSON or HTTP. One
// table over its outcomes; each row says what the world does (pod cache,
// Kubernetes API, store) and what the saga must leave behind (result, calls
// to the API, claims, metrics).
#include "extender/binder.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "allocator/allocator.h"
#include "allocator/memory_store.h"
#include "common/metrics.h"
#include "extender/extender_metrics.h"
#include "common/notifier.h"
#include "extender/pod_cache.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/fake_kube.h"
#include "tests/testing/faulty_store.h"
#include "tests/testing/inventory_builders.h"
#include "tests/testing/status_matchers.h"

namespace pdc::extender {
namespace {

using ::pdc::api::BindingArgs;
using ::pdc::api::PodRequest;
using ::pdc::testing::FakeClock;
using ::pdc::testing::FakeKube;
using ::pdc::testing::FaultyStore;
using ::pdc::testing::kNvme;
using ::pdc::testing::NvmeDevice;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// FakeKube with a hook that runs when BindPod is called (what else goes
// wrong at that moment).
class HookedKube final : public KubeClient {
 public:
  explicit HookedKube(FakeKube* kube) : kube_(kube) {}
  absl::StatusOr<std::string> GetPod(std::string_view ns, std::string_view name) override {
    return kube_->GetPod(ns, name);
  }
  absl::Status AnnotatePod(std::string_view ns, std::string_view name, std::string_view key,
                           std::string_view value) override {
    return kube_->AnnotatePod(ns, name, key, value);
  }
  absl::Status BindPod(std::string_view ns, std::string_view name, std::string_view uid,
                       std::string_view node) override {
    if (on_bind) on_bind();
    return kube_->BindPod(ns, name, uid, node);
  }
  std::function<void()> on_bind;

 private:
  FakeKube* const kube_;
};

constexpr char kPodName[] = "virt-launcher-vm1-x7k2p";
constexpr char kUid[] = "uid-1";
constexpr char kAnnotate[] =
    R"(PATCH default/virt-launcher-vm1-x7k2p pdc.kubevirt.io/devices={"devices.kubevirt.io/nvme":["0000:3b:00.0"]})";
constexpr char kBindCall[] = "BIND default/virt-launcher-vm1-x7k2p uid-1 node-a";
constexpr char kGetCall[] = "GET default/virt-launcher-vm1-x7k2p";

struct Case {
  std::string name;
  // The world.
  bool pod_cached = true;
  std::string node = "node-a";
  absl::Status annotate = absl::OkStatus();
  absl::Status kube_bind = absl::OkStatus();
  bool store_fails_at_kube_bind = false;  // The Undo's record is refused.
  // What the saga must leave.
  BindStatus status = BindStatus::kBound;
  std::string error;  // Substring; "" when bound.
  std::vector<std::string> calls;
  bool claim_exists = false;  // default/vm1-nvme after the call.
  bool undone = false;
  bool undo_ok = true;
  std::string binds_metric;  // pdc_binds_total line.
  bool rolled_back = false;
  bool pod_still_cached = false;
};

class BinderTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    AllocatorOptions o;
    o.device_classes = {DeviceClass{kNvme, {::pdc::testing::QemuNvmeSelector()}}};
    auto a = Allocator::Open(o, &store_, &clock_);
    ASSERT_TRUE(a.ok()) << a.status();
    allocator_ = *std::move(a);
    ASSERT_OK(allocator_->ReplaceInventory(
        ::pdc::testing::Inventory("node-a", {NvmeDevice("0000:3b:00.0", 12, 0, "SNA0")})));
    metrics_ = std::make_unique<ExtenderMetrics>(&registry_, allocator_.get(), &clock_, "test");
    ctx_.allocator = allocator_.get();
    ctx_.clock = &clock_;
    ctx_.pod_cache = &pods_;
    ctx_.notifier = &notifier_;
    ctx_.managed = {kNvme};
    ctx_.kube = &kube_;
    ctx_.metrics = metrics_.get();
  }

  static PodRequest Pod() {
    PodRequest p;
    p.pass_through = false;
    p.request.ns = "default";
    p.request.vm = "vm1";
    p.request.pod_name = kPodName;
    p.request.pod_uid = kUid;
    p.request.resources = {{kNvme, 1}};
    return p;
  }

  static BindingArgs Args(std::string node) {
    return BindingArgs{kPodName, "default", kUid, std::move(node)};
  }

  bool Rendered(const std::string& line) {
    return registry_.Render().find(line + "\n") != std::string::npos;
  }

  FakeClock clock_;
  MemoryStore memory_;
  FaultyStore store_{&memory_};
  std::unique_ptr<Allocator> allocator_;
  PodCache pods_{&clock_, 100, absl::Minutes(10)};
  Notifier notifier_;
  FakeKube fake_kube_;
  HookedKube kube_{&fake_kube_};
  MetricsRegistry registry_;
  std::unique_ptr<ExtenderMetrics> metrics_;
  ExtenderContext ctx_;
};

TEST_P(BinderTest, Outcome) {
  const Case& c = GetParam();
  if (c.pod_cached) pods_.Put(Pod());
  fake_kube_.SetAnnotateStatus(c.annotate);
  fake_kube_.SetBindStatus(c.kube_bind);
  if (c.store_fails_at_kube_bind) {
    kube_.on_bind = [this] { store_.FailNextAppend(absl::ResourceExhaustedError("record refused")); };
  }
  const uint64_t revision_before = allocator_->revision();

  const BindResult r = Binder(&ctx_).Bind(Args(c.node));

  EXPECT_EQ(r.status, c.status) << ToString(r.status) << ": " << r.error;
  EXPECT_EQ(r.ok(), c.status == BindStatus::kBound);
  if (c.error.empty()) {
    EXPECT_EQ(r.error, "");
  } else {
    EXPECT_THAT(r.error, HasSubstr(c.error));
  }
  EXPECT_THAT(fake_kube_.calls(), ElementsAreArray(c.calls));
  absl::StatusOr<Claim> claim = allocator_->GetClaim({"default", "vm1-nvme"});
  EXPECT_EQ(claim.ok(), c.claim_exists) << claim.status();
  if (c.status == BindStatus::kBound) {
    ASSERT_OK(claim.status());
    EXPECT_EQ(claim->status.node, "node-a");
    ASSERT_TRUE(claim->status.reserved_for.has_value());
    EXPECT_EQ(claim->status.reserved_for->pod_uid, kUid);
    ASSERT_TRUE(r.allocation.has_value());
    EXPECT_EQ(r.allocation->revision, allocator_->revision());
  }
  if (c.status == BindStatus::kAllocatorRefused || c.status == BindStatus::kPodNotFound) {
    EXPECT_EQ(allocator_->revision(), revision_before);  // Nothing was committed.
    EXPECT_FALSE(r.allocation.has_value());
  }
  EXPECT_EQ(r.undo_status.has_value(), c.undone);
  if (r.undo_status.has_value()) {
    EXPECT_EQ(r.undo_status->ok(), c.undo_ok);
  }
  EXPECT_TRUE(Rendered(c.binds_metric)) << registry_.Render();
  EXPECT_TRUE(Rendered(absl::StrCat("pdc_bind_rollbacks_total ", c.rolled_back ? 1 : 0)))
      << registry_.Render();
  EXPECT_EQ(pods_.Get(kUid).has_value(), c.pod_still_cached);
}

INSTANTIATE_TEST_SUITE_P(
    Saga, BinderTest,
    ::testing::Values(
        Case{.name = "Bound",
             .calls = {kAnnotate, kBindCall},
             .claim_exists = true,
             .binds_metric = R"(pdc_binds_total{result="ok"} 1)"},
        Case{.name = "PodNotFound",
             .pod_cached = false,
             .status = BindStatus::kPodNotFound,
             .error = "reading pod default/virt-launcher-vm1-x7k2p from the Kubernetes API",
             .calls = {kGetCall},
             .binds_metric = R"(pdc_binds_total{result="error"} 1)"},
        Case{.name = "AllocatorRefuses",
             .node = "node-b",
             .status = BindStatus::kAllocatorRefused,
             .error = "node node-b",
             .calls = {},
             .binds_metric = R"(pdc_binds_total{result="error"} 1)",
             .pod_still_cached = true},
        Case{.name = "AnnotateFailsUndone",
             .annotate = absl::UnavailableError("apiserver down"),
             .status = BindStatus::kAnnotateFailed,
             .error = "Kubernetes API: apiserver down",
             .calls = {kAnnotate},
             .undone = true,
             .binds_metric = R"(pdc_binds_total{result="error"} 1)",
             .rolled_back = true,
             .pod_still_cached = true},
        Case{.name = "KubeBindFailsUndone",
             .kube_bind = absl::AbortedError("pod is already bound"),
             .status = BindStatus::kKubeBindFailed,
             .error = "Kubernetes API: pod is already bound",
             .calls = {kAnnotate, kBindCall},
             .undone = true,
             .binds_metric = R"(pdc_binds_total{result="error"} 1)",
             .rolled_back = true,
             .pod_still_cached = true},
        Case{.name = "KubeBindFailsAndUndoFails",
             .kube_bind = absl::AbortedError("pod is already bound"),
             .store_fails_at_kube_bind = true,
             .status = BindStatus::kKubeBindFailed,
             .error = "undoing the allocation also failed: record refused",
             .calls = {kAnnotate, kBindCall},
             .claim_exists = true,  // The Undo could not take it back.
             .undone = true,
             .undo_ok = false,
             .binds_metric = R"(pdc_binds_total{result="error"} 1)",
             .rolled_back = true,
             .pod_still_cached = true}),
    [](const auto& info) { return info.param.name; });

// Without a Kubernetes API the allocator's record is the whole bind; a pod
// the filter never saw cannot be bound.
TEST_F(BinderTest, StandaloneBindsWithoutTheApi) {
  ctx_.kube = nullptr;
  pods_.Put(Pod());
  const BindResult r = Binder(&ctx_).Bind(Args("node-a"));
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_TRUE(allocator_->GetClaim({"default", "vm1-nvme"}).ok());

  const BindResult unknown = Binder(&ctx_).Bind(BindingArgs{"other", "default", "uid-9", "node-a"});
  EXPECT_EQ(unknown.status, BindStatus::kPodNotFound);
  EXPECT_THAT(unknown.error, HasSubstr("no Kubernetes API is configured"));
}

}  // namespace
}  // namespace pdc::extender
