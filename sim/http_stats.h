// Wall-clock latency per HTTP verb and answer checks of pdc-sim's HTTP mode
// (the `pdc-http` policy and the `sweep` load generator). Latencies are in
// nanoseconds, one sample per request; malformed answers (wrong status,
// JSON that kube-scheduler or pdc-node would reject) are counted per verb
// with the first few messages kept for the report.
// Thread-safety: Record/Malformed from any thread; the readers after the
// writers are done.
#ifndef PDC_SIM_HTTP_STATS_H_
#define PDC_SIM_HTTP_STATS_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace pdc::sim {

struct VerbSummary {
  std::string verb;
  uint64_t count = 0;
  uint64_t malformed = 0;
  double p50_ms = 0, p90_ms = 0, p99_ms = 0, max_ms = 0, mean_ms = 0;
};

class HttpStats {
 public:
  void Record(std::string_view verb, int64_t nanos);
  void Malformed(std::string_view verb, std::string_view message);

  // Verbs in name order.
  std::vector<VerbSummary> Summaries() const;
  uint64_t malformed_total() const;
  uint64_t requests_total() const;
  std::vector<std::string> malformed_examples() const;  // At most 10.

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::vector<int64_t>, std::less<>> nanos_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint64_t, std::less<>> malformed_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> examples_ ABSL_GUARDED_BY(mu_);
};

// "verb  count  p50  p90  p99  max (ms)  malformed" rows.
std::string FormatVerbTable(const std::vector<VerbSummary>& rows);

}  // namespace pdc::sim

#endif  // PDC_SIM_HTTP_STATS_H_
