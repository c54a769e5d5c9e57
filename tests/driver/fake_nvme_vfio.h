// FakeVfioNvme: an NVMe controller behind the NvmeVfioDevice seam
// (driver/nvme_vfio_channel.h), modelled at the register and queue level of
// the NVM Express Base Specification 2.0: CAP (MQES, TO, DSTRD), CC.EN and
// CSTS.RDY (section 3.5.1), AQA/ASQ/ACQ, the doorbells at 1000h with the
// CAP.DSTRD stride, and submission/completion queues in the DMA memory the
// channel allocated, with the phase tag (section 4.6). A tail doorbell
// makes it execute every new entry and post its completion.
// Commands: Identify (CNS 01h controller: SN, OACS with Format NVM, NN=1;
// CNS 02h active list; CNS 00h namespace 1: NSZE, LBA format 0 of 512
// bytes), Get Log Page (Firmware Slot Information as FakeNvmeController's
// default; no Boot Partition log; any other log page a pattern of any
// length: PRP1, PRP2 and PRP lists),
// Format NVM (zeroes namespace 1), Set Features, Create I/O CQ/SQ, and Read
// (02h) on I/O queue 1. A test can inject: RDY never following EN, CFS on
// enable or on a command, a command that never completes, a status for an
// opcode. Every register write is recorded. FakeVfioOpener opens it behind
// the real NvmeVfioChannel.
// For tests only. Thread-safety: not thread-safe.
#ifndef PDC_TESTS_DRIVER_FAKE_NVME_VFIO_H_
#define PDC_TESTS_DRIVER_FAKE_NVME_VFIO_H_

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "driver/nvme_vfio_channel.h"

namespace pdc::driver::testing {

// What a guest left on the namespace: not a uniform fill.
inline std::vector<uint8_t> GuestPattern(size_t n) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(0x40 + i % 61);
  return b;
}

struct FakeVfioNvmeState {
  // CAP.
  uint16_t mqes = 63;
  uint8_t to = 2;  // 1 s.
  uint8_t dstrd = 0;
  // Registers.
  uint32_t cc = 0;
  uint32_t csts = 0;
  uint32_t aqa = 0;
  uint64_t asq = 0, acq = 0;
  bool bus_master = false;
  // Behaviour.
  bool never_ready = false;        // RDY does not follow CC.EN=1.
  bool fatal_on_enable = false;    // CFS instead of RDY.
  std::set<uint8_t> fatal_on;      // CFS when a command with this opcode arrives.
  std::set<uint8_t> never_complete;
  std::map<uint8_t, uint16_t> status_of;  // Status field (SC 7:0, SCT 10:8, DNR 14).
  std::string serial = "FAKE-SN-1";
  // Firmware, as FakeNvmeController (fake_nvme_admin.h) has it by default:
  // FR, slot 1 active holding it, no boot partitions.
  std::string firmware_rev = "1.0";
  uint8_t afi = 0x01;
  std::string slot1 = "1.0";
  uint64_t nsze = 64;  // Blocks of 512 bytes.
  std::vector<uint8_t> blocks = GuestPattern(64 * 512);
  // Called with each command's opcode before it executes.
  std::function<void(uint8_t)> on_command;
  // What happened.
  std::vector<std::pair<uint32_t, uint32_t>> writes;  // (offset, value) of every register write.
  std::vector<uint8_t> opcodes;                       // Admin and I/O commands executed.
  std::vector<uint16_t> admin_phases;                 // Phase tag of each admin completion.
  int formats = 0;
  int enables = 0;
  bool closed = false;  // The channel destroyed the device.
};

class FakeVfioNvme : public NvmeVfioDevice {
 public:
  explicit FakeVfioNvme(FakeVfioNvmeState* s) : s_(s) {}
  ~FakeVfioNvme() override { s_->closed = true; }

  std::string Describe() const override { return "0000:00:04.0 (IOMMU group 4)"; }
  absl::Status EnableBusMaster() override {
    s_->bus_master = true;
    return absl::OkStatus();
  }

  absl::StatusOr<uint32_t> ReadRegister(uint32_t offset) override {
    const uint64_t cap = uint64_t{s_->mqes} | (uint64_t{s_->to} << 24) |
                         (uint64_t{s_->dstrd} << 32) | (uint64_t{1} << 37);
    switch (offset) {
      case kNvmeRegCap: return static_cast<uint32_t>(cap);
      case kNvmeRegCap + 4: return static_cast<uint32_t>(cap >> 32);
      case kNvmeRegVs: return 0x00010400;
      case kNvmeRegCc: return s_->cc;
      case kNvmeRegCsts: return s_->csts;
      case kNvmeRegAqa: return s_->aqa;
      default: return 0;
    }
  }

  absl::Status WriteRegister(uint32_t offset, uint32_t value) override {
    s_->writes.emplace_back(offset, value);
    switch (offset) {
      case kNvmeRegCc: return SetCc(value);
      case kNvmeRegAqa: s_->aqa = value; return absl::OkStatus();
      case kNvmeRegAsq: SetLow(s_->asq, value); return absl::OkStatus();
      case kNvmeRegAsq + 4: SetHigh(s_->asq, value); return absl::OkStatus();
      case kNvmeRegAcq: SetLow(s_->acq, value); return absl::OkStatus();
      case kNvmeRegAcq + 4: SetHigh(s_->acq, value); return absl::OkStatus();
      default: break;
    }
    if (offset < kNvmeDoorbells) return absl::OkStatus();
    const uint32_t stride = 4u << s_->dstrd;
    const uint32_t index = (offset - kNvmeDoorbells) / stride;
    if ((offset - kNvmeDoorbells) % stride != 0) {
      return absl::InvalidArgumentError(absl::StrFormat("doorbell write at %04xh off stride", offset));
    }
    auto q = queues_.find(index / 2);
    if (q == queues_.end() || (s_->cc & 1) == 0) {
      return absl::InvalidArgumentError(absl::StrFormat("doorbell %04xh of no queue", offset));
    }
    if (index % 2 == 1) {
      if (value >= q->second.entries) return absl::InvalidArgumentError("CQ head out of range");
      q->second.cq_head = static_cast<uint16_t>(value);
      return absl::OkStatus();
    }
    if (value >= q->second.entries) return absl::InvalidArgumentError("SQ tail out of range");
    Queue& sq = q->second;
    while (sq.sq_head != value) {
      uint8_t* e = Mem(sq.sq + uint64_t{sq.sq_head} * 64, 64);
      sq.sq_head = static_cast<uint16_t>((sq.sq_head + 1) % sq.entries);
      Execute(sq, e);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<DmaBuffer> AllocateDma(size_t bytes) override {
    if (bytes == 0 || bytes % 4096 != 0) return absl::InvalidArgumentError("not whole pages");
    auto& mem = memory_[next_iova_];
    mem.assign(bytes, 0);
    DmaBuffer b{mem.data(), next_iova_, bytes};
    next_iova_ += bytes + 4096;  // A gap: a stray address hits nothing.
    return b;
  }

 private:
  struct Queue {
    uint64_t sq = 0, cq = 0;
    uint16_t entries = 0;
    uint16_t sq_head = 0, cq_tail = 0, cq_head = 0;
    bool phase = true;
  };

  static void SetLow(uint64_t& r, uint32_t v) { r = (r & ~uint64_t{0xFFFFFFFF}) | v; }
  static void SetHigh(uint64_t& r, uint32_t v) { r = (r & 0xFFFFFFFF) | (uint64_t{v} << 32); }

  absl::Status SetCc(uint32_t value) {
    const bool was = (s_->cc & 1) != 0;
    s_->cc = value;
    const bool en = (value & 1) != 0;
    if (was && !en) {  // Reset: queues gone, RDY drops.
      queues_.clear();
      s_->csts &= ~1u;
    } else if (!was && en) {
      ++s_->enables;
      if (s_->fatal_on_enable) {
        s_->csts |= 2;
      } else if (!s_->never_ready) {
        queues_[0] = Queue{.sq = s_->asq, .cq = s_->acq,
                           .entries = static_cast<uint16_t>((s_->aqa & 0xFFF) + 1)};
        s_->csts |= 1;
      }
    }
    return absl::OkStatus();
  }

  // `len` bytes at `iova` in one allocated buffer; aborts the test program
  // on a stray address (a channel bug).
  uint8_t* Mem(uint64_t iova, size_t len) {
    auto it = memory_.upper_bound(iova);
    if (it == memory_.begin()) std::abort();
    --it;
    if (iova + len > it->first + it->second.size()) std::abort();
    return it->second.data() + (iova - it->first);
  }

  static uint64_t Get64(const uint8_t* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
  static uint32_t Get32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }

  // The pages of a transfer of `len` bytes (PRP1, PRP2 or a PRP list).
  std::vector<uint8_t*> Pages(const uint8_t* e, size_t len) {
    std::vector<uint8_t*> pages;
    const size_t n = (len + 4095) / 4096;
    if (n == 0) return pages;
    pages.push_back(Mem(Get64(e + 24), 4096));
    if (n == 2) pages.push_back(Mem(Get64(e + 32), 4096));
    if (n > 2) {
      const uint8_t* list = Mem(Get64(e + 32), 8 * (n - 1));
      for (size_t i = 0; i + 1 < n; ++i) pages.push_back(Mem(Get64(list + 8 * i), 4096));
    }
    return pages;
  }

  void CopyOut(const uint8_t* e, const std::vector<uint8_t>& data) {
    std::vector<uint8_t*> pages = Pages(e, data.size());
    for (size_t i = 0; i < pages.size(); ++i) {
      std::memcpy(pages[i], data.data() + 4096 * i, std::min<size_t>(4096, data.size() - 4096 * i));
    }
  }

  void Execute(Queue& q, const uint8_t* e) {
    const uint8_t opcode = e[0];
    const uint16_t cid = static_cast<uint16_t>(e[2] | (e[3] << 8));
    const uint32_t nsid = Get32(e + 4);
    const uint32_t cdw10 = Get32(e + 40);
    const uint32_t cdw11 = Get32(e + 44);
    const bool admin = &q == &queues_[0];
    s_->opcodes.push_back(opcode);
    if (s_->on_command) s_->on_command(opcode);
    if (s_->fatal_on.contains(opcode)) {
      s_->csts |= 2;
      return;
    }
    if (s_->never_complete.contains(opcode)) return;
    uint16_t status = 0;
    if (auto it = s_->status_of.find(opcode); it != s_->status_of.end()) {
      status = it->second;
    } else if (admin && opcode == 0x06) {
      std::vector<uint8_t> d(4096, 0);
      const uint32_t cns = cdw10 & 0xFF;
      if (cns == 0x01) {
        std::memset(&d[4], ' ', 20);
        std::memcpy(&d[4], s_->serial.data(), std::min<size_t>(20, s_->serial.size()));
        std::memset(&d[64], ' ', 8);
        std::memcpy(&d[64], s_->firmware_rev.data(), std::min<size_t>(8, s_->firmware_rev.size()));
        d[256] = 0x2;  // OACS: Format NVM.
        d[516] = 1;    // NN.
      } else if (cns == 0x02) {
        if (nsid < 1) d[0] = 1;
      } else if (cns == 0x00 && nsid == 1) {
        std::memcpy(&d[0], &s_->nsze, 8);
        std::memcpy(&d[8], &s_->nsze, 8);
        d[128 + 2] = 9;  // LBA format 0: LBADS 9 (512 bytes).
      } else if (cns != 0x00) {
        status = 0x4002;
      }
      if (status == 0) CopyOut(e, d);
    } else if (admin && opcode == 0x02 && (cdw10 & 0xFF) == 0x03) {  // Firmware Slot Information.
      std::vector<uint8_t> d(4 * (size_t{cdw10 >> 16} + 1), 0);
      if (d.size() < 512) {
        status = 0x4002;
      } else {
        d[0] = s_->afi;
        std::memset(&d[8], ' ', 8);
        std::memcpy(&d[8], s_->slot1.data(), std::min<size_t>(8, s_->slot1.size()));
        CopyOut(e, d);
      }
    } else if (admin && opcode == 0x02 && (cdw10 & 0xFF) == 0x15) {  // Boot Partition: none.
      status = 0x4002;
    } else if (admin && opcode == 0x02) {  // Get Log Page: NUMDL+1 dwords of a pattern.
      std::vector<uint8_t> d(4 * (size_t{cdw10 >> 16} + 1));
      for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<uint8_t>(i % 251);
      CopyOut(e, d);
    } else if (admin && opcode == 0x80) {
      if (nsid == 1 || nsid == 0xFFFFFFFF) {
        ++s_->formats;
        std::fill(s_->blocks.begin(), s_->blocks.end(), 0);
      } else {
        status = 0x400B;
      }
    } else if (admin && opcode == 0x09) {
      // Number of Queues granted as asked.
    } else if (admin && (opcode == 0x05 || opcode == 0x01)) {
      const uint16_t qid = static_cast<uint16_t>(cdw10 & 0xFFFF);
      const uint16_t entries = static_cast<uint16_t>((cdw10 >> 16) + 1);
      if (qid != 1 || (cdw11 & 1) == 0) {
        status = 0x4101;  // Invalid Queue Identifier.
      } else if (opcode == 0x05) {
        pending_cq_ = Queue{.cq = Get64(e + 24), .entries = entries};
      } else if ((cdw11 >> 16) != 1 || !pending_cq_) {
        status = 0x4100;  // Completion Queue Invalid.
      } else {
        Queue io = *pending_cq_;
        io.sq = Get64(e + 24);
        queues_[1] = io;
      }
    } else if (!admin && opcode == 0x02 && nsid == 1) {
      const uint64_t lba = cdw10 | (uint64_t{cdw11} << 32);
      if (lba >= s_->nsze) {
        status = 0x0080;  // LBA Out of Range.
      } else {
        CopyOut(e, std::vector<uint8_t>(s_->blocks.begin() + lba * 512,
                                        s_->blocks.begin() + (lba + 1) * 512));
      }
    } else {
      status = 0x4001;  // Invalid Command Opcode.
    }
    Queue& cq = q;
    uint8_t* c = Mem(cq.cq + uint64_t{cq.cq_tail} * 16, 16);
    const uint32_t dw2 = (uint32_t{admin ? 0u : 1u} << 16) | q.sq_head;
    const uint32_t dw3 = cid | (cq.phase ? 1u << 16 : 0u) | (uint32_t{status} << 17);
    std::memcpy(c + 8, &dw2, 4);
    std::memcpy(c + 12, &dw3, 4);
    if (admin) s_->admin_phases.push_back(cq.phase ? 1 : 0);
    cq.cq_tail = static_cast<uint16_t>(cq.cq_tail + 1);
    if (cq.cq_tail == cq.entries) {
      cq.cq_tail = 0;
      cq.phase = !cq.phase;
    }
  }

  FakeVfioNvmeState* const s_;
  std::map<uint64_t, std::vector<uint8_t>> memory_;
  uint64_t next_iova_ = 0x100000;
  std::map<uint32_t, Queue> queues_;
  std::optional<Queue> pending_cq_;
};

// Opens the fake controller behind the real channel, or fails as told.
class FakeVfioOpener : public NvmeVfioOpener {
 public:
  absl::StatusOr<std::unique_ptr<NvmeAdminChannel>> Open(PciAddress) override {
    ++opens;
    if (!fail.ok()) return fail;
    NvmeVfioOptions o;
    o.clock = clock;
    auto c = NvmeVfioChannel::Open(std::make_unique<FakeVfioNvme>(&state), o);
    if (!c.ok()) return c.status();
    return std::unique_ptr<NvmeAdminChannel>(std::move(*c));
  }

  FakeVfioNvmeState state;
  absl::Status fail;
  const Clock* clock = nullptr;  // The channel's waits; a test sets its FakeClock.
  int opens = 0;
};

}  // namespace pdc::driver::testing

#endif  // PDC_TESTS_DRIVER_FAKE_NVME_VFIO_H_
