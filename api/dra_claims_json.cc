#include "api/dra_claims_json.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "api/json_util.h"
#include "api/validation.h"
#include "common/status_macros.h"
#include "common/strings.h"

namespace pdc::api {
namespace {

using json::Key;
using json::Str;
using json::Value;
using json::Writer;

void WriteDraConsumer(Writer& w, const DraConsumerRef& c) {
  w.StartObject();
  Key(w, "name");
  Str(w, c.name);
  Key(w, "uid");
  Str(w, c.uid);
  w.EndObject();
}

void WriteDraDevice(Writer& w, const DraClaimDevice& d) {
  w.StartObject();
  Key(w, "request");
  Str(w, d.request);
  Key(w, "driver");
  Str(w, d.driver);
  Key(w, "pool");
  Str(w, d.pool);
  Key(w, "device");
  Str(w, d.device);
  Key(w, "serial");
  Str(w, d.serial);
  Key(w, "address");
  if (d.address.has_value()) {
    Str(w, d.address->ToString());
  } else {
    w.Null();
  }
  w.EndObject();
}

// Member `key` of `obj` as a string ("" when absent or null).
absl::StatusOr<std::string> DraString(const Value& obj, std::string_view key,
                                      std::string_view at) {
  ASSIGN_OR_RETURN(std::string_view s, json::OptString(obj, key, absl::StrCat(Sv(at), ".", Sv(key))));
  return std::string(s);
}

absl::StatusOr<DraConsumerRef> ParseDraConsumer(const Value& v, std::string_view at) {
  if (!v.IsObject()) return json::TypeError(at, "must be an object");
  DraConsumerRef c;
  ASSIGN_OR_RETURN(c.name, DraString(v, "name", at));
  ASSIGN_OR_RETURN(c.uid, DraString(v, "uid", at));
  return c;
}

absl::StatusOr<DraClaimDevice> ParseDraDevice(const Value& v, std::string_view at) {
  if (!v.IsObject()) return json::TypeError(at, "must be an object");
  DraClaimDevice d;
  ASSIGN_OR_RETURN(d.request, DraString(v, "request", at));
  ASSIGN_OR_RETURN(d.driver, DraString(v, "driver", at));
  ASSIGN_OR_RETURN(d.pool, DraString(v, "pool", at));
  ASSIGN_OR_RETURN(d.device, DraString(v, "device", at));
  ASSIGN_OR_RETURN(d.serial, DraString(v, "serial", at));
  ASSIGN_OR_RETURN(std::string address, DraString(v, "address", at));
  if (!address.empty()) {
    ASSIGN_OR_RETURN(d.address, ParseAddress(address, absl::StrCat(Sv(at), ".address")));
  }
  return d;
}

// The array member `key` of `obj`, each element read by `parse`.
template <typename T, typename F>
absl::StatusOr<std::vector<T>> ParseDraArray(const Value& obj, std::string_view key,
                                             std::string_view at, F parse) {
  const std::string field = at.empty() ? std::string(key) : absl::StrCat(Sv(at), ".", Sv(key));
  ASSIGN_OR_RETURN(const Value* list, json::OptArray(obj, key, field));
  std::vector<T> out;
  if (list == nullptr) return out;
  for (rapidjson::SizeType i = 0; i < list->Size(); ++i) {
    ASSIGN_OR_RETURN(T t, parse((*list)[i], absl::StrCat(field, "[", i, "]")));
    out.push_back(std::move(t));
  }
  return out;
}

absl::StatusOr<DraClaimView> ParseDraClaimView(const Value& v, std::string_view at) {
  if (!v.IsObject()) return json::TypeError(at, "must be an object");
  DraClaimView c;
  ASSIGN_OR_RETURN(c.ns, DraString(v, "namespace", at));
  ASSIGN_OR_RETURN(c.name, DraString(v, "name", at));
  ASSIGN_OR_RETURN(c.uid, DraString(v, "uid", at));
  ASSIGN_OR_RETURN(c.allocated, json::OptBool(v, "allocated", absl::StrCat(Sv(at), ".allocated"),
                                              false));
  ASSIGN_OR_RETURN(c.devices, ParseDraArray<DraClaimDevice>(v, "devices", at, ParseDraDevice));
  ASSIGN_OR_RETURN(const Value* vm, json::OptObject(v, "vm", absl::StrCat(Sv(at), ".vm")));
  if (vm != nullptr) {
    ASSIGN_OR_RETURN(c.vm, ParseDraConsumer(*vm, absl::StrCat(Sv(at), ".vm")));
  }
  ASSIGN_OR_RETURN(c.persisted, json::OptBool(v, "persisted", absl::StrCat(Sv(at), ".persisted"),
                                              false));
  ASSIGN_OR_RETURN(c.pods, ParseDraArray<DraConsumerRef>(v, "pods", at, ParseDraConsumer));
  return c;
}

}  // namespace

std::string WriteDraClaimList(const DraClaimList& list) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.StartObject();
  Key(w, "keeper");
  w.Bool(list.keeper);
  Key(w, "synced");
  w.Bool(list.synced);
  if (!list.note.empty()) {
    Key(w, "note");
    Str(w, list.note);
  }
  Key(w, "items");
  w.StartArray();
  for (const DraClaimView& c : list.items) {
    w.StartObject();
    Key(w, "namespace");
    Str(w, c.ns);
    Key(w, "name");
    Str(w, c.name);
    Key(w, "uid");
    Str(w, c.uid);
    Key(w, "allocated");
    w.Bool(c.allocated);
    Key(w, "devices");
    w.StartArray();
    for (const DraClaimDevice& d : c.devices) WriteDraDevice(w, d);
    w.EndArray();
    Key(w, "vm");
    if (c.vm.has_value()) {
      WriteDraConsumer(w, *c.vm);
    } else {
      w.Null();
    }
    Key(w, "persisted");
    w.Bool(c.persisted);
    Key(w, "pods");
    w.StartArray();
    for (const DraConsumerRef& p : c.pods) WriteDraConsumer(w, p);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return std::string(json::Output(buf));
}

absl::StatusOr<DraClaimList> ParseDraClaimList(std::string_view body) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::Parse(body, &doc));
  if (!doc.IsObject()) return json::TypeError("", "must be an object");
  DraClaimList out;
  ASSIGN_OR_RETURN(out.keeper, json::OptBool(doc, "keeper", "keeper", false));
  ASSIGN_OR_RETURN(out.synced, json::OptBool(doc, "synced", "synced", false));
  ASSIGN_OR_RETURN(std::string_view note, json::OptString(doc, "note", "note"));
  out.note = std::string(note);
  ASSIGN_OR_RETURN(out.items, ParseDraArray<DraClaimView>(doc, "items", "", ParseDraClaimView));
  return out;
}

}  // namespace pdc::api
