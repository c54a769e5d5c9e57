// model::DraDeviceNameFromSerial: the names pdc-node's ResourceSlices give
// devices, which pdc-extender matches allocations back to its inventory by.
// The expected names are the rule worked by hand (CRC-32C, Castagnoli, of
// the serial's bytes), so both programs are held to the same names.
#include "model/dra_device_name.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pdc::model {
namespace {

TEST(DraDeviceNameTest, NamesFromSerials) {
  struct Case {
    std::string serial;
    std::string name;
  };
  for (const Case& c : std::vector<Case>{
           {"", ""},
           {"S3EWNX0M", "s3ewnx0m-3bf75793"},
           {"  PHLJ 9123/00A  ", "phlj-9123-00a-c22a554b"},
           {"___", "dev-b39fdf0a"},
           {"AB-1", "ab-1-cbb17fef"},
           {"ab-1", "ab-1-fdd09070"},
           {std::string(80, 'x'), std::string(54, 'x') + "-"},
       }) {
    const std::string got = DraDeviceNameFromSerial(c.serial);
    if (c.serial.size() == 80) {
      EXPECT_EQ(got.substr(0, 55), c.name);
      EXPECT_EQ(got.size(), 63u);
    } else {
      EXPECT_EQ(got, c.name) << c.serial;
    }
  }
}

}  // namespace
}  // namespace pdc::model
