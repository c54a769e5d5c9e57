// The REST semantics of the kube-apiserver double (kube_apiserver_double.h)
// over etcd, without sockets: the table of resources it serves, request
// paths, and create / get / list / update / patch / delete / bind, each
// following the kube-apiserver code named at the function. Objects are
// stored as JSON under /registry/... keys with metadata.resourceVersion
// cleared; on the way out resourceVersion is the key's etcd mod_revision
// (k8s.io/apiserver/pkg/storage/etcd3/store.go and the APIObjectVersioner
// of k8s.io/apiserver/pkg/storage/api_object_versioner.go).
// Thread-safety: thread-safe (etcd serialises the writes; every
// read-modify-write is an etcd transaction on mod_revision).
#ifndef PDC_TESTS_TESTING_KUBE_RESOURCES_H_
#define PDC_TESTS_TESTING_KUBE_RESOURCES_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "tests/testing/etcd_client.h"
#include "tests/testing/kube_json.h"

namespace pdc::testing::kube {

// One served resource, namespaced unless `cluster_scoped`.
struct KubeResource {
  std::string group;  // "" is the core group (paths under /api/v1).
  std::string version;
  std::string resource;              // Plural, lower case: "pods".
  std::string kind;                  // "Pod"
  bool status_subresource = false;   // PUT/PATCH .../status
  bool binding_subresource = false;  // POST .../binding (pods)
  // Deleting a pod scheduled to a node waits for its kubelet
  // (pkg/registry/core/pod/strategy.go, CheckGracefulDelete).
  bool graceful_delete = false;
  // The etcd key prefix, ending in '/': "/registry/pods/".
  std::string storage_prefix;
  // The resource's own validation (pkg/apis/<group>/validation), run on
  // the object about to be stored: `old` null on create, `subresource` ""
  // or "status". Null: none beyond the generic rules.
  std::function<absl::Status(const Value* old, const Value& obj,
                             std::string_view subresource)>
      validate;
  // Cluster-scoped (nodes, DeviceClasses, ResourceSlices): paths without
  // namespaces/<ns>/, and no metadata.namespace (rest.BeforeCreate and
  // BeforeUpdate of k8s.io/apiserver/pkg/registry/rest clear it).
  bool cluster_scoped = false;

  // "v1" or "<group>/<version>".
  std::string api_version() const;
  // "pods" or "<resource>.<group>", as errors name it.
  std::string qualified() const;
};

// pods (+status, +binding), events (core v1);
// persistentdeviceclaims.pdc.kubevirt.io/v1alpha1 (+status);
// virtualmachines and virtualmachineinstances.kubevirt.io/v1 (+status);
// leases.coordination.k8s.io/v1; resourceclaims.resource.k8s.io/v1
// (+status, validated: kube_resource_claims.h) and resourceclaimtemplates;
// the cluster-scoped resourceslices and deviceclasses.resource.k8s.io/v1
// (validated: kube_resource_slices.h). Storage prefixes as kube-apiserver's
// (core resources under /registry/<resource>/, others under
// /registry/<group>/<resource>/).
std::vector<KubeResource> StandardResources();

// A request path taken apart.
struct ResourcePath {
  const KubeResource* resource = nullptr;
  // "" for the all-namespaces collection and for cluster-scoped resources.
  std::string ns;
  std::string name;         // "" for a collection.
  std::string subresource;  // "", "status" or "binding".
};

using Query = std::map<std::string, std::string>;
// "a=1&b=x%2Cy" (percent-decoding, '+' is a space).
Query ParseQuery(std::string_view query);

struct Answer {
  int code = 200;
  std::string body;
};

class KubeStore {
 public:
  // `etcd` and `clock` must outlive the store.
  KubeStore(EtcdClient* etcd, std::vector<KubeResource> resources,
            const Clock* clock);

  // Called with the UID of every object really removed from etcd (not for
  // one only marked deleting); may be called from any request's thread.
  void set_on_removed(std::function<void(const std::string& uid)> f) {
    on_removed_ = std::move(f);
  }

  const std::vector<KubeResource>& resources() const { return resources_; }
  // /api/v1/[namespaces/<ns>/]<resource>[/<name>[/<sub>]] and
  // /apis/<group>/<version>/... ; NotFound (404) for anything else.
  absl::StatusOr<ResourcePath> ParsePath(std::string_view path) const;
  // The etcd key of one object, and the prefix of a collection ("" ns: all).
  static std::string Key(const KubeResource& r, std::string_view ns,
                         std::string_view name);
  static std::string CollectionPrefix(const KubeResource& r,
                                      std::string_view ns);
  // The object stored in `kv`, with metadata.resourceVersion = `rv`
  // (0: kv.mod_revision).
  static absl::StatusOr<Document> Decode(const EtcdKeyValue& kv,
                                         int64_t rv = 0);

  absl::StatusOr<Answer> Create(const ResourcePath& p, std::string_view body);
  absl::StatusOr<Answer> Get(const ResourcePath& p);
  absl::StatusOr<Answer> List(const ResourcePath& p, const Query& q);
  absl::StatusOr<Answer> Update(const ResourcePath& p, std::string_view body);
  absl::StatusOr<Answer> Patch(const ResourcePath& p,
                               std::string_view content_type,
                               std::string_view body);
  absl::StatusOr<Answer> Delete(const ResourcePath& p, std::string_view body,
                                const Query& q);
  absl::StatusOr<Answer> Bind(const ResourcePath& p, std::string_view body);

  // For the garbage collector: every stored object of every resource.
  struct Stored {
    const KubeResource* resource;
    Document object;
  };
  absl::StatusOr<std::vector<Stored>> ListEverything();
  // Deletes one object (as a DELETE with a UID precondition would); a
  // NotFound or a UID mismatch is not an error (already gone).
  absl::Status DeleteIfUid(const KubeResource& r, std::string_view ns,
                           std::string_view name, std::string_view uid);
  // Drops the ownerReferences whose UIDs are in `dead` from one object.
  absl::Status DropOwnerReferences(const KubeResource& r, std::string_view ns,
                                   std::string_view name,
                                   const std::vector<std::string>& dead);

 private:
  // The outcome of one read-modify-write.
  struct Written {
    Document object;       // As stored (resourceVersion set).
    bool removed = false;  // Deleted: finalizers emptied on a deleting object.
  };
  // Mutation: `obj` starts as a copy of `old` (both with resourceVersion
  // set) and is changed in place; an error aborts the update.
  using Mutation =
      std::function<absl::Status(const Document& old, Document& obj)>;
  // k8s.io/apiserver/pkg/storage/etcd3/store.go GuaranteedUpdate: read,
  // mutate, write in a transaction comparing mod_revision, retry when
  // someone wrote in between; an unchanged object is not written (its
  // resourceVersion stays).
  absl::StatusOr<Written> GuaranteedUpdate(const KubeResource& r,
                                           std::string_view ns,
                                           std::string_view name,
                                           const Mutation& mutate);
  // The update rules shared by PUT and PATCH (object or status).
  absl::Status PrepareUpdate(const KubeResource& r, const ResourcePath& p,
                             const Document& old, Document& obj) const;
  absl::StatusOr<Answer> RemoveOrMark(const ResourcePath& p,
                                      std::string_view pre_uid,
                                      std::string_view pre_rv,
                                      std::optional<int64_t> grace);
  void Removed(const Document& obj);

  EtcdClient* const etcd_;
  const std::vector<KubeResource> resources_;
  const Clock* const clock_;
  std::function<void(const std::string&)> on_removed_;
};

}  // namespace pdc::testing::kube

#endif  // PDC_TESTS_TESTING_KUBE_RESOURCES_H_
