#include "tests/testing/kube_token_review.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "common/strings.h"
#include "tests/testing/kube_json.h"

namespace pdc::testing::kube {
namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

void Strings(Writer& w, const std::vector<std::string>& v) {
  w.StartArray();
  for (const std::string& s : v) w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  w.EndArray();
}

void Key(Writer& w, std::string_view k) {
  w.Key(k.data(), static_cast<rapidjson::SizeType>(k.size()));
}

void Str(Writer& w, std::string_view s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

// Quoted list as Go's %q prints a []string: ["a" "b"].
std::string GoQuoted(const std::vector<std::string>& v) {
  std::vector<std::string> q;
  for (const std::string& s : v) q.push_back(absl::StrCat("\"", s, "\""));
  return absl::StrCat("[", absl::StrJoin(q, " "), "]");
}

}  // namespace

TokenIdentity PodBoundToken(std::string_view ns, std::string_view sa, std::string_view node,
                            std::vector<std::string> audiences) {
  TokenIdentity t;
  t.username = absl::StrCat("system:serviceaccount:", Sv(ns), ":", Sv(sa));
  t.uid = RandomUuid();
  t.groups = {"system:serviceaccounts", absl::StrCat("system:serviceaccounts:", Sv(ns)),
              "system:authenticated"};
  t.extra["authentication.kubernetes.io/pod-name"] = {absl::StrCat(Sv(sa), "-", Sv(node))};
  t.extra["authentication.kubernetes.io/pod-uid"] = {RandomUuid()};
  t.extra["authentication.kubernetes.io/node-name"] = {std::string(node)};
  t.extra["authentication.kubernetes.io/node-uid"] = {RandomUuid()};
  t.extra["authentication.kubernetes.io/credential-id"] = {absl::StrCat("JTI=", RandomUuid())};
  t.audiences = std::move(audiences);
  return t;
}

void TokenReviews::Register(std::string token, TokenIdentity who) {
  absl::MutexLock lock(&mu_);
  tokens_[std::move(token)] = std::move(who);
}

void TokenReviews::Forget(const std::string& token) {
  absl::MutexLock lock(&mu_);
  tokens_.erase(token);
}

Answer TokenReviews::Review(std::string_view body) const {
  absl::StatusOr<Document> doc = ParseObject(body, "TokenReview");
  if (!doc.ok()) return Answer{ApiErrorOf(doc.status()).code, StatusJson(doc.status())};
  const std::string token = GetString(*doc, {"spec", "token"});
  if (token.empty()) {
    const absl::Status s = BadRequest("token is required for TokenReview in authentication");
    return Answer{400, StatusJson(s)};
  }
  std::vector<std::string> asked = GetStrings(*doc, {"spec", "audiences"});
  const std::vector<std::string> spec_audiences = asked;
  if (asked.empty()) asked = api_audiences;

  bool authenticated = false;
  std::string error = "invalid bearer token";
  TokenIdentity who;
  std::vector<std::string> valid_for;
  {
    absl::MutexLock lock(&mu_);
    if (auto it = tokens_.find(token); it != tokens_.end()) {
      for (const std::string& a : asked) {
        if (std::find(it->second.audiences.begin(), it->second.audiences.end(), a) !=
            it->second.audiences.end()) {
          valid_for.push_back(a);
        }
      }
      if (valid_for.empty()) {
        error = absl::StrCat("[invalid bearer token, token audiences ",
                             GoQuoted(it->second.audiences),
                             " is invalid for the target audiences ", GoQuoted(asked), "]");
      } else {
        authenticated = true;
        who = it->second;
      }
    }
  }

  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.StartObject();
  Key(w, "kind");
  Str(w, "TokenReview");
  Key(w, "apiVersion");
  Str(w, "authentication.k8s.io/v1");
  Key(w, "metadata");
  w.StartObject();
  Key(w, "creationTimestamp");
  w.Null();
  w.EndObject();
  Key(w, "spec");
  w.StartObject();
  Key(w, "token");
  Str(w, token);
  if (!spec_audiences.empty()) {
    Key(w, "audiences");
    Strings(w, spec_audiences);
  }
  w.EndObject();
  Key(w, "status");
  w.StartObject();
  if (authenticated) {
    Key(w, "authenticated");
    w.Bool(true);
    Key(w, "user");
    w.StartObject();
    Key(w, "username");
    Str(w, who.username);
    Key(w, "uid");
    Str(w, who.uid);
    Key(w, "groups");
    Strings(w, who.groups);
    Key(w, "extra");
    w.StartObject();
    for (const auto& [k, v] : who.extra) {
      Key(w, k);
      Strings(w, v);
    }
    w.EndObject();
    w.EndObject();
    Key(w, "audiences");
    Strings(w, valid_for);
  } else {
    // authenticated is omitempty in the Go type: absent when false.
    Key(w, "user");
    w.StartObject();
    w.EndObject();
    Key(w, "error");
    Str(w, error);
  }
  w.EndObject();
  w.EndObject();
  return Answer{201, std::string(buf.GetString(), buf.GetSize())};
}

}  // namespace pdc::testing::kube
