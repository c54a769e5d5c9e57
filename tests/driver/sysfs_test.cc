#include "driver/sysfs.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace pdc::driver {
namespace {

namespace fs = std::filesystem;
using ::pdc::testing::IsOk;
using ::pdc::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Run with openat2 (false) and with the realpath fallback (true).
class RealSysfsTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    root_ = tmp_.Join("sys");
    outside_ = tmp_.Join("outside");
    fs::create_directories(root_ + "/devices/pci0000:00/0000:00:03.0");
    fs::create_directories(root_ + "/bus/pci/devices");
    fs::create_directories(outside_);
    std::ofstream(root_ + "/devices/pci0000:00/0000:00:03.0/vendor") << "0x1b36\n";
    std::ofstream(outside_ + "/secret") << "do not touch\n";
    fs::create_symlink("../../../devices/pci0000:00/0000:00:03.0",
                       root_ + "/bus/pci/devices/0000:00:03.0");
    fs::create_symlink(outside_, root_ + "/bus/pci/devices/0000:00:04.0");
    fs::create_symlink("../../../../outside/secret", root_ + "/bus/pci/devices/escape");
  }

  // A RealSysfs over the tree in the mode of the test parameter.
  std::unique_ptr<RealSysfs> Make() {
    auto sys = std::make_unique<RealSysfs>(root_);
    if (GetParam()) sys->DisableOpenat2ForTesting();
    return sys;
  }

  pdc::testing::TempDir tmp_;
  std::string root_;
  std::string outside_;
};

TEST_P(RealSysfsTest, ReadsThroughLinksInsideTheRoot) {
  auto owned = Make();
  RealSysfs& sys = *owned;
  ASSERT_OK_AND_ASSIGN(std::string v, ReadTrimmed(sys, "bus/pci/devices/0000:00:03.0/vendor"));
  EXPECT_EQ(v, "0x1b36");
  ASSERT_OK_AND_ASSIGN(std::string r, sys.Resolve("bus/pci/devices/0000:00:03.0"));
  EXPECT_EQ(r, "devices/pci0000:00/0000:00:03.0");
  ASSERT_OK_AND_ASSIGN(std::string name, LinkName(sys, "bus/pci/devices/0000:00:03.0"));
  EXPECT_EQ(name, "0000:00:03.0");
  ASSERT_OK_AND_ASSIGN(auto names, sys.List("bus/pci/devices"));
  EXPECT_THAT(names, ElementsAre("0000:00:03.0", "0000:00:04.0", "escape"));
}

TEST_P(RealSysfsTest, RefusesPathsThatLeaveTheRoot) {
  auto owned = Make();
  RealSysfs& sys = *owned;
  const std::string bad[] = {"",
                             "/etc/passwd",
                             "../outside/secret",
                             "bus/../../outside/secret",
                             "bus//pci",
                             "bus/./pci",
                             "bus/pci/devices/0000:00:03.0/.."};
  for (const std::string& p : bad) {
    EXPECT_THAT(sys.Read(p), StatusIs(absl::StatusCode::kInvalidArgument)) << p;
    EXPECT_THAT(sys.Write(p, "x"), StatusIs(absl::StatusCode::kInvalidArgument)) << p;
    EXPECT_THAT(sys.List(p), StatusIs(absl::StatusCode::kInvalidArgument)) << p;
    EXPECT_FALSE(sys.Exists(p)) << p;
  }
}

TEST_P(RealSysfsTest, RefusesLinksPointingOutside) {
  auto owned = Make();
  RealSysfs& sys = *owned;
  EXPECT_THAT(sys.Read("bus/pci/devices/escape"),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("outside")));
  EXPECT_THAT(sys.Read("bus/pci/devices/0000:00:04.0/secret"),
              StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(sys.Write("bus/pci/devices/escape", "x"),
              StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(LinkName(sys, "bus/pci/devices/0000:00:04.0"),
              StatusIs(absl::StatusCode::kPermissionDenied));
  std::string after;
  std::getline(std::ifstream(outside_ + "/secret"), after);
  EXPECT_EQ(after, "do not touch");
}

TEST_P(RealSysfsTest, WriteNeedsAnExistingFileAndMissingFilesAreNotFound) {
  auto owned = Make();
  RealSysfs& sys = *owned;
  EXPECT_THAT(sys.Write("devices/new_file", "x"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_FALSE(fs::exists(root_ + "/devices/new_file"));
  EXPECT_THAT(sys.Read("devices/none"), StatusIs(absl::StatusCode::kNotFound));
  ASSERT_OK(sys.Write("devices/pci0000:00/0000:00:03.0/vendor", "0x8086"));
  ASSERT_OK_AND_ASSIGN(std::string v, sys.Read("bus/pci/devices/0000:00:03.0/vendor"));
  EXPECT_EQ(v, "0x8086");
}

TEST_P(RealSysfsTest, DotIsTheRoot) {
  auto owned = Make();
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> names, owned->List("."));
  EXPECT_THAT(names, ::testing::ElementsAre("bus", "devices"));
  EXPECT_TRUE(owned->Exists("."));
  EXPECT_THAT(owned->List("./bus"), StatusIs(absl::StatusCode::kInvalidArgument));
}

// Device numbers through links, as through /proc/<pid>/fd: the link may lead
// anywhere (only its directory lies beneath the root); files that are not
// devices, and dangling links, are left out.
TEST_P(RealSysfsTest, DeviceNumbersFollowLinksToTheEnd) {
  fs::create_directories(root_ + "/4242/fd");
  fs::create_symlink("/dev/null", root_ + "/4242/fd/0");
  fs::create_symlink(outside_ + "/secret", root_ + "/4242/fd/1");
  fs::create_symlink(outside_ + "/gone", root_ + "/4242/fd/2");
  auto owned = Make();
  ASSERT_OK_AND_ASSIGN(auto numbers, owned->DeviceNumbersIn("4242/fd"));
  EXPECT_THAT(numbers, ::testing::ElementsAre(::testing::Pair("0", "c1:3")));
  EXPECT_THAT(owned->DeviceNumbersIn("4243/fd"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(owned->DeviceNumbersIn("../outside"), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_P(RealSysfsTest, OpenExclusiveOfAFileThatIsNotThereIsNotFound) {
  auto owned = Make();
  EXPECT_THAT(owned->OpenExclusive("devices/nvme0n1"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(owned->OpenExclusive("bus/pci/devices/escape"),
              StatusIs(absl::StatusCode::kPermissionDenied));
}

INSTANTIATE_TEST_SUITE_P(Modes, RealSysfsTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? std::string("RealpathFallback") : std::string("Openat2");
                         });

TEST(ValidateRelativePathTest, AcceptsPlainRelativePaths) {
  EXPECT_THAT(ValidateRelativePath("bus/pci/drivers_probe"), IsOk());
  EXPECT_THAT(ValidateRelativePath("a"), IsOk());
  EXPECT_THAT(ValidateRelativePath("a/"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateRelativePath(std::string("a\0b", 3)),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace pdc::driver
