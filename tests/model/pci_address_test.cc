#include "model/pci_address.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace pdc {
namespace {

using ::pdc::testing::StatusIs;
using ::testing::HasSubstr;

TEST(PciAddressTest, ParsesAndFormatsCanonically) {
  struct Case {
    std::string in;
    std::string out;
  } cases[] = {
      {"0000:3b:00.0", "0000:3b:00.0"},
      {"0000:3B:00.0", "0000:3b:00.0"},
      {"ffff:ff:1f.7", "ffff:ff:1f.7"},
      {"0001:00:02.3", "0001:00:02.3"},
  };
  for (const Case& c : cases) {
    auto a = PciAddress::Parse(c.in);
    ASSERT_TRUE(a.ok()) << c.in << ": " << a.status();
    EXPECT_EQ(a->ToString(), c.out);
  }
}

TEST(PciAddressTest, RejectsMalformedWithMessageNamingInput) {
  const char* bad[] = {"",           "0000:3b:00",   "3b:00.0",      "0000:3b:00.8",
                       "0000:3b:20.0", "0000-3b-00.0", "000g:3b:00.0", "0000:3b:00.0 ",
                       "../../etc",  "0000:3b:00.00"};
  for (const char* in : bad) {
    EXPECT_THAT(PciAddress::Parse(in),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("invalid PCI address")))
        << in;
  }
}

TEST(PciAddressTest, OrdersLikeLspci) {
  auto a = *PciAddress::Parse("0000:3b:00.0");
  auto b = *PciAddress::Parse("0000:3b:00.1");
  auto c = *PciAddress::Parse("0000:5e:00.0");
  auto d = *PciAddress::Parse("0001:00:00.0");
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
  EXPECT_LT(c, d);
  EXPECT_EQ(PciAddress::FromPacked(c.packed()), c);
}

}  // namespace
}  // namespace pdc
