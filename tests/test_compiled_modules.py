"""The modules compiled as they are (setup.py's MODULES): which copy runs, and their recursion.

A function compiled by Cython does not count towards Python's recursion limit: recursion
without a bound would overflow the C stack (a crash) where the pure path raises RecursionError.
So every recursion in a compiled module is listed below with what bounds it, and the test fails
on a new one until it is bounded and listed.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Each recursive group of functions (as the call graph below finds them) and what bounds its depth.
BOUNDED: dict[frozenset[str], str] = {
    frozenset({"kafka.plan._field", "kafka.plan._struct"}): "the schema's nesting (tables, not input)",
    frozenset({"kafka.topicids._paths"}): "the schema's nesting",
    frozenset({"kafka.topicids._since"}): "the schema's nesting",
    frozenset({"zookeeper.jute.min_size"}): "the record table's nesting",
    frozenset({"zookeeper.jute.<local>.read", "zookeeper.jute._nested", "zookeeper.jute._vector",
               "zookeeper.jute.plan", "zookeeper.jute.read_fields", "zookeeper.jute.reader_for"}):
        "the record table's nesting",
    frozenset({"pulsar.protowire._cut_submessage", "pulsar.protowire._packed", "pulsar.protowire._submessage",
               "pulsar.protowire._value", "pulsar.protowire.walk"}): "protowire.MAX_DEPTH",
    frozenset({"pulsar.payload._rebase"}): "the depth of a decoded tree",
    frozenset({"pulsar.summary.show"}): "the depth of a decoded tree",
    frozenset({"render.text.tree_lines"}): "the depth of a decoded tree",
    frozenset({"analysis.throughput._walk"}): "the depth of a decoded tree",
    frozenset({"analysis.throughput.count_records"}): "the depth of a decoded tree",
    frozenset({"expert.analyzers.producers._errors"}): "the length of its path, a constant",
    frozenset({"filter.keys.below"}): "the depth of a decoded tree",
    frozenset({"filter.keys.atoms"}): "the depth of a decoded tree",
    frozenset({"filter.keys.find_paths"}): "the depth of a decoded tree",
    frozenset({"render.positions._field", "render.positions._fields", "render.positions._row"}):
        "the depth of a decoded tree",
    frozenset({"render.positions._prune"}): "the depth of a decoded tree (its positions)",
    frozenset({"filter.evaluator._Compiler.node"}): "filter.parser.MAX_NESTING (a chain is one list)",
}
# The deepest tree a decoder builds is a few dozen levels: protowire.MAX_DEPTH nested Pulsar
# messages or rocketmq.ljson.MAX_DEPTH nested JSON values, each a level or two of Fields.


def compiled_modules() -> list[str]:
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "MODULES":
            return [m.replace("/", ".") for m in ast.literal_eval(node.value)]
    raise AssertionError("setup.py lists no MODULES")


def _calls(fn: ast.AST, module: str, top: set[str], imported: dict[str, str], cls: str | None) -> Iterator[str]:
    """The functions `fn` calls by name: its module's, those it imports from kdissect, its
    nested functions', and its class's methods through self or cls."""
    for node in ast.walk(fn):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name):
            yield (f"{module}.{f.id}" if f.id in top else imported.get(f.id, f"{module}.<local>.{f.id}"))
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in ("self", "cls") and cls:
            yield f"{module}.{cls}.{f.attr}"


def call_graph(modules: list[str]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module in modules:
        tree = ast.parse((ROOT / "kdissect" / (module.replace(".", "/") + ".py")).read_text())
        imported = {a.asname or a.name: f"{n.module.removeprefix('kdissect.')}.{a.name}"
                    for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("kdissect.")
                    for a in n.names}
        top = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                graph[f"{module}.{node.name}"] = set(_calls(node, module, top, imported, None))
                for inner in ast.walk(node):
                    if isinstance(inner, ast.FunctionDef) and inner is not node:
                        graph[f"{module}.<local>.{inner.name}"] = set(_calls(inner, module, top, imported, None))
            elif isinstance(node, ast.ClassDef):
                for m in node.body:
                    if isinstance(m, ast.FunctionDef):
                        graph[f"{module}.{node.name}.{m.name}"] = set(_calls(m, module, top, imported, node.name))
    return graph


def recursive_groups(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected groups of the graph that call themselves (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: set[frozenset[str]] = set()
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, edges = work[-1]
            w = next((e for e in edges if e in graph), None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                group = set()
                while True:
                    x = stack.pop()
                    on_stack.discard(x)
                    group.add(x)
                    if x == v:
                        break
                if len(group) > 1 or v in graph[v]:
                    groups.add(frozenset(group))
    return groups


def test_every_recursion_in_a_compiled_module_is_bounded() -> None:
    found = recursive_groups(call_graph(compiled_modules()))
    new = [sorted(g) for g in found - BOUNDED.keys()]
    assert not new, f"recursion in a compiled module, not yet bounded and listed in BOUNDED: {new}"
    gone = [sorted(g) for g in BOUNDED.keys() - found]
    assert not gone, f"listed in BOUNDED but no longer recursive: {gone}"


def test_the_call_graph_finds_recursion() -> None:
    graph = {"a.f": {"a.g"}, "a.g": {"a.f", "a.h"}, "a.h": set(), "a.k": {"a.k"}}
    assert recursive_groups(graph) == {frozenset({"a.f", "a.g"}), frozenset({"a.k"})}


def _origins(pure: bool) -> dict[str, str]:
    """Where each kdissect module came from, in a process that imports the CLI and every
    compiled module."""
    code = ("import importlib, json, sys, kdissect.cli; "
            f"[importlib.import_module('kdissect.' + m) for m in {compiled_modules()!r}]; "
            "print(json.dumps({n: getattr(m, '__file__', '') or '' for n, m in sys.modules.items() "
            "if n.startswith('kdissect.')}))")
    env = {**os.environ, "KDISSECT_PURE": "1" if pure else "0"}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_the_pure_path_loads_every_module_from_its_source() -> None:
    origins = _origins(pure=True)
    assert "kdissect.pipeline.core" in origins
    compiled = {name: path for name, path in origins.items() if path and not path.endswith(".py")}
    assert not compiled, compiled  # (a namespace package has no file)


def test_the_compiled_path_loads_the_compiled_modules() -> None:
    origins = _origins(pure=False)
    if not origins["kdissect.pipeline.core"].endswith(tuple(EXTENSION_SUFFIXES)):
        pytest.skip("the compiled core is not built (no C compiler at install time)")
    source = [m for m in compiled_modules() if not origins[f"kdissect.{m}"].endswith(tuple(EXTENSION_SUFFIXES))]
    assert not source, f"listed in setup.py's MODULES but loaded from source: {source}"


def test_the_boundary_probes_are_compiled() -> None:
    # Resynchronisation asks a protocol's boundary probe at every candidate offset: ZooKeeper's
    # and RocketMQ's ran interpreted (3 MB of a ZooKeeper stream whose every offset looks like
    # a length: 3.7 s of CPU, compiled 2.75 s).
    assert {"zookeeper.probe", "rocketmq.probe"} <= set(compiled_modules())


def test_no_compiled_module_is_older_than_its_source() -> None:
    """An extension beside a module runs instead of its source: after an edit of the module or
    of its .pxd, rebuild it (`python setup.py build_ext --inplace`), or run with KDISSECT_PURE=1."""
    stale = []
    for module in compiled_modules():
        source = ROOT / "kdissect" / (module.replace(".", "/") + ".py")
        pxd = source.with_suffix(".pxd")
        changed = max(source.stat().st_mtime, pxd.stat().st_mtime if pxd.exists() else 0)
        built = [p for suffix in EXTENSION_SUFFIXES for p in [source.with_name(source.stem + suffix)] if p.exists()]
        stale += [b.name for b in built if b.stat().st_mtime < changed]
    assert not stale, f"compiled before their source last changed (rebuild them): {stale}"


# -- classes laid out in C ------------------------------------------------------------------
# A .pxd beside a compiled module declares some of its classes as extension types: their
# attributes are C slots, which the module's own methods read and write directly. The .pxd must
# declare exactly the attributes the class has (its __slots__, or what its methods assign).

_PXD_CLASS = re.compile(r"^cdef class (\w+)(?:\([\w.]+\))?:\s*$")
_PXD_ATTRS = re.compile(r"^\s+cdef (?:public |readonly )?object ([\w, ]+)$")


def _pxd_classes() -> dict[str, dict[str, set[str]]]:
    """module -> class -> the attributes its .pxd declares."""
    found: dict[str, dict[str, set[str]]] = {}
    for module in compiled_modules():
        pxd = ROOT / "kdissect" / (module.replace(".", "/") + ".pxd")
        if not pxd.exists():
            continue
        classes: dict[str, set[str]] = {}
        current: set[str] | None = None
        for line in pxd.read_text().splitlines():
            if m := _PXD_CLASS.match(line):
                current = classes.setdefault(m.group(1), set())
            elif (m := _PXD_ATTRS.match(line)) and current is not None:
                current |= {a.strip() for a in m.group(1).split(",")}
            elif line.strip() and not line.startswith(("#", " ")):
                raise AssertionError(f"{pxd.name}: a line this test does not read: {line!r}")
        found[module] = classes
    return found


def _class_attributes(node: ast.ClassDef) -> set[str]:
    for stmt in node.body:
        if isinstance(stmt, ast.Assign) and getattr(stmt.targets[0], "id", None) == "__slots__":
            return set(ast.literal_eval(stmt.value))
    return {t.attr for fn in node.body if isinstance(fn, ast.FunctionDef) for n in ast.walk(fn)
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AnnAssign | ast.AugAssign) else [])
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"}


def test_each_pxd_declares_exactly_its_class_attributes() -> None:
    declared = _pxd_classes()
    assert declared, "no compiled module has a .pxd"
    for module, classes in declared.items():
        tree = ast.parse((ROOT / "kdissect" / (module.replace(".", "/") + ".py")).read_text())
        defined = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        for name, attrs in classes.items():
            assert name in defined, f"{module}.pxd declares {name}, which {module}.py does not define"
            node = defined[name]
            assert not node.bases, f"{module}.{name}: an extension type's base must be another one"
            has = _class_attributes(node)
            assert has == attrs, f"{module}.{name}: the .pxd declares {sorted(attrs)}, the class has {sorted(has)}"


def test_the_classes_of_a_pxd_are_extension_types_when_compiled() -> None:
    code = ("import importlib, json; "
            f"d = {{m: sorted(c) for m, c in {_pxd_classes()!r}.items()}}; "
            "print(json.dumps({f'{m}.{c}': bool(getattr(importlib.import_module('kdissect.' + m), c).__flags__ & (1 << 9)) "
            "for m, cs in d.items() for c in cs}))")
    for pure in (False, True):
        env = {**os.environ, "KDISSECT_PURE": "1" if pure else "0"}
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert r.returncode == 0, r.stderr
        heap = json.loads(r.stdout)
        if not pure and _origins(pure=False)["kdissect.pipeline.core"].endswith(".py"):
            pytest.skip("the compiled core is not built (no C compiler at install time)")
        # A heap type is a class defined by Python code; an extension type's layout is C's.
        assert all(heap.values()) if pure else not any(heap.values()), heap
