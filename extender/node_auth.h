// NodeAuthenticator: which node a pdc-node's bearer token speaks for
// (extender.nodeAuth; docs/operations.md "Node identity"). The Router asks
// it about every REST call whose token is not the admin token.
//
// Two sources, in this order:
//  1. extender.nodeAuth.tokenDir (node_token_dir.h): a per-node token, for
//     clusters whose tokens carry no node name;
//  2. a TokenReview (token_reviewer.h) with the configured audience: the
//     token must authenticate, be valid for that audience (status.audiences
//     contains it), belong to pdc-node's service account (username
//     system:serviceaccount:<namespace>:<name>) and carry exactly one node
//     name in the extra authentication.kubernetes.io/node-name, which
//     kube-apiserver 1.30 and later adds to tokens bound to a pod.
//
// Answers of kube-apiserver are cached by the token's SHA-256 (the token
// itself is kept only while its review runs), at most `cache_size`, the
// oldest dropped first: an accepted token for `cache_ttl` (as kube-apiserver
// caches its webhook token authenticator's answers,
// --authentication-token-webhook-cache-ttl, 2m by default), a refused one
// for at most `failure_ttl`. Failures to ask (apiserver down, timeout, 403)
// are never cached: every call fails closed with 503 until it answers.
//
// A review is never asked on an HTTP worker: Start queues it for the review
// threads and the Router parks its request as a long-poll (net/http_types.h)
// on the job's Notifier topic, keeping the request's body with the job;
// requests with the same token share one review. The job's end bumps the
// topic, the server runs the Router again with the job's token, and
// Resume hands back the caller and the body.
//
//   if (auto now = auth.Lookup(token)) use(*now);  // Cache, tokenDir.
//   else ticket = auth.Start(token, std::move(body));  // Then park.
//   ... on the re-run: Resumed r = auth.Resume(ticket.token);
//
// Thread-safety: thread-safe.
#ifndef PDC_EXTENDER_NODE_AUTH_H_
#define PDC_EXTENDER_NODE_AUTH_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/notifier.h"
#include "extender/node_token_dir.h"
#include "extender/parked_jobs.h"
#include "kube/token_reviewer.h"

namespace pdc::extender {

struct NodeAuthOptions {
  // "<namespace>/<name>" of pdc-node's ServiceAccount; "" = no TokenReview.
  std::string service_account;
  std::string audience = "pdc-extender";
  absl::Duration cache_ttl = absl::Minutes(2);
  // Refused tokens: min(failure_ttl, cache_ttl). Short, so that a fixed
  // deployment (audience, service account) works again soon, and long
  // enough that a client retrying a bad token does not flood the
  // apiserver.
  absl::Duration failure_ttl = absl::Seconds(10);
  size_t cache_size = 4096;
  absl::Duration review_timeout = absl::Seconds(5);
  std::string token_dir;  // "" = none.
  // Threads asking kube-apiserver, and requests parked on a review at most
  // (beyond: 503 at once).
  int threads = 2;
  size_t max_jobs = 1024;
};

// Who called: the node a node identity speaks for.
struct NodeCaller {
  std::string node;
  std::string source;  // "TokenReview" or "tokenDir", for messages.
};

class NodeAuthenticator {
 public:
  // What a parked request waits on (as BindQueue::Ticket).
  struct Ticket {
    uint64_t token = 0;  // LongPoll::resume_token; never 0.
    std::string topic;
    uint64_t seen = 0;
  };
  struct Resumed {
    enum class State { kPending, kGone, kDone };
    State state = State::kGone;
    // kDone: the caller, or why not: Unauthenticated (401),
    // PermissionDenied (403), Unavailable (503).
    absl::StatusOr<NodeCaller> caller = absl::UnknownError("pending");
    std::string body;  // kDone: the body Start kept.
  };

  // `reviewer` (may be null: tokenDir only), `notifier` and `clock` outlive
  // the authenticator. Starts the review threads.
  NodeAuthenticator(NodeAuthOptions options, kube::TokenReviewer* reviewer, Notifier* notifier,
                    const Clock* clock);
  // Skips the reviews not started, waits for the running ones, joins.
  ~NodeAuthenticator();
  NodeAuthenticator(const NodeAuthenticator&) = delete;
  NodeAuthenticator& operator=(const NodeAuthenticator&) = delete;

  // The answer for `bearer` without asking kube-apiserver (tokenDir, then
  // the cache); nullopt when a TokenReview is needed first (Start).
  std::optional<absl::StatusOr<NodeCaller>> Lookup(std::string_view bearer) const;
  // Queues the review of `bearer`; `body` is kept for Resume.
  // ResourceExhausted (503) when max_jobs requests already wait.
  absl::StatusOr<Ticket> Start(std::string_view bearer, std::string body);
  // The end of a job; kDone takes it out. kGone: no such job (dropped, or
  // already taken).
  Resumed Resume(uint64_t token);
  // Nobody waits for this job any more (its time was up).
  void Abandon(uint64_t token);

  // The topic of a job's end.
  static std::string Topic(uint64_t token);
  // How long a parked request waits: the review's timeout and a second.
  absl::Duration max_wait() const { return options_.review_timeout + absl::Seconds(1); }
  // The verdict on a TokenReview answer (public for tests).
  absl::StatusOr<NodeCaller> Judge(const api::TokenReviewStatus& review) const;
  // TokenReviews asked so far, by outcome: the token was accepted, refused
  // (401/403), or kube-apiserver could not be asked (503); the counts of
  // pdc_node_token_reviews_total.
  struct ReviewCounts {
    uint64_t accepted = 0;
    uint64_t refused = 0;
    uint64_t failed = 0;
  };
  ReviewCounts review_counts() const;

 private:
  struct CacheEntry {
    absl::StatusOr<NodeCaller> caller;
    absl::Time expires;
    std::list<std::string>::iterator order;
  };
  struct Review {  // One per token being reviewed.
    std::string bearer;
    std::vector<uint64_t> jobs;
  };
  struct Job {
    std::string digest;
    std::string body;
  };

  void Work();
  bool HasWorkLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RememberLocked(const std::string& digest, const absl::StatusOr<NodeCaller>& caller)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const NodeAuthOptions options_;
  const std::string username_;  // system:serviceaccount:<ns>:<name>
  kube::TokenReviewer* const reviewer_;
  Notifier* const notifier_;
  const Clock* const clock_;
  std::unique_ptr<NodeTokenDir> token_dir_;  // Null: none.

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<std::string, CacheEntry> cache_ ABSL_GUARDED_BY(mu_);
  std::list<std::string> cache_order_ ABSL_GUARDED_BY(mu_);  // Oldest first.
  absl::flat_hash_map<std::string, Review> reviews_ ABSL_GUARDED_BY(mu_);  // By digest.
  std::deque<std::string> waiting_ ABSL_GUARDED_BY(mu_);  // Digests not started.
  // Results nobody resumed yet beyond max_jobs are dropped, oldest first
  // (their connections are closed by then).
  ParkedJobs<Job, absl::StatusOr<NodeCaller>> jobs_ ABSL_GUARDED_BY(mu_);
  ReviewCounts counts_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_NODE_AUTH_H_
