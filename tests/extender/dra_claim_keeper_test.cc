// ClaimKeeper (extender/dra/claim_keeper.h) on a fake ConsumerDirectory:
// what Reconcile answers when it cannot judge a claim's pods. No claim here
// needs a write, so the apiserver is never called.
#include "extender/dra/claim_keeper.h"

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/status_matchers.h"

namespace pdc::extender::dra {
namespace {

using ::pdc::testing::StatusIs;
using ::testing::HasSubstr;

class FakeConsumers final : public ConsumerDirectory {
 public:
  bool Synced() const override { return true; }
  PodLook LookAtPod(std::string_view, std::string_view, std::string_view uid) override {
    auto it = pods.find(std::string(uid));
    return it == pods.end() ? PodLook{} : it->second;
  }
  std::set<std::string> LiveVms(const std::vector<std::string>& uids) const override {
    std::set<std::string> out;
    for (const std::string& u : uids) {
      if (live_vms.count(u)) out.insert(u);
    }
    return out;
  }
  std::map<std::string, PodLook> pods;
  std::set<std::string> live_vms;
};

// An allocated claim ns/c reserved for pod p (uid u-p), and VM vm (u-vm)
// when `kept`.
std::string ClaimJson(bool kept) {
  return std::string(
             R"({"metadata":{"namespace":"ns","name":"c","uid":"u-c","resourceVersion":"1"},)"
             R"("status":{"allocation":{},"reservedFor":[{"resource":"pods","name":"p","uid":"u-p"})") +
         (kept ? R"(,{"apiGroup":"kubevirt.io","resource":"virtualmachines","name":"vm","uid":"u-vm"})"
               : "") +
         "]}}";
}

class ClaimKeeperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kube::KubeClientConfig c;
    c.server = "http://127.0.0.1:1";  // Never called.
    auto api = kube::KubeApi::Connect(c);
    ASSERT_OK(api.status());
    api_ = *std::move(api);
    ClaimKeeper::Options o;
    o.clock = &clock_;
    keeper_ = std::make_unique<ClaimKeeper>(api_.get(), &consumers_, o);
  }
  void Put(bool kept) {
    rapidjson::Document d;
    d.Parse(ClaimJson(kept).c_str());
    keeper_->claim_sink()->Upsert(d);
  }

  pdc::testing::FakeClock clock_;
  FakeConsumers consumers_;
  std::unique_ptr<kube::KubeApi> api_;
  std::unique_ptr<ClaimKeeper> keeper_;
};

TEST_F(ClaimKeeperTest, APodOfUnknownFateIsRetried) {
  for (bool kept : {false, true}) {
    SCOPED_TRACE(kept ? "kept" : "not kept");
    consumers_.pods["u-p"] = {PodLook::State::kUnknown, std::nullopt, "the read timed out"};
    consumers_.live_vms = {"u-vm"};
    Put(kept);
    EXPECT_THAT(keeper_->Reconcile("ns/c"),
                StatusIs(absl::StatusCode::kUnavailable, HasSubstr("pod p: the read timed out")));
  }
}

TEST_F(ClaimKeeperTest, AClaimWhosePodsAreAllJudgedIsDone) {
  for (PodLook look : {PodLook{PodLook::State::kAlive, VmIdentity{"vm", "u-vm"}, ""},
                       PodLook{PodLook::State::kAlive, std::nullopt, "not a VM's pod"}}) {
    consumers_.pods["u-p"] = look;
    consumers_.live_vms = {"u-vm"};
    Put(look.vm.has_value());
    EXPECT_OK(keeper_->Reconcile("ns/c"));
  }
}

TEST_F(ClaimKeeperTest, TheConsumerIndexFollowsTheWatch) {
  EXPECT_EQ(keeper_->kept(), 0u);
  Put(true);
  EXPECT_EQ(keeper_->kept(), 1u);
  Put(false);  // The VM entry went.
  EXPECT_EQ(keeper_->kept(), 0u);
  Put(true);
  rapidjson::Document d;
  d.Parse(ClaimJson(true).c_str());
  keeper_->claim_sink()->Remove(d);
  EXPECT_EQ(keeper_->kept(), 0u);
  // A relist that no longer holds it drops it too.
  Put(true);
  keeper_->claim_sink()->Replace({});
  EXPECT_EQ(keeper_->kept(), 0u);
}

}  // namespace
}  // namespace pdc::extender::dra
