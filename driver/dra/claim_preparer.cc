#include "driver/dra/claim_preparer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <map>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "driver/deviceplugin/names.h"
#include "driver/dra/cdi_spec.h"
#include "driver/dra/device_metadata.h"
#include "driver/pci_function.h"

namespace pdc::driver::dra {

namespace {

std::string ClaimRef(const std::string& ns, const std::string& name) {
  return absl::StrCat("claim ", ns, "/", name);
}

// `s` with the claim named in front, the code kept.
absl::Status About(const std::string& ns, const std::string& name, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(ClaimRef(ns, name), ": ", s.message()));
}

std::string MetadataHostDir(const PreparerOptions& o, const std::string& uid) {
  return absl::StrCat(o.metadata_host_dir, "/", uid);
}

// Removes what Prepare wrote for `uid`; missing files are fine.
absl::Status RemoveArtifacts(const PreparerOptions& o, const std::string& uid) {
  const std::string spec = CdiSpecPath(o.cdi_dir, o.driver_name, uid);
  if (::unlink(spec.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("unlink", spec, errno);
  std::error_code ec;
  std::filesystem::remove_all(MetadataHostDir(o, uid), ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("removing ", MetadataHostDir(o, uid), ": ", ec.message()));
  }
  return FsyncDirectory(o.cdi_dir);
}

// A file the container (virt-launcher runs as an unprivileged user) reads.
absl::Status WriteReadableFile(const std::string& path, std::string_view data) {
  const size_t slash = path.rfind('/');
  if (slash != std::string::npos) {
    absl::Status s = MakeDirectories(path.substr(0, slash));
    if (!s.ok()) return s;
  }
  absl::Status s = WriteFileAtomically(path, data);
  if (!s.ok()) return s;
  if (::chmod(path.c_str(), 0644) != 0) return ErrnoStatus("chmod", path, errno);
  return absl::OkStatus();
}

// Names that become path components: a UID, a request. Kubernetes makes
// them UUIDs and DNS labels; anything else is refused before it reaches a
// path.
bool SafeComponent(std::string_view s) {
  if (s.empty() || s.size() > 253 || s == "." || s == "..") return false;
  for (char c : s) {
    if (!(absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_')) {
      return false;
    }
  }
  return true;
}

}  // namespace

ClaimPreparer::ClaimPreparer(PreparerOptions options, ClaimSource* claims,
                             const DeviceDirectory* devices, VfioBinder* binder, HostView host,
                             PreparedCheckpoint* checkpoint, PreparedCheckpoint* holders)
    : options_(std::move(options)),
      claims_(claims),
      devices_(devices),
      binder_(binder),
      host_(std::move(host)),
      checkpoint_(checkpoint),
      holders_(holders) {}

void ClaimPreparer::Enter(const std::string& uid) {
  absl::MutexLock lock(&mu_);
  auto free = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !busy_.contains(uid); };
  mu_.Await(absl::Condition(&free));
  busy_.insert(uid);
}

void ClaimPreparer::Leave(const std::string& uid) {
  absl::MutexLock lock(&mu_);
  busy_.erase(uid);
}

absl::StatusOr<std::vector<PreparedDeviceAnswer>> ClaimPreparer::Prepare(const std::string& ns,
                                                                         const std::string& name,
                                                                         const std::string& uid) {
  if (ns.empty() || name.empty() || uid.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        ClaimRef(ns, name), " (uid \"", uid, "\"): namespace, name and uid are all required"));
  }
  if (!SafeComponent(uid)) {
    return absl::InvalidArgumentError(
        absl::StrCat(ClaimRef(ns, name), ": uid \"", uid, "\" is not a Kubernetes UID"));
  }
  Enter(uid);
  absl::StatusOr<std::vector<PreparedDeviceAnswer>> out = PrepareClaim(ns, name, uid);
  Leave(uid);
  return out;
}

absl::StatusOr<std::vector<PreparedDeviceAnswer>> ClaimPreparer::PrepareClaim(
    const std::string& ns, const std::string& name, const std::string& uid) {
  absl::StatusOr<ResourceClaimView> claim = claims_->Get(ns, name);
  if (!claim.ok()) return About(ns, name, claim.status());
  if (claim->uid != uid) {
    return absl::FailedPreconditionError(absl::StrCat(ClaimRef(ns, name), " has UID ", claim->uid,
                                                      " but kubelet asked for UID ", uid,
                                                      ": the claim was deleted and created again"));
  }
  if (!claim->allocated) {
    return absl::FailedPreconditionError(absl::StrCat(ClaimRef(ns, name), " is not allocated"));
  }
  struct Item {
    AllocatedDevice allocated;
    PciAddress address;
    int32_t group = -1;
  };
  std::vector<Item> items;
  for (const AllocatedDevice& d : claim->devices) {
    if (d.driver != options_.driver_name || d.pool != options_.node_name) continue;
    if (!SafeComponent(d.request.substr(0, d.request.find('/')))) {
      return absl::InvalidArgumentError(absl::StrCat(ClaimRef(ns, name), ": request name \"",
                                                     d.request, "\" is not a DNS label"));
    }
    absl::StatusOr<PciAddress> address = devices_->Find(d.device);
    if (!address.ok()) {
      return absl::Status(address.status().code(),
                          absl::StrCat(ClaimRef(ns, name), ": device ", d.device, " of pool ",
                                       d.pool, ": ", address.status().message()));
    }
    items.push_back({d, *address});
  }
  if (items.empty()) return std::vector<PreparedDeviceAnswer>{};

  const bool prepared_before = checkpoint_->Get(uid).has_value();
  if (!prepared_before) {
    // The overlap guard: a group still open belongs to someone else, e.g.
    // the QEMU of the VM that used the device until now.
    for (const Item& item : items) {
      absl::StatusOr<PciFunctionInfo> info = ReadPciFunction(*host_.sys, item.address);
      if (!info.ok()) return About(ns, name, info.status());
      if (info->driver != kVfioPci || info->iommu_group < 0) continue;
      absl::StatusOr<std::vector<std::string>> users = VfioGroupUsers(host_, info->iommu_group);
      if (absl::IsNotFound(users.status())) continue;
      if (!users.ok()) {
        return absl::UnavailableError(
            absl::StrCat(ClaimRef(ns, name), ": device ", item.allocated.device, " (",
                         item.address.ToString(), "): cannot tell who holds /dev/vfio/",
                         info->iommu_group, ": ", users.status().message()));
      }
      if (!users->empty()) {
        return absl::UnavailableError(absl::StrCat(
            ClaimRef(ns, name), ": device ", item.allocated.device, " (", item.address.ToString(),
            "): /dev/vfio/", info->iommu_group, " is still open by ", absl::StrJoin(*users, ", "),
            "; retried once it is closed"));
      }
    }
  }

  // Whose data each device holds: another claim's stays on it until it is
  // erased or released (the reclaimer); this claim's is recorded before
  // the first bind, so that its deletion is noticed whatever happens next.
  PreparedClaim holder{uid, ns, name, {}};
  if (auto old = holders_->Get(uid)) holder = *old;
  const std::vector<PreparedClaim> holders = holders_->Claims();
  for (const Item& item : items) {
    for (const PreparedClaim& h : holders) {
      if (h.uid == uid) continue;
      for (const PreparedDevice& d : h.devices) {
        if (d.device != item.allocated.device) continue;
        return absl::UnavailableError(absl::StrCat(
            ClaimRef(ns, name), ": device ", item.allocated.device, " (", item.address.ToString(),
            ") still holds the data of claim ", h.ns, "/", h.name, " (uid ", h.uid,
            "), which used it before; it is erased, or released by an administrator, before "
            "another claim gets it; retried"));
      }
    }
    const bool recorded =
        std::any_of(holder.devices.begin(), holder.devices.end(),
                    [&](const PreparedDevice& d) { return d.device == item.allocated.device; });
    if (!recorded) {
      holder.devices.push_back(
          {item.allocated.request, item.allocated.pool, item.allocated.device, item.address});
    }
  }
  if (absl::Status s = holders_->Put(holder); !s.ok()) return About(ns, name, s);

  std::vector<PciAddress> addresses;
  for (const Item& item : items) addresses.push_back(item.address);
  absl::StatusOr<BindOutcome> bound = binder_->Bind(addresses);
  if (!bound.ok()) {
    return absl::Status(
        bound.status().code(),
        absl::StrCat(ClaimRef(ns, name), ": not handed to vfio-pci: ", bound.status().message()));
  }
  for (Item& item : items) {
    absl::StatusOr<PciFunctionInfo> info = ReadPciFunction(*host_.sys, item.address);
    if (!info.ok()) return About(ns, name, info.status());
    if (info->iommu_group < 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          ClaimRef(ns, name), ": device ", item.address.ToString(), " has no IOMMU group"));
    }
    item.group = info->iommu_group;
  }

  // The metadata files, one per request (KEP-5304), then the CDI spec.
  const MetadataClaim meta_claim{ns, name, uid, claim->pod_claim_name};
  std::map<std::string, MetadataRequest> requests;  // By top-level request.
  for (const Item& item : items) {
    const std::string top = item.allocated.request.substr(0, item.allocated.request.find('/'));
    MetadataRequest& r = requests[top];
    r.name = item.allocated.request;
    r.devices.push_back({options_.driver_name, item.allocated.pool, item.allocated.device,
                         item.address.ToString()});
  }
  std::map<std::string, CdiMount> mounts;  // By top-level request.
  for (const auto& [top, request] : requests) {
    const std::string host_file = absl::StrCat(MetadataHostDir(options_, uid), "/", top, "/",
                                               MetadataFileName(options_.driver_name));
    absl::Status s = WriteReadableFile(host_file, DeviceMetadataJson(meta_claim, request));
    if (!s.ok()) {
      if (!prepared_before) (void)RemoveArtifacts(options_, uid);
      return About(ns, name, s);
    }
    mounts[top] = {host_file, absl::StrCat(MetadataContainerDir(meta_claim, request.name), "/",
                                           MetadataFileName(options_.driver_name))};
  }
  std::vector<std::string> all_addresses;
  for (const Item& item : items) all_addresses.push_back(item.address.ToString());
  const std::string env = absl::StrCat(deviceplugin::ResourceEnvVar(options_.resource_name), "=",
                                       absl::StrJoin(all_addresses, ","));
  const std::string kind = CdiKind(options_.driver_name);
  std::vector<CdiDevice> cdi_devices;
  std::vector<PreparedDeviceAnswer> answers;
  PreparedClaim record{uid, ns, name, {}};
  for (const Item& item : items) {
    CdiDevice d;
    d.name = CdiDeviceName(uid, item.allocated.device);
    d.device_nodes = {"/dev/vfio/vfio", absl::StrCat("/dev/vfio/", item.group)};
    d.env = {env};
    const std::string top = item.allocated.request.substr(0, item.allocated.request.find('/'));
    // One mount per file: a second device of the request would mount the
    // same target twice.
    if (auto it = mounts.find(top); it != mounts.end()) {
      d.mounts.push_back(it->second);
      mounts.erase(it);
    }
    answers.push_back({item.allocated.request, item.allocated.pool, item.allocated.device,
                       CdiDeviceId(kind, d.name)});
    record.devices.push_back(
        {item.allocated.request, item.allocated.pool, item.allocated.device, item.address});
    cdi_devices.push_back(std::move(d));
  }
  absl::StatusOr<std::string> spec = CdiSpecJson(kind, cdi_devices);
  absl::Status s =
      spec.ok() ? WriteReadableFile(CdiSpecPath(options_.cdi_dir, options_.driver_name, uid), *spec)
                : spec.status();
  if (s.ok()) s = checkpoint_->Put(record);
  if (!s.ok()) {
    if (!prepared_before) (void)RemoveArtifacts(options_, uid);
    return About(ns, name, s);
  }
  return answers;
}

absl::Status ClaimPreparer::Unprepare(const std::string& ns, const std::string& name,
                                      const std::string& uid) {
  if (!SafeComponent(uid)) {
    return absl::InvalidArgumentError(
        absl::StrCat(ClaimRef(ns, name), ": uid \"", uid, "\" is not a Kubernetes UID"));
  }
  Enter(uid);
  absl::Status s = RemoveArtifacts(options_, uid);
  if (s.ok()) s = checkpoint_->Remove(uid);
  Leave(uid);
  if (!s.ok()) return About(ns, name, s);
  return absl::OkStatus();
}

}  // namespace pdc::driver::dra
