// NvmeVfioChannel: an NvmeAdminChannel (nvme_erase.h) that drives an NVMe
// controller from userspace through VFIO while its PCI function stays on
// vfio-pci, so that an erase never hands the guest's namespaces to the
// host's block layer (no udev, blkid, LVM, mdadm or multipath acting on what
// the guest wrote). Registers and queues as in the NVM Express Base
// Specification 2.0, section 3.1 (registers) and 3.5.1 (initialization):
//   Open:   CC.EN=0, wait CSTS.RDY=0 (bounded by CAP.TO); one admin queue
//           pair (AQA, ASQ, ACQ) in DMA memory; CC with IOSQES=6, IOCQES=4,
//           EN=1, wait CSTS.RDY=1 (bounded by CAP.TO). CSTS.CFS (fatal
//           status) fails any step; CSTS all ones means the function is gone.
//   Run:    one command at a time: the entry goes into the submission queue,
//           the tail doorbell (stride from CAP.DSTRD) is written, and the
//           completion queue is polled for the entry whose phase tag matches
//           (no interrupts), bounded by the command's timeout. Data moves
//           through a DMA buffer (PRP1, PRP2, or a PRP list beyond two pages)
//           of up to kMaxTransfer bytes; more is refused.
//   RunIo:  one I/O queue pair (Set Features Number of Queues, Create I/O
//           Completion Queue 05h, Create I/O Submission Queue 01h), created on
//           first use.
//   Close:  CC.EN=0 (the controller drops its queues), wait CSTS.RDY=0; the
//           device then unmaps its DMA memory and closes its descriptors.
// A command that times out leaves the controller's queues in an unknown
// state: the channel refuses every later command, and Close resets it.
// The device operations are a seam (NvmeVfioDevice): OpenVfioNvmeDevice is
// the real one (/dev/vfio), tests drive the channel with a fake controller.
// Every failure names the function, the step, and the register, errno or
// NVMe status.
// Thread-safety: a channel is used by one thread at a time (one erase).
#ifndef PDC_DRIVER_NVME_VFIO_CHANNEL_H_
#define PDC_DRIVER_NVME_VFIO_CHANNEL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "model/pci_address.h"
#include "driver/nvme_erase.h"
#include "driver/sysfs.h"

namespace pdc::driver {

// The VFIO path cannot be used for this function here (no IOMMU group, no
// /dev/vfio/vfio, the container or IOMMU cannot be set up): the erase may
// take the kernel driver's path instead. Any other failure is not that.
inline constexpr std::string_view kReasonVfioUnavailable = "vfio_channel_unavailable";

// NVMe controller registers (NVMe Base Specification 2.0, figure 33).
inline constexpr uint32_t kNvmeRegCap = 0x00;   // 64-bit.
inline constexpr uint32_t kNvmeRegVs = 0x08;
inline constexpr uint32_t kNvmeRegIntms = 0x0C;
inline constexpr uint32_t kNvmeRegCc = 0x14;
inline constexpr uint32_t kNvmeRegCsts = 0x1C;
inline constexpr uint32_t kNvmeRegAqa = 0x24;
inline constexpr uint32_t kNvmeRegAsq = 0x28;   // 64-bit.
inline constexpr uint32_t kNvmeRegAcq = 0x30;   // 64-bit.
inline constexpr uint32_t kNvmeDoorbells = 0x1000;

// Memory the controller reaches by DMA: `data` in this process, `iova` on
// the device's side.
struct DmaBuffer {
  uint8_t* data = nullptr;
  uint64_t iova = 0;
  size_t size = 0;
};

// One PCI function opened for userspace access.
class NvmeVfioDevice {
 public:
  virtual ~NvmeVfioDevice() = default;
  // "0000:01:00.0 (IOMMU group 7)", for messages.
  virtual std::string Describe() const = 0;
  // Memory space and bus master on (interrupts off) in the PCI command
  // register, through the config region.
  virtual absl::Status EnableBusMaster() = 0;
  // A 32-bit register of BAR0 at `offset`.
  virtual absl::StatusOr<uint32_t> ReadRegister(uint32_t offset) = 0;
  virtual absl::Status WriteRegister(uint32_t offset, uint32_t value) = 0;
  // `bytes` (a multiple of 4096) of zeroed, page-aligned memory mapped for
  // the device; valid until the device is destroyed.
  virtual absl::StatusOr<DmaBuffer> AllocateDma(size_t bytes) = 0;
};

// An inclusive range of I/O virtual addresses.
struct IovaWindow {
  uint64_t first = 0;
  uint64_t last = 0;
};
// The IOVA space the channel asks for (far more than it maps).
inline constexpr uint64_t kIovaSpace = uint64_t{16} << 20;

// Where the DMA buffers go, given the IOMMU's usable ranges (ascending;
// none: the kernel does not say, any address is usable): from 4 GiB up (below
// lie the MSI window and firmware ranges of x86 IOMMUs) in the first range
// with kIovaSpace of room there, else from 1 MiB up; none when no range has
// room.
std::optional<IovaWindow> ChooseIovaWindow(const std::vector<IovaWindow>& usable);

// The real device: the function at `address`, bound to vfio-pci, through
// `dev_root`/vfio ("/dev/vfio"): its IOMMU group (from `sys`, a view of
// /sys) into a new container with the TYPE1v2 (else TYPE1) IOMMU, its device
// descriptor, BAR0 through pread/pwrite, DMA buffers mapped at IOVAs from
// 4 GiB up within a range the IOMMU reports usable (else from 1 MiB up).
// Unavailable with vfio_group_in_use when another process holds
// the group open (a VM still runs on it); kReasonVfioUnavailable when VFIO
// cannot be used for it; FailedPrecondition when it is not on vfio-pci.
absl::StatusOr<std::unique_ptr<NvmeVfioDevice>> OpenVfioNvmeDevice(Sysfs& sys,
                                                                   std::string_view dev_root,
                                                                   PciAddress address);

struct NvmeVfioOptions {
  const Clock* clock = RealClock();
  // Between two looks at CSTS or the completion queue: `poll_interval`
  // first, doubled up to `max_poll_interval` while the wait lasts (a format
  // of a large drive takes minutes).
  absl::Duration poll_interval = absl::Microseconds(50);
  absl::Duration max_poll_interval = absl::Milliseconds(10);
  uint16_t admin_queue_entries = 32;
  uint16_t io_queue_entries = 16;
};

class NvmeVfioChannel : public NvmeAdminChannel {
 public:
  // The largest data transfer of one command (a PRP list of one page).
  static constexpr size_t kMaxTransfer = 128 * 1024;

  // Resets and enables the controller of `device` with an admin queue pair.
  static absl::StatusOr<std::unique_ptr<NvmeVfioChannel>> Open(
      std::unique_ptr<NvmeVfioDevice> device, const NvmeVfioOptions& options);
  // Close() when not closed yet (its error is lost: call Close to see it).
  ~NvmeVfioChannel() override;

  absl::StatusOr<uint16_t> Run(const NvmeAdminCommand& cmd, std::span<uint8_t> data) override;
  absl::StatusOr<uint16_t> RunIo(const NvmeAdminCommand& cmd, std::span<uint8_t> data) override;

  // Disables the controller (CC.EN=0, waits for CSTS.RDY=0) and releases
  // the device. Later commands fail.
  absl::Status Close();

 private:
  struct Queue {
    uint16_t id = 0;
    uint16_t entries = 0;
    DmaBuffer sq, cq;
    uint16_t tail = 0;   // Next submission slot.
    uint16_t head = 0;   // Next completion slot.
    bool phase = true;   // Phase tag of new completions.
  };

  NvmeVfioChannel(std::unique_ptr<NvmeVfioDevice> device, const NvmeVfioOptions& options);
  absl::Status Enable();
  absl::Status CreateIoQueues();
  absl::StatusOr<uint16_t> Submit(Queue& q, const NvmeAdminCommand& cmd,
                                  std::span<uint8_t> data, std::string_view what,
                                  uint64_t prp1 = 0);
  // Waits (bounded) until CSTS.RDY is `ready`; CFS or all ones fail.
  absl::Status WaitReady(bool ready, std::string_view step);
  absl::StatusOr<uint32_t> Read(uint32_t offset, std::string_view name);
  absl::Status Write(uint32_t offset, uint32_t value, std::string_view name);
  absl::Status Write64(uint32_t offset, uint64_t value, std::string_view name);
  absl::Status Fail(absl::StatusCode code, std::string_view step, std::string_view detail);
  uint32_t Doorbell(uint16_t qid, bool completion) const;

  std::unique_ptr<NvmeVfioDevice> device_;
  const NvmeVfioOptions options_;
  std::string where_;
  absl::Duration ready_timeout_;  // CAP.TO.
  uint32_t doorbell_stride_ = 4;  // 4 << CAP.DSTRD bytes.
  uint16_t max_entries_ = 2;      // CAP.MQES + 1.
  Queue admin_;
  Queue io_;
  bool io_created_ = false;
  DmaBuffer data_;
  DmaBuffer prp_list_;
  uint16_t next_cid_ = 0;
  bool broken_ = false;  // A command timed out: its queue state is unknown.
  bool closed_ = false;
};

// Opens the VFIO channel of a PCI function for an erase.
class NvmeVfioOpener {
 public:
  virtual ~NvmeVfioOpener() = default;
  // Errors as OpenVfioNvmeDevice and NvmeVfioChannel::Open.
  virtual absl::StatusOr<std::unique_ptr<NvmeAdminChannel>> Open(PciAddress address) = 0;
};

// The real one: OpenVfioNvmeDevice, then NvmeVfioChannel::Open.
class DevVfioNvmeOpener : public NvmeVfioOpener {
 public:
  // `sys` (a view of /sys) must outlive the opener.
  DevVfioNvmeOpener(Sysfs* sys, std::string dev_root, NvmeVfioOptions options = {})
      : sys_(sys), dev_root_(std::move(dev_root)), options_(options) {}
  absl::StatusOr<std::unique_ptr<NvmeAdminChannel>> Open(PciAddress address) override;

 private:
  Sysfs* const sys_;
  const std::string dev_root_;
  const NvmeVfioOptions options_;
};

}  // namespace pdc::driver

#endif  // PDC_DRIVER_NVME_VFIO_CHANNEL_H_
