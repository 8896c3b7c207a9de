"""The tree tells the loop: rooms in layers, no import circles, no room importing one above it.

The layers below are the README's architecture picture read bottom-up. A module may import its own
room and any room in a lower layer, never a room in its own layer or above (a sibling import would
make two rooms one). Every import counts: module level, inside a function, or under TYPE_CHECKING.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("pipeline", "fetchers", "jobs", "crawlfleet")

# Lowest first. A room is a top-level package (fetchers, jobs), a sub-package of pipeline, a module at
# pipeline's root, or a sub-package of pipeline/harness (the bench, fault and testbed harness).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("pipeline.settings", "pipeline.urls"),  # the vocabulary: what the user set, what a URL is
    ("pipeline.dns",),
    ("fetchers",),  # the fetch node's own room; its records are the loop's messages
    ("pipeline.storage", "pipeline.dispatch", "pipeline.observe"),
    ("pipeline.links", "pipeline.frontier", "pipeline.report"),
    ("pipeline.plugins",),  # extraction plugins: run wherever pages are parsed, on both scales
    ("jobs", "pipeline.export"),
    ("pipeline.crawl",),
    ("pipeline.embedded",),
    ("pipeline.transport",),
    ("pipeline.harness.testbed",),
    ("pipeline.harness.faults",),
    ("pipeline.harness.demo", "pipeline.harness.bench"),
    ("pipeline.cli", "crawlfleet"),  # the command; the Python API (a facade over every room)
)
LEVEL = {room: i for i, layer in enumerate(LAYERS) for room in layer}
ROOT_MODULES = {"__init__.py", "urls.py", "cli.py"}


def _modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            mods[name.removesuffix(".__init__")] = path
    return mods


def room_of(module: str) -> str:
    parts = module.split(".")
    if parts[0] != "pipeline":
        return parts[0]
    if len(parts) >= 3 and parts[1] == "harness":
        return ".".join(parts[:3])
    return ".".join(parts[:2]) if len(parts) >= 2 else "pipeline"


def _imports(module: str, path: Path, mods: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """(imported project module, line) for every import in ``path``, resolved to a known module."""
    is_pkg = path.name == "__init__.py"
    pkg = module if is_pkg else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in mods:
                target = target.rpartition(".")[0]
            if target and target != module and not module.startswith(target + "."):
                yield target, node.lineno
                break


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {m: {t for t, _ in _imports(m, p, mods)} for m, p in mods.items()}


def find_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
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
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_find_cycles_sees_a_circle() -> None:
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles() -> None:
    assert find_cycles(_graph()) == []


def test_every_room_has_a_layer() -> None:
    rooms = {room_of(m) for m in _modules()} - {"pipeline", "pipeline.harness"}
    assert sorted(rooms - set(LEVEL)) == [], "a new room: give it a layer in LAYERS and the README picture"


def test_no_room_imports_its_own_layer_or_above() -> None:
    mods = _modules()
    bad = []
    for module, path in mods.items():
        here = room_of(module)
        if here not in LEVEL:
            continue
        for target, line in _imports(module, path, mods):
            there = room_of(target)
            if there != here and there in LEVEL and LEVEL[there] >= LEVEL[here]:
                bad.append(f"{path.relative_to(ROOT)}:{line} {here} imports {there}")
    assert bad == []


# The fleet's room is regrouped by role (pipeline/transport/__init__.py): the same rule inside it, lowest first.
TRANSPORT = "pipeline.transport"
TRANSPORT_LAYERS: tuple[tuple[str, ...], ...] = (("wire",), ("node", "links"), ("dispatcher",), ("cli",))
TRANSPORT_LEVEL = {part: i for i, layer in enumerate(TRANSPORT_LAYERS) for part in layer}


def _transport_part(module: str) -> str | None:
    """``wire``, ``node``, ``links``, ``dispatcher`` or ``cli`` for a module of the fleet's room, else None."""
    parts = module.split(".")
    return parts[2] if module.startswith(TRANSPORT + ".") and len(parts) >= 3 else None


def test_every_module_of_the_fleet_sits_in_a_role() -> None:
    found = {part for m in _modules() if (part := _transport_part(m)) is not None}
    assert sorted(found - set(TRANSPORT_LEVEL)) == [], "a new part of pipeline/transport: give it a layer"


def test_no_part_of_the_fleet_imports_its_own_layer_or_above() -> None:
    mods = _modules()
    bad = []
    for module, path in mods.items():
        here = _transport_part(module)
        if here is None:
            continue
        for target, line in _imports(module, path, mods):
            there = _transport_part(target)
            if there is not None and there != here and TRANSPORT_LEVEL[there] >= TRANSPORT_LEVEL[here]:
                bad.append(f"{path.relative_to(ROOT)}:{line} {here} imports {there}")
    assert bad == []


def test_pipeline_root_holds_only_the_vocabulary_and_the_command() -> None:
    assert {p.name for p in (ROOT / "pipeline").glob("*.py")} == ROOT_MODULES


@pytest.mark.parametrize("room", sorted(r for r in LEVEL if (ROOT / r.replace(".", "/") / "__init__.py").exists()))
def test_each_room_says_what_it_owns_and_may_import(room: str) -> None:
    init = ROOT / room.replace(".", "/") / "__init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text())) or ""
    assert "May import:" in doc, f"{init.relative_to(ROOT)}: docstring lacks 'May import:'"


def test_the_testbed_imports_nothing_of_the_crawl() -> None:
    """The testbed judges every crawl; sharing the crawl's URL or HTML code would let it share a bug."""
    mods = _modules()
    bad = [
        f"{mods[m].relative_to(ROOT)} imports {t}"
        for m in mods
        if room_of(m) == "pipeline.harness.testbed"
        for t, _ in _imports(m, mods[m], mods)
        if room_of(t) != "pipeline.harness.testbed"
    ]
    assert bad == []


@pytest.mark.parametrize("module", ["pipeline.harness.faults.procs", "pipeline.harness.faults.results"])
def test_paths_computed_from_a_module_still_reach_the_repository(module: str) -> None:
    """A module that finds the repository from its own location must be fixed when it moves room."""
    import importlib

    root = importlib.import_module(module).ROOT
    assert (root / "pyproject.toml").exists() and (root / "scripts").is_dir(), root


def test_test_files_have_unique_basenames() -> None:
    # pytest imports test modules by basename (rootdir-relative packages are not used here): two files
    # of one name in different tiers stop the whole collection.
    names: dict[str, list[str]] = {}
    for path in (ROOT / "tests").rglob("test_*.py"):
        names.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert {n: ps for n, ps in names.items() if len(ps) > 1} == {}
