// NamePool: equal names share one pooled copy, which lives as long as its
// last holder; "" is never pooled.
#include "allocator/name_pool.h"

#include <string>

#include "gtest/gtest.h"

namespace pdc {
namespace {

TEST(NamePoolTest, EqualNamesShareOneCopy) {
  NamePool pool;
  const std::string* a = pool.Intern("worker-1");
  const std::string* b = pool.Intern(std::string("worker-") + "1");
  const std::string* c = pool.Intern("worker-2");
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(*a, "worker-1");
  EXPECT_EQ(*c, "worker-2");
  EXPECT_EQ(pool.size(), 2u);
}

TEST(NamePoolTest, TheEmptyNameIsNotPooled) {
  NamePool pool;
  const std::string* e = pool.Intern("");
  EXPECT_EQ(e, nullptr);
  EXPECT_EQ(NamePool::Text(e), "");
  EXPECT_EQ(pool.size(), 0u);
  pool.Release(e);  // A no-op, as for any holder of "".
  EXPECT_EQ(pool.size(), 0u);
}

TEST(NamePoolTest, ANameGoesWithItsLastHolder) {
  NamePool pool;
  const std::string* a = pool.Intern("devices.kubevirt.io/nvme");
  const std::string* b = pool.Intern("devices.kubevirt.io/nvme");
  pool.Release(a);
  ASSERT_EQ(pool.size(), 1u);
  EXPECT_EQ(*b, "devices.kubevirt.io/nvme");  // Still held by b.
  pool.Release(b);
  EXPECT_EQ(pool.size(), 0u);
  const std::string* again = pool.Intern("devices.kubevirt.io/nvme");
  EXPECT_EQ(*again, "devices.kubevirt.io/nvme");
  EXPECT_EQ(pool.size(), 1u);
}

TEST(NamePoolTest, PooledCopiesStayPutWhileThePoolGrows) {
  NamePool pool;
  const std::string* first = pool.Intern("worker-0");
  for (int i = 1; i < 1000; ++i) pool.Intern("worker-" + std::to_string(i));
  EXPECT_EQ(pool.Intern("worker-0"), first);
  EXPECT_EQ(*first, "worker-0");
  EXPECT_EQ(pool.size(), 1000u);
}

}  // namespace
}  // namespace pdc
