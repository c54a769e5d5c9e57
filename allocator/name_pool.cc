#include "allocator/name_pool.h"

#include <cassert>

#include "common/strings.h"

namespace pdc {

const std::string* NamePool::Intern(std::string_view name) {
  if (name.empty()) return nullptr;
  auto it = holders_.find(Sv(name));
  if (it == holders_.end()) it = holders_.try_emplace(std::string(name), 0).first;
  ++it->second;
  return &it->first;
}

void NamePool::Release(const std::string* name) {
  if (name == nullptr) return;
  auto it = holders_.find(*name);
  assert(it != holders_.end() && &it->first == name);
  if (--it->second == 0) holders_.erase(it);
}

const std::string& NamePool::Empty() {
  static const std::string* const kEmpty = new std::string();
  return *kEmpty;
}

}  // namespace pdc
