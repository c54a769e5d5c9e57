// pdcctl --help: the commands and flags that pdcctl_args.cc parses.
#include <string>

#include "pdcctl/pdcctl_args.h"

namespace pdc::pdcctl {

std::string Usage() {
  return R"(pdcctl: manage persistent device claims of a pdc-extender.

Usage:
  pdcctl get claims [NAME] [-n NAMESPACE | -A] [-o table|json]
  pdcctl get nodes [-o table|json]
  pdcctl get devices [--node NODE] [-o table|json]
  pdcctl describe claim NAME [-n NAMESPACE]
  pdcctl create claim NAME --resource RESOURCE [--count N] [--node NODE]
                [--serial SERIAL] [--address 0000:3b:00.0]
                [--reclaim-policy Retain|Delete] [-n NAMESPACE]
  pdcctl delete claim NAME [--force] [-n NAMESPACE]
  pdcctl release claim NAME [--pod-uid UID] [-n NAMESPACE]
  pdcctl release device NODE ADDRESS
         offer a Released device (its deleted claim's data is still on it)
         to any claim again
  pdcctl release device NODE ADDRESS --to NAMESPACE/NAME
         hand a Released device over: claims of NAMESPACE may pin it (only
         claims of its deleted claim's namespace may, until then)
  pdcctl release device NODE ADDRESS --abandon-erase
         end the erase of a device whose Delete claim waits for it (the
         erase will not finish): the device is held Released for no claim
         until you release it or hand it over
  pdcctl get handoffs [--node NODE] [-o table|json]
         VM pods bound to a node and still waiting for their devices
  pdcctl get draclaims [-n NAMESPACE | -A] [-o table|json]
         the DRA ResourceClaims the claim keeper follows: the VM each is
         kept for, its node, device and serial, and whether it is persisted
  pdcctl delete handoff POD_UID --node NODE
         the pod went away before it started: free the node for the next VM

Flags:
  -n, --namespace NS     namespace (default "default")
  -A, --all-namespaces   get claims or draclaims in every namespace
  -o, --output FORMAT    table (default) or json
      --server URL       pdc-extender URL (default $PDC_SERVER, else
                         http://127.0.0.1:8888)
      --token-file FILE  bearer token (every call when the extender has one)
      --timeout DURATION request timeout (default 30s)
  -h, --help             this text

Exit codes: 0 ok, 1 the extender refused or failed the request,
2 bad command line, 3 the extender could not be reached.
)";
}

}  // namespace pdc::pdcctl
