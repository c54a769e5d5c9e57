#include "driver/dra/prepared_checkpoint.h"

#include <charconv>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/crc32c.h"
#include "common/file_util.h"
#include "common/strings.h"

namespace pdc::driver::dra {

namespace {

bool ValidField(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\0') return false;
  }
  return true;
}

std::string Body(const PreparedClaim& claim) {
  std::string body = absl::StrCat(claim.uid, " ", claim.ns, " ", claim.name);
  for (const PreparedDevice& d : claim.devices) {
    absl::StrAppend(&body, " ", d.request, ",", d.pool, ",", d.device, ",", d.address.ToString());
  }
  return body;
}

absl::StatusOr<PreparedClaim> DecodeLine(std::string_view line) {
  const size_t space = line.find(' ');
  if (space != 8) return absl::DataLossError("no checksum");
  uint32_t crc = 0;
  const auto [end, ec] = std::from_chars(line.data(), line.data() + 8, crc, 16);
  if (ec != std::errc() || end != line.data() + 8) return absl::DataLossError("bad checksum");
  const std::string_view body = line.substr(9);
  if (crc32c::Unmask(crc) != crc32c::Value(body)) {
    return absl::DataLossError("checksum mismatch");
  }
  std::vector<absl::string_view> fields = absl::StrSplit(Sv(body), ' ');
  if (fields.size() < 3) return absl::DataLossError("fewer than 3 fields");
  PreparedClaim claim{std::string(fields[0]), std::string(fields[1]), std::string(fields[2]), {}};
  for (size_t i = 3; i < fields.size(); ++i) {
    std::vector<absl::string_view> parts = absl::StrSplit(fields[i], ',');
    if (parts.size() != 4)
      return absl::DataLossError(absl::StrCat("device field ", i, " malformed"));
    absl::StatusOr<PciAddress> address = PciAddress::Parse(StdSv(parts[3]));
    if (!address.ok())
      return absl::DataLossError(absl::StrCat("device field ", i, ": bad address"));
    claim.devices.push_back(
        {std::string(parts[0]), std::string(parts[1]), std::string(parts[2]), *address});
  }
  return claim;
}

}  // namespace

std::string PreparedCheckpoint::EncodeLine(const PreparedClaim& claim) {
  const std::string body = Body(claim);
  return absl::StrFormat("%08x %s", crc32c::Mask(crc32c::Value(body)), body);
}

absl::StatusOr<std::unique_ptr<PreparedCheckpoint>> PreparedCheckpoint::Open(std::string path) {
  std::unique_ptr<PreparedCheckpoint> cp(new PreparedCheckpoint(path));
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (absl::IsNotFound(text.status())) return cp;
  if (!text.ok()) return text.status();
  std::vector<absl::string_view> lines = absl::StrSplit(*text, '\n');
  if (lines.empty() || lines[0] != Sv(kPreparedCheckpointHeader)) {
    return absl::DataLossError(absl::StrCat(path,
                                            ": line 1: not a pdc prepared-claims checkpoint"
                                            " (expected \"",
                                            Sv(kPreparedCheckpointHeader), "\")"));
  }
  absl::MutexLock lock(&cp->mu_);
  for (size_t i = 1; i < lines.size(); ++i) {
    // The last piece is empty when the file ends with a newline, as every
    // complete file does.
    if (i + 1 == lines.size() && lines[i].empty()) break;
    absl::StatusOr<PreparedClaim> claim = DecodeLine(StdSv(lines[i]));
    if (!claim.ok()) {
      cp->problems_.push_back(
          absl::StrCat(path, ": line ", i + 1, ": ", claim.status().message(), "; entry ignored"));
      continue;
    }
    cp->claims_[claim->uid] = *std::move(claim);
  }
  return cp;
}

std::optional<PreparedClaim> PreparedCheckpoint::Get(const std::string& uid) const {
  absl::MutexLock lock(&mu_);
  auto it = claims_.find(uid);
  if (it == claims_.end()) return std::nullopt;
  return it->second;
}

std::vector<PreparedClaim> PreparedCheckpoint::Claims() const {
  absl::MutexLock lock(&mu_);
  std::vector<PreparedClaim> out;
  for (const auto& [uid, claim] : claims_) out.push_back(claim);
  return out;
}

absl::Status PreparedCheckpoint::Put(const PreparedClaim& claim) {
  if (!ValidField(claim.uid) || !ValidField(claim.ns) || !ValidField(claim.name)) {
    return absl::InvalidArgumentError(absl::StrCat("prepared claim ", claim.ns, "/", claim.name,
                                                   " (", claim.uid, "): empty or unsafe field"));
  }
  for (const PreparedDevice& d : claim.devices) {
    if (!ValidField(d.request) || !ValidField(d.pool) || !ValidField(d.device)) {
      return absl::InvalidArgumentError(absl::StrCat("prepared claim ", claim.ns, "/", claim.name,
                                                     ": device \"", d.device,
                                                     "\" has an empty or unsafe field"));
    }
  }
  absl::MutexLock lock(&mu_);
  std::optional<PreparedClaim> previous;
  if (auto it = claims_.find(claim.uid); it != claims_.end()) previous = it->second;
  claims_[claim.uid] = claim;
  absl::Status s = PersistLocked();
  if (!s.ok()) {
    // Memory must not claim what the disk does not hold.
    if (previous) {
      claims_[claim.uid] = *previous;
    } else {
      claims_.erase(claim.uid);
    }
  }
  return s;
}

absl::Status PreparedCheckpoint::Remove(const std::string& uid) {
  absl::MutexLock lock(&mu_);
  auto it = claims_.find(uid);
  if (it == claims_.end()) return absl::OkStatus();
  PreparedClaim previous = it->second;
  claims_.erase(it);
  absl::Status s = PersistLocked();
  if (!s.ok()) claims_[uid] = previous;
  return s;
}

absl::Status PreparedCheckpoint::PersistLocked() {
  std::string out = absl::StrCat(Sv(kPreparedCheckpointHeader), "\n");
  for (const auto& [uid, claim] : claims_) absl::StrAppend(&out, EncodeLine(claim), "\n");
  return WriteFileAtomically(path_, out);
}

}  // namespace pdc::driver::dra
