#include "driver/dra/names.h"

#include "absl/strings/str_cat.h"
#include "common/strings.h"

namespace pdc::driver::dra {

std::string RegistrationSocketPath(std::string_view registry_dir, std::string_view driver) {
  return absl::StrCat(Sv(registry_dir), "/", Sv(driver), "-reg.sock");
}

std::string ServiceSocketPath(std::string_view plugins_dir, std::string_view driver) {
  return absl::StrCat(Sv(plugins_dir), "/", Sv(driver), "/dra.sock");
}

}  // namespace pdc::driver::dra
