#include "api/token_review.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "api/json_util.h"
#include "common/status_macros.h"
#include "common/strings.h"

namespace pdc::api {
namespace {

using json::Key;
using json::Value;
using json::Writer;

// Most entries read from one list of the answer (groups, extra values,
// audiences): a service account has a handful.
constexpr size_t kMaxListEntries = 256;

// An optional array of strings at `obj[key]`.
absl::Status ReadStrings(const Value& obj, std::string_view key, std::string_view field,
                         std::vector<std::string>* out) {
  ASSIGN_OR_RETURN(const Value* list, json::OptArray(obj, key, field));
  if (list == nullptr) return absl::OkStatus();
  if (list->Size() > kMaxListEntries) {
    return json::FieldError(field, absl::StrCat("has more than ", kMaxListEntries, " entries"));
  }
  for (const Value& v : list->GetArray()) {
    if (!v.IsString()) return json::TypeError(field, "must be a list of strings");
    out->emplace_back(json::StringOf(v));
  }
  return absl::OkStatus();
}

}  // namespace

std::string TokenReviewJson(std::string_view token, absl::Span<const std::string> audiences) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.StartObject();
  Key(w, "apiVersion");
  json::Str(w, "authentication.k8s.io/v1");
  Key(w, "kind");
  json::Str(w, "TokenReview");
  Key(w, "spec");
  w.StartObject();
  Key(w, "token");
  json::Str(w, token);
  Key(w, "audiences");
  w.StartArray();
  for (const std::string& a : audiences) json::Str(w, a);
  w.EndArray();
  w.EndObject();
  w.EndObject();
  return std::string(json::Output(buf));
}

absl::StatusOr<TokenReviewStatus> ParseTokenReviewStatus(std::string_view body) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::ParseObject(body, &doc));
  TokenReviewStatus out;
  ASSIGN_OR_RETURN(const Value* status, json::OptObject(doc, "status", "TokenReview.status"));
  if (status == nullptr) return out;  // Not authenticated.
  ASSIGN_OR_RETURN(out.authenticated, json::OptBool(*status, "authenticated",
                                                    "TokenReview.status.authenticated", false));
  ASSIGN_OR_RETURN(std::string_view error,
                   json::OptString(*status, "error", "TokenReview.status.error"));
  out.error = std::string(error.substr(0, 1024));
  RETURN_IF_ERROR(
      ReadStrings(*status, "audiences", "TokenReview.status.audiences", &out.audiences));
  ASSIGN_OR_RETURN(const Value* user,
                   json::OptObject(*status, "user", "TokenReview.status.user"));
  if (user == nullptr) return out;
  ASSIGN_OR_RETURN(std::string_view username,
                   json::OptString(*user, "username", "TokenReview.status.user.username"));
  out.username = std::string(username);
  ASSIGN_OR_RETURN(std::string_view uid,
                   json::OptString(*user, "uid", "TokenReview.status.user.uid"));
  out.uid = std::string(uid);
  RETURN_IF_ERROR(ReadStrings(*user, "groups", "TokenReview.status.user.groups", &out.groups));
  ASSIGN_OR_RETURN(const Value* extra,
                   json::OptObject(*user, "extra", "TokenReview.status.user.extra"));
  if (extra != nullptr) {
    if (extra->MemberCount() > kMaxListEntries) {
      return json::FieldError("TokenReview.status.user.extra",
                              absl::StrCat("has more than ", kMaxListEntries, " keys"));
    }
    // A map: keys are matched exactly (json::Find would also match another
    // case).
    for (const auto& m : extra->GetObject()) {
      const std::string key(json::StringOf(m.name));
      const std::string field = absl::StrCat("TokenReview.status.user.extra[", key, "]");
      if (m.value.IsNull()) continue;
      if (!m.value.IsArray()) return json::TypeError(field, "must be a list of strings");
      std::vector<std::string>& values = out.extra[key];
      for (const Value& v : m.value.GetArray()) {
        if (!v.IsString()) return json::TypeError(field, "must be a list of strings");
        if (values.size() == kMaxListEntries) {
          return json::FieldError(field, absl::StrCat("has more than ", kMaxListEntries,
                                                      " values"));
        }
        values.emplace_back(json::StringOf(v));
      }
    }
  }
  return out;
}

}  // namespace pdc::api
