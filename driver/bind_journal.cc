#include "driver/bind_journal.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/strings.h"

namespace pdc::driver {
namespace {

constexpr std::string_view kHeader = "pdc-vfio-journal v3";
constexpr std::string_view kHeaderV2 = "pdc-vfio-journal v2";
constexpr std::string_view kHeaderV1 = "pdc-vfio-journal v1";

std::optional<JournalState> ParseState(absl::string_view s) {
  if (s == "binding") return JournalState::kBinding;
  if (s == "bound") return JournalState::kBound;
  if (s == "restoring") return JournalState::kRestoring;
  if (s == "erasing") return JournalState::kErasing;
  if (s == "returned") return JournalState::kReturned;
  return std::nullopt;
}

std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }
std::string FromDash(absl::string_view s) { return s == "-" ? "" : std::string(s); }

// Driver names and serials go in a space-separated line: refuse what would
// not read back.
bool IsWord(const std::string& s) { return IsSpaceFreeWord(s) && s != "-"; }

}  // namespace

std::string_view ToString(JournalState state) {
  switch (state) {
    case JournalState::kBinding:
      return "binding";
    case JournalState::kBound:
      return "bound";
    case JournalState::kRestoring:
      return "restoring";
    case JournalState::kErasing:
      return "erasing";
    case JournalState::kReturned:
      return "returned";
  }
  return "unknown";
}

absl::StatusOr<std::unique_ptr<BindJournal>> BindJournal::Open(std::string path,
                                                               std::string current_boot) {
  std::unique_ptr<BindJournal> j(new BindJournal(path, std::move(current_boot)));
  auto content = ReadFileToString(path);
  if (absl::IsNotFound(content.status())) return j;
  if (!content.ok()) return content.status();
  std::vector<absl::string_view> lines =
      absl::StrSplit(*content, '\n', absl::SkipEmpty());
  if (lines.empty()) return j;
  const bool v1 = lines[0] == Sv(kHeaderV1);
  const bool v2 = lines[0] == Sv(kHeaderV2);
  if (lines[0] != Sv(kHeader) && !v1 && !v2) {
    return absl::DataLossError(absl::StrCat(path, ": first line is not \"", Sv(kHeader), "\""));
  }
  const size_t fields = v1 ? 4 : v2 ? 5 : 7;
  absl::MutexLock lock(&j->mu_);
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<absl::string_view> f = absl::StrSplit(lines[i], ' ');
    auto corrupt = [&](absl::string_view why) {
      return absl::DataLossError(
          absl::StrCat(path, ":", i + 1, ": ", why, ": \"", lines[i], "\""));
    };
    if (f.size() != fields) return corrupt(absl::StrCat("want ", fields, " fields"));
    auto address = PciAddress::Parse(StdSv(f[0]));
    if (!address.ok()) return corrupt("bad PCI address");
    auto state = ParseState(f[1]);
    if (!state) return corrupt("bad state");
    j->entries_[*address] = JournalEntry{*address, *state, FromDash(f[2]), FromDash(f[3]),
                                         v1 ? std::string(kUnknownBoot) : FromDash(f[4]),
                                         fields > 5 ? FromDash(f[5]) : std::string(),
                                         fields > 6 ? FromDash(f[6]) : std::string()};
  }
  return j;
}

std::optional<JournalEntry> BindJournal::Get(PciAddress address) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(address);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

std::vector<JournalEntry> BindJournal::Entries() const {
  absl::MutexLock lock(&mu_);
  std::vector<JournalEntry> out;
  for (const auto& [a, e] : entries_) out.push_back(e);
  return out;
}

absl::Status BindJournal::Put(const JournalEntry& in) {
  if (!in.original_driver.empty() && !IsWord(in.original_driver)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "journal entry for ", in.address.ToString(), ": driver name \"",
        in.original_driver, "\" contains white space"));
  }
  JournalEntry entry = in;
  // A serial is a convenience (reported while the device is on vfio-pci);
  // one that would not read back is dropped rather than failing the bind.
  if (!IsWord(entry.serial)) entry.serial.clear();
  if (entry.serial.empty()) {
    entry.boot_id.clear();
  } else if (entry.boot_id.empty()) {
    entry.boot_id = current_boot_;
  }
  if (!IsWord(entry.boot_id)) entry.boot_id.clear();
  // Like the serial: one that would not read back is unknown.
  if (!IsWord(entry.firmware)) entry.firmware.clear();
  if (!IsWord(entry.dsn)) entry.dsn.clear();
  absl::MutexLock lock(&mu_);
  auto old = entries_.find(entry.address);
  std::optional<JournalEntry> previous;
  if (old != entries_.end()) previous = old->second;
  entries_[entry.address] = entry;
  absl::Status s = PersistLocked();
  if (!s.ok()) {
    // Memory must not claim what the disk does not hold.
    if (previous) {
      entries_[entry.address] = *previous;
    } else {
      entries_.erase(entry.address);
    }
  }
  return s;
}

bool BindJournal::SerialCurrent(const JournalEntry& entry) const {
  return current_boot_.empty() || entry.boot_id == current_boot_ ||
         entry.boot_id == kUnknownBoot;
}

absl::Status BindJournal::Remove(PciAddress address) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(address);
  if (it == entries_.end()) return absl::OkStatus();
  JournalEntry previous = it->second;
  entries_.erase(it);
  absl::Status s = PersistLocked();
  if (!s.ok()) entries_[address] = previous;
  return s;
}

absl::Status BindJournal::Move(PciAddress from, PciAddress to) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(from);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat("no journal entry for ", from.ToString()));
  }
  if (from == to) return absl::OkStatus();
  if (entries_.contains(to)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot move the journal entry of ", from.ToString(), " to ", to.ToString(),
        ": it has one"));
  }
  JournalEntry moved = it->second;
  moved.address = to;
  entries_.erase(it);
  entries_[to] = moved;
  absl::Status s = PersistLocked();
  if (!s.ok()) {
    entries_.erase(to);
    moved.address = from;
    entries_[from] = moved;
  }
  return s;
}

absl::Status BindJournal::PersistLocked() {
  std::string out = absl::StrCat(Sv(kHeader), "\n");
  for (const auto& [a, e] : entries_) {
    absl::StrAppend(&out, a.ToString(), " ", Sv(ToString(e.state)), " ",
                    OrDash(e.original_driver), " ", OrDash(e.serial), " ",
                    OrDash(e.boot_id), " ", OrDash(e.firmware), " ", OrDash(e.dsn), "\n");
  }
  return WriteFileAtomically(path_, out);
}

}  // namespace pdc::driver
