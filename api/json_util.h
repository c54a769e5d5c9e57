// RapidJSON helpers shared by the scheduler wire format and the REST codecs:
// strict parsing (no trailing garbage), member lookup that is exact first and
// ASCII case-insensitive second (Go's encoding/json matches keys that way),
// typed getters that never assert on malformed input, and errors that carry
// the offending JSON field and the HTTP status they map to.
// Thread-safety: pure functions.
#ifndef PDC_API_JSON_UTIL_H_
#define PDC_API_JSON_UTIL_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "rapidjson/document.h"
#include "rapidjson/reader.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace pdc::api::json {

using Value = rapidjson::Value;

// rapidjson's Writer plus Text() (a key or a string value from a
// string_view) and Quoted() (a string already escaped once, see Quote(): the
// filter answer repeats a few distinct messages for thousands of nodes).
// pdc_api builds RapidJSON with RAPIDJSON_SSE2, so String() skips
// characters that need no escaping 16 at a time.
class Writer : public rapidjson::Writer<rapidjson::StringBuffer> {
 public:
  using rapidjson::Writer<rapidjson::StringBuffer>::Writer;

  bool Text(std::string_view s) {
    return String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  }
  // `quoted` is a complete JSON string literal (from Quote()).
  bool Quoted(std::string_view quoted) {
    return RawValue(quoted.data(), quoted.size(), rapidjson::kStringType);
  }
};

// `s` as a JSON string literal, quotes included.
std::string Quote(std::string_view s);

// RapidJSON built with RAPIDJSON_SSE2 skips whitespace and scans strings of a
// NUL-terminated text 16 aligned bytes at a time, so it reads up to 15 bytes
// past the terminating NUL. Such a load never crosses a page and cannot
// fault, but it is a read outside the string's bytes: an in-situ parse gets
// kInsituPadding zeroed bytes after the NUL, inside the allocation, so every
// byte RapidJSON reads is one the text owns (AddressSanitizer checks this).
inline constexpr size_t kInsituPadding = 16;
// Gives `text` kInsituPadding zeroed bytes of capacity after its NUL. No
// reallocation when the owner reserved size() + kInsituPadding, as the HTTP
// server does for every request body.
void PadForInsitu(std::string& text);

// Parses `text` in place (strings then point into `text`, which must outlive
// `doc`), after PadForInsitu. Malformed JSON or trailing garbage:
// InvalidArgument, HTTP 400.
// Objects and arrays nest at most this deep in anything pdc parses
// (Kubernetes objects nest a few dozen levels): RapidJSON's reader recurses
// once per level, and a worker thread's stack must not be the limit.
inline constexpr int kMaxDepth = 512;
// The error for a document nested deeper than kMaxDepth.
absl::Status TooDeepAt(size_t offset);

// Forwards the SAX events of a reader to `Handler` (a Document, or another
// handler) and stops the parse when objects and arrays nest deeper than
// kMaxDepth; too_deep() then says why it stopped.
template <typename Handler>
class DepthLimited {
 public:
  explicit DepthLimited(Handler& h) : h_(h) {}
  bool Null() { return h_.Null(); }
  bool Bool(bool b) { return h_.Bool(b); }
  bool Int(int i) { return h_.Int(i); }
  bool Uint(unsigned u) { return h_.Uint(u); }
  bool Int64(int64_t i) { return h_.Int64(i); }
  bool Uint64(uint64_t u) { return h_.Uint64(u); }
  bool Double(double d) { return h_.Double(d); }
  bool RawNumber(const char* s, rapidjson::SizeType n, bool copy) { return h_.RawNumber(s, n, copy); }
  bool String(const char* s, rapidjson::SizeType n, bool copy) { return h_.String(s, n, copy); }
  bool Key(const char* s, rapidjson::SizeType n, bool copy) { return h_.Key(s, n, copy); }
  bool StartObject() { return Enter() && h_.StartObject(); }
  bool EndObject(rapidjson::SizeType n) { --depth_; return h_.EndObject(n); }
  bool StartArray() { return Enter() && h_.StartArray(); }
  bool EndArray(rapidjson::SizeType n) { --depth_; return h_.EndArray(n); }
  bool too_deep() const { return too_deep_; }

 private:
  bool Enter() {
    if (++depth_ <= kMaxDepth) return true;
    too_deep_ = true;
    return false;
  }
  Handler& h_;
  int depth_ = 0;
  bool too_deep_ = false;
};

// Both parse at most kMaxDepth levels deep (TooDeepAt beyond).
absl::Status ParseInsitu(std::string& text, rapidjson::Document* doc);
// Same, copying strings into the document.
absl::Status Parse(std::string_view text, rapidjson::Document* doc);
// Parse() of a body that must be one JSON object (TypeError "" otherwise:
// ": is not a JSON object").
absl::Status ParseObject(std::string_view text, rapidjson::Document* doc);
// The error ParseInsitu/Parse return for a RapidJSON parse error (for
// callers that drive rapidjson::Reader themselves).
absl::Status ParseErrorAt(rapidjson::ParseErrorCode code, size_t offset);
// ASCII case-insensitive equality (Go's encoding/json key matching).
bool EqualsIgnoreCase(std::string_view a, std::string_view b);

// The member `key` of `obj`: an exact match first, else the first member
// whose name equals `key` ignoring ASCII case. nullptr when `obj` is not an
// object or has no such member. A JSON null member is returned as is.
const Value* Find(const Value& obj, std::string_view key);

// True when `v` is absent or JSON null (Go writes unused pointers as null).
inline bool IsNullish(const Value* v) { return v == nullptr || v->IsNull(); }

inline std::string_view StringOf(const Value& v) {
  return std::string_view(v.GetString(), v.GetStringLength());
}

// Errors naming a field. TypeError: the JSON has the wrong shape (HTTP 400).
// FieldError: the value is well-formed but not acceptable (HTTP 422).
absl::Status TypeError(std::string_view field, std::string_view message);
absl::Status FieldError(std::string_view field, std::string_view message);
// Attaches `field` and HTTP `status` to an existing error.
absl::Status WithField(absl::Status s, std::string_view field, int http_status);
// The field attached to `s`, "" when none.
std::string FieldOf(const absl::Status& s);
// The HTTP status for `s`: the attached one, else by code (NotFound 404,
// AlreadyExists/FailedPrecondition/Aborted 409, InvalidArgument 422,
// Unauthenticated 401, ResourceExhausted 409, Unavailable 503, else 500).
int HttpStatusFor(const absl::Status& s);

// Typed getters. `field` is the JSON path used in errors ("spec.count").
// Opt*: absent or null yields `def`; present with another type is TypeError.
absl::StatusOr<std::string_view> OptString(const Value& obj,
                                           std::string_view key,
                                           std::string_view field,
                                           std::string_view def = "");
// An optional object or array member: nullptr when absent or null,
// TypeError naming `field` when it is something else.
absl::StatusOr<const Value*> OptObject(const Value& obj, std::string_view key,
                                       std::string_view field);
absl::StatusOr<const Value*> OptArray(const Value& obj, std::string_view key,
                                      std::string_view field);
absl::StatusOr<std::string_view> ReqString(const Value& obj,
                                           std::string_view key,
                                           std::string_view field);
absl::StatusOr<int64_t> OptInt(const Value& obj, std::string_view key,
                               std::string_view field, int64_t def);
absl::StatusOr<int64_t> ReqInt(const Value& obj, std::string_view key,
                               std::string_view field);
absl::StatusOr<bool> OptBool(const Value& obj, std::string_view key,
                             std::string_view field, bool def);
// Counts and versions: an integer from 0 to 2^63-1 (FieldError below 0).
absl::StatusOr<uint64_t> OptCount(const Value& obj, std::string_view key,
                                  std::string_view field, uint64_t def);
absl::StatusOr<uint64_t> ReqCount(const Value& obj, std::string_view key,
                                  std::string_view field);

inline void Key(Writer& w, std::string_view k) { w.Text(k); }
inline void Str(Writer& w, std::string_view s) { w.Text(s); }
inline std::string_view Output(const rapidjson::StringBuffer& b) {
  return std::string_view(b.GetString(), b.GetSize());
}

// {"error": message, "field": field}
std::string ErrorBody(std::string_view message, std::string_view field);

}  // namespace pdc::api::json

#endif  // PDC_API_JSON_UTIL_H_
