// BindQueue: runs bind sagas (Binder) on threads of their own, so that a
// slow Kubernetes API holds none of the HTTP server's workers. The bind
// handler starts a job and parks its request as a long-poll
// (net/http_types.h) on the job's Notifier topic, with the job's token; the
// job's end bumps the topic, the server runs the handler again with the
// token, and the handler takes the result.
//
//   absl::StatusOr<BindQueue::Ticket> t = queue.Start(args);
//   ... later, on the re-run with t->token:
//   if (std::optional<BindResult> r = queue.Take(t->token)) answer(*r);
//
// Every job's deadline counts from Start, so time spent waiting for a
// thread is part of it (BinderOptions::deadline). A job whose request
// stopped waiting (Abandon: its time was up) is skipped if it has not
// started; a started saga always runs to its end (it is never cut between
// the allocator and the apiserver) and its result is dropped. kube-scheduler
// retries such a pod, and the retry finds the allocation in place. Results
// nobody takes (the connection closed) are dropped beyond `max_jobs`, oldest
// first, and at most `max_jobs` jobs wait or run: beyond that Start refuses
// (ResourceExhausted) and the bind is answered at once.
// Thread-safety: thread-safe.
#ifndef PDC_EXTENDER_BIND_QUEUE_H_
#define PDC_EXTENDER_BIND_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "api/scheduler_wire.h"
#include "common/notifier.h"
#include "extender/binder.h"
#include "extender/parked_jobs.h"

namespace pdc::extender {

struct BindQueueOptions {
  int threads = 16;
  size_t max_jobs = 1024;
};

// How the bind handler runs binds: a saga started, its result taken when
// it ended (at once, or after the request waited as a long-poll). The
// handler is the same whichever runs them: BindQueue (with a Kubernetes
// API, on threads of their own) or InlineBinds (standalone, on the HTTP
// thread, ended before Start returns).
class Binds {
 public:
  // What a parked bind request waits on.
  struct Ticket {
    uint64_t token = 0;   // LongPoll::resume_token; never 0.
    std::string topic;    // The Notifier topic bumped when the job ends.
    uint64_t seen = 0;    // The topic's version before the job could end.
  };

  virtual ~Binds() = default;
  virtual absl::StatusOr<Ticket> Start(const api::BindingArgs& args) = 0;
  // The result of the job, which leaves the queue; nullopt while it waits or
  // runs, or when there is no such job (taken, dropped, never started).
  virtual std::optional<BindResult> Take(uint64_t token) = 0;
  // Nobody will take this job's result.
  virtual void Abandon(uint64_t token) = 0;
  // How long a parked bind request waits: the saga's deadline and a
  // second for the answer to come back.
  virtual absl::Duration max_wait() const = 0;
};

// Runs each bind on the caller's thread, within Start.
class InlineBinds final : public Binds {
 public:
  // `binder` outlives this.
  explicit InlineBinds(const Binder* binder) : binder_(binder) {}

  absl::StatusOr<Ticket> Start(const api::BindingArgs& args) override;
  std::optional<BindResult> Take(uint64_t token) override;
  void Abandon(uint64_t token) override { (void)Take(token); }
  absl::Duration max_wait() const override { return binder_->options().deadline; }

 private:
  const Binder* const binder_;
  absl::Mutex mu_;
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, BindResult> ended_ ABSL_GUARDED_BY(mu_);
};

class BindQueue final : public Binds {
 public:

  // `binder` and `notifier` outlive the queue. Starts the threads.
  BindQueue(const Binder* binder, Notifier* notifier, BindQueueOptions options);
  // Skips the jobs that have not started, lets running sagas end, joins.
  ~BindQueue();
  BindQueue(const BindQueue&) = delete;
  BindQueue& operator=(const BindQueue&) = delete;

  absl::StatusOr<Ticket> Start(const api::BindingArgs& args) override;
  std::optional<BindResult> Take(uint64_t token) override;
  void Abandon(uint64_t token) override;
  absl::Duration max_wait() const override {
    return binder_->options().deadline + absl::Seconds(1);
  }

  // The topic of a job's end.
  static std::string Topic(uint64_t token);
  // Jobs waiting, running, or finished and not taken.
  size_t jobs() const;

 private:
  struct Job {
    api::BindingArgs args;
    absl::Time deadline;
  };

  void Work();
  bool HasWorkLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Binder* const binder_;
  Notifier* const notifier_;
  const BindQueueOptions options_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Finished results beyond max_jobs are dropped, oldest first.
  ParkedJobs<Job, BindResult> jobs_ ABSL_GUARDED_BY(mu_);
  std::deque<uint64_t> waiting_ ABSL_GUARDED_BY(mu_);  // Not started, in order.
  size_t running_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> threads_;
};

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_BIND_QUEUE_H_
