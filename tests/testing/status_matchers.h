// gtest matchers for absl::Status / absl::StatusOr (Debian's abseil 20220623
// ships none): EXPECT_THAT(s, IsOk()); EXPECT_THAT(s, StatusIs(code));
// EXPECT_THAT(s, StatusIs(code, HasSubstr("..."))); ASSERT_OK(expr).
#ifndef PDC_TESTS_TESTING_STATUS_MATCHERS_H_
#define PDC_TESTS_TESTING_STATUS_MATCHERS_H_

#include <ostream>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pdc::testing {

inline const absl::Status& GetStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

MATCHER(IsOk, "is OK") {
  const absl::Status& s = ::pdc::testing::GetStatus(arg);
  if (!s.ok()) *result_listener << "status is " << s;
  return s.ok();
}

MATCHER_P(StatusIs, code, "has code " + absl::StatusCodeToString(code)) {
  const absl::Status& s = ::pdc::testing::GetStatus(arg);
  *result_listener << "status is " << s;
  return s.code() == code;
}

MATCHER_P2(StatusIs, code, message_matcher,
           "has code " + absl::StatusCodeToString(code) + " and a matching message") {
  const absl::Status& s = ::pdc::testing::GetStatus(arg);
  *result_listener << "status is " << s;
  return s.code() == code &&
         ::testing::Matches(message_matcher)(std::string(s.message()));
}

}  // namespace pdc::testing

#define ASSERT_OK(expr) ASSERT_THAT((expr), ::pdc::testing::IsOk())
#define EXPECT_OK(expr) EXPECT_THAT((expr), ::pdc::testing::IsOk())

// ASSERT_OK_AND_ASSIGN(auto v, StatusOrExpr());
#define PDC_TEST_CONCAT_INNER_(a, b) a##b
#define PDC_TEST_CONCAT_(a, b) PDC_TEST_CONCAT_INNER_(a, b)
#define ASSERT_OK_AND_ASSIGN(lhs, rexpr) \
  PDC_ASSERT_OK_AND_ASSIGN_IMPL_(PDC_TEST_CONCAT_(pdc_sor_, __LINE__), lhs, rexpr)
#define PDC_ASSERT_OK_AND_ASSIGN_IMPL_(sor, lhs, rexpr) \
  auto sor = (rexpr);                                   \
  ASSERT_TRUE(sor.ok()) << sor.status();                \
  lhs = std::move(*sor)

#endif  // PDC_TESTS_TESTING_STATUS_MATCHERS_H_
