// Reflector: keeps a local copy of one kind of Kubernetes object up to date,
// the way client-go's reflector does (k8s.io/client-go/tools/cache,
// reflector.go ListAndWatch), for pdc-extender's Kubernetes mode:
//  1. list, in pages (`limit`/`continue`), with no resourceVersion: a
//     consistent read from etcd, so the copy starts from the latest state;
//     a continue token that expired (410) starts the list again;
//  2. hand the whole list to the sink (Replace); the reflector is synced;
//  3. watch from the list's resourceVersion with allowWatchBookmarks and a
//     timeoutSeconds (randomised, as client-go does, so reflectors do not
//     reconnect together); every event goes to the sink in order, and its
//     resourceVersion (bookmarks' too) is where the next watch resumes;
//  4. a watch that ended (timeoutSeconds) resumes from there; one that
//     says 410 Gone / Expired (the version was compacted away) lists
//     again; any other failure waits a jittered exponential backoff
//     (`backoff_initial` doubling to `backoff_max`, reset by a healthy
//     watch) and resumes the watch, or lists again if there was no list.
// A watch event pdc cannot read (bad JSON, a field out of bounds, a line
// beyond `max_event_bytes`) is never skipped silently: the watch ends with
// the error and the reflector lists again, so the copy cannot drift.
//
// The sink sees events on the reflector's thread, one at a time; it owns
// what it keeps.
// Thread-safety: Start/Stop from one thread; HasSynced, WaitForSync and
// the counters from any.
#ifndef PDC_KUBE_KUBE_REFLECTOR_H_
#define PDC_KUBE_KUBE_REFLECTOR_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "api/json_util.h"
#include "api/kube_objects.h"
#include "kube/kube_http_client.h"
#include "net/http_client.h"

namespace pdc::kube {

// Marks the path of a collection some Reflector lists and watches, so that
// tests/deploy/check_manifests.py finds it and checks that pdc-extender's
// RBAC grants exactly list and watch on it.
constexpr std::string_view Reflected(std::string_view path) { return path; }
// Marks the path of a collection read with one paged list and no watch
// (the same check: RBAC grants list on it).
inline std::string Listed(std::string path) { return path; }

class ReflectorSink {
 public:
  virtual ~ReflectorSink() = default;
  // After a list: the objects are all there is (anything not among them is
  // gone). Each item is a whole object.
  virtual void Replace(const std::vector<const api::json::Value*>& items) = 0;
  // ADDED or MODIFIED.
  virtual void Upsert(const api::json::Value& object) = 0;
  // DELETED: the object as it was last.
  virtual void Remove(const api::json::Value& object) = 0;
};

// A whole collection read in pages (`limit`/`continue`, starting again when
// a continue token expired): the parsed pages, which own the items.
struct CollectionList {
  std::vector<std::unique_ptr<rapidjson::Document>> pages;
  std::vector<const api::json::Value*> items;
  std::string resource_version;  // Of the list.
};
// GETs one target ("<path>?limit=...").
using PageGetter = std::function<absl::StatusOr<HttpResponse>(const std::string& target)>;
// Lists `path` (with `selector` added to every page's query, "" = none);
// an answer that is not 200 is the apiserver's error (FromApiserver).
absl::Status ListCollection(const PageGetter& get, std::string_view path,
                            std::string_view selector, int64_t page_size, CollectionList* out);

struct ReflectorOptions {
  // The collection, all namespaces or one: "/api/v1/pods",
  // "/apis/kubevirt.io/v1/virtualmachines". Query parameters are added.
  std::string path;
  // Added to every list and watch, e.g. "fieldSelector=spec.schedulerName%3Dx"
  // (already encoded). "" = none.
  std::string selector;
  int64_t page_size = 500;
  // timeoutSeconds of a watch: uniform in [min_watch, 2 * min_watch), as
  // client-go's minWatchTimeout (5 min).
  absl::Duration min_watch = absl::Minutes(5);
  // A watch that delivers nothing, not even a bookmark, for this long is
  // presumed dead (kube-apiserver sends a bookmark about every minute).
  absl::Duration idle_timeout = absl::Minutes(2);
  absl::Duration backoff_initial = absl::Milliseconds(800);
  absl::Duration backoff_max = absl::Seconds(30);
  // One watch event's JSON at most (an object is at most ~1.5 MiB in etcd).
  size_t max_event_bytes = size_t{16} << 20;
  // Per list request.
  absl::Duration list_timeout = absl::Seconds(60);
};

class Reflector {
 public:
  // `endpoint` and `sink` outlive the reflector.
  Reflector(const KubeEndpoint* endpoint, ReflectorOptions options, ReflectorSink* sink);
  ~Reflector();  // Stop().
  Reflector(const Reflector&) = delete;
  Reflector& operator=(const Reflector&) = delete;

  void Start();
  // Ends the watch in progress at once and joins. Idempotent.
  void Stop();

  // True once a list reached the sink (and stays true: after a relist the
  // copy is complete again).
  bool HasSynced() const { return synced_.HasBeenNotified(); }
  bool WaitForSync(absl::Duration timeout) const {
    return synced_.WaitForNotificationWithTimeout(timeout);
  }

  // What happened so far, for metrics and tests.
  uint64_t lists() const { return lists_.load(); }
  uint64_t watches() const { return watches_.load(); }
  uint64_t events() const { return events_.load(); }
  // The resourceVersion the next watch starts from.
  std::string resource_version() const;

 private:
  // How one watch ended.
  enum class WatchEnd : uint8_t { kTimedOut, kGone, kUnreadable, kFailed, kStopped };

  void Run();
  // Lists every page and hands the list to the sink.
  absl::Status List();
  absl::Status ListPages(HttpClient& client);
  // Registers `client` as the one Stop cancels (nullptr: none); false when
  // stopping.
  bool SetActive(HttpClient* client);
  // One watch from resource_version_; `why` says what failed.
  WatchEnd Watch(std::string* why);
  // Parses and applies one line of the watch stream.
  absl::Status ApplyLine(std::string_view line, bool* gone);
  // Waits `d` or until Stop(); false when stopping.
  bool Sleep(absl::Duration d);
  std::string Target(std::string_view query) const;

  const KubeEndpoint* const endpoint_;
  const ReflectorOptions options_;
  ReflectorSink* const sink_;

  absl::Notification synced_;
  std::atomic<uint64_t> lists_{0};
  std::atomic<uint64_t> watches_{0};
  std::atomic<uint64_t> events_{0};

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::string resource_version_ ABSL_GUARDED_BY(mu_);
  // The client of the list or watch in progress, so Stop can cancel it.
  HttpClient* active_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::thread thread_;
};

}  // namespace pdc::kube

#endif  // PDC_KUBE_KUBE_REFLECTOR_H_
