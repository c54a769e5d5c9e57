// pdcctl: a kubectl-like CLI over pdc-extender's REST API. See
// pdcctl_args.h for the commands.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "common/clock.h"
#include "pdcctl/pdcctl_run.h"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  pdc::pdcctl::Environment env;
  if (const char* server = std::getenv("PDC_SERVER")) env.pdc_server = server;
  env.now = pdc::RealClock()->Now();
  env.out = &std::cout;
  env.err = &std::cerr;
  return pdc::pdcctl::Run(args, env);
}
