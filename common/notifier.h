// Notifier: a version counter bumped on every change, so that waiters
// (pdc-extender's long-polls, GET /v1/nodes/{node}/allocations?wait=) learn
// about a change without polling. In pdc-extender it follows the allocator's
// commits (the allocator's change listener bumps it, see FollowCommits in
// extender_context.h); nothing bumps it by hand. It knows nothing of HTTP: it
// lives in common/ so that the server (net/) can park on it and the programs
// can bump it without either depending on the other.
//
// Topics: a bump may name what changed (pdc-extender names the nodes a
// commit touched), and a waiter may wait for one topic (a node's
// allocations long-poll waits for its node). A waiter on a topic is woken
// only by bumps that name its topic or that name nothing (Bump(): anything
// may have changed); a waiter without a topic by every bump. So a change on
// one node wakes that node's long-polls, not every node's. There is one
// version counter for all topics; a topic's version is the counter's value
// at the last bump that concerned it.
//
// Two ways to wait, both without a busy loop:
//  - Subscribe(topic, seen, callback): the callback runs once, on the
//    bumping thread (or at once when the topic's version already moved past
//    `seen`). The HTTP server (net/http_server.h) uses this with an Asio
//    timer for the deadline, so a parked long-poll holds no worker thread;
//    the callback only posts to the connection's executor.
//  - WaitFor(seen, timeout): blocks on an absl::CondVar for any bump, for
//    callers with a thread to spare (tests, tools).
// Thread-safety: all methods are thread-safe. Callbacks must not call back
// into the Notifier.
#ifndef PDC_COMMON_NOTIFIER_H_
#define PDC_COMMON_NOTIFIER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace pdc {

class Notifier {
 public:
  using Callback = std::function<void()>;
  using SubscriptionId = uint64_t;

  // The counter: advanced by every bump.
  uint64_t version() const;
  // The counter's value at the last bump that named `topic` or named
  // nothing; 0 before any. "" is every topic: version().
  uint64_t version(std::string_view topic) const;
  // Advances the counter; runs every pending callback, of every topic.
  void Bump();
  // Advances the counter; runs the pending callbacks without a topic and
  // those of `topics`. With no topics it wakes only the callbacks without a
  // topic.
  void Bump(absl::Span<const std::string> topics);
  // Forgets the version of a one-off topic (pdc-extender: a bind's
  // completion), so the topics of finished work do not pile up. A topic
  // somebody still waits on is kept. After it, version(topic) is the
  // counter at the last Bump() naming nothing.
  void Retire(std::string_view topic);
  // Runs `cb` once version(topic) exceeds `seen` ("" = any bump). Returns an
  // id for Cancel; 0 when `cb` already ran (synchronously, in this call).
  SubscriptionId Subscribe(std::string_view topic, uint64_t seen, Callback cb);
  SubscriptionId Subscribe(uint64_t seen, Callback cb) {
    return Subscribe("", seen, std::move(cb));
  }
  // Drops a pending callback; no effect when it already ran.
  void Cancel(SubscriptionId id);
  // Blocks until version() > seen or `timeout` passed; returns version().
  uint64_t WaitFor(uint64_t seen, absl::Duration timeout) const;
  // Pending callbacks, of every topic.
  size_t pending() const;
  // Topics with a version of their own (bumped and not retired).
  size_t topics() const;

 private:
  using Callbacks = std::map<SubscriptionId, Callback>;

  uint64_t TopicVersionLocked(std::string_view topic) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Moves the pending callbacks of `topic` to `due`.
  void TakeTopicLocked(const std::string& topic, std::vector<Callback>* due)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  mutable absl::CondVar changed_;
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  // The counter at the last Bump() naming nothing.
  uint64_t all_version_ ABSL_GUARDED_BY(mu_) = 0;
  // The counter at the last bump naming the topic. One entry per topic ever
  // bumped (pdc-extender: per node that ever changed).
  absl::flat_hash_map<std::string, uint64_t> topic_version_ ABSL_GUARDED_BY(mu_);
  SubscriptionId next_id_ ABSL_GUARDED_BY(mu_) = 0;
  Callbacks any_ ABSL_GUARDED_BY(mu_);  // Without a topic.
  absl::flat_hash_map<std::string, Callbacks> by_topic_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<SubscriptionId, std::string> topic_of_ ABSL_GUARDED_BY(mu_);
  size_t pending_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pdc

#endif  // PDC_COMMON_NOTIFIER_H_
