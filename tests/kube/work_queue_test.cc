#include "kube/work_queue.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kube/typed_cache.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/reflector_feed.h"

namespace pdc::kube {
namespace {

using ::pdc::testing::FakeClock;

std::vector<std::string> Drain(WorkQueue& q) {
  std::vector<std::string> keys;
  while (auto k = q.TryGet()) {
    keys.push_back(*k);
    q.Done(*k);
  }
  return keys;
}

TEST(WorkQueue, AKeyIsQueuedOnceAndInOrder) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.Add("ns/a");
  q.Add("ns/b");
  q.Add("ns/a");
  EXPECT_EQ(q.size(), 2u);
  EXPECT_EQ(Drain(q), (std::vector<std::string>{"ns/a", "ns/b"}));
  EXPECT_EQ(q.size(), 0u);
}

TEST(WorkQueue, AKeyBeingProcessedIsHandedOutAgainOnlyAfterDone) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.Add("ns/a");
  auto first = q.TryGet();
  ASSERT_TRUE(first.has_value());
  q.Add("ns/a");  // Changed while a worker looks at it.
  EXPECT_FALSE(q.TryGet().has_value()) << "two workers on one key";
  EXPECT_EQ(q.size(), 1u);
  q.Done("ns/a");
  auto again = q.TryGet();
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(*again, "ns/a");
  q.Done("ns/a");
  EXPECT_FALSE(q.TryGet().has_value());
}

TEST(WorkQueue, DoneWithoutAReAddQueuesNothing) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.Add("k");
  ASSERT_TRUE(q.TryGet().has_value());
  q.Done("k");
  EXPECT_FALSE(q.TryGet().has_value());
}

TEST(WorkQueue, AddAfterIsReadyWhenTheClockSaysSoAndTheEarliestWins) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.AddAfter("k", absl::Seconds(10));
  q.AddAfter("k", absl::Seconds(30));  // Later: ignored.
  EXPECT_FALSE(q.TryGet().has_value());
  EXPECT_EQ(q.NextDelayed(), clock.Now() + absl::Seconds(10));
  q.AddAfter("k", absl::Seconds(5));  // Earlier: wins.
  clock.Advance(absl::Seconds(5));
  EXPECT_EQ(Drain(q), std::vector<std::string>{"k"});
  clock.Advance(absl::Seconds(30));
  EXPECT_TRUE(Drain(q).empty()) << "the replaced readiness must not fire too";
}

TEST(WorkQueue, ADelayedKeyAlreadyQueuedIsNotQueuedTwice) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.Add("k");
  q.AddAfter("k", absl::Seconds(1));
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(Drain(q), std::vector<std::string>{"k"});
}

TEST(WorkQueue, RateLimitedBackoffDoublesPerKeyUpToTheCapAndForgetResetsIt) {
  FakeClock clock;
  WorkQueue q(&clock, {.base_delay = absl::Milliseconds(5), .max_delay = absl::Seconds(1)});
  const absl::Duration expected[] = {absl::Milliseconds(5),  absl::Milliseconds(10),
                                     absl::Milliseconds(20), absl::Milliseconds(40),
                                     absl::Milliseconds(80), absl::Milliseconds(160),
                                     absl::Milliseconds(320), absl::Milliseconds(640),
                                     absl::Seconds(1),       absl::Seconds(1)};
  for (absl::Duration want : expected) {
    const absl::Time before = clock.Now();
    q.AddRateLimited("k");
    EXPECT_EQ(q.NextDelayed() - before, want);
    clock.Advance(want - absl::Nanoseconds(1));
    EXPECT_FALSE(q.TryGet().has_value()) << "ready before its backoff " << want;
    clock.Advance(absl::Nanoseconds(1));
    EXPECT_EQ(Drain(q), std::vector<std::string>{"k"});
  }
  EXPECT_EQ(q.Requeues("k"), 10);
  EXPECT_EQ(q.Requeues("other"), 0);
  q.Forget("k");
  EXPECT_EQ(q.Requeues("k"), 0);
  const absl::Time before = clock.Now();
  q.AddRateLimited("k");
  EXPECT_EQ(q.NextDelayed() - before, absl::Milliseconds(5));
}

TEST(WorkQueue, ShutDownEndsGetAndDropsWhatWaits) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.Add("a");
  q.AddAfter("b", absl::Seconds(1));
  q.ShutDown();
  EXPECT_TRUE(q.shutting_down());
  EXPECT_FALSE(q.Get().has_value());
  EXPECT_FALSE(q.TryGet().has_value());
  q.Add("c");
  EXPECT_EQ(q.size(), 0u);
}

// The blocking Get() on the real clock: a worker parked with nothing to do
// is woken by Add from another thread, and by ShutDown.
TEST(WorkQueue, BlockingGetIsWokenByAddAndByShutDown) {
  WorkQueue q(RealClock());
  std::vector<std::string> got;
  std::thread worker([&] {
    while (auto k = q.Get()) {
      got.push_back(*k);
      q.Done(*k);
    }
  });
  q.Add("x");
  while (q.size() != 0) std::this_thread::yield();
  q.ShutDown();
  worker.join();
  EXPECT_EQ(got, std::vector<std::string>{"x"});
}

class ScriptedReconciler final : public Reconciler {
 public:
  absl::Status Reconcile(const std::string& key) override {
    calls.push_back(key);
    if (failures_left > 0) {
      --failures_left;
      return absl::UnavailableError("apiserver down");
    }
    return absl::OkStatus();
  }
  int failures_left = 0;
  std::vector<std::string> calls;
};

TEST(Controller, AFailedReconcileIsRetriedWithBackoffAndASuccessForgets) {
  FakeClock clock;
  WorkQueue q(&clock);
  ScriptedReconciler r;
  r.failures_left = 2;
  Controller c(&q, &r);
  q.Add("ns/vm");
  EXPECT_EQ(c.ProcessReady(), 1);
  EXPECT_EQ(q.Requeues("ns/vm"), 1);
  EXPECT_EQ(c.ProcessReady(), 0) << "retried before its backoff";
  clock.Advance(absl::Milliseconds(5));
  EXPECT_EQ(c.ProcessReady(), 1);
  EXPECT_EQ(q.Requeues("ns/vm"), 2);
  clock.Advance(absl::Milliseconds(10));
  EXPECT_EQ(c.ProcessReady(), 1);
  EXPECT_EQ(q.Requeues("ns/vm"), 0);
  EXPECT_EQ(r.calls, (std::vector<std::string>{"ns/vm", "ns/vm", "ns/vm"}));
  clock.Advance(absl::Hours(1));
  EXPECT_EQ(c.ProcessReady(), 0);
}

TEST(Controller, WorkersReconcileEveryKeyAndStopJoinsThem) {
  WorkQueue q(RealClock());
  struct Counting final : Reconciler {
    absl::Status Reconcile(const std::string& key) override {
      absl::MutexLock lock(&mu);
      seen.push_back(key);
      return absl::OkStatus();
    }
    absl::Mutex mu;
    std::vector<std::string> seen;
  } r;
  Controller c(&q, &r);
  c.Run(2);
  for (int i = 0; i < 100; ++i) q.Add(absl::StrCat("ns/o", i));
  {
    auto all_seen = [&r]() ABSL_SHARED_LOCKS_REQUIRED(r.mu) { return r.seen.size() >= 100; };
    absl::MutexLock lock(&r.mu, absl::Condition(&all_seen));
  }
  c.Stop();
  absl::MutexLock lock(&r.mu);
  EXPECT_EQ(r.seen.size(), 100u);
}

struct Size {
  int value = 0;
};

absl::StatusOr<Size> DecodeSize(const api::json::Value& object, const api::ObjectMeta&) {
  const api::json::Value* spec = api::json::Find(object, "spec");
  if (spec == nullptr || !spec->IsObject()) return absl::InvalidArgumentError("spec: missing");
  const api::json::Value* size = api::json::Find(*spec, "size");
  if (size == nullptr || !size->IsInt()) return absl::InvalidArgumentError("spec.size: not an int");
  return Size{size->GetInt()};
}

std::string Obj(const std::string& ns, const std::string& name, const std::string& size) {
  return absl::StrCat(R"({"metadata":{"namespace":")", ns, R"(","name":")", name,
                      R"(","uid":"u-)", name, R"(","resourceVersion":"1"},"spec":{"size":)", size,
                      "}}");
}

TEST(TypedCache, KeepsDecodedObjectsAndQueuesEveryChangedKey) {
  FakeClock clock;
  WorkQueue q(&clock);
  TypedCache<Size> cache("Thing", DecodeSize, &q);
  testing::List(&cache, {Obj("a", "one", "1"), Obj("b", "two", "2")});
  EXPECT_TRUE(cache.synced());
  EXPECT_EQ(Drain(q), (std::vector<std::string>{"a/one", "b/two"}));
  ASSERT_TRUE(cache.Get("a/one").has_value());
  EXPECT_EQ(cache.Get("a/one")->value.value, 1);
  EXPECT_EQ(cache.Get("a/one")->meta.uid, "u-one");

  testing::Put(&cache, Obj("a", "one", "5"));
  EXPECT_EQ(cache.Get("a/one")->value.value, 5);
  testing::Delete(&cache, Obj("b", "two", "2"));
  EXPECT_FALSE(cache.Get("b/two").has_value());
  EXPECT_EQ(Drain(q), (std::vector<std::string>{"a/one", "b/two"}));

  // A relist without a/one: it is gone, and its key is queued.
  testing::List(&cache, {Obj("c", "three", "3")});
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(Drain(q), (std::vector<std::string>{"c/three", "a/one"}));
}

TEST(TypedCache, AnObjectThatNoLongerDecodesIsDroppedReportedAndQueued) {
  FakeClock clock;
  WorkQueue q(&clock);
  TypedCache<Size> cache("Thing", DecodeSize, &q);
  testing::Put(&cache, Obj("a", "one", "1"));
  Drain(q);
  testing::Put(&cache, Obj("a", "one", R"("big")"));
  EXPECT_FALSE(cache.Get("a/one").has_value()) << "a stale copy must not be acted on";
  ASSERT_EQ(cache.errors().count("a/one"), 1u);
  EXPECT_EQ(cache.errors().at("a/one").message(), "spec.size: not an int");
  EXPECT_EQ(Drain(q), std::vector<std::string>{"a/one"});
  testing::Put(&cache, Obj("a", "one", "2"));
  EXPECT_TRUE(cache.errors().empty());
  EXPECT_EQ(cache.List().size(), 1u);
}

}  // namespace
}  // namespace pdc::kube
