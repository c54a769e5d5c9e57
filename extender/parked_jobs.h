// ParkedJobs: the jobs behind HTTP requests parked as long-polls
// (net/http_types.h) while threads of their own do the slow part (a bind's
// apiserver calls, a TokenReview). Each job has a token; its end bumps the
// job's Notifier topic, and the request, run again, takes the result. A
// request whose client went away abandons its job, which is dropped once it
// ends. Finished results that no request takes are kept at most
// `max_finished`, the oldest dropped first (their requests' connections are
// gone by then).
//
// The owner keeps the job's input in `Job` and its topics' names; it holds
// its own mutex around every call here and calls the Notifier (Bump,
// Retire) after releasing it, with the tokens these calls hand back.
// Thread-safety: none (see above).
#ifndef PDC_EXTENDER_PARKED_JOBS_H_
#define PDC_EXTENDER_PARKED_JOBS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace pdc::extender {

template <typename Job, typename Result>
class ParkedJobs {
 public:
  struct Entry {
    Job job;
    bool abandoned = false;
    std::optional<Result> result;  // Set once the job ended.
  };

  explicit ParkedJobs(size_t max_finished) : max_finished_(max_finished) {}

  // A new job; its token.
  uint64_t Add(Job job) {
    const uint64_t token = ++next_token_;
    entries_.emplace(token, Entry{std::move(job), false, std::nullopt});
    return token;
  }

  // The job, null when it is unknown (taken, dropped).
  Entry* Find(uint64_t token) {
    auto it = entries_.find(token);
    return it == entries_.end() ? nullptr : &it->second;
  }

  // The ended job, removed (retire its topic); nullopt while it runs or
  // when it is unknown.
  std::optional<Entry> Take(uint64_t token) {
    auto it = entries_.find(token);
    if (it == entries_.end() || !it->second.result.has_value()) return std::nullopt;
    std::optional<Entry> out(std::move(it->second));
    entries_.erase(it);
    std::erase(finished_, token);
    return out;
  }

  // Nobody waits for the job any more. True when it had ended and is gone
  // now (retire its topic); a running one is dropped when it ends.
  bool Abandon(uint64_t token) {
    auto it = entries_.find(token);
    if (it == entries_.end()) return false;
    if (!it->second.result.has_value()) {
      it->second.abandoned = true;
      return false;
    }
    entries_.erase(it);
    std::erase(finished_, token);
    return true;
  }

  // A job about to start: true when it is abandoned (it is dropped now) or
  // unknown, so that it is skipped.
  bool DropIfAbandoned(uint64_t token) {
    auto it = entries_.find(token);
    if (it == entries_.end()) return true;
    if (!it->second.abandoned) return false;
    entries_.erase(it);
    return true;
  }

  // The job ended with `result`. True: kept for its request (bump its
  // topic). False: it was abandoned or is unknown, and is gone (retire its
  // topic). Finished jobs beyond the bound are dropped into `dropped`.
  bool Finish(uint64_t token, Result result, std::vector<uint64_t>* dropped) {
    auto it = entries_.find(token);
    if (it == entries_.end()) return false;
    if (it->second.abandoned) {
      entries_.erase(it);
      return false;
    }
    it->second.result = std::move(result);
    finished_.push_back(token);
    while (finished_.size() > max_finished_) {
      entries_.erase(finished_.front());
      dropped->push_back(finished_.front());
      finished_.pop_front();
    }
    return true;
  }

  size_t size() const { return entries_.size(); }
  // Jobs not ended yet.
  size_t running() const { return entries_.size() - finished_.size(); }

 private:
  const size_t max_finished_;
  absl::flat_hash_map<uint64_t, Entry> entries_;
  std::deque<uint64_t> finished_;  // Ended, not taken; oldest first.
  uint64_t next_token_ = 0;
};

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_PARKED_JOBS_H_
