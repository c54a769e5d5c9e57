// NvmeVfioChannel against a register/queue model of an NVMe controller
// (fake_nvme_vfio.h): the reset and enable sequence, doorbells at the CAP
// stride, the phase tag across queue wraparound, timeouts, a fatal
// controller status, an NVMe status error, PRP lists, and a whole erase
// (EraseNvmeController) through the channel.
#include "driver/nvme_vfio_channel.h"

#include <memory>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/driver/fake_nvme_vfio.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/status_matchers.h"

namespace pdc::driver {
namespace {

using ::pdc::testing::IsOk;
using ::pdc::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::FakeVfioNvme;
using testing::FakeVfioNvmeState;

class NvmeVfioChannelTest : public ::testing::Test {
 protected:
  absl::StatusOr<std::unique_ptr<NvmeVfioChannel>> OpenChannel() {
    options_.clock = &clock_;
    return NvmeVfioChannel::Open(std::make_unique<FakeVfioNvme>(&state_), options_);
  }

  static NvmeAdminCommand IdentifyController() {
    return {.opcode = kNvmeAdminIdentify, .cdw10 = 0x01, .timeout = absl::Seconds(5)};
  }

  // The register writes at `offset`, in order.
  std::vector<uint32_t> WritesAt(uint32_t offset) const {
    std::vector<uint32_t> out;
    for (const auto& [o, v] : state_.writes) {
      if (o == offset) out.push_back(v);
    }
    return out;
  }

  FakeVfioNvmeState state_;
  pdc::testing::FakeClock clock_;
  NvmeVfioOptions options_;
};

TEST(ChooseIovaWindowTest, PrefersRoomAboveFourGibWithinAUsableRange) {
  constexpr uint64_t kGib = uint64_t{1} << 30;
  struct Case {
    const char* name;
    std::vector<IovaWindow> usable;
    std::optional<uint64_t> first;  // nullopt: no window.
  };
  const std::vector<Case> cases = {
      {"the kernel says nothing", {}, 4 * kGib},
      // Intel VT-d with the MSI window cut out, 39-bit addresses.
      {"above the MSI window", {{0, 0xFEDFFFFF}, {0xFEF00000, (uint64_t{1} << 39) - 1}}, 4 * kGib},
      {"a range starting above 4 GiB", {{0, 0xFEDFFFFF}, {8 * kGib, 9 * kGib}}, 8 * kGib},
      {"only 32-bit addresses", {{0, 0xFFFFFFFF}}, uint64_t{1} << 20},
      {"too little room anywhere", {{0, 0xFFFFF}, {4 * kGib, 4 * kGib + 4095}}, std::nullopt},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::optional<IovaWindow> w = ChooseIovaWindow(c.usable);
    ASSERT_EQ(w.has_value(), c.first.has_value());
    if (!w) continue;
    EXPECT_EQ(w->first, *c.first);
    EXPECT_GE(w->last - w->first, kIovaSpace - 1);
  }
}

TEST_F(NvmeVfioChannelTest, ResetsAnEnabledControllerThenEnablesItWithTheAdminQueues) {
  state_.cc = 0x00460001;  // Left enabled by a driver.
  state_.csts = 0x1;
  options_.admin_queue_entries = 16;
  ASSERT_OK_AND_ASSIGN(auto channel, OpenChannel());
  EXPECT_TRUE(state_.bus_master);
  std::vector<uint32_t> order;
  for (const auto& [o, v] : state_.writes) order.push_back(o);
  EXPECT_THAT(order, ElementsAre(kNvmeRegCc, kNvmeRegIntms, kNvmeRegAqa, kNvmeRegAsq,
                                 kNvmeRegAsq + 4, kNvmeRegAcq, kNvmeRegAcq + 4, kNvmeRegCc));
  // EN=0 first, then IOSQES=6 IOCQES=4 EN=1; 16-entry admin queues.
  EXPECT_THAT(WritesAt(kNvmeRegCc), ElementsAre(0x00460000u, 0x00460001u));
  EXPECT_THAT(WritesAt(kNvmeRegAqa), ElementsAre(0x000F000Fu));
  EXPECT_EQ(state_.asq % 4096, 0u);
  EXPECT_EQ(state_.acq % 4096, 0u);
  EXPECT_NE(state_.asq, state_.acq);
  EXPECT_EQ(state_.enables, 1);
}

TEST_F(NvmeVfioChannelTest, AdminQueuesNeverExceedCapMqes) {
  state_.mqes = 3;  // Four entries.
  ASSERT_OK_AND_ASSIGN(auto channel, OpenChannel());
  EXPECT_THAT(WritesAt(kNvmeRegAqa), ElementsAre(0x00030003u));
}

TEST_F(NvmeVfioChannelTest, DoorbellsFollowTheCapStride) {
  struct Case {
    uint8_t dstrd;
    uint32_t sq0, cq0, sq1, cq1;
  };
  for (const Case& c : {Case{0, 0x1000, 0x1004, 0x1008, 0x100C},
                        Case{2, 0x1000, 0x1010, 0x1020, 0x1030}}) {
    SCOPED_TRACE(c.dstrd);
    state_ = FakeVfioNvmeState{};
    state_.dstrd = c.dstrd;
    ASSERT_OK_AND_ASSIGN(auto channel, OpenChannel());
    std::vector<uint8_t> buf(4096);
    ASSERT_OK_AND_ASSIGN(uint16_t st, channel->Run(IdentifyController(), buf));
    EXPECT_EQ(st, 0);
    EXPECT_THAT(WritesAt(c.sq0), ElementsAre(1u));
    EXPECT_THAT(WritesAt(c.cq0), ElementsAre(1u));
    std::vector<uint8_t> block(512);
    ASSERT_OK_AND_ASSIGN(st, channel->RunIo({.opcode = kNvmeIoRead, .nsid = 1}, block));
    EXPECT_EQ(st, 0);
    EXPECT_THAT(WritesAt(c.sq1), ElementsAre(1u));
    EXPECT_THAT(WritesAt(c.cq1), ElementsAre(1u));
    EXPECT_EQ(block, std::vector<uint8_t>(state_.blocks.begin(), state_.blocks.begin() + 512));
  }
}

TEST_F(NvmeVfioChannelTest, ThePhaseTagFlipsWhenTheCompletionQueueWraps) {
  options_.admin_queue_entries = 4;
  ASSERT_OK_AND_ASSIGN(auto channel, OpenChannel());
  for (int i = 0; i < 10; ++i) {
    std::vector<uint8_t> buf(4096);
    ASSERT_OK_AND_ASSIGN(uint16_t st, channel->Run(IdentifyController(), buf));
    ASSERT_EQ(st, 0) << "command " << i;
    EXPECT_EQ(std::string(reinterpret_cast<char*>(&buf[4]), 9), "FAKE-SN-1") << "command " << i;
  }
  EXPECT_THAT(state_.admin_phases, ElementsAre(1, 1, 1, 1, 0, 0, 0, 0, 1, 1));
  EXPECT_THAT(WritesAt(kNvmeDoorbells), ElementsAre(1u, 2u, 3u, 0u, 1u, 2u, 3u, 0u, 1u, 2u));
  EXPECT_THAT(WritesAt(kNvmeDoorbells + 4), ElementsAre(1u, 2u, 3u, 0u, 1u, 2u, 3u, 0u, 1u, 2u));
}

TEST_F(NvmeVfioChannelTest, ACommandWithoutCompletionTimesOutAndStopsTheChannel) {
  state_.never_complete = {0x80};
  ASSERT_OK_AND_ASSIGN(auto channel, OpenChannel());
  const absl::Time start = clock_.Now();
  auto st = channel->Run({.opcode = kNvmeAdminFormatNvm, .nsid = 1, .timeout = absl::Seconds(7)},
                         {});
  EXPECT_THAT(st.status(), StatusIs(absl::StatusCode::kDeadlineExceeded,
                                    HasSubstr("no completion within 7s")));
  EXPECT_THAT(st.status().message(), HasSubstr("0000:00:04.0"));
  EXPECT_GE(clock_.Now() - start, absl::Seconds(7));
  std::vector<uint8_t> buf(4096);
  EXPECT_THAT(channel->Run(IdentifyController(), buf).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("timed out")));
  // Closing resets the controller, which drops the lost command.
  EXPECT_OK(channel->Close());
  EXPECT_EQ(state_.cc & 1, 0u);
}

// A long command is polled ever less often, up to max_poll_interval, and
// the last wait ends at the deadline, not after it.
TEST_F(NvmeVfioChannelTest, PollingBacksOffUpToItsCap) {
  state_.never_complete = {0x80};
  options_.poll_interval = absl::Microseconds(50);
  options_.max_poll_interval = absl::Milliseconds(10);
  ASSERT_OK_AND_ASSIGN(auto channel, OpenChannel());
  const int64_t sleeps = clock_.sleeps();
  const absl::Time start = clock_.Now();
  auto st = channel->Run({.opcode = kNvmeAdminFormatNvm, .nsid = 1, .timeout = absl::Seconds(60)},
                         {});
  EXPECT_THAT(st.status(), StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(clock_.Now() - start, absl::Seconds(60));
  // 50 us doubling to 10 ms: 8 short waits, then 6000 of 10 ms at most.
  EXPECT_LE(clock_.sleeps() - sleeps, 6010);
  EXPECT_GE(clock_.sleeps() - sleeps, 6000);
}

TEST_F(NvmeVfioChannelTest, ReadyThatNeverComesIsBoundedByCapTimeout) {
  state_.never_ready = true;
  state_.to = 6;  // 3 s.
  const absl::Time start = clock_.Now();
  auto channel = OpenChannel();
  EXPECT_THAT(channel.status(),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("enabling the controller (CC.EN=1): CSTS.RDY did not become 1 "
                                 "within 3s")));
  EXPECT_GE(clock_.Now() - start, absl::Seconds(3));
  EXPECT_LT(clock_.Now() - start, absl::Seconds(4));
  // The failed open left it disabled and released.
  EXPECT_EQ(state_.cc & 1, 0u);
  EXPECT_TRUE(state_.closed);
}

TEST_F(NvmeVfioChannelTest, AFatalControllerStatusFailsTheStep) {
  {
    state_.fatal_on_enable = true;
    EXPECT_THAT(OpenChannel().status(),
                StatusIs(absl::StatusCode::kInternal, HasSubstr("fatal status (CSTS 00000002h")));
  }
  state_ = FakeVfioNvmeState{};
  state_.fatal_on = {0x80};
  ASSERT_OK_AND_ASSIGN(auto channel, OpenChannel());
  auto st = channel->Run({.opcode = kNvmeAdminFormatNvm, .nsid = 1}, {});
  EXPECT_THAT(st.status(), StatusIs(absl::StatusCode::kInternal, HasSubstr("CFS set")));
}

TEST_F(NvmeVfioChannelTest, TheNvmeStatusComesBackAsThePassthroughGivesIt) {
  state_.status_of[0x80] = 0x410A;  // Invalid Format, do not retry.
  ASSERT_OK_AND_ASSIGN(auto channel, OpenChannel());
  ASSERT_OK_AND_ASSIGN(uint16_t st,
                       channel->Run({.opcode = kNvmeAdminFormatNvm, .nsid = 1}, {}));
  EXPECT_EQ(st, 0x410A);
  // The channel goes on after a status error.
  std::vector<uint8_t> buf(4096);
  ASSERT_OK_AND_ASSIGN(st, channel->Run(IdentifyController(), buf));
  EXPECT_EQ(st, 0);
}

TEST_F(NvmeVfioChannelTest, TransfersBeyondTwoPagesGoThroughAPrpList) {
  ASSERT_OK_AND_ASSIGN(auto channel, OpenChannel());
  for (size_t bytes : {size_t{512}, size_t{8192}, size_t{3 * 4096 + 100}, size_t{64 * 1024}}) {
    SCOPED_TRACE(bytes);
    std::vector<uint8_t> buf(bytes);
    NvmeAdminCommand get{.opcode = kNvmeAdminGetLogPage,
                         .cdw10 = 0x02 | static_cast<uint32_t>((bytes / 4 - 1) << 16)};
    ASSERT_OK_AND_ASSIGN(uint16_t st, channel->Run(get, buf));
    EXPECT_EQ(st, 0);
    for (size_t i = 0; i < bytes; i += 509) ASSERT_EQ(buf[i], i % 251) << i;
  }
  std::vector<uint8_t> big(NvmeVfioChannel::kMaxTransfer + 4096);
  EXPECT_THAT(channel->Run({.opcode = kNvmeAdminGetLogPage}, big).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("exceeds")));
}

TEST_F(NvmeVfioChannelTest, ClosingDisablesTheControllerAndReleasesTheDevice) {
  ASSERT_OK_AND_ASSIGN(auto channel, OpenChannel());
  ASSERT_EQ(state_.csts & 1, 1u);
  channel.reset();
  EXPECT_EQ(state_.cc & 1, 0u);
  EXPECT_EQ(state_.csts & 1, 0u);
  EXPECT_TRUE(state_.closed);
}

TEST_F(NvmeVfioChannelTest, ErasesAndVerifiesThroughTheChannel) {
  ASSERT_OK_AND_ASSIGN(auto channel, OpenChannel());
  NvmeEraseOptions eo;
  eo.clock = &clock_;
  ASSERT_OK_AND_ASSIGN(NvmeEraseReport report,
                       EraseNvmeController(*channel, "vfio", "0000:00:04.0", "FAKE-SN-1", eo));
  EXPECT_EQ(report.identity, "FAKE-SN-1");
  EXPECT_EQ(report.method, "format (SES=1)");
  EXPECT_THAT(report.formatted, ElementsAre(1u));
  EXPECT_EQ(report.verified_blocks, 2);
  EXPECT_EQ(state_.formats, 1);
  EXPECT_EQ(state_.blocks, std::vector<uint8_t>(state_.blocks.size(), 0));
  // The I/O queue pair was made once, before the first read.
  std::vector<uint8_t> queue_setup;
  for (uint8_t op : state_.opcodes) {
    if (op == 0x09 || op == 0x05 || op == 0x01) queue_setup.push_back(op);
  }
  EXPECT_THAT(queue_setup, ElementsAre(0x09, 0x05, 0x01));
}

TEST_F(NvmeVfioChannelTest, AnotherDriveIsNotFormatted) {
  state_.serial = "OTHER-SN";
  ASSERT_OK_AND_ASSIGN(auto channel, OpenChannel());
  NvmeEraseOptions eo;
  eo.clock = &clock_;
  auto report = EraseNvmeController(*channel, "vfio", "0000:00:04.0", "FAKE-SN-1", eo);
  EXPECT_EQ(FailureReason(report.status()), kReasonDriveChanged);
  EXPECT_EQ(state_.formats, 0);
}

TEST_F(NvmeVfioChannelTest, AFormatStatusFailsTheErase) {
  state_.status_of[0x80] = 0x4002;
  ASSERT_OK_AND_ASSIGN(auto channel, OpenChannel());
  NvmeEraseOptions eo;
  eo.clock = &clock_;
  auto report = EraseNvmeController(*channel, "vfio", "0000:00:04.0", "FAKE-SN-1", eo);
  EXPECT_THAT(report.status(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                        HasSubstr("Invalid Field in Command (SCT 0h SC 02h, do "
                                                  "not retry)")));
  EXPECT_EQ(FailureReason(report.status()), kReasonEraseStatus);
  EXPECT_EQ(state_.blocks, testing::GuestPattern(state_.blocks.size()));
}

}  // namespace
}  // namespace pdc::driver
