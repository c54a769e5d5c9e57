// EtcdClient: etcd's v3 KV and watch API through its JSON gateway (HTTP/JSON
// on the client port, the same messages as gRPC, bytes fields in base64):
// POST /v3/kv/range, /v3/kv/put, /v3/kv/txn, /v3/kv/deleterange,
// /v3/kv/compaction and the streaming POST /v3/watch. Only what the
// kube-apiserver double needs, as kube-apiserver's own etcd3 storage uses
// it: ranges at a revision, transactions comparing mod_revision /
// create_revision, watches from a revision with prev_kv and progress
// notifications.
//
// Errors carry etcd's gRPC code as the absl code (the numbering is the same):
// a compacted revision is OutOfRange ("mvcc: required revision has been
// compacted"), a revision not yet reached is OutOfRange too ("mvcc: required
// revision is a future revision"); an unreachable cluster is Unavailable.
// With several endpoints (a cluster) a request that cannot reach one
// endpoint is sent to the next.
// Thread-safety: thread-safe; concurrent calls use separate connections.
#ifndef PDC_TESTS_TESTING_ETCD_CLIENT_H_
#define PDC_TESTS_TESTING_ETCD_CLIENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "tests/testing/http_stream.h"

namespace pdc {
class HttpClient;
}

namespace pdc::testing {

struct EtcdKeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
};

struct EtcdRangeResult {
  int64_t revision = 0;  // The store's revision the range was read at.
  std::vector<EtcdKeyValue> kvs;
  bool more = false;  // The limit cut the range short.
  int64_t count = 0;  // Keys in the whole range.
};

// One comparison of a transaction: target(key) == value.
struct EtcdCompare {
  enum class Target { kModRevision, kCreateRevision, kVersion };
  std::string key;
  Target target = Target::kModRevision;
  int64_t value = 0;
};

// One operation of a transaction.
struct EtcdOp {
  enum class Kind { kPut, kDelete, kGet };
  Kind kind = Kind::kGet;
  std::string key;
  std::string value;  // kPut only.
};

struct EtcdTxnResult {
  bool succeeded = false;
  int64_t revision = 0;  // The store's revision after the transaction.
  // The key-values of every kGet of the branch that ran, in order.
  std::vector<EtcdKeyValue> got;
};

struct EtcdEvent {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  EtcdKeyValue kv;  // For a delete: key and mod_revision (the deletion's).
  std::optional<EtcdKeyValue> prev_kv;  // When the watch asked for it.
};

// One message of a watch stream.
struct EtcdWatchResponse {
  int64_t revision = 0;  // header.revision
  bool created = false;
  bool canceled = false;
  int64_t compact_revision = 0;  // Set when canceled for a compacted start.
  std::string cancel_reason;
  std::vector<EtcdEvent> events;
  // A progress notification: no events, not created/canceled; every event
  // up to `revision` has been sent.
  bool progress_notify() const {
    return !created && !canceled && events.empty();
  }
};

class EtcdWatch {
 public:
  explicit EtcdWatch(std::unique_ptr<HttpStream> stream)
      : stream_(std::move(stream)) {}
  // The next message. DeadlineExceeded when none came before `deadline`
  // (the watch stays usable); Unavailable when the stream ended.
  absl::StatusOr<EtcdWatchResponse> Next(absl::Time deadline);
  // For poll() next to other descriptors.
  int fd() const { return stream_->fd(); }
  bool HasBufferedData() const { return stream_->HasBufferedData(); }
  // Ends the stream; a blocked Next returns Unavailable. Any thread.
  void Cancel() { stream_->Cancel(); }

 private:
  std::unique_ptr<HttpStream> stream_;
};

class EtcdClient {
 public:
  // `client_ports`: the members' client ports on 127.0.0.1 (EtcdProcess).
  explicit EtcdClient(std::vector<uint16_t> client_ports,
                      absl::Duration timeout = absl::Seconds(10));
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // The first key after every key starting with `prefix` (etcd's range_end
  // for a prefix).
  static std::string PrefixEnd(std::string_view prefix);

  // Keys in [key, range_end) ("" range_end: just `key`) at `revision` (0:
  // the newest), at most `limit` (0: all), in key order.
  absl::StatusOr<EtcdRangeResult> Range(std::string_view key,
                                        std::string_view range_end = {},
                                        int64_t revision = 0,
                                        int64_t limit = 0);
  // Revision of the put.
  absl::StatusOr<int64_t> Put(std::string_view key, std::string_view value);
  // Revision after the delete; *deleted (optional) gets the count.
  absl::StatusOr<int64_t> DeleteRange(std::string_view key,
                                      std::string_view range_end = {},
                                      int64_t* deleted = nullptr);
  // Every compare holds: `success` runs, else `failure`.
  absl::StatusOr<EtcdTxnResult> Txn(const std::vector<EtcdCompare>& compares,
                                    const std::vector<EtcdOp>& success,
                                    const std::vector<EtcdOp>& failure);
  // Compacts the history up to `revision` (physical: waits for it).
  absl::Status Compact(int64_t revision);
  // The store's current revision (a range over an empty key set).
  absl::StatusOr<int64_t> CurrentRevision();
  // A watch of [key, range_end) from `start_revision` (0: from now). The
  // first message (created, or canceled with compact_revision when
  // `start_revision` was compacted) has been read when this returns it.
  absl::StatusOr<std::unique_ptr<EtcdWatch>> Watch(
      std::string_view key, std::string_view range_end, int64_t start_revision,
      bool prev_kv, bool progress_notify, EtcdWatchResponse* first);

 private:
  // POST `path` with `body`, trying each endpoint; the parsed JSON answer's
  // text on HTTP 200, the mapped etcd error otherwise.
  absl::StatusOr<std::string> Call(std::string_view path,
                                   const std::string& body);
  std::unique_ptr<HttpClient> TakeClient(size_t endpoint);
  void ReturnClient(size_t endpoint, std::unique_ptr<HttpClient> client);

  const std::vector<uint16_t> ports_;
  const absl::Duration timeout_;
  absl::Mutex mu_;
  // Idle kept-alive clients per endpoint.
  std::vector<std::vector<std::unique_ptr<HttpClient>>> idle_
      ABSL_GUARDED_BY(mu_);
  size_t preferred_ ABSL_GUARDED_BY(mu_) =
      0;  // The endpoint that last answered.
};

}  // namespace pdc::testing

#endif  // PDC_TESTS_TESTING_ETCD_CLIENT_H_
