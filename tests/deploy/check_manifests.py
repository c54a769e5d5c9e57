#!/usr/bin/env python3
"""Static checks of deploy/: every file parses, the kustomize bases render
with the real kubectl, the KubeSchedulerConfiguration uses exactly the v1
field names, and the pieces agree with each other and with the code (metric
names, config fields, resource names, paths, ports).

    python3 tests/deploy/check_manifests.py --repo DIR --kubectl DIR/.tools/bin/kubectl
    python3 tests/deploy/check_manifests.py --write-prometheusrule

Needs: python3-yaml (Debian) and the kubectl of scripts/install-deps.sh
(kustomize built in), passed with --kubectl; never one from PATH. No cluster.
Exit status 0 = all checks passed; 1 = failures (each printed).
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.parse

import yaml

FAILURES = []


def check(cond, message):
    if not cond:
        FAILURES.append(message)
    return cond


# --- k8s.io/kube-scheduler/config/v1 (types.go), JSON names of every field --
# Derived from the Go types' json tags (kubernetes/kubernetes,
# staging/src/k8s.io/kube-scheduler/config/v1/types.go and
# staging/src/k8s.io/component-base/config/v1alpha1/types.go). kube-scheduler
# decodes its configuration strictly: any other key is a start-up error.
# A dict value describes a nested object; a list value [schema] a list of
# objects; None a scalar (or free-form, for pluginConfig args).
PLUGIN = {"name": None, "weight": None}
PLUGIN_SET = {"enabled": [PLUGIN], "disabled": [PLUGIN]}
PLUGINS = {k: PLUGIN_SET for k in (
    "preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore", "score",
    "reserve", "permit", "preBind", "bind", "postBind", "multiPoint",
    "placementGenerate", "placementScore", "placementFeasible", "podGroupPostFilter")}
EXTENDER_TLS = {k: None for k in (
    "insecure", "serverName", "certFile", "keyFile", "caFile", "certData", "keyData",
    "caData")}
EXTENDER = {
    "urlPrefix": None, "filterVerb": None, "preemptVerb": None, "prioritizeVerb": None,
    "weight": None, "bindVerb": None, "enableHTTPS": None, "tlsConfig": EXTENDER_TLS,
    "httpTimeout": None, "nodeCacheCapable": None,
    "managedResources": [{"name": None, "ignoredByScheduler": None}],
    "ignorable": None,
}
KUBE_SCHEDULER_CONFIGURATION = {
    "apiVersion": None, "kind": None,
    "parallelism": None,
    "leaderElection": {k: None for k in (
        "leaderElect", "leaseDuration", "renewDeadline", "retryPeriod", "resourceLock",
        "resourceName", "resourceNamespace")},
    "clientConnection": {k: None for k in (
        "kubeconfig", "acceptContentTypes", "contentType", "qps", "burst")},
    # DebuggingConfiguration is inlined (json:"").
    "enableProfiling": None, "enableContentionProfiling": None,
    "percentageOfNodesToScore": None, "percentageOfPlacementsToScore": None,
    "podInitialBackoffSeconds": None, "podMaxBackoffSeconds": None,
    "profiles": [{"schedulerName": None, "percentageOfNodesToScore": None,
                  "percentageOfPlacementsToScore": None, "plugins": PLUGINS,
                  "pluginConfig": [{"name": None, "args": None}]}],
    "extenders": [EXTENDER],
    "delayCacheUntilActive": None,
}


def check_keys(obj, schema, path):
    """Every key of obj must be a field of schema, recursively."""
    if schema is None:
        return
    if isinstance(schema, list):
        if check(isinstance(obj, list), f"{path}: want a list, got {type(obj).__name__}"):
            for i, item in enumerate(obj):
                check_keys(item, schema[0], f"{path}[{i}]")
        return
    if not check(isinstance(obj, dict), f"{path}: want an object, got {type(obj).__name__}"):
        return
    for key, value in obj.items():
        if check(key in schema, f"{path}.{key}: not a field of kubescheduler.config.k8s.io/v1"
                 f" (known: {', '.join(sorted(schema))})"):
            check_keys(value, schema[key], f"{path}.{key}")


def load_yaml_docs(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def require_tool(path, name):
    """A tool of scripts/install-deps.sh (.tools/bin); missing is a failure, not a skip."""
    if path and os.path.isfile(path) and os.access(path, os.X_OK):
        return True
    print(f"FAIL: {name} not found at {path!r}: run scripts/install-deps.sh (it installs "
          f"kubectl and helm into .tools/bin); the deploy tests use only that {name}")
    return False


def kustomize(kubectl, path, what=None):
    out = subprocess.run([kubectl, "kustomize", path], capture_output=True, text=True,
                         env=TOOL_ENV)
    check(out.returncode == 0,
          f"kubectl kustomize {what or path} failed: {out.stderr.strip()}")
    return [d for d in yaml.safe_load_all(out.stdout) if d is not None] \
        if out.returncode == 0 else []


# kubectl and helm must never reach a cluster or read a user's configuration
# from a test.
TOOL_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent",
            "KUBECONFIG": "/nonexistent/kubeconfig"}


# --- Resource names kubectl resolves, which a category of pdc's must not shadow --
# kubectl expands a category before it resolves a resource name, so a category
# equal to any of these names (plural, singular or short name) captures it
# (`categories: [kubevirt]` made `kubectl get kubevirt` list claims).
# KubeVirt: the CRDs virt-operator installs (KubeVirt main branch, 2026-08).
KUBEVIRT_NAMES = """
    virtualmachineinstances virtualmachineinstance vmi vmis
    virtualmachines virtualmachine vm vms
    virtualmachineinstancepresets virtualmachineinstancepreset vmipreset vmipresets
    virtualmachineinstancereplicasets virtualmachineinstancereplicaset vmirs vmirss
    virtualmachineinstancemigrations virtualmachineinstancemigration vmim vmims
    kubevirts kubevirt kv kvs
    virtualmachinepools virtualmachinepool vmpool vmpools
    virtualmachinesnapshots virtualmachinesnapshot vmsnapshot vmsnapshots
    virtualmachinesnapshotcontents virtualmachinesnapshotcontent vmsnapshotcontent
    vmsnapshotcontents
    virtualmachinerestores virtualmachinerestore vmrestore vmrestores
    virtualmachineexports virtualmachineexport vmexport vmexports
    virtualmachinebackups virtualmachinebackup vmbackup vmbackups
    virtualmachinebackuptrackers virtualmachinebackuptracker vmbackuptracker vmbackuptrackers
    virtualmachineinstancetypes virtualmachineinstancetype vminstancetype vminstancetypes vmf vmfs
    virtualmachineclusterinstancetypes virtualmachineclusterinstancetype vmclusterinstancetype
    vmclusterinstancetypes vmcf vmcfs
    virtualmachinepreferences virtualmachinepreference vmpref vmprefs vmp vmps
    virtualmachineclusterpreferences virtualmachineclusterpreference vmcp vmcps
    migrationpolicies migrationpolicy
    virtualmachineclones virtualmachineclone vmclone vmclones
    plugins plugin
""".split()
# CDI (containerized-data-importer), installed with KubeVirt almost everywhere.
CDI_NAMES = """
    cdis cdi cdiconfigs cdiconfig dataimportcrons dataimportcron dic dics
    datasources datasource das datavolumes datavolume dv dvs
    objecttransfers objecttransfer ot ots
    openstackvolumepopulators openstackvolumepopulator osvp osvps
    ovirtvolumepopulators ovirtvolumepopulator ovvp ovvps
    storageprofiles storageprofile volumeclonesources volumeclonesource
    volumeimportsources volumeimportsource volumeuploadsources volumeuploadsource
""".split()
# Kubernetes 1.34, built-in resources served by default (kubectl api-resources).
KUBERNETES_NAMES = """
    bindings binding componentstatuses componentstatus cs configmaps configmap cm
    endpoints ep events event ev limitranges limitrange limits namespaces namespace ns
    nodes node no persistentvolumeclaims persistentvolumeclaim pvc
    persistentvolumes persistentvolume pv pods pod po podtemplates podtemplate
    replicationcontrollers replicationcontroller rc resourcequotas resourcequota quota
    secrets secret serviceaccounts serviceaccount sa services service svc
    mutatingwebhookconfigurations mutatingwebhookconfiguration
    validatingadmissionpolicies validatingadmissionpolicy
    validatingadmissionpolicybindings validatingadmissionpolicybinding
    validatingwebhookconfigurations validatingwebhookconfiguration
    customresourcedefinitions customresourcedefinition crd crds apiservices apiservice
    controllerrevisions controllerrevision daemonsets daemonset ds deployments deployment deploy
    replicasets replicaset rs statefulsets statefulset sts
    selfsubjectreviews selfsubjectreview tokenreviews tokenreview
    localsubjectaccessreviews localsubjectaccessreview selfsubjectaccessreviews
    selfsubjectaccessreview selfsubjectrulesreviews selfsubjectrulesreview
    subjectaccessreviews subjectaccessreview
    horizontalpodautoscalers horizontalpodautoscaler hpa cronjobs cronjob cj jobs job
    certificatesigningrequests certificatesigningrequest csr leases lease
    endpointslices endpointslice flowschemas flowschema
    prioritylevelconfigurations prioritylevelconfiguration
    ingressclasses ingressclass ingresses ingress ing networkpolicies networkpolicy netpol
    ipaddresses ipaddress ip servicecidrs servicecidr runtimeclasses runtimeclass
    poddisruptionbudgets poddisruptionbudget pdb
    clusterrolebindings clusterrolebinding clusterroles clusterrole rolebindings rolebinding
    roles role deviceclasses deviceclass resourceclaims resourceclaim
    resourceclaimtemplates resourceclaimtemplate resourceslices resourceslice
    priorityclasses priorityclass pc csidrivers csidriver csinodes csinode
    csistoragecapacities csistoragecapacity storageclasses storageclass sc
    volumeattachments volumeattachment volumeattributesclasses volumeattributesclass vac
""".split()
KNOWN_NAMES = {"KubeVirt": set(KUBEVIRT_NAMES), "CDI": set(CDI_NAMES),
               "Kubernetes": set(KUBERNETES_NAMES)}


def crd_name_collisions(names):
    """Problems with a CRD's spec.names: a category that is also a resource name,
    singular or short name (KubeVirt's, CDI's, Kubernetes' or the CRD's own), or a
    name of the CRD that one of those already uses."""
    own = [names.get("plural"), names.get("singular")] + list(names.get("shortNames") or [])
    own = [n for n in own if n]
    problems = []
    for cat in names.get("categories") or []:
        for who, known in KNOWN_NAMES.items():
            if cat in known:
                problems.append(f"category {cat!r} is a {who} resource name: kubectl expands it"
                                f" first, so `kubectl get {cat}` would list {names.get('plural')}")
        if cat in own:
            problems.append(f"category {cat!r} equals one of the CRD's own names")
    for n in own:
        for who, known in KNOWN_NAMES.items():
            if n in known:
                problems.append(f"name {n!r} is already a {who} resource name")
    return problems


# --- Kubernetes API calls in the C++ sources vs the RBAC rules -----------------
# Source directories and the component whose binary they end up in. A directory
# shared by both binaries counts for both. kube/ is the client layer: the calls
# its own files make (leader election, Events, TokenReview, the leader's
# endpoint) are pdc-extender's until pdc-node links them.
API_SOURCE_DIRS = {"extender": ["pdc-extender"], "driver": ["pdc-node"], "kube": ["pdc-extender"],
                   "common": ["pdc-extender", "pdc-node"], "model": ["pdc-extender", "pdc-node"],
                   "allocator": ["pdc-extender", "pdc-node"],
                   "config": ["pdc-extender", "pdc-node"], "api": ["pdc-extender", "pdc-node"]}
# A subdirectory whose calls only one mode of a component makes: driver/dra/
# runs only for device classes in `dra` mode, whose RBAC components/dra adds.
API_SOURCE_SUBDIRS = {"driver/dra": ["pdc-node (dra)"]}
HTTP_VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch",
              "DELETE": "delete"}


def components_of(rel):
    """The components whose binary the source `rel` ends up in."""
    for d, comps in API_SOURCE_SUBDIRS.items():
        if rel.startswith(d + "/"):
            return comps
    return API_SOURCE_DIRS.get(rel.split("/")[0], ["pdc-extender", "pdc-node"])


def cxx_strip(text):
    """(code, literals): code with comments blanked (newlines kept) and every
    string literal replaced by a placeholder "\x00N\x00" of the same line count;
    literals[N] = (value, offset in code)."""
    out, lits, i, n = [], [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not text[i - 1].isalnum()):
            k = text.find("(", i)
            delim = text[i + 2:k]
            j = text.find(")" + delim + '"', k)
            lits.append((text[k + 1:j], len("".join(out))))
            out.append(f'"\x00{len(lits) - 1}\x00"' + "\n" * text.count("\n", i, j))
            i = j + len(delim) + 2
        elif c == '"':
            j, val = i + 1, []
            while j < n and text[j] != '"':
                if text[j] == "\\":
                    val.append(text[j:j + 2])
                    j += 2
                else:
                    val.append(text[j])
                    j += 1
            lits.append(("".join(val), len("".join(out))))
            out.append(f'"\x00{len(lits) - 1}\x00"')
            i = j + 1
        elif c == "'":
            j = i + 1
            while j < n and text[j] != "'":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out), lits


LIT = re.compile(r'"\x00(\d+)\x00"')


def _balanced(code, start):
    """Index just past the parenthesis that closes the one at code[start]."""
    depth = 0
    for i in range(start, len(code)):
        if code[i] == "(":
            depth += 1
        elif code[i] == ")":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(code)


def _split_args(s):
    args, depth, cur = [], 0, []
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            args.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        args.append("".join(cur).strip())
    return args


# `Name(...) [const] { return <expr>; }`: a function that may return a path.
HELPER_DEF = r"\b(\w+)\s*\([^()]*\)\s*(?:const\s*)?\{\s*return\s+([^;]*);\s*\}"


def _resolve(expr, helpers, lit_value):
    """The path template `expr` builds ("{}" for values), or None."""
    expr = expr.strip()
    m = LIT.fullmatch(expr)
    if m:
        return lit_value[int(m.group(1))]
    m = re.fullmatch(r"(?:absl::)?StrCat\s*\((.*)\)", expr, re.S)
    if m:
        parts = []
        for a in _split_args(m.group(1)):
            r = _resolve(a, helpers, lit_value)
            parts.append("{}" if r is None else r)
        return "".join(parts)
    m = re.fullmatch(r"(?:\w+::)*(\w+)\s*\(.*\)", expr, re.S)
    if m and m.group(1) in helpers:
        return helpers[m.group(1)]
    return None


def kube_api_calls(repo, sources=None):
    """(calls, problems). calls: [(component, METHOD, path template, where)] for
    every Kubernetes API request in the C++ sources, found as
    `Call("METHOD", <path>, ...)` where <path> is a string literal, a StrCat of
    literals and values, or a function that returns such a StrCat, and every
    `Reflected("<path>")` (a collection a Reflector lists and watches). problems: API
    path literals ("/api/...", "/apis/...") the extraction cannot attribute to
    such a call (so a new kind of call fails the check instead of escaping it).
    `sources` (for the self-test): {relative path: text} instead of the tree."""
    if sources is None:
        sources = {}
        for d in API_SOURCE_DIRS:
            for path in sorted(glob.glob(os.path.join(repo, d, "**", "*"), recursive=True)):
                if path.endswith((".cc", ".h")):
                    with open(path) as f:
                        sources[os.path.relpath(path, repo)] = f.read()
    calls, problems = [], []
    # Path helpers of every file first: a call may use one defined elsewhere
    # (api::ClaimObjectPath in api/claim_object.cc).
    global_helpers = {}
    for _ in range(2):  # A helper may build on one of a later file.
        for rel, text in sorted(sources.items()):
            code, lits = cxx_strip(text)
            lit_value = {i: v for i, (v, _) in enumerate(lits)}
            for m in re.finditer(HELPER_DEF, code):
                r = _resolve(m.group(2), global_helpers, lit_value)
                if r is not None and r.startswith(("/api/", "/apis/")):
                    global_helpers[m.group(1)] = r
    for rel, text in sorted(sources.items()):
        code, lits = cxx_strip(text)
        lit_value = {i: v for i, (v, _) in enumerate(lits)}
        line_of = lambda off: code.count("\n", 0, off) + 1  # noqa: E731
        components = components_of(rel)

        def resolve(expr, helpers):
            return _resolve(expr, helpers, lit_value)

        # Functions that return a path: `Name(...) [const] { return <expr>; }`.
        helpers, helper_spans = dict(global_helpers), []
        for m in re.finditer(HELPER_DEF, code):
            r = resolve(m.group(2), helpers)
            if r is not None and r.startswith(("/api/", "/apis/")):
                helpers[m.group(1)] = r
                helper_spans.append((m.start(), m.end()))
        call_spans = []
        # Collections read with one list (no watch): `Listed(<path>)`.
        for m in re.finditer(r"\bListed\s*\(", code):
            end = _balanced(code, m.end() - 1)
            args = _split_args(code[m.end():end - 1])
            path = resolve(args[0], helpers) if args else None
            if path is None or not path.startswith(("/api/", "/apis/")):
                continue
            call_spans.append((m.start(), end))
            for comp in components:
                calls.append((comp, "GET", path, f"{rel}:{line_of(m.start())}"))
        # Collections a Reflector lists and watches: `Reflected("<path>")`.
        for m in re.finditer(r"\bReflected\s*\(", code):
            end = _balanced(code, m.end() - 1)
            args = _split_args(code[m.end():end - 1])
            path = resolve(args[0], helpers) if args else None
            if path is None or not path.startswith(("/api/", "/apis/")):
                continue
            where = f"{rel}:{line_of(m.start())}"
            call_spans.append((m.start(), end))
            for comp in components:
                calls.append((comp, "GET", path, where))
                calls.append((comp, "GET", path + "?watch=1", where))
        for m in re.finditer(r"\bCall\s*\(", code):
            end = _balanced(code, m.end() - 1)
            args = _split_args(code[m.end():end - 1])
            if len(args) < 2:
                continue
            mm = LIT.fullmatch(args[0])
            path = resolve(args[1], helpers)
            if path is None or not path.startswith(("/api/", "/apis/")):
                continue
            where = f"{rel}:{line_of(m.start())}"
            if not mm or lit_value[int(mm.group(1))] not in HTTP_VERBS:
                problems.append(f"{where}: Kubernetes API call with a method that is not a"
                                " literal GET/POST/PUT/PATCH/DELETE")
                continue
            call_spans.append((m.start(), end))
            for comp in components:
                calls.append((comp, lit_value[int(mm.group(1))], path, where))
        covered = helper_spans + call_spans
        for i, (v, off) in enumerate(lits):
            if v.startswith(("/api/", "/apis/")) or v in ("/api", "/apis"):
                if not any(a <= off < b for a, b in covered):
                    problems.append(
                        f"{rel}:{line_of(off)}: Kubernetes API path \"{v}\" is not used through"
                        " Call(\"METHOD\", path, ...): check_manifests.py cannot tell which verb"
                        " the code needs; route it through Call or teach kube_api_calls")
        for name in helpers:
            for m in re.finditer(r"\b" + name + r"\s*\(", code):
                # A declaration (`std::string Name(args);`) builds nothing.
                after = code[_balanced(code, m.end() - 1):].lstrip()
                if after.startswith(";") and re.search(r"[\w>]\s+$", code[:m.start()]):
                    continue
                if not any(a <= m.start() < b for a, b in covered):
                    problems.append(f"{rel}:{line_of(m.start())}: {name}() builds a Kubernetes API"
                                    " path outside Call(...): its verb cannot be checked")
    return calls, problems


# An ownerReference with blockOwnerDeletion: true is admitted only when the
# writer may update the owner's finalizers subresource
# (OwnerReferencesPermissionEnforcement, plugin/pkg/admission/gc/gc_admission.go
# in kubernetes/kubernetes; on by default on OpenShift). The owners the code may
# name are its `OwnerReference{"<group>/<version>", "<Kind>", ...}` literals;
# KubeVirt's kinds pluralise as lower case + "s".
OWNER_REF = re.compile(r'OwnerReference\{\s*"\x00(\d+)\x00"\s*,\s*"\x00(\d+)\x00"')


def owner_finalizer_calls(repo, sources=None):
    """[(component, "PUT", path of the owner's finalizers, where)]: what setting
    blockOwnerDeletion needs, for every owner kind the component's code names,
    when some source of the component writes blockOwnerDeletion true."""
    if sources is None:
        sources = {}
        for d in API_SOURCE_DIRS:
            for path in sorted(glob.glob(os.path.join(repo, d, "**", "*"), recursive=True)):
                if path.endswith((".cc", ".h")):
                    with open(path) as f:
                        sources[os.path.relpath(path, repo)] = f.read()
    blocks, owners = set(), {}
    for rel, text in sorted(sources.items()):
        code, lits = cxx_strip(text)
        comps = components_of(rel)
        values = [v for v, _ in lits]
        for i, v in enumerate(values):
            if v == "blockOwnerDeletion":
                after = code[lits[i][1]:lits[i][1] + 200]
                if re.search(r"Bool\(\s*true\s*\)", after.split(";", 2)[1] if ";" in after else ""):
                    blocks.update(comps)
        for m in OWNER_REF.finditer(code):
            group_version, kind = values[int(m.group(1))], values[int(m.group(2))]
            where = f"{rel}:{code.count(chr(10), 0, m.start()) + 1}"
            for comp in comps:
                owners.setdefault(comp, {})[(group_version, kind)] = where
    calls = []
    for comp in sorted(blocks):
        for (gv, kind), where in sorted(owners.get(comp, {}).items()):
            calls.append((comp, "PUT", f"/apis/{gv}/namespaces/x/{kind.lower()}s/x/finalizers",
                          where + " (blockOwnerDeletion)"))
    return calls


def rbac_permission(method, path):
    """(apiGroup, resource[/subresource], verb) that a request needs."""
    path, _, query = path.partition("?")
    parts = [p for p in path.split("/") if p]
    if parts[0] == "api":
        group, rest = "", parts[2:]
    else:
        group, rest = parts[1], parts[3:]
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]
    resource = rest[0]
    named = len(rest) >= 2
    if len(rest) >= 3:
        resource += "/" + rest[2]
    verb = HTTP_VERBS[method]
    if method == "GET" and not named:
        verb = "watch" if "watch=" in query else "list"
    if method == "DELETE" and not named:
        verb = "deletecollection"
    return group, resource, verb


def granted_permissions(objs, sa_namespace, sa_name):
    """(apiGroup, resource, verb) triples the rendered roles grant a ServiceAccount,
    and problems (wildcards, resourceNames, missing roles)."""
    roles = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o
             for o in objs if o["kind"] in ("Role", "ClusterRole")}
    perms, problems = set(), []
    for b in objs:
        if b["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(s.get("kind") == "ServiceAccount" and s.get("name") == sa_name and
                   s.get("namespace") == sa_namespace for s in b.get("subjects", [])):
            continue
        ref = b["roleRef"]
        ns = b["metadata"].get("namespace") if ref["kind"] == "Role" else None
        role = roles.get((ref["kind"], ns, ref["name"]))
        if role is None:
            problems.append(f"{b['kind']}/{b['metadata']['name']} binds {sa_name} to"
                            f" {ref['kind']}/{ref['name']}, which is not in the manifests")
            continue
        for r in role.get("rules", []):
            if r.get("resourceNames"):
                problems.append(f"{ref['name']}: resourceNames rules are not expected for {sa_name}")
            for g in r.get("apiGroups", []):
                for res in r.get("resources", []):
                    for v in r.get("verbs", []):
                        if "*" in (g, res, v):
                            problems.append(f"{ref['name']}: wildcard in {r}")
                        perms.add((g, res, v))
    return perms, problems


# Permissions kube-apiserver checks besides the one of the request itself:
# from Kubernetes 1.36 (DRAResourceClaimGranularStatusAuthorization, beta and
# on), a write of a ResourceClaim's status.reservedFor is also authorized as
# the same verb on resourceclaims/binding
# (pkg/registry/resource/resourceclaim/strategy.go in kubernetes/kubernetes).
IMPLIED_PERMISSIONS = {
    ("resource.k8s.io", "resourceclaims/status", "update"):
        [("resource.k8s.io", "resourceclaims/binding", "update")],
    ("resource.k8s.io", "resourceclaims/status", "patch"):
        [("resource.k8s.io", "resourceclaims/binding", "patch")],
}


def implied_calls(calls):
    """The (component, method, path, where) of IMPLIED_PERMISSIONS, as pseudo
    calls whose rbac_permission is the implied one."""
    out = []
    for comp, method, path, where in calls:
        for group, resource, verb in IMPLIED_PERMISSIONS.get(rbac_permission(method, path), []):
            base, sub = resource.split("/")
            method2 = next(m for m, v in HTTP_VERBS.items() if v == verb)
            out.append((comp, method2, f"/apis/{group}/v1/namespaces/x/{base}/x/{sub}",
                        f"{where} (implied: {resource} {verb})"))
    return out


def check_rbac_matches_code(repo, objs, dra_objs=None):
    """The base's RBAC grants exactly the calls of the code outside
    API_SOURCE_SUBDIRS; with components/dra rendered in (`dra_objs`),
    pdc-node's grants are exactly its calls including driver/dra/'s."""
    calls, problems = kube_api_calls(repo)
    calls = calls + owner_finalizer_calls(repo)
    calls = calls + implied_calls(calls)
    for p in problems:
        check(False, p)
    check(any(c[0] == "pdc-extender" for c in calls),
          "found no Kubernetes API call of pdc-extender in the sources: is kube_api_calls broken?")
    check(any(c[0] == "pdc-node (dra)" for c in calls),
          "found no Kubernetes API call in driver/dra/: is kube_api_calls broken?")
    checks = [("pdc-extender", "pdc-extender", {"pdc-extender"}, objs, "base"),
              ("pdc-node", "pdc-node", {"pdc-node"}, objs, "base")]
    if dra_objs is not None:
        checks.append(("pdc-node (dra)", "pdc-node", {"pdc-node", "pdc-node (dra)"}, dra_objs,
                       "base + components/dra"))
    for comp, sa, comps, rendered, what in checks:
        needed = {}
        for c, method, path, where in calls:
            if c in comps:
                needed.setdefault(rbac_permission(method, path), []).append(
                    f"{method} {path} ({where})")
        granted, gp = granted_permissions(rendered, "pdc-system", sa)
        for p in gp:
            check(False, p)
        for perm in sorted(set(needed) - granted):
            check(False, f"{what}: {comp} calls {', '.join(needed[perm])} but its RBAC does not"
                  f" grant {perm[2]} on {perm[1] if not perm[0] else perm[1] + '.' + perm[0]}")
        for perm in sorted(granted - set(needed)):
            check(False, f"{what}: {sa}'s RBAC grants {perm[2]} on "
                  f"{perm[1] if not perm[0] else perm[1] + '.' + perm[0]}, which no code of"
                  f" {comp} uses")
    return calls


def tls_problems(pdc, ksc):
    """The TLS settings of pdc-extender, pdc-node and kube-scheduler's extender
    stanza must agree, and avoid the extender client's two traps: an http://
    urlPrefix stays plain HTTP whatever enableHTTPS says, and enableHTTPS
    without caFile/caData verifies nothing."""
    problems = []
    ext_tls = (pdc.get("extender") or {}).get("tls") or {}
    node = pdc.get("node") or {}
    serving = bool(ext_tls.get("certFile"))
    for e in ksc.get("extenders", []):
        tls = e.get("tlsConfig") or {}
        https_url = str(e.get("urlPrefix", "")).startswith("https://")
        if e.get("enableHTTPS") and not https_url:
            problems.append("enableHTTPS: true with an http:// urlPrefix: the calls stay plain"
                            " HTTP")
        if https_url and not e.get("enableHTTPS"):
            problems.append("https:// urlPrefix without enableHTTPS: true")
        if e.get("enableHTTPS") and not (tls.get("caFile") or tls.get("caData")):
            problems.append("enableHTTPS without tlsConfig.caFile/caData: kube-scheduler then"
                            " skips verifying the extender's certificate")
        if tls.get("insecure"):
            problems.append("tlsConfig.insecure: true")
        if https_url != serving:
            problems.append(f"urlPrefix {e.get('urlPrefix')} but extender.tls.certFile is "
                            f"{'set' if serving else 'empty'}")
        if ext_tls.get("clientCAFile") and not (tls.get("certFile") or tls.get("certData")):
            problems.append("extender.tls.clientCAFile requires a client certificate, but the"
                            " scheduler's tlsConfig has none")
    node_https = str(node.get("extenderURL", "")).startswith("https://")
    if node_https != serving:
        problems.append(f"node.extenderURL {node.get('extenderURL')} but extender.tls.certFile"
                        f" is {'set' if serving else 'empty'}")
    if node_https and not (node.get("tls") or {}).get("caFile"):
        problems.append("https node.extenderURL without node.tls.caFile")
    return problems


def check_kubelet_components(kubectl, repo, base_objs):
    """Each kubelet root dir component moves only the device plugin hostPath, and
    the component names listed in kustomization.yaml exist."""
    deploy = os.path.join(repo, "deploy")
    with open(os.path.join(deploy, "kustomization.yaml")) as f:
        listed = re.findall(r"^#\s+-\s+(components/\S+)", f.read(), re.M)
    found = sorted(os.path.relpath(d, deploy) for d in
                   glob.glob(os.path.join(deploy, "components", "*")) if os.path.isdir(d))
    check(sorted(listed) == found and found,
          f"kustomization.yaml lists components {listed}, deploy/components has {found}")
    want = {"components/kubelet-k0s": "/var/lib/k0s/kubelet",
            "components/kubelet-microk8s": "/var/snap/microk8s/common/var/lib/kubelet"}
    check(set(want) == {f for f in found if f.startswith("components/kubelet-")},
          f"kubelet components: {found}")

    def node_ds(objs):
        d = [o for o in objs if o["kind"] == "DaemonSet" and o["metadata"]["name"] == "pdc-node"]
        if not d:
            return None
        d = json.loads(json.dumps(d[0]))
        d["spec"]["template"]["spec"]["volumes"].sort(key=lambda v: v["name"])
        return d

    base = node_ds(base_objs)
    with tempfile.TemporaryDirectory() as tmp:
        for comp, path in sorted(want.items()):
            rel = os.path.relpath(deploy, tmp)
            with open(os.path.join(tmp, "kustomization.yaml"), "w") as f:
                yaml.safe_dump({"apiVersion": "kustomize.config.k8s.io/v1beta1",
                                "kind": "Kustomization", "resources": [rel],
                                "components": [f"{rel}/{comp}"]}, f)
            objs = kustomize(kubectl, tmp, f"an overlay with {comp}")
            got = node_ds(objs)
            if not check(got and base, f"{comp}: no DaemonSet pdc-node rendered"):
                continue
            vols = {v["name"]: v for v in got["spec"]["template"]["spec"]["volumes"]}
            # Every kubelet directory pdc-node mounts moves with the root.
            for sub in ("device-plugins", "pod-resources"):
                check(vols.get(sub, {}).get("hostPath", {}).get("path") == f"{path}/{sub}",
                      f"{comp}: {sub} hostPath should be {path}/{sub}")
                if sub in vols:
                    vols[sub]["hostPath"]["path"] = f"/var/lib/kubelet/{sub}"
            check(got == base, f"{comp} changes more than the kubelet hostPaths")
            check(len(objs) == len(base_objs), f"{comp}: object count changed")


def dra_code_paths(repo):
    """The DRA driver's names and paths as the code has them: the string
    constants of driver/dra/names.h, and the kubelet subdirectories
    driver/main.cc derives from node.kubeletDir."""
    with open(os.path.join(repo, "driver", "dra", "names.h")) as f:
        names = dict(re.findall(r'inline constexpr std::string_view (k\w+)\s*=\s*"([^"]*)"',
                                f.read()))
    with open(os.path.join(repo, "driver", "main.cc")) as f:
        subdirs = re.findall(r'nc\.kubelet_dir \+ "(/[^"]+)"', f.read())
    check(len(subdirs) == 2, f"driver/main.cc: want the registry and plugins subdirectories of"
          f" node.kubeletDir, found {subdirs}")
    for k in ("kDefaultDriverName", "kDefaultRegistryDir", "kDefaultPluginsDir",
              "kDefaultCdiDir", "kDefaultMetadataHostDir"):
        check(k in names, f"driver/dra/names.h: no constant {k}")
    return names, (subdirs + ["", ""])[:2]


def dra_node_paths(repo, node, driver):
    """{host path pdc-node must see at the same path: what it is} for one DRA
    driver, from the `node:` section (defaults: config/pdc.example.yaml,
    which must agree with the code's constants)."""
    names, (registry_sub, plugins_sub) = dra_code_paths(repo)
    with open(os.path.join(repo, "config", "pdc.example.yaml")) as f:
        example = yaml.safe_load(f)["node"]
    check(example.get("kubeletDir", "") + registry_sub == names.get("kDefaultRegistryDir") and
          example.get("kubeletDir", "") + plugins_sub == names.get("kDefaultPluginsDir") and
          example.get("cdiDir") == names.get("kDefaultCdiDir") and
          example.get("draMetadataDir") == names.get("kDefaultMetadataHostDir"),
          "config/pdc.example.yaml node.kubeletDir/cdiDir/draMetadataDir differ from the"
          " defaults of driver/dra/names.h and driver/main.cc")
    kubelet = node.get("kubeletDir", example.get("kubeletDir"))
    return {kubelet + registry_sub: "kubelet's plugin registry",
            f"{kubelet}{plugins_sub}/{driver}": f"the service socket directory of {driver}",
            node.get("cdiDir", example.get("cdiDir")): "the CDI specs",
            node.get("draMetadataDir", example.get("draMetadataDir")):
                "the device-metadata files"}


def dra_classes(pdc, repo):
    """[(resourceName, driver name)] of the classes in `mode: dra`."""
    default = dra_code_paths(repo)[0].get("kDefaultDriverName")
    return [(c["resourceName"], c.get("draDriverName", default))
            for c in pdc.get("deviceClasses", []) if c.get("mode") == "dra"]


def check_dra_objects(repo, objs, what):
    """What DRA mode needs, for any rendering (kustomize or Helm) whose
    configuration has a class in `mode: dra`: a DeviceClass per driver
    selecting exactly that driver, the DaemonSet's host paths at the paths the
    code uses, an API token, the ResourceSlice admission policy. Returns the
    configuration's DRA classes."""
    cms = [o for o in objs if o["kind"] == "ConfigMap" and
           o["metadata"]["name"].startswith("pdc-config-")]
    if not check(len(cms) == 1, f"{what}: one pdc-config-* ConfigMap"):
        return []
    pdc = yaml.safe_load(cms[0]["data"]["pdc.yaml"])
    classes = dra_classes(pdc, repo)
    check(classes, f"{what}: no device class in mode dra")
    drivers = [d for _, d in classes]
    check(len(set(drivers)) == len(drivers), f"{what}: one driver name per class: {drivers}")
    got = {o["metadata"]["name"]: o for o in objs if o["kind"] == "DeviceClass"}
    check(sorted(got) == sorted(drivers),
          f"{what}: DeviceClasses {sorted(got)}, want one per DRA driver {sorted(drivers)}")
    for d in drivers:
        dc = got.get(d)
        if dc:
            check(dc["apiVersion"] == "resource.k8s.io/v1" and dc["spec"] == {
                "selectors": [{"cel": {"expression": f'device.driver == "{d}"'}}]},
                f"{what}: DeviceClass {d} must select exactly the devices of driver {d}:"
                f" {dc.get('spec')}")
    ds = [o for o in objs if o["kind"] == "DaemonSet" and o["metadata"]["name"] == "pdc-node"]
    if not check(ds, f"{what}: DaemonSet pdc-node"):
        return classes
    spec = ds[0]["spec"]["template"]["spec"]
    c = spec["containers"][0]
    node = pdc.get("node", {})
    check(spec.get("automountServiceAccountToken") is True and not node.get("kubeconfig"),
          f"{what}: pdc-node in DRA mode reads the API in-cluster: its pod mounts the"
          " service-account token (automountServiceAccountToken: true, node.kubeconfig \"\")")
    hostpaths = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    for d in drivers:
        for path, why in dra_node_paths(repo, node, d).items():
            vols = [n for n, h in hostpaths.items() if h == path]
            check(vols and mounts.get(vols[0]) == path,
                  f"{what}: pdc-node needs hostPath {path} ({why}) mounted at the same path: the"
                  " kubelet or the container runtime reads the paths pdc-node writes there")
    # The admission policy: pdc-node's service account writes only its own
    # node's slices.
    sa = f"system:serviceaccount:{ds[0]['metadata']['namespace']}:{spec['serviceAccountName']}"
    vaps = [o for o in objs if o["kind"] == "ValidatingAdmissionPolicy" and any(
        r.get("resources") == ["resourceslices"]
        for r in o["spec"]["matchConstraints"].get("resourceRules", []))]
    if check(len(vaps) == 1, f"{what}: one ValidatingAdmissionPolicy on resourceslices"):
        v = vaps[0]["spec"]
        rule = v["matchConstraints"]["resourceRules"][0]
        check(rule.get("apiGroups") == ["resource.k8s.io"] and
              set(rule.get("operations", [])) == {"CREATE", "UPDATE", "DELETE"} and
              v.get("failurePolicy") == "Fail",
              f"{what}: the slice policy covers CREATE, UPDATE and DELETE and fails closed")
        conds = [m["expression"] for m in v.get("matchConditions", [])]
        check(conds == [f'request.userInfo.username == "{sa}"'],
              f"{what}: the slice policy applies to {sa} only: {conds}")
        exprs = " ".join(x["expression"] for x in v.get("variables", []) + v.get("validations", []))
        check("authentication.kubernetes.io/node-name" in exprs and "object).spec.?nodeName" in exprs and
              "oldObject.spec.?nodeName" in exprs,
              f"{what}: the slice policy compares spec.nodeName (old and new) with the token's"
              " node-name")
        binds = [o for o in objs if o["kind"] == "ValidatingAdmissionPolicyBinding" and
                 o["spec"].get("policyName") == vaps[0]["metadata"]["name"]]
        check(len(binds) == 1 and binds[0]["spec"].get("validationActions") == ["Deny"] and
              "matchResources" not in binds[0]["spec"],
              f"{what}: the slice policy is bound with Deny, for every ResourceSlice")
    return classes


def check_dra_component(kubectl, repo, base_objs):
    """components/dra: opt-in (the base has nothing of resource.k8s.io and no
    API token for pdc-node), and with it the base's objects plus the DRA ones,
    the configuration differing only in the classes' mode. Returns the
    rendered objects (for the RBAC check)."""
    deploy = os.path.join(repo, "deploy")
    check(not [o for o in base_objs if o["apiVersion"].startswith("resource.k8s.io/")],
          "the base must not need resource.k8s.io (DRA objects belong in components/dra)")
    base_ds = [o for o in base_objs if o["kind"] == "DaemonSet"]
    check(base_ds and base_ds[0]["spec"]["template"]["spec"].get(
        "automountServiceAccountToken") is False,
          "base: pdc-node mounts no API token (it needs none on the device plugin path)")
    with tempfile.TemporaryDirectory() as tmp:
        rel = os.path.relpath(deploy, tmp)
        with open(os.path.join(tmp, "kustomization.yaml"), "w") as f:
            yaml.safe_dump({"apiVersion": "kustomize.config.k8s.io/v1beta1",
                            "kind": "Kustomization", "resources": [rel],
                            "components": [f"{rel}/components/dra"]}, f)
        objs = kustomize(kubectl, tmp, "an overlay with components/dra")
    if not objs:
        return None
    check_dra_objects(repo, objs, "base + components/dra")

    # The configuration: the base's, with mode/draDriverName on classes.
    def config_of(o):
        cm = [x for x in o if x["kind"] == "ConfigMap" and
              x["metadata"]["name"].startswith("pdc-config-")]
        return yaml.safe_load(cm[0]["data"]["pdc.yaml"]) if cm else {}
    base_pdc, dra_pdc = config_of(base_objs), config_of(objs)
    stripped = json.loads(json.dumps(dra_pdc))
    for c in stripped.get("deviceClasses", []):
        c.pop("mode", None)
        c.pop("draDriverName", None)
    check(stripped == base_pdc, "components/dra/pdc.yaml must be deploy/config/pdc.yaml with"
          " only deviceClasses[].mode and draDriverName added")

    # Nothing else changes: the same objects but the DRA ones, the DaemonSet
    # only in its token and DRA volumes, the ConfigMap only in its content.
    def key(o):
        name = o["metadata"]["name"]
        if o["kind"] == "ConfigMap":
            name = re.sub(r"-[a-z0-9]{10}$", "", name)
        return (o["kind"], o["metadata"].get("namespace", ""), name)
    b = {key(o): o for o in base_objs}
    d = {key(o): o for o in objs}
    added = sorted(set(d) - set(b))
    check(set(b) <= set(d), f"components/dra drops {sorted(set(b) - set(d))}")
    check([k[0] for k in added] == ["ClusterRole", "ClusterRoleBinding", "DeviceClass",
                                    "ValidatingAdmissionPolicy",
                                    "ValidatingAdmissionPolicyBinding"],
          f"components/dra adds {added}")
    dra_vols = {n for n, in [(v["name"],) for v in
                base_ds[0]["spec"]["template"]["spec"]["volumes"]]} if base_ds else set()
    for k in sorted(set(b) & set(d)):
        x, y = json.loads(json.dumps(b[k])), json.loads(json.dumps(d[k]))
        if k[0] == "ConfigMap":
            continue
        for o in (x, y):  # pods name the generated ConfigMap with its hash
            for v in o.get("spec", {}).get("template", {}).get("spec", {}).get("volumes", []):
                if "configMap" in v:
                    v["configMap"]["name"] = re.sub(r"-[a-z0-9]{10}$", "",
                                                    v["configMap"]["name"])
        if k[0] == "DaemonSet":
            ys = y["spec"]["template"]["spec"]
            ys["volumes"] = [v for v in ys["volumes"] if v["name"] in dra_vols]
            for c in ys["containers"]:
                c["volumeMounts"] = [m for m in c["volumeMounts"] if m["name"] in dra_vols]
            ys["automountServiceAccountToken"] = False
        check(x == y, f"components/dra changes {'/'.join(p for p in k if p)} beyond DRA mode")
    return objs


def oldest_kubernetes_minor(repo):
    """N of "Kubernetes 1.N or later" in deploy/README.md's prerequisites."""
    with open(os.path.join(repo, "deploy", "README.md")) as f:
        m = re.search(r"Kubernetes 1\.(\d+) or later", f.read())
    check(m, "deploy/README.md states the oldest supported Kubernetes ('Kubernetes 1.N or later')")
    return int(m.group(1)) if m else None


def check_scheduler_version(repo, dep):
    """kube-scheduler may not be newer than kube-apiserver: the default tag is the
    oldest supported minor."""
    oldest = oldest_kubernetes_minor(repo)
    if not dep or oldest is None:
        return
    image = dep["spec"]["template"]["spec"]["containers"][0]["image"]
    t = re.fullmatch(r"registry\.k8s\.io/kube-scheduler:v1\.(\d+)\.(\d+)", image)
    check(t and int(t.group(1)) == oldest,
          f"pdc-scheduler image {image}: kube-scheduler must not be newer than kube-apiserver;"
          f" default to the oldest supported minor v1.{oldest}.x")


def self_test_checks():
    """The checks above must catch what they are for (run on synthetic input)."""
    bad = crd_name_collisions({"plural": "persistentdeviceclaims", "singular": "x",
                               "shortNames": ["pdc"], "categories": ["kubevirt", "pdc", "vm"]})
    check(len(bad) == 3, f"self-test: category collisions not all found: {bad}")
    check(crd_name_collisions({"plural": "a", "shortNames": ["dv"]}),
          "self-test: a short name taken by CDI must be reported")
    src = {"extender/x.cc": (
        '// GET "/api/v1/nodes" in a comment is ignored\n'
        'static std::string P(std::string_view n) { return absl::StrCat("/api/v1/namespaces/",'
        ' n, "/pods/", n); }\n'
        'void A() { Call("GET", P(a, b), "", "", w); Call("POST", absl::StrCat(P(a, b),'
        ' "/binding"), body, "application/json", w); }\n'
        'void B() { client->Do("GET", "/apis/apps/v1/deployments", {}, o); }\n')}
    calls, problems = kube_api_calls(None, src)
    got = sorted(rbac_permission(m, p) for _, m, p, _ in calls)
    check(got == [("", "pods", "get"), ("", "pods/binding", "create")],
          f"self-test: extracted {got}")
    check(len(problems) == 1 and "/apis/apps/v1/deployments" in problems[0],
          f"self-test: an API path outside Call() must be reported: {problems}")
    check(rbac_permission("GET", "/apis/kubevirt.io/v1/namespaces/{}/virtualmachines?watch=1")
          == ("kubevirt.io", "virtualmachines", "watch"), "self-test: watch of a group resource")
    owned = {"extender/x.cc": (
        'auto o = api::OwnerReference{"kubevirt.io/v1", "VirtualMachine", n, u, true};\n'),
        "api/y.cc": ('void W() { Key(w, "blockOwnerDeletion");\n  w.Bool(true);\n}\n')}
    got = sorted(rbac_permission(m, p) for _, m, p, _ in owner_finalizer_calls(None, owned))
    check(got == [("kubevirt.io", "virtualmachines/finalizers", "update")],
          f"self-test: blockOwnerDeletion needs update on the owner's finalizers: {got}")
    owned["api/y.cc"] = 'void W() { Key(w, "blockOwnerDeletion");\n  w.Bool(false);\n}\n'
    check(owner_finalizer_calls(None, owned) == [],
          "self-test: blockOwnerDeletion false needs nothing")
    plain = {"extender": {"tls": {}}, "node": {"extenderURL": "http://x:1"}}
    trap1 = {"extenders": [{"urlPrefix": "http://x:1/s", "enableHTTPS": True,
                            "tlsConfig": {"caFile": "/ca"}}]}
    trap2 = {"extenders": [{"urlPrefix": "https://x:1/s", "enableHTTPS": True}]}
    check(any("plain HTTP" in p for p in tls_problems(plain, trap1)),
          "self-test: enableHTTPS with an http:// urlPrefix must be reported")
    tls_on = {"extender": {"tls": {"certFile": "/c", "keyFile": "/k"}},
              "node": {"extenderURL": "https://x:1", "tls": {"caFile": "/ca"}}}
    check([p for p in tls_problems(tls_on, trap2) if "skips verifying" in p],
          "self-test: enableHTTPS without a CA must be reported")
    check(tls_problems(tls_on, {"extenders": [{"urlPrefix": "https://x:1/s", "enableHTTPS": True,
                                               "tlsConfig": {"caFile": "/ca"}}]}) == [],
          "self-test: a consistent TLS setup passes")


def flatten_keys(obj, prefix=""):
    """Dotted paths of every leaf key of a YAML mapping (lists are leaves)."""
    out = set()
    for k, v in obj.items():
        p = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out |= flatten_keys(v, p + ".")
        else:
            out.add(p)
    return out


def metric_names_in_code(repo):
    """Metric names registered by pdc-extender and pdc-node, from the source."""
    names = set()
    for rel in ("extender/extender_metrics.cc", "extender/extender_app.cc", "driver/node_metrics.cc"):
        path = os.path.join(repo, rel)
        if check(os.path.exists(path), f"{rel} is missing: cannot check metric names"):
            with open(path) as f:
                names |= set(re.findall(r'"(pdc_[a-z0-9_]+)"', f.read()))
    return names


HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def metric_names_in_promql(expr):
    """pdc_* metric names an expression selects (label values are skipped)."""
    no_strings = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    return set(re.findall(r'\b(pdc_[a-z0-9_]+)\b', no_strings))


def base_metric(name, known):
    if name in known:
        return name
    for s in HISTOGRAM_SUFFIXES:
        if name.endswith(s) and name[: -len(s)] in known:
            return name[: -len(s)]
    return None


def render_prometheusrule(rules):
    class Literal(str):
        pass

    class Dumper(yaml.SafeDumper):
        pass

    Dumper.add_representer(
        Literal, lambda d, s: d.represent_scalar("tag:yaml.org,2002:str", s, style="|"))

    def literalize(o):
        if isinstance(o, dict):
            return {k: literalize(v) for k, v in o.items()}
        if isinstance(o, list):
            return [literalize(v) for v in o]
        if isinstance(o, str) and "\n" in o:
            return Literal(o)
        return o

    cr = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
          "metadata": {"name": "pdc", "namespace": "pdc-system",
                       "labels": {"app.kubernetes.io/part-of": "pdc"}},
          "spec": literalize(rules)}
    header = ("# The alert rules of pdc-rules.yaml as a prometheus-operator PrometheusRule.\n"
              "# Same groups, same expressions: tests/deploy/check_manifests.py fails when\n"
              "# the two differ. Regenerate after editing pdc-rules.yaml:\n"
              "#   python3 tests/deploy/check_manifests.py --write-prometheusrule\n")
    return header + yaml.dump(cr, Dumper=Dumper, sort_keys=False, width=100)


def check_vm_claims_webhook(by_kind, listen_port):
    """The VM-scoped claims webhook fails closed, only for the pods that opted
    in with the label the code reads, on the path the code serves."""
    mwc = by_kind.get("MutatingWebhookConfiguration", {}).get("pdc-vm-claims")
    if not check(mwc, "rendered base lacks MutatingWebhookConfiguration/pdc-vm-claims"):
        return
    hooks = mwc.get("webhooks", [])
    if not check(len(hooks) == 1, "one webhook in pdc-vm-claims"):
        return
    h = hooks[0]
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(repo, "extender/dra/vm_claims.h")) as f:
        label = re.search(r'kPersistentClaimsLabel = "([^"]+)"', f.read()).group(1)
    with open(os.path.join(repo, "extender/vm_claim_webhook.h")) as f:
        path = re.search(r'kVmClaimsWebhookPath = "([^"]+)"', f.read()).group(1)
    check(h.get("failurePolicy") == "Fail", "vm-claims webhook: failurePolicy Fail (fail closed)")
    check(h.get("sideEffects") == "NoneOnDryRun", "vm-claims webhook: sideEffects NoneOnDryRun")
    check(h.get("objectSelector", {}).get("matchLabels") ==
          {"kubevirt.io": "virt-launcher", label: "true"},
          f"vm-claims webhook: objectSelector kubevirt.io=virt-launcher and {label}=true")
    service = h.get("clientConfig", {}).get("service", {})
    check(service.get("path") == path and service.get("port") == listen_port,
          f"vm-claims webhook: clientConfig path {path} on extender.webhook.listen's port")


def check_webhook(by_kind, ext, dep, svc):
    """The mutating webhook, its Service port, listener and certificate mount agree."""
    mwc = by_kind.get("MutatingWebhookConfiguration", {}).get("pdc-pin-vm-pods")
    if not check(mwc, "rendered base lacks MutatingWebhookConfiguration/pdc-pin-vm-pods"):
        return
    hooks = mwc.get("webhooks", [])
    if not check(len(hooks) == 1, "one webhook in pdc-pin-vm-pods"):
        return
    h = hooks[0]
    check(h.get("admissionReviewVersions") == ["v1"], "webhook: admissionReviewVersions [v1]")
    check(h.get("sideEffects") == "None", "webhook: sideEffects None")
    check(h.get("timeoutSeconds") == 2, "webhook: timeoutSeconds 2")
    check(h.get("failurePolicy") == "Ignore", "webhook: failurePolicy Ignore (never blocks a pod)")
    check(h.get("reinvocationPolicy") == "Never", "webhook: reinvocationPolicy Never")
    check(h.get("objectSelector", {}).get("matchLabels") == {"kubevirt.io": "virt-launcher"},
          "webhook: objectSelector kubevirt.io=virt-launcher")
    check([m.get("expression") for m in h.get("matchConditions", [])] ==
          ["object.spec.schedulerName == 'pdc-scheduler'"],
          "webhook: matchConditions on schedulerName pdc-scheduler")
    rules = h.get("rules", [])
    check(len(rules) == 1 and rules[0].get("operations") == ["CREATE"] and
          rules[0].get("resources") == ["pods"] and rules[0].get("apiGroups") == [""],
          "webhook: pod CREATE only")
    wh = ext.get("webhook", {})
    listen_port = int(str(wh.get("listen", ":0")).rsplit(":", 1)[1])
    check_vm_claims_webhook(by_kind, listen_port)
    service = h.get("clientConfig", {}).get("service", {})
    check(service.get("name") == "pdc-extender" and service.get("namespace") == "pdc-system",
          "webhook: clientConfig names the Service pdc-extender")
    if svc:
        ports = {p["name"]: p for p in svc["spec"]["ports"]}
        check(ports.get("webhook", {}).get("port") == service.get("port") == listen_port,
              "webhook: Service port webhook = clientConfig port = extender.webhook.listen")
    if dep:
        c = dep["spec"]["template"]["spec"]["containers"][0]
        check(any(p.get("name") == "webhook" and p.get("containerPort") == listen_port
                  for p in c["ports"]), "webhook: containerPort = extender.webhook.listen")
        mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
        for f in ("certFile", "keyFile"):
            check(mounts.get(os.path.dirname(str(wh.get(f, "")))) == "webhook-tls",
                  f"extender.webhook.{f} lies in the webhook-tls Secret mount")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", default=os.path.abspath(
        os.path.join(os.path.dirname(__file__), "..", "..")))
    ap.add_argument("--kubectl", help="the kubectl of scripts/install-deps.sh "
                    "(REPO/.tools/bin/kubectl)")
    ap.add_argument("--write-prometheusrule", action="store_true")
    args = ap.parse_args()
    repo = args.repo
    deploy = os.path.join(repo, "deploy")

    rules_path = os.path.join(deploy, "prometheus", "pdc-rules.yaml")
    rules = load_yaml_docs(rules_path)[0]
    if args.write_prometheusrule:
        with open(os.path.join(deploy, "prometheus", "prometheusrule.yaml"), "w") as f:
            f.write(render_prometheusrule(rules))
        return 0

    if not require_tool(args.kubectl, "kubectl"):
        return 1
    kubectl = args.kubectl
    self_test_checks()

    # 1. Every YAML and JSON file under deploy/ parses (the Helm chart's
    #    templates are not YAML before rendering: tests/deploy/check_helm.py).
    helm_dir = os.path.join(deploy, "helm") + os.sep
    files = sorted(f for f in glob.glob(os.path.join(deploy, "**", "*.yaml"), recursive=True)
                   if not f.startswith(helm_dir))
    check(len(files) >= 15, f"expected the deploy/ YAML files, found {len(files)}")
    docs_by_file = {}
    for path in files:
        rel = os.path.relpath(path, repo)
        try:
            docs_by_file[rel] = load_yaml_docs(path)
            check(docs_by_file[rel], f"{rel}: no YAML document")
        except yaml.YAMLError as e:
            check(False, f"{rel}: does not parse: {e}")
    for path in sorted(glob.glob(os.path.join(deploy, "**", "*.json"), recursive=True)):
        try:
            with open(path) as f:
                json.load(f)
        except ValueError as e:
            check(False, f"{os.path.relpath(path, repo)}: not JSON: {e}")

    # 2. The kustomize bases render with the real kubectl.
    objs = kustomize(kubectl, deploy, "deploy")
    by_kind = {}
    for o in objs:
        by_kind.setdefault(o["kind"], {})[o["metadata"]["name"]] = o
    # The namespace is created before the base (with the token Secret), not by it.
    check("Namespace" not in by_kind, "the base must not contain the Namespace (namespace.yaml"
          " is applied first, by hand; the Helm chart cannot own its release namespace)")
    ns_doc = docs_by_file.get("deploy/namespace.yaml", [{}])
    check(len(ns_doc) == 1 and ns_doc[0].get("kind") == "Namespace" and
          ns_doc[0]["metadata"]["name"] == "pdc-system" and
          ns_doc[0]["metadata"].get("labels", {}).get("pod-security.kubernetes.io/enforce")
          == "privileged", "namespace.yaml: Namespace pdc-system, Pod Security privileged")
    expected = {
        "CustomResourceDefinition": ["persistentdeviceclaims.pdc.kubevirt.io"],
        "ServiceAccount": ["pdc-extender", "pdc-node", "pdc-scheduler"],
        "ClusterRole": ["pdc-extender", "pdc-claims-edit", "pdc-claims-view"],
        "Deployment": ["pdc-extender", "pdc-scheduler"],
        "DaemonSet": ["pdc-node"],
        "Service": ["pdc-extender"],
        "Role": ["pdc-extender-holds", "pdc-extender-leader"],
        "PodDisruptionBudget": ["pdc-extender"],
        "PriorityClass": ["pdc-critical"],
        "ValidatingAdmissionPolicy": ["pdc-require-pdc-scheduler"],
        "ValidatingAdmissionPolicyBinding": ["pdc-require-pdc-scheduler"],
    }
    for kind, names in expected.items():
        for n in names:
            check(n in by_kind.get(kind, {}), f"rendered base lacks {kind}/{n}")
    cluster_scoped = {"Namespace", "CustomResourceDefinition", "ClusterRole",
                      "ClusterRoleBinding", "PriorityClass", "ValidatingAdmissionPolicy",
                      "ValidatingAdmissionPolicyBinding", "MutatingWebhookConfiguration"}
    for o in objs:
        if o["kind"] not in cluster_scoped:
            check(o["metadata"].get("namespace"), f"{o['kind']}/{o['metadata']['name']}"
                  " has no namespace")
        check(o["metadata"].get("labels", {}).get("app.kubernetes.io/part-of") == "pdc",
              f"{o['kind']}/{o['metadata']['name']} lacks app.kubernetes.io/part-of=pdc")
    rb = {(o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objs
          if o["kind"] == "RoleBinding"}
    check(("kube-system", "pdc-scheduler-extension-apiserver-authentication-reader") in rb,
          "the authentication-reader RoleBinding must stay in kube-system")
    prom_objs = kustomize(kubectl, os.path.join(deploy, "prometheus"), "deploy/prometheus")
    check(sorted(o["kind"] for o in prom_objs) == ["PodMonitor", "PodMonitor", "PrometheusRule"],
          "deploy/prometheus renders two PodMonitors and a PrometheusRule")

    configmaps = {n: o for n, o in by_kind.get("ConfigMap", {}).items()}
    sas = set(by_kind.get("ServiceAccount", {}))
    workloads = list(by_kind.get("Deployment", {}).values()) + \
        list(by_kind.get("DaemonSet", {}).values())
    for w in workloads:
        spec = w["spec"]["template"]["spec"]
        name = w["metadata"]["name"]
        check(spec.get("serviceAccountName") in sas, f"{name}: unknown serviceAccountName")
        check(w["spec"]["selector"]["matchLabels"].items()
              <= w["spec"]["template"]["metadata"]["labels"].items(),
              f"{name}: selector does not match the pod labels")
        for v in spec.get("volumes", []):
            if "configMap" in v:
                check(v["configMap"]["name"] in configmaps,
                      f"{name}: volume {v['name']} names a ConfigMap that is not rendered")
            if "persistentVolumeClaim" in v:
                check(v["persistentVolumeClaim"]["claimName"]
                      in by_kind.get("PersistentVolumeClaim", {}),
                      f"{name}: PVC {v['persistentVolumeClaim']['claimName']} not rendered")
        mounts = {m["name"] for c in spec["containers"] for m in c.get("volumeMounts", [])}
        check(mounts == {v["name"] for v in spec.get("volumes", [])},
              f"{name}: volumes and volumeMounts differ")

    # 3. The pdc configuration file: only fields pdc knows (config/pdc.example.yaml
    #    lists every field), and the manifests agree with it.
    pdc_cm = [o for n, o in configmaps.items() if n.startswith("pdc-config-")]
    check(len(pdc_cm) == 1, "one generated ConfigMap pdc-config-<hash>")
    pdc = yaml.safe_load(pdc_cm[0]["data"]["pdc.yaml"]) if pdc_cm else {}
    with open(os.path.join(repo, "config", "pdc.example.yaml")) as f:
        example = yaml.safe_load(f)
    known = flatten_keys(example)
    for k in sorted(flatten_keys(pdc)):
        check(k in known or k.split(".")[0] == "deviceClasses",
              f"deploy/config/pdc.yaml: {k} is not a field of config/pdc.example.yaml")
    ext, node = pdc.get("extender", {}), pdc.get("node", {})
    resource_names = [c["resourceName"] for c in pdc.get("deviceClasses", [])]
    check(resource_names == ["devices.kubevirt.io/nvme"],
          f"deviceClasses resource names: {resource_names}")
    check(ext.get("kubernetes", {}).get("mode") == "in-cluster", "extender runs in-cluster")
    check(ext.get("store") == "kubernetes", "the cluster extender keeps its record in the Kubernetes API")
    # pdc-extender's start-up rule: beyond loopback every interface is
    # authenticated (REST: tokenFile; scheduler verbs: tls.clientCAFile), or
    # allowUnauthenticated says it need not be.
    check(bool(ext.get("tokenFile")), "the cluster extender requires the API token")
    check(bool(ext.get("tls", {}).get("clientCAFile")) or ext.get("allowUnauthenticated") is True,
          "extender.listen is beyond loopback: tls.clientCAFile or allowUnauthenticated: true")

    dep = by_kind.get("Deployment", {}).get("pdc-extender")
    svc = by_kind.get("Service", {}).get("pdc-extender")
    listen_port = int(ext.get("listen", ":0").rsplit(":", 1)[1])
    if dep and svc:
        le = ext.get("leaderElection", {})
        if dep["spec"]["replicas"] > 1:
            # One allocator decides at a time: several replicas elect a leader,
            # and only the leader is in the Service's endpoints.
            check(le.get("enabled") is True, "pdc-extender: several replicas need "
                  "extender.leaderElection.enabled")
            check(le.get("service") == "pdc-extender" and "selector" not in svc["spec"],
                  "pdc-extender: the Service has no selector and the leader writes its "
                  "EndpointSlice (extender.leaderElection.service)")
            ru = dep["spec"]["strategy"].get("rollingUpdate", {})
            check(dep["spec"]["strategy"]["type"] == "RollingUpdate" and
                  ru.get("maxUnavailable") == 0,
                  "pdc-extender: rolling updates never take a replica away first")
            env = {e["name"]: e for e in
                   dep["spec"]["template"]["spec"]["containers"][0].get("env", [])}
            check(env.get("POD_IP", {}).get("valueFrom", {}).get("fieldRef", {})
                  .get("fieldPath") == "status.podIP",
                  "pdc-extender: $POD_IP from status.podIP (the leader's endpoint)")
            pdb = by_kind.get("PodDisruptionBudget", {}).get("pdc-extender")
            check(pdb is not None and pdb["spec"].get("maxUnavailable") == 1,
                  "pdc-extender: a PodDisruptionBudget lets one replica go at a time")
            svc_ports = [p["name"] for p in svc["spec"]["ports"]]
            check(svc_ports == ["http", "webhook"],
                  "pdc-extender Service ports are named http and webhook, as the leader's "
                  "EndpointSlice names them")
        else:
            check(dep["spec"]["strategy"]["type"] == "Recreate",
                  "pdc-extender: one replica without leader election, strategy Recreate")
        c = dep["spec"]["template"]["spec"]["containers"][0]
        check(c["ports"][0]["containerPort"] == listen_port,
              "pdc-extender containerPort equals extender.listen")
        mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
        check(ext.get("store") == "kubernetes" and "dataDir" not in ext and
              not any(v.get("persistentVolumeClaim") or v.get("hostPath")
                      for v in dep["spec"]["template"]["spec"].get("volumes", [])),
              "pdc-extender keeps its record in the Kubernetes API (store: kubernetes), on no "
              "volume")
        check(mounts.get(os.path.dirname(ext["tokenFile"])) == "api-token",
              "extender.tokenFile lies in the token Secret mount")
        check(c["readinessProbe"]["httpGet"]["path"] == "/readyz" and
              c["livenessProbe"]["httpGet"]["path"] == "/healthz", "extender probe paths")
        check(any(a == "--config=/etc/pdc/pdc.yaml" for a in c["args"]) and
              mounts.get("/etc/pdc") == "config", "extender reads the mounted pdc.yaml")
        check(svc["spec"]["ports"][0]["port"] == listen_port, "Service port = listen port")
    ds = by_kind.get("DaemonSet", {}).get("pdc-node")
    if ds:
        spec = ds["spec"]["template"]["spec"]
        c = spec["containers"][0]
        check(c["securityContext"].get("privileged") is True, "pdc-node is privileged")
        check(spec.get("hostPID") is True, "pdc-node sees the host's mounts (hostPID)")
        hostpaths = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
        mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
        check(hostpaths.get("sys") == "/sys" and mounts.get("sys") == node["sysfsRoot"],
              "hostPath /sys mounted at node.sysfsRoot")
        check(hostpaths.get("dev") == "/dev" and mounts.get("dev") == node["devRoot"],
              "hostPath /dev (vfio groups, block devices) mounted at node.devRoot")
        check(node.get("procRoot", "/proc") == "/proc",
              "node.procRoot is the pod's /proc, which hostPID makes the host's")
        check(mounts.get("state") == node["stateDir"] and hostpaths.get("state"),
              "node.stateDir is a hostPath")
        check(spec.get("nodeSelector") and spec.get("tolerations"),
              "pdc-node has a node selector and tolerations")
        check(c["ports"][0]["containerPort"] == int(node["metricsListen"].rsplit(":", 1)[1]),
              "pdc-node metrics port = node.metricsListen")
        env = {e["name"] for e in c.get("env", [])}
        check("NODE_NAME" in env and node.get("nodeName", "") == "",
              "pdc-node takes its node name from $NODE_NAME")
        # Its own identity (extender.nodeAuth): a projected token of its
        # ServiceAccount for the audience pdc-extender, not the admin Secret.
        projected = {v["name"]: v["projected"]["sources"] for v in spec["volumes"]
                     if "projected" in v}
        sat = [s["serviceAccountToken"] for s in projected.get("node-token", [])
               if "serviceAccountToken" in s]
        node_auth = ext.get("nodeAuth", {})
        check(os.path.dirname(node["tokenFile"]) == mounts.get("node-token") and
              len(sat) == 1 and os.path.basename(node["tokenFile"]) == sat[0].get("path"),
              "node.tokenFile is the projected serviceAccountToken of volume node-token")
        check(sat and sat[0].get("audience") == node_auth.get("audience") and
              sat[0].get("expirationSeconds") == 3600,
              "the node token's audience is extender.nodeAuth.audience, expirationSeconds 3600")
        check(node_auth.get("serviceAccount", "").split("/") ==
              [ds["metadata"]["namespace"], spec.get("serviceAccountName")],
              "extender.nodeAuth.serviceAccount is pdc-node's ServiceAccount")
        check("api-token" not in mounts, "pdc-node does not mount the admin token Secret")
    scheme = "https" if (ext.get("tls") or {}).get("certFile") else "http"
    svc_url = f"{scheme}://pdc-extender.pdc-system.svc:{listen_port}"
    check(node.get("extenderURL") == svc_url, f"node.extenderURL should be {svc_url}")

    # 4. KubeSchedulerConfiguration: exact v1 field names, and the choices.
    sched_cm = [o for n, o in configmaps.items() if n.startswith("pdc-scheduler-config-")]
    check(len(sched_cm) == 1, "one generated ConfigMap pdc-scheduler-config-<hash>")
    ksc = yaml.safe_load(sched_cm[0]["data"]["kube-scheduler-config.yaml"]) if sched_cm else {}
    check(ksc.get("apiVersion") == "kubescheduler.config.k8s.io/v1" and
          ksc.get("kind") == "KubeSchedulerConfiguration", "KubeSchedulerConfiguration v1")
    check_keys(ksc, KUBE_SCHEDULER_CONFIGURATION, "KubeSchedulerConfiguration")
    # Default node sampling: the admission webhook pins restarting VM pods to
    # their claims' node (README.md, "Node sampling and the webhook").
    check("percentageOfNodesToScore" not in ksc,
          "percentageOfNodesToScore is kube-scheduler's default (the webhook pins VM pods)")
    check_webhook(by_kind, ext, dep, svc)
    profiles = [p.get("schedulerName") for p in ksc.get("profiles", [])]
    check(profiles == ["pdc-scheduler"], f"profiles: {profiles}")
    exts = ksc.get("extenders", [])
    if check(len(exts) == 1, "exactly one extender"):
        e = exts[0]
        url = urllib.parse.urlparse(e["urlPrefix"])
        check(f"{url.scheme}://{url.netloc}" == svc_url and
              url.path == ext.get("schedulerPathPrefix"),
              f"urlPrefix {e['urlPrefix']} = Service + extender.schedulerPathPrefix")
        for verb in ("filterVerb", "prioritizeVerb", "bindVerb", "preemptVerb"):
            check(e.get(verb) == verb[: -len("Verb")], f"{verb}: {e.get(verb)}")
        check(isinstance(e.get("weight"), int) and e["weight"] * 10 > 12 * 100,
              "weight: one extender score step must outweigh the default plugins (12 x 100)")
        check(e.get("nodeCacheCapable") is True, "nodeCacheCapable: true")
        check(e.get("ignorable") is False, "ignorable: false")
        check(re.fullmatch(r"[0-9]+(ms|s|m)", str(e.get("httpTimeout", ""))),
              "httpTimeout is a Go duration")
        managed = [m["name"] for m in e.get("managedResources", [])]
        check(managed == resource_names, f"managedResources {managed} = deviceClasses")
        check(all(isinstance(m.get("ignoredByScheduler"), bool)
                  for m in e.get("managedResources", [])),
              "ignoredByScheduler decided explicitly for every resource")
    le = ksc.get("leaderElection", {})
    roles = [o for o in objs if o["kind"] == "Role" and
             o["metadata"]["name"] == "pdc-scheduler-leader-election"]
    check(roles and le.get("resourceNamespace") == roles[0]["metadata"]["namespace"] and
          le.get("resourceName") in roles[0]["rules"][1]["resourceNames"],
          "the leader-election Lease is the one the Role grants")

    # 5. CRD: structural schema, printer columns, claim fields of the REST API.
    crd = by_kind.get("CustomResourceDefinition", {}).get("persistentdeviceclaims.pdc.kubevirt.io")
    if crd:
        v = crd["spec"]["versions"][0]
        check(crd["spec"]["group"] == "pdc.kubevirt.io" and v["name"] == "v1alpha1" and
              crd["spec"]["names"]["kind"] == "PersistentDeviceClaim", "CRD group/version/kind")
        schema = v["schema"]["openAPIV3Schema"]

        def walk(s, path):
            check("type" in s, f"CRD schema {path}: no type (not structural)")
            for k, sub in s.get("properties", {}).items():
                walk(sub, f"{path}.{k}")
            if "items" in s:
                walk(s["items"], f"{path}[]")
        walk(schema, "")
        spec_fields = set(schema["properties"]["spec"]["properties"])
        # The claim JSON of the REST API (POST /v1/namespaces/{ns}/claims), minus
        # name/namespace/uid which are metadata here.
        check(spec_fields == {"resourceName", "count", "node", "serial", "address",
                              "reclaimPolicy", "ownerVM", "ownerVMUid"},
              f"CRD spec fields {spec_fields}")
        # Every member pdc-extender writes into the status (api/claim_object.cc):
        # kube-apiserver prunes what the schema does not name, so a missing one
        # would be lost at the next start.
        status = schema["properties"]["status"]["properties"]
        # The spec is immutable but for reclaimPolicy (design.md §4.8): every
        # other field has `self == oldSelf`, and every optional one a spec-level
        # `has(self.f) == has(oldSelf.f)` (a field-level rule is not checked when
        # the field is set or cleared).
        spec = schema["properties"]["spec"]
        spec_rules = {r["rule"] for r in spec.get("x-kubernetes-validations", [])}
        for field, fs in spec["properties"].items():
            field_rules = {r["rule"] for r in fs.get("x-kubernetes-validations", [])}
            if field == "reclaimPolicy":
                check(not field_rules, "CRD spec.reclaimPolicy must stay mutable (as on a PV)")
                continue
            check("self == oldSelf" in field_rules, f"CRD spec.{field}: no `self == oldSelf` rule")
            if field not in spec.get("required", []) and "default" not in fs:
                check(f"has(self.{field}) == has(oldSelf.{field})" in spec_rules,
                      f"CRD spec: no rule keeps {field} from being set or cleared")
        # Patterns accept what pdc's own parsers accept (api/rest_json.cc,
        # model/pci_address.cc, model/names.h, api/validation.cc), no more.
        samples = {
            "node": [("", True), ("node-a", True), ("n1.example.com", True),
                     ("Node-A", False), ("-a", False), ("a_b", False), ("Not A Node!", False)],
            "ownerVM": [("vm1", True), ("", True), ("VM1", False), ("vm1.", False)],
            "address": [("", True), ("0000:3b:00.0", True), ("0000:3B:1f.7", True),
                        ("0000:3b:20.0", False), ("0000:3b:00.8", False), ("3b:00.0", False)],
            "serial": [("S N-1", True), ("", True), ("S\tN", False), ("S\u00e9", False)],
            "ownerVMUid": [("7f0c1c7e-3f57", True), ("a b", False)],
        }
        for field, cases in samples.items():
            pat = re.compile(spec["properties"][field]["pattern"])
            for value, want in cases:
                check(bool(pat.search(value)) == want,
                      f"CRD spec.{field} pattern {'refuses' if want else 'accepts'} {value!r},"
                      f" which pdc's parser {'accepts' if want else 'refuses'}")
        check(spec["properties"]["serial"].get("maxLength") == 64,
              "CRD spec.serial maxLength is model/types.h kMaxSerialLength (64)")
        check(set(status) == {"phase", "node", "devices", "lostReason", "reservedFor",
                              "handedOffTo", "observedGeneration", "conditions", "ownerVMUid"},
              f"CRD status fields {set(status)}")
        # The owner VM's UID is pdc's record (api/claim_object.cc reads
        # status.ownerVMUid first): bounded and printable like spec's.
        check(status["ownerVMUid"].get("maxLength") == 128 and
              status["ownerVMUid"].get("pattern") == spec["properties"]["ownerVMUid"]["pattern"],
              "CRD status.ownerVMUid is bounded as api/validation.h kMaxUidLength (128)")
        device_fields = set(status["devices"]["items"]["properties"])
        check(device_fields == {"address", "serial", "iommuGroup", "numaNode"},
              f"CRD status.devices fields {device_fields}")
        condition_fields = set(status["conditions"]["items"]["properties"])
        check(condition_fields == {"type", "status", "observedGeneration", "lastTransitionTime",
                                   "reason", "message"},
              f"CRD status.conditions fields {condition_fields} (metav1.Condition)")
        check(status["phase"]["enum"] == ["Pending", "Bound", "Lost"], "phases")
        check(set(status["reservedFor"]["properties"]) == {"vm", "vmUid", "vmiUid", "podName", "podUid"},
              "reservedFor fields")
        cols = {c["name"]: c["jsonPath"] for c in v["additionalPrinterColumns"]}
        for want in ("Phase", "Node", "Devices", "VM", "Age"):
            check(want in cols, f"printer column {want}")
        for name, jp in cols.items():
            node_ = {"type": "object", "properties": {"metadata": {"type": "object"},
                                                      **schema["properties"]}}
            for part in re.sub(r"\[\*\]", "", jp).strip(".").split("."):
                if part == "creationTimestamp":
                    break
                nxt = node_.get("properties", {}).get(part) or \
                    node_.get("items", {}).get("properties", {}).get(part)
                if not check(nxt is not None, f"printer column {name}: {jp} not in schema"):
                    break
                node_ = nxt

    # 5b. CRD names: no category or name that shadows another resource in kubectl.
    if crd:
        for p in crd_name_collisions(crd["spec"]["names"]):
            check(False, f"CRD persistentdeviceclaims.pdc.kubevirt.io: {p}")

    # 5c. RBAC = the Kubernetes API calls in the C++ sources, exactly; DRA
    #     mode (components/dra) adds the calls of driver/dra/ and its objects.
    dra_objs = check_dra_component(kubectl, repo, objs)
    api_calls = check_rbac_matches_code(repo, objs, dra_objs)

    # 5d. The rest of task-specific settings: node agent tolerations, the
    #     kubelet root dir components, the kube-scheduler version, TLS settings.
    if ds:
        tol = ds["spec"]["template"]["spec"].get("tolerations", [])
        check({"operator": "Exists"} in tol,
              f"pdc-node tolerates every taint (operator: Exists, no key, no effect): {tol}")
    check_kubelet_components(kubectl, repo, objs)
    check_scheduler_version(repo, by_kind.get("Deployment", {}).get("pdc-scheduler"))
    for p in tls_problems(pdc, ksc):
        check(False, f"base: {p}")

    # 6. KubeVirt examples agree with the device classes and the scheduler.
    #    (The KubeVirt CR itself: scripts/kubevirt-enable-pdc.py derives its
    #    entries from deviceClasses; tests/deploy/check_kubevirt_script.py.)
    for rel in ("deploy/kubevirt/vm-named-claim.yaml", "deploy/kubevirt/vm-template-claim.yaml"):
        vm = docs_by_file.get(rel, [{}])[0]
        tspec = vm.get("spec", {}).get("template", {})
        check(tspec.get("spec", {}).get("schedulerName") == "pdc-scheduler",
              f"{rel}: spec.template.spec.schedulerName: pdc-scheduler")
        hds = tspec.get("spec", {}).get("domain", {}).get("devices", {}).get("hostDevices", [])
        check(hds and all(h["deviceName"] in resource_names for h in hds),
              f"{rel}: hostDevices use a managed resource")
        ann = tspec.get("metadata", {}).get("annotations", {})
        if "named" in rel:
            check(ann.get("pdc.kubevirt.io/claims") == "nvme-data",
                  f"{rel}: claims annotation on the template metadata")
        else:
            check("pdc.kubevirt.io/claims" not in ann, f"{rel}: relies on the template")

    # 7. Alert rules: the PrometheusRule CR carries the same groups; every
    #    metric name in rules and dashboard is one the code registers.
    code_metrics = metric_names_in_code(repo)
    check(len(code_metrics) >= 20, f"found only {len(code_metrics)} metric names in the code")
    cr = docs_by_file.get("deploy/prometheus/prometheusrule.yaml", [{}])[0]
    check(cr.get("spec") == rules,
          "prometheusrule.yaml differs from pdc-rules.yaml (run with --write-prometheusrule)")
    exprs = []
    for g in rules["groups"]:
        for r in g["rules"]:
            exprs.append((f"alert {r.get('alert')}", r["expr"]))
            check(r.get("labels", {}).get("severity") in ("critical", "warning"),
                  f"alert {r.get('alert')}: severity")
            check(r.get("annotations", {}).get("summary") and
                  r.get("annotations", {}).get("description"),
                  f"alert {r.get('alert')}: summary and description")
    alerts = {r.get("alert") for g in rules["groups"] for r in g["rules"]}
    for want in ("PdcExtenderDown", "PdcFilterLatencyHigh", "PdcClaimsLost",
                 "PdcNodeDriverNotReporting", "PdcNodeBindFailures", "PdcHandoffStuck"):
        check(want in alerts, f"alert {want} missing")

    sys.path.insert(0, os.path.join(deploy, "dashboards"))
    import generate  # noqa: E402  (deploy/dashboards/generate.py)
    with open(os.path.join(deploy, "dashboards", "pdc.json")) as f:
        check(f.read() == generate.render(),
              "dashboards/pdc.json differs from generate.py output (run generate.py)")
    with open(os.path.join(deploy, "dashboards", "pdc.json")) as f:
        dash = json.load(f)
    ids = [p["id"] for p in dash["panels"]]
    check(len(ids) == len(set(ids)), "dashboard panel ids are unique")
    for p in dash["panels"]:
        for t in p.get("targets", []):
            exprs.append((f"panel {p['title']!r}", t["expr"]))
    used = set()
    for where, e in exprs:
        for name in metric_names_in_promql(e):
            base = base_metric(name, code_metrics)
            if check(base, f"{where}: metric {name} is not registered by pdc-extender or "
                     "pdc-node (extender_metrics.cc, extender/extender_app.cc, node_metrics.cc)"):
                used.add(base)
    for want in ("pdc_http_requests_total", "pdc_http_request_duration_seconds",
                 "pdc_filter_nodes_total", "pdc_binds_total", "pdc_bind_rollbacks_total",
                 "pdc_claims", "pdc_devices", "pdc_node_inventory_age_seconds",
                 "pdc_node_bind_failures_total", "pdc_node_last_report_timestamp_seconds"):
        check(want in used, f"no panel or rule shows {want}")

    for f in FAILURES:
        print("FAIL:", f)
    print(f"check_manifests: {len(FAILURES)} failure(s); {len(objs)} objects rendered, "
          f"{len(files)} YAML files, {len(exprs)} PromQL expressions, "
          f"{len(used)} metrics used of {len(code_metrics)} registered, "
          f"{len(api_calls)} Kubernetes API calls in the code checked against RBAC")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
