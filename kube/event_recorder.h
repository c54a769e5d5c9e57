// Kubernetes Events about pdc-extender's decisions (a claim bound, lost,
// recovered, released; a hand-off cancelled), so `kubectl describe` on a
// PersistentDeviceClaim or a pod tells the story. It follows client-go's
// tools/record:
//  - EventCorrelator (pure): an event equal to one seen before (same
//    involved object, type, reason and message) within `window` of its last
//    occurrence is the same Event with count + 1 and a new lastTimestamp;
//    a token bucket per involved object (burst 25, one more every 5 minutes)
//    drops floods. As in client-go, an event is counted in its Event's
//    count before the spam filter looks at it.
//  - EventRecorder: Record() checks and bounds the input, stamps the time
//    and queues; one background thread correlates and sends: a new Event is
//    a POST of a core/v1 Event, a repeat a merge PATCH of count and
//    lastTimestamp (a PATCH answered 404, the Event expired, becomes a POST
//    under the same name). Transient failures (5xx, 429, transport) are
//    retried with backoff a few times; then, and on any other error, the
//    event is logged and dropped. Nothing of this ever reaches the caller.
//
//   EventRecorder events(api, "pdc-extender", hostname, RealClock());
//   events.Record({"v1", "Pod", "ns1", "virt-launcher-vm1-abcde", uid},
//                 EventType::kNormal, "ClaimBound", "claim ns1/c1 bound ...");
//
// Thread-safety: EventCorrelator is not thread-safe (the sender thread owns
// it). EventRecorder is thread-safe; Record never blocks on the network.
#ifndef PDC_KUBE_EVENT_RECORDER_H_
#define PDC_KUBE_EVENT_RECORDER_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <deque>
#include <list>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "kube/kube_http_client.h"

namespace pdc::kube {

// The object an Event is about (core/v1 ObjectReference).
struct ObjectRef {
  std::string api_version;  // "v1", "pdc.kubevirt.io/v1alpha1"
  std::string kind;         // "Pod", "PersistentDeviceClaim"
  std::string ns;           // "" for cluster-scoped objects: Events go to "default".
  std::string name;
  std::string uid;
};

enum class EventType : uint8_t { kNormal, kWarning };
std::string_view ToString(EventType type);  // "Normal", "Warning"

// What became of one Record() call: exactly one of these.
enum class EventResult : uint8_t {
  kSent = 0,           // POSTed as a new Event.
  kAggregated,         // PATCHed into an Event already sent (count + 1).
  kDroppedQueueFull,   // The queue held queue_limit events.
  kDroppedSpam,        // Its involved object ran out of tokens.
  kDroppedInvalid,     // No involved object name: nothing to attach it to.
  kDroppedSendFailed,  // The apiserver refused it, or failed every attempt.
  kDroppedShutdown,    // Recorded after Stop, or left when Stop's deadline passed.
  kCount,
};
// The `result` label of pdc_events_total: "sent", "aggregated",
// "dropped_queue_full", ...
std::string_view ToString(EventResult result);

// core/v1 Event limits pdc keeps to (client-go's events.k8s.io limits).
inline constexpr size_t kMaxEventReason = 128;
inline constexpr size_t kMaxEventMessage = 1024;  // Bytes.

// `reason` as the UpperCamelCase word the API expects: only ASCII letters
// and digits kept, the first letter upper case, at most kMaxEventReason
// characters; "Unspecified" when nothing is left.
std::string SanitizeEventReason(std::string_view reason);
// `s` as well-formed UTF-8 (every other byte becomes U+FFFD) of at most
// `max_bytes` bytes, cut between characters.
std::string SanitizeUtf8(std::string_view s, size_t max_bytes);
// client-go's Event name, "<involved name>.<UnixNano in hex>", kept a valid
// DNS subdomain of at most 253 characters whatever the involved name.
std::string EventName(std::string_view involved_name, int64_t unix_nanos);

// One event as the correlator sees it (already sanitised).
struct EventRecord {
  ObjectRef involved;
  EventType type = EventType::kNormal;
  std::string reason;
  std::string message;
  absl::Time time;  // When Record() was called.
};

struct CorrelatorOptions {
  // A repeat within `window` of the last occurrence is aggregated.
  absl::Duration window = absl::Minutes(10);
  // Per involved object: `spam_burst` events at once, then one per
  // `spam_refill` (zero: no limit).
  int spam_burst = 25;
  absl::Duration spam_refill = absl::Minutes(5);
  // Distinct events, and involved objects, remembered (least recently seen
  // forgotten first): client-go's LRU size.
  size_t max_entries = 4096;
};

// What to send for one event.
struct EventDecision {
  enum class Action : uint8_t { kCreate, kPatch, kSkip };
  Action action = Action::kSkip;
  std::string name;  // metadata.name of the Event.
  int64_t count = 0;
  absl::Time first_timestamp;
  absl::Time last_timestamp;
};

class EventCorrelator {
 public:
  explicit EventCorrelator(CorrelatorOptions options = {});

  // The Event `e` becomes: a new one (kCreate, count 1), a repeat of one
  // seen within the window (kPatch, its name, count + 1, its firstTimestamp)
  // or nothing (kSkip: its object's tokens are spent).
  EventDecision Correlate(const EventRecord& e);

  // Entries remembered (tests check the bound).
  size_t observations() const { return observations_.size(); }
  size_t buckets() const { return buckets_.size(); }

 private:
  // A map that forgets its least recently used entry beyond `capacity`.
  template <typename V>
  class Lru {
   public:
    explicit Lru(size_t capacity) : capacity_(capacity) {}
    // The entry of `key`, made default and most recently used.
    V& Get(const std::string& key, bool* inserted);
    size_t size() const { return index_.size(); }

   private:
    using Order = std::list<std::pair<std::string, V>>;
    size_t capacity_;
    Order order_;  // Most recently used first.
    absl::flat_hash_map<std::string, typename Order::iterator> index_;
  };
  struct Observation {
    std::string name;
    int64_t count = 0;
    absl::Time first;
    absl::Time last;
  };
  struct Bucket {
    absl::Duration credit;
    absl::Time refilled;
  };
  bool TakeToken(const EventRecord& e);

  const CorrelatorOptions options_;
  Lru<Observation> observations_;
  Lru<Bucket> buckets_;
  int64_t last_name_nanos_ = 0;  // Names stay unique on a clock that stands still.
};

struct EventRecorderOptions {
  // Events waiting to be sent; more are dropped (kDroppedQueueFull).
  size_t queue_limit = 1000;
  CorrelatorOptions correlator;
  // One apiserver call (also bounded by the KubeClientConfig's timeout).
  absl::Duration call_timeout = absl::Seconds(5);
  // Attempts of a call that failed transiently (5xx, 429, transport), with
  // jittered exponential backoff from retry_initial to retry_max between.
  int max_attempts = 3;
  absl::Duration retry_initial = absl::Milliseconds(500);
  absl::Duration retry_max = absl::Seconds(5);
  // How long Stop() goes on sending what is queued (a call in flight when
  // Stop is called may take until its call_timeout).
  absl::Duration stop_deadline = absl::Seconds(2);
  // When set, each result also counts in metrics->WithLabels({ToString(r)})
  // (ExtenderMetrics::events(), pdc_events_total{result}). Must outlive the
  // recorder.
  CounterFamily* metrics = nullptr;
  // With several replicas: whether this one may still write (it is sure
  // it leads). Asked before every call; an Event it may not send is
  // dropped (kDroppedSendFailed), so a deposed leader tells users nothing
  // the new one did not decide. Empty: always.
  std::function<bool()> may_send;
};

// Results so far, by EventResult.
struct EventCounts {
  std::array<int64_t, static_cast<size_t>(EventResult::kCount)> by_result{};
  int64_t operator[](EventResult r) const { return by_result[static_cast<size_t>(r)]; }
};

class EventRecorder {
 public:
  // REQUIRES: `api` and `clock` not null; they (and options.metrics) outlive
  // the recorder.
  // `component` is source.component and reportingComponent ("pdc-extender"),
  // `host` source.host and reportingInstance (the pod or host name).
  EventRecorder(KubeApi* api, std::string component, std::string host, const Clock* clock,
                EventRecorderOptions options = {});
  ~EventRecorder();  // Stop().
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  // Queues an event about `involved`; never blocks, never fails (what
  // cannot be sent is counted and dropped). `reason` should be an
  // UpperCamelCase word and `message` a sentence; both are bounded and made
  // valid here (SanitizeEventReason, SanitizeUtf8 to kMaxEventMessage).
  void Record(const ObjectRef& involved, EventType type, std::string_view reason,
              std::string_view message);

  // Blocks until every event queued so far has its result (tests; a call in
  // flight may take until its timeout).
  void WaitIdle();

  // Sends what is queued until stop_deadline has passed (later ones are
  // kDroppedShutdown), then joins the sender. Idempotent.
  void Stop();

  EventCounts counts() const;

 private:
  bool HasWorkLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool IdleLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Run();
  void Process(const EventRecord& e);
  // POST of a new Event, or of one whose PATCH found it gone.
  absl::Status Create(const EventRecord& e, const EventDecision& d);
  // One apiserver call (api_->Call) with retries of transient failures;
  // the answer's Status. (Named Call so tests/deploy/check_manifests.py
  // finds every request and checks the RBAC rules grant its verb.)
  absl::Status Call(std::string_view method, const std::string& path, const std::string& body,
                    std::string_view content_type, std::string_view what);
  // The call timeout now: call_timeout, less once stopping. Zero: no time left.
  absl::Duration CallBudget() const;
  void Count(EventResult r);

  KubeApi* const api_;
  const std::string component_;
  const std::string host_;
  const Clock* const clock_;
  const EventRecorderOptions options_;
  std::array<Counter*, static_cast<size_t>(EventResult::kCount)> metric_{};
  std::array<std::atomic<int64_t>, static_cast<size_t>(EventResult::kCount)> counts_{};

  EventCorrelator correlator_;  // Sender thread only.

  mutable absl::Mutex mu_;
  std::deque<EventRecord> queue_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;  // The sender holds an event.
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time drain_deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  absl::Notification stop_;  // Wakes a backoff wait.
  absl::Mutex join_mu_;      // Serialises Stop().
  std::thread sender_;
};

}  // namespace pdc::kube

#endif  // PDC_KUBE_EVENT_RECORDER_H_
