#include "driver/deviceplugin/names.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/strings.h"

namespace pdc::driver::deviceplugin {

std::string ResourceEnvVar(std::string_view resource_name) {
  std::string name = absl::AsciiStrToUpper(Sv(resource_name));
  for (char& c : name) {
    if (c == '/' || c == '.') c = '_';
  }
  return absl::StrCat(Sv(kPciResourcePrefix), "_", name);
}

std::string PluginSocketName(std::string_view resource_name) {
  std::string name(resource_name);
  for (char& c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') {
      c = '_';
    }
  }
  return absl::StrCat("pdc-", name, ".sock");
}

}  // namespace pdc::driver::deviceplugin
