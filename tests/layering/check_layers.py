#!/usr/bin/env python3
"""The include graph follows the layers of docs/design.md §10; fails naming each include that does not.

Layers, lowest first; a folder may include its own files and those of lower layers, never a
peer's or a higher one's:
    common  <-  model  <-  allocator, config, api  <-  net  <-  kube  <-  extender, driver, sim,
    pdcctl (programs)
bench/ and tests/ may include anything. On top of the layers, the allocator core stays pure: no
Boost, RapidJSON, spdlog, yaml-cpp, gRPC, no thread or clock API (it is driven by callers and
takes time as an argument). Outside common/clock no product file reads or waits on the wall
clock directly (absl::Now, std::chrono clocks, absl::SleepFor, sleep_for): it takes a Clock.

KNOWN_EXCEPTIONS lists the includes that break a layer today and are still to be moved. A new
break fails the check; so does an exception that no longer occurs (delete it from the list), so
the list only shrinks.

Usage: check_layers.py --repo DIR
"""
import argparse
import os
import re
import sys

LAYER = {"common": 0, "model": 1, "allocator": 2, "config": 2, "api": 2, "net": 3, "kube": 4,
         "extender": 5, "driver": 5, "sim": 5, "pdcctl": 5}
UNRESTRICTED = {"bench", "tests"}
SOURCE_EXT = (".h", ".cc")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)

# What the allocator core must not include: libraries of the outer layers and the APIs of
# threads and clocks.
ALLOCATOR_FORBIDDEN = [
    (re.compile(r"^boost/"), "Boost"),
    (re.compile(r"^rapidjson/"), "RapidJSON"),
    (re.compile(r"^spdlog/"), "spdlog"),
    (re.compile(r"^yaml-cpp/"), "yaml-cpp"),
    (re.compile(r"^grpcpp?/"), "gRPC"),
    (re.compile(r"^(thread|future|condition_variable|chrono|ctime|time\.h)$"), "a thread or clock API"),
    (re.compile(r"^pthread\.h$"), "a thread API"),
    (re.compile(r"^absl/time/clock\.h$"), "a clock API (absl::Now)"),
]
# Reading or waiting on the wall clock happens in common/clock only; the rest
# takes a Clock, so tests can run on fake time.
CLOCK_HOME = {"common/clock.cc", "common/clock.h"}
WALL_CLOCK_CALL = re.compile(
    r"\babsl::Now\(\)|\b\w+_clock::now\(|\babsl::SleepFor\(|\bstd::this_thread::sleep_(for|until)\("
    # A std::chrono clock under another name, read as Alias::now().
    r"|\busing\s+\w+\s*=\s*(std::)?(chrono::)?\w+_clock\s*;")
ALLOCATOR_FORBIDDEN_CALLS = [(re.compile(r"\babsl::Now\(\)|\bstd::chrono::\w+_clock::now\("), "reads the clock")]

# (file, include): layer breaks that exist today, each to be removed by moving code down.
KNOWN_EXCEPTIONS = set()


def sources(repo):
    for top in sorted(os.listdir(repo)):
        if top not in LAYER:
            continue
        for root, _, files in os.walk(os.path.join(repo, top)):
            for f in sorted(files):
                if f.endswith(SOURCE_EXT):
                    path = os.path.join(root, f)
                    yield os.path.relpath(path, repo), path


def check(repo):
    problems, used_exceptions, edges = [], set(), 0
    for rel, path in sources(repo):
        folder = rel.split("/")[0]
        with open(path, errors="replace") as f:
            text = f.read()
        for kind, inc in INCLUDE_RE.findall(text):
            target = inc.split("/")[0]
            if kind == '"' and target in LAYER | dict.fromkeys(UNRESTRICTED) and target != folder:
                edges += 1
                if target in UNRESTRICTED or LAYER[target] >= LAYER[folder]:
                    if (rel, inc) in KNOWN_EXCEPTIONS:
                        used_exceptions.add((rel, inc))
                    else:
                        why = ("a peer" if target not in UNRESTRICTED and LAYER[target] == LAYER[folder]
                               else "a higher layer")
                        problems.append(f"{rel}: includes {inc}: {target}/ is {why} of {folder}/")
            if folder == "allocator":
                for pattern, what in ALLOCATOR_FORBIDDEN:
                    if pattern.search(inc):
                        problems.append(f"{rel}: includes <{inc}>: the allocator core may not use {what}")
        if rel not in CLOCK_HOME:
            for m in WALL_CLOCK_CALL.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                problems.append(f"{rel}:{line}: {m.group(0)}: only common/clock reads or waits on "
                                "the wall clock; take a Clock (RealClock() in production)")
        if folder == "allocator":
            for pattern, what in ALLOCATOR_FORBIDDEN_CALLS:
                for m in pattern.finditer(text):
                    line = text.count("\n", 0, m.start()) + 1
                    problems.append(f"{rel}:{line}: {m.group(0)}: the allocator core {what}; take time as an argument")
    for rel, inc in sorted(KNOWN_EXCEPTIONS - used_exceptions):
        problems.append(f"tests/layering/check_layers.py: the known exception {rel} -> {inc} no longer "
                        "occurs: delete it from KNOWN_EXCEPTIONS")
    return problems, edges, len(used_exceptions)


def self_test():
    """The check catches what it is for (on a made-up tree)."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        def write(rel, body):
            os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
            with open(os.path.join(d, rel), "w") as f:
                f.write(body)
        write("common/a.h", '#include "model/names.h"\n')
        write("allocator/b.cc", '#include <thread>\n#include "config/config.h"\nint x = absl::Now();\n')
        write("model/names.h", "")
        write("driver/c.cc", '#include "sim/x.h"\n#include "model/types.h"\nauto t = absl::Now();\n')
        write("sim/d.cc", 'using Clock = std::chrono::steady_clock;\nauto t = Clock::now();\n')
        problems, _, _ = check(d)
        text = "\n".join(problems)
        expected = ["common/a.h: includes model/names.h", "allocator/b.cc: includes <thread>",
                    "allocator/b.cc: includes config/config.h: config/ is a peer",
                    "allocator/b.cc:3: absl::Now()", "driver/c.cc: includes sim/x.h",
                    "driver/c.cc:3: absl::Now(): only common/clock",
                    "sim/d.cc:1: using Clock = std::chrono::steady_clock;"]
        missing = [e for e in expected if e not in text]
        if missing or "driver/c.cc: includes model/types.h" in text:
            print("check_layers: self-test failed; missing:", missing, "\n", text)
            return False
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    args = ap.parse_args()
    if not self_test():
        return 1
    problems, edges, exceptions = check(os.path.realpath(args.repo))
    for p in problems:
        print("FAIL:", p)
    print(f"check_layers: {len(problems)} problem(s); {edges} includes across folders, "
          f"{exceptions} known exception(s) still to remove")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
