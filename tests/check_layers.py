#!/usr/bin/python3
"""check_layers.py - keep the layers of src/ (docs/architecture.md).

Reads every `#include "..."` of the .c and .h files under SRC (default: the
src/ next to this script's folder) and fails, naming the file and the
include, on

  (a) an include from a lower layer into a higher one, by the order
        base < transport < core < {coll, compress, coding} < gravac
      (areas of one level are peers: they may include each other as long as
      (b) holds);
  (b) any cycle among areas (the graph of area -> included area);
  (c) any cycle among the files of one area: a header that includes itself
      through other headers, or a loop through a .c file (a header that
      includes a .c file that includes it back).

With --modules, (c) is also checked on .c/.h pairs (foo.c and foo.h count as
one module "foo"; module a -> module b when a.c or a.h includes b.h). That
stricter reading is not part of the test: an area's umbrella header
(sparse_allreduce.h including feedback.h, included by feedback.c) and core's
comm/context pair are such loops by design today.

An include is resolved relative to SRC (`"core/comm.h"`), then relative to
the including file (`"comm.h"`, `"../reduce.h"`); one that is neither
(a generated header such as gcx_build_config.h) is not a file of src/ and is
skipped. `#include <...>` (system and public gcx/ headers) is not checked:
public headers are the way up the layers.

Usage: check_layers.py [--modules] [SRC] | --self-test; exit status 0 when clean, 1 with one line per
violation on stderr.
"""
import os
import re
import sys

LEVEL = {
    "base": 0,
    "transport": 1,
    "core": 2,
    "coll": 3,
    "compress": 3,
    "coding": 3,
    "gravac": 4,
}

ORDER = "base < transport < core < {coll, compress, coding} < gravac"

INCLUDE_RE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"', re.MULTILINE)


def strip_comments(text):
    """Drop /* */ and // comments so that commented-out includes do not count
    (keeps newlines so line numbers stay right)."""
    def blank(m):
        return re.sub(r"[^\n]", " ", m.group(0))
    return re.sub(r"/\*.*?\*/|//[^\n]*", blank, text, flags=re.DOTALL)


def read_includes(src):
    """{file relative to src: [(line, include text, resolved file or None)]}"""
    result = {}
    for root, dirs, files in os.walk(src):
        dirs.sort()
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, src)
            with open(path, encoding="utf-8", errors="replace") as f:
                text = strip_comments(f.read())
            incs = []
            for m in INCLUDE_RE.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                inc = m.group(1)
                target = None
                for base in (src, os.path.dirname(path)):
                    cand = os.path.normpath(os.path.join(base, inc))
                    if os.path.isfile(cand):
                        target = os.path.relpath(cand, src)
                        break
                incs.append((line, inc, target))
            result[rel] = incs
    return result


def area_of(rel):
    parts = rel.split(os.sep)
    return parts[0] if len(parts) > 1 else None


def find_cycles(graph):
    """Elementary cycles, one per strongly connected component with a loop
    (Tarjan), each as a list of nodes [n0, n1, ..., n0], deterministic."""
    index, low, on_stack, stack, sccs = {}, {}, set(), [], []
    counter = [0]

    def strongconnect(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            sccs.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)

    cycles = []
    for comp in sccs:
        members = set(comp)
        start = comp[0]
        if len(comp) == 1 and start not in graph.get(start, ()):
            continue
        # shortest way back to start inside the component (BFS)
        prev, queue, found = {start: None}, [start], None
        while queue and found is None:
            v = queue.pop(0)
            for w in sorted(graph.get(v, ())):
                if w == start:
                    found = v
                    break
                if w in members and w not in prev:
                    prev[w] = v
                    queue.append(w)
        path = [start]
        v = found
        while v is not None and v != start:
            path.insert(1, v)
            v = prev[v]
        cycles.append(path + [start])
    return sorted(cycles)


def check(src, modules=False):
    includes = read_includes(src)
    errors = []

    # edges: (from, to) -> first (file, line, include) that makes it
    area_edges, file_edges, module_edges = {}, {}, {}
    for rel in sorted(includes):
        a = area_of(rel)
        for line, inc, target in includes[rel]:
            if target is None:
                continue
            where = '%s:%d: #include "%s"' % (rel, line, inc)
            b = area_of(target)
            if a is None or b is None:
                continue
            if a not in LEVEL:
                errors.append('%s: "%s" is not an area of the layer order'
                              % (where, a))
                continue
            if b not in LEVEL:
                errors.append('%s: "%s" is not an area of the layer order'
                              % (where, b))
                continue
            if a != b:
                if LEVEL[b] > LEVEL[a]:
                    errors.append("%s: %s (level %d) includes %s (level %d), "
                                  "a higher layer" % (where, a, LEVEL[a], b,
                                                      LEVEL[b]))
                area_edges.setdefault((a, b), where)
                continue
            file_edges.setdefault((rel, target), where)
            ma, mb = os.path.splitext(rel)[0], os.path.splitext(target)[0]
            if ma != mb:
                module_edges.setdefault((ma, mb), where)

    def graph_of(edges):
        g = {}
        for (x, y) in edges:
            g.setdefault(x, set()).add(y)
        return g

    def describe(cycle, edges):
        return "; ".join(edges[(cycle[i], cycle[i + 1])]
                         for i in range(len(cycle) - 1))

    for cycle in find_cycles(graph_of(area_edges)):
        errors.append("area cycle %s: %s"
                      % (" -> ".join(cycle), describe(cycle, area_edges)))
    file_cycles = find_cycles(graph_of(file_edges))
    for cycle in file_cycles:
        errors.append("file cycle %s: %s"
                      % (" -> ".join(cycle), describe(cycle, file_edges)))
    for cycle in find_cycles(graph_of(module_edges)) if modules else []:
        errors.append("module (.c/.h pair) cycle %s: %s"
                      % (" -> ".join(cycle), describe(cycle, module_edges)))
    return errors


def self_test():
    """Each kind of violation in a small made-up tree is caught, and a clean
    tree passes (meson test 'layers-selftest')."""
    import tempfile
    cases = {
        "clean": ({"base/a.h": "", "core/c.c": '#include "base/a.h"'}, None),
        "upward": ({"base/a.c": '#include "core/c.h"', "core/c.h": ""},
                   'base/a.c:1: #include "core/c.h": base (level 0) includes'),
        "area cycle": ({"coll/a.c": '#include "coding/b.h"',
                        "coll/a.h": "",
                        "coding/b.h": '#include "coll/a.h"'},
                       "area cycle coding -> coll -> coding"),
        "header cycle": ({"core/a.h": '#include "b.h"',
                          "core/b.h": '#include "core/a.h"'},
                         "file cycle core/a.h -> core/b.h -> core/a.h"),
        ".c loop": ({"core/x.h": '#include "x.c"', "core/x.c": '#include "x.h"'},
                    "file cycle core/x.c -> core/x.h -> core/x.c"),
    }
    failed = 0
    for name, (files, expect) in sorted(cases.items()):
        with tempfile.TemporaryDirectory() as tmp:
            for rel, text in files.items():
                os.makedirs(os.path.join(tmp, os.path.dirname(rel)),
                            exist_ok=True)
                with open(os.path.join(tmp, rel), "w") as f:
                    f.write(text + "\n")
            errors = check(tmp)
        ok = (not errors) if expect is None else any(
            e.startswith(expect) for e in errors)
        print("self-test %-12s %s%s" % (name, "ok" if ok else "FAILED",
                                        "" if ok else ": %r" % errors))
        failed += not ok
    return 1 if failed else 0


def main(argv):
    if "--self-test" in argv[1:]:
        return self_test()
    modules = "--modules" in argv[1:]
    argv = [a for a in argv if a != "--modules"]
    src = argv[1] if len(argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), os.pardir, "src")
    src = os.path.normpath(src)
    if not os.path.isdir(src):
        sys.stderr.write("check_layers.py: no folder %s\n" % src)
        return 2
    errors = check(src, modules)
    for e in errors:
        sys.stderr.write("check_layers.py: %s\n" % e)
    if errors:
        sys.stderr.write("check_layers.py: %d violation(s) of the layer "
                         "order %s\n" % (len(errors), ORDER))
        return 1
    print("check_layers.py: %d files, layers kept" % len(
        [1 for r, d, f in os.walk(src) for n in f if n.endswith((".c", ".h"))]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
