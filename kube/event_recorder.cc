#include "kube/event_recorder.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "api/json_util.h"
#include "common/backoff.h"
#include "common/strings.h"
#include "spdlog/spdlog.h"

namespace pdc::kube {
namespace {

constexpr std::string_view kMergePatch = "application/merge-patch+json";
// The longest metadata.name the API takes (a DNS subdomain).
constexpr size_t kMaxName = 253;

bool IsLower(char c) { return c >= 'a' && c <= 'z'; }
bool IsUpper(char c) { return c >= 'A' && c <= 'Z'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// A namespace as a path segment: a DNS label (anything else would change
// the request's path).
bool IsDnsLabel(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  for (char c : s) {
    if (!IsLower(c) && !IsDigit(c) && c != '-') return false;
  }
  return s.front() != '-' && s.back() != '-';
}

std::string Rfc3339(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

// Where an event about `involved` lives: its namespace, "default" for a
// cluster-scoped object (as client-go does).
std::string EventNamespace(const ObjectRef& involved) {
  return involved.ns.empty() ? std::string("default") : involved.ns;
}

std::string EventsPath(std::string_view ns) {
  return absl::StrCat("/api/v1/namespaces/", Sv(ns), "/events");
}

// "Warning ClaimLost on Pod ns/name" for logs.
std::string Describe(const EventRecord& e) {
  return absl::StrCat(Sv(ToString(e.type)), " ", e.reason, " on ", e.involved.kind, " ",
                      e.involved.ns, e.involved.ns.empty() ? "" : "/", e.involved.name);
}

// A transient failure: worth another attempt.
bool Retryable(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s);
}

}  // namespace

std::string_view ToString(EventType type) {
  return type == EventType::kWarning ? "Warning" : "Normal";
}

std::string_view ToString(EventResult result) {
  switch (result) {
    case EventResult::kSent:
      return "sent";
    case EventResult::kAggregated:
      return "aggregated";
    case EventResult::kDroppedQueueFull:
      return "dropped_queue_full";
    case EventResult::kDroppedSpam:
      return "dropped_spam";
    case EventResult::kDroppedInvalid:
      return "dropped_invalid";
    case EventResult::kDroppedSendFailed:
      return "dropped_send_failed";
    case EventResult::kDroppedShutdown:
      return "dropped_shutdown";
    case EventResult::kCount:
      break;
  }
  return "unknown";
}

std::string SanitizeEventReason(std::string_view reason) {
  std::string out;
  bool word_start = true;  // After a separator that was dropped.
  for (char c : reason) {
    if (out.size() == kMaxEventReason) break;
    if (IsLower(c) || IsUpper(c) || IsDigit(c)) {
      if (out.empty() && IsDigit(c)) out = "Reason";
      out.push_back(word_start && IsLower(c) ? static_cast<char>(c - 'a' + 'A') : c);
      word_start = false;
    } else {
      word_start = true;
    }
  }
  if (out.size() > kMaxEventReason) out.resize(kMaxEventReason);
  return out.empty() ? std::string("Unspecified") : out;
}

std::string SanitizeUtf8(std::string_view s, size_t max_bytes) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
  std::string out;
  out.reserve(std::min(s.size(), max_bytes));
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8SequenceLength(s, i);
    const std::string_view piece = n == 0 ? kReplacement : s.substr(i, n);
    if (out.size() + piece.size() > max_bytes) break;
    out.append(piece);
    i += n == 0 ? 1 : n;
  }
  return out;
}

std::string EventName(std::string_view involved_name, int64_t unix_nanos) {
  const std::string suffix = absl::StrFormat(".%x", static_cast<uint64_t>(unix_nanos));
  // Labels of lower-case letters, digits and inner '-', joined by '.'.
  std::string prefix;
  std::string label;
  const auto flush = [&] {
    while (!label.empty() && label.back() == '-') label.pop_back();
    if (label.empty()) return;
    if (!prefix.empty()) prefix.push_back('.');
    prefix.append(label);
    label.clear();
  };
  for (char c : involved_name) {
    if (IsUpper(c)) c = static_cast<char>(c - 'A' + 'a');
    if (c == '.') {
      flush();
    } else if (IsLower(c) || IsDigit(c)) {
      label.push_back(c);
    } else if (!label.empty()) {
      label.push_back('-');
    }
  }
  flush();
  const size_t room = kMaxName - suffix.size();
  if (prefix.size() > room) {
    prefix.resize(room);
    while (!prefix.empty() && (prefix.back() == '-' || prefix.back() == '.')) prefix.pop_back();
  }
  if (prefix.empty()) prefix = "event";
  return prefix + suffix;
}

// --- EventCorrelator ---------------------------------------------------------

template <typename V>
V& EventCorrelator::Lru<V>::Get(const std::string& key, bool* inserted) {
  if (auto it = index_.find(key); it != index_.end()) {
    order_.splice(order_.begin(), order_, it->second);
    *inserted = false;
    return it->second->second;
  }
  order_.emplace_front(key, V{});
  index_[key] = order_.begin();
  while (order_.size() > std::max<size_t>(capacity_, 1)) {
    index_.erase(order_.back().first);
    order_.pop_back();
  }
  *inserted = true;
  return order_.front().second;
}

EventCorrelator::EventCorrelator(CorrelatorOptions options)
    : options_(options), observations_(options.max_entries), buckets_(options.max_entries) {}

bool EventCorrelator::TakeToken(const EventRecord& e) {
  // client-go's spam key: the involved object (the source is this
  // correlator's, the same for all).
  const ObjectRef& o = e.involved;
  const std::string key =
      absl::StrCat(o.api_version, "\x1f", o.kind, "\x1f", o.ns, "\x1f", o.name, "\x1f", o.uid);
  bool inserted = false;
  Bucket& b = buckets_.Get(key, &inserted);
  if (options_.spam_refill <= absl::ZeroDuration()) return true;  // No limit.
  // Tokens kept as the time they took to earn (one token = spam_refill),
  // so the arithmetic is exact.
  const absl::Duration full = std::max(options_.spam_burst, 1) * options_.spam_refill;
  if (inserted) {
    b.credit = full;
    b.refilled = e.time;
  } else if (e.time > b.refilled) {
    b.credit = std::min(full, b.credit + (e.time - b.refilled));
    b.refilled = e.time;
  }
  if (b.credit < options_.spam_refill) return false;
  b.credit -= options_.spam_refill;
  return true;
}

EventDecision EventCorrelator::Correlate(const EventRecord& e) {
  const ObjectRef& o = e.involved;
  const std::string key =
      absl::StrCat(o.api_version, "\x1f", o.kind, "\x1f", o.ns, "\x1f", o.name, "\x1f", o.uid,
                   "\x1f", Sv(ToString(e.type)), "\x1f", e.reason, "\x1f", e.message);
  bool inserted = false;
  Observation& seen = observations_.Get(key, &inserted);
  EventDecision d;
  if (!inserted && e.time - seen.last <= options_.window) {
    seen.count += 1;
    seen.last = std::max(seen.last, e.time);
    d.action = EventDecision::Action::kPatch;
  } else {
    // client-go names an Event after its time; a clock that stands still
    // (or a coarse one) must not give two Events one name.
    const int64_t nanos = std::max(absl::ToUnixNanos(e.time), last_name_nanos_ + 1);
    last_name_nanos_ = nanos;
    seen = Observation{EventName(o.name, nanos), 1, e.time, e.time};
    d.action = EventDecision::Action::kCreate;
  }
  d.name = seen.name;
  d.count = seen.count;
  d.first_timestamp = seen.first;
  d.last_timestamp = seen.last;
  // As in client-go, the event is counted before the spam filter: a later
  // repeat's count says how often it happened.
  if (!TakeToken(e)) d.action = EventDecision::Action::kSkip;
  return d;
}

// --- EventRecorder -----------------------------------------------------------

EventRecorder::EventRecorder(KubeApi* api, std::string component, std::string host,
                             const Clock* clock, EventRecorderOptions options)
    : api_(api),
      component_(std::move(component)),
      host_(std::move(host)),
      clock_(clock),
      options_(options),
      correlator_(options.correlator) {
  if (options_.metrics != nullptr) {
    for (size_t i = 0; i < metric_.size(); ++i) {
      metric_[i] =
          options_.metrics->WithLabels({std::string(ToString(static_cast<EventResult>(i)))});
    }
  }
  sender_ = std::thread([this] { Run(); });
}

EventRecorder::~EventRecorder() { Stop(); }

void EventRecorder::Count(EventResult r) {
  const size_t i = static_cast<size_t>(r);
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  if (metric_[i] != nullptr) metric_[i]->Increment();
}

EventCounts EventRecorder::counts() const {
  EventCounts out;
  for (size_t i = 0; i < counts_.size(); ++i) {
    out.by_result[i] = counts_[i].load(std::memory_order_relaxed);
  }
  return out;
}

void EventRecorder::Record(const ObjectRef& involved, EventType type, std::string_view reason,
                           std::string_view message) {
  if (involved.name.empty() || (!involved.ns.empty() && !IsDnsLabel(involved.ns))) {
    spdlog::warn("event {} dropped: its object has no name or an invalid namespace ({} {}/{})",
                 reason, involved.kind, involved.ns, involved.name);
    Count(EventResult::kDroppedInvalid);
    return;
  }
  EventRecord e;
  e.involved.api_version = SanitizeUtf8(involved.api_version, kMaxName);
  e.involved.kind = SanitizeUtf8(involved.kind, kMaxName);
  e.involved.ns = involved.ns;
  e.involved.name = SanitizeUtf8(involved.name, kMaxName);
  e.involved.uid = SanitizeUtf8(involved.uid, kMaxName);
  e.type = type;
  e.reason = SanitizeEventReason(reason);
  e.message = SanitizeUtf8(message, kMaxEventMessage);
  e.time = clock_->Now();
  EventResult dropped;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      dropped = EventResult::kDroppedShutdown;
    } else if (queue_.size() >= options_.queue_limit) {
      dropped = EventResult::kDroppedQueueFull;
    } else {
      queue_.push_back(std::move(e));
      return;
    }
  }
  Count(dropped);
}

bool EventRecorder::HasWorkLocked() const { return stopping_ || !queue_.empty(); }
bool EventRecorder::IdleLocked() const { return queue_.empty() && !busy_; }

void EventRecorder::WaitIdle() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(this, &EventRecorder::IdleLocked));
}

void EventRecorder::Stop() {
  absl::MutexLock join(&join_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      stopping_ = true;
      drain_deadline_ = clock_->Now() + options_.stop_deadline;
    }
  }
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (sender_.joinable()) sender_.join();
}

void EventRecorder::Run() {
  for (;;) {
    EventRecord e;
    bool late = false;
    {
      absl::MutexLock lock(&mu_);
      busy_ = false;
      mu_.Await(absl::Condition(this, &EventRecorder::HasWorkLocked));
      if (queue_.empty()) return;  // Stopping, all done.
      e = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      late = stopping_ && clock_->Now() >= drain_deadline_;
    }
    if (late) {
      Count(EventResult::kDroppedShutdown);
    } else {
      Process(e);
    }
  }
}

absl::Duration EventRecorder::CallBudget() const {
  absl::MutexLock lock(&mu_);
  if (!stopping_) return options_.call_timeout;
  return std::clamp(drain_deadline_ - clock_->Now(), absl::ZeroDuration(), options_.call_timeout);
}

void EventRecorder::Process(const EventRecord& e) {
  const EventDecision d = correlator_.Correlate(e);
  absl::Status s;
  EventResult result = EventResult::kSent;
  switch (d.action) {
    case EventDecision::Action::kSkip:
      spdlog::debug("event {} dropped: too many events about this object", Describe(e));
      Count(EventResult::kDroppedSpam);
      return;
    case EventDecision::Action::kCreate:
      s = Create(e, d);
      break;
    case EventDecision::Action::kPatch: {
      std::string body;
      {
        rapidjson::StringBuffer buf;
        api::json::Writer w(buf);
        w.StartObject();
        w.Key("count");
        w.Int64(d.count);
        w.Key("lastTimestamp");
        w.Text(Rfc3339(d.last_timestamp));
        w.EndObject();
        body.assign(buf.GetString(), buf.GetSize());
      }
      s = Call("PATCH", absl::StrCat(EventsPath(EventNamespace(e.involved)), "/", d.name), body,
               kMergePatch, absl::StrCat("patch of event ", d.name));
      result = EventResult::kAggregated;
      if (absl::IsNotFound(s)) {
        // The Event expired (kube-apiserver keeps them an hour): a new one
        // under the same name, with the count so far.
        s = Create(e, d);
        result = EventResult::kSent;
      }
      break;
    }
  }
  if (!s.ok()) {
    spdlog::warn("event {} not sent: {}", Describe(e), StdSv(s.message()));
    result = EventResult::kDroppedSendFailed;
  }
  Count(result);
}

absl::Status EventRecorder::Create(const EventRecord& e, const EventDecision& d) {
  const std::string ns = EventNamespace(e.involved);
  rapidjson::StringBuffer buf;
  api::json::Writer w(buf);
  w.StartObject();
  w.Key("apiVersion");
  w.Text("v1");
  w.Key("kind");
  w.Text("Event");
  w.Key("metadata");
  w.StartObject();
  w.Key("name");
  w.Text(d.name);
  w.Key("namespace");
  w.Text(ns);
  w.EndObject();
  w.Key("involvedObject");
  w.StartObject();
  w.Key("apiVersion");
  w.Text(e.involved.api_version);
  w.Key("kind");
  w.Text(e.involved.kind);
  if (!e.involved.ns.empty()) {
    w.Key("namespace");
    w.Text(e.involved.ns);
  }
  w.Key("name");
  w.Text(e.involved.name);
  w.Key("uid");
  w.Text(e.involved.uid);
  w.EndObject();
  w.Key("reason");
  w.Text(e.reason);
  w.Key("message");
  w.Text(e.message);
  w.Key("type");
  w.Text(ToString(e.type));
  w.Key("source");
  w.StartObject();
  w.Key("component");
  w.Text(component_);
  if (!host_.empty()) {
    w.Key("host");
    w.Text(host_);
  }
  w.EndObject();
  w.Key("firstTimestamp");
  w.Text(Rfc3339(d.first_timestamp));
  w.Key("lastTimestamp");
  w.Text(Rfc3339(d.last_timestamp));
  w.Key("count");
  w.Int64(d.count);
  w.Key("reportingComponent");
  w.Text(component_);
  w.Key("reportingInstance");
  w.Text(host_);
  w.EndObject();
  return Call("POST", EventsPath(ns), std::string(buf.GetString(), buf.GetSize()),
              "application/json", absl::StrCat("create of event ", d.name));
}

absl::Status EventRecorder::Call(std::string_view method, const std::string& path,
                                 const std::string& body, std::string_view content_type,
                                 std::string_view what) {
  absl::Duration backoff = absl::ZeroDuration();
  for (int attempt = 1;; ++attempt) {
    const absl::Duration budget = CallBudget();
    if (budget <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat(Sv(what), ": stopped"));
    }
    if (options_.may_send && !options_.may_send()) {
      return absl::FailedPreconditionError(
          absl::StrCat(Sv(what), ": not sent, this replica is no longer the leader"));
    }
    absl::StatusOr<HttpResponse> r = api_->Call(method, path, body, content_type, what, budget);
    absl::Status s = !r.ok() ? r.status()
                     : (r->status >= 200 && r->status < 300)
                         ? absl::OkStatus()
                         : FromApiserver(r->status, r->body, what);
    if (s.ok() || !Retryable(s) || attempt >= options_.max_attempts || stop_.HasBeenNotified()) {
      return s;
    }
    backoff = NextBackoff(backoff, options_.retry_initial, options_.retry_max);
    const absl::Duration wait = Jittered(backoff, 0.2);
    spdlog::info("{} failed (attempt {} of {}), retrying in {}: {}", what, attempt,
                 options_.max_attempts, absl::FormatDuration(wait), StdSv(s.message()));
    // Stop() cuts the wait short; the loop then makes its last attempt
    // within the drain deadline.
    clock_->WaitFor(wait, &stop_);
  }
}

}  // namespace pdc::kube
