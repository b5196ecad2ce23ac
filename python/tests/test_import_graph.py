"""test_import_graph.py - the modules of the fp8kit package import each other
one way only: the graph of their imports (read with ast from the sources,
imports inside functions included, since a lazy import is a dependency too)
has no cycle, and no private helper (a name starting with "_") is imported
from another module of the package, so that what modules share lives in
modules made for sharing it. Nothing is imported to check this."""
import ast
import os

PKG_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fp8kit")
PKG = "fp8kit"


def _modules():
    return sorted(f[:-3] for f in os.listdir(PKG_DIR) if f.endswith(".py"))


def _imports(name):
    """[(module imported, names taken from it, line)] of package module `name`
    ('__init__' for the package itself), anywhere in its source."""
    path = os.path.join(PKG_DIR, name + ".py")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    mods = set(_modules())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0:
                if node.module == PKG or (node.module or "").startswith(PKG + "."):
                    base = node.module[len(PKG) + 1:] if node.module != PKG else ""
                else:
                    continue
            elif node.level == 1:
                base = node.module or ""
            else:  # pragma: no cover - the package has no subpackages
                raise AssertionError("%s.py:%d: relative import above the package" % (name, node.lineno))
            if base:
                out.append((base.split(".")[0], [a.name for a in node.names], node.lineno))
            else:  # from . import _gemm, torch_ops: each a module
                for a in node.names:
                    if a.name in mods:
                        out.append((a.name, [], node.lineno))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith(PKG + "."):
                    out.append((a.name.split(".")[1], [], node.lineno))
    return out


def _graph():
    mods = _modules()
    return {m: sorted({dep for dep, _, _ in _imports(m) if dep in mods and dep != m}) for m in mods}


def _cycle(graph):
    """One cycle of graph as a list of modules, or None."""
    state = {}

    def visit(m, path):
        state[m] = 1
        path.append(m)
        for d in graph[m]:
            if state.get(d) == 1:
                return path[path.index(d):] + [d]
            if d not in state:
                found = visit(d, path)
                if found:
                    return found
        path.pop()
        state[m] = 2
        return None

    for m in graph:
        if m not in state:
            found = visit(m, [])
            if found:
                return found
    return None


def test_the_checker_sees_a_cycle():
    assert _cycle({"a": ["b"], "b": ["c"], "c": ["a"]}) == ["a", "b", "c", "a"]
    assert _cycle({"a": ["b"], "b": ["c"], "c": []}) is None


def test_the_parser_sees_every_kind_of_import():
    g = _graph()
    assert "_lib" in g["errors"]  # from ._lib import Status
    assert "_lib" in g["__init__"]  # from . import _lib


def test_no_import_cycle_among_the_package_modules():
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_private_name_is_imported_across_modules():
    mods = set(_modules())
    bad = []
    for m in sorted(mods):
        for dep, names, line in _imports(m):
            if dep not in mods:
                continue
            bad.extend("%s.py:%d takes %s from %s" % (m, line, n, dep) for n in names
                       if n.startswith("_") and not n.startswith("__") and n not in mods)
    assert not bad, "\n".join(bad)
