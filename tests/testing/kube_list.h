// Lists of the kube-apiserver double (kube_resources.h): resourceVersion /
// resourceVersionMatch semantics, limit and continue tokens, label and field
// selectors, as k8s.io/apiserver/pkg/storage/etcd3/store.go GetList serves
// them straight from etcd (no watch cache).
// Thread-safety: pure functions over a thread-safe EtcdClient.
#ifndef PDC_TESTS_TESTING_KUBE_LIST_H_
#define PDC_TESTS_TESTING_KUBE_LIST_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/testing/etcd_client.h"
#include "tests/testing/kube_json.h"
#include "tests/testing/kube_resources.h"

namespace pdc::testing::kube {

// A fieldSelector: comma-separated path=value, path==value, path!=value
// over the object's JSON (metadata.name, spec.nodeName...). kube-apiserver
// accepts only a few paths per resource; the double accepts any.
class FieldSelector {
 public:
  static absl::StatusOr<FieldSelector> Parse(std::string_view text);
  bool Matches(const Value& obj) const;
  bool empty() const { return terms_.empty(); }

 private:
  struct Term {
    std::vector<std::string> path;
    std::string value;
    bool equal = true;
  };
  std::vector<Term> terms_;
};

// Both selectors of a request (labelSelector, fieldSelector).
struct Selectors {
  LabelSelector labels;
  FieldSelector fields;
  bool Matches(const Value& obj) const;
  static absl::StatusOr<Selectors> FromQuery(const Query& q);
};

// The continue token (k8s.io/apiserver/pkg/storage/continue.go
// EncodeContinue): base64url (no padding) of
// {"v":"meta.k8s.io/v1","rv":<list revision>,"start":<next key, relative to
// the collection prefix>}.
std::string EncodeContinue(std::string_view next_key_relative,
                           int64_t revision);
absl::StatusOr<std::pair<std::string, int64_t>> DecodeContinue(
    std::string_view token);

// GET on a collection: the <Kind>List answer.
absl::StatusOr<Answer> ListCollection(EtcdClient& etcd, const KubeResource& r,
                                      std::string_view ns, const Query& q);

}  // namespace pdc::testing::kube

#endif  // PDC_TESTS_TESTING_KUBE_LIST_H_
