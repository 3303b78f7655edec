"""Layers only look down (issue 29; README, "Code layout"): the package's import graph, read from the source with `ast`,
has no cycle, and no module imports a module of a higher layer.

Every import counts, at module level or inside a function (a lazy import that dodges a cycle is still a cycle), except
those under `if TYPE_CHECKING:`, which never run. Importing `planner.a.b` first runs `planner/a/__init__.py`, so the
imports of the packages above an imported module count as the importer's too (the root package's lazy front door
excepted: it imports nothing until an attribute is asked for)."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = "planner"

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # Vocabulary that documents and logic both use: typed errors and input limits, the CLI's choice enums, safe file
    # writing, the paper's units of time and usual values, the registry of parallel dimensions (names, ranges,
    # divisibility rules), bounded stores of recent results. Imports nothing above itself.
    ("base", ("planner.errors", "planner.choices", "planner.files", "planner.paper", "planner.derived",
              "planner.recent", "planner.parallel.dimensions")),
    # Every pydantic model of a file read or a document written, and the types those models need (a workload's
    # operations). Imports only the base.
    ("documents", ("planner.schema",)),
    # Reading the data files into documents: --set overrides, sourced TOML values, hardware, profiles, failure model
    # (and the goodput that prices it), the facility file (and the money and power of a cluster, planner.economics),
    # the step-time model's measured error (planner.uncertainty), the direction each estimated input moves every
    # layout (planner.monotone).
    ("loaders", ("planner.overrides", "planner.sourced", "planner.profile", "planner.hardware", "planner.hardware_keys",
                 "planner.hardware_listing",
                 "planner.goodput", "planner.economics", "planner.uncertainty", "planner.monotone")),
    ("workload", ("planner.workload",)),  # shapes from scaling laws and presets
    ("parallel", ("planner.parallel",)),  # the search space (below cost: the cost model walks its degree tuples)
    ("cost", ("planner.cost",)),  # the cost model, one function per paper equation
    ("search", ("planner.search",)),  # CP-SAT and the exhaustive enumerator over the cost model's tables
    # Services, bottom to top; a service calls only the ones below it.
    ("analyses", ("planner.explain", "planner.export", "planner.limits", "planner.reference")),
    ("plan", ("planner.api",)),  # plan and evaluate
    ("studies", ("planner.sweep", "planner.sensitivity", "planner.validation", "planner.compare",
                 "planner.confidence", "planner.study", "planner.workers")),  # many plans
    ("render", ("planner.render",)),
    ("cli", ("planner.cli", "planner.fastpath", "planner.fasthelp", "planner.helptext", "planner.fasttable")),
    # fastpath: the `planner` script, before typer; fasthelp (and its generated helptext) and fasttable: `planner
    # --help` and `hardware list` drawn without typer or rich
    ("front door", (ROOT,)),  # `planner.plan` and `planner.evaluate`, loaded on first use
)


def layer_of(module: str, layers: Iterable[tuple[str, tuple[str, ...]]] = LAYERS) -> tuple[int, str] | None:
    """(index, name) of the layer whose most specific prefix names `module` (a prefix names itself and the modules
    under it; the root only itself); None when no layer does."""
    best: tuple[int, int, str] | None = None
    for index, (name, prefixes) in enumerate(layers):
        for prefix in prefixes:
            if module == prefix or (prefix != ROOT and module.startswith(prefix + ".")):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), index, name)
    return None if best is None else (best[1], best[2])


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST) -> Iterable[ast.Import | ast.ImportFrom]:
    """Every import statement that can run: module level, in functions and classes; not an `if TYPE_CHECKING:`
    body (its `else:` runs)."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        if isinstance(node, ast.If) and _type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _known(name: str, modules: Mapping[str, object]) -> str | None:
    """The longest prefix of dotted `name` that is a module of the package."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def direct_imports(module: str, source: str, is_package: bool, modules: Mapping[str, object]) -> set[str]:
    """The package's modules that `module`'s own source imports."""
    out: set[str] = set()
    package = module if is_package else module.rpartition(".")[0]
    for node in _imports(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1])
                origin = f"{base}.{node.module}" if node.module else base
            else:
                origin = node.module or ""
            targets = [f"{origin}.{a.name}" if f"{origin}.{a.name}" in modules else origin for a in node.names]
        for target in targets:
            if target == ROOT or target.startswith(ROOT + "."):
                hit = _known(target, modules)
                if hit is not None and hit != module:
                    out.add(hit)
    return out


def import_graph(files: Mapping[str, tuple[str, bool]]) -> dict[str, set[str]]:
    """module -> the modules importing it runs, from {module: (source, is_package)}: its own imports, plus the
    imports of every package (the root excepted) above a module it imports."""
    direct = {m: direct_imports(m, src, pkg, files) for m, (src, pkg) in files.items()}
    graph: dict[str, set[str]] = {}
    for m, targets in direct.items():
        edges = set(targets)
        for t in targets:
            parent = t.rpartition(".")[0]
            while parent and parent != ROOT:
                if files.get(parent, ("", False))[1]:
                    edges |= direct[parent]
                parent = parent.rpartition(".")[0]
        edges.discard(m)
        graph[m] = edges
    return graph


def package_files(root: Path) -> dict[str, tuple[str, bool]]:
    """{module: (source, is_package)} for every .py file under the package directory `root`."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path.read_text(encoding="utf-8"), is_package)
    return out


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Each strongly connected group of two or more modules (Tarjan), as one cycle through it, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        # Iterative DFS: (node, iterator over its successors).
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            nxt = next(successors, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    group.add(w)
                    if w == node:
                        break
                if len(group) > 1:
                    groups.append(group)
    return [_cycle_through(graph, group) for group in groups]


def _cycle_through(graph: Mapping[str, set[str]], group: set[str]) -> list[str]:
    """One import cycle inside a strongly connected `group`, starting at its first module: [a, b, ..., a]."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:  # breadth first: the shortest way back to the start
        nxt = []
        for node in frontier:
            for succ in sorted(graph[node] & group):
                if succ == start:
                    return paths[node] + [start]
                if succ not in paths:
                    paths[succ] = paths[node] + [succ]
                    nxt.append(succ)
        frontier = nxt
    raise AssertionError(f"no cycle in the strongly connected group {sorted(group)}")


def upward_imports(graph: Mapping[str, set[str]], layers=LAYERS) -> list[str]:
    """Each import of a higher layer, in words."""
    out = []
    for m in sorted(graph):
        mine = layer_of(m, layers)
        for t in sorted(graph[m]):
            theirs = layer_of(t, layers)
            if mine is not None and theirs is not None and theirs[0] > mine[0]:
                out.append(f"{m} (layer {mine[1]}) imports {t} (layer {theirs[1]}, above it)")
    return out


# --------------------------------------------------------------------------------------------------
# The package
# --------------------------------------------------------------------------------------------------

PACKAGE = Path(__file__).resolve().parent.parent / ROOT


@functools.cache
def _package() -> tuple[dict[str, tuple[str, bool]], dict[str, set[str]]]:
    """The package's files and import graph, read once for every test here."""
    files = package_files(PACKAGE)
    return files, import_graph(files)


def test_every_module_has_a_layer():
    files, _ = _package()
    assert len(files) > 40  # the whole package was read
    lost = [m for m in files if layer_of(m) is None]
    assert not lost, f"modules in no layer: {lost}; add each to LAYERS in tests/test_layers.py and to the README"


def test_the_package_has_no_import_cycle():
    found = cycles(_package()[1])
    assert not found, "import cycles: " + "; ".join(" -> ".join(c) for c in found)


def test_no_module_imports_a_higher_layer():
    found = upward_imports(_package()[1])
    assert not found, "upward imports:\n" + "\n".join(found)


def test_documents_import_only_the_base():
    """The documents layer holds data: it imports nothing but the base (and pydantic, numpy, the standard library)."""
    graph = _package()[1]
    docs = [m for m in graph if layer_of(m) == (1, "documents")]
    assert "planner.schema" in docs and "planner.schema.profile" in docs
    bad = {m: sorted(t for t in graph[m] if layer_of(t) not in ((0, "base"), (1, "documents"))) for m in docs}
    assert not any(bad.values()), bad


# --------------------------------------------------------------------------------------------------
# The checks themselves, on small made-up packages whose answers are read off by hand
# --------------------------------------------------------------------------------------------------

TOY_LAYERS = (("low", ("planner.low",)), ("high", ("planner.high",)), ("front door", (ROOT,)))


def test_a_lazy_import_cycle_is_found_and_named():
    files = {
        "planner": ("", True),
        "planner.low": ("def f():\n    from planner.high import g\n", False),
        "planner.high": ("from planner.low import f\n", False),
    }
    graph = import_graph(files)
    assert graph == {"planner": set(), "planner.low": {"planner.high"}, "planner.high": {"planner.low"}}
    assert cycles(graph) == [["planner.high", "planner.low", "planner.high"]]
    assert upward_imports(graph, TOY_LAYERS) == [
        "planner.low (layer low) imports planner.high (layer high, above it)"]


def test_type_checking_imports_are_left_out_but_their_else_counts():
    files = {
        "planner": ("", True),
        "planner.low": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from planner.high import g\n", False),
        "planner.high": ("import typing\nif typing.TYPE_CHECKING:\n    pass\nelse:\n    from planner import low\n",
                         False),
    }
    graph = import_graph(files)
    assert graph["planner.low"] == set() and graph["planner.high"] == {"planner.low"}
    assert cycles(graph) == [] and upward_imports(graph, TOY_LAYERS) == []


def test_a_package_init_runs_with_its_modules():
    """Importing planner.high.x from planner.low runs planner/high/__init__.py; what that imports counts."""
    files = {
        "planner": ("", True),
        "planner.high": ("from .y import z\n", True),
        "planner.high.x": ("", False),
        "planner.high.y": ("from ..low import a\n", False),
        "planner.low": ("import planner.high.x\n", False),
    }
    graph = import_graph(files)
    assert graph["planner.low"] == {"planner.high.x", "planner.high.y"}
    assert graph["planner.high.y"] == {"planner.low"}
    assert cycles(graph) == [["planner.high.y", "planner.low", "planner.high.y"]]
    assert layer_of("planner.high.y", TOY_LAYERS) == (1, "high") and layer_of("planner.other", TOY_LAYERS) is None
    assert layer_of(ROOT, TOY_LAYERS) == (2, "front door")


def test_the_longest_prefix_decides_the_layer():
    assert layer_of("planner.parallel.dimensions") == (0, "base")
    assert layer_of("planner.parallel.space")[1] == "parallel"  # type: ignore[index]
    assert layer_of("planner.schema.ops") == (1, "documents")


def test_every_pydantic_model_is_a_document():
    """A pydantic model is the shape of a file read or a document written: it lives in the documents layer, where
    every layer can import it (STYLE.md, "House habits")."""
    outside = []
    for m, (src, _) in _package()[0].items():
        if layer_of(m) == (1, "documents"):
            continue
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.ClassDef) and any(ast.unparse(b).split(".")[-1] == "BaseModel" for b in node.bases):
                outside.append(f"{m}.{node.name}")
            if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == "create_model":
                outside.append(f"{m}: create_model")
    assert not outside, f"pydantic models outside the documents layer: {outside}"


def test_the_readme_lists_the_same_layers():
    """README.md's "Code layout" table mirrors LAYERS, bottom to top (the package root aside)."""
    text = (PACKAGE.parent / "README.md").read_text(encoding="utf-8")
    section = text.split("## Code layout", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1].strip() for line in section.splitlines()
            if line.startswith("| ") and not line.startswith("| layer ")]
    assert rows == [name for name, _ in LAYERS if name != "front door"]

