#!/usr/bin/env python3
"""Import circles inside a crate: files (modules) that use each other, directly or round
a loop. Reads `crate::` and `super::` paths outside comments and test modules.

    import_circles.py [--allow 'a <-> b <-> c'] SRC_DIR...

Prints each circle as `SRC_DIR a <-> b`; exits 1 if one is not allowed.
"""
import os
import re
import sys


def modules(src):
    found = {}
    for root, _, files in os.walk(src):
        for name in files:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(root, name)
            parts = os.path.relpath(path, src)[:-3].split(os.sep)
            if parts[-1] in ("mod", "lib", "main"):
                parts = parts[:-1]
            found["::".join(parts)] = path
    return found


def code(path):
    text = open(path, encoding="utf-8").read()
    cut = text.find("#[cfg(test)]\nmod ")
    if cut >= 0:
        text = text[:cut]
    return "\n".join(line.split("//")[0] for line in text.splitlines())


def edges(src):
    mods = modules(src)
    graph = {m: set() for m in mods}
    for module, path in mods.items():
        text = code(path)
        here = module.split("::") if module else []
        for anchor, base in (("crate", []), ("super", here[:-1])):
            for found in re.findall(anchor + r"::([a-z_][a-z0-9_:]*)", text):
                segments = found.split("::")
                for k in range(len(segments), 0, -1):
                    target = "::".join(base + segments[:k])
                    if target in mods:
                        if target != module:
                            graph[module].add(target)
                        break
    return graph


def circles(graph):
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                out.append(" <-> ".join(sorted(part)))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main(argv):
    allowed, dirs = set(), []
    args = iter(argv)
    for arg in args:
        if arg == "--allow":
            allowed.add(next(args))
        else:
            dirs.append(arg)
    bad = 0
    for src in dirs:
        for circle in circles(edges(src)):
            known = circle in allowed
            print(f"{src} {circle}{' (known)' if known else ''}")
            bad += not known
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
