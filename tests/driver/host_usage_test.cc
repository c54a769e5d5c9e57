// CheckHostView: pdc-node refuses to run where it cannot see the host's
// mounts and processes (a PID namespace of its own), instead of checking a
// container's view and taking a disk the host uses.
#include "driver/host_usage.h"

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/driver/test_util.h"
#include "tests/testing/status_matchers.h"

namespace pdc::driver {
namespace {

using pdc::testing::IsOk;
using pdc::testing::StatusIs;
using ::testing::HasSubstr;

struct HostViewCase {
  std::string name;
  std::string status;       // proc/self/status; "" = absent.
  bool host_mounts = true;  // proc/1/mountinfo exists.
  std::string error;        // "" = accepted.
};

class CheckHostViewTest : public ::testing::TestWithParam<HostViewCase> {};

TEST_P(CheckHostViewTest, AcceptsOnlyTheHostsView) {
  const HostViewCase& c = GetParam();
  testing::FakeHost host;
  const std::string proc = host.kernel.proc_root();
  if (!c.status.empty()) std::ofstream(proc + "/self/status") << c.status;
  if (c.host_mounts) {
    std::filesystem::create_directories(proc + "/1");
    std::ofstream(proc + "/1/mountinfo") << "22 1 0:21 / / rw - ext4 /dev/sda1 rw\n";
  }
  if (c.error.empty()) {
    EXPECT_THAT(CheckHostView(host.proc), IsOk());
  } else {
    EXPECT_THAT(CheckHostView(host.proc),
                StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr(c.error)));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CheckHostViewTest,
    ::testing::Values(
        HostViewCase{"HostPidNamespace", "Name:\tpdc-node\nNSpid:\t4242\nNSsid:\t1\n", true, ""},
        HostViewCase{"OwnPidNamespace", "Name:\tpdc-node\nNSpid:\t4242\t7\n", true,
                     "pdc-node runs in a PID namespace of its own (NSpid: 4242 7)"},
        HostViewCase{"NestedTwice", "NSpid:\t4242\t70\t1\n", true, "hostPID: true"},
        HostViewCase{"KernelWithoutNSpid", "Name:\tpdc-node\nPid:\t4242\n", true,
                     "no NSpid line"},
        HostViewCase{"NoStatus", "", true, "cannot check pdc-node's PID namespace"},
        HostViewCase{"NoHostMountTable", "NSpid:\t4242\n", false,
                     "cannot check the host's mounts (/proc/1/mountinfo)"}),
    [](const ::testing::TestParamInfo<HostViewCase>& i) { return i.param.name; });

}  // namespace
}  // namespace pdc::driver
