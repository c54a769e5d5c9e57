#include "api/validation.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/json_util.h"
#include "common/strings.h"
#include "model/names.h"
#include "model/types.h"

namespace pdc::api {
namespace {

// Printable ASCII; a space only when `space` allows it.
bool Printable(std::string_view s, bool space) {
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c > 0x7e || (c == ' ' && !space)) return false;
  }
  return true;
}

// "" or a FieldError for a string that is too long or holds other bytes.
absl::Status Bounded(std::string_view field, std::string_view s, size_t max, bool space) {
  if (s.size() > max) {
    return json::FieldError(field, absl::StrCat(model::QuoteForMessage(s),
                                                " is longer than ", max, " bytes"));
  }
  if (!Printable(s, space)) {
    return json::FieldError(
        field, absl::StrCat(model::QuoteForMessage(s), " must be printable ASCII",
                            space ? "" : " without spaces"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateObjectName(std::string_view field, std::string_view s) {
  const std::string problem = model::ObjectNameProblem(s);
  return problem.empty() ? absl::OkStatus() : json::FieldError(field, problem);
}

absl::Status ValidateNamespace(std::string_view field, std::string_view s) {
  const std::string problem = model::NamespaceProblem(s);
  return problem.empty() ? absl::OkStatus() : json::FieldError(field, problem);
}

absl::Status ValidateUid(std::string_view field, std::string_view s) {
  if (s.empty()) return json::FieldError(field, "must not be empty");
  return Bounded(field, s, kMaxUidLength, /*space=*/false);
}

absl::Status ValidateSerial(std::string_view field, std::string_view s) {
  return Bounded(field, s, kMaxSerialLength, /*space=*/true);
}

absl::Status ValidateDriverName(std::string_view field, std::string_view s) {
  return Bounded(field, s, kMaxDriverNameLength, /*space=*/false);
}

absl::Status ValidateResourceName(std::string_view field, std::string_view s) {
  if (s.empty()) return json::FieldError(field, "must not be empty");
  const std::vector<std::string> problems = model::IsQualifiedName(s);
  if (problems.empty()) return absl::OkStatus();
  return json::FieldError(field, absl::StrCat(model::QuoteForMessage(s),
                                              " is not a valid resource name: ",
                                              absl::StrJoin(problems, "; ")));
}

absl::StatusOr<PciAddress> ParseAddress(std::string_view s, std::string_view field) {
  absl::StatusOr<PciAddress> a = PciAddress::Parse(s);
  if (!a.ok()) return json::FieldError(field, StdSv(a.status().message()));
  return *a;
}

}  // namespace pdc::api
