#!/usr/bin/env python3
"""Fails when the tests ran a program that scripts/install-deps.sh does not install.

Usage: check-exec-deps.py --repo DIR TRACE...

Each TRACE is the output of `strace -f -e trace=execve,execveat` over a test run (scripts/test.sh
writes them when PDC_EXEC_TRACE is set; .ci/run sets it). Every program that was executed
successfully must be one of:
  - the project's own: a file under the repository (the build tree, scripts, the tools directory
    .tools/bin that install-deps.sh fills) or under a temporary directory a test made;
  - from a Debian package that a minimal Debian 12 (debootstrap --variant=minbase, plus git and
    ca-certificates) has: priority `required` or Essential;
  - from a Debian package that install-deps.sh installs, or one those depend on (Depends and
    Pre-Depends, as apt-get --no-install-recommends pulls them).
Anything else - a program from another package, or one no package owns (/usr/local, a version
manager's shims) - is reported with the package it came from and the command that ran it: a fresh
machine would not have it, so the test that ran it would fail there.
"""
import argparse
import os
import re
import subprocess
import sys

EXEC_RE = re.compile(r'^(?:\[pid\s+)?(\d+)\]?\s+exec(?:ve|veat)\((?:AT_FDCWD, )?"((?:[^"\\]|\\.)*)", \[(.*?)\]'
                     r'.*\)\s+=\s+0\s*$')
MINIMAL_EXTRA = ("git", "ca-certificates")
# Programs that are run only where they exist, so a machine without them is no different: ldd
# runs every dynamic loader of its list that is installed (`ld-linux.so.2 --verify` of the i386
# multilib, for one).
PROBED_IF_PRESENT = re.compile(r"^/(usr/)?(lib|lib32|libx32|lib64)/ld-linux[-.\w]*\.so\.\d+$")


def installed_packages():
    """name -> (essential, priority, [dependency groups]) for every installed package, and
    virtual name -> providers."""
    fmt = "${Package}\t${Essential}\t${Priority}\t${Pre-Depends}\t${Depends}\t${Provides}\t${db:Status-Abbrev}\n"
    out = subprocess.run(["dpkg-query", "-W", "-f", fmt], check=True, capture_output=True,
                         text=True).stdout
    pkgs, provides = {}, {}
    for line in out.splitlines():
        name, essential, priority, pre, deps, prov, status = (line.split("\t") + [""] * 7)[:7]
        if not status.startswith("ii"):
            continue
        groups = []
        for field in (pre, deps):
            for group in filter(None, (g.strip() for g in field.split(","))):
                groups.append([strip_dep(alt) for alt in group.split("|")])
        pkgs[name] = (essential == "yes", priority, groups)
        for p in filter(None, (strip_dep(x) for x in prov.split(","))):
            provides.setdefault(p, []).append(name)
    return pkgs, provides


def strip_dep(dep):
    """'libc6 (>= 2.34)' or 'python3:any' -> package name."""
    return re.sub(r"\s*\(.*?\)", "", dep).strip().split(":")[0]


def closure(roots, pkgs, provides):
    seen, stack = set(), list(roots)
    while stack:
        name = stack.pop()
        for real in ([name] if name in pkgs else provides.get(name, [])):
            if real in seen:
                continue
            seen.add(real)
            for group in pkgs[real][2]:
                # apt satisfies an alternative with the first one it can; any installed one
                # that satisfies the group is what this machine used.
                chosen = next((a for a in group if a in pkgs or a in provides), None)
                if chosen:
                    stack.append(chosen)
    return seen


def owner(path, cache={}):
    """The Debian package that ships `path` (merged /usr aware), or None."""
    if path in cache:
        return cache[path]
    candidates = [path, os.path.realpath(path)]
    for p in list(candidates):
        for a, b in (("/usr/bin/", "/bin/"), ("/usr/sbin/", "/sbin/"), ("/usr/lib/", "/lib/")):
            if p.startswith(a):
                candidates.append(b + p[len(a):])
            elif p.startswith(b):
                candidates.append(a + p[len(b):])
    result = None
    for c in dict.fromkeys(candidates):
        r = subprocess.run(["dpkg-query", "-S", c], capture_output=True, text=True)
        if r.returncode == 0:
            # "pkg1, pkg2: /path" (diversions print other lines; take the plain one)
            for line in r.stdout.splitlines():
                if line.endswith(": " + c) and not line.startswith("diversion"):
                    result = line.split(":")[0].split(",")[0].strip()
                    break
        if result:
            break
    cache[path] = result
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("traces", nargs="+")
    args = ap.parse_args()
    repo = os.path.realpath(args.repo)

    listed = subprocess.run(["bash", os.path.join(repo, "scripts/install-deps.sh"),
                             "--list-packages"], check=True, capture_output=True,
                            text=True).stdout.split()
    pkgs, provides = installed_packages()
    minimal = {n for n, (ess, prio, _) in pkgs.items() if ess or prio == "required"}
    allowed = closure(list(minimal) + list(MINIMAL_EXTRA) + listed, pkgs, provides)

    temp_roots = tuple(os.path.realpath(d) + "/" for d in ("/tmp", "/var/tmp", "/dev/shm"))
    seen_programs = {}
    for trace in args.traces:
        with open(trace, errors="replace") as f:
            for line in f:
                m = EXEC_RE.match(line.strip())
                if m:
                    seen_programs.setdefault(m.group(2), m.group(3)[:160])

    problems = []
    for path, argv in sorted(seen_programs.items()):
        real = os.path.realpath(path)
        if real.startswith(repo + "/") or path.startswith(repo + "/"):
            continue  # built or shipped by the project, or unpacked into .tools/bin
        if PROBED_IF_PRESENT.match(path):
            continue
        pkg = owner(path)
        if pkg is None and real.startswith(temp_roots):
            continue  # a program a test wrote into its temporary directory
        if pkg is not None and pkg in allowed:
            continue
        where = f"from package '{pkg}'" if pkg else "owned by no package"
        problems.append(f"  {os.path.basename(path)}: {path} ({where}), run as [{argv}]")

    print(f"check-exec-deps: {len(seen_programs)} distinct programs executed, "
          f"{len(allowed)} packages allowed ({len(listed)} listed by install-deps.sh)")
    if problems:
        print("check-exec-deps: the tests executed programs that scripts/install-deps.sh does not "
              "install (a fresh Debian 12 machine would not have them):")
        print("\n".join(problems))
        return 1
    print("check-exec-deps: every executed program is installed by scripts/install-deps.sh "
          "or is part of a minimal Debian 12")
    return 0


if __name__ == "__main__":
    sys.exit(main())
