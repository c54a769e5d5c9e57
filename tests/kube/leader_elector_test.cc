// LeaderElector (kube/leader_elector.h) against the kube-apiserver
// double on a real etcd: one leader at a time, takeover only after the
// lease expired (as the follower saw it), a leader cut off from its
// apiserver stops leading before anyone can take over, and a stopped leader
// hands over at once. Two instances of the double over the same etcd play
// two kube-apiservers, so one replica can be cut off alone.
#include "kube/leader_elector.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/lease_json.h"
#include "gtest/gtest.h"
#include "tests/kube/kube_test_util.h"

namespace pdc::testing {
namespace {

using pdc::kube::KubeApi;
using pdc::kube::LeaderElector;
using pdc::kube::LeaderElectorOptions;

std::unique_ptr<pdc::kube::KubeApi> Connect(uint16_t port) {
  pdc::kube::KubeClientConfig c;
  c.server = absl::StrCat("http://127.0.0.1:", port);
  c.timeout = absl::Seconds(2);
  absl::StatusOr<std::unique_ptr<pdc::kube::KubeApi>> api = pdc::kube::KubeApi::Connect(c);
  EXPECT_TRUE(api.ok()) << api.status();
  return api.ok() ? *std::move(api) : nullptr;
}

// Short timings, in client-go's proportions (15s / 10s / 2s).
pdc::kube::LeaderElectorOptions Timings(std::string ns, std::string identity) {
  pdc::kube::LeaderElectorOptions o;
  o.ns = std::move(ns);
  o.name = "pdc-extender";
  o.identity = std::move(identity);
  o.lease_duration = absl::Milliseconds(1500);
  o.renew_deadline = absl::Milliseconds(1000);
  o.retry_period = absl::Milliseconds(200);
  return o;
}

bool Await(const std::function<bool()>& done, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return done();
}

class LeaderElectorTest : public KubeDoubleTest {
 protected:
  api::LeaderRecord Lease() {
    KubeReply r =
        Call("GET", absl::StrCat("/apis/coordination.k8s.io/v1/namespaces/",
                                 ns_, "/leases/pdc-extender"));
    EXPECT_EQ(r.status, 200) << r.text;
    absl::StatusOr<api::Lease> l = api::ReadLease(r.text);
    EXPECT_TRUE(l.ok()) << l.status();
    return l.ok() ? l->record : api::LeaderRecord{};
  }
};

TEST_F(LeaderElectorTest, TheFirstTakesTheLeaseAndTheSecondWaits) {
  std::unique_ptr<pdc::kube::KubeApi> api = Connect(api_->port());
  pdc::kube::LeaderElector a(api.get(), Timings(ns_, "a"));
  pdc::kube::LeaderElector b(api.get(), Timings(ns_, "b"));
  EXPECT_TRUE(a.TryAcquireOrRenew());   // Creates the Lease.
  EXPECT_FALSE(b.TryAcquireOrRenew());  // Held, renewed just now.
  EXPECT_EQ(b.Leader(), "a");
  api::LeaderRecord r = Lease();
  EXPECT_EQ(r.holder, "a");
  EXPECT_EQ(r.lease_duration_seconds, 2);  // 1.5s, rounded up.
  EXPECT_EQ(r.transitions, 0);
  EXPECT_NE(r.renew_time, absl::InfinitePast());

  a.Start();
  b.Start();
  ASSERT_TRUE(Await([&] { return a.Leading(); }, absl::Seconds(5)));
  // b never leads while a renews: three lease durations.
  const absl::Time until = absl::Now() + absl::Milliseconds(4500);
  while (absl::Now() < until) {
    ASSERT_FALSE(b.Leading());
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(a.Leading());
  EXPECT_FALSE(a.Lost());
}

TEST_F(LeaderElectorTest, AStoppedLeaderHandsOverAtOnce) {
  std::unique_ptr<pdc::kube::KubeApi> api = Connect(api_->port());
  auto a = std::make_unique<pdc::kube::LeaderElector>(api.get(), Timings(ns_, "a"));
  pdc::kube::LeaderElector b(api.get(), Timings(ns_, "b"));
  a->Start();
  ASSERT_TRUE(Await([&] { return a->Leading(); }, absl::Seconds(5)));
  b.Start();
  absl::SleepFor(absl::Milliseconds(300));
  const absl::Time stopped = absl::Now();
  a->Stop();  // Releases: holder "".
  EXPECT_FALSE(a->Leading());
  ASSERT_TRUE(Await([&] { return b.Leading(); }, absl::Seconds(5)));
  // Well before the 1.5s lease could have expired: the release handed over.
  EXPECT_LT(absl::Now() - stopped, absl::Milliseconds(1200));
  EXPECT_EQ(Lease().holder, "b");
  EXPECT_EQ(Lease().transitions, 1);
}

TEST_F(LeaderElectorTest, ALeaderCutOffStopsLeadingBeforeAnotherTakesOver) {
  // a talks to a second kube-apiserver over the same etcd; b to the first.
  absl::StatusOr<std::unique_ptr<KubeApiServerDouble>> second =
      KubeApiServerDouble::Start(etcd_->client_ports());
  ASSERT_TRUE(second.ok()) << second.status();
  std::unique_ptr<pdc::kube::KubeApi> api_a = Connect((*second)->port());
  std::unique_ptr<pdc::kube::KubeApi> api_b = Connect(api_->port());
  std::atomic<int> a_lost{0};
  pdc::kube::LeaderElectorOptions oa = Timings(ns_, "a");
  oa.on_lost = [&] { a_lost.fetch_add(1); };
  pdc::kube::LeaderElector a(api_a.get(), oa);
  pdc::kube::LeaderElector b(api_b.get(), Timings(ns_, "b"));
  a.Start();
  ASSERT_TRUE(Await([&] { return a.Leading(); }, absl::Seconds(5)));
  b.Start();
  absl::SleepFor(absl::Milliseconds(500));
  ASSERT_FALSE(b.Leading());

  // a's apiserver goes away: a can no longer renew.
  const absl::Time cut = absl::Now();
  second->reset();
  absl::Time a_stopped = absl::InfinitePast();
  absl::Time b_started = absl::InfinitePast();
  while (absl::Now() < cut + absl::Seconds(10) &&
         (a_stopped == absl::InfinitePast() ||
          b_started == absl::InfinitePast())) {
    const bool a_leads = a.Leading();
    const bool b_leads = b.Leading();
    ASSERT_FALSE(a_leads && b_leads) << "two leaders at once";
    if (!a_leads && a_stopped == absl::InfinitePast()) a_stopped = absl::Now();
    if (b_leads && b_started == absl::InfinitePast()) b_started = absl::Now();
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_NE(a_stopped, absl::InfinitePast()) << "a never stopped leading";
  ASSERT_NE(b_started, absl::InfinitePast()) << "b never took over";
  // a stops within its renew deadline of its last renewal; b takes over
  // only after the lease duration since it saw the last renewal.
  EXPECT_LE(a_stopped - cut, absl::Milliseconds(1100));
  EXPECT_GE(b_started - a_stopped, absl::Milliseconds(300));
  EXPECT_TRUE(Await([&] { return a_lost.load() == 1; }, absl::Seconds(5)));
  EXPECT_TRUE(a.Lost());
  EXPECT_EQ(Lease().holder, "b");
}

TEST_F(LeaderElectorTest, AnUnreadableLeaseIsNeverTaken) {
  std::unique_ptr<pdc::kube::KubeApi> api = Connect(api_->port());
  // Held by someone, with a renewTime that is not a time.
  KubeReply made = Call(
      "POST",
      absl::StrCat("/apis/coordination.k8s.io/v1/namespaces/", ns_, "/leases"),
      absl::StrCat(
          R"({"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"pdc-extender","namespace":")",
          ns_,
          R"("},"spec":{"holderIdentity":"x","leaseDurationSeconds":1,"renewTime":"yesterday"}})"));
  ASSERT_EQ(made.status, 201) << made.text;
  pdc::kube::LeaderElector a(api.get(), Timings(ns_, "a"));
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(a.TryAcquireOrRenew());
    absl::SleepFor(absl::Milliseconds(700));
  }
  EXPECT_FALSE(a.Leading());
}

}  // namespace
}  // namespace pdc::testing
