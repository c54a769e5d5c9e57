#include "common/crc32c.h"

#include <string>

#include "gtest/gtest.h"

namespace pdc {
namespace {

// Test vectors from RFC 3720 (iSCSI), section B.4.
TEST(Crc32cTest, StandardVectors) {
  EXPECT_EQ(crc32c::Value(std::string(32, '\0')), 0x8a9136aau);
  EXPECT_EQ(crc32c::Value(std::string(32, '\xff')), 0x62a8ab43u);
  std::string ascending(32, '\0');
  for (int i = 0; i < 32; ++i) ascending[i] = static_cast<char>(i);
  EXPECT_EQ(crc32c::Value(ascending), 0x46dd794eu);
  EXPECT_EQ(crc32c::Value("123456789"), 0xe3069283u);
}

TEST(Crc32cTest, ExtendEqualsWhole) {
  std::string s = "hello persistent device claims, of any length 0123456789";
  for (size_t cut = 0; cut <= s.size(); ++cut) {
    uint32_t part = crc32c::Extend(0, s.data(), cut);
    EXPECT_EQ(crc32c::Extend(part, s.data() + cut, s.size() - cut), crc32c::Value(s));
  }
}

TEST(Crc32cTest, MaskRoundTripsAndDiffers) {
  uint32_t c = crc32c::Value("foo");
  EXPECT_NE(crc32c::Mask(c), c);
  EXPECT_EQ(crc32c::Unmask(crc32c::Mask(c)), c);
}

}  // namespace
}  // namespace pdc
