#include "extender/validation.h"

#include "absl/strings/str_cat.h"
#include "common/strings.h"
#include "extender/json_util.h"

namespace pdc::extender {
namespace {

bool IsAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

bool IsDnsName(std::string_view s, size_t max, bool allow_dot) {
  if (s.empty() || s.size() > max) return false;
  if (!IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  for (char c : s) {
    if (IsAlnum(c) || c == '-') continue;
    if (allow_dot && c == '.') continue;
    return false;
  }
  return true;
}

}  // namespace

bool IsDns1123Subdomain(std::string_view s) { return IsDnsName(s, 253, true); }
bool IsDns1123Label(std::string_view s) { return IsDnsName(s, 63, false); }

absl::Status ValidateObjectName(std::string_view field, std::string_view s) {
  if (IsDns1123Subdomain(s)) return absl::OkStatus();
  return json::FieldError(
      field, absl::StrCat("\"", Sv(s),
                          "\" is not a valid name: use lower-case letters, "
                          "digits, '-' and '.', starting and ending with a "
                          "letter or digit, at most 253 characters"));
}

absl::Status ValidateNamespace(std::string_view field, std::string_view s) {
  if (IsDns1123Label(s)) return absl::OkStatus();
  return json::FieldError(
      field, absl::StrCat("\"", Sv(s),
                          "\" is not a valid namespace: use lower-case "
                          "letters, digits and '-', at most 63 characters"));
}

}  // namespace pdc::extender
