// FakeKube: an in-memory Kubernetes API for the three calls pdc-extender
// makes (kube/kube_client.h). It records every call, in order, as one
// line:
//   "GET <ns>/<name>"
//   "PATCH <ns>/<name> <key>=<value>"
//   "BIND <ns>/<name> <uid> <node>"
// and answers what the test set: the pod GetPod returns (NotFound, as
// kube-apiserver says for a pod it does not have, until SetPod), and the
// status of AnnotatePod and of BindPod (OK until set).
// Thread-safety: thread-safe, as KubeClient requires.
#ifndef PDC_TESTS_TESTING_FAKE_KUBE_H_
#define PDC_TESTS_TESTING_FAKE_KUBE_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/strings.h"
#include "kube/kube_client.h"

namespace pdc::testing {

class FakeKube final : public pdc::kube::KubeClient {
 public:
  absl::StatusOr<std::string> GetPod(std::string_view ns, std::string_view name,
                                     absl::Duration /*timeout*/) override {
    absl::MutexLock lock(&mu_);
    calls_.push_back(absl::StrCat("GET ", Sv(ns), "/", Sv(name)));
    if (!pod_.has_value()) {
      return absl::NotFoundError(
          absl::StrCat("pods \"", Sv(name), "\" not found"));
    }
    return *pod_;
  }

  absl::Status AnnotatePod(std::string_view ns, std::string_view name,
                           std::string_view key, std::string_view value,
                           absl::Duration /*timeout*/) override {
    absl::MutexLock lock(&mu_);
    calls_.push_back(absl::StrCat("PATCH ", Sv(ns), "/", Sv(name), " ", Sv(key),
                                  "=", Sv(value)));
    return annotate_status_;
  }

  absl::Status BindPod(std::string_view ns, std::string_view name,
                       std::string_view uid, std::string_view node,
                       absl::Duration /*timeout*/) override {
    absl::MutexLock lock(&mu_);
    calls_.push_back(absl::StrCat("BIND ", Sv(ns), "/", Sv(name), " ", Sv(uid),
                                  " ", Sv(node)));
    return bind_status_;
  }

  // What every later GetPod answers: the pod's JSON, or an error.
  void SetPod(absl::StatusOr<std::string> answer) {
    absl::MutexLock lock(&mu_);
    pod_ = std::move(answer);
  }
  void SetAnnotateStatus(absl::Status status) {
    absl::MutexLock lock(&mu_);
    annotate_status_ = std::move(status);
  }
  void SetBindStatus(absl::Status status) {
    absl::MutexLock lock(&mu_);
    bind_status_ = std::move(status);
  }

  // Every call so far, in order.
  std::vector<std::string> calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::StatusOr<std::string>> pod_ ABSL_GUARDED_BY(mu_);
  absl::Status annotate_status_ ABSL_GUARDED_BY(mu_);
  absl::Status bind_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdc::testing

#endif  // PDC_TESTS_TESTING_FAKE_KUBE_H_
