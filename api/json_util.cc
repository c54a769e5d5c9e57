#include "api/json_util.h"

#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/strings.h"
#include "rapidjson/encodedstream.h"
#include "rapidjson/error/en.h"
#include "rapidjson/memorystream.h"

namespace pdc::api::json {
namespace {

constexpr char kFieldPayload[] = "pdc.kubevirt.io/field";
constexpr char kHttpPayload[] = "pdc.kubevirt.io/http-status";

// Parses `in` into `doc` through DepthLimited.
template <unsigned kFlags, typename Stream>
absl::Status ParseLimited(Stream& in, rapidjson::Document* doc) {
  rapidjson::Reader reader;
  rapidjson::ParseResult result;
  bool too_deep = false;
  auto generate = [&](rapidjson::Document& d) {
    DepthLimited<rapidjson::Document> limited(d);
    result = reader.Parse<kFlags>(in, limited);
    too_deep = limited.too_deep();
    return !result.IsError();
  };
  doc->Populate(generate);
  if (too_deep) return TooDeepAt(result.Offset());
  if (result.IsError()) return ParseErrorAt(result.Code(), result.Offset());
  return absl::OkStatus();
}

}  // namespace

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

absl::Status TooDeepAt(size_t offset) {
  return WithField(absl::InvalidArgumentError(absl::StrCat(
                       "malformed JSON at offset ", offset, ": objects and arrays nest deeper than ",
                       kMaxDepth, " levels")),
                   "", 400);
}

absl::Status ParseObject(std::string_view text, rapidjson::Document* doc) {
  if (absl::Status s = Parse(text, doc); !s.ok()) return s;
  if (!doc->IsObject()) return TypeError("", "is not a JSON object");
  return absl::OkStatus();
}

absl::Status ParseErrorAt(rapidjson::ParseErrorCode code, size_t offset) {
  return WithField(
      absl::InvalidArgumentError(absl::StrCat("malformed JSON at offset ", offset,
                                              ": ", rapidjson::GetParseError_En(code))),
      "", 400);
}

void PadForInsitu(std::string& text) {
  // resize() zero-fills the new bytes; shrinking back never gives capacity
  // back (libstdc++) and leaves them in place behind the terminating NUL.
  const size_t size = text.size();
  text.resize(size + kInsituPadding, '\0');
  text.resize(size);
}

absl::Status ParseInsitu(std::string& text, rapidjson::Document* doc) {
  PadForInsitu(text);
  // kParseStopWhenDoneFlag is deliberately not used: trailing garbage after
  // the root value is an error (kParseErrorDocumentRootNotSingular).
  rapidjson::InsituStringStream in(text.data());
  return ParseLimited<rapidjson::kParseInsituFlag>(in, doc);
}

absl::Status Parse(std::string_view text, rapidjson::Document* doc) {
  rapidjson::MemoryStream memory(text.data(), text.size());
  rapidjson::EncodedInputStream<rapidjson::UTF8<>, rapidjson::MemoryStream> in(memory);
  return ParseLimited<rapidjson::kParseDefaultFlags>(in, doc);
}

const Value* Find(const Value& obj, std::string_view key) {
  if (!obj.IsObject()) return nullptr;
  for (auto it = obj.MemberBegin(); it != obj.MemberEnd(); ++it) {
    if (StringOf(it->name) == key) return &it->value;
  }
  for (auto it = obj.MemberBegin(); it != obj.MemberEnd(); ++it) {
    if (EqualsIgnoreCase(StringOf(it->name), key)) return &it->value;
  }
  return nullptr;
}

absl::Status WithField(absl::Status s, std::string_view field,
                       int http_status) {
  s.SetPayload(kFieldPayload, absl::Cord(Sv(field)));
  s.SetPayload(kHttpPayload, absl::Cord(absl::StrCat(http_status)));
  return s;
}

absl::Status TypeError(std::string_view field, std::string_view message) {
  return WithField(
      absl::InvalidArgumentError(absl::StrCat(Sv(field), ": ", Sv(message))),
      field, 400);
}

absl::Status FieldError(std::string_view field, std::string_view message) {
  return WithField(
      absl::InvalidArgumentError(absl::StrCat(Sv(field), ": ", Sv(message))),
      field, 422);
}

std::string FieldOf(const absl::Status& s) {
  auto f = s.GetPayload(kFieldPayload);
  return f ? std::string(*f) : std::string();
}

int HttpStatusFor(const absl::Status& s) {
  if (auto h = s.GetPayload(kHttpPayload)) {
    int code = 0;
    if (absl::SimpleAtoi(std::string(*h), &code)) return code;
  }
  switch (s.code()) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kResourceExhausted:
      return 409;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return 422;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

absl::StatusOr<std::string_view> OptString(const Value& obj,
                                           std::string_view key,
                                           std::string_view field,
                                           std::string_view def) {
  const Value* v = Find(obj, key);
  if (IsNullish(v)) return def;
  if (!v->IsString()) return TypeError(field, "must be a string");
  return StringOf(*v);
}

absl::StatusOr<std::string_view> ReqString(const Value& obj,
                                           std::string_view key,
                                           std::string_view field) {
  const Value* v = Find(obj, key);
  if (IsNullish(v)) return TypeError(field, "is required");
  if (!v->IsString()) return TypeError(field, "must be a string");
  return StringOf(*v);
}

absl::StatusOr<int64_t> OptInt(const Value& obj, std::string_view key,
                               std::string_view field, int64_t def) {
  const Value* v = Find(obj, key);
  if (IsNullish(v)) return def;
  if (!v->IsInt64()) return TypeError(field, "must be an integer");
  return v->GetInt64();
}

absl::StatusOr<int64_t> ReqInt(const Value& obj, std::string_view key,
                               std::string_view field) {
  const Value* v = Find(obj, key);
  if (IsNullish(v)) return TypeError(field, "is required");
  if (!v->IsInt64()) return TypeError(field, "must be an integer");
  return v->GetInt64();
}

namespace {

absl::StatusOr<uint64_t> Count(const Value& v, std::string_view field) {
  if (!v.IsInt64()) return TypeError(field, "must be an integer");
  if (v.GetInt64() < 0) return FieldError(field, "must not be negative");
  return static_cast<uint64_t>(v.GetInt64());
}

}  // namespace

absl::StatusOr<uint64_t> OptCount(const Value& obj, std::string_view key,
                                  std::string_view field, uint64_t def) {
  const Value* v = Find(obj, key);
  if (IsNullish(v)) return def;
  return Count(*v, field);
}

absl::StatusOr<uint64_t> ReqCount(const Value& obj, std::string_view key,
                                  std::string_view field) {
  const Value* v = Find(obj, key);
  if (IsNullish(v)) return TypeError(field, "is required");
  return Count(*v, field);
}

absl::StatusOr<bool> OptBool(const Value& obj, std::string_view key,
                             std::string_view field, bool def) {
  const Value* v = Find(obj, key);
  if (IsNullish(v)) return def;
  if (!v->IsBool()) return TypeError(field, "must be true or false");
  return v->GetBool();
}

std::string Quote(std::string_view s) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.Text(s);
  return std::string(Output(buf));
}

std::string ErrorBody(std::string_view message, std::string_view field) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.StartObject();
  Key(w, "error");
  Str(w, message);
  Key(w, "field");
  Str(w, field);
  w.EndObject();
  return std::string(Output(buf));
}

absl::StatusOr<const Value*> OptObject(const Value& obj, std::string_view key,
                                       std::string_view field) {
  const Value* v = Find(obj, key);
  if (IsNullish(v)) return nullptr;
  if (!v->IsObject()) return TypeError(field, "must be an object");
  return v;
}

absl::StatusOr<const Value*> OptArray(const Value& obj, std::string_view key,
                                      std::string_view field) {
  const Value* v = Find(obj, key);
  if (IsNullish(v)) return nullptr;
  if (!v->IsArray()) return TypeError(field, "must be an array");
  return v;
}

}  // namespace pdc::api::json
