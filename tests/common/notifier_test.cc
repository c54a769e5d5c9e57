// Notifier: the version counter long-polls park on (common/notifier.h).
#include "common/notifier.h"

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

}  // namespace
}  // namespace pdc
