#!/usr/bin/env python3
"""Adds pdc's settings to the KubeVirt CR without removing anything else.

pdc needs two things in the KubeVirt CR (kubevirts.kubevirt.io):
  * the HostDevices feature gate in
    spec.configuration.developerConfiguration.featureGates (and
    HostDevicesWithDRA when a device class is in `mode: dra`), and
  * one spec.configuration.permittedHostDevices.pciHostDevices entry per PCI
    id of pdc's deviceClasses, with externalResourceProvider: true, so that
    pdc-node and not virt-handler is the device plugin for those resources.

Both are lists. A merge patch replaces a list as a whole (every other gate and
permitted device would be dropped) and kube-apiserver refuses strategic merge
for custom resources, so this script reads the CR, works out what is missing
and writes a JSON patch that only adds: entries at the end of the lists
(`add .../-`), and externalResourceProvider: true on an entry for one of pdc's
PCI ids that virt-handler serves today (pdc-node takes it over). The patch
starts with `test` operations on metadata.resourceVersion and on every list it
changes: if the CR changed after it was read, kube-apiserver rejects the whole
patch and nothing is written. Running it again when everything is in place
changes nothing.

    # dry run (default): what would change, as a diff; changes nothing
    scripts/kubevirt-enable-pdc.py --pdc-config deploy/config/pdc.yaml
    # the same, with the device classes of the installed pdc (kustomize or Helm)
    scripts/kubevirt-enable-pdc.py --pdc-config-from-cluster
    # apply it
    scripts/kubevirt-enable-pdc.py --pdc-config deploy/config/pdc.yaml --apply
    # only print the JSON patch (for kubectl patch --type json, or review)
    scripts/kubevirt-enable-pdc.py --pdc-config deploy/config/pdc.yaml --print-patch
    # work on a file instead of the cluster (e.g. a GitOps copy of the CR)
    scripts/kubevirt-enable-pdc.py --kubevirt-file kubevirt.yaml --print-result
    # take pdc's entries out again (the HostDevices gate stays: other
    # permitted devices may need it)
    scripts/kubevirt-enable-pdc.py --remove --apply

Needs python3 with PyYAML (Debian: python3-yaml) and, unless --kubevirt-file
is given, kubectl with access to the cluster. Exit status: 0 done (or nothing
to do), 1 error (printed; nothing was changed), 2 bad command line.
"""
import argparse
import copy
import difflib
import json
import os
import subprocess
import sys
import tempfile

try:
    import yaml
except ImportError:  # pragma: no cover - depends on the machine
    sys.exit("kubevirt-enable-pdc: needs PyYAML (Debian: apt-get install python3-yaml)")

GATE = "HostDevices"
# With a device class in `mode: dra`, VMs take that class's devices from DRA
# ResourceClaims (hostDevices[].claimName), which KubeVirt serves behind this
# gate (alpha in v1.6-v1.8, beta and on by default from v1.9; naming it there
# changes nothing).
DRA_GATE = "HostDevicesWithDRA"
KUBEVIRT_RESOURCE = "kubevirts.kubevirt.io"  # fully qualified: no alias or category can capture it
DEFAULT_PDC_CONFIG = os.path.normpath(os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "deploy", "config", "pdc.yaml"))


class Refused(Exception):
    """The CR cannot be changed safely; the message says why and what to do."""


# --- JSON pointer / JSON patch (RFC 6901, RFC 6902), the operations used here ----------------

def pointer(*parts):
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _parse_pointer(ptr):
    if ptr == "":
        return []
    if not ptr.startswith("/"):
        raise ValueError(f"bad JSON pointer {ptr!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in ptr[1:].split("/")]


def _resolve(doc, parts):
    cur = doc
    for p in parts:
        cur = cur[int(p)] if isinstance(cur, list) else cur[p]
    return cur


def apply_patch(doc, patch):
    """Applies a JSON patch of test/add/replace/remove operations to a copy of doc."""
    doc = copy.deepcopy(doc)
    for op in patch:
        parts = _parse_pointer(op["path"])
        parent, last = _resolve(doc, parts[:-1]), parts[-1]
        if op["op"] == "test":
            if _resolve(doc, parts) != op["value"]:
                raise Refused(f"test of {op['path']} failed: the document changed")
        elif op["op"] == "add":
            if isinstance(parent, list):
                if last == "-":
                    parent.append(copy.deepcopy(op["value"]))
                else:
                    parent.insert(int(last), copy.deepcopy(op["value"]))
            else:
                parent[last] = copy.deepcopy(op["value"])
        elif op["op"] == "replace":
            if isinstance(parent, list):
                parent[int(last)] = copy.deepcopy(op["value"])
            else:
                if last not in parent:
                    raise Refused(f"replace of missing {op['path']}")
                parent[last] = copy.deepcopy(op["value"])
        elif op["op"] == "remove":
            if isinstance(parent, list):
                del parent[int(last)]
            else:
                del parent[last]
        else:
            raise ValueError(f"unsupported JSON patch operation {op['op']}")
    return doc


# --- what pdc needs --------------------------------------------------------------------------

def wanted_devices(pdc_config):
    """pciHostDevices entries for pdc's deviceClasses, in their order."""
    classes = pdc_config.get("deviceClasses") if isinstance(pdc_config, dict) else None
    if not classes:
        raise Refused("the pdc configuration has no deviceClasses: nothing to permit")
    out = []
    for c in classes:
        rn, sels = c.get("resourceName"), c.get("selectors")
        if not isinstance(rn, str) or not rn or not isinstance(sels, list) or not sels:
            raise Refused(f"deviceClasses entry {c!r}: needs resourceName and selectors")
        for s in sels:
            out.append({"pciVendorSelector": str(s), "resourceName": rn,
                        "externalResourceProvider": True})
    return out


def wanted_gates(pdc_config):
    """The feature gates pdc's deviceClasses need, in order."""
    classes = pdc_config.get("deviceClasses") if isinstance(pdc_config, dict) else None
    dra = any(isinstance(c, dict) and c.get("mode") == "dra" for c in classes or [])
    return [GATE, DRA_GATE] if dra else [GATE]


def _same_selector(a, b):
    return str(a).strip().lower() == str(b).strip().lower()


def _get(d, *keys):
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def _ensure(cr, keys, leaf, patch):
    """Adds the missing objects along keys (below the CR root) with `leaf` at the end.
    Returns True when something was missing (then the leaf is already in the patch)."""
    cur, have = cr, []
    for i, k in enumerate(keys):
        if isinstance(cur, dict) and isinstance(cur.get(k), (dict, list)):
            cur, have = cur[k], have + [k]
            continue
        if isinstance(cur, dict) and k in cur and cur[k] is not None:
            raise Refused(f"{'.'.join(have + [k])} is a {type(cur[k]).__name__}, not an object"
                          " or list: fix the KubeVirt CR by hand")
        value = leaf
        for inner in reversed(keys[i + 1:]):
            value = {inner: value}
        patch.append({"op": "add", "path": pointer(*have, k), "value": value})
        return True
    return False


def plan(cr, devices, remove=False, gates_wanted=(GATE,)):
    """The JSON patch (a list) and the human-readable notes for one KubeVirt CR.
    An empty patch means nothing to change."""
    if not isinstance(cr, dict) or cr.get("kind") != "KubeVirt":
        raise Refused("the object read is not a KubeVirt CR (kind: KubeVirt)")
    patch, notes, changes = [], [], []
    rv = _get(cr, "metadata", "resourceVersion")
    guard = [{"op": "test", "path": "/metadata/resourceVersion", "value": rv}] if rv else []

    dev_keys = ["spec", "configuration", "permittedHostDevices", "pciHostDevices"]
    gate_keys = ["spec", "configuration", "developerConfiguration", "featureGates"]
    existing = _get(cr, *dev_keys)
    if existing is not None and not isinstance(existing, list):
        raise Refused("spec.configuration.permittedHostDevices.pciHostDevices is not a list")
    existing = existing or []
    for i, e in enumerate(existing):
        if not isinstance(e, dict):
            raise Refused(f"pciHostDevices[{i}] is not an object: fix the KubeVirt CR by hand")
    dev_ptr = pointer(*dev_keys)

    if remove:
        drop = [i for i, e in enumerate(existing)
                if any(_same_selector(e.get("pciVendorSelector"), w["pciVendorSelector"]) and
                       e.get("resourceName") == w["resourceName"] and
                       e.get("externalResourceProvider") is True for w in devices)]
        if drop:
            changes.append({"op": "test", "path": dev_ptr, "value": existing})
            for i in reversed(drop):
                changes.append({"op": "remove", "path": f"{dev_ptr}/{i}"})
                notes.append(f"pciHostDevices: remove {existing[i]['pciVendorSelector']} -> "
                             f"{existing[i]['resourceName']} (virt-handler does not serve it"
                             " either until you permit it again without externalResourceProvider)")
        else:
            notes.append("pciHostDevices: none of pdc's entries present")
        notes.append(f"feature gates {', '.join(gates_wanted)}: left as they are")
        return (guard + changes if changes else []), notes

    # 1. The feature gates.
    gates = _get(cr, *gate_keys)
    disabled = _get(cr, "spec", "configuration", "developerConfiguration",
                    "disabledFeatureGates") or []
    for g in gates_wanted:
        if g in disabled:
            raise Refused(f"{g} is listed in developerConfiguration.disabledFeatureGates; a gate"
                          " may not be both enabled and disabled. Remove it from"
                          " disabledFeatureGates by hand if host devices are meant to be"
                          " allowed")
    if gates is not None and not isinstance(gates, list):
        raise Refused("developerConfiguration.featureGates is not a list")
    missing = [g for g in gates_wanted if not (gates and g in gates)]
    for g in gates_wanted:
        if g not in missing:
            notes.append(f"feature gate {g}: already enabled")
    if missing and gates:
        changes.append({"op": "test", "path": pointer(*gate_keys), "value": gates})
        for g in missing:
            changes.append({"op": "add", "path": pointer(*gate_keys, "-"), "value": g})
            notes.append(f"feature gate {g}: add (kept: {', '.join(map(str, gates))})")
    elif missing:
        if gates == []:
            changes.append({"op": "test", "path": pointer(*gate_keys), "value": []})
            for g in missing:
                changes.append({"op": "add", "path": pointer(*gate_keys, "-"), "value": g})
        else:
            _ensure(cr, gate_keys, list(missing), changes)
        for g in missing:
            notes.append(f"feature gate {g}: add")

    # 2. The permitted host devices. `work` has the gate changes applied, so that
    #    objects they created are not created a second time.
    work = apply_patch(cr, changes)
    to_add, to_replace = [], []
    for w in devices:
        same_sel = [(i, e) for i, e in enumerate(existing)
                    if _same_selector(e.get("pciVendorSelector"), w["pciVendorSelector"])]
        if any(e.get("resourceName") == w["resourceName"] and
               e.get("externalResourceProvider") is True for _, e in same_sel):
            notes.append(f"pciHostDevices: {w['pciVendorSelector']} -> {w['resourceName']}"
                         " already served by an external device plugin")
            continue
        other = [e for _, e in same_sel if e.get("resourceName") != w["resourceName"]]
        if other:
            raise Refused(
                f"KubeVirt already permits PCI id {w['pciVendorSelector']} as resource "
                f"{other[0].get('resourceName')!r}; pdc's deviceClasses want it as "
                f"{w['resourceName']!r}. One PCI id can back only one resource name: change"
                " pdc's deviceClasses or remove that entry from the KubeVirt CR by hand")
        if same_sel:
            to_replace.append((same_sel[0][0], w))
        else:
            to_add.append(w)
    wanted_names = {w["resourceName"] for w in devices}
    for i, e in enumerate(existing):
        if e.get("resourceName") not in wanted_names or any(
                _same_selector(e.get("pciVendorSelector"), w["pciVendorSelector"])
                for w in devices):
            continue
        if e.get("externalResourceProvider") is True:
            notes.append(f"warning: pciHostDevices[{i}] permits {e.get('pciVendorSelector')} as "
                         f"{e.get('resourceName')}, which pdc's deviceClasses do not list: pdc-node"
                         " will not hand out such devices")
        else:
            raise Refused(
                f"virt-handler serves {e.get('resourceName')} for PCI id "
                f"{e.get('pciVendorSelector')} (pciHostDevices[{i}], no externalResourceProvider);"
                " pdc-node must be the only device plugin for a resource name it manages. Add"
                f" {e.get('pciVendorSelector')} to that deviceClass in pdc's configuration and run"
                " again, or give pdc another resource name")
    if to_add or to_replace:
        if _get(work, *dev_keys) is not None:
            changes.append({"op": "test", "path": dev_ptr, "value": existing})
        for i, w in to_replace:
            changes.append({"op": "add", "path": f"{dev_ptr}/{i}/externalResourceProvider",
                            "value": True})
            notes.append(f"pciHostDevices[{i}]: {w['pciVendorSelector']} -> {w['resourceName']}:"
                         " set externalResourceProvider: true (pdc-node takes the resource over"
                         " from virt-handler)")
        if _get(work, *dev_keys) is None:
            _ensure(work, dev_keys, to_add, changes)
        else:
            for w in to_add:
                changes.append({"op": "add", "path": f"{dev_ptr}/-", "value": w})
        for w in to_add:
            notes.append(f"pciHostDevices: add {w['pciVendorSelector']} -> {w['resourceName']}"
                         " (externalResourceProvider: true)")
        kept = len(existing) - len(to_replace)
        if kept:
            notes.append(f"pciHostDevices: {kept} existing entr{'y' if kept == 1 else 'ies'}"
                         " left unchanged")
    return (guard + changes if changes else []), notes


# --- reading and writing ---------------------------------------------------------------------

def run_kubectl(kubectl, args, stdin=None):
    try:
        out = subprocess.run([kubectl] + args, input=stdin, capture_output=True, text=True)
    except FileNotFoundError:
        raise Refused(f"kubectl not found at {kubectl!r}: pass --kubectl PATH")
    if out.returncode != 0:
        raise Refused(f"kubectl {' '.join(args)}: {out.stderr.strip() or out.stdout.strip()}")
    return out.stdout


def read_kubevirt(args):
    if args.kubevirt_file:
        with open(args.kubevirt_file) as f:
            docs = [d for d in yaml.safe_load_all(f) if d is not None]
        if len(docs) != 1:
            raise Refused(f"{args.kubevirt_file}: want exactly one KubeVirt object, found"
                          f" {len(docs)}")
        return docs[0]
    if args.name:
        return json.loads(run_kubectl(args.kubectl, ["get", KUBEVIRT_RESOURCE, args.name, "-n",
                                                     args.namespace or "kubevirt", "-o", "json"]))
    scope = ["-n", args.namespace] if args.namespace else ["-A"]
    items = json.loads(run_kubectl(args.kubectl, ["get", KUBEVIRT_RESOURCE] + scope +
                                   ["-o", "json"])).get("items", [])
    if not items:
        raise Refused("no KubeVirt CR found (kubectl get kubevirts.kubevirt.io -A): is KubeVirt"
                      " installed, and does this kubeconfig reach the right cluster?")
    if len(items) > 1:
        names = ", ".join(f"{i['metadata'].get('namespace')}/{i['metadata']['name']}"
                          for i in items)
        raise Refused(f"several KubeVirt CRs ({names}): choose one with --namespace and --name")
    return items[0]


def read_pdc_config(args):
    if args.pdc_config_from_cluster:
        ns = args.pdc_namespace
        dep = json.loads(run_kubectl(args.kubectl, ["get", "deployment", "pdc-extender", "-n", ns,
                                                    "-o", "json"]))
        vols = dep["spec"]["template"]["spec"].get("volumes", [])
        cms = [v["configMap"]["name"] for v in vols if v.get("name") == "config" and
               "configMap" in v]
        if not cms:
            raise Refused(f"deployment {ns}/pdc-extender has no `config` ConfigMap volume")
        cm = json.loads(run_kubectl(args.kubectl, ["get", "configmap", cms[0], "-n", ns, "-o",
                                                   "json"]))
        text, where = cm.get("data", {}).get("pdc.yaml"), f"configmap {ns}/{cms[0]}"
        if text is None:
            raise Refused(f"{where} has no pdc.yaml")
    else:
        where = args.pdc_config
        try:
            with open(where) as f:
                text = f.read()
        except OSError as e:
            raise Refused(f"pdc configuration {where}: {e.strerror}")
    try:
        return yaml.safe_load(text), where
    except yaml.YAMLError as e:
        raise Refused(f"pdc configuration {where}: not YAML: {e}")


def configuration_yaml(cr):
    conf = _get(cr, "spec", "configuration")
    return yaml.safe_dump(conf if conf is not None else {}, sort_keys=False,
                          default_flow_style=False).splitlines(keepends=True)


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Add pdc's feature gate and permitted host devices to the KubeVirt CR, "
                    "keeping everything else (dry run unless --apply).")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--pdc-config", default=DEFAULT_PDC_CONFIG,
                     help="pdc configuration whose deviceClasses to permit "
                          "(default: deploy/config/pdc.yaml of this checkout)")
    src.add_argument("--pdc-config-from-cluster", action="store_true",
                     help="read the pdc configuration of the installed pdc-extender")
    ap.add_argument("--pdc-namespace", default="pdc-system",
                    help="namespace of the installed pdc (with --pdc-config-from-cluster)")
    ap.add_argument("--kubevirt-file", help="read the KubeVirt CR from this YAML/JSON file "
                    "instead of the cluster (--apply is then refused)")
    ap.add_argument("--namespace", help="namespace of the KubeVirt CR (default: find the only one)")
    ap.add_argument("--name", help="name of the KubeVirt CR (default: find the only one)")
    ap.add_argument("--kubectl", default="kubectl", help="kubectl to run (default: from PATH)")
    ap.add_argument("--remove", action="store_true",
                    help="remove pdc's pciHostDevices entries instead of adding them")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--apply", action="store_true", help="patch the CR in the cluster")
    mode.add_argument("--print-patch", action="store_true",
                      help="print only the JSON patch ([] when nothing is to change)")
    mode.add_argument("--print-result", action="store_true",
                      help="print only the CR as it would be after the patch (JSON)")
    args = ap.parse_args(argv)
    if args.apply and args.kubevirt_file:
        ap.error("--apply works on the cluster's CR; with --kubevirt-file use --print-patch or "
                 "--print-result")

    try:
        pdc_config, config_source = read_pdc_config(args)
        devices = wanted_devices(pdc_config)
        cr = read_kubevirt(args)
        patch, notes = plan(cr, devices, remove=args.remove,
                            gates_wanted=wanted_gates(pdc_config))
        after = apply_patch(cr, patch)
    except Refused as e:
        print(f"kubevirt-enable-pdc: {e}", file=sys.stderr)
        return 1

    if args.print_patch:
        print(json.dumps(patch, indent=2))
        return 0
    if args.print_result:
        print(json.dumps(after, indent=2))
        return 0

    meta = cr.get("metadata", {})
    where = args.kubevirt_file or f"{meta.get('namespace')}/{meta.get('name')}"
    print(f"KubeVirt CR {where} (resourceVersion {meta.get('resourceVersion', 'unknown')}),"
          f" device classes from {config_source}:")
    for n in notes:
        print(f"  {n}")
    if not patch:
        print("Nothing to change.")
        return 0
    sys.stdout.writelines(difflib.unified_diff(
        configuration_yaml(cr), configuration_yaml(after),
        "spec.configuration (now)", "spec.configuration (after)"))
    print("JSON patch:")
    print(json.dumps(patch, indent=2))
    if not args.apply:
        print("Dry run: nothing was changed. Run again with --apply to patch the CR.")
        return 0

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(patch, f)
        patch_file = f.name
    try:
        run_kubectl(args.kubectl, ["patch", KUBEVIRT_RESOURCE, meta["name"], "-n",
                                   meta["namespace"], "--type", "json", "--patch-file",
                                   patch_file])
    except Refused as e:
        print(f"kubevirt-enable-pdc: {e}\nNothing was changed. If a test operation failed, the"
              " KubeVirt CR changed after it was read: run the script again.", file=sys.stderr)
        return 1
    finally:
        os.unlink(patch_file)
    print(f"Patched KubeVirt CR {where}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
