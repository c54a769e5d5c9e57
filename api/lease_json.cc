#include "api/lease_json.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "api/json_util.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "model/names.h"

namespace pdc::api {
namespace {

using json::Key;
using json::Value;
using json::Writer;

constexpr char kLeaseWhat[] = "Lease";

// A MicroTime member: absent or null is InfinitePast (a released or new
// lease); anything else must be RFC 3339.
absl::StatusOr<absl::Time> OptTime(const Value& spec, std::string_view key) {
  const std::string field = absl::StrCat(kLeaseWhat, ".spec.", Sv(key));
  ASSIGN_OR_RETURN(std::string_view text, json::OptString(spec, key, field));
  if (text.empty()) return absl::InfinitePast();
  absl::Time t;
  std::string err;
  if (!absl::ParseTime(absl::RFC3339_full, std::string(text), &t, &err)) {
    return json::FieldError(field,
                            absl::StrCat("is not an RFC 3339 time (", err,
                                         "): ", model::QuoteForMessage(text)));
  }
  return t;
}

absl::Status CheckHolder(std::string_view field, std::string_view s) {
  if (s.size() > kMaxHolderIdentityLength) {
    return json::FieldError(
        field,
        absl::StrCat("is longer than ", kMaxHolderIdentityLength, " bytes"));
  }
  for (char c : s) {
    if (c < ' ' || c > '~') {
      return json::FieldError(field, absl::StrCat("must be printable ASCII: ",
                                                  model::QuoteForMessage(s)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string MicroTime(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", t, absl::UTCTimeZone());
}

absl::StatusOr<Lease> ReadLease(std::string_view text) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::ParseObject(text, &doc));
  Lease lease;
  ASSIGN_OR_RETURN(lease.meta, ReadObjectMeta(doc, kLeaseWhat));
  ASSIGN_OR_RETURN(const Value* spec,
                   json::OptObject(doc, "spec", "Lease.spec"));
  if (spec == nullptr) return lease;  // An empty spec: nobody holds it.
  LeaderRecord& r = lease.record;
  ASSIGN_OR_RETURN(
      std::string_view holder,
      json::OptString(*spec, "holderIdentity", "Lease.spec.holderIdentity"));
  RETURN_IF_ERROR(CheckHolder("Lease.spec.holderIdentity", holder));
  r.holder = std::string(holder);
  ASSIGN_OR_RETURN(r.lease_duration_seconds,
                   json::OptInt(*spec, "leaseDurationSeconds",
                                "Lease.spec.leaseDurationSeconds", 0));
  if (r.lease_duration_seconds < 0 || r.lease_duration_seconds > 86400 * 365) {
    return json::FieldError(
        "Lease.spec.leaseDurationSeconds",
        absl::StrCat("must be between 0 and one year of seconds, not ",
                     r.lease_duration_seconds));
  }
  ASSIGN_OR_RETURN(r.acquire_time, OptTime(*spec, "acquireTime"));
  ASSIGN_OR_RETURN(r.renew_time, OptTime(*spec, "renewTime"));
  ASSIGN_OR_RETURN(r.transitions,
                   json::OptInt(*spec, "leaseTransitions",
                                "Lease.spec.leaseTransitions", 0));
  if (r.transitions < 0) {
    return json::FieldError("Lease.spec.leaseTransitions",
                            "must not be negative");
  }
  return lease;
}

std::string LeaseJson(std::string_view ns, std::string_view name,
                      std::string_view resource_version,
                      const LeaderRecord& record) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.StartObject();
  Key(w, "apiVersion");
  w.Text("coordination.k8s.io/v1");
  Key(w, "kind");
  w.Text("Lease");
  Key(w, "metadata");
  w.StartObject();
  Key(w, "name");
  w.Text(name);
  Key(w, "namespace");
  w.Text(ns);
  if (!resource_version.empty()) {
    Key(w, "resourceVersion");
    w.Text(resource_version);
  }
  w.EndObject();
  Key(w, "spec");
  w.StartObject();
  // client-go writes holderIdentity even when empty (a released lease).
  Key(w, "holderIdentity");
  w.Text(record.holder);
  Key(w, "leaseDurationSeconds");
  w.Int64(record.lease_duration_seconds);
  if (record.acquire_time != absl::InfinitePast()) {
    Key(w, "acquireTime");
    w.Text(MicroTime(record.acquire_time));
  }
  if (record.renew_time != absl::InfinitePast()) {
    Key(w, "renewTime");
    w.Text(MicroTime(record.renew_time));
  }
  Key(w, "leaseTransitions");
  w.Int64(record.transitions);
  w.EndObject();
  w.EndObject();
  return std::string(json::Output(buf));
}

}  // namespace pdc::api
