// The REST error answer built from a codec error (field and HTTP status).
#include "extender/json_response.h"

#include "gtest/gtest.h"

namespace pdc::extender {
namespace {

TEST(JsonTest, ErrorResponseCarriesFieldAndStatus) {
  HttpResponse r = ErrorResponse(json::FieldError("spec.count", "must be >= 1"));
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(r.body, R"({"error":"spec.count: must be >= 1","field":"spec.count"})");
  EXPECT_EQ(ErrorResponse(absl::NotFoundError("x")).status, 404);
  EXPECT_EQ(ErrorResponse(absl::AlreadyExistsError("x")).status, 409);
  EXPECT_EQ(ErrorResponse(absl::UnavailableError("x")).status, 503);
}

}  // namespace
}  // namespace pdc::extender
