#!/usr/bin/env python3
"""Checks that every source file includes only from its own layer or the layers below it.

The layers, bottom to top, and what each may include (docs/ARCHITECTURE.md draws them):
a file in a layer may include from the layers listed for it and from its own layer, and nothing
else of Kiln's. Folders outside the table (tests/, bench/, examples/) sit above everything and may
include any layer, but no layer may include them. Exits 1 and names each offending include, and
also reports any cycle between top-level folders (which the table makes impossible, but a new
folder added without a row could create).
"""
import os
import re
import sys

# (layer folder, the layers it may include). Order is bottom to top.
LAYERS = [
    ("include", []),  # the public headers (kiln/kiln.h, kiln/kiln.hpp): nothing of the tree
    ("base", []),
    ("dnn", ["base"]),
    ("ir", ["base"]),
    ("ops", ["base", "ir"]),
    ("kernels", ["base", "dnn", "ir", "ops"]),
    ("passes", ["base", "ir", "ops"]),
    ("runtime", ["base", "dnn", "ir", "ops", "kernels", "passes"]),
    ("training", ["base", "dnn", "ir", "ops", "kernels", "passes", "runtime"]),
    ("distributed", ["base", "dnn", "ir", "ops", "kernels", "passes", "runtime", "training"]),
    ("data", ["base"]),
    ("frontends/caffe", ["base", "dnn", "ir", "ops", "kernels", "passes", "runtime", "training",
                         "distributed", "data"]),
    ("tools", ["base", "dnn", "ir", "ops", "kernels", "passes", "runtime", "training",
               "distributed", "data", "frontends/caffe"]),
    # The C API behind libkiln.so: the layers below it, never the CLI's tools/.
    ("api", ["base", "dnn", "ir", "ops", "kernels", "passes", "runtime", "training",
             "distributed", "data", "frontends/caffe", "include"]),
    # The Python package's native module: the public headers only (it links libkiln.so).
    ("python", ["include"]),
]
ABOVE_ALL = ["tests", "bench", "examples"]
SOURCE = re.compile(r"\.(cc|h|cu|cuh)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(path):
    best = None
    for name, _ in LAYERS:
        if path == name or path.startswith(name + "/"):
            if best is None or len(name) > len(best):
                best = name
    if best is None:
        for name in ABOVE_ALL:
            if path.startswith(name + "/"):
                return name
    return best


def main(root):
    allowed = {name: set(deps) | {name} for name, deps in LAYERS}
    for name in ABOVE_ALL:
        allowed[name] = {n for n, _ in LAYERS} | {name}
    project = {n.split("/")[0] for n, _ in LAYERS} | set(ABOVE_ALL)
    errors = []
    edges = set()
    files = 0
    for folder, dirs, names in os.walk(root):
        rel_folder = os.path.relpath(folder, root)
        dirs[:] = [d for d in dirs if not d.startswith((".", "bazel-")) and d != "third_party"]
        for n in names:
            if not SOURCE.search(n):
                continue
            rel = os.path.normpath(os.path.join(rel_folder, n))
            layer = layer_of(rel)
            if layer is None:
                errors.append(f"{rel}: in no layer (add its folder to tools/layers/check_layers.py)")
                continue
            files += 1
            with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
                text = f.read()
            for m in INCLUDE.finditer(text):
                target = m.group(1)
                if target.split("/")[0] not in project:
                    continue  # a system or generated header outside the tree's folders
                to = layer_of(target)
                if to is None:
                    continue
                edges.add((rel.split("/")[0], target.split("/")[0]))
                if to not in allowed[layer]:
                    line = text.count("\n", 0, m.start()) + 1
                    errors.append(f"{rel}:{line}: layer '{layer}' includes \"{target}\" "
                                  f"from layer '{to}', which is not below it")
    # Cycles between top-level folders, through any path.
    graph = {}
    for a, b in edges:
        if a != b:
            graph.setdefault(a, set()).add(b)

    def reaches(a, b, seen):
        for c in graph.get(a, ()):
            if c == b or (c not in seen and (seen.add(c) or reaches(c, b, seen))):
                return True
        return False

    for a in sorted(graph):
        for b in sorted(graph[a]):
            if reaches(b, a, set()):
                errors.append(f"top-level folders '{a}' and '{b}' include each other")
    for e in errors:
        print(e)
    print(f"layers: {files} files checked, {len(errors)} violation(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
