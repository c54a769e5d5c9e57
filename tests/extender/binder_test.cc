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
#include "extender/kube_bind_target.h"
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
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// FakeKube with a hook that runs when BindPod is called (what else goes
// wrong at that moment).
class HookedKube final : public kube::KubeClient {
 public:
  explicit HookedKube(FakeKube* kube) : kube_(kube) {}
  absl::StatusOr<std::string> GetPod(std::string_view ns, std::string_view name,
                                     absl::Duration timeout) override {
    timeouts.push_back(timeout);
    return kube_->GetPod(ns, name, timeout);
  }
  absl::Status AnnotatePod(std::string_view ns, std::string_view name, std::string_view key,
                           std::string_view value, absl::Duration timeout) override {
    timeouts.push_back(timeout);
    if (on_annotate) on_annotate();
    return kube_->AnnotatePod(ns, name, key, value, timeout);
  }
  absl::Status BindPod(std::string_view ns, std::string_view name, std::string_view uid,
                       std::string_view node, absl::Duration timeout) override {
    timeouts.push_back(timeout);
    if (on_bind) on_bind();
    return kube_->BindPod(ns, name, uid, node, timeout);
  }
  std::function<void()> on_annotate;
  std::function<void()> on_bind;
  std::vector<absl::Duration> timeouts;  // Of every call, in order.

 private:
  FakeKube* const kube_;
};

constexpr char kPodName[] = "virt-launcher-vm1-x7k2p";
constexpr char kUid[] = "uid-1";
constexpr char kAnnotate[] =
    R"(PATCH default/virt-launcher-vm1-x7k2p pdc.kubevirt.io/devices={"devices.kubevirt.io/nvme":["0000:3b:00.0"]})";
constexpr char kBindCall[] = "BIND default/virt-launcher-vm1-x7k2p uid-1 node-a";
constexpr char kGetCall[] = "GET default/virt-launcher-vm1-x7k2p";

// The pod as the apiserver returns it after a bind: UID and spec.nodeName
// ("" = not bound).
std::string PodAt(const std::string& uid, const std::string& node) {
  return absl::StrCat(R"({"metadata":{"name":"virt-launcher-vm1-x7k2p","namespace":"default",)",
                      R"("uid":")", uid, R"("},"spec":{"nodeName":")", node, R"("}})");
}

struct BindCase {
  std::string name;
  // The world.
  bool pod_cached = true;
  std::string node = "node-a";
  absl::Status annotate = absl::OkStatus();
  absl::Status kube_bind = absl::OkStatus();
  // What reading the pod back answers (FakeKube: NotFound when unset).
  std::optional<absl::StatusOr<std::string>> read_back;
  bool store_fails_at_kube_bind = false;  // The Undo's record is refused.
  // What the saga must leave.
  BindStatus status = BindStatus::kBound;
  std::string error;  // Substring; "" when bound.
  std::vector<std::string> calls;
  bool claim_exists = false;  // default/vm1-nvme after the call.
  bool undone = false;
  bool undo_ok = true;
  std::string binds_metric;  // pdc_binds_total line.
  std::string read_back_metric;  // pdc_bind_read_backs_total line, if any.
  bool rolled_back = false;
  bool pod_still_cached = false;
};

class BinderTest : public ::testing::TestWithParam<BindCase> {
 protected:
  void SetUp() override {
    AllocatorOptions o;
    o.serialize_handoffs = false;  // No node driver confirms hand-offs here.
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
    ctx_.metrics = metrics_.get();
    target_ = std::make_unique<KubeBindTarget>(
        &kube_, KubeBindTarget::Options{.clock = &clock_, .metrics = metrics_.get()});
    ctx_.bind_target = target_.get();
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
  std::unique_ptr<KubeBindTarget> target_;
  ExtenderContext ctx_;
};

TEST_P(BinderTest, Outcome) {
  const BindCase& c = GetParam();
  if (c.pod_cached) pods_.Put(Pod());
  fake_kube_.SetAnnotateStatus(c.annotate);
  fake_kube_.SetBindStatus(c.kube_bind);
  if (c.read_back.has_value()) fake_kube_.SetPod(*c.read_back);
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
  if (c.status == BindStatus::kBound || c.status == BindStatus::kOutcomeUnknown) {
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
  if (!c.read_back_metric.empty()) {
    EXPECT_TRUE(Rendered(c.read_back_metric)) << registry_.Render();
  }
  EXPECT_TRUE(Rendered(absl::StrCat("pdc_bind_rollbacks_total ", c.rolled_back ? 1 : 0)))
      << registry_.Render();
  EXPECT_EQ(pods_.Get(kUid).has_value(), c.pod_still_cached);
}

INSTANTIATE_TEST_SUITE_P(
    Saga, BinderTest,
    ::testing::Values(
        BindCase{.name = "Bound",
             .calls = {kAnnotate, kBindCall},
             .claim_exists = true,
             .binds_metric = R"(pdc_binds_total{result="ok"} 1)"},
        BindCase{.name = "PodNotFound",
             .pod_cached = false,
             .status = BindStatus::kPodNotFound,
             .error = "reading pod default/virt-launcher-vm1-x7k2p from the Kubernetes API",
             .calls = {kGetCall},
             .binds_metric = R"(pdc_binds_total{result="error"} 1)"},
        BindCase{.name = "AllocatorRefuses",
             .node = "node-b",
             .status = BindStatus::kAllocatorRefused,
             .error = "node node-b",
             .calls = {},
             .binds_metric = R"(pdc_binds_total{result="error"} 1)",
             .pod_still_cached = true},
        BindCase{.name = "AnnotateFailsUndone",
             .annotate = absl::UnavailableError("apiserver down"),
             .status = BindStatus::kAnnotateFailed,
             .error = "Kubernetes API: apiserver down",
             .calls = {kAnnotate},
             .undone = true,
             .binds_metric = R"(pdc_binds_total{result="error"} 1)",
             .rolled_back = true,
             .pod_still_cached = true},
        BindCase{.name = "KubeBindRefusedUndoneWithoutReadingBack",
             .kube_bind = absl::PermissionDeniedError("cannot create pods/binding"),
             .status = BindStatus::kKubeBindFailed,
             .error = "Kubernetes API: cannot create pods/binding",
             .calls = {kAnnotate, kBindCall},
             .undone = true,
             .binds_metric = R"(pdc_binds_total{result="error"} 1)",
             .rolled_back = true,
             .pod_still_cached = true},
        // Outcome unknown: the pod read back decides.
        BindCase{.name = "ConflictAndBoundElsewhereUndone",
             .kube_bind = absl::AbortedError(
                 "pod virt-launcher-vm1-x7k2p is already assigned to node \"node-b\""),
             .read_back = PodAt(kUid, "node-b"),
             .status = BindStatus::kKubeBindFailed,
             .error = "read back: pod default/virt-launcher-vm1-x7k2p is bound to node node-b",
             .calls = {kAnnotate, kBindCall, kGetCall},
             .undone = true,
             .binds_metric = R"(pdc_binds_total{result="error"} 1)",
             .read_back_metric = R"(pdc_bind_read_backs_total{result="not_bound"} 1)",
             .rolled_back = true,
             .pod_still_cached = true},
        // The Binding was committed by an attempt whose answer was lost.
        BindCase{.name = "ConflictButBoundHereIsSuccess",
             .kube_bind = absl::AbortedError(
                 "pod virt-launcher-vm1-x7k2p is already assigned to node \"node-a\""),
             .read_back = PodAt(kUid, "node-a"),
             .calls = {kAnnotate, kBindCall, kGetCall},
             .claim_exists = true,
             .binds_metric = R"(pdc_binds_total{result="ok"} 1)",
             .read_back_metric = R"(pdc_bind_read_backs_total{result="bound"} 1)"},
        BindCase{.name = "TimeoutButCommittedIsSuccess",
             .kube_bind = absl::DeadlineExceededError("timed out after 6s"),
             .read_back = PodAt(kUid, "node-a"),
             .calls = {kAnnotate, kBindCall, kGetCall},
             .claim_exists = true,
             .binds_metric = R"(pdc_binds_total{result="ok"} 1)",
             .read_back_metric = R"(pdc_bind_read_backs_total{result="bound"} 1)"},
        BindCase{.name = "ConnectionLostAndNotBoundYetKeepsTheDevices",
             .kube_bind = absl::UnavailableError("connection lost during POST"),
             .read_back = PodAt(kUid, ""),
             .status = BindStatus::kOutcomeUnknown,
             .error = "its devices stay reserved for it",
             .calls = {kAnnotate, kBindCall, kGetCall},
             .claim_exists = true,
             .binds_metric = R"(pdc_binds_total{result="unknown"} 1)",
             .read_back_metric = R"(pdc_bind_read_backs_total{result="unknown"} 1)",
             .pod_still_cached = true},
        BindCase{.name = "ServerErrorAndPodUnreadableKeepsTheDevices",
             .kube_bind = absl::UnavailableError("etcdserver: request timed out"),
             .read_back = absl::UnavailableError("connection refused"),
             .status = BindStatus::kOutcomeUnknown,
             .error = "could not be read: connection refused",
             .calls = {kAnnotate, kBindCall, kGetCall},
             .claim_exists = true,
             .binds_metric = R"(pdc_binds_total{result="unknown"} 1)",
             .read_back_metric = R"(pdc_bind_read_backs_total{result="unknown"} 1)",
             .pod_still_cached = true},
        BindCase{.name = "TimeoutAndPodDeletedUndone",
             .kube_bind = absl::DeadlineExceededError("timed out"),
             .status = BindStatus::kKubeBindFailed,
             .error = "read back: pod default/virt-launcher-vm1-x7k2p was deleted",
             .calls = {kAnnotate, kBindCall, kGetCall},
             .undone = true,
             .binds_metric = R"(pdc_binds_total{result="error"} 1)",
             .read_back_metric = R"(pdc_bind_read_backs_total{result="not_bound"} 1)",
             .rolled_back = true,
             .pod_still_cached = true},
        BindCase{.name = "TimeoutAndPodRecreatedUndone",
             .kube_bind = absl::DeadlineExceededError("timed out"),
             .read_back = PodAt("uid-2", "node-a"),
             .status = BindStatus::kKubeBindFailed,
             .error = "now has uid uid-2, not uid-1",
             .calls = {kAnnotate, kBindCall, kGetCall},
             .undone = true,
             .binds_metric = R"(pdc_binds_total{result="error"} 1)",
             .read_back_metric = R"(pdc_bind_read_backs_total{result="not_bound"} 1)",
             .rolled_back = true,
             .pod_still_cached = true},
        BindCase{.name = "KubeBindFailsAndUndoFails",
             .kube_bind = absl::PermissionDeniedError("cannot create pods/binding"),
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

// Each apiserver call gets what is left of the saga's deadline; the Binding
// leaves `read_back` for reading the pod back.
TEST_F(BinderTest, EveryApiCallGetsWhatIsLeftOfTheDeadline) {
  pods_.Put(Pod());
  fake_kube_.SetBindStatus(absl::UnavailableError("connection lost"));
  fake_kube_.SetPod(PodAt(kUid, "node-a"));
  kube_.on_annotate = [this] { clock_.Advance(absl::Seconds(1)); };
  kube_.on_bind = [this] { clock_.Advance(absl::Seconds(4)); };
  BinderOptions o;
  o.deadline = absl::Seconds(8);
  o.read_back = absl::Seconds(2);
  const BindResult r = Binder(&ctx_, o).Bind(Args("node-a"));
  EXPECT_TRUE(r.ok()) << r.error;
  EXPECT_THAT(kube_.timeouts,
              ElementsAre(absl::Seconds(6), absl::Seconds(5), absl::Seconds(3)));
}

// A bind that waited in the queue past its deadline does nothing.
TEST_F(BinderTest, TooLateToStartDoesNothing) {
  pods_.Put(Pod());
  const absl::Time deadline = clock_.Now();
  const BindResult r = Binder(&ctx_).Bind(Args("node-a"), deadline);
  EXPECT_EQ(r.status, BindStatus::kTooLate);
  EXPECT_THAT(r.error, HasSubstr("extender.bindDeadline"));
  EXPECT_THAT(fake_kube_.calls(), ElementsAre());
  EXPECT_EQ(allocator_->Stats().devices_allocated, 0u);
}

// Without a Kubernetes API the allocator's record is the whole bind; a pod
// the filter never saw cannot be bound.
TEST_F(BinderTest, StandaloneBindsWithoutTheApi) {
  ctx_.bind_target = StandaloneTarget();
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
