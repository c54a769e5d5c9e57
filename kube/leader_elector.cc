#include "kube/leader_elector.h"

#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/strings.h"
#include "spdlog/spdlog.h"

namespace pdc::kube {
namespace {

std::string LeasePath(const LeaderElectorOptions& o) {
  return absl::StrCat("/apis/coordination.k8s.io/v1/namespaces/", o.ns,
                      "/leases/", o.name);
}

}  // namespace

std::string LeaderIdentity(std::string_view base) {
  std::random_device rd;
  return absl::StrFormat("%s_%08x", base, rd());
}

LeaderElector::LeaderElector(KubeApi* api, LeaderElectorOptions options)
    : api_(api), options_(std::move(options)) {}

LeaderElector::~LeaderElector() { Stop(); }

void LeaderElector::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void LeaderElector::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

bool LeaderElector::Leading() const {
  absl::MutexLock l(&mu_);
  return leading_ &&
         options_.clock->Now() < renewed_at_ + options_.renew_deadline;
}

absl::Duration LeaderElector::SureFor() const {
  absl::MutexLock l(&mu_);
  if (!leading_) return -absl::InfiniteDuration();
  return renewed_at_ + options_.renew_deadline - options_.clock->Now();
}

bool LeaderElector::Lost() const {
  absl::MutexLock l(&mu_);
  return lost_;
}

std::string LeaderElector::Leader() const {
  absl::MutexLock l(&mu_);
  return observed_.holder;
}

int64_t LeaderElector::transitions() const {
  absl::MutexLock l(&mu_);
  return observed_.transitions;
}

absl::Time LeaderElector::leading_since() const {
  absl::MutexLock l(&mu_);
  return leading_since_;
}

api::LeaderRecord LeaderElector::Mine(absl::Time now,
                                      const api::LeaderRecord* old) const {
  api::LeaderRecord r;
  r.holder = options_.identity;
  r.lease_duration_seconds = absl::ToInt64Seconds(
      absl::Ceil(options_.lease_duration, absl::Seconds(1)));
  r.acquire_time = now;
  r.renew_time = now;
  if (old != nullptr) {
    if (old->holder == options_.identity) {
      r.acquire_time = old->acquire_time;
      r.transitions = old->transitions;
    } else {
      r.transitions = old->transitions + 1;
    }
  }
  return r;
}

bool LeaderElector::TryAcquireOrRenew() {
  const Clock* clock = options_.clock;
  const absl::Time sent = clock->Now();
  // A renewal may take what is left of the renew deadline; a first try,
  // one deadline.
  absl::Duration timeout = options_.renew_deadline;
  {
    absl::MutexLock l(&mu_);
    if (leading_) timeout = renewed_at_ + options_.renew_deadline - sent;
  }
  if (timeout <= absl::ZeroDuration()) return false;
  const std::string what =
      absl::StrCat("lease ", options_.ns, "/", options_.name);

  absl::StatusOr<HttpResponse> got =
      api_->Call("GET", LeasePath(options_), "", "", what, timeout);
  if (!got.ok()) {
    spdlog::warn("leader election: {}", StdSv(got.status().message()));
    return false;
  }
  if (got->status == 404) {
    const api::LeaderRecord mine = Mine(sent, nullptr);
    absl::StatusOr<HttpResponse> made =
        api_->Call("POST",
                   absl::StrCat("/apis/coordination.k8s.io/v1/namespaces/",
                                options_.ns, "/leases"),
                   api::LeaseJson(options_.ns, options_.name, "", mine),
                   "application/json", what, timeout - (clock->Now() - sent));
    if (!made.ok()) {
      spdlog::warn("leader election: {}", StdSv(made.status().message()));
      return false;
    }
    if (made->status != 201) {
      // 409: another replica created it first.
      if (made->status != 409) {
        spdlog::warn(
            "leader election: {}",
            StdSv(FromApiserver(made->status, made->body, what).message()));
      }
      return false;
    }
    absl::MutexLock l(&mu_);
    observed_ = mine;
    observed_any_ = true;
    observed_at_ = clock->Now();
    renewed_at_ = sent;
    return true;
  }
  if (got->status != 200) {
    spdlog::warn("leader election: {}",
                 StdSv(FromApiserver(got->status, got->body, what).message()));
    return false;
  }
  absl::StatusOr<api::Lease> lease = api::ReadLease(got->body);
  if (!lease.ok()) {
    spdlog::error("leader election: the API's {} is unreadable: {}", what,
                  StdSv(lease.status().message()));
    return false;
  }
  const api::LeaderRecord& old = lease->record;
  {
    absl::MutexLock l(&mu_);
    if (!observed_any_ || old != observed_) {
      if (old.holder != observed_.holder && old.holder != options_.identity) {
        spdlog::info("leader election: the leader is now {}",
                     old.holder.empty() ? "nobody (released)" : old.holder);
      }
      observed_ = old;
      observed_any_ = true;
      observed_at_ = clock->Now();
    }
    // Held by another replica that renewed less than leaseDuration ago (as
    // this replica saw it).
    if (!old.holder.empty() && old.holder != options_.identity &&
        observed_at_ + options_.lease_duration > clock->Now()) {
      return false;
    }
    // This replica's record but it does not lead: it lost the lease and
    // never takes it back (it exits).
    if (lost_) return false;
  }
  const api::LeaderRecord mine = Mine(sent, &old);
  absl::StatusOr<HttpResponse> put =
      api_->Call("PUT", LeasePath(options_),
                 api::LeaseJson(options_.ns, options_.name,
                                lease->meta.resource_version, mine),
                 "application/json", what, timeout - (clock->Now() - sent));
  if (!put.ok()) {
    spdlog::warn("leader election: {}", StdSv(put.status().message()));
    return false;
  }
  if (put->status != 200) {
    if (put->status != 409) {
      spdlog::warn(
          "leader election: {}",
          StdSv(FromApiserver(put->status, put->body, what).message()));
    }
    return false;
  }
  absl::MutexLock l(&mu_);
  observed_ = mine;
  observed_at_ = clock->Now();
  renewed_at_ = sent;
  return true;
}

void LeaderElector::Loop() {
  const Clock* clock = options_.clock;
  std::mt19937 rng(std::random_device{}());
  // Acquire: every retryPeriod, jittered up to 1.2x (client-go's
  // JitterFactor), so that followers do not try in lock step.
  while (!stop_.HasBeenNotified()) {
    if (TryAcquireOrRenew()) break;
    const double jitter = std::uniform_real_distribution<double>(0, 1.2)(rng);
    clock->WaitFor(options_.retry_period * (1 + jitter), &stop_);
  }
  if (stop_.HasBeenNotified()) return;
  {
    absl::MutexLock l(&mu_);
    leading_ = true;
    leading_since_ = clock->Now();
  }
  spdlog::info("leader election: {} is the leader (lease {}/{})",
               options_.identity, options_.ns, options_.name);
  if (options_.on_started_leading) options_.on_started_leading();

  // Renew every retryPeriod; each renewal retries every retryPeriod until
  // it succeeds or the renew deadline since the last one has passed.
  while (clock->WaitFor(options_.retry_period, &stop_)) {
    bool renewed = false;
    while (!stop_.HasBeenNotified()) {
      if (TryAcquireOrRenew()) {
        renewed = true;
        break;
      }
      absl::Time give_up;
      {
        absl::MutexLock l(&mu_);
        give_up = renewed_at_ + options_.renew_deadline;
      }
      if (clock->Now() >= give_up) break;
      clock->WaitUntil(std::min(give_up, clock->Now() + options_.retry_period),
                       &stop_);
    }
    if (stop_.HasBeenNotified()) break;
    if (!renewed) {
      {
        absl::MutexLock l(&mu_);
        leading_ = false;
        lost_ = true;
      }
      spdlog::error(
          "leader election: {} could not renew lease {}/{} for {}; it stops "
          "serving "
          "as the leader",
          options_.identity, options_.ns, options_.name,
          absl::FormatDuration(options_.renew_deadline));
      if (options_.on_lost) options_.on_lost();
      return;
    }
  }
  Release();
}

void LeaderElector::Release() {
  bool was_leading = false;
  {
    absl::MutexLock l(&mu_);
    was_leading = leading_;
    leading_ = false;
  }
  if (!was_leading) return;
  const std::string what =
      absl::StrCat("lease ", options_.ns, "/", options_.name);
  absl::StatusOr<HttpResponse> got = api_->Call(
      "GET", LeasePath(options_), "", "", what, options_.retry_period);
  if (!got.ok() || got->status != 200) return;
  absl::StatusOr<api::Lease> lease = api::ReadLease(got->body);
  if (!lease.ok() || lease->record.holder != options_.identity) return;
  // client-go's release(): nobody holds it, for one second.
  api::LeaderRecord r;
  r.lease_duration_seconds = 1;
  r.acquire_time = options_.clock->Now();
  r.renew_time = r.acquire_time;
  r.transitions = lease->record.transitions;
  absl::StatusOr<HttpResponse> put =
      api_->Call("PUT", LeasePath(options_),
                 api::LeaseJson(options_.ns, options_.name,
                                lease->meta.resource_version, r),
                 "application/json", what, options_.retry_period);
  if (put.ok() && put->status == 200) {
    spdlog::info("leader election: {} released lease {}/{}", options_.identity,
                 options_.ns, options_.name);
  }
}

}  // namespace pdc::kube
