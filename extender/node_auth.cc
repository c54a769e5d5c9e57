#include "extender/node_auth.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/strings.h"
#include "model/names.h"
#include "spdlog/spdlog.h"

namespace pdc::extender {
namespace {

// "pdc-system/pdc-node" -> "system:serviceaccount:pdc-system:pdc-node", the
// username kube-apiserver gives a service account's tokens
// (k8s.io/apiserver/pkg/authentication/serviceaccount/util.go,
// MakeUsername).
std::string ServiceAccountUser(std::string_view ns_name) {
  if (ns_name.empty()) return "";
  return absl::StrCat("system:serviceaccount:",
                      absl::StrReplaceAll(Sv(ns_name), {{"/", ":"}}));
}

}  // namespace

NodeAuthenticator::NodeAuthenticator(NodeAuthOptions options, kube::TokenReviewer* reviewer,
                                     Notifier* notifier, const Clock* clock)
    : options_(std::move(options)),
      username_(ServiceAccountUser(options_.service_account)),
      reviewer_(options_.service_account.empty() ? nullptr : reviewer),
      notifier_(notifier),
      clock_(clock),
      jobs_(options_.max_jobs) {
  if (!options_.token_dir.empty()) token_dir_ = std::make_unique<NodeTokenDir>(options_.token_dir, clock_);
  if (reviewer_ == nullptr) return;
  threads_.reserve(static_cast<size_t>(options_.threads));
  for (int i = 0; i < options_.threads; ++i) threads_.emplace_back([this] { Work(); });
}

NodeAuthenticator::~NodeAuthenticator() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

std::string NodeAuthenticator::Topic(uint64_t token) { return absl::StrCat("auth/", token); }

NodeAuthenticator::ReviewCounts NodeAuthenticator::review_counts() const {
  absl::MutexLock lock(&mu_);
  return counts_;
}

std::optional<absl::StatusOr<NodeCaller>> NodeAuthenticator::Lookup(
    std::string_view bearer) const {
  if (token_dir_ != nullptr) {
    absl::StatusOr<std::optional<std::string>> node = token_dir_->NodeOf(bearer);
    if (node.ok() && node->has_value()) return NodeCaller{**node, "tokenDir"};
    // Without TokenReview the directory is the only source: its failure
    // is the answer (fail closed).
    if (!node.ok() && reviewer_ == nullptr) return node.status();
    if (!node.ok()) spdlog::warn("{}", std::string(node.status().message()));
  }
  if (reviewer_ == nullptr) {
    return absl::UnauthenticatedError(
        "the bearer token is neither the admin token nor a node's token of "
        "extender.nodeAuth.tokenDir");
  }
  if (bearer.size() > api::kMaxReviewedTokenBytes) {
    return absl::UnauthenticatedError(absl::StrCat("the bearer token is longer than ",
                                                   api::kMaxReviewedTokenBytes, " bytes"));
  }
  const std::string digest = Sha256(bearer);
  absl::MutexLock lock(&mu_);
  auto it = cache_.find(digest);
  if (it == cache_.end() || clock_->Now() >= it->second.expires) return std::nullopt;
  return it->second.caller;
}

absl::StatusOr<NodeAuthenticator::Ticket> NodeAuthenticator::Start(std::string_view bearer,
                                                                   std::string body) {
  if (reviewer_ == nullptr) return absl::InternalError("no TokenReview is configured");
  std::string digest = Sha256(bearer);
  absl::MutexLock lock(&mu_);
  if (jobs_.running() >= options_.max_jobs) {
    return absl::UnavailableError(absl::StrCat(
        options_.max_jobs, " requests already wait for a TokenReview; retry later"));
  }
  auto [review, fresh] = reviews_.try_emplace(digest);
  if (fresh) {
    review->second.bearer = std::string(bearer);
    waiting_.push_back(digest);
  }
  Ticket t;
  t.token = jobs_.Add(Job{std::move(digest), std::move(body)});
  t.topic = Topic(t.token);
  // Read before the job can end: its bump moves the topic past `seen`.
  t.seen = notifier_->version(t.topic);
  review->second.jobs.push_back(t.token);
  return t;
}

NodeAuthenticator::Resumed NodeAuthenticator::Resume(uint64_t token) {
  Resumed out;
  {
    absl::MutexLock lock(&mu_);
    auto entry = jobs_.Take(token);
    if (!entry.has_value()) {
      // Still under review, or gone.
      if (jobs_.Find(token) != nullptr) out.state = Resumed::State::kPending;
      return out;
    }
    out.state = Resumed::State::kDone;
    out.caller = *std::move(entry->result);
    out.body = std::move(entry->job.body);
  }
  notifier_->Retire(Topic(token));
  return out;
}

void NodeAuthenticator::Abandon(uint64_t token) {
  bool retire = false;
  {
    absl::MutexLock lock(&mu_);
    retire = jobs_.Abandon(token);  // Else dropped when its review ends.
  }
  if (retire) notifier_->Retire(Topic(token));
}

absl::StatusOr<NodeCaller> NodeAuthenticator::Judge(const api::TokenReviewStatus& r) const {
  if (!r.authenticated) {
    return absl::UnauthenticatedError(absl::StrCat(
        "kube-apiserver did not authenticate the bearer token",
        r.error.empty() ? std::string() : absl::StrCat(": ", r.error)));
  }
  // An authenticator that ignores audiences answers without them; the
  // TokenReview API asks clients to check that the audience they asked for
  // is among status.audiences (authentication/v1 TokenReviewStatus).
  if (std::find(r.audiences.begin(), r.audiences.end(), options_.audience) ==
      r.audiences.end()) {
    return absl::UnauthenticatedError(
        absl::StrCat("the bearer token is not valid for audience ",
                     model::QuoteForMessage(options_.audience),
                     " (extender.nodeAuth.audience; the audience of pdc-node's projected "
                     "service-account token)"));
  }
  if (r.username != username_) {
    return absl::PermissionDeniedError(
        absl::StrCat("the bearer token belongs to ", model::QuoteForMessage(r.username),
                     ", not to pdc-node's service account ", username_,
                     " (extender.nodeAuth.serviceAccount)"));
  }
  auto node = r.extra.find(std::string(api::kNodeNameExtra));
  if (node == r.extra.end() || node->second.size() != 1 || node->second[0].empty()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "the bearer token of ", username_, " names no node (", Sv(api::kNodeNameExtra),
        "): kube-apiserver adds it to pod-bound tokens from Kubernetes 1.30 on; on older "
        "clusters give each node a token of its own with extender.nodeAuth.tokenDir"));
  }
  if (absl::Status s = model::ValidateObjectName("node name", node->second[0]); !s.ok()) {
    return absl::PermissionDeniedError(
        absl::StrCat("the bearer token names an invalid node: ", s.message()));
  }
  return NodeCaller{node->second[0], "TokenReview"};
}

void NodeAuthenticator::RememberLocked(const std::string& digest,
                                       const absl::StatusOr<NodeCaller>& caller) {
  const absl::Duration ttl =
      caller.ok() ? options_.cache_ttl : std::min(options_.failure_ttl, options_.cache_ttl);
  if (auto it = cache_.find(digest); it != cache_.end()) {
    cache_order_.erase(it->second.order);
    cache_.erase(it);
  }
  while (!cache_order_.empty() && cache_.size() >= options_.cache_size) {
    cache_.erase(cache_order_.front());
    cache_order_.pop_front();
  }
  cache_order_.push_back(digest);
  cache_.emplace(digest, CacheEntry{caller, clock_->Now() + ttl, std::prev(cache_order_.end())});
}

bool NodeAuthenticator::HasWorkLocked() const { return stopping_ || !waiting_.empty(); }

void NodeAuthenticator::Work() {
  for (;;) {
    std::string digest;
    std::string bearer;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &NodeAuthenticator::HasWorkLocked));
      if (stopping_) return;
      digest = std::move(waiting_.front());
      waiting_.pop_front();
      bearer = reviews_.at(digest).bearer;
    }
    absl::StatusOr<api::TokenReviewStatus> review =
        reviewer_->Review(bearer, options_.audience, options_.review_timeout);
    absl::StatusOr<NodeCaller> caller = absl::UnknownError("");
    if (review.ok()) {
      caller = Judge(*review);
    } else {
      caller = absl::UnavailableError(absl::StrCat(
          "cannot check the bearer token: ", review.status().message(),
          review.status().code() == absl::StatusCode::kPermissionDenied
              ? " (pdc-extender's ClusterRole needs create on "
                "tokenreviews.authentication.k8s.io)"
              : ""));
      spdlog::warn("{}", std::string(caller.status().message()));
    }
    std::vector<std::string> topics;
    std::vector<uint64_t> dropped;
    {
      absl::MutexLock lock(&mu_);
      // An answer is remembered; a failure to get one is not.
      if (review.ok()) RememberLocked(digest, caller);
      ++(!review.ok() ? counts_.failed : caller.ok() ? counts_.accepted : counts_.refused);
      auto review_it = reviews_.find(digest);
      const std::vector<uint64_t> waiting = std::move(review_it->second.jobs);
      reviews_.erase(review_it);
      for (uint64_t token : waiting) {
        if (jobs_.Finish(token, caller, &dropped)) {
          topics.push_back(Topic(token));
        } else {
          dropped.push_back(token);
        }
      }
    }
    if (!topics.empty()) notifier_->Bump(topics);
    for (uint64_t t : dropped) notifier_->Retire(Topic(t));
  }
}

}  // namespace pdc::extender
