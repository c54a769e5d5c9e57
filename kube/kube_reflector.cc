#include "kube/kube_reflector.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/backoff.h"
#include "common/clock.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "net/http_url.h"
#include "rapidjson/document.h"
#include "spdlog/spdlog.h"

namespace pdc::kube {

namespace json = api::json;

namespace {

// A v1 Status with code 410: the resourceVersion asked for is gone
// (compacted), reason Expired or Gone.
bool IsGone(const json::Value& status) {
  absl::StatusOr<api::ApiStatus> s = api::ReadApiStatus(status);
  return s.ok() && s->code == 410;
}

}  // namespace

Reflector::Reflector(const KubeEndpoint* endpoint, ReflectorOptions options, ReflectorSink* sink)
    : endpoint_(endpoint), options_(std::move(options)), sink_(sink) {}

Reflector::~Reflector() { Stop(); }

void Reflector::Start() { thread_ = std::thread([this] { Run(); }); }

void Reflector::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (active_ != nullptr) active_->Cancel();
  }
  if (thread_.joinable()) thread_.join();
}

std::string Reflector::resource_version() const {
  absl::MutexLock lock(&mu_);
  return resource_version_;
}

std::string Reflector::Target(std::string_view query) const {
  std::string t = absl::StrCat(options_.path, "?", Sv(query));
  if (!options_.selector.empty()) absl::StrAppend(&t, "&", options_.selector);
  return t;
}

bool Reflector::Sleep(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  // Real time: the wait is for the apiserver, which runs on real time.
  mu_.AwaitWithTimeout(absl::Condition(&stopping_), d);
  return !stopping_;
}

void Reflector::Run() {
  absl::Duration backoff = absl::ZeroDuration();
  bool listed = false;
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
    std::string why;
    const char* const step = listed ? "watch" : "list";
    if (!listed) {
      absl::Status s = List();
      if (s.ok()) {
        listed = true;
        backoff = absl::ZeroDuration();
        continue;
      }
      if (absl::IsCancelled(s)) return;  // Stop() ended it.
      why = std::string(s.message());
    } else {
      switch (Watch(&why)) {
        case WatchEnd::kStopped:
          return;
        case WatchEnd::kTimedOut:
          backoff = absl::ZeroDuration();
          continue;
        case WatchEnd::kGone:
          spdlog::info("watch of {}: {}; listing again", options_.path, why);
          listed = false;
          continue;
        case WatchEnd::kUnreadable:
          // Resuming would skip the event pdc could not read: list again.
          listed = false;
          break;
        case WatchEnd::kFailed:
          break;
      }
    }
    backoff = NextBackoff(backoff, options_.backoff_initial, options_.backoff_max);
    const absl::Duration wait = Jittered(backoff, 0.5);
    spdlog::warn("{} of {} failed, retrying in {}: {}", step, options_.path,
                 absl::FormatDuration(wait), why);
    if (!Sleep(wait)) return;
  }
}

bool Reflector::SetActive(HttpClient* client) {
  absl::MutexLock lock(&mu_);
  active_ = client;
  return !stopping_;
}

absl::Status Reflector::List() {
  ASSIGN_OR_RETURN(std::unique_ptr<HttpClient> client, endpoint_->NewClient());
  if (!SetActive(client.get())) {
    SetActive(nullptr);
    return absl::CancelledError("stopping");
  }
  absl::Status s = ListPages(*client);
  SetActive(nullptr);
  return s;
}

absl::Status ListCollection(const PageGetter& get, std::string_view path,
                            std::string_view selector, int64_t page_size, CollectionList* out) {
  out->pages.clear();
  out->items.clear();
  std::string cont;
  for (;;) {
    std::string target = absl::StrCat(Sv(path), "?limit=", page_size);
    if (!cont.empty()) absl::StrAppend(&target, "&continue=", PercentEncode(cont));
    if (!selector.empty()) absl::StrAppend(&target, "&", Sv(selector));
    ASSIGN_OR_RETURN(pdc::HttpResponse r, get(target));
    if (r.status == 410 && !cont.empty()) {
      // The list's snapshot was compacted between pages: from the start.
      out->pages.clear();
      out->items.clear();
      cont.clear();
      continue;
    }
    if (r.status != 200) return FromApiserver(r.status, r.body, absl::StrCat("list ", target));
    auto doc = std::make_unique<rapidjson::Document>();
    RETURN_IF_ERROR(json::ParseObject(r.body, doc.get()));
    ASSIGN_OR_RETURN(api::ListMeta meta, api::ReadListMeta(*doc));
    ASSIGN_OR_RETURN(const json::Value* list, json::OptArray(*doc, "items", "List.items"));
    if (list != nullptr) {
      for (const json::Value& item : list->GetArray()) out->items.push_back(&item);
    }
    out->pages.push_back(std::move(doc));
    out->resource_version = meta.resource_version;
    if (meta.continue_token.empty()) return absl::OkStatus();
    cont = meta.continue_token;
  }
}

absl::Status Reflector::ListPages(HttpClient& client) {
  CollectionList list;
  RETURN_IF_ERROR(ListCollection(
      [&](const std::string& target) -> absl::StatusOr<pdc::HttpResponse> {
        ASSIGN_OR_RETURN(HttpRequestOptions ro, endpoint_->RequestOptions());
        ro.timeout = options_.list_timeout;
        return client.Get(target, ro);
      },
      options_.path, options_.selector, options_.page_size, &list));
  sink_->Replace(list.items);
  {
    absl::MutexLock lock(&mu_);
    resource_version_ = list.resource_version;
  }
  ++lists_;
  if (!synced_.HasBeenNotified()) synced_.Notify();
  return absl::OkStatus();
}

absl::Status Reflector::ApplyLine(std::string_view line, bool* gone) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::ParseObject(line, &doc));
  ASSIGN_OR_RETURN(api::WatchEvent e, api::ReadWatchEvent(doc));
  if (e.type == api::WatchEventType::kError) {
    if (IsGone(*e.object)) {
      *gone = true;
      return absl::OkStatus();
    }
    absl::StatusOr<api::ApiStatus> s = api::ReadApiStatus(*e.object);
    return absl::UnavailableError(absl::StrCat(
        "the watch answered an error: ", s.ok() ? s->message : std::string(s.status().message())));
  }
  // Every event but ERROR carries the object's (or the bookmark's)
  // resourceVersion: where the next watch resumes.
  const std::string_view kind =
      e.type == api::WatchEventType::kBookmark ? "Bookmark" : "WatchEvent.object";
  std::string rv;
  if (e.type == api::WatchEventType::kBookmark) {
    ASSIGN_OR_RETURN(const json::Value* meta,
                     json::OptObject(*e.object, "metadata", "Bookmark.metadata"));
    if (meta == nullptr) return json::TypeError("Bookmark.metadata", "is required");
    ASSIGN_OR_RETURN(std::string_view v, json::ReqString(*meta, "resourceVersion",
                                                         "Bookmark.metadata.resourceVersion"));
    rv = std::string(v);
  } else {
    ASSIGN_OR_RETURN(api::ObjectMeta meta, api::ReadObjectMeta(*e.object, kind));
    rv = meta.resource_version;
    if (e.type == api::WatchEventType::kDeleted) {
      sink_->Remove(*e.object);
    } else {
      sink_->Upsert(*e.object);
    }
    ++events_;
  }
  absl::MutexLock lock(&mu_);
  resource_version_ = std::move(rv);
  return absl::OkStatus();
}

Reflector::WatchEnd Reflector::Watch(std::string* why) {
  absl::StatusOr<std::unique_ptr<HttpClient>> client = endpoint_->NewClient();
  absl::StatusOr<HttpRequestOptions> ro = endpoint_->RequestOptions();
  if (!client.ok() || !ro.ok()) {
    *why = std::string((client.ok() ? ro.status() : client.status()).message());
    return WatchEnd::kFailed;
  }
  const int64_t seconds = absl::ToInt64Seconds(Jittered(options_.min_watch, 1.0));
  std::string rv;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return WatchEnd::kStopped;
    rv = resource_version_;
    active_ = client->get();
  }
  ++watches_;
  const std::string target =
      Target(absl::StrCat("watch=1&allowWatchBookmarks=true&resourceVersion=", PercentEncode(rv),
                          "&timeoutSeconds=", std::max<int64_t>(seconds, 1)));
  int status = 0;
  std::string error_body;  // Of an answer that is not 200.
  std::string pending;     // A line not complete yet.
  bool gone = false;
  absl::Status bad;  // An event pdc could not read.
  StreamCallbacks cb;
  cb.on_head = [&](const pdc::HttpResponse& head) {
    status = head.status;
    return true;
  };
  cb.on_data = [&](std::string_view piece) {
    if (status != 200) {
      error_body.append(piece.substr(0, 4096 - std::min<size_t>(error_body.size(), 4096)));
      return error_body.size() < 4096;
    }
    pending.append(piece);
    size_t start = 0;
    for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
      const std::string_view line = std::string_view(pending).substr(start, nl - start);
      if (line.empty()) continue;
      if (absl::Status s = ApplyLine(line, &gone); !s.ok()) {
        bad = std::move(s);
        return false;
      }
      if (gone) return false;
    }
    pending.erase(0, start);
    if (pending.size() > options_.max_event_bytes) {
      bad = absl::ResourceExhaustedError(
          absl::StrCat("a watch event is larger than ", options_.max_event_bytes, " bytes"));
      return false;
    }
    return true;
  };
  const absl::Status s = (*client)->Stream("GET", target, "", *ro, options_.idle_timeout, cb);
  {
    absl::MutexLock lock(&mu_);
    active_ = nullptr;
    if (stopping_) return WatchEnd::kStopped;
  }
  if (gone) {
    *why = absl::StrCat("resourceVersion ", rv, " is gone (410)");
    return WatchEnd::kGone;
  }
  if (!bad.ok()) {
    *why = absl::StrCat("cannot read the watch stream: ", bad.message());
    return WatchEnd::kUnreadable;
  }
  if (!s.ok()) {
    *why = std::string(s.message());
    return WatchEnd::kFailed;
  }
  if (status == 410) {
    *why = absl::StrCat("resourceVersion ", rv, " is gone (410)");
    return WatchEnd::kGone;
  }
  if (status != 200) {
    *why = std::string(FromApiserver(status, error_body, absl::StrCat("watch ", target)).message());
    return WatchEnd::kFailed;
  }
  return WatchEnd::kTimedOut;
}

}  // namespace pdc::kube
