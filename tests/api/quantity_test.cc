// Kubernetes quantities read as whole device counts. The accepted inputs and
// their values are those of resource.ParseQuantity (its own test table gives
// most rows); what Kubernetes accepts but is not a whole number, is below
// zero or above the bound is refused, each with its own reason.
#include "api/quantity.h"

#include <cstdint>
#include <string>

#include "api/json_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace pdc::api::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kBig = INT64_MAX;  // No bound but int64.

struct Case {
  std::string text;
  QuantityProblem problem;
  int64_t value = 0;
  int64_t max = kBig;
};

std::string Name(const ::testing::TestParamInfo<Case>& info) {
  return std::to_string(info.index);
}

class WholeQuantityTest : public ::testing::TestWithParam<Case> {};

TEST_P(WholeQuantityTest, ReadsAsKubernetesDoes) {
  const Case& c = GetParam();
  const WholeQuantity q = ParseWholeQuantity(c.text, c.max);
  EXPECT_EQ(q.problem, c.problem) << "\"" << c.text << "\"";
  if (c.problem == QuantityProblem::kNone) {
    EXPECT_EQ(q.value, c.value) << c.text;
  }
}

constexpr QuantityProblem kOk = QuantityProblem::kNone;
constexpr QuantityProblem kSyntax = QuantityProblem::kSyntax;
constexpr QuantityProblem kNegative = QuantityProblem::kNegative;
constexpr QuantityProblem kNotWhole = QuantityProblem::kNotWhole;
constexpr QuantityProblem kTooLarge = QuantityProblem::kTooLarge;

INSTANTIATE_TEST_SUITE_P(
    Table, WholeQuantityTest,
    ::testing::Values(
        // Plain numbers, signs and zeros.
        Case{"1", kOk, 1}, Case{"0", kOk, 0}, Case{"+1", kOk, 1}, Case{"007", kOk, 7},
        Case{"-0", kOk, 0}, Case{"+0", kOk, 0}, Case{"0.0", kOk, 0}, Case{"1.", kOk, 1},
        Case{"1.000", kOk, 1}, Case{"-1", kNegative}, Case{"-1n", kNegative},
        Case{"-0.5", kNegative},
        // Go reads a number without digits as zero.
        Case{"+", kOk, 0}, Case{"-", kOk, 0}, Case{".", kOk, 0}, Case{"k", kOk, 0},
        Case{"Ki", kOk, 0}, Case{".Ki", kOk, 0}, Case{"e3", kOk, 0}, Case{"0e-10", kOk, 0},
        // ... except below nano, where it goes through inf.Dec, which refuses it.
        Case{"e-10", kSyntax}, Case{".e-10", kSyntax},
        // Decimal SI.
        Case{"1k", kOk, 1000}, Case{"8k", kOk, 8000}, Case{"50k", kOk, 50000},
        Case{"7M", kOk, 7000000}, Case{"6G", kOk, 6000000000}, Case{"5T", kOk, 5000000000000},
        Case{"2P", kOk, 2000000000000000}, Case{"1E", kOk, 1000000000000000000},
        Case{"1000m", kOk, 1}, Case{"1500m", kNotWhole}, Case{"3m", kNotWhole},
        Case{"2000000u", kOk, 2}, Case{"5n", kNotWhole}, Case{"1000000000n", kOk, 1},
        Case{"1.5k", kOk, 1500}, Case{".5k", kOk, 500}, Case{"100.035k", kOk, 100035},
        Case{"0.0005k", kNotWhole}, Case{"10.035M", kOk, 10035000}, Case{"1.G", kOk, 1000000000},
        Case{"1.01E", kOk, 1010000000000000000}, Case{"12E", kTooLarge},
        // Binary SI.
        Case{"1Ki", kOk, 1024}, Case{"8Ki", kOk, 8192}, Case{"7Mi", kOk, 7340032},
        Case{"3Ei", kOk, int64_t{3} << 60}, Case{"1Ei", kOk, int64_t{1} << 60},
        Case{"0.5Ki", kOk, 512}, Case{"0.5Mi", kOk, 524288}, Case{"100.035Ki", kNotWhole},
        Case{"9Ei", kTooLarge}, Case{"9223372036854775807Ki", kTooLarge},
        Case{"0.000000000001Ki", kNotWhole},
        // Decimal exponents.
        Case{"1e3", kOk, 1000}, Case{"1E6", kOk, 1000000}, Case{"2e0", kOk, 2},
        Case{"1.2e3", kOk, 1200}, Case{"1.3E+6", kOk, 1300000}, Case{"1E-3", kNotWhole},
        Case{"0.5e0", kNotWhole}, Case{"0.5e1", kOk, 5}, Case{"15e-1", kNotWhole},
        Case{"10e-1", kOk, 1}, Case{"1e18", kOk, 1000000000000000000}, Case{"1e19", kTooLarge},
        Case{"1e99999", kTooLarge},
        // The exponent is read as int64 and truncated to int32, as Go does.
        Case{"1e4294967296", kOk, 1}, Case{"1e4294967299", kOk, 1000},
        Case{"1e99999999999999999999", kSyntax},
        // Rounding up to a whole nano unit, as Go does, can make a number whole.
        Case{"0.9999999999", kOk, 1}, Case{"0.99999999", kNotWhole},
        Case{"0.0000000001", kNotWhole}, Case{"1.0000000001", kNotWhole},
        // int64 and beyond.
        Case{"9223372036854775807", kOk, INT64_MAX}, Case{"9223372036854775808", kTooLarge},
        Case{"99999999999999999999999999999999999999999", kTooLarge},
        Case{"0.00000000000000000000000000000000000000000001", kNotWhole},
        // The bound.
        Case{"4096", kOk, 4096, 4096}, Case{"4097", kTooLarge, 0, 4096},
        Case{"4Ki", kOk, 4096, 4096}, Case{"5k", kTooLarge, 0, 4096},
        Case{"1E", kTooLarge, 0, 4096}, Case{"1Ei", kTooLarge, 0, 4096},
        Case{"9223372036854775807", kTooLarge, 0, 4096}, Case{"0", kOk, 0, 0},
        // Not quantities (resource.ParseQuantity's invalid table and more).
        Case{"", kSyntax}, Case{" 1", kSyntax}, Case{"1 ", kSyntax}, Case{"1.1.M", kSyntax},
        Case{"1+1.0M", kSyntax}, Case{"0.1mi", kSyntax}, Case{"0.1am", kSyntax},
        Case{"aoeu", kSyntax}, Case{".5i", kSyntax}, Case{"1i", kSyntax},
        Case{"-3.01i", kSyntax}, Case{"-3.01e-", kSyntax}, Case{"1e", kSyntax},
        Case{"1K", kSyntax}, Case{"1KI", kSyntax}, Case{"1m5", kSyntax}, Case{"1e3e", kSyntax},
        Case{"1ee3", kSyntax}, Case{"0x10", kSyntax}, Case{"1,000", kSyntax},
        Case{"++1", kSyntax}, Case{"1_000", kSyntax}, Case{"1e+", kSyntax},
        Case{std::string("1\0", 2), kSyntax}, Case{"\xef\xbc\x91", kSyntax}),
    Name);

TEST(WholeQuantityFieldTest, EachRefusalNamesTheFieldAndTheReason) {
  const std::string f = R"(Pod.spec.containers[0].resources.requests["x.io/y"])";
  ASSERT_OK_AND_ASSIGN(int64_t two_k, ParseWholeQuantityField("2k", 4096, f, "devices"));
  EXPECT_EQ(two_k, 2000);
  struct Row {
    std::string text;
    std::string says;
  };
  for (const Row& r : {
           Row{"0.5", R"(quantity "0.5" of devices must be a whole number)"},
           Row{"-1", R"(quantity "-1" must not be negative)"},
           Row{"1E", R"(quantity "1E" is more than 4096 devices)"},
           Row{"1 ", R"(quantity "1 " is not a Kubernetes quantity)"},
       }) {
    absl::StatusOr<int64_t> v = ParseWholeQuantityField(r.text, 4096, f, "devices");
    ASSERT_FALSE(v.ok()) << r.text;
    EXPECT_THAT(std::string(v.status().message()), HasSubstr(r.says));
    EXPECT_EQ(json::FieldOf(v.status()), f);
    EXPECT_EQ(json::HttpStatusFor(v.status()), 422);
  }
}

TEST(WholeQuantityFieldTest, AHugeTextIsQuotedShort) {
  const std::string text(1 << 20, '9');
  absl::StatusOr<int64_t> v = ParseWholeQuantityField(text, 4096, "q", "devices");
  ASSERT_FALSE(v.ok());
  EXPECT_LT(v.status().message().size(), 400u);
  EXPECT_THAT(std::string(v.status().message()), Not(HasSubstr(std::string(100, '9'))));
  // A million digits below nano is linear work, and not whole.
  EXPECT_EQ(ParseWholeQuantity("0." + std::string(1 << 20, '0') + "1", 4096).problem,
            QuantityProblem::kNotWhole);
  EXPECT_EQ(ParseWholeQuantity("1" + std::string(1 << 20, '0') + "e-1048576", 4096).value, 1);
}

}  // namespace
}  // namespace pdc::api::testing
