#include "tests/testing/etcd_client.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "net/http_client.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "tests/testing/sv_strings.h"

namespace pdc::testing {
namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

std::string B64(std::string_view s) { return absl::Base64Escape(Sv(s)); }

void Field(JsonWriter& w, const char* name, std::string_view text) {
  w.Key(name);
  w.String(text.data(), static_cast<rapidjson::SizeType>(text.size()));
}
// The gateway writes int64 as JSON strings and accepts them so.
void Int64Field(JsonWriter& w, const char* name, int64_t v) {
  Field(w, name, Cat(v));
}

int64_t GetInt64(const rapidjson::Value& obj, const char* name) {
  if (!obj.IsObject()) return 0;
  auto it = obj.FindMember(name);
  if (it == obj.MemberEnd()) return 0;
  int64_t v = 0;
  if (it->value.IsString()) {
    Atoi(std::string_view(it->value.GetString(), it->value.GetStringLength()),
         &v);
  } else if (it->value.IsInt64()) {
    v = it->value.GetInt64();
  }
  return v;
}

bool GetBool(const rapidjson::Value& obj, const char* name) {
  if (!obj.IsObject()) return false;
  auto it = obj.FindMember(name);
  return it != obj.MemberEnd() && it->value.IsBool() && it->value.GetBool();
}

std::string GetBytes(const rapidjson::Value& obj, const char* name) {
  if (!obj.IsObject()) return "";
  auto it = obj.FindMember(name);
  if (it == obj.MemberEnd() || !it->value.IsString()) return "";
  std::string out;
  absl::Base64Unescape(
      absl::string_view(it->value.GetString(), it->value.GetStringLength()),
      &out);
  return out;
}

const rapidjson::Value* Member(const rapidjson::Value& obj, const char* name) {
  if (!obj.IsObject()) return nullptr;
  auto it = obj.FindMember(name);
  return it == obj.MemberEnd() ? nullptr : &it->value;
}

EtcdKeyValue ParseKv(const rapidjson::Value& v) {
  EtcdKeyValue kv;
  kv.key = GetBytes(v, "key");
  kv.value = GetBytes(v, "value");
  kv.create_revision = GetInt64(v, "create_revision");
  kv.mod_revision = GetInt64(v, "mod_revision");
  kv.version = GetInt64(v, "version");
  return kv;
}

int64_t HeaderRevision(const rapidjson::Value& doc) {
  const rapidjson::Value* h = Member(doc, "header");
  return h == nullptr ? 0 : GetInt64(*h, "revision");
}

absl::Status ParseDoc(std::string_view text, rapidjson::Document* doc) {
  doc->Parse(text.data(), text.size());
  if (doc->HasParseError() || !doc->IsObject()) {
    return absl::InternalError(
        Cat("etcd answered something that is not a JSON object: ",
            text.substr(0, 200)));
  }
  return absl::OkStatus();
}

// {"error": ..., "message": ..., "code": <gRPC code>} from the gateway.
absl::Status EtcdError(int http_status, std::string_view body) {
  rapidjson::Document doc;
  doc.Parse(body.data(), body.size());
  int code = static_cast<int>(absl::StatusCode::kUnknown);
  std::string message(body.substr(0, 300));
  if (!doc.HasParseError() && doc.IsObject()) {
    if (const rapidjson::Value* c = Member(doc, "code");
        c != nullptr && c->IsInt()) {
      code = c->GetInt();
    }
    if (const rapidjson::Value* m = Member(doc, "message");
        m != nullptr && m->IsString()) {
      message = m->GetString();
    }
  }
  if (code <= 0 || code > 16)
    code = static_cast<int>(absl::StatusCode::kUnknown);
  return absl::Status(static_cast<absl::StatusCode>(code),
                      Cat("etcd (HTTP ", http_status, "): ", message));
}

void WriteOp(JsonWriter& w, const EtcdOp& op) {
  w.StartObject();
  switch (op.kind) {
    case EtcdOp::Kind::kPut:
      w.Key("request_put");
      w.StartObject();
      Field(w, "key", B64(op.key));
      Field(w, "value", B64(op.value));
      w.EndObject();
      break;
    case EtcdOp::Kind::kDelete:
      w.Key("request_delete_range");
      w.StartObject();
      Field(w, "key", B64(op.key));
      w.EndObject();
      break;
    case EtcdOp::Kind::kGet:
      w.Key("request_range");
      w.StartObject();
      Field(w, "key", B64(op.key));
      w.EndObject();
      break;
  }
  w.EndObject();
}

}  // namespace

std::string EtcdClient::PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() =
          static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // Every key.
}

EtcdClient::EtcdClient(std::vector<uint16_t> client_ports,
                       absl::Duration timeout)
    : ports_(std::move(client_ports)), timeout_(timeout) {
  absl::MutexLock lock(&mu_);
  idle_.resize(ports_.size());
}

EtcdClient::~EtcdClient() = default;

std::unique_ptr<HttpClient> EtcdClient::TakeClient(size_t endpoint) {
  {
    absl::MutexLock lock(&mu_);
    auto& idle = idle_[endpoint];
    if (!idle.empty()) {
      std::unique_ptr<HttpClient> c = std::move(idle.back());
      idle.pop_back();
      return c;
    }
  }
  HttpClientOptions o;
  o.base_url = Cat("http://127.0.0.1:", ports_[endpoint]);
  o.timeout = timeout_;
  o.peer_name = "etcd";
  o.user_agent = "pdc-kube-apiserver-double";
  absl::StatusOr<std::unique_ptr<HttpClient>> c = HttpClient::Create(o);
  return c.ok() ? std::move(*c) : nullptr;
}

void EtcdClient::ReturnClient(size_t endpoint,
                              std::unique_ptr<HttpClient> client) {
  absl::MutexLock lock(&mu_);
  idle_[endpoint].push_back(std::move(client));
}

absl::StatusOr<std::string> EtcdClient::Call(std::string_view path,
                                             const std::string& body) {
  size_t first;
  {
    absl::MutexLock lock(&mu_);
    first = preferred_;
  }
  absl::Status last = absl::UnavailableError("etcd: no endpoints");
  for (size_t i = 0; i < ports_.size(); ++i) {
    const size_t e = (first + i) % ports_.size();
    std::unique_ptr<HttpClient> c = TakeClient(e);
    if (c == nullptr)
      return absl::InternalError("etcd: cannot create an HTTP client");
    absl::StatusOr<HttpResponse> r = c->Post(path, body);
    if (!r.ok()) {
      last = r.status();
      continue;  // A dead member: its client is dropped, the next one tried.
    }
    ReturnClient(e, std::move(c));
    // A member cut off from the quorum answers 503 (gRPC Unavailable):
    // another member may serve it.
    if (r->status == 200) {
      absl::MutexLock lock(&mu_);
      preferred_ = e;
      return std::move(r->body);
    }
    last = EtcdError(r->status, r->body);
    if (!absl::IsUnavailable(last)) return last;
  }
  return last;
}

absl::StatusOr<EtcdRangeResult> EtcdClient::Range(std::string_view key,
                                                  std::string_view range_end,
                                                  int64_t revision,
                                                  int64_t limit) {
  rapidjson::StringBuffer b;
  JsonWriter w(b);
  w.StartObject();
  Field(w, "key", B64(key));
  if (!range_end.empty()) Field(w, "range_end", B64(range_end));
  if (revision > 0) Int64Field(w, "revision", revision);
  if (limit > 0) Int64Field(w, "limit", limit);
  w.EndObject();
  absl::StatusOr<std::string> text = Call("/v3/kv/range", b.GetString());
  if (!text.ok()) return text.status();
  rapidjson::Document doc;
  if (absl::Status s = ParseDoc(*text, &doc); !s.ok()) return s;
  EtcdRangeResult out;
  out.revision = HeaderRevision(doc);
  out.more = GetBool(doc, "more");
  out.count = GetInt64(doc, "count");
  if (const rapidjson::Value* kvs = Member(doc, "kvs");
      kvs != nullptr && kvs->IsArray()) {
    for (const rapidjson::Value& kv : kvs->GetArray())
      out.kvs.push_back(ParseKv(kv));
  }
  return out;
}

absl::StatusOr<int64_t> EtcdClient::Put(std::string_view key,
                                        std::string_view value) {
  rapidjson::StringBuffer b;
  JsonWriter w(b);
  w.StartObject();
  Field(w, "key", B64(key));
  Field(w, "value", B64(value));
  w.EndObject();
  absl::StatusOr<std::string> text = Call("/v3/kv/put", b.GetString());
  if (!text.ok()) return text.status();
  rapidjson::Document doc;
  if (absl::Status s = ParseDoc(*text, &doc); !s.ok()) return s;
  return HeaderRevision(doc);
}

absl::StatusOr<int64_t> EtcdClient::DeleteRange(std::string_view key,
                                                std::string_view range_end,
                                                int64_t* deleted) {
  rapidjson::StringBuffer b;
  JsonWriter w(b);
  w.StartObject();
  Field(w, "key", B64(key));
  if (!range_end.empty()) Field(w, "range_end", B64(range_end));
  w.EndObject();
  absl::StatusOr<std::string> text = Call("/v3/kv/deleterange", b.GetString());
  if (!text.ok()) return text.status();
  rapidjson::Document doc;
  if (absl::Status s = ParseDoc(*text, &doc); !s.ok()) return s;
  if (deleted != nullptr) *deleted = GetInt64(doc, "deleted");
  return HeaderRevision(doc);
}

absl::StatusOr<EtcdTxnResult> EtcdClient::Txn(
    const std::vector<EtcdCompare>& compares,
    const std::vector<EtcdOp>& success, const std::vector<EtcdOp>& failure) {
  rapidjson::StringBuffer b;
  JsonWriter w(b);
  w.StartObject();
  w.Key("compare");
  w.StartArray();
  for (const EtcdCompare& c : compares) {
    w.StartObject();
    Field(w, "key", B64(c.key));
    Field(w, "result", "EQUAL");
    switch (c.target) {
      case EtcdCompare::Target::kModRevision:
        Field(w, "target", "MOD");
        Int64Field(w, "mod_revision", c.value);
        break;
      case EtcdCompare::Target::kCreateRevision:
        Field(w, "target", "CREATE");
        Int64Field(w, "create_revision", c.value);
        break;
      case EtcdCompare::Target::kVersion:
        Field(w, "target", "VERSION");
        Int64Field(w, "version", c.value);
        break;
    }
    w.EndObject();
  }
  w.EndArray();
  w.Key("success");
  w.StartArray();
  for (const EtcdOp& op : success) WriteOp(w, op);
  w.EndArray();
  w.Key("failure");
  w.StartArray();
  for (const EtcdOp& op : failure) WriteOp(w, op);
  w.EndArray();
  w.EndObject();
  absl::StatusOr<std::string> text = Call("/v3/kv/txn", b.GetString());
  if (!text.ok()) return text.status();
  rapidjson::Document doc;
  if (absl::Status s = ParseDoc(*text, &doc); !s.ok()) return s;
  EtcdTxnResult out;
  out.succeeded = GetBool(doc, "succeeded");
  out.revision = HeaderRevision(doc);
  if (const rapidjson::Value* rs = Member(doc, "responses");
      rs != nullptr && rs->IsArray()) {
    for (const rapidjson::Value& r : rs->GetArray()) {
      const rapidjson::Value* range = Member(r, "response_range");
      if (range == nullptr) continue;
      if (const rapidjson::Value* kvs = Member(*range, "kvs");
          kvs != nullptr && kvs->IsArray()) {
        for (const rapidjson::Value& kv : kvs->GetArray())
          out.got.push_back(ParseKv(kv));
      }
    }
  }
  return out;
}

absl::Status EtcdClient::Compact(int64_t revision) {
  rapidjson::StringBuffer b;
  JsonWriter w(b);
  w.StartObject();
  Int64Field(w, "revision", revision);
  w.Key("physical");
  w.Bool(true);
  w.EndObject();
  return Call("/v3/kv/compaction", b.GetString()).status();
}

absl::StatusOr<int64_t> EtcdClient::CurrentRevision() {
  // The key "\0" is never written by the double.
  absl::StatusOr<EtcdRangeResult> r = Range(std::string(1, '\0'));
  if (!r.ok()) return r.status();
  return r->revision;
}

absl::StatusOr<EtcdWatchResponse> EtcdWatch::Next(absl::Time deadline) {
  absl::StatusOr<std::optional<std::string>> line = stream_->ReadLine(deadline);
  if (!line.ok()) return line.status();
  if (!line->has_value())
    return absl::UnavailableError("etcd ended the watch stream");
  rapidjson::Document doc;
  if (absl::Status s = ParseDoc(**line, &doc); !s.ok()) return s;
  const rapidjson::Value* result = Member(doc, "result");
  if (result == nullptr) {
    // {"error": {...}} when the stream fails.
    return absl::UnavailableError(
        Cat("etcd watch error: ", (*line)->substr(0, 300)));
  }
  EtcdWatchResponse out;
  out.revision = HeaderRevision(*result);
  out.created = GetBool(*result, "created");
  out.canceled = GetBool(*result, "canceled");
  out.compact_revision = GetInt64(*result, "compact_revision");
  if (const rapidjson::Value* r = Member(*result, "cancel_reason");
      r != nullptr && r->IsString()) {
    out.cancel_reason = r->GetString();
  }
  if (const rapidjson::Value* evs = Member(*result, "events");
      evs != nullptr && evs->IsArray()) {
    for (const rapidjson::Value& e : evs->GetArray()) {
      EtcdEvent ev;
      const rapidjson::Value* type = Member(e, "type");
      ev.type = type != nullptr && type->IsString() &&
                        std::string_view(type->GetString()) == "DELETE"
                    ? EtcdEvent::Type::kDelete
                    : EtcdEvent::Type::kPut;
      if (const rapidjson::Value* kv = Member(e, "kv"); kv != nullptr)
        ev.kv = ParseKv(*kv);
      if (const rapidjson::Value* pkv = Member(e, "prev_kv"); pkv != nullptr) {
        ev.prev_kv = ParseKv(*pkv);
      }
      out.events.push_back(std::move(ev));
    }
  }
  return out;
}

absl::StatusOr<std::unique_ptr<EtcdWatch>> EtcdClient::Watch(
    std::string_view key, std::string_view range_end, int64_t start_revision,
    bool prev_kv, bool progress_notify, EtcdWatchResponse* first) {
  rapidjson::StringBuffer b;
  JsonWriter w(b);
  w.StartObject();
  w.Key("create_request");
  w.StartObject();
  Field(w, "key", B64(key));
  if (!range_end.empty()) Field(w, "range_end", B64(range_end));
  if (start_revision > 0) Int64Field(w, "start_revision", start_revision);
  if (prev_kv) {
    w.Key("prev_kv");
    w.Bool(true);
  }
  if (progress_notify) {
    w.Key("progress_notify");
    w.Bool(true);
  }
  w.EndObject();
  w.EndObject();
  size_t first_endpoint;
  {
    absl::MutexLock lock(&mu_);
    first_endpoint = preferred_;
  }
  absl::Status last = absl::UnavailableError("etcd: no endpoints");
  for (size_t i = 0; i < ports_.size(); ++i) {
    const size_t e = (first_endpoint + i) % ports_.size();
    absl::StatusOr<std::unique_ptr<HttpStream>> s = HttpStream::Open(
        ports_[e], "POST", "/v3/watch", b.GetString(), {}, timeout_);
    if (!s.ok()) {
      last = s.status();
      continue;
    }
    if ((*s)->status() != 200) {
      absl::StatusOr<std::string> body = (*s)->ReadAll(absl::Now() + timeout_);
      last = EtcdError((*s)->status(), body.ok() ? *body : "");
      if (absl::IsUnavailable(last)) continue;
      return last;
    }
    auto watch = std::make_unique<EtcdWatch>(std::move(*s));
    absl::StatusOr<EtcdWatchResponse> r = watch->Next(absl::Now() + timeout_);
    if (!r.ok()) {
      last = r.status();
      continue;
    }
    if (first != nullptr) *first = std::move(*r);
    return watch;
  }
  return last;
}

}  // namespace pdc::testing
