#include "tests/testing/kube_json.h"

#include <optional>
#include <random>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "api/json_util.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "tests/testing/sv_strings.h"

namespace pdc::testing::kube {
namespace {

constexpr char kCodeUrl[] = "pdc.kube/code";
constexpr char kReasonUrl[] = "pdc.kube/reason";
constexpr char kNameUrl[] = "pdc.kube/name";
constexpr char kGroupUrl[] = "pdc.kube/group";
constexpr char kKindUrl[] = "pdc.kube/kind";

absl::StatusCode CodeFor(int http) {
  switch (http) {
    case 400:
      return absl::StatusCode::kInvalidArgument;
    case 401:
      return absl::StatusCode::kUnauthenticated;
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 404:
      return absl::StatusCode::kNotFound;
    case 405:
      return absl::StatusCode::kUnimplemented;
    case 409:
      return absl::StatusCode::kAborted;
    case 410:
      return absl::StatusCode::kOutOfRange;
    case 415:
      return absl::StatusCode::kInvalidArgument;
    case 422:
      return absl::StatusCode::kInvalidArgument;
    case 503:
      return absl::StatusCode::kUnavailable;
    case 504:
      return absl::StatusCode::kDeadlineExceeded;
    default:
      return absl::StatusCode::kInternal;
  }
}

std::string Payload(const absl::Status& s, const char* url) {
  auto c = s.GetPayload(url);
  return c.has_value() ? std::string(*c) : std::string();
}

// The qualified resource "pods" or "persistentdeviceclaims.pdc.kubevirt.io"
// split into details.kind and details.group as the apiserver does.
void SplitQualified(std::string_view resource, ApiErrorInfo* info) {
  const size_t dot = resource.find('.');
  info->kind = std::string(resource.substr(0, dot));
  if (dot != std::string_view::npos)
    info->group = std::string(resource.substr(dot + 1));
}

absl::Mutex& RandomMu() {
  static absl::Mutex* mu = new absl::Mutex;
  return *mu;
}
std::mt19937_64& Random() {
  static std::mt19937_64 rng{std::random_device{}()};
  return rng;
}

}  // namespace

absl::Status ApiError(const ApiErrorInfo& info, std::string_view message) {
  absl::Status s(CodeFor(info.code), Sv(message));
  s.SetPayload(kCodeUrl, absl::Cord(Cat(info.code)));
  s.SetPayload(kReasonUrl, absl::Cord(info.reason));
  if (!info.name.empty()) s.SetPayload(kNameUrl, absl::Cord(info.name));
  if (!info.group.empty()) s.SetPayload(kGroupUrl, absl::Cord(info.group));
  if (!info.kind.empty()) s.SetPayload(kKindUrl, absl::Cord(info.kind));
  return s;
}

ApiErrorInfo ApiErrorOf(const absl::Status& s) {
  ApiErrorInfo info;
  int code = 0;
  if (Atoi(Payload(s, kCodeUrl), &code)) {
    info.code = code;
    info.reason = Payload(s, kReasonUrl);
    info.name = Payload(s, kNameUrl);
    info.group = Payload(s, kGroupUrl);
    info.kind = Payload(s, kKindUrl);
    return info;
  }
  if (absl::IsUnavailable(s)) {
    info.code = 503;
    info.reason = "ServiceUnavailable";
  } else if (absl::IsDeadlineExceeded(s)) {
    info.code = 504;
    info.reason = "Timeout";
  }
  return info;
}

std::string StatusJson(const absl::Status& s) {
  const ApiErrorInfo info = ApiErrorOf(s);
  rapidjson::StringBuffer b;
  api::json::Writer w(b);
  w.StartObject();
  w.Text("kind");
  w.Text("Status");
  w.Text("apiVersion");
  w.Text("v1");
  w.Text("metadata");
  w.StartObject();
  w.EndObject();
  w.Text("status");
  w.Text("Failure");
  w.Text("message");
  w.Text(StdSv(s.message()));
  w.Text("reason");
  w.Text(info.reason);
  if (!info.name.empty() || !info.kind.empty()) {
    w.Text("details");
    w.StartObject();
    if (!info.name.empty()) {
      w.Text("name");
      w.Text(info.name);
    }
    if (!info.group.empty()) {
      w.Text("group");
      w.Text(info.group);
    }
    if (!info.kind.empty()) {
      w.Text("kind");
      w.Text(info.kind);
    }
    w.EndObject();
  }
  w.Text("code");
  w.Int(info.code);
  w.EndObject();
  return std::string(b.GetString(), b.GetSize());
}

std::string SuccessStatusJson(int code) {
  return Cat(
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":)",
      code, "}");
}

absl::Status NotFound(std::string_view resource, std::string_view name) {
  ApiErrorInfo info{404, "NotFound", std::string(name)};
  SplitQualified(resource, &info);
  return ApiError(info, Cat(resource, " \"", name, "\" not found"));
}

absl::Status AlreadyExists(std::string_view resource, std::string_view name) {
  ApiErrorInfo info{409, "AlreadyExists", std::string(name)};
  SplitQualified(resource, &info);
  return ApiError(info, Cat(resource, " \"", name, "\" already exists"));
}

absl::Status Conflict(std::string_view resource, std::string_view name,
                      std::string_view why) {
  ApiErrorInfo info{409, "Conflict", std::string(name)};
  SplitQualified(resource, &info);
  return ApiError(info, Cat("Operation cannot be fulfilled on ", resource,
                            " \"", name, "\": ", why));
}

absl::Status BadRequest(std::string_view message) {
  return ApiError({400, "BadRequest"}, message);
}

absl::Status Invalid(std::string_view kind, std::string_view group,
                     std::string_view name, std::string_view why) {
  ApiErrorInfo info{422, "Invalid", std::string(name)};
  info.kind = std::string(kind);
  info.group = std::string(group);
  const std::string group_kind =
      group.empty() ? std::string(kind) : Cat(kind, ".", group);
  return ApiError(info, Cat(group_kind, " \"", name, "\" is invalid: ", why));
}

absl::Status Expired(std::string_view message) {
  return ApiError({410, "Expired"}, message);
}

absl::StatusOr<Document> ParseObject(std::string_view text,
                                     std::string_view what) {
  Document doc;
  absl::Status s = api::json::ParseObject(text, &doc);
  if (!s.ok()) {
    return BadRequest(
        Cat("the body of ", what, " is not a JSON object: ", s.message()));
  }
  return doc;
}

std::string ToJson(const Value& v) {
  rapidjson::StringBuffer b;
  rapidjson::Writer<rapidjson::StringBuffer> w(b);
  v.Accept(w);
  return std::string(b.GetString(), b.GetSize());
}

const Value* Find(const Value& obj,
                  std::initializer_list<std::string_view> path) {
  const Value* v = &obj;
  for (std::string_view k : path) {
    if (!v->IsObject()) return nullptr;
    auto it = v->FindMember(Value(rapidjson::StringRef(k.data(), k.size())));
    if (it == v->MemberEnd()) return nullptr;
    v = &it->value;
  }
  return v;
}

// The member `k` of the object `obj`, nullptr when absent. (A scan instead
// of FindMember: comparing RapidJSON's non-const member iterators is
// ambiguous in C++20 for clang.)
Value* Child(Value& obj, std::string_view k) {
  for (rapidjson::SizeType i = 0; i < obj.MemberCount(); ++i) {
    auto& m = obj.MemberBegin()[i];
    if (std::string_view(m.name.GetString(), m.name.GetStringLength()) == k)
      return &m.value;
  }
  return nullptr;
}

Value* FindMutable(Value& obj, std::initializer_list<std::string_view> path) {
  return const_cast<Value*>(Find(obj, path));
}

std::string GetString(const Value& obj,
                      std::initializer_list<std::string_view> path) {
  const Value* v = Find(obj, path);
  return v != nullptr && v->IsString()
             ? std::string(v->GetString(), v->GetStringLength())
             : std::string();
}

int64_t GetInt(const Value& obj, std::initializer_list<std::string_view> path) {
  const Value* v = Find(obj, path);
  return v != nullptr && v->IsInt64() ? v->GetInt64() : 0;
}

void Set(Value& obj, std::initializer_list<std::string_view> path, Value v,
         Allocator& a) {
  Value* cur = &obj;
  size_t i = 0;
  for (std::string_view k : path) {
    if (!cur->IsObject()) cur->SetObject();
    Value* child = Child(*cur, k);
    if (++i == path.size()) {
      if (child != nullptr) {
        *child = v;
      } else {
        cur->AddMember(
            Value(k.data(), static_cast<rapidjson::SizeType>(k.size()), a), v,
            a);
      }
      return;
    }
    if (child == nullptr) {
      cur->AddMember(
          Value(k.data(), static_cast<rapidjson::SizeType>(k.size()), a),
          Value(rapidjson::kObjectType), a);
      child = Child(*cur, k);
    }
    cur = child;
  }
}

void SetString(Value& obj, std::initializer_list<std::string_view> path,
               std::string_view s, Allocator& a) {
  Set(obj, path, Value(s.data(), static_cast<rapidjson::SizeType>(s.size()), a),
      a);
}

void Remove(Value& obj, std::initializer_list<std::string_view> path) {
  if (path.size() == 0) return;
  Value* parent = &obj;
  size_t i = 0;
  for (std::string_view k : path) {
    if (!parent->IsObject()) return;
    const Value key(rapidjson::StringRef(k.data(), k.size()));
    if (++i == path.size()) {
      parent->RemoveMember(key);
      return;
    }
    parent = Child(*parent, k);
    if (parent == nullptr) return;
  }
}

std::vector<std::string> GetStrings(
    const Value& obj, std::initializer_list<std::string_view> path) {
  std::vector<std::string> out;
  const Value* v = Find(obj, path);
  if (v == nullptr || !v->IsArray()) return out;
  for (const Value& e : v->GetArray()) {
    if (e.IsString()) out.emplace_back(e.GetString(), e.GetStringLength());
  }
  return out;
}

void ApplyMergePatch(Value& target, const Value& patch, Allocator& a) {
  // RFC 7386 section 2, MergePatch(Target, Patch).
  if (!patch.IsObject()) {
    target.CopyFrom(patch, a);
    return;
  }
  if (!target.IsObject()) target.SetObject();
  for (auto m = patch.MemberBegin(); m != patch.MemberEnd(); ++m) {
    if (m->value.IsNull()) {
      target.RemoveMember(m->name);
      continue;
    }
    Value* have = Child(target, std::string_view(m->name.GetString(),
                                                 m->name.GetStringLength()));
    if (have == nullptr) {
      Value fresh(rapidjson::kNullType);
      ApplyMergePatch(fresh, m->value, a);
      target.AddMember(Value(m->name, a), fresh, a);
    } else {
      ApplyMergePatch(*have, m->value, a);
    }
  }
}

absl::StatusOr<LabelSelector> LabelSelector::Parse(std::string_view text) {
  LabelSelector sel;
  auto bad = [&](std::string_view why) {
    return BadRequest(Cat("unable to parse requirement: labelSelector \"", text,
                          "\": ", why));
  };
  // Split on commas outside parentheses.
  std::vector<std::string> parts;
  std::string cur;
  int depth = 0;
  for (char c : text) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (depth != 0) return bad("unbalanced parentheses");
  parts.push_back(cur);
  for (std::string& raw : parts) {
    std::string_view p = Strip(raw);
    if (p.empty()) {
      if (parts.size() == 1) break;  // An empty selector matches everything.
      return bad("empty requirement");
    }
    Requirement r;
    auto values = [&](std::string_view list) -> absl::Status {
      list = Strip(list);
      if (!ConsumePrefix(&list, "(") || !ConsumeSuffix(&list, ")")) {
        return bad("expected a parenthesised value list");
      }
      for (std::string_view v : Split(list, ',')) {
        r.values.emplace_back(Strip(v));
      }
      return absl::OkStatus();
    };
    size_t op;
    if (ConsumePrefix(&p, "!")) {
      r.key = std::string(Strip(p));
      r.op = Requirement::Op::kNotExists;
    } else if ((op = p.find("!=")) != std::string_view::npos) {
      r.key = std::string(Strip(p.substr(0, op)));
      r.op = Requirement::Op::kNotIn;
      r.values.emplace_back(Strip(p.substr(op + 2)));
    } else if ((op = p.find("==")) != std::string_view::npos) {
      r.key = std::string(Strip(p.substr(0, op)));
      r.op = Requirement::Op::kIn;
      r.values.emplace_back(Strip(p.substr(op + 2)));
    } else if ((op = p.find('=')) != std::string_view::npos) {
      r.key = std::string(Strip(p.substr(0, op)));
      r.op = Requirement::Op::kIn;
      r.values.emplace_back(Strip(p.substr(op + 1)));
    } else if ((op = p.find(" notin ")) != std::string_view::npos) {
      r.key = std::string(Strip(p.substr(0, op)));
      r.op = Requirement::Op::kNotIn;
      if (absl::Status s = values(p.substr(op + 7)); !s.ok()) return s;
    } else if ((op = p.find(" in ")) != std::string_view::npos) {
      r.key = std::string(Strip(p.substr(0, op)));
      r.op = Requirement::Op::kIn;
      if (absl::Status s = values(p.substr(op + 4)); !s.ok()) return s;
    } else {
      r.key = std::string(p);
      r.op = Requirement::Op::kExists;
    }
    if (r.key.empty() || r.key.find_first_of(" ()!=") != std::string::npos) {
      return bad(Cat("invalid label key \"", r.key, "\""));
    }
    sel.requirements_.push_back(std::move(r));
  }
  return sel;
}

bool LabelSelector::Matches(const Value* labels) const {
  for (const Requirement& r : requirements_) {
    const Value* v = nullptr;
    if (labels != nullptr && labels->IsObject()) {
      auto it = labels->FindMember(
          Value(rapidjson::StringRef(r.key.data(), r.key.size())));
      if (it != labels->MemberEnd() && it->value.IsString()) v = &it->value;
    }
    const std::string_view have =
        v != nullptr ? std::string_view(v->GetString(), v->GetStringLength())
                     : "";
    auto in_values = [&] {
      for (const std::string& x : r.values) {
        if (x == have) return true;
      }
      return false;
    };
    switch (r.op) {
      case Requirement::Op::kIn:
        if (v == nullptr || !in_values()) return false;
        break;
      case Requirement::Op::kNotIn:
        if (v != nullptr && in_values()) return false;
        break;
      case Requirement::Op::kExists:
        if (v == nullptr) return false;
        break;
      case Requirement::Op::kNotExists:
        if (v != nullptr) return false;
        break;
    }
  }
  return true;
}

std::string RandomUuid() {
  uint64_t hi, lo;
  {
    absl::MutexLock lock(&RandomMu());
    hi = Random()();
    lo = Random()();
  }
  hi = (hi & ~uint64_t{0xf000}) | 0x4000;                      // Version 4.
  lo = (lo & ~(uint64_t{0xc} << 60)) | (uint64_t{0x8} << 60);  // Variant 10.
  return absl::StrFormat("%08x-%04x-%04x-%04x-%012x", hi >> 32,
                         (hi >> 16) & 0xffff, hi & 0xffff, lo >> 48,
                         lo & 0xffffffffffffULL);
}

std::string RandomSuffix(int n) {
  static constexpr std::string_view kAlphabet = "bcdfghjklmnpqrstvwxz2456789";
  std::string out;
  absl::MutexLock lock(&RandomMu());
  for (int i = 0; i < n; ++i)
    out.push_back(kAlphabet[Random()() % kAlphabet.size()]);
  return out;
}

std::string Rfc3339(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

}  // namespace pdc::testing::kube
