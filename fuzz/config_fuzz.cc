// The configuration file: ApplyYaml never crashes, and a configuration it
// accepts and Validate passes formats back to YAML that loads to the same
// configuration (ApplyYaml(FormatConfigYaml(c)) reproduces c).
#include "config/config.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  pdc::PdcConfig c;
  if (!pdc::ApplyYaml(pdc::fuzz::AsText(data, size), "fuzz.yaml", &c).ok()) return 0;
  (void)pdc::Validate(c, pdc::Component::kNode);
  if (!pdc::Validate(c, pdc::Component::kExtender).ok()) return 0;
  const std::string yaml = pdc::FormatConfigYaml(c);
  pdc::PdcConfig back;
  if (!pdc::ApplyYaml(yaml, "formatted", &back).ok()) pdc::fuzz::Broken("formatted config does not load");
  if (pdc::FormatConfigYaml(back) != yaml) pdc::fuzz::Broken("formatted config does not round-trip");
  return 0;
}
