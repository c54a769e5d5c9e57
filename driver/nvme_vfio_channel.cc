#include "driver/nvme_vfio_channel.h"

#include <fcntl.h>
#include <linux/vfio.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <tuple>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "driver/pci_function.h"
#include "driver/vfio_binder.h"

namespace pdc::driver {
namespace {

constexpr size_t kPage = 4096;
constexpr size_t kSqEntry = 64;   // IOSQES 6.
constexpr size_t kCqEntry = 16;   // IOCQES 4.
constexpr uint32_t kCsRdy = 0x1;
constexpr uint32_t kCsCfs = 0x2;
constexpr uint32_t kCcEn = 0x1;
constexpr uint32_t kCcIoQueueSizes = (6u << 16) | (4u << 20);  // IOSQES=6, IOCQES=4.
constexpr uint8_t kOpSetFeatures = 0x09;
constexpr uint8_t kOpCreateIoCq = 0x05;
constexpr uint8_t kOpCreateIoSq = 0x01;
constexpr uint32_t kFeatureNumberOfQueues = 0x07;
// DMA addresses are handed out from 4 GiB up (below lie the MSI window and
// firmware (RMRR) ranges of x86 IOMMUs), within a range the IOMMU says is
// usable when it says so (VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE).
constexpr uint64_t kFirstIova = uint64_t{1} << 32;
constexpr uint64_t kLowestIova = uint64_t{1} << 20;

// The usable IOVA ranges of `container` (its IOMMU set), or none when the
// kernel does not say (then any address is taken to be usable).
absl::StatusOr<std::vector<vfio_iova_range>> IovaRanges(int container) {
  std::vector<uint64_t> buf(512);  // 4 KiB, 8-byte aligned.
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto* info = reinterpret_cast<vfio_iommu_type1_info*>(buf.data());
    std::memset(buf.data(), 0, buf.size() * 8);
    info->argsz = static_cast<uint32_t>(buf.size() * 8);
    if (::ioctl(container, VFIO_IOMMU_GET_INFO, info) != 0) {
      return absl::ErrnoToStatus(errno, "VFIO_IOMMU_GET_INFO");
    }
    if (info->argsz > buf.size() * 8) {  // Too small for the capabilities: again.
      buf.assign((info->argsz + 7) / 8, 0);
      continue;
    }
    std::vector<vfio_iova_range> out;
    if ((info->flags & VFIO_IOMMU_INFO_CAPS) == 0) return out;
    const auto* base = reinterpret_cast<const uint8_t*>(buf.data());
    const size_t size = buf.size() * 8;
    for (uint32_t off = info->cap_offset, hops = 0;
         off != 0 && off + sizeof(vfio_info_cap_header) <= size && hops < 64; ++hops) {
      const auto* h = reinterpret_cast<const vfio_info_cap_header*>(base + off);
      if (h->id == VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE &&
          off + sizeof(vfio_iommu_type1_info_cap_iova_range) <= size) {
        const auto* r = reinterpret_cast<const vfio_iommu_type1_info_cap_iova_range*>(h);
        const size_t n = std::min<size_t>(
            r->nr_iovas, (size - off - sizeof(*r)) / sizeof(vfio_iova_range));
        out.assign(r->iova_ranges, r->iova_ranges + n);
      }
      off = h->next;
    }
    return out;
  }
  return absl::InternalError("VFIO_IOMMU_GET_INFO keeps asking for a larger buffer");
}

size_t RoundUpToPage(size_t n) { return (n + kPage - 1) / kPage * kPage; }

void Put16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }
void Put32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
void Put64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }

// A completion queue entry's dword, read from memory the controller writes.
uint32_t LoadCqDword(const uint8_t* entry, int dword) {
  return *reinterpret_cast<const volatile uint32_t*>(entry + 4 * dword);
}

absl::Status ErrnoError(int err, std::string_view what) {
  return absl::ErrnoToStatus(err, Sv(what));
}

// The function on vfio-pci, its group in a container of its own.
class RealVfioNvmeDevice : public NvmeVfioDevice {
 public:
  RealVfioNvmeDevice(std::string describe, UniqueFd container, UniqueFd group, UniqueFd device,
                     uint64_t config_offset, uint64_t bar0_offset, uint64_t bar0_size,
                     IovaWindow iova)
      : describe_(std::move(describe)),
        container_(std::move(container)),
        group_(std::move(group)),
        device_(std::move(device)),
        config_offset_(config_offset),
        bar0_offset_(bar0_offset),
        bar0_size_(bar0_size),
        iova_last_(iova.last),
        next_iova_(iova.first) {}

  ~RealVfioNvmeDevice() override {
    // The device first (vfio-pci resets the function when its last user
    // lets go), then the mappings, then the container.
    device_.reset();
    for (const Mapping& m : mappings_) {
      vfio_iommu_type1_dma_unmap unmap;
      std::memset(&unmap, 0, sizeof(unmap));
      unmap.argsz = sizeof(unmap);
      unmap.iova = m.iova;
      unmap.size = m.size;
      (void)::ioctl(container_.get(), VFIO_IOMMU_UNMAP_DMA, &unmap);
      ::munmap(m.addr, m.size);
    }
  }

  std::string Describe() const override { return describe_; }

  absl::Status EnableBusMaster() override {
    uint16_t cmd = 0;
    if (::pread(device_.get(), &cmd, 2, static_cast<off_t>(config_offset_ + 4)) != 2) {
      return ErrnoError(errno, absl::StrCat(describe_, ": reading the PCI command register"));
    }
    // Memory space (bit 1), bus master (bit 2), INTx disable (bit 10): the
    // channel polls, so the function raises no interrupt.
    cmd |= 0x0002 | 0x0004 | 0x0400;
    if (::pwrite(device_.get(), &cmd, 2, static_cast<off_t>(config_offset_ + 4)) != 2) {
      return ErrnoError(errno, absl::StrCat(describe_, ": writing the PCI command register"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<uint32_t> ReadRegister(uint32_t offset) override {
    RETURN_IF_ERROR(CheckOffset(offset));
    uint32_t v = 0;
    if (::pread(device_.get(), &v, 4, static_cast<off_t>(bar0_offset_ + offset)) != 4) {
      return ErrnoError(errno, absl::StrFormat("%s: reading BAR0 at %04xh", describe_, offset));
    }
    return v;
  }

  absl::Status WriteRegister(uint32_t offset, uint32_t value) override {
    RETURN_IF_ERROR(CheckOffset(offset));
    if (::pwrite(device_.get(), &value, 4, static_cast<off_t>(bar0_offset_ + offset)) != 4) {
      return ErrnoError(errno, absl::StrFormat("%s: writing BAR0 at %04xh", describe_, offset));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<DmaBuffer> AllocateDma(size_t bytes) override {
    bytes = RoundUpToPage(std::max<size_t>(bytes, 1));
    if (iova_last_ - next_iova_ < bytes - 1) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "%s: no IOVA left for %u bytes of DMA memory (usable up to %#x)", describe_, bytes,
          iova_last_));
    }
    void* addr = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (addr == MAP_FAILED) {
      return ErrnoError(errno, absl::StrCat(describe_, ": mmap of ", bytes, " bytes for DMA"));
    }
    vfio_iommu_type1_dma_map map;
    std::memset(&map, 0, sizeof(map));
    map.argsz = sizeof(map);
    map.flags = VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE;
    map.vaddr = reinterpret_cast<uintptr_t>(addr);
    map.iova = next_iova_;
    map.size = bytes;
    if (::ioctl(container_.get(), VFIO_IOMMU_MAP_DMA, &map) != 0) {
      const int e = errno;
      ::munmap(addr, bytes);
      return ErrnoError(e, absl::StrFormat("%s: VFIO_IOMMU_MAP_DMA of %u bytes at IOVA %#x "
                                           "(ENOMEM: RLIMIT_MEMLOCK too low)",
                                           describe_, bytes, next_iova_));
    }
    mappings_.push_back({addr, bytes, next_iova_});
    DmaBuffer b{static_cast<uint8_t*>(addr), next_iova_, bytes};
    next_iova_ += bytes;
    return b;
  }

 private:
  struct Mapping {
    void* addr;
    size_t size;
    uint64_t iova;
  };

  absl::Status CheckOffset(uint32_t offset) const {
    if (offset % 4 != 0 || uint64_t{offset} + 4 > bar0_size_) {
      return absl::OutOfRangeError(absl::StrFormat(
          "%s: register offset %04xh is outside BAR0 (%u bytes)", describe_, offset, bar0_size_));
    }
    return absl::OkStatus();
  }

  const std::string describe_;
  UniqueFd container_;
  UniqueFd group_;
  UniqueFd device_;
  const uint64_t config_offset_;
  const uint64_t bar0_offset_;
  const uint64_t bar0_size_;
  const uint64_t iova_last_;
  std::vector<Mapping> mappings_;
  uint64_t next_iova_;
};

absl::Status VfioUnavailable(absl::Status s) { return WithFailureReason(std::move(s), kReasonVfioUnavailable); }

}  // namespace

std::optional<IovaWindow> ChooseIovaWindow(const std::vector<IovaWindow>& usable) {
  if (usable.empty()) return IovaWindow{kFirstIova, ~uint64_t{0}};
  for (uint64_t floor : {kFirstIova, kLowestIova}) {
    for (const IovaWindow& r : usable) {
      const uint64_t first = std::max<uint64_t>(r.first, floor);
      if (r.last >= first && r.last - first >= kIovaSpace - 1) return IovaWindow{first, r.last};
    }
  }
  return std::nullopt;
}

absl::StatusOr<std::unique_ptr<NvmeVfioDevice>> OpenVfioNvmeDevice(Sysfs& sys,
                                                                   std::string_view dev_root,
                                                                   PciAddress address) {
  const std::string addr = address.ToString();
  ASSIGN_OR_RETURN(PciFunctionInfo info, ReadPciFunction(sys, address));
  if (info.driver != kVfioPci) {
    return absl::FailedPreconditionError(absl::StrCat(
        "opening ", addr, " over VFIO: it is bound to \"", info.driver, "\", not vfio-pci"));
  }
  if (info.iommu_group < 0) {
    return VfioUnavailable(absl::FailedPreconditionError(
        absl::StrCat("opening ", addr, " over VFIO: it is in no IOMMU group")));
  }
  const std::string where = absl::StrCat(addr, " (IOMMU group ", info.iommu_group, ")");
  const std::string container_path = absl::StrCat(Sv(dev_root), "/vfio/vfio");
  UniqueFd container(::open(container_path.c_str(), O_RDWR | O_CLOEXEC));
  if (!container.valid()) {
    return VfioUnavailable(ErrnoError(errno, absl::StrCat(where, ": open ", container_path)));
  }
  if (::ioctl(container.get(), VFIO_GET_API_VERSION) != VFIO_API_VERSION) {
    return VfioUnavailable(absl::FailedPreconditionError(
        absl::StrCat(where, ": ", container_path, " speaks another VFIO API version")));
  }
  const std::string group_path = absl::StrCat(Sv(dev_root), "/vfio/", info.iommu_group);
  UniqueFd group(::open(group_path.c_str(), O_RDWR | O_CLOEXEC));
  if (!group.valid()) {
    const int e = errno;
    if (e == EBUSY) {
      return WithFailureReason(
          absl::UnavailableError(absl::StrCat(where, ": ", group_path, " is open in another "
                                              "process (a VM still holds it); retried")),
          kReasonVfioGroupInUse);
    }
    return VfioUnavailable(ErrnoError(e, absl::StrCat(where, ": open ", group_path)));
  }
  vfio_group_status status;
  std::memset(&status, 0, sizeof(status));
  status.argsz = sizeof(status);
  if (::ioctl(group.get(), VFIO_GROUP_GET_STATUS, &status) != 0) {
    return VfioUnavailable(ErrnoError(errno, absl::StrCat(where, ": VFIO_GROUP_GET_STATUS")));
  }
  if ((status.flags & VFIO_GROUP_FLAGS_VIABLE) == 0) {
    return VfioUnavailable(absl::FailedPreconditionError(absl::StrCat(
        where, ": the group is not viable (another of its devices is on a host driver)")));
  }
  int container_fd = container.get();
  if (::ioctl(group.get(), VFIO_GROUP_SET_CONTAINER, &container_fd) != 0) {
    return VfioUnavailable(ErrnoError(errno, absl::StrCat(where, ": VFIO_GROUP_SET_CONTAINER")));
  }
  int iommu = 0;
  if (::ioctl(container.get(), VFIO_CHECK_EXTENSION, VFIO_TYPE1v2_IOMMU) > 0) {
    iommu = VFIO_TYPE1v2_IOMMU;
  } else if (::ioctl(container.get(), VFIO_CHECK_EXTENSION, VFIO_TYPE1_IOMMU) > 0) {
    iommu = VFIO_TYPE1_IOMMU;
  } else {
    return VfioUnavailable(absl::FailedPreconditionError(
        absl::StrCat(where, ": the VFIO container offers no TYPE1 IOMMU (vfio_iommu_type1 "
                     "not loaded?)")));
  }
  if (::ioctl(container.get(), VFIO_SET_IOMMU, iommu) != 0) {
    return VfioUnavailable(ErrnoError(
        errno, absl::StrCat(where, ": VFIO_SET_IOMMU ",
                            iommu == VFIO_TYPE1v2_IOMMU ? "TYPE1v2" : "TYPE1")));
  }
  auto ranges = IovaRanges(container.get());
  if (!ranges.ok()) {
    return VfioUnavailable(absl::Status(ranges.status().code(),
                                        absl::StrCat(where, ": ", ranges.status().message())));
  }
  std::vector<IovaWindow> usable;
  for (const vfio_iova_range& r : *ranges) usable.push_back({r.start, r.end});
  std::optional<IovaWindow> window = ChooseIovaWindow(usable);
  if (!window) {
    return VfioUnavailable(absl::FailedPreconditionError(absl::StrCat(
        where, ": the IOMMU offers no IOVA range of ", kIovaSpace >> 20, " MiB above 1 MiB")));
  }
  UniqueFd device(::ioctl(group.get(), VFIO_GROUP_GET_DEVICE_FD, addr.c_str()));
  if (!device.valid()) {
    return ErrnoError(errno, absl::StrCat(where, ": VFIO_GROUP_GET_DEVICE_FD"));
  }
  vfio_region_info config, bar0;
  for (auto [info_ptr, index, name] :
       {std::tuple{&config, uint32_t{VFIO_PCI_CONFIG_REGION_INDEX}, "config"},
        std::tuple{&bar0, uint32_t{VFIO_PCI_BAR0_REGION_INDEX}, "BAR0"}}) {
    std::memset(info_ptr, 0, sizeof(*info_ptr));
    info_ptr->argsz = sizeof(*info_ptr);
    info_ptr->index = index;
    if (::ioctl(device.get(), VFIO_DEVICE_GET_REGION_INFO, info_ptr) != 0) {
      return ErrnoError(errno,
                        absl::StrCat(where, ": VFIO_DEVICE_GET_REGION_INFO (", name, ")"));
    }
    const uint32_t rw = VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE;
    if ((info_ptr->flags & rw) != rw || info_ptr->size == 0) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s: the %s region is not readable and writable (flags %#x, %u bytes)", where, name,
          info_ptr->flags, info_ptr->size));
    }
  }
  if (bar0.size < kNvmeDoorbells + 8) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: BAR0 has %u bytes, too small for NVMe registers and doorbells", where, bar0.size));
  }
  return std::unique_ptr<NvmeVfioDevice>(
      new RealVfioNvmeDevice(where, std::move(container), std::move(group), std::move(device),
                             config.offset, bar0.offset, bar0.size, *window));
}

NvmeVfioChannel::NvmeVfioChannel(std::unique_ptr<NvmeVfioDevice> device,
                                 const NvmeVfioOptions& options)
    : device_(std::move(device)), options_(options) {
  where_ = absl::StrCat("NVMe controller ", device_->Describe(), " over VFIO");
}

NvmeVfioChannel::~NvmeVfioChannel() { (void)Close(); }

absl::StatusOr<std::unique_ptr<NvmeVfioChannel>> NvmeVfioChannel::Open(
    std::unique_ptr<NvmeVfioDevice> device, const NvmeVfioOptions& options) {
  std::unique_ptr<NvmeVfioChannel> c(new NvmeVfioChannel(std::move(device), options));
  RETURN_IF_ERROR(c->Enable());
  return c;
}

absl::Status NvmeVfioChannel::Fail(absl::StatusCode code, std::string_view step,
                                   std::string_view detail) {
  return absl::Status(code, absl::StrCat(where_, ": ", Sv(step), ": ", Sv(detail)));
}

absl::StatusOr<uint32_t> NvmeVfioChannel::Read(uint32_t offset, std::string_view name) {
  auto v = device_->ReadRegister(offset);
  if (!v.ok()) {
    return absl::Status(v.status().code(), absl::StrCat(where_, ": reading ", Sv(name), ": ",
                                                        v.status().message()));
  }
  return *v;
}

absl::Status NvmeVfioChannel::Write(uint32_t offset, uint32_t value, std::string_view name) {
  absl::Status s = device_->WriteRegister(offset, value);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat(where_, ": writing ", Sv(name), ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status NvmeVfioChannel::Write64(uint32_t offset, uint64_t value, std::string_view name) {
  // Low dword first, as the kernel's lo_hi_writeq.
  RETURN_IF_ERROR(Write(offset, static_cast<uint32_t>(value), name));
  return Write(offset + 4, static_cast<uint32_t>(value >> 32), name);
}

uint32_t NvmeVfioChannel::Doorbell(uint16_t qid, bool completion) const {
  return kNvmeDoorbells + (2 * uint32_t{qid} + (completion ? 1 : 0)) * doorbell_stride_;
}

absl::Status NvmeVfioChannel::WaitReady(bool ready, std::string_view step) {
  const absl::Time deadline = options_.clock->Now() + ready_timeout_;
  absl::Duration wait = options_.poll_interval;
  for (;;) {
    ASSIGN_OR_RETURN(uint32_t csts, Read(kNvmeRegCsts, "CSTS"));
    if (csts == 0xFFFFFFFF) {
      return Fail(absl::StatusCode::kUnavailable, step,
                  "CSTS reads FFFFFFFFh: the function is gone or does not answer");
    }
    if ((csts & kCsCfs) != 0) {
      return Fail(absl::StatusCode::kInternal, step,
                  absl::StrFormat("the controller reports a fatal status (CSTS %08xh, CFS set)",
                                  csts));
    }
    if (((csts & kCsRdy) != 0) == ready) return absl::OkStatus();
    if (options_.clock->Now() >= deadline) {
      return Fail(absl::StatusCode::kDeadlineExceeded, step,
                  absl::StrFormat("CSTS.RDY did not become %d within %s (CAP.TO; CSTS %08xh)",
                                  ready ? 1 : 0, absl::FormatDuration(ready_timeout_), csts));
    }
    options_.clock->SleepFor(std::min(wait, deadline - options_.clock->Now()));
    wait = std::min(wait * 2, std::max(options_.max_poll_interval, options_.poll_interval));
  }
}

absl::Status NvmeVfioChannel::Enable() {
  if (absl::Status s = device_->EnableBusMaster(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(where_, ": enabling memory space and bus "
                                               "master: ", s.message()));
  }
  ASSIGN_OR_RETURN(uint32_t cap_lo, Read(kNvmeRegCap, "CAP"));
  ASSIGN_OR_RETURN(uint32_t cap_hi, Read(kNvmeRegCap + 4, "CAP"));
  if (cap_lo == 0xFFFFFFFF && cap_hi == 0xFFFFFFFF) {
    return Fail(absl::StatusCode::kUnavailable, "reading CAP",
                "it reads FFFFFFFF_FFFFFFFFh: the function is gone or does not answer");
  }
  max_entries_ = static_cast<uint16_t>(std::clamp<uint32_t>((cap_lo & 0xFFFF) + 1, 2, 4096));
  const uint32_t to = (cap_lo >> 24) & 0xFF;
  ready_timeout_ = absl::Milliseconds(500) * std::max<uint32_t>(to, 1);
  doorbell_stride_ = 4u << (cap_hi & 0xF);
  const uint32_t css = (cap_hi >> 5) & 0xFF;    // CAP bits 44:37.
  const uint32_t mpsmin = (cap_hi >> 16) & 0xF;  // CAP bits 51:48.
  if (mpsmin != 0) {
    return Fail(absl::StatusCode::kFailedPrecondition, "reading CAP",
                absl::StrFormat("the controller's smallest memory page is %u bytes (CAP.MPSMIN "
                                "%u); the channel uses 4096-byte pages",
                                4096u << mpsmin, mpsmin));
  }
  if ((css & 0x1) == 0) {
    return Fail(absl::StatusCode::kFailedPrecondition, "reading CAP",
                absl::StrFormat("the controller does not support the NVM command set (CAP.CSS "
                                "%02xh)", css));
  }

  // Reset: a controller a driver left enabled is disabled first.
  ASSIGN_OR_RETURN(uint32_t cc, Read(kNvmeRegCc, "CC"));
  if ((cc & kCcEn) != 0) RETURN_IF_ERROR(Write(kNvmeRegCc, cc & ~kCcEn, "CC (EN=0)"));
  RETURN_IF_ERROR(WaitReady(false, "disabling the controller (CC.EN=0)"));

  const uint16_t entries = static_cast<uint16_t>(
      std::clamp<uint32_t>(options_.admin_queue_entries, 2, max_entries_));
  admin_ = Queue{};
  admin_.entries = entries;
  for (auto [buf, size, name] : {std::tuple{&admin_.sq, entries * kSqEntry, "admin SQ"},
                                 std::tuple{&admin_.cq, entries * kCqEntry, "admin CQ"},
                                 std::tuple{&data_, kMaxTransfer, "data buffer"},
                                 std::tuple{&prp_list_, kPage, "PRP list"}}) {
    auto b = device_->AllocateDma(RoundUpToPage(size));
    if (!b.ok()) {
      return Fail(b.status().code(), absl::StrCat("allocating the ", name),
                  StdSv(b.status().message()));
    }
    *buf = *b;
  }
  // The channel polls: no interrupt (pin-based or MSI) is wanted.
  RETURN_IF_ERROR(Write(kNvmeRegIntms, 0xFFFFFFFF, "INTMS"));
  RETURN_IF_ERROR(Write(kNvmeRegAqa, (uint32_t{entries} - 1) << 16 | (uint32_t{entries} - 1),
                        "AQA"));
  RETURN_IF_ERROR(Write64(kNvmeRegAsq, admin_.sq.iova, "ASQ"));
  RETURN_IF_ERROR(Write64(kNvmeRegAcq, admin_.cq.iova, "ACQ"));
  // CSS 000b (NVM), MPS 0 (4 KiB), AMS round robin, IOSQES 6, IOCQES 4.
  RETURN_IF_ERROR(Write(kNvmeRegCc, kCcIoQueueSizes | kCcEn, "CC (EN=1)"));
  return WaitReady(true, "enabling the controller (CC.EN=1)");
}

absl::StatusOr<uint16_t> NvmeVfioChannel::Submit(Queue& q, const NvmeAdminCommand& cmd,
                                                 std::span<uint8_t> data,
                                                 std::string_view what, uint64_t prp1) {
  const std::string step = absl::StrFormat("%s (opcode %02xh, NSID %u)", Sv(what), cmd.opcode, cmd.nsid);
  if (closed_) return Fail(absl::StatusCode::kFailedPrecondition, step, "the channel is closed");
  if (broken_) {
    return Fail(absl::StatusCode::kFailedPrecondition, step,
                "an earlier command timed out, so the queues' state is unknown; the controller "
                "is reset when the channel closes");
  }
  if (data.size() > kMaxTransfer) {
    return Fail(absl::StatusCode::kInvalidArgument, step,
                absl::StrCat("a transfer of ", data.size(), " bytes exceeds the channel's ",
                             kMaxTransfer));
  }
  const uint16_t cid = next_cid_++;
  uint8_t* e = q.sq.data + size_t{q.tail} * kSqEntry;
  std::memset(e, 0, kSqEntry);
  e[0] = cmd.opcode;  // FUSE 0, PSDT 0 (PRPs).
  Put16(e + 2, cid);
  Put32(e + 4, cmd.nsid);
  if (!data.empty()) {
    // In both directions: the controller may read the buffer (a controller
    // list), and what it does not write comes back unchanged.
    std::memcpy(data_.data, data.data(), data.size());
    Put64(e + 24, data_.iova);
    const size_t pages = RoundUpToPage(data.size()) / kPage;
    if (pages == 2) {
      Put64(e + 32, data_.iova + kPage);
    } else if (pages > 2) {
      for (size_t i = 1; i < pages; ++i) {
        Put64(prp_list_.data + 8 * (i - 1), data_.iova + i * kPage);
      }
      Put64(e + 32, prp_list_.iova);
    }
  }
  Put32(e + 40, cmd.cdw10);
  Put32(e + 44, cmd.cdw11);
  Put32(e + 48, cmd.cdw12);
  if (prp1 != 0) Put64(e + 24, prp1);
  q.tail = static_cast<uint16_t>((q.tail + 1) % q.entries);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  RETURN_IF_ERROR(Write(Doorbell(q.id, false), q.tail,
                        absl::StrFormat("the SQ %u tail doorbell", q.id)));

  const absl::Time deadline = options_.clock->Now() + cmd.timeout;
  absl::Duration wait = options_.poll_interval;
  for (;;) {
    const uint8_t* c = q.cq.data + size_t{q.head} * kCqEntry;
    const uint32_t dw3 = LoadCqDword(c, 3);
    if (((dw3 >> 16) & 0x1) == (q.phase ? 1u : 0u)) {
      std::atomic_thread_fence(std::memory_order_acquire);
      const uint32_t dw2 = LoadCqDword(c, 2);
      q.head = static_cast<uint16_t>(q.head + 1);
      if (q.head == q.entries) {
        q.head = 0;
        q.phase = !q.phase;
      }
      RETURN_IF_ERROR(Write(Doorbell(q.id, true), q.head,
                            absl::StrFormat("the CQ %u head doorbell", q.id)));
      if ((dw3 & 0xFFFF) != cid || (dw2 >> 16) != q.id) {
        broken_ = true;
        return Fail(absl::StatusCode::kInternal, step,
                    absl::StrFormat("completion for command %u of SQ %u, expected command %u of "
                                    "SQ %u", dw3 & 0xFFFF, dw2 >> 16, cid, q.id));
      }
      if (!data.empty()) std::memcpy(data.data(), data_.data, data.size());
      // Status field: SC 7:0, SCT 10:8, CRD 12:11, M 13, DNR 14 (the
      // kernel's passthrough gives the same).
      return static_cast<uint16_t>((dw3 >> 17) & 0x7FFF);
    }
    ASSIGN_OR_RETURN(uint32_t csts, Read(kNvmeRegCsts, "CSTS"));
    if (csts == 0xFFFFFFFF || (csts & kCsCfs) != 0) {
      broken_ = true;
      return Fail(absl::StatusCode::kInternal, step,
                  absl::StrFormat("the controller failed while the command ran (CSTS %08xh%s)",
                                  csts, csts == 0xFFFFFFFF ? ": the function is gone" : ", CFS set"));
    }
    if (options_.clock->Now() >= deadline) {
      broken_ = true;
      return Fail(absl::StatusCode::kDeadlineExceeded, step,
                  absl::StrCat("no completion within ", absl::FormatDuration(cmd.timeout),
                               " (polled CQ ", q.id, " entry ", q.head, ")"));
    }
    options_.clock->SleepFor(std::min(wait, deadline - options_.clock->Now()));
    wait = std::min(wait * 2, std::max(options_.max_poll_interval, options_.poll_interval));
  }
}

absl::StatusOr<uint16_t> NvmeVfioChannel::Run(const NvmeAdminCommand& cmd,
                                              std::span<uint8_t> data) {
  return Submit(admin_, cmd, data, "admin command");
}

absl::Status NvmeVfioChannel::CreateIoQueues() {
  const uint16_t entries = static_cast<uint16_t>(
      std::clamp<uint32_t>(options_.io_queue_entries, 2, max_entries_));
  io_ = Queue{};
  io_.id = 1;
  io_.entries = entries;
  for (auto [buf, size, name] : {std::tuple{&io_.sq, entries * kSqEntry, "I/O SQ"},
                                 std::tuple{&io_.cq, entries * kCqEntry, "I/O CQ"}}) {
    auto b = device_->AllocateDma(RoundUpToPage(size));
    if (!b.ok()) {
      return Fail(b.status().code(), absl::StrCat("allocating the ", name),
                  StdSv(b.status().message()));
    }
    *buf = *b;
  }
  const uint32_t qsize = (uint32_t{entries} - 1) << 16;
  const struct {
    NvmeAdminCommand cmd;
    const char* what;
    uint64_t queue;
  } steps[] = {
      {{.opcode = kOpSetFeatures, .cdw10 = kFeatureNumberOfQueues, .cdw11 = 0,
        .timeout = absl::Seconds(30)},
       "Set Features (Number of Queues: 1)", 0},
      // PC=1 (physically contiguous), IEN=0: polled.
      {{.opcode = kOpCreateIoCq, .cdw10 = qsize | 1, .cdw11 = 0x1, .timeout = absl::Seconds(30)},
       "Create I/O Completion Queue 1", io_.cq.iova},
      {{.opcode = kOpCreateIoSq, .cdw10 = qsize | 1, .cdw11 = (1u << 16) | 0x1,
        .timeout = absl::Seconds(30)},
       "Create I/O Submission Queue 1", io_.sq.iova},
  };
  for (const auto& step : steps) {
    ASSIGN_OR_RETURN(uint16_t status, Submit(admin_, step.cmd, {}, step.what, step.queue));
    if (status != 0) {
      return Fail(absl::StatusCode::kFailedPrecondition, step.what,
                  absl::StrCat("NVMe status ", DescribeNvmeStatus(status)));
    }
  }
  io_created_ = true;
  return absl::OkStatus();
}

absl::StatusOr<uint16_t> NvmeVfioChannel::RunIo(const NvmeAdminCommand& cmd,
                                                std::span<uint8_t> data) {
  if (!io_created_ && !closed_ && !broken_) RETURN_IF_ERROR(CreateIoQueues());
  return Submit(io_, cmd, data, "I/O command");
}

absl::Status NvmeVfioChannel::Close() {
  if (closed_) return absl::OkStatus();
  closed_ = true;
  absl::Status s;
  auto cc = Read(kNvmeRegCc, "CC");
  if (!cc.ok()) {
    s = cc.status();
  } else if (*cc != 0xFFFFFFFF) {
    s = Write(kNvmeRegCc, *cc & ~kCcEn, "CC (EN=0)");
    if (s.ok()) s = WaitReady(false, "disabling the controller on close (CC.EN=0)");
  }
  device_.reset();
  return s;
}

absl::StatusOr<std::unique_ptr<NvmeAdminChannel>> DevVfioNvmeOpener::Open(PciAddress address) {
  ASSIGN_OR_RETURN(std::unique_ptr<NvmeVfioDevice> device,
                   OpenVfioNvmeDevice(*sys_, dev_root_, address));
  ASSIGN_OR_RETURN(std::unique_ptr<NvmeVfioChannel> channel,
                   NvmeVfioChannel::Open(std::move(device), options_));
  return std::unique_ptr<NvmeAdminChannel>(std::move(channel));
}

}  // namespace pdc::driver
