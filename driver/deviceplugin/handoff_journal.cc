#include "driver/deviceplugin/handoff_journal.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/strings.h"

namespace pdc::driver::deviceplugin {
namespace {

constexpr std::string_view kHeader = "pdc-handoff-journal v1";

// The fields of one line, or why it cannot be read.
absl::StatusOr<HandoffRecord> ParseLine(absl::string_view line) {
  std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
  if (f.size() != 5) return absl::InvalidArgumentError("want 5 fields");
  for (absl::string_view field : f) {
    if (field.empty()) return absl::InvalidArgumentError("empty field");
  }
  HandoffRecord r{std::string(f[0]), std::string(f[1]), std::string(f[2]), std::string(f[3]), {}};
  for (absl::string_view a : absl::StrSplit(f[4], ',')) {
    auto address = PciAddress::Parse(StdSv(a));
    if (!address.ok()) return absl::InvalidArgumentError("bad PCI address");
    r.devices.push_back(*address);
  }
  std::sort(r.devices.begin(), r.devices.end());
  return r;
}

}  // namespace

absl::StatusOr<HandoffJournal::Opened> HandoffJournal::Open(std::string path) {
  Opened out;
  out.journal.reset(new HandoffJournal(path));
  auto content = ReadFileToString(path);
  if (absl::IsNotFound(content.status())) return out;
  if (!content.ok()) return content.status();
  std::vector<absl::string_view> lines = absl::StrSplit(*content, '\n', absl::SkipEmpty());
  if (lines.empty()) return out;
  HandoffJournal& j = *out.journal;
  absl::MutexLock lock(&j.mu_);
  if (lines[0] != Sv(kHeader)) {
    out.corrupt.push_back(absl::DataLossError(absl::StrCat(
        path, ":1: first line is not \"", Sv(kHeader), "\": not a hand-off journal")));
  } else {
    for (size_t i = 1; i < lines.size(); ++i) {
      absl::StatusOr<HandoffRecord> r = ParseLine(lines[i]);
      if (!r.ok()) {
        out.corrupt.push_back(absl::DataLossError(
            absl::StrCat(path, ":", i + 1, ": ", r.status().message(), ": \"", lines[i], "\"")));
        continue;
      }
      Key key{r->resource_name, r->pod_uid};
      j.entries_[key] = std::move(*r);
    }
  }
  // Keep what could not be read for a person to look at: the next write
  // replaces the file with the entries that could.
  if (!out.corrupt.empty()) {
    if (absl::Status s = WriteFileAtomically(path + ".corrupt", *content); !s.ok()) return s;
  }
  return out;
}

std::vector<HandoffRecord> HandoffJournal::Entries() const {
  absl::MutexLock lock(&mu_);
  std::vector<HandoffRecord> out;
  for (const auto& [key, r] : entries_) out.push_back(r);
  return out;
}

bool HandoffJournal::Contains(std::string_view resource_name, std::string_view pod_uid) const {
  absl::MutexLock lock(&mu_);
  return entries_.contains({std::string(resource_name), std::string(pod_uid)});
}

absl::Status HandoffJournal::Put(const HandoffRecord& in) {
  for (const std::string* field : {&in.resource_name, &in.pod_uid, &in.ns, &in.pod_name}) {
    if (field->empty() || !IsSpaceFreeWord(*field)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "hand-off journal entry for pod uid ", in.pod_uid, ": \"", *field,
          "\" is empty or contains white space"));
    }
  }
  if (in.devices.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("hand-off journal entry for pod uid ", in.pod_uid, " lists no device"));
  }
  HandoffRecord record = in;
  std::sort(record.devices.begin(), record.devices.end());
  Key key{record.resource_name, record.pod_uid};
  absl::MutexLock lock(&mu_);
  std::optional<HandoffRecord> previous;
  if (auto it = entries_.find(key); it != entries_.end()) previous = it->second;
  entries_[key] = std::move(record);
  absl::Status s = PersistLocked();
  if (!s.ok()) {
    // Memory must not claim what the disk does not hold.
    if (previous) {
      entries_[key] = *previous;
    } else {
      entries_.erase(key);
    }
  }
  return s;
}

absl::Status HandoffJournal::Remove(std::string_view resource_name, std::string_view pod_uid) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find({std::string(resource_name), std::string(pod_uid)});
  if (it == entries_.end()) return absl::OkStatus();
  HandoffRecord previous = std::move(it->second);
  entries_.erase(it);
  absl::Status s = PersistLocked();
  if (!s.ok()) entries_[{previous.resource_name, previous.pod_uid}] = std::move(previous);
  return s;
}

absl::Status HandoffJournal::PersistLocked() {
  std::string out = absl::StrCat(Sv(kHeader), "\n");
  for (const auto& [key, r] : entries_) {
    absl::StrAppend(&out, r.resource_name, " ", r.pod_uid, " ", r.ns, " ", r.pod_name, " ",
                    absl::StrJoin(r.devices, ",", [](std::string* o, PciAddress a) {
                      o->append(a.ToString());
                    }),
                    "\n");
  }
  return WriteFileAtomically(path_, out);
}

}  // namespace pdc::driver::deviceplugin
