#include "tests/testing/kube_list.h"

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "api/json_util.h"
#include "rapidjson/stringbuffer.h"
#include "tests/testing/sv_strings.h"

namespace pdc::testing::kube {
namespace {

// Messages of k8s.io/apiserver/pkg/storage/etcd3/errors.go
// (interpretListError).
constexpr std::string_view kExpiredList =
    "The resourceVersion for the provided list is too old.";
constexpr std::string_view kContinueExpired =
    "The provided continue parameter is too old to display a consistent list "
    "result. You can "
    "start a new list without the continue parameter.";

// storage.NewTooLargeResourceVersionError: 504, reason Timeout.
absl::Status TooLarge(int64_t want, int64_t current) {
  return ApiError({504, "Timeout"}, Cat("Too large resource version: ", want,
                                        ", current: ", current));
}

absl::StatusOr<int64_t> ParseVersion(std::string_view text,
                                     std::string_view what) {
  int64_t v = 0;
  if (!Atoi(text, &v) || v < 0) {
    return BadRequest(Cat(what, ": invalid value \"", text,
                          "\": must be a non-negative integer"));
  }
  return v;
}

}  // namespace

absl::StatusOr<FieldSelector> FieldSelector::Parse(std::string_view text) {
  FieldSelector sel;
  for (std::string_view raw : Split(text, ',', absl::SkipWhitespace())) {
    Term t;
    std::string_view path;
    size_t op;
    if ((op = raw.find("!=")) != std::string_view::npos) {
      t.equal = false;
      path = raw.substr(0, op);
      t.value = std::string(Strip(raw.substr(op + 2)));
    } else if ((op = raw.find("==")) != std::string_view::npos) {
      path = raw.substr(0, op);
      t.value = std::string(Strip(raw.substr(op + 2)));
    } else if ((op = raw.find('=')) != std::string_view::npos) {
      path = raw.substr(0, op);
      t.value = std::string(Strip(raw.substr(op + 1)));
    } else {
      return BadRequest(
          Cat("invalid fieldSelector \"", text,
              "\": expected path=value, path==value or path!=value"));
    }
    path = Strip(path);
    if (path.empty())
      return BadRequest(Cat("invalid fieldSelector \"", text, "\""));
    for (std::string_view part : Split(path, '.')) t.path.emplace_back(part);
    sel.terms_.push_back(std::move(t));
  }
  return sel;
}

bool FieldSelector::Matches(const Value& obj) const {
  for (const Term& t : terms_) {
    const Value* v = &obj;
    for (const std::string& k : t.path) {
      if (v == nullptr || !v->IsObject()) {
        v = nullptr;
        break;
      }
      auto it = v->FindMember(Value(rapidjson::StringRef(k.data(), k.size())));
      v = it == v->MemberEnd() ? nullptr : &it->value;
    }
    // A missing field reads as "" (fields.Set of the apiserver has every
    // supported field, empty when unset).
    std::string have;
    if (v != nullptr && v->IsString())
      have.assign(v->GetString(), v->GetStringLength());
    if (v != nullptr && v->IsInt64()) have = Cat(v->GetInt64());
    if (v != nullptr && v->IsBool()) have = v->GetBool() ? "true" : "false";
    if ((have == t.value) != t.equal) return false;
  }
  return true;
}

bool Selectors::Matches(const Value& obj) const {
  return labels.Matches(Find(obj, {"metadata", "labels"})) &&
         fields.Matches(obj);
}

absl::StatusOr<Selectors> Selectors::FromQuery(const Query& q) {
  Selectors s;
  if (auto it = q.find("labelSelector"); it != q.end()) {
    absl::StatusOr<LabelSelector> l = LabelSelector::Parse(it->second);
    if (!l.ok()) return l.status();
    s.labels = std::move(*l);
  }
  if (auto it = q.find("fieldSelector"); it != q.end()) {
    absl::StatusOr<FieldSelector> f = FieldSelector::Parse(it->second);
    if (!f.ok()) return f.status();
    s.fields = std::move(*f);
  }
  return s;
}

std::string EncodeContinue(std::string_view next_key_relative,
                           int64_t revision) {
  rapidjson::StringBuffer b;
  api::json::Writer w(b);
  w.StartObject();
  w.Text("v");
  w.Text("meta.k8s.io/v1");
  w.Text("rv");
  w.Int64(revision);
  w.Text("start");
  w.Text(next_key_relative);
  w.EndObject();
  return absl::WebSafeBase64Escape(
      absl::string_view(b.GetString(), b.GetSize()));
}

absl::StatusOr<std::pair<std::string, int64_t>> DecodeContinue(
    std::string_view token) {
  // continue.go DecodeContinue and its messages.
  auto bad = [](std::string_view why) {
    return BadRequest(Cat("continue key is not valid: ", why));
  };
  std::string json;
  if (!absl::WebSafeBase64Unescape(Sv(token), &json))
    return bad("not base64url");
  Document d;
  d.Parse(json.data(), json.size());
  if (d.HasParseError() || !d.IsObject()) return bad("not a JSON object");
  if (GetString(d, {"v"}) != "meta.k8s.io/v1") {
    return bad(
        "incorrect encoded start resourceVersion (version meta.k8s.io/v1)");
  }
  const int64_t rv = GetInt(d, {"rv"});
  if (rv <= 0)
    return bad(
        "incorrect encoded start resourceVersion (version meta.k8s.io/v1)");
  const std::string start = GetString(d, {"start"});
  if (start.empty()) return bad("encoded start key empty");
  // A start key may not climb out of the collection.
  if (StartsWith(start, "/") || Contains(start, "..")) {
    return bad("encoded start key is not a relative key");
  }
  return std::make_pair(start, rv);
}

absl::StatusOr<Answer> ListCollection(EtcdClient& etcd, const KubeResource& r,
                                      std::string_view ns, const Query& q) {
  auto param = [&](const char* k) {
    auto it = q.find(k);
    return it == q.end() ? std::string() : it->second;
  };
  const std::string rv_text = param("resourceVersion");
  const std::string match = param("resourceVersionMatch");
  const std::string cont = param("continue");
  int64_t limit = 0;
  if (const std::string l = param("limit"); !l.empty()) {
    absl::StatusOr<int64_t> v = ParseVersion(l, "limit");
    if (!v.ok()) return v.status();
    limit = *v;
  }
  absl::StatusOr<Selectors> sel = Selectors::FromQuery(q);
  if (!sel.ok()) return sel.status();
  int64_t rv = 0;
  if (!rv_text.empty()) {
    absl::StatusOr<int64_t> v = ParseVersion(rv_text, "resourceVersion");
    if (!v.ok()) return v.status();
    rv = *v;
  }
  // k8s.io/apimachinery/pkg/apis/meta/internalversion/validation/validation.go
  // ValidateListOptions.
  if (match != "" && match != "Exact" && match != "NotOlderThan") {
    return BadRequest(Cat("resourceVersionMatch: Unsupported value: \"", match,
                          "\": supported values: \"Exact\", \"NotOlderThan\""));
  }
  if (!match.empty() && rv_text.empty()) {
    return BadRequest(
        "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden "
        "unless "
        "resourceVersion is provided");
  }
  if (match == "Exact" && rv == 0) {
    return BadRequest(
        "resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is "
        "forbidden for resourceVersion \"0\"");
  }
  const std::string prefix = KubeStore::CollectionPrefix(r, ns);
  const std::string end = EtcdClient::PrefixEnd(prefix);
  std::string start = prefix;
  // The revision to read at: k8s.io/apiserver/pkg/storage/etcd3/store.go
  // GetList. 0 is "the newest".
  int64_t with_rev = 0;
  if (!cont.empty()) {
    if (!rv_text.empty() && rv_text != "0") {
      return BadRequest(
          "specifying resource version is not allowed when using continue");
    }
    absl::StatusOr<std::pair<std::string, int64_t>> c = DecodeContinue(cont);
    if (!c.ok()) return c.status();
    start = prefix + c->first;
    with_rev = c->second;
  } else if (match == "Exact") {
    with_rev = rv;
  } else if (match.empty() && rv > 0 && limit > 0) {
    with_rev = rv;  // The legacy exact match of a paged list.
  }
  const bool exact = with_rev > 0;
  std::vector<Document> items;
  std::string last_key;
  bool more = false;
  int64_t remaining = -1;
  for (;;) {
    absl::StatusOr<EtcdRangeResult> got =
        etcd.Range(start, end, with_rev, limit);
    if (!got.ok()) {
      const absl::Status& s = got.status();
      if (absl::IsOutOfRange(s) && Contains(s.message(), "compacted")) {
        return Expired(cont.empty() ? kExpiredList : kContinueExpired);
      }
      if (absl::IsOutOfRange(s) && Contains(s.message(), "future")) {
        absl::StatusOr<int64_t> now = etcd.CurrentRevision();
        return TooLarge(with_rev, now.ok() ? *now : 0);
      }
      return s;
    }
    if (with_rev == 0)
      with_rev = got->revision;  // Later pages read the same revision.
    size_t used = 0;
    for (const EtcdKeyValue& kv : got->kvs) {
      ++used;
      last_key = kv.key;
      absl::StatusOr<Document> obj = KubeStore::Decode(kv);
      if (!obj.ok()) return obj.status();
      if (sel->Matches(*obj)) items.push_back(std::move(*obj));
      if (limit > 0 && static_cast<int64_t>(items.size()) == limit) break;
    }
    const bool left_in_batch = used < got->kvs.size();
    if (limit > 0 && static_cast<int64_t>(items.size()) == limit) {
      more = left_in_batch || got->more;
      if (sel->labels.empty() && sel->fields.empty()) {
        remaining = got->count - static_cast<int64_t>(used);
      }
      break;
    }
    if (limit == 0 || !got->more) break;
    start =
        last_key + std::string(1, '\0');  // Fill the page from the next key.
  }
  if (!exact && rv > 0 && rv > with_rev) return TooLarge(rv, with_rev);
  Document list;
  auto& a = list.GetAllocator();
  list.SetObject();
  SetString(list, {"kind"}, r.kind + "List", a);
  SetString(list, {"apiVersion"}, r.api_version(), a);
  SetString(list, {"metadata", "resourceVersion"}, Cat(with_rev), a);
  if (more) {
    SetString(
        list, {"metadata", "continue"},
        EncodeContinue(last_key.substr(prefix.size()) + std::string(1, '\0'),
                       with_rev),
        a);
    if (remaining >= 0)
      Set(list, {"metadata", "remainingItemCount"}, Value(remaining), a);
  }
  Value array(rapidjson::kArrayType);
  for (Document& d : items) array.PushBack(Value(d, a), a);
  list.AddMember("items", array, a);
  return Answer{200, ToJson(list)};
}

}  // namespace pdc::testing::kube
