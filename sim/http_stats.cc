#include "sim/http_stats.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/strings.h"

namespace pdc::sim {

void HttpStats::Record(std::string_view verb, int64_t nanos) {
  absl::MutexLock lock(&mu_);
  auto it = nanos_.find(verb);
  if (it == nanos_.end()) it = nanos_.emplace(std::string(verb), std::vector<int64_t>()).first;
  it->second.push_back(nanos);
}

void HttpStats::Malformed(std::string_view verb, std::string_view message) {
  absl::MutexLock lock(&mu_);
  auto it = malformed_.find(verb);
  if (it == malformed_.end()) it = malformed_.emplace(std::string(verb), 0).first;
  ++it->second;
  if (examples_.size() < 10) examples_.push_back(absl::StrCat(Sv(verb), ": ", Sv(message)));
}

std::vector<VerbSummary> HttpStats::Summaries() const {
  absl::MutexLock lock(&mu_);
  std::map<std::string, VerbSummary> rows;
  for (const auto& [verb, samples] : nanos_) {
    VerbSummary& r = rows[verb];
    r.verb = verb;
    std::vector<int64_t> s = samples;
    std::sort(s.begin(), s.end());
    r.count = s.size();
    if (s.empty()) continue;
    auto at = [&](double q) {
      size_t i = static_cast<size_t>(q * static_cast<double>(s.size() - 1) + 0.5);
      return static_cast<double>(s[std::min(i, s.size() - 1)]) / 1e6;
    };
    r.p50_ms = at(0.50);
    r.p90_ms = at(0.90);
    r.p99_ms = at(0.99);
    r.max_ms = static_cast<double>(s.back()) / 1e6;
    double sum = 0;
    for (int64_t v : s) sum += static_cast<double>(v);
    r.mean_ms = sum / static_cast<double>(s.size()) / 1e6;
  }
  for (const auto& [verb, n] : malformed_) {
    rows[verb].verb = verb;
    rows[verb].malformed = n;
  }
  std::vector<VerbSummary> out;
  for (auto& [verb, r] : rows) out.push_back(std::move(r));
  return out;
}

uint64_t HttpStats::malformed_total() const {
  absl::MutexLock lock(&mu_);
  uint64_t n = 0;
  for (const auto& [verb, c] : malformed_) n += c;
  return n;
}

uint64_t HttpStats::requests_total() const {
  absl::MutexLock lock(&mu_);
  uint64_t n = 0;
  for (const auto& [verb, s] : nanos_) n += s.size();
  return n;
}

std::vector<std::string> HttpStats::malformed_examples() const {
  absl::MutexLock lock(&mu_);
  return examples_;
}

std::string FormatVerbTable(const std::vector<VerbSummary>& rows) {
  std::string out = absl::StrFormat("  %-12s %8s %9s %9s %9s %9s %10s\n", "verb", "requests",
                                    "p50 ms", "p90 ms", "p99 ms", "max ms", "malformed");
  for (const VerbSummary& r : rows) {
    absl::StrAppendFormat(&out, "  %-12s %8d %9.3f %9.3f %9.3f %9.3f %10d\n", r.verb, r.count,
                          r.p50_ms, r.p90_ms, r.p99_ms, r.max_ms, r.malformed);
  }
  return out;
}

}  // namespace pdc::sim
