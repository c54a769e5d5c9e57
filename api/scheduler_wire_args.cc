// Reading kube-scheduler's ExtenderArgs (filter, prioritize, preempt): the
// DOM reader, and the in-situ SAX parse the filter path uses, which keeps the
// NodeNames strings as views into the request buffer instead of DOM values.
// Split from scheduler_wire.cc; the declarations are in scheduler_wire.h.
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/scheduler_wire.h"
#include "api/validation.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "model/names.h"
#include "rapidjson/reader.h"

namespace pdc::api {
namespace {

using json::Find;
using json::IsNullish;
using json::StringOf;
using json::TypeError;
using json::Value;

}  // namespace

namespace {

// Node names are echoed back and may reach a message or a log line: each is
// held to a node name's length (a DNS-1123 subdomain, 253). Only the length:
// the thousands of names of a filter call are not checked character by
// character (an unknown name simply fails filter).
absl::Status CheckNameLengths(const std::vector<std::string_view>& names,
                              std::string_view before, std::string_view after) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i].size() > model::kDns1123SubdomainMaxLength) {
      return json::FieldError(
          absl::StrCat(Sv(before), i, Sv(after)),
          absl::StrCat(model::QuoteForMessage(names[i]), " is longer than a node name (",
                       model::kDns1123SubdomainMaxLength, " characters)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ExtenderArgs> ReadArgs(const Value& doc,
                                      const Value* captured_value,
                                      std::vector<std::string_view>* captured,
                                      bool unescaped) {
  if (!doc.IsObject()) return TypeError("", "ExtenderArgs must be an object");
  ExtenderArgs args;
  args.pod = Find(doc, "Pod");
  if (IsNullish(args.pod)) return TypeError("Pod", "is required");
  if (!args.pod->IsObject()) return TypeError("Pod", "must be an object");
  const Value* names = Find(doc, "NodeNames");
  const Value* nodes = Find(doc, "Nodes");
  if (!IsNullish(names)) {
    if (!names->IsArray()) {
      return TypeError("NodeNames", "must be an array of node names");
    }
    if (names == captured_value) {
      args.node_names = std::move(*captured);
      args.names_unescaped = unescaped;
    }
    args.node_names.reserve(names->Size());
    for (rapidjson::SizeType i = 0; i < names->Size(); ++i) {
      const Value& n = (*names)[i];
      if (!n.IsString()) {
        return TypeError(absl::StrCat("NodeNames[", i, "]"),
                         "must be a string");
      }
      args.node_names.push_back(StringOf(n));
    }
    if (!IsNullish(nodes)) {
      return TypeError("Nodes",
                       "must be null when NodeNames is set (nodeCacheCapable)");
    }
    RETURN_IF_ERROR(CheckNameLengths(args.node_names, "NodeNames[", "]"));
    return args;
  }
  if (IsNullish(nodes)) {
    return TypeError("NodeNames", "either NodeNames or Nodes is required");
  }
  if (!nodes->IsObject()) return TypeError("Nodes", "must be a NodeList object");
  args.node_list_mode = true;
  args.node_list = nodes;
  const Value* items = Find(*nodes, "items");
  if (IsNullish(items)) return args;  // An empty NodeList.
  if (!items->IsArray()) return TypeError("Nodes.items", "must be an array");
  args.node_items.reserve(items->Size());
  args.node_names.reserve(items->Size());
  for (rapidjson::SizeType i = 0; i < items->Size(); ++i) {
    const Value& node = (*items)[i];
    const std::string field = absl::StrCat("Nodes.items[", i, "].metadata.name");
    const Value* meta = Find(node, "metadata");
    if (IsNullish(meta) || !meta->IsObject()) {
      return TypeError(field, "is required");
    }
    ASSIGN_OR_RETURN(std::string_view name, json::ReqString(*meta, "name", field));
    args.node_items.push_back(&node);
    args.node_names.push_back(name);
  }
  RETURN_IF_ERROR(CheckNameLengths(args.node_names, "Nodes.items[", "].metadata.name"));
  return args;
}

// SAX events of an in-situ parse, forwarded to a Document (through
// Document::Populate), except the strings of the first top-level member
// named NodeNames (any case) when it is an array: those are kept as views
// into the parsed buffer and the Document gets an empty array. Anything but
// a plain string inside that array "spills": the strings kept so far and
// the rest go to the Document, which then holds the whole array as usual.
class NamesCapture {
 public:
  NamesCapture(rapidjson::Document* doc, std::vector<std::string_view>* names)
      : doc_(*doc), names_(*names) {}

  bool Null() { return Scalar() && doc_.Null(); }
  bool Bool(bool b) { return Scalar() && doc_.Bool(b); }
  bool Int(int i) { return Scalar() && doc_.Int(i); }
  bool Uint(unsigned u) { return Scalar() && doc_.Uint(u); }
  bool Int64(int64_t i) { return Scalar() && doc_.Int64(i); }
  bool Uint64(uint64_t u) { return Scalar() && doc_.Uint64(u); }
  bool Double(double d) { return Scalar() && doc_.Double(d); }
  bool RawNumber(const char* s, rapidjson::SizeType n, bool copy) {
    return Scalar() && doc_.RawNumber(s, n, copy);
  }
  bool String(const char* s, rapidjson::SizeType n, bool copy) {
    if (capturing_ && !spilled_ && depth_ == capture_depth_) {
      // Parsed in place, a string starts where its text did. When a name
      // starts exactly 3 bytes (quote, comma, quote) after the previous one
      // ends, the previous one's text had no escape (an escape makes the
      // text longer than the string), so it needs none; otherwise check it.
      if (!names_.empty()) {
        const std::string_view prev = names_.back();
        if (s != prev.data() + prev.size() + 3) CheckEscapes(prev);
      }
      names_.emplace_back(s, n);
      return true;
    }
    return Scalar() && doc_.String(s, n, copy);
  }
  bool StartObject() {
    Scalar();
    if (++depth_ > json::kMaxDepth) return TooDeep();
    return doc_.StartObject();
  }
  bool Key(const char* s, rapidjson::SizeType n, bool copy) {
    if (depth_ == 1) {
      if (!captured_ && json::EqualsIgnoreCase(std::string_view(s, n), "NodeNames")) {
        key_pending_ = true;
        member_ = members_;
      }
      ++members_;
    }
    return doc_.Key(s, n, copy);
  }
  bool EndObject(rapidjson::SizeType n) {
    --depth_;
    return doc_.EndObject(n);
  }
  bool StartArray() {
    const bool capture = key_pending_ && depth_ == 1;
    Scalar();
    if (++depth_ > json::kMaxDepth) return TooDeep();
    if (capture) {
      captured_ = capturing_ = true;
      capture_depth_ = depth_;
    }
    return doc_.StartArray();
  }
  bool EndArray(rapidjson::SizeType n) {
    if (capturing_ && depth_ == capture_depth_) {
      if (!spilled_ && !names_.empty()) CheckEscapes(names_.back());
      capturing_ = false;
      --depth_;
      return doc_.EndArray(spilled_ ? n : 0);
    }
    --depth_;
    return doc_.EndArray(n);
  }

  // The top-level member index whose array was kept as views, or -1.
  int captured_member() const {
    return captured_ && !spilled_ ? static_cast<int>(member_) : -1;
  }
  // No kept name needs a JSON escape (checked while the bytes are hot).
  bool unescaped() const { return unescaped_; }
  // The parse stopped at json::kMaxDepth.
  bool too_deep() const { return too_deep_; }

 private:
  bool TooDeep() {
    too_deep_ = true;
    return false;
  }

  void CheckEscapes(std::string_view name) {
    for (char ch : name) {
      const unsigned char c = static_cast<unsigned char>(ch);
      if (c < 0x20 || c == '"' || c == '\\') unescaped_ = false;
    }
  }

  // Before every value but a kept string.
  bool Scalar() {
    key_pending_ = false;
    if (capturing_ && !spilled_) {
      spilled_ = true;
      for (std::string_view v : names_) {
        doc_.String(v.data(), static_cast<rapidjson::SizeType>(v.size()), false);
      }
      names_.clear();
    }
    return true;
  }

  rapidjson::Document& doc_;
  std::vector<std::string_view>& names_;
  bool unescaped_ = true;
  bool too_deep_ = false;
  int depth_ = 0;
  size_t members_ = 0;
  size_t member_ = 0;
  bool key_pending_ = false;
  bool captured_ = false;
  bool capturing_ = false;
  bool spilled_ = false;
  int capture_depth_ = 0;
};

}  // namespace

absl::StatusOr<ExtenderArgs> ReadExtenderArgs(const Value& doc) {
  return ReadArgs(doc, nullptr, nullptr, false);
}

absl::StatusOr<ExtenderArgs> ParseExtenderArgs(std::string& body,
                                               rapidjson::Document* doc) {
  json::PadForInsitu(body);
  std::vector<std::string_view> names;
  NamesCapture capture(doc, &names);
  rapidjson::Reader reader;
  rapidjson::ParseResult result;
  auto generate = [&](rapidjson::Document& d) {
    rapidjson::InsituStringStream in(body.data());
    // The flags of Document::ParseInsitu: trailing garbage is an error.
    result = reader.Parse<rapidjson::kParseInsituFlag>(in, capture);
    return !result.IsError();
  };
  doc->Populate(generate);
  if (capture.too_deep()) return json::TooDeepAt(result.Offset());
  if (result.IsError()) return json::ParseErrorAt(result.Code(), result.Offset());
  const Value* captured_value = nullptr;
  if (const int m = capture.captured_member(); m >= 0 && doc->IsObject() &&
                                               static_cast<rapidjson::SizeType>(m) <
                                                   doc->MemberCount()) {
    captured_value = &(doc->MemberBegin() + m)->value;
  }
  return ReadArgs(*doc, captured_value, &names, capture.unescaped());
}

}  // namespace pdc::api
