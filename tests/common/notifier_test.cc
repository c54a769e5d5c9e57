// Notifier: the version counter long-polls park on (common/notifier.h).
#include "common/notifier.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pdc {
namespace {

TEST(NotifierTest, SubscribeRunsOnceAfterABump) {
  Notifier n;
  int runs = 0;
  const auto id = n.Subscribe(0, [&] { ++runs; });
  EXPECT_NE(id, 0u);
  EXPECT_EQ(runs, 0);
  n.Bump();
  n.Bump();
  EXPECT_EQ(runs, 1);
  // Already past `seen`: runs at once.
  EXPECT_EQ(n.Subscribe(0, [&] { ++runs; }), 0u);
  EXPECT_EQ(runs, 2);
  const auto cancelled = n.Subscribe(n.version(), [&] { ++runs; });
  n.Cancel(cancelled);
  n.Bump();
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(n.WaitFor(0, absl::ZeroDuration()), n.version());
}

TEST(NotifierTest, ATopicBumpWakesThatTopicAndTheTopicless) {
  Notifier n;
  int a = 0;
  int b = 0;
  int any = 0;
  const uint64_t seen = n.version();
  ASSERT_NE(n.Subscribe("a", seen, [&] { ++a; }), 0u);
  ASSERT_NE(n.Subscribe("b", seen, [&] { ++b; }), 0u);
  ASSERT_NE(n.Subscribe(seen, [&] { ++any; }), 0u);
  EXPECT_EQ(n.pending(), 3u);

  n.Bump(std::vector<std::string>{"a"});
  EXPECT_EQ(a, 1);
  EXPECT_EQ(b, 0);
  EXPECT_EQ(any, 1);
  EXPECT_EQ(n.pending(), 1u);
  EXPECT_EQ(n.version("a"), n.version());
  EXPECT_EQ(n.version("b"), seen);

  // A bump naming nothing wakes only the topicless.
  n.Bump(std::vector<std::string>{});
  EXPECT_EQ(b, 0);
  EXPECT_EQ(n.pending(), 1u);

  // b's subscription taken late, at a version "b" has not passed: parks.
  // At a version "a" has passed: runs at once.
  EXPECT_NE(n.Subscribe("b", seen, [&] { ++b; }), 0u);
  EXPECT_EQ(n.Subscribe("a", seen, [&] { ++a; }), 0u);
  EXPECT_EQ(a, 2);

  n.Bump(std::vector<std::string>{"b", "c"});
  EXPECT_EQ(b, 2);
  EXPECT_EQ(n.pending(), 0u);
}

TEST(NotifierTest, ABumpOfEverythingWakesEveryTopic) {
  Notifier n;
  int runs = 0;
  const uint64_t seen = n.version();
  ASSERT_NE(n.Subscribe("a", seen, [&] { ++runs; }), 0u);
  ASSERT_NE(n.Subscribe("b", seen, [&] { ++runs; }), 0u);
  n.Bump();
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(n.pending(), 0u);
  // Every topic's version moved with it, also one never named.
  EXPECT_EQ(n.version("never"), n.version());
  EXPECT_EQ(n.Subscribe("never", seen, [&] { ++runs; }), 0u);
  EXPECT_EQ(runs, 3);
}

TEST(NotifierTest, CancelDropsATopicSubscription) {
  Notifier n;
  int runs = 0;
  const auto a = n.Subscribe("a", n.version(), [&] { ++runs; });
  const auto b = n.Subscribe("a", n.version(), [&] { ++runs; });
  n.Cancel(a);
  EXPECT_EQ(n.pending(), 1u);
  n.Bump(std::vector<std::string>{"a"});
  EXPECT_EQ(runs, 1);
  n.Cancel(b);  // Already ran: no effect.
  EXPECT_EQ(n.pending(), 0u);
}

TEST(NotifierTest, RetireForgetsAFinishedTopicButNotOneSomebodyWaitsOn) {
  Notifier n;
  n.Bump(std::vector<std::string>{"bind/1", "bind/2"});
  EXPECT_EQ(n.topics(), 2u);
  int runs = 0;
  n.Subscribe("bind/2", n.version(), [&] { ++runs; });
  n.Retire("bind/1");
  n.Retire("bind/2");  // Waited on: kept.
  EXPECT_EQ(n.topics(), 1u);
  // A retired topic counts from the last bump of everything again, so a
  // waiter that read its version before the retirement is not lost.
  const uint64_t seen = n.version("bind/1");
  n.Subscribe("bind/1", seen, [&] { ++runs; });
  n.Bump(std::vector<std::string>{"bind/1", "bind/2"});
  EXPECT_EQ(runs, 2);
}

}  // namespace
}  // namespace pdc
