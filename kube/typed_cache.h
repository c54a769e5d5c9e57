// TypedCache<T>: an informer's indexer for one kind of object, decoded once
// into pdc's own type T, keyed "<ns>/<name>" ("<name>" when cluster-scoped),
// and a WorkQueue fed with the key of every object that changed — client-go's
// shared informer + lister + event handler that enqueues, in one piece.
//
// It is a Reflector's sink: Replace (after a list) keeps exactly the listed
// objects and queues every key that was added, changed or dropped; Upsert and
// Remove queue their key. An object whose metadata or body cannot be decoded
// is not kept (a previous version of it is dropped too: a controller never
// acts on a stale copy it can no longer check) and its key is queued, so the
// controller sees it gone and the decode error is counted and kept for
// whoever reports it.
//
// Controllers read the cache (Get, List) from their Reconcile(key); what they
// read is a copy, consistent for that object.
// Thread-safety: sink methods on the reflector's thread; Get/List/errors from
// any thread.
#ifndef PDC_KUBE_TYPED_CACHE_H_
#define PDC_KUBE_TYPED_CACHE_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "api/json_util.h"
#include "api/kube_objects.h"
#include "kube/kube_reflector.h"
#include "kube/work_queue.h"

namespace pdc::kube {

template <typename T>
class TypedCache final : public ReflectorSink {
 public:
  // Decodes one whole object; an error says which field and why.
  using Decoder = std::function<absl::StatusOr<T>(const api::json::Value& object,
                                                  const api::ObjectMeta& meta)>;

  // `queue` (may be null: a cache nobody reconciles) must outlive the cache.
  TypedCache(std::string kind, Decoder decode, WorkQueue* queue)
      : kind_(std::move(kind)), decode_(std::move(decode)), queue_(queue) {}

  void Replace(const std::vector<const api::json::Value*>& items) override {
    std::vector<std::string> changed;
    {
      absl::MutexLock lock(&mu_);
      absl::flat_hash_set<std::string> seen;
      for (const api::json::Value* item : items) {
        if (auto key = UpsertLocked(*item)) {
          seen.insert(*key);
          changed.push_back(*key);
        }
      }
      for (auto it = objects_.begin(); it != objects_.end();) {
        if (seen.contains(it->first)) {
          ++it;
          continue;
        }
        changed.push_back(it->first);
        it = objects_.erase(it);
      }
      synced_ = true;
    }
    for (const std::string& key : changed) Enqueue(key);
  }

  void Upsert(const api::json::Value& object) override {
    std::optional<std::string> key;
    {
      absl::MutexLock lock(&mu_);
      key = UpsertLocked(object);
    }
    if (key) Enqueue(*key);
  }

  void Remove(const api::json::Value& object) override {
    auto meta = api::ReadObjectMeta(object, kind_);
    if (!meta.ok()) return;  // Never kept: nothing to remove.
    const std::string key = meta->Key();
    {
      absl::MutexLock lock(&mu_);
      objects_.erase(key);
      errors_.erase(key);
    }
    Enqueue(key);
  }

  // A copy of the object under `key`, with its metadata.
  struct Entry {
    api::ObjectMeta meta;
    T value;
  };
  std::optional<Entry> Get(const std::string& key) const {
    absl::MutexLock lock(&mu_);
    auto it = objects_.find(key);
    if (it == objects_.end()) return std::nullopt;
    return it->second;
  }
  // Every object, ordered by key.
  std::vector<Entry> List() const {
    absl::MutexLock lock(&mu_);
    std::vector<Entry> out;
    out.reserve(objects_.size());
    for (const auto& [key, entry] : objects_) out.push_back(entry);
    return out;
  }
  // Objects seen but not kept, by key, with the decode error.
  std::map<std::string, absl::Status> errors() const {
    absl::MutexLock lock(&mu_);
    return errors_;
  }
  size_t size() const {
    absl::MutexLock lock(&mu_);
    return objects_.size();
  }
  // The first list has been applied.
  bool synced() const {
    absl::MutexLock lock(&mu_);
    return synced_;
  }

 private:
  // The key of the object if its metadata could be read (whether or not
  // the body decoded: either way the key changed).
  std::optional<std::string> UpsertLocked(const api::json::Value& object)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto meta = api::ReadObjectMeta(object, kind_);
    if (!meta.ok()) return std::nullopt;  // No key to file it under.
    std::string key = meta->Key();
    auto value = decode_(object, *meta);
    if (!value.ok()) {
      objects_.erase(key);
      errors_[key] = value.status();
      return key;
    }
    errors_.erase(key);
    objects_.insert_or_assign(key, Entry{*std::move(meta), *std::move(value)});
    return key;
  }

  void Enqueue(const std::string& key) {
    if (queue_ != nullptr) queue_->Add(key);
  }

  const std::string kind_;
  const Decoder decode_;
  WorkQueue* const queue_;
  mutable absl::Mutex mu_;
  std::map<std::string, Entry> objects_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, absl::Status> errors_ ABSL_GUARDED_BY(mu_);
  bool synced_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace pdc::kube

#endif  // PDC_KUBE_TYPED_CACHE_H_
